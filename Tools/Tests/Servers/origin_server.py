#!/usr/bin/env python3
"""An origin server for the `strata proxy` tests and benchmarks: the upstream API a proxy is put in front of.

Python standard library only. Not written in Swift, so a proxy bug cannot hide behind a shared one.

    python3 origin_server.py [--port N]

It listens on 127.0.0.1:N (N = 0, the default, lets the system pick), prints `listening PORT` as its
one line of standard output, and serves until SIGTERM or SIGINT (then exits 0). HTTP/1.1 with
keep-alive: every answer carries Content-Length (but a 304, whose framing needs none). It logs
nothing per request. State lives in memory, behind one lock.

Resources
- `GET /items/NAME` (and `HEAD`): `{"name": NAME, "version": V, "call": C, "auth": A}`, JSON. V starts
  at 1 and goes up with every write to NAME; C is the number of GETs of this path (query ignored)
  seen so far, this one included; A is the request's Authorization field or null. The query drives
  the answer, so one server serves every test case:
    cc=VALUE        Cache-Control: VALUE (URL-decoded: `cc=max-age%3D600`)
    etag=1          ETag: "vV"; If-None-Match that matches (or `*`) gets 304, no body
    lm=1            Last-Modified: fixed per version (2024-01-01T00:00:00Z + (V-1) minutes); when
                    no If-None-Match was sent, If-Modified-Since at or after it gets 304
    vary=NAME       Vary: NAME; the body gains "varied": that request field's value or null
                    (`vary=A,B` gives "varied": {"A": ..., "B": ...})
    tag=a,b         Cache-Tag: a,b
    cookie=1        Set-Cookie: s=1
    delay_ms=N      sleep N ms before answering
    status=CODE     answer CODE (no conditional handling; no body for 1xx, 204, 304)
    expires=S       Expires: now + S seconds (S may be 0 or negative)
    age=N           Age: N
    cdn=VALUE       CDN-Cache-Control: VALUE;  strata=VALUE  Strata-Cache-Control: VALUE
    echo=NAME       the body gains "echo": that request field's value or null
    ranges=1        honour Range (bytes=A-B) with If-Range (a strong ETag "vV"): 206 with that slice of
                    the body when If-Range is absent or names the current version, else the whole 200
    pad=N           the body gains "pad": N bytes of "x" (at most 64 MiB): a large answer
  Every answer has Date.
- `POST|PUT|PATCH|DELETE /items/NAME`: bumps NAME's version (or sets it to N, given a request field
  `X-Set-Version: N`, N >= 1: a write that names its value, for the partition checker) and answers
  200 with the new JSON (POST also `Location: /items/NAME`). The request body is read and ignored. `delay_ms`, `status` and
  the header parameters above apply as well; a `status` of 400 or more changes nothing.
- Anything else outside `/_origin/` gets 404 `{"error": "not found"}`.

Control (always `Cache-Control: no-store`; never counted, never failed, never held)
- `GET /_origin/counts`: `{"METHOD PATH": N, ...}`, the non-control requests seen, path without query
  (`"GET /items/a": 3`, `"HEAD /items/a": 1`, `"POST /items/a": 1`).
- `POST /_origin/reset`: clears the counts and the versions, and turns fail and hold off.
- `POST /_origin/fail?on=1|0`: while on, every non-control request gets 503 `{"error": "down"}`
  (after any hold and delay; still counted).
- `POST /_origin/hold?on=1|0`: while on, GETs and HEADs wait until it is turned off (or 30 s) before
  answering, to keep a load in flight.
Control answers are `{"ok": true, "fail": bool, "hold": bool}` (but counts, which answers the counts).
"""

import argparse
import email.utils
import json
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

# Last-Modified of version V: this instant plus V-1 minutes. Deterministic and in the past.
LAST_MODIFIED_EPOCH = 1704067200  # 2024-01-01T00:00:00Z
HOLD_LIMIT_SECONDS = 30.0
QUIET_ERRORS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, socket.timeout, TimeoutError)


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.held = threading.Condition(self.lock)
        self.counts = {}  # "METHOD /path" -> requests seen
        self.versions = {}  # name -> version
        self.fail = False
        self.hold = False

    def control_answer(self):
        return {"ok": True, "fail": self.fail, "hold": self.hold}


def http_date(seconds):
    return email.utils.formatdate(seconds, usegmt=True)


def last_modified(version):
    return LAST_MODIFIED_EPOCH + (version - 1) * 60


def etag_matches(header, etag):
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*":
            return True
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate == etag:
            return True
    return False


def parse_http_date(value):
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    return parsed.timestamp()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "strata-test-origin/1"

    def version_string(self):
        return self.server_version

    def log_message(self, format, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except QUIET_ERRORS:
            self.close_connection = True

    # ---- plumbing -------------------------------------------------------------------------------

    def read_body(self):
        """Reads (and returns) the request body, Content-Length or chunked, so keep-alive stays in step."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    self.close_connection = True
                    break
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline(3)
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def answer(self, status, payload=None, headers=(), head=False):
        """Sends one answer. A body always has Content-Length; 1xx/204/304 have none."""
        bodiless = status in (204, 304) or 100 <= status < 200
        body = b"" if bodiless or payload is None else json.dumps(payload, sort_keys=True).encode()
        self.send_response(status)  # adds Server and Date
        if not bodiless:
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if body and not head:
            self.wfile.write(body)
        self.wfile.flush()

    # ---- dispatch -------------------------------------------------------------------------------

    def dispatch(self):
        try:
            self.read_body()
        except (ValueError, OSError):
            self.close_connection = True
            self.answer(400, {"error": "bad body"}, [("Connection", "close")])
            return
        split = urlsplit(self.path)
        path = split.path
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        if path.startswith("/_origin/"):
            self.control(path, query)
            return
        state = self.server.state
        key = "%s %s" % (self.command, path)
        with state.lock:
            state.counts[key] = state.counts.get(key, 0) + 1
        if self.command in ("GET", "HEAD"):
            self.wait_while_held()
        delay = query.get("delay_ms")
        if delay:
            try:
                time.sleep(max(0.0, float(delay)) / 1000.0)
            except ValueError:
                pass
        with state.lock:
            failing = state.fail
        if failing:
            self.answer(503, {"error": "down"}, [("Cache-Control", "no-store")], head=self.command == "HEAD")
            return
        if not path.startswith("/items/") or len(path) == len("/items/"):
            self.answer(404, {"error": "not found"}, head=self.command == "HEAD")
            return
        name = path[len("/items/"):]
        if self.command in ("GET", "HEAD"):
            self.item_read(path, name, query)
        elif self.command in ("POST", "PUT", "PATCH", "DELETE"):
            self.item_write(path, name, query)
        else:
            self.answer(405, {"error": "method not allowed"}, [("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE")])

    def wait_while_held(self):
        state = self.server.state
        deadline = time.monotonic() + HOLD_LIMIT_SECONDS
        with state.lock:
            while state.hold:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                state.held.wait(left)

    # ---- items ----------------------------------------------------------------------------------

    def item_payload(self, name, version, call, query):
        payload = {"name": name, "version": version, "call": call, "auth": self.headers.get("Authorization")}
        vary = query.get("vary")
        if vary:
            names = [n.strip() for n in vary.split(",") if n.strip()]
            if len(names) == 1:
                payload["varied"] = self.headers.get(names[0])
            else:
                payload["varied"] = {n: self.headers.get(n) for n in names}
        echo = query.get("echo")
        if echo:
            payload["echo"] = self.headers.get(echo)
        pad = query.get("pad")
        if pad and pad.isdigit():
            payload["pad"] = "x" * min(int(pad), 64 * 1024 * 1024)
        return payload

    def item_headers(self, version, query):
        headers = []
        if "cc" in query:
            headers.append(("Cache-Control", query["cc"]))
        if "cdn" in query:
            headers.append(("CDN-Cache-Control", query["cdn"]))
        if "strata" in query:
            headers.append(("Strata-Cache-Control", query["strata"]))
        if query.get("etag") == "1":
            headers.append(("ETag", '"v%d"' % version))
        if query.get("lm") == "1":
            headers.append(("Last-Modified", http_date(last_modified(version))))
        if query.get("vary"):
            headers.append(("Vary", query["vary"]))
        if query.get("tag"):
            headers.append(("Cache-Tag", query["tag"]))
        if query.get("cookie") == "1":
            headers.append(("Set-Cookie", "s=1"))
        if query.get("expires") not in (None, ""):
            try:
                headers.append(("Expires", http_date(time.time() + float(query["expires"]))))
            except ValueError:
                headers.append(("Expires", query["expires"]))  # deliberately invalid: "expires=0x"
        if query.get("age") not in (None, ""):
            headers.append(("Age", query["age"]))
        return headers

    @staticmethod
    def requested_status(query):
        try:
            status = int(query.get("status") or 200)
        except ValueError:
            return 200
        return status if 100 <= status <= 599 else 200

    def item_read(self, path, name, query):
        state = self.server.state
        with state.lock:
            version = state.versions.get(name, 1)
            call = state.counts.get("GET " + path, 0)
        head = self.command == "HEAD"
        payload = self.item_payload(name, version, call, query)
        headers = self.item_headers(version, query)
        status = self.requested_status(query)
        if status == 200:
            if query.get("etag") == "1" and self.headers.get("If-None-Match") is not None:
                if etag_matches(self.headers["If-None-Match"], '"v%d"' % version):
                    status = 304
            elif query.get("lm") == "1" and self.headers.get("If-Modified-Since") is not None:
                since = parse_http_date(self.headers["If-Modified-Since"])
                if since is not None and since >= last_modified(version):
                    status = 304
        if status == 200 and query.get("ranges") == "1" and self.headers.get("Range", "").startswith("bytes="):
            # Range with If-Range (RFC 9110 §14.2, §13.1.5): the range of the current version only
            # when If-Range is absent or names it (strong ETag); otherwise the whole new version.
            if_range = self.headers.get("If-Range")
            if if_range is None or if_range.strip() == '"v%d"' % version:
                self.answer_range(payload, headers, self.headers["Range"], head)
                return
        self.answer(status, payload, headers, head=head)

    def answer_range(self, payload, headers, range_field, head):
        body = json.dumps(payload, sort_keys=True).encode()
        try:
            first, last = range_field[len("bytes="):].split("-", 1)
            first = int(first)
            last = min(int(last) if last else len(body) - 1, len(body) - 1)
        except ValueError:
            self.answer(200, payload, headers, head=head)
            return
        part = body[first:last + 1]
        self.send_response(206)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, len(body)))
        self.send_header("Content-Length", str(len(part)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(part)
        self.wfile.flush()

    def set_version(self):
        """The version an `X-Set-Version: N` field asks a write to set (N >= 1), else None."""
        field = self.headers.get("X-Set-Version")
        try:
            version = int(field) if field is not None else None
        except ValueError:
            return None
        return version if version is not None and version >= 1 else None

    def item_write(self, path, name, query):
        state = self.server.state
        status = self.requested_status(query)
        with state.lock:
            version = state.versions.get(name, 1)
            if status < 400:
                version = self.set_version() or version + 1
                state.versions[name] = version
            call = state.counts.get("GET " + path, 0)
        payload = self.item_payload(name, version, call, query)
        headers = self.item_headers(version, query)
        if self.command == "POST":
            headers.append(("Location", path))
        self.answer(status, payload, headers)

    # ---- control --------------------------------------------------------------------------------

    def control(self, path, query):
        state = self.server.state
        no_store = [("Cache-Control", "no-store")]
        head = self.command == "HEAD"
        if path == "/_origin/counts":
            if self.command not in ("GET", "HEAD"):
                self.answer(405, {"error": "method not allowed"}, no_store + [("Allow", "GET, HEAD")])
                return
            with state.lock:
                counts = dict(state.counts)
            self.answer(200, counts, no_store, head=head)
            return
        if path not in ("/_origin/reset", "/_origin/fail", "/_origin/hold"):
            self.answer(404, {"error": "not found"}, no_store, head=head)
            return
        if self.command != "POST":
            self.answer(405, {"error": "method not allowed"}, no_store + [("Allow", "POST")], head=head)
            return
        on = query.get("on", "1") not in ("0", "false", "off", "")
        with state.lock:
            if path == "/_origin/reset":
                state.counts.clear()
                state.versions.clear()
                state.fail = False
                state.hold = False
            elif path == "/_origin/fail":
                state.fail = on
            else:
                state.hold = on
            if not state.hold:
                state.held.notify_all()
            answer = state.control_answer()
        self.answer(200, answer, no_store)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = dispatch


class OriginServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # a burst of hundreds of connections must not overflow the backlog

    def handle_error(self, request, client_address):
        error = sys.exc_info()[1]
        if isinstance(error, QUIET_ERRORS):
            return
        super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description="An origin server for strata proxy tests.")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    arguments = parser.parse_args()
    server = OriginServer(("127.0.0.1", arguments.port), Handler)
    server.state = State()

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    serving.start()
    print("listening %d" % server.server_address[1], flush=True)
    while not stop.wait(0.5):
        pass
    with server.state.lock:
        server.state.hold = False
        server.state.held.notify_all()
    server.shutdown()
    server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
