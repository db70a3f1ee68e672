# SPDX-License-Identifier: Apache-2.0
"""The 'remote' part of scripts/bench: 'small' records behind a source with
latency, as NFS, Lustre or a FUSE client of a bucket is.

The shards sit behind tests/faultfs, a FUSE filesystem that answers every
read request after DELAY ms, up to 256 at once (each its own delay; every
read reaches it: direct_io). In the same run, for each delay:

  cat        the shards read in order with 1 MiB reads (readtree): the
             source's sequential bandwidth, as records/s
  ceiling    randread: 256 threads reading random record-sized ranges: the
             most records/s a reader of random records gets from the source
  batchfs    default options (io_depth and readahead auto) with
             shuffle=block: epoch-K/all.safetensors of epochs 0, 1 and 2
             read in one mount with 1 MiB reads, the bytes the source served
             for each; shuffle=global: epoch-0000/all.safetensors for
             --remote-seconds at most; the backend the stage chose and why
             (stats.json io_backend, io_backend_reason); time to the first
             batch after mounting (index cached); daemon CPU per record
             decoded; bytes the source served per byte of the records
             decoded
  local      the same mounts over the shards on the local disk: the daemon
             CPU per record to compare with

Targets: block >= 70% of cat; global >= 60% of the ceiling; CPU per record
<= 3x local; source bytes <= 1.5x what was decoded; block: each epoch's
source bytes <= 1.05x the dataset.
"""

import json
import os
import time

from ..data import generate, shard_paths
from ..harness import check_child, fresh_disk_cache, json_lines, log, mount, read_tree
from ..report import say, verdict

W = {"shards": 16, "features": ["x:float:32", "y:int64:1"]}
EPOCHS = 3  # shuffle=block: epochs read in one mount
# the FUSE servers: (label, faultfs arguments)
SOURCES = (("libfuse default max_background", []),
           ("max_background 256", ["--max-background=256"]))


def _stat_bytes(lower):
    """Bytes faultfs has served so far."""
    try:
        with open(os.path.join(lower, ".faultfs-stats")) as f:
            for line in f:
                k, v = line.split()
                if k == "bytes":
                    return int(v)
    except (OSError, ValueError):
        pass
    return 0


def _set(ctl, line):
    tmp = ctl + ".tmp"
    with open(tmp, "w") as f:
        f.write(line + "\n")
    os.replace(tmp, ctl)


def _stats(mnt):
    with open(os.path.join(mnt, "stats.json")) as f:
        return json.load(f)


def _epoch(tools, binary, source, mnt, opts, seconds, lower=None):
    """Mount, time the first batch, remount, read all.safetensors (for
    `seconds` at most). Returns a dict of what was measured."""
    cmd = [binary, "-f", "-o", opts, source, mnt]
    r = {}
    fresh_disk_cache()
    with mount(cmd, mnt) as m:
        t0 = time.perf_counter()
        with open(os.path.join(mnt, "epoch-0000", "batch-000000.safetensors"), "rb") as f:
            f.read()
        r["first_batch"] = time.perf_counter() - t0
        r["mount"] = m.mount_seconds
    fresh_disk_cache()
    with mount(cmd, mnt) as m:
        b0 = _stat_bytes(lower) if lower else 0
        extra = ["--seconds", str(seconds)] if seconds else []
        rd = read_tree(m, tools, os.path.join(mnt, "epoch-0000", "all.safetensors"), *extra)
        st = _stats(mnt)
        r["seconds"] = rd["seconds"]
        r["stopped"] = rd.get("stopped", False)
        r["daemon_cpu"] = rd["daemon_cpu"]
        r["served"] = st["records_served"]
        r["decoded"] = st["records_decoded"]
        r["source_bytes"] = (_stat_bytes(lower) - b0) if lower else 0
        r["io"] = {k[3:]: v for k, v in st.items() if k.startswith("io_")}
        r["backend"] = (st.get("io_backend", "-"), st.get("io_backend_reason", ""))
    r["rate"] = r["served"] / r["seconds"] if r["seconds"] else 0
    r["cpu_per_rec"] = r["daemon_cpu"] / r["decoded"] if r["decoded"] else None
    return r


def _block_epochs(args, tools, binary, source, mnt, opts, lower, total, n):
    """shuffle=block, one mount: the first batch timed, then
    epoch-K/all.safetensors of EPOCHS epochs read whole, each epoch's
    seconds and the bytes the source served for it. The same keys as
    _epoch (rate and source bytes: epoch 0), and "epochs"."""
    cmd = [binary, "-f", "-o", opts + ",epochs=%d" % EPOCHS, source, mnt]
    r = {"epochs": [], "stopped": False}
    fresh_disk_cache()
    with mount(cmd, mnt) as m:
        r["mount"] = m.mount_seconds
        b0 = _stat_bytes(lower)  # the first epoch's bytes from here on
        t0 = time.perf_counter()
        with open(os.path.join(mnt, "epoch-0000", "batch-000000.safetensors"), "rb") as f:
            f.read()
        r["first_batch"] = time.perf_counter() - t0
        cpu, served0 = 0.0, 0
        limit = getattr(args, "remote_block_seconds", 0) or 0
        extra = ["--seconds", str(limit)] if limit else []
        for e in range(EPOCHS):
            rd = read_tree(m, tools, os.path.join(mnt, "epoch-%04d" % e, "all.safetensors"),
                           *extra)
            r["stopped"] = r["stopped"] or rd.get("stopped", False)
            st = _stats(mnt)
            cpu += rd["daemon_cpu"] or 0
            b1 = _stat_bytes(lower)
            ep = {"seconds": rd["seconds"], "source_bytes": b1 - b0,
                  "served": st["records_served"] - served0,
                  "stopped": rd.get("stopped", False)}
            b0 = b1
            # a stopped epoch: against the part of the dataset it served
            part = total * min(1.0, ep["served"] / n) if ep["stopped"] else total
            ep["ratio"] = ep["source_bytes"] / part if part else 0
            served0 = st["records_served"]
            r["epochs"].append(ep)
            log("  block epoch %d: %.1f s%s, source %.3fx the dataset" % (
                e, ep["seconds"], " (stopped)" if ep["stopped"] else "", ep["ratio"]))
        r["daemon_cpu"] = cpu
        r["decoded"] = st["records_decoded"]
        r["io"] = {k[3:]: v for k, v in st.items() if k.startswith("io_")}
        r["backend"] = (st.get("io_backend", "-"), st.get("io_backend_reason", ""))
    e0 = r["epochs"][0]
    r["seconds"], r["served"] = e0["seconds"], e0["served"]
    r["source_bytes"] = sum(e["source_bytes"] for e in r["epochs"])
    r["rate"] = e0["served"] / e0["seconds"] if e0["seconds"] else 0
    r["cpu_per_rec"] = cpu / r["decoded"] if r["decoded"] else None
    return r


def run(args, tools):
    """Returns the rows; prints the table."""
    n = getattr(args, "remote_records", None) or (200_000 if args.quick else 6_400_000)
    src, _ = generate(tools, args.work, "remote%d" % n, W, n)
    shards = shard_paths(src)
    total = sum(os.path.getsize(p) for p in shards)
    per_rec = total / n
    faultfs = os.path.join(os.path.dirname(tools["gen"]), "..", "faultfs", "faultfs")
    randread = os.path.join(os.path.dirname(tools["readtree"]), "randread")
    binaries = [("batchfs", tools["batchfs"])]
    if getattr(args, "remote_previous", None):
        binaries.append(("previous", os.path.join(os.path.abspath(args.remote_previous),
                                                  "batchfs")))
    mnt = os.path.join(args.work, "remote-mnt")
    out = {"n": n, "bytes": total, "per_rec": per_rec, "sources": {}, "local": {}}

    # the daemon's CPU per record over the local disk: what a remote mount
    # is measured against
    for label, binary in binaries:
        for shuffle in ("block", "global"):
            ix = os.path.join(args.work, "remote-index-local-%s" % label)
            opts = "shuffle=%s,index_dir=%s" % (shuffle, ix)
            with mount([binary, "-f", "-o", opts, src, mnt], mnt):
                pass  # the index, once
            out["local"][(label, shuffle)] = _epoch(tools, binary, src, mnt, opts, 0)
            log("local %s %s: %.2f us/record" % (
                label, shuffle, 1e6 * out["local"][(label, shuffle)]["cpu_per_rec"]))

    lower = os.path.join(args.work, "remote-lower")
    ctl = os.path.join(args.work, "remote.ctl")
    for kind, ffargs in SOURCES:
        out["sources"][kind] = _source(args, tools, binaries, src, lower, ctl, mnt, n, per_rec,
                                       total, faultfs, randread, ffargs, kind)
    report(out, binaries)
    return out


def _source(args, tools, binaries, src, lower, ctl, mnt, n, per_rec, total, faultfs, randread,
            ffargs, kind):
    """One FUSE server over the shards: for each delay, cat, the ceiling
    and the batchfs mounts. Returns {delay: rows}."""
    res = {}
    _set(ctl, "ok")
    with mount([faultfs, src, lower, ctl] + ffargs, lower):
        for label, binary in binaries:  # index through the source's paths, no delay
            ix = os.path.join(args.work, "remote-index-%s" % label)
            for shuffle in ("block", "global"):
                with mount([binary, "-f", "-o", "shuffle=%s,index_dir=%s" % (shuffle, ix),
                              lower, mnt], mnt):
                    pass
        for delay in args.remote_delays:
            d = res[delay] = {}
            _set(ctl, "delay %d" % delay)
            b0 = _stat_bytes(lower)
            rt = json_lines(check_child([tools["readtree"], "--exclude", ".faultfs-stats",
                                             lower])[0])[0]
            d["cat"] = {"rate": n / rt["seconds"], "mb_s": rt["MB_s"],
                        "source_bytes": _stat_bytes(lower) - b0}
            rr = json.loads(check_child([randread, "--threads", "256", "--seconds",
                                           str(args.remote_seconds / 2), "--len",
                                           str(int(per_rec))] + shard_paths(lower))[0])
            d["ceiling"] = {"rate": rr["reads_per_s"], "cpu_per_read": rr["cpu_s"] / rr["reads"]}
            log("%s, delay %d ms: cat %.0f records/s, ceiling %.0f reads/s" % (
                kind, delay, d["cat"]["rate"], d["ceiling"]["rate"]))
            for label, binary in binaries:
                ix = os.path.join(args.work, "remote-index-%s" % label)
                for shuffle in ("block", "global"):
                    opts = "shuffle=%s,index_dir=%s" % (shuffle, ix)
                    if shuffle == "block":
                        r = _block_epochs(args, tools, binary, lower, mnt, opts, lower, total,
                                          n)
                    else:
                        r = _epoch(tools, binary, lower, mnt, opts, args.remote_seconds, lower)
                    d[(label, shuffle)] = r
                    log("%s, delay %d ms, %s %s: %.0f records/s, %.2f us/record, source "
                          "%.2fx; %s (%s)" % (kind, delay, label, shuffle, r["rate"],
                                              1e6 * (r["cpu_per_rec"] or 0),
                                              r["source_bytes"] / max(1, r["decoded"] * per_rec),
                                              *r["backend"]))
        _set(ctl, "ok")
    return res


def report(out, binaries):
    say()
    say("== remote: 'small' (x float[32], y int64), %d records in %d shards (%.0f MB, %.1f "
        "groups of 256 MiB), behind tests/faultfs (each read answered after the delay, 256 at "
        "once, direct_io); default options" % (out["n"], W["shards"], out["bytes"] / 1e6,
                                               out["bytes"] / (256 << 20)))
    say("%-26s %12s %10s %12s %10s %12s" % ("", "records/s", "vs target", "us/record",
                                             "vs local", "source/used"))
    for label, _ in binaries:  # what the same mounts do with no latency at all
        say("-- local disk, %s: block %.0f records/s (%.2f us/record), global %.0f records/s "
            "(%.2f us/record): the most a slow source could give on this machine's cores" % (
                label, *(v for sh in ("block", "global")
                         for v in (out["local"][(label, sh)]["rate"],
                                   1e6 * (out["local"][(label, sh)]["cpu_per_rec"] or 0)))))
    for kind, delays in out["sources"].items():
        for delay, d in delays.items():
            say("-- %s, %d ms per read: cat (1 MiB reads) %.0f records/s (%.0f MB/s); ceiling "
                "(256 threads of random %d-byte reads) %.0f records/s, %.1f us CPU per read" % (
                    kind, delay, d["cat"]["rate"], d["cat"]["mb_s"], out["per_rec"],
                    d["ceiling"]["rate"], 1e6 * d["ceiling"]["cpu_per_read"]))
            for label, _ in binaries:
                for shuffle, base, target in (("block", d["cat"]["rate"], 0.70),
                                              ("global", d["ceiling"]["rate"], 0.60)):
                    _row(out, d, label, shuffle, base, target)
    say("(vs target: block / cat >= 70%%, global / ceiling >= 60%%; vs local: daemon CPU per "
        "record decoded against a local mount's, <= 3x; source/used: bytes the source served "
        "per byte of the records decoded, <= 1.5x; block: %d epochs in one mount, the source's "
        "bytes <= 1.05x the dataset per epoch; an epoch's share counts what was read while "
        "it was read, the next epoch's reads ahead included)" % EPOCHS)


def _row(out, d, label, shuffle, base, target):
    r = d[(label, shuffle)]
    loc = out["local"][(label, shuffle)]
    q = r["rate"] / base if base else 0
    cq = (r["cpu_per_rec"] / loc["cpu_per_rec"]
          if r["cpu_per_rec"] and loc["cpu_per_rec"] else 0)
    used = r["decoded"] * out["per_rec"]
    say("%-26s %12.0f %5.0f%% %s %9.2f %6.1fx %s %8.2fx %s" % (
        "%s %s%s" % (label, shuffle, " (%.0f s)" % r["seconds"] if r["stopped"] else ""),
        r["rate"], 100 * q, verdict(q >= target), 1e6 * (r["cpu_per_rec"] or 0), cq,
        verdict(cq <= 3), r["source_bytes"] / used if used else 0,
        verdict(r["source_bytes"] <= 1.5 * used)))
    say("%-26s backend %s: %s" % ("", *r["backend"]))
    if r.get("epochs"):
        allb = r["source_bytes"] / sum(out["bytes"] * min(1.0, e["served"] / out["n"])
                                       if e["stopped"] else out["bytes"] for e in r["epochs"])
        say("%-26s %d epochs in one mount: the source served %.3fx the dataset per epoch %s" % (
            "", len(r["epochs"]), allb, verdict(allb <= 1.05)))
    say("%-26s first batch %.3f s after a mount of %.3f s; %d source reads, "
        "%d in flight at most, decoders waited %.1f s" % (
            "", r["first_batch"], r["mount"], r["io"].get("reads", 0),
            r["io"].get("peak_inflight", 0), r["io"].get("wait_seconds", 0)))
    for e, ep in enumerate(r.get("epochs", [])):
        say("%-26s epoch %d: %.1f s%s, %.0f records/s (%.0f%% of the first), source %.3fx the "
            "dataset %s" % ("", e, ep["seconds"], " (stopped)" if ep.get("stopped") else "", ep["served"] / ep["seconds"] if ep["seconds"]
                            else 0, 100 * r["epochs"][0]["seconds"] / ep["seconds"]
                            if ep["seconds"] else 0, ep["ratio"], verdict(ep["ratio"] <= 1.05)))
