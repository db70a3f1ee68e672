# SPDX-License-Identifier: Apache-2.0
"""tests/bench/readtree, the benchmark's reader: --only picks files by
suffix, --exclude drops names at any depth, and --maxdepth 1 reads a
folder's own files as a reader globbing DIR/*.safetensors does, without
entering or stat'ing the subfolders (scripts/bench's wide rows rely on it)."""

import json
import os
import subprocess

import pytest

BATCHFS = os.environ.get("BATCHFS", "")
READTREE = os.path.join(os.path.dirname(BATCHFS), "tests", "bench", "readtree")

pytestmark = pytest.mark.skipif(not os.access(READTREE, os.X_OK),
                                reason="readtree not built next to $BATCHFS")


def tree(tmp_path):
    e = tmp_path / "epoch-0000"
    (e / "batch-000000").mkdir(parents=True)
    (e / "batch-000000" / "x.npy").write_bytes(b"a" * 100)
    (e / "batch-000000" / "deep.safetensors").write_bytes(b"b" * 7)
    (e / "batch-000000.safetensors").write_bytes(b"c" * 1000)
    (e / "batch-000001.safetensors").write_bytes(b"d" * 10)
    (e / "all.safetensors").write_bytes(b"e" * 5)
    return e


def run(*args):
    out = subprocess.run([READTREE] + list(args), check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_only_reads_every_depth(tmp_path):
    r = run("--only", ".safetensors", "--exclude", "all.safetensors", str(tree(tmp_path)))
    assert (r["files"], r["bytes"]) == (3, 1017)


def test_maxdepth_one_reads_the_folder_itself(tmp_path):
    r = run("--only", ".safetensors", "--maxdepth", "1", "--exclude", "all.safetensors",
            str(tree(tmp_path)))
    assert (r["files"], r["bytes"]) == (2, 1010)


def test_maxdepth_does_not_enter_subfolders(tmp_path):
    r = run("--maxdepth", "1", str(tree(tmp_path)))
    assert (r["files"], r["bytes"]) == (3, 1015)  # not x.npy, not deep.safetensors


def test_manifest_lists_what_would_be_read(tmp_path):
    man = tmp_path / "man.txt"
    run("--manifest", str(man), "--only", ".safetensors", "--maxdepth", "1", str(tree(tmp_path)))
    assert man.read_text().split("\n")[:3] == ["5 all.safetensors", "1000 batch-000000.safetensors",
                                               "10 batch-000001.safetensors"]
