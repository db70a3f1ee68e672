# SPDX-License-Identifier: Apache-2.0
"""The bench's report: every line it prints (also kept for
WORK/bench-results.txt), the tables of rows, the ratio lines' figures and
verdicts, the header of a run, and at the end the results in
WORK/bench-results.json and one SVG chart per workload (scripts/benchchart.py).
How to read all of it: docs/benchmark.md.
"""

import json
import os
import time

from .harness import MiB, cpu_model, loadavg, log

LEGEND = ("records/s: records served per second (a tree pass serves each record of the epoch "
          "once as .npy, once in .safetensors); served MB/s: batch-file bytes/s; TFRecord MB/s: "
          "TFRecord input bytes/s; CPU s: the FUSE daemon's during the read (FUSE rows), the "
          "timed loop's (Python, npm; PyTorch: with its DataLoader workers, the daemon's in the "
          "note), the process's (others); MB = 10^6 bytes")

OUT_LINES = []


def say(line=""):
    print(line, flush=True)
    OUT_LINES.append(line)


def fmt_rate(v, digits=0):
    if v is None:
        return "-"
    if v >= 100:
        return "{:,.0f}".format(v)
    return "{:,.{}f}".format(v, max(digits, 1))


class Table:
    COLS = ("", "records/s", "TFRecord MB/s", "served MB/s", "peak RSS MiB", "seconds", "CPU s")

    def __init__(self):
        self.rows = []

    def add(self, label, rec_s=None, in_mb=None, out_mb=None, rss=None, secs=None, cpu=None,
            note=""):
        self.rows.append((label, rec_s, in_mb, out_mb, rss, secs, cpu, note))
        return rec_s

    def emit(self):
        w0 = max(len(r[0]) for r in self.rows)
        head = "%-*s %12s %14s %12s %13s %8s %7s" % ((w0,) + self.COLS)
        say(head)
        say("-" * len(head))
        for label, rec_s, in_mb, out_mb, rss, secs, cpu, note in self.rows:
            say("%-*s %12s %14s %12s %13s %8s %7s%s" % (
                w0, label, fmt_rate(rec_s), fmt_rate(in_mb, 1), fmt_rate(out_mb, 1),
                "-" if rss is None else "%.0f" % (rss / MiB),
                "-" if secs is None else "%.2f" % secs,
                "-" if cpu is None else "%.2f" % cpu, ("  " + note) if note else ""))


def fmt_q(q, target, pct=True, digits=None):
    """q as a percentage (or "1.23x"), with as many decimals as it takes for the
    printed figure to fall on the same side of target as q itself."""
    scale, unit = (100, "%") if pct else (1, "x")
    d = (0 if pct else 2) if digits is None else digits
    while True:
        text = "%.*f" % (d, q * scale)
        if (float(text) >= target * scale) == (q >= target) or d >= 4:
            return text + unit
        d += 1


def verdict(ok):
    return "PASS" if ok else "MISS"


def fmt_parts(parts):
    if not parts:
        return ""
    return "; RSS at the end: anon %.0f MiB, file-backed %.0f MiB" % (parts[0] / MiB,
                                                                       parts[1] / MiB)


def header(args, argv):
    """The run's first lines: the machine, the page cache, the legend, the
    load. Returns the run's description for the charts (each result
    carries its id, so a chart is drawn only from numbers of one run)."""
    cpu = cpu_model()
    say("batchfs benchmark (%s run) — %s, %d cores, kernel %s, %s" % (
        "--quick" if args.quick else "full", cpu, os.cpu_count(), os.uname().release,
        time.strftime("%Y-%m-%d %H:%M")))
    say("page cache: " + ("dropped (echo 3 > drop_caches) before the floor and the cold epoch"
                          if args.drop_caches else
                          "warm: the shards are read once before the floor is timed (no "
                          "--drop-caches), so the floor and the cold epoch read (almost) no "
                          "disk; the kernel may still reclaim idle pages between steps"))
    say(LEGEND)
    load0 = loadavg()
    say("load average at start: %.2f on %d cores%s" % (
        load0, os.cpu_count(), "  WARNING: other processes are using the CPU; timings are "
        "pessimistic and noisy (compare CPU s)" if load0 > 0.5 else ""))
    return {"id": "%s-%d" % (time.strftime("%Y%m%d-%H%M%S"), os.getpid()),
            "machine": "%s, %d cores, kernel %s, load %.1f at start" % (
                cpu, os.cpu_count(), os.uname().release, load0),
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "command": " ".join(["scripts/bench"] + argv)}


def finish(args, run, results, t_start):
    """The results and charts of the workloads' tables, the wall time, and
    every line printed into WORK/bench-results.txt."""
    say()
    chart_dir = args.chart_dir or os.path.join(args.work, "charts")
    try:
        import benchchart
        with open(os.path.join(args.work, "bench-results.json"), "w") as f:
            json.dump(benchchart.saved(run, results), f, indent=1)
        for p in benchchart.write_charts(run, results, chart_dir):
            say("chart: %s" % p)
    except ImportError as e:
        say("charts: n/a (%s; Debian's python3-matplotlib draws them)" % e)
    say("total wall time of the benchmark: %.0f s" % (time.perf_counter() - t_start))
    with open(os.path.join(args.work, "bench-results.txt"), "w") as f:
        f.write("\n".join(OUT_LINES) + "\n")
    log("written to %s" % os.path.join(args.work, "bench-results.txt"))
