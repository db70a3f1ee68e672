# SPDX-License-Identifier: Apache-2.0
"""batchfs.cuda: a batch of a batchfs mount (mounted with -o cuda) in GPU
memory, as framework tensors through DLPack. Pure Python (ctypes).

    import torch, batchfs.cuda
    batch = batchfs.cuda.load("/mnt/ds/epoch-0000/batch-000000/batch-000000.cuda")
    batch["image"]          # a torch.cuda tensor over the daemon's device buffer

Opening the descriptor makes the daemon copy the decoded batch from pinned
host memory into one of its device buffers; its JSON carries the buffer's
CUDA IPC handle and each tensor's dtype, shape and byte offset. The buffer is
mapped here with cudaIpcOpenMemHandle and every tensor is handed out through
DLPack (no copy). The descriptor stays open, so the buffer stays ours, until
every tensor of the batch is gone; then it is unmapped and closed and the
daemon's buffer returns to its pool. A process that dies returns it too.

load(path, to=None): `to` turns each DLPack object into a tensor: by default
torch.from_dlpack when torch imports, else the DLPack objects themselves
(cupy.from_dlpack(x), jax.dlpack.from_dlpack(x) take them).

The CUDA runtime is libcudart.so (or $BATCHFS_CUDART: the tests' host double).
"""

import ctypes
import errno
import json
import os
import threading

__all__ = ["load", "open_batch", "Batch", "DLPackTensor"]

kDLCPU, kDLCUDA = 1, 2
_kDLInt, _kDLUInt, _kDLFloat, _kDLBfloat, _kDLBool = 0, 1, 2, 4, 6
_DTYPES = {
    "float16": (_kDLFloat, 16), "float32": (_kDLFloat, 32), "float64": (_kDLFloat, 64),
    "bfloat16": (_kDLBfloat, 16),
    "int8": (_kDLInt, 8), "int16": (_kDLInt, 16), "int32": (_kDLInt, 32), "int64": (_kDLInt, 64),
    "uint8": (_kDLUInt, 8), "uint16": (_kDLUInt, 16), "uint32": (_kDLUInt, 32),
    "uint64": (_kDLUInt, 64), "bool": (_kDLBool, 8),
}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]

# ------------------------------------------------------------ the runtime

_rt = None
_rt_lock = threading.Lock()
_CANDIDATES = ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
               "/usr/local/cuda/lib64/libcudart.so"]


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def _runtime():
    global _rt
    with _rt_lock:
        if _rt is not None:
            return _rt
        env = os.environ.get("BATCHFS_CUDART")
        errors = []
        for name in ([env] if env else _CANDIDATES):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError as e:
                errors.append(str(e))
        else:
            raise OSError(errno.ENOSYS, "no CUDA runtime (libcudart.so): " + "; ".join(errors[-1:]))
        c = ctypes
        sig = {
            "cudaSetDevice": [c.c_int],
            "cudaIpcOpenMemHandle": [c.POINTER(c.c_void_p), _Handle, c.c_uint],
            "cudaIpcCloseMemHandle": [c.c_void_p],
            "cudaMemcpy": [c.c_void_p, c.c_void_p, c.c_size_t, c.c_int],
        }
        for fn, args in sig.items():
            f = getattr(lib, fn)
            f.argtypes = args
            f.restype = c.c_int
        lib.cudaGetErrorString.argtypes = [c.c_int]
        lib.cudaGetErrorString.restype = c.c_char_p
        _rt = lib
        return lib


def _check(rc, what):
    if rc != 0:
        msg = _runtime().cudaGetErrorString(rc)
        raise OSError(errno.EIO, "%s: %s" % (what, msg.decode() if msg else "error %d" % rc))


# ------------------------------------------------------------ a mapped batch

class Batch:
    """An open descriptor and its mapped device buffer. Holds the daemon's
    buffer until close() and until every tensor handed out is gone."""

    def __init__(self, path, nonblock=False):
        self.path = path
        self.base = None
        flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_NONBLOCK if nonblock else 0)
        rt = _runtime()
        self.fd = os.open(path, flags)  # EAGAIN: every device buffer is in use
        try:
            chunks = []
            off = 0
            while True:  # returns once the daemon's copy is complete
                b = os.pread(self.fd, 1 << 16, off)
                if not b:
                    break
                chunks.append(b)
                off += len(b)
            try:
                self.desc = json.loads(b"".join(chunks))
                hexh = self.desc["handle"]
                self.device = int(self.desc["device"])
                self.nbytes = int(self.desc["bytes"])
                self.tensors = self.desc["tensors"]
                raw = bytes.fromhex(hexh)
                if len(raw) != 64:
                    raise ValueError("field 'handle' is not 64 bytes")
            except (ValueError, KeyError, TypeError) as e:
                raise OSError(errno.EPROTO, "%s: not a batchfs descriptor: %s" % (path, e))
            _check(rt.cudaSetDevice(self.device), "%s: cudaSetDevice(%d)" % (path, self.device))
            h = _Handle()
            ctypes.memmove(ctypes.addressof(h), raw, 64)
            p = ctypes.c_void_p()
            _check(rt.cudaIpcOpenMemHandle(ctypes.byref(p), h, 1),
                   "%s: cudaIpcOpenMemHandle" % path)
            self.base = p.value
            for t in self.tensors:
                if t["offset"] < 0 or t["nbytes"] < 0 or t["offset"] + t["nbytes"] > self.nbytes:
                    raise OSError(errno.EPROTO, "%s: tensor '%s' lies outside the buffer" %
                                  (path, t["name"]))
        except BaseException:
            self.close()
            raise

    def dlpack(self, name, device_type=kDLCUDA):
        """The DLPack object of one tensor (device_type kDLCPU only makes
        sense with the host double, whose device memory is host memory)."""
        for t in self.tensors:
            if t["name"] == name:
                return DLPackTensor(self, t, device_type)
        raise KeyError(name)

    def to_host(self, name):
        """The tensor's bytes copied back with cudaMemcpy (for checks)."""
        for t in self.tensors:
            if t["name"] == name:
                buf = ctypes.create_string_buffer(max(1, t["nbytes"]))
                _check(_runtime().cudaMemcpy(buf, self.base + t["offset"], t["nbytes"], 2),
                       "cudaMemcpy")
                return buf.raw[:t["nbytes"]]
        raise KeyError(name)

    def close(self):
        """Unmap the buffer and close the descriptor: tensors still alive
        keep it mapped until they go (their DLPack deleter drops the last
        reference)."""
        if self.base is not None:
            _runtime().cudaIpcCloseMemHandle(self.base)
            self.base = None
        if self.fd is not None and self.fd >= 0:
            os.close(self.fd)
            self.fd = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


# live DLManagedTensors: address -> (struct, shape array, Batch). The entry
# keeps the Batch (so the mapping and the descriptor) alive until the
# consumer calls the deleter.
_live = {}
_live_lock = threading.Lock()


def _release(addr):
    with _live_lock:
        _live.pop(addr, None)


@_DELETER
def _deleter(addr):
    _release(addr)


_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


# capsule address -> DLManagedTensor address, for capsules not yet freed
_caps = {}
# looked up without the error check of ctypes.pythonapi: a destructor runs
# while the capsule is being freed, when no exception may be raised
_capi = ctypes.CDLL(None)
_capi.PyCapsule_GetName.restype = ctypes.c_char_p
_capi.PyCapsule_GetName.argtypes = [ctypes.c_void_p]


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(cap):
    # a capsule nobody consumed (still named "dltensor") frees its tensor; a
    # consumer renames it "used_dltensor" and calls the deleter itself
    with _live_lock:
        addr = _caps.pop(cap, None)
    if addr is not None and _capi.PyCapsule_GetName(cap) == b"dltensor":
        _release(addr)


class DLPackTensor:
    """One tensor of a Batch, for from_dlpack (consumed once)."""

    def __init__(self, batch, t, device_type=kDLCUDA):
        if t["dtype"] not in _DTYPES:
            raise TypeError("%s: tensor '%s': dtype %s has no DLPack code" %
                            (batch.path, t["name"], t["dtype"]))
        self.batch, self.t, self.device_type = batch, t, device_type
        self.name = t["name"]
        self.shape = tuple(t["shape"])
        self.dtype = t["dtype"]
        self._used = False

    def __dlpack_device__(self):
        return (self.device_type, self.batch.device)

    def __dlpack__(self, stream=None):
        # the data is complete before the descriptor's read returned: no
        # stream ordering is needed, whatever stream the consumer names
        if self._used:
            raise BufferError("a DLPackTensor is consumed once")
        if self.batch.base is None:
            raise BufferError("%s: the batch is closed" % self.batch.path)
        self._used = True
        t = self.t
        m = DLManagedTensor()
        ndim = len(t["shape"])
        shape = (ctypes.c_int64 * max(1, ndim))(*t["shape"])
        code, bits = _DTYPES[t["dtype"]]
        # the tensor's own address and no byte_offset: PyTorch before 2.x
        # ignores byte_offset, and CuPy and PyTorch produce it this way too
        m.dl_tensor.data = self.batch.base + t["offset"]
        m.dl_tensor.device = DLDevice(self.device_type, self.batch.device)
        m.dl_tensor.ndim = ndim
        m.dl_tensor.dtype = DLDataType(code, bits, 1)
        m.dl_tensor.shape = shape
        m.dl_tensor.strides = None  # compact, C order
        m.dl_tensor.byte_offset = 0
        m.manager_ctx = None
        m.deleter = _deleter
        addr = ctypes.addressof(m)
        with _live_lock:
            _live[addr] = (m, shape, self.batch)
        cap = _pyapi.PyCapsule_New(addr, b"dltensor",
                                   ctypes.cast(_capsule_destructor, ctypes.c_void_p))
        with _live_lock:
            _caps[id(cap)] = addr
        return cap


def open_batch(path, nonblock=False):
    """The Batch of a descriptor (see Batch)."""
    return Batch(path, nonblock=nonblock)


def load(path, to=None, nonblock=False, _dlpack_device=kDLCUDA):
    """{name: tensor} for the descriptor at path, through DLPack (see the
    module's doc). nonblock: OSError(EAGAIN) instead of waiting for a free
    device buffer."""
    if to is None:
        try:
            import torch
            to = torch.from_dlpack
        except ImportError:
            to = None
    b = Batch(path, nonblock=nonblock)
    try:
        out = {}
        for t in b.tensors:
            x = DLPackTensor(b, t, _dlpack_device)
            out[t["name"]] = to(x) if to else x
        return out
    finally:
        # the tensors hold the batch from here (their DLPack entries); a
        # DLPackTensor not yet consumed holds it through its .batch
        del b
