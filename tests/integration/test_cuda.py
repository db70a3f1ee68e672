# SPDX-License-Identifier: Apache-2.0
"""The CUDA path (-o cuda) through the host double of the CUDA runtime
(tests/cuda/cudart_double.c, loaded by the daemon and by the consumers
through BATCHFS_CUDART): "device memory" is shared memory, so the daemon and
a consumer in another process see the same buffer through a real IPC
handle. What this proves and what only a GPU can show: README, "GPU"."""

import ctypes
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import oracle
from helpers import make_dataset

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import batchfs.cuda as bcuda  # noqa: E402

FEATURES = ["x:float:4", "y:int64:1", "tokens:int64:0..12", "img:bytes:1,len=12",
            "tags:bytes:0..3,len=1..5", "m/sub:float:2"]


def _build_file(batchfs_bin, *parts):
    p = os.path.join(os.path.dirname(batchfs_bin), *parts)
    if not os.path.exists(p):
        pytest.skip("%s is not built (make check builds it)" % p)
    return p


@pytest.fixture(scope="module")
def double(batchfs):
    return _build_file(batchfs, "tests", "cuda", "libcudart-double.so")


@pytest.fixture(scope="module")
def consumer(batchfs):
    return _build_file(batchfs, "tests", "cuda", "cuda_consumer")


@pytest.fixture(scope="module")
def ds(gen, work):
    return make_dataset(gen, work / "cuda", 300, FEATURES, shards=2, seed=7)


@pytest.fixture
def cuda_env(double, monkeypatch, tmp_path):
    monkeypatch.setenv("BATCHFS_CUDART", double)
    monkeypatch.delenv("BFS_CUDA_DOUBLE_DEVICES", raising=False)
    log = str(tmp_path / "double.log")
    monkeypatch.setenv("BFS_CUDA_DOUBLE_LOG", log)
    return log


def stats(m):
    return json.loads(m.read("stats.json"))["cuda"]


def wait_for(cond, what, deadline=60):
    end = time.monotonic() + deadline
    while not cond():
        assert time.monotonic() < end, "timed out waiting for " + what
        time.sleep(0.02)


def npy_files(m, e, b):
    d = m.path("epoch-%04d" % e, "batch-%06d" % b)
    out = {}
    for p in glob.glob(os.path.join(d, "**", "*.npy"), recursive=True):
        out[os.path.relpath(p, d)[:-4]] = np.load(p)
    return out


def desc_path(m, e, b):
    return m.path("epoch-%04d" % e, "batch-%06d" % b, "batch-%06d.cuda" % b)


def nbatches(m):
    return m.json("schema.json")["batches_per_epoch"]


# ------------------------------------------------------------------ tree

def test_descriptor_in_every_batch_folder_only_with_cuda(mounter, ds, cuda_env):
    m = mounter(ds.path, batch_size=32, cuda=True)
    nb = nbatches(m)
    for b in range(nb):
        names = os.listdir(m.path("epoch-0000", "batch-%06d" % b))
        assert "batch-%06d.cuda" % b in names
    assert not [n for n in os.listdir(m.path("epoch-0000", "all")) if n.endswith(".cuda")]
    assert not os.path.exists(m.path("epoch-0000", "batch-000000", "batch-000001.cuda"))
    plain = mounter(ds.path, batch_size=32)
    assert not [n for n in os.listdir(plain.path("epoch-0000", "batch-000000"))
                if n.endswith(".cuda")]
    assert "cuda" not in json.loads(plain.read("stats.json"))


# ------------------------------------------------------ descriptor + bytes

def test_descriptor_contents_and_bytes_in_another_process(mounter, ds, cuda_env, consumer,
                                                          tmp_path, monkeypatch):
    # every copy is delayed: a read that did not wait for its copy would
    # hand out a buffer still holding zeros or an older batch
    monkeypatch.setenv("BFS_CUDA_DOUBLE_DELAY_US", "20000")
    m = mounter(ds.path, batch_size=32, cuda=True, cuda_pool=2)
    for b in range(nbatches(m)):
        p = desc_path(m, 0, b)
        raw = open(p, "rb").read()
        assert os.stat(p).st_size == len(raw)
        d = json.loads(raw)
        assert d["version"] == 1 and d["device"] == 0
        assert len(d["handle"]) == 128 and int(d["handle"], 16) != 0
        st = m.read("epoch-0000", "batch-%06d.safetensors" % b)
        assert d["bytes"] == len(st)
        hlen = int.from_bytes(st[:8], "little")
        hdr = json.loads(st[8:8 + hlen])
        npys = npy_files(m, 0, b)
        assert sorted(t["name"] for t in d["tensors"]) == sorted(npys)
        for t in d["tensors"]:
            a = npys[t["name"]]
            assert t["dtype"] == a.dtype.name and t["shape"] == list(a.shape)
            assert t["nbytes"] == a.nbytes
            assert t["offset"] == 8 + hlen + hdr[t["name"]]["data_offsets"][0]
        # a consumer process maps the handle and copies every tensor back
        out = tmp_path / ("b%d" % b)
        out.mkdir()
        r = subprocess.run([consumer, p, str(out)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.decode().splitlines()
        assert len(lines) == len(d["tensors"])
        for i, (t, line) in enumerate(zip(d["tensors"], lines)):
            name, dtype, shape, nbytes = line.split(" ")
            assert name == t["name"] and dtype == t["dtype"] and int(nbytes) == t["nbytes"]
            got = (out / ("%d.bin" % i)).read_bytes()
            assert got == npys[name].tobytes(), "batch %d tensor %s" % (b, name)
    s = stats(m)
    assert s["copies"] >= nbatches(m) and s["errors"] == 0 and s["busy"] == 0
    assert s["pinned_buffers"] > 0


def test_pinned_blocks_are_reused_across_batches(mounter, ds, cuda_env):
    # page-locking a batch costs more than decoding it on a real GPU
    # (docs/cuda.md): a batch leaving the cache gives its pinned block to
    # the next one, so the daemon does not ask the runtime for one per batch
    m = mounter(ds.path, batch_size=32, cuda=True, epochs=3, cache_size="16K")
    nb = nbatches(m)
    for e in range(3):
        for b in range(nb):
            with open(desc_path(m, e, b), "rb") as f:
                assert json.loads(f.read())["tensors"]
    top = json.loads(m.read("stats.json"))
    s = top["cuda"]
    assert s["copies"] >= 3 * nb and s["errors"] == 0
    assert top["batches_decoded"] >= 3 * nb
    # at most the blocks alive at once (the cache's batches, the spares) are
    # ever allocated; without reuse every decoded batch took one
    assert 0 < s["host_allocs"] < top["batches_decoded"] // 2, (s, top["batches_decoded"])


def test_python_load_gives_tensors_through_dlpack(mounter, ds, cuda_env):
    torch = pytest.importorskip("torch")
    m = mounter(ds.path, batch_size=32, cuda=True, cuda_pool=2)
    for b in range(nbatches(m)):
        npys = npy_files(m, 0, b)
        # the double's device memory is host memory: handed out as kDLCPU,
        # torch (CPU build) wraps the very buffer the daemon copied into
        got = bcuda.load(desc_path(m, 0, b), _dlpack_device=bcuda.kDLCPU)
        assert sorted(got) == sorted(npys)
        for k, a in npys.items():
            assert isinstance(got[k], torch.Tensor)
            assert tuple(got[k].shape) == a.shape
            assert got[k].numpy().tobytes() == a.tobytes(), k
        assert stats(m)["busy"] == 1  # the tensors hold the buffer
        del got
        wait_for(lambda: stats(m)["busy"] == 0, "the buffer to return after the tensors went")


def test_dlpack_capsule_for_cuda_is_well_formed(mounter, ds, cuda_env):
    m = mounter(ds.path, batch_size=32, cuda=True)
    with bcuda.open_batch(desc_path(m, 0, 0)) as bt:
        t = [t for t in bt.tensors if t["name"] == "x"][0]
        x = bt.dlpack("x")
        assert x.__dlpack_device__() == (bcuda.kDLCUDA, 0)
        cap = x.__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        mt = bcuda.DLManagedTensor.from_address(get(cap, b"dltensor"))
        dl = mt.dl_tensor
        assert dl.device.device_type == bcuda.kDLCUDA and dl.device.device_id == 0
        assert dl.data == bt.base + t["offset"] and dl.byte_offset == 0
        assert dl.ndim == 2 and [dl.shape[i] for i in range(2)] == t["shape"]
        assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (2, 32, 1)
        assert not dl.strides  # compact
        with pytest.raises(BufferError):
            x.__dlpack__()
        addr = get(cap, b"dltensor")
        assert addr in bcuda._live
        del cap  # never consumed: its destructor frees the DLManagedTensor
        assert addr not in bcuda._live
        assert bt.to_host("x") == npy_files(m, 0, 0)["x"].tobytes()


# ------------------------------------------------------------- lifetime

def test_buffer_lifetime_follows_open_and_close(mounter, ds, cuda_env):
    m = mounter(ds.path, batch_size=32, cuda=True, cuda_pool=2)
    assert stats(m)["pool"] == 2 and stats(m)["busy"] == 0
    a = os.open(desc_path(m, 0, 0), os.O_RDONLY)
    b = os.open(desc_path(m, 0, 1), os.O_RDONLY)
    assert stats(m)["busy"] == 2
    with pytest.raises(BlockingIOError):
        os.open(desc_path(m, 0, 2), os.O_RDONLY | os.O_NONBLOCK)
    assert stats(m)["eagain"] == 1
    os.close(a)
    wait_for(lambda: stats(m)["busy"] == 1, "a buffer to return on close")
    c = os.open(desc_path(m, 0, 2), os.O_RDONLY | os.O_NONBLOCK)
    assert json.loads(os.pread(c, 1 << 16, 0))["bytes"] > 0
    os.close(b)
    os.close(c)
    wait_for(lambda: stats(m)["busy"] == 0, "every buffer to return")


def test_open_blocks_until_a_buffer_returns(mounter, ds, cuda_env):
    m = mounter(ds.path, batch_size=32, cuda=True, cuda_pool=1)
    held = os.open(desc_path(m, 0, 0), os.O_RDONLY)
    done = []

    def opener():
        fd = os.open(desc_path(m, 0, 1), os.O_RDONLY)
        done.append(json.loads(os.pread(fd, 1 << 16, 0)))
        os.close(fd)
    th = threading.Thread(target=opener)
    th.start()
    wait_for(lambda: stats(m)["waits"] == 1, "the second open to wait")
    assert not done  # it cannot have a buffer while the only one is held
    os.close(held)
    th.join(60)
    assert not th.is_alive() and done and done[0]["bytes"] > 0
    wait_for(lambda: stats(m)["busy"] == 0, "the buffer to return")


def test_sigkilled_consumer_returns_its_buffer(mounter, ds, cuda_env, consumer, tmp_path):
    m = mounter(ds.path, batch_size=32, cuda=True, cuda_pool=1)
    p = subprocess.Popen([consumer, desc_path(m, 0, 0), str(tmp_path), "600"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for line in p.stdout:
            if line.strip() == b"holding":
                break
        assert stats(m)["busy"] == 1
        p.send_signal(signal.SIGKILL)
        p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    wait_for(lambda: stats(m)["busy"] == 0, "the dead consumer's buffer to return")
    fd = os.open(desc_path(m, 0, 1), os.O_RDONLY | os.O_NONBLOCK)
    os.close(fd)


def test_sigkilled_waiting_consumer_leaves_no_buffer_behind(mounter, ds, cuda_env, consumer,
                                                           tmp_path):
    m = mounter(ds.path, batch_size=32, cuda=True, cuda_pool=1)
    held = os.open(desc_path(m, 0, 0), os.O_RDONLY)
    p = subprocess.Popen([consumer, desc_path(m, 0, 1), str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: stats(m)["waits"] == 1, "the consumer to wait for a buffer")
        p.send_signal(signal.SIGKILL)
        p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    os.close(held)
    wait_for(lambda: stats(m)["busy"] == 0, "the pool to be whole again")
    fd = os.open(desc_path(m, 0, 2), os.O_RDONLY | os.O_NONBLOCK)
    os.close(fd)


# --------------------------------------------------------------- stress

STRESS = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import batchfs.cuda as c
mnt, who, rounds = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
exp = json.load(open(sys.argv[5]))
nb = len(exp)
n = 0
for r in range(rounds):
    for i in range(nb):
        b = (i * (who + 1) + r) % nb
        p = "%s/epoch-0000/batch-%06d/batch-%06d.cuda" % (mnt, b, b)
        with c.open_batch(p) as bt:
            for name, h in exp[b].items():
                got = bt.to_host(name)
                if got.hex() != h:
                    sys.exit("consumer %d: batch %d tensor %s: wrong bytes" % (who, b, name))
        n += 1
print(n)
"""


def test_stress_eight_consumers(mounter, ds, cuda_env, tmp_path):
    m = mounter(ds.path, batch_size=16, cuda=True, cuda_pool=3)
    nb = nbatches(m)
    exp = [{k: a.tobytes().hex() for k, a in npy_files(m, 0, b).items()} for b in range(nb)]
    ef = tmp_path / "expected.json"
    ef.write_text(json.dumps(exp))
    script = tmp_path / "consumer.py"
    script.write_text(STRESS)
    rounds = int(os.environ.get("BFS_CUDA_STRESS_ROUNDS", "3"))
    py = os.path.join(HERE, "..", "..", "python")
    procs = [subprocess.Popen([sys.executable, str(script), py, m.mnt, str(w), str(rounds), str(ef)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for w in range(8)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()[-2000:]
        assert int(out) == rounds * nb
    s = stats(m)
    assert s["busy"] == 0 and s["errors"] == 0 and s["opens"] >= 8 * rounds * nb


# ------------------------------------------------------ without a GPU

def _mount_cmd(batchfs_bin, ds, mnt, opts, foreground, env, tmp_path):
    mnt.mkdir(exist_ok=True)
    args = [batchfs_bin] + (["-f"] if foreground else []) + [
        ds.path, str(mnt), "-o", opts + ",index_dir=%s" % (tmp_path / "ix")]
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                          timeout=120)


@pytest.mark.parametrize("foreground", [True, False])
def test_no_usable_gpu_fails_the_mount_with_one_line(batchfs, ds, double, tmp_path,
                                                     foreground):
    cases = [({"BATCHFS_CUDART": double, "BFS_CUDA_DOUBLE_DEVICES": "0"}, "cuda", "GPU"),
             ({"BATCHFS_CUDART": double}, "cuda=3", "device 3"),
             ({"BATCHFS_CUDART": str(tmp_path / "nothing.so")}, "cuda", "nothing.so")]
    for i, (extra, opt, word) in enumerate(cases):
        env = dict(os.environ, **extra)
        mnt = tmp_path / ("mnt%d" % i)
        r = _mount_cmd(batchfs, ds, mnt, opt, foreground, env, tmp_path)
        lines = [ln for ln in r.stderr.decode().splitlines() if ln.strip()]
        assert r.returncode == 1, (opt, r.stderr)
        assert len(lines) == 1 and "cuda" in lines[0] and word in lines[0], lines
        assert not os.path.ismount(str(mnt))


def test_cuda_starts_only_in_the_detached_daemon(batchfs, ds, double, tmp_path):
    log = tmp_path / "calls.log"
    env = dict(os.environ, BATCHFS_CUDART=double, BFS_CUDA_DOUBLE_LOG=str(log))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.Popen([batchfs, ds.path, str(mnt), "-o",
                          "cuda,batch_size=32,index_dir=%s" % (tmp_path / "ix")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert p.wait(120) == 0, p.stderr.read()
        assert os.path.ismount(str(mnt))
        pids = {int(ln.split()[0]) for ln in log.read_text().splitlines() if ln.endswith(" init")}
        assert len(pids) == 1 and p.pid not in pids  # not the process that mounted
        daemon = pids.pop()
        cmd = open("/proc/%d/cmdline" % daemon, "rb").read()
        assert b"batchfs" in cmd  # the daemon that serves the mount
        assert os.getsid(daemon) == daemon  # detached: its own session
        d = json.loads(open(os.path.join(str(mnt), "epoch-0000", "batch-000000",
                                         "batch-000000.cuda"), "rb").read())
        assert d["bytes"] > 0
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
