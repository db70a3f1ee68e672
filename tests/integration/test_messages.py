# SPDX-License-Identifier: Apache-2.0
"""What a new user reads: one clear line and exit status 1 for a wrong
option (with the nearest known one), a missing mount point, image= on a
feature that holds no images; the standard FUSE options still pass through;
`-f` says when the mount is ready; `batchfs inspect` names the compression;
BatchDataset on a mount with rank folders says what to pass; the man page
renders its placeholders."""

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

import oracle
from fusemount import MOUNT_DEADLINE, unmount, wait_for

SQUAD = os.path.join(oracle.testdata_dir(), "trax-squad-validation-00000-of-00001.tfrecord")


def _fail(batchfs, src, mnt, opts, index_dir):
    """The single stderr line of a mount that must fail (exit status 1)."""
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.Popen([batchfs, "-f", str(src), str(mnt), "-o", opts + ",index_dir=" + index_dir],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=MOUNT_DEADLINE)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        p.communicate()
        raise AssertionError("batchfs -o %s mounted" % opts)
    finally:
        unmount(str(mnt))
    lines = [ln for ln in err.decode(errors="replace").splitlines() if ln.strip()]
    assert p.returncode == 1 and len(lines) == 1, (opts, p.returncode, lines)
    return lines[0]


UNKNOWN = [
    ("batchsize=8", "batchfs: unknown option 'batchsize=8' (did you mean batch_size?)"),
    ("bacth_size=8", "batchfs: unknown option 'bacth_size=8' (did you mean batch_size?)"),
    ("Batch_Size=8", "batchfs: unknown option 'Batch_Size=8' (did you mean batch_size?)"),
    ("threds=2", "batchfs: unknown option 'threds=2' (did you mean threads?)"),
    ("cache=1G", "batchfs: unknown option 'cache=1G' (did you mean cache_size?)"),
    ("allow_others", "batchfs: unknown option 'allow_others' (did you mean allow_other?)"),
    ("sufle=none", "batchfs: unknown option 'sufle=none' (did you mean shuffle?)"),
    ("frobnicate=1", "batchfs: unknown option 'frobnicate=1' (see batchfs --help)"),
    ("batch_size", "batchfs: option 'batch_size' needs a value (batch_size=...)"),
    ("drop_remainder=yes", "batchfs: option 'drop_remainder=yes' takes no value (write drop_remainder)"),
]


@pytest.mark.parametrize("opt,line", UNKNOWN, ids=[o for o, _ in UNKNOWN])
def test_unknown_option_names_the_nearest(batchfs, ds_plain, index_dir, tmp_path, opt, line):
    assert _fail(batchfs, ds_plain.path, tmp_path / "mnt", opt, index_dir) == line


def test_standard_fuse_options_pass_through(mounter, ds_plain):
    # what mount(8), fstab lines and fuse 2 habits pass; max_read must reach
    # INIT too (libfuse leaves that to the filesystem), nonempty is fuse 3's default
    m = mounter(ds_plain.path, batch_size=8, allow_other=True, default_permissions=True, ro=True,
                fsname="mydata", subtype="batchfs", max_read=65536, noatime=True, nosuid=True,
                nodev=True, nonempty=True)
    assert len(m.read("epoch-0000", "batch-000000.safetensors")) > 0
    with open("/proc/self/mountinfo") as f:
        line = [ln for ln in f if " %s " % m.mnt in ln][0]
    assert " - fuse.batchfs mydata " in line and "allow_other" in line and "max_read=65536" in line, line


def test_mountpoint_messages(batchfs, ds_plain, index_dir, tmp_path):
    missing = tmp_path / "no" / "mnt"
    p = subprocess.run([batchfs, ds_plain.path, str(missing), "-o", "index_dir=" + index_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=MOUNT_DEADLINE)
    assert p.returncode == 1
    assert p.stderr.decode() == "batchfs: %s: mount point does not exist\n" % missing
    f = tmp_path / "file"
    f.write_text("x")
    p = subprocess.run([batchfs, ds_plain.path, str(f), "-o", "index_dir=" + index_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=MOUNT_DEADLINE)
    assert p.returncode == 1
    assert p.stderr.decode() == "batchfs: %s: mount point is not a directory\n" % f


def test_dead_mount_is_named(batchfs, ds_plain, index_dir, tmp_path):
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    p = subprocess.Popen([batchfs, "-f", ds_plain.path, mnt, "-o", "index_dir=" + index_dir],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(os.path.join(mnt, "schema.json")), MOUNT_DEADLINE, "mount")
        p.kill()
        p.wait()
        line = _fail(batchfs, ds_plain.path, mnt, "batch_size=4", index_dir)
        assert line == ("batchfs: %s: a dead FUSE mount (its daemon is gone); unmount it first: "
                        "fusermount3 -u %s" % (mnt, mnt)), line
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        subprocess.run(["fusermount3", "-uz", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_image_option_quotes_the_option_whole(batchfs, ds_plain, index_dir, tmp_path):
    line = _fail(batchfs, ds_plain.path, tmp_path / "mnt", "image=img:224x", index_dir)
    assert line == "batchfs: option 'image=img:224x': size must be HxW with H and W in 1..65535", line
    line = _fail(batchfs, ds_plain.path, tmp_path / "mnt", "image=nosuch:2x2", index_dir)
    assert line == ("batchfs: option 'image=nosuch:2x2': no feature 'nosuch' in the schema "
                    "(bytes features: img, name, tags)"), line


def test_features_option_names_the_features(batchfs, ds_plain, index_dir, tmp_path):
    line = _fail(batchfs, ds_plain.path, tmp_path / "mnt", "features=x,nosuch", index_dir)
    assert line == ("batchfs: option 'features=x,nosuch': no feature 'nosuch' in the schema "
                    "(features: e, img, m/sub, name, tags, tokens, x, y)"), line


def test_image_option_on_a_feature_without_images_is_refused(batchfs, ds_plain, index_dir,
                                                             tmp_path):
    # img: 12 random bytes per record, not a JPEG or PNG
    line = _fail(batchfs, ds_plain.path, tmp_path / "mnt", "image=img:32x32", index_dir)
    assert line.startswith("batchfs: option 'image=img:32x32': feature 'img' holds other bytes, "
                           "not JPEG or PNG images (e.g. 12 bytes: "), line
    if not os.path.exists(SQUAD):
        pytest.skip("%s is missing" % SQUAD)
    line = _fail(batchfs, SQUAD, tmp_path / "mnt", "image=context:224x224", index_dir)
    assert line.startswith("batchfs: option 'image=context:224x224': feature 'context' holds "
                           "text, not JPEG or PNG images (e.g. \""), line


def test_foreground_says_when_ready(mounter, ds_plain):
    m = mounter(ds_plain.path, batch_size=32)
    nb = oracle.batches_per_epoch(ds_plain.n, 32)
    want = "batchfs: mounted %s at %s (%d records, %d batches per epoch)" % (
        ds_plain.path, os.path.realpath(m.mnt), ds_plain.n, nb)
    assert m.log_text().splitlines() == [want]


@pytest.mark.parametrize("kind", ["disjoint", "mostly_missing"])
def test_several_datasets_in_one_folder_are_named_once(mounter, gen, tmp_path, kind):
    """A folder of unrelated datasets mounts as one, each record padded to
    every dataset's features: one line at mount and the same in README.txt,
    again at a re-mount that reuses the index (reading no record for it).
    Disjoint: 3 datasets of 2 shards, no feature in common. Mostly missing:
    one dataset whose feature 'rare' is in 1 record of 10 (a feature missing
    from 20% of records, as ds_plain's 'name', says nothing: see
    test_foreground_says_when_ready)."""
    src = tmp_path / "src"
    src.mkdir()
    if kind == "disjoint":
        for i in range(3):
            d = tmp_path / ("d%d" % i)
            oracle.generate(gen, d, 60, ["f%d:float:2" % i, "g%d:int64:1" % i], shards=2,
                            seed=i + 1)
            for f in os.listdir(d):
                shutil.copy(os.path.join(d, f), src / ("d%d-%s" % (i, f)))
        want = r"6 features are missing from most records \('f0' is in 60 of 180\)"
    else:
        oracle.generate(gen, src, 400, ["x:float:2", "rare:int64:1,missing=0.9"], shards=2,
                        seed=5)
        want = r"feature 'rare' is missing from most records \(it is in \d+ of 400\)"
    for n in range(2):
        m = mounter(str(src), batch_size=8)
        lines = [ln for ln in m.log_text().splitlines() if "several datasets" in ln]
        assert len(lines) == 1 and re.search(want, lines[0]), m.log_text()
        assert lines[0].startswith("batchfs: %s: " % src), lines[0]
        readme = m.read("README.txt").decode()
        assert "Warning: " + lines[0][len("batchfs: "):] + "\n" in readme, readme[-800:]
        assert m.json("stats.json")["index_reused"] == (n == 1)
        m.stop()


def test_daemon_mode_prints_nothing(batchfs, ds_plain, index_dir, tmp_path):
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    try:
        p = subprocess.run([batchfs, ds_plain.path, mnt, "-o", "index_dir=" + index_dir],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=MOUNT_DEADLINE)
        assert p.returncode == 0 and p.stdout == b"" and p.stderr == b"", p
        assert os.path.exists(os.path.join(mnt, "schema.json"))
    finally:
        unmount(mnt)


def test_inspect_names_the_compression(batchfs, ds_plain, ds_gzip):
    for ds, comp in ((ds_plain, "none"), (ds_gzip, "gzip")):
        shard = oracle.list_shards(ds.path)[0]
        r = subprocess.run([batchfs, "inspect", "--records", "0", shard], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=MOUNT_DEADLINE)
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode().splitlines()[0] == "%s: TFRecord, compression: %s" % (shard, comp)


def test_batch_dataset_on_rank_folders_says_to_pass_one(mounter, ds_plain):
    pytest.importorskip("torch")
    pydir = os.environ.get("BFS_PYTHONPATH") or os.path.join(oracle.repo_root(), "python")
    if pydir not in sys.path:
        sys.path.insert(0, pydir)
    import batchfs as bfs
    import batchfs.torch as bt
    m = mounter(ds_plain.path, world=2)
    with pytest.raises(bfs.BatchfsError, match=r"pass a rank's folder, .*/rank-RRRR, e\.g\. .*/rank-0000"):
        bt.BatchDataset(m.mnt)
    assert len(bt.BatchDataset(os.path.join(m.mnt, "rank-0001"))) > 0


def test_man_page_placeholders_render(tmp_path):
    if shutil.which("scdoc") is None:
        pytest.skip("scdoc is not installed")
    src = os.path.join(oracle.repo_root(), "doc", "batchfs.1.scd")
    with open(src, "rb") as f:
        troff = subprocess.run(["scdoc"], stdin=f, stdout=subprocess.PIPE, check=True).stdout.decode()
    # an underscore pair scdoc left as text: a placeholder meant to be underlined
    left = [ln for ln in troff.splitlines() if re.search(r"(?:^|\\f[BRI]|[^\w])_[A-Z][A-Za-z]*_", ln)]
    assert left == [], left
    assert r"\fBimage=\fR\fIFEATURE\fR\fB:\fR\fIHxW\fR" in troff
