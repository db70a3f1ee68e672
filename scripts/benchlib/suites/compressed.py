# SPDX-License-Identifier: Apache-2.0
"""The compressed twins' suite (small-gz, image-gz, small-zlib): the same
records as a plain workload in gzip or zlib shards, against those plain
shards in the same run: the one-time decompression pass (batchfs index,
which writes the shadow copies) against zcat on every core, the cold epoch
from the shadows against the plain shards, the seek-point paths
(shadow=off) on the first batches, and the shadows' disk space.
"""

import json
import os
import shutil
import subprocess
import time

from .. import peers
from ..data import WORKLOADS, generate, generate_compressed, shard_paths
from ..harness import (BATCHES_ONLY, LAST_CPU, MiB, check_child, log, mount, proc_cpu,
                       read_stats, read_tree)
from ..report import Table, fmt_q, fmt_rate, say, verdict


def read_first_batches(mnt, k):
    """Read batch-000000 .. batch-(k-1) .safetensors of epoch 0 in order:
    (seconds, bytes)."""
    t0 = time.perf_counter()
    nbytes = 0
    for b in range(k):
        with open(os.path.join(mnt, "epoch-0000", "batch-%06d.safetensors" % b), "rb") as f:
            nbytes += len(f.read())
    return time.perf_counter() - t0, nbytes


def dir_bytes(d, suffix):
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(suffix))


def run(args, tools, name, w):
    """A compressed twin of a workload: the one-time decompression pass
    (batchfs index, which writes the shadow copies) against zcat on every
    core, the global-shuffle cold epoch from the shadows against the plain
    shards, and the seek-point paths (shadow=off: ~1 MiB spans, and 64 KiB
    spans) on the first batches; the shadows' disk space against the plain
    size. Returns the figures for ratios()."""
    base = WORKLOADS[w["gz_of"]]
    scale = 10 if args.quick else 1
    nrec = base["records"] // scale
    bs = args.batch_size or base["batch_size"]
    comp = w["compression"]
    ncpu = os.cpu_count() or 1
    plain, _ = generate(tools, args.work, w["gz_of"], base, nrec)
    gz = generate_compressed(tools, args.work, name, base, nrec, comp)
    pshards, zshards = shard_paths(plain), shard_paths(gz)
    plain_bytes = sum(os.path.getsize(p) for p in pshards)
    gz_bytes = sum(os.path.getsize(p) for p in zshards)
    res = {"name": name, "records": nrec, "plain_bytes": plain_bytes, "gz_bytes": gz_bytes,
           "compression": comp}
    t = Table()

    def mb(nbytes, secs):
        return nbytes / secs / 1e6 if secs > 0 else None

    peers.cat(zshards + pshards)  # warm the page cache
    log("%s: %s on %d cores" % (name, "zcat" if comp == "gzip" else "zlib", ncpu))
    secs, cpu = peers.parallel_cat(zshards, comp, ncpu)
    res["zcat"] = secs
    t.add("%s of the shards, one per core (%d)" % (
        "zcat" if comp == "gzip" else "Python zlib stream", ncpu), nrec / secs,
        mb(gz_bytes, secs), mb(plain_bytes, secs), None, secs, cpu)

    sf = None
    if "schema" in base:
        sf = os.path.join(args.work, "schema-%s.json" % w["gz_of"])
        with open(sf, "w") as f:
            json.dump(base["schema"], f)
    idx = {}
    for label, key, extra in (("batchfs index, no shadow (--shadow-size 0)", "pass_noshadow",
                               ["--shadow-size", "0"]),
                              ("batchfs index + shadow copies (the decompression pass)",
                               "pass", [])):
        d = os.path.join(args.work, "index-%s-%s" % (name, key))
        shutil.rmtree(d, ignore_errors=True)
        log("%s: %s" % (name, label))
        _, secs, rss = check_child([tools["batchfs"], "index", "--jobs", str(ncpu),
                                    "--index-dir", d] + extra + [gz])
        res[key] = secs
        idx[key] = d
        t.add(label, nrec / secs, mb(gz_bytes, secs), mb(plain_bytes, secs), rss, secs,
              LAST_CPU[0])
    res["shadow_bytes"] = dir_bytes(idx["pass"], ".shadow")
    # the copies just written are dirty pages: flush them now, not during
    # the epochs timed next
    subprocess.run(["sync"], check=False)

    def mopts(d, extra=""):
        o = "batch_size=%d,index_dir=%s%s" % (bs, d, extra)
        if args.cache_size:
            o += ",cache_size=" + args.cache_size
        return o + (",schema=" + sf if sf else "")

    mnt = os.path.join(args.work, "mnt")
    pidx = os.path.join(args.work, "index-%s-plain" % name)
    shutil.rmtree(pidx, ignore_errors=True)
    check_child([tools["batchfs"], "index", "--index-dir", pidx, plain])
    only = list(BATCHES_ONLY) + ["--only", ".safetensors"]
    shadows = [os.path.join(idx["pass"], n) for n in os.listdir(idx["pass"])
               if n.endswith(".shadow")]
    rows = (("plain shards: cold epoch, global shuffle (.safetensors)", "cold_plain", plain,
             mopts(pidx), pshards),
            ("%s shards + shadows: cold epoch, global shuffle" % comp, "cold_gz", gz,
             mopts(idx["pass"]), shadows))
    runs = {key: [] for _, key, _, _, _ in rows}
    for rep in range(3):  # fresh mounts, the two kinds in turn: the median of 3 each
        for label, key, src, o, files in rows:
            log("%s: %s (%d of 3)" % (name, label, rep + 1))
            # what the epoch reads, in the page cache for both (as the other
            # workloads' cold rows without --drop-caches)
            peers.cat(files)
            with mount([tools["batchfs"], "-f", src, mnt, "-o", o], mnt) as m:
                runs[key].append(read_tree(m, tools, mnt + "/epoch-0000", *only))
    for label, key, _, _, _ in rows:
        rs = sorted(runs[key], key=lambda r: r["seconds"])
        r = rs[1]
        res[key] = nrec / r["seconds"]
        t.add(label + " (median of 3)", res[key], None, mb(r["bytes"], r["seconds"]), None,
              r["seconds"], r["daemon_cpu"], "runs %s s" % "/".join(
                  "%.2f" % x["seconds"] for x in runs[key]))

    # the seek-point paths: too slow for a whole epoch, the first batches
    # (no more than the epoch has: 25 for image-gz with --quick)
    k = min(w["gz_batches"], -(-nrec // bs))
    dense = os.path.join(args.work, "index-%s-dense" % name)
    shutil.rmtree(dense, ignore_errors=True)
    for label, key, d, span in (
            ("%s, shadow=off: seek points every ~1 MiB" % comp, "seek_1m", idx["pass"], None),
            ("%s, shadow=off: seek points every 64 KiB" % comp, "seek_64k", dense, "64K")):
        log("%s: %s, %d batches" % (name, label, k))
        cmd = [tools["batchfs"], "-f", gz, mnt, "-o", mopts(d, ",shadow=off")]
        if span:  # build the dense index first (not timed with the reads)
            check_child([tools["batchfs"], "index", "--shadow-size", "0", "--seek-span", span,
                         "--index-dir", d, gz])
        with mount(cmd, mnt) as m:
            c0 = proc_cpu(m.pid)
            secs, nbytes = read_first_batches(mnt, k)
            c1 = proc_cpu(m.pid)
            st = read_stats(mnt)
        res[key] = k * bs / secs
        res[key + "_index"] = st.get("index_bytes", 0)
        t.add(label + " (first %d batches)" % k, res[key], None, mb(nbytes, secs), None, secs,
              c1 - c0 if c0 is not None and c1 is not None else None,
              "index in memory %.1f MiB" % (res[key + "_index"] / MiB))
    say()
    say("== %s: %s records of '%s' in %d %s shards (%.1f MB; plain %.1f MB); batch_size %d" % (
        name, "{:,}".format(nrec), w["gz_of"], len(zshards), comp, gz_bytes / 1e6,
        plain_bytes / 1e6, bs))
    t.emit()
    return res


def ratios(r):
    n = r["name"]
    q = r["cold_gz"] / r["cold_plain"]
    say("%-10s cold epoch, global shuffle: %s shards with shadows / plain shards = %s / %s = %s  "
        "target >= 70%%  %s" % (n, r["compression"], fmt_rate(r["cold_gz"]),
                                fmt_rate(r["cold_plain"]), fmt_q(q, 0.70), verdict(q >= 0.70)))
    say("%-10s   (seek points, shadow=off: %s rec/s = %.0f%% of plain; 64 KiB seek points: %s "
        "rec/s = %.0f%%, their index %.0f MiB in memory)" % (
            n, fmt_rate(r["seek_1m"]), 100 * r["seek_1m"] / r["cold_plain"],
            fmt_rate(r["seek_64k"]), 100 * r["seek_64k"] / r["cold_plain"],
            r["seek_64k_index"] / MiB))
    q = r["zcat"] / r["pass"]
    say("%-10s decompression pass (batchfs index + shadows, all cores) / %s on all cores = "
        "%.2f s vs %.2f s = %s  target >= 70%%  %s  (without shadows: %.2f s)" % (
            n, "zcat" if r["compression"] == "gzip" else "Python zlib", r["pass"], r["zcat"],
            fmt_q(q, 0.70), verdict(q >= 0.70), r["pass_noshadow"]))
    say("%-10s shadow copies on disk %.1f MB = %.1f%% of the plain shards (%.1f MB); "
        "compressed shards %.1f MB" % (n, r["shadow_bytes"] / 1e6,
                                        100 * r["shadow_bytes"] / r["plain_bytes"],
                                        r["plain_bytes"] / 1e6, r["gz_bytes"] / 1e6))
