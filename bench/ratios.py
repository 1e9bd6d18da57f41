#!/usr/bin/env python3
"""Turns placement_bench JSON output into the Markdown table of docs/benchmarks.md.

Usage: placement_bench --benchmark_out=run.json --benchmark_out_format=json
       python3 bench/ratios.py run.json [run2.json ...]

Every benchmark's label names its baseline ("vs <name>"); the table gives each median next to
the ratio baseline / benchmark from the same run (above 1: faster than the baseline). Times
are CPU time, which a shared machine disturbs less than wall time. With several files, each
is one run of the whole suite and gets its own columns, so the spread is visible.
"""

import json
import re
import sys

TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
COUNTERS = ("decisions/s", "cycles/s", "options", "placed", "unplaceable", "rejections",
            "victims", "same_choice", "differing", "mem_used_pct")


def fmt_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.1f} ms"
    return f"{us:.1f} µs"


def fmt_counter(name, value):
    if name.endswith("/s"):
        return f"{name}={value:,.0f}"
    if name == "mem_used_pct":
        return f"mem={value:.1f}%"
    return f"{name}={value:g}"


def load(path):
    """{name: row} of one run's medians, in the order the suite ran them."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        # Strip Google Benchmark's "/iterations:N/repeats:N" so labels match names.
        name = re.sub(r"/(iterations|repeats):\d+", "", b["run_name"])
        scale = TO_US[b.get("time_unit", "ns")]
        rows[name] = {
            "cpu": b["cpu_time"] * scale,
            "wall": b["real_time"] * scale,
            "label": b.get("label", ""),
            "counters": [fmt_counter(c, b[c]) for c in COUNTERS if c in b],
        }
    return rows


def main(paths):
    runs = [load(p) for p in paths]
    order = []
    for run in runs:
        order += [n for n in run if n not in order]
    head = "| benchmark | baseline |"
    rule = "|---|---|"
    for i in range(len(runs)):
        tag = f" (run {i + 1})" if len(runs) > 1 else ""
        head += f" median CPU{tag} | wall{tag} | speed-up{tag} |"
        rule += "---:|---:|---:|"
    print(head + " counters |")
    print(rule + "---|")
    for name in order:
        label = next((run[name]["label"] for run in runs if name in run), "")
        base = label[3:] if label.startswith("vs ") else ""
        line = f"| `{name}` | {'`' + base + '`' if base else '(baseline)'} |"
        for run in runs:
            r = run.get(name)
            if r is None:
                line += " — | — | — |"
                continue
            b = run.get(base)
            ratio = f"{b['cpu'] / r['cpu']:.3g}×" if b and r["cpu"] > 0 else "—"
            line += f" {fmt_time(r['cpu'])} | {fmt_time(r['wall'])} | {ratio} |"
        last = next(run[name] for run in reversed(runs) if name in run)
        print(line + f" {' '.join(last['counters'])} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
