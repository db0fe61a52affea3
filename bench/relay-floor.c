/*
 * relay-floor.c - the least a CONNECT relay can do, for bench/egress: the
 * floor a relay on this machine cannot beat, measured in the same run as
 * paddock's proxy.
 *
 *   relay-floor [copy|splice]   listen on 127.0.0.1, print "relay-floor PORT", serve
 *
 * One thread per connection reads the CONNECT head (no policy, no parser:
 * "CONNECT 127.0.0.1:PORT", the rest of the head is skipped), connects,
 * answers 200, then one blocking thread per direction moves the bytes:
 * read()/write() through a 1 MiB buffer (copy, the default), or splice()
 * through a 1 MiB pipe. An end of stream is passed on with shutdown(). No
 * budget, no events, no timeouts: nothing paddock's proxy must do is done
 * here. Built by bench/egress with `cc -O2 -pthread`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE (1024 * 1024)

static int use_splice;

struct dir {
	int from, to;
};

static void copy_dir(const struct dir *d)
{
	char *buf = malloc(BUF_SIZE);
	ssize_t n;

	if (buf == NULL)
		return;
	while ((n = read(d->from, buf, BUF_SIZE)) > 0) {
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(d->to, buf + off, (size_t)(n - off));

			if (w <= 0) {
				free(buf);
				return;
			}
			off += w;
		}
	}
	free(buf);
}

static void splice_dir(const struct dir *d)
{
	int p[2];
	ssize_t n;

	if (pipe(p) < 0)
		return;
	(void)fcntl(p[0], F_SETPIPE_SZ, BUF_SIZE);
	while ((n = splice(d->from, NULL, p[1], NULL, BUF_SIZE, SPLICE_F_MOVE)) > 0) {
		while (n > 0) {
			ssize_t w = splice(p[0], NULL, d->to, NULL, (size_t)n, SPLICE_F_MOVE);

			if (w <= 0)
				goto out;
			n -= w;
		}
	}
out:
	close(p[0]);
	close(p[1]);
}

static void *pump(void *arg)
{
	struct dir *d = arg;

	if (use_splice)
		splice_dir(d);
	else
		copy_dir(d);
	(void)shutdown(d->to, SHUT_WR);
	return NULL;
}

/* Read the request head byte by byte up to its blank line: the client sends nothing after it. */
static int read_head(int fd, char *head, size_t max)
{
	size_t len = 0;

	while (len + 1 < max) {
		ssize_t n = read(fd, head + len, 1);

		if (n <= 0)
			return -1;
		len++;
		head[len] = '\0';
		if (len >= 4 && memcmp(head + len - 4, "\r\n\r\n", 4) == 0)
			return 0;
	}
	return -1;
}

static int dial(const char *head)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	char host[64];
	unsigned port;
	int fd, one = 1;

	if (sscanf(head, "CONNECT %63[^:]:%u ", host, &port) != 2 ||
	    inet_pton(AF_INET, host, &a.sin_addr) != 1 || port == 0 || port > 65535)
		return -1;
	a.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void *serve(void *arg)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	int client = (int)(long)arg, up = -1, one = 1;
	char head[4096];
	struct dir d[2];
	pthread_t t;

	(void)setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (read_head(client, head, sizeof(head)) == 0 && (up = dial(head)) >= 0 &&
	    write(client, ok, sizeof(ok) - 1) == (ssize_t)sizeof(ok) - 1) {
		d[0] = (struct dir){client, up};
		d[1] = (struct dir){up, client};
		if (pthread_create(&t, NULL, pump, &d[0]) == 0) {
			pump(&d[1]);
			pthread_join(t, NULL);
		}
	}
	if (up >= 0)
		close(up);
	close(client);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	pthread_attr_t attr;
	int srv;

	use_splice = argc > 1 && strcmp(argv[1], "splice") == 0;
	signal(SIGPIPE, SIG_IGN);
	srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (srv < 0 || bind(srv, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(srv, 1024) < 0 ||
	    getsockname(srv, (struct sockaddr *)&a, &len) < 0) {
		perror("relay-floor");
		return 1;
	}
	printf("relay-floor %u\n", ntohs(a.sin_port));
	fflush(stdout);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		int c = accept4(srv, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			usleep(10000); /* EMFILE: let connections end */
			continue;
		}
		if (pthread_create(&t, &attr, serve, (void *)(long)c) != 0)
			close(c);
	}
}
