#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""s3proxy — an HTTP/1.1 proxy in front of an S3 server (s3rver in the tests),
for testing and benchmarking the object-store client.

It forwards each request of a client connection over one upstream connection
of its own (both kept alive), and on demand:

  - delays every request (first-byte latency: --delay-ms, or "delay_ms");
  - answers instead of the server: 503 SlowDown, 429, 500, 403 AccessDenied
    ... with an S3 XML error body, for the first N matching requests or a
    fraction of them ("status" rules);
  - resets the connection (TCP RST) before forwarding, or after the response
    headers ("reset" rules, "when": "before" | "after");
  - cuts a response body short after K bytes and resets ("truncate" rules);
  - stalls: holds the request, sends nothing, then closes ("stall" rules);
  - answers 412 PreconditionFailed when a GET's If-Match does not match the
    object's ETag (s3rver 3.7 ignores If-Match; S3 does not): on by default;
  - checks AWS Signature Version 4 as S3 does, when given the key pair
    (--sigv4 KEY:SECRET, or "sigv4"), or a ledger of temporary credentials
    (config "sigv4_ledger": the path of tests/cloud/awsendpoints.py's ledger,
    {KEY: {"secret", "token", "expires"}}, read again when it changes):
    the session token must be the one issued with the key (else 403
    InvalidToken) and not expired (else 400 ExpiredToken, as S3 answers);
    s3rver 3.7 checks none. The path and
    query are decoded and signed again by botocore (S3SigV4Auth) over the
    headers the request lists in SignedHeaders; a mismatch is answered 403
    SignatureDoesNotMatch, another key id 403 InvalidAccessKeyId, and the log
    entry says "sig": "ok" | "mismatch" | "unknown key" | "none";
  - checks OAuth 2.0 Bearer tokens as Cloud Storage does, when given a
    tokeninfo URL (--bearer URL, or "bearer"; tests/cloud/gcpendpoints.py
    serves one): a request with "Authorization: Bearer T" is let through
    (without that header: s3rver reads it as anonymous) while the token
    server says T is valid; an unknown or expired token is answered 401
    AuthenticationRequired, as Cloud Storage's XML API does, and the log
    entry says "sig": "bearer ok" | "bearer invalid";
  - logs every request: method, target, all headers, status, body bytes sent,
    duration, the rule that fired (for counting requests and bytes, checking
    signatures, and checking that no secret leaks).

The control API is on the same port, under /__proxy/:
  GET  /__proxy/log      the log, a JSON list
  GET  /__proxy/stats    counters (requests, bytes, connections, in flight, maxima)
  POST /__proxy/config   {"delay_ms": N, "rules": [RULE...], "if_match": bool,
                          "sigv4": "KEY:SECRET" or null, "sigv4_ledger": PATH or null,
                          "bearer": URL or null}
  POST /__proxy/reset    no rules, no delay, empty log, counters zeroed

A RULE: {"match": REGEX on "METHOD TARGET" (default all), "action": "status" |
"reset" | "truncate" | "stall" | "delay", "first": N (the first N matching
requests) or "fraction": P (seeded), "status": 503, "code": "SlowDown",
"message": TEXT ("{header:NAME}" is replaced by that request header, to play
a server that echoes what it got), "retry_after": S, "bytes": K (truncate),
"ms": N (stall, delay), "when": "before" | "after" (reset)}. The first rule
that matches and fires is applied.

  s3proxy.py --upstream HOST:PORT[,HOST:PORT...] [--listen HOST:PORT]
             [--delay-ms N] [--seed N] [--log-file F] [--no-log] [--no-if-match]
             [--sigv4 KEY:SECRET] [--bearer TOKENINFO_URL] [--workers N]

Several upstreams (s3rver processes over one directory) take the client
connections in turn, for more than one s3rver can serve. --workers N runs N
processes on the one listening socket, for benchmarks: each has its own
rules, log and counters, so use it with --delay-ms and no control calls.

Prints "s3proxy listening on HOST:PORT" once it listens.
"""
import argparse
import asyncio
import ctypes
import itertools
import json
import os
import random
import re
import socket
import struct
import sys
import time
import urllib.parse

READ_CHUNK = 256 * 1024
MAX_HEAD = 64 * 1024
LOG_CAP = 200_000

REASONS = {200: "OK", 206: "Partial Content", 400: "Bad Request", 401: "Unauthorized",
           403: "Forbidden",
           404: "Not Found", 412: "Precondition Failed", 429: "Too Many Requests",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Slow Down",
           504: "Gateway Timeout"}
CODES = {403: ("AccessDenied", "Access Denied"),
         404: ("NoSuchKey", "The specified key does not exist."),
         429: ("TooManyRequests", "Please reduce your request rate."),
         500: ("InternalError", "We encountered an internal error. Please try again."),
         503: ("SlowDown", "Please reduce your request rate."),
         504: ("GatewayTimeout", "The gateway timed out.")}


class Rule:
    def __init__(self, d, rng):
        self.d = d
        self.match = re.compile(d.get("match", ""))
        self.action = d.get("action", "status")
        if self.action not in ("status", "reset", "truncate", "stall", "delay"):
            raise ValueError("unknown action %r" % self.action)
        self.first = d.get("first")
        self.fraction = d.get("fraction")
        self.rng = rng
        self.seen = 0
        self.fired = 0

    def fires(self, line):
        if not self.match.search(line):
            return False
        self.seen += 1
        if self.first is not None:
            ok = self.seen <= self.first
        elif self.fraction is not None:
            ok = self.rng.random() < self.fraction
        else:
            ok = True
        if ok:
            self.fired += 1
        return ok


class Head:
    """A request or response head: first line and headers, in order."""

    def __init__(self, raw):
        text = raw.decode("latin-1")
        lines = text.split("\r\n")
        self.first = lines[0]
        self.headers = []
        for ln in lines[1:]:
            if not ln:
                continue
            name, _, value = ln.partition(":")
            self.headers.append((name.strip(), value.strip()))

    def get(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None


def xml_error(code, message, resource):
    esc = (lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s'
            '</Message><Resource>%s</Resource><RequestId>S3PROXY</RequestId></Error>'
            % (esc(code), esc(message), esc(resource))).encode()


AUTH_RE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/,]+)/(\d{8})/([^/,]+)/([^/,]+)/aws4_request,"
                     r" ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$")


class Ledger:
    """Temporary credentials and their expiry, from a JSON file."""

    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.keys = {}

    def get(self, key):
        try:
            st = os.stat(self.path)
            if st.st_mtime_ns != self.mtime:
                with open(self.path) as f:
                    self.keys = json.load(f)
                self.mtime = st.st_mtime_ns
        except (OSError, ValueError):
            pass
        return self.keys.get(key)


def check_sigv4(keypair, method, target, head, ledger=None):
    """What S3 would say of the request's signature: None when it is right
    (or absent), else (status, code, message)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = head.get("authorization")
    if auth is None:
        return None, "none"
    m = AUTH_RE.match(auth)
    if not m:
        return (400, "AuthorizationHeaderMalformed", "The authorization header is malformed"), \
            "malformed"
    key, date, region, service, signed, signature = m.groups()
    issued = ledger.get(key) if ledger else None
    if issued:
        secret = issued["secret"]
        if head.get("x-amz-security-token") != issued["token"]:
            return (403, "InvalidToken",
                    "The provided token is malformed or otherwise invalid."), "bad token"
        if "x-amz-security-token" not in signed.split(";"):
            return (403, "SignatureDoesNotMatch", "the token is not signed"), "mismatch"
        if time.time() >= issued["expires"]:
            return (400, "ExpiredToken", "The provided token has expired."), "expired"
    elif keypair:
        want_key, secret = keypair.split(":", 1)
        if key != want_key:
            return (403, "InvalidAccessKeyId",
                    "The AWS Access Key Id you provided does not exist in our records."), \
                "unknown key"
    else:
        return (403, "InvalidAccessKeyId",
                "The AWS Access Key Id you provided does not exist in our records."), \
            "unknown key"
    amz_date = head.get("x-amz-date") or ""
    path, _, query = target.partition("?")
    # as S3 does: decode what was sent, encode it again the canonical way
    params = urllib.parse.parse_qsl(query, keep_blank_values=True)
    headers = {}
    for name in signed.split(";"):
        v = head.get(name)
        if v is None:
            return (403, "SignatureDoesNotMatch", "a signed header is missing"), "mismatch"
        headers[name] = v
    url = "http://%s%s" % (head.get("host"),
                           urllib.parse.quote(urllib.parse.unquote(path), safe="/~"))
    req = AWSRequest(method=method, url=url, params=params, headers=headers)
    s3auth = S3SigV4Auth(Credentials(key, secret), service, region)
    req.context["timestamp"] = amz_date
    if amz_date[:8] != date:
        return (403, "SignatureDoesNotMatch", "the scope's date is not x-amz-date's"), "mismatch"
    creq = s3auth.canonical_request(req)
    sts = s3auth.string_to_sign(req, creq)
    if s3auth.signature(sts, req) != signature:
        return (403, "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you "
                "provided. Check your key and signing method."), "mismatch"
    return None, "ok"


class BearerCheck:
    """Cloud Storage's side of OAuth: a token is good while the token
    server's tokeninfo says so, asked at each request (tokeninfo's
    expires_in is whole seconds: kept, it would end a token up to a second
    early)."""

    def __init__(self, url):
        self.url = url

    def _ask(self, token):
        import urllib.error
        import urllib.request
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        q = urllib.parse.urlencode({"access_token": token})
        try:
            with opener.open(self.url + "?" + q, timeout=10) as r:
                return float(json.load(r).get("expires_in", 0))
        except (urllib.error.URLError, OSError, ValueError):
            return 0.0

    async def check(self, token):
        left = await asyncio.get_running_loop().run_in_executor(None, self._ask, token)
        return left > 0


def strip_header(raw, name):
    """The request head raw without its header `name`."""
    lines = raw.split(b"\r\n")
    keep = [ln for ln in lines[1:] if ln.split(b":", 1)[0].strip().lower() != name]
    return b"\r\n".join(lines[:1] + keep)


def set_nodelay(writer):
    """asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP,
    and a socket accepted from ours has proto 0: Nagle's algorithm then
    holds a response's body until the client ACKs its head, which a client
    delays (~40 ms a request on a kept-alive connection)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


def set_rst(writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass


async def read_head(reader):
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial.strip():
            raise ConnectionError("a head cut short")
        return None
    except asyncio.LimitOverrunError:
        raise ConnectionError("a head over %d bytes" % MAX_HEAD)
    return raw


class Proxy:
    def __init__(self, args):
        ups = []
        for u in args.upstream.split(","):
            host, port = u.rsplit(":", 1)
            ups.append((host, int(port)))
        self.upstreams = itertools.cycle(ups)
        self.delay_ms = args.delay_ms
        self.if_match = not args.no_if_match
        self.sigv4 = args.sigv4
        self.bearer = BearerCheck(args.bearer) if args.bearer else None
        self.ledger = None
        self.keep_log = not args.no_log
        self.log_file = open(args.log_file, "a") if args.log_file else None
        self.seed = args.seed
        self.reset_state()

    def reset_state(self):
        self.rng = random.Random(self.seed)
        self.rules = []
        self.log = []
        self.stats = {"requests": 0, "bytes": 0, "connections": 0, "open_connections": 0,
                      "max_open_connections": 0, "in_flight": 0, "max_in_flight": 0,
                      "fired": 0}

    # ---- the control API ----
    async def control(self, head, body, writer):
        method, target = head.first.split(" ")[:2]
        path = target.split("?")[0]
        status, out = 200, {}
        try:
            if path == "/__proxy/log":
                out = self.log
            elif path == "/__proxy/stats":
                out = dict(self.stats, rules=[{"seen": r.seen, "fired": r.fired}
                                              for r in self.rules])
            elif path == "/__proxy/reset" and method == "POST":
                self.reset_state()
                self.delay_ms = 0
                self.if_match = True
                self.sigv4 = None
                self.bearer = None
                self.ledger = None
            elif path == "/__proxy/config" and method == "POST":
                cfg = json.loads(body or b"{}")
                if "delay_ms" in cfg:
                    self.delay_ms = float(cfg["delay_ms"])
                if "if_match" in cfg:
                    self.if_match = bool(cfg["if_match"])
                if "sigv4" in cfg:
                    self.sigv4 = cfg["sigv4"]
                if "bearer" in cfg:
                    self.bearer = BearerCheck(cfg["bearer"]) if cfg["bearer"] else None
                if "sigv4_ledger" in cfg:
                    self.ledger = Ledger(cfg["sigv4_ledger"]) if cfg["sigv4_ledger"] else None
                if "rules" in cfg:
                    self.rules = [Rule(d, self.rng) for d in cfg["rules"]]
            else:
                status, out = 404, {"error": "no such control path"}
        except (ValueError, KeyError, re.error) as e:
            status, out = 400, {"error": str(e)}
        data = json.dumps(out).encode()
        writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % (status, REASONS.get(status, "").encode(),
                                                      len(data)) + data)
        await writer.drain()

    def pick(self, line):
        for r in self.rules:
            if r.fires(line):
                self.stats["fired"] += 1
                return r
        return None

    def record_start(self, entry):
        """The entry goes in the log at once (a request that never ends is
        seen too, and one still running at a reset is not in the new log);
        it is completed in place."""
        if self.keep_log:
            if len(self.log) >= LOG_CAP:
                del self.log[: LOG_CAP // 10]
            self.log.append(entry)

    def record_end(self, entry):
        if self.log_file:
            self.log_file.write(json.dumps(entry) + "\n")
            self.log_file.flush()

    # ---- one client connection ----
    async def client(self, reader, writer):
        set_nodelay(writer)
        st = self.stats
        st["connections"] += 1
        conn = st["connections"]
        st["open_connections"] += 1
        st["max_open_connections"] = max(st["max_open_connections"], st["open_connections"])
        up = None
        upstream = next(self.upstreams)
        try:
            while True:
                raw = await read_head(reader)
                if raw is None:
                    break
                head = Head(raw)
                n = int(head.get("content-length") or 0)
                body = await reader.readexactly(n) if n else b""
                parts = head.first.split(" ")
                if len(parts) != 3:
                    break
                method, target = parts[0], parts[1]
                if target.startswith("/__proxy/"):
                    await self.control(head, body, writer)
                    continue
                st["requests"] += 1
                st["in_flight"] += 1
                st["max_in_flight"] = max(st["max_in_flight"], st["in_flight"])
                entry = {"t": time.time(), "conn": conn, "method": method, "target": target,
                         "headers": {k.lower(): v for k, v in head.headers},
                         "status": None, "bytes": 0, "action": None}
                t0 = time.monotonic()
                self.record_start(entry)
                try:
                    keep, up = await self.one(head, method, target, raw, body, reader, writer,
                                              up, upstream, entry)
                finally:
                    st["in_flight"] -= 1
                    entry["ms"] = round((time.monotonic() - t0) * 1000, 2)
                    st["bytes"] += entry["bytes"]
                    self.record_end(entry)
                if not keep or (head.get("connection") or "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            st["open_connections"] -= 1
            if up:
                up[1].close()
            writer.close()

    async def one(self, head, method, target, raw, body, reader, writer, up, upstream, entry):
        """Serve one request; returns (keep the connection, upstream)."""
        rule = self.pick(method + " " + target)
        delay = self.delay_ms
        if rule:
            entry["action"] = rule.action
            if rule.action == "delay":
                delay += float(rule.d.get("ms", 0))
        auth = head.get("authorization") or ""
        if self.bearer and auth.startswith("Bearer "):
            ok = await self.bearer.check(auth[len("Bearer "):])
            entry["sig"] = "bearer ok" if ok else "bearer invalid"
            if not ok:
                await self.synthetic(None, head, method, target, writer, entry, status=401,
                                     code="AuthenticationRequired",
                                     message="Invalid Credentials")
                return True, up
            raw = strip_header(raw, b"authorization")
        elif self.sigv4 or self.ledger:
            bad, entry["sig"] = check_sigv4(self.sigv4, method, target, head, self.ledger)
            if self.ledger and not bad:
                # s3rver knows no key of the ledger's: what was checked here
                # goes on unsigned (s3rver serves anonymous requests)
                raw = b"\r\n".join(
                    ln for ln in raw.split(b"\r\n")
                    if not ln.lower().startswith((b"authorization:",
                                                  b"x-amz-security-token:")))
            if bad:
                status, code, message = bad
                await self.synthetic(None, head, method, target, writer, entry,
                                     status=status, code=code, message=message)
                return True, up
        if delay:
            await asyncio.sleep(delay / 1000)
        if rule and rule.action == "status":
            await self.synthetic(rule, head, method, target, writer, entry)
            return True, up
        if rule and rule.action == "stall":  # until the time is up or the client goes
            try:
                await asyncio.wait_for(reader.read(1), float(rule.d.get("ms", 60000)) / 1000)
            except asyncio.TimeoutError:
                pass
            return False, up
        if rule and rule.action == "reset" and rule.d.get("when", "before") == "before":
            set_rst(writer)
            writer.transport.abort()
            return False, up
        if up is None or up[0].at_eof():
            if up:
                up[1].close()
            up = await asyncio.open_connection(upstream[0], upstream[1], limit=MAX_HEAD)
        ur, uw = up
        uw.write(raw + body)
        await uw.drain()
        rraw = await read_head(ur)
        if rraw is None:
            raise ConnectionError("the server closed the connection")
        rhead = Head(rraw)
        status = int(rhead.first.split(" ")[1])
        entry["status"] = status
        no_body = method == "HEAD" or status in (204, 304) or status < 200
        te = (rhead.get("transfer-encoding") or "").lower()
        clen = rhead.get("content-length")
        up_keep = (rhead.get("connection") or "").lower() != "close"
        if (self.if_match and method == "GET" and head.get("if-match")
                and status in (200, 206) and rhead.get("etag") != head.get("if-match")):
            await self.drain_body(ur, no_body, te, clen)
            if not up_keep:
                uw.close()
                up = None
            entry["status"] = 412
            entry["action"] = "if_match"
            data = xml_error("PreconditionFailed",
                             "At least one of the pre-conditions you specified did not hold",
                             target.split("?")[0])
            writer.write(b"HTTP/1.1 412 Precondition Failed\r\nContent-Type: application/xml"
                         b"\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
            await writer.drain()
            return True, up
        writer.write(rraw)
        if rule and rule.action == "reset":  # "after": the head, then nothing
            await writer.drain()
            set_rst(writer)
            writer.transport.abort()
            return False, None
        cut = None
        if rule and rule.action == "truncate":
            cut = int(rule.d.get("bytes", int(clen or 0) // 2))
        sent = await self.relay(ur, writer, no_body, te, clen, cut)
        entry["bytes"] = sent
        if cut is not None and not no_body:
            await writer.drain()
            set_rst(writer)
            writer.transport.abort()
            uw.close()
            return False, None
        if not up_keep or (clen is None and te != "chunked" and not no_body):
            uw.close()
            up = None
        return True, up

    async def synthetic(self, rule, head, method, target, writer, entry, status=None, code=None,
                        message=None):
        d = rule.d if rule else {}
        status = status or int(d.get("status", 503))
        dcode, dmessage = CODES.get(status, ("Error%d" % status, "An error."))
        code = code or d.get("code", dcode)
        message = message or d.get("message", dmessage)
        message = re.sub(r"\{header:([A-Za-z0-9-]+)\}",
                         lambda m: head.get(m.group(1)) or "", message)
        data = xml_error(code, message, target.split("?")[0])
        extra = b""
        if "retry_after" in d:
            extra = b"Retry-After: %d\r\n" % int(d["retry_after"])
        writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d"
                     b"\r\n%s\r\n" % (status, REASONS.get(status, "Error").encode(), len(data),
                                      extra))
        if method != "HEAD":
            writer.write(data)
        await writer.drain()
        entry["status"] = status

    async def drain_body(self, ur, no_body, te, clen):
        class Null:
            def write(self, b):
                pass

            async def drain(self):
                pass
        await self.relay(ur, Null(), no_body, te, clen, None)

    async def relay(self, ur, writer, no_body, te, clen, cut):
        """Copy the response body to writer; returns the body bytes sent."""
        sent = 0
        if no_body:
            await writer.drain()
            return 0
        budget = cut if cut is not None else None

        def room(n):
            return n if budget is None else max(0, min(n, budget - sent))

        if te == "chunked":
            while True:
                line = await ur.readuntil(b"\r\n")
                size = int(line.split(b";")[0], 16)
                chunk = await ur.readexactly(size + 2) if size else b""
                if size == 0:
                    trailer = line
                    while True:
                        t = await ur.readuntil(b"\r\n")
                        trailer += t
                        if t == b"\r\n":
                            break
                    if budget is None:
                        writer.write(trailer)
                    break
                k = room(len(line) + len(chunk))
                writer.write((line + chunk)[:k])
                sent += k
                await writer.drain()
                if budget is not None and sent >= budget:
                    return sent
        elif clen is not None:
            left = int(clen)
            while left > 0:
                data = await ur.read(min(left, READ_CHUNK))
                if not data:
                    raise ConnectionError("the server's body ended early")
                left -= len(data)
                k = room(len(data))
                if k:
                    writer.write(data[:k] if k < len(data) else data)
                    sent += k
                    await writer.drain()
                if budget is not None and sent >= budget:
                    return sent  # the caller closes both connections
        else:
            while True:
                data = await ur.read(READ_CHUNK)
                if not data:
                    break
                k = room(len(data))
                writer.write(data[:k])
                sent += k
                await writer.drain()
                if budget is not None and sent >= budget:
                    break
        return sent


async def serve(args, sock):
    proxy = Proxy(args)
    server = await asyncio.start_server(proxy.client, sock=sock, limit=MAX_HEAD)
    async with server:
        await server.serve_forever()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", required=True, help="HOST:PORT[,HOST:PORT...] of S3 servers")
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log-file")
    ap.add_argument("--no-log", action="store_true", help="keep no log in memory")
    ap.add_argument("--no-if-match", action="store_true")
    ap.add_argument("--sigv4", metavar="KEY:SECRET", help="check signatures with this key pair")
    ap.add_argument("--bearer", metavar="URL", help="check Bearer tokens at this tokeninfo URL")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    host, port = args.listen.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(1024)
    sock.setblocking(False)
    addr = sock.getsockname()
    for _ in range(args.workers - 1):
        if os.fork() == 0:  # a worker: goes when the first process goes
            ctypes.CDLL(None).prctl(1, 15)  # PR_SET_PDEATHSIG, SIGTERM
            break
    else:
        print("s3proxy listening on %s:%d" % (addr[0], addr[1]), flush=True)
    try:
        import uvloop  # optional: faster, where installed
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args, sock))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
