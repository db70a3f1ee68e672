# SPDX-License-Identifier: Apache-2.0
"""benchchart — one SVG chart per workload of a scripts/bench run.

    write_charts(run, results, chart_dir) -> [paths written]
    scripts/benchchart.py WORK/bench-results.json [--chart-dir DIR] [--png]
        (draws them again from the run's saved result records)

`run` describes the run: {"id": unique per run, "machine": ..., "date": ...,
"command": the command line}. `results` are the run's per-workload result
records (scripts/bench.py's bench_workload): each holds "name", "run" (the
id of the run that measured it) and "rows", the table rows in order, each
{"label", "rec_s"} (rec_s None where a row was not measured). A chart is
made only from numbers of one run: a result whose "run" is not run["id"]
makes write_charts raise ValueError before anything is written.

Each chart is horizontal bars of records/s on a log scale, one per measured
row, coloured by what it is (batchfs; its baselines: the floor, the null
FUSE ceilings, its own decoder alone; peers: other readers of the same
shards), each bar labelled with its records/s and its ratio to batchfs's
cold first epoch (the reference bar reads 1.00x); the caption gives the
machine, the date and the command of the run. Bars carry SVG ids
("bar-0", "bar-1", ... in row order) and text stays text (svg.fonttype
none), so the chart can be checked and searched.
"""

import math
import os

REFERENCE = "batchfs cold first epoch (fresh mount)"

KIND_COLOURS = {"batchfs": "#1f77b4", "baseline": "#9e9e9e", "peer": "#ff7f0e"}
KIND_NAMES = {"batchfs": "batchfs", "baseline": "baselines (floor, FUSE ceiling, decoder alone)",
              "peer": "peers (other readers)"}


def kind_of(label):
    """What a bench row measures, from its label (bench.py's row names)."""
    low = label.lower()
    if low.startswith("batchfs") or low.startswith("pytorch: dataloader(2 workers) over batch") \
            or low.startswith("pytorch: all/"):
        return "batchfs"
    if low.startswith("raw cat") or low.startswith("null fuse") or low.startswith("decoder alone"):
        return "baseline"
    return "peer"


def fmt_rate(v):
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return "%.3g%s" % (v / div, unit)
    return "%.3g" % v


def fmt_ratio(q):
    if q >= 10:
        return "%.0fx" % q
    if q >= 0.095:
        return "%.2gx" % q if q < 1 else "%.2fx" % q
    return "%.1gx" % q


def check_same_run(run, results):
    """ValueError unless every result was measured by `run`."""
    if not run or not run.get("id"):
        raise ValueError("benchchart: the run has no id")
    other = sorted({str(r.get("run")) for r in results if r.get("run") != run["id"]})
    if other:
        raise ValueError("benchchart: results of other runs (%s) given with run %s: a chart "
                         "is made only from numbers of the same run" % (", ".join(other),
                                                                       run["id"]))


def bars_of(result):
    """[(label, rec_s, kind, ratio or None)] of a result's measured rows."""
    rows = [(r["label"], float(r["rec_s"])) for r in result.get("rows", [])
            if r.get("rec_s") is not None and r["rec_s"] > 0]
    ref = next((v for label, v in rows if label == REFERENCE), None)
    return [(label, v, kind_of(label), v / ref if ref else None) for label, v in rows]


def write_chart(run, result, path, fmt="svg"):
    """One workload's chart as SVG at path; returns its bars (bars_of)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    bars = bars_of(result)
    if not bars:
        raise ValueError("benchchart: workload %s has no measured row" % result.get("name"))
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "batchfs-bench",
                                "font.size": 9}):
        fig, ax = plt.subplots(figsize=(11, 1.9 + 0.34 * len(bars)))
        y = list(range(len(bars)))[::-1]  # first row at the top
        lo = min(v for _, v, _, _ in bars)
        hi = max(v for _, v, _, _ in bars)
        base = 10 ** math.floor(math.log10(lo))  # a decade boundary below every bar
        if base > lo / 2:
            base /= 10
        for i, (label, v, kind, q) in enumerate(bars):
            patch = ax.barh(y[i], v - base, left=base, color=KIND_COLOURS[kind], height=0.7)[0]
            patch.set_gid("bar-%d" % i)
            text = "%s rec/s" % fmt_rate(v)
            if q is not None:
                text += "   %s" % fmt_ratio(q)
            ax.text(v * 1.08, y[i], text, va="center", ha="left", fontsize=8, gid="value-%d" % i)
        ax.set_xscale("log")
        ax.set_xlim(base, hi * 30)
        ax.set_yticks(y)
        ax.set_yticklabels([label for label, _, _, _ in bars])
        ax.set_xlabel("records/s (log scale); on each bar: records/s and its ratio to "
                      "batchfs's cold first epoch")
        fig.suptitle("batchfs benchmark, workload '%s' (%s records)" % (
            result.get("name"), "{:,}".format(result["records"]) if "records" in result else "?"))
        kinds = [k for k in ("batchfs", "baseline", "peer") if any(b[2] == k for b in bars)]
        ax.legend(handles=[Patch(color=KIND_COLOURS[k], label=KIND_NAMES[k]) for k in kinds],
                  loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(kinds), fontsize=8,
                  frameon=False)
        ax.grid(axis="x", which="major", alpha=0.3)
        fig.text(0.01, 0.005, "%s, %s\nrun %s: %s" % (
            run.get("machine", "?"), run.get("date", "?"), run["id"], run.get("command", "?")),
            fontsize=7, ha="left", va="bottom", gid="caption", linespacing=1.4)
        fig.tight_layout(rect=(0, 0.45 / fig.get_figheight(), 1, 1))
        if fmt == "svg":
            fig.savefig(path, format="svg", metadata={"Date": None})
        else:
            fig.savefig(path, format=fmt, dpi=90)
        plt.close(fig)
    return bars


def write_charts(run, results, chart_dir, fmt="svg"):
    """A chart per result: chart_dir/bench-NAME.svg. Returns the paths."""
    check_same_run(run, results)
    os.makedirs(chart_dir, exist_ok=True)
    paths = []
    for r in results:
        p = os.path.join(chart_dir, "bench-%s.%s" % (r["name"], fmt))
        write_chart(run, r, p, fmt)
        paths.append(p)
    return paths


def saved(run, results):
    """What scripts/bench saves for the charts: the run and, per workload,
    the fields the charts use."""
    return {"run": run, "results": [{k: r[k] for k in ("name", "records", "run", "rows")
                                     if k in r} for r in results]}


def main(argv=None):
    import argparse
    import json
    ap = argparse.ArgumentParser(prog="scripts/benchchart.py",
                                 description="Draw the charts of one scripts/bench run again "
                                             "from its WORK/bench-results.json.")
    ap.add_argument("results", help="bench-results.json written by scripts/bench")
    ap.add_argument("--chart-dir", default=".", help="where the charts go (default: .)")
    ap.add_argument("--png", action="store_true", help="PNG instead of SVG (to look at)")
    args = ap.parse_args(argv)
    with open(args.results) as f:
        data = json.load(f)
    for p in write_charts(data["run"], data["results"], args.chart_dir,
                          "png" if args.png else "svg"):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
