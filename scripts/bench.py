"""scripts/bench — how fast batchfs is, next to its floors, ceilings and peers.

    scripts/bench [--quick] [--workload small|image|varlen]... [--work DIR]
                  [--drop-caches] [--no-npm] [--no-index10m] [--cache-size SIZE]

For each workload (generated with the project's own bfs_gen; plain shards):
  raw cat of the shards                       the floor
  null FUSE (tests/bench/nullfs) serving the same tree (same paths, same
  sizes, read in the same order) from memory: first read through the page
  cache, re-read with keep_cache, and direct_io with 1 MiB reads
  the decoder alone (tests/bench/bench_decode): parse only, and batch
  building in file and shuffled order, on 1 thread and on every core
  batchfs: index build, then the first epoch on a fresh mount (cold), then
  a re-read (warm); every file of every batch of epoch-0000 is read with
  1 MiB reads by tests/bench/readtree (the null FUSE tree is read the same
  way)
  Python + the official protobuf runtime (Debian's, C++ backend) + numpy,
  shuffled batches of the same size, on a fixed subset
  npm @roboflow/tfrecords on a fixed subset of 'small'
then the ratio lines against the targets, and the index size per record
on a generated 10-million-record dataset. Everything goes to stdout and to
WORK/bench-results.txt.

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
          "timed loop's (Python, npm), the process's (others); MB = 10^6 bytes")

import argparse
import json
import os
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
    },
    "image": {
        "records": 8_000, "shards": 8, "batch_size": 32,
        "features": ["image:bytes:1,len=150528", "label:int64:1"],
        "spec": {"image": ["raw", "uint8", [224, 224, 3]], "label": ["int64", []]},
        "schema": {"features": {
            "image": {"kind": "bytes", "dtype": "uint8", "shape": [224, 224, 3]},
            "label": {"kind": "int64", "shape": []}}},
        "python_records": 2_000,
    },
    "varlen": {
        "records": 200_000, "shards": 8, "batch_size": 64,
        "features": ["tokens:int64:16..512", "label:int64:1"],
        "spec": {"tokens": ["padded", 512], "label": ["int64", []]},
        "python_records": 20_000,
    },
}
NPM_RECORDS = 2_000
NULL_SPAN = 256 * MiB  # nullfs serves from a buffer this large: copies come from DRAM
INDEX_RECORDS = 10_000_000
GEN_SEED = 1

# ---------------------------------------------------------------- helpers

OUT_LINES = []


def say(line=""):
    print(line, flush=True)
    OUT_LINES.append(line)


def log(msg):
    print("  .. " + msg, file=sys.stderr, flush=True)


LAST_CPU = [0.0]  # CPU seconds (user + system) of the last run_child


def run_child(cmd, stdout=subprocess.PIPE, cwd=None):
    """Run cmd to the end; returns (rc, stdout text, seconds, peak RSS bytes)
    with the RSS of that child alone (wait4); its CPU time goes to LAST_CPU."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stdin=subprocess.DEVNULL, cwd=cwd)
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


def median_read(m, tools, path, n=3):
    """n re-reads of a tree; the one with the median time."""
    runs = sorted((m.read(tools, path) for _ in range(n)), key=lambda r: r["seconds"])
    return runs[n // 2]


class Mount:
    """A FUSE daemon run in the foreground (-f) so that its pid is ours."""

    def __init__(self, cmd, mnt):
        self.mnt = mnt
        os.makedirs(mnt, exist_ok=True)
        if os.path.ismount(mnt):
            subprocess.run(["fusermount3", "-u", mnt], check=False)
        self.errf = tempfile.TemporaryFile()
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


def verdict(ok):
    return "PASS" if ok else "MISS"


# ---------------------------------------------------------------- one workload


def bench_workload(args, tools, name, w, npm_dir, npm_note):
    scale = 10 if args.quick else 1
    nrec = w["records"] // scale
    bs = args.batch_size or w["batch_size"]
    src, fresh = generate(tools, args.work, name, w, nrec)
    shards = shard_paths(src)
    shard_bytes = sum(os.path.getsize(p) for p in shards)
    res = {"name": name, "records": nrec}
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
    drop_caches(args)
    log("%s: batchfs cold + warm" % name)
    with Mount([tools["batchfs"], "-f", src, mnt, "-o", mopts], mnt) as m:
        res["mount_seconds"] = m.mount_seconds
        cold = m.read(tools, mnt + "/epoch-0000")
        with open(mnt + "/stats.json") as f:
            st_cold = json.load(f)
        hwm_cold = m.hwm()
        warm = median_read(m, tools, mnt + "/epoch-0000")
        with open(mnt + "/stats.json") as f:
            st_warm = json.load(f)
        hwm = m.hwm()
        check_child([tools["readtree"], "--manifest", manifest, mnt + "/epoch-0000"])
    tree_bytes = cold["bytes"]
    res.update(tree_bytes=tree_bytes, files=cold["files"], stats=st_warm, hwm=hwm,
               batches=st_warm.get("batches_per_epoch"))
    res["cold"] = nrec / cold["seconds"]
    res["cold_cpu"] = cold["daemon_cpu"]
    res["warm"] = nrec / warm["seconds"]
    res["warm_mb"] = mb(tree_bytes, warm["seconds"])
    rows_batchfs = [
        ("batchfs cold first epoch (fresh mount)", cold, hwm_cold,
         "decode %.2f s in %d batches; mount %.2f s" % (
             st_cold.get("decode_seconds", 0), st_cold.get("batches_decoded", 0),
             m.mount_seconds)),
        ("batchfs warm re-read (keep_cache; median of 3)", warm, hwm,
         "decoded again: %d batches" % (st_warm.get("batches_decoded", 0) -
                                        st_cold.get("batches_decoded", 0))),
    ]

    # ceilings: null FUSE over the same tree
    log("%s: null FUSE" % name)
    span = ",span=%d" % max(NULL_SPAN, max_file_size(manifest))
    with Mount([tools["nullfs"], "-f", mnt, "-o", "manifest=%s,keep_cache%s" % (manifest, span)],
               mnt) as m:
        first = m.read(tools, mnt)
        again = median_read(m, tools, mnt)
        null_hwm = m.hwm()
    with Mount([tools["nullfs"], "-f", mnt, "-o", "manifest=%s,direct_io%s" % (manifest, span)],
               mnt) as m:
        dio = m.read(tools, mnt, "--bs", str(MiB))
        dio_hwm = m.hwm()
    res["null_first"] = nrec / first["seconds"]
    res["null_first_cpu"] = first["daemon_cpu"]
    res["null_again"] = nrec / again["seconds"]
    res["null_again_mb"] = mb(again["bytes"], again["seconds"])
    for label, r, rss in (("null FUSE, first read via page cache (ceiling)", first, null_hwm),
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

    say()
    say("== %s: %s records (%s), %d plain shards, %.1f MB TFRecord; batch_size %d, "
        "%s batches; tree %.1f MB in %d files%s" % (
            name, "{:,}".format(nrec), ", ".join(w["features"]), len(shards), shard_bytes / 1e6,
            bs, res["batches"], tree_bytes / 1e6, res["files"],
            "; freshly generated" if fresh else ""))
    t.emit()
    res["shard_bytes"] = shard_bytes
    return res


# ---------------------------------------------------------------- index size


def bench_index10m(args, tools):
    n = INDEX_RECORDS // (10 if args.quick else 1)
    w = {"shards": 4, "features": ["y:int64:1"]}
    src, _ = generate(tools, args.work, "index%d" % n, w, n)
    idx = os.path.join(args.work, "index-index%d" % n)
    shutil.rmtree(idx, ignore_errors=True)
    log("index of %d records" % n)
    out, secs, rss = check_child([tools["batchfs"], "index", "--index-dir", idx, src])
    mem = None
    for tok in out.split(";"):
        if "index" in tok and "bytes" in tok:
            mem = int(tok.split()[1])
    disk = sum(os.path.getsize(os.path.join(idx, f)) for f in os.listdir(idx)
               if f.endswith(".idx"))
    return {"records": n, "mem": mem, "disk": disk, "seconds": secs, "rss": rss,
            "line": out.strip()}


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(prog="scripts/bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/batchfs-bench")
    ap.add_argument("--quick", action="store_true", help="10x fewer records")
    ap.add_argument("--workload", action="append", choices=sorted(WORKLOADS))
    ap.add_argument("--drop-caches", action="store_true",
                    help="(root) drop the page cache before the floor and the cold epoch")
    ap.add_argument("--batch-size", type=int, help="override every workload's batch size")
    ap.add_argument("--cache-size", help="batchfs cache_size (default: batchfs's, 1G)")
    ap.add_argument("--no-npm", action="store_true")
    ap.add_argument("--no-index10m", action="store_true")
    # internal: the Python baseline, run as a child so that its RSS is its own
    ap.add_argument("--python-baseline", metavar="SOURCE", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--records", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.python_baseline:
        python_baseline(args.python_baseline, json.loads(args.spec), args.batch_size,
                        args.records, 0)
        return 0
    if args.drop_caches and os.geteuid() != 0:
        ap.error("--drop-caches needs root")
    names = args.workload or ["small", "image", "varlen"]
    os.makedirs(args.work, exist_ok=True)

    log("building")
    r = subprocess.run([os.path.join(TOP, "scripts", "build")], stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        print("scripts/bench: the build failed", file=sys.stderr)
        return 1
    bdir = os.path.join(TOP, "build")
    tools = {"batchfs": r.stdout.strip().splitlines()[-1],
             "gen": os.path.join(bdir, "tests", "gen", "bfs_gen"),
             "nullfs": os.path.join(bdir, "tests", "bench", "nullfs"),
             "readtree": os.path.join(bdir, "tests", "bench", "readtree"),
             "bench_decode": os.path.join(bdir, "tests", "bench", "bench_decode")}

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
    results = []
    for name in names:
        results.append(bench_workload(args, tools, name, WORKLOADS[name], npm_dir, npm_note))
    ix = None if args.no_index10m else bench_index10m(args, tools)
    say()
    say("load average at end: %.2f on %d cores" % (loadavg(), os.cpu_count()))

    say()
    say("== ratios (records/s unless noted)")
    for r in results:
        n = r["name"]
        low = min(x for x in (r["dec_all_shuffled"], r["null_first"]) if x)
        which = "decoder all cores shuffled" if low == r["dec_all_shuffled"] else \
            "null FUSE first read"
        q = r["cold"] / low
        say("%-7s cold first epoch / min(decoder all cores shuffled, null FUSE first read) = "
            "%s / %s (%s) = %.0f%%  target >= 70%%  %s" % (
                n, fmt_rate(r["cold"]), fmt_rate(low), which, 100 * q, verdict(q >= 0.70)))
        if r.get("cold_cpu") and r.get("dec1_cpu") is not None and r.get("null_first_cpu"):
            base = r["dec1_cpu"] + r["null_first_cpu"]
            say("%-7s   (CPU, steadier on a busy machine: daemon %.2f s for the cold epoch vs "
                "decoder 1 thread shuffled %.2f s + null FUSE first read %.2f s = %.2f s: %.0f%%)"
                % (n, r["cold_cpu"], r["dec1_cpu"], r["null_first_cpu"], base,
                   100 * base / r["cold_cpu"]))
        q = r["warm"] / r["null_again"]
        say("%-7s warm re-read / null FUSE keep_cache re-read = %s / %s MB/s = %.0f%%  "
            "target >= 80%%  %s" % (n, fmt_rate(r["warm_mb"]), fmt_rate(r["null_again_mb"]),
                                   100 * q, verdict(q >= 0.80)))
        q = r["cold"] / r["python"]
        if n == "small":
            say("%-7s cold first epoch / Python+protobuf = %s / %s = %.1fx  target >= 100x  %s"
                % (n, fmt_rate(r["cold"]), fmt_rate(r["python"]), q, verdict(q >= 100)))
        else:
            say("%-7s cold first epoch / Python+protobuf = %s / %s = %.1fx  (for information)"
                % (n, fmt_rate(r["cold"]), fmt_rate(r["python"]), q))
        st = r["stats"]
        budget = st.get("cache_budget", 1 << 30)
        limit = budget + st.get("index_bytes", 0) + 64 * MiB
        say("%-7s daemon peak RSS (VmHWM) %.0f MiB vs cache_size %.0f MiB + index %.1f MiB + "
            "64 MiB = %.0f MiB  %s  (cache peak %.0f MiB)" % (
                n, r["hwm"] / MiB, budget / MiB, st.get("index_bytes", 0) / MiB, limit / MiB,
                verdict(r["hwm"] <= limit), st.get("cache_peak_bytes", 0) / MiB))
    if ix:
        say("index   %s records: in memory %s bytes = %.6f B/record %s; on disk under "
            "index_dir %s bytes = %.6f B/record %s  (target <= 16; built in %.1f s)" % (
                "{:,}".format(ix["records"]), "{:,}".format(ix["mem"] or 0),
                (ix["mem"] or 0) / ix["records"], verdict((ix["mem"] or 0) <= 16 * ix["records"]),
                "{:,}".format(ix["disk"]), ix["disk"] / ix["records"],
                verdict(ix["disk"] <= 16 * ix["records"]), ix["seconds"]))
    say()
    say("total wall time of the benchmark: %.0f s" % (time.perf_counter() - t_start))
    with open(os.path.join(args.work, "bench-results.txt"), "w") as f:
        f.write("\n".join(OUT_LINES) + "\n")
    log("written to %s" % os.path.join(args.work, "bench-results.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
