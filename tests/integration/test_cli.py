# SPDX-License-Identifier: Apache-2.0
"""The commands and options not covered elsewhere: glob sources, forced
compression, verify=none, `batchfs schema`, `batchfs index`, --help,
--version and the cuda option of a build without CUDA."""

import glob
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import oracle


def run(*args, **kw):
    return subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                          **kw)


def test_help_and_version(batchfs):
    r = run(batchfs, "--help")
    assert r.returncode == 0 and b"batch_size" in r.stdout
    r = run(batchfs, "--version")
    assert r.returncode == 0 and r.stdout.startswith(b"batchfs ")


def test_glob_source_takes_the_matching_shards_in_name_order(mounter, ds_plain, tmp_path):
    shards = sorted(glob.glob(os.path.join(ds_plain.path, "*")))
    assert len(shards) == 3
    pattern = os.path.join(ds_plain.path, "part-0000[01]*")
    m = mounter(pattern, batch_size=16, shuffle="none")
    s = m.json("schema.json")
    assert s["shards"] == shards[:2]
    n = sum(1 for sh in shards[:2] for _ in oracle.read_records(sh))
    assert s["records"] == n
    # shuffle=none: batch 0 is the first 16 records of the first shard
    y = np.load(m.path("epoch-0000", "batch-000000", "y.npy"))
    assert y.tolist() == [int(d["features"]["y"][1][0]) for d in ds_plain.decoded[:16]]


def test_forced_compression(mounter, ds_gzip, tmp_path, batchfs):
    # a gzip shard under a name that says nothing
    src = tmp_path / "src"
    src.mkdir()
    first = sorted(glob.glob(os.path.join(ds_gzip.path, "*")))[0]
    shutil.copy(first, src / "shard-a")
    m = mounter(str(src), batch_size=8, compression="gzip")
    assert m.json("schema.json")["records"] == len(list(oracle.read_records(first)))
    # forcing the wrong framing fails the mount with one line naming the file
    mnt = tmp_path / "mnt-bad"
    mnt.mkdir()
    r = run(batchfs, "-f", str(src), str(mnt), "-o",
            "compression=none,index_dir=%s" % (tmp_path / "ix2"))
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.decode().splitlines() if ln.strip()]
    assert len(lines) == 1 and "shard-a" in lines[0], lines
    assert not os.path.ismount(str(mnt))


def test_verify_none_skips_the_crc_check(mounter, ds_plain, tmp_path):
    # flip one bit of a data CRC: verify=crc gives EIO, verify=none serves the record
    src = tmp_path / "src"
    shutil.copytree(ds_plain.path, src)
    first = sorted(glob.glob(str(src / "*")))[0]
    with open(first, "r+b") as f:
        length = int.from_bytes(f.read(8), "little")
        f.seek(12 + length)
        b = f.read(1)
        f.seek(12 + length)
        f.write(bytes([b[0] ^ 1]))
    strict = mounter(str(src), batch_size=500, shuffle="none", index_dir=str(tmp_path / "ix-a"))
    with pytest.raises(OSError):
        strict.read("epoch-0000", "batch-000000", "y.npy")
    loose = mounter(str(src), batch_size=500, shuffle="none", verify="none",
                    index_dir=str(tmp_path / "ix-b"))
    y = np.load(loose.path("epoch-0000", "batch-000000", "y.npy"))
    assert y.tolist() == [int(d["features"]["y"][1][0]) for d in ds_plain.decoded[:500]]


def test_schema_and_index_commands(batchfs, ds_gzip, tmp_path, mounter):
    ix = str(tmp_path / "ix")
    r = run(batchfs, "index", "--jobs", "2", "--index-dir", ix, ds_gzip.path)
    assert r.returncode == 0, r.stderr
    assert ("%d records" % ds_gzip.n).encode() in r.stdout and b"built" in r.stdout
    # not a terminal: no progress bar
    assert b"\r" not in r.stderr
    r = run(batchfs, "index", "--index-dir", ix, ds_gzip.path)
    assert r.returncode == 0 and b"reused" in r.stdout
    r = run(batchfs, "schema", "--index-dir", ix, ds_gzip.path)
    assert r.returncode == 0
    printed = json.loads(r.stdout)
    m = mounter(ds_gzip.path, batch_size=8, index_dir=ix)
    assert printed["features"] == m.json("schema.json")["features"]
    assert m.json("stats.json")["index_reused"] is True
    r = run(batchfs, "schema", "--index-dir", ix, str(tmp_path / "nope"))
    assert r.returncode == 1 and b"nope" in r.stderr


# The tools' options that are a mount option under another name.
TOOL_OPTIONS = [("--jobs", "threads", ["0", "65", "x", "-1"], ["1", "64"]),
                ("--shadow-size", "shadow_size", ["x", "1Q", "-1"], ["0", "8G"]),
                ("--seek-span", "seek_span", ["1K", "65535", "x"], ["64K", "1M"])]


@pytest.mark.parametrize("arg,name,bad,good", TOOL_OPTIONS)
def test_tool_options_take_the_mount_options_ranges(batchfs, ds_plain, tmp_path, arg, name, bad,
                                                     good):
    # the same values refused, with the same reason, as the mount option's
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for v in bad:
        r = run(batchfs, "index", arg, v, "--index-dir", str(tmp_path / "ix"), ds_plain.path)
        assert r.returncode == 1, (arg, v, r)
        line = r.stderr.decode()
        m = run(batchfs, "-f", ds_plain.path, str(mnt), "-o", "%s=%s" % (name, v))
        assert m.returncode == 1, (name, v, m)
        why = m.stderr.decode().split("': ", 1)[1]
        assert line == "batchfs index: %s '%s': %s" % (arg, v, why), (line, why)
    for v in good:
        r = run(batchfs, "index", arg, v, "--index-dir", str(tmp_path / "ix"), ds_plain.path)
        assert r.returncode == 0, (arg, v, r.stderr)


def test_cuda_option_without_cuda_fails_cleanly(batchfs, ds_plain, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run(batchfs, "-f", ds_plain.path, str(mnt), "-o", "cuda,index_dir=%s" % (tmp_path / "ix"))
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.decode().splitlines() if ln.strip()]
    assert len(lines) == 1 and "cuda" in lines[0], lines
    assert not os.path.ismount(str(mnt))
