/*
 * api-client.c - a client of paddock serve's API in C, for bench/daemon: the
 * same requests as its Python client, without the cost of the Python client
 * itself (http.client, and the GIL among 50 threads), which the C floors it
 * is compared with do not pay.
 *   api-client SOCKET
 * SOCKET is the daemon's unix socket. Reads commands on stdin, one a line,
 * and answers each with one line:
 *   e ID   one POST /v1/sandboxes/ID/exec of `true` on the connection kept
 *          from the last `e`: the nanoseconds from the request's first byte
 *          written to the answer's last byte read;
 *   w N    N threads, each with a connection of its own opened before they
 *          are released together; each claims a sandbox (POST /v1/sandboxes)
 *          and runs `true` in it: N items "TOTAL,CLAIM,EXEC,ID" (ns).
 * Any answer but 201 to a claim, or an exec answer without exit code 0, ends
 * it with a message on stderr and status 1. EOF ends it.
 * Built and run by bench/daemon (no libpaddock).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ANSWER_MAX (1 << 20)

static const char *sock_path;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int connect_api(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * One request (a JSON body) and its answer, whose body is left in `body`
 * (NUL-terminated). The HTTP status, or -1 when the connection failed
 * before any byte of the answer (the caller may connect again), or -2.
 */
static int call(int fd, const char *path, const char *json, char *body, size_t cap)
{
	char req[512], head[8192];
	size_t got = 0, want;
	char *end, *cl;
	int n, status;

	n = snprintf(req, sizeof(req),
		     "POST %s HTTP/1.1\r\nHost: paddock\r\nContent-Type: application/json\r\n"
		     "Content-Length: %zu\r\n\r\n%s",
		     path, strlen(json), json);
	if (n < 0 || (size_t)n >= sizeof(req) || write_all(fd, req, (size_t)n) < 0)
		return -1;
	for (;;) {
		ssize_t r = read(fd, head + got, sizeof(head) - 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return got == 0 ? -1 : -2;
		got += (size_t)r;
		head[got] = '\0';
		if ((end = strstr(head, "\r\n\r\n")) != NULL)
			break;
		if (got == sizeof(head) - 1)
			return -2;
	}
	if (sscanf(head, "HTTP/1.1 %d", &status) != 1)
		return -2;
	cl = strcasestr(head, "\r\nContent-Length:");
	if (cl == NULL || cl > end)
		return -2; /* the daemon's JSON answers carry their length */
	want = strtoul(cl + 17, NULL, 10);
	if (want >= cap)
		return -2;
	got -= (size_t)(end + 4 - head);
	if (got > want)
		return -2; /* nothing is pipelined here */
	memcpy(body, end + 4, got);
	while (got < want) {
		ssize_t r = read(fd, body + got, want - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -2;
		got += (size_t)r;
	}
	body[got] = '\0';
	return status;
}

static int exec_true(int fd, const char *id, char *body, size_t cap)
{
	char path[320];
	int st;

	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	st = call(fd, path, "{\"argv\":[\"true\"]}", body, cap);
	if (st == 200 && strstr(body, "\"exit_code\":0") == NULL)
		return -2;
	return st;
}

/* The sandbox's id from a claim's answer. */
static int id_of(const char *body, char *id, size_t cap)
{
	const char *p = strstr(body, "\"id\":\"");
	size_t n;

	if (p == NULL)
		return -1;
	p += 6;
	n = strcspn(p, "\"");
	if (n == 0 || n >= cap)
		return -1;
	memcpy(id, p, n);
	id[n] = '\0';
	return 0;
}

static int kept = -1; /* the connection of the `e` samples */

static int sample(const char *id)
{
	static char body[ANSWER_MAX];
	uint64_t t0, t1;
	int st;

	for (int tries = 0; tries < 2; tries++) {
		if (kept < 0 && (kept = connect_api()) < 0)
			return -1;
		t0 = now_ns();
		st = exec_true(kept, id, body, sizeof(body));
		t1 = now_ns();
		if (st == 200) {
			printf("%llu\n", (unsigned long long)(t1 - t0));
			return 0;
		}
		close(kept);
		kept = -1;
		/* The daemon closes a connection idle for 10 s before reading more: once more. */
		if (st != -1)
			break;
	}
	fprintf(stderr, "api-client: the exec in %s failed: %.300s\n", id, body);
	return -1;
}

struct wave {
	pthread_barrier_t go;
	int failed;
};

struct member {
	struct wave *w;
	int fd;
	uint64_t total, claim, exec;
	char id[128];
	char body[16384];
};

static void *wave_member(void *arg)
{
	struct member *m = arg;
	uint64_t t0, t1, t2;

	pthread_barrier_wait(&m->w->go);
	t0 = now_ns();
	if (call(m->fd, "/v1/sandboxes", "{}", m->body, sizeof(m->body)) != 201 ||
	    id_of(m->body, m->id, sizeof(m->id)) < 0)
		goto fail;
	t1 = now_ns();
	if (exec_true(m->fd, m->id, m->body, sizeof(m->body)) != 200)
		goto fail;
	t2 = now_ns();
	m->total = t2 - t0;
	m->claim = t1 - t0;
	m->exec = t2 - t1;
	return NULL;
fail:
	fprintf(stderr, "api-client: a claim + exec failed: %.300s\n", m->body);
	__atomic_store_n(&m->w->failed, 1, __ATOMIC_RELAXED);
	return NULL;
}

static int wave(int n)
{
	struct wave w = {0};
	struct member *m = calloc((size_t)n, sizeof(*m));
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	int rc = -1;

	if (m == NULL || t == NULL || pthread_barrier_init(&w.go, NULL, (unsigned)n) != 0)
		return -1;
	for (int i = 0; i < n; i++) {
		m[i].w = &w;
		m[i].fd = connect_api();
		if (m[i].fd < 0)
			goto out;
	}
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, wave_member, &m[i]) != 0)
			goto out; /* the barrier never opens: the bench stops on the error */
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	if (w.failed)
		goto out;
	for (int i = 0; i < n; i++)
		printf("%s%llu,%llu,%llu,%s", i ? " " : "", (unsigned long long)m[i].total,
		       (unsigned long long)m[i].claim, (unsigned long long)m[i].exec, m[i].id);
	printf("\n");
	rc = 0;
out:
	for (int i = 0; i < n; i++)
		if (m[i].fd > 0)
			close(m[i].fd);
	pthread_barrier_destroy(&w.go);
	free(m);
	free(t);
	return rc;
}

int main(int argc, char **argv)
{
	char line[512];

	if (argc != 2) {
		fprintf(stderr, "usage: api-client SOCKET\n");
		return 2;
	}
	sock_path = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin) != NULL) {
		char id[256];
		int n;

		if (sscanf(line, "e %255s", id) == 1) {
			if (sample(id) < 0)
				return 1;
		} else if (sscanf(line, "w %d", &n) == 1 && n > 0 && n <= 1024) {
			if (wave(n) < 0) {
				fprintf(stderr, "api-client: a wave of %d failed\n", n);
				return 1;
			}
		} else {
			fprintf(stderr, "api-client: unknown command: %s", line);
			return 2;
		}
	}
	return 0;
}
