/*
 * listen.c - a TCP listener for an evhttp behind the request guard: the
 * address parsed and bound, the socket served (http.h).
 */
#include "common.h"
#include "http.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* "HOST:PORT" or "[V6]:PORT" into `ss`; the host part must be numeric. */
static int parse_addr(const char *spec, struct sockaddr_storage *ss, socklen_t *len,
		      struct pdk_error **err)
{
	_cleanup_free_ char *host = NULL;
	const char *colon = strrchr(spec, ':');
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	uint64_t port;

	if (colon == NULL || pdk_parse_u64(colon + 1, 65535, &port) < 0)
		return pdk_error_setx(err, EINVAL, "--listen wants HOST:PORT, not '%s'", spec);
	host = strndup(spec, (size_t)(colon - spec));
	if (host == NULL)
		pdk_oom();
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*len = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
		return 0;
	}
	return pdk_error_setx(err, EINVAL, "--listen wants a numeric address, not '%s'", host);
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
	const struct sockaddr_in *in4 = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

	if (ss->ss_family == AF_INET)
		return (ntohl(in4->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
}

int pdk_http_bind_tcp(const char *spec, bool *loopback, struct pdk_error **err)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	int fd, one = 1;

	if (parse_addr(spec, &ss, &len, err) < 0)
		return -EINVAL;
	if (loopback != NULL)
		*loopback = is_loopback(&ss);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return pdk_error_set(err, errno, "socket");
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		int e = errno;

		(void)close(fd);
		return pdk_error_set(err, e, "bind %s", spec);
	}
	return fd;
}

int pdk_http_serve_fd(struct event_base *base, struct evhttp *h, struct pdk_http_guards *gs, int fd,
		      struct pdk_error **err)
{
	struct evconnlistener *l;

	if (listen(fd, 128) < 0) {
		int e = errno;

		(void)close(fd);
		return pdk_error_set(err, e, "listen");
	}
	l = evconnlistener_new(base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1,
			       fd);
	if (l == NULL) {
		(void)close(fd);
		return pdk_error_setx(err, EIO, "cannot listen on the socket");
	}
	if (evhttp_bind_listener(h, l) == NULL) {
		evconnlistener_free(l);
		return pdk_error_setx(err, EIO, "cannot serve HTTP on the socket");
	}
	pdk_http_guard_install(gs, h, l);
	return 0;
}
