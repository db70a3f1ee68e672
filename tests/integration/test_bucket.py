# SPDX-License-Identifier: Apache-2.0
"""A bucket as SOURCE: batchfs mounts s3://BUCKET/PREFIX/,
s3://BUCKET/KEY and a glob through tests/s3's servers: s3rver (lax: it
accepts any well-formed signature) behind s3proxy.py, which checks every
signature as S3 does (against the key pair a test gives it), injects
faults and logs every request. The datasets come from bfs_gen, the bucket
is filled with botocore straight into s3rver (not through the proxy, so
the proxy's log holds only what batchfs sent), and every mount is
compared with a local mount of the same files.

What must be true (docs/contract.md, "SOURCE"):
- a bucket mount serves the tree and bytes of a local mount of the same
  files: global and block shuffle, plain and gzip objects (shadow copies
  on and off), rank folders, a prefix, one key, a glob; names that are not
  shards (and "subfolders" of the prefix, as a directory's) are passed over
  and named in README.txt;
- the first mount streams each object once; a re-mount of the unchanged
  bucket with the same index_dir lists it and reads no object byte;
- transient faults are retried and the bytes are right; a persistent one
  fails only the batches of its object (EIO, errors.txt names the object
  and the range) and the daemon keeps serving; an object replaced after
  indexing fails its reads (never mixed bytes) and errors.txt says to
  re-mount; a denied, missing or unreachable bucket fails the mount with
  one line and exit status 1;
- the secret key and the session token are never written or printed;
- `batchfs index` builds an index_dir that read-only mounts share without
  reading an object byte for it or writing anything there;
- disk_cache= keeps a bucket's bytes: epoch 1 sends no GET;
- `fusermount3 -u` then a mount on the same folder works every time, and
  so do two mounts sharing a read-only index_dir.
"""

import concurrent.futures
import errno
import glob
import json
import os
import re
import socket
import subprocess
import sys
import time

import numpy
import pytest

import mixref
import oracle
from fusemount import BatchfsMount as Mount
from fusemount import MOUNT_DEADLINE, POLL, MountError
from fusemount import mount_opts as _opts
from helpers import read_or_errno, remount_loop

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s3"))
import s3env  # noqa: E402

BUCKET = "bfs-int"
KEY, SECRET = s3env.S3RVER_KEY, s3env.S3RVER_SECRET
FEATURES = ["x:float:4", "y:int64:1", "tokens:int64:0..12", "img:bytes:1,len=12",
            "name:bytes:1,len=0..9,missing=0.2", "tags:bytes:0..3,len=1..5"]
# no ragged feature, every record of one length: no count pass at mount,
# and two seeds give shards of equal sizes
FIXED = ["x:float:4", "img:bytes:1,len=12"]
BIG = ["x:float:4", "blob:bytes:1,len=60000"]
B = 32
# the files of a dataset folder that are not shards: passed over (and named
# in README.txt) by a directory mount and by a bucket mount alike
NOT_SHARDS = {"_SUCCESS": b"", "dataset_info.json": b'{"name": "x"}\n',
              "part-00000.tfrecord.idx": b"an index of someone else's"}
# a folder in the dataset folder holding a valid shard of other records: a
# directory mount does not descend into it
SUBFOLDER = "more"


# ---------------------------------------------------------------- servers and data


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """s3rver and the proxy, once per session. Yields the proxy's control."""
    d = tmp_path_factory.mktemp("s3")
    try:
        srv = s3env.start_s3rver(str(d / "data"), lax=True, buckets=[BUCKET])
    except RuntimeError as e:  # no node, no npm registry
        pytest.skip("s3rver would not start: %s" % str(e)[:300])
    prx = s3env.start_proxy("%s:%d" % (srv.host, srv.port))
    ctl = s3env.ProxyControl(prx.url)
    ctl.endpoint = prx.url
    ctl.s3rver = srv
    ctl.home = str(d / "home")
    os.makedirs(ctl.home)
    try:
        yield ctl
    finally:
        prx.stop()
        srv.stop()


@pytest.fixture
def proxy(s3):
    """The proxy with no rule and an empty log, checking every signature
    against S3RVER's key pair."""
    s3.reset()
    s3.config(sigv4="%s:%s" % (KEY, SECRET))
    return s3


@pytest.fixture(scope="session")
def boto(s3):
    return s3env.boto_client(s3.s3rver.url)


def put_folder(boto, local, prefix):
    """Every file under local as PREFIX + its relative path; an empty
    folder as a "folder/" marker, as consoles make them."""
    for root, dirs, files in os.walk(local):
        rel = os.path.relpath(root, local)
        rel = "" if rel == "." else rel + "/"
        if rel and not files and not dirs:
            boto.put_object(Bucket=BUCKET, Key=prefix + rel, Body=b"")
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                boto.put_object(Bucket=BUCKET, Key=prefix + rel + f, Body=fh.read())


def make_folder(gen, d, records, shards, compression, seed, features=FEATURES):
    """A dataset folder as a job leaves one: shards, files that are not
    shards, an empty folder, and a folder with another valid shard (the
    bucket gets the same keys, and a "folder/" marker for the empty one)."""
    oracle.generate(gen, d, records, features, shards=shards, compression=compression, seed=seed)
    for name, data in NOT_SHARDS.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    os.makedirs(os.path.join(d, "empty"))
    oracle.generate(gen, os.path.join(d, SUBFOLDER), 40, features, shards=1,
                    compression=compression, seed=seed + 100)
    return str(d)


@pytest.fixture(scope="session")
def data(s3, boto, gen, work):  # noqa: F811
    """Local folders and the same files in the bucket: "plain/" (3 plain
    shards), "gzip/" (2 gzip shards), "fixed/" (3 plain shards, FIXED),
    "big/" (one 18 MB shard: an object read in several stream chunks)."""
    out = {}
    for name, n, shards, comp, seed, feats in [("plain", 400, 3, "none", 11, FEATURES),
                                               ("gzip", 300, 2, "gzip", 12, FEATURES),
                                               ("fixed", 300, 3, "none", 13, FIXED),
                                               ("big", 300, 1, "none", 14, BIG)]:
        d = make_folder(gen, work / ("bucket-" + name), n, shards, comp, seed, feats)
        put_folder(boto, d, name + "/")
        boto.put_object(Bucket=BUCKET, Key=name + "/", Body=b"")  # the console's marker
        out[name] = d
    return out


def shard_names(d):
    return sorted(f for f in os.listdir(d) if ".tfrecord" in f and not f.endswith(".idx"))


# ---------------------------------------------------------------- mounts


class BucketMount(Mount):
    """A foreground batchfs with an environment of the test's (credentials
    in AWS_* variables, HOME without ~/.aws), started without waiting for
    its mount (a test may look at it while it mounts): wait() waits."""

    def __init__(self, binary, source, mnt, opts, log, env):
        super().__init__(binary, source, mnt, opts, log, env=env)

    def start(self):
        os.makedirs(self.mnt, exist_ok=True)
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=logf,
                                         stderr=logf, env=self.env)
        return self

    @property
    def index_dir(self):
        return re.search(r"(?:^|,)index_dir=([^,]*)", self.opts).group(1)

    def wait(self):
        end = time.monotonic() + MOUNT_DEADLINE
        while not self._is_ready():
            rc = self.proc.poll()
            if rc is not None:
                raise MountError("batchfs exited with %d before mounting %s -o %s:\n%s" %
                                 (rc, self.source, self.opts, self.log_text()))
            if time.monotonic() > end:
                raise MountError("mount of %s not ready:\n%s" % (self.source, self.log_text()))
            time.sleep(POLL)
        return self


def aws_env(home, key=KEY, secret=SECRET, token=None, **extra):
    return s3env.free_env(home, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret,
                          AWS_SESSION_TOKEN=token, **extra)


def url(path):
    return "s3://%s/%s" % (BUCKET, path)


@pytest.fixture
def bmount(batchfs, s3, tmp_path):  # noqa: F811
    """bmount(source, env=None, wait=True, **opts): a bucket mount through
    the proxy (endpoint= given unless opts say otherwise); local sources
    mount too (no endpoint). Each mount gets an index_dir of its own unless
    one is given. All are stopped at teardown."""
    mounts = []

    def mount(source, env=None, wait=True, **opts):
        n = len(mounts) + 1
        if source.startswith("s3://"):
            opts.setdefault("endpoint", s3.endpoint)
        m = BucketMount(batchfs, source, tmp_path / ("mnt%d" % n),
                        _opts(str(tmp_path / ("ix%d" % n)), **opts),
                        str(tmp_path / ("log%d" % n)), env or aws_env(s3.home))
        mounts.append(m)
        m.start()
        return m.wait() if wait else m

    yield mount
    for m in reversed(mounts):
        m.stop()


def run_batchfs(batchfs, *args, env, timeout=60):  # noqa: F811
    return subprocess.run([batchfs] + list(args), capture_output=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=timeout)


# ---------------------------------------------------------------- trees


TOP = ("README.txt", "errors.txt", "stats.json", "schema.json")


def tree(m):
    """Every path under the mount but its top files: folders end in '/'."""
    out = []
    for root, dirs, files in os.walk(m.mnt):
        rel = os.path.relpath(root, m.mnt)
        for d in dirs:
            out.append(os.path.normpath(os.path.join(rel, d)) + "/")
        for f in files:
            p = os.path.normpath(os.path.join(rel, f))
            if p not in TOP:
                out.append(p)
    return sorted(out)


def contents(m):
    """{path: bytes} of every file of the tree."""
    return {p: m.read(p) for p in tree(m) if not p.endswith("/")}


def schema_of(m):
    """schema.json without what names the source."""
    s = m.json("schema.json")
    s["shards"] = [sh.rsplit("/", 1)[-1] for sh in s["shards"]]
    return s


@pytest.fixture(scope="session")
def reference(batchfs, tmp_path_factory):  # noqa: F811
    """reference(local source, **opts) -> (tree, {path: bytes}, schema,
    README.txt) of a local mount, each made once per session."""
    cache = {}
    d = tmp_path_factory.mktemp("ref")

    def ref(source, **opts):
        k = (source, tuple(sorted(opts.items())))
        if k not in cache:
            n = len(cache)
            m = Mount(batchfs, source, d / ("mnt%d" % n), _opts(str(d / ("ix%d" % n)), **opts),
                      str(d / ("log%d" % n)))
            try:
                m.start()
                cache[k] = (tree(m), contents(m), schema_of(m), m.read("README.txt").decode())
            finally:
                m.stop()
        return cache[k]

    return ref


def assert_same(m, ref):
    """m serves ref's tree, bytes and schema."""
    files, data, schema, _ = ref
    assert tree(m) == files
    assert len(data) > 20
    for p, want in data.items():
        got = m.read(p)
        assert got == want, "%s: %d bytes, not the local mount's %d" % (p, len(got), len(want))
    assert schema_of(m) == schema


def passed_over(readme):
    """The names README.txt says were passed over (last path part, a
    folder with its '/')."""
    m = re.search(r"\nPassed over in [^\n]*\n((?:  [^\n]*\n)*)", readme)
    if not m:
        return set()
    out = set()
    for ln in m.group(1).splitlines():
        p = ln.strip()
        out.add(p.rstrip("/").rsplit("/", 1)[-1] + ("/" if p.endswith("/") else ""))
    return out


# ---------------------------------------------------------------- the proxy's log


def path_of(e):
    return e["target"].split("?")[0]


def is_list(e):
    return e["method"] == "GET" and "list-type=2" in e["target"]


def object_gets(log, prefix=""):
    """GETs of objects (not listings) under prefix."""
    want = "/%s/%s" % (BUCKET, prefix)
    return [e for e in log if e["method"] == "GET" and not is_list(e)
            and path_of(e).startswith(want)]


def byte_range(e):
    m = re.match(r"bytes=(\d+)-(\d+)$", e["headers"].get("range", ""))
    assert m, e
    return int(m.group(1)), int(m.group(2)) + 1


# ================================================================ 1. the same tree and bytes


@pytest.mark.parametrize("name,opts", [
    ("plain", dict(shuffle="global")),
    ("plain", dict(shuffle="block", block_size="2K", window=3)),
    ("plain", dict(world=2, seed=5)),
    ("gzip", dict(shuffle="global")),              # shadow copies in index_dir
    ("gzip", dict(shuffle="block", block_size="2K", window=2, shadow="off")),
], ids=["global", "block", "ranks", "gzip-shadow", "gzip-block-noshadow"])
def test_a_prefix_serves_the_local_tree_and_bytes(proxy, bmount, data, reference, name, opts):
    ref = reference(data[name], batch_size=B, epochs=2, **opts)
    m = bmount(url(name + "/"), batch_size=B, epochs=2, **opts)
    assert_same(m, ref)
    log = proxy.log()
    assert all(e.get("sig") == "ok" for e in log), [e for e in log if e.get("sig") != "ok"]
    # the shards are read, nothing else under the prefix is
    read = {path_of(e).rsplit("/", 1)[-1] for e in object_gets(log)}
    assert read == set(shard_names(data[name]))
    readme = m.read("README.txt").decode()
    assert "\nObject store: endpoint %s (path-style)" % proxy.endpoint in readme
    assert passed_over(readme) >= set(NOT_SHARDS), readme
    stats = m.json("stats.json")
    assert stats["io_backend"] == "custom" and stats["io_depth"] == 64, stats
    assert stats["io_failed"] == 0 and stats["failed_reads"] == 0
    gz = glob.glob(os.path.join(m.index_dir, "*.shadow"))
    if name == "gzip" and opts.get("shadow") != "off":
        # the objects' plain copies serve the batches: no GET after the index
        assert len(gz) == 2 and stats["io_reads"] == 0, (gz, stats)
    else:
        assert not gz and stats["io_reads"] > 0


def test_folders_under_the_prefix_are_passed_over_as_a_directory_does(proxy, bmount, data,
                                                                     reference):
    """A directory mount does not descend into its folders; a bucket
    listing is a prefix listing (every key under it, folders and all), so
    keys past a '/' under the prefix are folders' and passed over: the
    "empty/" marker and more/part-00000.tfrecord (a valid shard of other
    records). README.txt names each folder once."""
    ref = reference(data["plain"], batch_size=B)
    m = bmount(url("plain/"), batch_size=B)
    assert m.json("schema.json")["records"] == 400
    assert_same(m, ref)
    log = proxy.log()
    assert not [e for e in object_gets(log) if "/%s/" % SUBFOLDER in path_of(e)]
    readme = m.read("README.txt").decode()
    assert passed_over(ref[3]) == set(NOT_SHARDS)
    assert passed_over(readme) == set(NOT_SHARDS) | {"empty/", SUBFOLDER + "/"}, readme
    assert readme.count(url("plain/%s/" % SUBFOLDER)) == 1, readme


def test_one_key_and_a_glob_serve_the_local_bytes(proxy, bmount, data, reference):
    d = data["plain"]
    names = shard_names(d)
    # one object
    ref = reference(os.path.join(d, names[1]), batch_size=B)
    assert_same(bmount(url("plain/" + names[1]), batch_size=B), ref)
    assert {path_of(e) for e in object_gets(proxy.log())} == {"/%s/plain/%s" % (BUCKET, names[1])}
    # a glob on the last part: the first and last shards, not the
    # subfolder's shard of the same name; part-00000.tfrecord.idx matches
    # too and is passed over as a directory's is (a local glob takes every
    # file it matches: the local mount's glob leaves the .idx out)
    proxy.reset()
    proxy.config(sigv4="%s:%s" % (KEY, SECRET))
    pat = "part-0000[02].tfrecord"
    assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, pat))) == \
        [names[0], names[2]]
    ref = reference(os.path.join(d, pat), batch_size=B, shuffle="block", block_size="2K")
    m = bmount(url("plain/" + pat + "*"), batch_size=B, shuffle="block", block_size="2K")
    assert_same(m, ref)
    assert {path_of(e) for e in object_gets(proxy.log())} == {
        "/%s/plain/%s" % (BUCKET, n) for n in (names[0], names[2])}
    assert passed_over(m.read("README.txt").decode()) == {names[0] + ".idx"}


# ================================================================ 2. index once, re-mount reads none


def object_sizes(d):
    return {sh: os.path.getsize(os.path.join(d, sh)) for sh in shard_names(d)}


STREAM_CHUNK = 8 << 20  # objsrc.c: a scan reads its object in chunks of this


def test_the_first_mount_reads_each_object_in_a_few_large_gets(proxy, bmount, data):
    """Indexing streams an object; the ragged features' counts (tokens,
    name, tags) are read in blocks of records, not one GET per record."""
    m = bmount(url("plain/"), batch_size=B, prefetch=0)
    assert m.json("schema.json")["records"] == 400
    log = proxy.log()
    for sh, size in object_sizes(data["plain"]).items():
        gets = object_gets(log, "plain/" + sh)
        assert 2 <= len(gets) <= 4, (sh, [e["headers"]["range"] for e in gets])


@pytest.mark.parametrize("name,shadow", [("fixed", "on"), ("big", "on"), ("gzip", "on"),
                                         ("gzip", "off"), ("plain", "on")],
                         ids=["fixed", "big", "gzip", "gzip-noshadow", "plain"])
def test_the_first_mount_streams_each_object_once_a_remount_reads_none(
        proxy, bmount, data, reference, tmp_path, name, shadow):
    ix = str(tmp_path / "shared-ix")
    ref = reference(data[name], batch_size=B)
    m = bmount(url(name + "/"), index_dir=ix, batch_size=B, prefetch=0, shadow=shadow)
    log = proxy.log()
    assert len([e for e in log if is_list(e)]) == 1
    twice = []
    for sh, size in object_sizes(data[name]).items():
        gets = object_gets(log, name + "/" + sh)
        # a look at its first bytes (its compression), then one stream
        sniff = [e for e in gets if byte_range(e)[1] <= 64]
        stream = sorted((e for e in gets if e not in sniff), key=byte_range)
        assert len(sniff) <= 1, sh
        at = 0
        for e in stream:
            a, b = byte_range(e)
            assert e["status"] == 206 and e["bytes"] == b - a, e
            if a != at:
                twice.append("%s: %s after byte %d" % (sh, e["headers"]["range"], at))
            at = max(at, b)
        assert at == size and stream
        assert len(stream) == -(-size // STREAM_CHUNK) or twice, (sh, size)
    assert not m.json("stats.json")["index_reused"]
    m.stop()
    # the same bucket, the same index_dir: a listing, not one object byte
    proxy.reset()
    proxy.config(sigv4="%s:%s" % (KEY, SECRET))
    m = bmount(url(name + "/"), index_dir=ix, batch_size=B, prefetch=0, shadow=shadow)
    log = proxy.log()
    assert log and all(is_list(e) for e in log), [e["target"] for e in log]
    st = m.json("stats.json")
    assert st["index_reused"] and st["schema_reused"], st
    assert_same(m, ref)
    # the ragged features' counts (tags) come from the scan, not from a
    # second read of the objects (decoder/dataset/dataset_counts.c)
    assert not twice


# ================================================================ 3. faults


RULES = {
    "503-slowdown": {"action": "status", "status": 503, "code": "SlowDown", "first": 6},
    "429": {"action": "status", "status": 429, "first": 6},
    "500": {"action": "status", "status": 500, "first": 6},
    "reset-before": {"action": "reset", "when": "before", "first": 5},
    "reset-after": {"action": "reset", "when": "after", "first": 5},
    "truncated": {"action": "truncate", "bytes": 7, "first": 5},
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_transient_failures_are_retried_and_the_bytes_are_right(proxy, bmount, data, reference,
                                                                rule):
    """The first requests (the listing, the index's reads, the batches'
    reads) fail; every one is retried."""
    ref = reference(data["plain"], batch_size=B, shuffle="block", block_size="4K")
    proxy.rules(dict(RULES[rule], match="^GET /%s" % BUCKET))
    m = bmount(url("plain/"), batch_size=B, shuffle="block", block_size="4K")
    assert_same(m, ref)
    fired = proxy.stats()["rules"][0]["fired"]
    assert fired == RULES[rule]["first"], proxy.stats()
    assert m.read("errors.txt") == b""
    st = m.json("stats.json")
    assert st["io_failed"] == 0 and st["failed_reads"] == 0, st


def read_all(m, paths):
    """{path: bytes or errno}, read concurrently (a failing read takes the
    client's retries)."""
    with concurrent.futures.ThreadPoolExecutor(len(paths)) as ex:
        return dict(zip(paths, ex.map(lambda p: read_or_errno(m.path(p)), paths)))


def batch_paths(m):
    nb = m.json("schema.json")["batches_per_epoch"]
    return ["epoch-0000/batch-%06d.safetensors" % b for b in range(nb)]


def test_a_persistent_failure_fails_only_its_batches(proxy, bmount, data, reference):
    """Every GET of one object fails (HTTP 500) once the mount is up: the
    batches holding its records fail with EIO, errors.txt names the object
    and the byte range, the other batches are exact, the daemon serves on,
    and nothing failed is kept once the store recovers."""
    d = data["plain"]
    bad = shard_names(d)[1]
    _, want, _, _ = reference(d, batch_size=B, shuffle="none")
    m = bmount(url("plain/"), batch_size=B, shuffle="none", prefetch=0)
    proxy.rules({"match": "^GET /%s/plain/%s" % (BUCKET, bad), "status": 500})
    paths = batch_paths(m)
    t0 = time.monotonic()
    got = read_all(m, paths)
    took = time.monotonic() - t0
    failed = [p for p in paths if got[p] == errno.EIO]
    assert failed and len(failed) < len(paths)
    for p in paths:
        assert got[p] == errno.EIO or got[p] == want[p], p
    errors = m.read("errors.txt").decode()
    assert re.search(r"%s bytes \d+-\d+: InternalError.*\(HTTP 500\).*gave up after" %
                     re.escape(url("plain/" + bad)), errors), errors
    assert url("plain/" + shard_names(d)[0]) + " bytes" not in errors
    st = m.json("stats.json")
    assert st["io_failed"] > 0 and st["failed_reads"] > 0, st
    assert m.proc.poll() is None
    # the client's tries (8) bound each read: the stage does not try it
    # again; a batch whose read was planned ahead and failed asks once more
    tries = {}
    for e in object_gets(proxy.log(), "plain/" + bad):
        tries[e["headers"]["range"]] = tries.get(e["headers"]["range"], 0) + 1
    assert tries and max(tries.values()) <= 2 * 8, tries
    assert took < 30, took
    # the store recovers: every batch is exact once each failed range's
    # failure is forgotten (as long again as its tries took: a few s)
    proxy.rules()
    for p in failed:
        end = time.monotonic() + 20
        while read_or_errno(m.path(p)) == errno.EIO and time.monotonic() < end:
            time.sleep(0.5)
        assert m.read(p) == want[p], p


def failed_ranges(lines):
    """(key, first, last) of each range errors.txt lines name."""
    out = []
    for ln in lines:
        g = re.search(r"s3://%s/(\S+) bytes (\d+)-(\d+): " % BUCKET, ln)
        assert g, ln
        out.append((g.group(1), int(g.group(2)), int(g.group(3))))
    return out


def gets_of(log, ranges):
    """GETs of the proxy's log that overlap one of ranges."""
    n = 0
    for e in object_gets(log):
        a, b = byte_range(e)
        n += any(path_of(e) == "/%s/%s" % (BUCKET, k) and a <= last and b > first
                 for k, first, last in ranges)
    return n


def test_a_server_down_fails_each_range_once_as_a_source_error(proxy, bmount, data, s3):
    """The store resets every connection once the mount is up (a server
    down). A batch fails with EIO after the client's tries (AWS_MAX_ATTEMPTS
    keeps them short here); reading it again fails at once, sending nothing
    for the ranges that failed (each is remembered as long again as its
    tries took, 1 s at least); while the store is down, a new range gets one
    try; errors.txt has one line per failed range; stats count source
    errors, not corrupt records."""
    m = bmount(url("plain/"), env=aws_env(s3.home, AWS_MAX_ATTEMPTS="3"), batch_size=B,
               shuffle="none", prefetch=0)
    proxy.rules({"match": "^GET /%s/plain/" % BUCKET, "action": "reset", "when": "before"})
    lines = []
    # batches of different objects: two ranges whether a read is of the
    # records or of the whole blocks the disk cache keeps
    paths = [batch_paths(m)[0], batch_paths(m)[-1]]
    for p in paths:
        assert read_or_errno(m.path(p)) == errno.EIO
        lines = m.read("errors.txt").decode().splitlines()
        sent = gets_of(proxy.log(), failed_ranges(lines))
        assert sent >= 3, sent  # the tries
        t0 = time.monotonic()
        assert read_or_errno(m.path(p)) == errno.EIO  # again, at once
        assert time.monotonic() - t0 < 0.5
        assert gets_of(proxy.log(), failed_ranges(lines)) == sent  # nothing sent again
        assert m.read("errors.txt").decode().splitlines() == lines
    ranges = [re.search(r"(s3://\S+ bytes \d+-\d+): ", ln).group(1) for ln in lines]
    assert len(set(ranges)) == len(lines), lines  # one line per failed range
    # the first range took the tries; once one gave up, a new range gets
    # one try while nothing succeeds
    assert "gave up after 3 tries" in lines[0], lines
    assert all("gave up after 3 tries" in ln or "(one try: " in ln for ln in lines), lines
    st = m.json("stats.json")
    assert st["corrupt_records"] == 0 and st["source_errors"] == len(lines), st
    # once a range's failure is forgotten, the store still down (nothing
    # succeeded since): one try each, the same line
    time.sleep(1.5)
    before = {r: gets_of(proxy.log(), [r]) for r in failed_ranges(lines)}
    t0 = time.monotonic()
    assert read_or_errno(m.path(paths[0])) == errno.EIO
    assert time.monotonic() - t0 < 0.5
    after = {r: gets_of(proxy.log(), [r]) for r in failed_ranges(lines)}
    assert all(after[r] - before[r] <= 1 for r in before) and after != before, (before, after)
    assert m.read("errors.txt").decode().splitlines() == lines


def test_a_replaced_or_deleted_object_fails_its_reads_never_mixes(proxy, boto, bmount, gen, work,
                                                                 reference, tmp_path):  # noqa: F811
    """After indexing, one object is replaced by another of the same size
    (other records of the same length) and one is deleted. With verify=none
    no CRC would notice replaced bytes: only the ETag (If-Match) does. The
    replaced object's batches fail and errors.txt says it changed and to
    re-mount; the deleted one's fail naming it; the rest are exact."""
    d = str(work / "replace-a")
    if not os.path.isdir(d):
        oracle.generate(gen, d, 300, FIXED, shards=3, seed=21)
        oracle.generate(gen, str(work / "replace-b"), 300, FIXED, shards=3, seed=22)
    names = shard_names(d)
    other = os.path.join(str(work / "replace-b"), names[1])
    assert os.path.getsize(other) == os.path.getsize(os.path.join(d, names[1]))
    with open(other, "rb") as f, open(os.path.join(d, names[1]), "rb") as g:
        assert f.read() != g.read()
    prefix = "replace-%d/" % int(time.monotonic() * 1000)
    put_folder(boto, d, prefix)
    _, want, _, _ = reference(d, batch_size=B, shuffle="none", verify="none")
    m = bmount(url(prefix), batch_size=B, shuffle="none", verify="none", prefetch=0)
    with open(other, "rb") as f:
        boto.put_object(Bucket=BUCKET, Key=prefix + names[1], Body=f.read())
    boto.delete_object(Bucket=BUCKET, Key=prefix + names[2])
    paths = batch_paths(m)
    got = read_all(m, paths)
    ok = [p for p in paths if got[p] == want[p]]
    assert ok and len(ok) < len(paths)
    for p in paths:
        assert got[p] == want[p] or got[p] == errno.EIO, (p, got[p] if isinstance(
            got[p], int) else "%d other bytes" % len(got[p]))
    errors = m.read("errors.txt").decode()
    assert re.search(r"%s.*changed.*re-mount" % re.escape(url(prefix + names[1])), errors), errors
    assert re.search(r"%s.*NoSuchKey" % re.escape(url(prefix + names[2])), errors), errors
    # 412 is no transient failure: the changed object is not retried
    changed = object_gets(proxy.log(), prefix + names[1])
    assert [e for e in changed if e["status"] == 412], changed
    assert m.proc.poll() is None


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("case", ["denied", "unknown-key", "missing-bucket", "unreachable",
                                  "no-shards", "folder-without-slash"])
def test_a_bucket_that_cannot_be_read_fails_the_mount_with_one_line(proxy, s3, batchfs, tmp_path,
                                                                   data, case):  # noqa: F811
    source, endpoint, env = url("plain/"), proxy.endpoint, aws_env(s3.home)
    want = {"denied": "SignatureDoesNotMatch", "unknown-key": "InvalidAccessKeyId",
            "missing-bucket": "NoSuchBucket", "unreachable": "cannot reach",
            "no-shards": "no shard files found",
            # a folder named as a key: the line names the folder
            "folder-without-slash": "no shard files found (did you mean %s ?)" % url("plain/")
            }[case]
    if case == "denied":
        env = aws_env(s3.home, secret="not-" + SECRET)
    elif case == "unknown-key":
        env = aws_env(s3.home, key="AKIDNOTKNOWN")
    elif case == "missing-bucket":
        source = "s3://no-such-bucket/plain/"
    elif case == "unreachable":
        endpoint = "http://127.0.0.1:%d" % closed_port()
    elif case == "folder-without-slash":
        source = url("plain")
    else:
        source = url("nothing-here/")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    t0 = time.monotonic()
    r = run_batchfs(batchfs, "-f", source, str(mnt), "-o",
                    "endpoint=%s,index_dir=%s" % (endpoint, tmp_path / "ix"), env=env)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.count("\n") == 1 and err.startswith("batchfs: "), err
    assert source.rstrip("/") in err and want in err, err
    assert "not-" + SECRET not in err
    assert not os.path.ismount(mnt)
    assert time.monotonic() - t0 < 20


# ================================================================ 4. secrets


SECRET_KEY = "SeCrEt-9c1e4f2b-NEVER-WRITTEN"
TOKEN = "ToKeN-31d077aa-NEVER-WRITTEN"


def grep_tree(root, needles):
    """Files under root holding any of needles (bytes)."""
    hits = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                with open(p, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            hits += ["%s: %s" % (p, n) for n in needles if n in data]
    return hits


def cmdlines():
    """{pid: cmdline bytes} of every process."""
    out = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    out[int(pid)] = f.read()
            except OSError:
                pass
    return out


def test_the_secret_and_the_token_are_never_written_or_printed(proxy, bmount, batchfs, data,
                                                              tmp_path, s3):  # noqa: F811
    """The proxy checks each signature against the secret (s3rver accepts
    any): a mount signs with it and sends the token, yet neither appears in
    anything batchfs writes or prints: its output (with -o debug), the
    mount's files, index_dir, a failed mount's line, a failed read's line
    in errors.txt (a store that echoes the token back), any process's
    command line; only its own environment holds them, where the user put
    them."""
    needles = [SECRET_KEY.encode(), TOKEN.encode()]
    proxy.config(sigv4="%s:%s" % (KEY, SECRET_KEY))
    env = aws_env(s3.home, secret=SECRET_KEY, token=TOKEN)
    ix = tmp_path / "ix-secret"
    m = bmount(url("gzip/"), env=env, index_dir=str(ix), batch_size=B, debug=True, shadow="off")
    # a store that echoes what it got in its error message (not retried)
    bad = shard_names(data["gzip"])[0]
    proxy.rules({"match": "^GET /%s/gzip/%s" % (BUCKET, bad), "status": 403,
                 "code": "AccessDenied",
                 "message": "echo {header:x-amz-security-token} {header:authorization}"})
    got = read_all(m, batch_paths(m))
    assert errno.EIO in got.values() or errno.EACCES in got.values(), got
    errors = m.read("errors.txt").decode()
    assert "[redacted]" in errors and "AccessDenied" in errors, errors
    proxy.rules()
    outputs = [m.read(f) for f in TOP] + [m.read("epoch-0000/all.safetensors")]
    with open("/proc/%d/environ" % m.proc.pid, "rb") as f:
        assert TOKEN.encode() in f.read()  # the user's, as given
    procs = cmdlines()
    assert not [p for p, c in procs.items() if any(n in c for n in needles)]
    st = run_batchfs(batchfs, "stats", m.mnt, env=env)
    outputs += [st.stdout, st.stderr]
    m.stop()
    outputs.append(open(m.log, "rb").read())
    assert b"unique: " in outputs[-1] or len(outputs[-1]) > 1000  # -o debug logged requests
    # a failed mount: the store refuses the token, quoting it
    proxy.rules({"status": 400, "code": "InvalidToken", "message": "bad token " + TOKEN})
    mnt = tmp_path / "mnt-fail"
    mnt.mkdir()
    r = run_batchfs(batchfs, "-f", url("gzip/"), str(mnt), "-o", "endpoint=%s,index_dir=%s" % (
        proxy.endpoint, tmp_path / "ix-fail"), env=env)
    assert r.returncode == 1 and b"InvalidToken" in r.stderr and b"[redacted]" in r.stderr, r
    outputs += [r.stdout, r.stderr]
    # `batchfs index` and `batchfs schema` print nothing of them either
    proxy.rules()
    env_tools = dict(env, AWS_ENDPOINT_URL=proxy.endpoint)
    for cmd in (["index", "--index-dir", str(tmp_path / "ix-tool")],
                ["schema", "--index-dir", str(tmp_path / "ix-tool")]):
        r = run_batchfs(batchfs, *cmd, url("gzip/"), env=env_tools)
        assert r.returncode == 0, r.stderr
        outputs += [r.stdout, r.stderr]
    for out in outputs:
        assert not [n for n in needles if n in out], out[:2000]
    assert not grep_tree(str(ix), needles) and not grep_tree(str(tmp_path / "ix-tool"), needles)
    log = proxy.log()
    assert len(log) > 10
    signed = [e for e in log if e["action"] is None]
    assert signed and all(e.get("sig") == "ok" for e in signed)
    assert all(e["headers"].get("x-amz-security-token") == TOKEN for e in signed)
    for e in log:
        assert SECRET_KEY not in json.dumps(e)
        assert TOKEN not in e["target"]


# ================================================================ daemon mode (a fork)


def test_a_daemonized_mount_reads_the_bucket(proxy, batchfs, data, reference, tmp_path, s3):  # noqa: F811
    """Without -f batchfs forks to the background: the client's thread does
    not survive a fork, so the daemon starts its own."""
    ref = reference(data["gzip"], batch_size=B, shadow="off")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run_batchfs(batchfs, url("gzip/"), str(mnt), "-o", "endpoint=%s,index_dir=%s,batch_size=%d,"
                    "shadow=off" % (proxy.endpoint, tmp_path / "ix", B), env=aws_env(s3.home))
    try:
        assert r.returncode == 0, r.stderr
        m = Mount(batchfs, url("gzip/"), str(mnt), "", str(tmp_path / "log"))
        assert_same(m, ref)
        assert m.json("stats.json")["io_reads"] > 0
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)


# ================================================================ 5. index once, many nodes


def snapshot(d):
    out = {}
    for root, dirs, files in os.walk(d):
        for f in dirs + files:
            p = os.path.join(root, f)
            st = os.lstat(p)
            out[os.path.relpath(p, d)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture
def ro_bind(tmp_path):
    """ro_bind(dir) -> a read-only bind mount of dir (tests run as root:
    chmod would not stop them writing)."""
    made = []

    def bind(d):
        ro = tmp_path / ("ro%d" % len(made))
        ro.mkdir()
        for argv in (["mount", "--bind", str(d), str(ro)],
                     ["mount", "-o", "remount,bind,ro", str(ro)]):
            r = subprocess.run(argv, capture_output=True)
            if r.returncode != 0:
                if made or argv[1] == "-o":
                    subprocess.run(["umount", str(ro)], capture_output=True)
                pytest.skip("no read-only bind mount here: %s" % r.stderr.decode().strip())
        made.append(ro)
        return str(ro)

    yield bind
    for ro in made:
        subprocess.run(["umount", str(ro)], capture_output=True)


@pytest.mark.parametrize("name", ["fixed", "plain", "gzip"])
def test_batchfs_index_once_then_read_only_mounts_share_it(proxy, bmount, batchfs, data,
                                                           reference, tmp_path, ro_bind, s3,
                                                           name):  # noqa: F811
    """Many nodes, one index: `batchfs index` (credentials and endpoint from
    the environment) builds DIR; two mounts at once over a read-only bind
    of it serve the local bytes, list the bucket and read no object byte
    for their index, and leave DIR as it was."""
    ix = tmp_path / "ix-built"
    env = aws_env(s3.home, AWS_ENDPOINT_URL=proxy.endpoint)
    r = run_batchfs(batchfs, "index", "--index-dir", str(ix), url(name + "/"), env=env)
    assert r.returncode == 0, r.stderr
    assert object_gets(proxy.log())  # it read the objects
    ro = ro_bind(ix)
    with pytest.raises(OSError):
        open(os.path.join(ro, "probe"), "w")
    before = snapshot(ix)
    ref = reference(data[name], batch_size=B, epochs=2)
    proxy.reset()
    proxy.config(sigv4="%s:%s" % (KEY, SECRET))
    # two nodes at once
    ms = [bmount(url(name + "/"), wait=False, index_dir=ro, batch_size=B, epochs=2, prefetch=0)
          for _ in range(2)]
    for m in ms:
        m.wait()
    log = proxy.log()
    assert len([e for e in log if is_list(e)]) == 2
    at_mount = object_gets(log)
    for m in ms:
        assert m.json("stats.json")["index_reused"]
        assert_same(m, ref)
    for m in ms:
        m.stop()
    assert snapshot(ix) == before
    if name == "gzip":  # the shadow copies index built serve the batches
        assert not object_gets(proxy.log())
    # `batchfs index` kept the ragged counts too: the mounts fetch no
    # object byte at mount and try to write nothing in DIR (each would say
    # so in a note)
    tried = [ln for m in ms for ln in m.log_text().splitlines() if "cannot write" in ln]
    assert not at_mount, [e["target"] for e in at_mount][:4]
    assert not tried, tried[:2]


@pytest.mark.parametrize("shared", [False, True], ids=["one", "two_sharing_a_read_only_index"])
def test_fusermount_then_mount_again_works_every_time(proxy, batchfs, data, tmp_path, s3, ro_bind,
                                                      shared):  # noqa: F811
    """`fusermount3 -u MNT && batchfs s3://... MNT`, 20 times: the daemon
    unmounted is still exiting (its connections, the I/O stage) when the
    next mount starts, and used to refuse it ("another batchfs is mounting
    on it", 17 times in 20). Also two mounts at once over one read-only
    index_dir, unmounted and mounted again together."""
    env = aws_env(s3.home, AWS_ENDPOINT_URL=proxy.endpoint)
    ix = tmp_path / "ix"
    r = run_batchfs(batchfs, "index", "--index-dir", str(ix), url("fixed/"), env=env)
    assert r.returncode == 0, r.stderr
    ix = ro_bind(ix) if shared else str(ix)
    mnts = [str(tmp_path / ("mnt%d" % i)) for i in range(2 if shared else 1)]
    remount_loop(batchfs, url("fixed/"), mnts, "batch_size=%d,index_dir=%s" % (B, ix), env=env)


# ================================================================ 6. the disk cache


def test_the_disk_cache_keeps_the_objects_bytes_for_the_next_epoch(proxy, bmount, data, reference,
                                                                   tmp_path):
    ref = reference(data["plain"], batch_size=B, epochs=2)
    dc = tmp_path / "dc"
    m = bmount(url("plain/"), batch_size=B, epochs=2, disk_cache=str(dc), prefetch=0)
    _, want, _, _ = ref
    e0 = [p for p in want if p.startswith("epoch-0000/")]
    e1 = [p for p in want if p.startswith("epoch-0001/")]
    for p in e0:
        assert m.read(p) == want[p], p
    n0 = len(object_gets(proxy.log()))
    assert n0 > 0
    proxy.reset()
    proxy.config(sigv4="%s:%s" % (KEY, SECRET))
    for p in e1:
        assert m.read(p) == want[p], p
    gets = object_gets(proxy.log())
    assert len(gets) <= 1, [(path_of(e), e["headers"].get("range")) for e in gets]
    assert os.listdir(str(dc))
    m.stop()
    # the next mount (the same index_dir and disk cache) reads none
    proxy.reset()
    proxy.config(sigv4="%s:%s" % (KEY, SECRET))
    m = bmount(url("plain/"), batch_size=B, epochs=2, disk_cache=str(dc), prefetch=0,
               index_dir=m.index_dir)
    for p in e0:
        assert m.read(p) == want[p], p
    assert not object_gets(proxy.log())


# ---------------------------------------------------------------- epochs


GROUPED = ["x:float:4", "blob:bytes:1,len=20000"]


@pytest.fixture(scope="session")
def grouped(s3, boto, gen, work):  # noqa: F811
    """"grouped/": 600 records of 20 KB in 4 plain shards (12 MB). With
    block_size=256K (12 records a block) and window=4, a group holds about
    48 records: a dozen groups an epoch, in a few MB (the issue is about
    groups, not bytes)."""
    d = work / "bucket-grouped"
    oracle.generate(gen, d, 600, GROUPED, shards=4, compression="none", seed=21)
    put_folder(boto, str(d), "grouped/")
    return str(d)


def _fetched(proxy):
    """Body bytes of the object GETs the proxy logged."""
    return sum(e.get("bytes", 0) for e in object_gets(proxy.log()))


@pytest.mark.parametrize("epochs", [1, 3])
def test_block_shuffle_fetches_each_block_once_per_epoch(proxy, bmount, grouped, epochs):
    """Issue 31, item 1: under shuffle=block the stream holds whole groups
    of blocks; builds the decoded-batch prefetch runs past an epoch's end
    read their records one by one (a second fetch of them once the stream
    got there), and into an epoch the mount does not list at all (1.42x
    the dataset for one epoch here); a batch reading from the next group
    while it did not fit the budget did the same. The batch files of each
    epoch in order, idle a second after each (the prefetch runs on): each
    epoch fetches the dataset once (what the prefetch builds of the next
    epoch, and its first groups, may come during the one before), and
    nothing past the last epoch; one stream."""
    size = sum(os.path.getsize(os.path.join(grouped, f)) for f in shard_names(grouped))
    group = 4 * (256 << 10) + (64 << 10)  # a group's bytes at most (4 blocks)
    prefetch = 8
    m = bmount(url("grouped/"), shuffle="block", block_size="256K", window=4,
               batch_size=32, prefetch=prefetch, threads=2, epochs=epochs)
    nb = m.json("schema.json")["batches_per_epoch"]
    ahead = prefetch * 32 * size // 600 + 2 * group  # the next epoch's start
    proxy.reset()  # not what the mount read to index the objects
    proxy.config(sigv4="%s:%s" % (KEY, SECRET))
    for e in range(epochs):
        for b in range(nb):
            m.read("epoch-%04d" % e, "batch-%06d.safetensors" % b)
        time.sleep(1.0)
        got = _fetched(proxy)
        allowed = (e + 1) * 1.05 * size + (ahead if e + 1 < epochs else 0)
        assert got <= allowed, "%.2fx the dataset after %d epochs of %d" % (
            got / size, e + 1, epochs)
    st = m.json("stats.json")
    assert st["io_streams"] == 1 and st["io_unplanned"] <= 1, st


# ---------------------------------------------------------------- mixtures

MIX_B = 16


# A mixture with a bucket source (docs/contract.md, "Mixtures"): one source
# in the bucket, two local, compared with mixref.py (every row's source and
# record) and byte for byte with a mixture of the same files all local. In
# this module because a session fixture (data) imported into a second
# module is made twice, into the same folders.
@pytest.mark.parametrize("scheme", ["s3", "S3"])  # a URL's scheme is case-insensitive
def test_mixture_with_a_bucket_source(bmount, proxy, data, tmp_path, scheme):
    names = ["remote", "gz", "fixed"]
    srcs = ["%s://%s/plain/" % (scheme, BUCKET), data["gzip"], data["fixed"]]
    local = [data["plain"], data["gzip"], data["fixed"]]
    weights = [5, 2, 3]

    def mixfile(name, sources):
        p = tmp_path / name
        p.write_text(json.dumps({"mixture": [{"name": n, "source": s, "weight": w}
                                             for n, s, w in zip(names, sources, weights)],
                                 "epoch": "all_exhausted"}))
        return str(p)

    opts = dict(batch_size=MIX_B, seed=3, features="x,img")
    m = bmount(mixfile("remote.json", srcs), endpoint=proxy.endpoint, **opts)
    ref_m = bmount(mixfile("local.json", local), **opts)
    facts = m.json("schema.json")["mixture"]
    counts = [e["records"] for e in facts["sources"]]
    ref = mixref.Mixture(names, counts, [(0, weights)], "all_exhausted", seed=3)
    assert facts["epoch_records"] == ref.L
    for e in (0, 1):
        rows = ref.epoch(e)
        s = numpy.load(m.path("epoch-%04d" % e, "all", "_source.npy"))
        r = numpy.load(m.path("epoch-%04d" % e, "all", "_record.npy"))
        assert list(zip(s.tolist(), r.tolist())) == rows
    # the same tree and bytes as the mixture of local files
    assert tree(m) == tree(ref_m)
    for p in tree(m):
        if p.startswith("epoch-0001/") and not p.endswith("/"):
            assert m.read(p) == ref_m.read(p), p
    # the remote source's records came from the bucket
    assert object_gets(proxy.log())


# ---------------------------------------------------------------- partitions

PARTED = ["x:float:4", "blob:bytes:1,len=5000"]
# 2400 records of 5 KB in 4 objects (12 MB); blocks of 64 KiB (12 records),
# groups of 4 blocks: 8 partitions of about 23 blocks, 6 groups each; the
# disk cache at its default (off for a node reading a share: its blocks of
# 1 MiB each hold pieces of every partition of these 64 KiB blocks, so a
# node keeping them would fetch them all; a share kept in the disk cache
# is check_diskcache's)
PART_OPTS = dict(shuffle="block", block_size="64K", window=4, partitions=8, batch_size=8,
                 epochs=3, threads=2)
PART_BLOCK = 64 << 10


@pytest.fixture(scope="session")
def parted(s3, boto, gen, work):  # noqa: F811
    d = work / "bucket-parted"
    oracle.generate(gen, d, 2400, PARTED, shards=4, compression="none", seed=31)
    put_folder(boto, str(d), "parted/")
    return str(d), sum(os.path.getsize(os.path.join(d, f)) for f in shard_names(d))


def _fresh_log(proxy):
    proxy.reset()
    proxy.config(sigv4="%s:%s" % (KEY, SECRET))


def _read_epoch(m, epoch, rank=None):
    top = [] if rank is None else ["rank-%04d" % rank]
    ep = m.path(*(top + ["epoch-%04d" % epoch]))
    for name in sorted(os.listdir(ep)):
        if name.endswith(".safetensors") and name != "all.safetensors":
            with open(os.path.join(ep, name), "rb") as f:
                f.read()


def _part_bound(size, share, parts_read, epochs):
    """What readers of `share` of the dataset may fetch in `epochs` epochs:
    1.15 times their share and two blocks an epoch, and, before the last
    listed epoch, the next epoch's first group of each partition they read
    (fetched ahead of it)."""
    return epochs * (1.15 * share * size + 2 * PART_BLOCK) + parts_read * 4 * PART_BLOCK


def _fetch_epochs(proxy, m, ranks, epochs=3):
    """The bytes fetched while reading each epoch's batch files (the ranks
    at once), cumulated."""
    out, before = [], _fetched(proxy)
    for e in range(epochs):
        with concurrent.futures.ThreadPoolExecutor(len(ranks)) as ex:
            list(ex.map(lambda r: _read_epoch(m, e, r), ranks))
        time.sleep(0.3)  # the prefetch runs on
        out.append(_fetched(proxy) - before)
    return out


@pytest.mark.parametrize("world", [4, 8])
def test_partitions_each_rank_fetches_its_share(proxy, bmount, parted, world):
    """partitions=8 over a bucket: rank R of world W (dividing 8) fetches
    its own partitions, at most 1.15/W of the dataset and two blocks an
    epoch, over three epochs; all W ranks together at most 1.15 times the
    dataset an epoch. Without partitions every rank fetched the whole
    dataset (shuffle=block's groups hold batches of every rank)."""
    _, size = parted
    total = 0
    for rank in range(world):
        m = bmount(url("parted/"), rank=rank, world=world, **PART_OPTS)
        _fresh_log(proxy)
        got = _fetch_epochs(proxy, m, [None])
        for e, g in enumerate(got):
            last = e + 1 == len(got)
            assert g <= _part_bound(size, 1 / world, 0 if last else 8 // world, e + 1), \
                "rank %d, epochs 0..%d: %.3fx the dataset" % (rank, e, g / size)
        total += got[-1]
        m.stop()
    assert total <= 3 * 1.15 * size, "%.3fx the dataset an epoch for all ranks" % (
        total / size / 3)


def test_partitions_a_world_not_dividing_them_fetches_what_readme_says(proxy, bmount, parted):
    """world=12 with partitions=8: README.txt says each rank reads 2 of the
    8 partitions, 1/4 of the dataset; rank 5 fetches that, at most 1.15
    times it and two blocks an epoch."""
    _, size = parted
    m = bmount(url("parted/"), rank=5, world=12, **PART_OPTS)
    assert "each rank reads 2 of the 8 partitions, 1/4 of the dataset" in m.read(
        "README.txt").decode()
    _fresh_log(proxy)
    got = _fetch_epochs(proxy, m, [None])
    for e, g in enumerate(got):
        last = e + 1 == len(got)
        assert g <= _part_bound(size, 1 / 4, 0 if last else 2, e + 1), \
            "epochs 0..%d: %.3fx the dataset" % (e, g / size)


def test_partitions_a_node_of_rank_folders_fetches_their_share(proxy, bmount, parted):
    """One mount with world=8 (rank folders), one node's processes reading
    rank-0002/ and rank-0003/ at once: at most 1.15 times their share (2/8)
    of the dataset an epoch."""
    _, size = parted
    m = bmount(url("parted/"), world=8, **PART_OPTS)
    _fresh_log(proxy)
    got = _fetch_epochs(proxy, m, [2, 3])
    for e, g in enumerate(got):
        last = e + 1 == len(got)
        assert g <= _part_bound(size, 2 / 8, 0 if last else 2, e + 1), \
            "epochs 0..%d: %.3fx the dataset" % (e, g / size)
    st = m.json("stats.json")
    assert st["io_unplanned"] <= 2, st


@pytest.mark.parametrize("what", ["batches", "all"])
def test_block_shuffle_later_epochs_cost_what_the_first_does(proxy, bmount, grouped, what):
    """A decoded-batch prefetch deeper than the groups the I/O stage holds
    (prefetch = 2 x threads: 64 on a machine of 32 cores; here 64 units of
    an epoch of 75 batches, or of 200 chunks), three epochs in one mount:
    the prefetch's builds ran on past the held groups, read their records
    one by one (io_unplanned) and moved the stream's groups away from the
    reader, whose own builds then did the same; each group was fetched
    again, and later epochs, the prefetch running through them, waited on
    record reads. Each epoch must fetch the dataset once, read every
    record from a held group, and wait no more than the first."""
    size = sum(os.path.getsize(os.path.join(grouped, f)) for f in shard_names(grouped))
    m = bmount(url("grouped/"), shuffle="block", block_size="256K", window=4, batch_size=8,
               prefetch=64, threads=2, epochs=3, chunk_rows=3)
    _fresh_log(proxy)
    last = m.json("stats.json")
    per = []
    for e in range(3):
        if what == "all":
            m.read("epoch-%04d" % e, "all.safetensors")
        else:
            _read_epoch(m, e)
        time.sleep(0.5)
        st = m.json("stats.json")
        per.append({k: st[k] - last[k] for k in ("io_bytes", "io_waits", "io_unplanned")})
        last = st
    got = 0
    for e, d in enumerate(per):
        assert d["io_unplanned"] == 0, (e, per)
        got += d["io_bytes"]
        # the prefetch builds most of the next epoch during this one
        assert got <= (e + 1) * 1.05 * size + (size if e < 2 else 0), (e, per)
    assert got <= 3 * 1.05 * size, per  # the dataset once an epoch, as above
    for d in per[1:]:
        assert d["io_waits"] <= 2 * per[0]["io_waits"] + 40, per


@pytest.fixture(scope="session")
def parted_big(s3, boto, gen, work):  # noqa: F811
    """960 records of 50 KB in 4 objects (48 MB): blocks of 2 MiB, each
    larger than the disk cache's blocks of 1 MiB."""
    d = work / "bucket-parted-big"
    oracle.generate(gen, d, 960, ["x:float:4", "blob:bytes:1,len=50000"], shards=4,
                    compression="none", seed=32)
    put_folder(boto, str(d), "parted-big/")
    return str(d), sum(os.path.getsize(os.path.join(d, f)) for f in shard_names(d))


def test_partitions_a_node_whose_share_fits_its_disk_fetches_nothing_after_epoch_0(
        proxy, bmount, parted_big, tmp_path):
    """rank=1,world=4 over a bucket with a disk cache of half the dataset:
    the node keeps its share (the blocks of its partitions), not the first
    objects, so epochs 1 and 2 fetch nothing. With the first objects kept,
    half of the share came from the bucket again every epoch."""
    _, size = parted_big
    m = bmount(url("parted-big/"), rank=1, world=4, shuffle="block", block_size="2M", window=2,
               partitions=4, batch_size=8, epochs=3, threads=2, disk_cache=str(tmp_path / "dc"),
               disk_cache_size=str(size // 2))
    _fresh_log(proxy)
    got = _fetch_epochs(proxy, m, [None])
    # epoch 0: the share, read in whole blocks of 1 MiB where it is kept
    # (a piece of 2 MiB takes at most two more), and the next epoch's start
    assert got[0] <= size / 4 * 1.15 + 6 * 2 * (1 << 20) + 2 * 2 * (2 << 20), got
    assert got[2] - got[0] <= 2 * (1 << 20), "epochs 1 and 2 fetched %d bytes" % (got[2] - got[0])
    st = m.json("stats.json")
    assert st["disk_cache_hits"] > 0, st


def test_partitions_a_node_given_another_rank_makes_room_for_its_share(
        proxy, bmount, parted_big, tmp_path):
    """A job restarted with its ranks on other nodes: the node's disk cache
    holds rank 0's share, and the node is now rank 1. Its share has blocks
    in every object, so no object of rank 0's may go whole; rank 0's blocks
    in them go instead, and from epoch 1 on the node fetches nothing.
    Without that, rank 0's blocks filled the cache for good and most of the
    share came from the bucket every epoch."""
    _, size = parted_big
    dc = str(tmp_path / "dc")
    opts = dict(world=4, shuffle="block", block_size="2M", window=2, partitions=4,
                batch_size=8, threads=2, disk_cache=dc, disk_cache_size=str(int(size * 0.35)))
    m = bmount(url("parted-big/"), rank=0, epochs=1, **opts)
    _read_epoch(m, 0)
    time.sleep(0.3)
    m.stop()
    m = bmount(url("parted-big/"), rank=1, epochs=3, **opts)
    _fresh_log(proxy)
    got = _fetch_epochs(proxy, m, [None])
    assert got[0] <= size / 4 * 1.15 + 6 * 2 * (1 << 20) + 2 * 2 * (2 << 20), got
    assert got[2] - got[0] <= 2 * (1 << 20), "epochs 1 and 2 fetched %d bytes" % (got[2] - got[0])
