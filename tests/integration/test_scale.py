# SPDX-License-Identifier: Apache-2.0
"""Real-world dataset shapes: thousands of shards under a small
descriptor limit, and records with hundreds of features. Every byte is
checked against the oracle.

Fixtures are conftest.py's."""

import json
import os
import stat
import struct
import subprocess

import pytest

import oracle
from fusemount import BatchfsMount
from helpers import (check_batch_dir, check_safetensors, effective, expect_mount_failure,
                     make_dataset)

NOFILE = 256


def _limited(batchfs, tmp_path, nofile):
    """A wrapper that runs batchfs under `ulimit -n nofile` (soft and hard)."""
    w = tmp_path / "batchfs-ulimit"
    w.write_text("#!/bin/sh\nulimit -n %d || exit 99\nexec %s \"$@\"\n" % (nofile, batchfs))
    w.chmod(w.stat().st_mode | stat.S_IXUSR)
    return str(w)


def _open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def _check_all_batches(m, ds, B, npy_every=1):
    schema = effective(m)
    nb = oracle.batches_per_epoch(ds.n, B)
    ep = m.path("epoch-0000")
    for i in range(nb):
        exp = oracle.expected_batch(ds.decoded, schema, oracle.batch_records(ds.n, B, i))
        check_safetensors(os.path.join(ep, "batch-%06d.safetensors" % i), exp)
        if i % npy_every == 0:
            check_batch_dir(os.path.join(ep, "batch-%06d" % i), exp)


@pytest.mark.parametrize("compression,shards", [("none", 3000), ("gzip", 1200)])
def test_thousands_of_shards_under_ulimit_256(batchfs, gen, tmp_path, compression, shards):
    """More shards than descriptors: the index is built (by parallel scan
    workers), the schema inferred and every record served with at most
    NOFILE descriptors, through the bounded descriptor cache; a re-mount
    reuses the index."""
    ds = make_dataset(gen, tmp_path / "src", 2 * shards,
                      ["x:float:3", "y:int64:1", "t:int64:0..4", "b:bytes:1,len=1..6"],
                      shards=shards, seed=13, compression=compression)
    assert ds.nshards == shards
    binary = _limited(batchfs, tmp_path, NOFILE)
    ix = str(tmp_path / "ix")
    B = 64
    for run in range(2):
        m = BatchfsMount(binary, ds.path, tmp_path / ("mnt%d" % run),
                         "batch_size=%d,index_dir=%s,threads=2,prefetch=4" % (B, ix),
                         str(tmp_path / ("log%d" % run)))
        try:
            m.start()
            stats = m.json("stats.json")
            assert stats["records"] == ds.n
            assert stats["index_reused"] == (run == 1), stats
            _check_all_batches(m, ds, B, npy_every=7)
            stats = m.json("stats.json")
            assert stats["failed_reads"] == 0 and stats["decode_errors"] == 0, stats
            assert _open_fds(m.proc.pid) <= NOFILE
            assert "Too many open files" not in m.log_text()
        finally:
            m.stop()
        assert m.proc.returncode == 0, m.log_text()


WIDE = (["f%03d:float:1" % i for i in range(300)] + ["i%02d:int64:1" % i for i in range(50)] +
        ["s%d:bytes:1,len=1..8" % i for i in range(10)])


def test_wide_records_every_file_and_readme(mounter, gen, tmp_path):
    """360 features (as the bench's 'wide'): every .npy (listing included) and .safetensors of every batch
    against the oracle, and README.txt says to read .safetensors."""
    ds = make_dataset(gen, tmp_path / "wide", 300, WIDE, shards=2, seed=5)
    B = 64
    m = mounter(ds.path, batch_size=B)
    _check_all_batches(m, ds, B)
    bdir = m.path("epoch-0000", "batch-000000")
    names = os.listdir(bdir)
    ntensors = len(oracle.tensor_files(oracle.expected_batch(ds.decoded, effective(m), [0])))
    assert len(names) == ntensors >= 360 and len(set(names)) == ntensors
    readme = m.read("README.txt").decode()
    assert "Many features (%d tensors per batch)" % ntensors in readme, readme
    assert "%s/epoch-0000/all.safetensors" % m.mnt in readme
    for name in names[::37]:
        assert os.stat(os.path.join(bdir, name)).st_size > 0


def test_narrow_schema_readme_has_no_wide_note(mounter, gen, tmp_path):
    ds = make_dataset(gen, tmp_path / "narrow", 50, ["x:float:2", "y:int64:1"], seed=6)
    m = mounter(ds.path, batch_size=16)
    assert "Many features" not in m.read("README.txt").decode()


def _rchar(pid):
    """Bytes process pid read with read/pread so far (mapped pages do not count)."""
    with open("/proc/%d/io" % pid) as f:
        return next(int(l.split()[1]) for l in f if l.startswith("rchar:"))


def _idx_files(d):
    return {n: os.stat(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(".idx")}


def test_remount_maps_the_index_without_reading_the_shards(batchfs, gen, tmp_path):
    """The first mount reads every shard once (its read count covers
    their bytes); a re-mount of the unchanged dataset reads none of them
    (read/pread bytes far below the shards' size), rewrites no index file and
    serves the same batches; a cache file with a flipped byte is rebuilt with
    one log line naming it."""
    ds = make_dataset(gen, tmp_path / "src", 60000, ["y:int64:1", "x:float:2"], shards=4, seed=9)
    shard_bytes = sum(os.path.getsize(os.path.join(str(ds.path), n))
                      for n in os.listdir(str(ds.path)))
    ix = str(tmp_path / "ix")
    opts = "batch_size=1000,index_dir=%s,threads=2" % ix
    got, reads, files = [], [], []
    for run in range(3):
        if run == 2:  # corrupt one cache file in its middle
            name = sorted(files[0])[0]
            with open(os.path.join(ix, name), "r+b") as f:
                size = os.path.getsize(os.path.join(ix, name))
                f.seek(size // 2)
                b = f.read(1)
                f.seek(size // 2)
                f.write(bytes([b[0] ^ 0x10]))
        m = BatchfsMount(batchfs, ds.path, tmp_path / ("mnt%d" % run), opts,
                         str(tmp_path / ("log%d" % run)))
        try:
            m.start()
            reads.append(_rchar(m.proc.pid))
            stats = m.json("stats.json")
            assert stats["records"] == ds.n
            assert stats["index_reused"] == (run == 1), stats
            got.append(m.read("epoch-0000", "batch-000007.safetensors"))
        finally:
            m.stop()
        assert m.proc.returncode == 0, m.log_text()
        files.append(_idx_files(ix))
        log = m.log_text()
        if run == 2:
            assert log.count("corrupt (checksum mismatch); rebuilding it") == 1, log
            assert name in log, log
        else:
            assert "rebuilding" not in log, log
    assert len(files[0]) == 4
    assert reads[0] >= shard_bytes, (reads, shard_bytes)
    assert reads[1] < shard_bytes / 8, (reads, shard_bytes)
    for n, st in files[0].items():  # the re-mount rewrote nothing
        assert (files[1][n].st_ino, files[1][n].st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    assert files[2][name].st_ino != files[1][name].st_ino  # the corrupt one was rewritten
    assert got[0] == got[1] == got[2]


RAGGED_SCHEMA = {"features": {
    "blob": {"kind": "bytes", "dtype": "uint8", "shape": [-1, -1], "ragged": True},
    "tokens": {"kind": "int64", "dtype": "int64", "shape": [-1], "ragged": True},
    "w": {"kind": "float", "dtype": "float32", "shape": [-1], "ragged": True},
    "y": {"kind": "int64", "dtype": "int64", "shape": []}}}


def _cnt_files(d):
    """The ragged counts files in index_dir d: packs and files of their own."""
    return {x: os.stat(os.path.join(d, x)) for x in os.listdir(d)
            if x.endswith(".cnt.idx") or x.endswith(".cntpack.idx")}


def _resident(paths):
    """Bytes of these files in the page cache (fincore)."""
    out = subprocess.run(["fincore", "-b", "-n", "-o", "RES"] + list(paths),
                         stdout=subprocess.PIPE, check=True, text=True).stdout
    return sum(int(x) for x in out.split())


def _flip_first_entry(pack):
    """Flip one bit in the middle of a pack's first entry (BFSPAK01: a
    64-byte header, then rows of hash, offset, length)."""
    with open(pack, "r+b") as f:
        f.seek(64 + 8)
        off, length = struct.unpack("<QQ", f.read(16))
        f.seek(off + length // 2)
        b = f.read(1)
        f.seek(off + length // 2)
        f.write(bytes([b[0] ^ 0x04]))


def _evict(paths):
    os.sync()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


@pytest.mark.parametrize("size", ["large", "small"])
def test_remount_of_a_ragged_dataset_reads_no_shard(batchfs, gen, tmp_path, size):
    """The per-record ragged counts are cached in index_dir beside
    the index. The first mount decodes every record (counting), a re-mount
    of the unchanged dataset reads no shard's records (its shards' pages stay
    out of the page cache but for the first bytes that tell the compression; for records of ~80 KB, read with pread, the daemon's
    read bytes stay far below the shards' size) and serves the same bytes,
    equal to the oracle; a counts file with a flipped byte is rebuilt with
    one log line naming it, the output unchanged. Small records are read
    through a mapping (not in rchar): the page cache tells. The 3,000
    records a shard of "small" have counts files of their own; the 40 of
    "large" have their counts in one pack, whose first entry is
    the one corrupted."""
    blob = "blob:bytes:1..2,len=40000..70000" if size == "large" else "blob:bytes:0..3,len=1..9"
    n = 160 if size == "large" else 12000
    ds = make_dataset(gen, tmp_path / "src", n,
                      [blob, "tokens:int64:0..50", "w:float:0..5,missing=0.2", "y:int64:1"],
                      shards=4, seed=11)
    shards = [os.path.join(str(ds.path), x) for x in sorted(os.listdir(str(ds.path)))]
    shard_bytes = sum(os.path.getsize(p) for p in shards)
    sfile = tmp_path / "schema.json"
    sfile.write_text(json.dumps(RAGGED_SCHEMA))
    ix = str(tmp_path / "ix")
    B = 16
    opts = "batch_size=%d,index_dir=%s,threads=2,schema=%s" % (B, ix, sfile)
    nb = oracle.batches_per_epoch(ds.n, B)
    got, reads, resident, cnt = [], [], [], []
    for run in range(4):
        if run == 2:  # corrupt one counts file (or the pack's first entry) in its middle
            name = sorted(cnt[0])[0]
            p = os.path.join(ix, name)
            with open(p, "r+b") as f:
                at = os.path.getsize(p) // 2
                if name.endswith(".cntpack.idx"):
                    f.seek(64 + 8)
                    off, length = struct.unpack("<QQ", f.read(16))
                    at = off + length // 2
                f.seek(at)
                b = f.read(1)
                f.seek(at)
                f.write(bytes([b[0] ^ 0x01]))
        _evict(shards)
        m = BatchfsMount(batchfs, ds.path, tmp_path / ("mnt%d" % run), opts,
                         str(tmp_path / ("log%d" % run)))
        try:
            m.start()
            reads.append(_rchar(m.proc.pid))
            resident.append(_resident(shards))
            # every batch's size is known at mount: stat them all first
            sizes = [os.stat(m.path("epoch-0000", "batch-%06d.safetensors" % i)).st_size
                     for i in range(nb)]
            got.append([m.read("epoch-0000", "batch-%06d.safetensors" % i) for i in range(nb)])
            assert [len(x) for x in got[-1]] == sizes
            if run == 1:
                _check_all_batches(m, ds, B, npy_every=5)
        finally:
            m.stop()
        assert m.proc.returncode == 0, m.log_text()
        cnt.append(_cnt_files(ix))
        log = m.log_text()
        if run == 2:
            assert log.count("ragged counts") == 1, log
            assert name in log and "corrupt (checksum mismatch); rebuilding it" in log, log
        else:
            assert "rebuilding" not in log and "cannot write" not in log, log
    if size == "large":
        assert len(cnt[0]) == 1 and name.endswith(".cntpack.idx"), cnt[0]
    else:
        assert len(cnt[0]) == 4 and all(x.endswith(".cnt.idx") for x in cnt[0]), cnt[0]
    assert resident[0] >= shard_bytes * 0.9, (resident, shard_bytes)
    # a re-mount only sniffs each shard's first bytes (its compression):
    # at most one 64 KiB readahead window of each in the page cache
    assert max(resident[1], resident[3]) <= 65536 * len(shards), (resident, shard_bytes)
    assert max(resident[1], resident[3]) < shard_bytes / 8, (resident, shard_bytes)
    if size == "large":
        assert reads[0] >= shard_bytes, (reads, shard_bytes)
        assert reads[1] < shard_bytes / 8 and reads[3] < shard_bytes / 8, (reads, shard_bytes)
    for x, st in cnt[0].items():  # the re-mount rewrote nothing
        assert (cnt[1][x].st_ino, cnt[1][x].st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    assert cnt[2][name].st_ino != cnt[1][name].st_ino  # the corrupt one was rewritten
    assert got[0] == got[1] == got[2] == got[3]


def test_inference_rescan_keeps_cached_index_files(batchfs, gen, tmp_path):
    """A first mount with schema= caches the index but no inferred schema; a
    mount without schema= then scans every shard to infer one, and must not
    write the index it loaded again (a rename over an existing file, which
    ext4 flushes at once: one per shard where each shard has an index
    file of its own; these small shards share one index pack); the
    inferred schema is cached, and a third mount scans nothing."""
    ds = make_dataset(gen, tmp_path / "src", 400, ["x:float:2", "y:int64:1"], shards=40, seed=21)
    ix = str(tmp_path / "ix")
    schema = tmp_path / "schema.json"
    schema.write_text('{"features": {"x": {"kind": "float", "dtype": "float32", "shape": [2]}, '
                      '"y": {"kind": "int64", "dtype": "int64", "shape": []}}}')
    files, got = [], []
    for run, extra in enumerate([",schema=%s" % schema, "", ""]):
        m = BatchfsMount(batchfs, ds.path, tmp_path / ("mnt%d" % run),
                         "batch_size=50,index_dir=%s,threads=2%s" % (ix, extra),
                         str(tmp_path / ("log%d" % run)))
        try:
            m.start()
            stats = m.json("stats.json")
            assert stats["records"] == ds.n
            assert stats["index_reused"] == (run > 0), stats
            assert stats["schema_reused"] == (run == 2), stats
            got.append(m.read("epoch-0000", "batch-000003.safetensors"))
        finally:
            m.stop()
        assert m.proc.returncode == 0, m.log_text()
        files.append(_idx_files(ix))
    assert len(files[0]) == 1 and list(files[0])[0].endswith(".pack.idx"), files[0]
    for f in files[1:]:
        assert {n: (s.st_ino, s.st_mtime_ns) for n, s in f.items()} == \
            {n: (s.st_ino, s.st_mtime_ns) for n, s in files[0].items()}
    assert got[0] == got[1] == got[2]


def test_remount_takes_each_shards_compression_from_its_index(batchfs, gen, tmp_path):
    """A re-mount does not read a shard's first bytes to tell its compression
    (one random read per shard from a cold disk): the cached index, checked
    against the shard's size and mtime, says it. Shown with a shard whose
    first header is garbled in place, size and mtime kept: the re-mount
    succeeds from the cache, where a mount without that cache fails naming
    the shard as not TFRecord."""
    ds = make_dataset(gen, tmp_path / "src", 300, ["x:float:2", "y:int64:1"], shards=3, seed=23)
    ix = str(tmp_path / "ix")
    opts = "batch_size=50,index_dir=%s,threads=2" % ix
    m = BatchfsMount(batchfs, ds.path, tmp_path / "mnt0", opts, str(tmp_path / "log0"))
    try:
        m.start()
        assert m.json("stats.json")["index_reused"] is False
    finally:
        m.stop()
    assert m.proc.returncode == 0, m.log_text()
    shard = oracle.list_shards(str(ds.path))[0]
    st = os.stat(shard)
    with open(shard, "r+b") as f:
        f.write(b"\xee" * 12)
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    m = BatchfsMount(batchfs, ds.path, tmp_path / "mnt1", opts, str(tmp_path / "log1"))
    try:
        m.start()
        stats = m.json("stats.json")
        assert stats["index_reused"] is True and stats["records"] == ds.n, stats
    finally:
        m.stop()
    assert m.proc.returncode == 0, m.log_text()
    expect_mount_failure(batchfs, ds.path, tmp_path / "mnt2",
                         "index_dir=%s" % (tmp_path / "ix2"), os.path.basename(shard))


def test_many_tiny_shards_share_one_index_pack_and_a_remount_reads_none(batchfs, gen,
                                                                        tmp_path):
    """A first mount over thousands of tiny shards writes one index
    pack in index_dir (not one index file per shard: creating those was two
    thirds of such a build), beside the inferred schema; a re-mount reads it
    back and no shard (with the shards' pages evicted, none is in the page
    cache after it; its read bytes stay far below the shards' size), and
    serves every record; an entry with a flipped byte costs one log line
    naming the pack, that shard is rescanned and the pack rewritten."""
    ds = make_dataset(gen, tmp_path / "src", 2 * 2000, ["y:int64:1", "b:bytes:1,len=2000..3000"],
                      shards=2000, seed=31)
    assert ds.nshards == 2000
    shards = oracle.list_shards(str(ds.path))
    shard_bytes = sum(os.path.getsize(p) for p in shards)
    ix = str(tmp_path / "ix")
    B = 64
    opts = "batch_size=%d,index_dir=%s,threads=2" % (B, ix)
    files, reads, resident, got = [], [], [], []
    for run in range(3):
        if run == 2:  # flip a byte in the middle of the pack's first entry
            pack = os.path.join(ix, list(files[0])[0])
            _flip_first_entry(pack)
        _evict(shards)
        m = BatchfsMount(batchfs, ds.path, tmp_path / ("mnt%d" % run), opts,
                         str(tmp_path / ("log%d" % run)))
        try:
            m.start()
            reads.append(_rchar(m.proc.pid))
            resident.append(_resident(shards))
            stats = m.json("stats.json")
            assert stats["records"] == ds.n
            assert stats["index_reused"] == (run == 1), stats
            if run == 1:
                _check_all_batches(m, ds, B, npy_every=9)
                stats = m.json("stats.json")
                assert stats["failed_reads"] == 0 and stats["decode_errors"] == 0, stats
            got.append(m.read("epoch-0000", "batch-000011.safetensors"))
        finally:
            m.stop()
        assert m.proc.returncode == 0, m.log_text()
        files.append(_idx_files(ix))
        assert len(files[0]) == 1 and list(files[0])[0].endswith(".pack.idx"), \
            (len(files[0]), sorted(files[0])[:3])
        log = m.log_text()
        if run == 2:
            assert log.count("rebuilding it") == 1, log
            assert "index pack %s" % pack in log and "checksum mismatch" in log, log
        else:
            assert "rebuilding" not in log, log
    name = list(files[0])[0]
    assert reads[0] >= shard_bytes, (reads, shard_bytes)
    assert resident[1] == 0, (resident, shard_bytes)  # not one page of a shard
    # the pack (~250 bytes a shard) and the daemon's own files
    assert reads[1] < shard_bytes / 8, (reads, shard_bytes)
    assert files[1][name].st_ino == files[0][name].st_ino  # the re-mount rewrote nothing
    assert files[1][name].st_mtime_ns == files[0][name].st_mtime_ns
    assert set(files[2]) == {name} and files[2][name].st_ino != files[1][name].st_ino
    assert got[0] == got[1] == got[2]


def test_many_tiny_ragged_shards_share_one_counts_pack_and_a_remount_reads_none(
        batchfs, gen, tmp_path):
    """A first mount of a dataset with ragged features over
    thousands of tiny shards counts every record and writes the counts in
    one counts pack (not one counts file per shard), beside the one index
    pack: index_dir holds O(1) files. A re-mount reads the counts back with
    the index and reads no shard (with the shards' pages evicted, none is in
    the page cache after it, while every batch file's size is exact), and
    every batch equals the oracle; an entry with a flipped byte costs one log
    line naming the pack, that shard is counted again and the pack rewritten,
    the bytes served unchanged."""
    ds = make_dataset(gen, tmp_path / "src", 2 * 2000,
                      ["tokens:int64:0..40", "w:float:0..5,missing=0.2", "y:int64:1"],
                      shards=2000, seed=37)
    assert ds.nshards == 2000
    shards = oracle.list_shards(str(ds.path))
    sfile = tmp_path / "schema.json"
    sfile.write_text(json.dumps({"features": {
        "tokens": {"kind": "int64", "dtype": "int64", "shape": [-1], "ragged": True},
        "w": {"kind": "float", "dtype": "float32", "shape": [-1], "ragged": True},
        "y": {"kind": "int64", "dtype": "int64", "shape": []}}}))
    ix = str(tmp_path / "ix")
    B = 64
    nb = oracle.batches_per_epoch(ds.n, B)
    opts = "batch_size=%d,index_dir=%s,threads=2,schema=%s" % (B, ix, sfile)
    files, cnt, resident, got = [], [], [], []
    for run in range(3):
        if run == 2:  # flip a byte in the middle of the counts pack's first entry
            pack = os.path.join(ix, list(cnt[0])[0])
            _flip_first_entry(pack)
        _evict(shards)
        m = BatchfsMount(batchfs, ds.path, tmp_path / ("mnt%d" % run), opts,
                         str(tmp_path / ("log%d" % run)))
        try:
            m.start()
            sizes = [os.stat(m.path("epoch-0000", "batch-%06d.safetensors" % i)).st_size
                     for i in range(nb)]
            resident.append(_resident(shards))
            stats = m.json("stats.json")
            assert stats["records"] == ds.n
            assert stats["index_reused"] == (run > 0), stats
            if run == 1:
                _check_all_batches(m, ds, B, npy_every=9)
            got.append([m.read("epoch-0000", "batch-%06d.safetensors" % i) for i in range(nb)])
            assert [len(x) for x in got[-1]] == sizes
        finally:
            m.stop()
        assert m.proc.returncode == 0, m.log_text()
        files.append(sorted(os.listdir(ix)))
        cnt.append(_cnt_files(ix))
        # one counts pack and one index pack, not one file per shard
        assert len(cnt[-1]) == 1 and list(cnt[-1])[0].endswith(".cntpack.idx"), \
            (len(cnt[-1]), sorted(cnt[-1])[:3])
        assert len(files[-1]) <= 3 and sum(x.endswith(".pack.idx") for x in files[-1]) == 1, \
            (len(files[-1]), files[-1][:3])
        log = m.log_text()
        if run == 2:
            assert log.count("rebuilding it") == 1, log
            assert "ragged counts pack %s" % pack in log and "checksum mismatch" in log, log
        else:
            assert "rebuilding" not in log and "cannot write" not in log, log
    assert files[0] == files[1] == files[2]
    assert resident[1] == 0, resident  # not one page of a shard
    name = list(cnt[0])[0]
    assert cnt[1][name].st_ino == cnt[0][name].st_ino  # the re-mount rewrote nothing
    assert cnt[1][name].st_mtime_ns == cnt[0][name].st_mtime_ns
    assert cnt[2][name].st_ino != cnt[1][name].st_ino  # the corrupt entry: rewritten
    assert got[0] == got[1] == got[2]
