# SPDX-License-Identifier: Apache-2.0
"""The boxes and flips of ``crop=`` and ``flip=`` (docs/augment.md), without
a mount, and what to do with them.

    import batchfs, batchfs.augment as aug
    from batchfs.numpy import load_batch
    b = load_batch("/mnt/train/epoch-0003/batch-000010")
    b["image/encoded.crop"][0]      # array([x, y, w, h], dtype=int32)
    b["image/encoded.flip"][0]      # 1: mirrored
    aug.box_and_flip(seed=0, epoch=3, record=1234, width=500, height=375, H=224, W=224)
    aug.redo(pil_image, (x, y, w, h), flip, (224, 224))   # torchvision's crop, on PIL

A mount writes each augmented image feature F's box (``F.crop``, int32
``[B, 4]``: x, y, w, h in the source image's pixels) and flip (``F.flip``,
uint8 ``[B]``) beside ``F`` in every batch, ``all/`` and ``.safetensors``;
:func:`box_and_flip` computes any record's from the mount's seed, the epoch,
the record's number and the image's size, exactly as the daemon does;
:meth:`batchfs.Mount.augmentation` says which features are augmented and
how.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

__all__ = ["augment_key", "random_box", "center_region", "center_box", "flip", "box_and_flip",
           "redo"]

_M64 = (1 << 64) - 1
_G = 0x9E3779B97F4A7C15
_SALT = 0x6175676D656E74  # "augment"
_TRIES = 10
_DRAW_X, _DRAW_Y, _DRAW_FLIP = 20, 21, 22

Box = Tuple[int, int, int, int]


def _mix(z: int) -> int:
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def augment_key(seed: int, epoch: int, record: int) -> int:
    """The key of a record's draws in an epoch."""
    e = _mix(_mix(seed ^ _SALT) + _G * (epoch + 1))
    return _mix(e + _G * (record + 1))


def _draw(key: int, t: int) -> int:
    return _mix(key + _G * (t + 1))


def _uniform(key: int, t: int) -> float:
    return (_draw(key, t) >> 11) * 2.0 ** -53


def _below(key: int, t: int, n: int) -> int:
    return (_draw(key, t) * n) >> 64


def random_box(key: int, width: int, height: int, scale: Sequence[float] = (0.08, 1.0),
               ratio: Sequence[float] = (3 / 4, 4 / 3)) -> Box:
    """``crop=random``: RandomResizedCrop's (x, y, w, h) of a width x height
    image for the record whose key is ``key``."""
    area = width * height
    lo, hi = math.log(ratio[0]), math.log(ratio[1])
    for n in range(_TRIES):
        target = area * (scale[0] + (scale[1] - scale[0]) * _uniform(key, 2 * n))
        aspect = math.exp(lo + (hi - lo) * _uniform(key, 2 * n + 1))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            return (_below(key, _DRAW_X, width - w + 1), _below(key, _DRAW_Y, height - h + 1),
                    w, h)
    if width / height < ratio[0]:
        w, h = width, round(width / ratio[0])
    elif width / height > ratio[1]:
        w, h = round(height * ratio[1]), height
    else:
        w, h = width, height
    w, h = min(max(w, 1), width), min(max(h, 1), height)
    return (width - w) // 2, (height - h) // 2, w, h


def center_region(width: int, height: int, H: int, W: int,
                  R: int) -> Tuple[float, float, float, float]:
    """``crop=center``: the fractional region of the source that
    ``Resize(R)`` + ``CenterCrop((H, W))`` makes the output."""
    if width <= height:
        rw, rh = R, int(R * height / width)
    else:
        rw, rh = int(R * width / height), R
    left, top = round((rw - W) / 2), round((rh - H) / 2)
    return left * width / rw, top * height / rh, W * width / rw, H * height / rh


def center_box(width: int, height: int, H: int, W: int, R: Optional[int] = None) -> Box:
    """``crop=center``: the ``F.crop`` row, the region rounded to whole
    pixels (``R``: ``crop_resize``, default round(max(H, W) * 256 / 224))."""
    R = R or round(max(H, W) * 256 / 224)
    fx, fy, fw, fh = center_region(width, height, H, W, R)
    x, y = min(round(fx), width - 1), min(round(fy), height - 1)
    return x, y, min(max(round(fw), 1), width - x), min(max(round(fh), 1), height - y)


def flip(key: int) -> bool:
    """``flip=h``: whether the record whose key is ``key`` is mirrored."""
    return _draw(key, _DRAW_FLIP) >> 63 == 1


def box_and_flip(seed: int, epoch: int, record: int, width: int, height: int, H: int, W: int,
                 crop: str = "random", flip_h: bool = True,
                 scale: Sequence[float] = (0.08, 1.0), ratio: Sequence[float] = (3 / 4, 4 / 3),
                 R: Optional[int] = None) -> Tuple[Box, int]:
    """A record's ``F.crop`` and ``F.flip`` rows: ``seed`` the mount's,
    ``record`` its number (shards in SOURCE order, records in file order),
    ``width`` x ``height`` the image's size, ``H`` x ``W`` the feature's;
    ``crop`` "random" or "center"."""
    key = augment_key(seed, epoch, record)
    if crop == "random":
        box = random_box(key, width, height, scale, ratio)
    elif crop == "center":
        box = center_box(width, height, H, W, R)
    else:
        raise ValueError("crop=%r: box_and_flip takes 'random' or 'center'" % (crop,))
    return box, int(bool(flip_h) and flip(key))


def redo(image, box: Sequence[int], flipped, size: Sequence[int]):
    """torchvision's ``resized_crop`` + ``hflip`` of a PIL image with a
    mount's box and flip: the reference the mount's ``crop=random`` pixels
    are held to (within a mean absolute difference of 3/255). ``size`` is
    (H, W); returns a PIL image. (``crop=center``'s pixels are
    ``Resize(R)`` + ``CenterCrop``'s, whose region ``F.crop`` rounds to
    whole pixels: redone from the box they differ a little more.)"""
    from PIL import Image

    x, y, w, h = (int(v) for v in box)
    out = image.crop((x, y, x + w, y + h)).resize((int(size[1]), int(size[0])), Image.BILINEAR)
    return out.transpose(Image.FLIP_LEFT_RIGHT) if int(flipped) else out
