# SPDX-License-Identifier: Apache-2.0
"""A mount's life: one mount per folder, a daemon that goes with the process
that started it, and set_epoch reaching persistent DataLoader workers.

- A MOUNTPOINT that is already a mount point (a live batchfs, a tmpfs, a
  bind mount of the folder on itself) is refused with one line and exit
  status 1, in the foreground and as a daemon; two batchfs started on one
  folder at once give one mount. A folder just unmounted (`fusermount3 -u`)
  takes a new mount at once, while the old daemon is still exiting. In Python a nested batchfs.mount on the
  same folder raises and leaves the outer mount alone.
- A script inside `with batchfs.mount(...)` that gets SIGTERM or SIGKILL,
  or raises, leaves no daemon and no mount behind. This process is made a
  child subreaper, so that the orphaned daemon is reparented to it and its
  exit status can be read (0: it unmounted cleanly).
- BatchDataset.set_epoch(e) with DataLoader(persistent_workers=True), forked
  and spawned workers: the batches are the files of epoch-000e.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

import oracle
from fusemount import MOUNT_DEADLINE, wait_for
from helpers import make_dataset, remount_loop

PYDIR = os.environ.get("BFS_PYTHONPATH") or os.path.join(oracle.repo_root(), "python")
if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)

import batchfs as bfs  # noqa: E402
import batchfs.numpy as bnp  # noqa: E402

DEADLINE = 20  # seconds for a daemon to go after its starter


def _mounts_at(path):
    """How many mounts /proc/self/mountinfo lists at path."""
    want = os.fsencode(os.path.realpath(path))
    n = 0
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            mp = line.split(b" ")[4].replace(b"\\040", b" ")
            n += mp == want
    return n


def _unmount_all(mnt):
    """Lazily unmount whatever is left at mnt (stacked or dead mounts too)."""
    for _ in range(8):
        if not _mounts_at(mnt):
            return
        subprocess.run(["umount", "-l", mnt] if os.geteuid() == 0 else ["fusermount3", "-uz", mnt],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _second(batchfs, src, mnt, opts, foreground):
    """Run a second batchfs on mnt; (exit status, stderr). One that stacks
    (and, in the foreground, keeps running) is stopped and unmounted."""
    argv = [batchfs] + (["-f"] if foreground else []) + [src, mnt, "-o", opts]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=MOUNT_DEADLINE)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)  # a stacked foreground mount: unmounts its own
        _, err = p.communicate(timeout=MOUNT_DEADLINE)
        return None, err.decode(errors="replace")
    if p.returncode == 0 and not foreground and _mounts_at(mnt) > 1:
        subprocess.run(["fusermount3", "-u", mnt], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)  # the topmost: the stacked one
    return p.returncode, err.decode(errors="replace")


def _one_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return lines[0]


# ---------------------------------------------------------------- one mount per folder


@pytest.mark.parametrize("foreground", [True, False], ids=["foreground", "daemon"])
def test_second_batchfs_on_a_live_mount_is_refused(batchfs, mounter, ds_plain, index_dir,
                                                   foreground):
    m = mounter(ds_plain.path, batch_size=8)
    rc, err = _second(batchfs, ds_plain.path, m.mnt, "batch_size=16,index_dir=" + index_dir,
                      foreground)
    assert rc == 1, (rc, err)
    line = _one_line(err)
    assert m.mnt in line and "already a mount point" in line and "fuse.batchfs" in line, line
    # the first mount still serves its own options, alone
    assert _mounts_at(m.mnt) == 1
    assert m.json("schema.json")["batch_size"] == 8
    assert m.proc.poll() is None


def test_other_mount_points_are_refused(batchfs, ds_plain, index_dir, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs or a bind mount needs root")
    opts = "index_dir=" + index_dir
    tmp = tmp_path / "tmpfs"
    tmp.mkdir()
    bind = tmp_path / "bind"  # a bind mount of a folder on itself keeps its st_dev
    bind.mkdir()
    (bind / "a file").write_text("x")  # not empty: fuse 3 mounts there all the same
    try:
        subprocess.run(["mount", "-t", "tmpfs", "none", str(tmp)], check=True)
        subprocess.run(["mount", "--bind", str(bind), str(bind)], check=True)
        for mnt, kind in ((tmp, "tmpfs"), (bind, "")):
            rc, err = _second(batchfs, ds_plain.path, str(mnt), opts, True)
            assert rc == 1, (mnt, rc, err)
            line = _one_line(err)
            assert "already a mount point (%s" % kind in line, line
            assert _mounts_at(str(mnt)) == 1
    finally:
        for mnt in (tmp, bind):
            _unmount_all(str(mnt))


def test_two_batchfs_started_at_once_give_one_mount(batchfs, gen, tmp_path):
    # a fresh index_dir each: both index the dataset first, the window in
    # which both would find the folder free
    ds = make_dataset(gen, tmp_path / "ds", 4000, ["x:float:32", "t:int64:0..20"], shards=4, seed=3)
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    procs = [subprocess.Popen([batchfs, "-f", ds.path, mnt, "-o",
                               "index_dir=%s" % (tmp_path / ("index%d" % i))],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for i in range(2)]
    try:
        wait_for(lambda: _mounts_at(mnt) >= 1 and sum(p.poll() is not None for p in procs) >= 1,
                 MOUNT_DEADLINE, "one mount and one refusal")
        time.sleep(0.5)  # a stacked second mount would show by now
        assert _mounts_at(mnt) == 1
        done = [p for p in procs if p.poll() is not None]
        assert len(done) == 1 and done[0].returncode == 1
        line = _one_line(done[0].stderr.read().decode(errors="replace"))
        assert "another batchfs is mounting on it" in line or "already a mount point" in line, line
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=MOUNT_DEADLINE)
            p.stderr.close()
        _unmount_all(mnt)


@pytest.mark.parametrize("opts", ["", ",io_depth=8"], ids=["decoders", "io_stage"])
def test_fusermount_then_mount_on_the_same_folder_works_every_time(batchfs, ds_plain, index_dir,
                                                                     tmp_path, opts):
    # the daemon unmounted is still exiting (with the I/O stage, for tens
    # of milliseconds) when the next mount starts: it used to hold the
    # folder's lock and refuse it ("another batchfs is mounting on it")
    remount_loop(batchfs, ds_plain.path, [str(tmp_path / "mnt")],
                 "batch_size=8,index_dir=%s%s" % (index_dir, opts))


def test_nested_python_mount_raises_and_leaves_the_outer(batchfs, ds_plain, index_dir,
                                                         tmp_path, monkeypatch):
    monkeypatch.setenv("BATCHFS", batchfs)
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    with bfs.mount(ds_plain.path, mnt, batch_size=8, index_dir=index_dir) as outer:
        with pytest.raises(bfs.BatchfsError, match="already a mount point"):
            with bfs.mount(ds_plain.path, mnt, batch_size=16, index_dir=index_dir):
                pytest.fail("a nested mount on the same folder was entered")
        assert _mounts_at(mnt) == 1
        assert bfs.Mount(mnt).schema["batch_size"] == 8 == outer.schema["batch_size"]
        assert len(bnp.load_batch(outer.epoch(0).batch_path(0))["x"]) == 8
    assert _mounts_at(mnt) == 0


# ---------------------------------------------------------------- the daemon goes with its starter

SCRIPT = r"""
import os, sys, time
sys.path.insert(0, %(pydir)r)
import batchfs
with batchfs.mount(%(src)r, %(mnt)r, batch_size=8, index_dir=%(index)r) as m:
    open(os.path.join(m.path, "epoch-0000", "batch-000000.safetensors"), "rb").read()
    print("ready", flush=True)
    if %(fail)r:
        raise RuntimeError("the training loop failed")
    time.sleep(600)
"""


def _children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            if int(st[st.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(d))
    return out


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"


def _reap(pid, deadline):
    """Wait for pid to end; its exit status once it is this process's child
    (an orphan reparented to this subreaper), None if another reaped it."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            got, st = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                return os.waitstatus_to_exitcode(st)
        except ChildProcessError:  # not ours: its parent reaps it
            if not os.path.exists("/proc/%d" % pid):
                return None
        time.sleep(0.02)
    return None


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL", "exception"])
def test_daemon_goes_with_its_python_starter(batchfs, ds_plain, index_dir, tmp_path,
                                             subreaper, how):
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    code = SCRIPT % {"pydir": PYDIR, "src": ds_plain.path, "mnt": mnt, "index": index_dir,
                     "fail": how == "exception"}
    env = dict(os.environ, BATCHFS=batchfs)
    script = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    daemon = None
    try:
        line = script.stdout.readline()
        assert line == b"ready\n", (line, script.stderr.read() if script.poll() is not None else "")
        daemons = [p for p in _children(script.pid) if _alive(p)]
        assert len(daemons) == 1, daemons
        daemon = daemons[0]
        if how != "exception":
            script.send_signal(getattr(signal, how))
        script.wait(timeout=DEADLINE)
        status = _reap(daemon, DEADLINE)
        assert not _alive(daemon), "the daemon outlived its starter (%s)" % how
        if how != "exception":  # reparented to this subreaper, which read its status
            assert status == 0, "the daemon exited with %s, not after a clean unmount" % status
        daemon = None
        wait_for(lambda: _mounts_at(mnt) == 0, DEADLINE, "the mount to go")
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
        script.stdout.close()
        script.stderr.close()
        if daemon is not None and _alive(daemon):
            os.kill(daemon, signal.SIGTERM)
            _reap(daemon, DEADLINE)
        _unmount_all(mnt)


# ---------------------------------------------------------------- set_epoch, persistent workers


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_set_epoch_reaches_persistent_workers(batchfs, ds_plain, index_dir, monkeypatch, start):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    import batchfs.torch as bt
    monkeypatch.setenv("BATCHFS", batchfs)
    with bfs.mount(ds_plain.path, batch_size=50, seed=4, epochs=3, index_dir=index_dir) as m:
        ds = bt.BatchDataset(m, features=["x", "y"])
        dl = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True,
                        multiprocessing_context=start)
        firsts = []
        for e in (0, 1, 2, 1):
            ds.set_epoch(e)
            got = list(dl)
            files = m.epoch(e).batch_paths()
            assert len(got) == len(files) == len(ds)
            for b, (item, path) in enumerate(zip(got, files)):
                want = bnp.load_batch(path, features=["x", "y"])
                assert sorted(item) == sorted(want)
                for k in want:
                    assert torch.equal(item[k], torch.from_numpy(want[k])), \
                        "epoch %d batch %d: %s is not epoch-%04d's" % (e, b, k, e)
            firsts.append(got[0]["x"])
        assert not torch.equal(firsts[0], firsts[1])  # the epochs do differ
        del dl
