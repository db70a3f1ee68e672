# SPDX-License-Identifier: Apache-2.0
"""Integration tests over real FUSE mounts of batchfs, checked against the
oracle (docs/contract.md, docs/shuffle.md): the tree, the bytes of every
layout and compression, the readers users have (numpy, PyTorch, dd, cat),
options, the index, failures, unmounting, mount(8), corrupt records and
stats. Needs root (or fuse access), /dev/fuse and fusermount3; skips
cleanly while batchfs is missing or a placeholder. Fixtures are
conftest.py's."""

import errno
import glob
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import threading

import numpy as np
import pytest

import oracle
from fusemount import EXIT_DEADLINE, MOUNT_DEADLINE, unmount, wait_for
from helpers import (USER_SCHEMA, Dataset, assert_inferred, batchfs_on_sh_path, check_batch_dir,
                     check_epoch, check_safetensors, corrupt_count, effective,
                     expect_mount_failure, fact, mount_helper_usable, numeric_leaves, read_errno,
                     walk_files)

# ---------------------------------------------------------------- tree


def test_tree_shape_and_facts(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=32, epochs=3, seed=11)
    root = sorted(os.listdir(m.mnt))
    assert root == sorted(["README.txt", "schema.json", "stats.json", "errors.txt",
                           "epoch-0000", "epoch-0001", "epoch-0002"])
    s = m.json("schema.json")
    assert fact(s, "records") == 500
    assert fact(s, "batch_size") == 32
    assert fact(s, "batches_per_epoch") == 16
    assert fact(s, "seed") == 11
    assert fact(s, "shuffle") == "global"
    assert fact(s, "rank") == 0 and fact(s, "world") == 1
    shards = fact(s, "shards")
    if isinstance(shards, list):
        assert [os.path.basename(p) for p in shards] == \
            [os.path.basename(p) for p in oracle.list_shards(ds_plain.path)]
    else:
        assert shards == 3
    assert_inferred(m, ds_plain)
    for f in ["README.txt", "schema.json", "errors.txt"]:
        assert os.stat(m.path(f)).st_size == len(m.read(f)), f
    readme = m.read("README.txt").decode()
    assert "numpy" in readme or "np.load" in readme
    assert m.read("errors.txt") == b""
    json.loads(m.read("stats.json"))
    # names: 4+ digit epochs, 6+ digit batches, ls order = numeric order
    for e in ["epoch-0000", "epoch-0001", "epoch-0002"]:
        names = sorted(os.listdir(m.path(e)))
        assert names[:2] == ["all", "all.safetensors"]  # the epoch as one array
        assert all(re.fullmatch(r"batch-\d{6,}(\.safetensors)?", n) for n in names[2:])
        assert len([n for n in names[2:] if not n.endswith(".safetensors")]) == 16
    # epoch-0003 and epoch-0123 are not listed but can be looked up by name
    for e in [3, 123]:
        p = m.path("epoch-%04d" % e)
        assert stat.S_ISDIR(os.stat(p).st_mode)
        check_epoch(m, ds_plain, B=32, seed=11, epoch=e, batches=[0, 15])
    # the nested feature name made a folder
    assert os.path.isdir(m.path("epoch-0000", "batch-000000", "m"))
    assert os.path.isfile(m.path("epoch-0000", "batch-000000", "m", "sub.npy"))
    # inode numbers and sizes are stable
    p = m.path("epoch-0001", "batch-000003", "x.npy")
    a = os.stat(p)
    m.read("epoch-0001", "batch-000003", "x.npy")
    b = os.stat(p)
    assert (a.st_ino, a.st_size) == (b.st_ino, b.st_size)


def test_modes_and_erofs(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=64)
    for root, dirs, files in os.walk(m.mnt):
        for d in dirs:
            assert stat.S_IMODE(os.stat(os.path.join(root, d)).st_mode) == 0o555, d
        for f in files:
            assert stat.S_IMODE(os.stat(os.path.join(root, f)).st_mode) == 0o444, f
    assert stat.S_IMODE(os.stat(m.mnt).st_mode) == 0o555
    bfile = m.path("epoch-0000", "batch-000000", "x.npy")
    before = m.read("epoch-0000", "batch-000000", "x.npy")

    def erofs(fn, *a):
        with pytest.raises(OSError) as e:
            fn(*a)
        assert e.value.errno == errno.EROFS, (fn, a, e.value)

    erofs(lambda: open(bfile, "r+b"))
    erofs(lambda: open(bfile, "wb"))
    erofs(lambda: open(bfile, "ab"))
    erofs(lambda: open(m.path("new.txt"), "wb"))
    erofs(lambda: open(m.path("epoch-0000", "batch-000000", "new.npy"), "xb"))
    erofs(os.mkdir, m.path("newdir"))
    erofs(os.mkdir, m.path("epoch-0000", "newdir"))
    erofs(os.unlink, bfile)
    erofs(os.unlink, m.path("README.txt"))
    erofs(os.rmdir, m.path("epoch-0000", "batch-000000"))
    erofs(os.rename, bfile, m.path("epoch-0000", "batch-000000", "z.npy"))
    erofs(os.rename, m.path("epoch-0000"), m.path("epoch-9999"))
    erofs(os.chmod, bfile, 0o644)
    erofs(os.truncate, bfile, 0)
    erofs(os.symlink, "x", m.path("link"))
    assert m.read("epoch-0000", "batch-000000", "x.npy") == before


# ---------------------------------------------------------------- bytes


def test_bytes_plain_all_batches(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=32)
    assert_inferred(m, ds_plain)
    check_epoch(m, ds_plain, B=32)
    # last batch holds the remainder
    assert np.load(m.path("epoch-0000", "batch-000015", "x.npy")).shape == (500 - 15 * 32, 4)
    check_epoch(m, ds_plain, B=32, epoch=1, batches=[0, 7])


def test_bytes_gzip_unpacked(mounter, ds_gzip):
    m = mounter(ds_gzip.path, batch_size=17, seed=99)
    assert_inferred(m, ds_gzip)
    check_epoch(m, ds_gzip, B=17, seed=99)


def test_bytes_zlib(mounter, ds_zlib):
    m = mounter(ds_zlib.path, batch_size=25, seed=3)
    assert_inferred(m, ds_zlib)
    check_epoch(m, ds_zlib, B=25, seed=3)


def test_bytes_sequence_example(mounter, ds_seq):
    m = mounter(ds_seq.path, batch_size=16, seed=2)
    assert_inferred(m, ds_seq)
    check_epoch(m, ds_seq, B=16, seed=2)
    files = walk_files(m.path("epoch-0000", "batch-000000"))
    assert "feature_lists/frames.npy" in files and "feature_lists/frames.lengths.npy" in files


def test_bytes_user_schema(mounter, ds_user, tmp_path):
    sf = tmp_path / "schema.json"
    sf.write_text(json.dumps(USER_SCHEMA))
    m = mounter(ds_user.path, batch_size=20, seed=8, schema=str(sf))
    got = oracle.normalize_schema(effective(m))
    assert got == oracle.normalize_schema(USER_SCHEMA)
    assert effective(m)["features"]["weight"].get("default") == 1.5
    check_epoch(m, ds_user, schema=USER_SCHEMA, B=20, seed=8)
    b0 = m.path("epoch-0000", "batch-000000")
    assert np.load(os.path.join(b0, "raw.npy")).dtype == np.float32
    assert np.load(os.path.join(b0, "raw.npy")).shape == (20, 2, 3)
    assert np.load(os.path.join(b0, "r16.npy")).dtype == np.int16
    assert np.load(os.path.join(b0, "ff.npy")).shape == (20, 2, 3)
    assert set(walk_files(b0)) >= {"words.values.npy", "words.row_splits.npy", "tok.lengths.npy",
                                   "nm.lengths.npy", "tags.value_splits.npy"}


def test_missing_without_default_fails_the_batch(mounter, ds_user, tmp_path):
    schema = {"features": {"weight": {"kind": "float", "shape": []}, "lbl": {"kind": "int64", "shape": []}}}
    sf = tmp_path / "schema.json"
    sf.write_text(json.dumps(schema))
    m = mounter(ds_user.path, batch_size=20, seed=8, schema=str(sf))
    bad = set(i for i, d in enumerate(ds_user.decoded) if "weight" not in d["features"])
    assert bad
    nb = oracle.batches_per_epoch(ds_user.n, 20)
    for b in range(nb):
        idx = oracle.batch_records(ds_user.n, 20, b, 8)
        p = m.path("epoch-0000", "batch-%06d" % b, "lbl.npy")
        if bad & set(idx):
            assert read_errno(p) == errno.EIO, b
        else:
            check_batch_dir(m.path("epoch-0000", "batch-%06d" % b),
                            oracle.expected_batch(ds_user.decoded, schema, idx))
    assert b"weight" in m.read("errors.txt")


REAL = [("tfx-mnist-1000.tfrecord", 100), ("ydf-adult-test.tfrecord.gz", 512),
        ("tft-seqex-data.tfrecord.gz", 2), ("tfx-seqex-eval.tfrecord.gz", 500),
        ("lingvo-wmt14-ende-wpm-32k-test.tfrecord", 16), ("ydf-toy", 3)]


@pytest.mark.parametrize("name,B", REAL, ids=[r[0] for r in REAL])
def test_bytes_real(mounter, tmp_path, name, B):
    data = oracle.testdata_dir()
    if name == "ydf-toy":
        src = tmp_path / "ydf-toy"
        src.mkdir()
        for f in ["ydf-toy-00000-of-00002.tfrecord.gz", "ydf-toy-00001-of-00002.tfrecord.gz"]:
            if not os.path.isfile(os.path.join(data, f)):
                pytest.skip("missing %s" % f)
            shutil.copy(os.path.join(data, f), src / f)
        src = str(src)
    else:
        src = os.path.join(data, name)
        if not os.path.isfile(src):
            pytest.skip("missing %s" % src)
    ds = Dataset(src, oracle.read_dataset(src), len(oracle.list_shards(src)))
    m = mounter(src, batch_size=B, seed=5)
    assert fact(m.json("schema.json"), "records") == ds.n
    assert_inferred(m, ds)
    check_epoch(m, ds, B=B, seed=5)


# ---------------------------------------------------------------- readers


def _batch_exp(ds, m, B, b, seed=0, epoch=0):
    return oracle.expected_batch(ds.decoded, effective(m), oracle.batch_records(ds.n, B, b, seed, epoch))


def test_numpy_load_and_mmap(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=50)
    for b in [0, 9]:
        exp = _batch_exp(ds_plain, m, 50, b)
        for name in ["x", "y", "tokens", "tokens.lengths", "img", "m/sub", "tags.values"]:
            p = m.path("epoch-0000", "batch-%06d" % b, name + ".npy")
            assert oracle.arrays_equal(np.load(p), exp[name]), p
            mm = np.load(p, mmap_mode="r")
            assert oracle.arrays_equal(np.array(mm), exp[name]), p
            del mm


class _NpyFiles:
    """A torch Dataset of .npy paths (module level so workers can use it)."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        import torch
        return i, torch.from_numpy(np.load(self.paths[i]))


def test_torch_dataloader_two_workers(mounter, ds_plain):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    m = mounter(ds_plain.path, batch_size=32, seed=4)
    nb = oracle.batches_per_epoch(ds_plain.n, 32)
    paths = [m.path("epoch-0000", "batch-%06d" % b, "x.npy") for b in range(nb)]
    dl = DataLoader(_NpyFiles(paths), batch_size=None, num_workers=2, shuffle=False)
    seen = set()
    for i, t in dl:
        i = int(i)
        exp = _batch_exp(ds_plain, m, 32, i, seed=4)["x"]
        assert isinstance(t, torch.Tensor)
        assert np.array_equal(t.numpy(), exp)
        seen.add(i)
    assert seen == set(range(nb))


def test_dd_and_pread_at_odd_offsets(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=40)
    exp = _batch_exp(ds_plain, m, 40, 2)
    for name in ["x", "tokens", "img", "tags.values"]:
        p = m.path("epoch-0000", "batch-000002", name + ".npy")
        want = oracle.npy_bytes(exp[name])
        r = subprocess.run(["dd", "if=" + p, "bs=7", "skip=3", "count=11", "status=none"],
                           stdout=subprocess.PIPE, check=True)
        assert r.stdout == want[21:21 + 77]
        hdr = len(want) - exp[name].nbytes
        assert hdr % 64 == 0
        r = subprocess.run(["dd", "if=" + p, "bs=1", "skip=%d" % hdr, "status=none"],
                           stdout=subprocess.PIPE, check=True)
        assert r.stdout == want[hdr:]
        r = subprocess.run(["dd", "if=" + p, "bs=4096", "iflag=skip_bytes,count_bytes",
                            "skip=13", "count=999", "status=none"], stdout=subprocess.PIPE, check=True)
        assert r.stdout == want[13:13 + 999]
        fd = os.open(p, os.O_RDONLY)
        try:
            for off, size in [(0, 1), (1, 3), (63, 2), (len(want) - 1, 10), (len(want), 5),
                              (len(want) + 100, 5), (5, 100000), (len(want) // 3, 4097)]:
                assert os.pread(fd, size, off) == want[off:off + size], (p, off, size)
        finally:
            os.close(fd)
    st = m.path("epoch-0000", "batch-000002.safetensors")
    raw = m.read("epoch-0000", "batch-000002.safetensors")
    r = subprocess.run(["dd", "if=" + st, "bs=5", "skip=9", "count=33", "status=none"],
                       stdout=subprocess.PIPE, check=True)
    assert r.stdout == raw[45:45 + 165]


def test_cat_whole_epoch(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=64, seed=1)
    pats = ["epoch-0000/batch-*/*.npy", "epoch-0000/batch-*/m/*.npy", "epoch-0000/*.safetensors"]
    files = []
    for pat in pats:
        files += sorted(glob.glob(os.path.join(m.mnt, pat)), key=os.fsencode)
    r = subprocess.run(["sh", "-c", "cat " + " ".join(pats)], cwd=m.mnt, stdout=subprocess.PIPE,
                       check=True, env=dict(os.environ, LC_ALL="C"))
    want = []
    nb = oracle.batches_per_epoch(ds_plain.n, 64)
    exps = [_batch_exp(ds_plain, m, 64, b, seed=1) for b in range(nb)]
    for f in files:
        rel = os.path.relpath(f, m.path("epoch-0000"))
        if rel.endswith(".safetensors"):
            want.append(open(f, "rb").read())
            continue
        b = int(rel.split("/")[0][len("batch-"):])
        want.append(oracle.npy_bytes(exps[b][rel.split("/", 1)[1][:-len(".npy")]]))
    assert len(files) > 3 * nb
    assert r.stdout == b"".join(want)


# ---------------------------------------------------------------- order


def test_shuffle_none_is_file_order(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=32, shuffle="none")
    assert fact(m.json("schema.json"), "shuffle") == "none"
    check_epoch(m, ds_plain, B=32, shuffle="none", batches=[0, 1, 8, 15])
    x = np.load(m.path("epoch-0000", "batch-000000", "x.npy"))
    assert np.array_equal(x[0], ds_plain.decoded[0]["features"]["x"][1])
    check_epoch(m, ds_plain, B=32, shuffle="none", epoch=1, batches=[0])


def _tree_bytes(m, epoch=0):
    base = m.path("epoch-%04d" % epoch)
    return {f: open(os.path.join(base, f), "rb").read() for f in walk_files(base)}


def test_same_seed_same_bytes_different_seed_different_order(mounter, ds_plain):
    a = mounter(ds_plain.path, batch_size=32, seed=7)
    b = mounter(ds_plain.path, batch_size=32, seed=7)
    c = mounter(ds_plain.path, batch_size=32, seed=8)
    ta, tb = _tree_bytes(a), _tree_bytes(b)
    assert ta == tb
    assert ta == _tree_bytes(a)  # two reads of the same path give the same bytes
    tc = _tree_bytes(c)
    assert set(tc) == set(ta)
    assert tc["batch-000000/x.npy"] != ta["batch-000000/x.npy"]
    check_epoch(c, ds_plain, B=32, seed=8, batches=[0, 15])
    # the same records overall, in another order
    xa = np.concatenate([np.load(a.path("epoch-0000", "batch-%06d" % i, "y.npy")) for i in range(16)])
    xc = np.concatenate([np.load(c.path("epoch-0000", "batch-%06d" % i, "y.npy")) for i in range(16)])
    assert sorted(xa.tolist()) == sorted(xc.tolist()) and xa.tolist() != xc.tolist()


def test_rank_world(mounter, ds_plain):
    B, W = 10, 3
    single = mounter(ds_plain.path, batch_size=B, seed=5)
    nb = oracle.batches_per_epoch(ds_plain.n, B)
    per_rank = nb // W
    ranks = [mounter(ds_plain.path, batch_size=B, seed=5, rank=r, world=W) for r in range(W)]
    for r, m in enumerate(ranks):
        s = m.json("schema.json")
        assert fact(s, "rank") == r and fact(s, "world") == W
        names = [n for n in os.listdir(m.path("epoch-0000")) if n.startswith("batch-") and
                 not n.endswith(".safetensors")]
        assert len(names) == per_rank
    for i in range(per_rank):
        for r, m in enumerate(ranks):
            g = i * W + r
            got = {f: open(os.path.join(m.path("epoch-0000", "batch-%06d" % i), f), "rb").read()
                   for f in walk_files(m.path("epoch-0000", "batch-%06d" % i))}
            want = {f: open(os.path.join(single.path("epoch-0000", "batch-%06d" % g), f), "rb").read()
                    for f in walk_files(single.path("epoch-0000", "batch-%06d" % g))}
            assert got == want, (r, i, g)
            assert m.read("epoch-0000", "batch-%06d.safetensors" % i) == \
                single.read("epoch-0000", "batch-%06d.safetensors" % g)
    check_epoch(ranks[1], ds_plain, B=B, seed=5, rank=1, world=W, batches=[0, per_rank - 1])


def test_features_filter(mounter, ds_plain, ds_seq):
    m = mounter(ds_plain.path, batch_size=32, features="x,tokens,tags,m/sub")
    s = effective(m)
    assert set(s["features"]) == {"x", "tokens", "tags", "m/sub"}
    assert walk_files(m.path("epoch-0000", "batch-000000")) == sorted(
        ["x.npy", "tokens.npy", "tokens.lengths.npy", "tags.values.npy", "tags.value_splits.npy",
         "tags.row_splits.npy", "m/sub.npy"])
    check_epoch(m, ds_plain, B=32, batches=[0, 15])
    m2 = mounter(ds_seq.path, batch_size=16, features="c,feature_lists/frames")
    s2 = effective(m2)
    assert set(s2["features"]) == {"c"} and set(s2["feature_lists"]) == {"frames"}
    check_epoch(m2, ds_seq, B=16, batches=[0])


def test_drop_remainder(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=32, drop_remainder=True)
    assert fact(m.json("schema.json"), "batches_per_epoch") == 15
    check_epoch(m, ds_plain, B=32, drop=True, batches=[0, 14])
    assert not os.path.exists(m.path("epoch-0000", "batch-000015"))


# ---------------------------------------------------------------- index


def test_index_reuse_and_invalidation(mounter, gen, tmp_path):
    src = tmp_path / "ds"
    oracle.generate(gen, src, 150, ["x:float:3", "t:int64:0..5"], shards=2, seed=12)
    ds = Dataset(src, oracle.read_dataset(str(src)), 2)
    idx = str(tmp_path / "own-index")

    def once(expect):
        m = mounter(str(src), batch_size=16, index_dir=idx)
        st = m.json("stats.json")
        assert st.get("index_reused") is expect, st
        check_epoch(m, ds, B=16, batches=[0, 9])
        m.stop()
        assert not os.path.ismount(m.mnt)

    once(False)
    once(True)
    shard = oracle.list_shards(str(src))[1]
    t = os.stat(shard).st_mtime + 100
    os.utime(shard, (t, t))
    once(False)
    once(True)


# ---------------------------------------------------------------- failures


BAD_OPTS = [("batch_size=abc", "batch_size"), ("batch_size=0", "batch_size"),
            ("shuffle=sideways", "shuffle"), ("on_corrupt=maybe", "on_corrupt"),
            ("compression=lz4", "compression"), ("verify=sometimes", "verify"),
            ("cache_size=12Q", "cache_size"), ("features=nosuchfeature", "nosuchfeature"),
            ("rank=3,world=2", "rank"), ("schema=/nonexistent/s.json", "/nonexistent/s.json"),
            ("epochs=-1", "epochs"), ("io_backend=fast", "io_backend")]


@pytest.mark.parametrize("opt,needle", BAD_OPTS, ids=[o for o, _ in BAD_OPTS])
def test_bad_option_fails(batchfs, ds_plain, tmp_path, index_dir, opt, needle):
    expect_mount_failure(batchfs, ds_plain.path, tmp_path / "mnt",
                         opt + ",index_dir=" + index_dir, needle)


def test_bad_sources_fail(batchfs, tmp_path, index_dir, ds_plain):
    missing = str(tmp_path / "no" / "such" / "dir")
    expect_mount_failure(batchfs, missing, tmp_path / "m1", "index_dir=" + index_dir, missing)
    junk = tmp_path / "junk.tfrecord"
    junk.write_bytes(b"this is plainly not a TFRecord file, just some text\n" * 20)
    expect_mount_failure(batchfs, junk, tmp_path / "m2", "index_dir=" + index_dir, "junk.tfrecord")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(oracle.list_shards(ds_plain.path)[0], mixed / "a.tfrecord")
    shutil.copy(junk, mixed / "b-junk.tfrecord")
    expect_mount_failure(batchfs, mixed, tmp_path / "m3", "index_dir=" + index_dir,
                         "b-junk.tfrecord")


# ---------------------------------------------------------------- unmount


def test_unmount_with_fusermount(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=32)
    m.read("epoch-0000", "batch-000000", "x.npy")
    subprocess.run(["fusermount3", "-u", m.mnt], check=True)
    assert m.proc.wait(timeout=EXIT_DEADLINE) == 0, m.log_text()
    assert not os.path.ismount(m.mnt)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_unmount_with_signal(mounter, ds_plain, sig):
    m = mounter(ds_plain.path, batch_size=32)
    m.read("epoch-0000", "batch-000001", "y.npy")
    m.proc.send_signal(sig)
    assert m.proc.wait(timeout=EXIT_DEADLINE) == 0, m.log_text()
    wait_for(lambda: not os.path.ismount(m.mnt), EXIT_DEADLINE, "unmount after signal")


def test_mount_t_fuse_batchfs(batchfs, ds_plain, tmp_path, index_dir):
    why = mount_helper_usable()
    if why:
        pytest.skip(why)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "mount.log"
    with batchfs_on_sh_path(batchfs):
        try:
            # output to a file, not a pipe: the daemon may keep inherited fds open
            with open(log, "wb") as lf:
                r = subprocess.run(["mount", "-t", "fuse.batchfs", ds_plain.path, str(mnt),
                                    "-o", "batch_size=8,index_dir=" + index_dir],
                                   stdin=subprocess.DEVNULL, stdout=lf, stderr=lf, timeout=MOUNT_DEADLINE)
            assert r.returncode == 0, log.read_text(errors="replace")
            wait_for(lambda: os.path.ismount(str(mnt)) and os.path.exists(str(mnt / "schema.json")),
                     MOUNT_DEADLINE, "mount -t fuse.batchfs")
            s = json.loads((mnt / "schema.json").read_bytes())
            assert fact(s, "batch_size") == 8
            assert np.load(str(mnt / "epoch-0000" / "batch-000000" / "x.npy")).shape == (8, 4)
        finally:
            unmount(str(mnt))
    assert not os.path.ismount(str(mnt))


# ---------------------------------------------------------------- corruption


def _bad_batch(ds, B, seed):
    pos = int(np.nonzero(oracle.perm(ds.n, seed, 0) == ds.bad_global)[0][0])
    return pos // B, pos % B


def test_on_corrupt_fail(mounter, corrupt_ds, tmp_path):
    ds, B, seed = corrupt_ds, 16, 3
    m = mounter(ds.path, batch_size=B, seed=seed, on_corrupt="fail", index_dir=str(tmp_path / "ix"))
    before = corrupt_count(m.json("stats.json"))
    bad_b, _ = _bad_batch(ds, B, seed)
    bdir = m.path("epoch-0000", "batch-%06d" % bad_b)
    assert read_errno(os.path.join(bdir, "x.npy")) == errno.EIO
    assert read_errno(m.path("epoch-0000", "batch-%06d.safetensors" % bad_b)) == errno.EIO
    lines = m.read("errors.txt").decode(errors="replace").splitlines()
    base = os.path.basename(ds.bad_shard)
    hits = [l for l in lines if base in l and re.search(r"\b37\b", l)
            and any(re.search(r"\b%d\b" % o, l) for o in ds.bad_offsets)]
    assert hits, lines
    assert corrupt_count(m.json("stats.json")) > 0
    assert corrupt_count(m.json("stats.json")) >= before
    for b in range(oracle.batches_per_epoch(ds.n, B)):
        if b != bad_b:
            idx = oracle.batch_records(ds.n, B, b, seed)
            check_batch_dir(m.path("epoch-0000", "batch-%06d" % b),
                            oracle.expected_batch(ds.decoded, effective(m), idx))
    # still failing on a second read; the mount stays up
    assert read_errno(os.path.join(bdir, "y.npy")) == errno.EIO
    assert os.path.ismount(m.mnt)


def test_on_corrupt_skip(mounter, corrupt_ds, tmp_path):
    ds, B, seed = corrupt_ds, 16, 3
    m = mounter(ds.path, batch_size=B, seed=seed, on_corrupt="skip", index_dir=str(tmp_path / "ix"))
    before = corrupt_count(m.json("stats.json"))
    bad_b, row = _bad_batch(ds, B, seed)
    bdir = m.path("epoch-0000", "batch-%06d" % bad_b)
    x = np.load(os.path.join(bdir, "x.npy"))
    y = np.load(os.path.join(bdir, "y.npy"))
    idx = oracle.batch_records(ds.n, B, bad_b, seed)
    exp = oracle.expected_batch(ds.decoded, effective(m), idx)
    assert x.shape == exp["x"].shape and y.shape == exp["y"].shape
    keep = [i for i in range(len(idx)) if i != row]
    assert np.array_equal(x[keep], exp["x"][keep]) and np.array_equal(y[keep], exp["y"][keep])
    # the replacement is some other valid record of the dataset
    others = {tuple(d["features"]["x"][1].tolist()) for i, d in enumerate(ds.decoded) if i != ds.bad_global}
    assert tuple(x[row].tolist()) in others
    check_safetensors(m.path("epoch-0000", "batch-%06d.safetensors" % bad_b),
                      {"x": x, "y": y})
    after = corrupt_count(m.json("stats.json"))
    assert after > before or after > 0


# ---------------------------------------------------------------- stats


def test_stats_change_after_reads(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=32, seed=6)
    s1 = numeric_leaves(m.json("stats.json"))
    for b in range(5):
        m.read("epoch-0000", "batch-%06d" % b, "x.npy")
        m.read("epoch-0000", "batch-%06d.safetensors" % b)
    s2 = numeric_leaves(m.json("stats.json"))
    assert s1 and s2
    assert any(s2.get(k, v) > v for k, v in s1.items()), (s1, s2)


def test_stats_json_is_only_its_json(mounter, ds_plain):
    """stats.json reads as its JSON and nothing after the closing brace
    (it was padded with spaces to 4,096 bytes), by cat, by Python's read()
    and by a reader reading it over and over while other threads read
    batches (its counters, and its length, change between the reader's
    read(2) calls); stat says its size."""
    m = mounter(ds_plain.path, batch_size=32, seed=6)
    path = m.path("stats.json")
    for data in (subprocess.run(["cat", path], check=True, stdout=subprocess.PIPE).stdout,
                 m.read("stats.json")):
        assert data.endswith(b"}\n"), data[-40:]
        assert data.rindex(b"}") == len(data) - 2
        json.loads(data)
    size = os.stat(path).st_size
    assert abs(size - len(m.read("stats.json"))) <= 2, size  # uptime may gain a digit
    bad = []

    def stats_reader():
        for _ in range(60):
            d = m.read("stats.json")
            if not d.endswith(b"}\n") or b"\0" in d:
                bad.append(d[-40:])
            else:
                json.loads(d)

    def batch_reader():
        for b in range(8):
            m.read("epoch-0000", "batch-%06d.safetensors" % b)

    threads = [threading.Thread(target=f) for f in (stats_reader, batch_reader, batch_reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, bad[:3]


@pytest.mark.parametrize("backend", ["threads", "io_uring"])
def test_io_backend_option(mounter, ds_plain, backend):
    """-o io_backend= asks the I/O stage for a backend (it was the
    environment's BATCHFS_IO_BACKEND): stats.json says it was asked for."""
    m = mounter(ds_plain.path, batch_size=32, seed=6, io_depth=8, io_backend=backend)
    check_epoch(m, ds_plain, B=32, seed=6, batches=[0, 3])
    st = m.json("stats.json")
    assert st["io_backend"] == backend, st
    assert st["io_backend_reason"] == backend + ": asked for", st
