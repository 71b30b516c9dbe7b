#!/usr/bin/env python3
"""The table of perf/run-ab-bench.sh: each figure for A and B, and B/A.

usage: ab_report.py RAW_DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from counted_report import client_cpu, server_cpu  # noqa: E402
from report import bench_line, read_lines  # noqa: E402

PAIRS = 8


def line_of(path, word):
    return bench_line(read_lines(path), word)


def cpu_per(path_base, word):
    c = client_cpu(read_lines(path_base + ".client.log"), word)
    s = server_cpu(read_lines(path_base + ".server.log"))
    return (c[0] / c[1] if c and c[1] else None, s[0] / s[1] if s and s[1] else None)


# (log prefix, result line, sizes, field, label, per what, the two ends)
STEPS = (("lat", "latency", (64, 4096, 65536), "p50_us", "p50 us", "round trip", ("client", "server")),
         ("bw", "bandwidth", (4096, 65536, 1048576), "MiBps", "MiB/s", "message", ("sender", "receiver")))


def figures(raw, v):
    out = {}
    for prefix, word, sizes, key, label, per, (client, server) in STEPS:
        for size in sizes:
            base = os.path.join(raw, "%s-%s-%d" % (v, prefix, size))
            kv = line_of(base + ".client.log", word)
            out["%s, %d B" % (label, size)] = float(kv[key]) if kv else None
            c, s = cpu_per(base, word)
            out["cpu us per %s, %s, %d B" % (per, client, size)] = c
            out["cpu us per %s, %s, %d B" % (per, server, size)] = s
    total = 0.0
    for i in range(1, PAIRS + 1):
        kv = line_of(os.path.join(raw, "%s-pairs-%d.client.log" % (v, i)), "latency")
        if not kv:
            total = None
            break
        total += 1e6 / (2 * float(kv["avg_us"]))
    out["8 pairs, round trips/s"] = total
    return out


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    a, b, a2 = figures(argv[1], "A"), figures(argv[1], "B"), figures(argv[1], "A2")
    width = max(len(k) for k in a)

    def cell(x):
        return "-" if x is None else round(x, 2)

    def over(x, y):
        return f"{x / y:6.3f}" if x and y else "     -"

    print(f"{'figure (counted)':{width}}  {'A':>10}  {'B':>10}  {'A again':>10}  {'B/A':>6}  {'A2/A':>6}")
    for k in a:
        print(f"{k:{width}}  {cell(a[k]):>10}  {cell(b[k]):>10}  {cell(a2[k]):>10}  {over(b[k], a[k])}  {over(a2[k], a[k])}")
    print("B/A: the change; A2/A: the same build measured again in this run, the noise floor. A B/A")
    print("no further from 1 than A2/A (or within 2 %) moves nothing, and the change does not go in.")
    print("raw logs: %s" % os.path.abspath(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
