# SPDX-License-Identifier: Apache-2.0
"""Plain helpers of the integration tests (their fixtures are conftest.py's):
the generated datasets' description, the oracle's checks of a mount's files
(docs/contract.md: the tree, .npy and .safetensors bytes; docs/shuffle.md:
which records a batch holds), errno-returning reads, a mount that must fail,
and mount(8) through the shell's PATH."""

import contextlib
import os
import shutil
import subprocess

import numpy as np
import pytest

import oracle
from fusemount import MOUNT_DEADLINE, unmount


class Dataset:
    """A generated dataset: its path, every record decoded by the oracle, its
    shard count."""

    def __init__(self, path, decoded, nshards):
        self.path = str(path)
        self.decoded = decoded
        self.n = len(decoded)
        self.nshards = nshards


def make_dataset(gen, out, records, features, **kw):
    """Generate `records` records of bfs_gen FEATURE specs into out (kw:
    oracle.generate's shards, seed, compression...); a Dataset."""
    shards = oracle.generate(gen, out, records, features, **kw)
    return Dataset(out, oracle.read_dataset(str(out)), len(shards))


# the features of ds_plain and its siblings: every kind and layout
MAIN = ["x:float:4", "y:int64:1", "tokens:int64:0..12", "img:bytes:1,len=12",
        "name:bytes:1,len=0..9,missing=0.2", "tags:bytes:0..3,len=1..5",
        "e:int64:1..3,empty=0.3", "m/sub:float:2"]


# a schema file for ds_user: every layout and option a feature can ask for
USER_SCHEMA = {"features": {
    "words": {"kind": "int64", "shape": [-1], "ragged": True},
    "raw": {"kind": "bytes", "dtype": "float32", "shape": [2, 3]},
    "r16": {"kind": "bytes", "dtype": "int16", "shape": [4]},
    "weight": {"kind": "float", "shape": [], "default": 1.5},
    "tok": {"kind": "int64", "shape": [-1], "max_len": 8, "pad": -1},
    "nm": {"kind": "bytes", "shape": [-1], "max_len": 10},
    "tags": {"kind": "bytes", "shape": [-1, -1], "ragged": True},
    "lbl": {"kind": "int64", "shape": []},
    "ff": {"kind": "float", "shape": [2, 3]},
}}


def fact(schema, key):
    """A dataset fact of schema.json (top level; a "facts" object also accepted)."""
    if key in schema:
        return schema[key]
    return schema.get("facts", {})[key]


def walk_files(d):
    out = []
    for root, dirs, files in os.walk(d):
        for f in files:
            out.append(os.path.relpath(os.path.join(root, f), d))
    return sorted(out)


def effective(m):
    """The effective schema of a mount (features / feature_lists only)."""
    s = m.json("schema.json")
    return {"features": s.get("features", {}), "feature_lists": s.get("feature_lists") or {}}


def _describe(data, want):
    try:
        import io
        got = np.load(io.BytesIO(data))
        return "got %s %s, want %s %s" % (got.dtype, got.shape, want.dtype, want.shape)
    except Exception as e:  # noqa: BLE001 - only for the message
        return "got %d unparsable bytes (%s), want %s %s" % (len(data), e, want.dtype, want.shape)


def check_batch_dir(bdir, exp):
    files = walk_files(bdir)
    assert files == oracle.tensor_files(exp), bdir
    for name, arr in exp.items():
        p = os.path.join(bdir, name + ".npy")
        size = os.stat(p).st_size
        with open(p, "rb") as f:
            data = f.read()
        assert size == len(data), "%s: stat size %d, read %d" % (p, size, len(data))
        want = oracle.npy_bytes(arr)
        assert data == want, "%s: %s" % (p, _describe(data, arr))


def check_safetensors(path, exp):
    size = os.stat(path).st_size
    with open(path, "rb") as f:
        raw = f.read()
    assert size == len(raw), path
    got = oracle.parse_safetensors(raw)
    assert sorted(got) == sorted(exp), path
    for k in exp:
        assert oracle.arrays_equal(got[k], exp[k]), "%s: tensor %s" % (path, k)


def batch_files(m, src, B, b, epoch=0, seed=0):
    """(path, expected bytes) of every file of batch b of a mount of src (an
    object with .decoded and .n), batch size B, from the oracle."""
    exp = oracle.expected_batch(src.decoded, effective(m),
                                oracle.batch_records(src.n, B, b, seed, epoch))
    base = m.path("epoch-%04d" % epoch, "batch-%06d" % b)
    out = [(os.path.join(base, k + ".npy"), oracle.npy_bytes(v)) for k, v in exp.items()]
    out.append((base + ".safetensors", oracle.safetensors_bytes(exp)))
    return out


def read_or_errno(path):
    """The file's bytes, or the errno of opening/reading it."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        return e.errno


def check_epoch(m, ds, schema=None, B=32, seed=0, epoch=0, shuffle="global", drop=False,
                rank=0, world=1, batches=None, safetensors=True):
    schema = schema or effective(m)
    ep = m.path("epoch-%04d" % epoch)
    nloc = oracle.local_batches(ds.n, B, drop, world)
    want = sorted(["all", "all.safetensors"] + ["batch-%06d" % i for i in range(nloc)] +
                  ["batch-%06d.safetensors" % i for i in range(nloc)])
    assert sorted(os.listdir(ep)) == want
    for i in (range(nloc) if batches is None else batches):
        idx = oracle.batch_records(ds.n, B, i, seed, epoch, shuffle, rank, world)
        exp = oracle.expected_batch(ds.decoded, schema, idx)
        check_batch_dir(os.path.join(ep, "batch-%06d" % i), exp)
        if safetensors:
            check_safetensors(os.path.join(ep, "batch-%06d.safetensors" % i), exp)


def assert_inferred(m, ds):
    """schema.json's features match the oracle's inference rules."""
    got = oracle.normalize_schema(effective(m))
    want = oracle.normalize_schema(oracle.infer_schema(ds.decoded))
    assert got["features"] == want["features"]
    # feature lists: step shape [] and [1] are both fine for one value per step
    assert set(got["feature_lists"]) == set(want["feature_lists"])
    for k, w in want["feature_lists"].items():
        g = dict(got["feature_lists"][k])
        w = dict(w)
        for d in (g, w):
            if d["kind"] != "bytes" and d["shape"] in ([], [1]):
                d["shape"] = [1]
        assert g == w, k


def numeric_leaves(obj, prefix=""):
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(numeric_leaves(v, prefix + "/" + str(k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.update(numeric_leaves(v, prefix + "/" + str(i)))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out[prefix] = obj
    return out


def corrupt_count(stats):
    return sum(v for k, v in numeric_leaves(stats).items() if "corrupt" in k.lower())


def read_errno(path):
    """errno of opening + reading path, or None when it reads fine."""
    try:
        with open(path, "rb") as f:
            f.read()
    except OSError as e:
        return e.errno
    return None


def expect_mount_failure(batchfs, source, mnt, opts, needle):
    """A mount that must fail: exit status 1 and one stderr line holding needle."""
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.Popen([batchfs, "-f", str(source), str(mnt), "-o", opts],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=MOUNT_DEADLINE)
    except subprocess.TimeoutExpired:
        unmount(str(mnt))
        p.kill()
        p.communicate()
        raise AssertionError("batchfs did not fail for -o %s" % opts)
    finally:
        mounted = os.path.ismount(str(mnt))
        unmount(str(mnt))
    assert not mounted
    assert p.returncode == 1, (opts, p.returncode, err)
    lines = [l for l in err.decode(errors="replace").splitlines() if l.strip()]
    assert len(lines) == 1, (opts, lines)
    assert needle in lines[0], (needle, lines[0])


# mount(8) drops PATH before running /sbin/mount.fuse3, whose /bin/sh then
# finds `batchfs` on the shell's default PATH. Use an installed batchfs if it
# is this binary; else (as root) a temporary symlink in /usr/local/sbin.
_SH_DEFAULT_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]


def mount_helper_usable():
    """None if mount(8) and mount.fuse3 are there and we are root, else why not."""
    if shutil.which("mount") is None or not (os.path.exists("/sbin/mount.fuse3") or
                                             os.path.exists("/usr/sbin/mount.fuse3")):
        return "mount(8) or mount.fuse3 missing"
    if os.geteuid() != 0:
        return "mount(8) with a fuse.batchfs type needs root here"
    return None


@contextlib.contextmanager
def batchfs_on_sh_path(batchfs):
    """Make `batchfs` on the shell's default PATH this binary for the block
    (a temporary /usr/local/sbin symlink unless it already is); skips when
    another batchfs would be found first."""
    found = shutil.which("batchfs", path=os.pathsep.join(_SH_DEFAULT_PATH))
    link = None
    if found is None or not os.path.samefile(found, batchfs):
        cand = "/usr/local/sbin/batchfs"
        if os.path.lexists(cand):
            pytest.skip("%s exists and is not %s" % (cand, batchfs))
        if found is not None and _SH_DEFAULT_PATH.index(os.path.dirname(found)) == 0:
            pytest.skip("another batchfs shadows the built one: %s" % found)
        os.makedirs("/usr/local/sbin", exist_ok=True)
        os.symlink(batchfs, cand)
        link = cand
    try:
        yield
    finally:
        if link:
            os.unlink(link)


def corrupt_data_crc(shard, index):
    """Flip a byte of record `index`'s data CRC in a plain shard; returns the
    record (oracle.scan_records) and the CRC's offset."""
    r = oracle.scan_records(shard)[index]
    crc_at = r["data_offset"] + r["length"]
    raw = bytearray(open(shard, "rb").read())
    raw[crc_at] ^= 0x5A
    with open(shard, "wb") as f:
        f.write(raw)
    assert [x["data_ok"] for x in oracle.scan_records(shard)].count(False) == 1
    return r, crc_at


def remount_loop(batchfs, source, mnts, opts, times=20, env=None):
    """As a user does in a loop: `batchfs SOURCE MNT -o OPTS` (the daemon
    detaches once mounted) on each of mnts, read a batch file from each,
    `fusermount3 -u` each and mount again at once, `times` times. Every
    mount command must exit 0 (not "another batchfs is mounting on it"
    while the unmounted daemon exits)."""
    for m in mnts:
        os.makedirs(m, exist_ok=True)
    try:
        for i in range(times):
            for m in mnts:
                r = subprocess.run([batchfs, source, m, "-o", opts], capture_output=True,
                                   stdin=subprocess.DEVNULL, env=env, timeout=MOUNT_DEADLINE)
                assert r.returncode == 0, "mount %d of %d at %s: %s" % (
                    i + 1, times, m, r.stderr.decode(errors="replace").strip())
            for m in mnts:
                with open(os.path.join(m, "epoch-0000", "batch-000000", "x.npy"), "rb") as f:
                    assert f.read(6) == b"\x93NUMPY"
            for m in mnts:
                r = subprocess.run(["fusermount3", "-u", m], capture_output=True)
                assert r.returncode == 0, r.stderr
    finally:
        for m in mnts:
            unmount(m)
