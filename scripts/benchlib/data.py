# SPDX-License-Identifier: Apache-2.0
"""The bench's data: the workloads (records, features, batch size, the
schema and reader specs each peer needs) and the datasets they are made of,
generated into WORK with the project's bfs_gen (or, for 'photo', from the
photographs python3-skimage ships) and reused while their parameters match.
"""

import json
import os
import shutil
import struct

from .harness import check_child, log

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
# rows (suites/photo.py), not the generic ones
WORKLOADS["photo"] = {
    "records": 4_000, "shards": 8, "batch_size": 256,
    "photo": True, "size": (224, 224), "feature": "image/encoded",
    "python_records": 1_000,
}
# the photographs Debian ships with scikit-image (python3-skimage), RGB ones
PHOTO_SOURCES = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
                 "motorcycle_right.png", "rocket.jpg", "hubble_deep_field.jpg", "retina.jpg",
                 "ihc.png"]
# compressed twins of a workload (suites/compressed.py): the same records in
# gzip or zlib shards, measured against the plain shards in the same run
WORKLOADS["small-gz"] = {"gz_of": "small", "compression": "gzip", "gz_batches": 60}
WORKLOADS["image-gz"] = {"gz_of": "image", "compression": "gzip", "gz_batches": 40}
WORKLOADS["small-zlib"] = {"gz_of": "small", "compression": "zlib", "gz_batches": 60}
GEN_SEED = 1


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


def shard_paths(d):
    return [os.path.join(d, n) for n in sorted(os.listdir(d)) if not n.startswith(".")]


def max_file_size(manifest):
    with open(manifest) as f:
        return max((int(l.split(" ", 1)[0]) for l in f if l.strip()), default=0)


def values_per_record(features):
    """Mean values per record of bfs_gen FEATURE specs (a bytes value counts
    as one value), for the per-value decoder rates."""
    n = 0.0
    for f in features:
        count = f.split(",")[0].split(":")[2]
        lo, _, hi = count.partition("..")
        n += (int(lo) + int(hi or lo)) / 2
    return n
