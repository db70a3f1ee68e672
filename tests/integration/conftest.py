# SPDX-License-Identifier: Apache-2.0
"""The integration tests' fixtures, shared by every test module here: the
batchfs binary (skipping the test while it is missing or a placeholder, or
FUSE is not there), a session work folder, bfs_gen, a shared index_dir,
`mounter` (mounts stopped at teardown) and the generated datasets. Plain
helpers are helpers.py's; the mount itself is fusemount.py's.

Every mount runs in the foreground (`batchfs -f`) under a finalizer that
unmounts it (fusermount3 -u, then -uz) and waits for the daemon, killing it
after fusemount.EXIT_DEADLINE."""

import ctypes
import os
import shutil

import pytest

import oracle
from fusemount import BatchfsMount, mount_opts
from helpers import MAIN, Dataset, corrupt_data_crc, make_dataset

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>

# A mount of a bucket never asks the machine's own instance metadata
# service (169.254.169.254 on a cloud machine) for credentials: tests that
# want one pass AWS_EC2_METADATA_DISABLED=false with their own endpoint
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(autouse=True)
def own_cache_home(tmp_path_factory, monkeypatch):
    """Every test's daemons keep what they cache by default (the disk cache
    of a bucket or a network source: disk_cache=auto, beside the index) in
    a folder of the test's, never in the machine's ~/.cache, and never
    meet another test's cached bytes."""
    d = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(d))
    return str(d)


@pytest.fixture(scope="session")
def batchfs():
    """The batchfs binary under test (oracle.batchfs_path: $BATCHFS)."""
    why = oracle.batchfs_unusable()
    if why:
        pytest.skip(why)
    if not os.path.exists("/dev/fuse"):
        pytest.skip("/dev/fuse is missing")
    if shutil.which("fusermount3") is None:
        pytest.skip("fusermount3 is not installed")
    return os.path.abspath(oracle.batchfs_path())


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    """One folder for the session's generated datasets and shared index."""
    return tmp_path_factory.mktemp("bfs")


@pytest.fixture(scope="session")
def gen(work):
    return oracle.gen_path(str(work))


@pytest.fixture(scope="session")
def index_dir(work):
    d = work / "index"
    d.mkdir(exist_ok=True)
    return str(d)


@pytest.fixture
def mounter(batchfs, tmp_path, index_dir, request):
    """mount(source, start=True, **opts) -> a started BatchfsMount (start=False:
    not started yet); all are stopped at teardown."""
    mounts = []
    counter = [0]

    def mount(source, start=True, **opts):
        counter[0] += 1
        mnt = tmp_path / ("mnt%d" % counter[0])
        m = BatchfsMount(batchfs, source, mnt, mount_opts(index_dir, **opts),
                         str(tmp_path / ("log%d" % counter[0])))
        mounts.append(m)
        return m.start() if start else m

    def fin():
        for m in reversed(mounts):
            m.stop()
    request.addfinalizer(fin)
    return mount


@pytest.fixture(scope="session")
def ds_plain(gen, work):
    """helpers.MAIN's features in 3 plain shards; the other ds_ the same in
    gzip (unpacked values) and zlib shards."""
    return make_dataset(gen, work / "plain", 500, MAIN, shards=3, seed=1)


@pytest.fixture(scope="session")
def ds_gzip(gen, work):
    return make_dataset(gen, work / "gzip", 300, MAIN, shards=2, seed=2, compression="gzip", unpacked=True)


@pytest.fixture(scope="session")
def ds_zlib(gen, work):
    return make_dataset(gen, work / "zlib", 120, MAIN, shards=2, seed=4, compression="zlib")


@pytest.fixture(scope="session")
def ds_seq(gen, work):
    """SequenceExample records (context features and feature lists), gzip."""
    return make_dataset(gen, work / "seq", 200,
                        ["c:int64:1", "f:float:2,missing=0.2", "@frames:float:1..6:3",
                         "@words:bytes:0..4:0..2,len=1..5", "@ids:int64:2:1,missing=0.25"],
                        shards=2, seed=5, seq=True, compression="gzip")


@pytest.fixture(scope="session")
def ds_user(gen, work):
    """The records helpers.USER_SCHEMA describes."""
    return make_dataset(gen, work / "user", 240,
                        ["words:int64:0..10", "raw:bytes:1,len=24", "r16:bytes:1,len=8",
                         "weight:float:1,missing=0.3", "tok:int64:1..5", "nm:bytes:1,len=0..6",
                         "tags:bytes:0..3,len=1..4", "lbl:int64:1", "ff:float:6"],
                        shards=2, seed=6)


@pytest.fixture
def corrupt_ds(gen, tmp_path):
    """2 plain shards x 100 records with record 37 of shard 1 (global 137)
    given a wrong data CRC."""
    src = tmp_path / "corrupt"
    oracle.generate(gen, src, 200, ["x:float:4", "y:int64:1"], shards=2, seed=21)
    decoded = oracle.read_dataset(str(src))
    shard = oracle.list_shards(str(src))[1]
    r, crc_at = corrupt_data_crc(shard, 37)
    ds = Dataset(src, decoded, 2)
    ds.bad_global = 137
    ds.bad_shard, ds.bad_index, ds.bad_offsets = shard, 37, {r["offset"], r["data_offset"], crc_at}
    return ds


@pytest.fixture
def subreaper():
    """This process a child subreaper for the test: a daemon whose starter
    exits is reparented to it, so the test can wait for its exit status."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) failed")
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
