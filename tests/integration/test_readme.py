# SPDX-License-Identifier: Apache-2.0
"""The snippets in a mount's README.txt run as printed: every indented
block of README.txt from its first `import` line is a snippet, run with
/usr/bin/python3 against the mount (plain, feature lists, rank folders,
a mixture, images); no indented line uses numpy, torch, jax or os before
its block imports them. A snippet whose library is not installed (JAX)
is reported as skipped, not passed."""

import json
import os
import re
import subprocess

import pytest

import imgdata
from helpers import make_dataset

PY = "/usr/bin/python3"
USES = re.compile(r"\b(np|torch|jnp|jax|os|json|struct|glob)\.")


def snippets(readme):
    """The code of every snippet, and the lines that use a module before
    their block imports it."""
    blocks, cur = [], []
    for line in readme.split("\n"):
        if line.startswith("  ") and line.strip():
            cur.append(line[2:])
        else:
            if cur:
                blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    found, stray = [], []
    for b in blocks:
        first = next((i for i, l in enumerate(b) if re.match(r"(import|from) \w", l)), len(b))
        stray += [l for l in b[:first] if USES.search(l)]
        if first < len(b):
            found.append("\n".join(b[first:]) + "\n")
    return found, stray


def run_all(m, want_min, must_hold=()):
    """Run every snippet of m's README.txt; returns (ran, skipped)."""
    readme = m.read("README.txt").decode()
    found, stray = snippets(readme)
    assert not stray, "used before their block imports it: %s" % stray
    assert len(found) >= want_min, (len(found), readme)
    for text in must_hold:
        assert any(text in s for s in found), (text, found)
    ran, skipped = [], []
    env = dict(os.environ, RANK="0")
    for code in found:
        r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=300,
                           env=env, cwd="/")
        missing = re.search(r"ModuleNotFoundError: No module named '(\w+)'", r.stderr)
        if r.returncode != 0 and missing and missing.group(1) in ("jax", "torch"):
            skipped.append(missing.group(1))
            continue
        assert r.returncode == 0, "snippet failed:\n%s\n%s" % (code, r.stderr[-3000:])
        ran.append(code)
    return ran, skipped


def test_plain_mount(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=32)
    ran, skipped = run_all(m, 6, ["np.load(", "torch.utils.data.DataLoader",
                                  "all/", "safetensors"])
    assert len(ran) >= 5, skipped


def test_feature_lists(mounter, ds_seq):
    m = mounter(ds_seq.path, batch_size=16)
    run_all(m, 7, ["value_lengths.npy"])


def test_rank_folders(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=32, world=3)
    run_all(m, 7, ["os.environ['RANK']", "/rank-0000/epoch-0000/"])


def test_mixture(mounter, gen, work, tmp_path):
    feats = ["x:float:4", "y:int64:1"]
    a = make_dataset(gen, work / "readme-mix-a", 50, feats, seed=41)
    b = make_dataset(gen, work / "readme-mix-b", 20, feats, seed=42)
    p = tmp_path / "mix.json"
    p.write_text(json.dumps({"mixture": [{"name": "a", "source": a.path, "weight": 1},
                                         {"name": "b", "source": b.path, "weight": 2}]}))
    m = mounter(str(p), batch_size=8)
    ran, skipped = run_all(m, 7, ["_source.npy", "index_add_"])
    assert "torch" in skipped or any("index_add_" in s for s in ran)


def test_images(mounter, tmp_path):
    if not imgdata.have_pil():
        pytest.skip("python3-pil is not installed")
    from PIL import Image
    recs = [{"image/encoded": imgdata.encode(Image.fromarray(imgdata.synthetic(64, 48, i)),
                                             "JPEG"), "label": i} for i in range(6)]
    (tmp_path / "jpegs").mkdir()
    imgdata.write_records(str(tmp_path / "jpegs" / "j.tfrecord"), recs)
    m = mounter(str(tmp_path / "jpegs"), batch_size=4)
    run_all(m, 6)
    m.stop()
    m = mounter(str(tmp_path / "jpegs"), batch_size=4, image="image/encoded:32x32")
    run_all(m, 6)
