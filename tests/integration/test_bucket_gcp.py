# SPDX-License-Identifier: Apache-2.0
"""gs:// mounts with Google's Application Default Credentials: s3rver behind
tests/s3/s3proxy.py, which checks every Bearer token at the tokeninfo URL of
tests/cloud/gcpendpoints.py (Google's token endpoint and metadata server,
here handing out tokens that last 3 seconds), as Cloud Storage does (401 to
an unknown or expired token). endpoint= points gs:// at the proxy.

What must be true (docs/gcs.md):
- a gs:// mount with no HMAC key takes the metadata server's token (or the
  service-account key GOOGLE_APPLICATION_CREDENTIALS names) and sends it as
  "Authorization: Bearer", no SigV4; an epoch read while tokens expire every
  few seconds has no failed read, never sends an expired token, and serves
  the bytes of a local mount of the same files;
- the metadata server down for longer than a token lasts: reads fail with
  EIO and errors.txt says why; the mount reads again once it is back;
- a 401 to a token before its expiry: one refresh, one more try;
- HMAC keys where given are used (SigV4), no_sign_request sends nothing;
- no credentials anywhere: the mount fails at once with one line naming
  the places looked in;
- README.txt names the source, never the token; no token, key or assertion
  is in anything batchfs writes or prints.
"""
import errno
import json
import os
import subprocess
import sys
import time

import pytest

import oracle
from fusemount import BatchfsMount as Mount
from fusemount import MOUNT_DEADLINE, POLL, MountError
from fusemount import mount_opts as _opts
from helpers import read_or_errno

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "s3"))
sys.path.insert(0, os.path.join(HERE, "..", "cloud"))
import s3env  # noqa: E402
from gcpenv import (SA_EMAIL, VM_EMAIL, Endpoints, google_env, new_key, register,  # noqa: E402
                    sa_info, write_json)

BUCKET = "bfs-gcs"
# 300 records of ~16 KB: 5 MB, more than the smallest readahead (1M), so
# that a mount with readahead=1M fetches all through an epoch, not at once
FEATURES = ["x:float:4", "tokens:int64:0..12", "img:bytes:1,len=16000"]
B = 16
LIFETIME = 3  # seconds a token lasts


@pytest.fixture(scope="session")
def servers(tmp_path_factory, gen):
    d = tmp_path_factory.mktemp("gcs")
    with s3env.behind_proxy(d, [BUCKET], pytest.skip) as ctl:
        ep = Endpoints()
        ctl.gcp = ep
        ctl.key = new_key()
        register(ep, ctl.key)
        local = d / "local"
        oracle.generate(gen, str(local), 300, FEATURES, shards=3, compression="none", seed=31)
        s3env.put_files(ctl.s3rver.url, BUCKET, str(local), "train/")
        ctl.local = str(local)
        try:
            yield ctl
        finally:
            ep.stop()


@pytest.fixture
def gcs(servers):
    """The proxy checking Bearer tokens (and SigV4 for HMAC keys), no rule,
    an empty log; the token server up, tokens of LIFETIME seconds."""
    servers.reset()
    servers.config(bearer=servers.gcp.tokeninfo,
                   sigv4="%s:%s" % (s3env.S3RVER_KEY, s3env.S3RVER_SECRET))
    servers.gcp.reset()
    servers.gcp.config(lifetime=LIFETIME)
    return servers


def gcs_env(s, **extra):
    """No AWS key, HOME without ~/.aws or gcloud, the metadata server the
    test's unless extra says otherwise."""
    extra.setdefault("GCE_METADATA_HOST", s.gcp.host)
    return google_env(s3env.free_env(s.home), **extra)


class GcsMount(Mount):
    def __init__(self, binary, source, mnt, opts, log, env):
        super().__init__(binary, source, mnt, opts, log, env=env)

    def start(self):
        os.makedirs(self.mnt, exist_ok=True)
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=logf,
                                         stderr=logf, env=self.env)
        end = time.monotonic() + MOUNT_DEADLINE
        while not self._is_ready():
            rc = self.proc.poll()
            if rc is not None:
                raise MountError("batchfs exited with %d before mounting %s:\n%s" %
                                 (rc, self.source, self.log_text()))
            if time.monotonic() > end:
                raise MountError("mount of %s not ready:\n%s" % (self.source, self.log_text()))
            time.sleep(POLL)
        return self


@pytest.fixture
def gmount(batchfs, gcs, tmp_path):
    mounts = []

    def mount(source, env, **opts):
        n = len(mounts) + 1
        opts.setdefault("endpoint", gcs.endpoint)
        m = GcsMount(batchfs, source, tmp_path / ("mnt%d" % n),
                     _opts(str(tmp_path / ("ix%d" % n)), **opts), str(tmp_path / ("log%d" % n)),
                     env)
        mounts.append(m)
        return m.start()

    yield mount
    for m in reversed(mounts):
        m.stop()


@pytest.fixture
def local_batches(batchfs, servers, tmp_path):
    """{path: bytes} of every batch of a local mount of the same files."""
    def ref(**opts):
        m = Mount(batchfs, servers.local, tmp_path / "ref", _opts(str(tmp_path / "ixref"), **opts),
                  str(tmp_path / "logref"))
        try:
            m.start()
            nb = m.json("schema.json")["batches_per_epoch"]
            return {p: m.read(p) for p in batch_paths(nb, opts.get("epochs", 1))}
        finally:
            m.stop()
    return ref


def batch_paths(nb, epochs=1):
    return ["epoch-%04d/batch-%06d.safetensors" % (e, b) for e in range(epochs)
            for b in range(nb)]


def bearer_entries(log):
    return [e for e in log if e["headers"].get("authorization", "").startswith("Bearer ")]


def secrets_of(s):
    """What must never be written: the private key's body, the tokens the
    proxy saw, the user's refresh token and client secret."""
    from gcpenv import USER
    out = [s.key[0].splitlines()[1].encode(), USER["refresh_token"].encode(),
           USER["client_secret"].encode(), b"ya29.test-"]
    return out


def assert_nothing_secret(blobs, s):
    for blob in blobs:
        for n in secrets_of(s):
            assert n not in blob, (n[:8], blob[:500])


# ---------------------------------------------------------------------------------------


def test_a_metadata_server_token_reads_an_epoch_while_tokens_expire(gcs, gmount, local_batches):
    """Tokens last 3 s; the epoch is read slowly over about 8 s: several
    rotations, every read exact, every request with a token the store
    accepts (no 401, so none was sent expired), no SigV4."""
    opts = dict(batch_size=B, shuffle="global", prefetch=0)
    want = local_batches(**opts)
    # readahead and the cache held small, and no disk cache: the stage
    # cannot fetch the whole dataset in the first second, so requests go
    # out all through the 8 s
    m = gmount("gs://%s/train/" % BUCKET, gcs_env(gcs), readahead="1M", cache_size="1M",
               disk_cache="off", **opts)
    got = {}
    t0 = time.monotonic()
    for i, p in enumerate(sorted(want)):
        got[p] = read_or_errno(m.path(p))
        # spread the reads over about 8 s (2-3 token lifetimes and more)
        time.sleep(max(0.0, t0 + 8.0 * (i + 1) / len(want) - time.monotonic()))
    bad = [p for p in want if got[p] != want[p]]
    assert not bad, {p: got[p] if isinstance(got[p], int) else len(got[p]) for p in bad}
    log = gcs.log()
    assert log and all(e.get("sig") == "bearer ok" for e in log), \
        [(e["status"], e.get("sig")) for e in log if e.get("sig") != "bearer ok"][:5]
    assert not [e for e in log if e["status"] == 401]
    assert all("AWS4-HMAC-SHA256" not in e["headers"].get("authorization", "") for e in log)
    tokens = {e["headers"]["authorization"] for e in bearer_entries(log)}
    assert len(tokens) >= 3, len(tokens)  # rotated, ahead of expiry
    grants = [e for e in gcs.gcp.log() if e["grant"] == "metadata"]
    assert len(grants) >= 3 and all(e["status"] == 200 for e in grants)
    stats = m.json("stats.json")
    assert stats["failed_reads"] == 0 and stats["io_failed"] == 0, stats
    # where they came from, how often refreshed: never what they are
    assert VM_EMAIL in stats["credentials"] and stats["credentials_valid"], stats
    assert stats["credentials_refreshes"] >= 3 and stats["credentials_refresh_failures"] == 0
    readme = m.read("README.txt").decode()
    assert VM_EMAIL in readme and "metadata server" in readme, readme
    st = subprocess.run([m.binary, "stats", str(m.mnt)], capture_output=True, timeout=60)
    assert st.returncode == 0 and VM_EMAIL.encode() in st.stdout, st
    assert_nothing_secret([m.read("README.txt"), m.read("stats.json"), m.read("errors.txt"),
                           st.stdout, st.stderr], gcs)
    m.stop()
    assert_nothing_secret([open(m.log, "rb").read()], gcs)


def test_a_service_account_key_mount_sends_its_tokens(gcs, gmount, local_batches, tmp_path):
    opts = dict(batch_size=B, shuffle="block", block_size="2K")
    want = local_batches(**opts)
    key_file = write_json(tmp_path / "sa.json", sa_info(gcs.key, gcs.gcp.token_uri))
    m = gmount("gs://%s/train/" % BUCKET, gcs_env(gcs, GOOGLE_APPLICATION_CREDENTIALS=key_file),
               **opts)
    for p, data in want.items():
        assert m.read(p) == data, p
    log = gcs.log()
    assert log and all(e.get("sig") == "bearer ok" for e in log)
    grants = gcs.gcp.log()
    assert grants and all(e["grant"] == "jwt-bearer" and e["status"] == 200 for e in grants)
    assert all(e["iss"] == SA_EMAIL for e in grants)
    readme = m.read("README.txt").decode()
    assert SA_EMAIL in readme and key_file in readme, readme
    assert_nothing_secret([m.read("README.txt"), m.read("stats.json")], gcs)


def test_the_metadata_server_down_past_expiry_then_back(gcs, gmount, local_batches):
    """Down for longer than a token lasts: a read then fails with EIO once
    the client's retries are spent, errors.txt says why (the credentials
    expired and could not be refreshed from the metadata server), no
    request goes with an expired token; once it is back, the mount reads
    again, exact."""
    gcs.gcp.config(lifetime=2)
    opts = dict(batch_size=B, shuffle="global", prefetch=0)
    want = local_batches(**opts)
    paths = sorted(want)
    m = gmount("gs://%s/train/" % BUCKET, gcs_env(gcs), **opts)
    assert m.read(paths[0]) == want[paths[0]]
    gcs.gcp.config(down=True)
    time.sleep(2.5)  # the token held has expired by now
    got = read_or_errno(m.path(paths[-1]))
    assert got == errno.EIO, got if isinstance(got, int) else "bytes"
    errors = m.read("errors.txt").decode()
    assert "metadata server" in errors and "could not be refreshed" in errors, errors
    assert not [e for e in gcs.log() if e["status"] == 401], "an expired token was sent"
    stats = m.json("stats.json")
    assert not stats["credentials_valid"] and stats["credentials_refresh_failures"] > 0, stats
    gcs.gcp.config(down=False)
    deadline = time.monotonic() + 40  # the keeper's next try, backed off
    while True:
        got = read_or_errno(m.path(paths[-1]))
        if got == want[paths[-1]] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert got == want[paths[-1]], got if isinstance(got, int) else "other bytes"
    for p in paths[1:4]:
        assert m.read(p) == want[p], p
    assert not [e for e in gcs.log() if e["status"] == 401]
    assert_nothing_secret([m.read("errors.txt")], gcs)


def test_hmac_keys_where_given_and_no_sign_request(gcs, gmount):
    """AWS_* keys given: SigV4 to gs://, no token asked for; no_sign_request:
    no Authorization at all."""
    env = gcs_env(gcs, AWS_ACCESS_KEY_ID=s3env.S3RVER_KEY,
                  AWS_SECRET_ACCESS_KEY=s3env.S3RVER_SECRET)
    m = gmount("gs://%s/train/" % BUCKET, env, batch_size=B)
    m.read("epoch-0000/batch-000000.safetensors")
    log = gcs.log()
    assert log and all(e.get("sig") == "ok" for e in log), [e.get("sig") for e in log][:5]
    assert not gcs.gcp.log()
    m.stop()
    gcs.reset()
    gcs.config(bearer=gcs.gcp.tokeninfo)
    m = gmount("gs://%s/train/" % BUCKET, gcs_env(gcs), batch_size=B, no_sign_request=True)
    m.read("epoch-0000/batch-000000.safetensors")
    log = gcs.log()
    assert log and all("authorization" not in e["headers"] for e in log)
    assert not gcs.gcp.log()


def test_no_credentials_fail_the_mount_at_once_with_one_line(gcs, batchfs, tmp_path):
    mnt = tmp_path / "mnt-none"
    mnt.mkdir()
    env = gcs_env(gcs, GCE_METADATA_HOST="127.0.0.1:1")
    t0 = time.monotonic()
    r = subprocess.run([batchfs, "-f", "gs://%s/train/" % BUCKET, str(mnt), "-o",
                        "endpoint=%s,index_dir=%s" % (gcs.endpoint, tmp_path / "ix-none")],
                       capture_output=True, env=env, stdin=subprocess.DEVNULL, timeout=60)
    took = time.monotonic() - t0
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "GOOGLE_APPLICATION_CREDENTIALS" in err and "metadata server" in err, err
    assert "application_default_credentials.json" in err
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err
    assert took < 10, took
    assert not gcs.log()  # nothing was sent to the store


def test_the_proxy_refuses_unknown_and_expired_tokens_as_gcs_does(gcs):
    """The test double itself: a token the endpoint issued passes while it
    lasts; an unknown one, or the same after its expiry, gets 401."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    md = urllib.request.Request("http://%s/computeMetadata/v1/instance/service-accounts/"
                                "default/token" % gcs.gcp.host,
                                headers={"Metadata-Flavor": "Google"})
    with opener.open(md, timeout=10) as r:
        tok = json.load(r)["access_token"]
    key = sorted(os.listdir(gcs.local))[0]

    def get(token):
        req = urllib.request.Request("%s/%s/train/%s" % (gcs.endpoint, BUCKET, key),
                                     headers={"Authorization": "Bearer " + token,
                                              "Range": "bytes=0-9"})
        try:
            with opener.open(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    status, body = get(tok)
    assert status == 206 and len(body) == 10
    status, body = get("ya29.test-unknown")
    assert status == 401 and b"AuthenticationRequired" in body
    time.sleep(LIFETIME + 0.5)
    status, body = get(tok)
    assert status == 401 and b"AuthenticationRequired" in body
    # without the Metadata-Flavor header the metadata server refuses
    try:
        opener.open(urllib.request.Request(md.full_url), timeout=10)
        assert False, "the metadata server answered without Metadata-Flavor"
    except urllib.error.HTTPError as e:
        assert e.code == 403


def test_a_401_to_a_token_refreshes_it_once_and_the_read_passes(gcs, gmount, local_batches,
                                                               tmp_path):
    """The store refuses a token before its expiry (revoked, or a clock
    ahead): one refresh, the request once more with the new token, the
    bytes right. Tokens last an hour here: only the 401 makes a new one (a
    service-account key: a metadata server would hand out the one it
    holds)."""
    gcs.gcp.config(lifetime=3600)
    opts = dict(batch_size=B, shuffle="global", prefetch=0)
    want = local_batches(**opts)
    paths = sorted(want)
    key_file = write_json(tmp_path / "sa.json", sa_info(gcs.key, gcs.gcp.token_uri))
    m = gmount("gs://%s/train/" % BUCKET, gcs_env(gcs, GOOGLE_APPLICATION_CREDENTIALS=key_file),
               **opts)
    assert m.read(paths[0]) == want[paths[0]]
    grants = len(gcs.gcp.log())
    gcs.reset()
    gcs.config(bearer=gcs.gcp.tokeninfo)
    gcs.rules({"match": "^GET /%s/train/" % BUCKET, "action": "status", "status": 401,
               "code": "AuthenticationRequired", "message": "Invalid Credentials", "first": 1})
    for p in paths[1:]:
        assert m.read(p) == want[p], p
    log = gcs.log()
    refused = [e for e in log if e["status"] == 401]
    assert len(refused) == 1, [e["status"] for e in log]
    # (None: a read-ahead still in flight when the log was taken)
    assert all(e["status"] in (200, 206, None) for e in log if e["status"] != 401), \
        [e["status"] for e in log]
    r = refused[0]
    # that request once more (other reads were in flight with the old token)
    again = [e for e in log[log.index(r) + 1:] if e["target"] == r["target"]
             and e["headers"].get("range") == r["headers"].get("range")]
    assert len(again) == 1 and again[0]["status"] == 206
    assert again[0]["headers"]["authorization"] != r["headers"]["authorization"]
    assert len(gcs.gcp.log()) == grants + 1  # one refresh
    stats = m.json("stats.json")
    assert stats["failed_reads"] == 0 and stats["credentials_expired_answers"] == 1, stats
