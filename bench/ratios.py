#!/usr/bin/env python3
"""Turns placement_bench JSON output into the Markdown table of docs/benchmarks.md.

Usage: placement_bench --benchmark_out=run.json --benchmark_out_format=json
       python3 bench/ratios.py run.json [more.json ...]

Every benchmark's label names its baseline ("vs <name>"); the table gives each median next to
its baseline's median from the same run and the ratio baseline / benchmark (above 1: faster
than the baseline). Times are CPU time (the machine is shared; wall time is listed too).
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


def main(paths):
    rows = {}
    order = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
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
                "error": b.get("error_message"),
            }
            if name not in order:
                order.append(name)
    print("| benchmark | median CPU | median wall | baseline | baseline CPU | speed-up | counters |")
    print("|---|---:|---:|---|---:|---:|---|")
    for name in order:
        r = rows[name]
        base = r["label"][3:] if r["label"].startswith("vs ") else ""
        b = rows.get(base)
        ratio = f"{b['cpu'] / r['cpu']:.3g}×" if b and r["cpu"] > 0 else "—"
        print(f"| `{name}` | {fmt_time(r['cpu'])} | {fmt_time(r['wall'])} | "
              f"{'`' + base + '`' if base else '(baseline)'} | "
              f"{fmt_time(b['cpu']) if b else '—'} | {ratio} | {' '.join(r['counters'])} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
