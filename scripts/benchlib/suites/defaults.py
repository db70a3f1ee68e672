# SPDX-License-Identifier: Apache-2.0
"""The 'defaults' part of scripts/bench: the global shuffle (the default)
over a bucket, as a new user mounts one, against what a parallel download
of the same objects and an epoch of a local mount take, in one run.

The objects are served by s3rver behind tests/s3/s3proxy.py, which holds
every response --defaults-delay-ms (5) before its first byte. Every row
reads the batch files of an epoch in order (readtree), the index made
before by a mount that reads nothing else; a daemon's disk cache, when it
has one by default, starts empty (XDG_CACHE_HOME is a fresh folder).

'small' records (--defaults-records, 400,000 of about 180 bytes: 72 MB in
8 objects):

  download  the objects read whole by 16 ranged GETs of 8 MiB in flight
            (tests/s3/s3tool fetch): what a parallel downloader gets
  local     a mount of a local copy of the objects: epoch 0
  defaults  s3://BUCKET/small/ with no option: epochs 0 and 1 in one mount
            (the disk cache on by default), the bytes fetched in each
  quarter   disk_cache=DIR,disk_cache_size=<a quarter of the data>: epoch 0
  no disk   disk_cache=off (memory only, within readahead): epoch 0
  rank      world=64,rank=3: epoch 0 of the rank, against the same with
            io_plan=ranges (its own records, a ranged GET each), and the
            bytes fetched against the rank's share of the data

'image' records (--defaults-image-records, 800 of 150 KB: 120 MB): epoch 0
with the defaults, and with disk_cache=off, against the same with
io_plan=ranges (a ranged GET per record, near ones joined: the per-record
path the global shuffle took before it read in passes); and the rank rows
(in batches of 2 records: a rank of 64 has a batch from 64 batches on).

Each row gives the read mode the planner chose and why (stats.json io_plan,
io_plan_reason), its windows and passes, GETs and bytes fetched.

Targets: defaults: epoch 0 <= 2 x (download + local); epoch 1 >= 70% of
the local epoch's records/s, fetching <= 1% of the data. quarter, no disk:
epoch 0 <= 10 x (download + local). image: each no slower than
io_plan=ranges (within 10%). rank: no slower than io_plan=ranges (within
10%); with 'image' records, fetching <= 2x its share of the data.
"""

import json
import os
import shutil

from ..data import WORKLOADS, generate
from ..harness import log, mount, read_tree
from ..report import say, verdict
from .bucket import BUCKET, _fill, _proxy, _server, _tool

WORLD, RANK = 64, 3


def _stats(mnt):
    with open(os.path.join(mnt, "stats.json")) as f:
        return json.load(f)


def _env(base, xdg):
    """The daemon's environment: ours, the AWS_ keys of base, and a fresh
    XDG_CACHE_HOME (the default disk cache's folder)."""
    shutil.rmtree(xdg, ignore_errors=True)
    os.makedirs(xdg)
    return dict(os.environ, XDG_CACHE_HOME=xdg,
                **{k: v for k, v in base.items() if k.startswith("AWS_")})


def _epoch(m, tools, mnt, e, rank_dir=""):
    """The batch files of epoch e in order: readtree's result."""
    return read_tree(m, tools, os.path.join(mnt, rank_dir, "epoch-%04d" % e), "--only",
                     ".safetensors", "--maxdepth", "1", "--exclude", "all.safetensors")


def _row(rd, before, after):
    """A row: seconds, records/s, and what the epoch cost in stats.json."""
    def d(k):
        return after.get(k, 0) - before.get(k, 0)
    n = d("records_served")
    return {"seconds": rd["seconds"], "records": n,
            "rate": n / rd["seconds"] if rd["seconds"] else 0,
            "gets": d("io_reads"), "fetched": d("io_bytes"), "windows": d("io_windows"),
            "passes": d("io_passes"), "plan": after.get("io_plan", "-"),
            "reason": after.get("io_plan_reason", "-"), "cpu": rd["daemon_cpu"],
            "peak_buffered": after.get("io_peak_buffered", 0)}


def _mounted(tools, mnt, url, opts, env, epochs, rank_dir=""):
    """One mount of url with opts (a string, may be empty): rows for epochs
    0 .. epochs-1 read in turn; a row that read nothing is an error."""
    rows = []
    cmd = [tools["batchfs"], "-f"] + (["-o", opts] if opts else []) + [url, mnt]
    with mount(cmd, mnt, env=env) as m:
        st = _stats(mnt)
        for e in range(epochs):
            rd = _epoch(m, tools, mnt, e, rank_dir)
            st1 = _stats(mnt)
            rows.append(_row(rd, st, st1))
            st = st1
            if not rows[-1]["records"]:
                raise RuntimeError("%s %s: epoch %d has no batch (too few records for its "
                                   "batch size and world?)" % (url, opts, e))
    return rows


def _index(tools, mnt, url, endpoint, ix, env):
    """The index, made straight from s3rver (no delay) by a mount that
    reads nothing else."""
    with mount([tools["batchfs"], "-f", "-o", "endpoint=%s,index_dir=%s,disk_cache=off" % (
            endpoint, ix), url, mnt], mnt, env=env):
        pass


def _dataset(args, tools, s3env, srv, name, w, n):
    src, _ = generate(tools, args.work, "defaults-%s%d" % (name, n), w, n)
    key = "defaults-%s%d" % (name, n)
    _fill(s3env, srv, key, src)
    size = sum(os.path.getsize(os.path.join(src, p)) for p in os.listdir(src)
               if not p.startswith(".") and not p.endswith(".json"))
    return src, "s3://%s/%s/" % (BUCKET, key), size


def _small(args, tools, env, tenv, s3env, srv, mnt):
    w = WORKLOADS["small"]
    n = args.defaults_records // (10 if args.quick else 1)
    src, url, size = _dataset(args, tools, s3env, srv, "small", w, n)
    work = os.path.join(args.work, "defaults")
    ix, lix = os.path.join(work, "index-small"), os.path.join(work, "index-small-local")
    xdg = os.path.join(work, "xdg")
    shutil.rmtree(ix, ignore_errors=True)
    _index(tools, mnt, url, srv.url, ix, _env(env, xdg))
    out = {"n": n, "bytes": size, "delay": args.defaults_delay_ms}
    local = _mounted(tools, mnt, src, "batch_size=%d,index_dir=%s" % (w["batch_size"], lix),
                     _env(env, xdg), 2)
    out["local"] = local[1]  # the index made in the first
    with _proxy(s3env, srv, args.defaults_delay_ms) as px:
        dl = _tool(tools, tenv, "-o", "endpoint=%s,conns=16" % px.url, "fetch", url,
                   str(8 << 20))
        out["download_s"] = dl["seconds"]
        base = "endpoint=%s,index_dir=%s" % (px.url, ix)
        bs = ",batch_size=%d" % w["batch_size"]
        out["defaults"] = _mounted(tools, mnt, url, base + bs, _env(env, xdg), 2)
        quarter = os.path.join(work, "quarter-cache")
        shutil.rmtree(quarter, ignore_errors=True)
        out["quarter_size"] = max(16 << 20, size // 4)  # disk_cache_size's least is 16M
        out["quarter"] = _mounted(tools, mnt, url, base + bs + ",disk_cache=%s,disk_cache_size=%d"
                                  % (quarter, out["quarter_size"]), _env(env, xdg), 1)
        out["nodisk"] = _mounted(tools, mnt, url, base + bs + ",disk_cache=off",
                                 _env(env, xdg), 1)
        rk = ",world=%d,rank=%d" % (WORLD, RANK)
        out["rank"] = _mounted(tools, mnt, url, base + bs + rk, _env(env, xdg), 1)
        out["rank_ranges"] = _mounted(tools, mnt, url, base + bs + rk + ",io_plan=ranges",
                                      _env(env, xdg), 1)
    for k in ("defaults", "quarter", "nodisk", "rank", "rank_ranges"):
        for e, r in enumerate(out[k]):
            log("defaults %s epoch %d: %s" % (k, e, r))
    return out


def _image(args, tools, env, tenv, s3env, srv, mnt):
    w = WORKLOADS["image"]
    n = args.defaults_image_records // (4 if args.quick else 1)
    src, url, size = _dataset(args, tools, s3env, srv, "image", w, n)
    work = os.path.join(args.work, "defaults")
    ix, xdg = os.path.join(work, "index-image"), os.path.join(work, "xdg")
    shutil.rmtree(ix, ignore_errors=True)
    _index(tools, mnt, url, srv.url, ix, _env(env, xdg))
    out = {"n": n, "bytes": size, "delay": args.defaults_delay_ms}
    with _proxy(s3env, srv, args.defaults_delay_ms) as px:
        base = "endpoint=%s,index_dir=%s" % (px.url, ix)
        bs = ",batch_size=%d" % w["batch_size"]
        # a rank of 64 has a batch of its own from 64 batches on: batches
        # of 2 records, not 32
        rk = ",batch_size=2,world=%d,rank=%d" % (WORLD, RANK)
        for key, opts in (("ranges", bs + ",disk_cache=off,io_plan=ranges"),
                          ("defaults", bs), ("nodisk", bs + ",disk_cache=off"),
                          ("rank", rk), ("rank_ranges", rk + ",io_plan=ranges")):
            out[key] = _mounted(tools, mnt, url, base + opts, _env(env, xdg), 1)[0]
            log("defaults image %s: %s" % (key, out[key]))
    return out


def run(args, tools):
    tools = dict(tools)
    tools["s3tool"] = os.path.join(args.build_dir, "tests", "s3", "s3tool")
    s3env, srv = _server(args, args.work)
    env = {"AWS_ACCESS_KEY_ID": s3env.S3RVER_KEY, "AWS_SECRET_ACCESS_KEY": s3env.S3RVER_SECRET}
    tenv = dict(os.environ, **env)
    mnt = os.path.join(args.work, "defaults-mnt")
    try:
        out = {"small": _small(args, tools, env, tenv, s3env, srv, mnt),
               "image": _image(args, tools, env, tenv, s3env, srv, mnt)}
    finally:
        srv.stop()
    report(out)
    return out


def _say_row(label, r, note=""):
    say("   %-22s %8.2f s %10.0f records/s  %6d GETs %8.1f MB fetched  %4d windows "
        "%4d passes  plan: %s%s" % (label, r["seconds"], r["rate"], r["gets"],
                                    r["fetched"] / 1e6, r["windows"], r["passes"], r["plan"],
                                    note))


def report(out):
    s = out["small"]
    floor = s["download_s"] + s["local"]["seconds"]
    say()
    say("== defaults: the global shuffle over a bucket (s3rver behind tests/s3/s3proxy.py, "
        "%d ms per request), the batch files of an epoch in order" % s["delay"])
    say("-- small: %d records, %.0f MB; download (16 ranged GETs of 8 MiB in flight) %.2f s, "
        "a local mount's epoch %.2f s (%.0f records/s): together %.2f s" % (
            s["n"], s["bytes"] / 1e6, s["download_s"], s["local"]["seconds"],
            s["local"]["rate"], floor))
    e0, e1 = s["defaults"]
    _say_row("defaults epoch 0", e0, "  = %.2fx (download + local)  target <= 2  %s" % (
        e0["seconds"] / floor, verdict(e0["seconds"] <= 2 * floor)))
    q = e1["rate"] / s["local"]["rate"] if s["local"]["rate"] else 0
    frac = e1["fetched"] / s["bytes"]
    _say_row("defaults epoch 1", e1, "  = %.0f%% of local  target >= 70%%  %s; fetched %.3f%% "
             "of the data  target <= 1%%  %s" % (100 * q, verdict(q >= 0.7), 100 * frac,
                                                 verdict(frac <= 0.01)))
    say("   (disk cache of the quarter row: %.1f MB, %.2f of the data; readahead 64 MiB)" % (
        s["quarter_size"] / 1e6, s["quarter_size"] / s["bytes"]))
    for key, label in (("quarter", "disk cache a quarter"), ("nodisk", "disk_cache=off")):
        r = s[key][0]
        _say_row(label + " epoch 0", r, "  = %.2fx (download + local)  target <= 10  %s; "
                 "peak buffered %.1f MB" % (r["seconds"] / floor,
                                            verdict(r["seconds"] <= 10 * floor),
                                            r["peak_buffered"] / 1e6))
    _rank(s["rank"][0], s["rank_ranges"][0], s["bytes"], False)
    for key in ("defaults", "quarter", "nodisk", "rank"):
        say("   why (%s): %s" % (key, s[key][-1]["reason"]))
    i = out["image"]
    say("-- image: %d records of 150 KB, %.0f MB" % (i["n"], i["bytes"] / 1e6))
    _say_row("io_plan=ranges", i["ranges"], " (a GET per record, disk_cache=off)")
    for key, label in (("defaults", "defaults"), ("nodisk", "disk_cache=off")):
        r = i[key]
        ratio = r["seconds"] / i["ranges"]["seconds"] if i["ranges"]["seconds"] else 0
        _say_row(label, r, "  = %.2fx the per-record time  target <= 1.10  %s" % (
            ratio, verdict(ratio <= 1.10)))
    _rank(i["rank"], i["rank_ranges"], i["bytes"], True)
    for key in ("ranges", "defaults", "nodisk", "rank"):
        say("   why (%s): %s" % (key, i[key]["reason"]))


def _rank(r, rr, size, own):
    """Rank RANK of WORLD with the defaults, against io_plan=ranges (its own
    records, a ranged GET each): no slower; with large records (own), its
    own records only."""
    share = size / WORLD
    ratio = r["seconds"] / rr["seconds"] if rr["seconds"] else 0
    _say_row("rank %d of %d, ranges" % (RANK, WORLD), rr, "  fetched %.2fx its share" % (
        rr["fetched"] / share))
    note = "  = %.2fx the ranged time  target <= 1.10  %s; fetched %.2fx its share" % (
        ratio, verdict(ratio <= 1.10), r["fetched"] / share)
    if own:
        note += "  target <= 2  %s" % verdict(r["fetched"] <= 2 * share)
    _say_row("rank %d of %d" % (RANK, WORLD), r, note)
