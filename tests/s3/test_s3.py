# SPDX-License-Identifier: Apache-2.0
"""The object-store client (decoder/cloud/s3.h, through tests/s3/s3tool) against a
real S3 server (s3rver, which checks every signature against its S3RVER
account) and the fault-injecting proxy in front of it (s3proxy.py)."""
import datetime
import os
import re
import shutil
import subprocess
import time
from unittest import mock
from urllib.parse import quote

import pytest

import s3env
from conftest import BUCKET

FAST = "tries=4,backoff_ms=10,backoff_max_ms=40,retry_ms=5000,stall_ms=1000,connect_ms=1000"


def opts(endpoint, *more):
    return ",".join(["endpoint=" + endpoint] + [m for m in more if m])


def url(key=""):
    return "s3://%s/%s" % (BUCKET, key)


def one_line_error(r):
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.count("\n") == 1 and err.startswith("s3tool: "), err
    return err


def requests_for(log, key):
    target = "/%s/%s" % (BUCKET, quote(key, safe="/~"))
    return [e for e in log if e["target"].split("?")[0] == target]


# ---- listing -------------------------------------------------------------

def test_list_walks_every_page_and_sorts(tool, proxy, objects, boto):
    r = tool.run("ls", url("many/"), opts=opts(proxy.url_endpoint, "max_keys=7"))
    lines = r.stdout.decode().splitlines()
    want = sorted(k for k in objects.data if k.startswith("many/"))
    assert [ln.split("\t")[0] for ln in lines] == want
    for ln in lines:
        k, size, etag = ln.split("\t")
        assert int(size) == len(objects.data[k]) and etag == objects.etag(k)
    pages = [e for e in proxy.log() if "list-type=2" in e["target"]]
    assert len(pages) == (len(want) + 6) // 7
    assert "continuation-token" not in pages[0]["target"]
    # s3rver's tokens are base64: '/', '+' and '=' are signed and sent encoded
    assert all("continuation-token=" in p["target"] for p in pages[1:])
    assert all(p["status"] == 200 and p["sig"] == "ok" for p in pages)
    # the same as botocore sees
    got = boto.list_objects_v2(Bucket=BUCKET, Prefix="many/")["Contents"]
    assert [(o["Key"], o["Size"], o["ETag"]) for o in got] == \
        [(k, int(s), e) for k, s, e in (ln.split("\t") for ln in lines)]


def test_a_prefix_with_spaces_and_odd_keys_lists_exactly_its_keys(tool, proxy, objects):
    r = tool.run("ls", url("odd/dir a/"), opts=opts(proxy.url_endpoint, "max_keys=2"))
    keys = [ln.split("\t")[0] for ln in r.stdout.decode().splitlines()]
    want = sorted(k for k in objects.data if k.startswith("odd/dir a/"))
    assert keys == want, keys
    assert "odd/dir ab/not-under.gz" not in keys
    assert all("prefix=odd%2Fdir%20a%2F" in e["target"] and e["sig"] == "ok"
               for e in proxy.log())


def test_a_glob_lists_the_names_that_match_in_its_folder(tool, proxy, objects):
    r = tool.run("ls", url("train/part-*.tfrecord.gz"), opts=opts(proxy.url_endpoint))
    keys = [ln.split("\t")[0] for ln in r.stdout.decode().splitlines()]
    assert keys == ["train/part-0001.tfrecord.gz", "train/part-0002.tfrecord.gz"]
    # listed from the pattern's literal start
    assert all("prefix=train%2Fpart-&" in e["target"] or e["target"].endswith("prefix=train%2Fpart-")
               for e in proxy.log())


def test_a_key_url_heads_its_object(tool, proxy, objects):
    k = "odd/dir a/caf\u00e9 \u65e5\u672c.gz"
    r = tool.run("ls", url(k), opts=opts(proxy.url_endpoint))
    assert r.stdout.decode() == "%s\t%d\t%s\n" % (k, len(objects.data[k]), objects.etag(k))
    assert [e["method"] for e in proxy.log()] == ["HEAD"]


# ---- ranged reads --------------------------------------------------------

def test_ranged_reads_send_range_and_if_match_signed(tool, proxy, objects):
    data, etag = objects.data["big.bin"], objects.etag("big.bin")
    for off, n in [(0, 2), (1000, 5000), (len(data) - 10, 10), (123457, 1 << 20)]:
        r = tool.run("get", url("big.bin"), str(off), str(n), etag, opts=opts(proxy.url_endpoint))
        assert r.stdout == data[off:off + n]
    for e in proxy.log():
        h = e["headers"]
        assert h["if-match"] == etag and re.fullmatch(r"bytes=\d+-\d+", h["range"])
        assert "SignedHeaders=host;if-match;range;x-amz-content-sha256;x-amz-date," \
            in h["authorization"]
        assert e["status"] == 206 and e["sig"] == "ok"


def test_a_reply_longer_than_the_range_is_refused(tool, proxy, objects):
    # s3rver 3.7 answers "Range: bytes=0-0" with the whole object (its range
    # end 0 reads as "none"): the client writes no byte past the range and
    # does not try again
    r = tool.run("get", url("big.bin"), "0", "1", opts=opts(proxy.url_endpoint), check=False)
    assert "bytes 0-0: more bytes than the range asked for" in one_line_error(r)
    assert len(proxy.log()) == 1


def test_the_proxy_adds_no_latency_of_its_own(proxy, objects):
    """Requests on a kept-alive connection through the proxy take what they
    take at s3rver: no Nagle wait between a response's head and its body
    (~40 ms each, the client's delayed ACK, while it went unset)."""
    c = s3env.boto_client(proxy.url_endpoint)
    c.get_object(Bucket=BUCKET, Key="big.bin", Range="bytes=0-99")["Body"].read()
    took = []
    for i in range(15):
        t0 = time.monotonic()
        c.get_object(Bucket=BUCKET, Key="big.bin",
                     Range="bytes=%d-%d" % (i * 100, i * 100 + 99))["Body"].read()
        took.append(time.monotonic() - t0)
    assert sorted(took)[len(took) // 2] < 0.025, took


def test_many_reads_at_once_keep_to_max_conns(tool, proxy, objects):
    data, etag = objects.data["big.bin"], objects.etag("big.bin")
    proxy.config(delay_ms=30)
    ranges = [(i * 40000 + 7, 30000) for i in range(64)]
    r = tool.run("reads", url("big.bin"), etag, *["%d:%d" % x for x in ranges],
                 opts=opts(proxy.url_endpoint, "conns=4"))
    assert r.stdout == b"".join(data[o:o + n] for o, n in ranges)
    st = proxy.stats()
    assert st["requests"] == 64 and st["max_in_flight"] == 4
    assert len({e["conn"] for e in proxy.log()}) == 4  # kept alive and reused


def test_a_short_object_or_a_range_past_its_end_is_an_error(tool, proxy, objects):
    n = len(objects.data["big.bin"])
    r = tool.run("get", url("big.bin"), str(n - 5), "10", opts=opts(proxy.url_endpoint),
                 check=False)
    err = one_line_error(r)
    assert "only %d bytes long" % n in err and "bytes %d-%d" % (n - 5, n + 4) in err


def test_a_replaced_object_fails_with_estale_through_412(tool, proxy, objects, boto):
    boto.put_object(Bucket=BUCKET, Key="replaced", Body=b"version one" * 100)
    r = tool.run("head", url("replaced"), opts=opts(proxy.url_endpoint))
    size, etag = r.stdout.decode().split()
    boto.put_object(Bucket=BUCKET, Key="replaced", Body=b"version two" * 100)
    r = tool.run("get", url("replaced"), "10", "20", etag, opts=opts(proxy.url_endpoint),
                 check=False)
    err = one_line_error(r)
    assert "(ESTALE)" in err and "changed" in err and "re-mount" in err
    assert "s3://%s/replaced bytes 10-29" % BUCKET in err
    assert [e["status"] for e in proxy.log() if e["method"] == "GET"] == [412]  # not retried


def test_a_store_that_ignores_if_match_still_gives_estale(tool, s3rver, objects, boto):
    # straight to s3rver, which ignores If-Match: the client checks the ETag itself
    boto.put_object(Bucket=BUCKET, Key="replaced2", Body=b"one" * 100)
    etag = tool.run("head", url("replaced2"), opts=opts(s3rver.url)).stdout.decode().split()[1]
    boto.put_object(Bucket=BUCKET, Key="replaced2", Body=b"two" * 100)
    r = tool.run("get", url("replaced2"), "0", "10", etag, opts=opts(s3rver.url), check=False)
    err = one_line_error(r)
    assert "(ESTALE)" in err and "re-mount" in err


def test_an_empty_object_streams_as_nothing(tool, proxy, objects):
    r = tool.run("cat", url("empty"), opts=opts(proxy.url_endpoint))
    assert r.stdout == b""
    assert [e["method"] for e in proxy.log()] == ["HEAD"]  # size 0: nothing to read


# ---- streams -------------------------------------------------------------

def test_a_stream_delivers_the_object_in_order(tool, proxy, objects):
    data = objects.data["big.bin"]
    r = tool.run("cat", url("big.bin"), "262144", "4", opts=opts(proxy.url_endpoint))
    assert r.stdout == data
    gets = [e for e in proxy.log() if e["method"] == "GET"]
    assert len(gets) == (len(data) + 262143) // 262144
    # the first read learns the ETag; every later one carries it
    assert all(e["headers"].get("if-match") == objects.etag("big.bin") for e in gets[1:])


def test_a_stream_to_an_unknown_end_learns_it_from_the_first_read(tool, proxy, objects):
    data = objects.data["big.bin"]
    r = tool.run("cat", url("big.bin"), "1000000", "2", "", "1234", "-",
                 opts=opts(proxy.url_endpoint))
    assert r.stdout == data[1234:]
    gets = proxy.log()
    assert [e["method"] for e in gets] == ["GET"] * 4
    assert "if-match" not in gets[0]["headers"]
    assert all(e["headers"]["if-match"] == objects.etag("big.bin") for e in gets[1:])


def test_a_stream_reads_a_middle_range_and_forward_preads(tool, proxy, objects):
    data = objects.data["big.bin"]
    r = tool.run("cat", url("big.bin"), "100000", "3", objects.etag("big.bin"), "5000", "777777",
                 opts=opts(proxy.url_endpoint))
    assert r.stdout == data[5000:777777]
    ranges = [(0, 10), (5, 100), (150000, 300000), (2000000, 10), (len(data) - 3, 100)]
    r = tool.run("pread", url("big.bin"), "65536", "4", *["%d:%d" % x for x in ranges],
                 opts=opts(proxy.url_endpoint))
    assert r.stdout == b"".join(data[o:o + n] for o, n in ranges)


def test_closing_a_stream_with_reads_in_flight_returns_at_once(tool, proxy, objects):
    proxy.config(delay_ms=300)
    t0 = time.monotonic()
    r = tool.run("pread", url("big.bin"), "65536", "16", "0:10", opts=opts(proxy.url_endpoint))
    assert r.stdout == objects.data["big.bin"][:10]
    assert time.monotonic() - t0 < 3


def test_a_stream_survives_resets_cuts_and_slowdowns(tool, proxy, objects):
    proxy.rules({"action": "reset", "match": "^GET", "first": 2},
                {"action": "truncate", "match": "^GET", "first": 2, "bytes": 1000},
                {"action": "reset", "when": "after", "match": "^GET", "first": 1},
                {"action": "status", "status": 503, "match": "^GET", "fraction": 0.2})
    r = tool.run("cat", url("big.bin"), "262144", "4",
                 opts=opts(proxy.url_endpoint, FAST, "tries=8"))
    assert r.stdout == objects.data["big.bin"]
    assert [x["fired"] for x in proxy.stats()["rules"]][:3] == [2, 2, 1]


# ---- retries -------------------------------------------------------------

@pytest.mark.parametrize("rule", [
    {"action": "status", "status": 503, "first": 2},
    {"action": "status", "status": 503, "code": "SlowDown", "first": 2, "retry_after": 0},
    {"action": "status", "status": 429, "first": 2},
    {"action": "status", "status": 500, "first": 2},
    {"action": "reset", "first": 2},
    {"action": "reset", "when": "after", "first": 2},
    {"action": "truncate", "bytes": 100, "first": 2},
    {"action": "stall", "ms": 5000, "first": 1},
])
def test_transient_failures_are_retried(tool, proxy, objects, rule):
    data, etag = objects.data["big.bin"], objects.etag("big.bin")
    proxy.rules(dict(rule, match="^GET"))
    r = tool.run("get", url("big.bin"), "1000", "200000", etag, opts=opts(proxy.url_endpoint, FAST))
    assert r.stdout == data[1000:201000]
    assert proxy.stats()["requests"] == rule["first"] + 1
    assert [e for e in proxy.log() if e["status"] == 206][-1]["bytes"] == 200000


def test_retries_end_in_eio_naming_the_object_and_range(tool, proxy, objects):
    proxy.rules({"action": "status", "status": 503})
    t0 = time.monotonic()
    r = tool.run("get", url("big.bin"), "100", "100", opts=opts(proxy.url_endpoint, FAST),
                 check=False)
    err = one_line_error(r)
    assert time.monotonic() - t0 < 4
    assert err.startswith("s3tool: s3://%s/big.bin bytes 100-199: SlowDown: " % BUCKET), err
    assert "gave up after 4 tries" in err and "(EIO)" in err
    assert len(proxy.log()) == 4


def test_retries_stop_when_their_time_is_up(tool, proxy, objects):
    proxy.rules({"action": "status", "status": 500})
    t0 = time.monotonic()
    r = tool.run("get", url("big.bin"), "0", "10",
                 opts=opts(proxy.url_endpoint, "tries=1000,backoff_ms=50,backoff_max_ms=200,"
                           "retry_ms=1500"), check=False)
    took = time.monotonic() - t0
    err = one_line_error(r)
    assert "InternalError" in err and "(EIO)" in err
    assert 1.2 < took < 3.5, took
    assert 5 < len(proxy.log()) < 40


def test_a_stalled_request_times_out_and_is_retried(tool, proxy, objects):
    proxy.rules({"action": "stall", "ms": 60000, "first": 1, "match": "^GET"})
    t0 = time.monotonic()
    r = tool.run("get", url("big.bin"), "0", "10", opts=opts(proxy.url_endpoint, FAST))
    assert r.stdout == objects.data["big.bin"][:10]
    assert time.monotonic() - t0 < 5


# ---- errors --------------------------------------------------------------

def test_a_missing_bucket_is_one_line(tool, proxy, objects):
    r = tool.run("ls", "s3://no-such-bucket/x/", opts=opts(proxy.url_endpoint), check=False)
    err = one_line_error(r)
    assert "s3://no-such-bucket/x/ (listing): NoSuchBucket: " in err and "(ENOENT)" in err
    assert len(proxy.log()) == 1  # not retried


def test_a_missing_key_is_one_line_for_get_and_head(tool, proxy, objects):
    r = tool.run("get", url("nope"), "0", "1", opts=opts(proxy.url_endpoint), check=False)
    assert "bytes 0-0: NoSuchKey: " in one_line_error(r)
    r = tool.run("head", url("nope"), opts=opts(proxy.url_endpoint), check=False)
    err = one_line_error(r)
    assert "s3://%s/nope: NoSuchKey: " % BUCKET in err and "(ENOENT)" in err


def test_an_unknown_key_id_and_a_wrong_secret_are_named(tool, proxy, objects):
    r = tool.run("ls", url(), opts=opts(proxy.url_endpoint), check=False,
                 env=tool.env(key="AKIDUNKNOWN", secret="whatever"))
    err = one_line_error(r)
    assert "InvalidAccessKeyId" in err and "(EACCES)" in err and "AWS_ACCESS_KEY_ID" in err
    r = tool.run("ls", url(), opts=opts(proxy.url_endpoint), check=False,
                 env=tool.env(secret="not-the-secret"))
    err = one_line_error(r)
    assert "SignatureDoesNotMatch" in err and "check the secret key" in err
    assert "not-the-secret" not in err
    assert [e["sig"] for e in proxy.log()] == ["unknown key", "mismatch"]


def test_access_denied_is_one_line(tool, proxy, objects):
    proxy.rules({"action": "status", "status": 403})
    r = tool.run("ls", url("many/"), opts=opts(proxy.url_endpoint), check=False)
    err = one_line_error(r)
    assert "AccessDenied: Access Denied (HTTP 403)" in err and "(EACCES)" in err


def test_an_unreachable_endpoint_is_one_line(tool, workdir):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    t0 = time.monotonic()
    r = tool.run("ls", url(), opts=opts("http://127.0.0.1:%d" % port, FAST), check=False)
    err = one_line_error(r)
    assert "cannot reach http://127.0.0.1:%d" % port in err and "gave up after 4 tries" in err
    assert time.monotonic() - t0 < 4


# ---- credentials, addressing ---------------------------------------------

def test_no_sign_request_sends_no_authorization(tool, proxy, objects):
    r = tool.run("ls", url("many/"), opts=opts(proxy.url_endpoint, "no_sign_request"),
                 env=s3env.free_env(tool.home))
    assert len(r.stdout.splitlines()) == 53
    assert all("authorization" not in e["headers"] for e in proxy.log())


def test_a_session_token_is_sent_and_signed(tool, proxy, objects):
    tok = "FwoGZXIvYXdzEXAMPLE/token+with=odd"
    tool.run("get", url("big.bin"), "0", "10", opts=opts(proxy.url_endpoint),
             env=tool.env(token=tok))
    (e,) = proxy.log()
    assert e["headers"]["x-amz-security-token"] == tok
    assert ";x-amz-security-token," in e["headers"]["authorization"]
    assert tok not in e["target"] and e["sig"] == "ok"


def test_profile_files_give_credentials_and_endpoint(tool, proxy, objects, workdir):
    home = os.path.join(workdir, "home-profile")
    os.makedirs(os.path.join(home, ".aws"), exist_ok=True)
    with open(os.path.join(home, ".aws", "credentials"), "w") as f:
        f.write("[default]\naws_access_key_id = nope\naws_secret_access_key = nope\n"
                "[test]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n")
    with open(os.path.join(home, ".aws", "config"), "w") as f:
        f.write("[profile test]\nregion = eu-west-3\ns3 =\n  endpoint_url = %s\n"
                % proxy.url_endpoint)
    env = s3env.free_env(home, AWS_PROFILE="test")
    r = tool.run("config", url(), env=env)
    assert r.stdout.decode() == (
        "endpoint %s (path-style), region eu-west-3, credentials: profile 'test' in "
        "%s/.aws/credentials, key id ****RVER\n" % (proxy.url_endpoint, home))
    r = tool.run("ls", url("many/"), env=env)
    assert len(r.stdout.splitlines()) == 53
    assert "/eu-west-3/s3/aws4_request" in proxy.log()[0]["headers"]["authorization"]


def test_gs_urls_speak_the_same_api_path_style(tool, proxy, objects):
    r = tool.run("get", "gs://%s/big.bin" % BUCKET, "5", "5", opts=opts(proxy.url_endpoint))
    assert r.stdout == objects.data["big.bin"][5:10]
    (e,) = proxy.log()
    assert e["target"] == "/%s/big.bin" % BUCKET
    assert "/auto/s3/aws4_request" in e["headers"]["authorization"] and e["sig"] == "ok"
    r = tool.run("get", "gs://%s/nope" % BUCKET, "0", "1", opts=opts(proxy.url_endpoint),
                 check=False)
    assert one_line_error(r).startswith("s3tool: gs://%s/nope bytes 0-0: NoSuchKey" % BUCKET)


def test_https_with_the_ca_bundle_and_a_clear_line_without_it(tool, workdir, objects):
    # s3rver serving TLS over the same directory, with a certificate of the test's
    tls = s3env.self_signed(workdir)
    srv = s3env.start_s3rver(os.path.join(workdir, "data"), tls=tls)
    try:
        env = tool.env(AWS_CA_BUNDLE=tls[1])
        r = tool.run("cat", url("big.bin"), "524288", "4", opts=opts(srv.url), env=env)
        assert r.stdout == objects.data["big.bin"]
        r = tool.run("ls", url("many/"), opts=opts(srv.url, "max_keys=20"), env=env)
        assert len(r.stdout.splitlines()) == 53
        # the system's CAs do not know it: refused at once, not retried for long
        t0 = time.monotonic()
        r = tool.run("ls", url(), opts=opts(srv.url), check=False)
        err = one_line_error(r)
        assert "certificate" in err.lower() and "(EIO)" in err and "gave up" not in err
        assert time.monotonic() - t0 < 5
    finally:
        srv.stop()


# ---- secrets -------------------------------------------------------------

SECRET = "SeCrEt-4f2b9c1e-DO-NOT-LEAK"
TOKEN = "ToKeN-77aa31d0-DO-NOT-LEAK"


@pytest.fixture(scope="module")
def lax(workdir, objects):
    """s3rver accepting any well-formed signature, for a recognisable secret,
    behind a proxy of its own."""
    srv = s3env.start_s3rver(os.path.join(workdir, "data"), lax=True)
    prx = s3env.start_proxy("%s:%d" % (srv.host, srv.port), "--sigv4", "S3RVER:" + SECRET)
    ctl = s3env.ProxyControl(prx.url)
    ctl.url_endpoint = prx.url
    yield ctl
    prx.stop()
    srv.stop()


def test_secrets_appear_in_no_output_log_or_request_line(tool, lax, objects):
    env = tool.env(secret=SECRET, token=TOKEN)  # s3rver knows one key id
    o = opts(lax.url_endpoint, FAST)
    etag = objects.etag("big.bin")
    runs = [
        tool.run("config", url(), opts=o, env=env),
        tool.run("ls", url("many/"), opts=o + ",max_keys=10", env=env),
        tool.run("head", url("big.bin"), opts=o, env=env),
        tool.run("get", url("big.bin"), "0", "100", etag, opts=o, env=env),
        tool.run("cat", url("big.bin"), "1048576", "2", opts=o, env=env),
        tool.run("get", url("nope"), "0", "1", opts=o, env=env, check=False),
        tool.run("head", url("nope"), opts=o, env=env, check=False),
        tool.run("ls", "s3://no-such-bucket/", opts=o, env=env, check=False),
    ]
    # a store that echoes what it got (the token) in its error message
    lax.rules({"action": "status", "status": 503,
               "message": "echo {header:x-amz-security-token} {header:authorization}"})
    runs.append(tool.run("get", url("big.bin"), "0", "1", opts=o, env=env, check=False))
    assert "[redacted]" in runs[-1].stderr.decode()
    lax.rules({"action": "status", "status": 400, "code": "InvalidToken",
               "message": "bad token " + TOKEN})
    runs.append(tool.run("ls", url(), opts=o, env=env, check=False))
    assert "[redacted]" in runs[-1].stderr.decode() and "InvalidToken" in runs[-1].stderr.decode()
    for r in runs:
        for out in (r.stdout, r.stderr):
            assert SECRET.encode() not in out and TOKEN.encode() not in out
        assert SECRET not in " ".join(r.args) and TOKEN not in " ".join(r.args)
    log = lax.log()
    assert len(log) > 10
    assert all(e.get("sig") == "ok" for e in log if e["action"] is None)
    for e in log:
        assert SECRET not in e["target"] and TOKEN not in e["target"]
        for name, value in e["headers"].items():
            assert SECRET not in value
            assert TOKEN not in value or name == "x-amz-security-token"


# ---- the signer against botocore ------------------------------------------

WHEN = datetime.datetime(2024, 2, 29, 23, 59, 58)
CASES = [
    # method, host, raw path, query params, headers
    ("GET", "s3.us-east-1.amazonaws.com", "/bucket/train/part-00001.tfrecord.gz", {},
     {"Range": "bytes=1000-1999"}),
    ("GET", "127.0.0.1:9000", "/bucket", {
        "list-type": "2", "prefix": "train/dir a/", "encoding-type": "url", "max-keys": "7",
        "continuation-token": "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM+aa=="}, {}),
    ("GET", "bucket.s3.eu-west-1.amazonaws.com", "/a b/c+d/caf\u00e9 \u65e5\u672c!'()*=&%.gz", {},
     {"Range": "bytes=0-0", "If-Match": '"9b2cf535f27731c974343645a3985328"'}),
    ("HEAD", "bucket.s3.eu-west-1.amazonaws.com", "/dir/../x//y~z", {}, {}),
    ("GET", "storage.googleapis.com", "/gcs_bucket/", {"list-type": "2", "prefix": ""}, {}),
]


def botocore_auth(method, host, path, params, headers, region, token):
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    req = AWSRequest(method=method, url="https://%s%s" % (host, quote(path, safe="/~")),
                     params=params, headers=dict(headers))
    auth = S3SigV4Auth(Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                   token), "s3", region)
    with mock.patch("botocore.auth.datetime") as dt:
        dt.datetime.utcnow.return_value = WHEN
        auth.add_auth(req)
    return req.headers["Authorization"].replace(", ", ","), auth.canonical_query_string(req)


@pytest.mark.parametrize("token", [None, "IQoJb3JpZ2luX2VjEXAMPLE/+=token"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_signatures_are_those_botocore_computes(tool, case, token):
    method, host, path, params, headers = CASES[case]
    region = "eu-west-1" if "eu-west-1" in host else "auto" if "google" in host else "us-east-1"
    env = tool.env(key="AKIDEXAMPLE", secret="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                   token=token)
    args = ["sign", method, host, path, WHEN.strftime("%Y%m%dT%H%M%SZ")]
    args += ["q:%s=%s" % kv for kv in params.items()]
    args += ["h:%s:%s" % kv for kv in headers.items()]
    r = tool.run(*args, opts="region=" + region, env=env)
    sent, ours = r.stdout.decode().splitlines()
    theirs, query = botocore_auth(method, host, path, params, headers, region, token)
    assert ours == theirs
    assert sent == quote(path, safe="/~") + ("?" + query if query else "")
