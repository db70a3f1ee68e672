# SPDX-License-Identifier: Apache-2.0
"""Integration tests of `shuffle=block` (docs/shuffle.md, section 5) over
real FUSE mounts.

The order of every epoch is computed independently by the oracle
(oracle.block_perm: the cut and groups of docs/shuffle.md, the whole epoch
materialised), checked there to be a permutation for many parameters, and
the mount's batch files and all/ are compared with the oracle's bytes for
that order. Fixtures are conftest.py's."""

import os
import sys

import numpy as np
import pytest

import oracle
from helpers import Dataset, check_batch_dir, check_safetensors, effective, fact


def order_of(ds, block_size, window, seed, epoch):
    if not hasattr(ds, "lengths"):
        ds.lengths = oracle.dataset_lengths(ds.path)
    lens, per = ds.lengths
    return oracle.block_perm(lens, per, block_size, window, seed, epoch)


def check_block_epoch(m, ds, B, block_size, window, seed=0, epoch=0, drop=False, rank=0, world=1,
                      batches=None):
    schema = effective(m)
    order = order_of(ds, block_size, window, seed, epoch)
    ep = m.path("epoch-%04d" % epoch)
    nloc = oracle.local_batches(ds.n, B, drop, world)
    names = sorted(n for n in os.listdir(ep) if n.startswith("batch-") and "." not in n)
    assert names == ["batch-%06d" % i for i in range(nloc)]
    for i in (range(nloc) if batches is None else batches):
        idx = oracle.batch_records(ds.n, B, i, seed, epoch, "block", rank, world, order)
        exp = oracle.expected_batch(ds.decoded, schema, idx)
        check_batch_dir(os.path.join(ep, "batch-%06d" % i), exp)
        check_safetensors(os.path.join(ep, "batch-%06d.safetensors" % i), exp)
    # all/: the rank's batches end to end, by the oracle over the whole epoch
    idx = oracle.epoch_records(ds.n, B, seed, epoch, "block", drop, rank, world, order)
    exp = oracle.expected_batch(ds.decoded, schema, idx)
    for name, arr in exp.items():
        with open(os.path.join(ep, "all", name + ".npy"), "rb") as f:
            assert f.read() == oracle.npy_bytes(arr), (ep, name)
    return order


# ------------------------------------------------- the oracle's own order


@pytest.mark.parametrize("n", [0, 1, 2, 7, 300])
def test_oracle_block_perm_is_a_permutation(n):
    rng = np.random.default_rng(n)
    lens = [int(x) for x in rng.integers(0, 400, n)]
    cuts = sorted(int(x) for x in rng.integers(0, n + 1, 2))
    per = [cuts[0], cuts[1] - cuts[0], n - cuts[1]]
    for block_size in (1, 100, 1000, 1 << 30):
        for window in (1, 2, 64):
            for seed, epoch in ((0, 0), (5, 3)):
                p = oracle.block_perm(lens, per, block_size, window, seed, epoch)
                assert sorted(p.tolist()) == list(range(n))
    if n >= 300:
        a = oracle.block_perm(lens, per, 1000, 4, 0, 0)
        assert (a != oracle.block_perm(lens, per, 1000, 4, 0, 1)).mean() > 0.9
        assert (a != oracle.block_perm(lens, per, 1000, 4, 1, 0)).mean() > 0.9
        assert (a == oracle.block_perm(lens, per, 1000, 4, 0, 0)).all()


# ------------------------------------------------------------- the mount


@pytest.mark.parametrize("block_size,window,B,seed", [
    ("600", 3, 32, 0),  # a few records a block; records over 600 bytes alone
    ("1", 1, 10, 7),  # every record its own block: global-like over blocks
    ("4M", 64, 32, 2),  # the defaults: one block per shard, one group
    ("2K", 2, 17, 11),
])
def test_block_bytes_equal_the_oracle(mounter, ds_plain, block_size, window, B, seed):
    m = mounter(ds_plain.path, batch_size=B, seed=seed, shuffle="block", block_size=block_size,
                window=window, epochs=2)
    s = m.json("schema.json")
    assert fact(s, "shuffle") == "block"
    bs = {"600": 600, "1": 1, "4M": 4 << 20, "2K": 2048}[block_size]
    o0 = check_block_epoch(m, ds_plain, B, bs, window, seed, 0)
    o1 = check_block_epoch(m, ds_plain, B, bs, window, seed, 1, batches=[0, 3])
    assert sorted(o0.tolist()) == list(range(ds_plain.n))
    assert (o0 != o1).mean() > 0.5  # epochs differ
    # any epoch by name, read out of order: the same bytes as in order
    a = m.read("epoch-0007", "batch-000005.safetensors")
    m.read("epoch-0007", "batch-000000.safetensors")
    assert m.read("epoch-0007", "batch-000005.safetensors") == a
    check_block_epoch(m, ds_plain, B, bs, window, seed, 7, batches=[5, 2])


def test_block_drop_remainder_and_rank_world(mounter, ds_plain):
    B, W = 16, 3
    kw = dict(batch_size=B, seed=4, shuffle="block", block_size="1K", window=2)
    m = mounter(ds_plain.path, drop_remainder=True, **kw)
    check_block_epoch(m, ds_plain, B, 1024, 2, 4, 0, drop=True)
    single = mounter(ds_plain.path, **kw)
    for r in range(W):
        mr = mounter(ds_plain.path, rank=r, world=W, **kw)
        check_block_epoch(mr, ds_plain, B, 1024, 2, 4, 1, rank=r, world=W, batches=[0, 9])
        for i in (0, 4):
            assert mr.read("epoch-0000", "batch-%06d.safetensors" % i) == \
                single.read("epoch-0000", "batch-%06d.safetensors" % (i * W + r))


def test_block_tiny_datasets(mounter, gen, tmp_path):
    # (0 records: the unit tests; such a mount has no features to serve)
    for n in (1, 2, 5):
        src = tmp_path / ("ds%d" % n)
        oracle.generate(gen, src, n, ["x:float:2", "t:int64:0..3"], shards=1, seed=n)
        ds = Dataset(src, oracle.read_dataset(str(src)), 1)
        m = mounter(str(src), batch_size=4, shuffle="block", block_size="64", window=2)
        check_block_epoch(m, ds, 4, 64, 2, 0, 0)


def test_block_options_are_checked(batchfs, ds_plain, tmp_path):
    import subprocess
    mnt = tmp_path / "m"
    mnt.mkdir()
    for opts, word in (("shuffle=block,block_size=0", "block_size"),
                       ("shuffle=block,window=0", "window"),
                       ("shuffle=global,window=4", "window"),
                       ("block_size=1M", "block_size"),
                       ("shuffle=blocks", "shuffle")):
        r = subprocess.run([batchfs, "-f", "-o", opts, ds_plain.path, str(mnt)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, opts
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and word in lines[0], (opts, r.stderr)


# ------------------------------------------------------------- partitions


def part_order(ds, block_size, window, seed, epoch, B, P):
    if not hasattr(ds, "lengths"):
        ds.lengths = oracle.dataset_lengths(ds.path)
    lens, per = ds.lengths
    return oracle.partitioned_perm(lens, per, block_size, window, seed, epoch, B, P)


PART = dict(shuffle="block", block_size="1K", window=2, seed=6, partitions=8)


def global_batches(m, epoch, rank, world):
    """{global batch: its safetensors bytes} of one rank of a mount."""
    root = m.path("rank-%04d" % rank) if m.json("schema.json").get("rank") is None else m.path()
    ep = os.path.join(root, "epoch-%04d" % epoch)
    names = sorted(n for n in os.listdir(ep) if n.endswith(".safetensors") and "all" not in n)
    out = {}
    for i, name in enumerate(names):
        with open(os.path.join(ep, name), "rb") as f:
            out[i * world + rank] = f.read()
    return out


def test_partitions_are_world_independent_and_exact(mounter, ds_plain):
    """partitions=8: world 4 and world 8 serve the same global batches, the
    oracle's (docs/shuffle.md 5.1); every record but the cut tail once an
    epoch across the ranks, and each rank's records from its own
    partitions only."""
    B = 5
    order = part_order(ds_plain, 1024, 2, 6, 1, B, 8)
    nglobal = len(order) // B
    assert nglobal == 8 * (ds_plain.n // 8 // B)
    schema = effective(mounter(ds_plain.path, batch_size=B, **PART))
    per_world = {}
    for W in (4, 8):
        m = mounter(ds_plain.path, batch_size=B, world=W, epochs=2, **PART)
        got = {}
        for r in range(W):
            got.update(global_batches(m, 1, r, W))
        assert sorted(got) == list(range(nglobal)), W
        per_world[W] = got
    assert per_world[4] == per_world[8]
    for g in (0, 1, 7, 8, nglobal - 1):
        idx = order[g * B:(g + 1) * B].tolist()
        check_safetensors_bytes(per_world[4][g], oracle.expected_batch(ds_plain.decoded, schema,
                                                                       idx))
    # once each, the tail aside (fewer than 8 batches' worth)
    assert len(set(order.tolist())) == len(order) > ds_plain.n - 8 * B
    # rank R of world 4 reads only partitions R and R + 4
    parts = oracle.block_parts(*ds_plain.lengths, 1024, 6, 8)
    owner = {r: q for q, pc in enumerate(parts) for a, b in pc for r in range(a, b)}
    for g in range(nglobal):
        assert {owner[r] % 4 for r in order[g * B:(g + 1) * B].tolist()} == {g % 4}


def check_safetensors_bytes(raw, exp):
    got = oracle.parse_safetensors(raw)
    assert sorted(got) == sorted(exp)
    for k, v in exp.items():
        assert np.array_equal(got[k], v), k


def test_partitions_resume_at_any_batch_with_another_world(mounter, ds_plain):
    """A job of world 8 stops after global batch k and goes on with world
    4 (or 2): the global batches it reads from there are the ones world 8
    would have read, so the epoch still holds every record once."""
    B = 4
    m8 = mounter(ds_plain.path, batch_size=B, world=8, **PART)
    first = {}
    for r in range(8):
        first.update(global_batches(m8, 0, r, 8))
    for W, k in ((4, 21), (2, 36)):
        m = mounter(ds_plain.path, batch_size=B, world=W, **PART)
        # rank R resumes at its first local batch i with i * W + R >= k
        for r in range(W):
            i = max(0, -(-(k - r) // W))
            name = "batch-%06d.safetensors" % i
            assert m.read("rank-%04d" % r, "epoch-0000", name) == first[i * W + r], (W, r)
    # all/ of a rank is its batches end to end, the same for world 4 and 8
    m4 = mounter(ds_plain.path, batch_size=B, rank=1, world=4, **PART)
    order = part_order(ds_plain, 1024, 2, 6, 0, B, 8)
    idx = oracle.epoch_records(len(order), B, epoch=0, shuffle="block", rank=1, world=4,
                               order=order)
    exp = oracle.expected_batch(ds_plain.decoded, effective(m4), idx)
    for name, arr in exp.items():
        with open(m4.path("epoch-0000", "all", name + ".npy"), "rb") as f:
            assert f.read() == oracle.npy_bytes(arr), name


def test_partitions_options_and_facts(mounter, ds_plain, batchfs, tmp_path):
    import subprocess
    m = mounter(ds_plain.path, batch_size=5, **PART)
    s = m.json("schema.json")
    assert s["partitions"] == 8 and s["batches_per_epoch"] == 8 * (ds_plain.n // 8 // 5)
    assert "partitions=8" in m.read("README.txt").decode()
    # README.txt says what each rank reads: 1/W with W dividing P, else one
    # line: 1/gcd(W, P) of the dataset
    for w, line in ((4, "each rank reads 2 of the partitions, 1/4 of the"),
                    (12, "world=12 does not divide partitions=8: each rank reads 2 of the 8 "
                         "partitions, 1/4 of the dataset (3 times its share)."),
                    (3, "world=3 does not divide partitions=8: each rank reads 8 of the 8 "
                        "partitions, 1/1 of the dataset (3 times its share).")):
        text = mounter(ds_plain.path, batch_size=5, world=w, **PART).read("README.txt").decode()
        assert line in text, (w, text)
        assert sum("does not divide" in x for x in text.splitlines()) == (w != 4), (w, text)
    # auto: a small dataset is one partition, the order of before
    a = mounter(ds_plain.path, batch_size=5, shuffle="block", block_size="1K", window=2)
    assert a.json("schema.json")["partitions"] == 1
    mnt = tmp_path / "m"
    mnt.mkdir()
    for opts, word in (("shuffle=block,partitions=0", "partitions"),
                       ("shuffle=global,partitions=4", "partitions"),
                       ("shuffle=block,partitions=x", "partitions"),
                       ("shuffle=block,batch_size=100,partitions=64", "partitions=64")):
        r = subprocess.run([batchfs, "-f", "-o", opts, ds_plain.path, str(mnt)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, opts
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and word in lines[0], (opts, r.stderr)


def test_partitions_through_the_python_module_and_torch(batchfs, ds_plain, index_dir,
                                                        monkeypatch):
    """batchfs.mount(..., partitions=8, world=4): Mount's schema says P,
    Epoch lists each rank's batches, numpy.load_batch and
    torch.BatchDataset over a rank folder (a DataLoader of 2 workers, two
    epochs) give the oracle's rows of that rank's partitions."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(oracle.repo_root(), "python"))
    import batchfs as bfs
    import batchfs.numpy as bnp
    from batchfs.torch import BatchDataset
    from torch.utils.data import DataLoader
    monkeypatch.setenv("BATCHFS", batchfs)
    B, W, R = 5, 4, 3
    with bfs.mount(ds_plain.path, batch_size=B, world=W, epochs=2, index_dir=index_dir,
                   **PART) as m:
        assert m.schema["partitions"] == 8
        nloc = 8 * (ds_plain.n // 8 // B) // W
        root = bfs.Mount(os.path.join(m.path, "rank-%04d" % R))
        assert len(root.epoch(1)) == nloc
        schema = effective_of(m.schema)
        ds = BatchDataset(root, features=None)
        dl = DataLoader(ds, batch_size=None, num_workers=2)
        for e in (0, 1):
            ds.set_epoch(e)
            order = part_order(ds_plain, 1024, 2, 6, e, B, 8)
            got = list(dl)
            assert len(got) == nloc
            for i in (0, nloc // 2, nloc - 1):
                g = i * W + R
                exp = oracle.expected_batch(ds_plain.decoded, schema,
                                            order[g * B:(g + 1) * B].tolist())
                assert sorted(got[i]) == sorted(exp)
                for k, v in exp.items():
                    assert oracle.arrays_equal(got[i][k].numpy(), v), (e, i, k)
                loaded = bnp.load_batch(root.epoch(e).batch_path(i))
                for k, v in exp.items():
                    assert oracle.arrays_equal(np.asarray(loaded[k]), v), (e, i, k)
        assert isinstance(got[0]["x"], torch.Tensor)


def effective_of(schema):
    return {"features": schema.get("features", {}),
            "feature_lists": schema.get("feature_lists") or {}}


def test_partitions_with_a_mixture_are_refused_as_block_shuffle_is(batchfs, ds_plain, tmp_path):
    """A mixture takes shuffle=global or none; partitions, an option of
    shuffle=block, fails the mount with one line saying to drop it, as
    shuffle=block does."""
    import json
    import subprocess
    mix = tmp_path / "mix.json"
    mix.write_text(json.dumps({"mixture": [{"name": "a", "source": ds_plain.path, "weight": 1},
                                           {"name": "b", "source": ds_plain.path, "weight": 2}]}))
    mnt = tmp_path / "m"
    mnt.mkdir()
    for opts, word in (("partitions=4", "only with shuffle=block, which a mixture does not take"),
                       ("shuffle=block,partitions=4", "without block_size, window or partitions")):
        r = subprocess.run([batchfs, "-f", "-o", opts, str(mix), str(mnt)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, opts
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and word in lines[0], (opts, r.stderr)
