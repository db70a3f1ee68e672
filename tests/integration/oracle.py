# SPDX-License-Identifier: Apache-2.0
"""oracle — an independent reference for batchfs, written from the contract
(docs/contract.md, docs/shuffle.md) only: it shares no code with the C decoder.

    list_shards(source)             the shards of SOURCE, in mount order
    read_records(path)              record payloads of one shard (CRC-checked)
    scan_records(path)              framing facts per record, CRC results
    detect_compression(raw)         'none' | 'gzip' | 'zlib'
    decode(record_bytes)            the record as a dict (official protobuf runtime)
    perm(n, seed, epoch)            docs/shuffle.md's permutation, all positions
    perm_at(p, n, seed, epoch)      the same, one position, plain Python ints
    batches_per_epoch(...), batch_positions(...), batch_records(...)
    dataset_lengths(source)         (record data lengths, records per shard)
    block_cut(lens, shard_nrec, block_size)   the blocks of shuffle=block
    block_perm(lens, shard_nrec, block_size, window, seed, epoch)
                                    shuffle=block's order of a whole epoch
    block_parts(...), partitioned_perm(..., batch_size, nparts)
                                    shuffle=block's partitions and their order
    infer_schema(decoded)           the inference rules of docs/contract.md
    expected_batch(decoded, schema, indices)   tensor name -> numpy array
    npy_bytes(arr)                  np.save's bytes (numpy is the reference)
    safetensors_bytes(tensors)      the contract's safetensors layout
    parse_safetensors(raw)          name -> numpy array (own parser)

Use /usr/bin/python3 (Debian's numpy and protobuf).
"""

import glob as _glob
import io
import json
import os
import stat
import struct
import zlib

import numpy as np

# ---------------------------------------------------------------- shards


def list_shards(source):
    """Shards of SOURCE in mount order: a directory's regular, non-hidden
    files sorted by name (byte order, like strcmp); a single file; or a glob
    pattern (matches sorted)."""
    source = os.fspath(source)
    if os.path.isdir(source):
        names = sorted(os.listdir(source), key=os.fsencode)
        out = []
        for n in names:
            if n.startswith("."):
                continue
            p = os.path.join(source, n)
            try:
                st = os.stat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append(p)
        return out
    if os.path.exists(source):
        return [source]
    matches = [p for p in _glob.glob(source) if os.path.isfile(p)]
    if matches:
        return sorted(matches, key=os.fsencode)
    raise FileNotFoundError(source)


# ---------------------------------------------------------------- CRC32C

_POLY = 0x82F63B78


def _make_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE = _make_table()
_NP_TABLE = np.array(_TABLE, dtype=np.uint32)


def crc32c_py(data, crc=0):
    """Plain byte-at-a-time CRC32C (the reference for the vectorised one)."""
    c = crc ^ 0xFFFFFFFF
    t = _TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def mask_crc(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _raw_steps_inverse(s, nbits):
    # inverse of nbits zero-bit steps of the reflected register
    for _ in range(nbits):
        if s & 0x80000000:
            s = (((s ^ _POLY) << 1) | 1) & 0xFFFFFFFF
        else:
            s = (s << 1) & 0xFFFFFFFF
    return s


# Four bytes X with raw_crc(state=0, X) == 0xFFFFFFFF: prefixing X to a message
# turns "init 0xFFFFFFFF" into "init 0", and with init 0 leading zero bytes do
# not change the register, so messages of any length can be right-aligned in
# one zero-padded matrix and processed column by column.
_PREFIX = struct.pack("<I", _raw_steps_inverse(0xFFFFFFFF, 32))


def _zero_bytes_operator(nbytes):
    """Tables T[4][256] so that the register after nbytes zero bytes from state
    s is T0[s&255]^T1[s>>8&255]^T2[s>>16&255]^T3[s>>24] (it is linear)."""
    basis = np.arange(256, dtype=np.uint32)
    tabs = []
    for k in range(4):
        s = basis << np.uint32(8 * k)
        for _ in range(nbytes):
            s = _NP_TABLE[s & np.uint32(0xFF)] ^ (s >> np.uint32(8))
        tabs.append(s)
    return tabs


_BLOCK = 256
_SHIFT_TABS = _zero_bytes_operator(_BLOCK)


def crc32c_many(messages):
    """CRC32C of each bytes object in `messages`, vectorised with numpy:
    every message (prefixed with _PREFIX, left-padded with zeros) is cut into
    256-byte blocks, all blocks are run through the table at once, and the
    per-block registers are folded per message."""
    n = len(messages)
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    W = _BLOCK
    nblk = np.empty(n, dtype=np.int64)
    parts = []
    for i, m in enumerate(messages):
        total = len(m) + 4
        nb = (total + W - 1) // W
        nblk[i] = nb
        parts.append(b"\0" * (nb * W - total))
        parts.append(_PREFIX)
        parts.append(bytes(m))
    mat = np.frombuffer(b"".join(parts), dtype=np.uint8).reshape(-1, W)
    # registers of every block, from state 0, chunked to bound memory
    blk = np.empty(mat.shape[0], dtype=np.uint32)
    step = max(1, (1 << 22) // W)
    for a in range(0, mat.shape[0], step):
        cols = np.ascontiguousarray(mat[a:a + step].T)
        s = np.zeros(cols.shape[1], dtype=np.uint32)
        for col in cols:
            s = _NP_TABLE[(s ^ col) & np.uint32(0xFF)] ^ (s >> np.uint32(8))
        blk[a:a + step] = s
    # fold: reg = shift(reg) ^ block, over the blocks of each message
    starts = np.concatenate(([0], np.cumsum(nblk)[:-1]))
    out = np.zeros(n, dtype=np.uint32)
    order = np.argsort(nblk, kind="stable")
    T0, T1, T2, T3 = _SHIFT_TABS
    i = 0
    while i < n:
        # a chunk of messages with similar block counts (sorted ascending)
        j = i + 1
        while j < n and (j - i + 1) * int(nblk[order[j]]) <= (1 << 22):
            j += 1
        idx = order[i:j]
        mmax = int(nblk[idx].max())
        rows = len(idx)
        C = np.zeros((rows, mmax), dtype=np.uint32)
        cnt = nblk[idx]
        r_ix = np.repeat(np.arange(rows), cnt)
        within = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        c_ix = np.repeat(mmax - cnt, cnt) + within
        src = np.repeat(starts[idx], cnt) + within
        C[r_ix, c_ix] = blk[src]
        reg = np.zeros(rows, dtype=np.uint32)
        for col in range(mmax):
            reg = (T0[reg & np.uint32(0xFF)] ^ T1[(reg >> np.uint32(8)) & np.uint32(0xFF)]
                   ^ T2[(reg >> np.uint32(16)) & np.uint32(0xFF)] ^ T3[reg >> np.uint32(24)]
                   ^ C[:, col])
        out[idx] = reg
        i = j
    return out ^ np.uint32(0xFFFFFFFF)


def crc32c(data):
    return int(crc32c_many([data])[0])


# ---------------------------------------------------------------- framing


class CorruptRecord(Exception):
    """A framing or CRC error: .path, .index (record in the shard), .offset
    (byte offset of the record's length field in the decompressed stream)."""

    def __init__(self, path, index, offset, what):
        super().__init__("%s: record %d at offset %d: %s" % (path, index, offset, what))
        self.path, self.index, self.offset, self.what = path, index, offset, what


def _plain_header_ok(raw):
    if len(raw) == 0:
        return True
    if len(raw) < 12:
        return False
    return mask_crc(crc32c(raw[:8])) == struct.unpack_from("<I", raw, 8)[0]


def detect_compression(raw):
    """'none', 'gzip' or 'zlib' from the bytes: a valid first TFRecord header
    wins; then the gzip magic; then a zlib header (CM=8, FCHECK)."""
    if _plain_header_ok(raw):
        return "none"
    if raw[:2] == b"\x1f\x8b":
        return "gzip"
    if len(raw) >= 2 and (raw[0] & 0x0F) == 8 and (raw[0] >> 4) <= 7 \
            and ((raw[0] << 8) | raw[1]) % 31 == 0:
        return "zlib"
    return "none"


def decompress(raw, compression):
    if compression == "none":
        return raw
    if compression == "zlib":
        return zlib.decompress(raw)
    out = []
    while raw:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out.append(d.decompress(raw))
        out.append(d.flush())
        if not d.eof:
            raise ValueError("truncated gzip stream")
        raw = d.unused_data
    return b"".join(out)


def read_stream(path):
    """(compression, decompressed bytes) of one shard."""
    with open(path, "rb") as f:
        raw = f.read()
    comp = detect_compression(raw)
    return comp, decompress(raw, comp)


def scan_records(path, data=None):
    """Framing of every record: a list of dicts with offset (of the length
    field, in the decompressed stream), length, data_offset, len_ok, data_ok.
    Raises CorruptRecord for a truncated stream (nothing sensible follows)."""
    if data is None:
        _, data = read_stream(path)
    recs = []
    pos, n = 0, len(data)
    while pos < n:
        if n - pos < 12:
            raise CorruptRecord(path, len(recs), pos, "truncated header")
        (length,) = struct.unpack_from("<Q", data, pos)
        if length > n - pos - 16:
            raise CorruptRecord(path, len(recs), pos, "truncated record (length %d)" % length)
        recs.append({"offset": pos, "length": length, "data_offset": pos + 12})
        pos += 16 + length
    heads = [data[r["offset"]:r["offset"] + 8] for r in recs]
    bodies = [data[r["data_offset"]:r["data_offset"] + r["length"]] for r in recs]
    hc = crc32c_many(heads)
    bc = crc32c_many(bodies)
    for i, r in enumerate(recs):
        want_h = struct.unpack_from("<I", data, r["offset"] + 8)[0]
        want_b = struct.unpack_from("<I", data, r["data_offset"] + r["length"])[0]
        r["len_ok"] = mask_crc(int(hc[i])) == want_h
        r["data_ok"] = mask_crc(int(bc[i])) == want_b
        r["data"] = bodies[i]
    return recs


def read_records(path, verify=True):
    """Payloads of every record of a shard (plain, gzip or zlib, detected from
    the bytes). With verify, a bad CRC raises CorruptRecord."""
    _, data = read_stream(path)
    recs = scan_records(path, data)
    out = []
    for i, r in enumerate(recs):
        if verify and not r["len_ok"]:
            raise CorruptRecord(path, i, r["offset"], "length CRC mismatch")
        if verify and not r["data_ok"]:
            raise CorruptRecord(path, i, r["offset"], "data CRC mismatch")
        out.append(r["data"])
    return out


def read_dataset(source, verify=True):
    """All records of SOURCE in global order, decoded."""
    out = []
    for p in list_shards(source):
        out.extend(decode(r) for r in read_records(p, verify))
    return out


# ---------------------------------------------------------------- protobuf

_MSG = {}


def _build_classes():
    from google.protobuf import descriptor_pb2, descriptor_pool

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.name = "batchfs_oracle/tf_example.proto"
    fdp.package = "tensorflow"
    fdp.syntax = "proto3"

    def message(name):
        m = fdp.message_type.add()
        m.name = name
        return m

    def field(m, name, number, ftype, label=F.LABEL_OPTIONAL, type_name=None,
              packed=None, oneof=None):
        f = m.field.add()
        f.name, f.number, f.type, f.label = name, number, ftype, label
        if type_name:
            f.type_name = type_name
        if packed is not None:
            f.options.packed = packed
        if oneof is not None:
            f.oneof_index = oneof
        return f

    def map_field(m, name, value_type):
        entry = m.nested_type.add()
        entry.name = "".join(p.capitalize() for p in name.split("_")) + "Entry"
        entry.options.map_entry = True
        field(entry, "key", 1, F.TYPE_STRING)
        field(entry, "value", 2, F.TYPE_MESSAGE, type_name=value_type)
        field(m, name, 1, F.TYPE_MESSAGE, F.LABEL_REPEATED,
              type_name=".tensorflow.%s.%s" % (m.name, entry.name))

    m = message("BytesList")
    field(m, "value", 1, F.TYPE_BYTES, F.LABEL_REPEATED)
    m = message("FloatList")
    field(m, "value", 1, F.TYPE_FLOAT, F.LABEL_REPEATED, packed=True)
    m = message("Int64List")
    field(m, "value", 1, F.TYPE_INT64, F.LABEL_REPEATED, packed=True)
    m = message("Feature")
    m.oneof_decl.add().name = "kind"
    field(m, "bytes_list", 1, F.TYPE_MESSAGE, type_name=".tensorflow.BytesList", oneof=0)
    field(m, "float_list", 2, F.TYPE_MESSAGE, type_name=".tensorflow.FloatList", oneof=0)
    field(m, "int64_list", 3, F.TYPE_MESSAGE, type_name=".tensorflow.Int64List", oneof=0)
    m = message("Features")
    map_field(m, "feature", ".tensorflow.Feature")
    m = message("FeatureList")
    field(m, "feature", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, type_name=".tensorflow.Feature")
    m = message("FeatureLists")
    map_field(m, "feature_list", ".tensorflow.FeatureList")
    m = message("Example")
    field(m, "features", 1, F.TYPE_MESSAGE, type_name=".tensorflow.Features")
    m = message("SequenceExample")
    field(m, "context", 1, F.TYPE_MESSAGE, type_name=".tensorflow.Features")
    field(m, "feature_lists", 2, F.TYPE_MESSAGE, type_name=".tensorflow.FeatureLists")

    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:  # protobuf < 4.22
        from google.protobuf import message_factory
        factory = message_factory.MessageFactory(pool)

        def GetMessageClass(desc):
            return factory.GetPrototype(desc)
    for name in ("Example", "SequenceExample", "Feature", "Features", "FeatureList",
                 "FeatureLists", "BytesList", "FloatList", "Int64List"):
        _MSG[name] = GetMessageClass(pool.FindMessageTypeByName("tensorflow." + name))


def message_class(name):
    """The runtime-built protobuf class tensorflow.NAME."""
    if not _MSG:
        _build_classes()
    return _MSG[name]


def _feature(f):
    k = f.WhichOneof("kind")
    if k == "int64_list":
        return ("int64", np.array(f.int64_list.value, dtype=np.int64))
    if k == "float_list":
        return ("float", np.array(f.float_list.value, dtype=np.float32))
    if k == "bytes_list":
        return ("bytes", [bytes(v) for v in f.bytes_list.value])
    return ("none", [])


def decode(record):
    """A record parsed as tf.train.SequenceExample (an Example has the same
    wire shape: features = context = field 1):
        {"features": {name: (kind, values)},
         "feature_lists": {name: [(kind, values), ...]} or None}
    kind is 'int64' (np.int64 array), 'float' (np.float32 array), 'bytes'
    (list of bytes) or 'none' (Feature {} with no kind; values []).
    feature_lists is None when the record has no field 2."""
    msg = message_class("SequenceExample")()
    msg.ParseFromString(bytes(record))
    feats = {k: _feature(v) for k, v in msg.context.feature.items()}
    lists = None
    if msg.HasField("feature_lists"):
        lists = {k: [_feature(s) for s in v.feature]
                 for k, v in msg.feature_lists.feature_list.items()}
    return {"features": feats, "feature_lists": lists}


# ---------------------------------------------------------------- shuffle

_M64 = (1 << 64) - 1
_G = 0x9E3779B97F4A7C15


def _mix(z):
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _perm_params(n, seed, epoch):
    base = _mix(seed + _G * (epoch + 1))
    keys = [_mix(base + _G * (r + 1)) for r in range(6)]
    k = max(2, (n - 1).bit_length())
    if k % 2:
        k += 1
    h = k // 2
    return keys, h, (1 << h) - 1


def perm_at(p, n, seed, epoch):
    """docs/shuffle.md's P(p), with Python integers (the slow reference)."""
    if n <= 1:
        return p
    keys, h, mask = _perm_params(n, seed, epoch)

    def E(x):
        L, R = x >> h, x & mask
        for r in range(6):
            L, R = R, L ^ (_mix(R ^ keys[r]) & mask)
        return (L << h) | R

    y = E(p)
    while y >= n:
        y = E(y)
    return y


def _mix_np(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def perm(n, seed, epoch, positions=None):
    """P(p) for every p in 0..n-1 (or for the given positions) as an int64
    numpy array, vectorised."""
    if positions is None:
        positions = np.arange(n, dtype=np.uint64)
    else:
        positions = np.asarray(positions, dtype=np.uint64)
    if n <= 1:
        return positions.astype(np.int64)
    keys, h, mask = _perm_params(n, seed, epoch)
    keys = [np.uint64(k) for k in keys]
    hh, mm = np.uint64(h), np.uint64(mask)

    def E(x):
        L, R = x >> hh, x & mm
        for r in range(6):
            L, R = R, L ^ (_mix_np(R ^ keys[r]) & mm)
        return (L << hh) | R

    with np.errstate(over="ignore"):
        y = E(positions)
        bad = y >= np.uint64(n)
        while bad.any():
            y[bad] = E(y[bad])
            bad = y >= np.uint64(n)
    return y.astype(np.int64)


# ------------------------------------------------------- shuffle=block

def dataset_lengths(source):
    """(data length of every record in global order, records per shard)."""
    lens, per = [], []
    for p in list_shards(source):
        recs = scan_records(p)
        lens.extend(r["length"] for r in recs)
        per.append(len(recs))
    return lens, per


def block_cut(lens, shard_nrec, block_size):
    """docs/shuffle.md's cut: a block takes the records that fit in block_size bytes
    (data length + 16 each), at least one, and a shard's first record always
    starts a block. Returns the first record of every block."""
    starts, r = [], 0
    for cnt in shard_nrec:
        used = None  # bytes in the open block; None: the shard opens one
        for _ in range(cnt):
            size = lens[r] + 16
            if used is None or used + size > block_size:
                starts.append(r)
                used = 0
            used += size
            r += 1
    return starts


_BLOCKS_TAG = 0x626C6F636B73


def block_perm(lens, shard_nrec, block_size, window, seed, epoch):
    """The record at every position of an epoch under shuffle=block, as the
    docs/shuffle.md defines it, with the whole epoch materialised (no search)."""
    n = len(lens)
    starts = block_cut(lens, shard_nrec, block_size)
    nb = len(starts)
    ends = starts[1:] + [n]
    sb = _mix(seed ^ _BLOCKS_TAG)
    seq = [int(x) for x in perm(nb, sb, epoch)]  # block at each sequence position
    out = []
    for g in range(0, (nb + window - 1) // window):
        group = seq[g * window:(g + 1) * window]
        recs = [r for k in group for r in range(starts[k], ends[k])]
        sg = _mix((sb + _G * (g + 1)) & _M64)
        q = perm(len(recs), sg, epoch)
        out.extend(recs[int(i)] for i in q)
    assert len(out) == n
    return np.array(out, dtype=np.int64)


_DEAL_TAG = 0x6465616C


def block_parts(lens, shard_nrec, block_size, seed, nparts):
    """docs/shuffle.md 5.1's deal: each partition's pieces [(first, end)...],
    sorted, fixed for the dataset, the seed and the partition count."""
    n = len(lens)
    starts = block_cut(lens, shard_nrec, block_size)
    ends = starts[1:] + [n]
    deal = [int(x) for x in perm(len(starts), _mix(_mix(seed ^ _BLOCKS_TAG) ^ _DEAL_TAG), 0)]
    bounds = [q * n // nparts for q in range(nparts + 1)]
    parts = [[] for _ in range(nparts)]
    at = 0  # records dealt
    for b in deal:
        lo, hi = starts[b], ends[b]
        while lo < hi:
            q = max(0, min(nparts - 1, int(np.searchsorted(bounds, at, side="right")) - 1))
            cut = hi if q == nparts - 1 else min(hi, lo + bounds[q + 1] - at)
            parts[q].append((lo, cut))
            at += cut - lo
            lo = cut
    return [sorted(p) for p in parts]


def _pieces_order(pieces, key, window, epoch):
    """Section 5's sequence and groups over a list of pieces."""
    seq = [int(x) for x in perm(len(pieces), key, epoch)]
    out = []
    for g in range(0, (len(pieces) + window - 1) // window):
        recs = [r for k in seq[g * window:(g + 1) * window] for r in range(*pieces[k])]
        q = perm(len(recs), _mix((key + _G * (g + 1)) & _M64), epoch)
        out.extend(recs[int(i)] for i in q)
    return out


def partitioned_perm(lens, shard_nrec, block_size, window, seed, epoch, batch_size, nparts):
    """The record at every position of an epoch under shuffle=block with
    nparts >= 2 partitions (docs/shuffle.md 5.1): global batch g is batch
    g // nparts of partition g % nparts; whole batches only."""
    parts = block_parts(lens, shard_nrec, block_size, seed, nparts)
    sb = _mix(seed ^ _BLOCKS_TAG)
    orders = [_pieces_order(pc, sb ^ _mix(q), window, epoch) for q, pc in enumerate(parts)]
    per = len(lens) // nparts // batch_size
    out = []
    for g in range(per * nparts):
        o = orders[g % nparts]
        k = g // nparts
        out.extend(o[k * batch_size:(k + 1) * batch_size])
    return np.array(out, dtype=np.int64)


def batches_per_epoch(n, batch_size, drop_remainder=False):
    return n // batch_size if drop_remainder else -(-n // batch_size)


def local_batches(n, batch_size, drop_remainder=False, world=1):
    """Batches a rank shows per epoch."""
    nb = batches_per_epoch(n, batch_size, drop_remainder)
    return nb // world if world > 1 else nb


def batch_positions(n, batch_size, batch, rank=0, world=1):
    """Positions (in the epoch's order) of local batch `batch` of a rank."""
    g = batch * world + rank
    lo = g * batch_size
    return list(range(lo, min(lo + batch_size, n)))


def batch_records(n, batch_size, batch, seed=0, epoch=0, shuffle="global", rank=0, world=1,
                  order=None):
    """Global record indices of a local batch, in row order. With
    shuffle="block", `order` is the epoch's block_perm."""
    pos = batch_positions(n, batch_size, batch, rank, world)
    if shuffle == "none":
        return pos
    if shuffle == "block":
        return [int(order[p]) for p in pos]
    return [int(x) for x in perm(n, seed, epoch, pos)]


# ---------------------------------------------------------------- schema


def infer_schema(decoded):
    """Inference per docs/contract.md and decoder/schema/schema.h, from decoded records.
    Returns {"features": {...}, "feature_lists": {...}} (no facts)."""
    n = len(decoded)
    ctx = {}  # name -> {"kind", "counts": [...per record or None], "blens": set, "maxb"}
    for rec in decoded:
        for name, (kind, vals) in rec["features"].items():
            if kind == "none":
                continue
            e = ctx.setdefault(name, {"kinds": set(), "present": 0, "counts": set(),
                                      "maxc": 0, "blens": set()})
            e["kinds"].add(kind)
            e["present"] += 1
            e["counts"].add(len(vals))
            e["maxc"] = max(e["maxc"], len(vals))
            if kind == "bytes":
                e["blens"].update(len(v) for v in vals)
    feats = {}
    for name, e in ctx.items():
        if len(e["kinds"]) != 1:
            raise ValueError("feature %r has several kinds: %s" % (name, sorted(e["kinds"])))
        kind = next(iter(e["kinds"]))
        same = e["present"] == n and len(e["counts"]) == 1
        if kind == "bytes":
            if e["maxc"] > 1:
                feats[name] = {"kind": "bytes", "shape": [-1, -1], "ragged": True}
            elif same and e["counts"] == {1} and len(e["blens"]) == 1:
                feats[name] = {"kind": "bytes", "dtype": "uint8",
                               "shape": [next(iter(e["blens"]))]}
            else:
                feats[name] = {"kind": "bytes", "shape": [-1],
                               "max_len": max(e["blens"], default=0)}
        else:
            if same:
                c = next(iter(e["counts"]))
                feats[name] = {"kind": kind, "shape": [] if c == 1 else [c]}
            else:
                feats[name] = {"kind": kind, "shape": [-1], "max_len": e["maxc"]}
    lists = {}
    acc = {}
    for rec in decoded:
        for name, steps in (rec["feature_lists"] or {}).items():
            e = acc.setdefault(name, {"kinds": set(), "max_steps": 0, "maxc": 0,
                                      "counts": set(), "maxb": 0})
            e["max_steps"] = max(e["max_steps"], len(steps))
            for kind, vals in steps:
                if kind == "none":
                    continue
                e["kinds"].add(kind)
                e["counts"].add(len(vals))
                e["maxc"] = max(e["maxc"], len(vals))
                if kind == "bytes":
                    e["maxb"] = max([e["maxb"]] + [len(v) for v in vals])
    for name, e in acc.items():
        if not e["kinds"]:
            continue
        if len(e["kinds"]) != 1:
            raise ValueError("feature list %r has several kinds" % name)
        kind = next(iter(e["kinds"]))
        if kind == "bytes":
            shape = [e["maxb"]] if e["maxc"] <= 1 else [e["maxc"], e["maxb"]]
            lists[name] = {"kind": "bytes", "dtype": "uint8", "shape": shape,
                           "max_steps": e["max_steps"]}
        else:
            shape = [] if e["counts"] == {1} else [e["maxc"]]
            lists[name] = {"kind": kind, "shape": shape, "max_steps": e["max_steps"]}
    return {"features": feats, "feature_lists": lists}


def layout(spec, is_list=False):
    """'fixed' | 'padded' | 'ragged' | 'ragged2' | 'list' for one schema entry."""
    if is_list:
        return "list"
    shape = list(spec.get("shape", []))
    if spec["kind"] == "bytes":
        if shape == [-1, -1]:
            return "ragged2"
        if shape == [-1]:
            return "padded"
        return "fixed"
    if shape == [-1]:
        return "ragged" if spec.get("ragged") else "padded"
    return "fixed"


def normalize_spec(spec, is_list=False):
    """The parts of a schema entry that decide the bytes (for comparing an
    inferred schema with the mount's schema.json)."""
    lay = layout(spec, is_list)
    out = {"kind": spec["kind"], "layout": lay, "shape": list(spec.get("shape", []))}
    if lay == "padded":
        out["max_len"] = int(spec["max_len"])
    if lay == "list":
        out["max_steps"] = int(spec["max_steps"])
    if spec["kind"] == "bytes" and lay in ("fixed", "list"):
        out["dtype"] = spec.get("dtype", "uint8")
    return out


def normalize_schema(schema):
    return {
        "features": {k: normalize_spec(v) for k, v in schema.get("features", {}).items()},
        "feature_lists": {k: normalize_spec(v, True)
                          for k, v in (schema.get("feature_lists") or {}).items()},
    }


# ---------------------------------------------------------------- batches

_NUM_DTYPE = {"float": np.float32, "int64": np.int64}


class SchemaError(Exception):
    pass


def _present(rec, name):
    f = rec["features"].get(name)
    if f is None or f[0] == "none":
        return None
    return f


def _fixed_numeric(name, spec, recs):
    shape = tuple(spec.get("shape", []))
    count = int(np.prod(shape)) if shape else 1
    dt = _NUM_DTYPE[spec["kind"]]
    out = np.zeros((len(recs),) + shape, dtype=dt)
    flat = out.reshape(len(recs), count)
    for i, rec in enumerate(recs):
        f = _present(rec, name)
        if f is None:
            if "default" not in spec:
                raise SchemaError("record %d: %s missing, no default" % (i, name))
            flat[i, :] = np.array(spec["default"]).astype(dt)
            continue
        if f[0] != spec["kind"]:
            raise SchemaError("record %d: %s has kind %s" % (i, name, f[0]))
        if len(f[1]) != count:
            raise SchemaError("record %d: %s has %d values, want %d" % (i, name, len(f[1]), count))
        flat[i, :] = f[1]
    return {name: out}


def _fixed_bytes(name, spec, recs):
    shape = tuple(spec.get("shape", []))
    dt = np.dtype(spec.get("dtype", "uint8")).newbyteorder("<")
    nbytes = (int(np.prod(shape)) if shape else 1) * dt.itemsize
    rows = []
    for i, rec in enumerate(recs):
        f = _present(rec, name)
        if f is None:
            raise SchemaError("record %d: %s missing" % (i, name))
        if f[0] != "bytes" or len(f[1]) != 1 or len(f[1][0]) != nbytes:
            raise SchemaError("record %d: %s does not fit %s" % (i, name, spec))
        rows.append(f[1][0])
    arr = np.frombuffer(b"".join(rows), dtype=dt).reshape((len(recs),) + shape)
    return {name: arr.astype(dt.newbyteorder("=")) if dt.itemsize > 1 else arr.copy()}


def _padded(name, spec, recs):
    max_len = int(spec["max_len"])
    lengths = np.zeros(len(recs), dtype=np.int32)
    if spec["kind"] == "bytes":
        out = np.zeros((len(recs), max_len), dtype=np.uint8)
        for i, rec in enumerate(recs):
            f = _present(rec, name)
            if f is None or not f[1]:
                continue
            if f[0] != "bytes" or len(f[1]) > 1 or len(f[1][0]) > max_len:
                raise SchemaError("record %d: %s does not fit %s" % (i, name, spec))
            v = f[1][0]
            out[i, :len(v)] = np.frombuffer(v, dtype=np.uint8)
            lengths[i] = len(v)
    else:
        dt = _NUM_DTYPE[spec["kind"]]
        out = np.full((len(recs), max_len), np.array(spec.get("pad", 0)).astype(dt), dtype=dt)
        for i, rec in enumerate(recs):
            f = _present(rec, name)
            if f is None:
                continue
            if f[0] != spec["kind"] or len(f[1]) > max_len:
                raise SchemaError("record %d: %s does not fit %s" % (i, name, spec))
            out[i, :len(f[1])] = f[1]
            lengths[i] = len(f[1])
    return {name: out, name + ".lengths": lengths}


def _ragged(name, spec, recs):
    dt = _NUM_DTYPE[spec["kind"]]
    vals, splits = [], [0]
    for i, rec in enumerate(recs):
        f = _present(rec, name)
        if f is not None:
            if f[0] != spec["kind"]:
                raise SchemaError("record %d: %s has kind %s" % (i, name, f[0]))
            vals.append(np.asarray(f[1], dtype=dt))
        splits.append(splits[-1] + (len(f[1]) if f is not None else 0))
    values = np.concatenate(vals).astype(dt) if vals else np.zeros(0, dtype=dt)
    return {name + ".values": values, name + ".row_splits": np.array(splits, dtype=np.int64)}


def _ragged2(name, spec, recs):
    data, vsplits, rsplits = [], [0], [0]
    for i, rec in enumerate(recs):
        f = _present(rec, name)
        vs = []
        if f is not None:
            if f[0] != "bytes":
                raise SchemaError("record %d: %s has kind %s" % (i, name, f[0]))
            vs = f[1]
        for v in vs:
            data.append(v)
            vsplits.append(vsplits[-1] + len(v))
        rsplits.append(rsplits[-1] + len(vs))
    return {
        name + ".values": np.frombuffer(b"".join(data), dtype=np.uint8).copy(),
        name + ".value_splits": np.array(vsplits, dtype=np.int64),
        name + ".row_splits": np.array(rsplits, dtype=np.int64),
    }


def _feature_list(name, spec, recs):
    shape = tuple(spec.get("shape", []))
    max_steps = int(spec["max_steps"])
    lengths = np.zeros(len(recs), dtype=np.int32)
    key = "feature_lists/" + name
    vlen = None
    if spec["kind"] == "bytes":
        out = np.zeros((len(recs), max_steps) + shape, dtype=np.uint8)
        # each value's length in bytes ([B, T] or [B, T, V]); 0: no value
        vlen = np.zeros((len(recs), max_steps) + shape[:-1], dtype=np.int32)
    else:
        out = np.zeros((len(recs), max_steps) + shape, dtype=_NUM_DTYPE[spec["kind"]])
    for i, rec in enumerate(recs):
        steps = (rec["feature_lists"] or {}).get(name)
        if steps is None:
            continue
        if len(steps) > max_steps:
            raise SchemaError("record %d: %s has %d steps > max_steps" % (i, name, len(steps)))
        lengths[i] = len(steps)
        for s, (kind, vals) in enumerate(steps):
            if kind == "none" or len(vals) == 0:
                continue
            if kind != spec["kind"]:
                raise SchemaError("record %d: list %s step %d has kind %s" % (i, name, s, kind))
            if kind == "bytes":
                if len(shape) == 1:
                    if len(vals) > 1 or len(vals[0]) > shape[0]:
                        raise SchemaError("record %d: list %s step %d too big" % (i, name, s))
                    out[i, s, :len(vals[0])] = np.frombuffer(vals[0], dtype=np.uint8)
                    vlen[i, s] = len(vals[0])
                else:
                    if len(vals) > shape[0]:
                        raise SchemaError("record %d: list %s step %d too many" % (i, name, s))
                    for j, v in enumerate(vals):
                        if len(v) > shape[1]:
                            raise SchemaError("record %d: list %s value too long" % (i, name))
                        out[i, s, j, :len(v)] = np.frombuffer(v, dtype=np.uint8)
                        vlen[i, s, j] = len(v)
            else:
                cap = int(np.prod(shape)) if shape else 1
                if len(vals) > cap:
                    raise SchemaError("record %d: list %s step %d has %d values" % (i, name, s, len(vals)))
                # out[i, s] of a scalar step is a copy: write through a 2-D view
                out[i].reshape(max_steps, -1)[s, :len(vals)] = vals
    if vlen is not None:
        return {key: out, key + ".lengths": lengths, key + ".value_lengths": vlen}
    return {key: out, key + ".lengths": lengths}


def expected_batch(decoded, schema, indices):
    """The tensors of a batch: decoded = all records in global order (list of
    decode() results), schema = the schema JSON (dict or text, facts are
    ignored), indices = global record indices in row order.
    Returns {tensor name: numpy array}; tensor names are the file paths
    without .npy (docs/contract.md, Bytes)."""
    if isinstance(schema, (str, bytes)):
        schema = json.loads(schema)
    recs = [decoded[i] for i in indices]
    out = {}
    for name, spec in sorted(schema.get("features", {}).items()):
        lay = layout(spec)
        if lay == "fixed":
            f = _fixed_bytes if spec["kind"] == "bytes" else _fixed_numeric
            out.update(f(name, spec, recs))
        elif lay == "padded":
            out.update(_padded(name, spec, recs))
        elif lay == "ragged":
            out.update(_ragged(name, spec, recs))
        else:
            out.update(_ragged2(name, spec, recs))
    for name, spec in sorted((schema.get("feature_lists") or {}).items()):
        out.update(_feature_list(name, spec, recs))
    return out


def tensor_files(tensors):
    """File names (relative to the batch dir) of a batch's tensors."""
    return sorted(k + ".npy" for k in tensors)


# ---------------------------------------------------------------- bytes


def npy_bytes(arr):
    """numpy's own .npy serialisation (format 1.0 for everything here)."""
    bio = io.BytesIO()
    np.save(bio, np.ascontiguousarray(arr), allow_pickle=False)
    return bio.getvalue()


_ST_DTYPES = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "U16": np.uint16, "I16": np.int16,
    "U32": np.uint32, "I32": np.int32, "U64": np.uint64, "I64": np.int64,
    "F16": np.float16, "F32": np.float32, "F64": np.float64,
}


def _st_name(dt):
    dt = np.dtype(dt)
    for k, v in _ST_DTYPES.items():
        if np.dtype(v) == dt:
            return k
    raise ValueError("no safetensors dtype for %s" % dt)


def safetensors_bytes(tensors):
    """The contract's layout: 8-byte LE header length, JSON header (keys sorted, no
    spaces) padded with spaces so the data starts at a multiple of 64, then
    the tensors' data in key order with no holes."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": _st_name(a.dtype), "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * ((-(8 + len(text))) % 64)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


class SafetensorsError(ValueError):
    pass


def parse_safetensors(raw, strict=True):
    """name -> numpy array. With strict, also check the contract's layout: data
    at a multiple of 64, header keys sorted with no spaces (then padding
    spaces), data in key order with no holes and nothing after it."""
    raw = bytes(raw)
    if len(raw) < 8:
        raise SafetensorsError("shorter than 8 bytes")
    (hlen,) = struct.unpack_from("<Q", raw, 0)
    if 8 + hlen > len(raw):
        raise SafetensorsError("header length %d past the end" % hlen)
    text = raw[8:8 + hlen]
    try:
        header = json.loads(text.decode("utf-8"))
    except ValueError as e:
        raise SafetensorsError("header is not JSON: %s" % e)
    if not isinstance(header, dict):
        raise SafetensorsError("header is not an object")
    data = raw[8 + hlen:]
    header.pop("__metadata__", None)
    out = {}
    spans = []
    for name, info in header.items():
        dt = _ST_DTYPES.get(info.get("dtype"))
        if dt is None:
            raise SafetensorsError("%s: unknown dtype %r" % (name, info.get("dtype")))
        shape = tuple(int(x) for x in info["shape"])
        a, b = (int(x) for x in info["data_offsets"])
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize if shape else np.dtype(dt).itemsize
        if not (0 <= a <= b <= len(data)) or b - a != nbytes:
            raise SafetensorsError("%s: data_offsets %s do not fit shape %s %s" %
                                   (name, [a, b], shape, info["dtype"]))
        out[name] = np.frombuffer(data[a:b], dtype=np.dtype(dt).newbyteorder("<")).reshape(shape)
        spans.append((name, a, b))
    if strict:
        if (8 + hlen) % 64:
            raise SafetensorsError("data starts at %d, not a multiple of 64" % (8 + hlen))
        compact = json.dumps(json.loads(text.decode()), sort_keys=True,
                             separators=(",", ":")).encode()
        if text.rstrip(b" ") != compact:
            raise SafetensorsError("header is not sorted/compact JSON: %r" % text[:200])
        spans.sort(key=lambda s: s[0].encode())
        pos = 0
        for name, a, b in spans:
            if a != pos:
                raise SafetensorsError("%s starts at %d, expected %d" % (name, a, pos))
            pos = b
        if pos != len(data):
            raise SafetensorsError("%d bytes after the last tensor" % (len(data) - pos))
    return out


def arrays_equal(a, b):
    """Same dtype, shape and bytes (so NaN payloads and -0.0 count)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and \
        np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


# ---------------------------------------------------------------- misc


def float32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def is_nan32(bits):
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF) != 0

# ---------------------------------------------------------------- test env

HERE = os.path.dirname(os.path.abspath(__file__))


def repo_root():
    """The repository root: two levels above this file."""
    return os.path.dirname(os.path.dirname(HERE))


def testdata_dir():
    """The shared real TFRecord files: $BFS_TESTDATA or <repo>/../shared/testdata/real."""
    return os.environ.get("BFS_TESTDATA") or os.path.normpath(
        os.path.join(repo_root(), "..", "shared", "testdata", "real"))


def batchfs_path():
    return os.environ.get("BATCHFS") or os.path.join(repo_root(), "batchfs")


def batchfs_unusable():
    """None if the batchfs binary looks real, else the reason to skip."""
    import subprocess
    p = batchfs_path()
    if not os.path.isfile(p) or not os.access(p, os.X_OK):
        return "batchfs binary not found at %s (build it, or set BATCHFS)" % p
    try:
        r = subprocess.run([p, "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "batchfs --version failed: %s" % e
    if r.returncode != 0:
        return "batchfs --version exits %d (still a placeholder?)" % r.returncode
    return None


def gen_path(workdir=None):
    """The bfs_gen binary: $BFS_GEN, <repo>/tests/gen/bfs_gen if built and
    newer than its source, else compiled with gcc into workdir."""
    import subprocess
    import tempfile
    if os.environ.get("BFS_GEN"):
        return os.environ["BFS_GEN"]
    src = os.path.join(repo_root(), "tests", "gen", "bfs_gen.c")
    built = os.path.join(repo_root(), "tests", "gen", "bfs_gen")
    if os.path.isfile(built) and os.path.getmtime(built) >= os.path.getmtime(src):
        return built
    workdir = workdir or tempfile.mkdtemp(prefix="bfs_gen.")
    out = os.path.join(workdir, "bfs_gen")
    if not os.path.isfile(out):
        subprocess.run(["gcc", "-O2", "-Wall", "-o", out, src, "-lz"], check=True)
    return out


def generate(gen, out, records, features, shards=1, compression="none", seed=0,
             unpacked=False, seq=False):
    """Run bfs_gen; returns the shard paths."""
    import subprocess
    cmd = [gen, "--out", str(out), "--records", str(records), "--shards", str(shards),
           "--compression", compression, "--seed", str(seed), "--quiet"]
    if unpacked:
        cmd.append("--unpacked")
    if seq:
        cmd.append("--seq")
    subprocess.run(cmd + list(features), check=True)
    return list_shards(str(out))


# ---------------------------------------------------------------- whole epoch (all/)


def epoch_records(n, batch_size, seed=0, epoch=0, shuffle="global", drop_remainder=False,
                  rank=0, world=1, order=None):
    """Global record indices of a rank's whole epoch as epoch-E/all/ shows it:
    its local batches in order (after rank/world and drop_remainder), each
    batch's records in row order."""
    out = []
    for b in range(local_batches(n, batch_size, drop_remainder, world)):
        out.extend(batch_records(n, batch_size, b, seed, epoch, shuffle, rank, world, order))
    return out


def split_tensors(schema):
    """Names of a schema's offset tensors (ragged row_splits / value_splits)."""
    if isinstance(schema, (str, bytes)):
        schema = json.loads(schema)
    out = set()
    for name, spec in schema.get("features", {}).items():
        lay = layout(spec)
        if lay == "ragged":
            out.add(name + ".row_splits")
        elif lay == "ragged2":
            out.update([name + ".value_splits", name + ".row_splits"])
    return out


def concat_batches(schema, batches):
    """Consecutive batches' tensors (a list of {name: array}) joined into one
    set, like concatenating tf.RaggedTensors: dense tensors (and values)
    along axis 0; offset tensors (row_splits, value_splits) shifted by the
    running total of their batches' last offsets, first 0 kept once."""
    splits = split_tensors(schema)
    names = sorted(batches[0])
    out = {}
    for name in names:
        parts = [np.asarray(b[name]) for b in batches]
        if name in splits:
            acc, total = [np.zeros(1, dtype=np.int64)], 0
            for p in parts:
                acc.append(p[1:].astype(np.int64) + total)
                total += int(p[-1])
            out[name] = np.concatenate(acc).astype(parts[0].dtype)
        else:
            out[name] = np.concatenate(parts, axis=0)
    return out
