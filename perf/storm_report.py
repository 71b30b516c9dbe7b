#!/usr/bin/env python3
"""perf/storm_report.py RESULTS_TXT OUT_JSON [HOST_LOAD]

Reads what perf/run-storm-bench.sh measured (lines "storm.SIZE.TRANSPORT.
FIGURE value", one per round) and prints, for each storm size, each
transport's median over the rounds of every figure, with the RDMA/TCP ratio
of the setup latencies and every round's p50/p99 beside it (the spread a
reader needs to trust a ratio). Failures are summed over the rounds, not
taken as a median: one failed connection in any round is a failure. Writes
the same to OUT_JSON. Exit status 0 once the report is written, whatever the
figures say.
"""
import json
import statistics
import sys
from collections import defaultdict

from host_load import busy_host_warning

TRANSPORTS = ("tcp", "rdma")
# (figure, label, unit, how rounds combine, ratio shown)
FIGURES = [
    ("connected", "sessions made", "", "min", False),
    ("failed", "failed connections (all rounds)", "", "sum", False),
    ("rdma", "sessions on RDMA", "", "min", False),
    ("p50_ms", "setup latency p50", "ms", "median", True),
    ("p99_ms", "setup latency p99", "ms", "median", True),
    ("max_ms", "setup latency max", "ms", "median", True),
    ("client_descriptors", "client descriptors at the peak", "", "median", True),
    ("client_pinned_kb", "client pinned memory at the peak", "kB", "median", False),
    ("server_descriptors", "server backends' descriptors at the peak", "", "median", True),
    ("server_pinned_kb", "server backends' pinned memory at the peak", "kB", "median", False),
]
COMBINE = {"min": min, "sum": sum, "median": statistics.median}


def read(path):
    rounds = defaultdict(list)  # (size, transport, figure) -> values in round order
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2 or not parts[0].startswith("storm."):
                continue
            _, size, transport, figure = parts[0].split(".", 3)
            try:
                rounds[(int(size), transport, figure)].append(float(parts[1]))
            except ValueError:
                continue
    return rounds


def fmt(value):
    if value is None:
        return "missing"
    return "%.0f" % value if value >= 10 or value == int(value) else "%.2f" % value


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    rounds = read(sys.argv[1])
    env = {"host_load_before": sys.argv[3]} if len(sys.argv) == 4 else {}
    sizes = sorted({size for size, _, _ in rounds})
    report = {"sizes": {}, "host_load_before": env.get("host_load_before", "")}
    lines = []
    warning = busy_host_warning(env)
    if warning:
        lines.append(warning)
    for size in sizes:
        lines.append("")
        lines.append("storm of %d connections at the same instant (one process, libpq; TCP: plain libpq,"
                     " RDMA: pgrdma with_rsocket=true)" % size)
        lines.append("%-44s %10s %10s %9s" % ("", "TCP", "RDMA", "RDMA/TCP"))
        entry = {}
        for figure, label, unit, how, with_ratio in FIGURES:
            values = {}
            for transport in TRANSPORTS:
                seen = rounds.get((size, transport, figure), [])
                values[transport] = COMBINE[how](seen) if seen else None
            ratio = None
            if with_ratio and values["tcp"] and values["rdma"] is not None:
                ratio = values["rdma"] / values["tcp"]
            name = label + (" (%s)" % unit if unit else "")
            lines.append("%-44s %10s %10s %9s" % (name, fmt(values["tcp"]), fmt(values["rdma"]),
                                                  "%.2f" % ratio if ratio is not None else ""))
            entry[figure] = {"tcp": values["tcp"], "rdma": values["rdma"], "ratio": ratio,
                             "rounds": {t: rounds.get((size, t, figure), []) for t in TRANSPORTS}}
        for transport in TRANSPORTS:
            p50 = rounds.get((size, transport, "p50_ms"), [])
            p99 = rounds.get((size, transport, "p99_ms"), [])
            lines.append("  rounds, %-4s p50/p99 ms: %s" % (
                transport.upper(), ", ".join("%s/%s" % (fmt(a), fmt(b)) for a, b in zip(p50, p99))))
        report["sizes"][str(size)] = entry
    text = "\n".join(lines)
    print(text)
    report["table"] = text
    with open(sys.argv[2], "w") as f:
        json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
