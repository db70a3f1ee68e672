# SPDX-License-Identifier: Apache-2.0
"""on_corrupt=skip replaces a corrupt record (docs/contract.md).

A corrupt record is replaced by the next valid one, also when the
schema has ragged features, whose file sizes come from per-record counts
taken before anything is decoded. The rule (README "Bad input"): the
substitute is the next valid record, in global record order, whose ragged
counts equal those counted for the corrupt record; a record that the count
pass cannot decode (or whose ragged value has the wrong kind) is counted as
the next record it can decode. Every kind of damage (data CRC, length CRC,
undecodable proto, a value of the wrong kind), small records (read from the
shard's mapping) and large ones (pread), plain and gzip shards.

The expected bytes come from the oracle (the official protobuf runtime) over
the records as written, with the substitutes worked out here."""

import errno
import gzip
import json
import os
import random
import re
import struct
import zlib

import pytest

import oracle
from imgdata import example, frame
from helpers import check_batch_dir, check_safetensors, expect_mount_failure, read_errno

N = 60
B = 8
SEED = 3
# record -> the damage done to it (31 and 32: two in a row that the count
# pass cannot count, both counted as record 33)
BAD = {7: "data_crc", 19: "length_crc", 31: "undecodable", 32: "ragged_kind", 52: "fixed_kind"}


def _records(rng, n, image_len):
    """n examples: an image (bytes, padded), boxes (float, ragged, 0..2
    values), tags (bytes, ragged twice, 0..1 value of 1..2 bytes) and a
    label."""
    out = []
    for i in range(n):
        out.append({
            "image": bytes(rng.getrandbits(8) for _ in range(rng.randint(*image_len)))
            if image_len[1] < 4096 else os.urandom(rng.randint(*image_len)),
            "boxes": [float(rng.randint(0, 99)) for _ in range(rng.randint(0, 2))],
            "tags": [bytes(rng.choice(b"abcdef") for _ in range(rng.randint(1, 2)))
                     for _ in range(rng.randint(0, 1))],
            "label": i,
        })
    return out


def _serialize(rec):
    # an empty list is left out (absent: a count of 0), not written as an
    # int64_list of no values, which a float feature would take for the
    # wrong kind
    return example({k: v for k, v in rec.items() if not (isinstance(v, list) and not v)})


def _schema(max_len, ragged=True):
    if not ragged:  # the same features padded: no per-record counts
        return {"features": {
            "image": {"kind": "bytes", "shape": [-1], "max_len": max_len},
            "boxes": {"kind": "float", "shape": [-1], "max_len": 2},
            "tags": {"kind": "bytes", "shape": [-1], "max_len": 2},
            "label": {"kind": "int64", "shape": []},
        }}
    return {"features": {
        "image": {"kind": "bytes", "shape": [-1], "max_len": max_len},
        "boxes": {"kind": "float", "shape": [-1], "ragged": True},
        "tags": {"kind": "bytes", "shape": [-1, -1], "ragged": True},
        "label": {"kind": "int64", "shape": []},
    }}


def _counts(dec):
    """Ragged counts of a decoded record: boxes values, tags values, tags bytes."""
    f = dec["features"]
    boxes = f.get("boxes", ("none", []))
    tags = f.get("tags", ("none", []))
    nb = len(boxes[1]) if boxes[0] == "float" else 0
    nt = len(tags[1]) if tags[0] == "bytes" else 0
    return (nb, nt, sum(len(t) for t in tags[1]) if tags[0] == "bytes" else 0)


def _countable(data):
    """What the count pass makes of a record's bytes: its decoded form if it
    decodes with every ragged value of the schema's kind, else None."""
    try:
        dec = oracle.decode(data)
    except Exception:  # noqa: BLE001 - any parse failure
        return None
    f = dec["features"]
    if f.get("boxes", ("float",))[0] not in ("float", "none") or \
            f.get("tags", ("bytes",))[0] not in ("bytes", "none"):
        return None
    return dec


def _damage(kind, rec, data):
    """(record bytes to write, flip its length CRC, give it the data CRC of
    the undamaged bytes) for one kind of damage."""
    if kind == "data_crc":  # a byte of the image flipped: the proto still parses
        at = data.find(rec["image"]) + len(rec["image"]) // 2
        return data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1:], False, True
    if kind == "length_crc":
        return data, True, False
    if kind == "undecodable":  # field 1 with a length running past the end
        return b"\x0a\x80\x80\x80\x80\x08" + data[:10], False, False
    if kind == "ragged_kind":
        r = dict(rec, boxes=[1, 2])  # int64 where the schema says float
        return _serialize(r), False, False
    if kind == "fixed_kind":
        r = dict(rec, label=float(rec["label"]))
        return _serialize(r), False, False
    raise ValueError(kind)


def _write(path, recs, compression):
    """The shard with BAD's damage; returns (written record bytes, whether
    each record is valid as written: framing, CRCs, proto and kinds)."""
    stream, datas, valid = bytearray(), [], []
    for i, rec in enumerate(recs):
        data = _serialize(rec)
        flip_len = bad_data = False
        if i in BAD:
            data, flip_len, bad_data = _damage(BAD[i], rec, data)
        fr = bytearray(frame(data))
        if flip_len:
            fr[9] ^= 0x10
        if bad_data:  # the data CRC of the record before the damage
            good = _serialize(rec)
            fr[12 + len(data):] = struct.pack("<I", oracle.mask_crc(oracle.crc32c(good)))
        stream += fr
        datas.append(data)
        valid.append(i not in BAD)
    raw = bytes(stream)
    if compression == "gzip":
        raw = gzip.compress(raw, 6)
    with open(path, "wb") as f:
        f.write(raw)
    return datas, valid


def _substitutes(datas, valid, ragged=True):
    """bad record -> the record that replaces it (the rule above)."""
    n = len(datas)
    if not ragged:
        return {b: next((b + k) % n for k in range(1, n) if valid[(b + k) % n])
                for b in range(n) if not valid[b]}
    counted = [_countable(d) for d in datas]
    out = {}
    for bad in (i for i in range(n) if not valid[i]):
        src = bad
        if counted[bad] is None:  # counted as the next record the pass can count
            src = next((bad + k) % n for k in range(1, n) if counted[(bad + k) % n] is not None)
        want = _counts(counted[src])
        out[bad] = next((bad + k) % n for k in range(1, n)
                        if valid[(bad + k) % n] and _counts(counted[(bad + k) % n]) == want)
    return out


def _make(tmp_path, name, image_len, compression, ragged=True):
    rng = random.Random(zlib.crc32(name.encode()))
    recs = _records(rng, N, image_len)
    # the damaged records' images as long as any: a row filled in part
    # before its record failed has more image bytes than its substitute
    for b in BAD:
        recs[b]["image"] = os.urandom(image_len[1])
    src = tmp_path / name
    src.mkdir()
    ext = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    datas, valid = _write(str(src / ("part-0" + ext)), recs, compression)
    subs = _substitutes(datas, valid, ragged)
    decoded = [oracle.decode(d) if valid[i] else None for i, d in enumerate(datas)]
    served = [decoded[subs[i]] if i in subs else decoded[i] for i in range(N)]
    schema = tmp_path / (name + ".schema.json")
    schema.write_text(json.dumps(_schema(image_len[1], ragged)))
    return str(src), str(schema), served, subs, datas


def _offsets(datas):
    """Offset of each record's header in the (uncompressed) stream."""
    out, pos = [], 0
    for d in datas:
        out.append(pos)
        pos += 16 + len(d)
    return out


@pytest.mark.parametrize("name,image_len,compression,ragged", [
    ("small-plain", (100, 300), "none", True),        # mapped: records under 64 KiB
    ("large-plain", (100_000, 200_000), "none", True),  # pread: records over 64 KiB
    ("small-gzip", (100, 300), "gzip", True),
    ("large-gzip", (100_000, 200_000), "gzip", True),
    # no ragged feature: the next valid record, and no byte of the damaged
    # one left in its row (a padded value is written only as far as it goes)
    ("padded-plain", (100, 300), "none", False),
])
def test_skip_replaces_every_kind_of_damage(mounter, tmp_path, name, image_len, compression,
                                            ragged):
    src, schema, served, subs, datas = _make(tmp_path, name, image_len, compression, ragged)
    # the rule is exercised: some substitute is not simply the next record
    assert not ragged or any(s != (b + 1) % N for b, s in subs.items()), subs
    m = mounter(src, batch_size=B, seed=SEED, on_corrupt="skip", schema=schema,
                index_dir=str(tmp_path / "ix"))
    eff = {"features": m.json("schema.json")["features"]}
    nb = oracle.batches_per_epoch(N, B)
    batches = []
    for b in range(nb):
        idx = oracle.batch_records(N, B, b, SEED)
        exp = oracle.expected_batch(served, eff, idx)
        batches.append(exp)
        bdir = m.path("epoch-0000", "batch-%06d" % b)
        check_batch_dir(bdir, exp)  # stat sizes equal the bytes read, and the bytes
        check_safetensors(bdir + ".safetensors", exp)
    # the whole epoch too (all/ decodes in chunks: the same substitutes)
    whole = oracle.concat_batches(eff, batches)
    check_batch_dir(m.path("epoch-0000", "all"), whole)
    check_safetensors(m.path("epoch-0000", "all.safetensors"), whole)
    st = m.json("stats.json")
    assert st["failed_reads"] == 0, st
    assert st["skipped_records"] >= len(BAD), st
    lines = m.read("errors.txt").decode().splitlines()
    offs = _offsets(datas)
    for bad, kind in BAD.items():
        hit = [l for l in lines if re.search(r"part-0\.tfrecord(\.gz)?: record %d at offset %d: "
                                             % (bad, offs[bad]), l) and l.endswith("(skipped)")]
        assert hit, (kind, lines)


def test_skip_without_a_record_of_the_same_counts_fails_the_batch_and_says_why(mounter,
                                                                               tmp_path):
    """Record 3 alone has 3 boxes: no valid record can take its place
    without changing the sizes stat gave, so its batch fails with EIO and
    errors.txt says why; the other batches are served."""
    recs = [{"image": b"x" * 20, "boxes": [1.0] * (3 if i == 3 else 1), "tags": [b"a"],
             "label": i} for i in range(12)]
    src = tmp_path / "unique"
    src.mkdir()
    recs[3]["image"] = b"y" * 20
    datas = [_serialize(r) for r in recs]
    stream = bytearray(b"".join(frame(d) for d in datas))
    stream[_offsets(datas)[3] + 12 + datas[3].find(b"y" * 20)] ^= 1  # its data CRC fails
    (src / "s.tfrecord").write_bytes(bytes(stream))
    schema = tmp_path / "unique.schema.json"
    schema.write_text(json.dumps(_schema(20)))
    m = mounter(str(src), batch_size=4, shuffle="none", on_corrupt="skip", schema=str(schema),
                index_dir=str(tmp_path / "ix"))
    assert read_errno(m.path("epoch-0000", "batch-000000", "boxes.values.npy")) == errno.EIO
    good = [oracle.decode(d) for d in datas]
    eff = {"features": m.json("schema.json")["features"]}
    for b in (1, 2):
        check_batch_dir(m.path("epoch-0000", "batch-%06d" % b),
                        oracle.expected_batch(good, eff, range(4 * b, 4 * b + 4)))
    lines = m.read("errors.txt").decode()
    assert re.search(r"s\.tfrecord: record 3 at offset %d: data CRC mismatch .*on_corrupt=skip: "
                     r"no valid record with the same ragged counts to replace it"
                     % _offsets(datas)[3], lines), lines
    assert m.json("stats.json")["skipped_records"] == 0


def test_a_shard_that_cannot_be_read_fails_the_mount_with_one_line(batchfs, tmp_path):
    """on_corrupt=skip over a folder with a plain shard of 7 records whose
    data CRC fails (indexed, to be skipped) and a gzip shard whose deflate
    data is broken (cannot be read at all): the mount fails with exit
    status 1 and the one line naming the gzip shard, not the 7 notes of
    records it would have skipped first."""
    src = tmp_path / "src"
    src.mkdir()
    datas = [_serialize({"image": b"x" * 20, "boxes": [1.0], "tags": [b"a"], "label": i})
             for i in range(40)]
    stream = bytearray(b"".join(frame(d) for d in datas))
    for i in range(3, 40, 5)[:7]:
        stream[_offsets(datas)[i] + 12 + len(datas[i])] ^= 0x5A  # its data CRC
    (src / "a.tfrecord").write_bytes(bytes(stream))
    gz = bytearray(gzip.compress(b"".join(frame(d) for d in datas)))
    for i in range(40, len(gz) - 20, 17):
        gz[i] ^= 0x55
    (src / "b.tfrecord.gz").write_bytes(bytes(gz))
    schema = tmp_path / "s.schema.json"
    schema.write_text(json.dumps(_schema(20)))
    expect_mount_failure(batchfs, src, tmp_path / "mnt",
                         "on_corrupt=skip,schema=%s,index_dir=%s" % (schema, tmp_path / "ix"),
                         "b.tfrecord.gz")
