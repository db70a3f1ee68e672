"""scripts/bench — how fast batchfs is, next to its floors, ceilings and peers.

    scripts/bench [--quick] [--workload small|image|varlen|wide|wide2000|photo]... [--work DIR]
                  [--cold-runs N] [--drop-caches] [--no-npm] [--no-scale] [--scale-1e8] [--only-scale]
                  [--no-shards] [--only-shards] [--shards N]
                  [--block-vs-global] [--block-only] [--cache-size SIZE]
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
own (bench_photo): the one-core C loop tests/bench/bench_jpeg (TurboJPEG +
decoder/resize.c), batchfs's cold epoch over the .npy batch tree with all
threads and with threads=1, and vahidk/tfrecord + PIL under a DataLoader;
then the ratio lines against the targets, and the scale part on generated
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
LEGEND = ("records/s: records served per second (a tree pass serves each record of the epoch "
          "once as .npy, once in .safetensors); served MB/s: batch-file bytes/s; TFRecord MB/s: "
          "TFRecord input bytes/s; CPU s: the FUSE daemon's during the read (FUSE rows), the "
          "timed loop's (Python, npm; PyTorch: with its DataLoader workers, the daemon's in the "
          "note), the process's (others); MB = 10^6 bytes")

import argparse
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))

MiB = 1 << 20

WORKLOADS = {
    "small": {
        "records": 400_000, "shards": 8, "batch_size": 256,
        "features": ["x:float:32", "y:int64:1"],
        "spec": {"x": ["float", [32]], "y": ["int64", []]},
        "python_records": 20_000,
        "all_rows": True, "torch": True,
        "vahidk": {"x": ["float"], "y": ["int"]},
        # targets: cold batch tree / null FUSE first read; warm / null keep_cache
        "cold_target": 0.85, "warm_target": 1.00,
    },
    "image": {
        "records": 8_000, "shards": 8, "batch_size": 32,
        "features": ["image:bytes:1,len=150528", "label:int64:1"],
        "spec": {"image": ["raw", "uint8", [224, 224, 3]], "label": ["int64", []]},
        "schema": {"features": {
            "image": {"kind": "bytes", "dtype": "uint8", "shape": [224, 224, 3]},
            "label": {"kind": "int64", "shape": []}}},
        "python_records": 2_000,
        "torch": True,
        "vahidk": {"image": ["byte", [224, 224, 3]], "label": ["int"]},
    },
    "varlen": {
        "records": 200_000, "shards": 8, "batch_size": 64,
        "features": ["tokens:int64:16..512", "label:int64:1"],
        "spec": {"tokens": ["padded", 512], "label": ["int64", []]},
        "python_records": 20_000,
    },
}

# wide records (feature-store exports, tabular sets): many narrow features
_WIDE = (["f%03d:float:1" % i for i in range(300)] + ["i%02d:int64:1" % i for i in range(50)] +
         ["s%d:bytes:1,len=4" % i for i in range(10)])
WORKLOADS["wide"] = {
    "records": 40_000, "shards": 8, "batch_size": 256,
    "features": _WIDE,
    "spec": dict([("f%03d" % i, ["float", []]) for i in range(300)] +
                 [("i%02d" % i, ["int64", []]) for i in range(50)] +
                 [("s%d" % i, ["raw", "uint8", [4]]) for i in range(10)]),
    "schema": {"features": dict(
        [("f%03d" % i, {"kind": "float", "shape": []}) for i in range(300)] +
        [("i%02d" % i, {"kind": "int64", "shape": []}) for i in range(50)] +
        [("s%d" % i, {"kind": "bytes", "dtype": "uint8", "shape": [4]}) for i in range(10)])},
    "python_records": 2_000,
    "wide": True,
}
WORKLOADS["wide2000"] = {
    "records": 6_000, "shards": 4, "batch_size": 256,
    "features": ["f%04d:float:1" % i for i in range(2000)],
    "spec": {"f%04d" % i: ["float", []] for i in range(2000)},
    "python_records": 500,
    "wide": True,
}
# JPEG photographs decoded to uint8 [B, 224, 224, 3] (-o image=): its own
# rows (bench_photo), not the generic ones
WORKLOADS["photo"] = {
    "records": 4_000, "shards": 8, "batch_size": 256,
    "photo": True, "size": (224, 224), "feature": "image/encoded",
    "python_records": 1_000,
}
# the photographs Debian ships with scikit-image (python3-skimage), RGB ones
PHOTO_SOURCES = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
                 "motorcycle_right.png", "rocket.jpg", "hubble_deep_field.jpg", "retina.jpg",
                 "ihc.png"]
# compressed twins of a workload (bench_gz): the same records in gzip or zlib
# shards, measured against the plain shards in the same run
WORKLOADS["small-gz"] = {"gz_of": "small", "compression": "gzip", "gz_batches": 60}
WORKLOADS["image-gz"] = {"gz_of": "image", "compression": "gzip", "gz_batches": 40}
WORKLOADS["small-zlib"] = {"gz_of": "small", "compression": "zlib", "gz_batches": 60}
NPM_RECORDS = 2_000
COLD_RUNS = 3  # cold reads per workload (batchfs and null FUSE, interleaved); 1 with --quick
NULL_SPAN = 256 * MiB  # nullfs serves from a buffer this large: copies come from DRAM
INDEX_RECORDS = 10_000_000
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
GEN_SEED = 1
# a pass over "the batch tree" reads the batch folders and files of epoch-0000,
# not its whole-epoch views (all/, all.safetensors: rows of their own)
BATCHES_ONLY = ("--exclude", "all", "--exclude", "all.safetensors")

# ---------------------------------------------------------------- helpers

OUT_LINES = []


def say(line=""):
    print(line, flush=True)
    OUT_LINES.append(line)


def log(msg):
    print("  .. " + msg, file=sys.stderr, flush=True)


LAST_CPU = [0.0]  # CPU seconds (user + system) of the last run_child


def run_child(cmd, stdout=subprocess.PIPE, cwd=None, env=None):
    """Run cmd to the end; returns (rc, stdout text, seconds, peak RSS bytes)
    with the RSS of that child alone (wait4); its CPU time goes to LAST_CPU."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    out = b""
    if p.stdout:
        out = p.stdout.read()
        p.stdout.close()
    _, status, ru = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t0
    LAST_CPU[0] = ru.ru_utime + ru.ru_stime
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, out.decode(errors="replace"), secs, ru.ru_maxrss * 1024


def check_child(cmd, **kw):
    rc, out, secs, rss = run_child(cmd, **kw)
    if rc != 0:
        raise RuntimeError("%s failed with status %d" % (" ".join(cmd), rc))
    return out, secs, rss


def json_lines(text):
    return [json.loads(l) for l in text.splitlines() if l.startswith("{")]


def proc_cpu(pid):
    """CPU seconds (user + system) used so far by process pid."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return 0.0


def vm_hwm(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_parts(pid):
    """(RssAnon, RssFile + RssShmem) in bytes now, or None: file-backed pages
    (mapped shards, say) count in VmHWM too."""
    got = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssFile:", "RssShmem:")):
                    got[line.split(":")[0]] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if "RssAnon" not in got:
        return None
    return got["RssAnon"], got.get("RssFile", 0) + got.get("RssShmem", 0)


def fmt_parts(parts):
    if not parts:
        return ""
    return "; RSS at the end: anon %.0f MiB, file-backed %.0f MiB" % (parts[0] / MiB,
                                                                       parts[1] / MiB)


def drop_caches(args):
    if not args.drop_caches:
        return
    subprocess.run(["sync"], check=False)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    if text and text[-1].upper() in mult:
        return int(text[:-1]) * mult[text[-1].upper()]
    return int(text)


def max_file_size(manifest):
    with open(manifest) as f:
        return max((int(l.split(" ", 1)[0]) for l in f if l.strip()), default=0)


def shard_paths(d):
    return [os.path.join(d, n) for n in sorted(os.listdir(d)) if not n.startswith(".")]


def set_cold_runs(n):
    global COLD_RUNS
    COLD_RUNS = max(1, n)


class NullCtx:
    """A `with` target that is nothing (None)."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def median_read(m, tools, path, *extra, n=3):
    """n re-reads of a tree; the one with the median time."""
    runs = sorted((m.read(tools, path, *extra) for _ in range(n)), key=lambda r: r["seconds"])
    return runs[n // 2]


class Mount:
    """A FUSE daemon run in the foreground (-f) so that its pid is ours."""

    def __init__(self, cmd, mnt):
        self.mnt = mnt
        try:
            os.makedirs(mnt, exist_ok=True)
            stale = os.path.ismount(mnt)
        except OSError:  # a daemon that died left its mount behind (ENOTCONN)
            stale = True
        if stale:
            subprocess.run(["fusermount3", "-u", "-z", mnt], check=False,
                           stderr=subprocess.DEVNULL)
        self.errf = tempfile.TemporaryFile()
        self.cmd0 = cmd[0]
        t0 = time.perf_counter()
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.errf)
        while not os.path.ismount(mnt):
            if self.p.poll() is not None:
                self.errf.seek(0)
                raise RuntimeError("%s exited: %s" % (cmd[0], self.errf.read().decode().strip()))
            if time.perf_counter() - t0 > 600:
                self.p.kill()
                raise RuntimeError("%s: no mount after 600 s" % cmd[0])
            time.sleep(0.005)
        self.mount_seconds = time.perf_counter() - t0

    def hwm(self):
        """VmHWM now; what the RSS is made of now goes to self.rss_parts."""
        self.rss_parts = rss_parts(self.p.pid)
        return vm_hwm(self.p.pid)

    def read(self, tools, path, *extra):
        """readtree over path; returns its JSON with the daemon's CPU
        seconds during the read added as "daemon_cpu"."""
        c0 = proc_cpu(self.p.pid)
        r = json_lines(check_child([tools["readtree"]] + list(extra) + [path])[0])[0]
        c1 = proc_cpu(self.p.pid)
        r["daemon_cpu"] = c1 - c0 if c0 is not None and c1 is not None else None
        r["reader_cpu"] = LAST_CPU[0]
        return r

    def close(self):
        if self.p.poll() is None:
            subprocess.run(["fusermount3", "-u", self.mnt], check=False)
            try:
                self.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        else:  # it died: take its mount away too, and say why
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], check=False,
                           stderr=subprocess.DEVNULL)
            self.errf.seek(0)
            log("%s exited with status %d: %s" % (
                os.path.basename(self.cmd0), self.p.returncode,
                self.errf.read().decode(errors="replace").strip()[-300:]))
        self.errf.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------- data


def framing(path, limit=None):
    """(payload offsets, lengths) of the records of a plain shard, reading
    only the 12-byte headers."""
    offs, lens = [], []
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        while pos < size and (limit is None or len(offs) < limit):
            hdr = os.pread(f.fileno(), 12, pos)
            (n,) = struct.unpack_from("<Q", hdr)
            offs.append(pos + 12)
            lens.append(n)
            pos += n + 16
    return offs, lens


def generate(tools, work, name, w, records):
    d = os.path.join(work, "data-" + name)
    params = {"records": records, "shards": w["shards"], "features": w["features"],
              "seed": GEN_SEED, "compression": "none"}
    pfile = os.path.join(work, "data-%s.params.json" % name)
    if os.path.isdir(d) and os.path.exists(pfile):
        with open(pfile) as f:
            if json.load(f) == params:
                return d, False
    shutil.rmtree(d, ignore_errors=True)
    if os.path.exists(pfile):
        os.unlink(pfile)
    log("generating %s: %d records" % (name, records))
    check_child([tools["gen"], "--out", d, "--records", str(records), "--shards",
                 str(w["shards"]), "--compression", "none", "--seed", str(GEN_SEED),
                 "--quiet"] + w["features"])
    with open(pfile, "w") as f:
        json.dump(params, f)
    return d, True


def generate_photo(work, name, w, records):
    """The 'photo' workload: JPEG records made from real photographs (the
    RGB ones of PHOTO_SOURCES that python3-skimage ships). Record i: a
    photograph chosen at random, a target size W x H each drawn from
    300..800 px, the largest crop of that aspect ratio scaled by 0.6..1.0
    at a random place, resampled to W x H (PIL bilinear) and encoded by PIL
    as a baseline 4:2:0 JPEG of quality 70..95; written as tf.train.Example
    {"image/encoded": bytes, "label": int64 0..999} in plain shards."""
    import random

    import imgdata
    from PIL import Image

    d = os.path.join(work, "data-" + name)
    have = [n for n in PHOTO_SOURCES if os.path.exists(os.path.join(imgdata.SKIMAGE_DATA, n))]
    params = {"records": records, "shards": w["shards"], "seed": GEN_SEED, "photos": have,
              "kind": "photo-1"}
    pfile = os.path.join(work, "data-%s.params.json" % name)
    if os.path.isdir(d) and os.path.exists(pfile):
        with open(pfile) as f:
            if json.load(f) == params:
                return d, False
    if not have:
        raise RuntimeError("no photographs in %s (Debian's python3-skimage ships them)" %
                           imgdata.SKIMAGE_DATA)
    shutil.rmtree(d, ignore_errors=True)
    if os.path.exists(pfile):
        os.unlink(pfile)
    log("generating %s: %d JPEG records from %d photographs" % (name, records, len(have)))
    photos = [imgdata.photo(n) for n in have]
    rng = random.Random(GEN_SEED)
    os.makedirs(d)
    per = -(-records // w["shards"])
    for si in range(w["shards"]):
        path = os.path.join(d, "photo.tfrecord-%05d-of-%05d" % (si, w["shards"]))
        with open(path, "wb") as f:
            for _ in range(si * per, min(records, (si + 1) * per)):
                im = rng.choice(photos)
                ow, oh = rng.randint(300, 800), rng.randint(300, 800)
                sw, sh = im.size
                cw = min(sw, sh * ow / oh)
                ch = cw * oh / ow
                k = rng.uniform(0.6, 1.0)
                cw, ch = cw * k, ch * k
                x, y = rng.uniform(0, sw - cw), rng.uniform(0, sh - ch)
                img = im.resize((ow, oh), Image.BILINEAR, box=(x, y, x + cw, y + ch))
                jpg = imgdata.encode(img, "JPEG", quality=rng.randint(70, 95))
                f.write(imgdata.frame(imgdata.example({w["feature"]: jpg,
                                                       "label": rng.randrange(1000)})))
    with open(pfile, "w") as f:
        json.dump(params, f)
    return d, True


# ---------------------------------------------------------------- baselines


def python_baseline(source, spec, batch_size, nrecords, seed):
    """What a PyTorch user writes without TensorFlow: an index of record
    offsets (framing read in Python), then shuffled batches: pread each
    record, parse tf.train.Example with the official protobuf runtime,
    numpy arrays per feature, stacked per batch. No CRC check."""
    import numpy as np
    import oracle

    Example = oracle.message_class("Example")
    paths = oracle.list_shards(source)
    t0 = time.perf_counter()
    fds, offs, lens, shard_of = [], [], [], []
    for si, p in enumerate(paths):
        o, l = framing(p)
        offs += o
        lens += l
        shard_of += [si] * len(o)
        fds.append(os.open(p, os.O_RDONLY))
    index_seconds = time.perf_counter() - t0
    n = len(offs)
    nrecords = min(nrecords, n)
    order = oracle.perm(n, seed, 0)[:nrecords]
    dtypes = {"float": np.float32, "int64": np.int64}

    t0 = time.perf_counter()
    c0 = time.process_time()
    in_bytes = 0
    batches = 0
    for b0 in range(0, nrecords, batch_size):
        rows = {k: [] for k in spec}
        for r in order[b0:b0 + batch_size]:
            r = int(r)
            raw = os.pread(fds[shard_of[r]], lens[r], offs[r])
            in_bytes += lens[r] + 16
            ex = Example()
            ex.ParseFromString(raw)
            fm = ex.features.feature
            for k, s in spec.items():
                f = fm[k]
                if s[0] == "float":
                    rows[k].append(np.array(f.float_list.value, dtype=np.float32))
                elif s[0] == "int64":
                    rows[k].append(np.array(f.int64_list.value, dtype=np.int64))
                elif s[0] == "raw":
                    rows[k].append(np.frombuffer(f.bytes_list.value[0], dtype=s[1]).reshape(s[2]))
                elif s[0] == "padded":
                    rows[k].append(np.array(f.int64_list.value, dtype=np.int64))
        batch = {}
        for k, s in spec.items():
            if s[0] == "padded":
                a = np.zeros((len(rows[k]), s[1]), dtype=np.int64)
                ln = np.zeros(len(rows[k]), dtype=np.int32)
                for j, v in enumerate(rows[k]):
                    a[j, :len(v)] = v
                    ln[j] = len(v)
                batch[k], batch[k + ".lengths"] = a, ln
            elif s[0] in dtypes and s[1] == []:
                batch[k] = np.concatenate(rows[k])
            else:
                batch[k] = np.stack(rows[k])
        batches += 1
    secs = time.perf_counter() - t0
    cpu = time.process_time() - c0
    print(json.dumps({"index_seconds": index_seconds, "index_records": n,
                      "records": nrecords, "batches": batches, "seconds": secs,
                      "cpu_seconds": cpu, "in_bytes": in_bytes}))


def torch_loop(mode, root, batch_size, limit, description):
    """One epoch (or `limit` records) of a PyTorch input loop as users write
    it; run as a child of the benchmark. Prints one JSON line: records,
    batches, seconds, cpu_seconds (this process and its DataLoader workers),
    tensor_bytes (of the tensors handed to the loop).
      tree:   a map-style Dataset whose item i np.loads every .npy of
              ROOT/batch-i (ROOT = a mounted epoch folder) and returns torch
              tensors; DataLoader(ds, batch_size=None, num_workers=2)
      all:    np.load(ROOT/all/F.npy, mmap_mode='r') for every feature, then
              torch.from_numpy(arr[a:b].copy()) per slice of batch_size rows
      vahidk: vahidk/tfrecord MultiTFRecordDataset over the shards of ROOT
              (one split per shard, equal weights, infinite=False),
              shuffle_queue_size=1024, DataLoader(batch_size=batch_size)"""
    import resource
    import warnings

    import numpy as np
    import torch
    import torch.utils.data

    # vahidk + np.frombuffer hands collate read-only arrays: torch warns once
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    # a --quick subset smaller than the shuffle queue: the queue holds all of it
    warnings.filterwarnings("ignore", message="Number of elements in the iterator is less")

    def cpu_now():
        a = resource.getrusage(resource.RUSAGE_SELF)
        b = resource.getrusage(resource.RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

    if mode == "vahidk_pil":  # its index files (tfrecord2idx), made before the clock starts
        from tfrecord.tools.tfrecord2idx import create_index

        os.makedirs(description["index_dir"], exist_ok=True)
        for n in sorted(os.listdir(root)):
            ip = os.path.join(description["index_dir"], n + ".idx")
            if not n.startswith(".") and not os.path.exists(ip):
                create_index(os.path.join(root, n), ip)

    records = batches = nbytes = 0
    t0 = time.perf_counter()
    c0 = cpu_now()
    if mode == "tree":
        class BatchTree(torch.utils.data.Dataset):
            def __init__(self, epoch_dir):
                self.dirs = sorted(os.path.join(epoch_dir, n) for n in os.listdir(epoch_dir)
                                   if n.startswith("batch-") and "." not in n)
                self.names = sorted(n for n in os.listdir(self.dirs[0]) if n.endswith(".npy"))

            def __len__(self):
                return len(self.dirs)

            def __getitem__(self, i):
                return {n[:-4]: torch.from_numpy(np.load(os.path.join(self.dirs[i], n)))
                        for n in self.names}

        loader = torch.utils.data.DataLoader(BatchTree(root), batch_size=None, num_workers=2)
        it = iter(loader)
        for b in it:
            first = next(iter(b.values()))
            records += first.shape[0]
            nbytes += sum(v.numel() * v.element_size() for v in b.values())
            batches += 1
        del it, loader
    elif mode == "all":
        d = os.path.join(root, "all")
        arrs = {n[:-4]: np.load(os.path.join(d, n), mmap_mode="r")
                for n in sorted(os.listdir(d)) if n.endswith(".npy")}
        n = len(next(iter(arrs.values())))
        for a in range(0, n, batch_size):
            b = {k: torch.from_numpy(v[a:a + batch_size].copy()) for k, v in arrs.items()}
            first = next(iter(b.values()))
            records += first.shape[0]
            nbytes += sum(v.numel() * v.element_size() for v in b.values())
            batches += 1
    elif mode == "vahidk":
        from tfrecord.torch.dataset import MultiTFRecordDataset

        shards = sorted(n for n in os.listdir(root) if not n.startswith("."))
        desc = {k: v[0] for k, v in description.items()}
        reshape = {k: v[1] for k, v in description.items() if len(v) > 1}

        def transform(f):  # bytes -> uint8 array of the declared shape, as a user must
            for k, shape in reshape.items():
                f[k] = np.frombuffer(f[k], dtype=np.uint8).reshape(shape)
            return f

        ds = MultiTFRecordDataset(os.path.join(root, "{}"), None, {n: 1.0 for n in shards},
                                  description=desc, shuffle_queue_size=1024,
                                  transform=transform if reshape else None, infinite=False)
        loader = torch.utils.data.DataLoader(ds, batch_size=batch_size)
        for b in loader:
            first = next(iter(b.values()))
            records += first.shape[0]
            nbytes += sum(v.numel() * v.element_size() for v in b.values())
            batches += 1
            if limit and records >= limit:
                break
        del loader
    elif mode == "vahidk_pil":
        import io

        from PIL import Image
        from tfrecord.torch.dataset import MultiTFRecordDataset

        feat, (h, w) = description["feature"], description["size"]
        shards = sorted(n for n in os.listdir(root) if not n.startswith("."))

        def decode(f):  # what a user's transform does: PIL decode, RGB, resize
            im = Image.open(io.BytesIO(f[feat])).convert("RGB")
            return {"image": np.asarray(im.resize((w, h), Image.BILINEAR)),
                    "label": f["label"]}

        ds = MultiTFRecordDataset(os.path.join(root, "{}"),
                                  os.path.join(description["index_dir"], "{}.idx"),
                                  {n: 1.0 for n in shards},
                                  description={feat: "byte", "label": "int"},
                                  shuffle_queue_size=1024, transform=decode, infinite=False)
        loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, num_workers=2)
        for b in loader:
            records += b["image"].shape[0]
            nbytes += sum(v.numel() * v.element_size() for v in b.values())
            batches += 1
            if limit and records >= limit:
                break
        del loader
    else:
        raise SystemExit("unknown torch loop " + mode)
    secs = time.perf_counter() - t0
    print(json.dumps({"records": records, "batches": batches, "seconds": secs,
                      "cpu_seconds": cpu_now() - c0, "tensor_bytes": nbytes}))


NODE_SCRIPT = r"""
// Reads the first K records of a shard with @roboflow/tfrecords and copies
// x (float x32) and y (int64) into batch arrays. Prints one JSON line.
const fs = require('fs');
const { TFRecordsReader } = require('@roboflow/tfrecords/src/tensorFlowReader');
const { FeatureType } = require('@roboflow/tfrecords/src/tensorFlowBuilder');
const [path, nbytes, batch] = process.argv.slice(2).map((v, i) => i ? Number(v) : v);
const buf = Buffer.alloc(nbytes);
const fd = fs.openSync(path, 'r');
fs.readSync(fd, buf, 0, nbytes, 0);
fs.closeSync(fd);
const t0 = process.hrtime.bigint();
const c0 = process.cpuUsage();
const r = new TFRecordsReader(buf);
const x = new Float32Array(batch * 32), y = new Float64Array(batch);
for (let i = 0; i < r.length; i++) {
  const j = i % batch;
  x.set(r.getArrayFeature(i, 'x', FeatureType.Float), j * 32);
  y[j] = r.getFeature(i, 'y', FeatureType.Int64);
}
const secs = Number(process.hrtime.bigint() - t0) / 1e9;
const c = process.cpuUsage(c0);
console.log(JSON.stringify({ records: r.length, seconds: secs, in_bytes: nbytes,
                             cpu_seconds: (c.user + c.system) / 1e6 }));
"""


def npm_setup(work):
    d = os.path.join(work, "npm")
    mod = os.path.join(d, "node_modules", "@roboflow", "tfrecords")
    gp = os.path.join(d, "node_modules", "google-protobuf", "package.json")
    ok = False
    if os.path.isdir(mod) and os.path.exists(gp):
        with open(gp) as f:
            ok = json.load(f).get("version") == "3.20.1"
    if not ok:
        if not shutil.which("npm") or not shutil.which("node"):
            return None, "skipped: npm (no node/npm)"
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "package.json"), "w") as f:
            json.dump({"name": "batchfs-bench-npm", "private": True}, f)
        log("npm install @roboflow/tfrecords google-protobuf@3.20.1")
        try:
            r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent",
                                "--cache", os.path.join(d, ".npm-cache"),
                                "@roboflow/tfrecords", "google-protobuf@3.20.1"],
                               cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               timeout=300)
        except subprocess.TimeoutExpired:
            return None, "skipped: npm (install timed out)"
        if r.returncode != 0 or not os.path.isdir(mod):
            return None, "skipped: npm (install failed: %s)" % r.stderr.decode()[-200:].strip()
    with open(os.path.join(d, "bench_tfrecords.js"), "w") as f:
        f.write(NODE_SCRIPT)
    return d, None


# ---------------------------------------------------------------- table


def fmt_rate(v, digits=0):
    if v is None:
        return "-"
    if v >= 100:
        return "{:,.0f}".format(v)
    return "{:,.{}f}".format(v, max(digits, 1))


class Table:
    COLS = ("", "records/s", "TFRecord MB/s", "served MB/s", "peak RSS MiB", "seconds", "CPU s")

    def __init__(self):
        self.rows = []

    def add(self, label, rec_s=None, in_mb=None, out_mb=None, rss=None, secs=None, cpu=None,
            note=""):
        self.rows.append((label, rec_s, in_mb, out_mb, rss, secs, cpu, note))
        return rec_s

    def emit(self):
        w0 = max(len(r[0]) for r in self.rows)
        head = "%-*s %12s %14s %12s %13s %8s %7s" % ((w0,) + self.COLS)
        say(head)
        say("-" * len(head))
        for label, rec_s, in_mb, out_mb, rss, secs, cpu, note in self.rows:
            say("%-*s %12s %14s %12s %13s %8s %7s%s" % (
                w0, label, fmt_rate(rec_s), fmt_rate(in_mb, 1), fmt_rate(out_mb, 1),
                "-" if rss is None else "%.0f" % (rss / MiB),
                "-" if secs is None else "%.2f" % secs,
                "-" if cpu is None else "%.2f" % cpu, ("  " + note) if note else ""))


def fmt_q(q, target, pct=True, digits=None):
    """q as a percentage (or "1.23x"), with as many decimals as it takes for the
    printed figure to fall on the same side of target as q itself."""
    scale, unit = (100, "%") if pct else (1, "x")
    d = (0 if pct else 2) if digits is None else digits
    while True:
        text = "%.*f" % (d, q * scale)
        if (float(text) >= target * scale) == (q >= target) or d >= 4:
            return text + unit
        d += 1


def verdict(ok):
    return "PASS" if ok else "MISS"


def read_stats(mnt):
    try:
        with open(mnt + "/stats.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


NO_ALL = "n/a (no all/ in this build)"


def all_rows(args, tools, res, t, mnt, mopts, src, nrec, shard_bytes, mb):
    """epoch-0000/all.safetensors read from start to end with 1 MiB reads on a
    fresh mount (cold), then again (warm, median of 3); then the null FUSE
    serving one file of the same size (first read, keep_cache re-read)."""
    drop_caches(args)
    path = mnt + "/epoch-0000/all.safetensors"
    with Mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt) as m:
        if not os.path.exists(path):
            res["all_missing"] = True
            for label in ("batchfs all.safetensors, cold epoch (fresh mount, 1 MiB reads)",
                          "batchfs all.safetensors, warm re-read (median of 3)",
                          "null FUSE, one file of that size, first read",
                          "null FUSE, one file of that size, keep_cache re-read (median of 3)"):
                t.add(label, note=NO_ALL)
            return
        cold = m.read(tools, path)
        st_cold = read_stats(mnt)
        hwm_cold = m.hwm()
        warm = median_read(m, tools, path)
        st = read_stats(mnt)
        hwm = m.hwm()
    size = cold["bytes"]
    res.update(all_cold=nrec / cold["seconds"], all_cold_cpu=cold["daemon_cpu"],
               all_warm_mb=mb(size, warm["seconds"]), all_bytes=size)
    res["all_hwm"]["readtree cold + warm"] = (hwm, st, m.rss_parts)
    t.add("batchfs all.safetensors, cold epoch (fresh mount, 1 MiB reads)", nrec / cold["seconds"],
          mb(shard_bytes, cold["seconds"]), mb(size, cold["seconds"]), hwm_cold, cold["seconds"],
          cold["daemon_cpu"], "%.1f MB; decode %.2f s; mount %.2f s" % (
              size / 1e6, st_cold.get("decode_seconds", 0), m.mount_seconds))
    t.add("batchfs all.safetensors, warm re-read (median of 3)", nrec / warm["seconds"],
          mb(shard_bytes, warm["seconds"]), mb(size, warm["seconds"]), hwm, warm["seconds"],
          warm["daemon_cpu"], "decoded again: %s" % (
              "%.2f s" % (st.get("decode_seconds", 0) - st_cold.get("decode_seconds", 0))
              if "decode_seconds" in st else "?"))
    with Mount([tools["nullfs"], "-f", mnt, "-o", "files=1,size=%d,keep_cache" % size], mnt) as m:
        first = m.read(tools, mnt)
        again = median_read(m, tools, mnt)
        nhwm = m.hwm()
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
    me = [PYTHON, os.path.abspath(__file__), "--batch-size", str(tb)]
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
                with Mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt) as m:
                    root = mnt + "/epoch-0000"
                    if mode == "all" and not os.path.isdir(root + "/all"):
                        res["all_missing"] = True
                        t.add(label, note=NO_ALL)
                        continue
                    c0 = proc_cpu(m.p.pid)
                    rc, out, _, rss = run_child(me + ["--torch-loop", mode, "--root", root])
                    c1 = proc_cpu(m.p.pid)
                    dhwm = m.hwm()
                    parts = m.rss_parts
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


# ---------------------------------------------------------------- one workload


def values_per_record(features):
    """Mean values per record of bfs_gen FEATURE specs (a bytes value counts
    as one value), for the per-value decoder rates."""
    n = 0.0
    for f in features:
        count = f.split(",")[0].split(":")[2]
        lo, _, hi = count.partition("..")
        n += (int(lo) + int(hi or lo)) / 2
    return n


def wide_rows(args, tools, res, t, src, mnt, mopts, nrec, shard_bytes, span, mb):
    """Wide records: the batches' .safetensors alone (what README.txt
    tells a wide reader to read), cold on a fresh mount, and the null FUSE
    serving the same files. Read as such a reader globs them
    (epoch-0000/*.safetensors): without a walk through the batch folders,
    whose thousands of .npy entries the null FUSE does not have."""
    man = os.path.join(args.work, "manifest-safetensors.txt")
    only = ["--only", ".safetensors", "--maxdepth", "1"] + list(BATCHES_ONLY)
    drop_caches(args)
    with Mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt) as m:
        st = m.read(tools, mnt + "/epoch-0000", *only)
        check_child([tools["readtree"], "--manifest", man] + only + [mnt + "/epoch-0000"])
    with Mount([tools["nullfs"], "-f", mnt, "-o", "manifest=%s,keep_cache%s" % (man, span)],
               mnt) as m:
        null = m.read(tools, mnt)
    res["st_cold"] = nrec / st["seconds"]
    res["st_null"] = nrec / null["seconds"]
    res["st_cold_cpu"], res["st_null_cpu"] = st["daemon_cpu"], null["daemon_cpu"]
    t.add("batchfs cold epoch, .safetensors only (fresh mount)", res["st_cold"],
          mb(shard_bytes, st["seconds"]), mb(st["bytes"], st["seconds"]), None, st["seconds"],
          st["daemon_cpu"], "%d files" % st["files"])
    t.add("null FUSE, the same .safetensors, first read", res["st_null"],
          mb(shard_bytes, null["seconds"]), mb(null["bytes"], null["seconds"]), None,
          null["seconds"], null["daemon_cpu"])


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


def bench_workload(args, tools, name, w, npm_dir, npm_note):
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
        run_child(["cat"] + shards, stdout=subprocess.DEVNULL)
    log("%s: cat" % name)
    rc, _, secs, rss = run_child(["cat"] + shards, stdout=subprocess.DEVNULL)
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
    # FUSE's first read of the same tree) runs COLD_RUNS times, interleaved,
    # and the median counts; the last batchfs mount goes on to the warm rows.
    colds, firsts = [], []
    span = None
    for k in range(COLD_RUNS):
        drop_caches(args)
        log("%s: batchfs cold (%d of %d)" % (name, k + 1, COLD_RUNS))
        m = Mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt)
        try:
            res["mount_seconds"] = m.mount_seconds
            colds.append(m.read(tools, mnt + "/epoch-0000", *BATCHES_ONLY))
            if k == 0:  # the tree the null FUSE serves: every name and size
                check_child([tools["readtree"], "--manifest", manifest] + list(BATCHES_ONLY) +
                            [mnt + "/epoch-0000"])
                span = ",span=%d" % max(NULL_SPAN, max_file_size(manifest))
        except BaseException:
            m.close()
            raise
        if k < COLD_RUNS - 1:
            m.close()
        with Mount([tools["nullfs"], "-f", mnt, "-o", "manifest=%s,keep_cache%s" %
                    (manifest, span)], mnt) if k < COLD_RUNS - 1 else NullCtx() as nm:
            if nm:
                firsts.append(nm.read(tools, mnt))
    cold = sorted(colds, key=lambda r: r["seconds"])[len(colds) // 2]
    res["cold_spread"] = [nrec / r["seconds"] for r in colds]
    with m:
        with open(mnt + "/stats.json") as f:
            st_cold = json.load(f)
        hwm_cold = m.hwm()
        warm = median_read(m, tools, mnt + "/epoch-0000", *BATCHES_ONLY)
        with open(mnt + "/stats.json") as f:
            st_warm = json.load(f)
        hwm = m.hwm()
    tree_bytes = cold["bytes"]
    res.update(tree_bytes=tree_bytes, files=cold["files"], stats=st_warm, hwm=hwm,
               hwm_parts=m.rss_parts,
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
    with Mount([tools["nullfs"], "-f", mnt, "-o", "manifest=%s,keep_cache%s" % (manifest, span)],
               mnt) as m:
        firsts.append(m.read(tools, mnt))
        again = median_read(m, tools, mnt)
        null_hwm = m.hwm()
    first = sorted(firsts, key=lambda r: r["seconds"])[len(firsts) // 2]
    res["null_first_spread"] = [nrec / r["seconds"] for r in firsts]
    with Mount([tools["nullfs"], "-f", mnt, "-o", "manifest=%s,direct_io%s" % (manifest, span)],
               mnt) as m:
        dio = m.read(tools, mnt, "--bs", str(MiB))
        dio_hwm = m.hwm()
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
    out, _, rss = check_child([sys.executable, os.path.abspath(__file__), "--python-baseline",
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


def bench_photo(args, tools, name, w):
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

    run_child(["cat"] + shards, stdout=subprocess.DEVNULL)  # the page cache holds the shards

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
    for threads, key, label in (
            (None, "cold", "batchfs cold first epoch (fresh mount)"),
            (1, "cold1", "batchfs cold first epoch, threads=1 (fresh mount)")):
        log("%s: %s" % (name, label))
        mopts = base + (",threads=%d" % threads if threads else "")
        drop_caches(args)
        with Mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt) as m:
            r = m.read(tools, mnt + "/epoch-0000", "--only", ".npy", *BATCHES_ONLY)
            st = read_stats(mnt)
            hwm = m.hwm()
        res[key] = nrec / r["seconds"]
        res[key + "_cpu"] = r["daemon_cpu"]
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
            [PYTHON, os.path.abspath(__file__), "--batch-size", str(bs), "--torch-loop",
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


def photo_ratios(r):
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
    if r.get("hwm") is not None:
        st = r.get("stats", {})
        budget = st.get("cache_budget", 1 << 30)
        limit = budget + st.get("index_bytes", 0) + 64 * MiB
        say("%-7s daemon peak RSS (VmHWM) %.0f MiB vs cache_size %.0f MiB + index %.1f MiB + "
            "64 MiB = %.0f MiB  %s" % (n, r["hwm"] / MiB, budget / MiB,
                                       st.get("index_bytes", 0) / MiB, limit / MiB,
                                       verdict(r["hwm"] <= limit)))


# ---------------------------------------------------------------- compressed shards


def generate_compressed(tools, work, name, w, records, compression):
    """The records of workload w (same generator seed: the same records as
    its plain shards) in `compression` shards."""
    d = os.path.join(work, "data-" + name)
    params = {"records": records, "shards": w["shards"], "features": w["features"],
              "seed": GEN_SEED, "compression": compression}
    pfile = os.path.join(work, "data-%s.params.json" % name)
    if os.path.isdir(d) and os.path.exists(pfile):
        with open(pfile) as f:
            if json.load(f) == params:
                return d
    shutil.rmtree(d, ignore_errors=True)
    log("generating %s: %d records, %s" % (name, records, compression))
    check_child([tools["gen"], "--out", d, "--records", str(records), "--shards",
                 str(w["shards"]), "--compression", compression, "--seed", str(GEN_SEED),
                 "--quiet"] + w["features"])
    with open(pfile, "w") as f:
        json.dump(params, f)
    return d


ZLIB_CAT = ("import sys, zlib\n"
            "d = zlib.decompressobj()\n"
            "with open(sys.argv[1], 'rb') as f:\n"
            "    while True:\n"
            "        b = f.read(1 << 20)\n"
            "        if not b: break\n"
            "        while b:\n"
            "            d.decompress(b, 1 << 20); b = d.unconsumed_tail\n"
            "            if d.eof: rest = d.unused_data; d = zlib.decompressobj(); b = rest + b\n")


def parallel_cat(shards, compression, ncpu):
    """Decompress every shard to nothing, one shard per core at a time
    (xargs -P): (wall seconds, CPU seconds). gzip: zcat; zlib (no zcat for
    it): Python's zlib module streaming 1 MiB at a time, the same zlib."""
    if compression == "gzip":
        cmd = ["xargs", "-P", str(ncpu), "-n", "1", "zcat"]
    else:
        cmd = ["xargs", "-P", str(ncpu), "-n", "1", PYTHON, "-c", ZLIB_CAT]
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, input="\n".join(shards).encode(), stdout=subprocess.DEVNULL, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (time.perf_counter() - t0,
            r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)


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


def bench_gz(args, tools, name, w):
    """A compressed twin of a workload: the one-time decompression pass
    (batchfs index, which writes the shadow copies) against zcat on every
    core, the global-shuffle cold epoch from the shadows against the plain
    shards, and the seek-point paths (shadow=off: ~1 MiB spans, and 64 KiB
    spans) on the first batches; the shadows' disk space against the plain
    size. Returns the figures for gz_ratios."""
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

    run_child(["cat"] + zshards + pshards, stdout=subprocess.DEVNULL)  # warm the page cache
    log("%s: %s on %d cores" % (name, "zcat" if comp == "gzip" else "zlib", ncpu))
    secs, cpu = parallel_cat(zshards, comp, ncpu)
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
            run_child(["cat"] + files, stdout=subprocess.DEVNULL)
            with Mount([tools["batchfs"], "-f", src, mnt, "-o", o], mnt) as m:
                runs[key].append(m.read(tools, mnt + "/epoch-0000", *only))
    for label, key, _, _, _ in rows:
        rs = sorted(runs[key], key=lambda r: r["seconds"])
        r = rs[1]
        res[key] = nrec / r["seconds"]
        t.add(label + " (median of 3)", res[key], None, mb(r["bytes"], r["seconds"]), None,
              r["seconds"], r["daemon_cpu"], "runs %s s" % "/".join(
                  "%.2f" % x["seconds"] for x in runs[key]))

    # the seek-point paths: too slow for a whole epoch, the first batches
    k = w["gz_batches"]
    dense = os.path.join(args.work, "index-%s-dense" % name)
    shutil.rmtree(dense, ignore_errors=True)
    for label, key, d, env in (
            ("%s, shadow=off: seek points every ~1 MiB" % comp, "seek_1m", idx["pass"], None),
            ("%s, shadow=off: seek points every 64 KiB" % comp, "seek_64k", dense,
             dict(os.environ, BATCHFS_SEEK_SPAN=str(64 << 10)))):
        log("%s: %s, %d batches" % (name, label, k))
        cmd = [tools["batchfs"], "-f", gz, mnt, "-o", mopts(d, ",shadow=off")]
        if env:  # build the dense index first (not timed with the reads)
            check_child([tools["batchfs"], "index", "--shadow-size", "0", "--index-dir", d, gz],
                        env=env)
        with Mount(cmd, mnt) as m:
            c0 = proc_cpu(m.p.pid)
            secs, nbytes = read_first_batches(mnt, k)
            c1 = proc_cpu(m.p.pid)
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


def gz_ratios(r):
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


def new_ratios(r):
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


# ---------------------------------------------------------------- index size


def evict(paths):
    """Drop these files (only these) from the page cache: a cold read."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages (a fresh dataset) are not dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def proc_status(pid, keys=("VmRSS", "RssAnon", "RssFile")):
    got = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k = line.split(":")[0]
                if k in keys:
                    got[k] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return got


def proc_rchar(pid):
    """Bytes the process read through read/pread so far (mapped pages not counted)."""
    try:
        with open("/proc/%d/io" % pid) as f:
            for line in f:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


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
        with Mount([tools["batchfs"], "-f", src, mnt, "-o",
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
        with Mount([tools["batchfs"], "-f", src, mnt, "-o",
                    "index_dir=%s,threads=%s,batch_size=%d" % (ixa, jobs, bs)], mnt) as m:
            times.append(m.mount_seconds)
            r["remount_rchar"] = proc_rchar(m.p.pid)
            st = read_stats(mnt)
            r["reused"] = st.get("index_reused")
            if k == 2:
                r["rss_mount"] = proc_status(m.p.pid)
                log("scale %d: one epoch (.safetensors)" % n)
                t0 = time.perf_counter()
                check_child([tools["readtree"], "--only", ".safetensors", "--exclude", "all",
                             "--exclude", "all.safetensors", mnt + "/epoch-0000"])
                r["epoch_seconds"] = time.perf_counter() - t0
                r["rss_epoch"] = proc_status(m.p.pid)
    r["remount"] = sorted(times)[1]
    r["rewritten"] = any(os.stat(f).st_mtime_ns != t for f, t in mtimes.items())
    for d in (ixa, ixb):
        shutil.rmtree(d, ignore_errors=True)
    return r


def bench_scale(args, tools):
    sizes = [(1_000_000, 16)] if args.quick else [(10_000_000, 64)]
    if args.scale_1e8:
        sizes.append((100_000_000, 256))
    return [scale_one(args, tools, n, sh) for n, sh in sizes]


def scale_ratios(rows):
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


# ---------------------------------------------------------------- many shards

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


def xargs_cat(files):
    """`cat` of every file to /dev/null (xargs: one cat per few thousand files);
    its seconds."""
    t0 = time.perf_counter()
    p = subprocess.run(["xargs", "-0", "cat"], input=b"\0".join(f.encode() for f in files),
                       stdout=subprocess.DEVNULL)
    if p.returncode != 0:
        raise RuntimeError("xargs cat failed with status %d" % p.returncode)
    return time.perf_counter() - t0


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
        return Mount([binary, "-f", src, mnt, "-o", "index_dir=%s,threads=%s%s" % (
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
                    r["fds" + key[7:]] = len(os.listdir("/proc/%d/fd" % m.p.pid))
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


def bench_shards(args, tools):
    return shards_one(args, tools, args.shards or (SHARDS_N // 10 if args.quick else SHARDS_N))


def shards_ratios(r):
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


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(prog="scripts/bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/batchfs-bench")
    ap.add_argument("--quick", action="store_true", help="10x fewer records")
    ap.add_argument("--cold-runs", type=int, metavar="N",
                    help="cold reads per workload, batchfs and null FUSE interleaved; the "
                    "median counts (default %d; 1 with --quick)" % COLD_RUNS)
    ap.add_argument("--workload", action="append", choices=list(WORKLOADS))
    ap.add_argument("--drop-caches", action="store_true",
                    help="(root) drop the page cache before the floor and the cold epoch")
    ap.add_argument("--batch-size", type=int, help="override every workload's batch size")
    ap.add_argument("--cache-size", help="batchfs cache_size (default: batchfs's, 1G)")
    ap.add_argument("--no-npm", action="store_true")
    ap.add_argument("--remote", action="store_true",
                    help="also the 'remote' part: 'small' behind a source with latency "
                    "(tests/faultfs), against cat and 256 random readers of that source "
                    "(scripts/bench_remote.py)")
    ap.add_argument("--only-remote", action="store_true",
                    help="the 'remote' part alone (no workloads, no scale or shards parts)")
    ap.add_argument("--remote-delays", default="2,20",
                    help="milliseconds per read of the remote part's source (default 2,20)")
    ap.add_argument("--remote-seconds", type=float, default=10,
                    help="the remote part's global shuffle is read this long at most")
    ap.add_argument("--bucket", action="store_true",
                    help="also the 'bucket' part: 'small' and 'image' in s3rver behind a "
                    "delaying proxy against a 16-way parallel download, and the disk cache "
                    "(scripts/bench_bucket.py)")
    ap.add_argument("--only-bucket", action="store_true",
                    help="the 'bucket' part alone")
    ap.add_argument("--bucket-delay-ms", type=int, default=20)
    ap.add_argument("--bucket-cache-delay-ms", type=int, default=5)
    ap.add_argument("--bucket-seconds", type=float, default=10,
                    help="the bucket part's global shuffle is read this long at most")
    ap.add_argument("--remote-previous", metavar="DIR",
                    help="also measure DIR/batchfs (a build of the previous commit) in the "
                    "remote part, with the same baselines")
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
    args = ap.parse_args()
    set_cold_runs(args.cold_runs or (1 if args.quick else COLD_RUNS))

    if args.python_baseline:
        python_baseline(args.python_baseline, json.loads(args.spec), args.batch_size,
                        args.records, 0)
        return 0
    if args.torch_loop:
        torch_loop(args.torch_loop, args.root, args.batch_size, args.records,
                   json.loads(args.spec) if args.spec else {})
        return 0
    if args.drop_caches and os.geteuid() != 0:
        ap.error("--drop-caches needs root")
    if args.only_shards:
        args.no_scale = True
    if args.only_remote:
        args.remote = args.no_scale = args.no_shards = args.no_npm = True
    if args.only_bucket:
        args.bucket = args.no_scale = args.no_shards = args.no_npm = True
    args.remote_delays = [int(x) for x in args.remote_delays.split(",") if x]
    names = [] if (args.only_scale or args.only_shards or args.only_remote or
                   args.only_bucket) else (
        args.workload or ["small", "image", "varlen", "wide", "wide2000", "photo"])
    os.makedirs(args.work, exist_ok=True)

    log("building")
    bdir = os.path.abspath(args.build_dir)
    r = subprocess.run([os.path.join(TOP, "scripts", "build"), bdir], stdout=subprocess.PIPE,
                       text=True)
    if r.returncode != 0:
        print("scripts/bench: the build failed", file=sys.stderr)
        return 1
    tools = {"batchfs": r.stdout.strip().splitlines()[-1],
             "gen": os.path.join(bdir, "tests", "gen", "bfs_gen"),
             "nullfs": os.path.join(bdir, "tests", "bench", "nullfs"),
             "readtree": os.path.join(bdir, "tests", "bench", "readtree"),
             "bench_decode": os.path.join(bdir, "tests", "bench", "bench_decode"),
             "bench_jpeg": os.path.join(bdir, "tests", "bench", "bench_jpeg")}
    if args.product_from:  # an earlier commit's daemon and decoder, the rest as built here
        pdir = os.path.abspath(args.product_from)
        tools["batchfs"] = os.path.join(pdir, "batchfs")
        tools["bench_decode"] = os.path.join(pdir, "tests", "bench", "bench_decode")
        say("batchfs and bench_decode from %s" % pdir)

    tfr_src = os.path.join(args.peers, "tfr_decode.c")
    tfr = os.path.join(args.work, "tfr_decode")
    if not os.path.exists(tfr_src):
        tools["tfr_decode_note"] = "n/a (no %s)" % tfr_src
    else:
        if not os.path.exists(tfr) or os.path.getmtime(tfr) < os.path.getmtime(tfr_src):
            log("gcc -O2 -march=native tfr_decode.c")
            r = subprocess.run(["gcc", "-O2", "-march=native", "-o", tfr, tfr_src],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                tools["tfr_decode_note"] = "n/a (gcc failed: %s)" % r.stderr.strip()[-200:]
        if os.path.exists(tfr) and "tfr_decode_note" not in tools:
            tools["tfr_decode"] = tfr

    npm_dir, npm_note = (None, "skipped: npm (--no-npm)")
    if "small" in names and not args.no_npm:
        npm_dir, npm_note = npm_setup(args.work)

    t_start = time.perf_counter()
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    say("batchfs benchmark (%s run) — %s, %d cores, kernel %s, %s" % (
        "--quick" if args.quick else "full", cpu, os.cpu_count(), os.uname().release,
        time.strftime("%Y-%m-%d %H:%M")))
    say("page cache: " + ("dropped (echo 3 > drop_caches) before the floor and the cold epoch"
                          if args.drop_caches else
                          "warm: the shards are read once before the floor is timed (no "
                          "--drop-caches), so the floor and the cold epoch read (almost) no "
                          "disk; the kernel may still reclaim idle pages between steps"))
    say(LEGEND)
    load0 = loadavg()
    say("load average at start: %.2f on %d cores%s" % (
        load0, os.cpu_count(), "  WARNING: other processes are using the CPU; timings are "
        "pessimistic and noisy (compare CPU s)" if load0 > 0.5 else ""))
    # what the charts say about this run; each result carries its id, so a
    # chart is drawn only from numbers of one run (scripts/benchchart.py)
    run = {"id": "%s-%d" % (time.strftime("%Y%m%d-%H%M%S"), os.getpid()),
           "machine": "%s, %d cores, kernel %s, load %.1f at start" % (
               cpu, os.cpu_count(), os.uname().release, load0),
           "date": time.strftime("%Y-%m-%d %H:%M"),
           "command": " ".join(["scripts/bench"] + sys.argv[1:])}
    results = []
    remote = None
    if args.remote:
        import bench_remote
        remote = bench_remote.run(args, tools, sys.modules[__name__])
    if args.bucket:
        import bench_bucket
        bench_bucket.run(args, tools, sys.modules[__name__])
    gz_results = []
    for name in names:
        w = WORKLOADS[name]
        if "gz_of" in w:
            gz_results.append(bench_gz(args, tools, name, w))
            continue
        results.append(bench_photo(args, tools, name, w) if w.get("photo") else
                       bench_workload(args, tools, name, w, npm_dir, npm_note))
        results[-1]["run"] = run["id"]
    scale = None if args.no_scale else bench_scale(args, tools)
    shards = None if args.no_shards or args.only_scale else bench_shards(args, tools)
    say()
    say("load average at end: %.2f on %d cores" % (loadavg(), os.cpu_count()))

    say()
    say("== ratios (records/s unless noted)")
    for r in results:
        n = r["name"]
        if r.get("photo"):
            photo_ratios(r)
            continue
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
        new_ratios(r)
    wide_ratios(results)
    for r in gz_results:
        gz_ratios(r)
    if scale:
        scale_ratios(scale)
    if shards:
        shards_ratios(shards)
    say()
    chart_dir = args.chart_dir or os.path.join(args.work, "charts")
    try:
        import benchchart
        with open(os.path.join(args.work, "bench-results.json"), "w") as f:
            json.dump(benchchart.saved(run, results), f, indent=1)
        for p in benchchart.write_charts(run, results, chart_dir):
            say("chart: %s" % p)
    except ImportError as e:
        say("charts: n/a (%s; Debian's python3-matplotlib draws them)" % e)
    say("total wall time of the benchmark: %.0f s" % (time.perf_counter() - t_start))
    with open(os.path.join(args.work, "bench-results.txt"), "w") as f:
        f.write("\n".join(OUT_LINES) + "\n")
    log("written to %s" % os.path.join(args.work, "bench-results.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
