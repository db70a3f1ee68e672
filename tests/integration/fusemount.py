# SPDX-License-Identifier: Apache-2.0
"""One FUSE daemon run in the foreground as a child of this process, and its
mount point: how the integration tests and scripts/bench start batchfs (and
the bench's nullfs and faultfs), wait until the mount answers, reach the
daemon (its pid for CPU and memory, its log) and take it down again.

    with FuseMount([nullfs, "-f", mnt, "-o", opts], mnt) as m: ...
    m = BatchfsMount(binary, source, mnt, "batch_size=8", log_path).start()
    ...
    m.stop()

The Python module (python/batchfs) has a mount of its own, for users: it
hides the daemon (no pid, no log) and ties its life to a pipe, which is
right for a training job and wrong for a test or a measurement, so tests
use it only where it is the subject.

Not thread-safe: one object per mount, used by one thread.
"""

import errno
import json
import os
import subprocess
import tempfile
import time

POLL = 0.02          # seconds between readiness polls
MOUNT_DEADLINE = 60  # seconds for a mount to become ready
EXIT_DEADLINE = 20   # seconds for a daemon to exit after unmount / SIGTERM


class MountError(RuntimeError):
    """The daemon exited before its mount was ready, or it was not ready
    in time; the message ends with the daemon's log."""


def wait_for(cond, deadline, what):
    """Poll cond() until it holds; AssertionError after deadline seconds."""
    end = time.monotonic() + deadline
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(POLL)


def unmount(mnt):
    """fusermount3 -u, and -uz when that fails (a busy mount); nothing when
    mnt is not a mount point."""
    if not os.path.ismount(mnt):
        return
    r = subprocess.run(["fusermount3", "-u", mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        subprocess.run(["fusermount3", "-uz", mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _dead_mount(mnt):
    """Is a mount left at mnt by a daemon that is gone (ENOTCONN)?"""
    try:
        os.lstat(mnt)
    except OSError as e:
        return e.errno == errno.ENOTCONN
    return False


class FuseMount:
    """A FUSE daemon started from argv (which must hold -f) serving mnt.

    log: a path for the daemon's stdout and stderr (kept for the test to
    read), or None for a temporary file. ready: a name under mnt that must
    exist, beside mnt being a mount point, before the mount counts as
    ready (batchfs: schema.json, so that the daemon answers). env: the
    daemon's environment (None: ours). replace: take away whatever is
    mounted at mnt first (a mount a killed run left behind) instead of
    stacking over it. report: called with one line when stop() finds the
    daemon already dead, so a measurement says why its rows are missing.
    exit_deadline: seconds the daemon gets to exit after its unmount
    before it is killed.
    """

    def __init__(self, argv, mnt, log=None, ready=None, deadline=MOUNT_DEADLINE, env=None,
                 replace=False, report=None, exit_deadline=EXIT_DEADLINE):
        self.argv = [str(a) for a in argv]
        self.mnt = str(mnt)
        self.log = None if log is None else str(log)
        self.ready = ready
        self.deadline = deadline
        self.env = env
        self.replace = replace
        self.report = report
        self.exit_deadline = exit_deadline
        self.proc = None
        self._stopped = False
        self.mount_seconds = None  # from the daemon's start to its mount's readiness
        self._logf = None

    @property
    def pid(self):
        return self.proc.pid

    def _is_ready(self):
        return os.path.ismount(self.mnt) and (
            self.ready is None or os.path.exists(os.path.join(self.mnt, self.ready)))

    def start(self):
        """Start the daemon and wait until its mount is ready; returns self.
        Raises MountError when the daemon exits first or the deadline
        passes (the daemon is then killed)."""
        if _dead_mount(self.mnt) or (self.replace and os.path.ismount(self.mnt)):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        os.makedirs(self.mnt, exist_ok=True)
        if self.log is None:
            self._logf = tempfile.TemporaryFile(prefix="fusemount-")
            out = self._logf
        else:
            out = open(self.log, "wb")
        self._stopped = False
        t0 = time.perf_counter()
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=out, env=self.env)
        finally:
            if out is not self._logf:
                out.close()
        while not self._is_ready():
            rc = self.proc.poll()
            if rc is not None:
                raise MountError("%s exited with status %d before its mount %s was ready:\n%s" %
                                 (" ".join(self.argv), rc, self.mnt, self.log_text()))
            if time.perf_counter() - t0 > self.deadline:
                self.proc.kill()
                self.proc.wait()
                unmount(self.mnt)
                raise MountError("%s: no mount at %s after %d s:\n%s" % (
                    " ".join(self.argv), self.mnt, self.deadline, self.log_text()))
            time.sleep(POLL / 4)
        self.mount_seconds = time.perf_counter() - t0
        return self

    def log_text(self, limit=4000):
        """The last `limit` characters of the daemon's log."""
        try:
            if self._logf is not None:
                self._logf.seek(0)
                data = self._logf.read()
            else:
                with open(self.log, "rb") as f:
                    data = f.read()
        except (OSError, TypeError, ValueError):
            return ""
        return data.decode(errors="replace")[-limit:]

    def path(self, *parts):
        return os.path.join(self.mnt, *parts)

    def read(self, *parts):
        with open(self.path(*parts), "rb") as f:
            return f.read()

    def json(self, name):
        return json.loads(self.read(name))

    def stop(self):
        """Unmount, wait for the daemon (killed after exit_deadline), and
        take away a mount it left; returns its exit status (None if it
        never started). Stopping again does nothing more."""
        if self.proc is None or self._stopped:
            return None if self.proc is None else self.proc.returncode
        self._stopped = True
        died = self.proc.poll() is not None
        try:
            unmount(self.mnt)
        finally:
            if self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=self.exit_deadline)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            if os.path.ismount(self.mnt) or _dead_mount(self.mnt):
                subprocess.run(["fusermount3", "-uz", self.mnt], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
            if died and self.report:
                self.report("%s exited with status %d: %s" % (
                    os.path.basename(self.argv[0]), self.proc.returncode,
                    self.log_text().strip()[-300:]))
            if self._logf is not None:
                self._logf.close()
                self._logf = None
        return self.proc.returncode

    def __enter__(self):
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def mount_opts(default_index_dir, **kw):
    """-o text of keyword options: True a flag, None or False left out,
    anything else k=v as given (commas in v pass through); index_dir
    defaults to default_index_dir."""
    kw.setdefault("index_dir", default_index_dir)
    parts = []
    for k, v in kw.items():
        if v is True:
            parts.append(k)
        elif v is not None and v is not False:
            parts.append("%s=%s" % (k, v))
    return ",".join(parts)


class BatchfsMount(FuseMount):
    """`batchfs -f SOURCE MNT -o OPTS`, ready when schema.json answers; its
    log kept at log (a path)."""

    def __init__(self, binary, source, mnt, opts, log, env=None, deadline=MOUNT_DEADLINE):
        self.binary, self.source, self.opts = binary, str(source), opts
        super().__init__([binary, "-f", self.source, str(mnt), "-o", opts], mnt, log=log,
                         ready="schema.json", deadline=deadline, env=env)
