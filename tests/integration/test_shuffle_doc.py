# SPDX-License-Identifier: Apache-2.0
"""docs/shuffle.md is exact: the Python blocks of that page, run as they are
printed, give the order a real mount serves.

Each dataset is written here (one int64 feature `id` holding the record's
global number, and a bytes feature `pad` whose length sets the record's
data length for the block cut), mounted, and `epoch-E/all/id.npy` (the
record at every position of the epoch) is compared with the page's
global_order / block_order / rank_batches for several seeds and epochs,
including epochs read by name only, record counts whose permutation walks
cycles (n = 2, 3, 5, 17, 65, 300, 1000 are not powers of 4), seeds at both
ends of 64 bits, blocks cut by size and by shard, and rank/world with
drop_remainder (also through one batch file each). Fixtures are
conftest.py's."""

import os
import re
import struct

import numpy as np
import pytest

import oracle

DOC = os.path.join(oracle.repo_root(), "docs", "shuffle.md")
TOP_SEED = (1 << 64) - 1


@pytest.fixture(scope="module")
def doc():
    """The namespace of every ```python block of docs/shuffle.md, run in order."""
    with open(DOC) as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)
    assert blocks, "no python blocks in " + DOC
    ns = {}
    exec(compile("\n".join(blocks), DOC, "exec"), ns)  # noqa: S102
    return ns


# ------------------------------------------------------------ writing shards


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field(num, payload):  # a length-delimited field
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _example(rid, pad):
    """tf.train.Example {id: int64_list [rid], pad: bytes_list [pad]}."""
    id_feature = _field(3, _field(1, _varint(rid)))  # Feature.int64_list, packed
    pad_feature = _field(1, _field(1, pad))  # Feature.bytes_list
    entries = (_field(1, _field(1, b"id") + _field(2, id_feature)) +
               _field(1, _field(1, b"pad") + _field(2, pad_feature)))
    return _field(1, entries)  # Example.features


def _frame(data):
    n = struct.pack("<Q", len(data))
    return (n + struct.pack("<I", oracle.mask_crc(oracle.crc32c(n))) + data +
            struct.pack("<I", oracle.mask_crc(oracle.crc32c(data))))


def write_dataset(root, shard_sizes, pad_len):
    """Shards part-NNN.tfrecord in root; record r has id r and pad_len(r)
    bytes of pad. Returns (root, data length of every record)."""
    root.mkdir()
    lengths, r = [], 0
    for s, count in enumerate(shard_sizes):
        with open(root / ("part-%03d.tfrecord" % s), "wb") as f:
            for _ in range(count):
                data = _example(r, b"x" * pad_len(r))
                lengths.append(len(data))
                f.write(_frame(data))
                r += 1
    return root, lengths


@pytest.fixture(scope="module")
def schema_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("shuffle-doc") / "schema.json"
    p.write_text('{"features": {"id": {"kind": "int64", "shape": []}}}')
    return str(p)


def epoch_ids(m, epoch, rank=None):
    parts = ([] if rank is None else ["rank-%04d" % rank]) + ["epoch-%04d" % epoch, "all",
                                                              "id.npy"]
    return np.load(m.path(*parts)).tolist()


# ---------------------------------------------------------------- the tests


def test_the_page_agrees_with_the_oracle_for_larger_n(doc):
    # two independent write-ups of the same algorithm, over many positions
    for n, seed, epoch in ((20000, 0, 0), (4099, TOP_SEED, 5)):
        assert doc["global_order"](n, seed, epoch) == oracle.perm(n, seed, epoch).tolist()


@pytest.mark.parametrize("shards,seeds", [
    ([1], [0]),
    ([2], [0, TOP_SEED]),
    ([3], [7]),
    ([2, 3], [0, TOP_SEED]),  # 5: 16 slots for 5 records
    ([17], [1]),  # 64 slots for 17
    ([30, 34], [3]),  # 64: no cycle to walk
    ([65], [0, 12345678901234567890]),  # 256 slots for 65
    ([100, 0, 200], [9]),  # an empty shard in the middle
    ([400, 600], [0, TOP_SEED]),
])
def test_global_order_is_the_page(mounter, tmp_path, doc, schema_file, shards, seeds):
    src, lengths = write_dataset(tmp_path / "src", shards, lambda r: 3)
    n = len(lengths)
    for seed in seeds:
        m = mounter(str(src), seed=seed, batch_size=7, epochs=2, schema=schema_file)
        for epoch in (0, 1, 9):  # epoch-0009 is not listed: looked up by name
            want = doc["global_order"](n, seed, epoch)
            assert sorted(want) == list(range(n))
            assert epoch_ids(m, epoch) == want, (shards, seed, epoch)


def test_shuffle_none_is_file_order(mounter, tmp_path, doc, schema_file):
    src, lengths = write_dataset(tmp_path / "src", [4, 9], lambda r: 1)
    m = mounter(str(src), shuffle="none", seed=5, schema=schema_file)
    assert epoch_ids(m, 0) == epoch_ids(m, 3) == doc["none_order"](len(lengths))


# records of 11..611 bytes over three shards of uneven sizes
BLOCK_SHARDS = [250, 180, 270]


def _pad(r):
    return (r * 37) % 601


@pytest.mark.parametrize("block_size,window,seed", [
    ("1", 1, 0),  # every record a block: each alone
    ("1", 4, 5),  # every record a block: groups of 4 records
    ("600", 3, TOP_SEED),  # a few records a block, records over 600 bytes alone
    ("2K", 64, 11),  # the default window
    ("16K", 2, 0),  # several blocks a shard, last group shorter
    (None, None, 3),  # the defaults: a block per shard, one group
])
def test_block_order_is_the_page(mounter, tmp_path, doc, schema_file, block_size, window, seed):
    src, lengths = write_dataset(tmp_path / "src", BLOCK_SHARDS, _pad)
    kw = {} if block_size is None else {"block_size": block_size, "window": window}
    m = mounter(str(src), shuffle="block", seed=seed, batch_size=32, schema=schema_file, **kw)
    size = {None: 4 << 20, "1": 1, "600": 600, "2K": 2048, "16K": 16384}[block_size]
    for epoch in (0, 2):
        want = doc["block_order"](lengths, BLOCK_SHARDS, seed, epoch, size, window or 64)
        assert sorted(want) == list(range(len(lengths)))
        assert epoch_ids(m, epoch) == want, (block_size, window, seed, epoch)


@pytest.mark.parametrize("shuffle", ["global", "block"])
def test_ranks_batches_and_drop_remainder_are_the_page(mounter, tmp_path, doc, schema_file,
                                                       shuffle):
    shards = [333, 334] if shuffle == "global" else BLOCK_SHARDS
    src, lengths = write_dataset(tmp_path / "src", shards, _pad)
    n, B, W, seed = len(lengths), 7, 3, 21
    block = {"block_size": "2K", "window": 3} if shuffle == "block" else {}

    def order(epoch):
        if shuffle == "global":
            return doc["global_order"](n, seed, epoch)
        return doc["block_order"](lengths, shards, seed, epoch, 2048, 3)

    for drop in (False, True):
        for rank in (0, 2):
            m = mounter(str(src), shuffle=shuffle, seed=seed, batch_size=B, rank=rank,
                        world=W, drop_remainder=drop, schema=schema_file, **block)
            for epoch in (0, 4):
                batches = doc["rank_batches"](order(epoch), B, drop, rank, W)
                assert epoch_ids(m, epoch) == [r for b in batches for r in b]
                last = len(batches) - 1
                for i in (0, last):
                    got = np.load(m.path("epoch-%04d" % epoch, "batch-%06d" % i, "id.npy"))
                    assert got.tolist() == batches[i], (drop, rank, epoch, i)
    # world=W without rank: rank-RRRR/ holds what rank=R shows
    m = mounter(str(src), shuffle=shuffle, seed=seed, batch_size=B, world=W,
                schema=schema_file, **block)
    for rank in range(W):
        batches = doc["rank_batches"](order(1), B, False, rank, W)
        assert epoch_ids(m, 1, rank) == [r for b in batches for r in b]


@pytest.mark.parametrize("P,block_size,window,B,seed", [
    (2, "2K", 3, 7, 0),
    (3, "600", 2, 5, TOP_SEED),  # 700 records: runs of 233 and 234, pieces cut
    (8, "16K", 64, 4, 11),  # fewer blocks than partitions: pieces of blocks
    (64, "1", 1, 3, 5),  # every record a block, ten records a partition
])
def test_partitioned_order_is_the_page(mounter, tmp_path, doc, schema_file, P, block_size, window,
                                       B, seed):
    src, lengths = write_dataset(tmp_path / "src", BLOCK_SHARDS, _pad)
    size = {"1": 1, "600": 600, "2K": 2048, "16K": 16384}[block_size]
    m = mounter(str(src), shuffle="block", seed=seed, batch_size=B, block_size=block_size,
                window=window, partitions=P, epochs=2, schema=schema_file)
    assert m.json("schema.json")["partitions"] == P
    for epoch in (0, 3):
        want = doc["partitioned_order"](lengths, BLOCK_SHARDS, seed, epoch, B, P, size, window)
        assert len(want) == len(set(want)) == P * (len(lengths) // P // B) * B
        assert epoch_ids(m, epoch) == want, (P, epoch)
    # each partition a block shuffle of its own pieces, fixed across epochs
    parts = doc["partitions"](lengths, BLOCK_SHARDS, seed, P, size)
    assert sorted(r for p in parts for a, b in p for r in range(a, b)) == \
        list(range(len(lengths)))
    assert max(sum(b - a for a, b in p) for p in parts) - \
        min(sum(b - a for a, b in p) for p in parts) <= 1


def test_partitions_one_is_the_block_order(mounter, tmp_path, doc, schema_file):
    src, lengths = write_dataset(tmp_path / "src", BLOCK_SHARDS, _pad)
    m = mounter(str(src), shuffle="block", seed=3, batch_size=32, block_size="2K", window=3,
                partitions=1, schema=schema_file)
    assert epoch_ids(m, 1) == doc["block_order"](lengths, BLOCK_SHARDS, 3, 1, 2048, 3)


@pytest.mark.parametrize("P,W", [(4, 2), (4, 4), (6, 3), (4, 3)])
def test_partitioned_ranks_are_the_page(mounter, tmp_path, doc, schema_file, P, W):
    src, lengths = write_dataset(tmp_path / "src", BLOCK_SHARDS, _pad)
    B, seed = 6, 8
    kw = dict(shuffle="block", seed=seed, batch_size=B, block_size="2K", window=2,
              partitions=P, schema=schema_file)
    m = mounter(str(src), world=W, **kw)
    order = doc["partitioned_order"](lengths, BLOCK_SHARDS, seed, 1, B, P, 2048, 2)
    for rank in range(W):
        batches = doc["rank_batches"](order, B, False, rank, W)
        assert epoch_ids(m, 1, rank) == [r for b in batches for r in b], (P, W, rank)
