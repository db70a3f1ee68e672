# SPDX-License-Identifier: Apache-2.0
"""The AWS default credential chain (decoder/cloud/credaws.c) against real
protocol counterparts started here (awsendpoints.py: IMDSv2, the container
endpoint, STS), through tests/s3/s3tool and a bucket behind s3proxy.py that
accepts only the credentials those endpoints issued (their session token,
not expired) - and botocore, given the same environment and files,
resolving the same credentials from the same place (parity).

What must be true (docs/credentials.md):
- each place of the chain gives credentials that sign requests S3 accepts,
  in botocore's order, with the variables and file formats of the SDKs;
- IMDSv2 gets a session token (TTL header) first and sends it; IMDSv1 only
  when the token request is refused;
- the container endpoint gets its Authorization token (variable or file);
- STS AssumeRole is signed with the source profile's keys; web identity
  sends the token file's contents, unsigned;
- no place with credentials: one line naming every place looked in; SSO
  profiles say that they are out of scope;
- no secret or token in any output.
"""
import hashlib
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "s3"))
import credenv  # noqa: E402
import s3env  # noqa: E402

BUCKET = "bfs-cred"
PROC_KEY, PROC_SECRET = "AKIDPROCESS000001", "process/secret/0001"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    d = tmp_path_factory.mktemp("s3")
    with s3env.behind_proxy(d, [BUCKET], pytest.skip) as ctl:
        boto = s3env.boto_client(ctl.s3rver.url)
        for i in range(3):
            boto.put_object(Bucket=BUCKET, Key="d/part-%d" % i, Body=b"x" * (100 + i))
        yield ctl


@pytest.fixture
def ep(tmp_path, s3):
    e = credenv.Endpoints(tmp_path / "ep")
    s3.reset()
    # only what the endpoints issued (and the process helper's key) signs
    s3.config(sigv4_ledger=e.ledger, sigv4="%s:%s" % (PROC_KEY, PROC_SECRET))
    yield e
    e.stop()


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    (h / ".aws").mkdir(parents=True)
    return str(h)


def tool():
    p = s3env.tool_path()
    if not os.access(p, os.X_OK):
        pytest.skip("s3tool not built")
    return p


def run(args, env, s3=None, check=True):
    argv = [tool()]
    if s3 is not None:
        argv += ["-o", "endpoint=%s,region=us-east-1" % s3.endpoint]
    r = subprocess.run(argv + list(args), capture_output=True, env=env, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError("s3tool %s: %s" % (args, r.stderr.decode()))
    return r


def creds(env, s3):
    """(kind, source, sha256 of the key id, expiry) as s3tool reports them."""
    out = run(["creds", "s3://%s/" % BUCKET], env, s3).stdout.decode().strip()
    kind, source, fp, exp = out.split("\t")
    return kind, source, fp, int(exp)


def lists(env, s3):
    r = run(["ls", "s3://%s/d/" % BUCKET], env, s3)
    assert len(r.stdout.decode().split("\n")) >= 3
    sigs = [e.get("sig") for e in s3.log()]
    assert sigs and all(s == "ok" for s in sigs), sigs


BOTO = r"""
import hashlib, json, os, sys
import botocore.session
orig = botocore.session.Session.create_client
def create_client(self, service_name, *a, **kw):
    # botocore 1.29 has no AWS_ENDPOINT_URL_STS: point its STS client there
    if service_name == "sts" and os.environ.get("AWS_ENDPOINT_URL_STS"):
        kw["endpoint_url"] = os.environ["AWS_ENDPOINT_URL_STS"]
    return orig(self, service_name, *a, **kw)
botocore.session.Session.create_client = create_client
c = botocore.session.Session().get_credentials()
if c is None:
    print(json.dumps(None))
else:
    f = c.get_frozen_credentials()
    print(json.dumps({"method": c.method, "fp": hashlib.sha256(f.access_key.encode()).hexdigest(),
                      "token": f.token is not None}))
"""


def boto(env):
    env = dict(env, AWS_DEFAULT_REGION="us-east-1")  # the mounts' region= (STS signs with it)
    r = subprocess.run([credenv.PY, "-c", BOTO], capture_output=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return json.loads(r.stdout)


METHODS = [("the environment", "env"), ("/.aws/credentials", "shared-credentials-file"),
           ("/.aws/config", "config-file"), ("credential_process", "custom-process"),
           ("AssumeRoleWithWebIdentity", "assume-role-with-web-identity"),
           ("STS AssumeRole ", "assume-role"), ("container credentials", "container-role"),
           ("via IMDS", "iam-role")]


def method_of(source):
    for frag, m in METHODS:
        if frag in source:
            return m
    return None


def fp(s):
    return hashlib.sha256(s.encode()).hexdigest()


def no_secret(text, ep):
    for s in credenv.secrets_of(ep) + [PROC_SECRET]:
        assert s not in text


# ------------------------------------------------------------------ IMDS


def test_imdsv2_token_first_then_the_role_credentials(ep, s3, home):
    env = ep.imds_env(home)
    kind, source, key, exp = creds(env, s3)
    assert source == "instance role `train-role` via IMDSv2"
    assert exp > 0 and fp(list(ep.issued())[-1]) == key
    log = ep.log()
    assert [e["method"] for e in log[:3]] == ["PUT", "GET", "GET"]
    assert log[0]["action"] == "token ttl=21600"
    assert all("x-aws-ec2-metadata-token" in e["headers"] for e in log[1:3])
    lists(env, s3)
    b = boto(env)
    assert b["method"] == method_of(source) == "iam-role"
    assert b["fp"] in {fp(k) for k in ep.issued()}
    # a proxy of the environment is not asked for the metadata service
    penv = {k: v for k, v in env.items() if k.lower() != "no_proxy"}
    penv.update(http_proxy="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    assert creds(penv, s3)[1] == source


def test_imdsv1_only_when_the_token_request_is_refused(ep, s3, home):
    ep.config(imds="v1")
    env = ep.imds_env(home)
    _, source, _, _ = creds(env, s3)
    assert source == "instance role `train-role` via IMDSv1"
    log = ep.log()
    assert log[0]["method"] == "PUT" and log[0]["status"] == 405
    assert all("x-aws-ec2-metadata-token" not in e["headers"] for e in log[1:])
    lists(env, s3)
    assert boto(env)["method"] == "iam-role"
    # AWS_EC2_METADATA_V1_DISABLED: no fallback
    r = run(["creds", "s3://%s/" % BUCKET], dict(env, AWS_EC2_METADATA_V1_DISABLED="true"),
            s3, check=False)
    assert r.returncode == 1 and b"no credentials" in r.stderr
    assert b"IMDSv1 is disabled" in r.stderr


# ------------------------------------------------------------------ container


def test_container_credentials_with_the_authorization_token(ep, s3, home, tmp_path):
    env = ep.container_env(home)
    _, source, key, exp = creds(env, s3)
    assert source.startswith("container credentials (http://127.0.0.1:")
    assert exp > 0
    lists(env, s3)
    assert boto(env)["method"] == method_of(source) == "container-role"
    # the token from a file wins over the variable (read at each refresh)
    tf = tmp_path / "ctoken"
    tf.write_text(credenv.CONTAINER_TOKEN + "\n")
    env2 = dict(env, AWS_CONTAINER_AUTHORIZATION_TOKEN="wrong-token-from-the-variable",
                AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(tf))
    assert creds(env2, s3)[1] == source
    # a wrong token: refused, in one line that does not quote it
    r = run(["creds", "s3://%s/" % BUCKET], ep.container_env(home, token="wrong-token-0002"),
            s3, check=False)
    err = r.stderr.decode()
    assert r.returncode == 1 and "HTTP 401" in err and len(err.splitlines()) == 1
    assert "wrong-token-0002" not in err


# ------------------------------------------------------------------ STS


def test_web_identity_exchanged_with_sts(ep, s3, home):
    env = ep.web_env(home)
    _, source, _, exp = creds(env, s3)
    assert source == ("role `train-role` via STS AssumeRoleWithWebIdentity "
                      "(AWS_WEB_IDENTITY_TOKEN_FILE)")
    e = [x for x in ep.log() if x["path"] == "/"][0]
    assert e["action"] == "AssumeRoleWithWebIdentity" and e["status"] == 200
    assert e["form"]["RoleSessionName"] == "job-42" and "authorization" not in e["headers"]
    lists(env, s3)
    b = boto(env)
    assert b["method"] == method_of(source) == "assume-role-with-web-identity"
    assert b["fp"] in {fp(k) for k in ep.issued()}
    # a token the provider does not accept: one line, no token in it
    with open(ep.web_token_file, "w") as f:
        f.write("not-the-token\n")
    r = run(["creds", "s3://%s/" % BUCKET], env, s3, check=False)
    err = r.stderr.decode()
    assert r.returncode == 1 and "InvalidIdentityToken" in err and "not-the-token" not in err


def write_profiles(home, credentials, config):
    with open(os.path.join(home, ".aws", "credentials"), "w") as f:
        f.write(credentials)
    with open(os.path.join(home, ".aws", "config"), "w") as f:
        f.write(config)


def test_a_profile_role_is_assumed_with_the_source_profiles_keys(ep, s3, home):
    write_profiles(home, "[base]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                   % (credenv.SOURCE_KEY, credenv.SOURCE_SECRET),
                   "[profile train]\nrole_arn = %s\nsource_profile = base\n"
                   "role_session_name = nightly\n" % credenv.ROLE_ARN)
    env = s3env.free_env(home, AWS_PROFILE="train", AWS_ENDPOINT_URL_STS=ep.url)
    _, source, _, exp = creds(env, s3)
    assert source == ("role `train-role` via STS AssumeRole (profile 'train', "
                      "source_profile 'base')")
    e = [x for x in ep.log() if x["path"] == "/"][0]
    assert e["action"] == "AssumeRole" and e["sig"] == "ok"
    assert e["signer"] == credenv.SOURCE_KEY and e["form"]["RoleSessionName"] == "nightly"
    lists(env, s3)
    b = boto(env)
    assert b["method"] == method_of(source) == "assume-role"
    assert b["fp"] in {fp(k) for k in ep.issued()}


def test_role_chaining_signs_with_the_first_roles_credentials(ep, s3, home):
    write_profiles(home, "[base]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                   % (credenv.SOURCE_KEY, credenv.SOURCE_SECRET),
                   "[profile first]\nrole_arn = arn:aws:iam::123456789012:role/first\n"
                   "source_profile = base\n[profile second]\nrole_arn = %s\n"
                   "source_profile = first\n" % credenv.ROLE_ARN)
    env = s3env.free_env(home, AWS_PROFILE="second", AWS_ENDPOINT_URL_STS=ep.url)
    assert "`train-role`" in creds(env, s3)[1]
    calls = [x for x in ep.log() if x["path"] == "/"]
    assert [c["form"]["RoleArn"].rsplit("/", 1)[1] for c in calls] == ["first", "train-role"]
    assert calls[0]["signer"] == credenv.SOURCE_KEY
    assert calls[1]["signer"] == list(ep.issued())[0]  # the first role's key
    assert boto(env)["method"] == "assume-role"


# ------------------------------------------------------------------ files, process


def test_profile_keys_and_credential_process_match_botocore(ep, s3, home, tmp_path):
    helper = tmp_path / "helper.py"
    helper.write_text("import json\nprint(json.dumps({'Version': 1, 'AccessKeyId': %r, "
                      "'SecretAccessKey': %r}))\n" % (PROC_KEY, PROC_SECRET))
    write_profiles(home, "[default]\naws_access_key_id = AKIDDEFAULTFILE01\n"
                   "aws_secret_access_key = s3cr3t-default\n",
                   "[profile proc]\ncredential_process = %s \"%s\"\n"
                   "[profile conf]\naws_access_key_id = AKIDCONFIGFILE001\n"
                   "aws_secret_access_key = s3cr3t-config\n" % (credenv.PY, helper))
    for profile, key in [(None, "AKIDDEFAULTFILE01"), ("proc", PROC_KEY),
                         ("conf", "AKIDCONFIGFILE001")]:
        env = s3env.free_env(home, AWS_PROFILE=profile)
        _, source, k, exp = creds(env, s3)
        b = boto(env)
        assert (b["method"], b["fp"]) == (method_of(source), k) and k == fp(key), profile
        assert exp == 0
    lists(s3env.free_env(home, AWS_PROFILE="proc"), s3)
    # the environment's keys come first, as in botocore
    env = s3env.free_env(home, AWS_PROFILE="proc", AWS_ACCESS_KEY_ID="AKIDENVIRONMENT1",
                         AWS_SECRET_ACCESS_KEY="env-secret")
    _, source, k, _ = creds(env, s3)
    assert (boto(env)["method"], boto(env)["fp"]) == ("env", k) == (method_of(source), k)


def test_a_failing_credential_process_says_so_in_one_line(home, s3):
    write_profiles(home, "", "[profile bad]\ncredential_process = /bin/false\n")
    r = run(["creds", "s3://%s/" % BUCKET], s3env.free_env(home, AWS_PROFILE="bad"), s3,
            check=False)
    err = r.stderr.decode()
    assert r.returncode == 1 and "credential_process /bin/false failed" in err
    assert len(err.splitlines()) == 1


# ------------------------------------------------------------------ none


def test_no_credentials_names_every_place_looked_in(home, s3):
    r = run(["creds", "s3://%s/" % BUCKET], s3env.free_env(home), s3, check=False)
    err = r.stderr.decode()
    assert r.returncode == 1 and len(err.splitlines()) == 1 and "(EACCES)" in err
    for place in ["the environment (AWS_ACCESS_KEY_ID unset)", "web identity",
                  "profile 'default' in %s/.aws/credentials" % home, "container credentials",
                  "the instance metadata service (AWS_EC2_METADATA_DISABLED)",
                  "no_sign_request"]:
        assert place in err, place
    assert boto(s3env.free_env(home)) is None


def test_imds_that_does_not_answer_is_a_place_without_credentials(home, s3):
    env = s3env.free_env(home, AWS_EC2_METADATA_DISABLED="false",
                         AWS_EC2_METADATA_SERVICE_ENDPOINT="http://127.0.0.1:9")
    r = run(["creds", "s3://%s/" % BUCKET], env, s3, check=False)
    err = r.stderr.decode()
    assert r.returncode == 1 and "no credentials" in err and "instance metadata service" in err


def test_sso_profiles_are_out_of_scope_and_say_so(home, s3):
    write_profiles(home, "", "[profile corp]\nsso_session = corp\nsso_account_id = 1\n"
                   "sso_role_name = r\n[sso-session corp]\nsso_start_url = https://x\n")
    r = run(["creds", "s3://%s/" % BUCKET], s3env.free_env(home, AWS_PROFILE="corp"), s3,
            check=False)
    err = r.stderr.decode()
    assert r.returncode == 1 and "aws sso login" in err and "(EACCES)" in err


def test_no_secret_in_any_output(ep, s3, home):
    env = ep.imds_env(home)
    outs = [run(a, env, s3) for a in (["config", "s3://%s/" % BUCKET],
                                       ["creds", "s3://%s/" % BUCKET],
                                       ["ls", "s3://%s/d/" % BUCKET])]
    text = "".join(o.stdout.decode() + o.stderr.decode() for o in outs)
    assert "instance role `train-role` via IMDSv2" in text and "refreshed" in text
    no_secret(text, ep)


# ------------------------------------------------------------------ the store says "expired"


def test_an_expired_token_answer_refreshes_once_and_retries_once(ep, s3, home):
    """A store whose clock runs ahead says ExpiredToken (400) to credentials
    that are not expired here: the client refreshes them once and tries
    that request once more, with the new ones; a second such answer to
    the same request fails it, in a line that does not quote the token the
    store echoes back."""
    env = ep.imds_env(home)
    get = ["get", "s3://%s/d/part-1" % BUCKET, "0", "10"]
    s3.rules({"match": "^GET /%s/d/part-1" % BUCKET, "status": 400, "code": "ExpiredToken",
              "message": "The provided token has expired.", "first": 1})
    r = run(get, env, s3)
    assert r.returncode == 0
    gets = [e for e in s3.log() if e["target"].startswith("/%s/d/part-1" % BUCKET)]
    assert len(gets) == 2 and gets[0]["status"] == 400
    keys = [e["headers"]["authorization"].split("Credential=")[1].split("/")[0] for e in gets]
    assert keys[0] != keys[1] and gets[1]["sig"] == "ok"
    creds_fetched = [e for e in ep.log() if e["path"].endswith("/" + credenv.ROLE)]
    assert len(creds_fetched) == 2  # the mount's first, and the one refresh
    # twice in a row: one refresh, one retry, then the request fails
    s3.reset()
    s3.config(sigv4_ledger=ep.ledger)
    s3.rules({"match": "^GET /%s/d/part-1" % BUCKET, "status": 400, "code": "ExpiredToken",
              "message": "expired: {header:x-amz-security-token}", "first": 2})
    r = run(get, env, s3, check=False)
    err = r.stderr.decode()
    assert r.returncode == 1 and "ExpiredToken" in err and "[redacted]" in err, err
    assert len([e for e in s3.log() if e["target"].startswith("/%s/d/part-1" % BUCKET)]) == 2
    no_secret(err, ep)


def test_web_identity_from_a_profile(ep, s3, home):
    write_profiles(home, "", "[profile eks]\nrole_arn = %s\nweb_identity_token_file = %s\n"
                   "role_session_name = pod-7\n" % (credenv.ROLE_ARN, ep.web_token_file))
    env = s3env.free_env(home, AWS_PROFILE="eks", AWS_ENDPOINT_URL_STS=ep.url)
    _, source, _, _ = creds(env, s3)
    assert source == "role `train-role` via STS AssumeRoleWithWebIdentity (profile 'eks')"
    e = [x for x in ep.log() if x["path"] == "/"][0]
    assert e["action"] == "AssumeRoleWithWebIdentity" and e["form"]["RoleSessionName"] == "pod-7"
    lists(env, s3)
    assert boto(env)["method"] == method_of(source) == "assume-role-with-web-identity"


def test_a_role_whose_source_is_the_environment_says_what_is_missing(ep, s3, home):
    """credential_source = Environment with no keys in the environment: one
    line saying so (with keys there, the chain's first place takes them
    themselves, before any profile, as botocore does with AWS_PROFILE)."""
    write_profiles(home, "", "[profile ci]\nrole_arn = %s\ncredential_source = Environment\n"
                   % credenv.ROLE_ARN)
    env = s3env.free_env(home, AWS_PROFILE="ci", AWS_ENDPOINT_URL_STS=ep.url)
    r = run(["creds", "s3://%s/" % BUCKET], env, s3, check=False)
    assert r.returncode == 1 and b"AWS_ACCESS_KEY_ID is not set" in r.stderr
