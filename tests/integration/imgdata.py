# SPDX-License-Identifier: Apache-2.0
"""Test data for image features: TFRecord writing, images of every variant
(made with PIL, Debian's python3-pil), real photographs (scikit-image's data
files, Debian's python3-skimage), and the reference decode + compare.

Independent of batchfs: PIL decodes, numpy resizes for the references.
"""
import io
import os
import struct

import numpy as np

import oracle

SKIMAGE_DATA = "/usr/lib/python3/dist-packages/skimage/data"
PHOTOS = ["astronaut.png", "coffee.png", "chelsea.png", "motorcycle_left.png"]


def have_pil():
    try:
        import PIL.Image  # noqa: F401
        return True
    except ImportError:
        return False


def photo(name):
    """A real photograph as an RGB PIL image (None if the package is missing)."""
    from PIL import Image
    p = os.path.join(SKIMAGE_DATA, name)
    if not os.path.exists(p):
        return None
    return Image.open(p).convert("RGB")


def frame(data):
    """One TFRecord record around `data`."""
    hdr = struct.pack("<Q", len(data))
    return (hdr + struct.pack("<I", oracle.mask_crc(oracle.crc32c(hdr))) + data +
            struct.pack("<I", oracle.mask_crc(oracle.crc32c(data))))


def example(features):
    """A serialized tf.train.Example: {name: bytes | [bytes] | int | [int]}."""
    ex = oracle.message_class("Example")()
    for name, v in features.items():
        f = ex.features.feature[name]
        if isinstance(v, (bytes, bytearray)):
            f.bytes_list.value.append(bytes(v))
        elif isinstance(v, int):
            f.int64_list.value.append(v)
        elif isinstance(v, float):
            f.float_list.value.append(v)
        elif v and isinstance(v[0], (bytes, bytearray)):
            f.bytes_list.value.extend(bytes(x) for x in v)
        elif v and isinstance(v[0], float):
            f.float_list.value.extend(v)
        else:
            f.int64_list.value.extend(int(x) for x in v)
    return ex.SerializeToString()


def write_records(path, examples):
    with open(path, "wb") as f:
        for e in examples:
            f.write(frame(example(e)))


def encode(img, fmt, **kw):
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


def synthetic(w, h, seed=0):
    """A smooth colour gradient with some texture, RGB uint8 [h, w, 3]."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 255 * x / max(w - 1, 1)
    g = 255 * y / max(h - 1, 1)
    b = 127 + 100 * np.sin(x / 7.0) * np.cos(y / 5.0)
    a = np.stack([r, g, b], -1) + rng.normal(0, 8, (h, w, 3))
    return np.clip(a, 0, 255).astype(np.uint8)


def variants():
    """(name, encoded bytes, reference RGB(A)/L decode function) for every
    variant docs/contract.md lists. The reference gives the image PIL decodes,
    converted the way batchfs documents for C = 1, 3, 4."""
    from PIL import Image
    base = Image.fromarray(synthetic(67, 45, 1))
    out = []
    out.append(("jpeg-baseline", encode(base, "JPEG", quality=90)))
    out.append(("jpeg-progressive", encode(base, "JPEG", quality=85, progressive=True)))
    out.append(("jpeg-gray", encode(base.convert("L"), "JPEG", quality=90)))
    out.append(("jpeg-cmyk", encode(base.convert("CMYK"), "JPEG", quality=90)))
    out.append(("jpeg-444", encode(base, "JPEG", quality=95, subsampling=0)))
    out.append(("png-rgb8", encode(base, "PNG")))
    out.append(("png-gray8", encode(base.convert("L"), "PNG")))
    out.append(("png-rgba8", encode(base.convert("RGBA").copy(), "PNG")))
    rgba = np.dstack([np.asarray(base), (np.arange(45 * 67).reshape(45, 67) % 256).astype(np.uint8)])
    out.append(("png-alpha", encode(Image.fromarray(rgba, "RGBA"), "PNG")))
    out.append(("png-la", encode(Image.fromarray(rgba, "RGBA").convert("LA"), "PNG")))
    out.append(("png-palette", encode(base.convert("P", palette=Image.ADAPTIVE, colors=50), "PNG")))
    pal = base.convert("P", palette=Image.ADAPTIVE, colors=16)
    out.append(("png-palette-trns", encode(pal, "PNG", transparency=3)))
    out.append(("png-1bit", encode(base.convert("1"), "PNG")))
    out.append(("png-interlaced", _interlaced_png(np.asarray(base))))
    g16 = (np.asarray(base.convert("L")).astype(np.uint16) * 257 + 31)
    out.append(("png-gray16", encode(Image.fromarray(g16.astype(np.uint16)), "PNG")))
    out.append(("png-rgb16", _png16_rgb(np.asarray(base).astype(np.uint16) * 257 + 100)))
    return out


def _chunk(kind, data):
    import zlib
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))


def _png16_rgb(a):
    """A 16-bit RGB PNG written by hand (PIL cannot write one)."""
    import zlib
    h, w, _ = a.shape
    raw = b"".join(b"\0" + a[y].astype(">u2").tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)) +
            _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b""))


def _interlaced_png(a):
    """An Adam7-interlaced 8-bit RGB PNG written by hand."""
    import zlib
    h, w, _ = a.shape
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
              (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = a[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        raw += b"".join(b"\0" + sub[y].tobytes() for y in range(sub.shape[0]))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)) +
            _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b""))


def reference(data, c):
    """What batchfs documents for C channels, from PIL's decode of `data`:
    uint8 [h, w, c]."""
    from PIL import Image
    im = Image.open(io.BytesIO(data))
    im.load()
    if im.mode in ("I;16", "I;16B", "I"):  # 16-bit gray: the high byte
        a = (np.asarray(im).astype(np.uint32) >> 8).astype(np.uint8)
        im = Image.fromarray(a, "L")
    if c == 4:
        return np.asarray(im.convert("RGBA"))
    if c == 3:
        return np.asarray(im.convert("RGB"))
    if im.mode == "L":
        return np.asarray(im)
    if im.mode == "LA":
        return np.asarray(im)[:, :, 0]
    return np.asarray(im.convert("RGB").convert("L"))


def psnr(a, b):
    d = a.astype(np.float64) - b.astype(np.float64)
    mse = np.mean(d * d)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


# ------------------------------------------------------------ numpy references
# The resize docs/contract.md's filters describe, written independently of
# decoder/image/resize.c as dense weight matrices (float64): out = Wy @ img @ Wx.T.


def _axis_weights(n_src, start, size, n_out, filt):
    W = np.zeros((n_out, n_src))
    scale = size / n_out
    for i in range(n_out):
        if filt == "bilinear":
            c = start + (i + 0.5) * scale - 0.5
            f0 = int(np.floor(c))
            fr = c - f0
            a, b = min(max(f0, 0), n_src - 1), min(max(f0 + 1, 0), n_src - 1)
            W[i, a] += 1 - fr
            W[i, b] += fr
        else:  # area: overlap of [a, b) with each source pixel [p, p+1)
            a, b = start + i * scale, start + (i + 1) * scale
            for p in range(max(int(np.floor(a)), 0), min(int(np.ceil(b)), n_src)):
                W[i, p] = min(b, p + 1) - max(a, p)
            W[i] /= W[i].sum()
    return W


def resize_ref(img, region, out_h, out_w, filt):
    """img uint8 [h, w, c]; region (x, y, w, h) in source pixels."""
    x, y, rw, rh = region
    Wy = _axis_weights(img.shape[0], y, rh, out_h, filt)
    Wx = _axis_weights(img.shape[1], x, rw, out_w, filt)
    f = img.astype(np.float64)
    out = np.stack([Wy @ f[:, :, k] @ Wx.T for k in range(f.shape[2])], -1)
    return np.clip(np.floor(out + 0.5), 0, 255).astype(np.uint8)


def place_ref(img, H, W, mode, filt):
    """The whole resize as docs/contract.md states it: stretch, fit (keep aspect,
    centred, pad 0) or crop (keep aspect, cover, centre crop)."""
    h, w = img.shape[:2]
    c = img.shape[2]
    if mode == "stretch":
        return resize_ref(img, (0, 0, w, h), H, W, filt)
    if mode == "crop":
        s = max(W / w, H / h)
        cw, ch = min(W / s, w), min(H / s, h)
        return resize_ref(img, ((w - cw) / 2, (h - ch) / 2, cw, ch), H, W, filt)
    s = min(W / w, H / h)
    bw, bh = max(1, min(W, int(np.floor(w * s + 0.5)))), max(1, min(H, int(np.floor(h * s + 0.5))))
    out = np.zeros((H, W, c), np.uint8)
    ox, oy = (W - bw) // 2, (H - bh) // 2
    out[oy:oy + bh, ox:ox + bw] = resize_ref(img, (0, 0, w, h), bh, bw, filt)
    return out
