# SPDX-License-Identifier: Apache-2.0
"""`batchfs stats` and `batchfs top` over real mounts: --json against the
mount's own stats.json, records_served counted exactly (every .npy of a batch,
its .safetensors, the all/ view), the human form, top's plain lines off a
terminal, and top on a pseudo-terminal (python's pty): frames drawn, the
counters followed, q and Ctrl-C leaving it with the terminal restored."""

import errno
import json
import os
import pty
import re
import select
import signal
import subprocess
import termios
import time

import pytest

import oracle
from helpers import make_dataset

DEADLINE = 30  # seconds: a bound for hangs, never a speed requirement
B = 50


def stats(m):
    with open(m.path("stats.json"), "rb") as f:
        return json.loads(f.read())


def read_all(path):
    with open(path, "rb") as f:
        return len(f.read())


def read_batch_npys(m, epoch, b):
    d = m.path("epoch-%04d" % epoch, "batch-%06d" % b)
    for root, _, files in os.walk(d):
        for name in sorted(files):
            read_all(os.path.join(root, name))


def run(binary, *args, timeout=DEADLINE):
    return subprocess.run([binary] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout)


@pytest.fixture(scope="module")
def ds_watch(gen, work):
    # a ragged feature too: records_served must not depend on fixed sizes
    return make_dataset(gen, work / "watch", 1000, ["x:float:8", "y:int64:1", "t:int64:0..9"],
                        shards=2, seed=31)


def test_stats_json_is_the_mounts_stats(batchfs, mounter, ds_watch):
    m = mounter(ds_watch.path, batch_size=B, prefetch=0, threads=1)
    read_batch_npys(m, 0, 3)
    before = stats(m)
    r = run(batchfs, "stats", m.mnt, "--json")
    after = stats(m)
    assert r.returncode == 0, r.stderr
    assert r.stderr == b""
    got = json.loads(r.stdout)
    assert set(got) == set(before) == set(after)
    for k, v in got.items():
        if isinstance(v, bool):
            assert v == before[k], k
        else:
            assert before[k] <= v <= after[k], (k, before[k], v, after[k])
    assert got["records"] == 1000 and got["batches_per_epoch"] == 1000 // B
    assert got["batches_decoded"] == 1 and got["records_decoded"] == B
    # --json may also come first
    r2 = run(batchfs, "stats", "--json", m.mnt)
    assert r2.returncode == 0 and set(json.loads(r2.stdout)) == set(got)


def test_records_served_counts_records_once_per_form(batchfs, mounter, ds_watch):
    m = mounter(ds_watch.path, batch_size=B, prefetch=0, threads=1)
    s0 = stats(m)
    assert s0["records_served"] == 0 and s0["records_decoded"] == 0
    for b in range(4):  # every .npy of 4 batches: 4 * B records
        read_batch_npys(m, 0, b)
    s1 = stats(m)
    assert s1["records_served"] == 4 * B, s1
    assert s1["records_decoded"] == 4 * B and s1["batches_decoded"] == 4
    read_all(m.path("epoch-0000", "batch-000007.safetensors"))  # its .safetensors: B more
    assert stats(m)["records_served"] == 5 * B
    # every file of the epoch view: its 1000 records once more
    view = m.path("epoch-0000", "all")
    for root, _, files in os.walk(view):
        for name in sorted(files):
            read_all(os.path.join(root, name))
    s2 = stats(m)
    assert s2["records_served"] == 5 * B + 1000, s2
    assert s2["chunks_decoded"] >= 1
    assert s2["records_decoded"] == 5 * B + 1000  # the chunks cover the epoch once
    # a failed read serves nothing
    assert s2["failed_reads"] == 0


def test_prefetch_depth_is_shown(batchfs, mounter, ds_watch):
    m = mounter(ds_watch.path, batch_size=B, prefetch=3, threads=1)
    read_batch_npys(m, 0, 0)
    end = time.monotonic() + DEADLINE
    while True:
        s = stats(m)
        if s["prefetch_ready"] == 3 and s["decoding"] == 0 and s["prefetch_queued"] == 0:
            break
        assert s["prefetch_ready"] + s["prefetch_queued"] + s["decoding"] <= 3, s
        assert time.monotonic() < end, s
        time.sleep(0.05)
    assert s["records_decoded"] == 4 * B
    r = run(batchfs, "stats", m.mnt)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert re.search(r"^prefetch +3 ready ahead, 0 queued, 0 decoding now", out, re.M), out
    # reading one of them takes it off the ready list
    read_batch_npys(m, 0, 1)
    s = stats(m)
    assert s["prefetch_ready"] + s["prefetch_queued"] + s["decoding"] == 3  # 2, 3 + the new 4


def test_stats_human_form(batchfs, mounter, ds_watch):
    m = mounter(ds_watch.path, batch_size=B, prefetch=0, threads=1)
    for b in range(3):
        read_batch_npys(m, 0, b)
    s = stats(m)
    r = run(batchfs, "stats", m.mnt)
    assert r.returncode == 0 and r.stderr == b""
    out = r.stdout.decode()
    assert re.search(r"^records +1,000, 20 batches per epoch$", out, re.M), out
    assert re.search(r"^served +150 records, .* in %s reads \(0 failed\)" % format(s["reads"], ","),
                     out, re.M), out
    assert re.search(r"^decoded +150 records: 3 batches, 0 chunks", out, re.M), out
    assert re.search(r"^errors +0 corrupt records, 0 skipped, 0 failed reads, 0 decode errors$",
                     out, re.M), out
    assert re.search(r"^cache +.*hits \(", out, re.M), out


def test_failed_reads_count_what_readers_see(mounter, gen, tmp_path):
    """The kernel asks twice for a read(2) that fails (its readahead, then
    the reader's page): failed_reads counts the reader's failures, for small
    and large files, a file read again, and the epoch view."""
    src = tmp_path / "bad"
    shards = oracle.generate(gen, src, 400, ["x:float:1000", "y:int64:1", "t:int64:0..9"],
                             shards=1, seed=8)
    recs = oracle.scan_records(shards[0])
    raw = bytearray(open(shards[0], "rb").read())
    for i in range(0, 400, 50):  # a record of every other batch of 25 is corrupt
        raw[recs[i]["data_offset"] + recs[i]["length"]] ^= 0x5A
    open(shards[0], "wb").write(raw)
    m = mounter(str(src), batch_size=25, shuffle="none", prefetch=0)
    seen = 0

    def fails(path, times=1):
        nonlocal seen
        for _ in range(times):
            try:
                with open(path, "rb") as f:
                    f.read()
            except OSError as e:
                assert e.errno == errno.EIO
                seen += 1
    for b in range(0, 16, 2):  # the batches that hold a corrupt record
        d = m.path("epoch-0000", "batch-%06d" % b)
        fails(os.path.join(d, "y.npy"))  # one page
        fails(os.path.join(d, "x.npy"), times=3 if b == 0 else 1)  # 100 KB
        fails(d + ".safetensors")
    fails(m.path("epoch-0001", "all", "x.npy"))  # 1.6 MB, fails in its first chunk
    assert seen == 8 * 3 + 2 + 1
    assert stats(m)["failed_reads"] == seen


def test_errors_are_counted_in_stats_and_top(batchfs, mounter, corrupt_ds):
    m = mounter(corrupt_ds.path, batch_size=20, shuffle="none", prefetch=0, threads=1)
    bad = corrupt_ds.bad_global // 20
    with pytest.raises(OSError) as ei:
        read_all(m.path("epoch-0000", "batch-%06d" % bad, "x.npy"))
    assert ei.value.errno == errno.EIO
    s = stats(m)
    assert s["failed_reads"] >= 1 and s["corrupt_records"] >= 1
    out = run(batchfs, "stats", m.mnt).stdout.decode()
    assert re.search(r"^errors +%d corrupt records, 0 skipped, %d failed reads"
                     % (s["corrupt_records"], s["failed_reads"]), out, re.M), out
    r = run(batchfs, "top", "--count", "1", "--interval", "0.1", m.mnt)
    assert r.returncode == 0, r.stderr
    head, line = r.stdout.decode().splitlines()
    row = dict(zip(head.split(), line.split()))
    assert int(row["errors"]) == s["corrupt_records"] + s["failed_reads"] + s["decode_errors"], \
        (head, line)


def test_top_plain_lines_follow_the_counters(batchfs, mounter, ds_watch):
    m = mounter(ds_watch.path, batch_size=B, prefetch=0, threads=1)
    p = subprocess.Popen([batchfs, "top", "--interval", "0.2", m.mnt], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        head = p.stdout.readline().decode().split()
        assert head[:3] == ["uptime", "rec/s", "MB/s"] and head[-1] == "served", head

        def row():
            line = p.stdout.readline().decode()
            assert line, p.stderr.read()
            r = dict(zip(head, line.split()))
            assert len(r) == len(head), line
            return r

        first = row()
        assert int(first["served"]) == 0
        for b in range(6):
            read_batch_npys(m, 0, b)
        prev, seen, end = 0, [], time.monotonic() + DEADLINE
        while prev < 6 * B:
            r = row()
            served = int(r["served"])
            # a line whose interval served records shows a rate, and only then
            assert (float(r["rec/s"]) > 0) == (served > prev), r
            assert float(r["MB/s"]) >= 0 and float(r["hit%"] if r["hit%"] != "-" else 0) >= 0
            seen.append(served)
            prev = served
            assert time.monotonic() < end, seen
        assert prev == 6 * B
        # nothing more read: the rate falls to 0
        r = row()
        assert int(r["served"]) == 6 * B and float(r["rec/s"]) == 0, r
    finally:
        p.send_signal(signal.SIGINT)
        rc = p.wait(DEADLINE)
    assert rc == 0


def test_top_leaves_with_one_line_when_the_mount_goes(batchfs, mounter, ds_watch, tmp_path):
    m = mounter(ds_watch.path, batch_size=B)
    p = subprocess.Popen([batchfs, "top", "--interval", "0.1", m.mnt], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout.readline()  # the header: it started
    m.stop()
    out, err = p.communicate(timeout=DEADLINE)
    assert p.returncode == 1
    lines = err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("batchfs: ") and m.mnt in lines[0], lines


def test_bad_use_gets_one_line(batchfs, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    for cmd in (["stats"], ["stats", "--json"], ["top"], ["top", "--count", "1"]):
        r = run(batchfs, *cmd, str(plain))
        assert r.returncode == 1, (cmd, r)
        assert r.stderr.decode() == "batchfs: %s: not a batchfs mount (no stats.json)\n" % plain
        assert r.stdout == b"" or cmd[0] == "top"
    for cmd in (["stats"], ["top"], ["stats", "--bogus", str(plain)], ["top", "--interval", "0", str(plain)],
                ["top", "--count", "x", str(plain)], ["stats", str(plain), str(plain)]):
        r = run(batchfs, *cmd)
        assert r.returncode == 2, (cmd, r)
        assert r.stderr.decode().startswith("batchfs %s: " % cmd[0]), r.stderr
    # a stats.json that is not ours
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "stats.json").write_text("[1, 2]\n")
    r = run(batchfs, "stats", str(fake))
    assert r.returncode == 1
    assert r.stderr.decode().startswith("batchfs: %s/stats.json: not a JSON object" % fake)
    for text in ('{"reads": 50r0}', '{"reads": 1,}', '{"reads": 1} x', '{"reads" 1}'):
        (fake / "stats.json").write_text(text)
        r = run(batchfs, "stats", "--json", str(fake))
        assert r.returncode == 1 and r.stdout == b"", text
        assert r.stderr.decode().startswith("batchfs: %s/stats.json: not a flat JSON object" % fake)
        assert r.stderr.count(b"\n") == 1
    # keys it does not know (a newer daemon) pass through --json as they are
    newer = {"reads": 3, "bytes_read": 12, "new_counter": 1.5, "label": "a \"b\"",
             "nested": {"x": [1, {"y": "]"}]}, "off": None, "on": True}
    (fake / "stats.json").write_text(json.dumps(newer, indent=2) + " " * 300)
    r = run(batchfs, "stats", "--json", str(fake))
    assert r.returncode == 0 and json.loads(r.stdout) == newer, r
    r = run(batchfs, "stats", str(fake))
    assert r.returncode == 0 and re.search(r"^served +- records, 12 B in 3 reads", r.stdout.decode(),
                                           re.M), r.stdout
    help_text = run(batchfs, "--help").stdout.decode()
    assert "batchfs stats [--json] MOUNTPOINT" in help_text and "batchfs top " in help_text


# ------------------------------------------------------------------ the terminal


class Pty:
    """batchfs top on a pseudo-terminal of 100 columns."""

    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
        import fcntl
        import struct
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.out = b""
        self.status = None

    def read_until(self, pred, what):
        end = time.monotonic() + DEADLINE
        while not pred(self.out):
            left = end - time.monotonic()
            assert left > 0, "timed out waiting for %s; got %r" % (what, self.out[-3000:])
            r, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:  # EIO: the child closed the terminal
                    data = b""
                if not data:
                    assert pred(self.out), "top ended before %s: %r" % (what, self.out[-3000:])
                    return
                self.out += data

    @staticmethod
    def frames_of(out):
        """Each whole frame's text in out (from cursor-home to the
        clear-to-end; a frame still arriving is not one yet)."""
        return [f.split(b"\x1b[J")[0].replace(b"\x1b[K", b"").decode(errors="replace")
                for f in out.split(b"\x1b[H")[1:] if b"\x1b[J" in f]

    def frames(self):
        return self.frames_of(self.out)

    def wait(self):
        end = time.monotonic() + DEADLINE
        while True:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
                self.drain()
                return self.status
            assert time.monotonic() < end, "top did not exit"
            try:  # keep draining so it never blocks on a full terminal
                r, _, _ = select.select([self.fd], [], [], 0.05)
                if r:
                    self.out += os.read(self.fd, 65536)
            except OSError:
                pass

    def drain(self):
        """What the exited child left in the terminal."""
        while True:
            try:
                r, _, _ = select.select([self.fd], [], [], 0.2)
                data = os.read(self.fd, 65536) if r else b""
            except OSError:
                data = b""
            if not data:
                return
            self.out += data

    def close(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        os.close(self.fd)


@pytest.mark.parametrize("leave", [b"q", b"\x03"])
def test_top_on_a_terminal(batchfs, mounter, ds_watch, leave):
    m = mounter(ds_watch.path, batch_size=B, prefetch=0, threads=1)
    t = Pty([batchfs, "top", "--interval", "0.2", m.mnt])
    try:
        # the first frame at once: a screen of its own, the mount named
        t.read_until(lambda o: b"\x1b[J" in o, "a first frame")
        assert t.out.startswith(b"\x1b[?1049h"), t.out[:40]
        f = t.frames()[0]
        assert "batchfs top  %s" % m.mnt in f and "records 1,000, 20 batches per epoch" in f, f
        assert re.search(r"^served +- records/s", f, re.M), f  # no rate from one sample
        # while it runs the terminal takes keys one by one, unechoed
        lflag = termios.tcgetattr(t.fd)[3]
        assert not lflag & termios.ICANON and not lflag & termios.ECHO
        for b in range(4):
            read_batch_npys(m, 0, b)
        # a whole frame: the raw text may stop in the middle of one
        t.read_until(lambda o: any("totals   200 records served" in x for x in Pty.frames_of(o)),
                     "the reads to show")
        frames = [x for x in t.frames() if "totals   200 records served" in x]
        shown = "".join(t.frames())
        # some frame covered the reads: a rate, decodes, a hit rate line
        assert re.search(r"^served +[1-9][0-9,]* records/s", shown, re.M), shown[-3000:]
        assert re.search(r"^decode +[1-9][0-9,]* records/s", shown, re.M), shown[-3000:]
        assert all(len(line) <= 100 for x in frames for line in x.splitlines())
        assert re.search(r"^errors +0 corrupt records", frames[-1], re.M), frames[-1]
        assert re.search(r"^prefetch depth 0: 0 ready ahead, 0 queued; 0 decoding now", frames[-1],
                         re.M), frames[-1]
        os.write(t.fd, leave)
        assert t.wait() == 0
        # the screen and the terminal modes are given back
        assert t.out.rstrip(b"\r\n").endswith(b"\x1b[?25h\x1b[?1049l"), t.out[-60:]
        after = termios.tcgetattr(t.fd)
        assert after[3] & termios.ICANON and after[3] & termios.ECHO
    finally:
        t.close()
