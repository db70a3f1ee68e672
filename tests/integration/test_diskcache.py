# SPDX-License-Identifier: Apache-2.0
"""-o disk_cache=DIR over a source behind tests/faultfs (a FUSE filesystem
that counts the bytes it serves in .faultfs-stats): the rules of
docs/contract.md (disk_cache=) and docs/formats.md ("The disk cache").

The bytes are always a local mount's. Epoch 1 after epoch 0, and a new
mount over the same DIR, read (almost) nothing from the source. The bound
holds. A cache a quarter of the data keeps a stable part: later epochs and
a new mount fetch the data less 90% of the cache, never more than without
it. Records read from a whole copy count as disk_cache_hits. Damage to
DIR's files of every kind, between mounts and under a live one, is never
served: the bytes are fetched again (and counted as corrupt). Two mounts share a DIR under concurrent readers. A daemon killed
while it writes leaves DIR usable. A DIR that cannot be the cache, or a
local source, is one line at mount, and the mount works without it."""

import glob
import os
import random
import signal
import struct
import subprocess
import threading
import time

import pytest

import oracle
from test_faults import FaultFS, _faultfs_bin
from fusemount import EXIT_DEADLINE
from helpers import read_or_errno

# about 1.7 MiB a shard with 4 shards of 20000 records: a whole block and a
# short one each
FEATURES = ["x:float:64", "y:int64:1", "t:int64:0..5", "s:bytes:1,len=1..9"]
# gzip: a record is inflated from the seek point before it, so fewer, larger
# ones (2 shards of 1.5 MiB)
GZ = dict(n=3000, shards=2, features=["x:float:256", "y:int64:1", "s:bytes:1,len=1..9"])
B = 64
MiB = 1 << 20


@pytest.fixture
def source(gen, tmp_path):
    """source(n, shards, compression, name) -> (local dir, FaultFS over it).
    Request it before `mounter`: batchfs is unmounted first at teardown."""
    if not _faultfs_bin():
        pytest.skip("tests/faultfs/faultfs is not built (scripts/build builds it)")
    made = []

    def make(n=20000, shards=4, compression="none", name="disk", features=FEATURES):
        d = tmp_path / name
        oracle.generate(gen, d, n, features, shards=shards, compression=compression, seed=7)
        f = FaultFS(d, tmp_path / (name + "-slow"), tmp_path / (name + ".ctl"),
                    tmp_path / (name + "-faultfs.log"))
        made.append(f)
        return str(d), f

    yield make
    for f in made:
        f.stop()


def served(f):
    """Bytes the source has served so far."""
    with open(os.path.join(f.mnt, ".faultfs-stats")) as fh:
        for line in fh:
            k, v = line.split()
            if k == "bytes":
                return int(v)
    raise AssertionError("no bytes in .faultfs-stats")


def dc(m):
    """The disk cache's counters in stats.json (disk_cache_* keys, without
    the prefix); None when the mount has no cache."""
    st = m.json("stats.json")
    d = {k[len("disk_cache_"):]: v for k, v in st.items() if k.startswith("disk_cache_")}
    return d or None


def tree(m, epoch):
    """Every file of an epoch of mount m: batch files and all/."""
    out = []
    ep = m.path("epoch-%04d" % epoch)
    for root, _, files in os.walk(ep):
        for f in sorted(files):
            out.append(os.path.relpath(os.path.join(root, f), m.mnt))
    return sorted(out)


def batches(m, epoch):
    return sorted(p for p in tree(m, epoch) if "/batch-" in p)


def same(m, ref, files):
    for p in files:
        assert m.read(p) == ref.read(p), "%s: not the local mount's bytes" % p


def source_bytes(local):
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(local, "part-*")))


def settle(m, want=None, deadline=15):
    """Wait for the cache's writer: until disk_cache_bytes reaches `want`,
    or stops moving. Returns the counters."""
    end = time.monotonic() + deadline
    last, still = None, 0
    while time.monotonic() < end:
        d = dc(m)
        if want is not None and d["bytes"] >= want:
            return d
        still = still + 1 if d == last else 0
        if want is None and still >= 5:
            return d
        last = d
        time.sleep(0.1)
    if want is not None:
        raise AssertionError("the cache wrote %d of %d bytes: %s" % (last["bytes"], want, last))
    return last


def cache_files(d, suffix):
    return sorted(glob.glob(os.path.join(str(d), "*" + suffix)))


def opts_for(shuffle, **kw):
    o = dict(batch_size=B, shuffle=shuffle, epochs=2)
    if shuffle == "block":  # groups of several blocks
        o.update(block_size="64K", window=4)
    o.update(kw)
    return o


# ------------------------------------------------------------ epochs, mounts


@pytest.mark.parametrize("shuffle,compression,shadow", [
    ("global", "none", "on"),
    ("block", "none", "on"),
    ("global", "gzip", "off"),
    ("block", "gzip", "off"),
    ("global", "gzip", "on"),
])
def test_epoch_1_and_a_new_mount_read_from_the_disk(source, mounter, tmp_path, shuffle,
                                                    compression, shadow):
    local, slow = source(compression=compression, **(GZ if compression == "gzip" else {}))
    opts = opts_for(shuffle, shadow=shadow)
    ref = mounter(local, index_dir=str(tmp_path / "ix-local"), **opts)
    slow.set("delay 1")
    cache = tmp_path / "dc"
    m = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(cache), **opts)
    e0, e1 = batches(m, 0), batches(m, 1)
    assert e0 == batches(ref, 0) and e1 == batches(ref, 1) and len(e0) > 40
    total = source_bytes(local)
    s = served(slow)  # the index, made at mount
    same(m, ref, e0)
    through_cache = compression == "none" or shadow == "off"
    if through_cache:
        d = settle(m, want=total)
        assert d["bytes"] == total and d["dropped"] == 0 and d["corrupt"] == 0, d
        # a dataset within the bound is read in whole blocks: each about once
        assert served(slow) - s <= total * 5 // 4, (served(slow) - s, total)
    else:  # a gzip shard's shadow copy in index_dir: the source is not read after
        d = settle(m)
        assert d["bytes"] == 0, d
    s = served(slow)
    same(m, ref, e1)
    assert served(slow) - s == 0, "epoch 1 read %d source bytes" % (served(slow) - s)
    m.stop()

    # a new mount over the same DIR (and index_dir): not one source byte
    s = served(slow)
    m2 = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(cache), **opts)
    same(m2, ref, e0 + e1)
    assert served(slow) - s == 0, "the new mount read %d source bytes" % (served(slow) - s)
    d = dc(m2)
    assert d["bytes"] == 0 and d["corrupt"] == 0, d


def test_the_bound_holds_over_a_larger_dataset(source, mounter, tmp_path):
    # 8 shards of 5.5 MiB, three times the smallest bound there is
    local, slow = source(n=40000, shards=8, features=GZ["features"])
    total = source_bytes(local)
    bound = 16 * MiB
    assert total > 2.5 * bound
    opts = opts_for("block", block_size="4M", window=2)
    ref = mounter(local, index_dir=str(tmp_path / "ix-local"), **opts)
    cache = tmp_path / "dc"
    m = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(cache),
                disk_cache_size="16M", **opts)
    assert dc(m)["limit"] == bound
    for e in range(2):
        same(m, ref, batches(m, e))
    d = settle(m)
    # the part it keeps written once, nothing else (so nothing to evict)
    assert 0.9 * bound <= d["bytes"] <= bound and d["evictions"] == 0, d
    assert d["used"] <= bound, d
    on_disk = sum(os.stat(p).st_blocks * 512 for p in cache_files(cache, ".data"))
    assert on_disk <= bound, "the .data files take %d bytes, over %d" % (on_disk, bound)


# a quarter of the data: 8 shards of about 8.5 MiB (records of 16 KiB)
QUARTER = dict(n=4200, shards=8, features=["x:float:4096", "y:int64:1"])


def _epochs_fetched(m, ref, slow, epochs):
    """Read each epoch's all.safetensors start to end (checked against the
    local mount's), the cache's writer settled after each: the source bytes
    each took."""
    out = []
    for e in range(epochs):
        s = served(slow)
        same(m, ref, ["epoch-%04d/all.safetensors" % e])
        settle(m)
        out.append(served(slow) - s)
    return out


@pytest.mark.parametrize("shuffle", ["block", "global"])
def test_a_cache_a_quarter_of_the_data_keeps_a_stable_part(source, mounter, tmp_path, shuffle):
    # least-recently-used under a cyclic scan deletes each block just before
    # the next epoch needs it: every epoch fetched the whole dataset again
    local, slow = source(**QUARTER)
    total = source_bytes(local)
    bound = 16 * MiB
    assert total >= 4 * bound
    opts = opts_for(shuffle, epochs=3, prefetch=0, readahead="8M")
    if shuffle == "block":  # one group: the stage reads each block once an epoch
        opts.update(block_size="4M", window=64)
    ref = mounter(local, index_dir=str(tmp_path / "ix-local"), **opts)
    # the same reads without the cache: what a later epoch must not pass
    plain = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache="off", **opts)
    without = _epochs_fetched(plain, ref, slow, 3)
    plain.stop()
    cache = tmp_path / "dc"
    m = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(cache),
                disk_cache_size="16M", **opts)
    got = _epochs_fetched(m, ref, slow, 3)
    d = dc(m)
    assert d["used"] <= bound and d["corrupt"] == 0, d
    # the three epochs together: the stage fetches the next epoch's first
    # blocks before the last byte of one is read (the planner reads ahead
    # into the next listed epoch), and with the cache those first blocks are
    # the kept part, read from DIR; so bytes move between epochs and only
    # the sum says what the cache saved. Epoch 0 fetches the data, epochs 1
    # and 2 each the data less 90% of the cache, times what the stage
    # itself fetches per byte of data without the cache (its own re-reads
    # are not the cache's)
    ratio = max(1.0, sum(without) / (3.0 * total))
    assert sum(got) <= (total + 2 * (total - 0.9 * bound)) * ratio, (
        "epochs 0, 1, 2 fetched %s, data %d, cache %d; without the cache %s" % (
            got, total, bound, without))
    # and save at least 90% of the cache in each later epoch against the
    # same reads without it
    assert sum(got) <= sum(without) - 2 * 0.9 * bound, (got, without, d)
    # and a new mount of the same dataset keeps the same part: nothing written
    m.stop()
    m2 = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(cache),
                 disk_cache_size="16M", **opts)
    again = _epochs_fetched(m2, ref, slow, 3)  # its last: none is fetched ahead
    assert sum(again) <= 3 * (total - 0.9 * bound) * ratio, (again, total, got, d, dc(m2))
    assert dc(m2)["bytes"] <= MiB, dc(m2)


def test_reads_of_a_whole_copy_count_as_hits(source, mounter, tmp_path, batchfs):
    # a plain shard whose copy is whole is read as a local file, past the
    # I/O stage: its reads moved no counter, and a user could not see the
    # cache serve epoch 1
    local, slow = source()
    opts = opts_for("global", prefetch=0)
    ref = mounter(local, index_dir=str(tmp_path / "ix-local"), **opts)
    m = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(tmp_path / "dc"),
                **opts)
    total = source_bytes(local)
    same(m, ref, batches(m, 0))
    d0 = settle(m, want=total)
    s = served(slow)
    same(m, ref, batches(m, 1))
    assert served(slow) - s == 0
    d1 = dc(m)
    assert d1["hits"] - d0["hits"] >= 20000, (d0, d1)  # a record each, at least
    assert d1["hit_bytes"] - d0["hit_bytes"] >= total // 2, (d0, d1)
    out = subprocess.run([batchfs, "stats", m.mnt], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=30)
    assert out.returncode == 0, out
    line = [ln for ln in out.stdout.decode().splitlines() if "disk cache hits" in ln]
    assert line and str(d1["hits"] // 1000)[:2] in line[0].replace(",", ""), (line, d1)


def _rewrite_a_record(path):
    """Change a byte of the first record's data (its CRC made right): the
    shard keeps its size, and gets a new mtime."""
    raw = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    data = bytearray(raw[12:12 + n])
    data[n // 2] ^= 0x01  # inside the floats of x
    raw[12:12 + n] = data
    raw[12 + n:16 + n] = struct.pack("<I", oracle.mask_crc(oracle.crc32c(bytes(data))))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(raw)
    os.replace(tmp, path)


def test_a_shard_changed_at_the_source_never_meets_its_old_copy(source, mounter, tmp_path):
    local, slow = source()
    opts = opts_for("global")
    cache = str(tmp_path / "dc")
    m = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=cache, **opts)
    names = batches(m, 0)
    old = {p: m.read(p) for p in names}
    settle(m, want=source_bytes(local))
    m.stop()
    shard = sorted(glob.glob(os.path.join(local, "part-*")))[1]
    size = os.path.getsize(shard)
    _rewrite_a_record(shard)
    assert os.path.getsize(shard) == size
    ref = mounter(local, index_dir=str(tmp_path / "ix-local"), **opts)
    assert any(ref.read(p) != old[p] for p in names)  # the change shows
    m2 = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=cache, **opts)
    s = served(slow)  # after the index, made again at mount
    same(m2, ref, names)
    # that shard came again, whole, and only it; the others from DIR (a
    # block asked for again before the writer has it is fetched twice)
    again = served(slow) - s
    assert size <= again <= 2 * size, (again, size)
    assert settle(m2, want=size)["bytes"] == size


# ------------------------------------------------------------------ damage


def _objects(cache):
    """The cache's objects: (.data, .blocks) paths, by name."""
    datas = cache_files(cache, ".data")
    return [(p, p[:-len(".data")] + ".blocks") for p in datas]


def _damage(cache):
    """A different kind of damage to each of four objects: a flipped byte
    in block 1, the .data cut inside block 1, the .blocks deleted, block 0
    all zeros."""
    objs = _objects(cache)
    assert len(objs) == 4, objs
    with open(objs[0][0], "r+b") as f:
        f.seek(MiB + 12345)
        b = f.read(1)
        f.seek(MiB + 12345)
        f.write(bytes([b[0] ^ 0x20]))
    os.truncate(objs[1][0], MiB + (os.path.getsize(objs[1][0]) - MiB) // 2)
    os.unlink(objs[2][1])
    with open(objs[3][0], "r+b") as f:
        f.write(bytes(MiB))


def _filled(source, mounter, tmp_path, compression="none", **kw):
    """A local mount, and a mount through faultfs whose cache holds all of
    the dataset (epoch 0 read)."""
    if compression == "gzip":  # four shards of 1.5 MiB, read in runs (a global
        # shuffle inflates from a seek point for each record: slow)
        local, slow = source(compression="gzip", n=6000, shards=4, features=GZ["features"])
        opts = opts_for("block", epochs=3, prefetch=0, **kw)
    else:
        local, slow = source()
        opts = opts_for("global", epochs=3, prefetch=0, **kw)
    ref = mounter(local, index_dir=str(tmp_path / "ix-local"), **opts)
    cache = tmp_path / "dc"
    m = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(cache), **opts)
    same(m, ref, batches(m, 0))
    total = source_bytes(local)
    settle(m, want=total)
    return local, slow, ref, m, cache, opts, total


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_damage_between_mounts_is_fetched_again(source, mounter, tmp_path, compression):
    # plain: the copies are checked whole at mount, and read as local files;
    # gzip (no shadow): every read of the cache checks the pages it touches
    local, slow, ref, m, cache, opts, total = _filled(source, mounter, tmp_path, compression,
                                                      shadow="off")
    m.stop()
    _damage(cache)
    s = served(slow)
    m2 = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(cache), **opts)
    same(m2, ref, batches(m2, 0) + batches(m2, 1))
    again = served(slow) - s
    # what was damaged, not more than the dataset (the rest came from DIR)
    assert 0 < again < total, (again, total)
    d = settle(m2, want=MiB)
    assert d["corrupt"] >= 3, d  # the flip, the cut, the zeros
    m2.stop()
    # and written again: the next mount reads nothing from the source
    s = served(slow)
    m3 = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(cache), **opts)
    same(m3, ref, batches(m3, 2))
    assert served(slow) - s == 0
    assert dc(m3)["corrupt"] == 0


def _log(m):
    with open(m.log, "rb") as f:
        return f.read().decode(errors="replace")


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_damage_under_a_live_mount_is_never_served(source, mounter, tmp_path, compression):
    # a small readahead: the stage holds little in memory, and reads DIR
    local, slow, ref, m, cache, opts, total = _filled(source, mounter, tmp_path, compression,
                                                      shadow="off", readahead="1M")
    _damage(cache)  # the shards are read from their copies by now
    s = served(slow)
    same(m, ref, batches(m, 1))
    assert served(slow) - s > 0, "nothing was fetched again"
    same(m, ref, batches(m, 2))
    assert m.proc.poll() is None
    d = dc(m)
    assert d["corrupt"] >= 3, d  # the flip, the cut, the zeros
    # one line per bad copy, not one per bad record read
    lines = [ln for ln in _log(m).splitlines() if "its bad blocks are fetched again" in ln]
    if compression == "none":
        assert 3 <= len(lines) <= 4, lines[:5] + ["... %d lines" % len(lines)]
    else:  # not a copy read as a file: bad blocks read as misses
        assert not lines, lines[:5]
    m.stop()
    # what the live mount left: used or fetched again, never wrong
    m2 = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(cache), **opts)
    same(m2, ref, batches(m2, 0))


def test_damage_under_a_live_mount_is_fetched_once(source, mounter, tmp_path):
    # a promoted copy found bad went on serving its good records and sent
    # each bad one to the source, past the stage and the cache, in every
    # epoch: now its bad blocks are fetched once, written again, and the
    # copy is read as a local file again
    local, slow, ref, m, cache, opts, total = _filled(source, mounter, tmp_path)
    _damage(cache)
    s = served(slow)
    same(m, ref, batches(m, 1))
    again = served(slow) - s
    # the damaged blocks (a flip, a cut, the zeros), not the dataset
    assert 0 < again <= 3 * MiB, (again, total)
    settle(m)
    s, h = served(slow), dc(m)["hits"]
    same(m, ref, batches(m, 2))
    assert served(slow) - s == 0, "epoch 2 read %d source bytes again" % (served(slow) - s)
    d = dc(m)
    assert d["corrupt"] >= 3, d
    # every record of epoch 2 from the copies, read as local files again
    assert d["hits"] - h >= 20000, (h, d)


# ------------------------------------------------------- mounts sharing DIR


def test_two_mounts_sharing_a_dir_under_concurrent_readers(source, mounter, tmp_path):
    local, slow = source()
    slow.set("delay 1")
    opts = opts_for("global", epochs=3)
    ref = mounter(local, index_dir=str(tmp_path / "ix-local"), **opts)
    cache = str(tmp_path / "dc")
    ms = [mounter(slow.mnt, index_dir=str(tmp_path / ("ix%d" % i)), disk_cache=cache, **opts)
          for i in range(2)]
    names = [batches(ref, e) for e in range(3)]
    want, lock = {}, threading.Lock()
    wrong, errors, done = [], [], [0]

    def expected(p):
        with lock:
            if p not in want:
                want[p] = ref.read(p)
            return want[p]

    def reader(seed):
        rng = random.Random(seed)
        end = time.monotonic() + 6
        try:
            while time.monotonic() < end:
                e = rng.randrange(3)
                p = rng.choice(names[e])
                m = ms[rng.randrange(2)]
                if m.read(p) != expected(p):
                    wrong.append(p)
                done[0] += 1
        except Exception as ex:  # noqa: BLE001 - reported below
            errors.append(repr(ex))

    ts = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]
    assert not wrong, "wrong bytes: %s" % wrong[:5]
    assert done[0] > 200, done
    d = [settle(m) for m in ms]
    assert all(x["corrupt"] == 0 for x in d), d
    assert d[0]["bytes"] + d[1]["bytes"] >= source_bytes(local), d


# -------------------------------------------------------------- a crash


def test_a_daemon_killed_while_it_writes_leaves_dir_usable(source, mounter, tmp_path):
    local, slow = source(n=40000, shards=8, features=GZ["features"])
    total = source_bytes(local)
    opts = opts_for("global", prefetch=0)
    ref = mounter(local, index_dir=str(tmp_path / "ix-local"), **opts)
    cache = str(tmp_path / "dc")
    slow.set("delay 1")
    m = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=cache, **opts)
    names = batches(m, 0)
    stop = threading.Event()

    def reader(seed):
        rng = random.Random(seed)
        while not stop.is_set():
            read_or_errno(m.path(rng.choice(names)))

    ts = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    end = time.monotonic() + 15
    while dc(m)["bytes"] < total // 4:
        assert time.monotonic() < end, dc(m)
        time.sleep(0.01)
    os.kill(m.proc.pid, signal.SIGKILL)  # in the middle of epoch 0's writes
    m.proc.wait(timeout=EXIT_DEADLINE)
    stop.set()
    for t in ts:
        t.join()
    subprocess.run(["fusermount3", "-uz", m.mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    left = sum(os.stat(p).st_blocks * 512 for p in cache_files(cache, ".data"))
    assert 0 < left < total, (left, total)

    slow.set("ok")
    s = served(slow)
    m2 = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=cache, **opts)
    same(m2, ref, batches(m2, 0))
    d = settle(m2, want=1)
    # what the killed one left was used: less than the dataset came again
    # what the killed one left was used: only the rest came again (and the
    # one block it may have been writing: the writer writes one at a time)
    again = served(slow) - s
    assert again <= total - left + MiB + 64 * 1024, (again, total, left, d)
    assert d["hit_bytes"] > 0, d


# ---------------------------------------------------- a DIR that cannot be


def _cache_lines(m):
    """The log's lines about the option (not those that merely hold a test
    folder's name)."""
    return [ln for ln in m.log_text().splitlines() if "disk_cache=" in ln or "disk_cache:" in ln]


def _works_without_it(m, ref):
    same(m, ref, batches(m, 0)[:20])
    assert dc(m) is None


def test_a_dir_that_cannot_be_the_cache_is_one_line_and_the_mount_works(source, mounter,
                                                                        tmp_path):
    local, slow = source(n=2000)
    opts = opts_for("global")
    ref = mounter(local, index_dir=str(tmp_path / "ix-local"), **opts)
    # missing, under a file
    f = tmp_path / "file"
    f.write_bytes(b"x")
    bad = str(f / "dc")
    m = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=bad, **opts)
    lines = _cache_lines(m)
    assert len(lines) == 1 and "disk_cache=" + bad in lines[0], m.log_text()
    assert "Not a directory" in lines[0], lines
    _works_without_it(m, ref)
    # read-only (root ignores a mode: a read-only bind mount)
    rw, ro = tmp_path / "rw", tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    r = subprocess.run(["mount", "--bind", str(rw), str(ro)], stderr=subprocess.PIPE)
    if r.returncode != 0:
        pytest.skip("no read-only bind mount here: %s" % r.stderr)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        m = mounter(slow.mnt, index_dir=str(tmp_path / "ix"), disk_cache=str(ro), **opts)
        lines = _cache_lines(m)
        assert len(lines) == 1 and "disk_cache=" + str(ro) in lines[0], m.log_text()
        assert "Read-only" in lines[0], lines
        _works_without_it(m, ref)
        m.stop()
    finally:
        subprocess.run(["umount", str(ro)])


def test_disk_cache_on_a_local_source_is_one_line_and_not_used(source, mounter, tmp_path):
    local, _ = source(n=2000)
    opts = opts_for("global")
    ref = mounter(local, index_dir=str(tmp_path / "ix-local"), **opts)
    cache = tmp_path / "dc"
    m = mounter(local, index_dir=str(tmp_path / "ix"), disk_cache=str(cache), **opts)
    lines = _cache_lines(m)
    assert len(lines) == 1 and "disk_cache=" + str(cache) in lines[0], m.log_text()
    assert "local" in lines[0] and "not used" in lines[0], lines
    _works_without_it(m, ref)
    assert not cache.exists() or not os.listdir(str(cache))
