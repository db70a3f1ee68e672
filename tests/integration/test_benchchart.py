# SPDX-License-Identifier: Apache-2.0
"""scripts/benchchart.py on a synthetic run: one SVG per workload, one bar per
measured row whose length follows records/s on a log scale, the rate and the
ratio to batchfs's cold first epoch printed on each bar, the machine, date
and command in the caption; results of another run refused."""

import math
import os
import re
import sys
import xml.etree.ElementTree as ET

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))

matplotlib = pytest.importorskip("matplotlib")
import benchchart  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"

RUN = {"id": "20261124-101500-4242", "machine": "Test CPU @ 3.0GHz, 2 cores, kernel 6.1",
       "date": "2026-11-24 10:15", "command": "scripts/bench --quick --workload small"}


def rows(*pairs):
    return [{"label": label, "rec_s": v} for label, v in pairs]


def small(run_id=RUN["id"]):
    return {"name": "small", "records": 40000, "run": run_id, "rows": rows(
        ("raw cat of the shards (floor)", 9.0e6),
        ("batchfs index build (framing + schema scan)", 2.0e6),
        ("null FUSE, first read via page cache (ceiling)", 4.9e5),
        ("decoder alone: build, shuffled order, 1 thread", 2.7e6),
        ("batchfs cold first epoch (fresh mount)", 5.0e5),
        ("Python + protobuf (C++) + numpy, shuffled", 5.0e3),
        ("npm @roboflow/tfrecords", None),  # not measured: no bar
        ("peer tfr_decode (C, 1 core), --shuffle (global shuffle, mmap)", 3.8e6),
        ("PyTorch: vahidk/tfrecord, shuffle queue 1024, DataLoader(batch 256)", 2.8e4),
    )}


def varlen(run_id=RUN["id"]):
    return {"name": "varlen", "records": 20000, "run": run_id, "rows": rows(
        ("raw cat of the shards (floor)", 3.0e6),
        ("batchfs cold first epoch (fresh mount)", 7.3e4),
        ("Python + protobuf (C++) + numpy, shuffled", 1.1e3),
    )}


def bars_in(path):
    """{bar index: (x_left, x_right)} and all text of the SVG."""
    root = ET.parse(path).getroot()
    bars = {}
    for g in root.iter(SVG + "g"):
        m = re.fullmatch(r"bar-(\d+)", g.get("id", ""))
        if not m:
            continue
        xs = []
        for p in g.iter(SVG + "path"):
            nums = [float(t) for t in re.findall(r"-?\d+(?:\.\d+)?", p.get("d", ""))]
            xs += nums[0::2]
        assert xs, ET.tostring(g)
        bars[int(m.group(1))] = (min(xs), max(xs))
    text = " ".join("".join(t.itertext()) for t in root.iter(SVG + "text"))
    return bars, text


def test_one_svg_per_workload_with_the_right_bars(tmp_path):
    results = [small(), varlen()]
    paths = benchchart.write_charts(RUN, results, str(tmp_path / "charts"))
    assert [os.path.basename(p) for p in paths] == ["bench-small.svg", "bench-varlen.svg"]
    for path, res in zip(paths, results):
        assert open(path, "rb").read(200).lstrip().startswith(b"<?xml")
        measured = [r for r in res["rows"] if r["rec_s"]]
        bars, text = bars_in(path)
        assert sorted(bars) == list(range(len(measured))), bars
        # every bar starts at the same place; its end is linear in log10(records/s)
        lefts = {round(a, 3) for a, _ in bars.values()}
        assert len(lefts) == 1, lefts
        ends = [bars[i][1] for i in range(len(measured))]
        logs = [math.log10(r["rec_s"]) for r in measured]
        i, j = logs.index(min(logs)), logs.index(max(logs))
        assert ends[j] > ends[i]
        scale = (ends[j] - ends[i]) / (logs[j] - logs[i])
        for e, lg in zip(ends, logs):
            assert abs(ends[i] + (lg - logs[i]) * scale - e) < 0.5, (ends, logs)
        # labels, rates and ratios to the cold first epoch on the bars
        ref = next(r["rec_s"] for r in measured if r["label"] == benchchart.REFERENCE)
        for r in measured:
            assert r["label"] in text
            assert benchchart.fmt_rate(r["rec_s"]) + " rec/s" in text
            assert benchchart.fmt_ratio(r["rec_s"] / ref) in text
        assert "npm @roboflow/tfrecords" not in text  # no bar for what was not measured
        assert "1.00x" in text
        # the caption: machine, date, command of the run
        for k in ("machine", "date", "command", "id"):
            assert RUN[k] in text, k


def test_ratio_text():
    assert benchchart.fmt_ratio(1.0) == "1.00x"
    assert benchchart.fmt_ratio(7.6) == "7.60x"
    assert benchchart.fmt_ratio(101.4) == "101x"
    assert benchchart.fmt_ratio(0.25) == "0.25x"
    assert benchchart.fmt_ratio(0.01) == "0.01x"
    assert benchchart.fmt_rate(2_850_000) == "2.85M"
    assert benchchart.fmt_rate(28_137) == "28.1k"


def test_kinds():
    assert benchchart.kind_of("batchfs warm re-read (keep_cache; median of 3)") == "batchfs"
    assert benchchart.kind_of("PyTorch: all/*.npy mmap, slices of 256 rows (cold mount)") == \
        "batchfs"
    assert benchchart.kind_of("null FUSE, keep_cache re-read (median of 3)") == "baseline"
    assert benchchart.kind_of("peer tfr_decode (C, 1 core), file order (read)") == "peer"
    assert benchchart.kind_of("PyTorch: vahidk/tfrecord, shuffle queue 1024, "
                              "DataLoader(batch 256)") == "peer"


def test_mixed_runs_are_refused(tmp_path):
    out = tmp_path / "charts"
    with pytest.raises(ValueError, match="same run"):
        benchchart.write_charts(RUN, [small(), varlen("20261123-090000-1")], str(out))
    assert not out.exists() or not os.listdir(out)  # nothing written
    with pytest.raises(ValueError):
        benchchart.write_charts(RUN, [small(run_id=None)], str(out))
    with pytest.raises(ValueError):
        benchchart.write_charts({"machine": "x"}, [small()], str(out))


def test_a_workload_without_numbers_is_refused(tmp_path):
    empty = {"name": "image", "records": 1, "run": RUN["id"],
             "rows": rows(("batchfs cold first epoch (fresh mount)", None))}
    with pytest.raises(ValueError, match="no measured row"):
        benchchart.write_charts(RUN, [empty], str(tmp_path))


def test_redrawn_from_the_saved_results(tmp_path):
    import json
    extra = small()
    extra["stats"] = {"reads": 1}  # what bench keeps besides: not saved for the charts
    data = benchchart.saved(RUN, [extra, varlen()])
    assert set(data["results"][0]) == {"name", "records", "run", "rows"}
    saved = tmp_path / "bench-results.json"
    saved.write_text(json.dumps(data))
    out = tmp_path / "again"
    assert benchchart.main([str(saved), "--chart-dir", str(out)]) == 0
    assert sorted(os.listdir(out)) == ["bench-small.svg", "bench-varlen.svg"]
    bars, text = bars_in(str(out / "bench-small.svg"))
    assert len(bars) == len([r for r in small()["rows"] if r["rec_s"]])
    # a saved file whose results came from two runs is refused like any mix
    data["results"][1]["run"] = "another"
    saved.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="same run"):
        benchchart.main([str(saved), "--chart-dir", str(tmp_path / "mixed")])
