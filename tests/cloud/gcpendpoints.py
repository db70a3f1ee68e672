#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gcpendpoints — Google's OAuth 2.0 token endpoint and the metadata server of
a Google Cloud VM, small enough for tests, checking what the real ones check.

On one port:

  POST /token            the OAuth token endpoint (what a key's token_uri and
                         oauth2.googleapis.com/token serve):
      grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT
          the JWT (RFC 7523) must be RS256 over header.claims, signed by the
          private key whose public half was registered ("keys") under its
          kid (or the only key when the header has no kid); its claims: iss
          the key's client_email, scope holding a devstorage scope, aud this
          endpoint's URL, iat within 5 minutes of now, exp after now and at
          most iat + 3600. Any failure: 400 {"error": "invalid_grant",
          "error_description": ...} as Google answers.
      grant_type=refresh_token&client_id&client_secret&refresh_token
          the three must be a registered user's ("users"); else 400
          invalid_grant (or invalid_client for a wrong secret).
  GET /computeMetadata/v1/instance/service-accounts/default/token
                         the metadata server's token: only with the header
                         "Metadata-Flavor: Google" (else 403, as a VM's does),
                         and never with X-Forwarded-For.
  GET .../service-accounts/default/email   the VM's service account (the
                         same header required)
  GET .../service-accounts/default/?recursive=true   its email, aliases and
                         scopes, as JSON (what google-auth asks first)
  GET /                  the metadata server's root, with the header
                         "Metadata-Flavor: Google" in the reply (what
                         google-auth's ping looks for).
  GET /tokeninfo?access_token=T   as oauth2.googleapis.com/tokeninfo: 200
                         {"expires_in", "scope", "azp"} for a token this
                         server issued and that has not expired, else 400
                         {"error": "invalid_token"}. The storage proxy
                         (tests/s3/s3proxy.py, "bearer") asks it.

Each token issued is random, lasts "lifetime" seconds (default 3600; the
tests use a few), and is answered {"access_token", "expires_in",
"token_type": "Bearer"}. The metadata server, as Compute Engine's, hands out
the token it holds (expires_in: what is left of it) until a twelfth of its
life is left (5 minutes of an hour; at least 2 s, expires_in being whole
seconds), then a new one ("metadata_cache":
false: a new one each time).

The control API, under /__ctl/:
  POST /__ctl/config  {"lifetime": S, "metadata_cache": bool, "echo": bool
                       (a refused assertion is quoted in the error), "keys": [{"kid", "client_email",
                       "public_pem"}], "users": [{"client_id",
                       "client_secret", "refresh_token"}], "down": bool}
                       ("down": every token request and the metadata root
                       are answered by a reset connection, as an unreachable
                       server; tokeninfo stays up)
  GET  /__ctl/log     the grants, in order: {"t", "path", "grant", "status",
                       "why", "iss", "user_agent", and for an assertion
                       "jwt_header" and "jwt_claims"}: never a token, a
                       signature or a secret
  POST /__ctl/reset   an empty log, nothing down

    gcpendpoints.py [--listen HOST:PORT]

Prints "gcpendpoints listening on HOST:PORT" once it listens.
"""
import argparse
import base64
import json
import secrets
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
METADATA_TOKEN = "/computeMetadata/v1/instance/service-accounts/default/token"
METADATA_EMAIL = "/computeMetadata/v1/instance/service-accounts/default/email"
METADATA_ACCOUNT = "/computeMetadata/v1/instance/service-accounts/default/"
VM_ACCOUNT = "vm-sa@test-project.iam.gserviceaccount.com"
SKEW = 300  # seconds of clock skew Google allows on iat


def b64url_decode(s):
    """base64url, with or without its padding (google-auth pads; RFC 7515
    does not; Google takes both)."""
    if isinstance(s, str):
        s = s.rstrip("=")
    if not isinstance(s, str) or any(c not in
                                     "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                     "0123456789-_" for c in s):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.lifetime = 3600
        self.keys = {}  # kid -> (client_email, public key)
        self.users = {}  # client_id -> (client_secret, refresh_token)
        self.tokens = {}  # token -> (expiry, who)
        self.log = []
        self.down = False
        self.url = None  # this endpoint's token URL (the aud)
        self.md_token = None  # the metadata server's cached (token, expiry)
        self.md_cache = True
        self.echo = False  # quote the assertion in a refusal

    def issue(self, who):
        tok = "ya29.test-" + secrets.token_urlsafe(24)
        with self.lock:
            self.tokens[tok] = (time.time() + self.lifetime, who)
            # forget long expired ones
            now = time.time()
            for t in [t for t, (e, _) in self.tokens.items() if e < now - 600]:
                del self.tokens[t]
            return tok, self.lifetime

    def metadata_token(self):
        """The VM's token as a metadata server hands it out: the same one,
        with what is left of its life, until it has less than a twelfth of
        its life left (5 minutes of an hour, as Compute Engine's metadata
        server caches them) or less than 2 seconds, then a new one."""
        now = time.time()
        with self.lock:
            cached = self.md_token
            # expires_in is whole seconds (floored, as Google's) and a
            # client's expiry too (time_t): a real server's 5 minutes are
            # hundreds of those units, a test's 3 s token's twelfth is not
            # one; 2 s keeps the scale sane
            if cached and self.md_cache and cached[1] - now >= max(self.lifetime / 12, 2.0):
                return cached[0], int(cached[1] - now)
        tok, life = self.issue("default")
        with self.lock:
            self.md_token = (tok, now + life)
        return tok, life

    def check_jwt(self, assertion, seen):
        """None when the assertion is what Google accepts, else why not.
        Returns (why, iss); seen gets the header and the claims (no
        signature)."""
        parts = assertion.split(".")
        if len(parts) != 3:
            return "not a JWT", None
        try:
            head = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            sig = b64url_decode(parts[2])
        except (ValueError, UnicodeDecodeError):
            return "a JWT part is not base64url JSON", None
        if not isinstance(head, dict) or not isinstance(claims, dict):
            return "a JWT part is not a JSON object", None
        seen["jwt_header"], seen["jwt_claims"] = head, claims
        if head.get("alg") != "RS256":
            return "alg is not RS256", None
        with self.lock:
            if "kid" in head:
                ent = self.keys.get(head["kid"])
            else:
                ent = next(iter(self.keys.values())) if len(self.keys) == 1 else None
        if ent is None:
            return "Invalid JWT Signature. (no such kid)", None
        email, pub = ent
        try:
            pub.verify(sig, (parts[0] + "." + parts[1]).encode(), padding.PKCS1v15(),
                       hashes.SHA256())
        except InvalidSignature:
            return "Invalid JWT Signature.", None
        iss = claims.get("iss")
        if iss != email:
            return "Invalid JWT: iss is not the key's client_email", iss
        scope = claims.get("scope")
        if not isinstance(scope, str) or not any(
                s.startswith("https://www.googleapis.com/auth/devstorage.") or
                s == "https://www.googleapis.com/auth/cloud-platform" for s in scope.split()):
            return "Invalid JWT: no storage scope", iss
        if claims.get("aud") != self.url:
            return "Invalid JWT: aud is not this token endpoint", iss
        iat, exp, now = claims.get("iat"), claims.get("exp"), time.time()
        if not isinstance(iat, int) or not isinstance(exp, int):
            return "Invalid JWT: iat and exp must be integers", iss
        if abs(iat - now) > SKEW:
            return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a " \
                   "reasonable timeframe. Check your iat and exp values", iss
        if exp <= now or exp - iat > 3600:
            return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a " \
                   "reasonable timeframe. Check your iat and exp values", iss
        return None, iss


STATE = State()


def set_rst(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):  # no stderr noise (and no URL holding a token)
        pass

    def reply(self, status, obj, headers=()):
        data = json.dumps(obj).encode()
        self.send_response(status)
        # the metadata server says exactly "application/json" (google-auth
        # 1.5 compares the header whole); the OAuth endpoint adds a charset
        md = any(k == "Metadata-Flavor" for k, _ in headers)
        self.send_header("Content-Type",
                         "application/json" if md else "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def record(self, path, grant, status, why=None, iss=None, extra=None):
        with STATE.lock:
            STATE.log.append(dict({"t": time.time(), "path": path, "grant": grant,
                                   "status": status, "why": why, "iss": iss,
                                   "user_agent": self.headers.get("User-Agent")},
                                  **(extra or {})))

    def go_down(self):
        set_rst(self.connection)
        self.close_connection = True
        self.connection.close()

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/__ctl/log":
            with STATE.lock:
                return self.reply(200, list(STATE.log))
        if path == "/tokeninfo":
            tok = urllib.parse.parse_qs(query).get("access_token", [""])[0]
            with STATE.lock:
                ent = STATE.tokens.get(tok)
            left = ent[0] - time.time() if ent else -1
            if left <= 0:  # (a token with less than a second left is still good)
                return self.reply(400, {"error": "invalid_token",
                                        "error_description": "Invalid Value"})
            return self.reply(200, {"azp": ent[1], "expires_in": str(max(1, int(left))),
                                    "scope": "https://www.googleapis.com/auth/"
                                             "devstorage.read_only"})
        if STATE.down:
            return self.go_down()
        # the VM's account by its email is the same as "default"
        path = path.replace("/service-accounts/%s/" % VM_ACCOUNT, "/service-accounts/default/")
        if path == "/":
            return self.reply(200, {}, [("Metadata-Flavor", "Google")])
        if path == METADATA_ACCOUNT and "recursive=true" in query:
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.reply(403, {"error": "Missing required header: Metadata-Flavor"},
                                  [("Metadata-Flavor", "Google")])
            return self.reply(200, {"aliases": ["default"], "email": VM_ACCOUNT,
                                    "scopes": ["https://www.googleapis.com/auth/cloud-platform"]},
                              [("Metadata-Flavor", "Google")])
        if path == METADATA_EMAIL:
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.reply(403, {"error": "Missing required header: Metadata-Flavor"})
            data = VM_ACCOUNT.encode()
            self.send_response(200)
            self.send_header("Metadata-Flavor", "Google")
            self.send_header("Content-Type", "application/text")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return None
        if path == METADATA_TOKEN:
            if self.headers.get("Metadata-Flavor") != "Google":
                self.record(path, "metadata", 403, "no Metadata-Flavor: Google")
                return self.reply(403, {"error": "Missing required header: Metadata-Flavor"},
                                  [("Metadata-Flavor", "Google")])
            if self.headers.get("X-Forwarded-For"):
                self.record(path, "metadata", 403, "X-Forwarded-For")
                return self.reply(403, {"error": "X-Forwarded-For"},
                                  [("Metadata-Flavor", "Google")])
            tok, life = STATE.metadata_token()
            self.record(path, "metadata", 200, extra={"expires_in": life})
            return self.reply(200, {"access_token": tok, "expires_in": life,
                                    "token_type": "Bearer"}, [("Metadata-Flavor", "Google")])
        return self.reply(404, {"error": "not found"})

    def do_POST(self):
        path = self.path.partition("?")[0]
        body = self.body()
        if path == "/__ctl/config":
            cfg = json.loads(body or b"{}")
            with STATE.lock:
                if "lifetime" in cfg:
                    STATE.lifetime = float(cfg["lifetime"])
                    STATE.md_token = None
                if "echo" in cfg:
                    STATE.echo = bool(cfg["echo"])
                if "metadata_cache" in cfg:
                    STATE.md_cache = bool(cfg["metadata_cache"])
                if "down" in cfg:
                    STATE.down = bool(cfg["down"])
                for k in cfg.get("keys", []):
                    pub = serialization.load_pem_public_key(k["public_pem"].encode())
                    STATE.keys[k["kid"]] = (k["client_email"], pub)
                for u in cfg.get("users", []):
                    STATE.users[u["client_id"]] = (u["client_secret"], u["refresh_token"])
            return self.reply(200, {})
        if path == "/__ctl/reset":
            with STATE.lock:
                STATE.log = []
                STATE.down = False
                STATE.md_token = None
                STATE.md_cache = True
                STATE.echo = False
            return self.reply(200, {})
        if STATE.down:
            return self.go_down()
        if path != "/token":
            return self.reply(404, {"error": "not found"})
        if not (self.headers.get("Content-Type") or "").startswith(
                "application/x-www-form-urlencoded"):
            self.record(path, None, 400, "not a form")
            return self.reply(400, {"error": "invalid_request",
                                    "error_description": "not a form"})
        form = dict(urllib.parse.parse_qsl(body.decode("latin-1"), keep_blank_values=True))
        grant = form.get("grant_type")
        if grant == JWT_BEARER:
            seen = {}
            why, iss = STATE.check_jwt(form.get("assertion", ""), seen)
            if why:
                self.record(path, "jwt-bearer", 400, why, iss, seen)
                if STATE.echo:  # a careless server, quoting what it got
                    why += " (assertion: %s)" % form.get("assertion", "")
                return self.reply(400, {"error": "invalid_grant", "error_description": why})
            tok, life = STATE.issue(iss)
            self.record(path, "jwt-bearer", 200, None, iss, seen)
        elif grant == "refresh_token":
            with STATE.lock:
                ent = STATE.users.get(form.get("client_id"))
            if ent is None or ent[0] != form.get("client_secret"):
                self.record(path, "refresh_token", 401, "invalid_client")
                return self.reply(401, {"error": "invalid_client",
                                        "error_description": "Unauthorized"})
            if ent[1] != form.get("refresh_token"):
                self.record(path, "refresh_token", 400, "bad refresh token")
                return self.reply(400, {"error": "invalid_grant",
                                        "error_description": "Bad Request"})
            tok, life = STATE.issue(form.get("client_id"))
            self.record(path, "refresh_token", 200)
        else:
            self.record(path, grant, 400, "unsupported_grant_type")
            return self.reply(400, {"error": "unsupported_grant_type",
                                    "error_description": "Invalid grant_type"})
        return self.reply(200, {"access_token": tok, "expires_in": int(life) if life >= 1
                                else life, "token_type": "Bearer",
                                "scope": "https://www.googleapis.com/auth/devstorage.read_only"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", default="127.0.0.1:0")
    args = ap.parse_args()
    host, port = args.listen.rsplit(":", 1)
    srv = ThreadingHTTPServer((host, int(port)), Handler)
    srv.daemon_threads = True
    h, p = srv.server_address[:2]
    STATE.url = "http://%s:%d/token" % (h, p)
    print("gcpendpoints listening on %s:%d" % (h, p), flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
