# SPDX-License-Identifier: Apache-2.0
"""Shadow copies of compressed shards (decoder/store/shadow.h): a gzip or zlib
shard is read from a plain copy in index_dir written by the index scan.

Checked here: every batch of a gzip and a zlib dataset read through the
copies equals the oracle and a shadow=off mount; the shard replaced or
rewritten under the mount; the copy truncated or corrupted on disk (under
the mount and before it); index_dir full in the middle of a write and
index_dir read-only. The rule everywhere: exact bytes or EIO, never wrong
bytes; a copy that cannot be written or read falls back to the seek points
with one line in the log; nothing is written outside index_dir."""

import errno
import glob
import os
import subprocess

import pytest

import oracle
from helpers import batch_files, read_or_errno

B = 16
FEATURES = ["x:float:4", "y:int64:1", "t:int64:0..5", "s:bytes:1,len=1..40"]


class Src:
    """A generated compressed dataset and its decoded records."""

    def __init__(self, gen, path, compression="gzip", n=3000, shards=3, seed=14):
        oracle.generate(gen, path, n, FEATURES, shards=shards, seed=seed, compression=compression)
        self.path = str(path)
        self.shards = oracle.list_shards(self.path)
        self.decoded = oracle.read_dataset(self.path)
        self.n = len(self.decoded)
        self.nb = oracle.batches_per_epoch(self.n, B)


def _files(m, src, b, epoch=0, seed=0):
    return batch_files(m, src, B, b, epoch, seed)


def _all_exact(m, src, batches=None, epoch=0):
    for b in (range(src.nb) if batches is None else batches):
        for path, want in _files(m, src, b, epoch):
            got = read_or_errno(path)
            assert got == want, "%s: %s" % (path, got if isinstance(got, int) else "wrong bytes")


def _shadows(ix):
    return sorted(glob.glob(os.path.join(str(ix), "*.shadow")))


def _leftovers(ix):
    return glob.glob(os.path.join(str(ix), "*.tmp.*"))


def _log_lines(m, needle):
    return [l for l in m.log_text().splitlines() if needle in l]


def _listing(d):
    return sorted((p, os.path.getsize(p), os.stat(p).st_mtime_ns)
                  for p in glob.glob(os.path.join(str(d), "**"), recursive=True))


# ---------------------------------------------------------------- correctness


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_every_batch_through_the_copies_equals_oracle_and_shadow_off(mounter, gen, tmp_path,
                                                                      compression):
    src = Src(gen, tmp_path / "src", compression)
    before = _listing(src.path)
    ix = tmp_path / "ix"
    m = mounter(src.path, batch_size=B, index_dir=str(ix), epochs=2)
    shadows = _shadows(ix)
    assert len(shadows) == len(src.shards), os.listdir(str(ix))
    # the copy is the uncompressed stream, then its trailer
    streams = sorted(len(oracle.read_stream(s)[1]) for s in src.shards)
    sizes = sorted(os.path.getsize(p) for p in shadows)
    assert all(0 < z - s < 4096 for s, z in zip(streams, sizes)), (streams, sizes)
    off = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix-off"), epochs=2,
                  shadow="off")
    assert _shadows(tmp_path / "ix-off") == []
    for epoch in (0, 1):
        _all_exact(m, src, epoch=epoch)
        for b in range(src.nb):
            for name in ("batch-%06d.safetensors" % b,):
                p = os.path.join("epoch-%04d" % epoch, name)
                assert m.read(p) == off.read(p), p
    assert m.read("epoch-0000/all.safetensors") == off.read("epoch-0000/all.safetensors")
    assert _listing(src.path) == before  # nothing written beside the shards
    assert not _leftovers(ix)
    # a second mount reuses the copies and the index (no scan)
    m2 = mounter(src.path, batch_size=B, index_dir=str(ix))
    assert m2.json("stats.json")["index_reused"] == 1
    assert _shadows(ix) == shadows
    _all_exact(m2, src, batches=range(0, src.nb, 5))


def test_copy_written_lazily_for_an_index_without_one(mounter, gen, tmp_path):
    """An index written with shadow=off gets its copies on the next mount
    that wants them (one scan), and shadow_size bounds them."""
    src = Src(gen, tmp_path / "src", n=1500)
    ix = tmp_path / "ix"
    m = mounter(src.path, batch_size=B, index_dir=str(ix), shadow="off")
    m.stop()
    assert _shadows(ix) == []
    small = mounter(src.path, batch_size=B, index_dir=str(ix), shadow_size="1K")
    assert _shadows(ix) == []  # none fits: seek points, and no scan
    assert small.json("stats.json")["index_reused"] == 1
    _all_exact(small, src, batches=range(0, src.nb, 3))
    small.stop()
    m = mounter(src.path, batch_size=B, index_dir=str(ix))
    assert len(_shadows(ix)) == len(src.shards)
    _all_exact(m, src)


# ---------------------------------------------------------------- faults


def _rewrite_gz(src, shard, every=5):
    """Shard `shard` recompressed with the payload of every `every`-th
    record flipped (CRCs left as they were)."""
    import gzip
    raw = bytearray(oracle.read_stream(src.shards[shard])[1])
    for k, r in enumerate(oracle.scan_records(src.shards[shard], bytes(raw))):
        if k % every == 0:
            for i in range(r["data_offset"], r["data_offset"] + r["length"]):
                raw[i] ^= 0xA5
    return gzip.compress(bytes(raw))


@pytest.mark.parametrize("how", ["replaced", "rewritten"])
def test_shard_replaced_or_rewritten_under_the_mount(mounter, gen, tmp_path, how):
    """The mount serves what it indexed: the copy of the old bytes, or
    EIO; never the new bytes or a mix."""
    src = Src(gen, tmp_path / "src")
    m = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix"), prefetch=0)
    new = _rewrite_gz(src, 1)
    if how == "replaced":
        tmp = src.shards[1] + ".new"
        with open(tmp, "wb") as f:
            f.write(new)
        os.replace(tmp, src.shards[1])
    else:
        with open(src.shards[1], "r+b") as f:
            f.write(new)
            f.truncate()
    for b in range(src.nb):
        for path, want in _files(m, src, b):
            got = read_or_errno(path)
            assert got == want or got == errno.EIO, (path, got if isinstance(got, int) else
                                                     "wrong bytes")
    assert m.proc.poll() is None
    # the next mount sees the new shard: its copy is stale, rewritten
    m.stop()
    m2 = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix"))
    assert len(_shadows(tmp_path / "ix")) == len(src.shards)
    assert m2.json("stats.json")["index_reused"] == 0


def _damage(path, how, at):
    if how == "truncated":
        os.truncate(path, at)
    else:  # a run of bytes flipped in the middle of the stream
        with open(path, "r+b") as f:
            f.seek(at)
            b = bytearray(f.read(64))
            f.seek(at)
            f.write(bytes(x ^ 0x5A for x in b))


@pytest.mark.parametrize("how", ["truncated", "corrupted"])
@pytest.mark.parametrize("when", ["under", "before"])
def test_damaged_copy_falls_back_to_the_shard(mounter, gen, tmp_path, how, when):
    """A copy truncated or corrupted on disk, under the mount or between
    mounts: every batch still reads exactly (from the compressed shard),
    one line says so, and the copy is deleted for the next mount to
    write again."""
    src = Src(gen, tmp_path / "src")
    ix = tmp_path / "ix"
    if when == "before":
        mounter(src.path, batch_size=B, index_dir=str(ix)).stop()
    shadows = _shadows(ix) if when == "before" else None
    m = None
    if when == "under":
        m = mounter(src.path, batch_size=B, index_dir=str(ix), prefetch=0)
        shadows = _shadows(ix)
    assert len(shadows) == len(src.shards)
    victim = shadows[1]
    size = os.path.getsize(victim)
    _damage(victim, how, size // 2)
    if when == "before":
        m = mounter(src.path, batch_size=B, index_dir=str(ix), prefetch=0)
    if how == "truncated" and when == "before":
        # the size check at attach refuses it: read through seek points, no
        # bad read to report; the copy is written again by the next scan
        _all_exact(m, src)
        return
    _all_exact(m, src)
    _all_exact(m, src, epoch=0)  # again: still exact
    lines = _log_lines(m, "bad shadow copy")
    assert len(lines) == 1, m.log_text()
    assert not os.path.exists(victim)
    assert m.json("stats.json")["failed_reads"] == 0
    m.stop()
    m2 = mounter(src.path, batch_size=B, index_dir=str(ix))
    assert len(_shadows(ix)) == len(src.shards)
    _all_exact(m2, src, batches=range(0, src.nb, 4))
    assert not _log_lines(m2, "bad shadow copy")


def _tmpfs(path, opts):
    os.makedirs(str(path), exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs: %s" % r.stderr.decode().strip())


@pytest.fixture
def tmpfs_dirs():
    made = []
    yield made
    for p in reversed(made):
        subprocess.run(["umount", "-l", str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("kind", ["full", "readonly"])
def test_index_dir_full_or_read_only_falls_back_with_one_line(mounter, gen, tmp_path,
                                                              tmpfs_dirs, kind):
    """index_dir a tmpfs too small for the copies (ENOSPC in the middle of
    a write) or mounted read-only: the mount serves every batch exactly
    through seek points, says so in one line, and leaves no partial file."""
    src = Src(gen, tmp_path / "src", n=4000, shards=4)
    before = _listing(src.path)
    streams = [len(oracle.read_stream(s)[1]) for s in src.shards]
    ix = tmp_path / "ix"
    if kind == "full":
        # room for the index files and a part of one copy
        _tmpfs(ix, "size=%dk" % max(64, (min(streams) // 2) // 1024))
    else:
        _tmpfs(ix, "ro,size=1m")
    tmpfs_dirs.append(ix)
    m = mounter(src.path, batch_size=B, index_dir=str(ix), threads=2)
    _all_exact(m, src)
    lines = _log_lines(m, "cannot write shadow copies")
    assert len(lines) == 1, m.log_text()
    want = "No space left on device" if kind == "full" else "Read-only file system"
    assert want in lines[0], lines[0]
    assert _shadows(ix) == []
    assert not _leftovers(ix)
    assert _listing(src.path) == before
    assert m.json("stats.json")["failed_reads"] == 0


def test_index_dir_may_be_the_source_folder(mounter, gen, tmp_path):
    """The shadow copies written into the folder of gzip shards are passed
    over as the folder's own files are: a second mount serves the same."""
    src = Src(gen, tmp_path / "src", n=400)
    m = mounter(src.path, batch_size=B, index_dir=src.path)
    _all_exact(m, src)
    m.stop()
    assert _shadows(src.path)
    m = mounter(src.path, batch_size=B, index_dir=src.path)
    assert len(m.json("schema.json")["shards"]) == len(src.shards)
    _all_exact(m, src)
    assert not _log_lines(m, "not a TFRecord")
