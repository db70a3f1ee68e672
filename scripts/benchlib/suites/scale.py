# SPDX-License-Identifier: Apache-2.0
"""The scale suite: datasets of small records (one int64 each; 10^7 in 64
shards, 10^6 in 16 with --quick, 10^8 in 256 with --scale-1e8): index bytes
per record on disk, re-mount time with the index reused (and that it reads
no shard and rewrites no index file), the first index build against `cat` of
the same files (cold: evicted with fadvise; and warm), and the daemon's RSS
after mount and after one epoch.
"""

import json
import os
import shutil
import time

from ..data import generate, shard_paths
from ..harness import MiB, check_child, evict, log, mount, proc_rchar, proc_status, read_stats
from ..report import fmt_q, fmt_rate, say, verdict


def scale_one(args, tools, n, shards):
    """One dataset of n small records (one int64 each) in `shards` shards:
    cat rate, first index build (index alone, and with schema inference),
    re-mount, index bytes/record, daemon RSS after mount and one epoch."""
    w = {"shards": shards, "features": ["y:int64:1"]}
    src, _ = generate(tools, args.work, "scale%d" % n, w, n)
    files = shard_paths(src)
    nbytes = sum(os.path.getsize(f) for f in files)
    jobs = str(os.cpu_count() or 1)
    r = {"records": n, "shards": shards, "bytes": nbytes}
    schema = os.path.join(args.work, "scale-schema.json")
    with open(schema, "w") as f:
        json.dump({"features": {"y": {"kind": "int64", "dtype": "int64", "shape": []}}}, f)
    mnt = os.path.join(args.work, "mnt-scale")
    ixa = os.path.join(args.work, "index-scale%d-a" % n)
    ixb = os.path.join(args.work, "index-scale%d-b" % n)

    def cat():
        t0 = time.perf_counter()
        for f in files:
            with open(f, "rb") as fh:
                while fh.readinto(buf):
                    pass
        return time.perf_counter() - t0

    buf = bytearray(1 << 20)
    log("scale %d: cat cold, cat warm" % n)
    evict(files)
    r["cat_cold"] = nbytes / cat()
    r["cat_warm"] = nbytes / min(cat(), cat())
    # the index alone (a mount given schema=): cold, then warm
    for mode in ("cold", "warm"):
        shutil.rmtree(ixb, ignore_errors=True)
        if mode == "cold":
            evict(files)
        else:
            cat()
        log("scale %d: first mount, index only (%s)" % (n, mode))
        with mount([tools["batchfs"], "-f", src, mnt, "-o",
                    "schema=%s,index_dir=%s,threads=%s" % (schema, ixb, jobs)], mnt) as m:
            r["build_%s" % mode] = nbytes / m.mount_seconds
    # index and schema inference (batchfs index), cold
    shutil.rmtree(ixa, ignore_errors=True)
    evict(files)
    log("scale %d: batchfs index (with inference, cold)" % n)
    _, secs, _ = check_child([tools["batchfs"], "index", "--jobs", jobs, "--index-dir", ixa,
                              src])
    r["build_infer_cold"] = nbytes / secs
    idx = [os.path.join(ixa, f) for f in os.listdir(ixa) if f.endswith(".idx")]
    r["disk"] = sum(os.path.getsize(f) for f in idx)
    mtimes = {f: os.stat(f).st_mtime_ns for f in idx}
    # re-mounts: the index and schema reused, the shards not read
    times = []
    bs = 65536
    for k in range(3):
        log("scale %d: re-mount %d" % (n, k + 1))
        with mount([tools["batchfs"], "-f", src, mnt, "-o",
                    "index_dir=%s,threads=%s,batch_size=%d" % (ixa, jobs, bs)], mnt) as m:
            times.append(m.mount_seconds)
            r["remount_rchar"] = proc_rchar(m.pid)
            st = read_stats(mnt)
            r["reused"] = st.get("index_reused")
            if k == 2:
                r["rss_mount"] = proc_status(m.pid)
                log("scale %d: one epoch (.safetensors)" % n)
                t0 = time.perf_counter()
                check_child([tools["readtree"], "--only", ".safetensors", "--exclude", "all",
                             "--exclude", "all.safetensors", mnt + "/epoch-0000"])
                r["epoch_seconds"] = time.perf_counter() - t0
                r["rss_epoch"] = proc_status(m.pid)
    r["remount"] = sorted(times)[1]
    r["rewritten"] = any(os.stat(f).st_mtime_ns != t for f, t in mtimes.items())
    for d in (ixa, ixb):
        shutil.rmtree(d, ignore_errors=True)
    return r


def run(args, tools):
    sizes = [(1_000_000, 16)] if args.quick else [(10_000_000, 64)]
    if args.scale_1e8:
        sizes.append((100_000_000, 256))
    return [scale_one(args, tools, n, sh) for n, sh in sizes]


def ratios(rows):
    for r in rows:
        tag = "scale   %s records (%d shards, %.0f MB):" % ("{:,}".format(r["records"]),
                                                          r["shards"], r["bytes"] / 1e6)
        bpr = r["disk"] / r["records"]
        say("%s index on disk %.2f B/record  target <= 4  %s" % (tag, bpr, verdict(bpr <= 4)))
        say("%s re-mount with the index reused %.3f s  target <= 1 s  %s  (index %s; "
            "daemon read %s bytes at mount: shards %s; index files %s)" % (
                tag, r["remount"], verdict(r["remount"] <= 1),
                "reused" if r.get("reused") else "NOT reused",
                "{:,}".format(r.get("remount_rchar") or 0),
                "not re-read" if (r.get("remount_rchar") or 0) < r["bytes"] / 10 else "RE-READ",
                "rewritten" if r["rewritten"] else "not rewritten"))
        for mode in ("cold", "warm"):
            q = r["build_%s" % mode] / r["cat_%s" % mode]
            say("%s first index build (mount with schema=, %s) / cat (%s) = %s / %s MB/s = %s"
                "  target >= 70%%  %s" % (tag, mode, mode, fmt_rate(r["build_%s" % mode] / 1e6),
                                          fmt_rate(r["cat_%s" % mode] / 1e6),
                                          fmt_q(q, 0.70), verdict(q >= 0.70)))
        q = r["build_infer_cold"] / r["cat_cold"]
        say("%s first index build with schema inference (batchfs index, cold) / cat (cold) = "
            "%s / %s MB/s = %.0f%%  (for information: inference decodes every record)" % (
                tag, fmt_rate(r["build_infer_cold"] / 1e6), fmt_rate(r["cat_cold"] / 1e6),
                100 * q))
        a, e = r.get("rss_mount", {}), r.get("rss_epoch", {})
        say("%s daemon RSS after mount: VmRSS %.0f MiB (RssAnon %.0f, RssFile %.0f); after "
            "one epoch (%.1f s): VmRSS %.0f MiB (RssAnon %.0f, RssFile %.0f)" % (
                tag, a.get("VmRSS", 0) / MiB, a.get("RssAnon", 0) / MiB,
                a.get("RssFile", 0) / MiB, r.get("epoch_seconds", 0), e.get("VmRSS", 0) / MiB,
                e.get("RssAnon", 0) / MiB, e.get("RssFile", 0) / MiB))
