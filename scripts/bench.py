# SPDX-License-Identifier: Apache-2.0
"""scripts/bench — how fast batchfs is, next to its floors, ceilings and peers.

    scripts/bench [--quick] [--workload small|image|varlen|wide|wide2000|photo]... [--work DIR]
                  [--cold-runs N] [--drop-caches] [--no-npm] [--no-scale] [--scale-1e8] [--only-scale]
                  [--no-shards] [--only-shards] [--shards N]
                  [--block-vs-global] [--block-only] [--cache-size SIZE]
                  [--nodes] [--only-nodes] [--nodes-world W] [--nodes-sample N]
                  [--defaults] [--only-defaults] [--defaults-records N] [--defaults-image-records N]
                  [--build-dir DIR] [--peers DIR] [--chart-dir DIR]

For each workload (generated with the project's own bfs_gen; plain shards):
  raw cat of the shards                       the floor
  null FUSE (tests/bench/nullfs) serving the same tree (same paths, same
  sizes, read in the same order) from memory: first read through the page
  cache, re-read with keep_cache, and direct_io with 1 MiB reads
  the decoder alone (tests/bench/bench_decode): parse only, and batch
  building in file and shuffled order, on 1 thread and on every core
  batchfs: index build, then the first epoch on a fresh mount (cold; the
  median of 3 fresh mounts, interleaved with the null FUSE's first reads),
  then a re-read (warm); every file of every batch of epoch-0000 is read with
  1 MiB reads by tests/bench/readtree (the null FUSE tree is read the same
  way)
  Python + the official protobuf runtime (Debian's, C++ backend) + numpy,
  shuffled batches of the same size, on a fixed subset
  npm @roboflow/tfrecords on a fixed subset of 'small'
  the peer tfr_decode (../shared/peers/tfr_decode.c, built here with gcc -O2
  -march=native into WORK): one core, file order and --shuffle (global)
  'small': epoch-0000/all.safetensors (the whole epoch in one file) read
  with 1 MiB reads on a fresh mount (cold) and again (warm, median of 3),
  and the null FUSE serving one file of the same size (first read,
  keep_cache re-read); "n/a" where the build has no all/
  'small' and 'image': PyTorch input loops as users write them, each in a
  child /usr/bin/python3: a DataLoader (2 workers) over the batch folders
  (np.load of every .npy of batch-i), all/*.npy memory-mapped and sliced
  into batches in one process (both on a fresh mount), and vahidk/tfrecord
  (../shared/peers/vahidk-tfrecord) with a shuffle queue under a DataLoader,
  on a fixed subset

'photo' (JPEG photographs, -o image=image/encoded:224x224) has rows of its
own (benchlib/suites/photo.py): the one-core C loop tests/bench/bench_jpeg
(TurboJPEG + decoder/resize.c), batchfs's cold epoch over the .npy batch
tree with all threads and with threads=1, and vahidk/tfrecord + PIL under a
DataLoader; the cold epoch with crop=random,flip=h and with crop=center
against torchvision's training and evaluation pipelines under a DataLoader
with a worker per core, and the daemon's CPU per image against PIL's own
full decode; then the ratio lines against the targets, and the scale part on generated
datasets of small records (10^7 in 64 shards; 10^8 in 256 with --scale-1e8):
index bytes per record on disk, re-mount time with the index reused (and
that it reads no shard), the first index build's rate against `cat` of the
same files (cold: evicted with fadvise; and warm), the daemon's RSS after
mount and after one epoch; then the many-shards part (20,000
tiny plain shards of 20 'small' records; 2,000 with --quick): `xargs cat`
of all of them, cold and warm, against the first mount's index build with a
fresh index_dir (cold and warm, index only as with schema=; and with schema
inference, warm), re-mounts with the index reused (median of 3; and one
after drop_caches) and that they rewrite no index file, and every record
served (epoch-0000/all/ read, stats.json counters); builds, re-mounts and
the read again under `ulimit -n 256`. Cold there means `echo 3 >
drop_caches` (as root: dentries and inodes too), else fadvise eviction.
Everything goes to stdout and to WORK/bench-results.txt.

records/s counts records served (a tree pass serves every record of the
epoch once, as .npy files and again inside the .safetensors file);
"served MB/s" is batch-file bytes per second; "TFRecord MB/s" is the
TFRecord input (record lengths + 16 framing bytes each) per second.
Peak RSS: VmHWM of a FUSE daemon (batchfs, nullfs), else the child's
ru_maxrss (wait4). "CPU s": CPU time (user + system) of the FUSE daemon
during the read for the FUSE rows, of the timed loop for the Python and npm
rows, of the process otherwise; on a busy machine it is steadier than the
wall-clock columns. The null FUSE serves its files from a 256 MiB buffer
(nullfs span=), so its replies are copied from DRAM as batchfs's are.
"""

import argparse
import json
import os
import shutil
import sys
import time

from benchlib import harness, peers, report
from benchlib.data import WORKLOADS
from benchlib.harness import TOP, loadavg
from benchlib.report import say
from benchlib.suites import (bucket, compressed, defaults, mixture, nodes, photo, remote, scale,
                             shards, workload)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/batchfs-bench")
    ap.add_argument("--quick", action="store_true", help="10x fewer records")
    ap.add_argument("--cold-runs", type=int, metavar="N",
                    help="cold reads per workload, batchfs and null FUSE interleaved; the "
                    "median counts (default %d; 1 with --quick)" % harness.COLD_RUNS)
    ap.add_argument("--workload", action="append", choices=list(WORKLOADS))
    ap.add_argument("--drop-caches", action="store_true",
                    help="(root) drop the page cache before the floor and the cold epoch")
    ap.add_argument("--batch-size", type=int, help="override every workload's batch size")
    ap.add_argument("--cache-size", help="batchfs cache_size (default: batchfs's, 1G)")
    ap.add_argument("--no-npm", action="store_true")
    ap.add_argument("--remote", action="store_true",
                    help="also the 'remote' part: 'small' behind a source with latency "
                    "(tests/faultfs), against cat and 256 random readers of that source "
                    "(scripts/benchlib/suites/remote.py)")
    ap.add_argument("--only-remote", action="store_true",
                    help="the 'remote' part alone (no workloads, no scale or shards parts)")
    ap.add_argument("--remote-delays", default="2,20",
                    help="milliseconds per read of the remote part's source (default 2,20)")
    ap.add_argument("--remote-records", type=int, metavar="N",
                    help="records of the remote part's dataset (default 6,400,000: 1.1 GB, "
                    "four groups of shuffle=block's window blocks, 256 MiB by default; "
                    "--quick 200,000; fewer for a busy machine): shuffle=block reads a "
                    "group before its first batch, so its ratio to cat grows with the "
                    "number of groups")
    ap.add_argument("--remote-seconds", type=float, default=10,
                    help="the remote part's global shuffle is read this long at most")
    ap.add_argument("--bucket", action="store_true",
                    help="also the 'bucket' part: 'small' and 'image' in s3rver behind a "
                    "delaying proxy against a 16-way parallel download, and the disk cache "
                    "(scripts/benchlib/suites/bucket.py)")
    ap.add_argument("--only-bucket", action="store_true",
                    help="the 'bucket' part alone")
    ap.add_argument("--bucket-delay-ms", type=int, default=20)
    ap.add_argument("--bucket-cache-delay-ms", type=int, default=5)
    ap.add_argument("--bucket-epochs-mb", type=int, default=1050,
                    help="the bucket part's 'epochs' dataset, in MB of 150 KB records "
                    "(default 1050: four groups of 256 MiB)")
    ap.add_argument("--bucket-epochs-only", action="store_true",
                    help="of the bucket part, only 'epochs' (three epochs of block shuffle "
                    "in one mount, with and without disk_cache)")
    ap.add_argument("--bucket-seconds", type=float, default=10,
                    help="the bucket part's global shuffle is read this long at most")
    ap.add_argument("--defaults", action="store_true",
                    help="also the 'defaults' part: the global shuffle over a bucket with no "
                    "option against a 16-way download + a local epoch; a disk cache a quarter "
                    "of the data; disk_cache=off; 'image' records against a GET per record; "
                    "rank 3 of 64 (scripts/benchlib/suites/defaults.py)")
    ap.add_argument("--only-defaults", action="store_true", help="the 'defaults' part alone")
    ap.add_argument("--defaults-delay-ms", type=int, default=5)
    ap.add_argument("--defaults-records", type=int, default=400_000,
                    help="'small' records of the defaults part (default 400,000: 72 MB)")
    ap.add_argument("--defaults-image-records", type=int, default=800,
                    help="'image' records of the defaults part (default 800: 120 MB)")
    ap.add_argument("--remote-block-seconds", type=float, default=120,
                    help="the remote part's shuffle=block reads each epoch this long at most "
                    "(0: whole)")
    ap.add_argument("--remote-previous", metavar="DIR",
                    help="also measure DIR/batchfs (a build of the previous commit) in the "
                    "remote part, with the same baselines")
    ap.add_argument("--nodes", action="store_true",
                    help="also the 'nodes' part: a job of --nodes-world ranks over one bucket "
                    "under shuffle=block with partitions, a sample of its ranks mounted one "
                    "after another (scripts/benchlib/suites/nodes.py)")
    ap.add_argument("--only-nodes", action="store_true", help="the 'nodes' part alone")
    ap.add_argument("--nodes-world", type=int, default=1000)
    ap.add_argument("--nodes-partitions", type=int, default=0,
                    help="partitions of the 'nodes' part (default: the world)")
    ap.add_argument("--nodes-records", type=int, default=0,
                    help="records of 4 KB (default: two blocks of 15 records a partition)")
    ap.add_argument("--nodes-sample", type=int, default=16, help="ranks mounted (--quick: 4)")
    ap.add_argument("--mixture", action="store_true",
                    help="the mixture suite: 3 sources vs one mount of the same shards")
    ap.add_argument("--only-mixture", action="store_true", help="the mixture suite alone")
    ap.add_argument("--no-scale", "--no-index10m", dest="no_scale", action="store_true",
                    help="skip the scale part (index size, re-mount, index build vs cat)")
    ap.add_argument("--scale-1e8", action="store_true",
                    help="the scale part at 10^8 records too (256 shards, 3.5 GB, minutes)")
    ap.add_argument("--only-scale", action="store_true",
                    help="run the scale part alone (no workloads)")
    ap.add_argument("--no-shards", action="store_true",
                    help="skip the many-shards part (20,000 tiny shards: index build vs cat, "
                    "re-mount, under ulimit -n 256 too)")
    ap.add_argument("--only-shards", action="store_true",
                    help="run the many-shards part alone (no workloads, no scale part)")
    ap.add_argument("--shards", type=int, metavar="N",
                    help="shards in the many-shards part (default 20,000; --quick 2,000)")
    ap.add_argument("--product-from", metavar="DIR",
                    help="take batchfs and bench_decode from DIR, a build of another commit "
                         "(e.g. a git worktree of HEAD~1 built with scripts/build), to compare "
                         "the two commits with the same baselines")
    ap.add_argument("--peers", default=os.path.join(os.path.dirname(TOP), "shared", "peers"),
                    help="the peers to run beside batchfs (tfr_decode.c, vahidk-tfrecord/)")
    ap.add_argument("--chart-dir", metavar="DIR",
                    help="where the SVG charts go, one per workload (default: WORK/charts)")
    ap.add_argument("--build-dir", default=os.path.join(TOP, "build"),
                    help="where scripts/build builds (default: build/ of the checkout)")
    # internal: the Python baseline, run as a child so that its RSS is its own
    ap.add_argument("--python-baseline", metavar="SOURCE", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--records", type=int, help=argparse.SUPPRESS)
    # internal: a PyTorch input loop (torch_loop), run as a child
    ap.add_argument("--torch-loop", metavar="MODE", help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    return ap, ap.parse_args(argv)


def main(argv):
    ap, args = parse_args(argv)
    harness.set_cold_runs(args.cold_runs or (1 if args.quick else harness.COLD_RUNS))

    if args.python_baseline:
        peers.python_baseline(args.python_baseline, json.loads(args.spec), args.batch_size,
                              args.records, 0)
        return 0
    if args.torch_loop:
        peers.torch_loop(args.torch_loop, args.root, args.batch_size, args.records,
                         json.loads(args.spec) if args.spec else {})
        return 0
    if args.drop_caches and os.geteuid() != 0:
        ap.error("--drop-caches needs root")
    if args.only_shards:
        args.no_scale = True
    if args.only_remote:
        args.remote = args.no_scale = args.no_shards = args.no_npm = True
    if args.bucket_epochs_only:
        args.only_bucket = True
    if args.only_bucket:
        args.bucket = args.no_scale = args.no_shards = args.no_npm = True
    if args.only_defaults:
        args.defaults = args.no_scale = args.no_shards = args.no_npm = True
    if args.only_nodes:
        args.nodes = args.no_scale = args.no_shards = args.no_npm = True
    if args.quick and args.nodes_sample == 16:
        args.nodes_sample = 4
    if args.only_mixture:
        args.mixture = args.no_scale = args.no_shards = args.no_npm = True
    args.remote_delays = [int(x) for x in args.remote_delays.split(",") if x]
    names = [] if (args.only_scale or args.only_shards or args.only_remote or
                   args.only_bucket or args.only_mixture or args.only_defaults or
                   args.only_nodes) else (
        args.workload or ["small", "image", "varlen", "wide", "wide2000", "photo"])
    os.makedirs(args.work, exist_ok=True)
    # the default folder of the index and the disk cache (disk_cache=auto),
    # fresh under the work folder: a run never reads, nor fills, the user's
    xdg = os.path.join(os.path.abspath(args.work), "xdg-cache")
    shutil.rmtree(xdg, ignore_errors=True)
    os.environ["XDG_CACHE_HOME"] = xdg

    tools = harness.build_tools(args)
    if tools is None:
        print("scripts/bench: the build failed", file=sys.stderr)
        return 1
    if args.product_from:
        say("batchfs and bench_decode from %s" % os.path.abspath(args.product_from))
    peers.build_tfr_decode(args, tools)

    npm_dir, npm_note = (None, "skipped: npm (--no-npm)")
    if "small" in names and not args.no_npm:
        npm_dir, npm_note = peers.npm_setup(args.work)

    t_start = time.perf_counter()
    run = report.header(args, argv)
    results = []
    if args.remote:
        remote.run(args, tools)
    if args.bucket:
        bucket.run(args, tools)
    if args.defaults:
        defaults.run(args, tools)
    if args.nodes:
        nodes.run(args, tools)
    gz_results = []
    for name in names:
        w = WORKLOADS[name]
        if "gz_of" in w:
            gz_results.append(compressed.run(args, tools, name, w))
            continue
        results.append(photo.run(args, tools, name, w) if w.get("photo") else
                       workload.run(args, tools, name, w, npm_dir, npm_note))
        results[-1]["run"] = run["id"]
    scale_rows = None if args.no_scale else scale.run(args, tools)
    shards_row = None if args.no_shards or args.only_scale else shards.run(args, tools)
    mixture_row = mixture.run(args, tools) if args.mixture else None
    say()
    say("load average at end: %.2f on %d cores" % (loadavg(), os.cpu_count()))

    say()
    say("== ratios (records/s unless noted)")
    for r in results:
        if r.get("photo"):
            photo.ratios(r)
        else:
            workload.ratios(r)
    workload.wide_ratios(results)
    for r in gz_results:
        compressed.ratios(r)
    if scale_rows:
        scale.ratios(scale_rows)
    if shards_row:
        shards.ratios(shards_row)
    if mixture_row:
        mixture.ratios(mixture_row)
    report.finish(args, run, results, t_start)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
