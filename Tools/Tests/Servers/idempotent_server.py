#!/usr/bin/env python3
"""A small posts server, not written in Swift, that honours Idempotency-Key.

Used by the Strata integration tests (OutboxExactlyOnceTests) as a server this project's Swift code
did not write. Python standard library only.

    python3 idempotent_server.py [--drop-after-apply N]

It listens on 127.0.0.1, on a port the system picks, and prints `listening PORT` as its first line.

- `POST /posts` with JSON `{"title", "body"}` creates a post and answers 201 with it.
- `Idempotency-Key` (the IETF httpapi draft): the first request with a key is applied and its answer
  recorded; a repeat of the same request (method, path, body) gets the recorded answer, not applied
  again; the key with a different request gets 422; a repeat while the first is being processed
  gets 409. Problem bodies are `application/problem+json`.
- `--drop-after-apply N`: the first N writes are applied and recorded, then the connection is reset
  (SO_LINGER 0, close) without a byte of answer: the lost acknowledgement.
- `GET /ledger` answers what the server did: `{"keys": {KEY: {"requests", "applied", "replayed",
  "refused"}}, "posts": N}`.
"""

import argparse
import hashlib
import json
import socket
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Ledger:
    def __init__(self, drops):
        self.lock = threading.Lock()
        self.drops = drops
        self.slots = {}  # key -> ("in-flight", fingerprint) | ("done", fingerprint, status, body)
        self.counts = {}  # key -> {"requests", "applied", "replayed", "refused"}
        self.posts = {}
        self.next_id = 1


def parse_key(value):
    """The key of an Idempotency-Key field: a structured-field string ("...") or a bare token."""
    value = value.strip()
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    if not value or len(value) > 255 or any(not (0x20 < ord(c) < 0x7F) for c in value):
        return None
    return value


class Handler(BaseHTTPRequestHandler):
    server_version = "strata-test-idempotent/1"

    def log_message(self, format, *args):
        sys.stderr.write("%s\n" % (format % args))

    def send_json(self, status, payload, content_type="application/json", extra=()):
        body = json.dumps(payload, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def send_problem(self, status, title, detail):
        self.send_json(status, {"type": "about:blank", "title": title, "status": status, "detail": detail},
                       content_type="application/problem+json")

    def do_GET(self):
        ledger = self.server.ledger
        if self.path == "/ledger":
            with ledger.lock:
                self.send_json(200, {"keys": ledger.counts, "posts": len(ledger.posts)})
            return
        self.send_problem(404, "Not Found", "no such resource")

    def do_POST(self):
        ledger = self.server.ledger
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path != "/posts":
            self.send_problem(404, "Not Found", "no such resource")
            return
        raw_key = self.headers.get("Idempotency-Key")
        key = parse_key(raw_key) if raw_key is not None else None
        if raw_key is not None and key is None:
            self.send_problem(400, "Bad Request", "Idempotency-Key must be a non-empty string")
            return
        fingerprint = hashlib.sha256(b"POST /posts\n" + body).hexdigest()
        with ledger.lock:
            if key is not None:
                counts = ledger.counts.setdefault(key, {"requests": 0, "applied": 0, "replayed": 0, "refused": 0})
                counts["requests"] += 1
                slot = ledger.slots.get(key)
                if slot is not None and slot[1] != fingerprint:
                    counts["refused"] += 1
                    outcome = ("reused",)
                elif slot is not None and slot[0] == "in-flight":
                    counts["refused"] += 1
                    outcome = ("in-flight",)
                elif slot is not None:
                    counts["replayed"] += 1
                    outcome = ("replay", slot[2], slot[3])
                else:
                    ledger.slots[key] = ("in-flight", fingerprint)
                    outcome = ("apply",)
            else:
                outcome = ("apply",)
        if outcome[0] == "reused":
            self.send_problem(422, "Unprocessable Content", "Idempotency-Key was used for a different request")
            return
        if outcome[0] == "in-flight":
            self.send_problem(409, "Conflict", "a request with this Idempotency-Key is still being processed")
            return
        drop = False
        if outcome[0] == "replay":
            status, answer = outcome[1], outcome[2]
            sys.stderr.write("idempotency key %s: recorded answer sent again (%d)\n" % (key, status))
        else:
            try:
                draft = json.loads(body)
                title, text = str(draft["title"]), str(draft["body"])
            except (ValueError, KeyError, TypeError):
                with ledger.lock:
                    if key is not None:
                        ledger.slots.pop(key, None)
                self.send_problem(400, "Bad Request", "the body must be JSON with title and body")
                return
            with ledger.lock:
                post = {"id": ledger.next_id, "title": title, "body": text}
                ledger.posts[post["id"]] = post
                ledger.next_id += 1
                status, answer = 201, post
                if key is not None:
                    ledger.slots[key] = ("done", fingerprint, status, answer)
                    ledger.counts[key]["applied"] += 1
                if ledger.drops > 0:
                    ledger.drops -= 1
                    drop = True
            sys.stderr.write("idempotency key %s: applied (%d)%s\n" % (key, status, ", connection dropped" if drop else ""))
        if drop:
            # The lost acknowledgement: a reset instead of an answer.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        self.send_json(status, answer)


class Server(ThreadingHTTPServer):
    # socketserver's default backlog, 5, drops a SYN when a burst of clients connects at once,
    # and the client resends it a second later: a request arrives late, out of its order.
    request_queue_size = 128


def main():
    parser = argparse.ArgumentParser(description="A posts server that honours Idempotency-Key.")
    parser.add_argument("--drop-after-apply", type=int, default=0, help="reset the connection after applying the first N writes")
    arguments = parser.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.ledger = Ledger(arguments.drop_after_apply)
    print("listening %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
