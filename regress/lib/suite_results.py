#!/usr/bin/env python3
"""Test plan and result files for regress/run-rdma-suite and
regress/run-pair-suite (host side only).

  plan SUITE BUILD OUT_DIR [NAME...] < introspect.json
      Writes OUT_DIR/plan.sh (read by guest/run-tests.sh: a function
      `second_lane` of one `run_test` line per test also in suite
      SUITE-second-lane, one `start_background` line per test also in suite
      SUITE-background, `start_second_lane`, one `run_test` line per other
      test of SUITE but those also in SUITE-alone, `wait_second_lane` (these
      two only when the second lane has tests), then
      one `run_test` line per test also in SUITE-alone) and
      OUT_DIR/planned.txt (all their names); prints
      "COUNT TOTAL_TIMEOUT_S BACKGROUND_COUNT SECOND_LANE_COUNT".
  to-meson OUT_DIR TESTLOG [WHERE]
      Writes results.tsv as meson's testlog.json (JSON lines), so callers that
      read meson's log (scripts/test) see the guest's results. A planned test
      with no result line becomes result ERROR: it never passes by silence.
      WHERE goes to each entry's "where" (default: the rdma suite's guest).
  merge-pair OUT_DIR
      Two-host suite: OUT_DIR/A and OUT_DIR/B hold each guest's results.tsv
      and logs (guest/run-pair-tests.sh). Writes OUT_DIR/results.tsv with one
      line per test that BOTH sides reported: OK only when both sides were
      OK, else the worse status (TIMEOUT, FAIL, SKIPPED-AS-FAIL), the first
      failing side's exit code, the longer duration. A test one side did not
      report gets no line (run-pair-suite then fails it). OUT_DIR/NAME.log
      gets both sides' logs, A's (server) first.
  from-meson TESTLOG OUT_DIR
      The reverse, for PG_RDMA_SUITE_RUNNER=meson: meson's log -> results.tsv.
"""

import json
import random
import shlex
import sys
from pathlib import Path

# results.tsv status -> meson result name (scripts/lib/tally.sh counts only OK).
MESON_RESULT = {"OK": "OK", "FAIL": "FAIL", "TIMEOUT": "TIMEOUT", "SKIPPED-AS-FAIL": "SKIP"}


def in_suite(test, suite):
    # meson prefixes suites with the project name: "pg_rdma:rdma".
    return any(s == suite or s.endswith(":" + suite) for s in test["suite"])


def plan_line(verb, test, build):
    env = dict(test["env"])
    # meson test sets this too: it makes uses of uninitialised heap visible.
    env.setdefault("MALLOC_PERTURB_", str(random.randint(1, 255)))
    argv = [verb, test["name"], str(int(test["timeout"] or 0)), test["workdir"] or build, "env"]
    argv += [f"{k}={v}" for k, v in sorted(env.items())] + test["cmd"]
    return " ".join(shlex.quote(a) for a in argv)


def cmd_plan(suite, build, out, names):
    tests = [t for t in json.load(sys.stdin)
             if in_suite(t, suite) and (not names or t["name"] in names)]
    # Tests also in SUITE-background start first and run beside the others;
    # tests also in SUITE-second-lane run one after another in a second lane
    # beside the first (the guest's two vCPUs); tests also in SUITE-alone run
    # after both lanes, one at a time (regress/README.md).
    ways = ("-background", "-second-lane", "-alone")
    for t in tests:
        chosen = [w for w in ways if in_suite(t, suite + w)]
        if len(chosen) > 1:
            sys.exit(f"test {t['name']} is in {' and '.join(suite + w for w in chosen)}: choose one way to run it")
    background = [t for t in tests if in_suite(t, suite + "-background")]
    lane2 = [t for t in tests if in_suite(t, suite + "-second-lane")]
    alone = [t for t in tests if in_suite(t, suite + "-alone")]
    lane1 = [t for t in tests if t not in background and t not in lane2 and t not in alone]
    out = Path(out)
    lines = ["# written by regress/run-rdma-suite from meson introspect --tests",
             "second_lane() {"]
    lines += ["  " + plan_line("run_test", t, build) for t in lane2]
    lines += ["  :", "}"]
    lines += [plan_line("start_background", t, build) for t in background]
    lines += ["start_second_lane"] if lane2 else []
    lines += [plan_line("run_test", t, build) for t in lane1]
    lines += ["wait_second_lane"] if lane2 else []
    lines += [plan_line("run_test", t, build) for t in alone]
    (out / "plan.sh").write_text("\n".join(lines) + "\n")
    (out / "planned.txt").write_text("".join(t["name"] + "\n" for t in tests))
    print(len(tests), sum(int(t["timeout"] or 0) for t in tests), len(background), len(lane2))


def read_results(out):
    rows = {}
    path = out / "results.tsv"
    if path.exists():
        for line in path.read_text().splitlines():
            name, status, code, secs = line.split("\t")
            rows[name] = (status, int(code), float(secs))
    return rows


def log_text(out, name):
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
    path = out / (safe + ".log")
    return path.read_text(errors="replace") if path.exists() else ""


def cmd_to_meson(out, testlog, where="Soft-RoCE guest (regress/run-rdma-suite)"):
    out = Path(out)
    rows = read_results(out)
    with open(testlog, "w") as f:
        for name in (out / "planned.txt").read_text().splitlines():
            status, code, secs = rows.get(name, ("ERROR", -1, 0.0))
            result = MESON_RESULT.get(status, "ERROR")
            f.write(json.dumps({"name": name, "result": result, "returncode": code,
                                "duration": secs, "stdout": log_text(out, name),
                                "where": where}) + "\n")


# Worst first: the status a two-host test gets when its sides disagree.
PAIR_SEVERITY = ["TIMEOUT", "FAIL", "SKIPPED-AS-FAIL", "OK"]
PAIR_SIDES = (("A", "server, 10.99.0.1"), ("B", "client, 10.99.0.2"))


def cmd_merge_pair(out):
    out = Path(out)
    sides = {host: read_results(out / host) for host, _ in PAIR_SIDES}
    with open(out / "results.tsv", "w") as tsv:
        for name in (out / "planned.txt").read_text().splitlines():
            parts = [f"===== host {host} ({what}): "
                     + (f"{sides[host][name][0]}, exit {sides[host][name][1]}, "
                        f"{sides[host][name][2]:.2f} s" if name in sides[host] else "NO RESULT")
                     + " =====\n" + log_text(out / host, name)
                     for host, what in PAIR_SIDES]
            safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
            (out / (safe + ".log")).write_text("\n".join(parts))
            if not all(name in sides[host] for host, _ in PAIR_SIDES):
                continue
            rows = [sides[host][name] for host, _ in PAIR_SIDES]
            status = min((r[0] for r in rows),
                         key=lambda st: PAIR_SEVERITY.index(st) if st in PAIR_SEVERITY else -1)
            code = next((r[1] for r in rows if r[0] != "OK"), 0)
            tsv.write(f"{name}\t{status}\t{code}\t{max(r[2] for r in rows):.2f}\n")


def cmd_from_meson(testlog, out):
    out = Path(out)
    with open(testlog) as f, open(out / "results.tsv", "w") as tsv:
        for line in f:
            t = json.loads(line)
            status = "OK" if t["result"] in ("OK", "EXPECTEDFAIL") else t["result"]
            tsv.write(f'{t["name"]}\t{status}\t{t["returncode"]}\t{t["duration"]:.2f}\n')


def main(argv):
    if len(argv) >= 4 and argv[0] == "plan":
        cmd_plan(argv[1], argv[2], argv[3], set(argv[4:]))
    elif len(argv) in (3, 4) and argv[0] == "to-meson":
        cmd_to_meson(*argv[1:])
    elif len(argv) == 2 and argv[0] == "merge-pair":
        cmd_merge_pair(argv[1])
    elif len(argv) == 3 and argv[0] == "from-meson":
        cmd_from_meson(argv[1], argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
