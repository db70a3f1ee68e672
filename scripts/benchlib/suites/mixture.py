# SPDX-License-Identifier: Apache-2.0
"""The mixture suite (docs/contract.md, "Mixtures"): the 'small' workload's
shards split into three sources (60%, 30%, 10% of the records, hard links
to the same files) and mounted as a mixture weighted by their sizes with
an epoch of all the records, against one mount of the same shards: the
records/s of one epoch's batch files (.safetensors, a fresh mount each
run, the two alternated, the median of the runs) and the time from the
daemon's start to the first batch read. Target: the mixture at >= 90% of
the single mount's records/s.
"""

import json
import os
import time

from ..data import WORKLOADS, framing, generate, shard_paths
from .. import harness
from ..harness import log
from ..report import fmt_q, fmt_rate, say, verdict

TARGET = 0.90
SPLIT = (6, 3, 1)  # shards of each source, of 10


def _sources(work, src):
    """Three folders of hard links to src's 10 shards; their record counts."""
    shards = shard_paths(src)
    if len(shards) != sum(SPLIT):
        raise RuntimeError("mixture: %d shards, not %d" % (len(shards), sum(SPLIT)))
    dirs, counts, k = [], [], 0
    for i, n in enumerate(SPLIT):
        d = os.path.join(work, "mix-src%d" % i)
        os.makedirs(d, exist_ok=True)
        c = 0
        for p in shards[k:k + n]:
            q = os.path.join(d, os.path.basename(p))
            if not os.path.exists(q):
                os.link(p, q)
            c += len(framing(p)[0])
        k += n
        dirs.append(d)
        counts.append(c)
    return dirs, counts


def _epoch(m, tools, mnt, t_start):
    """(first batch seconds since t_start, the whole epoch's readtree JSON)."""
    with open(os.path.join(mnt, "epoch-0000", "batch-000000.safetensors"), "rb") as f:
        while f.read(1 << 20):
            pass
    first = time.perf_counter() - t_start
    r = harness.read_tree(m, tools, os.path.join(mnt, "epoch-0000"), "--only", ".safetensors",
                          "--maxdepth", "1", "--exclude", "all.safetensors")
    return first, r


def run(args, tools, runs=3):
    w = dict(WORKLOADS["small"])
    w["shards"] = sum(SPLIT)
    n = w["records"] // (10 if args.quick else 1)
    src, _ = generate(tools, args.work, "mixture", w, n)
    dirs, counts = _sources(args.work, src)
    total = sum(counts)
    mixfile = os.path.join(args.work, "mixture.json")
    with open(mixfile, "w") as f:
        json.dump({"mixture": [{"name": "s%d" % i, "source": d, "weight": c}
                               for i, (d, c) in enumerate(zip(dirs, counts))],
                   "epoch": total}, f)
    mnt = os.path.join(args.work, "mnt-mixture")
    ix = os.path.join(args.work, "index-mixture")
    opts = "index_dir=%s,batch_size=%d" % (ix, w["batch_size"])
    out = {"single": [], "mixture": []}
    for k in range(runs):
        for name, source in (("single", src), ("mixture", mixfile)):
            log("mixture: %s, run %d" % (name, k + 1))
            t0 = time.perf_counter()
            with harness.mount([tools["batchfs"], "-f", source, mnt, "-o", opts], mnt) as m:
                first, r = _epoch(m, tools, mnt, t0)
                r["first_batch"] = first
                r["mount_seconds"] = m.mount_seconds
                out[name].append(r)
    med = {k: sorted(v, key=lambda r: r["seconds"])[len(v) // 2] for k, v in out.items()}
    say()
    say("== mixture: 3 sources (%s of %d records) vs one mount of the same shards" % (
        ":".join(str(c) for c in counts), total))
    say("%-10s %14s %12s %14s %14s %12s" % ("", "records/s", "epoch s", "daemon CPU s",
                                             "first batch s", "mount s"))
    for k in ("single", "mixture"):
        r = med[k]
        say("%-10s %14s %12.3f %14s %14.3f %12.3f" % (
            k, fmt_rate(total / r["seconds"]), r["seconds"],
            "%.3f" % r["daemon_cpu"] if r.get("daemon_cpu") is not None else "-",
            sorted(x["first_batch"] for x in out[k])[runs // 2], r["mount_seconds"]))
    return {"records": total, "single": med["single"], "mixture": med["mixture"],
            "first_batch": sorted(x["first_batch"] for x in out["mixture"])[runs // 2]}


def ratios(r):
    q = r["single"]["seconds"] / r["mixture"]["seconds"]
    say("mixture of 3 sources / one mount, records/s: %s (target >= %.0f%%) %s; "
        "mixture's first batch %.3f s" % (fmt_q(q, TARGET), TARGET * 100, verdict(q >= TARGET),
                                          r["first_batch"]))
    cs, cm = r["single"].get("daemon_cpu"), r["mixture"].get("daemon_cpu")
    if cs and cm:  # what a shared machine's wall clock hides
        say("mixture of 3 sources / one mount, daemon CPU seconds per epoch: %.2fx" % (cm / cs))
