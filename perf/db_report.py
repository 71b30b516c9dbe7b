#!/usr/bin/env python3
"""perf/db_report.py RAW_DIR OUT_JSON

Reads what perf/run-db-bench.sh measured (RAW_DIR/results.txt: lines
"NAME.TRANSPORT.rROUND.FIGURE value"; RAW_DIR/env.txt), shows each
transport's better round for every figure (interference only makes a figure
worse; every round is in the JSON), and takes RDMA/TCP round by round: the
run measures TCP, RDMA; RDMA, TCP; TCP, RDMA (three rounds by default), so
each round's two figures were taken one after the other, and a drift of the
machine's speed over the run moves consecutive rounds' ratios in opposite
directions, which their median damps. A best-of ratio does not: it takes RDMA from
one end of the run and TCP from the other when the machine sped up or slowed
down. A target's verdict is on that median, and undecided where the rounds'
own ratios fall on both sides of it. Prints the table, writes the same to
OUT_JSON and draws the ratios as OUT_JSON with .png (gnuplot). A figure that
was not measured is shown as missing. Exit status 0 once the report is
written, whatever the figures say.
"""
import json
import os
import statistics
import sys

import ratio_chart
import round_verdict
from host_load import busy_host_warning, slow_clock_warning

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
    ("wal_stream.{}.mb_per_s", "WAL streaming (pg_receivewal)", "MB/s", "higher", None),
    # The whole psql run per MB, its start and session setup included: the
    # issue's figure and target.
    ("copy_out.{}.client_cpu_ms_per_mb", "client CPU, COPY out", "ms/MB", "lower", "<= 1.0"),
    # What the same command costs when it copies nothing, and the COPY's CPU
    # past it: how much of the above is the session (over RDMA 0.1-0.3 s
    # more of the guest's CPU than over TCP) and how much the bytes.
    # Diagnostics, no target.
    ("copy_out.{}.session_client_cpu_ms", "client CPU, a session copying nothing", "ms", "lower", None),
    ("copy_out.{}.client_cpu_past_session_ms_per_mb", "client CPU, COPY out, past the session", "ms/MB",
     "lower", None),
    ("copy_out.{}.server_cpu_ms_per_mb", "server CPU, COPY out", "ms/MB", "lower", None),
    # The walsender that sends a base backup does little but move bytes, so
    # this row shows what rxe's work in the sender's post costs per MB.
    ("pg_basebackup.{}.server_cpu_ms_per_mb", "server CPU, pg_basebackup", "ms/MB", "lower", None),
    ("wal_stream.{}.server_cpu_ms_per_mb", "server CPU, WAL streaming (the walsender)", "ms/MB", "lower", None),
    ("select_1.{}.client_cpu_us_per_tx", "client CPU, pgbench -S", "us/tx", "lower", None),
    ("select_1.{}.server_cpu_us_per_tx", "server CPU, pgbench -S", "us/tx", "lower", None),
    ("copy_out.{}.guest_cpu_ms_per_mb", "guest CPU (all, rxe too), COPY out", "ms/MB", "lower", None),
    ("select_1.{}.guest_cpu_us_per_tx", "guest CPU (all, rxe too), pgbench -S", "us/tx", "lower", None),
    ("select_8.{}.guest_switches_per_tx", "context switches, pgbench -S 8 clients", "1/tx", "lower", None),
    ("select_8.{}.softirqd_switches_per_tx", "  of them ksoftirqd's", "1/tx", "lower", None),
    # At 8 clients the guest's 2 vCPUs are saturated, so the first is about
    # 2 x wall time / transactions (the inverse of tps, setup included);
    # it is there to give ksoftirqd's share a whole to be part of. That
    # share is rxe's completion tasklet (kernel 6.1) and the thread's
    # scheduling, work a NIC's interrupt does without a thread. One tick
    # is about 1 us per transaction here: TCP's near-zero is at that floor.
    ("select_8.{}.guest_cpu_us_per_tx", "guest CPU (all), pgbench -S 8 clients", "us/tx", "lower", None),
    ("select_8.{}.softirqd_cpu_us_per_tx", "  of it ksoftirqd's", "us/tx", "lower", None),
    # Where the rest of the difference is: user space is every process's
    # own code (PostgreSQL's, pgbench's, ours in libpq_rdma.so and
    # pg_rdma.so, and ours' busy-polls), the kernel the rest (system calls,
    # with rxe's whole transfer inside the sender's post over loopback;
    # interrupts, softirqs). The guest samples it in ticks, as above.
    ("select_8.{}.guest_user_us_per_tx", "  of the guest's, user space", "us/tx", "lower", None),
    ("select_8.{}.client_cpu_us_per_tx", "client CPU, pgbench -S 8 clients", "us/tx", "lower", None),
    ("select_8.{}.client_user_us_per_tx", "  of it pgbench's user space", "us/tx", "lower", None),
    ("select_8.{}.server_cpu_us_per_tx", "server CPU, pgbench -S 8 clients", "us/tx", "lower", None),
    ("select_8.{}.server_user_us_per_tx", "  of it the backends' user space", "us/tx", "lower", None),
    # Counted, one guest (add_busy_figures): a bulk transfer's MB per second
    # of the guest's work, both ends, the kernel and rxe included: the
    # guest's CPU per MB inverted. Its wall-clock MB/s above also holds the
    # guest's idle time, which runs on the host's clock even counted (reads
    # of the shared root, any timer a stall waits out); its work does not,
    # and on one vCPU it is the rate a transfer that never waited would
    # make. pg_basebackup's and WAL streaming's bytes leave through a
    # walsender.
    # Each is followed by the same with rxe's work per MB taken off RDMA's:
    # an estimate of a NIC's, which does that work in hardware. rxe's share
    # is what raw verbs spend per MB here (ib_write_bw at 1 MiB, the guest
    # busy throughout: 1000 / its MB/s), perftest's own loop included, so
    # the estimate errs in RDMA's favour by that loop's share. No target:
    # it is not a measurement.
    ("copy_out.{}.busy_mb_per_s", "COPY out, MB per busy second", "MB/s", "higher", None),
    ("copy_out.{}.busy_mb_per_s_without_rxe", "  COPY out without rxe's work (estimate)", "MB/s", "higher",
     None),
    ("copy_in.{}.busy_mb_per_s", "COPY in, MB per busy second", "MB/s", "higher", None),
    ("copy_in.{}.busy_mb_per_s_without_rxe", "  COPY in without rxe's work (estimate)", "MB/s", "higher",
     None),
    ("pg_dump.{}.busy_mb_per_s", "pg_dump, MB per busy second", "MB/s", "higher", None),
    ("pg_dump.{}.busy_mb_per_s_without_rxe", "  pg_dump without rxe's work (estimate)", "MB/s", "higher",
     None),
    ("pg_basebackup.{}.busy_mb_per_s", "pg_basebackup (walsender), MB per busy second", "MB/s", "higher",
     ">= 1.0"),
    ("pg_basebackup.{}.busy_mb_per_s_without_rxe", "  pg_basebackup without rxe's work (estimate)", "MB/s",
     "higher", None),
    # A standby's stream: the walsender reads WAL and sends it as it would
    # to a walreceiver.
    ("wal_stream.{}.busy_mb_per_s", "WAL streaming (walsender), MB per busy second", "MB/s", "higher",
     ">= 1.0"),
    ("wal_stream.{}.busy_mb_per_s_without_rxe", "  WAL streaming without rxe's work (estimate)", "MB/s",
     "higher", None),
]
# Rows that only a counted one-guest run has (add_busy_figures).
COUNTED_ONLY = {key for key, *_ in FIGURES if ".busy_mb_per_s" in key}
# Shown in the table, left out of the chart: TCP's figure is near zero, so
# the ratio is a huge number that says less than the two values do.
NOT_CHARTED = {"select_8.{}.softirqd_switches_per_tx", "select_8.{}.softirqd_cpu_us_per_tx",
               # the user/kernel split: diagnostics, the chart keeps to the figures above
               "select_8.{}.guest_user_us_per_tx", "select_8.{}.client_cpu_us_per_tx",
               "select_8.{}.client_user_us_per_tx", "select_8.{}.server_cpu_us_per_tx",
               "select_8.{}.server_user_us_per_tx"}
BULK = ["copy_out", "copy_in", "pg_dump", "pg_basebackup", "wal_stream"]

# Two hosts (scripts/bench db --peer): the guest's whole-machine rows (its
# /proc/stat: both ends and the kernel in one figure) have no counterpart;
# each host's are shown apart, each block of them once per host: A, the
# clients' (this host), then B, the server's. perf/run-db-bench.sh names
# the keys so.
HOSTS = [("client_host", "host A (clients)"), ("server_host", "host B (server)")]


def host_key(key, host):
    """A guest row's key for one of two hosts (run-db-bench.sh's host_key)."""
    return key.replace(".guest_", f".{host}_").replace(".softirqd_", f".{host}_softirqd_")


def host_label(label, name):
    """A guest row's label for one host: the figure's own, the host named."""
    if label.startswith("  "):
        return label.replace("the guest's", "it")
    for guest in ("guest CPU (all, rxe too)", "guest CPU (all)"):
        if label.startswith(guest):
            return label.replace(guest, f"{name} CPU (all)")
    return f"{name}: {label}"


def is_host_row(key):
    return ".guest_" in key or ".softirqd_" in key


def counted_one_guest(env):
    return env.get("counted") == "1" and not env.get("peer")


def figures(env):
    """FIGURES, for two hosts with each guest block once per host; the
    counted rows only where the run was counted in one guest."""
    if not env.get("peer"):
        return [row for row in FIGURES if counted_one_guest(env) or row[0] not in COUNTED_ONLY]
    rows, block = [], []
    for row in FIGURES + [None]:
        if row is not None and row[0] in COUNTED_ONLY:
            continue
        if row is not None and is_host_row(row[0]):
            block.append(row)
            continue
        for host, name in HOSTS:
            rows += [(host_key(key, host), host_label(label, name), *rest) for key, label, *rest in block]
        block = []
        if row is not None:
            rows.append(row)
    return rows


def not_charted(env):
    if not env.get("peer"):
        return NOT_CHARTED
    return {host_key(key, host) if is_host_row(key) else key for key in NOT_CHARTED for host, _ in HOSTS}


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


def by_round(values, template, transport):
    """{round number: value} of one figure ("name.{}.figure")."""
    name, _, figure = template.split(".", 2)
    found = {}
    for round_no in range(1, 10):
        value = number(values, f"{name}.{transport}.r{round_no}.{figure}")
        if value is not None:
            found[round_no] = value
    return found


def rounds_of(values, template, transport):
    """Every measured round's value of one figure, in round order."""
    return list(by_round(values, template, transport).values())


def round_spread(rounds):
    """How far apart one transport's rounds of a figure are: max / min - 1."""
    return max(rounds) / min(rounds) - 1 if len(rounds) > 1 and min(rounds) > 0 else None


def round_ratios(rdma_by_round, tcp_by_round):
    """RDMA/TCP within each round that has both figures (taken one after the
    other); a round with one missing has none, never a pairing across rounds."""
    return [rdma_by_round[n] / tcp_by_round[n] for n in sorted(rdma_by_round)
            if n in tcp_by_round and tcp_by_round[n] > 0 and rdma_by_round[n] >= 0]


def meets(ratio, target):
    if ratio is None or target is None:
        return None
    op, bound = target.split()
    return ratio >= float(bound) if op == ">=" else ratio <= float(bound)


def undecided(ratios, target):
    """A target this run does not decide (round_verdict)."""
    if target is None or not ratios:
        return False
    return round_verdict.undecided(ratios, lambda r: meets(r, target))


def add_busy_figures(values, env, ceiling):
    """Counted, one guest: each bulk transfer's round's MB per busy second
    (1000 / the guest's CPU ms per MB) and, for RDMA, the same without rxe's
    share (1000 / ib_write_bw's MB/s, ms per MB), into `values`."""
    if not counted_one_guest(env):
        return
    rxe_ms_per_mb = 1e3 / ceiling if ceiling else None
    for name in BULK:
        for transport in ("rdma", "tcp"):
            for round_no, cpu in by_round(values, name + ".{}.guest_cpu_ms_per_mb", transport).items():
                if cpu <= 0:
                    continue
                key = f"{name}.{transport}.r{round_no}.busy_mb_per_s"
                values[key] = 1e3 / cpu
                if transport == "tcp":
                    values[key + "_without_rxe"] = 1e3 / cpu  # TCP's has no rxe work to take off
                elif rxe_ms_per_mb is not None and cpu > rxe_ms_per_mb:
                    values[key + "_without_rxe"] = 1e3 / (cpu - rxe_ms_per_mb)


def build(raw):
    values = read_pairs(os.path.join(raw, "results.txt"))
    env = read_pairs(os.path.join(raw, "env.txt"), "=")
    ceiling = number(values, "ib_write_bw.mb_per_s")
    add_busy_figures(values, env, ceiling)
    rows = []
    uncharted = not_charted(env)
    for key, label, unit, better, target in figures(env):
        pick = max if better == "higher" else min
        rdma_by_round, tcp_by_round = by_round(values, key, "rdma"), by_round(values, key, "tcp")
        rdma_rounds, tcp_rounds = list(rdma_by_round.values()), list(tcp_by_round.values())
        rdma = pick(rdma_rounds) if rdma_rounds else None
        tcp = pick(tcp_rounds) if tcp_rounds else None
        ratios = round_ratios(rdma_by_round, tcp_by_round)
        ratio = round_verdict.median_of_rounds(ratios)
        spreads = [x for x in (round_spread(rdma_rounds), round_spread(tcp_rounds)) if x is not None]
        row = {"figure": label, "unit": unit, "better": better, "rdma": rdma, "tcp": tcp,
               "rdma_rounds": rdma_rounds, "tcp_rounds": tcp_rounds, "round_ratios": ratios,
               "rdma_over_tcp": ratio,
               "best_rdma_over_best_tcp": rdma / tcp if rdma is not None and tcp else None,
               "target": target, "meets_target": meets(ratio, target),
               "round_spread": max(spreads) if spreads else None,
               "undecided": undecided(ratios, target), "charted": key not in uncharted}
        name = key.split(".")[0]
        if name in BULK and unit == "MB/s" and ceiling and key not in COUNTED_ONLY:
            row["rdma_fraction_of_ib_write_bw"] = rdma / ceiling if rdma is not None else None
        rows.append(row)
    # What RDMA adds to a connection, within each round, as the ratios are.
    setup = {t: by_round(values, "connect_1.{}.connection_ms", t) for t in ("rdma", "tcp")}
    setup_extras = [setup["rdma"][n] - setup["tcp"][n] for n in sorted(setup["rdma"]) if n in setup["tcp"]]
    setup_extra = statistics.median(setup_extras) if setup_extras else None
    backup_mb = rounds_of(values, "pg_basebackup.{}.mb", "tcp")
    return {"benchmark": "db", "env": env, "note": note(env), "ib_write_bw_mb_per_s": ceiling,
            "connection_setup_rdma_minus_tcp_ms": setup_extra,
            "cluster_mb": backup_mb[0] if backup_mb else None, "figures": rows}


def where(env):
    """Where the run was, for the header and the chart."""
    if env.get("peer"):
        return "two hosts: clients on %s, server on %s (%s)" % (env.get("device", "?"), env["peer"],
                                                               env.get("peer_device", "?"))
    return "Soft-RoCE guest"


def note(env):
    if not env.get("peer"):
        return ("Soft-RoCE in a TCG guest: absolute figures say nothing about real NICs; "
                "compare the ratios.")
    kind = ": two Soft-RoCE guests, TCG's figures" if env.get("guest") == "1" else ": real devices' figures"
    return ("two hosts, %s to %s%s. Server CPU is its backends' as the server's host reads it; "
            "there is no whole-machine figure for both ends: each host's is its own; host B's leaves out "
            "the processes of the ssh session that reads it, not the ssh daemon's own share, and its "
            "context switches include that session's. The ib_write_bw ceiling is A to B, the direction of "
            "COPY in; COPY out, pg_dump, pg_basebackup and WAL streaming move B to A." % (env.get("device"), env.get("peer_device"), kind))


def fmt(x, digits=2):
    return "missing" if x is None else f"{x:.{digits}f}"


def print_table(report):
    env = report["env"]
    print()
    if env.get("peer"):
        print(f"PostgreSQL 15 over pg_rdma vs TCP, same server and address {env.get('address', '?')} "
              f"(ib_write_bw 1 MiB = {fmt(report['ib_write_bw_mb_per_s'], 1)} MB/s)")
        print(f"Two hosts: clients on A (here: {env.get('device', '?')}, kernel {env.get('kernel', '?')}, "
              f"{env.get('cpus', '?')} CPUs), server on B = {env['peer']} ({env.get('peer_device', '?')}, "
              f"kernel {env.get('peer_kernel', '?')}, {env.get('peer_cpus', '?')} CPUs).")
        print(report["note"])
    else:
        print(f"PostgreSQL 15 over pg_rdma vs TCP, same server and address ({env.get('device', '?')}, "
              f"one guest run; ib_write_bw 1 MiB = {fmt(report['ib_write_bw_mb_per_s'], 1)} MB/s)")
    if report["env"].get("counted") == "1":
        # perf/README.md, "Counted mode".
        print("COUNTED: the guest's clock counts instructions (1 ns each, one vCPU): pgbench's rates and CPU per")
        print("transaction are work done and repeat, as do the bulk transfers' MB per busy second; their MB/s")
        print("and connection setup, which idle on the host's clock, are not claimed to. rxe's packets and ICRC")
        print("count as the guest's work, which a NIC does instead (the rows without rxe's work estimate that)")
    width = max([40] + [len(r["figure"]) for r in report["figures"]])
    head = (f"{'figure':{width}} {'unit':6} {'rdma':>10} {'tcp':>10} {'rdma/tcp':>9} {'rounds':>15} "
            f"{'target':>8} {'of ib_bw':>9}")
    print(head)
    print("-" * len(head))
    for r in report["figures"]:
        verdict = {True: " ok", False: " MISS", None: ""}[r["meets_target"]]
        if r["undecided"]:
            verdict += " ?"
        fraction = r.get("rdma_fraction_of_ib_write_bw")
        rounds = " / ".join(fmt(x) for x in r["round_ratios"])
        print(f"{r['figure']:{width}} {r['unit']:6} {fmt(r['rdma']):>10} {fmt(r['tcp']):>10} "
              f"{fmt(r['rdma_over_tcp']):>9} {rounds:>15} {(r['target'] or ''):>8} "
              f"{(fmt(fraction) if fraction is not None else ''):>9}{verdict}")
    if report["connection_setup_rdma_minus_tcp_ms"] is not None:
        print(f"connection setup: RDMA adds {report['connection_setup_rdma_minus_tcp_ms']:.1f} ms to TCP's, "
              f"the median of the rounds' "
              f"(scram-sha-256 authentication and the backend's fork are in both)")
    if report["cluster_mb"] is not None:
        print(f"pg_basebackup moved {report['cluster_mb']:.1f} MB (all rounds of every figure are in the JSON)")
    failed = report["env"].get("failed", "")
    if failed:
        print(f"not measured: {failed}")
    print("rdma, tcp: each transport's better round. rounds: RDMA/TCP within each round (measured one after")
    print("the other); rdma/tcp: their median, on which a target is judged. Above 1 is RDMA's gain for tps")
    print("and MB/s, its loss for ms and CPU.")
    for r in report["figures"]:
        if not r["undecided"]:
            continue
        if len(r["round_ratios"]) < 2:
            print(f"undecided (?): {r['figure'].strip()}: only one round has both transports' figures: "
                  f"not decided by this run")
        else:
            print(f"undecided (?): {r['figure'].strip()}: the rounds' ratios "
                  f"({' / '.join(fmt(x) for x in r['round_ratios'])}) fall on both sides of the target "
                  f"({r['target']}): not decided by this run")
    for warning in (busy_host_warning(report["env"]), slow_clock_warning(report["env"])):
        if warning:
            print(warning)


def draw(report, png):
    """Bar chart of RDMA/TCP per figure, with the parity line."""
    bars = []
    for r in report["figures"]:
        ratio = r["rdma_over_tcp"]
        if ratio is None or not r["charted"]:
            continue
        rdma_better = ratio >= 1 if r["better"] == "higher" else ratio <= 1
        undecided_mark = " ?" if r["undecided"] else ""
        bars.append((f"{r['figure']} ({r['unit']}){undecided_mark}", ratio, rdma_better))
    return ratio_chart.draw(
        bars, png,
        "pg_rdma: RDMA / TCP, same PostgreSQL 15 server (%s)\\n" % where(report["env"]) +
        "green: RDMA better (ratio >1 for tps and MB/s, <1 for ms and CPU); red: TCP better",
        "RDMA / TCP")


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
