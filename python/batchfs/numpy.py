# SPDX-License-Identifier: Apache-2.0
"""Read batchfs batches into numpy arrays.

    from batchfs.numpy import load_batch
    b = load_batch("/mnt/ds/epoch-0000/batch-000003.safetensors")
    b["label"].shape          # (B,)
    load_batch("/mnt/ds/epoch-0000/batch-000003")   # the same, from the .npy files
    load_batch("/mnt/ds/epoch-0000/all", mmap=True)   # the whole epoch, mapped

Tensor names are those of the ``.safetensors`` header: the file paths
inside the batch folder without ``.npy`` (``tokens.lengths``,
``image/encoded``, ``feature_lists/s``).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Dict, Iterable, Optional, Union

import numpy as np

__all__ = ["load_batch", "load_safetensors", "load_npy_dir", "select"]

PathLike = Union[str, "os.PathLike[str]"]

# safetensors dtype names -> numpy (little-endian)
_DTYPES = {
    "BOOL": "|b1", "U8": "|u1", "I8": "|i1", "U16": "<u2", "I16": "<i2", "F16": "<f2",
    "BF16": None, "U32": "<u4", "I32": "<i4", "F32": "<f4", "U64": "<u8", "I64": "<i8",
    "F64": "<f8",
}


# the tensors a feature brings beside its own (README "Bytes of a batch";
# an augmented image's box and flip, docs/augment.md)
_OWNED = ("lengths", "values", "row_splits", "value_splits", "value_lengths", "crop", "flip")


def select(names: Iterable[str], features: Optional[Iterable[str]]) -> list:
    """The tensor names that belong to ``features`` (all when None): a
    feature ``f`` owns ``f`` and ``f.lengths``, ``f.values``,
    ``f.row_splits``, ``f.value_splits``, an augmented image's ``f.crop``
    and ``f.flip`` (and a feature list
    ``feature_lists/L`` likewise, with ``.value_lengths`` for bytes)."""
    names = list(names)
    if features is None:
        return names
    want = list(features)
    out = []
    for n in names:
        for f in want:
            if n == f or (n.startswith(f + ".") and
                          n[len(f) + 1:] in _OWNED):
                out.append(n)
                break
    return out


def load_safetensors(path: PathLike, features: Optional[Iterable[str]] = None,
                     mmap: bool = False) -> Dict[str, np.ndarray]:
    """The tensors of one ``.safetensors`` file as a dict of arrays.

    Without ``mmap`` the file is read once into a writable buffer (one
    read of the FUSE file); with ``mmap`` the arrays are read-only views of
    the mapped file (only the pages touched are read). ``features`` keeps
    the named features' tensors only. Raises ``ValueError`` naming the file
    for a malformed header.
    """
    p = os.fspath(path)
    with open(p, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError("%s: not a safetensors file (shorter than 8 bytes)" % p)
        (n,) = struct.unpack("<Q", head)
        size = os.fstat(f.fileno()).st_size
        if n > size - 8:
            raise ValueError("%s: header length %d runs past the end of the file" % (p, n))
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise ValueError("%s: header is not JSON: %s" % (p, e)) from None
        if mmap:
            buf = np.memmap(p, dtype=np.uint8, mode="r")
        else:
            f.seek(0)
            buf = np.empty(size, dtype=np.uint8)
            got = f.readinto(memoryview(buf))
            if got != size:
                raise ValueError("%s: read %d of %d bytes" % (p, got, size))
    base = 8 + n
    out: Dict[str, np.ndarray] = {}
    for name in select((k for k in header if k != "__metadata__"), features):
        t = header[name]
        dt = _DTYPES.get(t.get("dtype"))
        if dt is None:
            raise ValueError("%s: tensor %s: unsupported dtype %r" % (p, name, t.get("dtype")))
        a, b = t["data_offsets"]
        shape = tuple(t["shape"])
        dtype = np.dtype(dt)
        if not 0 <= a <= b <= size - base or (b - a) != dtype.itemsize * int(np.prod(shape)):
            raise ValueError("%s: tensor %s: data_offsets %s do not fit shape %s %s" %
                             (p, name, [a, b], list(shape), t["dtype"]))
        out[name] = buf[base + a:base + b].view(dtype).reshape(shape)
    return out


def load_npy_dir(path: PathLike, features: Optional[Iterable[str]] = None,
                 mmap: bool = False) -> Dict[str, np.ndarray]:
    """The ``.npy`` files under a batch folder (or ``all/``) as a dict of
    arrays named by their path inside it, without ``.npy``; with ``mmap``,
    memory-mapped (``numpy.load(mmap_mode='r')``)."""
    root = os.fspath(path)
    names = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for fn in sorted(files):
            if fn.endswith(".npy"):
                rel = os.path.relpath(os.path.join(d, fn), root)
                names.append(rel[:-len(".npy")].replace(os.sep, "/"))
    return {n: np.load(os.path.join(root, n + ".npy"), mmap_mode="r" if mmap else None)
            for n in sorted(select(names, features))}


def load_batch(path: PathLike, features: Optional[Iterable[str]] = None,
               mmap: bool = False) -> Dict[str, np.ndarray]:
    """One batch as a dict ``{tensor name: numpy array}``.

    ``path`` is a ``batch-NNNNNN.safetensors`` file (or ``all.safetensors``),
    or a ``batch-NNNNNN/`` folder (or ``all/``) of ``.npy`` files: both
    give the same arrays. ``features`` keeps only those features (with their
    ``.lengths`` / ``.values`` / ``.row_splits`` / ``.value_splits`` /
    ``.value_lengths``).
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        return load_npy_dir(p, features, mmap)
    return load_safetensors(p, features, mmap)
