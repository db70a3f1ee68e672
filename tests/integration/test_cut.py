# SPDX-License-Identifier: Apache-2.0
"""A shard cut short (docs/contract.md): its last record incomplete, as a
copy or a download stopped midway leaves it. Under on_corrupt=skip it mounts,
serves its whole records and says in errors.txt where it was cut (shard,
record index, offset); fail refuses it. Its index is never cached, so a
re-mount does the same, and a shard that grows back is read whole. Plain and
gzip shards; `batchfs index` and `batchfs inspect` say where the cut is."""

import gzip
import os
import random
import re
import struct
import subprocess
import zlib

import pytest

import oracle
from imgdata import frame
from helpers import check_batch_dir, check_safetensors
from test_skip import B, SEED, _offsets, _records, _serialize

def _cut_dataset(tmp_path, compression, name):
    """2 shards of 30 records; the second cut inside its record 17."""
    rng = random.Random(5)
    src = tmp_path / name
    src.mkdir()
    recs = _records(rng, 60, (300, 900))
    datas = [_serialize(r) for r in recs]
    ext = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    whole = []
    for k in range(2):
        stream = b"".join(frame(d) for d in datas[30 * k:30 * k + 30])
        whole.append(stream)
    offs = _offsets(datas[30:])
    cut_at = offs[17] + 12 + len(datas[47]) // 2
    full = [whole[0], whole[1]]
    cut = [whole[0], whole[1][:cut_at]]
    for k, stream in enumerate(cut):
        raw = gzip.compress(stream, 6) if compression == "gzip" else stream
        if compression == "gzip" and k == 1:  # a gzip file cut, not a whole one of a cut stream
            raw = gzip.compress(full[1], 6)
            raw = raw[:len(raw) * 17 // 30]
        (src / ("part-%d%s" % (k, ext))).write_bytes(raw)
    return src, datas, offs, full, ext


def _whole_records(path):
    """The records of a shard cut short, as Python's zlib and the framing
    give them: every record that is whole."""
    raw = open(path, "rb").read()
    if path.endswith(".gz"):
        d = zlib_stream(raw)
    else:
        d = raw
    out, pos = [], 0
    while pos + 12 <= len(d):
        (n,) = struct.unpack_from("<Q", d, pos)
        if pos + 16 + n > len(d):
            break
        out.append(d[pos + 12:pos + 12 + n])
        pos += 16 + n
    return out


def zlib_stream(raw):
    o = zlib.decompressobj(16 + zlib.MAX_WBITS)
    return o.decompress(raw)


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_shard_cut_short_mounts_under_skip_and_serves_its_whole_records(batchfs, mounter,
                                                                        tmp_path, compression):
    src, datas, offs, full, ext = _cut_dataset(tmp_path, compression, "cut-" + compression)
    cut_path = str(src / ("part-1" + ext))
    kept = _whole_records(cut_path)
    assert 0 < len(kept) < 30
    good = [oracle.decode(d) for d in datas[:30] + kept]
    ix = str(tmp_path / "ix")
    # fail refuses it, naming shard, record and offset
    os.makedirs(str(tmp_path / "nomnt"), exist_ok=True)
    r = subprocess.run([batchfs, "-f", str(src), str(tmp_path / "nomnt"), "-o",
                        "on_corrupt=fail,index_dir=" + ix], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert re.search(r"part-1%s: record %d at offset %d: .*cut short .*on_corrupt=skip"
                     % (re.escape(ext), len(kept), offs[len(kept)]), err), err
    for run in range(2):  # a re-mount does the same: the cut shard is not cached as whole
        m = mounter(str(src), batch_size=B, seed=SEED, on_corrupt="skip", index_dir=ix)
        s = m.json("schema.json")
        assert s["records"] == 30 + len(kept), s
        eff = {"features": s["features"]}
        n = len(good)
        for b in range(oracle.batches_per_epoch(n, B)):
            exp = oracle.expected_batch(good, eff, oracle.batch_records(n, B, b, SEED))
            bdir = m.path("epoch-0000", "batch-%06d" % b)
            check_batch_dir(bdir, exp)
            check_safetensors(bdir + ".safetensors", exp)
        lines = m.read("errors.txt").decode().splitlines()
        assert len(lines) == 1, lines
        assert re.match(r".*part-1%s: record %d at offset %d: .*the shard is cut short"
                        % (re.escape(ext), len(kept), offs[len(kept)]), lines[0]), lines
        st = m.json("stats.json")
        assert st["corrupt_records"] == 1 and st["failed_reads"] == 0, st
        m.stop()
    # `batchfs index` indexes what it can, says where the shard is cut, exit 1
    r = subprocess.run([batchfs, "index", "--index-dir", ix, str(src)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    assert r.returncode == 1, r
    assert b"cut short" in r.stderr and ("%d records" % (30 + len(kept))).encode() in r.stdout, r
    # `batchfs inspect` shows the whole records and where the file is cut
    r = subprocess.run([batchfs, "inspect", "--records", "0", cut_path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    assert r.returncode == 1
    assert ("%d whole records" % len(kept)).encode() in r.stdout, r.stdout
    assert ("record %d at offset %d" % (len(kept), offs[len(kept)])).encode() in r.stderr, r
    # the shard written whole again (it grew back): every record is served
    raw = gzip.compress(full[1], 6) if compression == "gzip" else full[1]
    with open(cut_path, "wb") as f:
        f.write(raw)
    m = mounter(str(src), batch_size=B, seed=SEED, on_corrupt="fail", index_dir=ix)
    assert m.json("schema.json")["records"] == 60
    allrec = [oracle.decode(d) for d in datas]
    eff = {"features": m.json("schema.json")["features"]}
    for b in range(oracle.batches_per_epoch(60, B)):
        exp = oracle.expected_batch(allrec, eff, oracle.batch_records(60, B, b, SEED))
        check_batch_dir(m.path("epoch-0000", "batch-%06d" % b), exp)
    assert m.read("errors.txt") == b""
