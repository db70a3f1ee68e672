# SPDX-License-Identifier: Apache-2.0
"""crop= and flip= (docs/augment.md) over real mounts.

- The rule: the `python` blocks of docs/augment.md, run as printed (not
  the daemon's C, not batchfs.augment), give every row's F.crop and F.flip
  in several epochs, seeds at both ends of 64 bits, crop=random and
  crop=center, crop_scale= and crop_ratio=, across shards; batchfs.augment
  (the Python module) agrees with the page.
- Byte-stable: a record's pixels, box and flip in an epoch are the same in
  a daemonized mount read through all/, in rank folders of world=3 with
  another batch_size, threads=1, no prefetch and a small cache read
  backwards from a resume point, and under shuffle=block with a fresh
  index_dir; other epochs draw other boxes.
- The pixels: within a mean absolute difference of 3/255 of torchvision on
  PIL (resized_crop + hflip, the box taken from F.crop), and crop=center
  within 3/255 of Resize(256) + CenterCrop(224) of PIL's decode, on
  photographs (scikit-image's, at 200..1300 px, JPEG and PNG, baseline,
  progressive and 4:4:4; large ones decode at 1/2 or 1/4 scale).
- Odd images (progressive, gray and CMYK JPEGs; PNG palette, alpha, 16 bit,
  interlaced; images smaller than the output; C = 1, 3, 4) against PIL's
  decode converted as docs/contract.md says, then torchvision's crop; and
  corrupt images failing (or skipped) in every epoch whatever box it
  draws, a substitute row carrying its own record's box.
- The schema's per-feature keys, the options over them, an image and its
  mask cropped alike, the errors for options no feature uses, README.txt,
  schema.json, and the Python module's view of the provenance.
"""

import io
import json
import os
import re
import subprocess

import numpy as np
import pytest

import imgdata
import oracle
from fusemount import unmount
from helpers import expect_mount_failure, read_errno

pytestmark = pytest.mark.skipif(not imgdata.have_pil(), reason="python3-pil is not installed")

DOC = os.path.join(oracle.repo_root(), "docs", "augment.md")
TOP_SEED = (1 << 64) - 1
H = W = 224


@pytest.fixture(scope="module")
def doc():
    """The namespace of every ```python block of docs/augment.md, run in order."""
    with open(DOC) as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)
    assert blocks, "no python blocks in " + DOC
    ns = {}
    exec(compile("\n".join(blocks), DOC, "exec"), ns)  # noqa: S102
    return ns


def tv():
    try:
        import torchvision.transforms as T
        import torchvision.transforms.functional as F
    except ImportError:
        pytest.skip("python3-torchvision is not installed")
    return T, F


def pil(data):
    from PIL import Image
    return Image.open(io.BytesIO(data))


# ---------------------------------------------------------------- data


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """Two shards of photographs: record r (global number) has id r and one
    JPEG or PNG; returns (folder, [bytes of record r])."""
    from PIL import Image
    import random
    d = tmp_path_factory.mktemp("augphotos")
    ims = [imgdata.photo(n) for n in imgdata.PHOTOS]
    if any(im is None for im in ims):
        pytest.skip("python3-skimage's data files are not installed")
    rng = random.Random(39)
    datas = []
    for r in range(44):
        im = ims[r % len(ims)]
        if r % 11 == 5:  # at its own size: all its detail
            img = im
        else:
            big = r % 7 == 3  # large: the IDCT decodes at 1/2 or 1/4
            lo, hi = (900, 1300) if big else (200, 700)
            img = im.resize((rng.randint(lo, hi), rng.randint(lo, hi)), Image.BILINEAR)
        if r % 9 == 4:
            data = imgdata.encode(img, "PNG")
        else:
            data = imgdata.encode(img, "JPEG", quality=rng.randint(75, 95),
                                  progressive=r % 5 == 2, subsampling=0 if r % 6 == 1 else 2)
        datas.append(data)
    for s, (a, b) in enumerate(((0, 20), (20, 44))):
        imgdata.write_records(str(d / ("part-%d.tfrecord" % s)),
                              [{"image": datas[r], "id": r} for r in range(a, b)])
    return str(d), datas


def sizes(datas):
    return [pil(x).size for x in datas]


def epoch_rows(m, epoch, feat="image", root=()):
    """{id: (pixels, crop, flip)} of an epoch, through all/."""
    base = m.path(*root, "epoch-%04d" % epoch, "all")
    ids = np.load(os.path.join(base, "id.npy"))
    img = np.load(os.path.join(base, feat + ".npy"))
    crop = np.load(os.path.join(base, feat + ".crop.npy"))
    flip = np.load(os.path.join(base, feat + ".flip.npy"))
    assert crop.dtype == np.int32 and crop.shape == (len(ids), 4)
    assert flip.dtype == np.uint8 and flip.shape == (len(ids),)
    return {int(i): (img[k], tuple(crop[k]), int(flip[k])) for k, i in enumerate(ids)}


def mad(a, b):
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).mean())


# ---------------------------------------------------------------- the rule


@pytest.mark.parametrize("seed", [0, 7, TOP_SEED])
def test_boxes_are_the_pages(mounter, photos, doc, seed):
    src, datas = photos
    wh = sizes(datas)
    m = mounter(src, image="image:%dx%d" % (H, W), crop="random", flip="h", seed=seed,
                batch_size=8, epochs=3)
    seen_flip = set()
    for e in (0, 1, 2, 9):  # 9: an epoch not listed, opened by name
        for rec, (_, crop, flip) in epoch_rows(m, e).items():
            want = doc["box_and_flip"](seed, e, rec, wh[rec][0], wh[rec][1], H, W)
            assert (crop, flip) == want, (seed, e, rec)
            seen_flip.add(flip)
    assert seen_flip == {0, 1}


def test_ranges_and_center_are_the_pages(mounter, photos, doc):
    src, datas = photos
    wh = sizes(datas)
    m = mounter(src, image="image:%dx%d" % (96, 160), crop="random", crop_scale="0.25:0.5",
                crop_ratio="1/2:2", seed=3, epochs=2)
    for e in (0, 1):
        for rec, (_, crop, flip) in epoch_rows(m, e).items():
            want = doc["box_and_flip"](3, e, rec, *wh[rec], 96, 160, flip_h=False,
                                       scale=(0.25, 0.5), ratio=(1 / 2, 2))
            assert (crop, flip) == want
    m = mounter(src, image="image:%dx%d" % (H, W), crop="center", flip="h", seed=5)
    for rec, (_, crop, flip) in epoch_rows(m, 0).items():
        assert (crop, flip) == doc["box_and_flip"](5, 0, rec, *wh[rec], H, W, crop="center")
    m = mounter(src, image="image:%dx%d" % (H, W), crop="center", crop_resize=300)
    for rec, (_, crop, flip) in epoch_rows(m, 0).items():
        assert crop == doc["center_box"](*wh[rec], H, W, 300) and flip == 0


def test_python_module_is_the_page(doc):
    import sys
    sys.path.insert(0, os.path.join(oracle.repo_root(), "python"))
    import batchfs.augment as aug
    import random
    rng = random.Random(1)
    for _ in range(3000):
        seed, epoch, rec = rng.getrandbits(64), rng.randrange(1000), rng.getrandbits(40)
        w, h = rng.randint(1, 3000), rng.randint(1, 3000)
        scale = sorted((rng.uniform(0.01, 1), rng.uniform(0.01, 1)))
        ratio = sorted((rng.uniform(0.2, 5), rng.uniform(0.2, 5)))
        crop = rng.choice(["random", "center"])
        args = (seed, epoch, rec, w, h, 224, 224)
        kw = dict(crop=crop, scale=scale, ratio=ratio)
        assert aug.box_and_flip(*args, **kw) == doc["box_and_flip"](*args, **kw)


# ---------------------------------------------------------------- byte-stable


def bg_mount(batchfs, src, mnt, opts):
    """A daemonized mount (plain `batchfs`, as users run it)."""
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.run([batchfs, src, mnt, "-o", opts], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr
    assert os.path.ismount(mnt)


class Bg:
    def __init__(self, mnt):
        self.mnt = mnt

    def path(self, *parts):
        return os.path.join(self.mnt, *parts)


def test_byte_stable_whoever_reads_and_new_boxes_each_epoch(batchfs, photos, tmp_path, index_dir,
                                                            mounter):
    src, datas = photos
    img = "image=image:%dx%d,crop=random,flip=h,seed=11" % (H, W)
    mnt = str(tmp_path / "bg")
    bg_mount(batchfs, src, mnt, img + ",batch_size=8,epochs=2,index_dir=" + index_dir)
    try:
        a = {e: epoch_rows(Bg(mnt), e) for e in (0, 1)}
    finally:
        unmount(mnt)
    assert all(len(a[e]) == len(datas) for e in (0, 1))
    changed = sum(a[0][r][1] != a[1][r][1] for r in a[0])
    assert changed >= len(datas) * 0.9, "%d of %d boxes changed between epochs" % (
        changed, len(datas))

    def same(rows, e, what):
        assert rows, what
        for rec, (pix, crop, flip) in rows.items():
            assert crop == a[e][rec][1] and flip == a[e][rec][2], (what, e, rec)
            assert np.array_equal(pix, a[e][rec][0]), (what, e, rec)

    # rank folders, another batch size, one thread, no prefetch, a small
    # cache: each rank's batch files read from a resume point backwards,
    # the ranks by three readers at once
    m = mounter(src, image="image:%dx%d" % (H, W), crop="random", flip="h", seed=11, world=3,
                batch_size=5, threads=1, prefetch=0, cache_size="1M", epochs=2)

    def read_rank(e, rank):
        rows = {}
        folder = m.path("rank-%04d" % rank, "epoch-%04d" % e)
        nb = len([n for n in os.listdir(folder) if n.startswith("batch-") and
                  not n.endswith((".safetensors", ".cuda"))])
        for b in reversed(range(nb)):
            d = os.path.join(folder, "batch-%06d" % b)
            ids = np.load(os.path.join(d, "id.npy"))
            pix = np.load(os.path.join(d, "image.npy"))
            crop = np.load(os.path.join(d, "image.crop.npy"))
            flip = np.load(os.path.join(d, "image.flip.npy"))
            for k, i in enumerate(ids):
                rows[int(i)] = (pix[k], tuple(crop[k]), int(flip[k]))
        return rows

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(3) as pool:
        for e in (1, 0):
            rows = {}
            for part in pool.map(lambda r: read_rank(e, r), range(3)):
                rows.update(part)
            assert len(rows) == len(datas)  # 9 batches of 5 (the last 4), 3 a rank
            same(rows, e, "world=3")
    # another order (shuffle=block), a fresh index, the .safetensors
    m = mounter(src, image="image:%dx%d" % (H, W), crop="random", flip="h", seed=11,
                shuffle="block", block_size="64K", batch_size=16, epochs=2,
                index_dir=str(tmp_path / "fresh-index"))
    import sys
    sys.path.insert(0, os.path.join(oracle.repo_root(), "python"))
    from batchfs.numpy import load_batch
    for e in (1, 0):
        rows = {}
        for b in range(-(-len(datas) // 16)):
            t = load_batch(m.path("epoch-%04d" % e, "batch-%06d.safetensors" % b))
            for k, i in enumerate(t["id"]):
                rows[int(i)] = (t["image"][k], tuple(t["image.crop"][k]), int(t["image.flip"][k]))
        same(rows, e, "shuffle=block")


# ---------------------------------------------------------------- the pixels


def test_pixels_match_torchvision(mounter, photos):
    T, F = tv()
    src, datas = photos
    m = mounter(src, image="image:%dx%d" % (H, W), crop="random", flip="h", seed=2, epochs=2)
    worst = 0.0
    for e in (0, 1):
        for rec, (pix, (x, y, w, h), flip) in epoch_rows(m, e).items():
            ref = F.resized_crop(pil(datas[rec]).convert("RGB"), int(y), int(x), int(h), int(w),
                                 [H, W])
            if flip:
                ref = F.hflip(ref)
            d = mad(pix, np.asarray(ref))
            worst = max(worst, d)
            assert d <= 3.0, "record %d epoch %d box %s: mean difference %.2f" % (
                rec, e, (x, y, w, h), d)
    m = mounter(src, image="image:%dx%d" % (H, W), crop="center")
    ev = T.Compose([T.Resize(256), T.CenterCrop(224)])
    for rec, (pix, _, flip) in epoch_rows(m, 0).items():
        d = mad(pix, np.asarray(ev(pil(datas[rec]).convert("RGB"))))
        assert flip == 0 and d <= 3.0, "record %d: centre crop differs by %.2f" % (rec, d)


def _channels_resized(ref, box, flip, H_, W_):
    """torchvision's crop of PIL's decode, channel by channel (C 1, 3, 4)."""
    from PIL import Image
    x, y, w, h = (int(v) for v in box)
    out = []
    for k in range(ref.shape[2]):
        ch = Image.fromarray(np.ascontiguousarray(ref[:, :, k]), "L")
        ch = ch.crop((x, y, x + w, y + h)).resize((W_, H_), Image.BILINEAR)
        out.append(np.asarray(ch))
    a = np.stack(out, -1)
    return a[:, ::-1] if flip else a


@pytest.fixture(scope="module")
def variants_src(tmp_path_factory):
    d = tmp_path_factory.mktemp("augvariants")
    v = imgdata.variants()
    imgdata.write_records(str(d / "v.tfrecord"), [{"img": data, "id": i}
                                                  for i, (_, data) in enumerate(v)])
    return str(d), v


@pytest.mark.parametrize("c", [3, 1, 4])
@pytest.mark.parametrize("size", [(24, 20), (96, 128)])  # reduced; enlarged (67x45 sources)
def test_every_kind_of_image(mounter, variants_src, c, size):
    src, v = variants_src
    h_, w_ = size
    m = mounter(src, image="img:%dx%d:%d" % (h_, w_, c), crop="random", flip="h", epochs=2,
                batch_size=64)
    for e in (0, 1):
        rows = epoch_rows(m, e, "img")
        assert len(rows) == len(v)
        for i, (name, data) in enumerate(v):
            pix, box, flip = rows[i]
            assert pix.shape == (h_, w_, c)
            ref = imgdata.reference(data, c).reshape(45, 67, c)
            d = mad(pix, _channels_resized(ref, box, flip, h_, w_))
            assert d <= 3.0, "%s C=%d %s: mean difference %.2f" % (name, c, size, d)


def test_center_crop_of_small_and_odd_images(mounter, variants_src):
    """crop=center enlarges 67x45 sources: Resize(R) + CenterCrop of PIL's decode."""
    T, F = tv()
    src, v = variants_src
    m = mounter(src, image="img:64x64", crop="center", batch_size=64)
    rows = epoch_rows(m, 0, "img")
    ev = T.Compose([T.Resize(73), T.CenterCrop(64)])  # round(64 * 256 / 224) = 73
    for i, (name, data) in enumerate(v):
        from PIL import Image
        ref = Image.fromarray(imgdata.reference(data, 3).reshape(45, 67, 3))
        d = mad(rows[i][0], np.asarray(ev(ref)))
        assert d <= 3.0, "%s: mean difference %.2f" % (name, d)


# ---------------------------------------------------------------- corrupt images


@pytest.fixture(scope="module")
def corrupt_src(tmp_path_factory, photos):
    _, datas = photos
    d = tmp_path_factory.mktemp("augbad")
    jpg = datas[0] if datas[0][:2] == b"\xff\xd8" else datas[1]
    png = next(x for x in datas if x[:4] == b"\x89PNG")
    bad = {
        "jpeg-cut-at-60%": jpg[:len(jpg) * 6 // 10],
        "jpeg-garbage-near-the-end": jpg[:-300] + b"\x00\xff\x13" * 60 + jpg[-120:],
        "png-cut": png[:len(png) - 40],
        "not-an-image": b"GIF89a no",
    }
    recs, kinds = [], []
    for k, v in bad.items():
        for data, kind in ((jpg, "good"), (v, k), (png, "good")):
            recs.append({"image": data, "id": len(recs)})
            kinds.append(kind)
    imgdata.write_records(str(d / "bad.tfrecord"), recs)
    return str(d), kinds, [r["image"] for r in recs]


def test_corrupt_images_fail_in_every_epoch(mounter, corrupt_src):
    src, kinds, _ = corrupt_src
    plain = mounter(src, image="image:64x64", shuffle="none", batch_size=1, epochs=4)
    m = mounter(src, image="image:64x64", crop="random", flip="h", shuffle="none", batch_size=1,
                epochs=4)
    for e in range(4):
        for r, k in enumerate(kinds):
            p = os.path.join("epoch-%04d" % e, "batch-%06d" % r, "image.npy")
            got, was = read_errno(m.path(p)), read_errno(plain.path(p))
            assert got == was == (None if k == "good" else 5), (e, r, k, got, was)
    lines = m.read("errors.txt").decode().splitlines()
    for r, k in enumerate(kinds):
        if k != "good":
            assert any(("record %d " % r) in ln and "feature 'image'" in ln for ln in lines), (
                k, lines)


def test_a_substitute_row_has_its_own_box(mounter, corrupt_src, doc):
    src, kinds, datas = corrupt_src
    m = mounter(src, image="image:64x64", crop="random", flip="h", shuffle="none",
                batch_size=len(kinds), on_corrupt="skip", epochs=2, seed=4)
    for e in (0, 1):
        d = m.path("epoch-%04d" % e, "batch-000000")
        ids = np.load(os.path.join(d, "id.npy"))
        crop = np.load(os.path.join(d, "image.crop.npy"))
        flip = np.load(os.path.join(d, "image.flip.npy"))
        for r, k in enumerate(kinds):
            want = r if k == "good" else r + 1  # the next good record replaces it
            assert ids[r] == want
            w, h = pil(datas[want]).size
            assert (tuple(crop[r]), int(flip[r])) == doc["box_and_flip"](4, e, want, w, h, 64,
                                                                          64)


# ---------------------------------------------------------------- schema, options, files


def test_schema_per_feature_and_options_over_it(mounter, photos, tmp_path):
    src, _ = photos
    schema = {"features": {
        "id": {"kind": "int64", "shape": []},
        "image": {"kind": "bytes", "dtype": "uint8", "shape": [64, 64, 3], "decode": "image",
                  "crop": "random", "flip": "h", "crop_scale": [0.3, 0.9]},
    }}
    sf = tmp_path / "s.json"
    sf.write_text(json.dumps(schema))
    m = mounter(src, schema=str(sf), batch_size=4)
    f = m.json("schema.json")["features"]["image"]
    assert f["crop"] == "random" and f["flip"] == "h" and f["crop_scale"] == [0.3, 0.9]
    assert f["crop_ratio"] == [0.75, 4 / 3]
    names = sorted(os.listdir(m.path("epoch-0000", "batch-000000")))
    assert names == ["id.npy", "image.crop.npy", "image.flip.npy", "image.npy"]
    # the options set every image feature, over the schema's keys
    m = mounter(src, schema=str(sf), crop="center", flip="none", batch_size=4)
    f = m.json("schema.json")["features"]["image"]
    assert f["crop"] == "center" and f["flip"] == "none" and f["crop_resize"] == 73
    assert "crop_scale" not in f
    assert not np.load(m.path("epoch-0000", "all", "image.flip.npy")).any()
    readme = m.read("README.txt").decode()
    assert "crop=center" in readme and "image.crop.npy" in readme
    # crop=none: no files of provenance
    m = mounter(src, schema=str(sf), crop="none", flip="none", batch_size=4)
    assert sorted(os.listdir(m.path("epoch-0000", "batch-000000"))) == ["id.npy", "image.npy"]
    assert "crop" not in m.json("schema.json")["features"]["image"]


def test_flip_alone_mirrors_the_whole_resize(mounter, photos, doc):
    """crop=none,flip=h: the feature's own resize, mirrored on the page's
    draw; F.crop is the resize's region, the whole image for stretch."""
    src, datas = photos
    plain = epoch_rows(mounter(src, image="image:40x56", crop="none", flip="h", seed=8,
                               epochs=2, batch_size=16), 1)
    ref = mounter(src, image="image:40x56", batch_size=16, epochs=2)
    ids = np.load(ref.path("epoch-0001", "all", "id.npy"))
    img = np.load(ref.path("epoch-0001", "all", "image.npy"))
    flips = 0
    for k, rec in enumerate(ids):
        pix, crop, flip = plain[int(rec)]
        key = doc["augment_key"](8, 1, int(rec))
        assert flip == int(doc["flip"](key))
        assert crop == (0, 0) + pil(datas[rec]).size
        assert np.array_equal(pix, img[k][:, ::-1] if flip else img[k])
        flips += flip
    assert 0 < flips < len(ids)


def test_an_image_and_its_mask_get_the_same_box(mounter, tmp_path):
    """Two image features of one record and one size (a photo and its
    segmentation mask): one box, one flip, so they stay aligned."""
    from PIL import Image
    recs = []
    for r in range(12):
        w, h = 100 + 37 * r, 300 - 11 * r
        img = Image.fromarray(imgdata.synthetic(w, h, r))
        labels = ((np.arange(w)[None, :] // 16 + np.arange(h)[:, None] // 16) % 5 * 50)
        mask = Image.fromarray(labels.astype(np.uint8), "L")
        recs.append({"image": imgdata.encode(img, "JPEG", quality=90),
                     "mask": imgdata.encode(mask, "PNG"), "id": r})
    imgdata.write_records(str(tmp_path / "pairs.tfrecord"), recs)
    schema = {"features": {
        "id": {"kind": "int64", "shape": []},
        "image": {"kind": "bytes", "dtype": "uint8", "shape": [48, 64, 3], "decode": "image"},
        "mask": {"kind": "bytes", "dtype": "uint8", "shape": [48, 64, 1], "decode": "image",
                 "filter": "bilinear"},
    }}
    sf = tmp_path / "s.json"
    sf.write_text(json.dumps(schema))
    m = mounter(str(tmp_path / "pairs.tfrecord"), schema=str(sf), crop="random", flip="h",
                batch_size=5, epochs=2)
    for e in (0, 1):
        a = epoch_rows(m, e, "image")
        b = epoch_rows(m, e, "mask")
        for r in range(12):
            assert a[r][1] == b[r][1] and a[r][2] == b[r][2], (e, r)
            want = _channels_resized(np.asarray(pil(recs[r]["mask"]))[:, :, None], b[r][1],
                                     b[r][2], 48, 64)
            assert mad(b[r][0], want) <= 3.0


def test_options_that_no_feature_uses_fail(batchfs, photos, tmp_path, index_dir):
    src, _ = photos
    mnt = str(tmp_path / "m")
    ix = ",index_dir=" + index_dir
    expect_mount_failure(batchfs, src, mnt, "crop=random" + ix, "no image feature")
    expect_mount_failure(batchfs, src, mnt, "image=image:32x32,crop_scale=0.5:1" + ix,
                         "applies to crop=random")
    expect_mount_failure(batchfs, src, mnt, "image=image:32x32,crop=random,crop_resize=64" + ix,
                         "applies to crop=center")
    expect_mount_failure(batchfs, src, mnt, "image=image:224x224,crop=center,crop_resize=200" + ix,
                         "crop_resize 200")
    expect_mount_failure(batchfs, src, mnt, "image=image:32x32,crop=rand" + ix,
                         "need 'random', 'center' or 'none'")
    expect_mount_failure(batchfs, src, mnt, "image=image:32x32,crop_ratio=2:1" + ix, "crop_ratio")
    expect_mount_failure(batchfs, src, mnt, "image=image:32x32,flip=v" + ix, "need 'h' or 'none'")


def test_python_module_shows_the_provenance(mounter, photos, doc):
    import sys
    sys.path.insert(0, os.path.join(oracle.repo_root(), "python"))
    import batchfs
    from batchfs.numpy import load_batch
    src, datas = photos
    m = mounter(src, image="image:32x32", crop="random", flip="h", seed=9, batch_size=4)
    mt = batchfs.Mount(m.mnt)
    a = mt.augmentation()
    assert a["image"]["crop"] == "random" and a["image"]["flip"] == "h" and a["image"]["seed"] == 9
    b = load_batch(mt.epoch(0).batch_path(2), features=["image"])
    assert sorted(b) == ["image", "image.crop", "image.flip"]
    ids = np.load(m.path("epoch-0000", "batch-000002", "id.npy"))
    for k, rec in enumerate(ids):
        w, h = pil(datas[rec]).size
        box, flip = batchfs.augment.box_and_flip(9, 0, int(rec), w, h, 32, 32)
        assert tuple(b["image.crop"][k]) == box and b["image.flip"][k] == flip
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    from batchfs.torch import BatchDataset
    item = BatchDataset(mt, features=["image"])[2]
    assert item["image.crop"].shape == (4, 4) and np.array_equal(item["image.crop"].numpy(),
                                                                 b["image.crop"])
