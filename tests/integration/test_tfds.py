# SPDX-License-Identifier: Apache-2.0
"""TFDS dataset folders and messy directories (docs/contract.md: SOURCE, split=).

The folders are built here from the format TFDS documents and writes:
dataset_info.json, features.json (a FeaturesDict whose features are Image,
ClassLabel, Tensor, Scalar or nested FeaturesDicts, shapes as
{"dimensions": ["28", "28", "1"]}), NAME.labels.txt for ClassLabel names,
and shards NAME-SPLIT.tfrecord-00000-of-0000N.
"""
import json
import os
import subprocess

import numpy as np
import pytest

import imgdata

pytestmark = pytest.mark.skipif(not imgdata.have_pil(), reason="python3-pil is not installed")

FEATURES_JSON = {
    "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
    "featuresDict": {"features": {
        "image": {"pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
                  "image": {"shape": {"dimensions": ["28", "28", "1"]}, "dtype": "uint8",
                            "encodingFormat": "png"}},
        "label": {"pythonClassName": "tensorflow_datasets.core.features.class_label_feature.ClassLabel",
                  "classLabel": {"numClasses": "3"}},
        "pos": {"pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
                "tensor": {"shape": {"dimensions": ["2", "2"]}, "dtype": "float32"}},
        "meta": {"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
                 "featuresDict": {"features": {
                     "id": {"pythonClassName": "tensorflow_datasets.core.features.scalar.Scalar",
                            "tensor": {"shape": {}, "dtype": "int64"}}}}},
    }},
}


def _records(n, seed):
    from PIL import Image
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        px = rng.integers(0, 256, (28, 28), dtype=np.uint8)
        out.append(({"image": imgdata.encode(Image.fromarray(px, "L"), "PNG"), "label": i % 3,
                     "pos": [float(i), 1.0, 2.0, 3.5], "meta/id": 1000 + i}, px))
    return out


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tfds") / "mnistish" / "3.0.1"
    d.mkdir(parents=True)
    (d / "features.json").write_text(json.dumps(FEATURES_JSON))
    (d / "dataset_info.json").write_text(json.dumps({
        "name": "mnistish", "version": "3.0.1", "fileFormat": "tfrecord",
        "splits": [{"name": "train", "shardLengths": ["5", "4"]}, {"name": "test", "shardLengths": ["3"]}]}))
    (d / "label.labels.txt").write_text("cat\ndog\nbird\n")
    train = _records(9, 1)
    imgdata.write_records(str(d / "mnistish-train.tfrecord-00000-of-00002"), [r for r, _ in train[:5]])
    imgdata.write_records(str(d / "mnistish-train.tfrecord-00001-of-00002"), [r for r, _ in train[5:]])
    test = _records(3, 2)
    imgdata.write_records(str(d / "mnistish-test.tfrecord-00000-of-00001"), [r for r, _ in test])
    return str(d), train, test


def test_tfds_split_schema_and_values(mounter, tfds_dir):
    d, train, test = tfds_dir
    m = mounter(d, split="train", shuffle="none", batch_size=16)
    s = m.json("schema.json")
    f = s["features"]
    assert s["records"] == 9
    assert f["image"]["decode"] == "image" and f["image"]["shape"] == [28, 28, 1]
    assert f["label"]["names"] == ["cat", "dog", "bird"]
    assert f["pos"]["shape"] == [2, 2] and f["pos"]["kind"] == "float"
    assert f["meta/id"]["shape"] == [] and f["meta/id"]["kind"] == "int64"
    b = os.path.join("epoch-0000", "batch-000000")
    img = np.load(m.path(b, "image.npy"))
    assert img.shape == (9, 28, 28, 1) and img.dtype == np.uint8
    for i, (_, px) in enumerate(train):
        assert np.array_equal(img[i, :, :, 0], px)
    assert np.load(m.path(b, "pos.npy")).shape == (9, 2, 2)
    assert list(np.load(m.path(b, "meta", "id.npy"))) == [1000 + i for i in range(9)]
    readme = m.read("README.txt").decode()
    assert "split 'train'" in readme
    for name in ("dataset_info.json", "features.json", "label.labels.txt"):
        assert name in readme
    t = mounter(d, split="test", shuffle="none", batch_size=16)
    assert t.json("schema.json")["records"] == 3
    assert np.array_equal(np.load(t.path(b, "image.npy"))[2, :, :, 0], test[2][1])


@pytest.mark.parametrize("opt", [None, "split=validation"])
def test_tfds_split_missing_or_wrong(batchfs, tfds_dir, tmp_path, opt):
    d = tfds_dir[0]
    mnt = tmp_path / "m"
    mnt.mkdir()
    cmd = [batchfs, "-f", d, str(mnt)] + (["-o", opt] if opt else [])
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    err = r.stderr.decode().strip()
    assert r.returncode == 1 and len(err.splitlines()) == 1, err
    assert "splits: test, train" in err and "split" in err


def test_split_on_plain_folder_fails(batchfs, tmp_path):
    src = tmp_path / "plain"
    src.mkdir()
    imgdata.write_records(str(src / "a.tfrecord"), [{"x": 1}])
    mnt = tmp_path / "m"
    mnt.mkdir()
    r = subprocess.run([batchfs, "-f", str(src), str(mnt), "-o", "split=train"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    err = r.stderr.decode().strip()
    assert r.returncode == 1 and "split=train" in err and "not a TFDS" in err


def test_messy_folder_passes_over_non_shards(mounter, tmp_path):
    src = tmp_path / "messy"
    src.mkdir()
    imgdata.write_records(str(src / "part-00000"), [{"x": i} for i in range(3)])
    imgdata.write_records(str(src / "part-00001"), [{"x": i} for i in range(3, 5)])
    junk = {"_SUCCESS": "", "README.md": "# data\n", "notes.txt": "hello", "schema.pbtxt": "feature {}",
            "part-00000.crc": "x", "stats.json": "{}", "part-00000.idx": "idx", "_committed_123": "{}"}
    for name, text in junk.items():
        (src / name).write_text(text)
    m = mounter(str(src), shuffle="none")
    assert m.json("schema.json")["records"] == 5
    readme = m.read("README.txt").decode()
    for name in junk:
        assert name in readme, name
    assert sorted(np.load(m.path("epoch-0000", "batch-000000", "x.npy")).tolist()) == list(range(5))
