#!/usr/bin/env python3
"""perf/db_report.py RAW_DIR OUT_JSON

Reads what perf/run-db-bench.sh measured (RAW_DIR/results.txt: "key value"
lines; RAW_DIR/env.txt), prints the table of RDMA and TCP figures with their
ratio, writes the same to OUT_JSON and draws the ratios as OUT_JSON with .png
(gnuplot). A figure that was not measured is shown as missing. Exit status 0
once the report is written, whatever the figures say.
"""
import json
import os
import subprocess
import sys

# (key, label, unit, what is better, target on RDMA/TCP or None)
# "higher": more is better (tps, MB/s); "lower": less is better (ms, CPU).
FIGURES = [
    ("select_1.{}.tps", "pgbench -S, 1 client", "tps", "higher", ">= 1.0"),
    ("select_1.{}.latency_ms", "pgbench -S, 1 client: latency", "ms", "lower", None),
    ("select_8.{}.tps", "pgbench -S, 8 clients", "tps", "higher", ">= 1.0"),
    ("tpcb_8.{}.tps", "TPC-B-like, 8 clients", "tps", "higher", None),
    ("connect_1.{}.connection_ms", "pgbench -S -C: connection setup", "ms", "lower", "<= 3.0"),
    ("connect_1.{}.tps", "pgbench -S -C, 1 client", "tps", "higher", None),
    ("copy_out.{}.mb_per_s", "COPY out", "MB/s", "higher", None),
    ("copy_in.{}.mb_per_s", "COPY in", "MB/s", "higher", None),
    ("pg_dump.{}.mb_per_s", "pg_dump", "MB/s", "higher", None),
    ("pg_basebackup.{}.mb_per_s", "pg_basebackup", "MB/s", "higher", None),
    ("copy_out.{}.client_cpu_ms_per_mb", "client CPU, COPY out", "ms/MB", "lower", "<= 1.0"),
    ("copy_out.{}.server_cpu_ms_per_mb", "server CPU, COPY out", "ms/MB", "lower", None),
    ("select_1.{}.client_cpu_us_per_tx", "client CPU, pgbench -S", "us/tx", "lower", None),
    ("select_1.{}.server_cpu_us_per_tx", "server CPU, pgbench -S", "us/tx", "lower", None),
]
BULK = ["copy_out", "copy_in", "pg_dump", "pg_basebackup"]


def read_pairs(path, sep=None):
    values = {}
    if not os.path.exists(path):
        return values
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            key, _, value = line.partition(sep) if sep else line.partition(" ")
            values[key] = value
    return values


def number(values, key):
    try:
        return float(values[key])
    except (KeyError, ValueError):
        return None


def meets(ratio, target):
    if ratio is None or target is None:
        return None
    op, bound = target.split()
    return ratio >= float(bound) if op == ">=" else ratio <= float(bound)


def build(raw):
    values = read_pairs(os.path.join(raw, "results.txt"))
    env = read_pairs(os.path.join(raw, "env.txt"), "=")
    ceiling = number(values, "ib_write_bw.mb_per_s")
    rows = []
    for key, label, unit, better, target in FIGURES:
        rdma, tcp = number(values, key.format("rdma")), number(values, key.format("tcp"))
        ratio = rdma / tcp if rdma is not None and tcp else None
        row = {"figure": label, "unit": unit, "better": better, "rdma": rdma, "tcp": tcp,
               "rdma_over_tcp": ratio, "target": target, "meets_target": meets(ratio, target)}
        name = key.split(".")[0]
        if name in BULK and unit == "MB/s" and ceiling:
            row["rdma_fraction_of_ib_write_bw"] = rdma / ceiling if rdma is not None else None
        rows.append(row)
    return {"benchmark": "db", "env": env, "ib_write_bw_mb_per_s": ceiling,
            "cluster_mb": number(values, "cluster_mb"), "figures": rows}


def fmt(x, digits=2):
    return "missing" if x is None else f"{x:.{digits}f}"


def print_table(report):
    print()
    print(f"PostgreSQL 15 over pg_rdma vs TCP, same server and address ({report['env'].get('device', '?')}, "
          f"one guest run; ib_write_bw 1 MiB = {fmt(report['ib_write_bw_mb_per_s'], 1)} MB/s)")
    head = f"{'figure':36} {'unit':6} {'rdma':>10} {'tcp':>10} {'rdma/tcp':>9} {'target':>8} {'of ib_bw':>9}"
    print(head)
    print("-" * len(head))
    for r in report["figures"]:
        verdict = {True: " ok", False: " MISS", None: ""}[r["meets_target"]]
        fraction = r.get("rdma_fraction_of_ib_write_bw")
        print(f"{r['figure']:36} {r['unit']:6} {fmt(r['rdma']):>10} {fmt(r['tcp']):>10} "
              f"{fmt(r['rdma_over_tcp']):>9} {(r['target'] or ''):>8} "
              f"{(fmt(fraction) if fraction is not None else ''):>9}{verdict}")
    failed = report["env"].get("failed", "")
    if failed:
        print(f"not measured: {failed}")
    print("rdma/tcp: above 1 is RDMA's gain for tps and MB/s, its loss for ms and CPU.")


def draw(report, png):
    """Bar chart of RDMA/TCP per figure, with the parity line."""
    rows = [r for r in report["figures"] if r["rdma_over_tcp"] is not None]
    if not rows:
        return False
    data = png[:-4] + ".dat"
    with open(data, "w") as f:
        for r in rows:
            label = f"{r['figure']} ({r['unit']})".replace('"', "'")
            ratio = r["rdma_over_tcp"]
            rdma_better = ratio >= 1 if r["better"] == "higher" else ratio <= 1
            color = "0x2E8B57" if rdma_better else "0xC0392B"  # green: RDMA better; red: TCP better
            f.write(f"\"{label}\" {ratio:.4f} {color}\n")
    script = f"""
set terminal pngcairo size 1300,720 font ",10"
set output "{png}"
set title "pg_rdma: RDMA / TCP, same PostgreSQL 15 server (Soft-RoCE guest)\\ngreen: RDMA better (ratio >1 for tps and MB/s, <1 for ms and CPU); red: TCP better" noenhanced
set style fill solid 0.7
set boxwidth 0.7
set grid ytics
set yrange [0:*]
set xtics rotate by -35 left noenhanced
set ylabel "RDMA / TCP"
set bmargin 12
set rmargin 18
set arrow from graph 0, first 1 to graph 1, first 1 nohead dashtype 2 lw 2
plot "{data}" using 0:2:3:xtic(1) with boxes lc rgb variable notitle, \\
     "" using 0:2:(sprintf("%.2f", $2)) with labels offset 0,0.7 notitle
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"db_report: no chart ({e})", file=sys.stderr)
        return False
    return True


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    raw, out_json = sys.argv[1], sys.argv[2]
    report = build(raw)
    png = out_json[:-5] + ".png" if out_json.endswith(".json") else out_json + ".png"
    if draw(report, png):
        report["chart"] = png
    print_table(report)
    with open(out_json, "w") as f:
        json.dump(report, f, indent=2)
    if "chart" in report:
        print(f"chart: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
