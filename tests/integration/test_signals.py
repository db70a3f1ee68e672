# SPDX-License-Identifier: Apache-2.0
"""SIGINT, SIGTERM and SIGHUP stop a mount cleanly, whatever thread the
kernel hands them to: the daemon unmounts and exits 0.

Each signal goes to 50 mounts, one after another, alternately foreground
(`batchfs -f`, our child) and daemonized (plain `batchfs`; this process is
made a child subreaper so the daemon is reparented to it and its exit status
can be read). Every mount is signalled while busy: reader threads going
through the batches, the prefetch workers decoding ahead of them. No wait
goes past a deadline: a daemon still alive then is SIGKILLed and the test
fails.

Exit time is measured from the signal to the daemon's exit. The contract is
"within a second"; on a loaded shared machine a single exit can take longer
for reasons that have nothing to do with batchfs (the process is not
scheduled), so each exit has a hard deadline (BFS_SIGNAL_DEADLINE, default
10 s) and the median must be within the one second. A signal that is lost
(taken by a thread that does not wake the session loop) makes
the daemon run until the hard deadline, and fails the test."""

import os
import signal
import statistics
import subprocess
import threading
import time

import pytest

from fusemount import MOUNT_DEADLINE, POLL, mount_opts
from helpers import make_dataset

ROUNDS = int(os.environ.get("BFS_SIGNAL_ROUNDS", "50"))
HARD_DEADLINE = float(os.environ.get("BFS_SIGNAL_DEADLINE", "10"))
TARGET = 1.0  # seconds: the contract
# SIGHUP, SIGINT, SIGQUIT, SIGTERM: blocked in every thread but the waiter
STOP_MASK = (1 << (signal.SIGHUP - 1)) | (1 << (signal.SIGINT - 1)) | \
    (1 << (signal.SIGQUIT - 1)) | (1 << (signal.SIGTERM - 1))


@pytest.fixture(scope="module")
def ds_sig(gen, work):
    # 6000 records of 64 floats: a batch of 64 takes real decode work, so
    # the prefetch workers are busy when the signal comes
    return make_dataset(gen, work / "signals", 6000, ["x:float:64", "y:int64:1", "t:int64:0..20"],
                        shards=3, seed=12)


def _ready(mnt):
    return os.path.ismount(mnt) and os.path.exists(os.path.join(mnt, "schema.json"))


def _find_daemon(mnt):
    """The pid of the batchfs child of this process serving mnt (as given
    on its command line)."""
    me = os.getpid()
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
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        if ppid == me and os.fsencode(mnt) in argv:
            return int(d)
    return None


def _thread_masks(pid):
    """(tid, blocked mask, wchan) of every thread of pid."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        base = "/proc/%d/task/%s/" % (pid, tid)
        try:
            with open(base + "status") as f:
                blk = [ln for ln in f if ln.startswith("SigBlk:")][0]
            with open(base + "wchan") as f:
                wchan = f.read().strip()
        except (OSError, IndexError):
            continue
        out.append((int(tid), int(blk.split()[1], 16), wchan))
    return out


class Readers:
    """Threads reading the mount's batches in order until the mount goes."""

    def __init__(self, mnt, n=2, epochs=2, nbatches=94):
        self.mnt, self.stop, self.counts = mnt, False, [0] * n
        self.threads = [threading.Thread(target=self.run, args=(i, epochs, nbatches), daemon=True)
                        for i in range(n)]
        for t in self.threads:
            t.start()

    def run(self, i, epochs, nbatches):
        e, b = 0, i * 7
        while not self.stop:
            name = os.path.join(self.mnt, "epoch-%04d" % e, "batch-%06d.safetensors" % b)
            try:
                with open(name, "rb") as f:
                    f.read()
            except OSError:
                return  # the mount went away under us: expected
            self.counts[i] += 1
            b += 1
            if b == nbatches:
                b, e = 0, (e + 1) % epochs

    def wait_busy(self, reads=2, deadline=MOUNT_DEADLINE):
        end = time.monotonic() + deadline
        while min(self.counts) < reads:
            if time.monotonic() > end:
                raise AssertionError("readers made no progress: %s" % self.counts)
            time.sleep(0.002)

    def join(self):
        self.stop = True
        for t in self.threads:
            t.join(HARD_DEADLINE)
            assert not t.is_alive(), "a reader is stuck on the dead mount"


def _wait_exit(pid, proc):
    """Wait (at most HARD_DEADLINE) for the daemon; returns (status, seconds)
    or raises after SIGKILLing it."""
    t0 = time.monotonic()
    end = t0 + HARD_DEADLINE
    while True:
        if proc is not None:
            rc = proc.poll()
        else:
            wpid, st = os.waitpid(pid, os.WNOHANG)
            rc = os.waitstatus_to_exitcode(st) if wpid == pid else None
        if rc is not None:
            return rc, time.monotonic() - t0
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            if proc is not None:
                proc.wait()
            else:
                os.waitpid(pid, 0)
            raise AssertionError("the daemon did not exit within %.0f s of the signal" % HARD_DEADLINE)
        time.sleep(0.002)


def _one_round(batchfs, ds, mnt, opts, log, sig, foreground, check_masks,
               relative=False):
    os.makedirs(mnt, exist_ok=True)
    arg = os.path.basename(mnt) if relative else mnt
    argv = [batchfs] + (["-f"] if foreground else []) + [ds.path, arg, "-o", opts]
    with open(log, "wb") as lf:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                cwd=os.path.dirname(mnt))
    try:
        end = time.monotonic() + MOUNT_DEADLINE
        if foreground:
            while not _ready(mnt):
                assert proc.poll() is None, open(log, "rb").read().decode(errors="replace")
                assert time.monotonic() < end, "mount not ready"
                time.sleep(POLL / 4)
            pid = proc.pid
        else:
            # the parent returns once the mount is ready; the daemon is ours now
            assert proc.wait(timeout=MOUNT_DEADLINE) == 0, open(log, "rb").read().decode(errors="replace")
            assert _ready(mnt)
            pid = _find_daemon(arg)
            assert pid is not None, "no daemon found for " + mnt
            proc = None
        readers = Readers(mnt)
        try:
            readers.wait_busy()
            if check_masks:
                masks = _thread_masks(pid)
                assert len(masks) >= 3, masks  # main, signal thread, prefetch workers, fuse workers
                open_ = [m for m in masks if m[1] & STOP_MASK != STOP_MASK]
                # the one waiter: the kernel unblocks the waited set while in sigtimedwait
                assert len(open_) <= 1 and all("sigtimedwait" in m[2] for m in open_), masks
            os.kill(pid, sig)
            rc, secs = _wait_exit(pid, proc)
        finally:
            readers.join()
        assert rc == 0, "exit status %d after %s:\n%s" % (rc, signal.Signals(sig).name,
                                                          open(log, "rb").read().decode(errors="replace"))
        end = time.monotonic() + HARD_DEADLINE
        while os.path.ismount(mnt):
            assert time.monotonic() < end, "still mounted after exit"
            time.sleep(POLL)
        return secs
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if os.path.ismount(mnt):
            subprocess.run(["fusermount3", "-uz", mnt], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_signal_under_load_unmounts_and_exits_0(batchfs, ds_sig, index_dir, tmp_path,
                                                subreaper, sig):
    opts = mount_opts(index_dir, batch_size=64, prefetch=8, threads=2, epochs=2, cache_size="4M")
    times = {True: [], False: []}
    for i in range(ROUNDS):
        fg = i % 2 == 0
        secs = _one_round(batchfs, ds_sig, str(tmp_path / ("m%d" % i)), opts,
                          str(tmp_path / ("log%d" % i)), sig, fg, check_masks=i < 2)
        times[fg].append(secs)
    allt = times[True] + times[False]
    summary = "%s: %d exits, median %.3f s, max %.3f s (foreground max %.3f, daemon max %.3f)" % (
        signal.Signals(sig).name, len(allt), statistics.median(allt), max(allt),
        max(times[True]), max(times[False]))
    print(summary)
    assert statistics.median(allt) <= TARGET, summary


@pytest.mark.parametrize("foreground", [True, False], ids=["foreground", "daemon"])
def test_signal_unmounts_a_relative_mountpoint(batchfs, ds_sig, index_dir, tmp_path,
                                               subreaper, foreground):
    # libfuse changes to / before it unmounts: the mount point given as
    # "mnt" must still be the one unmounted
    opts = mount_opts(index_dir, batch_size=64)
    _one_round(batchfs, ds_sig, str(tmp_path / "mnt"), opts, str(tmp_path / "log"),
               signal.SIGTERM, foreground, check_masks=True, relative=True)
