# SPDX-License-Identifier: Apache-2.0
"""The bench's baselines and peers: what batchfs is measured against.

Floors and ceilings: `cat` of the shards (and zcat, a Python zlib stream,
xargs cat for many files), the null FUSE file system tests/bench/nullfs
serving a tree of the same names and sizes from memory. Peers, what users
run instead: Python + the official protobuf runtime + numpy
(python_baseline), PyTorch input loops (torch_loop: over the batch tree,
over all/, and vahidk/tfrecord of ../shared/peers), npm @roboflow/tfrecords,
and tfr_decode (../shared/peers/tfr_decode.c, a one-core C decoder).
python_baseline and torch_loop run in a child of their own (scripts/bench.py
--python-baseline / --torch-loop), so that their RSS and CPU are theirs.
"""

import json
import os
import resource
import shutil
import subprocess
import time

from .data import framing
from .harness import MiB, PYTHON, log, mount, run_child

NPM_RECORDS = 2_000
NULL_SPAN = 256 * MiB  # nullfs serves from a buffer this large: copies come from DRAM


def cat(files):
    """`cat` of files to /dev/null: (status, stdout, seconds, peak RSS) of
    run_child, its CPU in harness.LAST_CPU; also how the bench puts them in
    the page cache."""
    return run_child(["cat"] + list(files), stdout=subprocess.DEVNULL)


def nullfs(tools, mnt, opts):
    """tests/bench/nullfs mounted on mnt with -o opts (files=, size=,
    manifest=, keep_cache, direct_io, span=): the FUSE ceiling."""
    return mount([tools["nullfs"], "-f", mnt, "-o", opts], mnt)


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
              shuffle_queue_size=1024, DataLoader(batch_size=batch_size)
      tv_train, tv_eval: torchvision's training and evaluation pipelines
              over the first `limit` records of the shards of ROOT, under a
              DataLoader with a worker per core (_torchvision_loop)
      pil_decode: PIL's full decode of those records' images, one process,
              timed alone (_pil_decode)"""
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

    if mode in ("tv_train", "tv_eval", "pil_decode"):  # the records found before the clock
        recs = _record_index(root, limit)
    records = batches = nbytes = 0
    t0 = time.perf_counter()
    c0 = cpu_now()
    if mode in ("tv_train", "tv_eval"):
        records, batches, nbytes = _torchvision_loop(mode, recs, batch_size, description)
    elif mode == "pil_decode":
        records, nbytes = _pil_decode(recs, description)
    elif mode == "tree":
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
    secs, cpu = time.perf_counter() - t0, cpu_now() - c0
    if mode == "pil_decode":  # its images were read out of the records off the clock
        secs, cpu = _pil_decode.seconds, _pil_decode.cpu
    print(json.dumps({"records": records, "batches": batches, "seconds": secs,
                      "cpu_seconds": cpu, "tensor_bytes": nbytes}))


def _record_index(root, limit):
    """(shard, payload offset, length) of the first `limit` records of the
    plain shards of root, in file order: the index a PyTorch user keeps."""
    recs = []
    for n in sorted(os.listdir(root)):
        if n.startswith("."):
            continue
        p = os.path.join(root, n)
        offs, lens = framing(p, limit - len(recs) if limit else None)
        recs += [(p, o, ln) for o, ln in zip(offs, lens)]
        if limit and len(recs) >= limit:
            break
    return recs


def _image_bytes(Example, path, off, n, feat):
    with open(path, "rb", buffering=0) as f:
        raw = os.pread(f.fileno(), n, off)
    ex = Example()
    ex.ParseFromString(raw)
    return ex.features.feature[feat].bytes_list.value[0], ex.features.feature["label"]


def _torchvision_loop(mode, recs, batch_size, description):
    """torchvision's ImageNet pipelines over the records, as users write
    them: a map-style Dataset (pread the record, parse tf.train.Example
    with the protobuf runtime, PIL decode, convert("RGB"), then
    RandomResizedCrop(224) + RandomHorizontalFlip (tv_train) or Resize(256)
    + CenterCrop(224) (tv_eval), to a uint8 array), under a DataLoader with
    one worker per core, shuffled. (records, batches, tensor bytes)."""
    import io

    import numpy as np
    import torch
    import torch.utils.data
    import torchvision.transforms as T
    from PIL import Image

    import oracle

    feat, (h, w) = description["feature"], description["size"]
    if mode == "tv_train":
        tf = T.Compose([T.RandomResizedCrop((h, w)), T.RandomHorizontalFlip()])
    else:
        tf = T.Compose([T.Resize(round(max(h, w) * 256 / 224)), T.CenterCrop((h, w))])
    Example = oracle.message_class("Example")

    class Records(torch.utils.data.Dataset):
        def __len__(self):
            return len(recs)

        def __getitem__(self, i):
            data, label = _image_bytes(Example, *recs[i], feat)
            im = Image.open(io.BytesIO(data)).convert("RGB")
            return torch.from_numpy(np.asarray(tf(im))), int(label.int64_list.value[0])

    loader = torch.utils.data.DataLoader(Records(), batch_size=batch_size, shuffle=True,
                                         num_workers=os.cpu_count() or 1,
                                         generator=torch.Generator().manual_seed(0))
    records = batches = nbytes = 0
    for x, y in loader:
        records += x.shape[0]
        nbytes += x.numel() + y.numel() * y.element_size()
        batches += 1
    del loader
    return records, batches, nbytes


def _pil_decode(recs, description):
    """PIL's own full decode, Image.open(...).convert("RGB"), of each
    record's image in one process; the images are read and parsed out of
    the records before the clock. (records, decoded bytes)."""
    import io

    from PIL import Image

    import oracle

    Example = oracle.message_class("Example")
    datas = [_image_bytes(Example, *r, description["feature"])[0] for r in recs]
    t0, c0 = time.perf_counter(), time.process_time()
    nbytes = 0
    for d in datas:
        im = Image.open(io.BytesIO(d)).convert("RGB")
        nbytes += im.width * im.height * 3
    # the clock of this mode starts here, not at the caller's t0
    _pil_decode.seconds, _pil_decode.cpu = time.perf_counter() - t0, time.process_time() - c0
    return len(datas), nbytes


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


def build_tfr_decode(args, tools):
    """gcc -O2 -march=native of PEERS/tfr_decode.c into WORK (again when
    the source is newer): tools["tfr_decode"], or why not in
    tools["tfr_decode_note"]."""
    tfr_src = os.path.join(args.peers, "tfr_decode.c")
    tfr = os.path.join(args.work, "tfr_decode")
    if not os.path.exists(tfr_src):
        tools["tfr_decode_note"] = "n/a (no %s)" % tfr_src
        return
    if not os.path.exists(tfr) or os.path.getmtime(tfr) < os.path.getmtime(tfr_src):
        log("gcc -O2 -march=native tfr_decode.c")
        r = subprocess.run(["gcc", "-O2", "-march=native", "-o", tfr, tfr_src],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            tools["tfr_decode_note"] = "n/a (gcc failed: %s)" % r.stderr.strip()[-200:]
    if os.path.exists(tfr) and "tfr_decode_note" not in tools:
        tools["tfr_decode"] = tfr


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


def xargs_cat(files):
    """`cat` of every file to /dev/null (xargs: one cat per few thousand files);
    its seconds."""
    t0 = time.perf_counter()
    p = subprocess.run(["xargs", "-0", "cat"], input=b"\0".join(f.encode() for f in files),
                       stdout=subprocess.DEVNULL)
    if p.returncode != 0:
        raise RuntimeError("xargs cat failed with status %d" % p.returncode)
    return time.perf_counter() - t0
