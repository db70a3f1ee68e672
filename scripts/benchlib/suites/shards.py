# SPDX-License-Identifier: Apache-2.0
"""The many-shards suite: 20,000 tiny plain shards of 20 'small' records
(2,000 with --quick, --shards N): `xargs cat` of all of them, cold and warm,
against the first mount's index build with a fresh index_dir (cold and
warm, index only as with schema=; and with schema inference, warm),
re-mounts with the index reused (median of 3; and one after drop_caches)
and that they rewrite no index file, every record served (epoch-0000/all/
read, stats.json counters), and the builds, re-mounts and read again under
`ulimit -n 256`; last a first mount with a ragged feature. Cold means
`echo 3 > drop_caches` (as root: dentries and inodes too), else fadvise
eviction.
"""

import json
import os
import shutil
import subprocess
import time

from ..data import WORKLOADS, generate, shard_paths
from .. import harness
from ..harness import check_child, evict, log, read_stats
from ..peers import xargs_cat
from ..report import fmt_q, fmt_rate, say, verdict

SHARDS_N = 20_000  # tiny shards in the 'many shards' part (--quick: SHARDS_N // 10)
SHARDS_PER = 20  # records per shard, of the 'small' features (~3.6 KB a shard)
SHARDS_NOFILE = 256  # the descriptor limit of its ulimit runs


def cold_cache(args):
    """A cold start for many tiny files: as root, write back and drop the page
    cache, dentries and inodes (echo 3 > drop_caches; opening 20,000 files is
    mostly metadata, which fadvise cannot evict); else evict the data alone.
    Returns how, for the rows."""
    if os.geteuid() == 0:
        subprocess.run(["sync"], check=False)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    evict(args.shards_files)
    return "fadvise (not root: inodes and dentries stay cached)"


def shards_one(args, tools, nshards):
    """'Many shards': nshards tiny plain shards of SHARDS_PER
    'small' records each. `cat` of all of them (cold, warm) against the first
    mount's index build with a fresh index_dir (cold, warm; index only, as
    with schema=; then with schema inference, warm), re-mounts with the index
    reused (warm page cache: median of 3; and one after drop_caches), and
    that a mount serves every record (all of epoch-0000/all/ read, stats.json
    counters); the builds, re-mounts and the read again under `ulimit -n
    SHARDS_NOFILE`; last a warm first mount with a ragged feature (every
    record counted, the counts cached) and the files it leaves."""
    w = WORKLOADS["small"]
    n = nshards * SHARDS_PER
    src, _ = generate(tools, args.work, "shards%d" % nshards,
                      {"shards": nshards, "features": w["features"]}, n)
    files = shard_paths(src)
    if len(files) != nshards:
        raise RuntimeError("%s: %d shards, not %d" % (src, len(files), nshards))
    args.shards_files = files
    nbytes = sum(os.path.getsize(f) for f in files)
    jobs = str(os.cpu_count() or 1)
    r = {"shards": nshards, "records": n, "bytes": nbytes}
    schema = os.path.join(args.work, "shards-schema.json")
    with open(schema, "w") as f:
        json.dump({"features": {"x": {"kind": "float", "dtype": "float32", "shape": [32]},
                                "y": {"kind": "int64", "dtype": "int64", "shape": []}}}, f)
    mnt = os.path.join(args.work, "mnt-shards")
    # a fresh index_dir for each first mount, all removed at the end: 20,000
    # files deleted just before a build would slow its file creations (ext4
    # passes over recently deleted inodes)
    ixroot = os.path.join(args.work, "index-shards%d" % nshards)
    shutil.rmtree(ixroot, ignore_errors=True)
    wrapper = os.path.join(args.work, "batchfs-ulimit%d" % SHARDS_NOFILE)
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nulimit -n %d || exit 99\nexec %s \"$@\"\n" % (SHARDS_NOFILE,
                                                                          tools["batchfs"]))
    os.chmod(wrapper, 0o755)

    log("shards %d: cat cold, cat warm" % nshards)
    r["cold_how"] = cold_cache(args)
    r["cat_cold"] = xargs_cat(files)
    r["cat_warm"] = min(xargs_cat(files), xargs_cat(files))

    def mount(binary, ix, opts):
        return harness.mount([binary, "-f", src, mnt, "-o", "index_dir=%s,threads=%s%s" % (
            ix, jobs, opts)], mnt)

    def first_mount(binary, ix, opts, mode, key):
        if mode == "cold":
            cold_cache(args)
        else:
            xargs_cat(files)
            subprocess.run(["sync"], check=False)  # no writeback of the last build
        log("shards %d: %s (%s)" % (nshards, key, mode))
        with mount(binary, ix, opts) as m:
            r[key] = m.mount_seconds
            st = read_stats(mnt)
            if st.get("records") != n or st.get("index_reused"):
                raise RuntimeError("shards: first mount: %s records, index_reused %s" % (
                    st.get("records"), st.get("index_reused")))
        subprocess.run(["sync"], check=False)

    def remounts(binary, ix, opts, key, read_all=False):
        """3 re-mounts (the median); the index and schema reused, no index
        file rewritten; the last one reads all of epoch-0000/all/."""
        idx = [os.path.join(ix, f) for f in os.listdir(ix) if f.endswith(".idx")]
        mtimes = {f: os.stat(f).st_mtime_ns for f in idx}
        times = []
        for k in range(3):
            log("shards %d: %s %d" % (nshards, key, k + 1))
            with mount(binary, ix, opts) as m:
                times.append(m.mount_seconds)
                st = read_stats(mnt)
                if not st.get("index_reused") or st.get("records") != n:
                    raise RuntimeError("shards: re-mount: index_reused %s, %s records" % (
                        st.get("index_reused"), st.get("records")))
                if k == 2 and read_all:  # every record, through every shard
                    t0 = time.perf_counter()
                    check_child([tools["readtree"], mnt + "/epoch-0000/all"])
                    r["read_all" + key[7:]] = time.perf_counter() - t0
                    with open(mnt + "/epoch-0000/all/y.npy", "rb") as f:
                        head = f.read(128).decode("latin-1")
                    st = read_stats(mnt)
                    r["served" + key[7:]] = (
                        "'shape': (%d,)" % n in head and st.get("failed_reads") == 0 and
                        st.get("decode_errors") == 0 and st.get("corrupt_records") == 0)
                    r["fds" + key[7:]] = len(os.listdir("/proc/%d/fd" % m.pid))
        r[key] = sorted(times)[1]
        r[key + "_spread"] = (min(times), max(times))
        r[key + "_rewritten"] = sum(os.stat(f).st_mtime_ns != t for f, t in mtimes.items())

    sopt = ",schema=" + schema
    for lim, binary in (("", tools["batchfs"]), ("_ulimit", wrapper)):
        # first mounts, index only (schema=): cold, then warm
        for mode in ("cold", "warm"):
            first_mount(binary, os.path.join(ixroot, mode + lim), sopt, mode,
                        "build_%s%s" % (mode, lim))
        ix = os.path.join(ixroot, "warm" + lim)
        remounts(binary, ix, sopt, "remount" + lim, read_all=True)
        cold_cache(args)
        log("shards %d%s: re-mount after drop_caches" % (nshards, lim))
        with mount(binary, ix, sopt) as m:
            r["remount_cold%s" % lim] = m.mount_seconds
    # a first mount as most users make it (the schema inferred), warm, and
    # its re-mounts (index and inferred schema reused)
    ix = os.path.join(ixroot, "infer")
    first_mount(tools["batchfs"], ix, "", "warm", "build_infer_warm")
    remounts(tools["batchfs"], ix, "", "remount_infer")
    r["index_files"] = len(os.listdir(ix))
    r["index_disk"] = sum(os.stat(os.path.join(ix, f)).st_blocks * 512 for f in os.listdir(ix))
    # a first mount with a ragged feature (x's values counted per record, as
    # a token sequence's would be), warm: the count pass and its counts cache
    rschema = os.path.join(args.work, "shards-ragged-schema.json")
    with open(rschema, "w") as f:
        json.dump({"features": {"x": {"kind": "float", "dtype": "float32", "shape": [-1],
                                      "ragged": True},
                                "y": {"kind": "int64", "dtype": "int64", "shape": []}}}, f)
    ix = os.path.join(ixroot, "ragged")
    first_mount(tools["batchfs"], ix, ",schema=" + rschema, "warm", "build_ragged_warm")
    r["ragged_files"] = len(os.listdir(ix))
    shutil.rmtree(ixroot, ignore_errors=True)
    return r


def run(args, tools):
    return shards_one(args, tools, args.shards or (SHARDS_N // 10 if args.quick else SHARDS_N))


def ratios(r):
    tag = "shards  %s shards x %d records (%.0f MB):" % ("{:,}".format(r["shards"]), SHARDS_PER,
                                                       r["bytes"] / 1e6)
    mb = r["bytes"] / 1e6
    cold = "cold: " + r["cold_how"]
    for lim, what in (("", ""), ("_ulimit", " under ulimit -n %d" % SHARDS_NOFILE)):
        for mode in ("cold", "warm"):
            b, c = r["build_%s%s" % (mode, lim)], r["cat_%s" % mode]
            q = c / b
            say("%s first index build%s (mount with schema=, %s) / xargs cat (%s) = %s / %s "
                "MB/s (%.2f / %.2f s; %s / %s shards/s) = %s  target >= 50%%  %s%s" % (
                    tag, what, mode, mode, fmt_rate(mb / b), fmt_rate(mb / c), b, c,
                    fmt_rate(r["shards"] / b), fmt_rate(r["shards"] / c), fmt_q(q, 0.50),
                    verdict(q >= 0.50), ("  (%s)" % cold) if mode == "cold" else ""))
        key = "remount" + lim
        lo, hi = r[key + "_spread"]
        say("%s re-mount%s with the index reused %.3f s (3 runs: %.3f-%.3f s)  target <= 1 s  "
            "%s  (index files rewritten: %d)" % (tag, what, r[key], lo, hi, verdict(r[key] <= 1),
                                                 r[key + "_rewritten"]))
        say("%s re-mount%s with the index reused after drop_caches %.3f s  (for information: "
            "every index file and shard inode comes from disk)" % (
                tag, what, r["remount_cold%s" % lim]))
        say("%s every record served%s (epoch-0000/all/ read in %.2f s; %d descriptors open at "
            "the end): %s" % (tag, what, r["read_all%s" % lim], r["fds%s" % lim],
                              "yes" if r["served%s" % lim] else "NO"))
    b = r["build_infer_warm"]
    say("%s first mount with schema inference (warm) / xargs cat (warm) = %s / %s MB/s (%.2f s) "
        "= %.0f%%  (for information); %d index files, %.0f MB on disk" % (
            tag, fmt_rate(mb / b), fmt_rate(mb / r["cat_warm"]), b, 100 * r["cat_warm"] / b,
            r["index_files"], r["index_disk"] / 1e6))
    key = "remount_infer"
    lo, hi = r[key + "_spread"]
    say("%s re-mount after it (index and inferred schema reused) %.3f s (3 runs: %.3f-%.3f s)  "
        "target <= 1 s  %s  (index files rewritten: %d)" % (
            tag, r[key], lo, hi, verdict(r[key] <= 1), r[key + "_rewritten"]))
    b = r.get("build_ragged_warm")
    if b is not None:
        say("%s first mount with a ragged feature (warm; every record's values counted) / "
            "xargs cat (warm) = %s / %s MB/s (%.2f s) = %.0f%%  (for information); %d files in "
            "index_dir" % (tag, fmt_rate(mb / b), fmt_rate(mb / r["cat_warm"]), b,
                           100 * r["cat_warm"] / b, r["ragged_files"]))
