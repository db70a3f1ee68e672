# SPDX-License-Identifier: Apache-2.0
"""A bucket mount's daemon goes when its mount goes, as a training job on
EC2, EKS, GKE or a TPU VM mounts one: in the background (no -f), its
credentials from a provider that hands out short-lived ones and a keeper
thread that refreshes them. s3rver behind tests/s3/s3proxy.py, which
accepts only what the credential endpoints issued (tests/cloud:
awsendpoints.py, gcpendpoints.py), refusing expired credentials as S3 and
Cloud Storage do.

What must be true (DESIGN.md: "after fusermount3 -u (or SIGTERM) it exits
within 2 s whatever its source, credentials or state"):
- for each credential source (IMDSv2, the container endpoint, web
  identity through STS; Google's metadata server, a service-account key,
  gcloud's ADC file) and each shuffle (global, block, none): a background
  mount read across credential rotations (they last LIFETIME seconds, so
  the keeper is waiting for its next refresh when the unmount comes), the
  bucket slow enough that reads are in flight, then `fusermount3 -u`: the
  daemon exits 0 within EXIT_BOUND seconds (and with a disk cache);
- SIGTERM ends it within EXIT_BOUND seconds in any state: readers waiting
  on a bucket that stalls, the credential endpoint hanging while the
  keeper fetches (and the same hang at `fusermount3 -u`);
- an exit stuck all the same (a thread it joins frozen with ptrace) is cut
  short by the exit's deadline: status 1, one line in the log, the mount
  gone, within EXIT_BOUND seconds. Every other exit here has status 0, so
  the deadline never stands in for the fixes above.

This process is made a child subreaper, so that the daemon (whose mount
command exits once the mount is ready) is reparented to it and its exit
status read. A daemon still there after HARD_DEADLINE is killed and the
test fails; every exit time is printed (pytest -s shows them).
"""
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import oracle
from fusemount import MOUNT_DEADLINE, mount_opts

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "s3"))
sys.path.insert(0, os.path.join(HERE, "..", "cloud"))
import credenv  # noqa: E402
import s3env  # noqa: E402
from gcpenv import USER, google_env, new_key, register, sa_info, write_json  # noqa: E402
from gcpenv import Endpoints as GcpEndpoints  # noqa: E402

BUCKET = "bfs-exit"
# 240 records of ~16 KB in 3 shards: about 4 MB, more than the stage's
# readahead and the cache (1M each), so that reads go to the bucket all
# through the run
FEATURES = ["x:float:4", "img:bytes:1,len=16000"]
B = 8
LIFETIME = 3  # seconds the credentials last: refreshed every 1.5 s
EXIT_BOUND = 2.0  # seconds from the unmount (or the signal) to the exit
HARD_DEADLINE = 20.0  # then the daemon is killed and the test fails
READ_SECONDS = 4.0  # more than a lifetime: the keeper refreshes in the daemon

AWS = ["imds", "container", "web_identity"]
GCP = ["metadata", "service_account", "gcloud_adc"]
SHUFFLES = ["global", "block", "none"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory, gen):
    d = tmp_path_factory.mktemp("exit")
    with s3env.behind_proxy(d, [BUCKET], pytest.skip) as ctl:
        gcp = GcpEndpoints()
        ctl.gcp = gcp
        ctl.key = new_key()
        register(gcp, ctl.key)
        local = d / "local"
        oracle.generate(gen, str(local), 240, FEATURES, shards=3, compression="none", seed=38)
        s3env.put_files(ctl.s3rver.url, BUCKET, str(local), "train/")
        try:
            yield ctl
        finally:
            gcp.stop()


@pytest.fixture
def aws(tmp_path, servers):
    e = credenv.Endpoints(tmp_path / "aws", lifetime=LIFETIME)
    yield e
    e.stop()


def provider_env(kind, servers, aws, tmp_path):
    """(source URL, the daemon's environment) for a credential source; the
    proxy set to check what that source issues."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    servers.reset()
    if kind in AWS:
        servers.config(sigv4_ledger=aws.ledger)
        env = {"imds": aws.imds_env, "container": aws.container_env,
               "web_identity": aws.web_env}[kind](str(home))
        return "s3://%s/train/" % BUCKET, env
    gcp = servers.gcp
    gcp.reset()
    gcp.config(lifetime=LIFETIME)
    servers.config(bearer=gcp.tokeninfo)
    base = google_env(s3env.free_env(str(home)), GCE_METADATA_HOST="127.0.0.1:1")
    if kind == "metadata":
        env = dict(base, GCE_METADATA_HOST=gcp.host)
    elif kind == "service_account":
        key = write_json(tmp_path / "sa.json", sa_info(servers.key, gcp.token_uri))
        env = dict(base, GOOGLE_APPLICATION_CREDENTIALS=key)
    else:
        cfg = tmp_path / "gcloud"
        write_json(cfg / "application_default_credentials.json",
                   dict(USER, type="authorized_user", token_uri=gcp.token_uri))
        env = dict(base, CLOUDSDK_CONFIG=str(cfg))
    return "gs://%s/train/" % BUCKET, env


def _find_daemon(mnt):
    """The pid of the batchfs daemon (a child of this subreaper) serving mnt."""
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


class Daemon:
    """`batchfs SOURCE MNT -o OPTS` in the background: the command returns
    once the mount is ready; the daemon is then this subreaper's child."""

    def __init__(self, batchfs, source, mnt, opts, env, log, foreground=False):
        self.mnt, self.log, self.pid, self.status = str(mnt), str(log), None, None
        self.traced = []  # threads this process froze (freeze()), to reap
        os.makedirs(self.mnt, exist_ok=True)
        argv = [batchfs] + (["-f"] if foreground else []) + [source, self.mnt, "-o", opts]
        with open(self.log, "wb") as lf:
            if foreground:  # this process's child; ready once schema.json answers
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                     env=env)
                self.pid = p.pid
                _wait_for(lambda: p.poll() is not None or os.path.exists(
                    os.path.join(self.mnt, "schema.json")), "the mount", MOUNT_DEADLINE)
                assert p.poll() is None, self.log_text()
                p.returncode = 0  # reaped by wait_exit, not by Popen
                return
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf, env=env,
                               timeout=MOUNT_DEADLINE)
        assert r.returncode == 0, self.log_text()
        assert os.path.ismount(self.mnt)
        self.pid = _find_daemon(self.mnt)
        assert self.pid is not None, "no daemon found for " + self.mnt

    def thread_named(self, name):
        for tid in os.listdir("/proc/%d/task" % self.pid):
            with open("/proc/%d/task/%s/comm" % (self.pid, tid)) as f:
                if f.read().strip() == name:
                    return int(tid)
        return None

    def freeze(self, tid):
        """Stop thread tid alone (ptrace), as a thread stuck in user space
        is: it never runs again, and goes only with its process."""
        if _ptrace(PTRACE_SEIZE, tid) != 0:
            pytest.skip("ptrace: %s" % os.strerror(ctypes.get_errno()))
        self.traced.append(tid)
        assert _ptrace(PTRACE_INTERRUPT, tid) == 0
        os.waitpid(tid, WALL)  # it is stopped now

    def log_text(self):
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")[-3000:]

    def threads(self):
        try:
            return len(os.listdir("/proc/%d/task" % self.pid))
        except OSError:
            return 0

    def wait_exit(self):
        """Seconds until the daemon exited (its status in self.status), or
        an AssertionError after HARD_DEADLINE, the daemon killed."""
        t0 = time.monotonic()
        while True:
            for tid in list(self.traced):  # a traced thread is reaped by its tracer
                try:
                    if os.waitpid(tid, os.WNOHANG | WALL)[0] == tid:
                        self.traced.remove(tid)
                except ChildProcessError:
                    self.traced.remove(tid)
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.status = os.waitstatus_to_exitcode(st)
                self.pid = None
                return time.monotonic() - t0
            if time.monotonic() - t0 > HARD_DEADLINE:
                n = self.threads()
                self.kill()
                raise AssertionError("the daemon was still there %.0f s later, %d threads" %
                                     (HARD_DEADLINE, n))
            time.sleep(0.005)

    def kill(self):
        if self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)
            for tid in self.traced:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(tid, WALL)
            os.waitpid(self.pid, 0)
            self.pid = None
        if os.path.ismount(self.mnt) or _dead(self.mnt):
            subprocess.run(["fusermount3", "-uz", self.mnt], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_SEIZE, PTRACE_INTERRUPT = 0x4206, 0x4207  # <sys/ptrace.h>
WALL = 0x40000000  # __WALL: wait for threads too


def _ptrace(req, tid):
    return _libc.ptrace(req, tid, None, None)


def _dead(mnt):
    try:
        os.lstat(mnt)
    except OSError:
        return True
    return False


@pytest.fixture
def daemons(batchfs, subreaper, tmp_path):
    made = []

    def start(source, env, foreground=False, **opts):
        n = len(made) + 1
        d = Daemon(batchfs, source, tmp_path / ("mnt%d" % n),
                   mount_opts(str(tmp_path / ("ix%d" % n)), **opts), env,
                   tmp_path / ("log%d" % n), foreground)
        made.append(d)
        return d

    yield start
    for d in made:
        d.kill()


class Readers:
    """Threads reading the batches of epoch after epoch until stopped or
    the mount goes, each pausing `gap` seconds between files (no file is
    open then, so that `fusermount3 -u` finds the mount idle)."""

    def __init__(self, mnt, n=1, gap=0.02):
        self.mnt, self.gap, self.stopping = mnt, gap, False
        self.counts, self.errors = [0] * n, []
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True)
                        for i in range(n)]
        for t in self.threads:
            t.start()

    def run(self, i):
        ep = os.path.join(self.mnt, "epoch-0000")
        try:
            nb = len([n for n in os.listdir(ep) if n.endswith(".safetensors")
                      and n.startswith("batch-")])
        except OSError as e:
            self.errors.append(str(e))
            return
        e, b = 0, i * 5 % nb
        while not self.stopping:
            name = os.path.join(self.mnt, "epoch-%04d" % e, "batch-%06d.safetensors" % b)
            try:
                with open(name, "rb") as f:
                    f.read()
            except OSError as err:
                if os.path.ismount(self.mnt):
                    self.errors.append("%s: %s" % (name, err))
                return  # unmounted under us: expected
            self.counts[i] += 1
            b += 1
            if b == nb:
                b, e = 0, e + 1
            time.sleep(self.gap)

    def stop(self, deadline=HARD_DEADLINE):
        self.stopping = True
        for t in self.threads:
            t.join(deadline)
        return not any(t.is_alive() for t in self.threads)


def _stats(mnt):
    with open(os.path.join(mnt, "stats.json"), "rb") as f:
        return json.loads(f.read())


def _wait_inflight(mnt, deadline=10.0):
    """stats.json once the I/O stage has source reads in flight or queued."""
    end = time.monotonic() + deadline
    while True:
        st = _stats(mnt)
        if st["io_inflight"] + st["io_pending"] > 0 or time.monotonic() > end:
            return st
        time.sleep(0.005)


def _unmount(mnt):
    """fusermount3 -u, retried while busy (a reader's file still closing)."""
    end = time.monotonic() + 10
    while True:
        r = subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        if r.returncode == 0 or time.monotonic() > end:
            return r
        time.sleep(0.01)


@pytest.mark.parametrize("shuffle", SHUFFLES)
@pytest.mark.parametrize("kind", AWS + GCP)
def test_the_daemon_goes_within_2s_of_its_unmount(daemons, servers, aws, tmp_path, kind,
                                                   shuffle):
    _read_then_unmount(daemons, servers, aws, tmp_path, kind, shuffle)


@pytest.mark.parametrize("kind", ["imds", "metadata"])
def test_the_daemon_goes_within_2s_of_its_unmount_with_a_disk_cache(daemons, servers, aws,
                                                                    tmp_path, kind):
    """The disk cache's writer, its files and its callbacks in the exit (the
    dataset, fetched once, is read from the cache soon: no read need be in
    flight then)."""
    st = _read_then_unmount(daemons, servers, aws, tmp_path, kind, "global", inflight=False,
                            disk_cache=str(tmp_path / "dc"))
    assert st["disk_cache_bytes"] > 0, st


def _read_then_unmount(daemons, servers, aws, tmp_path, kind, shuffle, inflight=True, **more):
    """A background mount read across rotations, then unmounted: its exit
    timed and checked; stats.json just before the unmount."""
    source, env = provider_env(kind, servers, aws, tmp_path)
    servers.config(delay_ms=60)  # a slow bucket: the stage's reads are in flight
    if inflight:
        # reads in flight at the unmount are the subject: the disk cache
        # (on by default for a bucket) would hold this small dataset after
        # its first epoch, and nothing would be fetched then
        more.setdefault("disk_cache", "off")
    d = daemons(source, env, batch_size=B, shuffle=shuffle,
                block_size="64K" if shuffle == "block" else None, epochs=4,
                prefetch=2, cache_size="1M", readahead="1M", region="us-east-1",
                endpoint=servers.endpoint, **more)
    readers = Readers(d.mnt)
    time.sleep(READ_SECONDS)
    st = _wait_inflight(d.mnt) if inflight else _stats(d.mnt)
    # refreshed in the daemon: its keeper ran there, and waits for the next
    assert st["credentials_refreshes"] >= 2 and st["credentials_valid"], st
    assert st["io_inflight"] + st["io_pending"] > 0 or not inflight, st
    r = _unmount(d.mnt)  # a reader still going: reads in flight
    assert r.returncode == 0, r.stderr
    secs = d.wait_exit()
    assert readers.stop(), "a reader is stuck"
    assert not readers.errors, (readers.errors[:3], d.log_text())
    assert sum(readers.counts) > 0
    print("\n%s shuffle=%s: exit %.3f s after fusermount3 -u (%d refreshes, %d reads in flight)" %
          (kind, shuffle, secs, st["credentials_refreshes"], st["io_inflight"]))
    assert d.status == 0, d.log_text()
    assert secs <= EXIT_BOUND, "%.2f s" % secs
    assert not os.path.ismount(d.mnt)
    return st


def _wait_for(cond, what, deadline=20.0):
    end = time.monotonic() + deadline
    while not cond():
        assert time.monotonic() < end, "timed out waiting for " + what
        time.sleep(0.02)


def _gone(d, how):
    """Unmount (how "unmount") or SIGTERM the daemon; the seconds to its
    exit, which must be a clean one (status 0, nothing left mounted)."""
    if how == "unmount":
        r = _unmount(d.mnt)
        assert r.returncode == 0, r.stderr
    else:
        os.kill(d.pid, signal.SIGTERM)
    secs = d.wait_exit()
    assert d.status == 0, d.log_text()
    _wait_for(lambda: not os.path.ismount(d.mnt), "the mount to go", 5)
    return secs


@pytest.mark.parametrize("shuffle", SHUFFLES)
def test_sigterm_ends_it_within_2s_while_readers_wait_on_a_stalled_bucket(
        daemons, servers, aws, tmp_path, shuffle):
    source, env = provider_env("imds", servers, aws, tmp_path)
    # disk_cache=off: readers hung on the bucket are the subject, not on a
    # disk cache that already holds what they read
    d = daemons(source, env, batch_size=B, shuffle=shuffle,
                block_size="64K" if shuffle == "block" else None, epochs=2, cache_size="1M",
                readahead="1M", region="us-east-1", endpoint=servers.endpoint,
                disk_cache="off")
    readers = Readers(d.mnt, n=3, gap=0)
    _wait_for(lambda: sum(readers.counts) >= 3, "reads")
    # every object read from now on hangs (the connection held, no answer)
    servers.rules({"match": "^GET /%s/train/" % BUCKET, "action": "stall", "ms": 600000})
    _wait_for(lambda: _stats(d.mnt)["io_inflight"] > 0 and
              not any(_progress(readers, 1.0)), "the readers to hang on the bucket")
    secs = _gone(d, "sigterm")
    print("\nshuffle=%s: exit %.3f s after SIGTERM, %d readers hung" %
          (shuffle, secs, len(readers.threads)))
    assert readers.stop(), "a reader is still stuck on the dead mount"
    assert secs <= EXIT_BOUND, "%.2f s" % secs


def _progress(readers, secs):
    """Which readers read a file within secs."""
    before = list(readers.counts)
    time.sleep(secs)
    return [a != b for a, b in zip(before, readers.counts)]


@pytest.mark.parametrize("how", ["unmount", "sigterm"])
def test_it_goes_within_2s_while_the_credential_endpoint_hangs(daemons, servers, aws, tmp_path,
                                                                how):
    """The metadata service stops answering: the keeper's refresh waits in
    its request (tries of 5 s, 10 s in all) when the mount goes."""
    source, env = provider_env("imds", servers, aws, tmp_path)
    d = daemons(source, env, batch_size=B, shuffle="global", epochs=2, cache_size="1M",
                readahead="1M", region="us-east-1", endpoint=servers.endpoint)
    with open(os.path.join(d.mnt, "epoch-0000", "batch-000000.safetensors"), "rb") as f:
        assert f.read()
    aws.config(hang=True)
    # the next refresh (due 1.5 s before expiry) is held by the endpoint
    _wait_for(lambda: any(e.get("action") == "hang" for e in aws.log()),
              "the keeper's refresh to reach the hanging endpoint", 2 * LIFETIME)
    time.sleep(0.5)
    secs = _gone(d, how)
    aws.config(hang=False)
    print("\n%s: exit %.3f s while the credential endpoint hung" % (how, secs))
    assert secs <= EXIT_BOUND, "%.2f s" % secs


@pytest.mark.parametrize("how,foreground", [("unmount", False), ("sigterm", False),
                                            ("sigterm", True)],
                         ids=["unmount", "sigterm", "sigterm-foreground"])
def test_an_exit_stuck_in_a_thread_is_cut_short_within_2s(daemons, servers, aws, tmp_path, how,
                                                         foreground):
    """A thread the exit waits for never ends (frozen here: the object-store
    client's, which the exit joins): the exit's deadline takes the mount
    away if need be and the process leaves, status 1, with one line."""
    source, env = provider_env("imds", servers, aws, tmp_path)
    d = daemons(source, env, foreground=foreground, batch_size=B, epochs=2, cache_size="1M",
                readahead="1M", region="us-east-1", endpoint=servers.endpoint)
    with open(os.path.join(d.mnt, "epoch-0000", "batch-000001.safetensors"), "rb") as f:
        assert f.read()
    tid = d.thread_named("bfs-s3")
    assert tid is not None, "no object-store thread"
    d.freeze(tid)
    if how == "unmount":
        r = _unmount(d.mnt)
        assert r.returncode == 0, r.stderr
    else:
        os.kill(d.pid, signal.SIGTERM)
    secs = d.wait_exit()
    print("\n%s%s: exit %.3f s with a thread stuck" % (how, " (-f)" if foreground else "", secs))
    assert d.status == 1, d.log_text()
    assert secs <= EXIT_BOUND, "%.2f s" % secs
    _wait_for(lambda: not os.path.ismount(d.mnt) and not _dead(d.mnt), "the mount to go", 5)
    if foreground:
        lines = [ln for ln in d.log_text().splitlines() if "leaving without" in ln]
        assert len(lines) == 1 and lines[0].startswith("batchfs: %s: " % d.mnt), d.log_text()
