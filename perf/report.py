#!/usr/bin/env python3
"""Turns the raw logs of one `scripts/bench transport` run into tables on
stdout and a JSON file.

usage: report.py RAW_DIR OUT_JSON

RAW_DIR is what perf/run-transport-bench.sh collected: env.txt (key=value
facts about the run), settings.log, copy.memcpy.log and copy.vector.log
(copy_speed as is and kept off `rep movsb`), cost.log (perf/stream-cost.sh,
run on the host by scripts/bench before the guest), and per round a
directory rN holding one TOOL-SIZE.client.log / .server.log pair per
measurement, and pairs-TOOL-N.client.log and .wall for the pairs run at
once. For every tool and size the best round is kept (lowest latency,
highest bandwidth): a host that stalls the guest only ever makes figures
worse, and every tool gets the same treatment. A target is judged on the
median of each round's own ratio, and marked undecided where those fall
on both sides of it (judge_targets). A measurement that failed or did
not run shows as "-" and null: this is a benchmark, it reports what it
got and never fails on a target.
"""

import json
import math
import os
import statistics
import sys

import ratio_chart
import round_verdict
from host_load import busy_host_warning, slow_clock_warning

MIB = 1024 * 1024
PINNED_BUDGET_BYTES = 512 * 1024

LAT_SIZES = [64, 1024, 4096, 16384, 65536]
# transport_bench's warm-up before the timed part (run-transport-bench.sh):
# its CPU time is in the process's, so its messages and bytes count too.
OURS_WARMUP_ROUND_TRIPS = 20
# The size at which ours' bandwidth is measured twice over the same code
# (ours and vcopy, below glibc's rep movsb threshold): their spread is the
# run's noise.
NOISE_PROBE_SIZE = 4096
# A spread above this (10 %) makes the report warn that the run was noisy.
NOISY_REPEAT_SPREAD = 0.10
OURS_WARMUP_BYTES = 4 * MIB
PERFTEST_FLOOR_SIZE = 2  # ib_write_lat only
# perftest tools: their message counts are their iterations.
PERFTEST_LAT = ("ib_write_lat", "ib_send_lat", "ib_send_lat_events")
PERFTEST_BW = ("ib_write_bw", "ib_send_bw", "ib_send_bw_events")
BW_SIZES = [4096, 65536, 1048576]

# Targets, for display only: ours p50 at most 1.3x ib_write_lat's typical and
# ours below rstream (rstream's average, and the p50 of rsocket timed by our
# own loop); bandwidth at least 0.9x ib_write_bw and above rstream; pinned
# memory per connection at most 512 KiB.
TARGET_LAT_VS_IB = 1.30
TARGET_LAT_VS_RSTREAM = 1.00  # strictly below
TARGET_LAT_VS_RSOCKET = 1.00  # p50 at or below, the same loop timing both
TARGET_BW_VS_IB = 0.90
TARGET_BW_VS_RSTREAM = 1.00   # strictly above
# transport_bench times round trips with the CPU's cycle counter at the rate
# it measures against steady_clock in each measurement; those rates agree
# within a few hundredths of a percent where the counter runs at one rate.
# A counter that stepped forward in a measurement makes its rate high and
# its figures low by about the excess: beyond this share (0.1 %) above the
# run's median, the report warns.
COUNTER_SPREAD_LIMIT = 0.001


# --- parsing one log -----------------------------------------------------------

def read_lines(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def key_values(line):
    return dict(tok.split("=", 1) for tok in line.split()[1:] if "=" in tok)


def bench_line(lines, word):
    """transport_bench's result line ('latency ...' or 'bandwidth ...')."""
    for line in lines:
        if line.startswith(word + " "):
            return key_values(line)
    return None


def waits_slept(lines):
    """transport_bench's count of waits that slept (its stats line); None
    in tcp's logs and in those of older builds."""
    try:
        return int((bench_line(lines, "stats") or {})["waits_slept"])
    except (KeyError, ValueError):
        return None


def parse_ours_latency(lines, _size):
    kv = bench_line(lines, "latency")
    if kv is None:
        return None
    # The share of round trips whose wait() slept, on the client (the stats
    # line counts the warm-up's too, and the last wait for the server's
    # goodbye).
    slept = waits_slept(lines)
    round_trips = int(kv["iters"]) + OURS_WARMUP_ROUND_TRIPS
    return {"p50_us": float(kv["p50_us"]), "p99_us": float(kv["p99_us"]),
            "avg_us": float(kv["avg_us"]), "iters": int(kv["iters"]),
            "stalls": int(kv["stalls"]),
            "client_slept_share": None if slept is None else round(slept / round_trips, 3)}


def counter_rates(rounds):
    """What transport_bench's latency runs (ours, spin, tcp, rsocket, the
    pairs) measured its cycle counter's rate at, one figure each
    (counter_mhz, cycle_counter.hpp): a constant-rate counter gives the
    same in all of them. None for logs without it (older builds)."""
    rates = {}
    for d in rounds:
        for name in sorted(os.listdir(d)):
            if not name.endswith(".client.log"):
                continue
            for line in read_lines(os.path.join(d, name)):
                kv = key_values(line) if line.startswith("latency ") else {}
                if "counter_mhz" in kv:
                    rates["%s/%s" % (os.path.basename(d), name[:-len(".client.log")])] = float(kv["counter_mhz"])
    if not rates:
        return None
    low, high, middle = min(rates.values()), max(rates.values()), statistics.median(rates.values())
    # A step forward raises the rate a measurement finds; a steady_clock
    # reading delayed at its start (a fresh process's first calls, under
    # TCG) lowers it and costs its figures nothing but that share.
    return {"measurements": len(rates), "min_mhz": low, "max_mhz": high, "median_mhz": middle,
            "spread": round((high - low) / middle, 6), "above_median": round((high - middle) / middle, 6),
            "stepped": sorted(k for k, v in rates.items() if (v - middle) / middle > COUNTER_SPREAD_LIMIT)}


def parse_ours_bandwidth(lines, _size):
    kv = bench_line(lines, "bandwidth")
    if kv is None:
        return None
    return {"MiBps": float(kv["MiBps"]), "messages": int(kv["messages"]),
            "seconds": float(kv["seconds"]), "stalls": int(kv["stalls"])}


def numbers_after_header(lines, header_marker):
    """perftest prints a header line, then one row of numbers."""
    for i, line in enumerate(lines[:-1]):
        if header_marker in line:
            try:
                return [float(x) for x in lines[i + 1].split()]
            except ValueError:
                return None
    return None


def parse_perftest_lat(lines, _size):
    """ib_write_lat and ib_send_lat print the same columns."""
    # columns: bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
    row = numbers_after_header(lines, "t_typical")
    if not row or len(row) < 8:
        return None
    # perftest turns cycles into time with a CPU frequency it measures as it
    # starts; where that measurement fails (a loaded guest: "Correlation
    # coefficient r^2 < 0.9", which -F lets pass) it prints inf for every
    # time. The round trips still ran: only its clock is lost.
    if not all(math.isfinite(x) and x > 0 for x in (row[4], row[5], row[7])):
        return {"iters": int(row[1]), "clock_failed": True}
    return {"typical_us": row[4], "avg_us": row[5], "p99_us": row[7], "iters": int(row[1])}


def parse_perftest_bw(lines, _size):
    """ib_write_bw and ib_send_bw print the same columns."""
    # columns: bytes iters peak average msg_rate; perftest's "MB/sec" is
    # 2^20 bytes per second (bytes x iterations / duration agrees).
    row = numbers_after_header(lines, "BW average")
    if not row or len(row) < 4 or row[3] <= 0:
        return None
    return {"MiBps": row[3], "iters": int(row[1])}


def parse_rstream(lines, size):
    """rstream's 'custom' row ends with µs per one-way transfer, averaged
    over all transfers of both directions."""
    for line in lines:
        cols = line.split()
        if cols and cols[0] == "custom":
            usec = float(cols[-1])
            return {"avg_us": usec, "MiBps": size / usec * 1e6 / MIB}
    return None


# --- best of the rounds ------------------------------------------------------------

def round_dirs(raw):
    names = [n for n in os.listdir(raw) if n[:1] == "r" and n[1:].isdigit()]
    return [os.path.join(raw, n) for n in sorted(names, key=lambda n: int(n[1:]))]


def cpu_seconds(round_dir, log_name, size):
    """User + system time of the client and the server of one measurement
    (TOOL-SIZE.{client,server}.cpu: bash's `times`, whose second line is
    its children's, "XmY.YYYs XmY.YYYs"); None when either is missing."""
    total = 0.0
    for side in ("client", "server"):
        lines = read_lines(os.path.join(round_dir, "%s-%d.%s.cpu" % (log_name, size, side)))
        if len(lines) < 2:
            return None
        for tok in lines[1].split():
            minutes, _, seconds = tok.rstrip("s").partition("m")
            try:
                total += float(minutes) * 60 + float(seconds)
            except ValueError:
                return None
    return total


def planned_messages(round_dir, log_name, size):
    """rstream's message count, which it does not print (TOOL-SIZE.plan)."""
    for line in read_lines(os.path.join(round_dir, "%s-%d.plan" % (log_name, size))):
        if line.startswith("messages="):
            return int(line.split("=", 1)[1])
    return None


def round_results(rounds, log_name, size, parse):
    """One tool's parsed figures in each round, None where it failed."""
    return [parse(read_lines(os.path.join(d, "%s-%d.client.log" % (log_name, size))), size) for d in rounds]


def best_of_rounds(rounds, log_name, size, parse, metric, lower_is_better):
    """The best round's figures, plus `round` (1-based), `all_rounds`
    (the metric in each round, null where it failed), and that round's
    `cpu_s` and `planned_messages`; None if all failed."""
    results = round_results(rounds, log_name, size, parse)
    measured = [(r[metric], i, r) for i, r in enumerate(results) if r is not None and r.get(metric) is not None]
    if not measured:
        return None
    pick = min if lower_is_better else max
    _, index, best = pick(measured, key=lambda m: m[0])
    return best | {"round": index + 1,
                   "all_rounds": [None if r is None else r.get(metric) for r in results],
                   "cpu_s": cpu_seconds(rounds[index], log_name, size),
                   "planned_messages": planned_messages(rounds[index], log_name, size)}


# target -> (the ratio in row["ratios"] it holds, limit, comparison)
LATENCY_TARGETS = {
    "p50_at_most_1.3x_ib_write_lat": ("ours_p50_over_ib_write_lat_typical", TARGET_LAT_VS_IB, "le"),
    "below_rstream": ("ours_avg_over_rstream_avg", TARGET_LAT_VS_RSTREAM, "lt"),
    "p50_at_most_rsocket": ("ours_p50_over_rsocket_best_p50", TARGET_LAT_VS_RSOCKET, "le"),
}
BANDWIDTH_TARGETS = {
    "at_least_0.9x_ib_write_bw": ("ours_over_ib_write_bw", TARGET_BW_VS_IB, "ge"),
    "above_rstream": ("ours_over_rstream", TARGET_BW_VS_RSTREAM, "gt"),
}


# target -> what it compares, for the undecided list and the chart
TARGET_LABELS = {
    "p50_at_most_1.3x_ib_write_lat": "ours p50 / ib_write_lat",
    "below_rstream": "ours avg / rstream avg",
    "p50_at_most_rsocket": "ours p50 / rsocket's better p50",
    "at_least_0.9x_ib_write_bw": "ours / ib_write_bw",
    "above_rstream": "ours / rstream",
}


def judge_targets(row, targets):
    """Each target's ratio and verdict, from the rounds' own ratios
    (row["round_ratios"]: each round's two figures were measured seconds
    apart): their median. Not the best-of figures' ratio (row["ratios"]):
    the best of two tools can come from different rounds, and a best-of
    favours whichever tool varies more from round to round; in the TCG
    guest two rounds of one tool differ by 10-30 %, more than most ratios
    lie from their targets. Undecided: the rounds' ratios fall on both
    sides of the target, or fewer than two rounds have both figures (with
    none, the best-of ratio stands in): one round cannot show that
    another would agree."""
    row["target_ratios"], row["targets"], row["undecided"] = {}, {}, {}
    for name, (key, limit, op) in targets.items():
        paired = [r for r in row["round_ratios"][name] if r is not None]
        value = median_ratio(paired) if paired else row["ratios"][key]
        row["target_ratios"][name] = value
        row["targets"][name] = verdict(value, limit, op)
        row["undecided"][name] = value is not None and round_verdict.undecided(
            paired, lambda r, limit=limit, op=op: verdict(r, limit, op))


def per_round(rounds, log_name, size, parse, key):
    """`key` of one tool's figures in each round, None where it failed."""
    return [None if r is None else r.get(key) for r in round_results(rounds, log_name, size, parse)]


def round_ratios(numerators, denominators):
    """Each round's own ratio (its two figures were measured seconds apart),
    None where either figure is missing."""
    return [None if a is None or not b else round(a / b, 3) for a, b in zip(numerators, denominators)]


def median_ratio(ratios):
    """The median of the rounds' own ratios (round_verdict), to the 3
    decimals the tables print, None if no round has one."""
    value = round_verdict.median_of_rounds(ratios)
    return None if value is None else round(value, 3)


# transport_bench runs: their message counts include its warm-up.
OURS_TOOLS = ("ours", "ours_spin", "ours_vcopy", "ours_spin_vcopy", "tcp", "rsocket", "rsocket_spin")

# tool key -> (log name, parser, metric used to pick the best round)
LATENCY_TOOLS = {
    "ours": ("ours-lat", parse_ours_latency, "p50_us"),
    "ours_spin": ("ours-lat-spin", parse_ours_latency, "p50_us"),
    # ours with memcpy kept off the guest's emulated `rep movsb` (4 KiB up)
    "ours_vcopy": ("ours-lat-vcopy", parse_ours_latency, "p50_us"),
    # ... and busy-polling too: both of the guest's own costs taken out
    "ours_spin_vcopy": ("ours-lat-spin-vcopy", parse_ours_latency, "p50_us"),
    "tcp": ("tcp-lat", parse_ours_latency, "p50_us"),
    "ib_write_lat": ("ib_write_lat", parse_perftest_lat, "typical_us"),
    # Raw verbs with ours' mechanism: the receiver learns of each message
    # from a receive completion, busy-polling or sleeping on its event.
    "ib_send_lat": ("ib_send_lat", parse_perftest_lat, "typical_us"),
    "ib_send_lat_events": ("ib_send_lat_e", parse_perftest_lat, "typical_us"),
    "rstream": ("rstream-lat", parse_rstream, "avg_us"),
    # rsocket through transport_bench's own loop, timed as ours is:
    # waiting in its rpoll(), and busy-polling as rstream does.
    "rsocket": ("rsocket-lat", parse_ours_latency, "p50_us"),
    "rsocket_spin": ("rsocket-lat-spin", parse_ours_latency, "p50_us"),
}
BANDWIDTH_TOOLS = {
    "ours": ("ours-bw", parse_ours_bandwidth, "MiBps"),
    "ours_spin": ("ours-bw-spin", parse_ours_bandwidth, "MiBps"),
    "ours_vcopy": ("ours-bw-vcopy", parse_ours_bandwidth, "MiBps"),
    "ours_spin_vcopy": ("ours-bw-spin-vcopy", parse_ours_bandwidth, "MiBps"),
    "tcp": ("tcp-bw", parse_ours_bandwidth, "MiBps"),
    "ib_write_bw": ("ib_write_bw", parse_perftest_bw, "MiBps"),
    "ib_send_bw": ("ib_send_bw", parse_perftest_bw, "MiBps"),
    "ib_send_bw_events": ("ib_send_bw_e", parse_perftest_bw, "MiBps"),
    "rstream": ("rstream-bw", parse_rstream, "MiBps"),
    # rsocket through transport_bench's own loop: its reader waiting in
    # rpoll() as ours waits in wait(), and busy-polling as rstream does.
    "rsocket": ("rsocket-bw", parse_ours_bandwidth, "MiBps"),
    "rsocket_spin": ("rsocket-bw-spin", parse_ours_bandwidth, "MiBps"),
}


# --- ratios and targets ------------------------------------------------------------

def field(d, key):
    return None if d is None else d.get(key)


def ratio(a, b):
    return None if a is None or not b else round(a / b, 3)


def lowest(*values):
    known = [v for v in values if v is not None]
    return min(known) if known else None


def verdict(value, limit, op):
    """'met' / 'missed' against a display-only target; None when unknown."""
    if value is None:
        return None
    ok = {"le": value <= limit, "lt": value < limit,
          "ge": value >= limit, "gt": value > limit}[op]
    return "met" if ok else "missed"


def per_unit(cpu_s, units, scale):
    return None if cpu_s is None or not units else round(cpu_s * scale / units, 3)


def latency_messages(tool, result):
    """Messages both processes handled: a round trip is two."""
    if result is None:
        return None
    if tool in OURS_TOOLS:
        return 2 * (result["iters"] + OURS_WARMUP_ROUND_TRIPS)
    if tool in PERFTEST_LAT:
        return 2 * result["iters"]
    return result.get("planned_messages")


def bandwidth_mib(tool, result, size):
    if result is None:
        return None
    if tool in OURS_TOOLS:
        return (result["messages"] * size + OURS_WARMUP_BYTES) / MIB
    if tool in PERFTEST_BW:
        return result["iters"] * size / MIB
    planned = result.get("planned_messages")
    return None if planned is None else planned * size / MIB


def latency_row(rounds, size):
    row = {"size": size}
    for tool, (log, parse, metric) in LATENCY_TOOLS.items():
        row[tool] = best_of_rounds(rounds, log, size, parse, metric, lower_is_better=True)
        if row[tool] is not None:
            # CPU of client and server together per message: what a
            # message costs, busy-polling tools included (they burn a core
            # per process whatever the load).
            row[tool]["cpu_us_per_message"] = per_unit(row[tool]["cpu_s"], latency_messages(tool, row[tool]), 1e6)
    ib_typ = field(row["ib_write_lat"], "typical_us")
    r = {"ours_p50_over_ib_write_lat_typical": ratio(field(row["ours"], "p50_us"), ib_typ),
         "ours_avg_over_rstream_avg":
         ratio(field(row["ours"], "avg_us"), field(row["rstream"], "avg_us")),
         "ours_p50_over_tcp_p50": ratio(field(row["ours"], "p50_us"), field(row["tcp"], "p50_us")),
         "ours_spin_p50_over_ib_write_lat_typical":
         ratio(field(row["ours_spin"], "p50_us"), ib_typ),
         "ours_vcopy_p50_over_ib_write_lat_typical":
         ratio(field(row["ours_vcopy"], "p50_us"), ib_typ),
         "ours_vcopy_p50_over_ours_p50":
         ratio(field(row["ours_vcopy"], "p50_us"), field(row["ours"], "p50_us")),
         "ours_spin_vcopy_p50_over_ib_write_lat_typical":
         ratio(field(row["ours_spin_vcopy"], "p50_us"), ib_typ),
         # What the mechanism costs raw verbs, and ours against raw verbs
         # using it: busy-polling (spin) and sleeping on events (ours).
         "ib_send_lat_over_ib_write_lat": ratio(field(row["ib_send_lat"], "typical_us"), ib_typ),
         "ib_send_lat_events_over_ib_write_lat":
         ratio(field(row["ib_send_lat_events"], "typical_us"), ib_typ),
         "ours_spin_p50_over_ib_send_lat_typical":
         ratio(field(row["ours_spin"], "p50_us"), field(row["ib_send_lat"], "typical_us")),
         "ours_p50_over_ib_send_lat_events_typical":
         ratio(field(row["ours"], "p50_us"), field(row["ib_send_lat_events"], "typical_us")),
         # Like for like, the same loop and clock: each way of waiting
         # against rsocket's own, and ours against rsocket's better p50.
         "ours_p50_over_rsocket_p50": ratio(field(row["ours"], "p50_us"), field(row["rsocket"], "p50_us")),
         "ours_avg_over_rsocket_avg": ratio(field(row["ours"], "avg_us"), field(row["rsocket"], "avg_us")),
         "ours_spin_p50_over_rsocket_spin_p50":
         ratio(field(row["ours_spin"], "p50_us"), field(row["rsocket_spin"], "p50_us")),
         "ours_spin_avg_over_rsocket_spin_avg":
         ratio(field(row["ours_spin"], "avg_us"), field(row["rsocket_spin"], "avg_us")),
         "ours_p50_over_rsocket_best_p50":
         ratio(field(row["ours"], "p50_us"), lowest(field(row["rsocket"], "p50_us"),
                                                    field(row["rsocket_spin"], "p50_us")))}
    row["ratios"] = r

    def fig(tool, key):
        log, parse, _ = LATENCY_TOOLS[tool]
        return per_round(rounds, log, size, parse, key)

    rsocket_best = [lowest(a, b) for a, b in zip(fig("rsocket", "p50_us"), fig("rsocket_spin", "p50_us"))]
    row["round_ratios"] = {
        "p50_at_most_1.3x_ib_write_lat": round_ratios(fig("ours", "p50_us"), fig("ib_write_lat", "typical_us")),
        "below_rstream": round_ratios(fig("ours", "avg_us"), fig("rstream", "avg_us")),
        "p50_at_most_rsocket": round_ratios(fig("ours", "p50_us"), rsocket_best)}
    judge_targets(row, LATENCY_TARGETS)
    # The guest's own costs taken out (no target of its own): judged as
    # the targets are, on the median of the rounds' own ratios.
    spin_vcopy = round_ratios(fig("ours_spin_vcopy", "p50_us"), fig("ib_write_lat", "typical_us"))
    row["diagnostic_round_ratios"] = {"ours_spin_vcopy_p50_over_ib_write_lat": spin_vcopy}
    row["round_medians"] = {"ours_spin_vcopy_p50_over_ib_write_lat": median_ratio(spin_vcopy)}
    return row


def reader_sleeps_per_message(rounds, log_name, size, result):
    """How often the receiving end's (the server's) waits slept, per message
    of the round `result` came from, warm-up included on both sides of the
    division (the server counts its waits from the start); None for logs
    without a stats line (tcp's, older builds')."""
    if result is None or not result.get("messages"):
        return None
    messages = result["messages"] + max(OURS_WARMUP_BYTES // size, 2)  # bench_phases.cpp's warm-up count
    slept = waits_slept(read_lines(os.path.join(rounds[result["round"] - 1], "%s-%d.server.log" % (log_name, size))))
    return None if slept is None else round(slept / messages, 3)


def bandwidth_row(rounds, size):
    row = {"size": size}
    for tool, (log, parse, metric) in BANDWIDTH_TOOLS.items():
        row[tool] = best_of_rounds(rounds, log, size, parse, metric, lower_is_better=False)
        if row[tool] is not None:
            row[tool]["cpu_ms_per_mib"] = per_unit(row[tool]["cpu_s"], bandwidth_mib(tool, row[tool], size), 1e3)
            if tool in ("ours", "ours_spin"):
                row[tool]["reader_sleeps_per_message"] = reader_sleeps_per_message(rounds, log, size, row[tool])
    mine = field(row["ours"], "MiBps")
    ib = field(row["ib_write_bw"], "MiBps")
    r = {"ours_over_ib_write_bw": ratio(mine, ib),
         "ours_over_rstream": ratio(mine, field(row["rstream"], "MiBps")),
         "ours_over_tcp": ratio(mine, field(row["tcp"], "MiBps")),
         "ours_spin_over_ib_write_bw": ratio(field(row["ours_spin"], "MiBps"), ib),
         "ours_vcopy_over_ib_write_bw": ratio(field(row["ours_vcopy"], "MiBps"), ib),
         "ours_vcopy_over_ours": ratio(field(row["ours_vcopy"], "MiBps"), mine),
         "ours_spin_vcopy_over_ib_write_bw": ratio(field(row["ours_spin_vcopy"], "MiBps"), ib),
         "ib_send_bw_over_ib_write_bw": ratio(field(row["ib_send_bw"], "MiBps"), ib),
         "ib_send_bw_events_over_ib_write_bw":
         ratio(field(row["ib_send_bw_events"], "MiBps"), ib),
         "ours_spin_over_ib_send_bw":
         ratio(field(row["ours_spin"], "MiBps"), field(row["ib_send_bw"], "MiBps")),
         "ours_over_ib_send_bw_events":
         ratio(mine, field(row["ib_send_bw_events"], "MiBps")),
         # Like for like, the same loop: each way of waiting against rsocket's.
         "ours_over_rsocket": ratio(mine, field(row["rsocket"], "MiBps")),
         "ours_spin_over_rsocket_spin": ratio(field(row["ours_spin"], "MiBps"), field(row["rsocket_spin"], "MiBps"))}
    row["ratios"] = r

    def fig(tool):
        log, parse, _ = BANDWIDTH_TOOLS[tool]
        return per_round(rounds, log, size, parse, "MiBps")

    row["round_ratios"] = {"at_least_0.9x_ib_write_bw": round_ratios(fig("ours"), fig("ib_write_bw")),
                           "above_rstream": round_ratios(fig("ours"), fig("rstream"))}
    judge_targets(row, BANDWIDTH_TARGETS)
    # Like for like against rsocket, no target: also judged round by round.
    spin_vcopy = round_ratios(fig("ours_spin_vcopy"), fig("ib_write_bw"))
    row["diagnostic_round_ratios"] = {"ours_spin_vcopy_over_ib_write_bw": spin_vcopy}
    row["round_medians"] = {"ours_over_rsocket": median_ratio(round_ratios(fig("ours"), fig("rsocket"))),
                            "ours_spin_over_rsocket_spin":
                            median_ratio(round_ratios(fig("ours_spin"), fig("rsocket_spin"))),
                            "ours_spin_vcopy_over_ib_write_bw": median_ratio(spin_vcopy)}
    return row


def pinned_memory(raw):
    for line in read_lines(os.path.join(raw, "settings.log")):
        if line.startswith("settings "):
            kv = {k: int(v) for k, v in key_values(line).items() if v.isdigit()}
            return kv | {"budget_bytes": PINNED_BUDGET_BYTES,
                         "target_at_most_512KiB":
                         verdict(kv["pinned_bytes"], PINNED_BUDGET_BYTES, "le")}
    return None


def copy_speeds(raw):
    """copy_speed's MiB/s: [{"size", "memcpy_MiBps", "vector_MiBps"}] by size."""
    by_size = {}
    for kind in ("memcpy", "vector"):
        for line in read_lines(os.path.join(raw, "copy.%s.log" % kind)):
            if line.startswith("copy "):
                kv = key_values(line)
                row = by_size.setdefault(int(kv["size"]), {"memcpy_MiBps": None, "vector_MiBps": None})
                row[kind + "_MiBps"] = float(kv["MiBps"])
    return [{"size": size} | by_size[size] for size in sorted(by_size)]


def instruction_costs(raw):
    """perf/stream-cost.sh's counts: {"build": {...}, "sizes": [{"size",
    "instructions_per_message"}]}, or None when it did not run or failed
    (it prints no size line then)."""
    build, sizes = {}, []
    for line in read_lines(os.path.join(raw, "cost.log")):
        if not line.startswith("cost "):
            continue
        kv = key_values(line)
        try:
            if "size" in kv:
                sizes.append({"size": int(kv["size"]),
                              "instructions_per_message": int(kv["instructions_per_message"])})
            else:
                build = kv
        except (KeyError, ValueError):
            return None  # a line cut short: report nothing rather than part
    return {"build": build, "sizes": sizes} if sizes else None


def print_costs(costs):
    if costs is None:
        print("Instructions of ours' own code per message: - (perf/stream-cost.sh did not run or"
              " failed; scripts/bench said why)\n")
        return
    print("Instructions of ours' own code per message (callgrind on the host, ping-pong over the"
          " in-memory link; verbs calls and libc's memcpy not counted; %s, %s): %s\n"
          % (costs["build"].get("compiler", "?"), costs["build"].get("buildtype", "?"),
             ", ".join("%s %d" % (size_label(c["size"]), c["instructions_per_message"])
                       for c in costs["sizes"])))


def repeat_spread(bw, threshold):
    """How far apart two measurements of the same code came in this run.

    Below glibc's `rep movsb` threshold the vcopy run is ours again, byte
    for byte the same work: its 4 KiB bandwidth differs from ours' only by
    the run's noise. Returns |vcopy / ours - 1| there, or None where
    unknown (the threshold not recorded, or not above 4 KiB). Latency is
    no such gauge: at 4 KiB the guest's round trip is close to the
    transport's 500 us reply spin, so a run of either may spin or sleep."""
    try:
        if int(threshold) <= NOISE_PROBE_SIZE:
            return None
    except (TypeError, ValueError):
        return None
    row = next((r for r in bw if r["size"] == NOISE_PROBE_SIZE), None)
    q = None if row is None else ratio(field(row["ours_vcopy"], "MiBps"), field(row["ours"], "MiBps"))
    return None if q is None else round(abs(q - 1), 3)


def read_env(raw):
    env = {}
    for line in read_lines(os.path.join(raw, "env.txt")):
        if "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    return env


# --- printing ------------------------------------------------------------------------

def size_label(size):
    for unit, name in ((MIB, "MiB"), (1024, "KiB")):
        if size >= unit and size % unit == 0:
            return "%d %s" % (size // unit, name)
    return "%d B" % size


def num(value):
    return "-" if value is None else "%.2f" % value


def percent(share):
    return "-" if share is None else "%.1f%%" % (100 * share)


def target_cell(row, name):
    """A target's ratio (the rounds' median) and verdict; '?' when undecided (judge_targets)."""
    value, status = row["target_ratios"][name], row["targets"][name]
    if value is None:
        return "-"
    # Three decimals: a median of 1.304 printed as 1.30 would read as a
    # MISS of "<= 1.30".
    return "%.3f %s%s" % (value, "ok" if status == "met" else "MISS", "?" if row["undecided"][name] else "")


def print_undecided(rows, targets):
    """The rounds' own ratios of each target marked '?' in the table above."""
    lines = []
    for r in rows:
        for name in targets:
            label = TARGET_LABELS[name]
            if r.get("undecided", {}).get(name):
                lines.append("  %s %s: %s" % (size_label(r["size"]), label, ", ".join(
                    num(x) for x in r["round_ratios"][name])))
    if lines:
        print("?: undecided, the rounds' own ratios (each round's two figures taken seconds apart)"
              " fall on both sides of the target, or fewer than two rounds have both (-); by round:")
        print("\n".join(lines))
        print()


def print_table(title, header, rows):
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    print(title)
    for line in [header] + rows:
        print("  " + "  ".join(str(c).rjust(w) for c, w in zip(line, widths)))
    print()


def print_latency(rows):
    print_table(
        "One-way latency, us (round trip / 2, as ib_write_lat reports it)",
        ["size", "ours p50", "ours p99", "ours avg", "ours slept", "spin p50", "ib_lat typ", "ib_lat p99",
         "rstream avg", "tcp p50"],
        [[size_label(r["size"]), num(field(r["ours"], "p50_us")), num(field(r["ours"], "p99_us")),
          num(field(r["ours"], "avg_us")), percent(field(r["ours"], "client_slept_share")),
          num(field(r["ours_spin"], "p50_us")),
          num(field(r["ib_write_lat"], "typical_us")), num(field(r["ib_write_lat"], "p99_us")),
          num(field(r["rstream"], "avg_us")), num(field(r["tcp"], "p50_us"))] for r in rows])
    print_table(
        "Latency ratios (targets: ours p50 <= %.2fx ib_write_lat typical; ours avg below "
        "rstream avg; a target's ratio is the median of each round's own)" % TARGET_LAT_VS_IB,
        ["size", "ours p50/ib_lat", "ours avg/rstream", "ours p50/tcp", "spin p50/ib_lat"],
        [[size_label(r["size"]),
          target_cell(r, "p50_at_most_1.3x_ib_write_lat"), target_cell(r, "below_rstream"),
          num(r["ratios"]["ours_p50_over_tcp_p50"]),
          num(r["ratios"]["ours_spin_p50_over_ib_write_lat_typical"])]
         for r in rows if r["size"] != PERFTEST_FLOOR_SIZE])
    print_table(
        "Against rsocket in transport_bench's own loop, timed as ours is (rsocket: waiting in its"
        " rpoll(); spin: both busy-poll), us and ratios (target: ours p50 at or below rsocket's"
        " better p50, the median of each round's own ratio)",
        ["size", "rsocket p50", "rsocket avg", "rs spin p50", "rs spin avg", "ours p50/best",
         "ours p50/rs", "ours avg/rs", "spin p50/rs spin", "spin avg/rs spin"],
        [[size_label(r["size"]), num(field(r["rsocket"], "p50_us")), num(field(r["rsocket"], "avg_us")),
          num(field(r["rsocket_spin"], "p50_us")), num(field(r["rsocket_spin"], "avg_us")),
          target_cell(r, "p50_at_most_rsocket"),
          num(r["ratios"]["ours_p50_over_rsocket_p50"]), num(r["ratios"]["ours_avg_over_rsocket_avg"]),
          num(r["ratios"]["ours_spin_p50_over_rsocket_spin_p50"]),
          num(r["ratios"]["ours_spin_avg_over_rsocket_spin_avg"])]
         for r in rows if r["size"] != PERFTEST_FLOOR_SIZE])
    print_undecided([r for r in rows if r["size"] != PERFTEST_FLOOR_SIZE], LATENCY_TARGETS)


def print_latency_mechanism(rows):
    print_table(
        "Latency with ours' mechanism in raw verbs: ib_send_lat, a receive completion per"
        " message (busy-polling; -e: sleeping on its event), us and ratios",
        ["size", "send typ", "send -e typ", "send/ib_lat", "send -e/ib_lat", "spin p50/send",
         "ours p50/send -e"],
        [[size_label(r["size"]), num(field(r["ib_send_lat"], "typical_us")),
          num(field(r["ib_send_lat_events"], "typical_us")),
          num(r["ratios"]["ib_send_lat_over_ib_write_lat"]),
          num(r["ratios"]["ib_send_lat_events_over_ib_write_lat"]),
          num(r["ratios"]["ours_spin_p50_over_ib_send_lat_typical"]),
          num(r["ratios"]["ours_p50_over_ib_send_lat_events_typical"])]
         for r in rows if r["size"] != PERFTEST_FLOOR_SIZE])


def print_bandwidth_mechanism(rows):
    print_table(
        "Bandwidth with ours' mechanism in raw verbs: ib_send_bw, a receive completion per"
        " message (busy-polling; -e: sleeping on its event), MiB/s and ratios",
        ["size", "send", "send -e", "send/ib_bw", "send -e/ib_bw", "spin/send", "ours/send -e"],
        [[size_label(r["size"]), num(field(r["ib_send_bw"], "MiBps")),
          num(field(r["ib_send_bw_events"], "MiBps")),
          num(r["ratios"]["ib_send_bw_over_ib_write_bw"]),
          num(r["ratios"]["ib_send_bw_events_over_ib_write_bw"]),
          num(r["ratios"]["ours_spin_over_ib_send_bw"]),
          num(r["ratios"]["ours_over_ib_send_bw_events"])]
         for r in rows])
    print_table(
        "Bandwidth against rsocket in transport_bench's own loop (rsocket: its reader waiting in"
        " rpoll(); spin: both busy-poll, as rstream does), MiB/s and ratios (no target: like for"
        " like for the target against rstream; 'rounds': the median of each round's own ratio)",
        ["size", "rsocket", "rs spin", "ours/rs", "rounds", "spin/rs spin", "rounds"],
        [[size_label(r["size"]), num(field(r["rsocket"], "MiBps")), num(field(r["rsocket_spin"], "MiBps")),
          num(r["ratios"]["ours_over_rsocket"]), num(r["round_medians"]["ours_over_rsocket"]),
          num(r["ratios"]["ours_spin_over_rsocket_spin"]), num(r["round_medians"]["ours_spin_over_rsocket_spin"])]
         for r in rows])


def print_bandwidth(rows):
    print_table(
        "Streaming bandwidth, MiB/s (one direction, until the receiver has the last byte)",
        ["size", "ours", "spin", "ib_write_bw", "rstream", "tcp", "ours reader sleeps/msg"],
        [[size_label(r["size"]), num(field(r["ours"], "MiBps")),
          num(field(r["ours_spin"], "MiBps")), num(field(r["ib_write_bw"], "MiBps")),
          num(field(r["rstream"], "MiBps")), num(field(r["tcp"], "MiBps")),
          num(field(r["ours"], "reader_sleeps_per_message"))] for r in rows])
    print_table(
        "Bandwidth ratios (targets: ours >= %.2fx ib_write_bw; ours above rstream; a target's"
        " ratio is the median of each round's own)" % TARGET_BW_VS_IB,
        ["size", "ours/ib_bw", "ours/rstream", "ours/tcp", "spin/ib_bw"],
        [[size_label(r["size"]),
          target_cell(r, "at_least_0.9x_ib_write_bw"), target_cell(r, "above_rstream"),
          num(r["ratios"]["ours_over_tcp"]), num(r["ratios"]["ours_spin_over_ib_write_bw"])]
         for r in rows])
    print_undecided(rows, BANDWIDTH_TARGETS)


def diagnostic_cell(row, key, limit, op):
    """A diagnostic's median of the rounds' own ratios, marked '?' as a
    target's is (judge_targets) against the limit of the target it
    shadows: fewer than two rounds, or rounds on both sides of it."""
    ratios = [r for r in row["diagnostic_round_ratios"][key] if r is not None]
    if not ratios:
        return "-"
    undecided = round_verdict.undecided(ratios, lambda r: verdict(r, limit, op) == "met")
    return "%.3f%s" % (median_ratio(ratios), " ?" if undecided else "")


def print_vcopy(lat, bw, speeds, threshold):
    """What the guest's emulated `rep movsb` costs ours' user-space copies."""
    lat = [r for r in lat if r["ours_vcopy"] is not None]
    bw = [r for r in bw if r["ours_vcopy"] is not None]
    if not (speeds or lat or bw):
        return  # a run from before the vcopy measurements
    above = ("above %s B" % threshold) if threshold else "above a CPU-dependent threshold"
    if speeds:
        print_table(
            "memcpy in this guest, MiB/s (copy_speed; glibc uses `rep movsb` %s, which TCG"
            " emulates; vector: kept off it)" % above,
            ["size", "memcpy", "vector"],
            [[size_label(r["size"]), num(r["memcpy_MiBps"]), num(r["vector_MiBps"])]
             for r in speeds])
    if not (lat or bw):
        print("vcopy: no measurement of ours kept off `rep movsb` succeeded\n")
        return
    print_table(
        "ours with memcpy kept off `rep movsb` (vcopy: GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_"
        "threshold=1073741824): ours' own copies only, rxe's in the kernel still use it, as for"
        " every tool; spin+vcopy: busy-polling too, both of the guest's own costs taken out;"
        " rounds: the median of each round's own spin+vcopy ratio, '?' where the rounds fall on"
        " both sides of the target's limit or fewer than two have both figures; a diagnostic,"
        " not a target",
        ["size", "ours p50", "vcopy p50", "vcopy/ours", "ours/ib_lat", "vcopy/ib_lat",
         "spin+vcopy p50", "spin+vcopy/ib_lat", "rounds"],
        [[size_label(r["size"]), num(field(r["ours"], "p50_us")),
          num(field(r["ours_vcopy"], "p50_us")), num(r["ratios"]["ours_vcopy_p50_over_ours_p50"]),
          num(r["ratios"]["ours_p50_over_ib_write_lat_typical"]),
          num(r["ratios"]["ours_vcopy_p50_over_ib_write_lat_typical"]),
          num(field(r["ours_spin_vcopy"], "p50_us")),
          num(r["ratios"]["ours_spin_vcopy_p50_over_ib_write_lat_typical"]),
          diagnostic_cell(r, "ours_spin_vcopy_p50_over_ib_write_lat", TARGET_LAT_VS_IB, "le")]
         for r in lat])
    print_table(
        "... and streaming, MiB/s",
        ["size", "ours", "vcopy", "vcopy/ours", "ours/ib_bw", "vcopy/ib_bw", "spin+vcopy",
         "spin+vcopy/ib_bw", "rounds"],
        [[size_label(r["size"]), num(field(r["ours"], "MiBps")),
          num(field(r["ours_vcopy"], "MiBps")), num(r["ratios"]["ours_vcopy_over_ours"]),
          num(r["ratios"]["ours_over_ib_write_bw"]), num(r["ratios"]["ours_vcopy_over_ib_write_bw"]),
          num(field(r["ours_spin_vcopy"], "MiBps")), num(r["ratios"]["ours_spin_vcopy_over_ib_write_bw"]),
          diagnostic_cell(r, "ours_spin_vcopy_over_ib_write_bw", TARGET_BW_VS_IB, "ge")]
         for r in bw])


def print_cpu(lat, bw):
    print_table(
        "CPU per message, us (client + server process, user + system; latency runs)",
        ["size", "ours", "spin", "tcp", "ib_write_lat", "ib_send_lat", "send -e", "rstream", "rsocket",
         "rs spin"],
        [[size_label(r["size"])] + [num(field(r[t], "cpu_us_per_message"))
                                    for t in ("ours", "ours_spin", "tcp") + PERFTEST_LAT
                                    + ("rstream", "rsocket", "rsocket_spin")]
         for r in lat if r["size"] != PERFTEST_FLOOR_SIZE])
    print_table(
        "CPU per MiB moved, ms (client + server process, user + system; bandwidth runs)",
        ["size", "ours", "spin", "tcp", "ib_write_bw", "ib_send_bw", "send -e", "rstream", "rsocket",
         "rs spin"],
        [[size_label(r["size"])] + [num(field(r[t], "cpu_ms_per_mib"))
                                    for t in ("ours", "ours_spin", "tcp") + PERFTEST_BW
                                    + ("rstream", "rsocket", "rsocket_spin")]
         for r in bw])


def draw_chart(lat, bw, png, env):
    """The ratios that have targets, each bar green where it meets it; a
    verdict the rounds did not agree on (judge_targets) says so in its label."""
    where = ("two hosts, servers on %s" % env["peer"]) if env.get("peer") else "one Soft-RoCE guest run"
    bars = []
    for kind, rows, targets in (("latency", lat, LATENCY_TARGETS), ("bandwidth", bw, BANDWIDTH_TARGETS)):
        for r in rows:
            if r["size"] == PERFTEST_FLOOR_SIZE:
                continue
            for name in targets:
                value = r["target_ratios"][name]
                if value is not None:
                    label = "%s %s: %s%s" % (kind, size_label(r["size"]), TARGET_LABELS[name],
                                             " ?" if r["undecided"][name] else "")
                    bars.append((label, value, r["targets"][name] == "met"))
    return ratio_chart.draw(
        bars, png,
        "pg_rdma transport against raw verbs (perftest) and rsocket, %s\\n"
        "green: target met (latency <= %.1fx ib_write_lat, below rstream, p50 at most rsocket's;"
        " bandwidth >= %.1fx ib_write_bw and above rstream); ?: the rounds' own ratios disagree"
        % (where, TARGET_LAT_VS_IB, TARGET_BW_VS_IB),
        "ratio")


# --- request/response, several pairs at once --------------------------------------

# run-transport-bench.sh's PAIRS, PAIRS_SIZE (env.txt says; these if not)
PAIRS = 8
PAIRS_SIZE = 64
# tool key -> (log name prefix, parser); all report an average one-way time
PAIRS_TOOLS = {
    "tcp": ("pairs-tcp", parse_ours_latency),
    "ours": ("pairs-ours", parse_ours_latency),
    "ib_send_lat_events": ("pairs-ib_send_lat_e", parse_perftest_lat),
}


def pairs_round(round_dir, prefix, parse, pairs, size):
    """One tool's batch of pairs in one round, None unless every pair
    reported:
      round_trips_per_s: the sum of each pair's 1 / (its average round
        trip, twice the one-way average it prints), from each tool's own
        clock. Setup is left out, but pairs whose timed parts do not
        overlap fully (a slow setup, an early finish) run with less
        contention for a while, which flatters a tool with a slow setup;
      wall_round_trips_per_s: all pairs' timed round trips over the time
        from the first client's start to the last one's end, setup
        included, which penalizes the same tool instead;
      slept_share: ours' and tcp's clients' share of waits that slept
        (transport_bench's stats line), averaged over the pairs."""
    total, trips, starts, ends, slept = 0.0, 0, [], [], []
    for i in range(1, pairs + 1):
        result = parse(read_lines(os.path.join(round_dir, "%s-%d.client.log" % (prefix, i))), size)
        if result is None or not result.get("iters"):
            return None
        # A pair that ran but whose clock failed (perftest, above) leaves
        # the wall figure only.
        total = None if total is None or not result.get("avg_us") else total + 1e6 / (2 * result["avg_us"])
        trips += result["iters"]
        if result.get("client_slept_share") is not None:
            slept.append(result["client_slept_share"])
        wall = read_lines(os.path.join(round_dir, "%s-%d.wall" % (prefix, i)))
        if len(wall) >= 2 and wall[0].strip().isdigit() and wall[1].strip().isdigit():
            starts.append(int(wall[0]))
            ends.append(int(wall[1]))
    seconds = (max(ends) - min(starts)) / 1e9 if len(starts) == pairs else None
    return {"round_trips_per_s": None if total is None else round(total, 1),
            "wall_round_trips_per_s": round(trips / seconds, 1) if seconds else None,
            "slept_share": round(sum(slept) / len(slept), 3) if slept else None}


def pairs_row(rounds, env):
    """Each tool's best round (most round trips per second) and all of
    them, and the ratios of the best figures and within each round."""
    pairs = int(env.get("pairs") or PAIRS)
    size = int(env.get("pairs_size") or PAIRS_SIZE)
    row = {"pairs": pairs, "size": size}
    by_round = {tool: [pairs_round(d, prefix, parse, pairs, size) for d in rounds]
                 for tool, (prefix, parse) in PAIRS_TOOLS.items()}
    for tool, results in by_round.items():
        # The best round by the tool's own clock, or by the wall where its
        # clock failed in every round.
        measured = [(r["round_trips_per_s"], i) for i, r in enumerate(results)
                    if r is not None and r["round_trips_per_s"] is not None]
        measured = measured or [(r["wall_round_trips_per_s"], i) for i, r in enumerate(results)
                                if r is not None and r["wall_round_trips_per_s"] is not None]
        row[tool] = None
        if measured:
            _, index = max(measured)
            row[tool] = results[index] | {"round": index + 1,
                                          "all_rounds": [None if r is None else r["round_trips_per_s"]
                                                         for r in results]}

    def ratios(rate):
        return {"ours_over_tcp": ratio(rate("ours"), rate("tcp")),
                "ib_send_lat_events_over_tcp": ratio(rate("ib_send_lat_events"), rate("tcp")),
                "ours_over_ib_send_lat_events": ratio(rate("ours"), rate("ib_send_lat_events"))}

    row["ratios"] = ratios(lambda tool: field(row[tool], "round_trips_per_s"))
    row["ratios_wall"] = ratios(lambda tool: field(row[tool], "wall_round_trips_per_s"))
    # Within a round the tools ran back to back: no best-of-rounds pairing.
    row["ratios_by_round"] = [ratios(lambda tool, k=k: field(by_round[tool][k], "round_trips_per_s"))
                              for k in range(len(rounds))]
    return row


def print_pairs(row):
    def rates(key):
        return [num(field(row[t], key)) for t in ("ours", "tcp", "ib_send_lat_events")]

    def ratio_cells(r):
        return [num(r["ours_over_tcp"]), num(r["ib_send_lat_events_over_tcp"]),
                num(r["ours_over_ib_send_lat_events"])]

    print_table(
        "Request/response, %d pairs at once, %s: round trips per second of all pairs (no target;"
        " send -e is raw verbs sleeping on completion events, as ours does when it sleeps)"
        % (row["pairs"], size_label(row["size"])),
        ["figure", "ours", "tcp", "send -e", "ours/tcp", "send -e/tcp", "ours/send -e"],
        [["pairs' own clocks"] + rates("round_trips_per_s") + ratio_cells(row["ratios"]),
         ["wall, setup included"] + rates("wall_round_trips_per_s") + ratio_cells(row["ratios_wall"])]
        + [["round %d" % (k + 1), "", "", ""] + ratio_cells(r) for k, r in enumerate(row["ratios_by_round"])]
        + [["waits that slept", percent(field(row["ours"], "slept_share")), "-", "all", "", "", ""]])
    events = row["ib_send_lat_events"]
    if events is not None and events["round_trips_per_s"] is None:
        print("send -e: perftest timed none of its rounds (in a pair that ran, it prints inf where its"
              " CPU-frequency calibration failed under the load: \"r^2 < 0.9\"); only the wall figure is its\n")


def print_pinned(pinned):
    if pinned is None:
        print("Pinned memory per connection: - (transport_bench settings failed)")
        return
    print("Pinned memory per connection: %.1f KiB = rx %d + tx %d + (credits %d + send queue %d)"
          " x %d B  (target <= 512 KiB: %s)"
          % (pinned["pinned_bytes"] / 1024, pinned["rx_buffer_size"], pinned["tx_buffer_size"],
             pinned["credits"], pinned["send_queue_depth"], pinned["control_message_size"],
             "ok" if pinned["target_at_most_512KiB"] == "met" else "MISS"))


def print_header(env):
    print("pg_rdma transport benchmark: %s at %s, kernel %s, %s vCPUs, started %s, took %s s;"
          " best of %s round(s) of %s planned"
          % (env.get("device", "?"), env.get("address", "?"), env.get("kernel", "?"),
             env.get("cpus", "?"), env.get("started", "?"), env.get("duration_s", "?"),
             env.get("rounds_run", "?"), env.get("rounds", "?")))
    if env.get("peer"):
        print("Two hosts: clients here, servers on %s (%s, kernel %s, %s CPUs)."
              % (env["peer"], env.get("peer_device", "?"), env.get("peer_kernel", "?"), env.get("peer_cpus", "?")))
    else:
        print("Soft-RoCE in a TCG guest: only the ratios mean anything.", end=" ")
    print("ours and tcp wait in poll()"
          " (ours after its adaptive spin), rsocket in its rpoll(), ib_send_* -e on completion"
          " events; spin (ours spinning up to 100 ms in wait()), rsocket spin, the other perftest"
          " tools and rstream busy-poll.\n")


def print_noise(spread):
    if spread is None:
        return
    print("%sours' bandwidth measured twice at %s (the vcopy run is the same work below glibc's"
          " `rep movsb` threshold) differed by %s: a ratio closer than that to its target is not"
          " decided by this run" % ("WARNING: " if spread > NOISY_REPEAT_SPREAD else "noise: ",
                                   size_label(NOISE_PROBE_SIZE), percent(spread)))


def print_counter(counter):
    if counter is None:
        return
    print("cycle counter timing transport_bench's round trips: %d measurements at %.3f-%.3f MHz"
          " (median %.3f, highest %.4f %% above it)" % (counter["measurements"], counter["min_mhz"],
                                                         counter["max_mhz"], counter["median_mhz"],
                                                         100 * counter["above_median"]))
    if counter["stepped"]:
        print("WARNING: the cycle counter's rate was more than %.1f %% above the run's median in %s:"
              " it stepped forward there, and that measurement's figures are low by about as much"
              % (100 * COUNTER_SPREAD_LIMIT, ", ".join(counter["stepped"])))


def print_warnings(lat, bw, env):
    stalls = sum(field(r[k], "stalls") or 0 for r in lat + bw
                 for k in ("ours", "ours_spin", "ours_vcopy", "ours_spin_vcopy"))
    if stalls:
        print("WARNING: %d waits of ours ran out a 1 s poll() slice and then progressed (missed"
              " wakeups); see the raw logs" % stalls)
    for warning in (busy_host_warning(env), slow_clock_warning(env)):
        if warning:
            print(warning)
    if env.get("failed"):
        print("WARNING: these measurements failed: %s" % env["failed"])


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    raw, out_json = argv[1], argv[2]
    env = read_env(raw)
    rounds = round_dirs(raw)
    lat = [latency_row(rounds, s) for s in [PERFTEST_FLOOR_SIZE] + LAT_SIZES]
    bw = [bandwidth_row(rounds, s) for s in BW_SIZES]
    pinned = pinned_memory(raw)
    pairs = pairs_row(rounds, env)
    report = {"benchmark": "transport", "environment": env,
              "units": {"latency": "microseconds, one-way (round trip / 2)",
                        "request_response_pairs": "round trips per second, all pairs together",
                        "bandwidth": "MiB/s (2^20 bytes per second), one direction",
                        "pinned_memory": "bytes"},
              "selection": "figures: per tool and size, the best of %d rounds; targets: the median of"
                           " each round's own ratio" % len(rounds),
              "note": ("two hosts, %s to %s%s" % (env.get("device"), env.get("peer_device"),
                                                   ": two Soft-RoCE guests, TCG's figures" if env.get("guest") == "1"
                                                   else ": real devices' figures")
                       if env.get("peer") else
                       "Soft-RoCE in a TCG guest: absolute figures say nothing about real "
                       "NICs; compare the ratios."),
              "latency": lat, "bandwidth": bw, "pinned_memory": pinned,
              "request_response_pairs": pairs,
              "copy_MiBps": copy_speeds(raw),
              "instructions_per_message": instruction_costs(raw),
              "bandwidth_repeat_spread": repeat_spread(bw, env.get("rep_movsb_threshold")),
              "cycle_counter": counter_rates(rounds),
              "raw_logs": os.path.abspath(raw)}
    png = out_json[:-5] + ".png" if out_json.endswith(".json") else out_json + ".png"
    if draw_chart(lat, bw, png, env):
        report["chart"] = png
    with open(out_json, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print_header(env)
    print_latency(lat)
    print_latency_mechanism(lat)
    print_bandwidth(bw)
    print_bandwidth_mechanism(bw)
    print_pairs(pairs)
    print_vcopy(lat, bw, report["copy_MiBps"], env.get("rep_movsb_threshold"))
    print_cpu(lat, bw)
    print_costs(report["instructions_per_message"])
    print_pinned(pinned)
    print_counter(report["cycle_counter"])
    print_warnings(lat, bw, env)
    print_noise(report["bandwidth_repeat_spread"])
    if "chart" in report:
        print("chart: %s" % report["chart"])
    print("raw logs: %s" % os.path.abspath(raw))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
