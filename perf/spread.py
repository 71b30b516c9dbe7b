#!/usr/bin/env python3
"""How well runs of the same benchmark repeat: each ratio their reports
share, side by side, and its spread.

usage: spread.py [--limit PERCENT] REPORT.json REPORT.json [REPORT.json...]

A ratio is any number in a report whose key has "_over_" in it (the
transport reports' ratios, db_report.py's rdma_over_tcp per figure), found
under the same path in every report; a list's element is named by its
"size" or "figure". The spread is (largest - smallest) / median, in per
cent; a ratio whose spread is above --limit (default 2) is marked. Exit
status: 0 when every shared ratio is within the limit, 1 when one is not,
2 on usage. Figures that are not ratios (times, rates) are left out: a
ratio of two tools measured in the same run is what a verdict rests on.
"""
import json
import statistics
import sys

DEFAULT_LIMIT_PERCENT = 2.0
# Round-by-round and diagnostic copies repeat the ratios above them.
SKIPPED_KEYS = {"ratios_by_round", "round_ratios", "diagnostic_round_ratios", "ratios_wall",
                "environment", "env"}


def element_name(item, index):
    if isinstance(item, dict):
        for key in ("size", "figure"):
            if key in item:
                return str(item[key]).strip()
    return str(index)


def ratios(node, path, out):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SKIPPED_KEYS:
                continue
            if "_over_" in key and (value is None or isinstance(value, (int, float))) and not isinstance(value, bool):
                out["/".join(path + [key])] = None if value is None else float(value)
            else:
                ratios(value, path + [key], out)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            ratios(item, path + [element_name(item, i)], out)


def main(argv):
    args = argv[1:]
    limit = DEFAULT_LIMIT_PERCENT
    if len(args) >= 2 and args[0] == "--limit":
        try:
            limit = float(args[1])
        except ValueError:
            print(__doc__, file=sys.stderr)
            return 2
        args = args[2:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    runs, modes = [], []
    for name in args:
        try:
            with open(name, encoding="utf-8") as f:
                found = {}
                report = json.load(f)
                ratios(report, [], found)
                runs.append(found)
                modes.append((report.get("benchmark"), report.get("mode")
                              or (report.get("env") or {}).get("counted") or "wall-clock"))
        except (OSError, ValueError) as e:
            print(f"spread: {name}: {e}", file=sys.stderr)
            return 2
    if len({m for m in modes}) > 1:
        print("spread: the reports are of different modes (%s): their ratios do not compare"
              % ", ".join(sorted(map(str, set(modes)))), file=sys.stderr)
        return 2
    shared = [k for k in runs[0] if all(k in r for r in runs[1:])]
    if not shared:
        print("spread: the reports share no ratio", file=sys.stderr)
        return 2
    # A ratio a run lacks (a failed measurement: null) is a run that did not
    # repeat: said, and counted against the exit status.
    unshared = sorted({k for r in runs for k in r} - set(shared)) + \
        sorted(k for k in shared if any(r[k] is None for r in runs))
    shared = [k for k in shared if all(r[k] is not None for r in runs)]
    width = max(len(k) for k in shared)
    print(f"{'ratio':{width}}  " + "  ".join(f"{'run ' + str(i + 1):>8}" for i in range(len(runs)))
          + "  spread")
    worst, outside = 0.0, 0
    for key in shared:
        values = [r[key] for r in runs]
        middle = statistics.median(values)
        spread = (max(values) - min(values)) / middle * 100 if middle else 0.0
        worst = max(worst, spread)
        mark = "" if spread <= limit else "  > %g %%" % limit
        outside += spread > limit
        print(f"{key:{width}}  " + "  ".join(f"{v:8.3f}" for v in values) + f"  {spread:5.2f} %{mark}")
    for key in unshared:
        print(f"{key}: not measured in every run")
    print(f"{len(shared)} ratios in {len(runs)} runs; largest spread {worst:.2f} %; "
          f"{outside} above {limit:g} %; {len(unshared)} not in every run")
    return 1 if outside or unshared else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
