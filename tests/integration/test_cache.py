# SPDX-License-Identifier: Apache-2.0
"""The decoded-batch cache seen from outside: one decode per batch however many
readers, prefetch ahead of a sequential reader and into the next epoch, a
bounded number of batches kept once read, and cache_size as a hard bound."""

import json
import os
import threading

import pytest

import oracle
from helpers import check_epoch, make_dataset


def stats(m):
    # stats.json is a snapshot per open: read it fresh each time
    with open(m.path("stats.json"), "rb") as f:
        return json.loads(f.read())


def read_batch(m, epoch, b):
    d = m.path("epoch-%04d" % epoch, "batch-%06d" % b)
    total = 0
    for root, _, files in os.walk(d):
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as f:
                total += len(f.read())
    with open(d + ".safetensors", "rb") as f:
        total += len(f.read())
    return total


@pytest.fixture(scope="module")
def ds_many(gen, work):
    return make_dataset(gen, work / "cache-many", 2000, ["x:float:8", "y:int64:1"], shards=2,
                        seed=11)


def test_sequential_reader_is_prefetched_and_read_batches_are_not_hoarded(mounter, ds_many):
    prefetch, threads = 3, 1
    m = mounter(ds_many.path, batch_size=20, seed=1, prefetch=prefetch, threads=threads,
                epochs=2)
    nb = stats(m)["batches_per_epoch"]
    assert nb == 100
    for b in range(nb):
        read_batch(m, 0, b)
    s = stats(m)
    # most batches were decoded ahead of the reader, not on its demand
    assert s["cache_misses"] < nb // 2, s
    # read batches kept decoded: at most prefetch + 8, plus the prefetched
    # ones not read yet (which reach into epoch 1)
    assert s["cache_entries"] <= (prefetch + 8) + prefetch + threads, s
    assert s["cache_evictions"] >= nb - (2 * prefetch + 8 + threads), s
    # the prefetcher crossed into the next epoch: its first batch is a hit
    before = stats(m)["cache_misses"]
    read_batch(m, 1, 0)
    assert stats(m)["cache_misses"] == before


def test_concurrent_readers_share_one_decode(mounter, ds_many):
    m = mounter(ds_many.path, batch_size=50, seed=2, prefetch=0, threads=1)
    b = 7
    barrier = threading.Barrier(8)
    sizes = []

    def reader():
        barrier.wait()
        sizes.append(read_batch(m, 0, b))

    ts = [threading.Thread(target=reader) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert len(set(sizes)) == 1 and len(sizes) == 8
    s = stats(m)
    assert s["batches_decoded"] == 1, s
    assert s["prefetch_issued"] == 0, s


def test_cache_size_bounds_held_bytes(mounter, ds_many):
    # each batch of 100 records: x 100*8*4 + y 100*8 = 4000 bytes + headers
    m = mounter(ds_many.path, batch_size=100, seed=3, cache_size="16K", prefetch=8, threads=1)
    for b in range(stats(m)["batches_per_epoch"]):
        read_batch(m, 0, b)
    s = stats(m)
    assert s["cache_budget"] == 16384
    # never over the bound by more than one batch
    assert s["cache_peak_bytes"] <= 16384 + 5000, s


def test_recycled_batch_buffers_hold_only_their_own_bytes(mounter, gen, work):
    # Batches of over 1 MiB: once read and trimmed, their buffers are reused
    # for the next builds. A padded bytes feature (short values, zero
    # padding up to the longest) shows any byte a reused buffer kept from
    # the batch before: every batch of two epochs must equal the oracle.
    ds = make_dataset(gen, work / "cache-recycle", 4000, ["b:bytes:1,len=0..4000", "x:float:3"],
                      shards=2, seed=21)
    m = mounter(ds.path, batch_size=300, seed=5, prefetch=1, threads=2, epochs=2)
    for epoch in (0, 1):
        check_epoch(m, ds, B=300, seed=5, epoch=epoch)
    s = stats(m)
    assert s["buffers_reused"] >= 5, s


def test_large_read_batches_are_trimmed_by_bytes(mounter, gen, work):
    # With batches over a sixteenth of cache_size, at most one read batch
    # stays decoded (the page cache holds them): each trimmed buffer is the
    # next build's, from the third batch on, not one per prefetch + 8 reads.
    ds = make_dataset(gen, work / "cache-trim-bytes", 4000, ["b:bytes:1,len=0..4000", "x:float:3"],
                      shards=2, seed=22)
    m = mounter(ds.path, batch_size=300, seed=5, prefetch=1, threads=2, cache_size="16M")
    check_epoch(m, ds, B=300, seed=5, epoch=0)
    s = stats(m)
    assert s["batches_per_epoch"] == 14, s
    assert s["buffers_reused"] >= 9, s
    assert s["cache_peak_bytes"] <= 5 * 1300000, s
