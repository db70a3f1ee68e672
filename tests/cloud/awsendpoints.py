#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""awsendpoints — the AWS credential endpoints, for tests: the instance
metadata service (IMDSv2 and v1), the container credentials endpoint, and
STS (AssumeRole, AssumeRoleWithWebIdentity), on one port, each checking
what the real one checks:

  - IMDS: PUT /latest/api/token needs X-aws-ec2-metadata-token-ttl-seconds
    between 1 and 21600 (else 400) and no X-Forwarded-For (else 403); the
    token it gives lasts that long; the credential paths
    (/latest/meta-data/iam/security-credentials/[ROLE]) need a token that
    is valid and not expired (else 401), unless "imds": "v1" (the token
    request is then refused with 405 and no token is needed, as on an
    instance with IMDSv1 allowed and a proxy that blocks PUT);
  - the container endpoint (GET /container/creds): the Authorization header
    must be the token given (--container-token), else 401;
  - STS (POST /): the form's Action, Version=2011-06-15, RoleArn and
    RoleSessionName; AssumeRole must be signed with SigV4 (service sts) by a
    source key (--source KEY:SECRET) or by credentials this server issued
    and that are not expired (their session token sent and signed);
    AssumeRoleWithWebIdentity must be unsigned, its WebIdentityToken the
    one the identity provider issued (--web-token: what the test writes in
    the token file). Errors are STS's
    XML (ErrorResponse).

Every credential it issues is new (AccessKeyId ASIA..., a secret and a
session token) and expires after "lifetime_s" seconds (whole seconds, as
Expiration is written); each goes into the ledger file (--ledger, JSON
{key_id: {"secret", "token", "expires"}}) that s3proxy.py reads to check
the requests signed with them, refusing expired ones as S3 does.

Control (same port): POST /__ctl/config {"lifetime_s": N, "down": bool
(every endpoint answers 503), "hang": bool (every endpoint takes the
request and answers nothing until "hang" is false again: a metadata
service that stopped answering), "imds": "v2" | "v1",
"role": NAME}; GET /__ctl/log (method, path, status, action, the names of
the headers; "action": "hang" for a request held so).

  awsendpoints.py --ledger FILE [--listen HOST:PORT] [--lifetime S]
                  [--role NAME] [--container-token T] [--web-token T]
                  [--source KEY:SECRET]...

Prints "awsendpoints listening on HOST:PORT" once it listens.
"""
import argparse
import hashlib
import json
import os
import re
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

AUTH_RE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/,]+)/(\d{8})/([^/,]+)/([^/,]+)/aws4_request,"
                     r" ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$")
STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class State:
    def __init__(self, args):
        self.lock = threading.Lock()
        self.ledger_path = args.ledger
        self.lifetime = args.lifetime
        self.role = args.role
        self.container_token = args.container_token
        self.web_token = args.web_token
        self.sources = dict(s.split(":", 1) for s in args.source)
        self.down = False
        self.hang = False
        self.imds = "v2"
        self.tokens = {}  # IMDS session token -> expiry
        self.issued = {}  # key id -> {secret, token, expires}
        self.log = []
        self.n = 0
        self.write_ledger()

    def write_ledger(self):
        tmp = self.ledger_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.issued, f)
        os.replace(tmp, self.ledger_path)

    def issue(self):
        with self.lock:
            self.n += 1
            key = "ASIA%012dTEST" % self.n
            exp = int(time.time() + self.lifetime)
            cred = {"secret": secrets.token_urlsafe(30),
                    "token": "IQo" + secrets.token_urlsafe(120), "expires": exp}
            self.issued[key] = cred
            self.write_ledger()
            return key, cred


def check_sigv4(state, method, url, headers, body, service="sts"):
    """None when the request is signed right by a key we know, else
    (status, code, message)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = headers.get("authorization")
    if not auth:
        return 403, "MissingAuthenticationToken", "Request is missing Authentication Token"
    m = AUTH_RE.match(auth)
    if not m:
        return 400, "IncompleteSignature", "The request signature does not conform to AWS standards."
    key, date, region, svc, signed, signature = m.groups()
    if svc != service:
        return 403, "SignatureDoesNotMatch", "Credential should be scoped to correct service: '%s'." % service
    token = None
    if key in state.sources:
        secret = state.sources[key]
    elif key in state.issued:
        c = state.issued[key]
        secret, token = c["secret"], c["token"]
        if headers.get("x-amz-security-token") != token:
            return 403, "InvalidClientTokenId", "The security token included in the request is invalid."
        if time.time() >= c["expires"]:
            return 400, "ExpiredToken", "The security token included in the request is expired"
    else:
        return 403, "InvalidClientTokenId", "The security token included in the request is invalid."
    if token and "x-amz-security-token" not in signed.split(";"):
        return 403, "SignatureDoesNotMatch", "x-amz-security-token is not signed"
    amz_date = headers.get("x-amz-date") or ""
    if amz_date[:8] != date:
        return 403, "SignatureDoesNotMatch", "the scope's date is not x-amz-date's"
    sha = headers.get("x-amz-content-sha256")
    if sha is not None and sha != hashlib.sha256(body).hexdigest():
        return 400, "XAmzContentSHA256Mismatch", "x-amz-content-sha256 is not the body's"
    hs = {}
    for name in signed.split(";"):
        if headers.get(name) is None:
            return 403, "SignatureDoesNotMatch", "a signed header is missing"
        hs[name] = headers.get(name)
    req = AWSRequest(method=method, url=url, data=body, headers=hs)
    req.context["timestamp"] = amz_date
    a = SigV4Auth(Credentials(key, secret, token), service, region)
    creq = a.canonical_request(req)
    if a.signature(a.string_to_sign(req, creq), req) != signature:
        return 403, "SignatureDoesNotMatch", ("The request signature we calculated does not "
                                              "match the signature you provided.")
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "awsendpoints"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body=b"", ctype="text/plain"):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.entry["status"] = status

    def body(self):
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n) if n else b""

    def hdrs(self):
        return {k.lower(): v for k, v in self.headers.items()}

    def handle_any(self):
        st = self.server.state
        path = urllib.parse.urlsplit(self.path).path
        self.entry = {"t": time.time(), "method": self.command, "path": path,
                      "headers": sorted(k.lower() for k in self.headers.keys()),
                      "status": None, "action": None}
        body = self.body()
        if path.startswith("/__ctl/"):
            return self.control(path, body)
        with st.lock:
            st.log.append(self.entry)
        if st.down:
            return self.reply(503, "down")
        if st.hang:
            return self.hold()
        if path == "/latest/api/token":
            return self.imds_token()
        if path.startswith("/latest/meta-data/iam/security-credentials"):
            return self.imds_creds(path)
        if path == "/container/creds":
            return self.container()
        if path == "/" and self.command == "POST":
            return self.sts(body)
        return self.reply(404, "not found")

    do_GET = do_PUT = do_POST = handle_any

    def hold(self):
        """Answer nothing while "hang" holds; then close the connection."""
        st = self.server.state
        self.entry["action"] = "hang"
        while st.hang:
            time.sleep(0.05)
        self.close_connection = True

    # ---- control ----
    def control(self, path, body):
        st = self.server.state
        if path == "/__ctl/config" and self.command == "POST":
            cfg = json.loads(body or b"{}")
            with st.lock:
                if "lifetime_s" in cfg:
                    st.lifetime = float(cfg["lifetime_s"])
                if "down" in cfg:
                    st.down = bool(cfg["down"])
                if "hang" in cfg:
                    st.hang = bool(cfg["hang"])
                if "imds" in cfg:
                    st.imds = cfg["imds"]
                if "role" in cfg:
                    st.role = cfg["role"]
            return self.reply(200, "{}", "application/json")
        if path == "/__ctl/log":
            with st.lock:
                data = json.dumps(st.log)
            return self.reply(200, data, "application/json")
        return self.reply(404, "no such control path")

    # ---- IMDS ----
    def imds_token(self):
        st = self.server.state
        if self.command != "PUT":
            return self.reply(405, "")
        if st.imds == "v1":
            return self.reply(405, "")
        if self.headers.get("x-forwarded-for"):
            return self.reply(403, "")
        ttl = self.headers.get("x-aws-ec2-metadata-token-ttl-seconds")
        if not ttl or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return self.reply(400, "")
        tok = "AQAE" + secrets.token_urlsafe(40)
        with st.lock:
            st.tokens[tok] = time.time() + int(ttl)
        self.entry["action"] = "token ttl=%s" % ttl
        self.send_response(200)
        self.send_header("X-aws-ec2-metadata-token-ttl-seconds", ttl)
        self.send_header("Content-Length", str(len(tok)))
        self.end_headers()
        self.wfile.write(tok.encode())
        self.entry["status"] = 200

    def imds_creds(self, path):
        st = self.server.state
        if self.command != "GET":
            return self.reply(405, "")
        tok = self.headers.get("x-aws-ec2-metadata-token")
        if tok is not None:
            exp = st.tokens.get(tok)
            if exp is None or time.time() >= exp:
                return self.reply(401, "")
        elif st.imds != "v1":
            return self.reply(401, "")
        self.entry["action"] = "v2" if tok else "v1"
        rest = path[len("/latest/meta-data/iam/security-credentials"):].strip("/")
        if not rest:
            return self.reply(200, st.role)
        if rest != st.role:
            return self.reply(404, "")
        key, c = st.issue()
        doc = {"Code": "Success", "LastUpdated": iso(time.time()), "Type": "AWS-HMAC",
               "AccessKeyId": key, "SecretAccessKey": c["secret"], "Token": c["token"],
               "Expiration": iso(c["expires"])}
        return self.reply(200, json.dumps(doc), "application/json")

    # ---- the container endpoint ----
    def container(self):
        st = self.server.state
        if st.container_token is not None and \
                self.headers.get("authorization") != st.container_token:
            return self.reply(401, json.dumps({"message": "bad authorization"}))
        key, c = st.issue()
        doc = {"AccessKeyId": key, "SecretAccessKey": c["secret"], "Token": c["token"],
               "Expiration": iso(c["expires"]),
               "RoleArn": "arn:aws:iam::123456789012:role/%s" % st.role}
        return self.reply(200, json.dumps(doc), "application/json")

    # ---- STS ----
    def sts_error(self, status, code, message):
        body = ('<ErrorResponse xmlns="%s"><Error><Type>Sender</Type><Code>%s</Code>'
                '<Message>%s</Message></Error><RequestId>test</RequestId></ErrorResponse>'
                % (STS_NS, xml_escape(code), xml_escape(message)))
        self.entry["action"] = "error " + code
        return self.reply(status, body, "text/xml")

    def sts(self, body):
        st = self.server.state
        form = dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True))
        action = form.get("Action")
        self.entry["action"] = action
        self.entry["form"] = {k: v for k, v in form.items() if k != "WebIdentityToken"}
        if form.get("Version") != "2011-06-15":
            return self.sts_error(400, "InvalidAction", "bad Version")
        for need in ("RoleArn", "RoleSessionName"):
            if not form.get(need):
                return self.sts_error(400, "ValidationError", "%s is missing" % need)
        if not re.match(r"^arn:aws:iam::\d{12}:role/[\w+=,.@/-]+$", form["RoleArn"]):
            return self.sts_error(400, "ValidationError", "RoleArn is not a role's ARN")
        h = self.hdrs()
        url = "http://%s%s" % (h.get("host"), self.path)
        if action == "AssumeRole":
            bad = check_sigv4(st, "POST", url, h, body)
            if bad:
                self.entry["sig"] = bad[1]
                return self.sts_error(*bad)
            self.entry["sig"] = "ok"
            self.entry["signer"] = AUTH_RE.match(h["authorization"]).group(1)
        elif action == "AssumeRoleWithWebIdentity":
            if "authorization" in h:
                return self.sts_error(400, "InvalidParameterCombination",
                                      "AssumeRoleWithWebIdentity is not signed")
            if not st.web_token or form.get("WebIdentityToken") != st.web_token:
                return self.sts_error(400, "InvalidIdentityToken",
                                      "Couldn't retrieve verification key from your identity "
                                      "provider")
        else:
            return self.sts_error(400, "InvalidAction", "unknown Action")
        key, c = st.issue()
        role = form["RoleArn"].rsplit("/", 1)[1]
        body = ('<%sResponse xmlns="%s"><%sResult><Credentials><AccessKeyId>%s</AccessKeyId>'
                '<SecretAccessKey>%s</SecretAccessKey><SessionToken>%s</SessionToken>'
                '<Expiration>%s</Expiration></Credentials><AssumedRoleUser>'
                '<AssumedRoleId>AROATEST:%s</AssumedRoleId>'
                '<Arn>arn:aws:sts::123456789012:assumed-role/%s/%s</Arn></AssumedRoleUser>'
                '</%sResult><ResponseMetadata><RequestId>test</RequestId></ResponseMetadata>'
                '</%sResponse>'
                % (action, STS_NS, action, key, xml_escape(c["secret"]), xml_escape(c["token"]),
                   iso(c["expires"]), xml_escape(form["RoleSessionName"]), xml_escape(role),
                   xml_escape(form["RoleSessionName"]), action, action))
        return self.reply(200, body, "text/xml")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--ledger", required=True)
    ap.add_argument("--lifetime", type=float, default=3600)
    ap.add_argument("--role", default="train-role")
    ap.add_argument("--container-token")
    ap.add_argument("--web-token")
    ap.add_argument("--source", action="append", default=[])
    args = ap.parse_args()
    host, port = args.listen.rsplit(":", 1)
    srv = ThreadingHTTPServer((host, int(port)), Handler)
    srv.daemon_threads = True
    srv.state = State(args)
    print("awsendpoints listening on %s:%d" % srv.server_address[:2], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
