#!/usr/bin/python3
"""connect_proxy.py TARGET_PORT LOG PORTFILE - an HTTPS proxy for
tests/cli/test_remote*.sh: every "CONNECT HOST:PORT" it is sent is logged
to LOG (one line, "HOST:PORT") and tunnelled to 127.0.0.1:TARGET_PORT
whatever it names, so that a client asking for a far host name (an S3
endpoint) meets a loopback TLS server holding a certificate for that name.
It listens on a port the kernel picks, written to PORTFILE."""
import os
import socket
import sys
import threading


def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(c, target, log):
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 65536:
        d = c.recv(4096)
        if not d:
            c.close()
            return
        head += d
    line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(line) < 2 or line[0] != "CONNECT":
        c.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
        c.close()
        return
    with open(log, "a") as f:
        f.write(line[1] + "\n")
    u = socket.create_connection(("127.0.0.1", target))
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
    pipe(c, u)


def main():
    target, log, portfile = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c, target, log), daemon=True).start()


if __name__ == "__main__":
    main()
