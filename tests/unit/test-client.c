/*
 * test-client.c - the daemon's HTTP client (src/client.c) against a tiny
 * scripted server in a thread: JSON calls, the daemon's errors, chunked
 * bodies, Server-Sent Events, keep-alive and its retry, and malformed or
 * oversized responses.
 */
#include "common.h"
#include "client.h"
#include "paths.h"
#include "json.h"
#include "util.h"

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>

/* One scripted answer: sent in pieces, on a new connection or the kept one. */
struct answer {
	const char *pieces[8];
	bool new_conn;
	bool close_after;
};

struct server {
	int lfd;
	char path[108];
	int port;
	const struct answer *answers;
	size_t n_answers;
	int accepts;
	char requests[8][4096]; /* what each answer was for */
	pthread_t thread;
};

/* Read one request (head and Content-Length body) into out. */
static bool read_request(int fd, char *out, size_t max)
{
	size_t len = 0;
	const char *end = NULL;
	size_t want = 0;

	while (len + 1 < max) {
		ssize_t n = read(fd, out + len, max - 1 - len);

		if (n <= 0)
			return false;
		len += (size_t)n;
		out[len] = '\0';
		end = strstr(out, "\r\n\r\n");
		if (end != NULL) {
			const char *cl = strcasestr(out, "Content-Length: ");

			want = (size_t)(end + 4 - out) +
			       (cl && cl < end ? strtoul(cl + 16, NULL, 10) : 0);
			if (len >= want)
				return true;
		}
	}
	return false;
}

/*
 * Wait until the client has read all that was sent on fd (SIOCOUTQ: the bytes
 * it has not taken yet), up to 2 s, so that the next piece reaches it in a read
 * of its own however slow it runs (ASan on a busy machine took two pieces in
 * one read after a fixed 2 ms pause).
 */
static void taken(int fd)
{
	int unread = 0;

	for (int i = 0; i < 2000; i++) {
		if (ioctl(fd, SIOCOUTQ, &unread) < 0 || unread == 0)
			break;
		usleep(1000);
	}
	usleep(2000); /* and the client has handled what it read */
}

static void *serve(void *arg)
{
	struct server *s = arg;
	int fd = -1;

	for (size_t i = 0; i < s->n_answers; i++) {
		const struct answer *a = &s->answers[i];

		if (a->new_conn || fd < 0) {
			if (fd >= 0)
				close(fd);
			fd = accept(s->lfd, NULL, NULL);
			if (fd < 0)
				return NULL;
			s->accepts++;
		}
		if (!read_request(fd, s->requests[i], sizeof(s->requests[i]))) {
			/* The client gave up on this connection: the answer goes to a new one. */
			close(fd);
			fd = -1;
			i--;
			continue;
		}
		for (size_t k = 0; k < PDK_ARRAY_SIZE(a->pieces) && a->pieces[k]; k++) {
			if (pdk_write_all(fd, a->pieces[k], strlen(a->pieces[k])) < 0)
				break;
			taken(fd); /* separate reads on the client's side */
		}
		if (a->close_after) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* A server of `answers` listening on a new socket of `family` bound to `addr`; not serving yet. */
static void start_listening(struct server *s, const struct answer *answers, size_t n, int family,
			    struct sockaddr *addr, socklen_t len)
{
	s->answers = answers;
	s->n_answers = n;
	signal(SIGPIPE, SIG_IGN); /* the client may hang up first */
	s->lfd = socket(family, SOCK_STREAM, 0);
	cr_assert(s->lfd >= 0);
	cr_assert(bind(s->lfd, addr, len) == 0);
	cr_assert(listen(s->lfd, 8) == 0);
}

static void start_unix(struct server *s, const struct answer *answers, size_t n)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};

	memset(s, 0, sizeof(*s));
	snprintf(s->path, sizeof(s->path), "/tmp/pdk-client-test-%d.sock", getpid());
	unlink(s->path);
	memcpy(un.sun_path, s->path, strlen(s->path) + 1);
	start_listening(s, answers, n, AF_UNIX, (struct sockaddr *)&un, sizeof(un));
	cr_assert(pthread_create(&s->thread, NULL, serve, s) == 0);
}

static void start_tcp(struct server *s, const struct answer *answers, size_t n)
{
	struct sockaddr_in in = {.sin_family = AF_INET};
	socklen_t len = sizeof(in);

	memset(s, 0, sizeof(*s));
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	start_listening(s, answers, n, AF_INET, (struct sockaddr *)&in, sizeof(in));
	cr_assert(getsockname(s->lfd, (struct sockaddr *)&in, &len) == 0);
	s->port = ntohs(in.sin_port);
	cr_assert(pthread_create(&s->thread, NULL, serve, s) == 0);
}

static void stop(struct server *s)
{
	pthread_join(s->thread, NULL);
	close(s->lfd);
	if (s->path[0])
		unlink(s->path);
}

/* A server of `answers` on a unix socket, and a client of it. */
static struct pdk_client *client_of(struct server *s, const struct answer *answers, size_t n)
{
	struct pdk_client_opts o = {0};
	struct pdk_error *err = NULL;
	struct pdk_client *c;

	start_unix(s, answers, n);
	o.socket = s->path;
	c = pdk_client_new(&o, &err);
	cr_assert_not_null(c, "%s", err ? err->msg : "");
	return c;
}

/* The client gone, and the server's thread done with its answers. */
static void finish(struct pdk_client *c, struct server *s)
{
	pdk_client_free(c);
	stop(s);
}

/* A JSON call that must succeed: its answer (the caller's; NULL when `out` is not wanted). */
static json_t *call_ok(struct pdk_client *c, const char *method, const char *path, bool want_out,
		       int *status)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *out = NULL;

	cr_assert_eq(pdk_client_json(c, method, path, NULL, want_out ? &out : NULL, status, &err),
		     0, "%s", err ? err->msg : "");
	return out;
}

Test(client, json_get_over_unix_socket)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 45\r\n\r\n",
		  "{\"status\":\"ok\",\"version\":\"0.1\",\"sandboxes\":3}"}},
	};
	struct server s;
	struct pdk_client *c;
	json_t *out = NULL;
	int status = 0;

	c = client_of(&s, a, 1);
	out = call_ok(c, "GET", "/v1/health", true, &status);
	cr_assert_eq(status, 200);
	cr_assert_str_eq(json_string_value(json_object_get(out, "status")), "ok");
	cr_assert_eq(json_integer_value(json_object_get(out, "sandboxes")), 3);
	finish(c, &s);
	cr_assert(strncmp(s.requests[0], "GET /v1/health HTTP/1.1\r\n", 25) == 0, "%s",
		  s.requests[0]);
	cr_assert_not_null(strstr(s.requests[0], "\r\nHost: localhost\r\n"));
	cr_assert_null(strstr(s.requests[0], "Authorization"), "no token, no Authorization field");
	json_decref(out);
}

Test(client, daemon_error_names_code_message_and_field)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 85\r\n\r\n"
		  "{\"error\":{\"code\":\"bad_request\",\"message\":\"argv must not be empty\",\"field\":\"argv[0]\"}}"}},
		{{"HTTP/1.1 404 Not Found\r\nContent-Length: 57\r\n\r\n"
		  "{\"error\":{\"code\":\"not_found\",\"message\":\"no sandbox 'x'\"}}"}},
		{{"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 11\r\nConnection: close\r\n\r\n",
		  "upstream ko"},
		 .close_after = true},
	};
	struct server s;
	struct pdk_client *c;
	struct pdk_error *err = NULL;
	json_t *body = json_pack("{s:[]}", "argv");
	int r;

	c = client_of(&s, a, 3);
	r = pdk_client_json(c, "POST", "/v1/sandboxes/x/exec", body, NULL, NULL, &err);
	cr_assert_eq(r, -EINVAL);
	cr_assert_str_eq(err->msg, "bad_request: argv must not be empty (field argv[0])");
	pdk_error_free(&err);
	r = pdk_client_json(c, "GET", "/v1/sandboxes/x", NULL, NULL, NULL, &err);
	cr_assert_eq(r, -ENOENT);
	cr_assert_str_eq(err->msg, "not_found: no sandbox 'x'");
	pdk_error_free(&err);
	r = pdk_client_json(c, "GET", "/v1/pools", NULL, NULL, NULL, &err);
	cr_assert_eq(r, -EIO);
	cr_assert_str_eq(err->msg, "HTTP 502 from the daemon: upstream ko");
	pdk_error_free(&err);
	finish(c, &s);
	cr_assert_eq(s.accepts, 1, "the three calls shared one kept connection");
	cr_assert_not_null(strstr(s.requests[0], "Content-Type: application/json\r\n"));
	cr_assert_not_null(strstr(s.requests[0], "\r\n\r\n{\"argv\":[]}"), "%s", s.requests[0]);
	json_decref(body);
}

Test(client, chunked_body_in_pieces)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n",
		  "4\r\n{\"sa\r\n", "3\r\nndb\r", "\n9\r\noxes\":[]}\r\n", "0\r\n\r\n"}},
	};
	struct server s;
	struct pdk_client *c;
	json_t *out = NULL;

	c = client_of(&s, a, 1);
	out = call_ok(c, "GET", "/v1/sandboxes", true, NULL);
	cr_assert(json_is_array(json_object_get(out, "sandboxes")));
	json_decref(out);
	finish(c, &s);
}

struct seen {
	char text[4096];
	int n;
	int stop_after;
};

static int on_event(void *ud, const char *event, const char *id, const char *data, size_t len)
{
	struct seen *s = ud;
	size_t used = strlen(s->text);

	cr_assert_eq(strlen(data), len);
	snprintf(s->text + used, sizeof(s->text) - used, "[%s|%s|%s]", event, id ? id : "-", data);
	s->n++;
	return s->stop_after && s->n >= s->stop_after;
}

Test(client, sse_stream_over_chunked)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
		  "1e\r\n: keep-alive\r\nid: 7\r\nevent: st\r\n",
		  "20\r\nart\r\ndata: {\"pid\":1}\r\n\r\ndata: a\r\r\n",
		  "12\r\n\n\r\ndata:b\n\nid: 9\n\n\r\n", "d\r\nevent: exit\n\n\r\n", "0\r\n\r\n"}},
	};
	struct server s;
	struct pdk_client *c;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_client_resp resp;
	struct seen seen = {0};
	struct pdk_client_req q = {.method = "GET",
				   .path = "/v1/events",
				   .on_sse = on_event,
				   .ud = &seen,
				   .accept = "text/event-stream"};

	c = client_of(&s, a, 1);
	cr_assert_eq(pdk_client_request(c, &q, &resp, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(resp.status, 200);
	cr_assert_null(resp.body, "a streamed body is not collected");
	/*
	 * The comment is skipped; CR LF, LF and a CR LF split across chunks end lines;
	 * "data:" without a space; an event without data is not dispatched; the id
	 * stays for the next event.
	 */
	cr_assert_str_eq(seen.text, "[start|7|{\"pid\":1}][message|7|a][message|7|b]", "%s",
			 seen.text);
	pdk_client_resp_release(&resp);
	finish(c, &s);
	cr_assert_not_null(strstr(s.requests[0], "Accept: text/event-stream\r\n"));
}

Test(client, sse_callback_stops_the_request)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
		  "data: 1\n\ndata: 2\n\n", "data: 3\n\n"},
		 .close_after = true},
	};
	struct server s;
	struct pdk_client *c;
	struct pdk_error *err = NULL;
	struct pdk_client_resp resp;
	struct seen seen = {.stop_after = 1};
	struct pdk_client_req q = {
		.method = "GET", .path = "/v1/events", .on_sse = on_event, .ud = &seen};

	c = client_of(&s, a, 1);
	cr_assert_lt(pdk_client_request(c, &q, &resp, &err), 0);
	cr_assert_eq(err->status, ECANCELED);
	cr_assert_eq(seen.n, 1);
	pdk_error_free(&err);
	finish(c, &s);
}

Test(client, sse_wanted_but_json_answered)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"}},
	};
	struct server s;
	struct pdk_client *c;
	struct pdk_error *err = NULL;
	struct pdk_client_resp resp;
	struct seen seen = {0};
	struct pdk_client_req q = {
		.method = "GET", .path = "/v1/events", .on_sse = on_event, .ud = &seen};

	c = client_of(&s, a, 1);
	cr_assert_lt(pdk_client_request(c, &q, &resp, &err), 0);
	cr_assert_eq(err->status, EPROTO, "%s", err->msg);
	pdk_error_free(&err);
	finish(c, &s);
}

static int on_data(void *ud, const char *data, size_t len)
{
	struct seen *s = ud;
	size_t used = strlen(s->text);

	cr_assert_lt(used + len, sizeof(s->text));
	memcpy(s->text + used, data, len);
	s->text[used + len] = '\0';
	s->n++;
	return 0;
}

Test(client, raw_body_streamed_and_close_delimited)
{
	static const struct answer a[] = {
		{{"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n", "hello ",
		  "world"},
		 .close_after = true},
	};
	struct server s;
	struct pdk_client *c;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_client_resp resp;
	struct seen seen = {0};
	struct pdk_client_req q = {.method = "GET",
				   .path = "/v1/sandboxes/x/files?path=/a",
				   .on_data = on_data,
				   .ud = &seen};

	c = client_of(&s, a, 1);
	cr_assert_eq(pdk_client_request(c, &q, &resp, &err), 0, "%s", err ? err->msg : "");
	cr_assert_str_eq(seen.text, "hello world");
	cr_assert_geq(seen.n, 2, "the body came in pieces");
	cr_assert_str_eq(resp.content_type, "application/octet-stream");
	pdk_client_resp_release(&resp);
	finish(c, &s);
}

Test(client, kept_connection_closed_by_daemon_is_replaced)
{
	/* The server closes after the first answer although it said keep-alive. */
	static const struct answer a[] = {
		{{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"}, .close_after = true},
		{{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"n\":2222}"}, .new_conn = true},
	};
	struct server s;
	struct pdk_client *c;
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *out = NULL;

	c = client_of(&s, a, 2);
	cr_assert_eq(pdk_client_json(c, "GET", "/v1/health", NULL, NULL, NULL, &err), 0);
	usleep(20000); /* let the close arrive */
	out = call_ok(c, "GET", "/v1/health", true, NULL);
	cr_assert_eq(json_integer_value(json_object_get(out, "n")), 2222);
	json_decref(out);
	finish(c, &s);
	cr_assert_eq(s.accepts, 2);
}

static int expect_failure(const struct answer *a, size_t n, int want_status, const char *want_msg)
{
	struct server s;
	struct pdk_client *c;
	struct pdk_error *err = NULL;
	json_t *out = NULL;
	int r;

	c = client_of(&s, a, n);
	r = pdk_client_json(c, "GET", "/v1/health", NULL, &out, NULL, &err);
	cr_assert_lt(r, 0, "a malformed answer was accepted");
	cr_assert_null(out);
	cr_assert_eq(err->status, want_status, "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, want_msg), "%s", err->msg);
	pdk_error_free(&err);
	finish(c, &s);
	return 0;
}

Test(client, malformed_status_line)
{
	static const struct answer a[] = {{{"HELLO there\r\n\r\n"}, .close_after = true}};

	expect_failure(a, 1, EPROTO, "malformed response from the daemon");
}

Test(client, bad_chunk_size)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n0\r\n\r\n"},
		 .close_after = true}};

	expect_failure(a, 1, EPROTO, "malformed response");
}

Test(client, truncated_body)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"a\""}, .close_after = true}};

	expect_failure(a, 1, EPROTO, "closed the connection before the response was complete");
}

Test(client, closed_without_answer)
{
	static const struct answer a[] = {{{NULL}, .close_after = true}};

	expect_failure(a, 1, EPIPE, "closed the connection");
}

Test(client, body_not_json)
{
	static const struct answer a[] = {{{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n[1,2]"}}};

	expect_failure(a, 1, EPROTO, "is not a JSON object");
}

Test(client, protocol_switch_refused)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"},
		 .close_after = true}};

	expect_failure(a, 1, EPROTO, "switched protocols");
}

Test(client, content_type_too_long)
{
	static char head[4096];
	static struct answer a[] = {{{head, "\r\n\r\n{}"}, .close_after = true}};
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: ");

	memset(head + n, 'x', 2000);
	expect_failure(a, 1, E2BIG, "too large");
}

Test(client, interim_100_continue_skipped)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 100 Continue\r\n\r\n",
		  "HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n", "{\"id\":\"a\"}"}}};
	struct server s;
	struct pdk_client *c;
	json_t *out = NULL;
	int status = 0;

	c = client_of(&s, a, 1);
	out = call_ok(c, "POST", "/v1/sandboxes", true, &status);
	cr_assert_eq(status, 201);
	cr_assert_str_eq(json_string_value(json_object_get(out, "id")), "a");
	json_decref(out);
	finish(c, &s);
	cr_assert_not_null(strstr(s.requests[0], "Content-Length: 0\r\n"),
			   "a POST says its length");
}

Test(client, tcp_with_bearer_token_and_prefix)
{
	static const struct answer a[] = {{{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"}}};
	struct server s;
	struct pdk_client *c;
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *url = NULL;
	struct pdk_client_opts o = {.token = "pdk_sb_abc.def"};

	start_tcp(&s, a, 1);
	url = pdk_xasprintf("http://localhost:%d/api/", s.port);
	o.url = url;
	c = pdk_client_new(&o, &err);
	cr_assert_not_null(c);
	cr_assert_str_eq(pdk_client_endpoint(c), url);
	call_ok(c, "GET", "/v1/pools", false, NULL);
	finish(c, &s);
	cr_assert(strncmp(s.requests[0], "GET /api/v1/pools HTTP/1.1\r\n", 28) == 0, "%s",
		  s.requests[0]);
	cr_assert_not_null(strstr(s.requests[0], "Authorization: Bearer pdk_sb_abc.def\r\n"));
}

Test(client, environment_and_bad_urls)
{
	struct pdk_error *err = NULL;
	struct pdk_client *c;
	struct pdk_client_opts o = {0};
	static const char *const bad[] = {"https://127.0.0.1:7070", "http://example.com:80",
					  "http://127.0.0.1:0",     "http://127.0.0.1:99999",
					  "http://[::1:80",         "unix:/x"};

	char *env1[] = {(char *)"PADDOCK_RUNTIME_DIR=/ignored", NULL};
	char *env2[] = {(char *)"PADDOCK_URL=http://[::1]:7070", NULL};
	char *env3[] = {(char *)"PADDOCK_URL=http://[::1]:7070",
			(char *)"PADDOCK_TOKEN=a\r\nX-Evil: 1", NULL};
	struct pdk_paths_env penv = {.runtime_dir = "/tmp/pdk-rt"};
	struct pdk_paths paths;

	pdk_paths_resolve(&penv, &paths);
	o.runtime_dir = paths.runtime_dir;
	pdk_client_opts_from_env(&o, env1);
	c = pdk_client_new(&o, &err);
	cr_assert_str_eq(pdk_client_endpoint(c), "unix:/tmp/pdk-rt/paddock.sock");
	pdk_client_free(c);
	pdk_client_opts_from_env(&o, env2);
	c = pdk_client_new(&o, &err);
	cr_assert_str_eq(pdk_client_endpoint(c), "http://[::1]:7070");
	pdk_client_free(c);
	o = (struct pdk_client_opts){.socket = "/tmp/x.sock"}; /* wins over PADDOCK_URL */
	pdk_client_opts_from_env(&o, env2);
	c = pdk_client_new(&o, &err);
	cr_assert_str_eq(pdk_client_endpoint(c), "unix:/tmp/x.sock");
	pdk_client_free(c);
	pdk_client_opts_from_env(&o, env3);
	c = pdk_client_new(&o, &err);
	cr_assert_null(c, "a token that would add a header field is refused");
	pdk_error_free(&err);
	o = (struct pdk_client_opts){0};
	c = pdk_client_new(&o, &err);
	cr_assert_null(c, "no address at all is refused");
	cr_assert_eq(err->status, EINVAL);
	pdk_error_free(&err);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(bad); i++) {
		o.url = bad[i];
		c = pdk_client_new(&o, &err);
		cr_assert_null(c, "%s accepted", bad[i]);
		cr_assert_eq(err->status, EINVAL);
		pdk_error_free(&err);
	}
	pdk_paths_release(&paths);
	penv = (struct pdk_paths_env){.xdg_runtime_dir = "/run/user/5", .euid = 5};
	pdk_paths_resolve(&penv, &paths);
	cr_assert_str_eq(paths.runtime_dir, "/run/user/5/paddock");
	pdk_paths_release(&paths);
	penv = (struct pdk_paths_env){.euid = 5};
	pdk_paths_resolve(&penv, &paths);
	cr_assert_str_eq(paths.runtime_dir, "/tmp/paddock-5");
	pdk_paths_release(&paths);
}

Test(client, no_daemon_is_a_clear_error)
{
	struct pdk_client_opts o = {.socket = "/nonexistent/paddock.sock"};
	struct pdk_error *err = NULL;
	struct pdk_client *c = pdk_client_new(&o, &err);

	cr_assert_lt(pdk_client_json(c, "GET", "/v1/health", NULL, NULL, NULL, &err), 0);
	cr_assert_eq(err->status, ENOENT);
	cr_assert_not_null(
		strstr(err->msg,
		       "cannot connect to the daemon at 'unix:/nonexistent/paddock.sock'"),
		"%s", err->msg);
	pdk_error_free(&err);
	pdk_client_free(c);
}

Test(client, request_fields_are_checked)
{
	struct pdk_client_opts o = {.socket = "/nonexistent/paddock.sock"};
	struct pdk_error *err = NULL;
	struct pdk_client *c = pdk_client_new(&o, &err);
	struct pdk_client_resp resp;
	struct pdk_client_req q = {.method = "GET", .path = "/v1/x HTTP/1.1\r\nX: y"};

	cr_assert_eq(pdk_client_request(c, &q, &resp, &err), -EINVAL);
	pdk_error_free(&err);
	q.path = "/v1/sandboxes";
	q.idempotency_key = "k\nX: y";
	cr_assert_eq(pdk_client_request(c, &q, &resp, &err), -EINVAL);
	pdk_error_free(&err);
	pdk_client_free(c);
}

Test(client, sse_parser_byte_by_byte)
{
	static const char stream[] = "\xef\xbb\xbf"
				     ": hi\r\nevent: a\r\ndata: 1\r\ndata\r\ndata:  2\r\n\r\n"
				     "retry: 5\nid: x\ndata: 3\r\rid\ndata: 4\n\n";
	struct seen seen = {0};
	struct pdk_sse *p = pdk_sse_new(PDK_CLIENT_SSE_MAX, on_event, &seen);

	for (size_t i = 0; i < sizeof(stream) - 1; i++)
		cr_assert_eq(pdk_sse_feed(p, stream + i, 1), 0);
	/* A BOM is not stripped (the daemon sends none); it makes a field nobody reads. */
	cr_assert_str_eq(seen.text, "[a|-|1\n\n 2][message|x|3][message||4]", "%s", seen.text);
	pdk_sse_free(p);
}

Test(client, sse_caps)
{
	struct seen seen = {0};
	struct pdk_sse *p = pdk_sse_new(PDK_CLIENT_SSE_MAX, on_event, &seen);
	size_t n = PDK_CLIENT_SSE_MAX / 4 + 1;
	char *big = pdk_xmalloc(n);
	int r = 0;

	memset(big, 'd', n);
	memcpy(big, "data: ", 6);
	for (int i = 0; i < 5 && r == 0; i++)
		r = pdk_sse_feed(p, big, n);
	cr_assert_eq(r, -E2BIG, "an endless line is refused");
	cr_assert_eq(seen.n, 0);
	free(big);
	pdk_sse_free(p);
}

Test(client, parser_reuse_flags)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
	static const char close[] =
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
	struct pdk__client_parser *p = pdk__client_parser_new(false);
	struct pdk_client_resp r;
	struct pdk_error *err = NULL;
	bool keep = false;

	cr_assert_eq(pdk__client_parser_feed(p, ok, sizeof(ok) - 1, &err), 1);
	pdk__client_parser_take(p, &r, &keep);
	cr_assert(keep);
	cr_assert_str_eq(r.body, "{}");
	pdk_client_resp_release(&r);
	pdk__client_parser_free(p);
	p = pdk__client_parser_new(false);
	cr_assert_eq(pdk__client_parser_feed(p, close, sizeof(close) - 1, &err), 1);
	pdk__client_parser_take(p, &r, &keep);
	cr_assert_not(keep);
	pdk_client_resp_release(&r);
	pdk__client_parser_free(p);
	p = pdk__client_parser_new(true); /* HEAD: no body whatever Content-Length says */
	cr_assert_eq(pdk__client_parser_feed(p, ok, sizeof(ok) - 3, &err), 1);
	pdk__client_parser_free(p);
}

Test(client, escape)
{
	_cleanup_free_ char *e = pdk_client_escape("/a b&c=d?é+%");

	cr_assert_str_eq(e, "/a%20b%26c%3Dd%3F%C3%A9%2B%25");
}

Test(client, status_out_of_range)
{
	static const struct answer a[] = {
		{{"HTTP/1.1 000 OK\r\nContent-Length: 2\r\n\r\n{}"}, .close_after = true}};

	expect_failure(a, 1, EPROTO, "status 0");
}
