# SPDX-License-Identifier: Apache-2.0
"""`batchfs inspect --json` on every shared real TFRecord file, compared with
the oracle record by record, value by value."""

import json
import os
import subprocess

import numpy as np
import pytest

import oracle

DATA = oracle.testdata_dir()


def _files():
    if not os.path.isdir(DATA):
        return []
    return [f for f in sorted(os.listdir(DATA))
            if not f.startswith(".") and not f.endswith(".md")
            and os.path.isfile(os.path.join(DATA, f))]


@pytest.fixture(scope="module")
def batchfs():
    why = oracle.batchfs_unusable()
    if why:
        pytest.skip(why)
    return oracle.batchfs_path()


def _float_bits(v):
    if isinstance(v, str):
        assert v in ("nan", "inf", "-inf"), v
        return None if v == "nan" else oracle.float32_bits(float(v))
    assert isinstance(v, (int, float)) and not isinstance(v, bool), v
    return oracle.float32_bits(float(np.float32(v)))


def _check_feature(where, got, kind, values):
    assert isinstance(got, dict), where
    assert got.get("kind") == kind, "%s: kind %r, oracle %r" % (where, got.get("kind"), kind)
    gv = got.get("values")
    assert isinstance(gv, list), where
    assert len(gv) == len(values), "%s: %d values, oracle %d" % (where, len(gv), len(values))
    if kind == "int64":
        for i, (a, b) in enumerate(zip(gv, values)):
            assert isinstance(a, int) and not isinstance(a, bool) and a == int(b), \
                "%s[%d]: %r != %r" % (where, i, a, int(b))
    elif kind == "float":
        for i, (a, b) in enumerate(zip(gv, values)):
            want = oracle.float32_bits(float(b))
            if oracle.is_nan32(want):
                assert a == "nan", "%s[%d]: %r, oracle nan" % (where, i, a)
                continue
            got_bits = _float_bits(a)
            assert got_bits == want, "%s[%d]: %r != %r (float32 bits %s vs %08x)" % (
                where, i, a, float(b), got_bits if got_bits is None else "%08x" % got_bits, want)
    elif kind == "bytes":
        for i, (a, b) in enumerate(zip(gv, values)):
            assert isinstance(a, str) and a == a.lower(), "%s[%d]: %r" % (where, i, a)
            assert bytes.fromhex(a) == b, "%s[%d]: %r != %r" % (where, i, a, b.hex())
    else:
        assert kind == "none" and gv == []


def _loads(text):
    # "-0" (a float -0.0 printed with %.9g) must keep its sign
    return json.loads(text, parse_int=lambda t: -0.0 if t == "-0" else int(t))


@pytest.mark.parametrize("name", _files() or ["<no shared test data>"])
def test_inspect_matches_oracle(batchfs, name):
    path = os.path.join(DATA, name)
    if not os.path.isfile(path):
        pytest.skip("no shared test data at %s" % DATA)
    r = subprocess.run([batchfs, "inspect", "--json", "--records", "1000000000", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    doc = _loads(r.stdout)
    assert isinstance(doc.get("files"), list) and len(doc["files"]) == 1, doc.keys()
    f = doc["files"][0]
    assert os.path.basename(f["path"]) == name

    raw = open(path, "rb").read()
    comp = oracle.detect_compression(raw)
    recs = oracle.read_records(path)
    assert f["compression"] == comp
    assert f["records"] == len(recs)
    ex = f["examples"]
    assert len(ex) == len(recs)

    for i, (rec, got) in enumerate(zip(recs, ex)):
        d = oracle.decode(rec)
        where = "%s record %d" % (name, i)
        assert set(got["features"]) == set(d["features"]), where
        for k, (kind, vals) in d["features"].items():
            _check_feature("%s feature %r" % (where, k), got["features"][k], kind, vals)
        if d["feature_lists"] is None:
            assert "feature_lists" not in got, where
        else:
            gl = got.get("feature_lists")
            assert isinstance(gl, dict) and set(gl) == set(d["feature_lists"]), where
            for k, steps in d["feature_lists"].items():
                assert len(gl[k]) == len(steps), "%s list %r steps" % (where, k)
                for s, (kind, vals) in enumerate(steps):
                    _check_feature("%s list %r step %d" % (where, k, s), gl[k][s], kind, vals)


def test_inspect_records_limit(batchfs):
    path = os.path.join(DATA, "tfx-mnist-1000.tfrecord")
    if not os.path.isfile(path):
        pytest.skip("no tfx-mnist-1000.tfrecord in %s" % DATA)
    r = subprocess.run([batchfs, "inspect", "--json", "--records", "3", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    f = _loads(r.stdout)["files"][0]
    assert f["records"] == 1000 and len(f["examples"]) == 3


def test_inspect_several_paths(batchfs):
    names = ["ydf-toy-00000-of-00002.tfrecord.gz", "ydf-toy-00001-of-00002.tfrecord.gz"]
    paths = [os.path.join(DATA, n) for n in names]
    if not all(os.path.isfile(p) for p in paths):
        pytest.skip("ydf-toy shards missing in %s" % DATA)
    r = subprocess.run([batchfs, "inspect", "--json"] + paths,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    files = _loads(r.stdout)["files"]
    assert [os.path.basename(f["path"]) for f in files] == names
    assert [f["records"] for f in files] == [3, 1]
    assert all(f["compression"] == "gzip" for f in files)
