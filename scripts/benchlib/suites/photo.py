# SPDX-License-Identifier: Apache-2.0
"""The 'photo' suite: JPEG photographs decoded to uint8 [B, H, W, 3] through
the mount (-o image=FEATURE:HxW), against the one-core C loop
tests/bench/bench_jpeg (TurboJPEG at the same DCT scale + decoder/resize.c)
and vahidk/tfrecord + PIL under a DataLoader; the same cold epoch with
crop=random,flip=h and with crop=center against torchvision's training and
evaluation pipelines under a DataLoader (a worker per core) and against
PIL's own full decode (CPU per image); then its ratio lines.
"""

import json
import os
import shutil

from .. import peers
from ..data import generate_photo, shard_paths
from ..harness import (BATCHES_ONLY, ENTRY, LAST_CPU, MiB, PYTHON, check_child, drop_caches,
                       json_lines, log, mount, read_stats, read_tree, run_child, vm_hwm)
from ..report import Table, fmt_q, fmt_rate, say, verdict


def run(args, tools, name, w):
    """JPEG photographs read as uint8 [B, H, W, 3] through the mount
    (-o image=FEATURE:HxW) against the one-core C loop (tests/bench/
    bench_jpeg: TurboJPEG at the same DCT scale + decoder/resize.c) and the
    Python loop users write (vahidk/tfrecord + PIL under a DataLoader with 2
    workers). batchfs is read as the batch tree's .npy files (readtree
    --only .npy, without all/ and the .safetensors): every record decoded
    and served once, in batch order, as a DataLoader over the batch folders
    reads it; the prefetch workers decode ahead of the reader."""
    scale = 10 if args.quick else 1
    nrec = w["records"] // scale
    bs = args.batch_size or w["batch_size"]
    h, wd = w["size"]
    feat = w["feature"]
    src, fresh = generate_photo(args.work, name, w, nrec)
    shards = shard_paths(src)
    shard_bytes = sum(os.path.getsize(p) for p in shards)
    res = {"name": name, "records": nrec, "photo": True}
    t = Table()

    def mb(nbytes, secs):
        return nbytes / secs / 1e6 if secs > 0 else None

    peers.cat(shards)  # the page cache holds the shards

    log("%s: C loop (TurboJPEG + resize, 1 core)" % name)
    out, _, rss = check_child([tools["bench_jpeg"], "--feature", feat, "--size",
                               "%dx%d" % (h, wd)] + shards)
    j = json_lines(out)[0]
    res["floor"] = j["records"] / j["seconds"]
    res["floor_cpu"] = j["cpu_seconds"]
    res["mpix"] = j["pixels"] / j["records"] / 1e6
    t.add("decoder alone (floor): TurboJPEG + decoder/resize.c, C loop, 1 core", res["floor"],
          mb(shard_bytes, j["seconds"]), mb(j["records"] * h * wd * 3, j["seconds"]), rss,
          j["seconds"], j["cpu_seconds"], "tests/bench/bench_jpeg, file order; same DCT scale")

    idx = os.path.join(args.work, "index-" + name)
    shutil.rmtree(idx, ignore_errors=True)
    log("%s: batchfs index" % name)
    _, secs, rss = check_child([tools["batchfs"], "index", "--index-dir", idx, src])
    t.add("batchfs index build (framing + schema scan)", nrec / secs, mb(shard_bytes, secs), None,
          rss, secs, LAST_CPU[0])
    base = "batch_size=%d,index_dir=%s,image=%s:%dx%d" % (bs, idx, feat, h, wd)
    if args.cache_size:
        base += ",cache_size=" + args.cache_size
    mnt = os.path.join(args.work, "mnt")
    ncpu = os.cpu_count() or 1
    for threads, key, label, more in (
            (None, "cold", "batchfs cold first epoch (fresh mount)", ""),
            (1, "cold1", "batchfs cold first epoch, threads=1 (fresh mount)", ""),
            (None, "crop_random", "batchfs cold first epoch, crop=random,flip=h (fresh mount)",
             ",crop=random,flip=h"),
            (None, "crop_center", "batchfs cold first epoch, crop=center (fresh mount)",
             ",crop=center")):
        log("%s: %s" % (name, label))
        mopts = base + (",threads=%d" % threads if threads else "") + more
        drop_caches(args)
        with mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt) as m:
            r = read_tree(m, tools, mnt + "/epoch-0000", "--only", ".npy", *BATCHES_ONLY)
            st = read_stats(mnt)
            hwm = vm_hwm(m.pid)
        res[key] = nrec / r["seconds"]
        res[key + "_cpu"] = r["daemon_cpu"]
        res[key + "_cpu_per"] = r["daemon_cpu"] / nrec if r["daemon_cpu"] else None
        if key == "cold":
            res.update(stats=st, hwm=hwm, tree_bytes=r["bytes"], files=r["files"],
                       batches=st.get("batches_per_epoch"))
        t.add(label, res[key], mb(shard_bytes, r["seconds"]), mb(r["bytes"], r["seconds"]), hwm,
              r["seconds"], r["daemon_cpu"], "%d decode threads; .npy files of the batch tree; "
              "decode %.2f s in %d batches; mount %.2f s" % (
                  threads or ncpu, st.get("decode_seconds", 0), st.get("batches_decoded", 0),
                  m.mount_seconds))

    label = "PyTorch: vahidk/tfrecord + PIL decode + resize, DataLoader(2 workers, batch %d)" % bs
    vdir = os.path.join(args.peers, "vahidk-tfrecord")
    if not os.path.isdir(os.path.join(vdir, "tfrecord")):
        t.add(label, note="n/a (no %s)" % vdir)
    else:
        log("%s: vahidk/tfrecord + PIL" % name)
        k = min(w["python_records"], nrec)
        spec = {"feature": feat, "size": [h, wd],
                "index_dir": os.path.join(args.work, "vahidk-index-" + name)}
        shutil.rmtree(spec["index_dir"], ignore_errors=True)  # made afresh for these shards
        rc, out, _, rss = run_child(
            [PYTHON, ENTRY, "--batch-size", str(bs), "--torch-loop",
             "vahidk_pil", "--root", src, "--records", str(k), "--spec", json.dumps(spec)],
            env=dict(os.environ, PYTHONPATH=vdir))
        if rc != 0:
            t.add(label, note="failed (status %d)" % rc)
        else:
            j = json_lines(out)[0]
            res["torch_pil"] = j["records"] / j["seconds"]
            t.add(label, res["torch_pil"], mb(shard_bytes * j["records"] / nrec, j["seconds"]),
                  mb(j["tensor_bytes"], j["seconds"]), rss, j["seconds"], j["cpu_seconds"],
                  "first %s records; MultiTFRecordDataset with tfrecord2idx index files (made "
                  "before the clock), shuffle queue 1024; transform: PIL open, convert('RGB'), "
                  "resize((%d, %d), BILINEAR)" % ("{:,}".format(j["records"]), wd, h))

    _augment_peers(args, name, w, src, nrec, shard_bytes, bs, res, t)

    say()
    say("== %s: %s JPEG records (%s, 300..800 px a side, %.2f Mpixel mean; made from %s), "
        "%d plain shards, %.1f MB TFRecord; -o image=%s:%dx%d, batch_size %d, %s batches; "
        "%.1f MB of .npy%s" % (
            name, "{:,}".format(nrec), feat, res["mpix"], "scikit-image's photographs",
            len(shards), shard_bytes / 1e6, feat, h, wd, bs, res.get("batches"),
            res.get("tree_bytes", 0) / 1e6, "; freshly generated" if fresh else ""))
    t.emit()
    res["shard_bytes"] = shard_bytes
    res["rows"] = [{"label": row[0], "rec_s": row[1]} for row in t.rows]
    return res


def _augment_peers(args, name, w, src, nrec, shard_bytes, bs, res, t):
    """What crop=random,flip=h and crop=center are measured against: PIL's
    own full decode of the same images (one process, CPU per image), and
    torchvision's training and evaluation pipelines over the same records
    under a DataLoader with one worker per core (benchlib.peers,
    _torchvision_loop), on the first python_records records."""
    h, wd = w["size"]
    k = min(w["python_records"], nrec)
    spec = json.dumps({"feature": w["feature"], "size": [h, wd]})
    ncpu = os.cpu_count() or 1
    for mode, key, label in (
            ("pil_decode", "pil", "PIL full decode: Image.open(...).convert('RGB'), 1 process"),
            ("tv_train", "tv_train", "torchvision train: PIL + RandomResizedCrop(%d) + "
             "RandomHorizontalFlip, DataLoader(%d workers)" % (h, ncpu)),
            ("tv_eval", "tv_eval", "torchvision eval: PIL + Resize(%d) + CenterCrop(%d), "
             "DataLoader(%d workers)" % (round(max(h, wd) * 256 / 224), h, ncpu))):
        log("%s: %s" % (name, label))
        rc, out, _, rss = run_child([PYTHON, ENTRY, "--batch-size", str(bs), "--torch-loop", mode,
                                     "--root", src, "--records", str(k), "--spec", spec])
        if rc != 0:
            t.add(label, note="failed (status %d)" % rc)
            continue
        j = json_lines(out)[0]
        res[key] = j["records"] / j["seconds"]
        res[key + "_cpu_per"] = j["cpu_seconds"] / j["records"]
        t.add(label, res[key], shard_bytes * j["records"] / nrec / j["seconds"] / 1e6,
              j["tensor_bytes"] / j["seconds"] / 1e6, rss, j["seconds"], j["cpu_seconds"],
              "first %s records; %.2f ms CPU per image%s" % (
                  "{:,}".format(j["records"]), res[key + "_cpu_per"] * 1e3,
                  "; the images read out of the records before the clock"
                  if mode == "pil_decode" else "; index of record offsets made before the "
                  "clock, pread + protobuf parse per record"))


def _augment_ratios(r):
    """crop=random,flip=h and crop=center against torchvision's pipelines
    (images/s, cold) and against PIL's own decode (daemon CPU per image)."""
    n = r["name"]
    for crop, tv, what in (("crop_random", "tv_train", "crop=random,flip=h"),
                           ("crop_center", "tv_eval", "crop=center")):
        a, p = r.get(crop), r.get(tv)
        if a and p:
            q = a / p
            say("%-7s cold epoch %s / torchvision's pipeline under DataLoader(%d workers) = "
                "%s / %s = %s  target >= 2x  %s" % (
                    n, what, os.cpu_count() or 1, fmt_rate(a), fmt_rate(p),
                    fmt_q(q, 2, pct=False, digits=1), verdict(q >= 2)))
        else:
            say("%-7s cold epoch %s / torchvision's pipeline: n/a" % (n, what))
        c, d = r.get(crop + "_cpu_per"), r.get("pil_cpu_per")
        if c and d:
            q = c / d
            say("%-7s daemon CPU per image with %s / PIL's full decode per image = %.2f ms / "
                "%.2f ms = %.2fx  target <= 1.1x  %s" % (n, what, c * 1e3, d * 1e3, q,
                                                          verdict(q <= 1.1)))
        else:
            say("%-7s daemon CPU per image with %s / PIL's full decode: n/a" % (n, what))


def ratios(r):
    n = r["name"]
    a, f = r.get("cold"), r.get("floor")
    ncpu = os.cpu_count() or 1
    if a and f:
        q = a / f
        say("%-7s cold epoch (%d decode threads) / TurboJPEG + resize C loop (1 core) = %s / %s "
            "= %s  target >= 1.6x  %s" % (n, ncpu, fmt_rate(a), fmt_rate(f),
                                          fmt_q(q, 1.6, pct=False), verdict(q >= 1.6)))
    if r.get("cold1") and f:
        say("%-7s   (threads=1: %s / %s = %.2fx of the C loop; CPU: daemon %.2f s with %d "
            "threads, %.2f s with 1, C loop %.2f s)" % (
                n, fmt_rate(r["cold1"]), fmt_rate(f), r["cold1"] / f, r.get("cold_cpu") or 0,
                ncpu, r.get("cold1_cpu") or 0, r.get("floor_cpu") or 0))
    p = r.get("torch_pil")
    if a and p:
        q = a / p
        say("%-7s cold epoch / vahidk/tfrecord + PIL under DataLoader(2 workers) = %s / %s = %s"
            "  target >= 10x  %s" % (n, fmt_rate(a), fmt_rate(p),
                                     fmt_q(q, 10, pct=False, digits=1), verdict(q >= 10)))
    else:
        say("%-7s cold epoch / vahidk/tfrecord + PIL: n/a" % n)
    _augment_ratios(r)
    if r.get("hwm") is not None:
        st = r.get("stats", {})
        budget = st.get("cache_budget", 1 << 30)
        limit = budget + st.get("index_bytes", 0) + 64 * MiB
        say("%-7s daemon peak RSS (VmHWM) %.0f MiB vs cache_size %.0f MiB + index %.1f MiB + "
            "64 MiB = %.0f MiB  %s" % (n, r["hwm"] / MiB, budget / MiB,
                                       st.get("index_bytes", 0) / MiB, limit / MiB,
                                       verdict(r["hwm"] <= limit)))
