# SPDX-License-Identifier: Apache-2.0
"""Helpers for the credential tests: start tests/cloud/awsendpoints.py (the
AWS credential endpoints), talk to its control API, and make the
environments that point the AWS chain (batchfs's and botocore's) at it.

Every server listens on 127.0.0.1 on a port of its own choosing and is
stopped when its fixture ends.
"""
import json
import os
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "s3"))
import s3env  # noqa: E402

PY = "/usr/bin/python3"
ROLE = "train-role"
ROLE_ARN = "arn:aws:iam::123456789012:role/" + ROLE
SOURCE_KEY, SOURCE_SECRET = "AKIDSOURCEKEY0001", "source/secret+0001"
CONTAINER_TOKEN = "container-authz-token-0001"
WEB_TOKEN = "eyJhbGciOiJSUzI1NiJ9.web-identity-token.0001"


class Endpoints:
    """awsendpoints.py with a ledger, a web identity token file and the
    source key, in directory d."""

    def __init__(self, d, lifetime=3600):
        self.dir = str(d)
        os.makedirs(self.dir, exist_ok=True)
        self.ledger = os.path.join(self.dir, "ledger.json")
        self.web_token_file = os.path.join(self.dir, "web-token")
        with open(self.web_token_file, "w") as f:
            f.write(WEB_TOKEN)  # as EKS writes it: no newline
        self.srv = s3env.Server([PY, os.path.join(HERE, "awsendpoints.py"), "--ledger",
                                 self.ledger, "--lifetime", str(lifetime), "--role", ROLE,
                                 "--container-token", CONTAINER_TOKEN, "--web-token",
                                 WEB_TOKEN, "--source",
                                 "%s:%s" % (SOURCE_KEY, SOURCE_SECRET)],
                                r"awsendpoints listening on ([0-9.]+):(\d+)")
        self.url = self.srv.url

    def _call(self, path, body=None):
        req = urllib.request.Request(self.url + "/__ctl/" + path,
                                     data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(req, timeout=30) as r:
            return json.load(r)

    def config(self, **cfg):
        return self._call("config", cfg)

    def log(self):
        return self._call("log")

    def issued(self):
        with open(self.ledger) as f:
            return json.load(f)

    def stop(self):
        self.srv.stop()

    # ---- environments: only the variables of the case, the rest off ----
    def imds_env(self, home, **extra):
        return s3env.free_env(home, AWS_EC2_METADATA_DISABLED="false",
                              AWS_EC2_METADATA_SERVICE_ENDPOINT=self.url, **extra)

    def container_env(self, home, token=CONTAINER_TOKEN, **extra):
        return s3env.free_env(home, AWS_CONTAINER_CREDENTIALS_FULL_URI=self.url +
                              "/container/creds", AWS_CONTAINER_AUTHORIZATION_TOKEN=token,
                              **extra)

    def web_env(self, home, **extra):
        return s3env.free_env(home, AWS_WEB_IDENTITY_TOKEN_FILE=self.web_token_file,
                              AWS_ROLE_ARN=ROLE_ARN, AWS_ROLE_SESSION_NAME="job-42",
                              AWS_ENDPOINT_URL_STS=self.url, **extra)


def secrets_of(ep):
    """Every secret and token the endpoints issued or know, for leak checks."""
    out = [SOURCE_SECRET, CONTAINER_TOKEN, WEB_TOKEN]
    for c in ep.issued().values():
        out += [c["secret"], c["token"]]
    return out
