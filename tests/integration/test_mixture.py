# SPDX-License-Identifier: Apache-2.0
"""Mixtures as SOURCE (docs/contract.md, "Mixtures"; the order is
docs/shuffle.md, section 8) over real FUSE mounts, against mixref.py, a
reference written from the documented rule: every row's source and record
(its _source.npy and _record.npy) and every byte of the batch files,
all/ and .safetensors, for 3-source mixtures of generated shards (plain,
gzip, zlib) and of real shards, all three epoch rules, a weight schedule,
world 1, 3 and 8, shuffle=none, a re-mount, the Python module; bad mixture
files fail with one line naming the entry, exit status 1."""

import json
import os

import numpy as np
import pytest

import oracle
from helpers import check_batch_dir, check_safetensors, effective, expect_mount_failure, \
    make_dataset
from mixref import Mixture

FEATS = ["x:float:4", "y:int64:1", "tokens:int64:0..12", "tags:bytes:0..3,len=1..5"]
B = 8


@pytest.fixture(scope="module")
def sources(gen, work):
    """Three generated sources of one set of features: 2 plain shards of 60
    records, gzip 25, zlib 9 (smaller than a batch's span: it repeats)."""
    return [make_dataset(gen, work / "mix-a", 60, FEATS, shards=2, seed=31),
            make_dataset(gen, work / "mix-b", 25, FEATS, shards=1, seed=32, compression="gzip"),
            make_dataset(gen, work / "mix-c", 9, FEATS, shards=1, seed=33, compression="zlib")]


def write_mix(path, entries, **top):
    doc = {"mixture": entries}
    doc.update(top)
    path.write_text(json.dumps(doc))
    return str(path)


def entries(srcs, weights, names=("web", "books", "code")):
    return [{"name": n, "source": s.path, "weight": w} for n, s, w in zip(names, srcs, weights)]


def schema_without_provenance(m):
    s = effective(m)
    feats = {k: v for k, v in s["features"].items() if "provenance" not in v}
    return {"features": feats, "feature_lists": s["feature_lists"]}


def check_mixture_epoch(m, ref, decoded, first, epoch, drop=False, rank=0, world=1, batches=None,
                        check_all=True, B=B):
    """Every batch (or those listed) of a rank's epoch and its all/ against
    the reference: provenance files and the data's bytes."""
    rows = ref.epoch(epoch)
    L = ref.L
    nb = (L // B if drop else -(-L // B)) // world
    schema = schema_without_provenance(m)
    ep = m.path("epoch-%04d" % epoch)
    names = sorted(n for n in os.listdir(ep) if n.startswith("batch-") and "." not in n)
    assert names == ["batch-%06d" % i for i in range(nb)]

    def expected(pos):
        exp = oracle.expected_batch(decoded, schema, [first[rows[p][0]] + rows[p][1] for p in pos])
        exp["_source"] = np.array([rows[p][0] for p in pos], dtype=np.int32)
        exp["_record"] = np.array([rows[p][1] for p in pos], dtype=np.int64)
        return exp

    every = []
    for i in range(nb):
        g = i * world + rank
        pos = list(range(g * B, min(g * B + B, L)))
        every.extend(pos)
        if batches is not None and i not in batches:
            continue
        exp = expected(pos)
        check_batch_dir(os.path.join(ep, "batch-%06d" % i), exp)
        check_safetensors(os.path.join(ep, "batch-%06d.safetensors" % i), exp)
    if check_all:
        exp = expected(every)
        src = np.load(os.path.join(ep, "all", "_source.npy"))
        rec = np.load(os.path.join(ep, "all", "_record.npy"))
        assert src.dtype == np.int32 and rec.dtype == np.int64
        assert np.array_equal(src, exp["_source"]) and np.array_equal(rec, exp["_record"])
        check_safetensors(os.path.join(ep, "all.safetensors"), exp)


def union(srcs):
    decoded, first = [], []
    for s in srcs:
        first.append(len(decoded))
        decoded.extend(s.decoded)
    return decoded, first


@pytest.mark.parametrize("rule", ["first_exhausted", "all_exhausted", 150])
def test_three_sources_each_epoch_rule(mounter, sources, tmp_path, rule):
    src = write_mix(tmp_path / "mix.json", entries(sources, [7, 2, 1]), epoch=rule)
    m = mounter(src, batch_size=B, seed=5)
    ref = Mixture(["web", "books", "code"], [s.n for s in sources], [(0, [7, 2, 1])], rule, seed=5)
    decoded, first = union(sources)
    facts = m.json("schema.json")["mixture"]
    assert facts["epoch_records"] == ref.L
    assert [e["records"] for e in facts["sources"]] == [s.n for s in sources]
    if rule == "first_exhausted":  # no source past its first pass
        assert all(ref.count(ref.L, s) <= sources[s].n for s in range(3))
    if rule == "all_exhausted":  # every source through a pass: the small one repeats
        assert all(ref.count(ref.L, s) >= sources[s].n for s in range(3))
    for e in (0, 1, 4):
        check_mixture_epoch(m, ref, decoded, first, e, batches=None if e == 0 else [0, 3])
    # the prefix bound, on what the mount shows: every prefix of epoch 0
    src0 = np.load(m.path("epoch-0000", "all", "_source.npy"))
    for s, w in enumerate([7, 2, 1]):
        got = np.cumsum(src0 == s)
        target = np.arange(1, len(src0) + 1) * w / 10
        assert np.all(np.abs(got - target) < 1)


def test_schedule_ranks_and_remount(mounter, sources, tmp_path):
    """Weights change at record 37 (each source goes on where it stood);
    world=3 and world=8 rank folders show the global batches; a re-mount
    gives the same bytes."""
    sched = [{"from_record": 0, "weights": [7, 2, 1]}, {"from_record": 37, "weights": [1, 1, 3]}]
    src = write_mix(tmp_path / "mix.json",
                    [{"name": n, "source": s.path} for n, s in zip(("web", "books", "code"), sources)],
                    schedule=sched, epoch=200)
    ref = Mixture(["web", "books", "code"], [s.n for s in sources],
                  [(0, [7, 2, 1]), (37, [1, 1, 3])], 200)
    decoded, first = union(sources)
    m1 = mounter(src, batch_size=B)
    for e in (0, 1, 2):
        check_mixture_epoch(m1, ref, decoded, first, e)
    # no repeat before a pass completes, across epochs: each source's draws
    stream = [r for e in range(6) for r in ref.epoch(e)]
    for s in range(3):
        recs = [r for (t, r) in stream if t == s]
        n = sources[s].n
        for k in range(0, len(recs) - n + 1, n):
            assert sorted(recs[k:k + n]) == list(range(n))
    for world in (3, 8):
        mw = mounter(src, batch_size=B, world=world)
        for r in (0, world - 1):
            check_rank(mw, ref, decoded, first, r, world)
    a = open(m1.path("epoch-0002", "all.safetensors"), "rb").read()
    m1.stop()
    m2 = mounter(src, batch_size=B)
    assert open(m2.path("epoch-0002", "all.safetensors"), "rb").read() == a


def check_rank(m, ref, decoded, first, rank, world):
    """rank-RRRR/ of a world=W mount: batch i is global batch i*W + rank."""
    rows = ref.epoch(1)
    nb = -(-ref.L // B) // world
    assert nb >= 3
    base = m.path("rank-%04d" % rank, "epoch-0001")
    assert len([n for n in os.listdir(base) if n.startswith("batch-") and "." not in n]) == nb
    for i in range(nb):
        g = i * world + rank
        pos = range(g * B, min(g * B + B, ref.L))
        got_s = np.load(os.path.join(base, "batch-%06d" % i, "_source.npy"))
        got_r = np.load(os.path.join(base, "batch-%06d" % i, "_record.npy"))
        assert got_s.tolist() == [rows[p][0] for p in pos]
        assert got_r.tolist() == [rows[p][1] for p in pos]
        y = np.load(os.path.join(base, "batch-%06d" % i, "y.npy"))
        assert y.tolist() == [int(decoded[first[rows[p][0]] + rows[p][1]]["features"]["y"][1][0])
                              for p in pos]


def test_shuffle_none_drop_remainder_and_python(mounter, sources, tmp_path):
    src = write_mix(tmp_path / "mix.json", entries(sources, [0.5, 0.3, 0.2]), epoch="first_exhausted")
    ref = Mixture(["web", "books", "code"], [s.n for s in sources], [(0, [0.5, 0.3, 0.2])],
                  "first_exhausted", shuffle=False)
    decoded, first = union(sources)
    m = mounter(src, batch_size=B, shuffle="none", drop_remainder=True)
    check_mixture_epoch(m, ref, decoded, first, 0, drop=True)
    check_mixture_epoch(m, ref, decoded, first, 3, drop=True, batches=[1])
    # the Python module's dataset gives the provenance with the batch
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    from batchfs.torch import BatchDataset
    ds = BatchDataset(str(m.mnt), epoch=0)
    item = ds[1]
    assert item["_source"].tolist() == [r[0] for r in ref.epoch(0)[B:2 * B]]


REAL = os.environ.get("BFS_TESTDATA") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "testdata", "real")


def test_real_shards(mounter, tmp_path):
    """Real shards (TFX's taxi data, gzip): each shard a source, and a glob
    of both the third."""
    a = os.path.join(REAL, "tfx-taxi-external-00000-of-00002.tfrecord.gz")
    b = os.path.join(REAL, "tfx-taxi-external-00001-of-00002.tfrecord.gz")
    if not (os.path.exists(a) and os.path.exists(b)):
        pytest.skip("no real test data at %s" % REAL)
    glob = os.path.join(REAL, "tfx-taxi-external-0000*-of-00002.tfrecord.gz")
    ents = [{"name": "t0", "source": a, "weight": 3}, {"name": "t1", "source": b, "weight": 1},
            {"name": "both", "source": glob, "weight": 0.5}]
    src = write_mix(tmp_path / "mix.json", ents, epoch=2000)
    m = mounter(src, batch_size=64, seed=9)
    da, db = oracle.read_dataset(a), oracle.read_dataset(b)
    decs = [da, db, da + db]  # the glob: both shards, in name order
    ref = Mixture(["t0", "t1", "both"], [len(d) for d in decs], [(0, [3, 1, 0.5])], 2000, seed=9)
    rows = ref.epoch(1)
    src1 = np.load(m.path("epoch-0001", "all", "_source.npy"))
    rec1 = np.load(m.path("epoch-0001", "all", "_record.npy"))
    assert src1.tolist() == [r[0] for r in rows] and rec1.tolist() == [r[1] for r in rows]
    # a feature's bytes, row by row, from the record the reference names
    schema = schema_without_provenance(m)
    name = sorted(k for k, v in schema["features"].items()
                  if v.get("kind") == "int64" and v.get("shape") == [])[0]
    got = np.load(m.path("epoch-0001", "all", name + ".npy"))
    dflt = schema["features"][name].get("default", 0)
    want = []
    for s, r in rows:
        kind, vals = decs[s][r]["features"].get(name, ("none", []))
        want.append(int(vals[0]) if len(vals) else dflt)
    assert got.tolist() == want


def _taxi_parts(tmp_path):
    """Two parts of TFX's taxi data (written by TFX, its missing values
    `Feature {}`): the records whose dropoff_census_tract is set (one of them
    given a pickup_census_tract, which TFX left empty in every record),
    and the records whose dropoff_census_tract is empty."""
    import struct
    a = os.path.join(REAL, "tfx-taxi-external-00000-of-00002.tfrecord.gz")
    if not os.path.exists(a):
        pytest.skip("no real test data at %s" % REAL)
    Ex = oracle.message_class("Example")
    with_secs, without = [], []
    for raw in oracle.read_records(a):
        ex = Ex.FromString(raw)
        typed = ex.features.feature["dropoff_census_tract"].WhichOneof("kind") is not None
        (with_secs if typed else without).append(raw)
    assert len(with_secs) > 1000 and len(without) > 100
    ex = Ex.FromString(with_secs[7])
    ex.features.feature["pickup_census_tract"].float_list.value.append(17031081800.0)
    with_secs[7] = ex.SerializeToString()
    paths = []
    for name, recs in (("part-a", with_secs), ("part-b", without)):
        d = tmp_path / name
        d.mkdir()
        heads = [struct.pack("<Q", len(r)) for r in recs]
        hc, bc = oracle.crc32c_many(heads), oracle.crc32c_many(recs)
        with open(d / "data.tfrecord", "wb") as f:
            for h, r, a, b in zip(heads, recs, hc, bc):
                f.write(h + struct.pack("<I", oracle.mask_crc(int(a))) + r +
                        struct.pack("<I", oracle.mask_crc(int(b))))
        paths.append(str(d))
    return paths


def test_tfx_empty_features_are_present_with_no_value(mounter, tmp_path):
    """TFX writes a missing value as `Feature {}`: present, 0 values. A
    source where a feature has a value in 1 record and is empty in all the
    others mounts without a warning that several datasets were mixed."""
    part_a, part_b = _taxi_parts(tmp_path)
    m = mounter(part_a, batch_size=64)
    assert "missing from most records" not in m.log_text()
    readme = m.read("README.txt").decode()
    assert "Warning" not in readme and "several datasets" not in readme, readme
    spec = m.json("schema.json")["features"]["pickup_census_tract"]
    assert spec["shape"] == [-1] and spec["max_len"] == 1


def test_two_parts_of_a_tfx_dataset_mount_as_a_mixture(mounter, tmp_path):
    """dropoff_census_tract is set in every record of one part and empty in
    every record of the other (pickup_census_tract the other way round):
    the parts mount as a mixture without schema=, each feature padded,
    empty where a part has no value."""
    part_a, part_b = _taxi_parts(tmp_path)
    src = write_mix(tmp_path / "taxi.json",
                    [{"name": "a", "source": part_a, "weight": 2},
                     {"name": "b", "source": part_b, "weight": 1}], epoch=700)
    m = mounter(src, batch_size=64, seed=4)
    feats = m.json("schema.json")["features"]
    assert feats["dropoff_census_tract"]["shape"] == [-1]
    assert feats["dropoff_census_tract"]["max_len"] == 1
    assert feats["pickup_census_tract"]["shape"] == [-1]
    decs = [oracle.read_dataset(part_a), oracle.read_dataset(part_b)]
    ref = Mixture(["a", "b"], [len(d) for d in decs], [(0, [2, 1])], 700, seed=4)
    rows = ref.epoch(1)
    got = list(zip(np.load(m.path("epoch-0001", "all", "_source.npy")).tolist(),
                   np.load(m.path("epoch-0001", "all", "_record.npy")).tolist()))
    assert got == rows
    for name in ("dropoff_census_tract", "pickup_census_tract"):
        vals = np.load(m.path("epoch-0001", "all", name + ".npy"))
        lens = np.load(m.path("epoch-0001", "all", name + ".lengths.npy"))
        for i, (s, r) in enumerate(rows):
            kind, want = decs[s][r]["features"].get(name, ("none", []))
            assert lens[i] == len(want), (name, s, r)
            assert vals[i][:len(want)].tolist() == [float(np.float32(v)) for v in want]
    assert (np.load(m.path("epoch-0001", "all", "pickup_census_tract.lengths.npy")) == 1).sum() \
        == sum(1 for s, r in rows if (s, r) == (0, 7))


def test_tfx_feature_empty_in_every_record(mounter, batchfs, tmp_path, index_dir):
    """A feature TFX wrote empty in every record (the taxi data's
    pickup_census_tract) has no kind to serve it with: README.txt and
    schema.json say so, and asking for it with features= is one line."""
    a = os.path.join(REAL, "tfx-taxi-external-00001-of-00002.tfrecord.gz")
    if not os.path.exists(a):
        pytest.skip("no real test data at %s" % REAL)
    m = mounter(a, batch_size=64)
    assert m.json("schema.json")["untyped_features"] == ["pickup_census_tract"]
    assert "Feature {}`, so their kind is unknown): pickup_census_tract\n" in \
        m.read("README.txt").decode()
    m.stop()
    expect_mount_failure(batchfs, a, tmp_path / "mnt", "index_dir=%s,features=fare,"
                         "pickup_census_tract" % index_dir,
                         "no record has a value for feature 'pickup_census_tract'")


BAD = [
    ({"mixture": [{"name": "a", "source": "A", "weight": 1}], "epochs": 3},
     "unknown key 'epochs'"),
    ({"mixture": [{"name": "a", "source": "A", "weight": 1, "wieght": 2}],
      }, "entry 0 ('a'): unknown key 'wieght'"),
    ({"mixture": [{"name": "a", "source": "A", "weight": 0}]}, "entry 0 ('a'): weight must be"),
    ({"mixture": [{"name": "a", "source": "A", "weight": -2}]}, "entry 0 ('a'): weight must be"),
    ({"mixture": [{"name": "a", "source": "A", "weight": 1e-12}]}, "entry 0 ('a'): weight"),
    ({"mixture": [{"name": "a", "source": "A", "weight": 1},
                  {"name": "a", "source": "B", "weight": 1}]}, "entry 1 ('a'): the name is"),
    ({"mixture": [{"name": "a", "source": "A", "weight": 1},
                  {"name": "b", "source": "/nonexistent/x", "weight": 1}]},
     "mixture entry 'b'"),
    ({"mixture": [{"name": "a", "source": "A", "weight": 1, "options": "batch_size=3"}]},
     "mixture entry 'a': option 'batch_size=3'"),
    ({"mixture": [{"name": "a", "source": "A", "weight": 1}], "epoch": "forever"}, "\"epoch\""),
    ({"mixture": [{"name": "a", "source": "A"}],
      "schedule": [{"from_record": 5, "weights": [1]}]}, "schedule entry 0"),
    ({"mixture": [{"name": "a", "source": "A", "weight": 1}, {"name": "b", "source": "A",
                                                                "weight": 1}],
      "schedule": [{"from_record": 0, "weights": [1, 2]}]}, "entry 1 ('b'): weight 1 differs"),
]


@pytest.mark.parametrize("doc,needle", BAD)
def test_bad_mixture_files(batchfs, sources, tmp_path, index_dir, doc, needle):
    for e in doc["mixture"]:
        if e["source"] == "A":
            e["source"] = sources[0].path
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    expect_mount_failure(batchfs, p, tmp_path / "mnt", "index_dir=%s" % index_dir, needle)


# Mixture files as people get them wrong: each fails with one line naming
# the file and, for a JSON error, its line and column (never "not a
# TFRecord file", never "no features to serve").
GOOD = '{"mixture": [\n  {"name": "a", "source": "A", "weight": 1},\n  {"name": "b", "source": "A", ' \
       '"weight": 2}\n]}\n'
BAD_JSON = [
    ("missing-comma", GOOD.replace('"weight": 1},', '"weight": 1}'), "line 3, column 3"),
    ("trailing-comma", GOOD.replace('"weight": 2}', '"weight": 2},'), "line 4, column 1"),
    ("cut", GOOD[:70], "line 3, column"),
    ("nan", json.dumps({"mixture": [{"name": "a", "source": "A", "weight": float("nan")}]}),
     "line 1, column"),
    ("array", json.dumps([{"name": "a", "source": "A", "weight": 1}]), "not a JSON object"),
    ("no-mixture-key", json.dumps({"sources": [{"name": "a", "source": "A", "weight": 1}]}),
     'no "mixture" key'),
    ("empty", "", "the file is empty"),
]


@pytest.mark.parametrize("name,text,needle", BAD_JSON, ids=[b[0] for b in BAD_JSON])
@pytest.mark.parametrize("suffix", [".json", ""])
def test_a_mixture_file_with_a_json_error_says_where(batchfs, sources, tmp_path, index_dir, name,
                                                     text, needle, suffix):
    if suffix == "" and not text.lstrip().startswith("{"):
        pytest.skip("only a .json name says a file is JSON when it does not start with {")
    p = tmp_path / ("mix" + suffix)
    p.write_text(text.replace('"A"', json.dumps(sources[0].path)))
    expect_mount_failure(batchfs, p, tmp_path / "mnt", "index_dir=%s" % index_dir,
                         "%s: mixture: " % p)
    expect_mount_failure(batchfs, p, tmp_path / "mnt", "index_dir=%s" % index_dir, needle)


def test_two_buckets_are_refused_before_any_is_opened(batchfs, tmp_path, index_dir):
    """The one-bucket rule needs only the file: it is told at once, not
    after the retries of an endpoint that does not answer."""
    import time
    p = write_mix(tmp_path / "two.json",
                  [{"name": "a", "source": "s3://bucket-a/x/", "weight": 1},
                   {"name": "local", "source": "/nonexistent", "weight": 1},
                   {"name": "b", "source": "gs://bucket-b/y/", "weight": 1}])
    t0 = time.monotonic()
    expect_mount_failure(batchfs, p, tmp_path / "mnt",
                         "index_dir=%s,no_sign_request,endpoint=http://127.0.0.1:1" % index_dir,
                         "mixture entries 'a' and 'b' are both buckets")
    assert time.monotonic() - t0 < 3


def test_a_shard_that_starts_like_json_is_a_shard(mounter, tmp_path):
    """A record of 123 bytes starts 7b 00 ...: '{'. Such a shard, even named
    .json, is read as a shard."""
    import imgdata
    recs = []
    for i in range(12):
        pad = 0
        while len(imgdata.example({"x": b"v" * pad, "i": i})) < 123:
            pad += 1
        recs.append({"x": b"v" * pad, "i": i})
    assert len(imgdata.example(recs[0])) == 123
    named = tmp_path / "shard.json"
    imgdata.write_records(named, recs)
    assert open(named, "rb").read(1) == b"{"
    m = mounter(str(named), batch_size=4, shuffle="none")
    assert m.json("schema.json")["records"] == 12
    assert np.load(m.path("epoch-0000", "batch-000000", "i.npy")).tolist() == [0, 1, 2, 3]


def test_mismatched_features_and_tiny_weights(batchfs, mounter, gen, work, sources, tmp_path,
                                             index_dir):
    other = make_dataset(gen, work / "mix-other", 10, ["x:float:3", "y:int64:1"], seed=34)
    p = write_mix(tmp_path / "m1.json", [{"name": "a", "source": sources[0].path, "weight": 1},
                                         {"name": "odd", "source": other.path, "weight": 1}])
    expect_mount_failure(batchfs, p, tmp_path / "mnt1", "index_dir=%s" % index_dir,
                         "lacks feature")
    # features= picks what they share, and then they agree but for x's shape
    expect_mount_failure(batchfs, p, tmp_path / "mnt2", "index_dir=%s,features=x,y" % index_dir,
                         "feature 'x'")
    # 0.001 : 0.999 with a tiny heavy source: exact, and first_exhausted short
    p = write_mix(tmp_path / "m2.json", [{"name": "big", "source": sources[0].path, "weight": 0.001},
                                         {"name": "tiny", "source": sources[2].path,
                                          "weight": 0.999}])
    m = mounter(p, batch_size=4)
    ref = Mixture(["big", "tiny"], [sources[0].n, sources[2].n], [(0, [0.001, 0.999])])
    s = np.load(m.path("epoch-0000", "all", "_source.npy"))
    r = np.load(m.path("epoch-0000", "all", "_record.npy"))
    assert len(s) == ref.L and list(zip(s.tolist(), r.tolist())) == ref.epoch(0)


def test_the_doc_is_the_order(mounter, sources, tmp_path):
    """docs/shuffle.md section 8's Python, run as printed, gives the mount's
    order (a schedule, each rule's L, shuffle on and off)."""
    import re
    with open(os.path.join(oracle.repo_root(), "docs", "shuffle.md")) as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)
    ns = {}
    exec(compile("\n".join(blocks), "docs/shuffle.md", "exec"), ns)  # noqa: S102
    names = ["web", "books", "code"]
    sched = [(0, [7, 2, 1]), (23, [0.25, 0.25, 1.5])]
    src = write_mix(tmp_path / "mix.json",
                    [{"name": n, "source": s.path} for n, s in zip(names, sources)],
                    schedule=[{"from_record": a, "weights": w} for a, w in sched],
                    epoch="all_exhausted")
    for shuffle in ("global", "none"):
        m = mounter(src, batch_size=B, seed=77, shuffle=shuffle)
        for e in (0, 2):
            want = ns["mixture_order"](names, [s.n for s in sources], sched, 77, e,
                                       rule="all_exhausted", shuffle=shuffle == "global")
            got = list(zip(np.load(m.path("epoch-%04d" % e, "all", "_source.npy")).tolist(),
                           np.load(m.path("epoch-%04d" % e, "all", "_record.npy")).tolist()))
            assert got == want


def test_weights_as_people_write_them(mounter, sources, tmp_path):
    """1/3 : 2/3 as json.dump writes them, and weights proportional to the
    sources' sizes, have periods far over the limit: they mount at the
    simplest ratio within 10^-6 (docs/shuffle.md 8.1), the order the
    reference's and the doc's, the ratio said in README.txt and
    schema.json; weights whose period fits are drawn as given."""
    import re
    with open(os.path.join(oracle.repo_root(), "docs", "shuffle.md")) as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)
    ns = {}
    exec(compile("\n".join(blocks), "docs/shuffle.md", "exec"), ns)  # noqa: S102
    names = ["web", "books", "code"]
    sizes = [s.n for s in sources]
    cases = [([1 / 3, 2 / 3, 0.5], [2, 4, 3], True),
             ([n / sum(sizes) for n in sizes], None, True),
             ([0.7, 0.2, 0.1], [7, 2, 1], False)]
    for weights, ratio, approx in cases:
        src = write_mix(tmp_path / "mix.json", entries(sources, weights))
        m = mounter(src, batch_size=B, seed=11)
        facts = m.json("schema.json")["mixture"]["schedule"][0]
        assert facts["weights"] == weights and facts["approximated"] is approx
        if ratio:
            assert facts["ratio"] == ratio and facts["period"] == sum(ratio)
        for s, w in enumerate(weights):  # every share within 10^-6 of the weight's
            assert abs(facts["ratio"][s] / facts["period"] - w / sum(weights)) <= 1e-6 + 1e-12
        readme = m.read("README.txt").decode()
        line = "The weights as drawn: %s, every %d records" % (
            " : ".join(map(str, facts["ratio"])), facts["period"])
        assert line in readme, readme
        assert ("nearest ratio whose period fits" in readme) is approx
        ref = Mixture(names, sizes, [(0, weights)], seed=11)
        for e in (0, 2):
            got = list(zip(np.load(m.path("epoch-%04d" % e, "all", "_source.npy")).tolist(),
                           np.load(m.path("epoch-%04d" % e, "all", "_record.npy")).tolist()))
            assert got == ref.epoch(e)
            assert got == ns["mixture_order"](names, sizes, [(0, weights)], 11, e)
        m.stop()


def test_what_an_epoch_holds_is_said_everywhere(batchfs, sources, tmp_path, index_dir):
    """A mixture's epoch is L records of its stream: README.txt, the ready
    line, stats.json, `batchfs stats` and schema.json say L per epoch and
    the sources' total beside it; features= reads as written. A
    background mount, as a user makes it."""
    import re
    import subprocess
    from fusemount import unmount
    src = write_mix(tmp_path / "mix.json", entries(sources, [7, 2, 1]))
    ref = Mixture(["web", "books", "code"], [s.n for s in sources], [(0, [7, 2, 1])])
    total = sum(s.n for s in sources)
    assert ref.L != total
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    opts = "batch_size=%d,index_dir=%s,features=x,y" % (B, index_dir)
    nb = -(-ref.L // B)
    # the ready line, in the foreground
    p = subprocess.Popen([batchfs, "-f", src, str(mnt), "-o", opts], stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stderr.readline()
    finally:
        unmount(str(mnt))
        p.wait(timeout=10)
    assert "(%d records per epoch of the sources' %d, %d batches per epoch)" % (
        ref.L, total, nb) in line, line
    r = subprocess.run([batchfs, src, str(mnt), "-o", opts], capture_output=True, text=True,
                       timeout=60)
    try:
        assert r.returncode == 0, r.stderr
        readme = (mnt / "README.txt").read_text()
        assert "\nrecords:  %d per epoch (the sources hold %d), %d batches per epoch" % (
            ref.L, total, nb) in readme, readme
        assert ",features=x,y" in readme and "\\" not in readme.split("\n")[3], readme
        st = json.loads((mnt / "stats.json").read_text())
        assert st["records"] == ref.L and st["source_records"] == total, st
        sj = json.loads((mnt / "schema.json").read_text())
        assert sj["records"] == ref.L and sj["source_records"] == total
        assert sj["batches_per_epoch"] == nb
        out = subprocess.run([batchfs, "stats", str(mnt)], capture_output=True, text=True).stdout
        assert re.search(r"^records +%s per epoch \(the sources hold %s\), %d batches per epoch$"
                         % (format(ref.L, ","), format(total, ","), nb), out, re.M), out
        assert "records in the sources" not in out  # shown on the records line, not again
    finally:
        unmount(str(mnt))


def test_io_stage_with_repeats(mounter, sources, tmp_path):
    """Through the I/O stage (io_depth=, as for a slow source): a source of
    9 records at half the weight repeats inside batches of 32 and all/'s
    chunks; the bytes stay the reference's."""
    src = write_mix(tmp_path / "mix.json", entries(sources, [1, 1, 2]), epoch=120)
    m = mounter(src, batch_size=32, seed=2, io_depth=8, chunk_rows=40)
    ref = Mixture(["web", "books", "code"], [s.n for s in sources], [(0, [1, 1, 2])], 120, seed=2)
    rows = ref.epoch(0)
    assert len(set(rows[:32])) < 32  # a repeat within the first batch
    decoded, first = union(sources)
    check_mixture_epoch(m, ref, decoded, first, 0, B=32)
    check_mixture_epoch(m, ref, decoded, first, 5, batches=[2], B=32)


def test_index_and_schema_tools(batchfs, mounter, sources, tmp_path):
    """`batchfs index MIXFILE` indexes every source (a mount then reuses it
    all); `batchfs schema MIXFILE` prints the merged schema the mount serves."""
    import subprocess
    src = write_mix(tmp_path / "mix.json", entries(sources, [7, 2, 1]))
    ix = str(tmp_path / "ix")
    r = subprocess.run([batchfs, "index", "--index-dir", ix, src], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("%d records in 4 shards" % sum(s.n for s in sources))
    r = subprocess.run([batchfs, "schema", "--index-dir", ix, src], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = mounter(src, batch_size=B, index_dir=ix)
    assert m.json("stats.json")["index_reused"]
    assert json.loads(r.stdout)["features"] == schema_without_provenance(m)["features"]


def test_corrupt_record_skipped(gen, mounter, sources, tmp_path):
    """on_corrupt=skip in a mixture: the row of a record with a bad CRC is
    filled from the next valid record of the union numbering, its
    _source/_record still name the record replaced, errors.txt says so."""
    from helpers import corrupt_data_crc
    bad = make_dataset(gen, tmp_path / "bad", 20, ["x:float:4", "y:int64:1"], seed=40)
    shard = oracle.list_shards(bad.path)[0]
    corrupt_data_crc(shard, 5)
    src = write_mix(tmp_path / "mix.json",
                    [{"name": "bad", "source": bad.path, "weight": 1},
                     {"name": "books", "source": sources[1].path, "weight": 1}])
    m = mounter(src, batch_size=B, on_corrupt="skip", features="x,y")
    s = np.load(m.path("epoch-0000", "all", "_source.npy")).tolist()
    r = np.load(m.path("epoch-0000", "all", "_record.npy")).tolist()
    y = np.load(m.path("epoch-0000", "all", "y.npy")).tolist()
    # every record of the bad source once (its pass), record 5 among them
    assert sorted(b for a, b in zip(s, r) if a == 0) == list(range(20))
    row = list(zip(s, r)).index((0, 5))
    assert y[row] == int(bad.decoded[6]["features"]["y"][1][0])
    errors = open(m.path("errors.txt")).read()
    assert "record 5" in errors and "(skipped)" in errors
