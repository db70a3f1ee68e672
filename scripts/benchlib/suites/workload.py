# SPDX-License-Identifier: Apache-2.0
"""The local workloads' suite (small, image, varlen, wide, wide2000): for each,
on its generated plain shards, the floor (cat), the index build, the null FUSE
ceilings over a tree of the same names and sizes, the decoder alone
(bench_decode), batchfs's cold first epoch (the median of interleaved fresh
mounts) and warm re-read, the peers (Python + protobuf, npm, tfr_decode),
and where the workload asks for them the whole-epoch file (all.safetensors),
the PyTorch input loops and the wide records' .safetensors rows; then its
ratio lines against the targets (docs/benchmark.md).
"""

import json
import os
import shutil
import subprocess
import sys

from .. import harness, peers
from ..data import WORKLOADS, framing, generate, max_file_size, shard_paths, values_per_record
from ..harness import (BATCHES_ONLY, ENTRY, LAST_CPU, MiB, NullCtx, PYTHON, check_child,
                       drop_caches, json_lines, log, median_read, memory, mount, parse_size,
                       proc_cpu, read_stats, read_tree, run_child)
from ..peers import NPM_RECORDS, NULL_SPAN
from ..report import Table, fmt_parts, fmt_q, fmt_rate, say, verdict

NO_ALL = "n/a (no all/ in this build)"


def all_rows(args, tools, res, t, mnt, mopts, src, nrec, shard_bytes, mb):
    """epoch-0000/all.safetensors read from start to end with 1 MiB reads on a
    fresh mount (cold), then again (warm, median of 3); then the null FUSE
    serving one file of the same size (first read, keep_cache re-read)."""
    drop_caches(args)
    path = mnt + "/epoch-0000/all.safetensors"
    with mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt) as m:
        if not os.path.exists(path):
            res["all_missing"] = True
            for label in ("batchfs all.safetensors, cold epoch (fresh mount, 1 MiB reads)",
                          "batchfs all.safetensors, warm re-read (median of 3)",
                          "null FUSE, one file of that size, first read",
                          "null FUSE, one file of that size, keep_cache re-read (median of 3)"):
                t.add(label, note=NO_ALL)
            return
        cold = read_tree(m, tools, path)
        st_cold = read_stats(mnt)
        hwm_cold, _ = memory(m)
        warm = median_read(m, tools, path)
        st = read_stats(mnt)
        hwm, parts = memory(m)
    size = cold["bytes"]
    res.update(all_cold=nrec / cold["seconds"], all_cold_cpu=cold["daemon_cpu"],
               all_warm_mb=mb(size, warm["seconds"]), all_bytes=size)
    res["all_hwm"]["readtree cold + warm"] = (hwm, st, parts)
    t.add("batchfs all.safetensors, cold epoch (fresh mount, 1 MiB reads)", nrec / cold["seconds"],
          mb(shard_bytes, cold["seconds"]), mb(size, cold["seconds"]), hwm_cold, cold["seconds"],
          cold["daemon_cpu"], "%.1f MB; decode %.2f s; mount %.2f s" % (
              size / 1e6, st_cold.get("decode_seconds", 0), m.mount_seconds))
    t.add("batchfs all.safetensors, warm re-read (median of 3)", nrec / warm["seconds"],
          mb(shard_bytes, warm["seconds"]), mb(size, warm["seconds"]), hwm, warm["seconds"],
          warm["daemon_cpu"], "decoded again: %s" % (
              "%.2f s" % (st.get("decode_seconds", 0) - st_cold.get("decode_seconds", 0))
              if "decode_seconds" in st else "?"))
    with peers.nullfs(tools, mnt, "files=1,size=%d,keep_cache" % size) as m:
        first = read_tree(m, tools, mnt)
        again = median_read(m, tools, mnt)
        nhwm, _ = memory(m)
    res.update(all_null_first=nrec / first["seconds"],
               all_null_again_mb=mb(again["bytes"], again["seconds"]))
    for label, r in (("null FUSE, one file of that size, first read", first),
                     ("null FUSE, one file of that size, keep_cache re-read (median of 3)", again)):
        t.add(label, nrec / r["seconds"], mb(shard_bytes, r["seconds"]), mb(r["bytes"], r["seconds"]),
              nhwm, r["seconds"], r["daemon_cpu"])


def torch_rows(args, tools, name, w, res, t, mnt, mopts, src, nrec, bs, shard_bytes, mb):
    """The three PyTorch loops of torch_loop, each in a child process; the
    batchfs ones on a fresh mount each."""
    tb = w.get("torch_batch", bs)
    me = [PYTHON, ENTRY, "--batch-size", str(tb)]
    loops = (
        ("tree", "PyTorch: DataLoader(2 workers) over batch-*/*.npy (cold mount)",
         "map-style Dataset, item i = np.load of each .npy of batch-i; batch_size=None"),
        ("all", "PyTorch: all/*.npy mmap, slices of %d rows (cold mount)" % tb,
         "np.load(mmap_mode='r'), torch.from_numpy(a[i:i+%d].copy()), one process" % tb),
        ("vahidk", "PyTorch: vahidk/tfrecord, shuffle queue 1024, DataLoader(batch %d)" % tb,
         None),
    )
    for mode, label, note in loops:
        log("%s: PyTorch loop %s" % (name, mode))
        try:
            if mode == "vahidk":
                vdir = os.path.join(args.peers, "vahidk-tfrecord")
                if not os.path.isdir(os.path.join(vdir, "tfrecord")):
                    t.add(label, note="n/a (no %s)" % vdir)
                    continue
                k = min(w["python_records"], nrec)
                env = dict(os.environ, PYTHONPATH=vdir)
                rc, out, _, rss = run_child(me + ["--torch-loop", "vahidk", "--root", src,
                                                  "--records", str(k), "--spec",
                                                  json.dumps(w["vahidk"])], env=env)
                if rc != 0:
                    t.add(label, note="failed (status %d)" % rc)
                    continue
                j = json_lines(out)[0]
                note = ("MultiTFRecordDataset over the %d shards (one split each, equal weights, "
                        "infinite=False), no index files, num_workers=0 (without index files "
                        "each worker would read every record); first %s records%s" % (
                            w["shards"], "{:,}".format(j["records"]),
                            "; transform: np.frombuffer(...).reshape" if any(
                                len(v) > 1 for v in w["vahidk"].values()) else ""))
                dcpu, dhwm = None, None
            else:
                drop_caches(args)
                with mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt) as m:
                    root = mnt + "/epoch-0000"
                    if mode == "all" and not os.path.isdir(root + "/all"):
                        res["all_missing"] = True
                        t.add(label, note=NO_ALL)
                        continue
                    c0 = proc_cpu(m.pid)
                    rc, out, _, rss = run_child(me + ["--torch-loop", mode, "--root", root])
                    c1 = proc_cpu(m.pid)
                    dhwm, parts = memory(m)
                    st = read_stats(mnt)
                if rc != 0:
                    t.add(label, note="failed (status %d)" % rc)
                    continue
                j = json_lines(out)[0]
                dcpu = c1 - c0 if c0 is not None and c1 is not None else None
                if mode == "all":
                    res.setdefault("all_hwm", {})["PyTorch all/ loop"] = (dhwm, st, parts)
            rate = j["records"] / j["seconds"]
            res["torch_" + mode] = rate
            if dcpu is not None:
                note += "; daemon CPU %.2f s, VmHWM %.0f MiB" % (dcpu, (dhwm or 0) / MiB)
            t.add(label, rate, mb(shard_bytes * j["records"] / nrec, j["seconds"]),
                  mb(j["tensor_bytes"], j["seconds"]), rss, j["seconds"], j["cpu_seconds"], note)
        except (RuntimeError, OSError, ValueError, KeyError, IndexError) as e:
            t.add(label, note="failed: %s" % str(e)[:200])


def wide_rows(args, tools, res, t, src, mnt, mopts, nrec, shard_bytes, span, mb):
    """Wide records: the batches' .safetensors alone (what README.txt
    tells a wide reader to read), cold on a fresh mount, and the null FUSE
    serving the same files. Read as such a reader globs them
    (epoch-0000/*.safetensors): without a walk through the batch folders,
    whose thousands of .npy entries the null FUSE does not have."""
    man = os.path.join(args.work, "manifest-safetensors.txt")
    only = ["--only", ".safetensors", "--maxdepth", "1"] + list(BATCHES_ONLY)
    drop_caches(args)
    with mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt) as m:
        st = read_tree(m, tools, mnt + "/epoch-0000", *only)
        check_child([tools["readtree"], "--manifest", man] + only + [mnt + "/epoch-0000"])
    with peers.nullfs(tools, mnt, "manifest=%s,keep_cache%s" % (man, span)) as m:
        null = read_tree(m, tools, mnt)
    res["st_cold"] = nrec / st["seconds"]
    res["st_null"] = nrec / null["seconds"]
    res["st_cold_cpu"], res["st_null_cpu"] = st["daemon_cpu"], null["daemon_cpu"]
    t.add("batchfs cold epoch, .safetensors only (fresh mount)", res["st_cold"],
          mb(shard_bytes, st["seconds"]), mb(st["bytes"], st["seconds"]), None, st["seconds"],
          st["daemon_cpu"], "%d files" % st["files"])
    t.add("null FUSE, the same .safetensors, first read", res["st_null"],
          mb(shard_bytes, null["seconds"]), mb(null["bytes"], null["seconds"]), None,
          null["seconds"], null["daemon_cpu"])


def run(args, tools, name, w, npm_dir, npm_note):
    scale = 10 if args.quick else 1
    nrec = w["records"] // scale
    bs = args.batch_size or w["batch_size"]
    src, fresh = generate(tools, args.work, name, w, nrec)
    shards = shard_paths(src)
    shard_bytes = sum(os.path.getsize(p) for p in shards)
    res = {"name": name, "records": nrec}
    res.update((k, w[k]) for k in ("cold_target", "warm_target") if k in w)
    t = Table()

    def mb(nbytes, secs):
        return nbytes / secs / 1e6 if secs > 0 else None

    # floor: cat
    if args.drop_caches:
        drop_caches(args)
    else:  # warm up: the page cache may have let some of the shards go
        peers.cat(shards)
    log("%s: cat" % name)
    rc, _, secs, rss = peers.cat(shards)
    if rc != 0:
        raise RuntimeError("cat failed")
    t.add("raw cat of the shards (floor)", nrec / secs, mb(shard_bytes, secs), None, rss, secs,
          LAST_CPU[0])

    # batchfs: index, then cold and warm
    idx = os.path.join(args.work, "index-" + name)
    shutil.rmtree(idx, ignore_errors=True)
    log("%s: batchfs index" % name)
    out, secs, rss = check_child([tools["batchfs"], "index", "--index-dir", idx, src])
    res["index_seconds"] = secs
    t.add("batchfs index build (framing + schema scan)", nrec / secs, mb(shard_bytes, secs), None,
          rss, secs, LAST_CPU[0])
    mopts = "batch_size=%d,index_dir=%s" % (bs, idx)
    if args.cache_size:
        mopts += ",cache_size=" + args.cache_size
    if "schema" in w:
        sf = os.path.join(args.work, "schema-%s.json" % name)
        with open(sf, "w") as f:
            json.dump(w["schema"], f)
        mopts += ",schema=" + sf
    mnt = os.path.join(args.work, "mnt")
    manifest = os.path.join(args.work, "manifest-%s.txt" % name)
    # Cold epochs are the noisiest rows: the kernel's copies into freshly
    # allocated page-cache pages vary several-fold from run to run on a VM
    # whose host takes freed guest memory back (README, "Reading the
    # figures"). So each cold read (batchfs on a fresh mount, and the null
    # FUSE's first read of the same tree) runs harness.COLD_RUNS times, interleaved,
    # and the median counts; the last batchfs mount goes on to the warm rows.
    colds, firsts = [], []
    span = None
    for k in range(harness.COLD_RUNS):
        drop_caches(args)
        log("%s: batchfs cold (%d of %d)" % (name, k + 1, harness.COLD_RUNS))
        m = mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt)
        try:
            res["mount_seconds"] = m.mount_seconds
            colds.append(read_tree(m, tools, mnt + "/epoch-0000", *BATCHES_ONLY))
            if k == 0:  # the tree the null FUSE serves: every name and size
                check_child([tools["readtree"], "--manifest", manifest] + list(BATCHES_ONLY) +
                            [mnt + "/epoch-0000"])
                span = ",span=%d" % max(NULL_SPAN, max_file_size(manifest))
        except BaseException:
            m.stop()
            raise
        if k < harness.COLD_RUNS - 1:
            m.stop()
        with peers.nullfs(tools, mnt, "manifest=%s,keep_cache%s" % (manifest, span)) \
                if k < harness.COLD_RUNS - 1 else NullCtx() as nm:
            if nm:
                firsts.append(read_tree(nm, tools, mnt))
    cold = sorted(colds, key=lambda r: r["seconds"])[len(colds) // 2]
    res["cold_spread"] = [nrec / r["seconds"] for r in colds]
    with m:
        with open(mnt + "/stats.json") as f:
            st_cold = json.load(f)
        hwm_cold, _ = memory(m)
        warm = median_read(m, tools, mnt + "/epoch-0000", *BATCHES_ONLY)
        with open(mnt + "/stats.json") as f:
            st_warm = json.load(f)
        hwm, hwm_parts = memory(m)
    tree_bytes = cold["bytes"]
    res.update(tree_bytes=tree_bytes, files=cold["files"], stats=st_warm, hwm=hwm,
               hwm_parts=hwm_parts,
               batches=st_warm.get("batches_per_epoch"))
    res["cold"] = nrec / cold["seconds"]
    res["cold_cpu"] = cold["daemon_cpu"]
    res["warm"] = nrec / warm["seconds"]
    res["warm_mb"] = mb(tree_bytes, warm["seconds"])
    rows_batchfs = [
        ("batchfs cold first epoch (fresh mount; median of %d)" % len(colds), cold, hwm_cold,
         "decode %.2f s in %d batches; mount %.2f s" % (
             st_cold.get("decode_seconds", 0), st_cold.get("batches_decoded", 0),
             m.mount_seconds)),
        ("batchfs warm re-read (keep_cache; median of 3)", warm, hwm,
         "decoded again: %d batches" % (st_warm.get("batches_decoded", 0) -
                                        st_cold.get("batches_decoded", 0))),
    ]

    # ceilings: null FUSE over the same tree
    log("%s: null FUSE" % name)
    with peers.nullfs(tools, mnt, "manifest=%s,keep_cache%s" % (manifest, span)) as m:
        firsts.append(read_tree(m, tools, mnt))
        again = median_read(m, tools, mnt)
        null_hwm, _ = memory(m)
    first = sorted(firsts, key=lambda r: r["seconds"])[len(firsts) // 2]
    res["null_first_spread"] = [nrec / r["seconds"] for r in firsts]
    with peers.nullfs(tools, mnt, "manifest=%s,direct_io%s" % (manifest, span)) as m:
        dio = read_tree(m, tools, mnt, "--bs", str(MiB))
        dio_hwm, _ = memory(m)
    if w.get("wide"):
        wide_rows(args, tools, res, t, src, mnt, mopts, nrec, shard_bytes, span, mb)
    res["null_first"] = nrec / first["seconds"]
    res["null_first_cpu"] = first["daemon_cpu"]
    res["null_again"] = nrec / again["seconds"]
    res["null_again_mb"] = mb(again["bytes"], again["seconds"])
    for label, r, rss in (("null FUSE, first read via page cache (ceiling; median of %d)"
                           % len(firsts), first, null_hwm),
                          ("null FUSE, keep_cache re-read (median of 3)", again, null_hwm),
                          ("null FUSE, direct_io, 1 MiB reads", dio, dio_hwm)):
        t.add(label, nrec / r["seconds"], mb(shard_bytes, r["seconds"]),
              mb(r["bytes"], r["seconds"]), rss, r["seconds"], r["daemon_cpu"])

    # the decoder alone
    log("%s: decoder alone" % name)
    ncpu = os.cpu_count() or 1
    dec = {}
    budget = parse_size(args.cache_size) if args.cache_size else 1 << 30
    for mode, order, hold in (("scan", "file", 0), ("build", "file", 0),
                              ("build", "shuffled", 0), ("build", "shuffled", budget // ncpu)):
        cmd = [tools["bench_decode"], "--batch-size", str(bs), "--threads", str(ncpu),
               "--index-dir", idx, "--mode", mode, "--order", order]
        if hold:
            cmd += ["--hold", str(hold)]
        out, _, rss = check_child(cmd + [src])
        for j in json_lines(out):
            if j["mode"] == "open" or (hold and j["threads"] != ncpu):
                continue
            what = "parse only (scan+CRC+protobuf)" if mode == "scan" else \
                "build, %s order" % order
            label = "decoder alone: %s, %d thread%s" % (what, j["threads"],
                                                        "s" if j["threads"] > 1 else "")
            if hold:
                label += ", holding %.0f MiB" % (budget / MiB)
            t.add(label, j["examples_s"], j["in_MB_s"],
                  j["out_MB_s"] if mode == "build" else None, rss, j["seconds"],
                  j["cpu_seconds"])
            if not hold:
                dec[(mode, order, j["threads"])] = j["examples_s"]
                if mode == "build" and order == "shuffled" and j["threads"] == 1:
                    res["dec1_cpu"] = j["cpu_seconds"]
    res["dec_all_shuffled"] = dec.get(("build", "shuffled", ncpu))
    res["dec1_file"] = dec.get(("build", "file", 1))
    res["dec1_shuffled"] = dec.get(("build", "shuffled", 1))

    for label, r, rss, note in rows_batchfs:
        t.add(label, nrec / r["seconds"], mb(shard_bytes, r["seconds"]),
              mb(r["bytes"], r["seconds"]), rss, r["seconds"], r["daemon_cpu"], note)

    # Python + protobuf + numpy
    log("%s: python baseline" % name)
    k = min(w["python_records"], nrec)
    out, _, rss = check_child([sys.executable, ENTRY, "--python-baseline",
                               src, "--spec", json.dumps(w["spec"]), "--batch-size", str(bs),
                               "--records", str(k)])
    pj = json_lines(out)[0]
    res["python"] = pj["records"] / pj["seconds"]
    t.add("Python + protobuf (C++) + numpy, shuffled", res["python"],
          mb(pj["in_bytes"], pj["seconds"]), None, rss, pj["seconds"], pj["cpu_seconds"],
          "%d records; its index pass %.2f s more" % (pj["records"], pj["index_seconds"]))

    # npm peer
    if name == "small":
        if npm_dir:
            log("%s: npm baseline" % name)
            offs, lens = framing(shards[0], NPM_RECORDS)
            nbytes = offs[-1] + lens[-1] + 4
            rc, out, _, rss = run_child(["node", os.path.join(npm_dir, "bench_tfrecords.js"),
                                         shards[0], str(nbytes), str(bs)], cwd=npm_dir)
            if rc == 0:
                nj = json_lines(out)[0]
                res["npm"] = nj["records"] / nj["seconds"]
                t.add("npm @roboflow/tfrecords (node %s)" % subprocess.run(
                    ["node", "--version"], capture_output=True, text=True).stdout.strip(),
                    res["npm"], mb(nj["in_bytes"], nj["seconds"]), None, rss, nj["seconds"],
                    nj["cpu_seconds"], "%d records, file order" % nj["records"])
            else:
                t.add("npm @roboflow/tfrecords", note="failed (status %d)" % rc)
        else:
            t.add("npm @roboflow/tfrecords", note=npm_note)

    # peer: tfr_decode, an independent one-core C decoder (file order, global shuffle)
    if tools.get("tfr_decode"):
        log("%s: tfr_decode" % name)
        for shuffle in (False, True):
            label = "peer tfr_decode (C, 1 core), %s" % (
                "--shuffle (global shuffle, mmap)" if shuffle else "file order (read)")
            cmd = [tools["tfr_decode"], "--batch", str(bs)] + (["--shuffle"] if shuffle else [])
            rc, out, _, rss = run_child(cmd + shards)
            kv = dict(tok.split("=", 1) for tok in out.split() if "=" in tok)
            if rc != 0 or "t_total" not in kv:
                t.add(label, note="failed (status %d)" % rc)
                continue
            recs, tt, tio = int(kv["records"]), float(kv["t_total"]), float(kv["t_io"])
            rate = recs / tt
            res["tfr_shuffle" if shuffle else "tfr_file"] = rate
            res["tfr_shuffle_decode" if shuffle else "tfr_file_decode"] = float(
                kv["decode_rec_per_s"])
            t.add(label, rate, mb(int(kv["in_bytes"]), tt), mb(int(kv["out_bytes"]), tt), rss, tt,
                  LAST_CPU[0], "whole run; decode alone %s rec/s (%.2f s of %s)" % (
                      fmt_rate(float(kv["decode_rec_per_s"])), tio,
                      "mmap + index + shuffle" if shuffle else "read(2)"))
    else:
        t.add("peer tfr_decode (C, 1 core)", note=tools.get("tfr_decode_note", "n/a"))

    # batchfs all.safetensors: one file spanning the epoch, cold, warm; null FUSE one file
    if w.get("all_rows"):
        log("%s: all.safetensors" % name)
        res["all_hwm"] = {}
        try:
            all_rows(args, tools, res, t, mnt, mopts, src, nrec, shard_bytes, mb)
        except (RuntimeError, OSError, ValueError, KeyError) as e:
            t.add("batchfs all.safetensors", note="failed: %s" % str(e)[:200])
            res["all_error"] = str(e)[:200]

    # PyTorch input loops as users write them
    if w.get("torch"):
        torch_rows(args, tools, name, w, res, t, mnt, mopts, src, nrec, bs, shard_bytes, mb)

    say()
    say("== %s: %s records (%s), %d plain shards, %.1f MB TFRecord; batch_size %d, "
        "%s batches; tree %.1f MB in %d files%s" % (
            name, "{:,}".format(nrec), ", ".join(w["features"]) if len(w["features"]) <= 8 else
            "%d features: %s, ..., %s" % (len(w["features"]), ", ".join(w["features"][:3]),
                                          w["features"][-1]),
            len(shards), shard_bytes / 1e6,
            bs, res["batches"], tree_bytes / 1e6, res["files"],
            "; freshly generated" if fresh else ""))
    t.emit()
    res["shard_bytes"] = shard_bytes
    res["rows"] = [{"label": row[0], "rec_s": row[1]} for row in t.rows]  # for the chart
    return res


def ratios(r):
    """The ratio lines of one workload's result (run's)."""
    n = r["name"]
    low = min(x for x in (r["dec_all_shuffled"], r["null_first"]) if x)
    which = "decoder all cores shuffled" if low == r["dec_all_shuffled"] else \
        "null FUSE first read"
    q = r["cold"] / low
    tc = r.get("cold_target", 0.70)
    say("%-7s cold first epoch / min(decoder all cores shuffled, null FUSE first read) = "
        "%s / %s (%s) = %s  target >= %.0f%%  %s" % (
            n, fmt_rate(r["cold"]), fmt_rate(low), which, fmt_q(q, tc), 100 * tc,
            verdict(q >= tc)))
    if len(r.get("cold_spread", [])) > 1:
        say("%-7s   (medians of %d interleaved cold reads: batchfs %s; null FUSE first read %s)"
            % (n, len(r["cold_spread"]), " / ".join(fmt_rate(x) for x in r["cold_spread"]),
               " / ".join(fmt_rate(x) for x in r.get("null_first_spread", []))))
    if r.get("cold_cpu") and r.get("dec1_cpu") is not None and r.get("null_first_cpu"):
        base = r["dec1_cpu"] + r["null_first_cpu"]
        say("%-7s   (CPU, steadier on a busy machine: daemon %.2f s for the cold epoch vs "
            "decoder 1 thread shuffled %.2f s + null FUSE first read %.2f s = %.2f s: %.0f%%)"
            % (n, r["cold_cpu"], r["dec1_cpu"], r["null_first_cpu"], base,
               100 * base / r["cold_cpu"]))
    q = r["warm"] / r["null_again"]
    tw = r.get("warm_target", 0.80)
    say("%-7s warm re-read / null FUSE keep_cache re-read = %s / %s MB/s = %s  "
        "target >= %.0f%%  %s" % (n, fmt_rate(r["warm_mb"]), fmt_rate(r["null_again_mb"]),
                                 fmt_q(q, tw), 100 * tw, verdict(q >= tw)))
    q = r["cold"] / r["python"]
    if n == "small":
        say("%-7s cold first epoch / Python+protobuf = %s / %s = %s  target >= 100x  %s"
            % (n, fmt_rate(r["cold"]), fmt_rate(r["python"]),
               fmt_q(q, 100, pct=False, digits=1), verdict(q >= 100)))
    else:
        say("%-7s cold first epoch / Python+protobuf = %s / %s = %.1fx  (for information)"
            % (n, fmt_rate(r["cold"]), fmt_rate(r["python"]), q))
    st = r["stats"]
    budget = st.get("cache_budget", 1 << 30)
    limit = budget + st.get("index_bytes", 0) + 64 * MiB
    say("%-7s daemon peak RSS (VmHWM) %.0f MiB vs cache_size %.0f MiB + index %.1f MiB + "
        "64 MiB = %.0f MiB  %s  (cache peak %.0f MiB%s)" % (
            n, r["hwm"] / MiB, budget / MiB, st.get("index_bytes", 0) / MiB, limit / MiB,
            verdict(r["hwm"] <= limit), st.get("cache_peak_bytes", 0) / MiB,
            fmt_parts(r.get("hwm_parts"))))
    peer_ratios(r)


def peer_ratios(r):
    """The ratio lines of the whole-epoch file, the peers and the PyTorch
    loops; a row that could not be measured prints n/a and the reason."""
    n = r["name"]
    missing = NO_ALL if r.get("all_missing") else (
        "n/a (failed: %s)" % r["all_error"] if r.get("all_error") else None)
    if n == "small":
        a, p = r.get("all_cold"), r.get("tfr_shuffle")
        if a and p:
            q = a / p
            say("%-7s all/ cold epoch (all.safetensors, fresh mount) / tfr_decode --shuffle "
                "(one core, whole run) = %s / %s = %s  target >= 1.0x  %s; stretch >= 1.6x  %s"
                % (n, fmt_rate(a), fmt_rate(p), fmt_q(q, 1.0, pct=False), verdict(q >= 1.0),
                   verdict(q >= 1.6)))
            d = r.get("tfr_shuffle_decode")
            if d:
                say("%-7s   (against its decode loop alone, without its mmap + index + shuffle "
                    "pass: %s / %s = %.2fx)" % (n, fmt_rate(a), fmt_rate(d), a / d))
        else:
            say("%-7s all/ cold epoch / tfr_decode --shuffle (one core): %s" % (
                n, missing or "n/a (tfr_decode did not run)"))
        if r.get("all_cold") and r.get("all_cold_cpu") is not None:
            say("%-7s   (CPU: daemon %.2f s for the all/ cold epoch = %s records per CPU second)"
                % (n, r["all_cold_cpu"], fmt_rate(r["records"] / r["all_cold_cpu"])
                   if r["all_cold_cpu"] > 0 else "-"))
        a, p = r.get("all_warm_mb"), r.get("all_null_again_mb")
        if a and p:
            q = a / p
            say("%-7s all/ warm re-read / null FUSE keep_cache re-read of one file of the same "
                "size = %s / %s MB/s = %s  target >= 80%%  %s" % (
                    n, fmt_rate(a), fmt_rate(p), fmt_q(q, 0.80), verdict(q >= 0.80)))
        else:
            say("%-7s all/ warm re-read / null FUSE keep_cache re-read of one file: %s" % (
                n, missing or "n/a"))
        a, p = r.get("dec1_shuffled"), r.get("dec1_file")
        if a and p:
            q = a / p
            say("%-7s decoder alone, 1 thread: shuffled order / file order = %s / %s = %s  "
                "target >= 90%%  %s" % (n, fmt_rate(a), fmt_rate(p), fmt_q(q, 0.90),
                                       verdict(q >= 0.90)))
    if "torch_vahidk" in r or "torch_all" in r or "torch_tree" in r:
        v = r.get("torch_vahidk")
        for key, what in (("torch_all", "PyTorch through all/ (mmap, sliced)"),
                          ("torch_tree", "PyTorch DataLoader over the batch tree")):
            a = r.get(key)
            main_line = key == "torch_all"
            if not a or not v:
                say("%-7s %s / vahidk/tfrecord: %s" % (
                    n, what, (missing or "n/a") if key == "torch_all" and not a else "n/a"))
                continue
            q = a / v
            if n == "small" and main_line:
                say("%-7s %s / vahidk/tfrecord = %s / %s = %s  target >= 50x  %s" % (
                    n, what, fmt_rate(a), fmt_rate(v), fmt_q(q, 50, pct=False, digits=1),
                    verdict(q >= 50)))
            else:
                say("%-7s %s / vahidk/tfrecord = %s / %s = %.1fx  (for information)" % (
                    n, what, fmt_rate(a), fmt_rate(v), q))
    if n == "small" and not r.get("all_hwm"):
        say("%-7s all/ mounts: daemon peak RSS (VmHWM) vs cache_size + index + 64 MiB: %s" % (
            n, missing or "n/a"))
    for label, (hwm, st, parts) in sorted(r.get("all_hwm", {}).items()):
        budget = st.get("cache_budget", 1 << 30)
        limit = budget + st.get("index_bytes", 0) + 64 * MiB
        say("%-7s all/ mount (%s): daemon peak RSS (VmHWM) %.0f MiB vs cache_size %.0f MiB + "
            "index %.1f MiB + 64 MiB = %.0f MiB  %s  (cache peak %.0f MiB%s)" % (
                n, label, (hwm or 0) / MiB, budget / MiB, st.get("index_bytes", 0) / MiB,
                limit / MiB, verdict(hwm is not None and hwm <= limit),
                st.get("cache_peak_bytes", 0) / MiB, fmt_parts(parts)))


def wide_ratios(results):
    """Per-value decoder rate of each wide workload against 'small' in the
    same run, and its cold .safetensors epoch against the null FUSE."""
    by = {r["name"]: r for r in results}
    small = by.get("small")
    for r in results:
        if not WORKLOADS[r["name"]].get("wide"):
            continue
        n = r["name"]
        vw = values_per_record(WORKLOADS[n]["features"])
        for key, what in (("dec1_shuffled", "1 thread shuffled"),
                          ("dec_all_shuffled", "all cores shuffled")):
            if small and small.get(key) and r.get(key):
                vs = values_per_record(WORKLOADS["small"]["features"])
                a, b = r[key] * vw, small[key] * vs
                q = a / b
                say("%-7s decoder values/s (build, %s) / 'small' values/s = %s / %s = %s  "
                    "target >= 70%%  %s" % (n, what, fmt_rate(a), fmt_rate(b), fmt_q(q, 0.70),
                                           verdict(q >= 0.70)))
            else:
                say("%-7s decoder values/s / 'small': n/a (run 'small' in the same invocation)"
                    % n)
        if r.get("st_cold") and r.get("st_null"):
            q = r["st_cold"] / r["st_null"]
            say("%-7s .safetensors cold epoch / null FUSE first read of the same files = "
                "%s / %s = %s  target >= 70%%  %s" % (n, fmt_rate(r["st_cold"]),
                                                     fmt_rate(r["st_null"]), fmt_q(q, 0.70),
                                                     verdict(q >= 0.70)))
            if r.get("st_cold_cpu") is not None and r.get("dec1_cpu") is not None:
                say("%-7s   (CPU: daemon %.2f s for it, decoder 1 thread shuffled %.2f s)" % (
                    n, r["st_cold_cpu"], r["dec1_cpu"]))
