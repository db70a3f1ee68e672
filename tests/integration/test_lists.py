# SPDX-License-Identifier: Apache-2.0
"""Bytes in feature lists keep their lengths (docs/contract.md, "Bytes").

A bytes feature list NAME is served as feature_lists/NAME.npy, uint8
[B, max_steps, max_bytes] (or [B, max_steps, max_values, max_bytes]), each
value zero-padded: a value that ends in zero bytes could not be told from
its padding. feature_lists/NAME.value_lengths.npy, int32 [B, max_steps]
(or [B, max_steps, max_values]), gives each value's length (0 where there
is none), in the .npy tree, the .safetensors files and all/. The oracle
computes it on its own; the values are also rebuilt from the two tensors
and compared with the records."""

import json
import os
import sys

import numpy as np
import pytest

import oracle
from imgdata import frame
from helpers import check_batch_dir, check_safetensors

REAL = "tfx-seqex-eval.tfrecord.gz"


def _real(name):
    p = os.path.join(oracle.testdata_dir(), name)
    if not os.path.exists(p):
        pytest.skip("%s is missing" % p)
    return p


def _values(rec, name):
    """The values of each step of feature list `name`: [[bytes, ...], ...]."""
    steps = (rec["feature_lists"] or {}).get(name) or []
    return [list(vals) if kind == "bytes" else [] for kind, vals in steps]


def _check_epoch(m, decoded, B, seed, shuffle="global"):
    eff = m.json("schema.json")
    eff = {"features": eff.get("features", {}), "feature_lists": eff.get("feature_lists") or {}}
    n = len(decoded)
    batches = []
    for b in range(oracle.batches_per_epoch(n, B)):
        exp = oracle.expected_batch(decoded, eff, oracle.batch_records(n, B, b, seed, 0, shuffle))
        bdir = m.path("epoch-0000", "batch-%06d" % b)
        check_batch_dir(bdir, exp)  # stat sizes and bytes, value_lengths included
        check_safetensors(bdir + ".safetensors", exp)
        batches.append(exp)
    whole = oracle.concat_batches(eff, batches)
    check_batch_dir(m.path("epoch-0000", "all"), whole)
    check_safetensors(m.path("epoch-0000", "all.safetensors"), whole)
    return eff


def _rebuild(x, n, i, t):
    """The values of record i, step t from the served tensors."""
    if n.ndim == 2:
        return [bytes(x[i, t, :n[i, t]])]
    return [bytes(x[i, t, k, :n[i, t, k]]) for k in range(n.shape[2])]


def test_real_seqex_bytes_list_has_value_lengths(mounter):
    path = _real(REAL)
    decoded = [oracle.decode(r) for r in oracle.read_records(path)]
    B, seed = 500, 1
    m = mounter(path, batch_size=B, seed=seed)
    eff = _check_epoch(m, decoded, B, seed)
    assert eff["feature_lists"]["s"]["shape"] == [5]
    d = m.path("epoch-0000", "all", "feature_lists")
    x, n = np.load(os.path.join(d, "s.npy")), np.load(os.path.join(d, "s.value_lengths.npy"))
    steps = np.load(os.path.join(d, "s.lengths.npy"))
    assert n.dtype == np.int32 and n.shape == (len(decoded), 2)
    for i, rec in enumerate(oracle.epoch_records(len(decoded), B, seed)):
        want = _values(decoded[rec], "s")
        assert steps[i] == len(want)
        assert [_rebuild(x, n, i, t) for t in range(len(want))] == want, i
    readme = m.read("README.txt").decode()
    assert "feature_lists/s.value_lengths.npy: int32 [B, 2]" in readme, readme
    # the Python module's loaders: a feature list brings its value lengths
    sys.path.insert(0, os.path.join(oracle.repo_root(), "python"))
    from batchfs.numpy import load_batch
    got = load_batch(m.path("epoch-0000", "batch-000000.safetensors"), features=["feature_lists/s"])
    assert sorted(got) == ["feature_lists/s", "feature_lists/s.lengths",
                           "feature_lists/s.value_lengths"]


def _seqex(lists):
    """A serialized tf.train.SequenceExample with bytes feature lists
    {name: [[bytes, ...] per step]} and a context int64 'id'."""
    msg = oracle.message_class("SequenceExample")()
    for name, steps in lists.items():
        fl = msg.feature_lists.feature_list[name]
        for vals in steps:
            f = fl.feature.add()
            f.bytes_list.SetInParent()
            f.bytes_list.value.extend(vals)
    return msg.SerializeToString()


def test_values_ending_in_zero_bytes_are_read_whole(mounter, tmp_path):
    """'ab\\0' and 'ab', '\\0\\0' and '', one value per step and several:
    the same padded bytes, told apart by value_lengths."""
    one = [[[b"ab\x00"], [b"ab"]], [[b"\x00\x00"], [b""], [b"xyz"]], [[b"\x00"]],
           [], [[b"a\x00b"], [b"\x00a"]]]
    many = [[[b"p\x00", b""], [b"q"]], [[]], [[b"\x00", b"\x00\x00\x00"], [b"r", b"s\x00"]],
            [[b"", b""]], [[b"tt"]]]
    src = tmp_path / "nul"
    src.mkdir()
    with open(str(src / "s.tfrecord"), "wb") as f:
        for i in range(len(one)):
            lists = {"m": many[i]}
            if one[i]:
                lists["one"] = one[i]
            f.write(frame(_seqex(lists)))
    decoded = [oracle.decode(r) for r in oracle.read_records(str(src / "s.tfrecord"))]
    schema = tmp_path / "nul.schema.json"
    schema.write_text(json.dumps({"feature_lists": {
        "one": {"kind": "bytes", "shape": [3], "max_steps": 3},
        "m": {"kind": "bytes", "shape": [2, 3], "max_steps": 2},
    }}))
    m = mounter(str(src), batch_size=2, shuffle="none", schema=str(schema))
    _check_epoch(m, decoded, 2, 0, "none")
    d = m.path("epoch-0000", "all", "feature_lists")
    for name, recs in (("one", one), ("m", many)):
        x = np.load(os.path.join(d, name + ".npy"))
        n = np.load(os.path.join(d, name + ".value_lengths.npy"))
        assert n.shape == x.shape[:-1]
        for i, steps in enumerate(recs):
            for t, vals in enumerate(steps):
                got = _rebuild(x, n, i, t)
                # absent values of a step read as length 0, as an empty one
                assert got[:len(vals)] == vals and all(g == b"" for g in got[len(vals):]), \
                    (name, i, t, got)
