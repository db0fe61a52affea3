#!/usr/bin/env python3
"""Raw HTTP/1.1 over the daemon's unix socket, for test-serve-body.sh.

  body-client.py SOCK raw 'ESCAPED BYTES'       send the bytes, print every answer's status and body
  body-client.py SOCK big SIZE length|chunked   PUT a SIZE-byte body (streamed; Content-Length or
                                                chunked), reading the answer while sending
  body-client.py SOCK keepalive SIZE            GET /v1/health, then on the same connection a PUT
                                                announcing SIZE bytes; both answers

Each answer is printed as "STATUS <code>" and "BODY <json>"; "CLOSED" once the server closed.
"""
import socket
import sys
import threading


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s


def read_answers(s, want=None):
    """Read answers until the server closes (or `want` answers were read)."""
    data, answers = b"", []
    closed = False
    while want is None or len(answers) < want:
        while True:
            head, sep, rest = data.partition(b"\r\n\r\n")
            if not sep:
                break
            lines = head.split(b"\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(b":") for l in lines[1:])}
            n = int(headers.get(b"content-length", b"0"))
            if len(rest) < n:
                break
            answers.append((int(lines[0].split()[1]), rest[:n].decode("utf-8", "replace")))
            data = rest[n:]
            if want is not None and len(answers) >= want:
                break
        if want is not None and len(answers) >= want:
            break
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, socket.timeout) as e:
            print("ERROR", type(e).__name__)
            break
        if not chunk:
            closed = True
            break
        data += chunk
    return answers, closed


def show(answers, closed):
    for code, body in answers:
        print("STATUS", code)
        print("BODY", body)
    if closed:
        print("CLOSED")


def raw(path, text):
    s = connect(path)
    s.sendall(text.encode().decode("unicode_escape").encode("latin1"))
    show(*read_answers(s))


def big(path, size, mode):
    s = connect(path)
    head = "PUT /v1/sandboxes/none/files?path=/tmp/x HTTP/1.1\r\nHost: p\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if mode == "chunked" else "Content-Length: %d\r\n\r\n" % size
    sent = [0]

    def send():
        piece = b"\0" * 65536
        try:
            s.sendall(head.encode())
            left = size
            while left > 0:
                n = min(left, len(piece))
                if mode == "chunked":
                    s.sendall(b"%x\r\n" % n + piece[:n] + b"\r\n")
                else:
                    s.sendall(piece[:n])
                left -= n
                sent[0] += n
            if mode == "chunked":
                s.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server stopped reading and closed: expected once it refused

    t = threading.Thread(target=send, daemon=True)
    t.start()
    show(*read_answers(s))
    t.join(15)
    print("SENT", sent[0])


def keepalive(path, size):
    s = connect(path)
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: p\r\n\r\n")
    first, _ = read_answers(s, 1)
    s.sendall(b"PUT /v1/sandboxes/none/files?path=/tmp/x HTTP/1.1\r\nHost: p\r\nContent-Length: %d\r\n\r\n" % size)
    second, closed = read_answers(s)
    show(first + second, closed)


if __name__ == "__main__":
    sock, what = sys.argv[1], sys.argv[2]
    if what == "raw":
        raw(sock, sys.argv[3])
    elif what == "big":
        big(sock, int(sys.argv[3]), sys.argv[4])
    elif what == "keepalive":
        keepalive(sock, int(sys.argv[3]))
    else:
        sys.exit("unknown mode " + what)
