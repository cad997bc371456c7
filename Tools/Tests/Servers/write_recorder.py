#!/usr/bin/env python3
"""A server that applies every write it receives, as many servers do: it does not remember
Idempotency-Key. Used by OutboxSharedProcessesTests to count what several drainers of one outbox
really send. Python standard library only.

    python3 write_recorder.py [--delay-ms N] [--port N]

It listens on 127.0.0.1, on the port given or one the system picks, and prints `listening PORT` as its first line.

- A request whose body ends before its Content-Length (its client killed mid-send) is not applied.
- Any other POST, PUT, PATCH or DELETE is applied: recorded (method, path, body, Idempotency-Key, and
  the order it arrived in) and answered 201 with `{"applied": N}`, after N ms (`--delay-ms`, 0 by
  default) so that writes overlap.
- `GET /_writes` answers every write applied, in the order they arrived, as a JSON list of
  `{"method", "path", "body", "key"}`.
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Recorder:
    def __init__(self, delay):
        self.lock = threading.Lock()
        self.delay = delay
        self.writes = []


class Handler(BaseHTTPRequestHandler):
    server_version = "strata-test-recorder/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        sys.stderr.write("%s\n" % (format % args))

    def answer(self, status, payload):
        body = json.dumps(payload, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def write(self):
        recorder = self.server.recorder
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:
            # The client went away mid-body (a drainer killed while it sent): a truncated request
            # is not a write, as no real server would apply it.
            self.close_connection = True
            return
        body = raw.decode("utf-8", "replace")
        if recorder.delay:
            time.sleep(recorder.delay / 1000.0)
        with recorder.lock:
            recorder.writes.append({
                "method": self.command, "path": self.path, "body": body,
                "key": self.headers.get("Idempotency-Key"),
            })
            applied = len(recorder.writes)
        self.answer(201, {"applied": applied})

    do_POST = do_PUT = do_PATCH = do_DELETE = write

    def do_GET(self):
        if self.path == "/_writes":
            with self.server.recorder.lock:
                writes = list(self.server.recorder.writes)
            self.answer(200, writes)
        else:
            self.answer(404, {"error": "not found"})


class Server(ThreadingHTTPServer):
    # The listen backlog. socketserver's default, 5, overflows when several drainers open their
    # connections at once through a relay: the kernel drops a SYN and the client resends it only
    # a second later. A drainer's request then reaches this server a second late, after writes
    # sent after it (seen in CI: a killed drainer's request applied after the next write of its
    # scope, which the drain that took the scope over had already sent).
    request_queue_size = 128


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay-ms", type=int, default=0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.recorder = Recorder(args.delay_ms)
    print("listening %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
