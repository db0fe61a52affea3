# The workloads of tests/integration/test-net.sh, run inside a sandbox as `sh net-workloads.sh
# NAME` (by paddock run and by a daemon exec). Each prints what the user would look at.
case $1 in
sockets) # socket.bind(("127.0.0.1", 0)) and ("::1", 0), listen, connect, one byte each way
	python3 -c '
import socket
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    s = socket.socket(fam); s.bind((addr, 0)); s.listen()
    c = socket.create_connection((addr, s.getsockname()[1])); a, _ = s.accept()
    c.sendall(b"x"); print(addr, "ok" if a.recv(1) == b"x" else "lost")'
	;;
http) # python3 -m http.server, then curl and a python client (the proxy is not for loopback)
	cd "$(mktemp -d)" && echo hello >hello.txt
	python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &
	for _ in $(seq 100); do curl -s -o /dev/null --noproxy '*' http://127.0.0.1:8000/ && break; sleep 0.05; done
	curl -sS --noproxy '*' http://127.0.0.1:8000/hello.txt
	python3 -c 'import urllib.request as u
print(u.build_opener(u.ProxyHandler({})).open("http://127.0.0.1:8000/hello.txt").read().decode().strip())'
	kill $!
	;;
db) # a tiny key-value server on ::1 and a client that sets and gets
	python3 -c '
import socket, threading
srv = socket.socket(socket.AF_INET6); srv.bind(("::1", 0)); srv.listen()
db = {}
def serve():
    for _ in range(2):
        c, _ = srv.accept(); f = c.makefile("rw")
        op, k, *v = f.readline().split()
        if op == "SET": db[k] = v[0]; f.write("OK\n")
        else: f.write(db.get(k, "NIL") + "\n")
        f.flush(); c.close()
threading.Thread(target=serve, daemon=True).start()
def ask(line):
    c = socket.create_connection(("::1", srv.getsockname()[1])); f = c.makefile("rw")
    f.write(line + "\n"); f.flush(); return f.readline().strip()
print(ask("SET answer 42"), ask("GET answer"))'
	;;
resolve) # what pip and npm do first: resolve the index's name
	python3 -c '
import socket
try: socket.getaddrinfo("pypi.org", 443); print("resolved")
except socket.gaierror as e: print("gaierror", e.errno, e.strerror)'
	getent hosts registry.npmjs.org; echo "getent: $?"
	;;
fetch) # pip's way through the proxy (urllib, CONNECT) and curl's
	python3 -c '
import urllib.request
try: urllib.request.urlopen("https://files.pythonhosted.org/simple/", timeout=10)
except Exception as e: print(e)'
	curl -sS http://denied.test/ 2>&1
	;;
esac
