# SPDX-License-Identifier: Apache-2.0
"""The 'nodes' part of scripts/bench: a job of a thousand nodes over one
bucket, simulated by a sample of its ranks (docs/shuffle.md, 5.1).

A dataset of many groups (--nodes-records records of 4 KB in 64 objects;
blocks of 64 KiB, groups of 2 blocks: with partitions=P each partition
holds about a window of blocks) is put in s3rver behind the delaying proxy
(--bucket-cache-delay-ms per request). `batchfs index` builds its index
once; each sampled rank R then mounts s3://BUCKET/NAME/ with -o
rank=R,world=W,shuffle=block,partitions=P,epochs=2 and index_dir a
read-only bind mount of that index (shared by every node, never written; a
plain shared folder where no bind mount can be made), reads its batch
files of epochs 0 and 1 in order and is unmounted: one node of the job at
a time. Per rank: the bytes it fetched (io_bytes) during each epoch as a
fraction of the dataset, the GETs of object bytes at mount (the index
reused: none), its mount time and its first-batch latency (from the mount
ready to the end of epoch 0's first batch file). The job's total in each
epoch is the sample's mean times W, as a multiple of the dataset: goal <=
1.15. The same for two ranks with partitions=1 (the order before
partitions) and groups large enough to hold a batch of every rank, as the
default window (64 blocks of 4 MiB) does on a dataset of a thousand
nodes: each rank fetches most of the dataset.
"""

import json
import os
import shutil
import subprocess
import time

from ..data import generate
from ..harness import log
from ..report import say, verdict
from . import bucket

NODES = {"shards": 64, "features": ["x:float:4", "blob:bytes:1,len=4000"]}
OPTS = "shuffle=block,block_size=64K,batch_size=8"
WINDOW = 2
PER_BLOCK = 15  # records of a block
EPOCHS = 2  # read by each rank, one after the other


def _ro_bind(d, ro):
    """A read-only bind mount of d at ro, or None where none can be made."""
    os.makedirs(ro, exist_ok=True)
    for argv in (["mount", "--bind", d, ro], ["mount", "-o", "remount,bind,ro", ro]):
        r = subprocess.run(argv, capture_output=True)
        if r.returncode != 0:
            subprocess.run(["umount", ro], capture_output=True)
            return None
    return ro


def _snapshot(d):
    return {f: os.stat(os.path.join(d, f)).st_mtime_ns for f in sorted(os.listdir(d))}


def _rank(tools, env, url, mnt, opts, ix, size):
    """Mount one rank, read its batch files of epochs 0 and 1, unmount: its
    figures (fetched: the bytes fetched during each epoch's read)."""
    cmd = [tools["batchfs"], "-f", "-o", "%s,epochs=%d,index_dir=%s" % (opts, EPOCHS, ix), url,
           mnt]
    # each rank a node of its own: its own default disk cache, empty
    xdg = mnt + "-xdg"
    shutil.rmtree(xdg, ignore_errors=True)
    env = dict(env, XDG_CACHE_HOME=xdg)
    with bucket._env_mount(cmd, mnt, env) as m:
        st0 = bucket._stats(mnt)
        prev, fetched, first, secs = st0.get("io_bytes", 0), [], None, 0.0
        for e in range(EPOCHS):
            ep = os.path.join(mnt, "epoch-%04d" % e)
            names = sorted(n for n in os.listdir(ep) if n.endswith(".safetensors") and
                           n != "all.safetensors")
            t0 = time.perf_counter()
            for n in names:
                with open(os.path.join(ep, n), "rb") as f:
                    while f.read(1 << 20):
                        pass
                if first is None:
                    first = time.perf_counter() - t0
            secs = secs or time.perf_counter() - t0
            st = bucket._stats(mnt)
            fetched.append((st.get("io_bytes", 0) - prev) / size)
            prev = st.get("io_bytes", 0)
        return {"fetched": fetched, "at_mount": st0.get("io_bytes", 0),
                "reused": st0.get("index_reused"), "mount_s": m.mount_seconds,
                "first_s": first or 0.0, "read_s": secs, "batches": len(names),
                "waits": st.get("io_waits", 0)}


def run(args, tools):
    work = args.work
    world = args.nodes_world
    parts = args.nodes_partitions or world
    n = args.nodes_records or 2 * parts * 15  # about 2 blocks of 15 records a partition
    tools = dict(tools)
    s3env, srv = bucket._server(args, work)
    env = {"AWS_ACCESS_KEY_ID": s3env.S3RVER_KEY, "AWS_SECRET_ACCESS_KEY": s3env.S3RVER_SECRET}
    out = {"world": world, "parts": parts, "n": n, "delay": args.bucket_cache_delay_ms,
           "ranks": [], "base": []}
    mnt = os.path.join(work, "nodes-mnt")
    ro = os.path.join(work, "nodes-index-ro")
    bound = None
    try:
        src, _ = generate(tools, work, "nodes%d" % n, NODES, n)
        name = "nodes%d" % n
        bucket._fill(s3env, srv, name, src)
        size = sum(os.path.getsize(os.path.join(src, p)) for p in os.listdir(src)
                   if not p.startswith(".") and not p.endswith(".json"))
        out["bytes"] = size
        url = "s3://%s/%s/" % (bucket.BUCKET, name)
        ix = os.path.join(work, "nodes-index")
        shutil.rmtree(ix, ignore_errors=True)
        # the index, once, as a job's first step would build it
        t0 = time.perf_counter()
        r = subprocess.run([tools["batchfs"], "index", "--index-dir", ix, url],
                           env=dict(os.environ, AWS_ENDPOINT_URL=srv.url, **env),
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("batchfs index: %s" % r.stderr.strip()[-300:])
        out["index_s"] = time.perf_counter() - t0
        before = _snapshot(ix)
        bound = _ro_bind(ix, ro)
        out["shared"] = "read-only bind mount" if bound else "shared folder (no bind mount here)"
        step = max(1, world // args.nodes_sample)
        sample = sorted({0, world - 1} | set(range(step // 2, world, step)))[:args.nodes_sample]
        with bucket._proxy(s3env, srv, args.bucket_cache_delay_ms) as px:
            # without partitions, groups holding a batch of every rank
            out["base_window"] = base = -(-world * 8 // PER_BLOCK) + 1
            for p, w, ranks, key in ((parts, WINDOW, sample, "ranks"),
                                     (1, base, sample[:2], "base")):
                for rank in ranks:
                    opts = "endpoint=%s,%s,window=%d,rank=%d,world=%d,partitions=%d" % (
                        px.url, OPTS, w, rank, world, p)
                    row = _rank(tools, env, url, mnt, opts, bound or ix, size)
                    row["rank"] = rank
                    out[key].append(row)
                    log("nodes: partitions=%d rank %d: %s" % (p, rank, json.dumps(row)))
        out["index_untouched"] = _snapshot(ix) == before
    finally:
        if bound:
            subprocess.run(["umount", bound], capture_output=True)
        srv.stop()
    report(out)
    return out


def report(c):
    say()
    say("== nodes: a job of world=%d over one bucket, %d sampled ranks, one mount each "
        "(s3rver behind %d ms per request)" % (c["world"], len(c["ranks"]), c["delay"]))
    say("-- %d records of 4 KB in 64 objects (%.0f MB), %s; `batchfs index` once (%.1f s), "
        "index_dir shared as a %s: %s" % (
            c["n"], c["bytes"] / 1e6, OPTS + ",window=%d" % WINDOW, c.get("index_s", 0),
            c.get("shared", "?"),
            "not written by any mount" if c.get("index_untouched") else "WRITTEN BY A MOUNT"))
    for key, p in (("ranks", c["parts"]), ("base", 1)):
        rows = c[key]
        if key == "base":
            say("   without partitions, window=%d (a group holds a batch of every rank):" %
                c.get("base_window", 0))
        if not rows:
            continue
        per = [sum(r["fetched"][e] for r in rows) / len(rows) for e in range(EPOCHS)]
        say("   partitions=%d: per rank fetched %s the dataset in epochs %s (its share %.5fx), "
            "mean; first batch %.3f s (max %.3f), mount %.2f s (max %.2f), index reused by %d "
            "of %d, object bytes at mount %d" % (
                p, ", ".join("%.5fx" % f for f in per), ", ".join(map(str, range(EPOCHS))),
                1 / c["world"], sum(r["first_s"] for r in rows) / len(rows),
                max(r["first_s"] for r in rows), sum(r["mount_s"] for r in rows) / len(rows),
                max(r["mount_s"] for r in rows), sum(1 for r in rows if r["reused"]),
                len(rows), sum(r["at_mount"] for r in rows)))
        for e, f in enumerate(per):
            total = f * c["world"]
            say("   partitions=%d: the job's ranks together fetch %.3fx the dataset in epoch %d  "
                "target <= 1.15  %s" % (p, total, e, verdict(total <= 1.15)))
        say("     rank: fetched in each epoch (x dataset), first batch s, batches: " + ", ".join(
            "%d: %s %.3f %d" % (r["rank"], "/".join("%.5f" % f for f in r["fetched"]),
                                r["first_s"], r["batches"])
            for r in rows))
