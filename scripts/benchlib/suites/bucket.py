# SPDX-License-Identifier: Apache-2.0
"""The 'bucket' part of scripts/bench: workloads in a bucket behind a
first-byte delay, and the disk cache.

The objects are served by s3rver (npm; the tests' server) behind
tests/s3/s3proxy.py, which holds every response DELAY ms before its first
byte (the kernel here has no netem). For each workload ('small', and
'image' unless --quick), in the same run:

  download   every object read whole by 16 ranged GETs of 8 MiB in flight
             (tests/s3/s3tool fetch): what a parallel downloader gets
  random     16 GETs of one record's size in flight at random offsets
             (s3tool bench): the store's random-GET ceiling at that
             parallelism
  batchfs    default options (io_depth and readahead auto) over
             s3://BUCKET/NAME/: epoch-0000/all.safetensors with
             shuffle=block (whole epoch) and shuffle=global (for
             --bucket-seconds at most); GETs and bytes per record decoded

and, for 'small' behind --bucket-cache-delay-ms: epoch 1 with
-o disk_cache=DIR after epoch 0, against epoch 1 of a mount of a local copy
of the same shards, and the bytes fetched from the bucket during it.

Then a disk cache a quarter of the data (_cache_quarter): 72 MB of 16 KiB
records in the bucket, three epochs of epoch-K/all.safetensors in one mount
with -o disk_cache=DIR,disk_cache_size=<a quarter>, and in one without, for
shuffle=block and shuffle=global: the bytes fetched per epoch.

And 'epochs' (issue 31): --bucket-epochs-mb of 150 KB records (1050 MB,
7,000 records, by default: four groups of window x block_size = 256 MiB) in
16 objects behind --bucket-cache-delay-ms, shuffle=block, batch_size=256,
epochs=3, readahead auto: the batch files of epochs 0, 1 and 2 read in
order in one mount (a training loop's one pass over each epoch), without
and with -o disk_cache=DIR,disk_cache_size=<a quarter of the data>; per
epoch the bytes fetched from the bucket / the dataset's, the time / the
first epoch's, and the rate against the download of the same objects
(16 ranged GETs of 8 MiB in flight) measured in the same run.

Targets: block >= 70% of the download; disk cache epoch 1 >= 70% of the
local copy's, fetching <= 1% of the dataset's bytes; with a cache a quarter
of the data, epochs 1 and 2 each fetch <= data - 0.9 x cache (block) and
never more than without the cache (both); 'epochs': each epoch fetches
<= 1.05x the dataset and takes <= 1.10x the first, at >= 80% of the
download.
"""

import json
import os
import shutil
import subprocess
import sys

from ..data import WORKLOADS, generate
from ..harness import TOP, log, mount, read_tree
from ..report import say, verdict

if os.path.join(TOP, "tests", "s3") not in sys.path:
    sys.path.insert(0, os.path.join(TOP, "tests", "s3"))

BUCKET = "bench"


def _stats(mnt):
    with open(os.path.join(mnt, "stats.json")) as f:
        return json.load(f)


def _server(args, work):
    """s3rver (npm, installed into the build tree by tests/s3/setup) over
    the work directory's bucket."""
    import s3env
    npm = os.path.join(args.build_dir, "tests", "s3", "npm")
    r = subprocess.run([os.path.join(TOP, "tests", "s3", "setup"), npm],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("tests/s3/setup: %s" % r.stderr.strip()[-300:])
    os.environ["BFS_S3RVER"] = r.stdout.strip().splitlines()[-1]
    return s3env, s3env.start_s3rver(os.path.join(work, "bucket-s3rver"), buckets=[BUCKET])


class _proxy:
    """The delaying proxy in front of srv, two worker processes."""

    def __init__(self, s3env, srv, delay_ms):
        self.p = s3env.start_proxy("%s:%d" % (srv.host, srv.port), "--delay-ms",
                                   str(delay_ms), "--no-log", "--workers", "2")
        self.url = self.p.url

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.p.stop()


def _fill(s3env, srv, name, src):
    """Put the shards of src under NAME/ unless they are there already."""
    c = s3env.boto_client(srv.url)
    have = {o["Key"]: o["Size"] for o in
            c.list_objects_v2(Bucket=BUCKET, Prefix=name + "/").get("Contents", [])}
    for p in sorted(os.listdir(src)):
        if p.startswith(".") or p.endswith(".json"):
            continue
        path = os.path.join(src, p)
        key = "%s/%s" % (name, p)
        if have.get(key) != os.path.getsize(path):
            with open(path, "rb") as f:
                c.put_object(Bucket=BUCKET, Key=key, Body=f.read())


def _tool(tools, env, *argv):
    r = subprocess.run([tools["s3tool"]] + list(argv), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError("s3tool %s: %s" % (argv[2] if len(argv) > 2 else argv, r.stderr))
    return json.loads(r.stdout)


def _read(tools, cmd, mnt, path, seconds=0, env=None):
    """Mount, read one file of it (for `seconds` at most), unmount: the
    reader's result, the daemon's CPU and its stats."""
    with _env_mount(cmd, mnt, env or {}) as m:
        extra = ["--seconds", str(seconds)] if seconds else []
        rd = read_tree(m, tools, os.path.join(mnt, path), *extra)
        st = _stats(mnt)
        rd["mount_s"] = m.mount_seconds
    return rd, st


def run(args, tools):
    if getattr(args, "bucket_epochs_only", False):
        return run_epochs(args, tools)
    work = args.work
    tools = dict(tools)
    tools["s3tool"] = os.path.join(args.build_dir, "tests", "s3", "s3tool")
    s3env, srv = _server(args, work)
    env = {"AWS_ACCESS_KEY_ID": s3env.S3RVER_KEY, "AWS_SECRET_ACCESS_KEY": s3env.S3RVER_SECRET}
    tenv = dict(os.environ, **env)
    out = {"workloads": [], "cache": None}
    mnt = os.path.join(work, "bucket-mnt")
    try:
        names = ["small"] if args.quick else ["small", "image"]
        for name in names:
            w = WORKLOADS[name]
            n = w["records"] // (10 if args.quick else 1)
            if name == "image":
                n = min(n, 2000)  # 300 MB in the bucket
            src, _ = generate(tools, work, "bucket-%s%d" % (name, n), w, n)
            _fill(s3env, srv, name, src)
            shards = [p for p in sorted(os.listdir(src))
                      if not p.startswith(".") and not p.endswith(".json")]
            size = sum(os.path.getsize(os.path.join(src, p)) for p in shards)
            url = "s3://%s/%s/" % (BUCKET, name)
            ix = os.path.join(work, "bucket-index-%s" % name)
            shutil.rmtree(ix, ignore_errors=True)
            for shuffle in ("block", "global"):  # the index, once, straight from s3rver
                with _env_mount([tools["batchfs"], "-f", "-o",
                                 "endpoint=%s,shuffle=%s,index_dir=%s" % (srv.url, shuffle, ix),
                                 url, mnt], mnt, env):
                    pass
            with _proxy(s3env, srv, args.bucket_delay_ms) as px:
                dl = _tool(tools, tenv, "-o", "endpoint=%s,conns=16" % px.url, "fetch", url,
                           str(8 << 20))
                rnd = _tool(tools, tenv, "-o", "endpoint=%s,conns=16" % px.url, "bench",
                            "s3://%s/%s/%s" % (BUCKET, name, shards[0]), str(max(1, size // n)),
                            str(800 if name == "small" else 200))
                row = {"name": name, "n": n, "bytes": size, "delay": args.bucket_delay_ms,
                       "download": n / dl["seconds"], "download_MBps": dl["MBps"],
                       "random": rnd["reads_per_s"]}
                for shuffle in ("block", "global"):
                    cmd = [tools["batchfs"], "-f", "-o", "endpoint=%s,batch_size=%d,shuffle=%s,"
                           "index_dir=%s" % (px.url, w["batch_size"], shuffle, ix), url, mnt]
                    rd, st = _read(tools, cmd, mnt, "epoch-0000/all.safetensors",
                                   args.bucket_seconds if shuffle == "global" else 0, env)
                    row[shuffle] = {"rate": st["records_served"] / rd["seconds"],
                                    "seconds": rd["seconds"], "stopped": rd.get("stopped"),
                                    "decoded": st["records_decoded"],
                                    "gets": st.get("io_reads", 0),
                                    "get_bytes": st.get("io_bytes", 0), "cpu": rd["daemon_cpu"],
                                    "retries": st.get("io_retries", 0),
                                    "failed": st.get("io_failed", 0)}
                    log("bucket %s %s: %.0f records/s; io: %s" % (
                        name, shuffle, row[shuffle]["rate"],
                        {k[3:]: v for k, v in st.items() if k.startswith("io_")}))
            out["workloads"].append(row)
        out["cache"] = _cache(args, tools, env, s3env, srv, mnt)
        out["quarter"] = _cache_quarter(args, tools, env, s3env, srv, mnt)
        out["epochs"] = _epochs(args, tools, env, tenv, s3env, srv, mnt)
    finally:
        srv.stop()
    report(out)
    return out


def run_epochs(args, tools):
    """The 'epochs' part alone (--bucket-epochs-only)."""
    tools = dict(tools)
    tools["s3tool"] = os.path.join(args.build_dir, "tests", "s3", "s3tool")
    s3env, srv = _server(args, args.work)
    env = {"AWS_ACCESS_KEY_ID": s3env.S3RVER_KEY, "AWS_SECRET_ACCESS_KEY": s3env.S3RVER_SECRET}
    try:
        out = {"workloads": [], "cache": None,
               "epochs": _epochs(args, tools, env, dict(os.environ, **env), s3env, srv,
                                 os.path.join(args.work, "bucket-mnt"))}
    finally:
        srv.stop()
    report(out)
    return out


EPOCHS_REC = 150000  # bytes of a record's blob: the 150 KB records


def _epochs(args, tools, env, tenv, s3env, srv, mnt):
    """Several groups, three epochs in one mount, batch files in order."""
    mb = getattr(args, "bucket_epochs_mb", 1050)
    n = max(64, int(mb * 1e6) // (EPOCHS_REC + 60))
    w = {"shards": 16, "features": ["x:float:4", "blob:bytes:1,len=%d" % EPOCHS_REC]}
    src, _ = generate(tools, args.work, "bucket-epochs%d" % n, w, n)
    name = "epochs%d" % n
    _fill(s3env, srv, name, src)
    size = sum(os.path.getsize(os.path.join(src, p)) for p in os.listdir(src)
               if not p.startswith(".") and not p.endswith(".json"))
    url = "s3://%s/%s/" % (BUCKET, name)
    ix = os.path.join(args.work, "bucket-index-%s" % name)
    shutil.rmtree(ix, ignore_errors=True)
    with _env_mount([tools["batchfs"], "-f", "-o", "endpoint=%s,shuffle=block,index_dir=%s" % (
            srv.url, ix), url, mnt], mnt, env):
        pass
    # at least four groups whatever the size: window shrinks below 64 blocks
    # of 4 MiB for a smaller run
    window = min(64, max(2, size // (4 << 20) // 4))
    out = {"n": n, "bytes": size, "delay": args.bucket_cache_delay_ms, "runs": [],
           "window": window}
    dc_size = max(16 << 20, size // 4)
    with _proxy(s3env, srv, args.bucket_cache_delay_ms) as px:
        dl = _tool(tools, tenv, "-o", "endpoint=%s,conns=16" % px.url, "fetch", url,
                   str(8 << 20))
        out["download_s"] = dl["seconds"]
        # the batch files without and with a disk cache, then
        # epoch-K/all.safetensors start to end (issue 31's reader: its
        # columns lie one after another)
        for cache, whole in ((None, False), (os.path.join(args.work, "bucket-epochs-disk-cache"),
                                             False), (None, True)):
            opts = "endpoint=%s,shuffle=block,window=%d,batch_size=256,epochs=3," \
                "index_dir=%s" % (px.url, window, ix)
            if cache:
                shutil.rmtree(cache, ignore_errors=True)
                opts += ",disk_cache=%s,disk_cache_size=%d" % (cache, dc_size)
            run = {"disk_cache": dc_size if cache else 0, "epochs": [], "all": whole}
            with _env_mount([tools["batchfs"], "-f", "-o", opts, url, mnt], mnt, env) as m:
                prev = waits = wait_s = 0
                for e in range(3):
                    if whole:
                        rd = read_tree(m, tools, os.path.join(mnt, "epoch-%04d" % e,
                                                              "all.safetensors"))
                    else:
                        rd = read_tree(m, tools, os.path.join(mnt, "epoch-%04d" % e),
                                       "--only", ".safetensors", "--maxdepth", "1",
                                       "--exclude", "all.safetensors")
                    st = _stats(mnt)
                    run["epochs"].append({"seconds": rd["seconds"],
                                          "fetched": st.get("io_bytes", 0) - prev,
                                          "local": st.get("io_local_bytes", 0),
                                          "groups": st.get("io_groups", 0),
                                          "streams": st.get("io_streams", 0),
                                          "waits": st.get("io_waits", 0) - waits,
                                          "wait_s": st.get("io_wait_seconds", 0) - wait_s,
                                          "unplanned": st.get("io_unplanned", 0)})
                    prev = st.get("io_bytes", 0)
                    waits = st.get("io_waits", 0)
                    wait_s = st.get("io_wait_seconds", 0)
                    log("bucket epochs %s epoch %d: %.2f s, %.3fx fetched; io: %s" % (
                        "disk_cache" if cache else "no cache", e, rd["seconds"],
                        run["epochs"][-1]["fetched"] / size,
                        {k[3:]: v for k, v in st.items() if k.startswith("io_")}))
            out["runs"].append(run)
    return out


def _env_mount(cmd, mnt, env):
    """A mount whose daemon has the AWS_ variables (and XDG_CACHE_HOME) of
    env besides ours."""
    return mount(cmd, mnt, env=dict(os.environ, **{k: v for k, v in env.items()
                                                  if k.startswith("AWS_") or
                                                  k == "XDG_CACHE_HOME"}))


def _cache(args, tools, env, s3env, srv, mnt):
    """'small' behind a short delay: epoch 1 from the disk cache against
    epoch 1 of a local copy."""
    w = WORKLOADS["small"]
    n = w["records"] // (10 if args.quick else 1)
    src, _ = generate(tools, args.work, "bucket-small%d" % n, w, n)
    url = "s3://%s/small/" % BUCKET
    ix = os.path.join(args.work, "bucket-index-small")
    dc = os.path.join(args.work, "bucket-disk-cache")
    shutil.rmtree(dc, ignore_errors=True)
    with _proxy(s3env, srv, args.bucket_cache_delay_ms) as px:
        opts = "endpoint=%s,batch_size=%d,epochs=2,index_dir=%s,disk_cache=%s" % (
            px.url, w["batch_size"], ix, dc)
        with _env_mount([tools["batchfs"], "-f", "-o", opts, url, mnt], mnt, env) as m:
            e0 = read_tree(m, tools, os.path.join(mnt, "epoch-0000", "all.safetensors"))
            st0 = _stats(mnt)
            e1 = read_tree(m, tools, os.path.join(mnt, "epoch-0001", "all.safetensors"))
            st1 = _stats(mnt)
    lix = os.path.join(args.work, "bucket-index-local")
    with mount([tools["batchfs"], "-f", "-o", "batch_size=%d,epochs=2,index_dir=%s" % (
            w["batch_size"], lix), src, mnt], mnt) as m:
        read_tree(m, tools, os.path.join(mnt, "epoch-0000", "all.safetensors"))
        loc = read_tree(m, tools, os.path.join(mnt, "epoch-0001", "all.safetensors"))
    size = sum(os.path.getsize(os.path.join(src, p)) for p in os.listdir(src)
               if not p.startswith(".") and not p.endswith(".json"))
    return {"n": n, "bytes": size, "delay": args.bucket_cache_delay_ms,
            "e0": n / e0["seconds"], "e1": n / e1["seconds"], "local": n / loc["seconds"],
            "e0_bytes": st0.get("io_bytes", 0),
            "e1_bytes": st1.get("io_bytes", 0) - st0.get("io_bytes", 0),
            "hits": st1.get("disk_cache_hits", 0), "cached": st1.get("disk_cache_bytes", 0)}


QUARTER = {"shards": 8, "features": ["x:float:4096", "y:int64:1"], "batch_size": 64}


def _cache_quarter(args, tools, env, s3env, srv, mnt):
    """A disk cache a quarter of the data: three epochs in one mount, with
    the cache and without, for each shuffle; the bytes fetched per epoch
    (io_bytes between the ends of two epochs)."""
    n = 4400  # 72 MB whatever --quick says: the smallest cache is 16 MiB
    src, _ = generate(tools, args.work, "bucket-quarter%d" % n, QUARTER, n)
    _fill(s3env, srv, "quarter", src)
    size = sum(os.path.getsize(os.path.join(src, p)) for p in os.listdir(src)
               if not p.startswith(".") and not p.endswith(".json"))
    cache = max(16 << 20, size // 4 >> 20 << 20)
    url = "s3://%s/quarter/" % BUCKET
    ix = os.path.join(args.work, "bucket-index-quarter")
    dc = os.path.join(args.work, "bucket-disk-cache-quarter")
    out = {"n": n, "bytes": size, "cache": cache, "delay": args.bucket_cache_delay_ms}
    with _proxy(s3env, srv, args.bucket_cache_delay_ms) as px:
        for shuffle in ("block", "global"):
            for with_cache in (False, True):
                shutil.rmtree(dc, ignore_errors=True)
                # readahead below the data: the stage's memory cannot carry
                # one epoch's bytes into the next, so the row sees the disk
                # cache's part alone
                opts = ("endpoint=%s,batch_size=%d,shuffle=%s,epochs=3,index_dir=%s,"
                        "readahead=8M" % (px.url, QUARTER["batch_size"], shuffle, ix))
                if with_cache:
                    opts += ",disk_cache=%s,disk_cache_size=%d" % (dc, cache)
                with _env_mount([tools["batchfs"], "-f", "-o", opts, url, mnt], mnt, env) as m:
                    last, per, secs = _stats(mnt).get("io_bytes", 0), [], []
                    for e in range(3):
                        rd = read_tree(m, tools, os.path.join(mnt, "epoch-%04d" % e,
                                                              "all.safetensors"))
                        st = _stats(mnt)
                        per.append(st.get("io_bytes", 0) - last)
                        last = st.get("io_bytes", 0)
                        secs.append(rd["seconds"])
                key = "%s_%s" % (shuffle, "cache" if with_cache else "plain")
                out[key] = {"bytes": per, "seconds": secs,
                            "hits": st.get("disk_cache_hits", 0),
                            "written": st.get("disk_cache_bytes", 0)}
                log("bucket quarter cache %s: fetched per epoch %s" % (key, per))
    return out


def _report_quarter(q):
    goal = q["bytes"] - 0.9 * q["cache"]
    say("-- disk cache a quarter of the data: %d records of 16 KiB, %.1f MB, "
        "disk_cache_size=%.1f MB, %d ms per request, readahead=8M; MB fetched in epochs 0, 1, 2 "
        "(epoch-K/all.safetensors)" % (q["n"], q["bytes"] / 1e6, q["cache"] / 1e6, q["delay"]))
    for shuffle in ("block", "global"):
        p, c = q["%s_plain" % shuffle], q["%s_cache" % shuffle]
        later = max(c["bytes"][1:])
        ok = later <= p["bytes"][1] and later <= p["bytes"][2] if shuffle == "global" else \
            later <= goal
        say("   %-6s  without %s  with %s (%.1f MB written, %d hits)  target later epochs "
            "%s  %s" % (
                shuffle, " ".join("%6.1f" % (b / 1e6) for b in p["bytes"]),
                " ".join("%6.1f" % (b / 1e6) for b in c["bytes"]), c["written"] / 1e6,
                c["hits"], "<= without" if shuffle == "global" else
                "<= data - 0.9 x cache = %.1f" % (goal / 1e6), verdict(ok)))
def report_epochs(c):
    say("-- epochs: %d records of %d KB (%.0f MB, %d objects) behind %d ms per request, "
        "shuffle=block,window=%d,batch_size=256,epochs=3, the batch files of each epoch in "
        "order in one mount; download (16 ranged GETs of 8 MiB in flight) %.2f s = %.0f MB/s" % (
            c["n"], EPOCHS_REC // 1000, c["bytes"] / 1e6, 16, c["delay"], c["window"],
            c["download_s"],
            c["bytes"] / 1e6 / c["download_s"]))
    for run in c["runs"]:
        t0 = run["epochs"][0]["seconds"]
        say("   %s%s" % ("disk_cache of %.0f MB (a quarter)" % (run["disk_cache"] / 1e6)
                         if run["disk_cache"] else "no disk cache",
                         ", epoch-K/all.safetensors start to end" if run.get("all") else
                         ", the batch files"))
        for e, r in enumerate(run["epochs"]):
            f = r["fetched"] / c["bytes"]
            q = c["download_s"] / r["seconds"] if r["seconds"] else 0
            say("     epoch %d: %6.2f s = %.2fx the first  target <= 1.10  %s; %3.0f%% of the "
                "download  target >= 80%%  %s; fetched during it %.3fx the dataset; io_waits "
                "%d (%.1f s) (groups %d, streams %d, builds unplanned %d)" % (
                    e, r["seconds"], r["seconds"] / t0 if t0 else 0,
                    verdict(r["seconds"] <= 1.10 * t0), 100 * q, verdict(q >= 0.8), f,
                    r.get("waits", 0), r.get("wait_s", 0), r["groups"], r["streams"],
                    r.get("unplanned", 0)))
        mean = sum(r["fetched"] for r in run["epochs"]) / len(run["epochs"]) / c["bytes"]
        say("     fetched per epoch over the %d epochs: %.3fx the dataset  target <= 1.05  %s "
            "(the next epoch's first groups come during the one before)" % (
                len(run["epochs"]), mean, verdict(mean <= 1.05)))


def report(out):
    if out.get("epochs") and not out["workloads"]:
        say()
        say("== bucket: 'epochs' in s3rver behind tests/s3/s3proxy.py")
        report_epochs(out["epochs"])
        return
    say()
    say("== bucket: workloads in s3rver behind tests/s3/s3proxy.py (first byte held the delay, "
        "every request); batchfs with default options over s3://BUCKET/NAME/")
    for r in out["workloads"]:
        say("-- %s: %d records, %.0f MB, %d ms per request: download (16 ranged GETs of 8 MiB "
            "in flight) %.0f records/s (%.0f MB/s); random GETs (16 in flight, one record "
            "each) %.0f/s" % (r["name"], r["n"], r["bytes"] / 1e6, r["delay"], r["download"],
                              r["download_MBps"], r["random"]))
        b, g = r["block"], r["global"]
        q = b["rate"] / r["download"] if r["download"] else 0
        say("   block   %10.0f records/s = %3.0f%% of the download  target >= 70%%  %s   "
            "(%d GETs, %.2f bytes fetched per byte of the records decoded)" % (
                b["rate"], 100 * q, verdict(q >= 0.7), b["gets"],
                b["get_bytes"] / max(1, b["decoded"] * r["bytes"] / r["n"])))
        say("   global  %10.0f records/s%s = %.1fx the random-GET ceiling at 16 in flight "
            "(batchfs keeps 64 in flight); %d GETs for %d records decoded, %d failed" % (
                g["rate"], " (%.0f s)" % g["seconds"] if g["stopped"] else "",
                g["rate"] / r["random"] if r["random"] else 0, g["gets"], g["decoded"],
                g.get("failed", 0)))
    c = out["cache"]
    if c:
        q = c["e1"] / c["local"] if c["local"] else 0
        frac = c["e1_bytes"] / c["bytes"] if c["bytes"] else 0
        say("-- disk cache: 'small' (%d records, %.0f MB) behind %d ms per request, "
            "-o disk_cache: epoch 0 %.0f records/s (%.0f MB fetched, %.0f MB written to the "
            "cache); epoch 1 %.0f records/s = %.0f%% of a local copy's epoch 1 (%.0f)  "
            "target >= 70%%  %s; fetched during epoch 1: %d bytes = %.3f%% of the dataset  "
            "target <= 1%%  %s" % (
                c["n"], c["bytes"] / 1e6, c["delay"], c["e0"], c["e0_bytes"] / 1e6,
                c["cached"] / 1e6, c["e1"], 100 * q, c["local"], verdict(q >= 0.7),
                c["e1_bytes"], 100 * frac, verdict(frac <= 0.01)))
    if out.get("quarter"):
        _report_quarter(out["quarter"])
    if out.get("epochs"):
        report_epochs(out["epochs"])
