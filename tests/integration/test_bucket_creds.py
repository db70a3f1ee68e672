# SPDX-License-Identifier: Apache-2.0
"""A bucket mount whose credentials expire every few seconds, as an
instance role's do every hour: the mount's keeper refreshes them ahead of
expiry from the instance metadata service (tests/cloud/awsendpoints.py,
IMDSv2), and s3proxy.py in front of s3rver accepts only the credentials
that service issued, refusing expired ones as S3 does (400 ExpiredToken).

What must be true (docs/credentials.md):
- an epoch read across several rotations has no failed read, its bytes
  are a local mount's, and no request goes out with expired credentials;
- README.txt and stats.json name the source, the expiry and the refresh
  count, and no secret or token is in anything the mount shows or logs;
- the metadata service down for longer than the credentials last: reads
  fail with EIO and errors.txt says why; back up, the mount recovers.
"""
import calendar
import concurrent.futures
import errno
import os
import re
import subprocess
import sys
import time

import pytest

import oracle
from fusemount import BatchfsMount, mount_opts
from helpers import read_or_errno

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cloud"))
sys.path.insert(0, os.path.join(HERE, "..", "s3"))
import credenv  # noqa: E402
import s3env  # noqa: E402

BUCKET = "bfs-creds"
FEATURES = ["x:float:4", "img:bytes:1,len=20000"]  # 2.4 MB: over readahead=1M
B = 8


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    d = tmp_path_factory.mktemp("s3c")
    with s3env.behind_proxy(d, [BUCKET], pytest.skip) as ctl:
        yield ctl


@pytest.fixture(scope="module")
def data(s3, gen, work):  # noqa: F811
    d = work / "creds-plain"
    oracle.generate(gen, d, 120, FEATURES, shards=3, seed=21)
    s3env.put_files(s3.s3rver.url, BUCKET, str(d), "plain/")
    return str(d)


@pytest.fixture
def ep(tmp_path, s3):
    e = credenv.Endpoints(tmp_path / "ep", lifetime=4)
    s3.reset()
    s3.config(sigv4_ledger=e.ledger)
    yield e
    e.stop()


@pytest.fixture
def mounts(batchfs, tmp_path):
    ms = []

    def mount(source, env=None, **opts):
        n = len(ms) + 1
        m = BatchfsMount(batchfs, source, tmp_path / ("mnt%d" % n),
                         mount_opts(str(tmp_path / ("ix%d" % n)), **opts),
                         str(tmp_path / ("log%d" % n)), env=env)
        ms.append(m)
        return m.start()

    yield mount
    for m in reversed(ms):
        m.stop()


def bucket_mount(mounts, s3, ep, tmp_path, **opts):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # no disk cache: requests go on through every epoch (each signed with
    # the credentials of its time), as they did before it was on by default
    return mounts("s3://%s/plain/" % BUCKET, env=ep.imds_env(str(home)), endpoint=s3.endpoint,
                  region="us-east-1", batch_size=B, shuffle="global", prefetch=0, shadow="off",
                  cache_size="1M", readahead="1M", disk_cache="off", **opts)


def paths(m, epoch):
    nb = m.json("schema.json")["batches_per_epoch"]
    return ["epoch-%04d/batch-%06d.safetensors" % (epoch, b) for b in range(nb)]


def test_an_epoch_read_across_rotations_has_no_failed_read(mounts, s3, ep, data, tmp_path):
    local = mounts(data, batch_size=B, shuffle="global", prefetch=0)
    m = bucket_mount(mounts, s3, ep, tmp_path)
    s3.config(delay_ms=15)  # an epoch lasts several lifetimes of 4 s
    t0 = time.monotonic()
    epochs = 0
    while time.monotonic() - t0 < 10 or epochs < 2:
        for p in paths(m, epochs):
            got = read_or_errno(m.path(p))
            assert not isinstance(got, int), (p, got, m.read("errors.txt"))
            assert got == local.read(p), p
        epochs += 1
    log = s3.log()
    keys = {e["headers"]["authorization"].split("Credential=")[1].split("/")[0] for e in log}
    assert len(keys) >= 3, (keys, len(log), epochs)  # signed with at least three rotations' keys
    assert all(e["sig"] == "ok" for e in log), [e["sig"] for e in log if e["sig"] != "ok"]
    st = m.json("stats.json")
    assert st["credentials"] == "instance role `train-role` via IMDSv2"
    assert st["credentials_refreshes"] >= 3 and st["credentials_valid"] is True
    assert st["credentials_expires"] > time.time() - 1
    readme = m.read("README.txt").decode()
    assert "instance role `train-role` via IMDSv2" in readme and "expires 20" in readme
    assert "stats.json and `batchfs stats` show their current expiry" in readme
    assert m.read("errors.txt") == b""
    tool = subprocess.run([m.binary, "stats", str(m.mnt)], capture_output=True, timeout=30)
    # the credentials' line as docs/credentials.md shows it: the key id
    # masked, the expiry a date
    line = re.search(rb"^credentials +instance role `train-role` via IMDSv2, key id \*{4}\w{4}, "
                     rb"expires (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC, refreshed \d+ times$",
                     tool.stdout, re.M)
    assert line, tool.stdout
    when = calendar.timegm(time.strptime(line.group(1).decode(), "%Y-%m-%d %H:%M:%S"))
    assert time.time() - 1 < when < time.time() + 60, line.group(0)
    assert b"epoch s" not in tool.stdout and re.search(rb"^ +valid now; ", tool.stdout, re.M)
    # no secret or token anywhere the mount shows or logs
    shown = b"".join(m.read(f) for f in ("README.txt", "stats.json", "errors.txt"))
    shown += tool.stdout + tool.stderr
    m.stop()
    shown += open(m.log, "rb").read()
    for s in credenv.secrets_of(ep):
        assert s.encode() not in shown


def test_the_provider_down_past_expiry_fails_reads_then_the_mount_recovers(mounts, s3, ep, data,
                                                                         tmp_path):
    local = mounts(data, batch_size=B, shuffle="global", prefetch=0)
    m = bucket_mount(mounts, s3, ep, tmp_path)
    ps = paths(m, 0)
    assert m.read(ps[0]) == local.read(ps[0])
    ep.config(down=True)
    time.sleep(4.5)  # the credentials expire
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda p: read_or_errno(m.path(p)), ps[-4:]))
    assert got == [errno.EIO] * 4, got
    assert time.monotonic() - t0 < 10  # no read waits on a provider that is down
    errors = m.read("errors.txt").decode()
    assert "cannot refresh the credentials" in errors and "HTTP 503" in errors, errors
    assert not [e for e in s3.log()[1:] if e.get("sig") == "expired"]  # none sent expired
    st = m.json("stats.json")
    assert st["credentials_valid"] is False and st["credentials_refresh_failures"] >= 1
    ep.config(down=False)
    deadline = time.monotonic() + 20
    while True:
        got = read_or_errno(m.path(ps[-1]))
        if got == local.read(ps[-1]) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert got == local.read(ps[-1])
    for p in ps[-4:]:
        assert m.read(p) == local.read(p)
    assert m.json("stats.json")["credentials_valid"] is True


def test_a_mount_without_credentials_names_the_places_it_looked_in(batchfs, s3, tmp_path):
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([batchfs, "-f", "s3://%s/plain/" % BUCKET, str(mnt), "-o",
                        "endpoint=%s,index_dir=%s" % (s3.endpoint, tmp_path / "ix")],
                       capture_output=True, env=s3env.free_env(str(home)), timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and err.startswith("batchfs: "), err
    for place in ("no credentials: looked in the environment", "web identity",
                  "profile 'default'", "container credentials", "instance metadata service",
                  "no_sign_request"):
        assert place in err, place
    assert not os.path.ismount(mnt)
