"""The request body of an http.server handler, Content-Length or chunked (the test origins' one reader)."""


def read_body(handler):
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(handler.rfile.readline().split(b";")[0], 16)
            if size == 0:
                handler.rfile.readline()
                break
            body += handler.rfile.read(size)
            handler.rfile.readline()
        return body
    return handler.rfile.read(int(handler.headers.get("Content-Length", "0")))
