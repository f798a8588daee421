#!/usr/bin/python3
"""delay_proxy.py UPSTREAM_PORT PORT_FILE DELAY_MS [WINDOW_KIB] - a TCP
relay on 127.0.0.1 that puts a network's latency between a client and the
nginx of bench/remote/run.sh (tc netem is not built into this kernel).

- Each connection is opened DELAY_MS late (the handshake's round trip).
- Every byte from the client (the HTTP requests) is forwarded DELAY_MS after
  it arrived, pipelined: so each request reaches nginx DELAY_MS later.
- Response bytes are streamed back as they come; with WINDOW_KIB > 0 each
  connection moves at most WINDOW_KIB per DELAY_MS (a token bucket), as a
  TCP stream with that window on a path of that round-trip time does: one
  stream gets WINDOW/RTT, N streams N times that. 0: no cap (only the
  per-request delay).

The chosen port is written to PORT_FILE. Runs until killed.
"""
import asyncio
import sys
import time

UP, PORT_FILE, DELAY = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]) / 1000
WINDOW = int(sys.argv[4]) * 1024 if len(sys.argv) > 4 else 0
PIECE = 256 * 1024


async def requests(creader, uwriter):
    """client -> nginx, each piece DELAY late (pipelined)."""
    q = asyncio.Queue()

    async def send():
        while True:
            due, data = await q.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            uwriter.write(data)
            await uwriter.drain()
        uwriter.close()

    t = asyncio.ensure_future(send())
    try:
        while True:
            data = await creader.read(PIECE)
            if not data:
                break
            q.put_nowait((time.monotonic() + DELAY, data))
    finally:
        q.put_nowait((0, None))
        await t


async def responses(ureader, cwriter):
    """nginx -> client, at most WINDOW bytes per DELAY when capped."""
    tokens, last = WINDOW, time.monotonic()
    while True:
        n = PIECE
        if WINDOW:
            now = time.monotonic()
            tokens = min(WINDOW, tokens + (now - last) * WINDOW / DELAY)
            last = now
            if tokens < 1:
                await asyncio.sleep((1 - tokens) * DELAY / WINDOW + 0.001)
                continue
            n = min(n, int(tokens))
        data = await ureader.read(n)
        if not data:
            break
        tokens -= len(data)
        cwriter.write(data)
        await cwriter.drain()
    cwriter.close()


async def handle(creader, cwriter):
    await asyncio.sleep(DELAY)
    try:
        ureader, uwriter = await asyncio.open_connection("127.0.0.1", UP)
    except OSError:
        cwriter.close()
        return
    try:
        await asyncio.gather(requests(creader, uwriter), responses(ureader, cwriter))
    except (ConnectionError, OSError):
        pass
    finally:
        cwriter.close()
        uwriter.close()


async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", 0, limit=PIECE)
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(str(srv.sockets[0].getsockname()[1]))
    import os
    os.rename(PORT_FILE + ".tmp", PORT_FILE)
    async with srv:
        await srv.serve_forever()


asyncio.run(main())
