"""The Python SDK's wire (e2b on PyPI, which cannot be installed here), as its source
(e2b-dev/E2B packages/python-sdk) sends it, against the E2B front door
(tests/integration/test-e2b.sh). Where it differs from the JavaScript SDK:

- the control plane: POST /sandboxes (not /v2), the body with secure, allow_internet_access
  true, autoPause false, empty metadata and envVars; POST /sandboxes/{id}/connect; the list's
  state as one comma-separated value;
- envd's RPCs through connectrpc-python and its own JSON codec: Connect-Protocol-Version 1,
  Connect-Timeout-Ms on every call, compression off (Accept-Encoding identity,
  Connect-Accept-Encoding identity on streams), and a Connect error must carry a string code
  (plain_http_error() otherwise);
- /files through httpx: multipart with httpx's boundary and a part Content-Type, the user as
  ?username= as well as by Authorization.
Each check prints one JSON line {"d", "g", "w"}.
"""
import base64
import http.client
import json
import os
import struct
import sys
import urllib.parse

URL = urllib.parse.urlparse(os.environ["E2B_API_URL"])
KEY = os.environ["E2B_API_KEY"]


def check(d, g, w):
    print(json.dumps({"d": d, "g": str(g), "w": str(w)}), flush=True)


def request(method, path, body=None, headers=None):
    c = http.client.HTTPConnection(URL.hostname, URL.port, timeout=60)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


def api(method, path, obj=None):
    h = {"X-API-KEY": KEY, "User-Agent": "e2b-python-sdk/2.0.0", "Content-Type": "application/json"}
    st, hd, data = request(method, path, json.dumps(obj) if obj is not None else None, h)
    return st, hd, (json.loads(data) if data and hd.get("content-type", "").startswith("application/json") else data)


created_status, _, sb = api("POST", "/sandboxes", {
    "templateID": "base", "timeout": 300, "autoPause": False, "metadata": {"sdk": "python"},
    "envVars": {}, "secure": True, "allow_internet_access": True})
check("POST /sandboxes with the Python SDK's body: 201", created_status, 201)
sid, token = sb["sandboxID"], sb["envdAccessToken"]
st, _, again = api("POST", "/sandboxes/%s/connect" % sid, {"timeout": 300})
check("POST /sandboxes/{id}/connect: 200 and an envd access token (used below)",
      (st, again["sandboxID"], again["envdAccessToken"].startswith("pdk_sb_")), (200, sid, True))
token = again["envdAccessToken"]
st, _, lst = api("GET", "/v2/sandboxes?" + urllib.parse.urlencode(
    {"metadata": "sdk=python", "state": "running,paused", "limit": 100}))
check("GET /v2/sandboxes?state=running,paused&metadata=sdk%3Dpython",
      [s["sandboxID"] for s in lst], [sid])


def envd_headers(extra):
    h = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983", "X-Access-Token": token,
         "User-Agent": "connectrpc-python", "Authorization": "Basic " + base64.b64encode(b"user:").decode()}
    h.update(extra)
    return h


def unary(method, msg):
    return request("POST", "/filesystem.Filesystem/" + method, json.dumps(msg), envd_headers({
        "Content-Type": "application/json", "Connect-Protocol-Version": "1",
        "Connect-Timeout-Ms": "60000", "Accept-Encoding": "identity"}))


# /files as httpx uploads it, then the Connect calls.
boundary = os.urandom(16).hex()
body = ("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/py/a.txt\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\nfrom python\r\n--%s--\r\n" % (boundary, boundary)).encode()
st, _, data = request("POST", "/files?username=user", body, envd_headers(
    {"Content-Type": "multipart/form-data; boundary=" + boundary}))
check("POST /files as httpx sends it: 200, the entry", (st, json.loads(data)[0]["path"]), (200, "/tmp/py/a.txt"))
st, _, data = request("GET", "/files?" + urllib.parse.urlencode({"path": "/tmp/py/a.txt", "username": "root"}),
                      headers=envd_headers({"Authorization": "Basic " + base64.b64encode(b"root:").decode()}))
check("GET /files?username=root (Authorization root): the bytes", (st, data), (200, b"from python"))
st, hd, data = unary("Stat", {"path": "/tmp/py/a.txt"})
e = json.loads(data)["entry"]
check("Connect Stat with connectrpc-python's headers", (st, e["type"], e["size"]), (200, "FILE_TYPE_FILE", "11"))
st, hd, data = unary("Stat", {"path": "/tmp/py/missing"})
err = json.loads(data)
check("a Connect error has a string code (plain_http_error() passes it on)",
      (st, isinstance(err["code"], str), err["code"]), (404, True, "not_found"))



def watch(timeout_ms, keepalive_s):
    """A WatchDir stream as connectrpc-python sends it (one envelope, identity, a deadline):
    the answer's status, content type and every frame up to the end-stream one."""
    msg = json.dumps({"path": "/tmp/py", "recursive": False}).encode()
    c = http.client.HTTPConnection(URL.hostname, URL.port, timeout=60)
    c.request("POST", "/filesystem.Filesystem/WatchDir", struct.pack(">BI", 0, len(msg)) + msg,
              envd_headers({"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1",
                            "Connect-Timeout-Ms": str(timeout_ms), "Connect-Accept-Encoding": "identity",
                            "Keepalive-Ping-Interval": str(keepalive_s)}))
    r = c.getresponse()
    frames = []
    while True:
        head = r.read(5)
        if len(head) < 5:
            break
        n = struct.unpack(">I", head[1:5])[0]
        frames.append((head[0], json.loads(r.read(n))))
        if head[0] & 2:
            break
    c.close()
    return r, frames


r, frames = watch(2000, 50)
check("WatchDir: 200 application/connect+json", (r.status, r.getheader("Content-Type")), (200, "application/connect+json"))
check("WatchDir: the start event first", frames[0], (0, {"start": {}}))
check("WatchDir: Connect-Timeout-Ms ends it with deadline_exceeded in the end-stream frame",
      (frames[-1][0], frames[-1][1].get("error", {}).get("code")), (2, "deadline_exceeded"))

# An idle stream gets envd's keepalive event at the client's Keepalive-Ping-Interval.
r, frames = watch(5000, 1)
check("WatchDir idle with Keepalive-Ping-Interval 1: keepalive events before the deadline",
      (frames[0][1], any(f == (0, {"keepalive": {}}) for f in frames), frames[-1][0]), ({"start": {}}, True, 2))

st, _, _ = api("DELETE", "/sandboxes/" + sid)
check("DELETE /sandboxes/{id}: 204", st, 204)
