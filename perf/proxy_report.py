#!/usr/bin/env python3
"""perf/proxy_report.py RESULTS_TXT OUT_JSON [HOST_LOAD]

Reads what perf/run-proxy-bench.sh measured (lines "proxy.PATH.FIGURE
value", one per round, and "where guest|host") and prints each path's
median over the rounds of every figure, the ratios of the proxy's paths
against the direct RDMA session (in the guest) and against TCP, the local
hop's added latency (proxy p50 minus the direct path's: RDMA in the guest,
TCP on the host, where the proxy carries over TCP), and every round's p50
beside them (the spread a reader needs to trust a ratio). Writes the same to OUT_JSON. Exit status 0 once
the report is written, whatever the figures say.
"""
import json
import statistics
import sys
from collections import defaultdict

from host_load import busy_host_warning

PATHS = ("tcp", "rdma", "proxy_unix", "proxy_tcp")
LABELS = {"tcp": "TCP", "rdma": "RDMA", "proxy_unix": "proxy/unix", "proxy_tcp": "proxy/tcp"}
# (figure, label, unit)
FIGURES = [
    ("p50_us", "1 client, round trip p50", "us"),
    ("p99_us", "1 client, round trip p99", "us"),
    ("mean_us", "1 client, round trip mean", "us"),
    ("tps_8", "8 clients, transactions per second", "tps"),
    ("proxy_cpu_us_per_tx", "proxy CPU per transaction (8 clients)", "us"),
]
PROXY_PATHS = ("proxy_unix", "proxy_tcp")


def read(path):
    rounds = defaultdict(list)  # (path, figure) -> values in round order
    where = "guest"
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0] == "where":
                where = parts[1]
            if len(parts) != 2 or not parts[0].startswith("proxy."):
                continue
            _, path_name, figure = parts[0].split(".", 2)
            try:
                rounds[(path_name, figure)].append(float(parts[1]))
            except ValueError:
                continue
    return rounds, where


def fmt(value):
    if value is None:
        return "-"
    return "%.0f" % value if value >= 10 or value == int(value) else "%.2f" % value


def ratio(a, b):
    return a / b if a is not None and b else None


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    rounds, where = read(sys.argv[1])
    paths = PATHS if where == "guest" else tuple(p for p in PATHS if p != "rdma")
    direct = "rdma" if where == "guest" else "tcp"
    env = {"host_load_before": sys.argv[3]} if len(sys.argv) == 4 else {}
    medians = {(p, f): statistics.median(v) for (p, f), v in rounds.items() if v}
    lines = []
    warning = busy_host_warning(env)
    if warning:
        lines.append(warning)
    if where == "guest":
        lines.append("pgrdma proxy in the Soft-RoCE guest: SELECT 1 by pgbench over each path to the same"
                     " server (medians of the rounds)")
    else:
        lines.append("pgrdma proxy on this host's own CPU (no RDMA here: the proxy carries over TCP, so"
                     " proxy minus TCP is the local hop's cost)")
    lines.append("%-40s" % "" + "".join("%12s" % LABELS[p] for p in paths))
    report = {"where": where, "host_load_before": env.get("host_load_before", ""), "figures": {}, "ratios": {}}
    for figure, label, unit in FIGURES:
        values = [medians.get((p, figure)) for p in paths]
        lines.append("%-40s" % ("%s (%s)" % (label, unit)) + "".join("%12s" % fmt(v) for v in values))
        report["figures"][figure] = {p: {"median": medians.get((p, figure)), "rounds": rounds.get((p, figure), [])}
                                     for p in paths}
    lines.append("")
    lines.append("%-40s%12s%12s" % ("ratios", "proxy/unix", "proxy/tcp"))
    comparisons = [(f, a) for f in ("p50_us", "tps_8") for a in ("rdma", "tcp") if a in paths]
    for figure, against in comparisons:
        name = "%s vs %s" % (figure, LABELS[against])
        values = [ratio(medians.get((p, figure)), medians.get((against, figure))) for p in PROXY_PATHS]
        lines.append("%-40s" % name + "".join("%12s" % ("%.2f" % v if v is not None else "-") for v in values))
        report["ratios"][name] = dict(zip(PROXY_PATHS, values))
    added = [None if medians.get((p, "p50_us")) is None or medians.get((direct, "p50_us")) is None
             else medians[(p, "p50_us")] - medians[(direct, "p50_us")] for p in PROXY_PATHS]
    lines.append("%-40s" % ("local hop, p50 added to %s's (us)" % LABELS[direct])
                 + "".join("%12s" % fmt(v) for v in added))
    report["local_hop_added_p50_us"] = dict(zip(PROXY_PATHS, added))
    for p in paths:
        lines.append("  rounds, %-10s p50 us: %s" % (LABELS[p], ", ".join(fmt(v) for v in rounds.get((p, "p50_us"), []))))
    text = "\n".join(lines)
    print(text)
    report["table"] = text
    with open(sys.argv[2], "w") as f:
        json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
