# SPDX-License-Identifier: Apache-2.0
"""Helpers for tests/s3: start the test servers (s3rver, s3proxy.py), talk to
the proxy's control API, fill buckets with botocore, run s3tool.

Every server listens on 127.0.0.1 on a port of its own choosing, prints it,
and is stopped (by its pid) when the test session ends.
"""
import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"

# what s3rver knows: its one account
S3RVER_KEY = "S3RVER"
S3RVER_SECRET = "S3RVER"


def free_env(home, **extra):
    """An environment with no AWS_* variable of the caller's, a HOME of the
    test's (no ~/.aws of the machine), no proxy for loopback, and the
    instance metadata service off (AWS_EC2_METADATA_DISABLED: the chain
    never asks the machine's own; a test that wants one passes
    AWS_EC2_METADATA_DISABLED="false" and its own endpoint)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k.lower() not in ("http_proxy", "https_proxy",
                                                            "all_proxy")}
    env["HOME"] = home
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env.update({k: v for k, v in extra.items() if v is not None})
    return env


class Server:
    """A child process that prints a line with its HOST:PORT."""

    def __init__(self, argv, pattern, cwd=None, env=None, timeout=30):
        self.log = tempfile.TemporaryFile()
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, cwd=cwd,
                                  env=env)
        deadline = time.monotonic() + timeout
        buf = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self.p.poll() is not None:
                self.stop()
                self.log.seek(0)
                raise RuntimeError("%s did not start: %s %s" % (argv[0], buf.decode(),
                                                                self.log.read().decode()[-2000:]))
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 4096)
                buf += chunk
                m = re.search(pattern, buf.decode(errors="replace"))
                if m:
                    self.host, self.port = m.group(1), int(m.group(2))
                    break
        self.url = "http://%s:%d" % (self.host, self.port)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def node_argv():
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        raise RuntimeError("node is missing (scripts/deps installs npm and node)")
    major = int(subprocess.run([node, "-p", "process.versions.node.split('.')[0]"],
                               capture_output=True, text=True, check=True).stdout)
    # s3rver 3.7 encrypts its continuation tokens with DES, which OpenSSL 3
    # (node 17 and later) keeps in its legacy provider
    return [node] + (["--openssl-legacy-provider"] if major >= 17 else [])


def s3rver_bin():
    """s3rver's command: $BFS_S3RVER, or installed by tests/s3/setup into
    $BFS_S3_NPM_DIR (default build/tests/s3/npm)."""
    if os.environ.get("BFS_S3RVER"):
        return os.environ["BFS_S3RVER"]
    d = os.environ.get("BFS_S3_NPM_DIR") or os.path.join(REPO, "build", "tests", "s3", "npm")
    r = subprocess.run([os.path.join(HERE, "setup"), d], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("tests/s3/setup failed: " + r.stderr[-2000:])
    return r.stdout.strip().splitlines()[-1]


def start_s3rver(directory, lax=False, buckets=(), tls=None):
    """tls: (key file, certificate file) to serve https."""
    argv = node_argv() + [s3rver_bin(), "-d", directory, "-a", "127.0.0.1", "-p", "0",
                          "--silent"]
    if lax:
        argv.append("--allow-mismatched-signatures")
    if tls:
        argv += ["--key", tls[0], "--cert", tls[1]]
    for b in buckets:
        argv += ["--configure-bucket", b]
    srv = Server(argv, r"listening on ([0-9.]+):(\d+)")
    if tls:
        srv.url = "https://%s:%d" % (srv.host, srv.port)
    return srv


def self_signed(directory):
    """A key and a certificate for 127.0.0.1, made with the openssl command."""
    key, cert = os.path.join(directory, "key.pem"), os.path.join(directory, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return key, cert


def start_proxy(upstream, *extra):
    return Server([PY, os.path.join(HERE, "s3proxy.py"), "--upstream", upstream] + list(extra),
                  r"s3proxy listening on ([0-9.]+):(\d+)")


@contextlib.contextmanager
def behind_proxy(directory, buckets, skip):
    """s3rver (lax, with buckets) under directory/data and s3proxy.py in
    front of it; yields the proxy's control, with .endpoint (the proxy's
    URL), .s3rver (the server) and .home (an empty directory/home). Where
    s3rver will not start (no node, no npm registry) calls skip(why)."""
    directory = str(directory)
    try:
        srv = start_s3rver(os.path.join(directory, "data"), lax=True, buckets=buckets)
    except RuntimeError as e:
        skip("s3rver would not start: %s" % str(e)[:300])
        raise
    try:
        prx = start_proxy("%s:%d" % (srv.host, srv.port))
    except BaseException:
        srv.stop()
        raise
    ctl = ProxyControl(prx.url)
    ctl.endpoint = prx.url
    ctl.s3rver = srv
    ctl.home = os.path.join(directory, "home")
    os.makedirs(ctl.home)
    try:
        yield ctl
    finally:
        prx.stop()
        srv.stop()


def put_files(endpoint, bucket, local, prefix):
    """Every file of the folder local (not its subfolders) into bucket as
    PREFIX + its name, in name order, through s3rver at endpoint."""
    boto = boto_client(endpoint)
    for f in sorted(os.listdir(local)):
        path = os.path.join(local, f)
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                boto.put_object(Bucket=bucket, Key=prefix + f, Body=fh.read())


class ProxyControl:
    def __init__(self, url):
        self.url = url

    def _call(self, path, body=None):
        req = urllib.request.Request(self.url + "/__proxy/" + path,
                                     data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(req, timeout=30) as r:
            return json.load(r)

    def reset(self):
        return self._call("reset", {})

    def config(self, **cfg):
        return self._call("config", cfg)

    def rules(self, *rules):
        return self._call("config", {"rules": list(rules)})

    def log(self):
        return self._call("log")

    def stats(self):
        return self._call("stats")


def boto_client(endpoint, key=S3RVER_KEY, secret=S3RVER_SECRET):
    import botocore.session
    from botocore.config import Config

    s = botocore.session.get_session()
    return s.create_client("s3", endpoint_url=endpoint, aws_access_key_id=key,
                           aws_secret_access_key=secret, region_name="us-east-1",
                           config=Config(s3={"addressing_style": "path"},
                                         retries={"max_attempts": 1}))


class Tool:
    """Runs s3tool with an environment of the test's."""

    def __init__(self, path, home):
        self.path = path
        self.home = home

    def env(self, key=S3RVER_KEY, secret=S3RVER_SECRET, token=None, **extra):
        return free_env(self.home, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret,
                        AWS_SESSION_TOKEN=token, **extra)

    def run(self, *args, opts=None, env=None, check=True, timeout=120):
        argv = [self.path] + (["-o", opts] if opts else []) + list(args)
        r = subprocess.run(argv, capture_output=True, env=env if env is not None else self.env(),
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError("%s failed (%d): %s" % (" ".join(argv), r.returncode,
                                                        r.stderr.decode(errors="replace")))
        return r


def tool_path():
    p = os.environ.get("BFS_S3TOOL") or os.path.join(REPO, "build", "tests", "s3", "s3tool")
    if not os.access(p, os.X_OK):
        sys.stderr.write("s3tool not built at %s (make check TESTS= builds it)\n" % p)
    return p
