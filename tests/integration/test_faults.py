# SPDX-License-Identifier: Apache-2.0
"""Faults under a mount: the source changing, readers and the daemon being
killed, lazy unmount with readers active, a failing or slow source disk
(tests/faultfs/faultfs, a passthrough FUSE filesystem switched by a control
file). The rule everywhere: a batch read returns its exact bytes or fails
with EIO; never wrong bytes; the mount keeps serving what it can."""

import errno
import os
import signal
import subprocess
import time

import pytest

import oracle
from fusemount import EXIT_DEADLINE
from helpers import batch_files, read_or_errno

B = 8
FEATURES = ["x:float:4", "y:int64:1", "t:int64:0..5", "s:bytes:1,len=1..9"]


class Src:
    """A generated dataset in its own directory, with the byte range of
    every record and the decoded records (taken before any change)."""

    def __init__(self, gen, path, n=400, shards=4, seed=41):
        oracle.generate(gen, path, n, FEATURES, shards=shards, seed=seed)
        self.path = str(path)
        self.shards = oracle.list_shards(self.path)
        self.decoded = oracle.read_dataset(self.path)
        self.n = len(self.decoded)
        self.where = []  # global record -> (shard index, first byte, end byte)
        for si, sh in enumerate(self.shards):
            for r in oracle.scan_records(sh):
                self.where.append((si, r["offset"], r["data_offset"] + r["length"] + 4))
        assert len(self.where) == self.n

    def records_hit(self, shard, lo, hi):
        """Global records of shard index `shard` with a byte in [lo, hi)."""
        return {g for g, (s, a, b) in enumerate(self.where) if s == shard and a < hi and b > lo}

    def batches(self, seed=0, epoch=0):
        return [oracle.batch_records(self.n, B, b, seed, epoch)
                for b in range(oracle.batches_per_epoch(self.n, B))]


def _files(m, src, b, epoch=0, seed=0):
    return batch_files(m, src, B, b, epoch, seed)


def _check_batches(m, src, bad_records, batches):
    """Each batch touching a bad record fails with EIO on every file; every
    other batch reads exactly. Returns (#failed batches, #good batches)."""
    nbad = ngood = 0
    for b in batches:
        affected = bool(set(oracle.batch_records(src.n, B, b)) & bad_records)
        for path, want in _files(m, src, b):
            got = read_or_errno(path)
            if affected:
                assert got == errno.EIO, "%s: affected batch read %r, expected EIO" % (
                    path, got if isinstance(got, int) else "%d bytes (%s)" % (
                        len(got), "the old bytes" if got == want else "WRONG bytes"))
            else:
                assert isinstance(got, bytes), "%s: unaffected batch failed: %s" % (path, got)
                assert got == want, "%s: wrong bytes" % path
        nbad += affected
        ngood += not affected
    return nbad, ngood


def _errors_lines(m, needle):
    return [l for l in m.read("errors.txt").decode(errors="replace").splitlines() if needle in l]


# ---------------------------------------------------------------- the source changes


def test_shard_truncated_under_mount(mounter, gen, tmp_path):
    src = Src(gen, tmp_path / "src")
    m = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix"), threads=1, prefetch=2)
    nb = oracle.batches_per_epoch(src.n, B)
    # batches 0 and 1 read before the change, and 2 and 3 prefetched after
    # them, may stay cached (with their old, right bytes): the check skips them
    for b in (0, 1):
        for path, want in _files(m, src, b):
            assert read_or_errno(path) == want
    warm = [0, 1, 2, 3]
    victim = src.shards[2]
    size = os.path.getsize(victim)
    os.truncate(victim, size // 2)
    bad = src.records_hit(2, size // 2, size)
    nbad, ngood = _check_batches(m, src, bad, [b for b in range(nb) if b not in warm])
    assert nbad > 0 and ngood > 0, (nbad, ngood)
    assert _errors_lines(m, os.path.basename(victim)), m.read("errors.txt")
    assert os.path.ismount(m.mnt) and m.proc.poll() is None


def _rewrite(src, shard, every=7):
    """Shard `shard` with the payload of every `every`-th record flipped:
    (new bytes, the global records changed)."""
    victim = src.shards[shard]
    raw = bytearray(open(victim, "rb").read())
    recs = oracle.scan_records(victim)
    base = min(src.records_hit(shard, 0, len(raw)))
    bad = set()
    for k in range(0, len(recs), every):
        r = recs[k]
        for i in range(r["data_offset"], r["data_offset"] + r["length"]):
            raw[i] ^= 0xA5
        bad.add(base + k)
    return bytes(raw), bad


def test_shard_rewritten_in_place_under_mount(mounter, gen, tmp_path):
    """Same size, different bytes, same inode: the payloads of some records
    of shard 1 are overwritten; their CRCs no longer match."""
    src = Src(gen, tmp_path / "src")
    m = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix"))
    nb = oracle.batches_per_epoch(src.n, B)
    raw, bad = _rewrite(src, 1)
    with open(src.shards[1], "r+b") as f:
        f.write(raw)
    nbad, ngood = _check_batches(m, src, bad, range(nb))
    assert nbad > 0 and ngood > 0, (nbad, ngood)
    assert _errors_lines(m, os.path.basename(src.shards[1])), m.read("errors.txt")


def test_shard_replaced_under_mount(mounter, gen, tmp_path):
    """A new file renamed over a shard (an editor's save): the daemon may
    keep reading the file it opened, or fail; it never mixes the two."""
    src = Src(gen, tmp_path / "src")
    m = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix"))
    nb = oracle.batches_per_epoch(src.n, B)
    raw, bad = _rewrite(src, 1)
    tmp = src.shards[1] + ".new"
    with open(tmp, "wb") as f:
        f.write(raw)
    os.replace(tmp, src.shards[1])
    for b in range(nb):
        affected = bool(set(oracle.batch_records(src.n, B, b)) & bad)
        for path, want in _files(m, src, b):
            got = read_or_errno(path)
            assert got == want or (affected and got == errno.EIO), (path, affected, got)


# ---------------------------------------------------------------- killed processes


def test_reader_killed_mid_read(mounter, gen, tmp_path):
    src = Src(gen, tmp_path / "src", n=2000, shards=2)
    m = mounter(src.path, batch_size=B, epochs=2, index_dir=str(tmp_path / "ix"), cache_size="64K",
                threads=1, prefetch=1)
    script = ("import os,sys\n"
              "paths=sys.argv[1:]\n"
              "while True:\n"
              "    for p in paths:\n"
              "        fd=os.open(p,os.O_RDONLY)\n"
              "        os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)\n"
              "        while os.read(fd,1<<16): pass\n"
              "        os.close(fd)\n")
    paths = [m.path("epoch-%04d" % e, "batch-%06d.safetensors" % b) for e in range(2) for b in range(0, 250, 3)]
    for round_ in range(6):
        procs = [subprocess.Popen(["/usr/bin/python3",
                                   "-c", script] + paths[k::4]) for k in range(4)]
        time.sleep(0.3 + 0.1 * round_)
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait(timeout=EXIT_DEADLINE)
    assert m.proc.poll() is None, m.log_text()
    for b in (0, 3, 100, 249):
        for path, want in _files(m, src, b):
            assert read_or_errno(path) == want, path
    assert read_or_errno(m.path("epoch-0001", "batch-000003.safetensors")) == \
        _files(m, src, 3, epoch=1)[-1][1]


def test_killed_daemon_leaves_a_dead_mount_fusermount_recovers(mounter, gen, tmp_path):
    src = Src(gen, tmp_path / "src", n=64, shards=1)
    m = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix"))
    assert read_or_errno(m.path("epoch-0000", "batch-000000.safetensors")) == _files(m, src, 0)[-1][1]
    m.proc.kill()
    m.proc.wait(timeout=EXIT_DEADLINE)
    # (names and attributes are cached by the kernel: ask for fresh ones)
    for probe in (lambda: os.statvfs(m.mnt), lambda: os.stat(m.path("no-such-name"))):
        with pytest.raises(OSError) as ei:
            probe()
        assert ei.value.errno == errno.ENOTCONN
    r = subprocess.run(["fusermount3", "-u", m.mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.returncode == 0, r.stderr
    assert not os.path.ismount(m.mnt)
    assert os.listdir(m.mnt) == []
    # and the same mountpoint mounts again
    m2 = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix"))
    assert read_or_errno(m2.path("epoch-0000", "batch-000001.safetensors")) == _files(m2, src, 1)[-1][1]


def test_lazy_unmount_with_active_readers(mounter, gen, tmp_path):
    src = Src(gen, tmp_path / "src", n=1000, shards=2)
    m = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix"), cache_size="128K")
    script = ("import os,sys,time\n"
              "paths=sys.argv[1:]; fails=0; end=time.time()+60\n"
              "while fails < 50 and time.time() < end:\n"
              "    for p in paths:\n"
              "        try:\n"
              "            with open(p,'rb') as f: f.read()\n"
              "        except OSError:\n"
              "            fails+=1; time.sleep(0.01)\n")
    paths = [m.path("epoch-0000", "batch-%06d.safetensors" % b) for b in range(125)]
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", script] + paths[k::4]) for k in range(4)]
    time.sleep(1.0)
    assert all(p.poll() is None for p in procs)
    r = subprocess.run(["fusermount3", "-uz", m.mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.returncode == 0, r.stderr
    assert not os.path.ismount(m.mnt)
    for p in procs:
        p.wait(timeout=90)
    m.proc.wait(timeout=EXIT_DEADLINE)
    assert m.proc.returncode == 0, m.log_text()


# ---------------------------------------------------------------- failing / slow source disk


def _faultfs_bin():
    p = os.environ.get("BFS_FAULTFS") or os.path.join(
        os.path.dirname(os.path.abspath(oracle.batchfs_path())), "tests", "faultfs", "faultfs")
    return p if os.access(p, os.X_OK) else None


class FaultFS:
    """tests/faultfs over src at mnt: libfuse's default max_background
    unless args say otherwise (e.g. "--max-background=256")."""

    def __init__(self, src, mnt, ctl, log, args=()):
        self.mnt, self.ctl = str(mnt), str(ctl)
        self.set("ok")
        os.makedirs(self.mnt, exist_ok=True)
        self.logf = open(log, "wb")
        self.proc = subprocess.Popen([_faultfs_bin(), str(src), self.mnt, self.ctl, *args],
                                     stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf)
        end = time.monotonic() + 20
        while not os.path.ismount(self.mnt):
            assert self.proc.poll() is None and time.monotonic() < end, open(log).read()
            time.sleep(0.02)

    def set(self, line):
        tmp = self.ctl + ".tmp"
        with open(tmp, "w") as f:
            f.write(line + "\n")
        os.replace(tmp, self.ctl)

    def stop(self):
        for flags in ("-u", "-uz"):
            if os.path.ismount(self.mnt):
                subprocess.run(["fusermount3", flags, self.mnt], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        try:
            self.proc.wait(timeout=EXIT_DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.logf.close()


@pytest.fixture
def faulty(batchfs, gen, tmp_path):
    """(Src, FaultFS): a dataset served through faultfs. Request it before
    `mounter`, so that batchfs is unmounted first at teardown."""
    if not _faultfs_bin():
        pytest.skip("tests/faultfs/faultfs is not built (scripts/build builds it)")
    src = Src(gen, tmp_path / "disk", n=400, shards=4)
    f = FaultFS(src.path, tmp_path / "faultmnt", tmp_path / "control", tmp_path / "faultfs.log")
    src.path = f.mnt
    src.shards = [os.path.join(f.mnt, os.path.basename(s)) for s in src.shards]
    yield src, f
    f.stop()


def test_failing_source_disk_then_recovery(faulty, mounter, tmp_path):
    src, f = faulty
    m = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix"), prefetch=0)
    nb = oracle.batches_per_epoch(src.n, B)
    bad = src.records_hit(1, 0, 1 << 60)  # every record of shard 1
    f.set("eio part-00001")
    nbad, ngood = _check_batches(m, src, bad, range(nb))
    assert nbad > 0 and ngood > 0, (nbad, ngood)
    assert _errors_lines(m, "part-00001"), m.read("errors.txt")
    stats = m.json("stats.json")
    assert stats["failed_reads"] > 0, stats
    # the disk recovers: the failed batches were not cached, they read now
    f.set("ok")
    nbad, ngood = _check_batches(m, src, set(), range(nb))
    assert nbad == 0 and ngood == nb
    assert m.proc.poll() is None


def test_slow_source_disk(faulty, mounter, tmp_path):
    src, f = faulty
    m = mounter(src.path, batch_size=B, index_dir=str(tmp_path / "ix"), prefetch=0)
    f.set("delay 150")
    t0 = time.monotonic()
    for path, want in _files(m, src, 5):
        assert read_or_errno(path) == want, path
    assert time.monotonic() - t0 >= 0.15  # the batch really came from the slow disk
    # a reader killed while its batch is stuck on the slow disk
    p = subprocess.Popen(["cat", m.path("epoch-0000", "batch-000007.safetensors")],
                         stdout=subprocess.DEVNULL)
    time.sleep(0.2)
    p.kill()
    p.wait(timeout=EXIT_DEADLINE)
    f.set("ok")
    for b in (7, 8):
        for path, want in _files(m, src, b):
            assert read_or_errno(path) == want, path
    assert m.proc.poll() is None
