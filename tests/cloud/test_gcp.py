# SPDX-License-Identifier: Apache-2.0
"""Google's Application Default Credentials (decoder/cloud/credgcp.c) against
tests/cloud/gcpendpoints.py, a token endpoint and a metadata server that
check what Google's check (the JWT's RS256 signature with the key's public
half, its claims iss, scope, aud, iat, exp; the refresh token grant; the
Metadata-Flavor header), with tokens that expire every few seconds.

What must be true (docs/credentials.md):
- the chain is Google's: GOOGLE_APPLICATION_CREDENTIALS (a service-account
  key or an authorized_user file), then the gcloud ADC file (under
  CLOUDSDK_CONFIG or ~/.config/gcloud), then the metadata server;
- tokens are refreshed ahead of expiry, off the caller's path: a client
  asking all the time is never refused and never given an expired token;
- the metadata server down for longer than a token lasts: gets fail with a
  line naming it, and succeed again once it is back;
- no credentials anywhere: one "looked in" line, at once;
- parity: python3-google-auth's service-account flow gets a token from the
  same endpoint, its assertion and ours carry the same header and claims;
- nothing secret (token, key, refresh token, client secret) is printed.

gcptool (BFS_GCPTOOL, default build/tests/cloud/gcptool) drives the chain.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "s3"))
sys.path.insert(0, HERE)
import s3env  # noqa: E402

from gcpenv import (KID, SA_EMAIL, SCOPE, USER, VM_EMAIL, Endpoints, google_env,  # noqa: E402
                    new_key, register, sa_info, write_json)


def tool_path():
    p = os.environ.get("BFS_GCPTOOL") or os.path.join(REPO, "build", "tests", "cloud", "gcptool")
    if not os.access(p, os.X_OK):
        pytest.skip("gcptool not built at %s (make check TESTS= builds it)" % p)
    return p


@pytest.fixture(scope="session")
def key():
    return new_key()


@pytest.fixture(scope="session")
def endpoints_server(key):
    e = Endpoints()
    register(e, key)
    yield e
    e.stop()


@pytest.fixture
def gcp(endpoints_server):
    endpoints_server.reset()
    endpoints_server.config(lifetime=3600)
    return endpoints_server


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


def clean_env(home, **extra):
    """No Google or AWS variable of the caller's; HOME the test's; an
    unreachable metadata server unless the test gives one."""
    return google_env(s3env.free_env(str(home)), **extra)


def run_tool(env, *args, timeout=60):
    return subprocess.run([tool_path(), "chain"] + [str(a) for a in args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def stats_of(r):
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def assert_no_secret(text, key):
    for s in ["ya29.", "PRIVATE KEY", key[0].splitlines()[1][:40], USER["client_secret"],
              USER["refresh_token"], "eyJ"]:
        assert s not in text, "a secret (%s...) was printed" % s[:6]


# ---- the chain ------------------------------------------------------------------------

def test_the_chain_is_googles_order(gcp, key, home, tmp_path):
    gcloud = home / ".config" / "gcloud" / "application_default_credentials.json"
    sa = write_json(tmp_path / "sa.json", sa_info(key, gcp.token_uri))
    # 3. only the metadata server
    env = clean_env(home, GCE_METADATA_HOST=gcp.host)
    r = run_tool(env)
    assert r.returncode == 0, r.stderr
    assert "via the metadata server at %s" % gcp.host in r.stdout
    assert VM_EMAIL in r.stdout
    # 2. the gcloud ADC file comes before it
    write_json(gcloud, dict(USER, type="authorized_user", token_uri=gcp.token_uri))
    r = run_tool(env)
    assert r.returncode == 0, r.stderr
    assert "user credentials (%s, from the gcloud ADC file)" % gcloud in r.stdout
    # ... and CLOUDSDK_CONFIG moves it
    other = tmp_path / "sdk"
    other.mkdir()
    r = run_tool(dict(env, CLOUDSDK_CONFIG=str(other)))
    assert "via the metadata server" in r.stdout
    # 1. GOOGLE_APPLICATION_CREDENTIALS comes first
    r = run_tool(dict(env, GOOGLE_APPLICATION_CREDENTIALS=sa))
    assert r.returncode == 0, r.stderr
    assert "service account %s (key file %s, from GOOGLE_APPLICATION_CREDENTIALS)" % (
        SA_EMAIL, sa) in r.stdout
    grants = [(e["grant"], e["status"]) for e in gcp.log()]
    assert grants == [("metadata", 200), ("refresh_token", 200), ("metadata", 200),
                      ("jwt-bearer", 200)], grants
    assert_no_secret(r.stdout + r.stderr, key)


def test_no_credentials_is_one_line_at_once(home):
    t0 = time.monotonic()
    r = run_tool(clean_env(home, GCE_METADATA_HOST="127.0.0.1:1"))
    took = time.monotonic() - t0
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "looked in GOOGLE_APPLICATION_CREDENTIALS (not set)" in lines[0]
    assert "application_default_credentials.json (none)" in lines[0]
    assert "the metadata server at 127.0.0.1:1" in lines[0]
    assert took < 3, took


def test_bad_files_and_refusals_say_where_without_secrets(gcp, key, home, tmp_path):
    ext = write_json(tmp_path / "ext.json", {"type": "external_account", "audience": "//iam"})
    r = run_tool(clean_env(home, GOOGLE_APPLICATION_CREDENTIALS=ext))
    assert r.returncode == 1
    assert ext in r.stderr and "external_account" in r.stderr and "not supported" in r.stderr
    missing = str(tmp_path / "nosuch.json")
    r = run_tool(clean_env(home, GOOGLE_APPLICATION_CREDENTIALS=missing))
    assert r.returncode == 1 and missing in r.stderr and "does not exist" in r.stderr
    # a refresh token the endpoint refuses
    bad = write_json(tmp_path / "user.json", dict(USER, type="authorized_user",
                                                 refresh_token="1//revoked-SECRET",
                                                 token_uri=gcp.token_uri))
    r = run_tool(clean_env(home, GOOGLE_APPLICATION_CREDENTIALS=bad))
    assert r.returncode == 1
    assert "HTTP 400" in r.stderr and "invalid_grant" in r.stderr and bad in r.stderr
    assert "revoked-SECRET" not in r.stderr
    # a key the endpoint does not know (another kid): the signature is
    # refused, by a server that quotes the assertion back
    gcp.config(echo=True)
    info = sa_info(key, gcp.token_uri)
    info["private_key_id"] = "not-registered"
    wrong = write_json(tmp_path / "wrong.json", info)
    r = run_tool(clean_env(home, GOOGLE_APPLICATION_CREDENTIALS=wrong))
    assert r.returncode == 1 and "HTTP 400 (error: invalid_grant" in r.stderr, r.stderr
    assert "left out" in r.stderr
    gcp.config(echo=False)
    r = run_tool(clean_env(home, GOOGLE_APPLICATION_CREDENTIALS=wrong))
    assert r.returncode == 1 and "Invalid JWT Signature" in r.stderr, r.stderr
    assert_no_secret(r.stdout + r.stderr, key)


# ---- refresh ahead of expiry ---------------------------------------------------------

@pytest.mark.parametrize("kind", ["service_account", "authorized_user", "metadata"])
def test_tokens_that_expire_every_few_seconds_are_never_missed(gcp, key, home, tmp_path, kind):
    # 3 s: expiries are whole seconds (time_t, expires_in), so a token may
    # be believed a second shorter than it is; 3 s leaves a refresh room
    gcp.config(lifetime=3)
    if kind == "service_account":
        env = clean_env(home, GOOGLE_APPLICATION_CREDENTIALS=write_json(
            tmp_path / "sa.json", sa_info(key, gcp.token_uri)))
    elif kind == "authorized_user":
        env = clean_env(home, GOOGLE_APPLICATION_CREDENTIALS=write_json(
            tmp_path / "u.json", dict(USER, type="authorized_user", token_uri=gcp.token_uri)))
    else:
        env = clean_env(home, GCE_METADATA_HOST=gcp.host)
    r = run_tool(env, 5, 20)
    st = stats_of(r)
    assert st["failed"] == 0 and st["expired_handed_out"] == 0, st
    assert st["gets"] > 150
    # refreshed ahead: several tokens in 5 s of 3 s tokens, no failed fetch
    assert st["tokens"] >= 3 and st["failures"] == 0, st
    ok = [e for e in gcp.log() if e["status"] == 200]
    assert len(ok) == st["refreshes"]
    assert_no_secret(r.stdout + r.stderr, key)


def test_the_metadata_server_down_past_expiry_then_back(gcp, key, home):
    gcp.config(lifetime=2)
    env = clean_env(home, GCE_METADATA_HOST=gcp.host)
    p = subprocess.Popen([tool_path(), "chain", "10", "20"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        gcp.config(down=True)  # every token request reset: longer than a token lasts
        time.sleep(4.5)
        gcp.config(down=False)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()
    st = json.loads(out.strip().splitlines()[-1])
    # the token held until it expired, then gets failed, naming the server
    assert st["failed"] > 0 and st["expired_handed_out"] == 0, st
    assert 1500 < st["first_fail_ms"] < 5000, st
    assert "metadata server" in st["why"] and "expired" in st["why"], st["why"]
    assert st["failures"] > 0
    # and once it was back, a fresh token came before the end
    assert st["recovered"] and st["last_fail_ms"] < 9000, st
    assert_no_secret(out + err, key)


# ---- parity with google-auth ---------------------------------------------------------

def test_google_auth_and_batchfs_assert_alike_at_the_same_endpoint(gcp, key, home, tmp_path):
    from google.auth.transport.requests import Request
    from google.oauth2 import service_account

    info = sa_info(key, gcp.token_uri)
    creds = service_account.Credentials.from_service_account_info(info, scopes=[SCOPE])
    import requests
    sess = requests.Session()
    sess.trust_env = False  # no proxy for loopback
    creds.refresh(Request(session=sess))
    assert creds.token and creds.valid
    r = run_tool(clean_env(home, GOOGLE_APPLICATION_CREDENTIALS=write_json(
        tmp_path / "sa.json", info)))
    assert r.returncode == 0, r.stderr
    theirs, ours = [e for e in gcp.log() if e["grant"] == "jwt-bearer"]
    assert theirs["status"] == 200 and ours["status"] == 200, (theirs, ours)
    assert "batchfs" in (ours["user_agent"] or "") and "batchfs" not in (theirs["user_agent"] or "")
    # the same header and claims (iat and exp: each its own time, one hour apart)
    for h in (theirs["jwt_header"], ours["jwt_header"]):
        assert h == {"alg": "RS256", "typ": "JWT", "kid": KID}, h
    tc, oc = theirs["jwt_claims"], ours["jwt_claims"]
    assert set(tc) == set(oc) == {"iss", "scope", "aud", "iat", "exp"}, (tc, oc)
    for k in ("iss", "scope", "aud"):
        assert tc[k] == oc[k], k
    assert tc["exp"] - tc["iat"] == oc["exp"] - oc["iat"] == 3600
    assert abs(tc["iat"] - oc["iat"]) < 60


GOOGLE_AUTH_METADATA = """
import requests
from google.auth import compute_engine
from google.auth.transport.requests import Request
s = requests.Session()
s.trust_env = False
c = compute_engine.Credentials()
c.refresh(Request(session=s))
print(c.service_account_email, c.valid)
"""


def test_google_auth_reads_the_same_metadata_server_and_user_file(gcp, key, home, tmp_path):
    """The doubles answer google-auth's own requests (its compute_engine and
    user credentials), and batchfs's chain takes the same places: the
    endpoints speak the protocol, not a dialect of batchfs's."""
    from google.auth.transport.requests import Request
    from google.oauth2 import credentials as user_credentials
    import requests

    # the metadata server: google-auth 1.5 reads GCE_METADATA_ROOT at import
    env = clean_env(home, GCE_METADATA_ROOT=gcp.host, GCE_METADATA_HOST=None)
    r = subprocess.run(["/usr/bin/python3", "-c", GOOGLE_AUTH_METADATA], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == [VM_EMAIL, "True"], r.stderr[-2000:]
    r = run_tool(env)  # batchfs takes the older name too
    assert r.returncode == 0 and "via the metadata server at %s" % gcp.host in r.stdout, r.stderr
    # a user's refresh token, as gcloud writes it
    sess = requests.Session()
    sess.trust_env = False
    c = user_credentials.Credentials(None, refresh_token=USER["refresh_token"],
                                     token_uri=gcp.token_uri, client_id=USER["client_id"],
                                     client_secret=USER["client_secret"])
    c.refresh(Request(session=sess))
    assert c.valid
    f = write_json(home / ".config" / "gcloud" / "application_default_credentials.json",
                   dict(USER, type="authorized_user"))
    grants = [e for e in gcp.log() if e["grant"] == "refresh_token"]
    assert [e["status"] for e in grants] == [200]
    # the gcloud file has no token_uri: the default is Google's own; here the
    # endpoint's, through the file google-auth would read as well
    write_json(home / ".config" / "gcloud" / "application_default_credentials.json",
               dict(USER, type="authorized_user", token_uri=gcp.token_uri))
    r = run_tool(clean_env(home))
    assert r.returncode == 0 and f in r.stdout, r.stderr
    grants = [e for e in gcp.log() if e["grant"] == "refresh_token"]
    assert [e["status"] for e in grants] == [200, 200]
    assert "batchfs" in grants[1]["user_agent"] and "batchfs" not in grants[0]["user_agent"]
    assert_no_secret(r.stdout + r.stderr, key)
