#!/usr/bin/python3
"""remote_server.py ROOT PORTFILE [REDIRECT_BASE] - a small HTTP server for
tests/cli/test_remote*.sh that misbehaves on purpose. The first path segment
picks the behaviour, the rest names a file under ROOT:

  /ok/F          range requests done right (206, Content-Range, ETag)
  /norange/F     ignores Range: 200 with the whole file
  /html200/F     200 with an HTML error page
  /lielong/F     Content-Length larger than the body, then closes
  /lieshort/F    Content-Length (and body) shorter than the range
  /truncate/F    right headers, half the body, then closes
  /more/F        206 with more bytes than the Content-Range says
  /wrongrange/F  206 with the Content-Range of another range
  /gzip/F        206 with the range gzip-compressed (Content-Encoding: gzip),
                 unless the request says "Accept-Encoding: identity" (ranges
                 past 0)
  /gzipalways/F  as gzip, whatever the request says
  /gziptwice/F   as gzipalways, with a second Content-Encoding line,
                 "identity" (one list with the first: gzip)
  /bigheader/F   206 with a 200 KiB header line (ranges past 0)
  /flaky/F       503 for the first 2 requests of each range, then right
  /busy429/F     429 with "Retry-After: 2" for the first request of each
                 range, then right; logged with a 4th field, the time
                 (seconds, monotonic)
  /busydate/F    as busy429, a 503 whose Retry-After is an HTTP date 3 s
                 ahead
  /busylong/F    503 with "Retry-After: 3600" for every request
  /flip/F        right headers, the middle byte of the body flipped (ranges
                 reaching beyond the first 64 KiB, but for the last request)
  /flipone/F     as flip, for the first such request only
  /changed/F     ETag "v2" after the first 2 requests (same bytes)
  /changed412/F  as changed, and If-Match honoured (412)
  /changedlong/F as changed, the ETags 303 bytes long and alike in their
                 first 302 (no If-Match: longer than the client keeps)
  /lmchanged/F   as changed, the ETag the same and Last-Modified a day later
  /lmlong/F      as lmchanged, Last-Modified 200 bytes, the change at the end
  /longetag/F    a strong ETag of 302 bytes, If-Match honoured (412)
  /etagctl/F     an ETag holding a bare CR and a header after it; 400 for
                 a request that carries that header
  /stall/F       headers, then silence for 30 s
  /headerdrip/F  a status line, then header lines without end (~800 bytes a
                 second) for up to 60 s (ranges past 0)
  /trickle/F     headers, then 2 bytes a second (every range) for up to 60 s
  /slowbody/F    headers, then 4 KiB a second (above any low-speed limit)
                 for ranges past 0 that end before the object does (not the
                 open's two)
  /redirect/F?Q  302 to REDIRECT_BASE/F?Q (another server; the query carried,
                 as a CDN hands on a token)
  /toslow/F      302 to /slowonce/F on this server
  /slowonce/F    right, but the first request of each range past 0 gets
                 no answer for 5 s, then the connection closed (a
                 redirect's target slow once: a cold CDN)
  /noloc/F       302 without a Location
  /presigned/F   302 to /echo/F?X-Amz-Signature=SEKRIT7f00&token=SEKRIT8 on
                 this server (a query of the server's own: a CDN's presigned
                 URL), the body a "moved here" link repeating it
  /redirectflood/F  302 to REDIRECT_BASE/F with a chunked body that does not
                 end, sent as fast as it goes (for up to 60 s)
  /redirectdrip/F   as redirectflood, 4 KiB a second: above any low-speed limit
  /echo/F?Q      403 with an error page repeating the request's path and
                 query, percent-decoded (a server that echoes a token back)
  /echoheaders/F 400 with a plain-text page listing the request's headers,
                 by name from z to a (a gateway that echoes them: a session
                 token, Authorization)
  /echolower/F?Q as echo, the request as received with its escapes in
                 lower case ("%2F" as "%2f": a server normalising them)
  /nocr/F        206 with no Content-Range and no body (ranges past 0)
  /crcase/F      right, the Content-Range's unit written "Bytes" (RFC 9110:
                 case-insensitive)
  /crstar/F      right, the Content-Range "bytes A-B/*" (size unknown;
                 ranges past 0)
  /shrunk/F      416 "bytes */100" for ranges past 0 (the object shrank)
  /lie416/F      416 "bytes */100" for every range, the first one too
  /zeroes3/F     an empty F answered as some S3 servers do: 206,
                 "Content-Range: bytes 0-0/0", no body
  /slow/F        right, each ranged answer sent 0.3 s after the request came;
                 logged with a 4th field: the requests in flight then
                 (itself included), so a test sees what a client asks ahead
  /query/F?Q     right when the query Q is "token=a/b" (a directory's
                 token), else 403; a query is ignored by the other modes
  /zeroflag/F    right, but while ROOT/../zero.flag exists the bodies of
                 ranges past byte 0 are zeros (a server going bad midway)
  /auth/F        right with HTTP Basic credentials "user:pa55:word", else 401
  / and /F       ROOT/rootset/m.wpack and ROOT/rootset/F as /ok/ (a
                 sharded set at a URL with no path: "http://host?sig=x")
  /s3/BUCKET/F   S3 path style: AWS Signature Version 4 checked with its own
                 implementation (hmac, hashlib); 403 SignatureDoesNotMatch
                 for a bad one. Credentials: AKIDTEST / secret/TEST+key and
                 AKIDTOKEN / tokensecret with session token "tok/en=";
                 AKIDLONG / longsecret with any session token BODY.H where
                 H is the first 16 hex digits of BODY's SHA-256 (a long
                 STS-like token: one cut short fails the check).
                 The bucket "inwest2" is in region us-west-2: a request
                 signed for another region gets what AWS answers, 400
                 AuthorizationHeaderMalformed with "x-amz-bucket-region:
                 us-west-2".
                 The bucket "skewed" has a clock an hour ahead: a request
                 dated more than 15 minutes off it gets what AWS answers,
                 403 RequestTimeTooSkewed with its time in a Date header.
Every request is logged to ROOT/../requests.log as "MODE RANGE STATUS".
With TUNNEL_PORT in its environment it is also an https proxy: each
"CONNECT HOST:PORT" is logged as "CONNECT HOST:PORT 200" and tunnelled to
127.0.0.1:TUNNEL_PORT whatever it names (a TLS server holding a
certificate for a far host name, such as an S3 endpoint).
remote_server.py --self-test checks the SigV4 code against AWS's example.
"""
import base64
import datetime
import email.utils
import gzip
import hashlib
import hmac
import http.server
import os
import re
import socket
import socketserver
import sys
import threading
import time
import urllib.parse

ROOT = PORTFILE = REDIRECT = LOG = ""  # set by main()
CREDS = {"AKIDTEST": ("secret/TEST+key", None), "AKIDTOKEN": ("tokensecret", "tok/en="),
         "AKIDLONG": ("longsecret", "BODY.H")}
counts = {}
lock = threading.Lock()
inflight = [0]  # /slow/ requests between arrival and answer


def count(key):
    with lock:
        counts[key] = counts.get(key, 0) + 1
        return counts[key]


def sign(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sigv4_signature(secret, date, region, service, string_to_sign):
    k = sign(("AWS4" + secret).encode(), date)
    k = sign(k, region)
    k = sign(k, service)
    k = sign(k, "aws4_request")
    return hmac.new(k, string_to_sign.encode(), hashlib.sha256).hexdigest()


def check_sigv4(method, path, headers, now=None):
    """None when the request's SigV4 Authorization is right, else why not
    (its date checked against now, a UTC datetime, the clock's time if None)."""
    auth = headers.get("Authorization", "")
    m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request,"
                     r"\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})", auth)
    if not m:
        return "no or malformed Authorization"
    ak, date, region, signed, sig = m.groups()
    if ak not in CREDS:
        return "unknown access key"
    secret, token = CREDS[ak]
    names = signed.split(";")
    if names != sorted(names):
        return "signed headers not sorted"
    need = {"host", "x-amz-date", "x-amz-content-sha256"}
    if "Range" in headers:
        need.add("range")
    if token is not None:
        need.add("x-amz-security-token")
        got = headers.get("x-amz-security-token") or ""
        if token == "BODY.H":
            body, _, h = got.rpartition(".")
            if not body or hashlib.sha256(body.encode()).hexdigest()[:16] != h:
                return "wrong session token (%d chars)" % len(got)
        elif got != token:
            return "wrong session token"
    if not need <= set(names):
        return "headers not signed: %s" % sorted(need - set(names))
    amz_date = headers.get("x-amz-date", "")
    try:
        t = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    except ValueError:
        return "bad x-amz-date"
    now = now or datetime.datetime.utcnow()
    if abs((now - t).total_seconds()) > 900 or amz_date[:8] != date:
        return "request time too skewed"
    canon_headers = "".join("%s:%s\n" % (n, " ".join(headers.get(n, "").split())) for n in names)
    # the canonical URI as S3 makes it from the key, not the path as sent:
    # each byte but unreserved ones and '/' as %XX (upper case), once
    raw, q, _ = path.partition("?")
    canon = urllib.parse.quote(urllib.parse.unquote_to_bytes(raw), safe="/-_.~") + q
    creq = "\n".join([method, canon, "", canon_headers, signed, headers.get("x-amz-content-sha256", "")])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, "%s/%s/s3/aws4_request" % (date, region),
                     hashlib.sha256(creq.encode()).hexdigest()])
    want = sigv4_signature(secret, date, region, "s3", sts)
    return None if hmac.compare_digest(want, sig) else "signature mismatch"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def log(self, mode, status, extra=""):
        with lock, open(LOG, "a") as f:
            f.write("%s %s %s%s\n" % (mode, self.headers.get("Range", "-"), status, extra))

    def drip(self, body, headers, upto, piece, pause):
        """206 with headers, then the first upto bytes of body, piece bytes
        every pause seconds; the connection closed after."""
        self.send_response(206)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for i in range(0, min(len(body), upto), piece):
                self.wfile.write(body[i:i + piece])
                self.wfile.flush()
                time.sleep(pause)
        except OSError:
            pass  # the client gave up: what the test wants
        self.close_connection = True

    def send(self, status, body, headers=(), length=None):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def do_CONNECT(self):
        up = socket.create_connection(("127.0.0.1", int(os.environ["TUNNEL_PORT"])))
        with lock, open(LOG, "a") as f:
            f.write("CONNECT %s 200\n" % self.path)
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        a, b = self.connection, up

        def pipe(src, dst):
            try:
                while True:
                    d = src.recv(65536)
                    if not d:
                        break
                    dst.sendall(d)
            except OSError:
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        t = threading.Thread(target=pipe, args=(up, a), daemon=True)
        t.start()
        pipe(a, up)
        t.join()
        up.close()

    def do_GET(self):
        path_only, _, query = self.path.partition("?")
        parts = path_only.split("/", 2)
        mode = parts[1] if len(parts) > 2 else ""
        rest = parts[2] if len(parts) > 2 else ""
        if len(parts) == 2 and "/" not in parts[1] and ".." not in parts[1]:
            mode, rest = "ok", "rootset/" + (parts[1] or "m.wpack")
        if mode == "s3" and rest.split("/", 1)[0] == "inwest2":
            m = re.search(r"Credential=[^/]+/\d{8}/([^/]+)/", self.headers.get("Authorization", ""))
            if m and m.group(1) != "us-west-2":
                self.log(mode, 400)
                body = ("<?xml version=\"1.0\"?><Error><Code>AuthorizationHeaderMalformed</Code>"
                        "<Message>The authorization header is malformed; the region '%s' is wrong; "
                        "expecting 'us-west-2'</Message><Region>us-west-2</Region></Error>"
                        % m.group(1)).encode()
                return self.send(400, body, [("Content-Type", "application/xml"),
                                             ("x-amz-bucket-region", "us-west-2")])
        skewed = mode == "s3" and rest.split("/", 1)[0] == "skewed"
        if skewed:
            clock = datetime.datetime.utcnow() + datetime.timedelta(hours=1)
            try:
                sent = datetime.datetime.strptime(self.headers.get("x-amz-date", ""), "%Y%m%dT%H%M%SZ")
            except ValueError:
                sent = None
            if sent is None or abs((clock - sent).total_seconds()) > 900:
                self.log(mode, 403)
                body = ("<?xml version=\"1.0\"?><Error><Code>RequestTimeTooSkewed</Code><Message>The "
                        "difference between the request time and the current time is too large."
                        "</Message><ServerTime>%s</ServerTime></Error>"
                        % clock.strftime("%Y-%m-%dT%H:%M:%SZ")).encode()
                return self.send(403, body, [("Content-Type", "application/xml"),
                                             ("Date", email.utils.formatdate(
                                                 clock.replace(tzinfo=datetime.timezone.utc).timestamp(),
                                                 usegmt=True))])
        if mode == "s3":
            why = check_sigv4("GET", self.path, self.headers,
                              datetime.datetime.utcnow() + datetime.timedelta(hours=1) if skewed else None)
            if why:
                self.log(mode, 403)
                body = ("<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>"
                        "<Message>%s</Message></Error>" % why).encode()
                return self.send(403, body, [("Content-Type", "application/xml")])
            # the key as S3 keeps it: percent-decoded, literal (a "." or ".."
            # segment is part of the name, never resolved)
            rest = urllib.parse.unquote(rest.split("/", 1)[1]) if "/" in rest else ""
            if any(seg in (".", "..") for seg in rest.split("/")):
                self.log(mode, 404)
                return self.send(404, b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code>"
                                 b"<Message>The specified key does not exist.</Message></Error>",
                                 [("Content-Type", "application/xml")])
        if mode == "echoheaders":
            self.log(mode, 400)
            return self.send(400, ("bad request; headers: %s" % " | ".join(
                "%s: %s" % kv for kv in sorted(self.headers.items(), reverse=True,
                                                 key=lambda kv: kv[0].lower()))).encode(),
                [("Content-Type", "text/plain")])
        if mode in ("echo", "echolower"):
            self.log(mode, 403)
            shown = urllib.parse.unquote(self.path) if mode == "echo" else \
                re.sub(r"%[0-9A-Fa-f]{2}", lambda m: m.group(0).lower(), self.path)
            return self.send(403, ("<p>denied: %s</p>" % shown).encode(),
                             [("Content-Type", "text/html")])
        if mode == "query" and query != "token=a/b":
            self.log(mode, 403)
            return self.send(403, b"<html>bad token</html>", [("Content-Type", "text/html")])
        if mode == "auth" and self.headers.get("Authorization") != \
                "Basic " + base64.b64encode(b"user:pa55:word").decode():
            self.log(mode, 401)
            return self.send(401, b"<html>who are you</html>", [("Content-Type", "text/html")])
        path = os.path.join(ROOT, rest)
        if not rest or ".." in rest or not os.path.isfile(path):
            self.log(mode, 404)
            return self.send(404, b"<html><body>404 Not Found</body></html>",
                             [("Content-Type", "text/html")])
        data = open(path, "rb").read()
        size = len(data)
        rng = self.headers.get("Range", "")
        key = (mode, rest, rng)
        n = count(key)
        etag = '"v1"'
        if mode in ("changed", "changed412"):
            etag = '"v1"' if count((mode, rest)) <= 2 else '"v2"'
            if mode == "changed412" and self.headers.get("If-Match") not in (None, etag):
                self.log(mode, 412)
                return self.send(412, b"precondition failed")
        later = mode in ("changedlong", "lmchanged", "lmlong") and count((mode, rest)) > 2
        if mode == "changedlong":
            etag = '"' + "e" * 300 + ("2" if later else "1") + '"'
        lastmod = "Thu, 01 Jan 2026 00:00:00 GMT"
        if mode == "lmchanged" and later:
            lastmod = "Fri, 02 Jan 2026 00:00:00 GMT"
        if mode == "lmlong":
            lastmod = "Thu, 01 Jan 2026 00:00:00 GMT" + " " * 170 + ("2" if later else "1")
        if mode == "longetag":
            etag = '"' + "e" * 300 + '"'
            if self.headers.get("If-Match") not in (None, etag):
                self.log(mode, 412)
                return self.send(412, b"precondition failed")
        if mode == "etagctl":
            # an ETag holding a bare CR: echoed into If-Match, the CR ends
            # a header line for this parser (as for some proxies)
            etag = '"v1\rX-Injected: 1"'
            if "X-Injected" in self.headers:
                self.log(mode, 400)
                return self.send(400, b"header injected through If-Match")
        hdr = [("ETag", etag), ("Last-Modified", lastmod),
               ("Accept-Ranges", "bytes"), ("Content-Type", "application/octet-stream")]
        if mode in ("redirectflood", "redirectdrip"):
            self.log(mode, 302)
            self.send_response(302)
            self.send_header("Location", REDIRECT + "/" + rest)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b"<p>moved</p>" * 340 if mode == "redirectflood" else b"m" * 4096
            t0 = time.time()
            try:
                while time.time() - t0 < 60:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                    if mode == "redirectdrip":
                        time.sleep(1)
            except OSError:
                pass  # the client gave up: what the test wants
            self.close_connection = True
            return
        if mode == "toslow":
            self.log(mode, 302)
            return self.send(302, b"", [("Location", "/slowonce/" + rest)])
        if mode == "noloc":
            self.log(mode, 302)
            return self.send(302, b"")
        if mode == "presigned":
            self.log(mode, 302)
            loc = "/echo/" + rest + "?X-Amz-Signature=SEKRIT7f00&token=SEKRIT8"
            return self.send(302, ('<a href="%s">moved here</a>' % loc).encode(),
                             [("Location", loc), ("Content-Type", "text/html")])
        if mode == "redirect":
            self.log(mode, 302)
            loc = REDIRECT + "/" + rest + ("?" + query if query else "")
            return self.send(302, b"", [("Location", loc)])
        if mode == "norange":
            self.log(mode, 200)
            return self.send(200, data, hdr)
        if mode == "html200":
            self.log(mode, 200)
            return self.send(200, b"<html><body><h1>Service temporarily unavailable</h1></body></html>",
                             [("Content-Type", "text/html")])
        if mode in ("busy429", "busydate") and n == 1:
            self.log(mode, 429 if mode == "busy429" else 503, " %.3f" % time.monotonic())
            when = "2" if mode == "busy429" else \
                email.utils.formatdate(time.time() + 3, usegmt=True)
            return self.send(429 if mode == "busy429" else 503, b"<html>slow down</html>",
                             [("Content-Type", "text/html"), ("Retry-After", when)])
        if mode == "busylong":
            self.log(mode, 503)
            return self.send(503, b"<html>come back tomorrow</html>",
                             [("Content-Type", "text/html"), ("Retry-After", "3600")])
        if mode == "flaky" and n <= 2:
            self.log(mode, 503)
            return self.send(503, b"<html>busy</html>", [("Content-Type", "text/html")])
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng)
        if not m:
            self.log(mode, 200)
            return self.send(200, data, hdr)
        a, b = int(m.group(1)), int(m.group(2))
        if mode == "zeroes3" and size == 0:
            self.log(mode, 206)
            return self.send(206, b"", hdr + [("Content-Range", "bytes 0-0/0")])
        if mode == "nocr" and a > 0:
            self.log(mode, 206)
            return self.send(206, b"", hdr)
        if a >= size or (mode == "shrunk" and a > 0) or mode == "lie416":
            self.log(mode, 416)
            if mode in ("shrunk", "lie416"):
                return self.send(416, b"", [("Content-Range", "bytes */100")])
            return self.send(416, b"", [("Content-Range", "bytes */%d" % size)])
        b = min(b, size - 1)
        body = data[a:b + 1]
        cr = ("Content-Range", "bytes %d-%d/%d" % (a, b, size))
        if mode == "crcase":
            cr = ("Content-Range", "Bytes %d-%d/%d" % (a, b, size))
        if mode == "crstar" and a > 0:
            cr = ("Content-Range", "bytes %d-%d/*" % (a, b))
        if mode == "wrongrange" and a > 0:
            cr = ("Content-Range", "bytes %d-%d/%d" % (a - 1, b - 1, size))
            body = data[a - 1:b]
        if mode == "slowonce" and a > 0 and n == 1:
            time.sleep(5)  # the client has given up (its timeout: 2 s): no answer
            self.close_connection = True
            return
        if mode == "slow":  # then answered as /ok/
            with lock:
                inflight[0] += 1
                now = inflight[0]
            self.log(mode, 206, " %d" % now)
            time.sleep(0.3)
            with lock:
                inflight[0] -= 1
        elif mode in ("busy429", "busydate"):
            self.log(mode, 206, " %.3f" % time.monotonic())
        else:
            self.log(mode, 206)
        if mode == "lielong" and a > 0:
            self.send_response(206)
            for k, v in hdr + [cr]:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body) + 1000))
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
            return
        if mode == "zeroflag" and a > 0 and \
                os.path.exists(os.path.join(os.path.dirname(os.path.abspath(ROOT)), "zero.flag")):
            return self.send(206, bytes(len(body)), hdr + [cr])
        if mode == "lieshort" and a > 0:
            return self.send(206, body[:len(body) // 2], hdr + [cr])
        if mode == "truncate" and a > 0:
            self.send_response(206)
            for k, v in hdr + [cr]:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if a > 0 and (mode == "gzipalways" or
                      (mode == "gzip" and self.headers.get("Accept-Encoding") != "identity")):
            return self.send(206, gzip.compress(body), hdr + [cr, ("Content-Encoding", "gzip")])
        if mode == "gziptwice" and a > 0:
            return self.send(206, gzip.compress(body), hdr + [cr, ("Content-Encoding", "gzip"),
                                                               ("Content-Encoding", "identity")])
        if mode == "bigheader" and a > 0:
            return self.send(206, body, hdr + [cr, ("X-Big", "b" * (200 << 10))])
        if mode == "more" and a > 0:
            return self.send(206, body + b"EXTRA" * 100, hdr + [cr])
        if mode == "slowbody" and 0 < a and b < size - 1:
            return self.drip(body, hdr + [cr], len(body), 1024, 0.25)
        if mode == "trickle":
            return self.drip(body, hdr + [cr], 120, 2, 1)
        if mode == "headerdrip" and a > 0:  # header lines without end, ~800 bytes a second
            self.send_response(206)
            self.flush_headers()  # the status line (and Server, Date) out now
            t0 = time.time()
            try:
                while time.time() - t0 < 60:
                    self.wfile.write(b"X-Drip: b\r\n")
                    self.wfile.flush()
                    time.sleep(0.01)
            except OSError:
                pass
            self.close_connection = True
            return
        if mode == "stall" and a > 0:
            self.send_response(206)
            for k, v in hdr + [cr]:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            time.sleep(30)
            self.close_connection = True
            return
        # a tensor's range (not the open's first or last request; a merged
        # read-ahead request may start inside the first 64 KiB)
        if mode in ("flip", "flipone") and b >= 65536 and b < size - 1 and \
                (mode == "flip" or count((mode, "flipped")) == 1):
            body = bytearray(body)
            body[len(body) // 2] ^= 0x40
            body = bytes(body)
        return self.send(206, body, hdr + [cr])


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def aws_example_ok():
    """This implementation against AWS's published GetObject example."""
    creq = "\n".join(["GET", "/test.txt", "", "host:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
                       "x-amz-content-sha256:" + hashlib.sha256(b"").hexdigest() + "\n"
                       "x-amz-date:20130524T000000Z\n", "host;range;x-amz-content-sha256;x-amz-date",
                       hashlib.sha256(b"").hexdigest()])
    sts = "\n".join(["AWS4-HMAC-SHA256", "20130524T000000Z", "20130524/us-east-1/s3/aws4_request",
                     hashlib.sha256(creq.encode()).hexdigest()])
    sig = sigv4_signature("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524", "us-east-1", "s3", sts)
    return sig == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"


def main():
    global ROOT, PORTFILE, REDIRECT, LOG
    if sys.argv[1] == "--self-test":
        sys.exit(0 if aws_example_ok() else 1)
    ROOT, PORTFILE = sys.argv[1], sys.argv[2]
    REDIRECT = sys.argv[3] if len(sys.argv) > 3 else ""
    LOG = os.path.join(os.path.dirname(os.path.abspath(ROOT)), "requests.log")
    srv = Server(("127.0.0.1", 0), Handler)
    with open(PORTFILE + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(PORTFILE + ".tmp", PORTFILE)
    srv.serve_forever()


if __name__ == "__main__":
    main()
