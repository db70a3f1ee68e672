# SPDX-License-Identifier: Apache-2.0
"""Integration tests of many ranks in one mount (docs/contract.md, "Many
ranks, one mount"): `world=W` without `rank` shows rank-0000/ ... rank-(W-1)/ at the
top, each holding exactly what a `rank=R,world=W` mount shows. Every file
of every rank folder is compared byte for byte with its own rank=R mount,
and the ranks' batches together with the single-node sequence minus the cut
tail. Fixtures are conftest.py's."""

import os

import pytest

import oracle
from helpers import check_epoch, fact, walk_files


def tree(d):
    """path -> bytes of every file under d."""
    out = {}
    for f in walk_files(d):
        with open(os.path.join(d, f), "rb") as fh:
            out[f] = fh.read()
    return out


@pytest.mark.parametrize("W,B,extra", [
    (4, 10, {}),
    (8, 7, {"drop_remainder": True}),
    (4, 9, {"shuffle": "block", "block_size": "1K", "window": 3}),
])
def test_rank_folders_equal_rank_mounts(mounter, ds_plain, W, B, extra):
    kw = dict(batch_size=B, seed=3, epochs=2, **extra)
    m = mounter(ds_plain.path, world=W, **kw)
    top = sorted(os.listdir(m.path()))
    assert top == sorted(["README.txt", "schema.json", "stats.json", "errors.txt"] +
                         ["rank-%04d" % r for r in range(W)])
    assert not os.path.exists(m.path("epoch-0000"))
    assert not os.path.exists(m.path("rank-%04d" % W))
    assert "rank-0000" in m.read("README.txt").decode()
    drop = bool(extra.get("drop_remainder"))
    nloc = oracle.local_batches(ds_plain.n, B, drop, W)
    single = mounter(ds_plain.path, **kw)
    for r in range(W):
        mr = mounter(ds_plain.path, rank=r, world=W, **kw)
        assert sorted(os.listdir(m.path("rank-%04d" % r))) == ["epoch-0000", "epoch-0001"]
        for e in (0, 1):
            got = tree(m.path("rank-%04d" % r, "epoch-%04d" % e))
            want = tree(mr.path("epoch-%04d" % e))
            assert sorted(got) == sorted(want), (r, e)
            for f in want:
                assert got[f] == want[f], (r, e, f)
        # an epoch not listed, by name
        assert m.read("rank-%04d" % r, "epoch-0009", "batch-%06d.safetensors" % (nloc - 1)) == \
            mr.read("epoch-0009", "batch-%06d.safetensors" % (nloc - 1))
        mr.stop()
        # with the single-node sequence: local batch i of rank r is batch i*W + r
        for i in range(nloc):
            assert m.read("rank-%04d" % r, "epoch-0000", "batch-%06d.safetensors" % i) == \
                single.read("epoch-0000", "batch-%06d.safetensors" % (i * W + r)), (r, i)
    # and against the oracle (global shuffle)
    if not extra.get("shuffle"):
        class View:
            def __init__(self, root):
                self.root = root

            def path(self, *p):
                return os.path.join(self.root, *p)
        check_epoch(View(m.path("rank-0003")), ds_plain, B=B, seed=3, rank=3, world=W,
                    drop=drop, batches=[0, nloc - 1],
                    schema={"features": m.json("schema.json")["features"],
                            "feature_lists": m.json("schema.json").get("feature_lists") or {}})


def test_rank_folders_inodes_and_parents(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=50, world=4)
    inos = set()
    for r in range(4):
        for root, dirs, files in os.walk(m.path("rank-%04d" % r)):
            for x in dirs + files:
                st = os.stat(os.path.join(root, x))
                assert st.st_ino not in inos
                inos.add(st.st_ino)
    # ".." of an epoch folder is its rank folder
    assert os.path.samefile(m.path("rank-0002", "epoch-0000", ".."), m.path("rank-0002"))
    assert os.stat(m.path("rank-0001")).st_ino != os.stat(m.path("rank-0002")).st_ino


def test_world_without_rank_options(mounter, ds_plain):
    # world=1 without rank: one rank folder; rank given: no folders
    m = mounter(ds_plain.path, batch_size=50, world=1)
    assert "rank-0000" in os.listdir(m.path()) and "epoch-0000" not in os.listdir(m.path())
    m2 = mounter(ds_plain.path, batch_size=50, rank=0, world=2)
    assert "epoch-0000" in os.listdir(m2.path())
    assert fact(m2.json("schema.json"), "world") == 2


def test_batchdataset_over_a_rank_folder(mounter, ds_plain):
    """README's torchrun snippet: BatchDataset(MNT/rank-RRRR) reads that rank."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import numpy as np
    from batchfs.torch import BatchDataset
    m = mounter(ds_plain.path, batch_size=20, world=4, seed=1)
    ds = BatchDataset(m.path("rank-0002"), epoch=0)
    assert len(ds) == oracle.local_batches(ds_plain.n, 20, False, 4)
    item = ds[1]
    x = np.load(m.path("rank-0002", "epoch-0000", "batch-000001", "x.npy"))
    assert np.array_equal(item["x"].numpy(), x)
    assert not np.array_equal(x, np.load(m.path("rank-0001", "epoch-0000", "batch-000001",
                                                 "x.npy")))


def test_top_schema_json_claims_no_rank(mounter, ds_plain):
    """With rank folders the mount serves every rank: its one schema.json
    (at the top) says the world and claims no rank; batches_per_epoch is
    each rank's (every rank shows the same number)."""
    W, B = 4, 10
    s = mounter(ds_plain.path, batch_size=B, world=W).json("schema.json")
    assert "rank" not in s and "rank" not in s.get("facts", {}), s
    assert fact(s, "world") == W
    assert fact(s, "batches_per_epoch") == oracle.local_batches(ds_plain.n, B, False, W)
    # a single-rank mount still says which rank it is
    s1 = mounter(ds_plain.path, batch_size=B, rank=1, world=W).json("schema.json")
    assert fact(s1, "rank") == 1 and fact(s1, "world") == W
