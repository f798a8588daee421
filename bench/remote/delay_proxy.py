#!/usr/bin/python3
"""delay_proxy.py UPSTREAM_PORT PORT_FILE DELAY_MS [WINDOW_KIB] - a TCP
relay on 127.0.0.1 that puts a network's latency between a client and the
nginx of bench/remote/run.sh (tc netem is not built into this kernel).

- Each connection is opened DELAY_MS late (the handshake's round trip).
- Bytes from the client (the HTTP requests) are forwarded DELAY_MS after
  they arrived, pipelined: each request reaches nginx DELAY_MS later, once
  per request, however the client's writes are cut.
- Response bytes go back as they come; with WINDOW_KIB > 0 each connection
  moves at most WINDOW_KIB per DELAY_MS (a token bucket), as a TCP stream
  with that window on a path of that round-trip time does: one stream gets
  WINDOW/RTT, N streams N times that. 0: no cap (only the per-request
  delay).

Threads, not asyncio: three per connection (requests in, requests out after
the delay, responses), and response bytes move with os.splice through a
pipe, never through Python, so the relay costs little CPU and is not the
ceiling of a many-connection client (the asyncio relay this replaces copied
every byte through one Python thread: ~110 MiB/s for 16 connections on a
busy 2-core machine, below one plain stream).

The chosen port is written to PORT_FILE. Runs until killed.
"""
import fcntl
import os
import queue
import socket
import sys
import threading
import time

UP, PORT_FILE, DELAY = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]) / 1000
WINDOW = int(sys.argv[4]) * 1024 if len(sys.argv) > 4 else 0
PIECE = 1 << 20


def requests_in(c, q):
    """client -> queue, each piece stamped with when it is due upstream."""
    try:
        while True:
            data = c.recv(65536)
            if not data:
                break
            q.put((time.monotonic() + DELAY, data))
    except OSError:
        pass
    q.put((0, None))


def requests_out(u, q):
    """queue -> nginx, each piece at its due time (pipelined)."""
    try:
        while True:
            due, data = q.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            u.sendall(data)
        u.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def responses(u, c):
    """nginx -> client through a pipe (os.splice), at most WINDOW bytes per
    DELAY when capped."""
    r, w = os.pipe()
    try:  # a pipe holds 64 KiB by default: one splice per PIECE instead
        fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIECE)
    except OSError:
        pass
    tokens, last = WINDOW, time.monotonic()
    try:
        while True:
            n = PIECE
            if WINDOW:
                now = time.monotonic()
                tokens = min(WINDOW, tokens + (now - last) * WINDOW / DELAY)
                last = now
                if tokens < 4096:
                    time.sleep((4096 - tokens) * DELAY / WINDOW)
                    continue
                n = min(n, int(tokens))
            got = os.splice(u.fileno(), w, n)
            if not got:
                break
            tokens -= got
            while got:
                got -= os.splice(r, c.fileno(), got)
    except OSError:
        pass
    finally:
        os.close(r)
        os.close(w)
        for s in (c, u):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def handle(c):
    time.sleep(DELAY)
    try:
        u = socket.create_connection(("127.0.0.1", UP))
    except OSError:
        c.close()
        return
    q = queue.Queue()
    ts = [threading.Thread(target=requests_in, args=(c, q), daemon=True),
          threading.Thread(target=requests_out, args=(u, q), daemon=True)]
    for t in ts:
        t.start()
    responses(u, c)
    for t in ts:
        t.join()
    c.close()
    u.close()


def main():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(128)
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    os.rename(PORT_FILE + ".tmp", PORT_FILE)
    while True:
        c, _ = srv.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()


main()
