# SPDX-License-Identifier: Apache-2.0
"""Helpers for tests of Google's credentials (tests/cloud, and the gs://
mounts of tests/integration/test_bucket_gcp.py): start gcpendpoints.py and
talk to its control API, make a service-account key (python3-cryptography)
and the JSON files gcloud and the IAM console write."""
import json
import os
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "s3"))
import s3env  # noqa: E402

PY = "/usr/bin/python3"
SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"
SA_EMAIL = "reader@test-project.iam.gserviceaccount.com"
VM_EMAIL = "vm-sa@test-project.iam.gserviceaccount.com"  # gcpendpoints.py's VM
KID = "0123456789abcdef0123456789abcdef01234567"
USER = {"client_id": "123-abc.apps.googleusercontent.com",
        "client_secret": "d-FL95Q19q7MQmFpd7hHD0Ty",
        "refresh_token": "1//0gSECRET-refresh_token/with+odd=chars"}


class Endpoints:
    """gcpendpoints.py, started; stop() ends it."""

    def __init__(self):
        self.srv = s3env.Server([PY, os.path.join(HERE, "gcpendpoints.py")],
                                r"gcpendpoints listening on ([0-9.]+):(\d+)")
        self.url = self.srv.url
        self.token_uri = self.url + "/token"
        self.tokeninfo = self.url + "/tokeninfo"
        self.host = "%s:%d" % (self.srv.host, self.srv.port)

    def _call(self, path, body=None):
        req = urllib.request.Request(self.url + "/__ctl/" + path,
                                     data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(req, timeout=10) as r:
            return json.load(r)

    def config(self, **kw):
        return self._call("config", kw)

    def reset(self):
        return self._call("reset", {})

    def log(self):
        return self._call("log")

    def stop(self):
        self.srv.stop()


def new_key():
    """(private PKCS#8 PEM, public PEM) of a fresh RSA key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()).decode()
    pub = k.public_key().public_bytes(serialization.Encoding.PEM,
                                      serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return pem, pub


def register(ep, key):
    """Let ep know key (as KID of SA_EMAIL) and USER."""
    ep.config(keys=[{"kid": KID, "client_email": SA_EMAIL, "public_pem": key[1]}], users=[USER])


def sa_info(key, token_uri):
    """A service-account key file's fields, as the IAM console writes them."""
    return {"type": "service_account", "project_id": "test-project", "private_key_id": KID,
            "private_key": key[0], "client_email": SA_EMAIL, "client_id": "1234567890",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": token_uri}


def write_json(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2))
    return str(path)


def google_env(base, **extra):
    """base (a dict) without any GOOGLE_*, GCE_* or CLOUDSDK_* variable, an
    unreachable metadata server unless extra gives one; extra's None values
    remove."""
    env = {k: v for k, v in base.items() if not k.startswith(("GOOGLE_", "GCE_", "CLOUDSDK_"))}
    env["GCE_METADATA_HOST"] = "127.0.0.1:1"
    env.update({k: v for k, v in extra.items() if v is not None})
    for k in [k for k, v in extra.items() if v is None]:
        env.pop(k, None)
    return env
