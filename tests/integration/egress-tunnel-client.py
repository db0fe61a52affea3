#!/usr/bin/env python3
"""The client side of test-egress-tunnel.sh, run inside the sandbox (or outside, direct).

  egress-tunnel-client.py download PORT N SEED    -> "COUNT SHA256" of what arrived
  egress-tunnel-client.py upload PORT N SEED      -> "COUNT SHA256" as the origin counted it
                                                     (after this side's shutdown(SHUT_WR))
  egress-tunnel-client.py slow PORT N             -> a tunnel that reads nothing while a
                                                     second one downloads N bytes whole
  egress-tunnel-client.py reset PORT              -> what the client sees when the origin
                                                     resets its side
  egress-tunnel-client.py eager PORT N SEED       -> the CONNECT and the first tunnelled
                                                     bytes in one write; "COUNT SHA256"
  egress-tunnel-client.py sizes PORT N...         -> one tunnel per size N (SEND N N):
                                                     "N:ok" for each that arrived whole
                                                     and ended, else "N:COUNT"
  egress-tunnel-client.py echo PORT ROUNDS        -> ROUNDS small messages (1..ROUNDS
                                                     bytes), each waited for back; "echo
                                                     ROUNDS ok" or the first that differed
Each command opens a CONNECT tunnel to 127.0.0.1:PORT through $HTTP_PROXY (with
PADDOCK_DIRECT=1: straight to the port). The streams are the origin's (stream()).
"""
import hashlib
import os
import random
import socket
import sys
import time

CHUNK = 1 << 16


def stream(seed, n):
    rng = random.Random(seed)
    while n > 0:
        k = min(n, CHUNK)
        yield rng.randbytes(k)
        n -= k


def tunnel(port):
    if os.environ.get("PADDOCK_DIRECT"):
        return socket.create_connection(("127.0.0.1", port), timeout=60)
    proxy = os.environ["HTTP_PROXY"].rsplit(":", 1)
    s = socket.create_connection((proxy[0].split("//")[1], int(proxy[1])), timeout=60)
    s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            raise SystemExit(f"no answer to CONNECT: {head!r}")
        head += b
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"CONNECT refused: {head.splitlines()[0].decode()}")
    return s


def drain(s):
    h, n = hashlib.sha256(), 0
    buf = bytearray(1 << 20)
    while True:
        try:
            k = s.recv_into(buf)
        except ConnectionResetError:
            return n, h.hexdigest(), "reset"
        if k == 0:
            return n, h.hexdigest(), "eof"
        h.update(memoryview(buf)[:k])
        n += k


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    if cmd == "download":
        s = tunnel(port)
        s.sendall(f"SEND {sys.argv[3]} {sys.argv[4]}\n".encode())
        n, sha, _ = drain(s)
        print(n, sha)
    elif cmd == "upload":
        s = tunnel(port)
        s.sendall(b"RECV\n")
        for block in stream(int(sys.argv[4]), int(sys.argv[3])):
            s.sendall(block)
        s.shutdown(socket.SHUT_WR)
        print(s.makefile().readline().strip())
    elif cmd == "slow":
        n = int(sys.argv[3])
        stalled = tunnel(port)
        stalled.sendall(f"SEND {64 << 20} 7\n".encode())
        time.sleep(0.5)  # the stalled tunnel's buffers fill up
        t0 = time.monotonic()
        other = tunnel(port)
        other.sendall(f"SEND {n} 8\n".encode())
        got, sha, _ = drain(other)
        want = hashlib.sha256(b"".join(stream(8, n))).hexdigest()
        print(f"other={'whole' if (got, sha) == (n, want) else got} in {time.monotonic() - t0:.1f}s")
        got, sha, _ = drain(stalled)
        want = hashlib.sha256(b"".join(stream(7, 64 << 20))).hexdigest()
        print(f"stalled={'whole' if (got, sha) == (64 << 20, want) else got}")
    elif cmd == "eager":
        # The command rides in the same segment as the CONNECT: the proxy has it in its
        # buffer before the tunnel exists, and must send it up first.
        proxy = os.environ["HTTP_PROXY"].rsplit(":", 1)
        s = socket.create_connection((proxy[0].split("//")[1], int(proxy[1])), timeout=60)
        s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nSEND {sys.argv[3]} {sys.argv[4]}\n"
                  .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        if not head.startswith(b"HTTP/1.1 200"):
            raise SystemExit(f"CONNECT refused: {head!r}")
        n, sha, _ = drain(s)
        print(n, sha)
    elif cmd == "sizes":
        res = []
        for n in (int(x) for x in sys.argv[3:]):
            s = tunnel(port)
            s.sendall(f"SEND {n} {n}\n".encode())
            got, sha, how = drain(s)
            want = hashlib.sha256(b"".join(stream(n, n))).hexdigest()
            res.append(f"{n}:{'ok' if (got, sha, how) == (n, want, 'eof') else got}")
            s.close()
        print(" ".join(res))
    elif cmd == "echo":
        rounds = int(sys.argv[3])
        s = tunnel(port)
        s.sendall(b"ECHO\n")
        rng = random.Random(5)
        for i in range(1, rounds + 1):
            msg = rng.randbytes(i)
            s.sendall(msg)
            back = b""
            while len(back) < len(msg):
                b = s.recv(len(msg) - len(back))
                if not b:
                    raise SystemExit(f"echo: the tunnel ended at round {i}")
                back += b
            if back != msg:
                raise SystemExit(f"echo: round {i} came back different")
        s.shutdown(socket.SHUT_WR)
        rest = s.recv(1)
        print(f"echo {rounds} {'ok' if rest == b'' else 'extra bytes'}")
    elif cmd == "reset":
        s = tunnel(port)
        s.sendall(b"RESET\n")
        n, _, how = drain(s)
        print(f"{how} after {n} bytes")
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
