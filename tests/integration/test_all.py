# SPDX-License-Identifier: Apache-2.0
"""Integration tests of `epoch-E/all/` and `epoch-E/all.safetensors`
(docs/contract.md, "The whole epoch as one array") over real FUSE mounts.

Every all/ file is checked byte for byte twice: against the concatenation of
the mount's own batch files of that epoch (ragged offsets shifted as when
concatenating RaggedTensors), and against the independent oracle: np.save of
oracle.expected_batch over the whole epoch's records at once
(oracle.epoch_records), and oracle.safetensors_bytes of those tensors.
Fixtures (mounts, generated datasets) are conftest.py's."""

import errno
import json
import os
import re
import stat
import subprocess

import numpy as np
import pytest

import oracle
from helpers import (USER_SCHEMA, Dataset, corrupt_data_crc, effective, expect_mount_failure, fact,
                     make_dataset, read_errno, walk_files)


# ---------------------------------------------------------------- helpers


def epoch_dir(m, epoch=0):
    return m.path("epoch-%04d" % epoch)


def all_dir(m, epoch=0):
    return m.path("epoch-%04d" % epoch, "all")


def stats(m):
    return m.json("stats.json")


def stat_counter(st, key):
    assert key in st, "stats.json has no %r: %s" % (key, sorted(st))
    return st[key]


def expected_all(ds, schema, B, seed=0, epoch=0, shuffle="global", drop=False, rank=0, world=1):
    """(tensors, record indices) of a whole epoch by the oracle."""
    idx = oracle.epoch_records(ds.n, B, seed, epoch, shuffle, drop, rank, world)
    return oracle.expected_batch(ds.decoded, schema, idx), idx


def load_batch(bdir, names):
    return {n: np.load(os.path.join(bdir, n + ".npy")) for n in names}


def mount_concat(m, schema, names, nloc, epoch=0):
    """The mount's own batch files of an epoch, concatenated."""
    ep = epoch_dir(m, epoch)
    batches = [load_batch(os.path.join(ep, "batch-%06d" % i), names) for i in range(nloc)]
    return oracle.concat_batches(schema, batches)


def header_len(arr):
    return len(oracle.npy_bytes(arr)) - arr.nbytes


def describe(data, want):
    import io
    try:
        got = np.load(io.BytesIO(data))
        return "got %s %s, want %s %s" % (got.dtype, got.shape, want.dtype, want.shape)
    except Exception as e:  # noqa: BLE001 - only for the message
        return "got %d unparsable bytes (%s), want %s %s (%d bytes)" % (
            len(data), e, want.dtype, want.shape, len(oracle.npy_bytes(want)))


def check_listing(m, nloc, epoch=0):
    want = sorted(["batch-%06d" % i for i in range(nloc)] +
                  ["batch-%06d.safetensors" % i for i in range(nloc)] + ["all", "all.safetensors"])
    got = sorted(os.listdir(epoch_dir(m, epoch)))
    assert got == want, "epoch-%04d lists %s" % (epoch, [n for n in got if not n.startswith("batch-")])


def check_all(m, ds, schema=None, B=32, seed=0, epoch=0, shuffle="global", drop=False,
              rank=0, world=1, concat=True, listing=True):
    """all/ and all.safetensors of one epoch against the oracle and against the
    mount's own batches; returns the expected tensors."""
    schema = schema or effective(m)
    nloc = oracle.local_batches(ds.n, B, drop, world)
    if listing:
        check_listing(m, nloc, epoch)
    exp, idx = expected_all(ds, schema, B, seed, epoch, shuffle, drop, rank, world)
    adir = all_dir(m, epoch)
    assert stat.S_ISDIR(os.stat(adir).st_mode)
    files = walk_files(adir)
    assert files == oracle.tensor_files(exp), adir
    if nloc:
        assert files == walk_files(os.path.join(epoch_dir(m, epoch), "batch-000000"))
    # sizes first (stat, nothing read yet), then the bytes
    for name, arr in exp.items():
        p = os.path.join(adir, name + ".npy")
        assert os.stat(p).st_size == len(oracle.npy_bytes(arr)), p
    st_path = os.path.join(epoch_dir(m, epoch), "all.safetensors")
    want_st = oracle.safetensors_bytes(exp)
    assert os.stat(st_path).st_size == len(want_st), st_path
    got = {}
    for name, arr in exp.items():
        p = os.path.join(adir, name + ".npy")
        with open(p, "rb") as f:
            data = f.read()
        got[name] = data
        assert data == oracle.npy_bytes(arr), "%s vs oracle: %s" % (p, describe(data, arr))
    with open(st_path, "rb") as f:
        raw = f.read()
    assert raw == want_st, "%s differs from the oracle's safetensors (%d vs %d bytes)" % (
        st_path, len(raw), len(want_st))
    parsed = oracle.parse_safetensors(raw)
    assert sorted(parsed) == sorted(exp)
    if concat and nloc:
        cat = mount_concat(m, schema, sorted(exp), nloc, epoch)
        for name, arr in cat.items():
            assert got[name] == oracle.npy_bytes(arr), \
                "%s/%s.npy vs the concatenated batch files: %s" % (adir, name, describe(got[name], arr))
        assert raw == oracle.safetensors_bytes(cat), "%s vs the batches' tensors" % st_path
    return exp


# ---------------------------------------------------------------- oracle


def test_oracle_concat_is_whole_epoch(ds_user, ds_seq):
    """The oracle's two routes agree (no mount): concatenated expected batches
    == the expected batch over all the epoch's records."""
    for ds, schema, B in [(ds_user, USER_SCHEMA, 22), (ds_seq, oracle.infer_schema(ds_seq.decoded), 16)]:
        nb = oracle.local_batches(ds.n, B)
        parts = [oracle.expected_batch(ds.decoded, schema, oracle.batch_records(ds.n, B, b, 3))
                 for b in range(nb)]
        whole = oracle.expected_batch(ds.decoded, schema, oracle.epoch_records(ds.n, B, 3))
        cat = oracle.concat_batches(schema, parts)
        assert sorted(cat) == sorted(whole)
        for k in whole:
            assert oracle.arrays_equal(cat[k], whole[k]), k


# ---------------------------------------------------------------- tree, stat


def test_listing_and_stat_decode_nothing(mounter, ds_plain):
    B = 32
    m = mounter(ds_plain.path, batch_size=B, epochs=2, seed=4)
    nb = oracle.batches_per_epoch(ds_plain.n, B)
    for e in (0, 1):
        check_listing(m, nb, e)
    schema = effective(m)
    # an unlisted epoch has it too
    assert os.path.isdir(m.path("epoch-0005", "all"))
    assert os.path.isfile(m.path("epoch-0005", "all.safetensors"))
    for e in (0, 1, 5):
        exp, _ = expected_all(ds_plain, schema, B, seed=4, epoch=e)
        adir = all_dir(m, e)
        assert walk_files(adir) == oracle.tensor_files(exp)
        assert stat.S_IMODE(os.stat(adir).st_mode) == 0o555
        assert os.path.isdir(os.path.join(adir, "m"))  # "m/sub" makes a folder, as in a batch
        for name, arr in exp.items():
            st = os.stat(os.path.join(adir, name + ".npy"))
            assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o444, name
            assert st.st_size == len(oracle.npy_bytes(arr)), (e, name, st.st_size)
        st = os.stat(m.path("epoch-%04d" % e, "all.safetensors"))
        assert stat.S_IMODE(st.st_mode) == 0o444
        assert st.st_size == len(oracle.safetensors_bytes(exp)), (e, st.st_size)
    s = stats(m)
    assert stat_counter(s, "batches_decoded") == 0, s
    assert stat_counter(s, "chunks_decoded") == 0, s
    # stable inode numbers and sizes, read-only
    p = os.path.join(all_dir(m), "x.npy")
    a = os.stat(p)
    with open(p, "rb") as f:
        f.read(1000)
    b = os.stat(p)
    assert (a.st_ino, a.st_size) == (b.st_ino, b.st_size)
    assert a.st_ino != os.stat(m.path("epoch-0000", "batch-000000", "x.npy")).st_ino
    assert a.st_ino != os.stat(m.path("epoch-0001", "all", "x.npy")).st_ino
    for fn in (lambda: open(p, "r+b"), lambda: open(os.path.join(all_dir(m), "new.npy"), "xb"),
               lambda: os.unlink(p), lambda: os.rmdir(all_dir(m))):
        with pytest.raises(OSError) as ei:
            fn()
        assert ei.value.errno == errno.EROFS


# ---------------------------------------------------------------- bytes


def test_all_plain_remainder_and_epochs(mounter, ds_plain):
    B = 32
    assert ds_plain.n % B != 0
    m = mounter(ds_plain.path, batch_size=B, epochs=2)
    e0 = check_all(m, ds_plain, B=B, epoch=0)
    assert e0["x"].shape == (ds_plain.n, 4)
    assert e0["tokens"].shape[0] == ds_plain.n and e0["tags.row_splits"].shape == (ds_plain.n + 1,)
    e1 = check_all(m, ds_plain, B=B, epoch=1)
    assert m.read("epoch-0000", "all", "x.npy") != m.read("epoch-0001", "all", "x.npy")
    assert m.read("epoch-0000", "all.safetensors") != m.read("epoch-0001", "all.safetensors")
    # the same records, another order
    assert sorted(e0["y"].tolist()) == sorted(e1["y"].tolist())
    # an unlisted epoch, looked up by name
    check_all(m, ds_plain, B=B, epoch=3, listing=False)


def test_all_fixed_only_later_epochs(mounter, ds_plain):
    """Without ragged tensors every epoch's view has the same geometry (kept
    once), but each epoch's rows are its own."""
    B = 32
    m = mounter(ds_plain.path, batch_size=B, seed=4, epochs=2, features="x,y")
    e0 = check_all(m, ds_plain, B=B, seed=4, epoch=0)
    e1 = check_all(m, ds_plain, B=B, seed=4, epoch=1)
    assert e0["y"].tolist() != e1["y"].tolist()
    check_all(m, ds_plain, B=B, seed=4, epoch=5, listing=False)


def test_all_gzip(mounter, ds_gzip):
    B = 17
    assert ds_gzip.n % B != 0
    m = mounter(ds_gzip.path, batch_size=B, seed=99)
    check_all(m, ds_gzip, B=B, seed=99)


def test_all_padded_and_ragged(mounter, ds_user, tmp_path):
    B = 22
    assert ds_user.n % B != 0
    sf = tmp_path / "schema.json"
    sf.write_text(json.dumps(USER_SCHEMA))
    m = mounter(ds_user.path, batch_size=B, seed=8, schema=str(sf))
    exp = check_all(m, ds_user, schema=USER_SCHEMA, B=B, seed=8)
    R = ds_user.n
    adir = all_dir(m)
    # padded: [R, max_len] + lengths int32 [R]
    tok = np.load(os.path.join(adir, "tok.npy"))
    assert tok.shape == (R, 8) and tok.dtype == np.int64
    tl = np.load(os.path.join(adir, "tok.lengths.npy"))
    assert tl.shape == (R,) and tl.dtype == np.int32
    assert np.load(os.path.join(adir, "nm.npy")).shape == (R, 10)
    # ragged numeric: values [sum of counts], row_splits int64 [R+1] over the epoch
    wv = np.load(os.path.join(adir, "words.values.npy"))
    ws = np.load(os.path.join(adir, "words.row_splits.npy"))
    assert ws.dtype == np.int64 and ws.shape == (R + 1,) and ws[0] == 0 and ws[-1] == len(wv)
    assert np.all(np.diff(ws) >= 0)
    idx = oracle.epoch_records(R, B, 8)
    for r in [0, 1, B - 1, B, B + 1, R // 2, R - 1]:
        want = ds_user.decoded[idx[r]]["features"].get("words", ("int64", []))[1]
        assert np.array_equal(wv[ws[r]:ws[r + 1]], np.asarray(want, dtype=np.int64)), r
    # ragged bytes: values uint8, value_splits [nvalues+1], row_splits [R+1] into value_splits
    tv = np.load(os.path.join(adir, "tags.values.npy"))
    tvs = np.load(os.path.join(adir, "tags.value_splits.npy"))
    trs = np.load(os.path.join(adir, "tags.row_splits.npy"))
    assert tv.dtype == np.uint8 and tvs.dtype == np.int64 and trs.dtype == np.int64
    assert trs.shape == (R + 1,) and trs[-1] == len(tvs) - 1 and tvs[-1] == len(tv)
    for r in [0, B - 1, B, R // 3, R - 1]:
        want = ds_user.decoded[idx[r]]["features"].get("tags", ("bytes", []))[1]
        got = [tv[tvs[v]:tvs[v + 1]].tobytes() for v in range(trs[r], trs[r + 1])]
        assert got == list(want), r
    assert exp["raw"].shape == (R, 2, 3) and np.load(os.path.join(adir, "raw.npy")).dtype == np.float32
    assert np.load(os.path.join(adir, "r16.npy")).dtype == np.int16


def test_all_sequence_example(mounter, ds_seq):
    B = 16
    assert ds_seq.n % B != 0
    m = mounter(ds_seq.path, batch_size=B, seed=2)
    exp = check_all(m, ds_seq, B=B, seed=2)
    files = walk_files(all_dir(m))
    assert "feature_lists/frames.npy" in files and "feature_lists/frames.lengths.npy" in files
    assert exp["feature_lists/frames"].shape[0] == ds_seq.n


def test_all_drop_remainder(mounter, ds_plain):
    B = 32
    m = mounter(ds_plain.path, batch_size=B, drop_remainder=True, seed=1)
    exp = check_all(m, ds_plain, B=B, seed=1, drop=True)
    assert exp["x"].shape == ((ds_plain.n // B) * B, 4)
    assert np.load(os.path.join(all_dir(m), "x.npy"), mmap_mode="r").shape == ((ds_plain.n // B) * B, 4)


def test_all_shuffle_none(mounter, ds_plain):
    B = 32
    m = mounter(ds_plain.path, batch_size=B, shuffle="none")
    exp = check_all(m, ds_plain, B=B, shuffle="none")
    x = np.load(os.path.join(all_dir(m), "x.npy"))
    for i in (0, 1, 250, ds_plain.n - 1):
        assert np.array_equal(x[i], ds_plain.decoded[i]["features"]["x"][1])
    assert oracle.arrays_equal(x, exp["x"])


def test_all_rank_world(mounter, ds_plain):
    B, W = 10, 3
    single = mounter(ds_plain.path, batch_size=B, seed=5)
    nb = oracle.batches_per_epoch(ds_plain.n, B)
    per_rank = nb // W
    cut = per_rank * W * B
    one = check_all(single, ds_plain, B=B, seed=5)
    ranks = [mounter(ds_plain.path, batch_size=B, seed=5, rank=r, world=W) for r in range(W)]
    got = []
    for r, m in enumerate(ranks):
        exp = check_all(m, ds_plain, B=B, seed=5, rank=r, world=W)
        assert exp["x"].shape[0] == per_rank * B
        got.append(np.load(os.path.join(all_dir(m), "y.npy")))
    # local batch i of rank r is global batch i*W + r of the single-node sequence
    ys = np.load(os.path.join(all_dir(single), "y.npy"))
    assert oracle.arrays_equal(ys, one["y"])
    inter = np.empty(cut, dtype=ys.dtype)
    for r in range(W):
        for i in range(per_rank):
            g = i * W + r
            inter[g * B:(g + 1) * B] = got[r][i * B:(i + 1) * B]
    assert np.array_equal(inter, ys[:cut])
    assert sorted(np.concatenate(got).tolist()) == sorted(ys[:cut].tolist())
    # the same for the ragged bytes of rank 1 (row_splits rebased per rank)
    m = ranks[1]
    trs = np.load(os.path.join(all_dir(m), "tags.row_splits.npy"))
    assert trs.shape == (per_rank * B + 1,) and trs[0] == 0


REAL = [("tfx-mnist-1000.tfrecord", 64), ("lingvo-wmt14-ende-wpm-32k-test.tfrecord", 16),
        ("tft-seqex-data.tfrecord.gz", 2)]


@pytest.mark.parametrize("name,B", REAL, ids=[r[0] for r in REAL])
def test_all_real(mounter, name, B):
    src = os.path.join(oracle.testdata_dir(), name)
    if not os.path.isfile(src):
        pytest.skip("missing %s" % src)
    ds = Dataset(src, oracle.read_dataset(src), 1)
    m = mounter(src, batch_size=B, seed=5)
    assert fact(m.json("schema.json"), "records") == ds.n
    check_all(m, ds, B=B, seed=5)


# ---------------------------------------------------------------- readers


SLICES = [(0, 1), (0, 32), (31, 33), (5, 6), (100, 250), (63, 129), (480, 500), (499, 500),
          (0, 500), (250, 250)]


def test_numpy_load_mmap_slices(mounter, ds_plain):
    B = 32
    m = mounter(ds_plain.path, batch_size=B, seed=6)
    exp, _ = expected_all(ds_plain, effective(m), B, seed=6)
    adir = all_dir(m)
    for name in ["x", "y", "tokens", "tokens.lengths", "img", "m/sub", "name", "e.lengths"]:
        p = os.path.join(adir, name + ".npy")
        mm = np.load(p, mmap_mode="r")
        assert mm.shape == exp[name].shape and mm.dtype == exp[name].dtype, p
        for a, b in SLICES:
            assert oracle.arrays_equal(np.array(mm[a:b]), exp[name][a:b]), (p, a, b)
        assert oracle.arrays_equal(np.array(mm[::37]), exp[name][::37]), p
        del mm
        assert oracle.arrays_equal(np.load(p), exp[name]), p
    # ragged: rows a..b through row_splits, from mmapped arrays
    rs = np.load(os.path.join(adir, "tags.row_splits.npy"), mmap_mode="r")
    vs = np.load(os.path.join(adir, "tags.value_splits.npy"), mmap_mode="r")
    vals = np.load(os.path.join(adir, "tags.values.npy"), mmap_mode="r")
    for a, b in SLICES:
        lo, hi = int(vs[rs[a]]), int(vs[rs[b]])
        w = exp["tags.values"][exp["tags.value_splits"][exp["tags.row_splits"][a]]:
                               exp["tags.value_splits"][exp["tags.row_splits"][b]]]
        assert np.array_equal(np.array(vals[lo:hi]), w), (a, b)
    # the safetensors file through mmap as well
    raw = np.memmap(m.path("epoch-0000", "all.safetensors"), dtype=np.uint8, mode="r")
    got = oracle.parse_safetensors(bytes(raw))
    for k in exp:
        assert oracle.arrays_equal(got[k], exp[k]), k


def test_dd_and_pread_at_odd_offsets(mounter, ds_plain):
    B = 40
    m = mounter(ds_plain.path, batch_size=B, seed=2)
    exp, _ = expected_all(ds_plain, effective(m), B, seed=2)
    for name in ["x", "tokens", "img", "tags.values", "tags.row_splits"]:
        p = os.path.join(all_dir(m), name + ".npy")
        want = oracle.npy_bytes(exp[name])
        r = subprocess.run(["dd", "if=" + p, "bs=7", "skip=3", "count=11", "status=none"],
                           stdout=subprocess.PIPE, check=True)
        assert r.stdout == want[21:21 + 77], p
        hdr = header_len(exp[name])
        assert hdr % 64 == 0
        r = subprocess.run(["dd", "if=" + p, "bs=1", "skip=%d" % hdr, "status=none"],
                           stdout=subprocess.PIPE, check=True)
        assert r.stdout == want[hdr:], p
        mid = len(want) // 2 + 3
        r = subprocess.run(["dd", "if=" + p, "bs=4096", "iflag=skip_bytes,count_bytes",
                            "skip=%d" % mid, "count=999", "status=none"], stdout=subprocess.PIPE, check=True)
        assert r.stdout == want[mid:mid + 999], p
        fd = os.open(p, os.O_RDONLY)
        try:
            for off, size in [(len(want) - 1, 10), (len(want), 5), (len(want) + 100, 5),
                              (1, 3), (63, 2), (5, 100000), (len(want) // 3, 4097),
                              (len(want) * 2 // 3 + 1, 33)]:
                assert os.pread(fd, size, off) == want[off:off + size], (p, off, size)
        finally:
            os.close(fd)
    st = m.path("epoch-0000", "all.safetensors")
    want = oracle.safetensors_bytes(exp)
    r = subprocess.run(["dd", "if=" + st, "bs=5", "skip=9", "count=33", "status=none"],
                       stdout=subprocess.PIPE, check=True)
    assert r.stdout == want[45:45 + 165]
    r = subprocess.run(["dd", "if=" + st, "bs=1000", "iflag=skip_bytes", "skip=%d" % (len(want) // 2 + 7),
                        "status=none"], stdout=subprocess.PIPE, check=True)
    assert r.stdout == want[len(want) // 2 + 7:]


class _AllSlices:
    """A map-style torch Dataset: item k = rows k*n .. (k+1)*n of all/ arrays,
    opened lazily (mmap) in each worker."""

    def __init__(self, adir, names, rows, n):
        self.adir, self.names, self.rows, self.n = adir, names, rows, n
        self.arrays = None

    def __len__(self):
        return -(-self.rows // self.n)

    def __getitem__(self, k):
        import torch
        if self.arrays is None:
            self.arrays = {nm: np.load(os.path.join(self.adir, nm + ".npy"), mmap_mode="r")
                           for nm in self.names}
        a, b = k * self.n, min((k + 1) * self.n, self.rows)
        return k, {nm: torch.from_numpy(np.array(arr[a:b])) for nm, arr in self.arrays.items()}


def test_torch_slices_and_dataloader(mounter, ds_plain):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    B = 32
    m = mounter(ds_plain.path, batch_size=B, seed=4)
    exp, _ = expected_all(ds_plain, effective(m), B, seed=4)
    adir = all_dir(m)
    R = ds_plain.n
    for name in ["x", "y", "tokens"]:
        mm = np.load(os.path.join(adir, name + ".npy"), mmap_mode="r")
        for bs in (100, 7, 256):
            for a in range(0, R, bs):
                t = torch.from_numpy(mm[a:a + bs].copy())
                assert isinstance(t, torch.Tensor)
                assert t.shape[0] == min(bs, R - a)
                assert np.array_equal(t.numpy(), exp[name][a:a + bs]), (name, bs, a)
        del mm
    names = ["x", "y", "m/sub"]
    dl = DataLoader(_AllSlices(adir, names, R, 100), batch_size=None, num_workers=2, shuffle=True,
                    generator=torch.Generator().manual_seed(0))
    seen = set()
    for k, d in dl:
        k = int(k)
        for nm in names:
            assert isinstance(d[nm], torch.Tensor)
            assert np.array_equal(d[nm].numpy(), exp[nm][k * 100:(k + 1) * 100]), (nm, k)
        seen.add(k)
    assert seen == set(range(5))


def test_readme_mentions_all(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=32)
    text = m.read("README.txt").decode()
    assert "all/" in text
    assert "all.safetensors" in text
    assert "DataLoader" in text
    lines = [l for l in text.splitlines() if "all/" in l]
    assert any("np.load" in l or "numpy.load" in l for l in lines), lines


# ---------------------------------------------------------------- partial reads

BIG_N = 4000
# 4 KiB rows of x: a page is one row. Mounts of it set chunk_rows=BIG_CHUNK
# (8 chunks per epoch, about 2 MiB each, like the default geometry).
BIG_FEATURES = ["x:float:1024", "y:int64:1"]
BIG_CHUNK = 512


@pytest.fixture(scope="module")
def ds_big(gen, work):
    return make_dataset(gen, work / "all-big", BIG_N, BIG_FEATURES, shards=2, seed=31)


def _pread_random(path, off, size):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead beyond the range
        return os.pread(fd, size, off)
    finally:
        os.close(fd)


def _page_chunks(off, size, arr, chunk_rows, page=4096):
    """Chunks holding the rows of the pages that a read of [off, off+size) of
    np.save(arr)'s bytes touches (what the kernel asks for)."""
    hdr, row = header_len(arr), arr[0].nbytes
    fsize = hdr + arr.nbytes
    lo = off // page * page
    hi = min(-(-(off + size) // page) * page, fsize)
    lo = max(lo, hdr)
    if hi <= lo:
        return set()
    return set(range((lo - hdr) // row // chunk_rows, (hi - 1 - hdr) // row // chunk_rows + 1))


def test_partial_read_decodes_only_its_chunks(mounter, ds_big):
    B = 32
    m = mounter(ds_big.path, batch_size=B, seed=9, prefetch=0, chunk_rows=BIG_CHUNK)
    exp, _ = expected_all(ds_big, effective(m), B, seed=9)
    p = os.path.join(all_dir(m), "x.npy")
    want = oracle.npy_bytes(exp["x"])
    assert os.stat(p).st_size == len(want)
    s0 = stats(m)
    assert stat_counter(s0, "chunks_decoded") == 0 and s0["batches_decoded"] == 0, s0
    off = len(want) // 2 + 5
    # 100 bytes (os.pread: Python's buffered read would ask for st_blksize bytes)
    assert _pread_random(p, off, 100) == want[off:off + 100]
    c1 = stat_counter(stats(m), "chunks_decoded")
    want_chunks = _page_chunks(off, 100, exp["x"], BIG_CHUNK)
    assert want_chunks == {3}
    assert c1 == 1, "reading 100 bytes (rows 1999..2000) decoded %d chunks" % c1
    # y.npy, near its end: its last page holds rows 3568..3999, chunks 6 and 7
    py = os.path.join(all_dir(m), "y.npy")
    wy = oracle.npy_bytes(exp["y"])
    assert _pread_random(py, len(wy) - 50, 50) == wy[-50:]
    c2 = stat_counter(stats(m), "chunks_decoded")
    assert _page_chunks(len(wy) - 50, 50, exp["y"], BIG_CHUNK) == {6, 7}
    assert c2 == 3, c2
    # the whole file: every chunk once (decoded chunks stay while they fit)
    with open(p, "rb") as f:
        assert f.read() == want
    c3 = stat_counter(stats(m), "chunks_decoded")
    assert c3 == -(-BIG_N // BIG_CHUNK), "a whole %d-row epoch in %d-row chunks decoded %d chunks" % (
        BIG_N, BIG_CHUNK, c3)
    with open(py, "rb") as f:
        assert f.read() == wy
    assert stat_counter(stats(m), "chunks_decoded") == c3
    assert stats(m)["batches_decoded"] == 0


# ---------------------------------------------------------------- bad input

BAD_POS = 3500  # epoch-0 position (= all/ row) of the corrupted record
CORRUPT_SEED = 3


@pytest.fixture(scope="module")
def ds_corrupt(gen, work):
    """BIG_N plain records in 2 shards; the record at epoch-0 position BAD_POS
    (seed CORRUPT_SEED) gets a wrong data CRC."""
    src = work / "all-corrupt"
    oracle.generate(gen, src, BIG_N, BIG_FEATURES, shards=2, seed=32)
    decoded = oracle.read_dataset(str(src))
    bad = int(oracle.perm(BIG_N, CORRUPT_SEED, 0)[BAD_POS])
    shards = oracle.list_shards(str(src))
    counts = [len(oracle.scan_records(s)) for s in shards]
    si, local = 0, bad
    while local >= counts[si]:
        local -= counts[si]
        si += 1
    shard = shards[si]
    r, crc_at = corrupt_data_crc(shard, local)
    ds = Dataset(src, decoded, len(shards))
    ds.bad_global, ds.bad_shard, ds.bad_index = bad, shard, local
    ds.bad_offsets = {r["offset"], r["data_offset"], crc_at}
    return ds


def _oserror(fn):
    try:
        fn()
    except OSError as e:
        return e.errno
    return None


def test_corrupt_fail_only_its_range(mounter, ds_corrupt, tmp_path):
    ds, B = ds_corrupt, 32
    m = mounter(ds.path, batch_size=B, seed=CORRUPT_SEED, on_corrupt="fail", prefetch=0,
                chunk_rows=BIG_CHUNK, index_dir=str(tmp_path / "ix"))
    exp, idx = expected_all(ds, effective(m), B, seed=CORRUPT_SEED)
    assert idx[BAD_POS] == ds.bad_global
    px = os.path.join(all_dir(m), "x.npy")
    want = oracle.npy_bytes(exp["x"])
    hdr, row = header_len(exp["x"]), exp["x"][0].nbytes
    # far from the bad row (other chunks): right bytes
    for r0, nrows in [(0, 3), (700, 2), (1500, 1)]:
        off = hdr + r0 * row + 13
        assert _pread_random(px, off, nrows * row) == want[off:off + nrows * row], r0
    # the bad row's range: EIO, every time
    bad_off = hdr + BAD_POS * row
    for off, size in [(bad_off, row), (bad_off + 100, 8), (bad_off - 10, 20)]:
        e = _oserror(lambda: _pread_random(px, off, size))
        assert e == errno.EIO, (off, size, e)
    assert read_errno(px) == errno.EIO
    py = os.path.join(all_dir(m), "y.npy")
    assert read_errno(py) == errno.EIO
    assert read_errno(m.path("epoch-0000", "all.safetensors")) == errno.EIO
    # the safetensors header still reads (it needs no decoding)
    st_want = oracle.safetensors_bytes(exp)
    head = _pread_random(m.path("epoch-0000", "all.safetensors"), 0, 64)
    assert head == st_want[:64]
    # and the batch holding it fails too, the others are fine
    bad_b = BAD_POS // B
    assert read_errno(m.path("epoch-0000", "batch-%06d" % bad_b, "x.npy")) == errno.EIO
    xb = np.load(m.path("epoch-0000", "batch-%06d" % 0, "x.npy"))
    assert np.array_equal(xb, exp["x"][:B])
    # errors.txt names the record
    lines = m.read("errors.txt").decode(errors="replace").splitlines()
    base = os.path.basename(ds.bad_shard)
    hits = [l for l in lines if base in l and re.search(r"\b%d\b" % ds.bad_index, l)]
    assert hits, lines
    assert os.path.ismount(m.mnt)
    # a far range still reads after the failures
    off = hdr + 10 * row
    assert _pread_random(px, off, row) == want[off:off + row]


@pytest.mark.parametrize("bad", [2000, 30], ids=["past-the-header", "in-the-first-page"])
def test_corrupt_fail_exactly_its_batchs_pages(gen, mounter, tmp_path, bad):
    """What a corrupt record fails in all/ (docs/contract.md, README.txt):
    the rows of its batch (32 here; its chunk of 64 used to fail whole) in
    every file of fixed-size rows, and any read that touches a 4 KiB page
    holding a byte of them; every other byte reads. A batch past the
    header's page leaves np.load(mmap_mode='r') working (the kernel's 128
    KiB readahead fails, the page it needs is read alone); one in the
    first page fails np.load, as README.txt says."""
    src = tmp_path / "src"
    oracle.generate(gen, src, 4000, ["x:float:4", "y:int64:1"], shards=1, seed=3)
    decoded = oracle.read_dataset(str(src))
    corrupt_data_crc(oracle.list_shards(str(src))[0], bad)
    m = mounter(str(src), batch_size=32, shuffle="none", chunk_rows=64, prefetch=0,
                on_corrupt="fail", index_dir=str(tmp_path / "ix"))
    readme = m.read("README.txt").decode()
    assert "rows i*B to i*B+B-1 for batch i in every file of fixed-size rows" in readme, readme
    assert "the\n64 rows decoded with it (rows C*64 to C*64+63 for chunk C)" in readme, readme
    assert "A read fails when a 4 KiB page it touches" in readme
    for name, col in (("x", "x"), ("y", "y")):
        px = os.path.join(all_dir(m), name + ".npy")
        arr = np.stack([np.asarray(d["features"][col][1]) for d in decoded])
        arr = arr.astype(np.float32 if col == "x" else np.int64)
        if col == "y":
            arr = arr.reshape(len(decoded))
        want = oracle.npy_bytes(arr)
        hdr, row = header_len(arr), arr[0].nbytes
        r0, r1 = bad // 32 * 32, bad // 32 * 32 + 32  # its batch's rows
        p0, p1 = (hdr + r0 * row) // 4096, (hdr + r1 * row - 1) // 4096  # their pages
        for page in range(len(want) // 4096 + 1):
            off = page * 4096
            n = min(4096, len(want) - off)
            e = _oserror(lambda: _pread_random(px, off, n))
            if p0 <= page <= p1:
                assert e == errno.EIO, (name, page, e)
            else:
                assert e is None and _pread_random(px, off, n) == want[off:off + n], (name, page)
        if p0 > 0:
            a = np.load(px, mmap_mode="r")
            assert a.shape == arr.shape and np.array_equal(a[:10], arr[:10])
        else:
            with pytest.raises(OSError) as ei:
                np.load(px, mmap_mode="r")
            assert ei.value.errno == errno.EIO
    assert os.path.ismount(m.mnt)


@pytest.mark.parametrize("chunk_rows", [None, 7], ids=["default-chunks", "chunks-of-7"])
def test_corrupt_skip_matches_batches(mounter, ds_corrupt, tmp_path, chunk_rows):
    ds, B = ds_corrupt, 32
    m = mounter(ds.path, batch_size=B, seed=CORRUPT_SEED, on_corrupt="skip", chunk_rows=chunk_rows,
                index_dir=str(tmp_path / "ix"))
    schema = effective(m)
    exp, idx = expected_all(ds, schema, B, seed=CORRUPT_SEED)
    adir = all_dir(m)
    nb = oracle.local_batches(ds.n, B)
    # read all/ first (so its substitution is not a copy of a cached batch)
    x = np.load(os.path.join(adir, "x.npy"))
    y = np.load(os.path.join(adir, "y.npy"))
    raw_st = m.read("epoch-0000", "all.safetensors")
    cat = mount_concat(m, schema, ["x", "y"], nb)
    assert oracle.arrays_equal(x, cat["x"]) and oracle.arrays_equal(y, cat["y"])
    assert raw_st == oracle.safetensors_bytes(cat)
    keep = np.ones(ds.n, dtype=bool)
    keep[BAD_POS] = False
    assert np.array_equal(x[keep], exp["x"][keep]) and np.array_equal(y[keep], exp["y"][keep])
    assert not np.array_equal(x[BAD_POS], exp["x"][BAD_POS])
    others = {tuple(d["features"]["x"][1].tolist()) for i, d in enumerate(ds.decoded)
              if i != ds.bad_global}
    assert tuple(x[BAD_POS].tolist()) in others
    lines = m.read("errors.txt").decode(errors="replace").splitlines()
    assert any(os.path.basename(ds.bad_shard) in l for l in lines), lines


# ---------------------------------------------------------------- epochs of several chunks, ragged

# Rows of a few KiB, so that a 3000-record epoch is several all/ chunks and
# the ragged offsets are shifted across chunk boundaries.
FAT_FEATURES = ["rv:int64:0..400", "rb:bytes:0..6,len=0..300", "pv:float:0..50",
                "nm:bytes:1,len=0..20", "lbl:int64:1", "e:int64:0..3,empty=0.3"]
FAT_SCHEMA = {"features": {
    "rv": {"kind": "int64", "shape": [-1], "ragged": True},
    "rb": {"kind": "bytes", "shape": [-1, -1], "ragged": True},
    "pv": {"kind": "float", "shape": [-1], "max_len": 50},
    "nm": {"kind": "bytes", "shape": [-1], "max_len": 20},
    "lbl": {"kind": "int64", "shape": []},
    "e": {"kind": "int64", "shape": [-1], "ragged": True},
}}
FAT_N = 3000


@pytest.fixture(scope="module")
def ds_fat(gen, work):
    return make_dataset(gen, work / "all-fat", FAT_N, FAT_FEATURES, shards=3, seed=41)


@pytest.fixture(scope="module")
def fat_schema_file(work):
    p = work / "fat-schema.json"
    p.write_text(json.dumps(FAT_SCHEMA))
    return str(p)


def _random_ranges(rng, size, k):
    out = [(0, 7), (size - 3, 3)]
    for _ in range(k):
        off = int(rng.integers(0, size))
        out.append((off, int(rng.integers(1, 70000))))
    return out


def test_fat_multichunk_bytes(mounter, ds_fat, fat_schema_file):
    B = 64
    m = mounter(ds_fat.path, batch_size=B, seed=7, schema=fat_schema_file)
    exp = check_all(m, ds_fat, schema=FAT_SCHEMA, B=B, seed=7)
    n = stat_counter(stats(m), "chunks_decoded")
    assert n >= 3, "the fat epoch is only %d chunks: this test covers no chunk boundary" % n
    rng = np.random.default_rng(1)
    adir = all_dir(m)
    for name in ["rv.row_splits", "rv.values", "rb.values", "rb.value_splits", "rb.row_splits",
                 "pv", "e.row_splits", "e.values"]:
        want = oracle.npy_bytes(exp[name])
        fd = os.open(os.path.join(adir, name + ".npy"), os.O_RDONLY)
        try:
            for off, size in _random_ranges(rng, len(want), 12):
                assert os.pread(fd, size, off) == want[off:off + size], (name, off, size)
        finally:
            os.close(fd)
    want = oracle.safetensors_bytes(exp)
    fd = os.open(m.path("epoch-0000", "all.safetensors"), os.O_RDONLY)
    try:
        for off, size in _random_ranges(rng, len(want), 20):
            assert os.pread(fd, size, off) == want[off:off + size], ("all.safetensors", off, size)
    finally:
        os.close(fd)
    # rows through mmapped offsets, slices that straddle chunks
    rs = np.load(os.path.join(adir, "rb.row_splits.npy"), mmap_mode="r")
    vs = np.load(os.path.join(adir, "rb.value_splits.npy"), mmap_mode="r")
    vals = np.load(os.path.join(adir, "rb.values.npy"), mmap_mode="r")
    rvs = np.load(os.path.join(adir, "rv.row_splits.npy"), mmap_mode="r")
    rvv = np.load(os.path.join(adir, "rv.values.npy"), mmap_mode="r")
    idx = oracle.epoch_records(ds_fat.n, B, 7)
    for r in sorted(set(int(x) for x in rng.integers(0, ds_fat.n, 40)) | {0, ds_fat.n - 1}):
        rec = ds_fat.decoded[idx[r]]["features"]
        got = [bytes(vals[vs[v]:vs[v + 1]]) for v in range(rs[r], rs[r + 1])]
        assert got == list(rec.get("rb", ("bytes", []))[1]), r
        assert np.array_equal(np.array(rvv[rvs[r]:rvs[r + 1]]),
                              np.asarray(rec.get("rv", ("int64", []))[1], dtype=np.int64)), r


def test_fat_partial_reads_decode_little(mounter, ds_fat, fat_schema_file):
    B = 64
    m = mounter(ds_fat.path, batch_size=B, seed=7, schema=fat_schema_file, prefetch=0)
    exp, _ = expected_all(ds_fat, FAT_SCHEMA, B, seed=7)
    adir = all_dir(m)
    total = 0
    for name in ["rb.row_splits", "rv.values", "rb.value_splits", "e.row_splits"]:
        want = oracle.npy_bytes(exp[name])
        off = len(want) // 2 + 3
        assert _pread_random(os.path.join(adir, name + ".npy"), off, 100) == want[off:off + 100], name
        c = stat_counter(stats(m), "chunks_decoded")
        assert c - total <= 2, "100 bytes of %s decoded %d chunks" % (name, c - total)
        total = c
    assert 1 <= total <= 8
    assert stats(m)["batches_decoded"] == 0


def test_fat_rank_world_drop(mounter, ds_fat, fat_schema_file):
    B, W = 64, 2
    single = mounter(ds_fat.path, batch_size=B, seed=3, schema=fat_schema_file, drop_remainder=True)
    one = check_all(single, ds_fat, schema=FAT_SCHEMA, B=B, seed=3, drop=True, concat=False)
    per_rank = oracle.local_batches(ds_fat.n, B, True, W)
    rows = []
    for r in range(W):
        m = mounter(ds_fat.path, batch_size=B, seed=3, schema=fat_schema_file, drop_remainder=True,
                    rank=r, world=W)
        exp = check_all(m, ds_fat, schema=FAT_SCHEMA, B=B, seed=3, drop=True, rank=r, world=W)
        assert exp["lbl"].shape == (per_rank * B,)
        rows.append(np.load(os.path.join(all_dir(m), "lbl.npy")))
    inter = np.empty(per_rank * W * B, dtype=np.int64)
    for r in range(W):
        for i in range(per_rank):
            g = i * W + r
            inter[g * B:(g + 1) * B] = rows[r][i * B:(i + 1) * B]
    assert np.array_equal(inter, one["lbl"][:per_rank * W * B])


def test_fat_tiny_cache(mounter, ds_fat, fat_schema_file):
    B = 64
    m = mounter(ds_fat.path, batch_size=B, seed=7, schema=fat_schema_file, cache_size="64K", prefetch=2)
    exp, _ = expected_all(ds_fat, FAT_SCHEMA, B, seed=7)
    assert m.read("epoch-0000", "all.safetensors") == oracle.safetensors_bytes(exp)
    for name in ["rb.values", "rv.row_splits", "pv"]:
        assert m.read("epoch-0000", "all", name + ".npy") == oracle.npy_bytes(exp[name]), name
    assert os.path.ismount(m.mnt)


@pytest.mark.parametrize("opts", [{}, {"chunk_rows": 3, "cache_size": "64K", "threads": 2}],
                         ids=["default", "chunks-of-3-cache-64K"])
def test_fat_concurrent_readers(mounter, ds_fat, fat_schema_file, opts):
    from concurrent.futures import ThreadPoolExecutor
    B = 64
    m = mounter(ds_fat.path, batch_size=B, seed=11, schema=fat_schema_file, **opts)
    exp, _ = expected_all(ds_fat, FAT_SCHEMA, B, seed=11)
    adir = all_dir(m)
    names = ["rv.values", "rv.row_splits", "rb.values", "rb.value_splits", "pv", "lbl"]
    wants = {nm: oracle.npy_bytes(exp[nm]) for nm in names}

    def reader(k):
        rng = np.random.default_rng(100 + k)
        bad = []
        for _ in range(40):
            nm = names[int(rng.integers(0, len(names)))]
            want = wants[nm]
            off = int(rng.integers(0, len(want)))
            size = int(rng.integers(1, 200000))
            fd = os.open(os.path.join(adir, nm + ".npy"), os.O_RDONLY)
            try:
                if os.pread(fd, size, off) != want[off:off + size]:
                    bad.append((nm, off, size))
            finally:
                os.close(fd)
        return bad

    with ThreadPoolExecutor(6) as ex:
        bad = sum(ex.map(reader, range(6)), [])
    assert not bad, bad[:5]


# ---------------------------------------------------------------- feature lists over several chunks


@pytest.fixture(scope="module")
def ds_seq_fat(gen, work):
    return make_dataset(gen, work / "all-seq-fat", 1500,
                        ["c:int64:1", "@frames:float:1..150:8", "@words:bytes:0..6:0..2,len=1..5"],
                        shards=2, seed=43, seq=True)


def test_seq_multichunk(mounter, ds_seq_fat):
    B = 50
    m = mounter(ds_seq_fat.path, batch_size=B, seed=4)
    exp = check_all(m, ds_seq_fat, B=B, seed=4)
    assert stat_counter(stats(m), "chunks_decoded") >= 2
    fr = np.load(os.path.join(all_dir(m), "feature_lists", "frames.npy"), mmap_mode="r")
    for a, b in [(0, 3), (700, 760), (1490, 1500)]:
        assert np.array_equal(np.array(fr[a:b]), exp["feature_lists/frames"][a:b])


# ---------------------------------------------------------------- an epoch with no rows


def test_empty_epoch(mounter, gen, tmp_path, index_dir):
    src = tmp_path / "tiny"
    ds = make_dataset(gen, src, 10, ["x:float:4", "t:int64:0..5", "w:bytes:0..3,len=1..4"], seed=44)
    sf = tmp_path / "s.json"
    schema = {"features": {"x": {"kind": "float", "shape": [4]},
                           "t": {"kind": "int64", "shape": [-1], "ragged": True},
                           "w": {"kind": "bytes", "shape": [-1, -1], "ragged": True}}}
    sf.write_text(json.dumps(schema))
    m = mounter(str(src), batch_size=32, drop_remainder=True, schema=str(sf))
    exp = check_all(m, ds, schema=schema, B=32, drop=True)
    assert exp["x"].shape == (0, 4) and exp["t.row_splits"].tolist() == [0]
    assert np.load(os.path.join(all_dir(m), "x.npy")).shape == (0, 4)
    assert np.load(os.path.join(all_dir(m), "w.row_splits.npy")).tolist() == [0]
    # more ranks than batches: every rank shows none
    m2 = mounter(str(src), batch_size=4, rank=3, world=4, schema=str(sf))
    check_all(m2, ds, schema=schema, B=4, rank=3, world=4)
    # one short batch (B > N), and a one-record dataset
    m3 = mounter(str(src), batch_size=32, seed=3, schema=str(sf))
    assert check_all(m3, ds, schema=schema, B=32, seed=3)["x"].shape == (10, 4)
    one = tmp_path / "one"
    ds1 = make_dataset(gen, one, 1, ["x:float:4", "t:int64:0..5", "w:bytes:0..3,len=1..4"], seed=45)
    m4 = mounter(str(one), batch_size=3, schema=str(sf))
    assert check_all(m4, ds1, schema=schema, B=3)["t.row_splits"].shape == (2,)


# ---------------------------------------------------------------- README snippet runs


def _snippet(text, marker):
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if marker in l)
    out = []
    for l in lines[start + 1:]:
        if not l.startswith("  "):
            break
        out.append(l[2:])
    return "\n".join(out)


def test_readme_dataloader_snippet_runs(mounter, ds_plain, tmp_path):
    pytest.importorskip("torch")
    m = mounter(ds_plain.path, batch_size=32, seed=2)
    text = m.read("README.txt").decode()
    lines = [l for l in text.splitlines() if "DataLoader" in l and "all/" in l]
    assert lines, "README.txt shows no DataLoader over all/"
    code = _snippet(text, lines[0])
    found = re.findall(r"/epoch-0000/all/([^']+)\.npy'", code)
    assert found, code
    name = found[0]
    script = tmp_path / "snippet.py"
    out = tmp_path / "out.npy"
    script.write_text(code + "\nimport sys\nnp.save(sys.argv[1], torch.cat([t for t in dl]).numpy())\n")
    r = subprocess.run(["/usr/bin/python3", str(script), str(out)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    exp, _ = expected_all(ds_plain, effective(m), 32, seed=2)
    assert oracle.arrays_equal(np.load(str(out)), exp[name]), name


def test_fat_gzip_all_only(mounter, gen, work, fat_schema_file):
    """The fat epoch from gzip shards: all/ only (a chunk reads its records in
    file order; the batches' random access into gzip is slow, and the batch
    path is covered by test_mount.py)."""
    ds = make_dataset(gen, work / "all-fat-gz", FAT_N, FAT_FEATURES, shards=3, seed=41,
                      compression="gzip")
    m = mounter(ds.path, batch_size=64, seed=7, schema=fat_schema_file)
    check_all(m, ds, schema=FAT_SCHEMA, B=64, seed=7, concat=False)
    assert stat_counter(stats(m), "chunks_decoded") >= 3


def test_sequential_reader_prefetches_chunks(mounter, ds_big):
    import time
    B = 32
    m = mounter(ds_big.path, batch_size=B, seed=9, prefetch=2, chunk_rows=BIG_CHUNK)
    exp, _ = expected_all(ds_big, effective(m), B, seed=9)
    want = oracle.npy_bytes(exp["x"])
    with open(os.path.join(all_dir(m), "x.npy"), "rb", buffering=0) as f:
        assert f.read(4096) == want[:4096]
    end = time.monotonic() + 20
    while stat_counter(stats(m), "chunks_decoded") < 3 and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.3)
    c = stat_counter(stats(m), "chunks_decoded")
    assert 3 <= c <= 4, "after reading the first page with prefetch=2: %d chunks decoded" % c


def test_corrupt_fail_with_prefetch_sequential(mounter, ds_corrupt, tmp_path):
    """A sequential reader in 64 KiB reads, prefetch on: only a contiguous
    run of reads around the bad row fails; every other read is right."""
    ds, B = ds_corrupt, 32
    m = mounter(ds.path, batch_size=B, seed=CORRUPT_SEED, on_corrupt="fail",
                index_dir=str(tmp_path / "ix"))
    exp, _ = expected_all(ds, effective(m), B, seed=CORRUPT_SEED)
    want = oracle.npy_bytes(exp["x"])
    hdr, row = header_len(exp["x"]), exp["x"][0].nbytes
    bad_lo = hdr + BAD_POS * row
    step = 65536
    failed = []
    fd = os.open(os.path.join(all_dir(m), "x.npy"), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for off in range(0, len(want), step):
            try:
                data = os.pread(fd, step, off)
            except OSError as e:
                assert e.errno == errno.EIO, (off, e)
                failed.append(off)
                continue
            n = min(step, len(want) - off)
            if len(data) < n:
                # a short read (the pages before a failing one); the rest fails
                assert data == want[off:off + len(data)], off
                with pytest.raises(OSError) as ei:
                    os.pread(fd, n - len(data), off + len(data))
                assert ei.value.errno == errno.EIO, (off, len(data))
                failed.append(off)
                continue
            assert data == want[off:off + step], off
    finally:
        os.close(fd)
    bad_piece = bad_lo // step * step
    assert bad_piece in failed, (bad_piece, failed[:3])
    assert failed == list(range(failed[0], failed[-1] + step, step)), "failures not contiguous"
    assert len(failed) * step < len(want) // 2, "%d of %d bytes fail" % (len(failed) * step, len(want))
    assert os.path.ismount(m.mnt)


def test_all_features_filter(mounter, ds_plain, ds_seq):
    m = mounter(ds_plain.path, batch_size=32, seed=1, features="x,tags,m/sub")
    check_all(m, ds_plain, B=32, seed=1)
    assert walk_files(all_dir(m)) == sorted(["x.npy", "tags.values.npy", "tags.value_splits.npy",
                                             "tags.row_splits.npy", "m/sub.npy"])
    m2 = mounter(ds_seq.path, batch_size=16, features="c,feature_lists/frames")
    check_all(m2, ds_seq, B=16)
    assert walk_files(all_dir(m2)) == sorted(["c.npy", "feature_lists/frames.npy",
                                              "feature_lists/frames.lengths.npy"])


def test_many_epochs_interleaved(mounter, ds_plain):
    """More epochs than the daemon keeps views of, read in an interleaved order
    (each epoch's all/ has its own order and ragged offsets)."""
    B = 32
    m = mounter(ds_plain.path, batch_size=B, seed=13, epochs=3)
    schema = effective(m)
    exps, visits = {}, {}
    order = list(range(12)) + [0, 11, 5, 123, 0]
    # a revisit reads files not read before (so not from the page cache)
    names = [["y", "tags.row_splits"], ["tags.value_splits", "tokens"], ["x", "tags.values"]]
    for e in order:
        if e not in exps:
            exps[e], _ = expected_all(ds_plain, schema, B, seed=13, epoch=e)
        visits[e] = visits.get(e, -1) + 1
        for name in names[visits[e]]:
            got = m.read("epoch-%04d" % e, "all", name + ".npy")
            assert got == oracle.npy_bytes(exps[e][name]), (e, name)
    assert len({exps[e]["y"].tobytes() for e in exps}) == len(exps)


def test_mmap_slice_decodes_little(mounter, ds_big):
    """np.load(mmap_mode='r')[a:b] in the middle of an 8-chunk epoch decodes
    a few chunks (the header read and the kernel's read-around of the
    mapping each cover about 1 MiB), not the epoch."""
    B = 32
    m = mounter(ds_big.path, batch_size=B, seed=9, prefetch=0, chunk_rows=BIG_CHUNK)
    exp, _ = expected_all(ds_big, effective(m), B, seed=9)
    import time
    a = np.load(os.path.join(all_dir(m), "x.npy"), mmap_mode="r")
    assert np.array_equal(np.array(a[2000:2003]), exp["x"][2000:2003])
    time.sleep(0.3)  # the kernel's asynchronous readahead, if any, lands
    c = stat_counter(stats(m), "chunks_decoded")
    # 8 chunks in the epoch: the header's 1-2 (rows 0..~500), the slice's 1-2
    assert 1 <= c <= 4, "np.load(mmap_mode='r')[2000:2003] decoded %d chunks" % c
    del a


# ---------------------------------------------------------------- chunk_rows: boundaries everywhere

SMALL_CHUNKS = [
    # (dataset fixture, B, chunk_rows, extra options)
    ("ds_plain", 32, 7, {}),
    ("ds_plain", 32, 1, {"seed": 2}),
    ("ds_plain", 10, 13, {"rank": 2, "world": 3, "drop_remainder": True, "seed": 5}),
    ("ds_gzip", 17, 5, {"seed": 99}),
    ("ds_user", 22, 9, {"seed": 8, "schema": "USER"}),
    ("ds_seq", 16, 3, {"seed": 2}),
    ("ds_plain", 32, 64, {"epochs": 2, "shuffle": "none"}),
]


@pytest.mark.parametrize("fx,B,rows,extra", SMALL_CHUNKS,
                         ids=["%s-B%d-c%d" % c[:3] for c in SMALL_CHUNKS])
def test_small_chunks(mounter, request, tmp_path, fx, B, rows, extra):
    ds = request.getfixturevalue(fx)
    extra = dict(extra)
    schema = None
    if extra.get("schema") == "USER":
        sf = tmp_path / "schema.json"
        sf.write_text(json.dumps(USER_SCHEMA))
        extra["schema"], schema = str(sf), USER_SCHEMA
    m = mounter(ds.path, batch_size=B, chunk_rows=rows, **extra)
    kw = dict(seed=extra.get("seed", 0), shuffle=extra.get("shuffle", "global"),
              drop=extra.get("drop_remainder", False), rank=extra.get("rank", 0),
              world=extra.get("world", 1))
    exp = check_all(m, ds, schema=schema, B=B, **kw)
    R = len(oracle.epoch_records(ds.n, B, kw["seed"], 0, kw["shuffle"], kw["drop"], kw["rank"], kw["world"]))
    assert stat_counter(stats(m), "chunks_decoded") >= -(-R // rows)
    # pieces of odd sizes across the chunk boundaries of every file
    rng = np.random.default_rng(rows)
    for name in sorted(exp):
        want = oracle.npy_bytes(exp[name])
        fd = os.open(os.path.join(all_dir(m), name + ".npy"), os.O_RDONLY)
        try:
            for _ in range(6):
                off = int(rng.integers(0, len(want)))
                size = int(rng.integers(1, 3000))
                assert os.pread(fd, size, off) == want[off:off + size], (name, off, size)
        finally:
            os.close(fd)
    if extra.get("epochs") == 2:
        check_all(m, ds, schema=schema, B=B, epoch=1, **kw)


def test_chunk_rows_option_is_checked(batchfs, ds_plain, tmp_path, index_dir):
    for i, bad in enumerate(["chunk_rows=0", "chunk_rows=abc", "chunk_rows=-3"]):
        expect_mount_failure(batchfs, ds_plain.path, tmp_path / ("mnt%d" % i),
                             bad + ",index_dir=" + index_dir, "chunk_rows")


# ---------------------------------------------------------------- columns one after another

# A big column and small ones, an epoch of 20 chunks of which the cache
# holds a few: all.safetensors lays each column out for the whole epoch, so
# read start to end it asks for every chunk once per column. The small
# columns' bytes are kept from the big column's pass (fs/stash.h), so the
# epoch's records are fetched and decoded once, not once per column.
COLS_FEATURES = ["a_big:float:1000", "b_lbl:int64:1", "c_rv:int64:0..3"]
COLS_SCHEMA = {"features": {
    "a_big": {"kind": "float", "shape": [1000]},
    "b_lbl": {"kind": "int64", "shape": []},
    "c_rv": {"kind": "int64", "shape": [-1], "ragged": True},
}}
COLS_N = 2000


@pytest.fixture(scope="module")
def ds_cols(gen, work):
    ds = make_dataset(gen, work / "all-cols", COLS_N, COLS_FEATURES, shards=2, seed=5)
    p = work / "cols-schema.json"
    p.write_text(json.dumps(COLS_SCHEMA))
    ds.schema_file = str(p)
    return ds


@pytest.mark.parametrize("how", ["safetensors", "npy"])
def test_columns_one_after_another_decode_the_epoch_once(mounter, ds_cols, how):
    B = 32
    m = mounter(ds_cols.path, batch_size=B, seed=3, chunk_rows=100, cache_size="4M",
                io_depth=3, readahead="1M", schema=ds_cols.schema_file, epochs=1)
    exp, _ = expected_all(ds_cols, COLS_SCHEMA, B, seed=3)
    assert exp["a_big"].nbytes > 4 * 2**20, "the big column must not fit the cache"
    if how == "safetensors":
        assert m.read("epoch-0000", "all.safetensors") == oracle.safetensors_bytes(exp)
    else:
        for name in sorted(exp):  # the big column first, as a reader going through all/
            assert m.read("epoch-0000", "all", name + ".npy") == oracle.npy_bytes(exp[name]), name
    st = stats(m)
    dec, io = stat_counter(st, "records_decoded"), stat_counter(st, "io_bytes")
    src = sum(os.path.getsize(os.path.join(ds_cols.path, f)) for f in os.listdir(ds_cols.path))
    assert dec <= 1.1 * COLS_N, "%d records decoded for an epoch of %d" % (dec, COLS_N)
    # one pass; a column's pass of its own would be 2x (4x before: 4 columns)
    assert io <= 1.25 * src, "%d bytes fetched for a source of %d" % (io, src)
    # and again, now that the small columns are kept: the same bytes
    for name in sorted(exp):
        if name != "a_big":
            assert m.read("epoch-0000", "all", name + ".npy") == oracle.npy_bytes(exp[name]), name
