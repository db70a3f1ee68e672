# SPDX-License-Identifier: Apache-2.0
"""Concurrency stress over a real mount: many reader processes, a cache far
smaller than the data (constant eviction), few decode threads, three epochs;
every byte read is compared with the oracle, the daemon's RSS is sampled.

    BFS_STRESS_SECONDS   how long the readers run (default 30)
    BFS_STRESS_READERS   reader processes (default 16)
    BFS_STRESS_REPORT    append a one-line summary to this file

Each reader, until the deadline, picks one of: a whole file read with
read(), a sequential walk over consecutive batches in chunks of random size,
or random os.pread()s (some past EOF). Before most reads it drops the file's
pages from the page cache (POSIX_FADV_DONTNEED), so the bytes come from the
daemon and not from the kernel's copy of an earlier read."""

import json
import multiprocessing as mp
import os
import random
import threading
import time

import pytest

import oracle

SECONDS = float(os.environ.get("BFS_STRESS_SECONDS", "30"))
READERS = int(os.environ.get("BFS_STRESS_READERS", "16"))
EPOCHS = 3
B = 32
MiB = 1 << 20
RSS_FLAT_MARGIN = 16 * MiB   # second half may exceed the first by this much
RSS_FIXED_MARGIN = 64 * MiB  # absolute bound: cache_size + index + this


@pytest.fixture(scope="module")
def ds_stress(gen, work):
    """~9 KiB per record: 32-record batches of ~300 KiB, 75 per epoch, plain
    shards (gzip ones decode ~500x slower here, leaving little concurrency
    to test). A ragged bytes feature makes every batch's geometry different."""
    out = work / "stress"
    oracle.generate(gen, out, 2400, ["img:bytes:1,len=8192", "x:float:16", "y:int64:1",
                                     "tokens:int64:0..40", "tags:bytes:0..3,len=1..7"],
                    shards=4, seed=31)
    return str(out), oracle.read_dataset(str(out))


def _expected_files(m, decoded):
    """{relative path: expected bytes} for every batch file of every epoch."""
    schema = json.loads(m.read("schema.json"))
    n = len(decoded)
    out = {}
    for e in range(EPOCHS):
        for b in range(oracle.batches_per_epoch(n, B)):
            idx = oracle.batch_records(n, B, b, 0, e)
            exp = oracle.expected_batch(decoded, schema, idx)
            base = "epoch-%04d/batch-%06d" % (e, b)
            for name, arr in exp.items():
                out[base + "/" + name + ".npy"] = oracle.npy_bytes(arr)
            out[base + ".safetensors"] = oracle.safetensors_bytes(exp)
    return out


# Set in the parent before the readers are forked; the children inherit it.
_EXPECTED = {}


def _first_diff(a, b):
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return i
    return min(len(a), len(b))


def _reader(wid, mnt, deadline, q):
    rng = random.Random(1000 + wid)
    names = sorted(_EXPECTED)
    per_batch = {}
    for nm in names:
        per_batch.setdefault(nm.split("/")[0] + "/" + nm.split("/")[1].split(".")[0], []).append(nm)
    batches = sorted(per_batch)
    verified = reads = 0
    wrong = []
    errors = []

    def check(name, off, got):
        nonlocal verified
        want = _EXPECTED[name][off:off + len(got)]
        if got != want:
            if len(wrong) < 5:
                wrong.append("%s: %d bytes at %d differ from byte %d" %
                             (name, len(got), off, off + _first_diff(got, want)))
            return False
        verified += len(got)
        return True

    def open_dropped(name):
        fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
        if rng.random() < 0.8:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return fd

    def whole(name):
        nonlocal reads
        fd = open_dropped(name)
        try:
            with os.fdopen(fd, "rb", buffering=0, closefd=False) as f:
                data = f.read()
            reads += 1
            if len(data) != len(_EXPECTED[name]):
                if len(wrong) < 5:
                    wrong.append("%s: read %d bytes, expected %d" % (name, len(data), len(_EXPECTED[name])))
                return
            check(name, 0, data)
        finally:
            os.close(fd)

    def chunked(name):
        nonlocal reads
        fd = open_dropped(name)
        try:
            off = 0
            size = len(_EXPECTED[name])
            while off < size:
                n = rng.choice([1, 7, 4096, 65536, 131072, rng.randint(1, 300000)])
                data = os.pread(fd, n, off)
                reads += 1
                if not data:
                    if len(wrong) < 5:
                        wrong.append("%s: EOF at %d of %d" % (name, off, size))
                    return
                if not check(name, off, data):
                    return
                off += len(data)
        finally:
            os.close(fd)

    def random_preads(name):
        nonlocal reads
        fd = open_dropped(name)
        try:
            size = len(_EXPECTED[name])
            for _ in range(rng.randint(1, 12)):
                off = rng.randint(0, size + 100)
                n = rng.choice([1, 3, 64, 4097, rng.randint(1, size + 10)])
                data = os.pread(fd, n, off)
                reads += 1
                check(name, off, data)  # past EOF: both are b""
        finally:
            os.close(fd)

    try:
        while time.monotonic() < deadline and not wrong:
            r = rng.random()
            if r < 0.35:
                whole(rng.choice(names))
            elif r < 0.65:
                # a sequential walk: consecutive batches of one epoch, one file each
                i = rng.randrange(len(batches))
                for k in range(rng.randint(2, 8)):
                    if i + k >= len(batches) or time.monotonic() >= deadline:
                        break
                    chunked(rng.choice(per_batch[batches[i + k]]))
            elif r < 0.97:
                random_preads(rng.choice(names))
            else:
                with open(os.path.join(mnt, "stats.json"), "rb") as f:
                    json.loads(f.read())
    except Exception as e:  # noqa: BLE001 - reported to the parent
        errors.append("%s: %r" % (type(e).__name__, e))
    q.put((wid, verified, reads, wrong, errors))


def _rss(pid):
    """The daemon's own memory: VmRSS less its file-backed pages (RssFile),
    which are the page cache of the shards it maps (shared with every
    reader of those files and reclaimable), not memory it holds."""
    rss = file_backed = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("RssFile:"):
                file_backed = int(line.split()[1]) * 1024
    return rss - file_backed


def _sanitized(binary):
    """ASan/TSan keep shadow memory and quarantines: RSS says nothing then."""
    with open(binary, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data


def test_stress_readers_evicting_cache(batchfs, mounter, ds_stress):
    src, decoded = ds_stress
    global _EXPECTED
    # one mount just to learn the schema and sizes, then the real one
    probe = mounter(src, batch_size=B, epochs=EPOCHS)
    _EXPECTED = _expected_files(probe, decoded)
    batch_bytes = max(len(v) for k, v in _EXPECTED.items() if k.endswith(".safetensors"))
    probe.stop()

    cache_size = 4 * batch_bytes  # a few batches: nearly every read evicts
    m = mounter(src, batch_size=B, epochs=EPOCHS, cache_size=cache_size, threads=2, prefetch=3)
    pid = m.proc.pid
    # every expected file is really there, with its size
    for name in (n for n in _EXPECTED if n.startswith("epoch-0002/batch-000000")):
        assert os.stat(m.path(name)).st_size == len(_EXPECTED[name]), name

    samples = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                samples.append((time.monotonic(), _rss(pid)))
            except OSError:
                return
            stop.wait(0.1)

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    t0 = time.monotonic()
    deadline = t0 + SECONDS
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    procs = [ctx.Process(target=_reader, args=(i, m.mnt, deadline, q)) for i in range(READERS)]
    for p in procs:
        p.start()
    results = []
    hard = deadline + 60 + SECONDS  # a reader stuck this long is a deadlock
    while len(results) < READERS and time.monotonic() < hard:
        try:
            results.append(q.get(timeout=1))
        except Exception:  # noqa: BLE001 - queue.Empty
            pass
    stuck = [p.pid for p in procs if p.is_alive() and len(results) < READERS]
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join()
    stop.set()
    sampler.join()
    elapsed = time.monotonic() - t0

    assert len(results) == READERS, "readers %s did not finish by the deadline (deadlock?)" % stuck
    assert m.proc.poll() is None, "batchfs died:\n" + m.log_text()
    stats = m.json("stats.json")
    verified = sum(r[1] for r in results)
    reads = sum(r[2] for r in results)
    wrong = [w for r in results for w in r[3]]
    errors = [e for r in results for e in r[4]]

    # RSS: flat after warm-up, and bounded by the cache, the index and a margin
    rss = [v for t, v in samples if t >= t0 + 0.2 * SECONDS and t <= deadline]
    half = len(rss) // 2
    first, second = max(rss[:half] or [0]), max(rss[half:] or [0])
    peak = max(v for _, v in samples)
    bound = cache_size + stats["index_bytes"] + RSS_FIXED_MARGIN
    summary = ("stress: %d readers, %.1f s, %d reads, %d bytes verified, %d wrong, %d errors; "
               "cache %d KiB, evictions %d, decoded %d; RSS MiB first half %.1f, second half "
               "%.1f, peak %.1f (bound %.1f)" %
               (READERS, elapsed, reads, verified, len(wrong), len(errors), cache_size >> 10,
                stats["cache_evictions"], stats["batches_decoded"], first / MiB, second / MiB,
                peak / MiB, bound / MiB))
    print(summary)
    if os.environ.get("BFS_STRESS_REPORT"):
        with open(os.environ["BFS_STRESS_REPORT"], "a") as f:
            f.write(summary + "\n")

    assert not wrong, wrong
    assert not errors, errors
    assert verified > 0 and reads > READERS
    assert stats["cache_evictions"] > 0, stats
    assert "ThreadSanitizer" not in m.log_text() and "AddressSanitizer" not in m.log_text(), m.log_text()
    if not _sanitized(batchfs):
        assert len(rss) >= 4, samples
        assert second <= first + RSS_FLAT_MARGIN, summary
        assert peak <= bound, summary
    # the daemon is healthy afterwards: one more full check of a batch
    name = "epoch-0001/batch-000005.safetensors"
    assert m.read(name) == _EXPECTED[name]
