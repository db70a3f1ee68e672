# SPDX-License-Identifier: Apache-2.0
"""batchfs: TFRecord shards as a FUSE tree of ready, shuffled batch files.

This package wraps the ``batchfs`` command (pure Python, no compiled part):

    import batchfs
    with batchfs.mount("/data/shards", "/mnt/ds", batch_size=256, seed=3) as m:
        print(m.schema["records"], m.stats()["batches_decoded"])
        batch = batchfs.numpy.load_batch(m.epoch(0).batch_path(0))

- :func:`mount` starts a daemon, waits until the mount is ready and
  unmounts when the ``with`` block ends; leaving the block never waits
  forever: a daemon not gone within ``exit_timeout`` seconds (10 by
  default; it goes within 2) is killed and reported in one line, a
  :class:`BatchfsWarning`;
- :class:`Mount` wraps a mount that already exists (``.schema``,
  ``.stats()``, ``.epoch(e)``);
- :mod:`batchfs.numpy` reads one batch (or a whole epoch, ``all/``) into a
  dict of arrays, :mod:`batchfs.torch` is a map-style PyTorch dataset;
  :mod:`batchfs.augment` computes the boxes and flips of ``crop=`` and
  ``flip=`` (``Mount.augmentation()`` says which features have them);
- ``python3 -m batchfs ARGS`` runs the ``batchfs`` binary with ARGS.

The binary is found by :func:`find_binary`: ``$BATCHFS``, then the build
tree beside this source tree, then the installation prefix this package
was installed under, then ``PATH``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import warnings
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

__all__ = ["BatchfsError", "BatchfsWarning", "Epoch", "Mount", "augment", "find_binary",
           "format_options", "mount", "numpy", "torch"]
__version__ = "0.1.0"

PathLike = Union[str, "os.PathLike[str]"]

_HERE = os.path.dirname(os.path.abspath(__file__))


class BatchfsError(RuntimeError):
    """The binary is missing, a mount failed (the message holds the
    daemon's own one-line reason) or a path is not a batchfs mount."""


class BatchfsWarning(RuntimeWarning):
    """A daemon did not exit in time after its mount's ``with`` block
    ended: it was killed (one line says which, and its last log line)."""


def find_binary() -> str:
    """Path of the ``batchfs`` executable.

    Looked for, in order: the ``BATCHFS`` environment variable; the build
    tree next to this source tree (``<repo>/build/batchfs``, then
    ``<repo>/batchfs`` for an in-tree build) when the package is used from
    ``<repo>/python``; ``<prefix>/bin/batchfs`` when the package is
    installed under ``<prefix>/lib/python3*/...``; then ``PATH``.
    Raises :class:`BatchfsError` when none is executable.
    """
    env = os.environ.get("BATCHFS")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise BatchfsError("BATCHFS=%s is not an executable file" % env)
    cands: List[str] = []
    repo = os.path.dirname(os.path.dirname(_HERE))  # <repo>/python/batchfs -> <repo>
    if os.path.basename(os.path.dirname(_HERE)) == "python":
        cands += [os.path.join(repo, "build", "batchfs"), os.path.join(repo, "batchfs")]
    # <prefix>/lib/python3/dist-packages/batchfs -> <prefix>/bin/batchfs
    parts = _HERE.split(os.sep)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == "lib" and i + 1 < len(parts) and parts[i + 1].startswith("python"):
            cands.append(os.sep.join(parts[:i] + ["bin", "batchfs"]) or "/")
            break
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    found = shutil.which("batchfs")
    if found:
        return found
    raise BatchfsError("the batchfs binary was not found (set BATCHFS, build it with "
                       "scripts/build, or install it on PATH)")


def format_options(options: Mapping[str, Any]) -> str:
    """``-o`` text for keyword options: ``True`` gives a flag (``drop_remainder``),
    ``False`` or ``None`` leaves the option out, a list or tuple is joined
    with commas (``features=["x", "y"]``), anything else is ``k=str(v)``.
    A name or value that holds a comma (other than a list's joints) or an
    equals sign in the name is refused, since ``-o`` could not carry it."""
    out = []
    for k, v in options.items():
        if not k or "," in k or "=" in k:
            raise ValueError("option name %r cannot be passed with -o" % k)
        if v is True:
            out.append(k)
        elif v is None or v is False:
            continue
        elif isinstance(v, (list, tuple)):
            items = [str(x) for x in v]
            if any("," in x for x in items):
                raise ValueError("option %s: an item holds a comma: %r" % (k, v))
            out.append("%s=%s" % (k, ",".join(items)))
        else:
            s = str(v)
            if "," in s:
                raise ValueError("option %s=%r holds a comma; pass a list" % (k, v))
            out.append("%s=%s" % (k, s))
    return ",".join(out)


class Epoch:
    """One epoch folder of a mount: ``epoch-EEEE/``. ``os.fspath`` works on it.

    ``len(epoch)`` is the number of batches the mount lists in it,
    ``epoch.batch_path(i)`` the path of ``batch-IIIIII.safetensors``
    (``safetensors=False``: the ``batch-IIIIII/`` folder), ``epoch.all_path``
    the ``all.safetensors`` file (the whole epoch, batches end to end) and
    ``epoch.all_dir`` its ``all/`` folder of ``.npy`` files.
    """

    def __init__(self, root: PathLike, index: int):
        if index < 0:
            raise ValueError("epoch %d: epochs are numbered from 0" % index)
        self.index = index
        self.path = os.path.join(os.fspath(root), "epoch-%04d" % index)
        self._n: Optional[int] = None

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return "Epoch(%r)" % self.path

    def __len__(self) -> int:
        if self._n is None:
            try:
                names = os.listdir(self.path)
            except FileNotFoundError:
                root = os.path.dirname(self.path)
                if os.path.isdir(os.path.join(root, "rank-0000")):
                    raise BatchfsError(
                        "%s: this mount has one folder per rank (world=W without rank): pass "
                        "a rank's folder, %s/rank-RRRR, e.g. %s" %
                        (root, root, os.path.join(root, "rank-0000"))) from None
                raise
            self._n = sum(1 for n in names if n.startswith("batch-") and n.endswith(".safetensors"))
        return self._n

    def batch_path(self, i: int, safetensors: bool = True) -> str:
        """Path of batch ``i`` (from 0): its ``.safetensors`` file, or its
        folder of ``.npy`` files with ``safetensors=False``."""
        if i < 0:
            raise IndexError("batch %d: batches are numbered from 0" % i)
        name = "batch-%06d" % i
        return os.path.join(self.path, name + (".safetensors" if safetensors else ""))

    def batch_paths(self, safetensors: bool = True) -> List[str]:
        """Paths of every listed batch, in order."""
        return [self.batch_path(i, safetensors) for i in range(len(self))]

    @property
    def all_path(self) -> str:
        """``all.safetensors``: every tensor of the whole epoch."""
        return os.path.join(self.path, "all.safetensors")

    @property
    def all_dir(self) -> str:
        """``all/``: one ``.npy`` per tensor over the whole epoch (mmap it)."""
        return os.path.join(self.path, "all")


class Mount:
    """A batchfs mount that already exists (or a ``rank-RRRR/`` folder of one).

    ``schema`` is ``schema.json`` (the effective schema and dataset facts:
    ``records``, ``batch_size``, ``batches_per_epoch``, ``features`` ...),
    read once; ``stats()`` reads the live counters of ``stats.json`` each
    call; ``epoch(e)`` is an :class:`Epoch`. Raises :class:`BatchfsError`
    when ``path`` holds no ``schema.json``.
    """

    def __init__(self, path: PathLike):
        self.path = os.path.abspath(os.fspath(path))
        self.root = self.path
        # a rank-RRRR/ folder keeps schema.json and stats.json at the top
        if not os.path.exists(os.path.join(self.root, "schema.json")):
            parent = os.path.dirname(self.root)
            if os.path.basename(self.root).startswith("rank-") and \
                    os.path.exists(os.path.join(parent, "schema.json")):
                self.root = parent
            else:
                raise BatchfsError("%s: not a batchfs mount (no schema.json)" % self.path)
        self._schema: Optional[Dict[str, Any]] = None

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return "Mount(%r)" % self.path

    @property
    def schema(self) -> Dict[str, Any]:
        """``schema.json`` as a dict (read once: it never changes)."""
        if self._schema is None:
            with open(os.path.join(self.root, "schema.json"), "rb") as f:
                self._schema = json.loads(f.read())
        return self._schema

    def augmentation(self) -> Dict[str, Dict[str, Any]]:
        """The augmented image features (``crop=``, ``flip=``;
        docs/augment.md) and how: ``{feature: {"crop": "random", "flip":
        "h", "crop_scale": [0.08, 1.0], ..., "seed": the mount's}}``. Each
        batch holds ``FEATURE.crop`` (int32 [B, 4]: x, y, w, h in the source
        image's pixels) and ``FEATURE.flip`` (uint8 [B]);
        :func:`batchfs.augment.box_and_flip` computes them for any record."""
        out = {}
        for name, f in self.schema.get("features", {}).items():
            if f.get("decode") == "image" and "crop" in f:
                out[name] = {k: v for k, v in f.items()
                             if k in ("crop", "flip", "crop_scale", "crop_ratio", "crop_resize",
                                      "shape")}
                out[name]["seed"] = self.schema.get("seed", 0)
        return out

    def stats(self) -> Dict[str, Any]:
        """``stats.json`` as a dict: live counters, fresh on every call."""
        with open(os.path.join(self.root, "stats.json"), "rb") as f:
            return json.loads(f.read())

    def errors(self) -> List[str]:
        """The lines of ``errors.txt``: one per corrupt or rejected record seen."""
        with open(os.path.join(self.root, "errors.txt"), "rb") as f:
            return f.read().decode(errors="replace").splitlines()

    def epoch(self, e: int) -> Epoch:
        """Epoch ``e`` (any epoch can be looked up, listed or not)."""
        return Epoch(self.path, e)

    def epochs(self) -> List[Epoch]:
        """The listed epochs (``epochs=N`` of the mount), in order."""
        names = sorted(n for n in os.listdir(self.path) if n.startswith("epoch-"))
        return [Epoch(self.path, int(n[len("epoch-"):])) for n in names]


def _in_mountinfo(path: str) -> bool:
    """Is ``path`` (absolute) a mount point, of any filesystem? Unlike
    os.path.ismount this sees bind mounts and dead FUSE mounts too."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return os.path.ismount(path)
    want = os.fsencode(path)
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4:
            mp = fields[4]
            if b"\\" in mp:
                mp = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), mp)
            if mp == want:
                return True
    return False


def _unmount(path: str) -> None:
    for cmd in (["fusermount3", "-u", path], ["fusermount3", "-uz", path]):
        if not _in_mountinfo(path):
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=10)


# The write ends of the watch pipes of this process's mounts (see mount()).
# A forked child (a DataLoader or multiprocessing worker) closes its copies,
# so that only this process's end, not a child that outlives it, keeps a
# daemon alive.
_WATCH_FDS: set = set()
_WATCH_LOCK = threading.Lock()


def _close_watch_fds_in_child() -> None:
    for fd in list(_WATCH_FDS):
        with contextlib.suppress(OSError):
            os.close(fd)
    _WATCH_FDS.clear()


def _release_in_child() -> None:
    _WATCH_LOCK.release()
    _close_watch_fds_in_child()


if hasattr(os, "register_at_fork"):
    # held across a fork: a pipe is never made but not yet listed then
    os.register_at_fork(before=_WATCH_LOCK.acquire, after_in_parent=_WATCH_LOCK.release,
                        after_in_child=_release_in_child)

# The line `batchfs -f` prints on stderr once its mount is ready.
_READY = b"batchfs: mounted "


@contextlib.contextmanager
def mount(source: Union[PathLike, Sequence[PathLike]], mountpoint: Optional[PathLike] = None,
          *, binary: Optional[str] = None, timeout: float = 600.0,
          exit_timeout: float = 10.0, fuse_args: Sequence[str] = (),
          **options: Any) -> Iterator[Mount]:
    """Mount ``source`` on ``mountpoint`` for the ``with`` block; yields a :class:`Mount`.

    ``options`` are the mount options of docs/contract.md as keywords
    (``batch_size=256, seed=3, epochs=10, drop_remainder=True,
    features=["x", "label"]``; see :func:`format_options`). The daemon runs
    in the foreground as this process's child (``batchfs -f``), its log in
    a temporary file; the mount is ready when the daemon says so. If the
    daemon exits first, :class:`BatchfsError` carries its message (the bad
    option or file; a ``mountpoint`` that is already a mount point is
    refused so, never stacked over). With ``mountpoint`` None a temporary
    folder is made and removed afterwards. ``timeout`` bounds the wait for
    the mount (building the index of a large dataset takes a while on first
    mount).

    The daemon goes with this process: it holds one end of a pipe
    (``-o watch_fd=N``) whose other end only this process has, and
    unmounts and exits when that end closes — when the block ends, and also
    when this process dies without running it (SIGTERM, SIGKILL, a crash).
    Leaving the block unmounts only this mount (lazily if busy) and waits
    for the daemon, ``exit_timeout`` seconds at most (it exits within 2 s):
    one still there then is reported in one line, a :class:`BatchfsWarning`
    naming the mount, the daemon's pid and its last log line, and killed
    (SIGKILL, waited for 5 s more), and its mount taken away. Leaving the
    block never waits longer than that.
    """
    exe = binary or find_binary()
    made = None
    if mountpoint is None:
        made = tempfile.mkdtemp(prefix="batchfs-")
        mountpoint = made
    mnt = os.path.abspath(os.fspath(mountpoint))
    src = os.fspath(source) if not isinstance(source, (list, tuple)) else None
    if src is None:
        raise TypeError("source: one directory, file or quoted glob, not a list")
    argv = [exe, "-f", src, mnt]
    opts = format_options(options)
    log = tempfile.TemporaryFile(prefix="batchfs-log-")
    with _WATCH_LOCK:  # no fork in between may keep the write end
        rfd, wfd = os.pipe()
        _WATCH_FDS.add(wfd)
    mounted = False
    proc: Optional[subprocess.Popen] = None
    owner = os.getpid()
    try:
        argv += ["-o", (opts + "," if opts else "") + "watch_fd=%d" % rfd]
        argv += list(fuse_args)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    pass_fds=(rfd,))
        finally:
            os.close(rfd)
        end = time.monotonic() + timeout
        while not mounted:
            log.seek(0)
            text = log.read()
            mounted = text.startswith(_READY) or b"\n" + _READY in text
            if mounted:
                break
            rc = proc.poll()
            if rc is not None:
                msg = text.decode(errors="replace").strip()
                raise BatchfsError(msg or "batchfs exited with status %d before mounting" % rc)
            if time.monotonic() > end:
                raise BatchfsError("%s: the mount was not ready after %.0f s" % (mnt, timeout))
            time.sleep(0.01)
        yield Mount(mnt)
    finally:
        # (a forked child leaving the block leaves its parent's mount alone)
        if os.getpid() == owner:
            _stop(proc, wfd, mnt, mounted, exit_timeout, log)
        log.close()
        if made is not None and os.getpid() == owner:
            with contextlib.suppress(OSError):
                os.rmdir(made)


# How long a killed daemon is waited for (a thread of it stuck in a read of
# a hung FUSE source goes only once that source answers).
_KILL_WAIT = 5.0


def _last_line(log: Any) -> str:
    try:
        log.seek(0)
        lines = log.read().decode(errors="replace").strip().splitlines()
    except (OSError, ValueError):
        return ""
    return lines[-1].strip() if lines else ""


def _stop(proc: Optional[subprocess.Popen], wfd: int, mnt: str, mounted: bool,
          exit_timeout: float, log: Any) -> None:
    # the end of file on its pipe stops the daemon: it unmounts its own
    # mount (lazily if busy) and exits, as on SIGTERM
    with _WATCH_LOCK:
        _WATCH_FDS.discard(wfd)
        with contextlib.suppress(OSError):
            os.close(wfd)
    if proc is None:
        return
    try:
        proc.wait(timeout=exit_timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        if mounted:
            _unmount(mnt)
        try:
            proc.wait(timeout=_KILL_WAIT)
            fate = "killed it"
        except subprocess.TimeoutExpired:
            fate = "killed it; it is still exiting (a read stuck in its source?)"
        last = _last_line(log)
        warnings.warn("batchfs: the daemon of %s (pid %d) had not exited %g s after its "
                      "unmount: %s%s" % (mnt, proc.pid, exit_timeout, fate,
                                         " (its log: %s)" % last if last else ""),
                      BatchfsWarning, stacklevel=4)
    if mounted and _in_mountinfo(mnt):  # the daemon died before it could unmount
        _unmount(mnt)


def __getattr__(name: str) -> Any:
    # batchfs.numpy and batchfs.torch load on first use: importing batchfs
    # needs neither numpy nor PyTorch
    if name in ("numpy", "torch", "augment"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'batchfs' has no attribute %r" % name)
