/*
 * cli-daemon.c - what the verbs that talk to the daemon share: reading their
 * options, requests and error reporting, JSON output, base64, reading a
 * file descriptor whole.
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

bool pdk_cli_conn_opt(struct pdk_cli_conn *conn, int opt, const char *arg)
{
	if (opt == PDK_CLI_OPT_SOCKET) {
		conn->socket = arg;
		return true;
	}
	if (opt == PDK_CLI_OPT_URL) {
		conn->url = arg;
		return true;
	}
	return false;
}

/* The options every verb takes, after its own. */
static const struct option common_opts[] = {
	{"socket", required_argument, NULL, PDK_CLI_OPT_SOCKET},
	{"url", required_argument, NULL, PDK_CLI_OPT_URL},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* The table entry of the option getopt_long returned; NULL for an unknown one ('?'). */
static const struct option *find_opt(const struct option *opts, int opt)
{
	for (const struct option *o = opts; o->name != NULL; o++)
		if (o->flag == NULL && o->val == opt)
			return o;
	return NULL;
}

int pdk_cli_parse(const struct pdk_cli_verb *v, int argc, char **argv, struct pdk_cli_conn *conn,
		  void *ctx)
{
	size_t n = 0;
	_cleanup_free_ struct option *opts = NULL;
	_cleanup_free_ char *shortopts = pdk_xasprintf("%sh", v->shortopts);
	int opt;

	while (v->opts != NULL && v->opts[n].name != NULL)
		n++;
	opts = pdk_xcalloc(n + PDK_ARRAY_SIZE(common_opts), sizeof(*opts));
	if (n > 0)
		memcpy(opts, v->opts, n * sizeof(*opts));
	memcpy(opts + n, common_opts, sizeof(common_opts));
	optind = 1;
	while ((opt = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
		const struct option *o = find_opt(opts, opt);
		int r;

		if (pdk_cli_conn_opt(conn, opt, optarg))
			continue;
		if (opt == 'h') {
			if (v->help != NULL)
				fputs(v->help, stdout);
			else
				v->usage(ctx);
			return -1;
		}
		r = o != NULL && v->opt != NULL ? v->opt(ctx, o, optarg) : -1;
		if (r < 0)
			return pdk_cli_usage_error(argv[0], "bad option");
		if (r > 0)
			return r;
	}
	return 0;
}

struct pdk_client *pdk_cli_connect(const struct pdk_cli_conn *conn)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_client_opts o = {.socket = conn->socket, .url = conn->url};
	struct pdk_client *c;
	struct pdk_paths paths;

	pdk_cli_paths(&paths);
	pdk_client_opts_from_env(&o, environ);
	o.runtime_dir = paths.runtime_dir;
	c = pdk_client_new(&o, &err);
	pdk_paths_release(&paths);

	if (c == NULL)
		pdk_cli_error("%s", err->msg);
	return c;
}

int pdk_cli_exit_of(int status, const char *field)
{
	/* A command that did not start exits as a shell's does. */
	if (field != NULL && strcmp(field, "argv[0]") == 0)
		return status == ENOENT ? PDK_EXIT_NOTFOUND : PDK_EXIT_NOEXEC;
	return PDK_CLI_EXIT_API;
}

int pdk_cli_api_fail(struct pdk_client *c, struct pdk_error **err)
{
	int st = (*err)->status;
	int rc = pdk_cli_exit_of(st, (*err)->field);

	pdk_cli_error("%s", (*err)->msg);
	if (c != NULL && (st == ENOENT || st == ECONNREFUSED) &&
	    strstr((*err)->msg, "cannot connect") != NULL)
		fprintf(stderr, "paddock: is the daemon running? start it with 'paddock serve'\n");
	pdk_error_free(err);
	return rc;
}

int pdk_cli_request(struct pdk_client *c, const struct pdk_client_req *q, struct pdk_error **err)
{
	struct pdk_client_resp resp;
	int r = 0;

	if (pdk_client_request(c, q, &resp, err) < 0)
		return -1;
	if (resp.status < 200 || resp.status > 299) {
		(void)pdk_client_error_from(&resp, err);
		r = pdk_cli_api_fail(c, err);
	}
	pdk_client_resp_release(&resp);
	return r;
}

json_t *pdk_cli_call(struct pdk_client *c, const char *method, const char *path, json_t *body)
{
	struct pdk_error *err = NULL;
	json_t *out = NULL;

	if (pdk_client_json(c, method, path, body, &out, NULL, &err) < 0) {
		(void)pdk_cli_api_fail(c, &err);
		return NULL;
	}
	return out;
}

void pdk_cli_query_add(char **q, const char *key, const char *val)
{
	_cleanup_free_ char *e = pdk_client_escape(val);
	char *n = pdk_xasprintf("%s&%s=%s", *q, key, e);

	free(*q);
	*q = n;
}

bool pdk_cli_add_kv(json_t *obj, const char *kv, const char *what)
{
	const char *eq = strchr(kv, '=');
	_cleanup_free_ char *k = NULL;

	if (eq == NULL || eq == kv) {
		pdk_cli_error("%s '%s' must be KEY=VALUE", what, kv);
		return false;
	}
	k = strndup(kv, (size_t)(eq - kv));
	if (k == NULL)
		pdk_oom();
	json_object_set_new(obj, k, json_string(eq + 1));
	return true;
}

int pdk_cli_usage_error(const char *verb, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "paddock %s: ", verb);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see 'paddock %s --help')\n", verb);
	return PDK_CLI_EXIT_USAGE;
}

char *pdk_cli_b64_encode(const void *data, size_t len)
{
	char *out = pdk_xmalloc(4 * ((len + 2) / 3) + 1);

	(void)EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

bool pdk_cli_b64_decode(const char *s, size_t len, unsigned char **out, size_t *out_len)
{
	unsigned char *buf;
	int n;

	if (len % 4 != 0 || len > INT32_MAX)
		return false;
	buf = pdk_xmalloc(len / 4 * 3 + 1);
	n = EVP_DecodeBlock(buf, (const unsigned char *)s, (int)len);
	if (n < 0) {
		free(buf);
		return false;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	for (size_t i = len; i > 0 && s[i - 1] == '='; i--)
		n--;
	*out = buf;
	*out_len = (size_t)n;
	return true;
}

bool pdk_cli_write(int fd, const void *buf, size_t len)
{
	return pdk_write_all(fd, buf, len) == 0;
}

bool pdk_cli_put_bytes(json_t *o, const char *text_key, const char *b64_key, int fd)
{
	json_t *t = json_object_get(o, text_key);
	const char *b = json_string_value(json_object_get(o, b64_key));
	_cleanup_free_ unsigned char *raw = NULL;
	size_t n = 0;

	if (b == NULL)
		return !json_is_string(t) ||
		       pdk_cli_write(fd, json_string_value(t), json_string_length(t));
	if (!pdk_cli_b64_decode(b, strlen(b), &raw, &n))
		return false;
	return pdk_cli_write(fd, raw, n);
}

int pdk_cli_slurp(int fd, size_t max, char **out, size_t *len)
{
	size_t cap = 0;

	*out = NULL;
	*len = 0;
	for (;;) {
		ssize_t n;

		if (*len == cap) {
			cap = cap ? cap * 2 : 65536;
			*out = pdk_xrealloc(*out, cap);
		}
		n = TEMP_FAILURE_RETRY(read(fd, *out + *len, cap - *len));
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		*len += (size_t)n;
		if (*len > max)
			return -E2BIG;
	}
}
