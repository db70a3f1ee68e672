# SPDX-License-Identifier: Apache-2.0
"""Image features (docs/contract.md: image=, "decode": "image"): batchfs's decode
of JPEG/PNG bytes compared with an independent decoder (PIL, Debian's
python3-pil) on generated images of every variant and on real photographs
(scikit-image's data files, Debian's python3-skimage); bad images as
corrupt records; inference's note and README.txt; `batchfs inspect`.

Tolerances, and why:
  * No resize: identical pixels (PIL and batchfs both use libjpeg-turbo's
    accurate integer IDCT with fancy upsampling, and PNG is lossless), with
    one stated exception: a colour JPEG read with C = 1 is the JPEG's own
    luma plane (no colour conversion at all), PIL's is L computed from its
    rounded RGB, so they differ by at most 4 levels of rounding.
  * Resize: the resampling is held to references written here in numpy from
    docs/contract.md's definitions (imgdata.place_ref) to within 1 level (float32
    sums against float64), on PIL's decode of the same bytes; a JPEG whose
    target is at least 2x smaller is decoded by the IDCT at 1/2, 1/4 or 1/8
    first (as batchfs documents), so its reference starts from PIL's draft
    decode at that same scale.
  * Against PIL's own resize of the full-size decode the bound is a PSNR:
    area >= 28 dB (PIL's BOX counts whole pixels whose centres fall in the
    box, area weighs the fractional edge pixels; a JPEG's 1/2..1/8 IDCT
    decode is a box-like reduction of its own), bilinear >= 25 dB (PIL's
    BILINEAR widens its kernel with the reduction, an antialias; ours
    samples the 2x2 neighbours, so fine detail aliases). Measured on these
    photographs at 224x160: area 28.6-46 dB, bilinear 26.7-42 dB.
"""
import io
import json
import os
import struct
import subprocess
import zlib

import numpy as np
import pytest

import imgdata
from helpers import read_errno

pytestmark = pytest.mark.skipif(not imgdata.have_pil(), reason="python3-pil is not installed")


def batch_npy(m, b=0, name="img"):
    return np.load(m.path("epoch-0000", "batch-%06d" % b, name + ".npy"))


# ---------------------------------------------------------------- variants


@pytest.fixture(scope="module")
def variants_src(tmp_path_factory):
    d = tmp_path_factory.mktemp("variants")
    v = imgdata.variants()
    imgdata.write_records(str(d / "a.tfrecord"), [{"img": data, "label": i} for i, (_, data) in enumerate(v)])
    return str(d), v


@pytest.mark.parametrize("c", [3, 1, 4])
def test_variants_identical_to_pil(mounter, variants_src, c):
    src, v = variants_src
    h, w = 45, 67  # the size of every variant: no resize
    m = mounter(src, shuffle="none", batch_size=64, image="img:%dx%d:%d" % (h, w, c))
    a = batch_npy(m)
    assert a.dtype == np.uint8 and a.shape == (len(v), h, w, c)
    for i, (name, data) in enumerate(v):
        ref = imgdata.reference(data, c)
        ref = ref.reshape(h, w, c)
        d = np.abs(a[i].astype(int) - ref.astype(int)).max()
        colour_jpeg_to_gray = c == 1 and name.startswith("jpeg") and name not in ("jpeg-gray", "jpeg-cmyk")
        assert d <= (4 if colour_jpeg_to_gray else 0), "%s C=%d: max difference %d" % (name, c, d)


def test_variants_safetensors_same_bytes(mounter, variants_src):
    src, v = variants_src
    m = mounter(src, shuffle="none", batch_size=64, image="img:20x30")
    b = m.read("epoch-0000", "batch-000000.safetensors")
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    t = hdr["img"]
    assert t["dtype"] == "U8" and t["shape"] == [len(v), 20, 30, 3]
    s, e = t["data_offsets"]
    assert b[8 + n + s:8 + n + e] == batch_npy(m).tobytes()
    schema = m.json("schema.json")["features"]["img"]
    assert schema["decode"] == "image" and schema["shape"] == [20, 30, 3]


# ---------------------------------------------------------------- photographs


@pytest.fixture(scope="module")
def photos_src(tmp_path_factory):
    from PIL import Image
    d = tmp_path_factory.mktemp("photos")
    recs, refs = [], []
    for n in imgdata.PHOTOS:
        im = imgdata.photo(n)
        if im is None:
            pytest.skip("python3-skimage's data files are not installed")
        for fmt in ("JPEG", "PNG"):
            data = imgdata.encode(im, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
            recs.append({"img": data})
            refs.append((n, fmt, data))
    imgdata.write_records(str(d / "photos.tfrecord"), recs)
    return str(d), refs


def _scale(mode, w, h, W, H):
    sx, sy = W / w, H / h
    return min(sx, sy) if mode == "fit" else max(sx, sy)


def _pil_decode(data, mode, W, H):
    """PIL's decode of data at the scale batchfs decodes it (docs/contract.md: the IDCT
    scale 1/d, d the largest of 8, 4, 2 with scale * d <= 1), and that d."""
    from PIL import Image
    im = Image.open(io.BytesIO(data))
    w, h = im.size
    d = 1
    if im.format == "JPEG":
        s = _scale(mode, w, h, W, H)
        d = next((k for k in (8, 4, 2) if s * k <= 1.0), 1)
        if d > 1:
            im.draft("RGB", (w // d, h // d))
    return np.asarray(im.convert("RGB")), (w, h), d


@pytest.mark.parametrize("mode", ["stretch", "fit", "crop"])
@pytest.mark.parametrize("filt", ["bilinear", "area"])
def test_photos_resize(mounter, photos_src, tmp_path, mode, filt):
    from PIL import Image
    src, refs = photos_src
    H, W = 224, 160
    schema = {"features": {"img": {"kind": "bytes", "dtype": "uint8", "shape": [H, W, 3],
                                   "decode": "image", "resize": mode, "filter": filt}}}
    sf = tmp_path / "schema.json"
    sf.write_text(json.dumps(schema))
    m = mounter(src, shuffle="none", batch_size=64, schema=str(sf))
    a = batch_npy(m)
    assert a.shape == (len(refs), H, W, 3)
    bound = 28 if filt == "area" else 25
    for i, (name, fmt, data) in enumerate(refs):
        dec, (w, h), d = _pil_decode(data, mode, W, H)
        # the decoded image's own geometry, as batchfs maps it
        ref = imgdata.place_ref(dec, H, W, mode, filt) if d == 1 else _place_scaled(dec, w, h, H, W, mode, filt)
        diff = np.abs(a[i].astype(int) - ref.astype(int)).max()
        assert diff <= 1, "%s/%s %s %s (IDCT 1/%d): max difference %d from the reference" % (
            name, fmt, mode, filt, d, diff)
        full = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        pil = _pil_resize(full, H, W, mode, filt)
        p = imgdata.psnr(a[i], pil)
        assert p >= bound, "%s/%s %s %s: PSNR %.1f dB against PIL's resize, bound %d" % (
            name, fmt, mode, filt, p, bound)


def _place_scaled(dec, w, h, H, W, mode, filt):
    """place_ref on a DCT-scaled decode: the geometry is computed on the
    original size and mapped onto the decoded pixels (batchfs's rule)."""
    dh, dw = dec.shape[:2]
    fx, fy = dw / w, dh / h
    if mode == "stretch":
        return imgdata.resize_ref(dec, (0, 0, dw, dh), H, W, filt)
    if mode == "crop":
        s = max(W / w, H / h)
        cw, ch = min(W / s, w), min(H / s, h)
        return imgdata.resize_ref(dec, ((w - cw) / 2 * fx, (h - ch) / 2 * fy, cw * fx, ch * fy), H, W, filt)
    s = min(W / w, H / h)
    bw = max(1, min(W, int(np.floor(w * s + 0.5))))
    bh = max(1, min(H, int(np.floor(h * s + 0.5))))
    out = np.zeros((H, W, 3), np.uint8)
    ox, oy = (W - bw) // 2, (H - bh) // 2
    out[oy:oy + bh, ox:ox + bw] = imgdata.resize_ref(dec, (0, 0, dw, dh), bh, bw, filt)
    return out


def _pil_resize(full, H, W, mode, filt):
    from PIL import Image
    im = Image.fromarray(full)
    w, h = im.size
    f = Image.BILINEAR if filt == "bilinear" else Image.BOX
    if mode == "stretch":
        return np.asarray(im.resize((W, H), f))
    if mode == "crop":
        s = max(W / w, H / h)
        cw, ch = W / s, H / s
        return np.asarray(im.resize((W, H), f, box=((w - cw) / 2, (h - ch) / 2, (w + cw) / 2, (h + ch) / 2)))
    s = min(W / w, H / h)
    bw, bh = max(1, min(W, int(np.floor(w * s + 0.5)))), max(1, min(H, int(np.floor(h * s + 0.5))))
    out = np.zeros((H, W, 3), np.uint8)
    ox, oy = (W - bw) // 2, (H - bh) // 2
    out[oy:oy + bh, ox:ox + bw] = np.asarray(im.resize((bw, bh), f))
    return out


def test_upscale_bilinear_matches_pil(mounter, tmp_path):
    """Enlarging, PIL's bilinear is the plain 2x2 interpolation too."""
    from PIL import Image
    im = Image.fromarray(imgdata.synthetic(40, 30, 7))
    data = imgdata.encode(im, "PNG")
    imgdata.write_records(str(tmp_path / "up.tfrecord"), [{"img": data}])
    m = mounter(str(tmp_path / "up.tfrecord"), image="img:75x100")
    a = batch_npy(m)[0]
    pil = np.asarray(im.resize((100, 75), Image.BILINEAR))
    assert np.abs(a.astype(int) - pil.astype(int)).max() <= 1


# ---------------------------------------------------------------- bad images


def _png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)


def _png_bomb():
    """A PNG whose header says 60000 x 60000 (valid CRCs, a tiny IDAT)."""
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0)) +
            _png_chunk(b"IDAT", zlib.compress(b"\0" * 100)) + _png_chunk(b"IEND", b""))


def _jpeg_bomb(good):
    """A valid JPEG with its SOF0 size patched to 60000 x 60000."""
    b = bytearray(good)
    i = b.index(b"\xff\xc0")
    struct.pack_into(">HH", b, i + 5, 60000, 60000)
    return bytes(b)


def _bad_png_crc(good):
    b = bytearray(good)
    i = b.index(b"IDAT")
    n = struct.unpack(">I", b[i - 4:i])[0]
    b[i + 4 + n] ^= 0xff  # first byte of the IDAT chunk's CRC
    return bytes(b)


def _corrupt_jpeg_header(good):
    b = bytearray(good)
    i = b.index(b"\xff\xc4")  # the first Huffman table: make its class/id byte invalid
    b[i + 4] = 0x7f
    return bytes(b)


BAD_REASONS = {
    "jpeg-truncated": "jpeg:",
    "jpeg-truncated-scan": "jpeg:",
    "jpeg-corrupt": "jpeg:",
    "png-truncated": "png:",
    "png-bad-crc": "png:",
    "zero-bytes": "empty value",
    "not-an-image": "not a JPEG or PNG",
    "png-bomb": "over the cap",
    "jpeg-bomb": "over the cap",
}


@pytest.fixture(scope="module")
def bad_src(tmp_path_factory):
    from PIL import Image
    d = tmp_path_factory.mktemp("bad")
    im = Image.fromarray(imgdata.synthetic(48, 32, 3))
    jpg = imgdata.encode(im, "JPEG", quality=90)
    png = imgdata.encode(im, "PNG")
    bad = {
        "jpeg-truncated": jpg[:len(jpg) // 2],
        "jpeg-truncated-scan": jpg[:len(jpg) - 40],
        "jpeg-corrupt": _corrupt_jpeg_header(jpg),
        "png-truncated": png[:len(png) - 30],
        "png-bad-crc": _bad_png_crc(png),
        "zero-bytes": b"",
        "not-an-image": b"GIF89a not supported here",
        "png-bomb": _png_bomb(),
        "jpeg-bomb": _jpeg_bomb(jpg),
    }
    recs, kinds = [], []
    for i, (k, v) in enumerate(bad.items()):
        recs.append({"img": jpg if i % 2 else png, "label": len(recs)})
        kinds.append("good")
        recs.append({"img": v, "label": len(recs)})
        kinds.append(k)
    path = d / "bad.tfrecord"
    imgdata.write_records(str(path), recs)
    goods = [imgdata.reference(r["img"], 3) if k == "good" else None for r, k in zip(recs, kinds)]
    return str(path), kinds, goods


def test_bad_images_fail(mounter, bad_src):
    path, kinds, pixels = bad_src
    m = mounter(path, shuffle="none", batch_size=1, image="img:32x48", on_corrupt="fail")
    for r, k in enumerate(kinds):
        p = m.path("epoch-0000", "batch-%06d" % r, "img.npy")
        if k == "good":
            assert np.array_equal(np.load(p)[0], pixels[r])
            assert np.load(m.path("epoch-0000", "batch-%06d" % r, "label.npy"))[0] == r
        else:
            assert read_errno(p) == 5, k  # EIO
    lines = m.read("errors.txt").decode().splitlines()
    for r, k in enumerate(kinds):
        if k == "good":
            continue
        mine = [ln for ln in lines if ("record %d " % r) in ln]
        assert mine, "%s (record %d) not in errors.txt:\n%s" % (k, r, "\n".join(lines))
        ln = mine[0]
        assert path in ln and "feature 'img'" in ln and BAD_REASONS[k] in ln, ln
        assert "\n" not in ln


def test_bad_images_skip(mounter, bad_src):
    path, kinds, pixels = bad_src
    m = mounter(path, shuffle="none", batch_size=len(kinds), image="img:32x48", on_corrupt="skip")
    a = batch_npy(m)
    labels = np.load(m.path("epoch-0000", "batch-000000", "label.npy"))
    for r, k in enumerate(kinds):
        # a bad record is replaced by the next valid one: the good record after it
        want = r if k == "good" else r + 1
        if want >= len(kinds):
            want = 0
        assert labels[r] == want, (r, k, labels)
        assert np.array_equal(a[r], pixels[want])
    assert len(m.read("errors.txt").decode().splitlines()) >= sum(k != "good" for k in kinds)


def test_pixel_cap_option(mounter, tmp_path):
    from PIL import Image
    im = Image.fromarray(imgdata.synthetic(64, 64, 5))
    imgdata.write_records(str(tmp_path / "c.tfrecord"), [{"img": imgdata.encode(im, "PNG")}])
    m = mounter(str(tmp_path / "c.tfrecord"), image="img:8x8", image_max_pixels=4000)
    assert read_errno(m.path("epoch-0000", "batch-000000", "img.npy")) == 5
    assert "image_max_pixels=4000" in m.read("errors.txt").decode()
    m2 = mounter(str(tmp_path / "c.tfrecord"), image="img:8x8", image_max_pixels=4096)
    assert batch_npy(m2).shape == (1, 8, 8, 3)


# ---------------------------------------------------------------- inference, README, inspect


@pytest.fixture(scope="module")
def jpeg_src(tmp_path_factory):
    from PIL import Image
    d = tmp_path_factory.mktemp("jpegs")
    sizes = [(640, 480), (300, 500), (320, 240)]
    recs = [{"image/encoded": imgdata.encode(Image.fromarray(imgdata.synthetic(w, h, i)), "JPEG"),
             "label": i} for i, (w, h) in enumerate(sizes)]
    imgdata.write_records(str(d / "j.tfrecord"), recs)
    return str(d)


def test_inference_notes_content(mounter, jpeg_src):
    m = mounter(jpeg_src)
    f = m.json("schema.json")["features"]["image/encoded"]
    assert f["content"] == "jpeg" and f["max_width"] == 640 and f["max_height"] == 500
    assert "decode" not in f and f["shape"] == [-1]  # not decoded unasked
    readme = m.read("README.txt").decode()
    assert "image=image/encoded:" in readme


def test_image_option_readme_and_errors(mounter, jpeg_src, batchfs, tmp_path):
    m = mounter(jpeg_src, image="image/encoded:64x48:3")
    assert batch_npy(m, name="image/encoded").shape == (3, 64, 48, 3)
    assert "uint8 [B, 64, 48, 3]" in m.read("README.txt").decode()
    for bad in ["nosuch:10x10", "image/encoded:10", "image/encoded:10x10:2", "label:10x10"]:
        mnt = tmp_path / "m"
        mnt.mkdir(exist_ok=True)
        r = subprocess.run([batchfs, "-f", jpeg_src, str(mnt), "-o", "image=" + bad],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = r.stderr.decode().strip()
        assert r.returncode == 1 and "image=" in err and len(err.splitlines()) == 1, (bad, err)


def test_inspect_shows_image_size(batchfs, jpeg_src):
    r = subprocess.run([batchfs, "inspect", os.path.join(jpeg_src, "j.tfrecord")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert "image/encoded: jpeg 640x480" in out, out
