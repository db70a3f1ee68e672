# SPDX-License-Identifier: Apache-2.0
"""Fixtures of tests/s3: one s3rver (signatures checked against its S3RVER
account) over a temporary directory, s3proxy.py in front of it, the bucket
filled with botocore, and s3tool (BFS_S3TOOL, default build/tests/s3/s3tool).
"""
import hashlib
import os
import random
import shutil
import tempfile

import pytest

import s3env

BUCKET = "bfs-test"


class Objects:
    """What the tests put in the bucket: key -> bytes."""

    def __init__(self):
        rng = random.Random(23)
        self.data = {}
        self.data["big.bin"] = rng.randbytes(3 * 1024 * 1024 + 17)
        self.data["empty"] = b""
        for i in range(53):
            self.data["many/part-%05d.tfrecord" % i] = rng.randbytes(rng.randrange(1, 300))
        for k in ["odd/dir a/a b+c.gz", "odd/dir a/caf\u00e9 \u65e5\u672c.gz", "odd/dir a/100%.gz",
                  "odd/dir a/x=1&y=2.gz", "odd/dir a/tilde~_-.gz",
                  "odd/dir ab/not-under.gz"]:
            self.data[k] = k.encode() * 3
        for k in ["train/part-0001.tfrecord.gz", "train/part-0002.tfrecord.gz",
                  "train/part-0002.tfrecord.gz.idx", "train/sub/part-0003.tfrecord.gz",
                  "train/_SUCCESS", "train/other.tfrecord.gz"]:
            self.data[k] = hashlib.sha256(k.encode()).digest()

    def etag(self, key):
        return '"%s"' % hashlib.md5(self.data[key]).hexdigest()


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="bfs-s3-")
    os.makedirs(os.path.join(d, "home"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def s3rver(workdir):
    srv = s3env.start_s3rver(os.path.join(workdir, "data"), buckets=[BUCKET])
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def objects(s3rver):
    objs = Objects()
    c = s3env.boto_client(s3rver.url)
    for k, v in objs.data.items():
        c.put_object(Bucket=BUCKET, Key=k, Body=v)
    return objs


@pytest.fixture(scope="session")
def proxy_server(s3rver):
    p = s3env.start_proxy("%s:%d" % (s3rver.host, s3rver.port))
    yield p
    p.stop()


@pytest.fixture
def proxy(proxy_server):
    """The proxy's control API, its rules, delay and log cleared, checking
    every signature against s3rver's key pair (s3rver 3.7 checks none)."""
    ctl = s3env.ProxyControl(proxy_server.url)
    ctl.reset()
    ctl.config(sigv4="%s:%s" % (s3env.S3RVER_KEY, s3env.S3RVER_SECRET))
    ctl.url_endpoint = proxy_server.url
    return ctl


@pytest.fixture(scope="session")
def tool(workdir):
    return s3env.Tool(s3env.tool_path(), os.path.join(workdir, "home"))


@pytest.fixture(scope="session")
def boto(s3rver):
    return s3env.boto_client(s3rver.url)
