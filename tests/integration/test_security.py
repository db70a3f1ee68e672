# SPDX-License-Identifier: Apache-2.0
"""What a mount exposes, and to whom: symlinks in SOURCE that lead outside
it, allow_other, default_permissions (0444 files, 0555 dirs), and names that
try to reach anything but the batch tree."""

import errno
import os
import re
import shutil
import stat
import subprocess
import tempfile

import pytest

import oracle
from fusemount import BatchfsMount, mount_opts
from helpers import expect_mount_failure


# ---------------------------------------------------------------- symlinks


@pytest.fixture
def linked_src(ds_plain, tmp_path):
    """SOURCE/ holding a.tfrecord (a real shard) and b.tfrecord, a symlink to
    a shard outside SOURCE."""
    shards = oracle.list_shards(ds_plain.path)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(shards[1], outside / "secret.tfrecord")
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(shards[0], src / "a.tfrecord")
    os.symlink(os.path.relpath(outside / "secret.tfrecord", src), src / "b.tfrecord")
    return src, shards


def test_symlink_leading_outside_is_refused(batchfs, linked_src, tmp_path, index_dir):
    src, _ = linked_src
    expect_mount_failure(batchfs, src, tmp_path / "mnt", "index_dir=" + index_dir, "b.tfrecord")
    # an absolute link is refused too
    os.unlink(src / "b.tfrecord")
    os.symlink(str(tmp_path / "outside" / "secret.tfrecord"), src / "b.tfrecord")
    expect_mount_failure(batchfs, src, tmp_path / "mnt", "index_dir=" + index_dir, "b.tfrecord")


def test_symlink_outside_needs_follow_symlinks(mounter, linked_src, tmp_path):
    src, shards = linked_src
    m = mounter(str(src), batch_size=32, follow_symlinks=True, index_dir=str(tmp_path / "ix"))
    want = len(oracle.read_records(shards[0])) + len(oracle.read_records(shards[1]))
    s = m.json("schema.json")
    assert s.get("records", s.get("facts", {}).get("records")) == want


def test_symlink_inside_source_is_fine(mounter, ds_plain, tmp_path):
    shards = oracle.list_shards(ds_plain.path)
    src = tmp_path / "src"
    (src / "real").mkdir(parents=True)
    shutil.copy(shards[0], src / "real" / "x.tfrecord")
    os.symlink("real/x.tfrecord", src / "a.tfrecord")
    m = mounter(str(src), batch_size=32, index_dir=str(tmp_path / "ix"))
    s = m.json("schema.json")
    assert s.get("records", s.get("facts", {}).get("records")) == len(oracle.read_records(shards[0]))


# ---------------------------------------------------------------- who may read


def _as_nobody(*cmd):
    for wrap in (["runuser", "-u", "nobody", "--"],
                 ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]):
        if shutil.which(wrap[0]):
            return subprocess.run(wrap + list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  timeout=60)
    pytest.skip("neither runuser nor setpriv")


@pytest.fixture
def public_dir():
    """A directory that user nobody can traverse (pytest's tmp is 0700)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to user nobody")
    d = tempfile.mkdtemp(prefix="bfs-sec-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    for name in os.listdir(d):
        p = os.path.join(d, name)
        if os.path.ismount(p):
            subprocess.run(["fusermount3", "-uz", p], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    shutil.rmtree(d, ignore_errors=True)


def _mount_public(batchfs, src, d, index_dir, **opts):
    os.makedirs(os.path.join(d, "mnt"), mode=0o755, exist_ok=True)
    m = BatchfsMount(batchfs, src, os.path.join(d, "mnt"), mount_opts(index_dir, **opts),
                     os.path.join(d, "log"))
    return m.start()


def test_other_users_cannot_read_without_allow_other(batchfs, ds_plain, public_dir, index_dir):
    m = _mount_public(batchfs, ds_plain.path, public_dir, index_dir, batch_size=32)
    try:
        assert os.path.getsize(m.path("schema.json")) > 0  # root can
        r = _as_nobody("cat", m.path("schema.json"))
        assert r.returncode != 0 and b"ermission denied" in r.stderr, r
        r = _as_nobody("ls", m.mnt)
        assert r.returncode != 0, r
    finally:
        m.stop()


def test_allow_other_lets_them_read_and_only_read(batchfs, ds_plain, public_dir, index_dir):
    m = _mount_public(batchfs, ds_plain.path, public_dir, index_dir, batch_size=32, allow_other=True)
    try:
        r = _as_nobody("cat", m.path("epoch-0000", "batch-000001", "x.npy"))
        assert r.returncode == 0, r
        assert r.stdout == m.read("epoch-0000", "batch-000001", "x.npy")
        idx = oracle.batch_records(ds_plain.n, 32, 1)
        exp = oracle.expected_batch(ds_plain.decoded, m.json("schema.json"), idx)
        assert r.stdout == oracle.npy_bytes(exp["x"])
        # default_permissions: the kernel checks 0444 / 0555 against nobody
        r = _as_nobody("sh", "-c", "echo x >> '%s'" % m.path("epoch-0000", "batch-000001", "x.npy"))
        assert r.returncode != 0 and re.search(rb"ermission denied|ead-only", r.stderr), r
        r = _as_nobody("touch", m.path("epoch-0000", "new"))
        assert r.returncode != 0, r
        r = _as_nobody("mkdir", m.path("d"))
        assert r.returncode != 0, r
    finally:
        m.stop()


# ---------------------------------------------------------------- names


TOP = {"README.txt", "schema.json", "stats.json", "errors.txt"}


def test_modes_everywhere(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=100, epochs=2)
    for root, dirs, files in os.walk(m.mnt):
        for d in dirs:
            st = os.lstat(os.path.join(root, d))
            assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o555, (root, d)
        for f in files:
            st = os.lstat(os.path.join(root, f))
            assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o444, (root, f)
    assert stat.S_IMODE(os.stat(m.mnt).st_mode) == 0o555


def test_nothing_outside_the_tree_is_reachable(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=100, epochs=2)
    # the whole tree: only the documented names, no symlinks, no source files
    seen = set()
    for root, dirs, files in os.walk(m.mnt, followlinks=True):
        rel = os.path.relpath(root, m.mnt)
        for n in dirs + files:
            p = os.path.join(root, n)
            assert not os.path.islink(p), p
            seen.add(os.path.normpath(os.path.join(rel, n)))
    assert TOP <= seen
    for s in seen:
        assert s in TOP or re.match(r"^epoch-\d{4,}(/(batch-\d{6,}|all)(\.safetensors|(/[^/]+)*))?$", s), s
    # names that try to leave, or to name the source
    shard = oracle.list_shards(ds_plain.path)[0]
    bad = ["..%2f", "%2e%2e", "...", "epoch-0000/batch-000000/x.npy/..", "epoch--1",
           "epoch-0000/batch-999999", "epoch-0000/batch-00000a", "epoch-0000/..." ,
           os.path.basename(shard), shard.lstrip("/"), "epoch-0000/" + os.path.basename(shard),
           "README.txt/x", "x" * 300, "epoch-0000/" + "9" * 300, "\\..\\..", " ", "epoch-0000 "]
    for name in bad:
        try:
            os.stat(os.path.join(m.mnt, name))
        except OSError as e:
            assert e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG), (name, e)
        else:
            raise AssertionError("%r exists under the mount" % name)
    # ".." inside the mount stays inside it (the kernel resolves it), and
    # leaving through the root goes to the mountpoint's parent, not to SOURCE
    deep = os.path.join(m.mnt, "epoch-0001", "batch-000002", "m", "..", "..", "..", "schema.json")
    assert open(deep, "rb").read() == m.read("schema.json")
    assert os.path.samefile(os.path.join(m.mnt, ".."), os.path.dirname(m.mnt))
    assert sorted(os.listdir(os.path.join(m.mnt, "epoch-0000", ".."))) == sorted(os.listdir(m.mnt))
    # nothing is a link; readlink fails with EINVAL
    with pytest.raises(OSError) as ei:
        os.readlink(m.path("schema.json"))
    assert ei.value.errno == errno.EINVAL
