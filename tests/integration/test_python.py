# SPDX-License-Identifier: Apache-2.0
"""The Python module `batchfs` (python/batchfs, docs/contract.md "The
Python module") against real mounts: mount() as a context manager, Mount's schema,
stats and epochs, numpy.load_batch from .npy folders, .safetensors, all/ and
all.safetensors, torch.BatchDataset under DataLoader(num_workers=2) with
set_epoch, and `python3 -m batchfs` behaving as the binary. Every array is
checked against the oracle. The module is taken from the source tree
(BFS_PYTHONPATH overrides, e.g. an installed copy)."""

import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import oracle
from fusemount import unmount, wait_for
from helpers import MAIN, make_dataset

PYDIR = os.environ.get("BFS_PYTHONPATH") or os.path.join(oracle.repo_root(), "python")
sys.path.insert(0, PYDIR)

import batchfs as bfs  # noqa: E402
import batchfs.numpy as bnp  # noqa: E402


@pytest.fixture(scope="module")
def ds_py(gen, work):
    return make_dataset(gen, work / "python", 300, MAIN, shards=2, seed=7)


@pytest.fixture(scope="module")
def ds_fixed(gen, work):
    return make_dataset(gen, work / "python_fixed", 200,
                        ["x:float:3", "y:int64:1", "b:bytes:1,len=5"], shards=2, seed=8)


@pytest.fixture(autouse=True)
def _binary(batchfs, monkeypatch):
    monkeypatch.setenv("BATCHFS", batchfs)


def _effective(m):
    s = m.schema
    return {"features": s.get("features", {}), "feature_lists": s.get("feature_lists") or {}}


def _expected(ds, m, B, b, seed=0, epoch=0):
    return oracle.expected_batch(ds.decoded, _effective(m), oracle.batch_records(ds.n, B, b, seed, epoch))


def _same(got, exp, what):
    assert sorted(got) == sorted(exp), "%s: tensors %s, want %s" % (what, sorted(got), sorted(exp))
    for k in exp:
        g = np.asarray(got[k])
        assert oracle.arrays_equal(g, exp[k]), "%s: tensor %s" % (what, k)


def test_module_is_the_source_tree_one():
    assert os.path.dirname(os.path.dirname(os.path.abspath(bfs.__file__))) == os.path.abspath(PYDIR)
    for obj in (bfs, bfs.mount, bfs.Mount, bfs.Mount.stats, bfs.Mount.epoch, bnp.load_batch,
                bfs.find_binary):
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20, obj


def test_find_binary_order(batchfs, monkeypatch, tmp_path):
    assert bfs.find_binary() == batchfs
    monkeypatch.setenv("BATCHFS", str(tmp_path / "nothing"))
    with pytest.raises(bfs.BatchfsError, match="nothing"):
        bfs.find_binary()
    monkeypatch.delenv("BATCHFS")
    fake = tmp_path / "bin" / "batchfs"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    got = bfs.find_binary()
    # the build tree beside python/ comes before PATH when there is one
    tree = [os.path.join(oracle.repo_root(), "build", "batchfs"), os.path.join(oracle.repo_root(), "batchfs")]
    tree = [p for p in tree if os.access(p, os.X_OK)]
    if PYDIR == os.path.join(oracle.repo_root(), "python") and tree:
        assert got == tree[0]
    else:
        assert got == str(fake)


def test_format_options():
    assert bfs.format_options({"batch_size": 8, "drop_remainder": True, "seed": None,
                               "verify": False, "features": ["x", "y"]}) == \
        "batch_size=8,drop_remainder,features=x,y"
    with pytest.raises(ValueError):
        bfs.format_options({"features": "x,y"})


def test_mount_context_manager(ds_py, index_dir, tmp_path):
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    B = 32
    with bfs.mount(ds_py.path, mnt, batch_size=B, seed=5, epochs=2, index_dir=index_dir) as m:
        assert isinstance(m, bfs.Mount) and os.path.ismount(mnt)
        assert m.schema["batch_size"] == B and m.schema["records"] == ds_py.n
        nb = oracle.batches_per_epoch(ds_py.n, B)
        assert [e.index for e in m.epochs()] == [0, 1]
        assert len(m.epoch(1)) == nb == m.schema["batches_per_epoch"]
        before = m.stats()
        for e in (0, 1):
            for b in (0, nb - 1):
                exp = _expected(ds_py, m, B, b, seed=5, epoch=e)
                _same(bnp.load_batch(m.epoch(e).batch_path(b)), exp, "safetensors %d/%d" % (e, b))
                _same(bnp.load_batch(m.epoch(e).batch_path(b, safetensors=False)), exp,
                      "npy dir %d/%d" % (e, b))
                _same(bnp.load_batch(m.epoch(e).batch_path(b), mmap=True), exp, "mmap %d/%d" % (e, b))
        after = m.stats()
        assert after["reads"] > before["reads"] and after["bytes_read"] > before["bytes_read"]
        # epochs beyond the listed ones are looked up by name
        exp = _expected(ds_py, m, B, 3, seed=5, epoch=7)
        _same(bnp.load_batch(m.epoch(7).batch_path(3)), exp, "epoch 7")
        assert m.errors() == []
    assert not os.path.ismount(mnt)
    assert os.path.isdir(mnt)  # given by the caller: kept


def _daemon_of(mnt):
    """The pid of this process's batchfs child serving mnt."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if int(st[st.rindex(")") + 2:].split()[1]) == os.getpid() and os.fsencode(mnt) in argv:
            return int(d)
    return None


def test_leaving_a_mount_never_waits_forever_for_its_daemon(ds_py, index_dir, tmp_path):
    """A daemon that exits in time: nothing said. One that does not (here
    stopped with SIGSTOP, as a daemon stuck in its exit is): after
    exit_timeout it is reported in one line, a BatchfsWarning, and killed;
    the mount is gone."""
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with bfs.mount(ds_py.path, mnt, batch_size=32, index_dir=index_dir) as m:
            bnp.load_batch(m.epoch(0).batch_path(0))
        assert not [w for w in said if issubclass(w.category, bfs.BatchfsWarning)]
        assert not os.path.ismount(mnt)
        with bfs.mount(ds_py.path, mnt, batch_size=32, index_dir=index_dir,
                       exit_timeout=2) as m:
            bnp.load_batch(m.epoch(0).batch_path(0))
            pid = _daemon_of(mnt)
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            t0 = time.monotonic()
        took = time.monotonic() - t0
    ours = [str(w.message) for w in said if issubclass(w.category, bfs.BatchfsWarning)]
    assert len(ours) == 1 and "\n" not in ours[0], ours
    assert ours[0].startswith("batchfs: the daemon of %s (pid %d) had not exited 2 s after its "
                              "unmount: killed it" % (mnt, pid)), ours
    assert 2 <= took < 5, took
    assert not os.path.exists("/proc/%d" % pid) or \
        open("/proc/%d/stat" % pid).read().split(") ")[1][0] in "ZX"
    assert not os.path.ismount(mnt)


def test_mount_features_and_temporary_mountpoint(ds_py, index_dir):
    with bfs.mount(ds_py.path, batch_size=16, features=["x", "tokens"], index_dir=index_dir) as m:
        mnt = m.path
        assert sorted(m.schema["features"]) == ["tokens", "x"]
        got = bnp.load_batch(m.epoch(0).batch_path(2))
        assert sorted(got) == ["tokens", "tokens.lengths", "x"]
        _same(got, _expected(ds_py, m, 16, 2), "features=x,tokens")
        # load_batch's own filter keeps a feature with its companions
        assert sorted(bnp.load_batch(m.epoch(0).batch_path(2), features=["tokens"])) == \
            ["tokens", "tokens.lengths"]
    assert not os.path.exists(mnt)


def test_mount_failure_carries_the_daemon_message(ds_py, index_dir, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with pytest.raises(bfs.BatchfsError, match="batch_size"):
        with bfs.mount(ds_py.path, mnt, batch_size="banana", index_dir=index_dir):
            pass
    assert not os.path.ismount(str(mnt))
    with pytest.raises(bfs.BatchfsError, match="no-such-source"):
        with bfs.mount(str(tmp_path / "no-such-source"), mnt, index_dir=index_dir):
            pass


def test_mount_class_on_existing_mount_and_errors(ds_py, index_dir, tmp_path):
    with pytest.raises(bfs.BatchfsError, match="not a batchfs mount"):
        bfs.Mount(tmp_path)
    with bfs.mount(ds_py.path, batch_size=10, rank=1, world=2, index_dir=index_dir) as m:
        again = bfs.Mount(m.path)
        assert again.schema == m.schema and "reads" in again.stats()
        # rank R's batch i is global batch i*W+R
        exp = oracle.expected_batch(ds_py.decoded, _effective(m),
                                    oracle.batch_records(ds_py.n, 10, 3, 0, 0, "global", 1, 2))
        _same(bnp.load_batch(again.epoch(0).batch_path(3)), exp, "rank=1,world=2")
        assert len(again.epoch(0)) == oracle.local_batches(ds_py.n, 10, False, 2)
    # a rank-RRRR/ folder (world=W without rank) reads schema.json from the top
    top = tmp_path / "fake"
    (top / "rank-0001" / "epoch-0000").mkdir(parents=True)
    (top / "schema.json").write_text('{"batch_size": 4}')
    r = bfs.Mount(top / "rank-0001")
    assert r.schema == {"batch_size": 4} and r.epoch(0).path == str(top / "rank-0001" / "epoch-0000")


def test_load_batch_whole_epoch(ds_py, ds_fixed, index_dir):
    B = 24
    for ds in (ds_fixed, ds_py):
        with bfs.mount(ds.path, batch_size=B, seed=2, index_dir=index_dir) as m:
            ep = m.epoch(0)
            recs = oracle.epoch_records(ds.n, B, seed=2)
            exp = oracle.expected_batch(ds.decoded, _effective(m), recs)
            _same(bnp.load_batch(ep.all_path), exp, "all.safetensors")
            _same(bnp.load_batch(ep.all_dir), exp, "all/")
            _same(bnp.load_batch(ep.all_dir, mmap=True), exp, "all/ mmap")
            if ds is ds_fixed:  # fixed shapes: the batches concatenated
                parts = [bnp.load_batch(p) for p in ep.batch_paths()]
                cat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
                _same(bnp.load_batch(ep.all_path), cat, "all vs batches")


def test_load_batch_rejects_a_bad_file(tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(ValueError, match="bad.safetensors"):
        bnp.load_batch(p)
    p.write_bytes(b"\xff" * 8)
    with pytest.raises(ValueError, match="past the end"):
        bnp.load_batch(p)


def test_torch_batch_dataset_dataloader(ds_py, index_dir):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    import batchfs.torch as bt
    B = 20
    with bfs.mount(ds_py.path, batch_size=B, seed=9, epochs=3, index_dir=index_dir) as m:
        nb = oracle.batches_per_epoch(ds_py.n, B)
        ds = bt.BatchDataset(m, features=["x", "tokens", "tags"])
        assert len(ds) == nb
        dl = DataLoader(ds, batch_size=None, num_workers=2)
        seen = {}
        for e in (0, 2):
            ds.set_epoch(e)
            got = list(dl)
            assert len(got) == nb
            for b, item in enumerate(got):
                assert all(isinstance(t, torch.Tensor) for t in item.values())
                exp = _expected(ds_py, m, B, b, seed=9, epoch=e)
                exp = {k: v for k, v in exp.items() if k in bnp.select(exp, ["x", "tokens", "tags"])}
                _same({k: t.numpy() for k, t in item.items()}, exp, "torch epoch %d batch %d" % (e, b))
            seen[e] = got[0]["x"]
        assert not torch.equal(seen[0], seen[2])  # set_epoch changed the order
        # a path works as well as a Mount; negative indices count from the end
        ds2 = bt.BatchDataset(m.path, epoch=1)
        _same({k: t.numpy() for k, t in ds2[-1].items()}, _expected(ds_py, m, B, nb - 1, seed=9, epoch=1),
              "path, last batch")
        with pytest.raises(IndexError):
            ds2[nb]


def _py_env(batchfs):
    env = dict(os.environ, PYTHONPATH=PYDIR, BATCHFS=batchfs)
    return env


def test_python_dash_m_is_the_binary(batchfs, ds_py, index_dir, tmp_path):
    env = _py_env(batchfs)
    cases = [["--version"], ["--help"], [], [ds_py.path, str(tmp_path), "-o", "batch_size=0"],
             ["schema", "--index-dir", index_dir, ds_py.path], ["inspect", "--records", "1", ds_py.path]]
    for args in cases:
        a = subprocess.run([sys.executable, "-m", "batchfs"] + args, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        b = subprocess.run([batchfs] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr), args
    # and it mounts (daemonized, like the binary)
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    r = subprocess.run([sys.executable, "-m", "batchfs", ds_py.path, mnt, "-o",
                        "batch_size=50,index_dir=" + index_dir], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    try:
        assert r.returncode == 0, r.stderr
        assert os.path.ismount(mnt)
        m = bfs.Mount(mnt)
        assert m.schema["batch_size"] == 50
        _same(bnp.load_batch(m.epoch(0).batch_path(1)), _expected(ds_py, m, 50, 1), "python -m mount")
    finally:
        unmount(mnt)
        wait_for(lambda: not os.path.ismount(mnt), 20, "unmount")


def test_python_dash_m_without_binary(tmp_path):
    env = dict(os.environ, PYTHONPATH=PYDIR, BATCHFS=str(tmp_path / "missing"))
    r = subprocess.run([sys.executable, "-m", "batchfs", "--version"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert r.returncode == 127 and b"missing" in r.stderr
