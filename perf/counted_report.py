#!/usr/bin/env python3
"""The report of a counted transport run (perf/run-transport-bench.sh with
PG_RDMA_BENCH_COUNTED=1, scripts/bench transport --counted).

usage: counted_report.py RAW_DIR OUT_JSON

The guest's clock counts instructions (qemu -icount, one vCPU): a
"microsecond" below is a thousand instructions of everything the guest ran
for it, both ends' code, their kernels, and rxe's own work, which a NIC
would do instead. The figures repeat from run to run (perf/spread.py shows
how closely), so a change of ours is judged by them; they are not a
forecast of a real NIC's latency. TCP's ratios are printed for context
only: over rxe, RDMA pays in instructions the transfers a NIC does in
hardware (packets, ICRC), and TCP does not.

Targets (display only, as report.py's), against the sleeping references:
  ours p50 at most 1.3 x ib_send_lat -e's typical (raw verbs woken by a
    completion event per message, ours' mechanism; ib_write_lat busy-polls,
    which on one CPU measures the scheduler's tick);
  ours p50 at most rsocket's (the same loop timing both, rpoll sleeping);
  bandwidth at least 0.9 x ib_write_bw's;
  CPU per message at each end at most rsocket's.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ratio_chart  # noqa: E402
from report import (BW_SIZES, LAT_SIZES, bench_line, field, key_values, num, pairs_row,  # noqa: E402
                    parse_ours_bandwidth, parse_ours_latency, parse_perftest_bw,
                    parse_perftest_lat, ratio, read_env, read_lines, round_dirs, size_label, verdict)

TARGET_LAT_VS_IB = 1.30
TARGET_BW_VS_IB = 0.90

# tool key -> (log name, parser); one round in a counted run
LAT_TOOLS = {"ours": ("ours-lat", parse_ours_latency), "tcp": ("tcp-lat", parse_ours_latency),
             "rsocket": ("rsocket-lat", parse_ours_latency),
             "ib_send_lat_e": ("ib_send_lat_e", parse_perftest_lat)}
BW_TOOLS = {"ours": ("ours-bw", parse_ours_bandwidth), "tcp": ("tcp-bw", parse_ours_bandwidth),
            "rsocket": ("rsocket-bw", parse_ours_bandwidth),
            "ib_write_bw": ("ib_write_bw", parse_perftest_bw),
            "ib_send_bw_e": ("ib_send_bw_e", parse_perftest_bw)}


def client_cpu(lines, word):
    """(cpu_us, messages) of the measured phases, from the client's result
    line ('latency ... iters=N ... cpu_us=X', 'bandwidth ... messages=N
    ... cpu_us=X'); None from a build without cpu_us."""
    kv = bench_line(lines, word)
    try:
        return float(kv["cpu_us"]), int(kv["iters" if word == "latency" else "messages"])
    except (TypeError, KeyError, ValueError):
        return None


def server_cpu(lines):
    """(cpu_us, messages) of the phases the server served past the first of
    each size (the warm-up, which the client leaves out too): 'served KIND
    size=S count=N cpu_us=X' lines."""
    seen, cpu, count = set(), 0.0, 0
    for line in lines:
        if line.startswith("served "):
            kv = key_values(line)
            try:
                key = (line.split()[1], kv["size"])
                phase_cpu, phase_count = float(kv["cpu_us"]), int(kv["count"])
            except (IndexError, KeyError, ValueError):
                return None
            if key not in seen:
                seen.add(key)
                continue
            cpu += phase_cpu
            count += phase_count
    return (cpu, count) if count else None


def per_end(rd, log_name, size, word):
    """Counted CPU microseconds per message (a round trip, or a message
    streamed) at the client and at the server, over the measured phases
    alone: process start, RDMA setup and the warm-up are left out."""
    out = {}
    for side, read in (("client", lambda lines: client_cpu(lines, word)), ("server", server_cpu)):
        got = read(read_lines(os.path.join(rd, "%s-%d.%s.log" % (log_name, size, side))))
        out[side] = round(got[0] / got[1], 3) if got and got[1] else None
    return out


def latency_row(rd, size):
    row = {"size": size}
    for tool, (log, parse) in LAT_TOOLS.items():
        row[tool] = parse(read_lines(os.path.join(rd, "%s-%d.client.log" % (log, size))), size)
        if tool != "ib_send_lat_e":
            row[tool + "_cpu_us_per_round_trip"] = per_end(rd, log, size, "latency")
    ib = field(row["ib_send_lat_e"], "typical_us")
    p50 = field(row["ours"], "p50_us")
    row["ratios"] = {"ours_p50_over_ib_send_lat_e": ratio(p50, ib),
                     "ours_p50_over_rsocket_p50": ratio(p50, field(row["rsocket"], "p50_us")),
                     "ours_p50_over_tcp_p50": ratio(p50, field(row["tcp"], "p50_us"))}
    for side in ("client", "server"):
        row["ratios"]["ours_cpu_over_rsocket_cpu_" + side] = ratio(
            row["ours_cpu_us_per_round_trip"][side], row["rsocket_cpu_us_per_round_trip"][side])
    row["targets"] = {
        "p50_at_most_1.3x_ib_send_lat_e": verdict(row["ratios"]["ours_p50_over_ib_send_lat_e"], TARGET_LAT_VS_IB, "le"),
        "p50_at_most_rsocket": verdict(row["ratios"]["ours_p50_over_rsocket_p50"], 1.0, "le")}
    return row


def bandwidth_row(rd, size):
    row = {"size": size}
    for tool, (log, parse) in BW_TOOLS.items():
        row[tool] = parse(read_lines(os.path.join(rd, "%s-%d.client.log" % (log, size))), size)
    for tool in ("ours", "rsocket", "tcp"):
        row[tool + "_cpu_us_per_message"] = per_end(rd, BW_TOOLS[tool][0], size, "bandwidth")
    mibps = {t: field(row[t], "MiBps") for t in BW_TOOLS}
    row["ratios"] = {"ours_over_ib_write_bw": ratio(mibps["ours"], mibps["ib_write_bw"]),
                     "ours_over_rsocket": ratio(mibps["ours"], mibps["rsocket"]),
                     "ours_over_tcp": ratio(mibps["ours"], mibps["tcp"])}
    for side, role in (("client", "sender"), ("server", "receiver")):
        row["ratios"]["ours_cpu_over_rsocket_cpu_" + role] = ratio(
            row["ours_cpu_us_per_message"][side], row["rsocket_cpu_us_per_message"][side])
    row["targets"] = {"at_least_0.9x_ib_write_bw": verdict(row["ratios"]["ours_over_ib_write_bw"], TARGET_BW_VS_IB, "ge"),
                      "at_least_rsocket": verdict(row["ratios"]["ours_over_rsocket"], 1.0, "ge")}
    return row


def mark(row, name):
    v = row["targets"].get(name)
    return "" if v is None else (" ok" if v == "met" else " MISS")


def table(title, header, rows):
    print("\n" + title)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for r in [header] + rows:
        print("  " + "  ".join(str(x).rjust(w) for x, w in zip(r, widths)))


def cpu_cell(d, side):
    return num(d[side]) if d[side] is not None else "-"


def print_report(lat, bw, pairs):
    table("One-way latency p50, counted us (1 us = 1,000 instructions of the whole guest; ours avg: its"
          " waits that slept)",
          ["size", "ours", "ours avg", "rsocket", "ib_send_lat -e", "tcp", "ours/ib -e", "ours/rsocket", "ours/tcp"],
          [[size_label(r["size"]), num(field(r["ours"], "p50_us")), num(field(r["ours"], "avg_us")),
            num(field(r["rsocket"], "p50_us")),
            num(field(r["ib_send_lat_e"], "typical_us")), num(field(r["tcp"], "p50_us")),
            num(r["ratios"]["ours_p50_over_ib_send_lat_e"]) + mark(r, "p50_at_most_1.3x_ib_send_lat_e"),
            num(r["ratios"]["ours_p50_over_rsocket_p50"]) + mark(r, "p50_at_most_rsocket"),
            num(r["ratios"]["ours_p50_over_tcp_p50"])] for r in lat])
    table("CPU per round trip at each end, counted us (measured phases only; target: ours at most rsocket's)",
          ["size", "ours client", "ours server", "rsocket client", "rsocket server", "tcp client",
           "tcp server", "ours/rsocket c", "ours/rsocket s"],
          [[size_label(r["size"])] +
           [cpu_cell(r[t + "_cpu_us_per_round_trip"], s) for t in ("ours", "rsocket", "tcp") for s in ("client", "server")] +
           [num(r["ratios"]["ours_cpu_over_rsocket_cpu_client"]), num(r["ratios"]["ours_cpu_over_rsocket_cpu_server"])]
           for r in lat])
    table("Bandwidth, counted MiB/s (targets: ours >= 0.9 x ib_write_bw; ours >= rsocket)",
          ["size", "ours", "rsocket", "ib_write_bw", "ib_send_bw -e", "tcp", "ours/ib_write_bw", "ours/rsocket", "ours/tcp"],
          [[size_label(r["size"])] + [num(field(r[t], "MiBps")) for t in ("ours", "rsocket", "ib_write_bw", "ib_send_bw_e", "tcp")] +
           [num(r["ratios"]["ours_over_ib_write_bw"]) + mark(r, "at_least_0.9x_ib_write_bw"),
            num(r["ratios"]["ours_over_rsocket"]) + mark(r, "at_least_rsocket"), num(r["ratios"]["ours_over_tcp"])]
           for r in bw])
    table("CPU per message at each end of a bandwidth run, counted us (measured phases only)",
          ["size", "ours sender", "ours receiver", "rsocket sender", "rsocket receiver", "tcp sender", "tcp receiver",
           "ours/rsocket s", "ours/rsocket r"],
          [[size_label(r["size"])] + [cpu_cell(r[t + "_cpu_us_per_message"], s)
                                      for t in ("ours", "rsocket", "tcp") for s in ("client", "server")] +
           [num(r["ratios"]["ours_cpu_over_rsocket_cpu_sender"]), num(r["ratios"]["ours_cpu_over_rsocket_cpu_receiver"])]
           for r in bw])
    if pairs:
        rates = {t: field(pairs.get(t), "round_trips_per_s") for t in ("ours", "tcp", "ib_send_lat_events")}
        table("%d request/response pairs at once, %d B: round trips per counted second" % (pairs["pairs"], pairs["size"]),
              ["ours", "tcp", "ib_send_lat -e", "ours/tcp", "ours/ib -e"],
              [[num(rates["ours"]), num(rates["tcp"]), num(rates["ib_send_lat_events"]),
                num(pairs["ratios"]["ours_over_tcp"]), num(pairs["ratios"]["ours_over_ib_send_lat_events"])]])


def chart(lat, bw, png):
    bars = []
    for r in lat:
        v = r["ratios"]["ours_p50_over_ib_send_lat_e"]
        if v is not None:
            bars.append(("p50 %s / ib_send_lat -e" % size_label(r["size"]), v, v <= TARGET_LAT_VS_IB))
    for r in bw:
        v = r["ratios"]["ours_over_ib_write_bw"]
        if v is not None:
            bars.append(("bw %s / ib_write_bw" % size_label(r["size"]), v, v >= TARGET_BW_VS_IB))
    return ratio_chart.draw(bars, png, "pg_rdma, counted guest (instructions as time)", "ratio")


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    raw, out_json = argv[1], argv[2]
    env = read_env(raw)
    rounds = round_dirs(raw)
    if not rounds:
        print("counted_report: no round in %s" % raw, file=sys.stderr)
        return 1
    rd = rounds[0]
    lat = [latency_row(rd, s) for s in LAT_SIZES]
    bw = [bandwidth_row(rd, s) for s in BW_SIZES]
    pairs = pairs_row(rounds[:1], env)
    report = {"benchmark": "transport", "mode": "counted", "environment": env,
              "units": {"latency": "counted microseconds (1,000 guest instructions), one-way",
                        "bandwidth": "MiB per counted second", "cpu": "counted microseconds"},
              "note": "deterministic: the guest's clock counts instructions; rxe's work counts as "
                      "the guest's, so ratios against TCP are not a NIC's",
              "latency": lat, "bandwidth": bw, "request_response_pairs": pairs,
              "raw_logs": os.path.abspath(raw)}
    png = out_json[:-5] + ".png" if out_json.endswith(".json") else out_json + ".png"
    if chart(lat, bw, png):
        report["chart"] = png
    with open(out_json, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print("pg_rdma transport, counted (qemu -icount, 1 vCPU, %s): deterministic figures"
          % env.get("kernel", "?"))
    print_report(lat, bw, pairs)
    if env.get("failed"):
        print("WARNING: these measurements failed: %s" % env["failed"])
    print("raw logs: %s" % os.path.abspath(raw))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
