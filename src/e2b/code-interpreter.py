"""paddock's code interpreter: E2B's /execute and /contexts, served inside a sandbox.

The daemon starts this program in the sandbox (python3 reads it from its stdin) when a
request first names the interpreter's port, and reaches it through its port forwarding.
Each context is a stateful IPython kernel (Debian's python3-ipykernel, driven with
jupyter_client); /execute answers with one JSON object per line: stdout, stderr,
result (text, html, png, ...), error (name, value, traceback), number_of_executions,
end_of_execution. The program prints "ready" once it listens.
"""
import hmac
import json
import os
import queue
import signal
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jupyter_client.manager import KernelManager

BODY_MAX = 16 << 20
# The daemon's relay proves itself with this secret (its forwarded port is reachable by any
# local user of the host); taken out of the environment so kernels do not inherit it.
SECRET = os.environ.pop("PADDOCK_INTERPRETER_SECRET", "")
MIME = {
    "text/plain": "text", "text/html": "html", "text/markdown": "markdown",
    "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg",
    "application/pdf": "pdf", "text/latex": "latex", "application/json": "json",
    "application/javascript": "javascript",
}


class Context:
    """One kernel, run one execution at a time."""

    def __init__(self, language, cwd):
        self.id = str(uuid.uuid4())
        self.language = language
        self.cwd = cwd
        self.lock = threading.Lock()
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=cwd)
        self.kc = self.km.blocking_client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def info(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def restart(self):
        with self.lock:
            self.kc.stop_channels()
            self.km.restart_kernel(now=True)
            self.kc = self.km.blocking_client()
            self.kc.start_channels()
            self.kc.wait_for_ready(timeout=60)

    def shutdown(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def execute(self, code, envs, emit):
        with self.lock:
            if envs:
                setup = "import os as _o\n_o.environ.update(%r)\ndel _o\n" % (envs,)
                self.run(setup, lambda m: None)
            self.run(code, emit)

    def run(self, code, emit):
        # stop_on_error off: after a cell that raised, the kernel would abort every execute
        # request that reaches it before its abort window closes. The next runCode, sent as
        # soon as the error's idle status came, was sometimes one of them, and came back
        # with no result and no error.
        msg_id = self.kc.execute(code, allow_stdin=False, stop_on_error=False)
        while True:
            msg = self.kc.get_iopub_msg(timeout=None)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                break
            out = translate(kind, content)
            if out is not None:
                emit(out)
        reply = self.reply_to(msg_id)
        if reply is not None and reply["content"].get("status") == "aborted":
            emit({"type": "error", "name": "ExecutionAborted",
                  "value": "the kernel aborted this execution without running it",
                  "traceback": ""})
        emit({"type": "end_of_execution"})

    def reply_to(self, msg_id):
        """The kernel's execute_reply to msg_id (sent before its idle status), or None."""
        while True:
            try:
                msg = self.kc.get_shell_msg(timeout=10)
            except queue.Empty:
                return None
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg


def translate(kind, content):
    if kind == "stream":
        return {"type": content["name"], "text": content["text"]}
    if kind in ("execute_result", "display_data"):
        res = {"type": "result", "is_main_result": kind == "execute_result"}
        extra = {}
        for mime, value in content["data"].items():
            if mime in MIME:
                res[MIME[mime]] = value
            else:
                extra[mime] = value
        if extra:
            res["extra"] = extra
        text = res.get("text")
        if isinstance(text, str) and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            res["text"] = text[1:-1]
        return res
    if kind == "error":
        return {"type": "error", "name": content["ename"], "value": content["evalue"],
                "traceback": "\n".join(content["traceback"])}
    if kind == "execute_input":
        return {"type": "number_of_executions", "execution_count": content["execution_count"]}
    return None


class State:
    def __init__(self, cwd):
        self.cwd = cwd
        self.lock = threading.Lock()
        self.contexts = {}
        self.default = None

    def create(self, language, cwd):
        if language not in (None, "", "python"):
            raise ValueError("language '%s' is not served: only python" % language)
        ctx = Context("python", cwd or self.cwd)
        with self.lock:
            self.contexts[ctx.id] = ctx
        return ctx

    def default_context(self):
        with self.lock:
            if self.default is not None:
                return self.default
            self.default = Context("python", self.cwd)
            self.contexts[self.default.id] = self.default
            return self.default


STATE = None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > BODY_MAX:
            raise ValueError("the request body is larger than %d bytes" % BODY_MAX)
        return json.loads(self.rfile.read(n) or b"{}") if n else {}

    def answer(self, status, doc=None):
        data = b"" if doc is None else json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def fail(self, status, message):
        self.answer(status, {"error": message})

    def route(self, method):
        given = self.headers.get("X-Paddock-Interpreter-Secret") or ""
        if not SECRET or not hmac.compare_digest(given.encode(), SECRET.encode()):
            self.close_connection = True
            return self.fail(403, "this interpreter answers the paddock daemon only")
        path = self.path.split("?", 1)[0].rstrip("/")
        parts = [p for p in path.split("/") if p]
        try:
            if method == "GET" and parts == ["health"]:
                return self.answer(200, {"status": "ok"})
            if method == "POST" and parts == ["execute"]:
                return self.execute(self.body())
            if parts[:1] == ["contexts"]:
                return self.contexts(method, parts[1:])
            self.fail(404, "no route %s %s" % (method, path))
        except (ValueError, KeyError, TypeError) as e:
            self.fail(400, str(e))

    def contexts(self, method, rest):
        if method == "GET" and not rest:
            with STATE.lock:
                return self.answer(200, [c.info() for c in STATE.contexts.values()])
        if method == "POST" and not rest:
            doc = self.body()
            return self.answer(200, STATE.create(doc.get("language"), doc.get("cwd")).info())
        ctx = STATE.contexts.get(rest[0]) if rest else None
        if ctx is None:
            return self.fail(404, "no context '%s'" % (rest[0] if rest else ""))
        if method == "DELETE" and len(rest) == 1:
            with STATE.lock:
                STATE.contexts.pop(ctx.id, None)
                if STATE.default is ctx:
                    STATE.default = None
            ctx.shutdown()
            return self.answer(204)
        if method == "POST" and rest[1:] == ["restart"]:
            ctx.restart()
            return self.answer(204)
        self.fail(404, "no route %s %s" % (method, self.path))

    def execute(self, doc):
        code = doc["code"]
        if not isinstance(code, str):
            raise TypeError("'code' must be a string")
        if doc.get("context_id"):
            ctx = STATE.contexts.get(doc["context_id"])
            if ctx is None:
                return self.fail(404, "no context '%s'" % doc["context_id"])
        else:
            if doc.get("language") not in (None, "", "python"):
                return self.fail(400, "language '%s' is not served: only python"
                                 % doc["language"])
            ctx = STATE.default_context()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def emit(doc):
            line = (json.dumps(doc) + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()

        try:
            ctx.execute(code, doc.get("env_vars") or {}, emit)
        except Exception as e:  # the kernel died: the client is told, the line ends
            emit({"type": "unexpected_end_of_execution", "error": str(e)})
        self.wfile.write(b"0\r\n\r\n")

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")


def stop(server):
    """SIGTERM: the kernels end with the server (they are its children, in their own groups)."""
    for ctx in list(STATE.contexts.values()):
        ctx.km.shutdown_kernel(now=True)
    os._exit(0)


def main():
    global STATE
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 49999
    STATE = State(os.getcwd())
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: stop(server))
    print("ready", flush=True)
    server.serve_forever()


main()
