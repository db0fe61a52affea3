/*
 * envd.c - requests for a sandbox's envd (docs/e2b.md, "envd"): the ones
 * that carry E2b-Sandbox-Id. Who may ask (the envd access token of that
 * sandbox), which user the request names (Authorization: Basic), and the
 * dispatch: GET /health, GET/POST /files, and Connect calls.
 */
#include "common.h"
#include "e2b-internal.h"

#include <string.h>

void pdk__e2b_envd_release(struct pdk__e2b_envd *v)
{
	free(v->sandbox);
	free(v->user);
	*v = (struct pdk__e2b_envd){0};
}

/* The request is for envd itself: E2b-Sandbox-Port absent or envd's. */
static bool is_envd_port(struct evhttp_request *req)
{
	const char *port =
		evhttp_find_header(evhttp_request_get_input_headers(req), "E2b-Sandbox-Port");

	return port == NULL || strcmp(port, PDK_E2B_ENVD_PORT_STR) == 0;
}

/*
 * An envd refusal with HTTP status `code`: /files and /health answer in
 * envd's error shape {"code": status, "message"}, a Connect call with a
 * Connect error whose code the status implies.
 */
static void refuse(struct evhttp_request *req, int code, const char *why)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	_cleanup_error_ struct pdk_error *err = NULL;
	int status = code == 401 ? EKEYREJECTED : code == 502 ? ENOTCONN : EINVAL;

	if (path == NULL || strcmp(path, "/files") == 0 || strcmp(path, "/health") == 0) {
		pdk__e2b_plane_fail(req, code, "%s", why);
		return;
	}
	(void)pdk_error_setx(&err, status, "%s", why);
	pdk__e2b_connect_refuse(req, err);
}

/*
 * SECURITY: an envd request is served only with the access token the
 * create or connect answered for that very sandbox (X-Access-Token): a
 * sandbox token whose sandbox is E2b-Sandbox-Id, or an admin token. A
 * token of another sandbox is refused as if the sandbox were not there
 * for it. Each refusal is recorded as auth.failure.
 */
static int authenticate(struct pdk_e2b *e, struct evhttp_request *req, const char *sandbox)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	const char *tok = evhttp_find_header(h, "X-Access-Token");
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_auth auth;
	const char *why = NULL;

	/*
	 * A port other than envd's is also reached with the traffic token the
	 * SDKs send alone on some calls (the code interpreter's /contexts);
	 * paddock's is the same sandbox-bound token.
	 */
	if (tok == NULL && !is_envd_port(req))
		tok = evhttp_find_header(h, "E2B-Traffic-Access-Token");
	if (tok == NULL)
		why = "envd needs the sandbox's envdAccessToken in X-Access-Token";
	else if (strlen(tok) > PDK_TOKEN_MAX_LEN ||
		 pdk_ctl_authenticate(e->ctl, tok, &auth, &err) < 0)
		why = "the X-Access-Token is not a valid envd access token";
	else if (!auth.admin && strcmp(auth.sb.sb, sandbox) != 0)
		why = "the X-Access-Token belongs to another sandbox";
	if (why == NULL)
		return 0;
	pdk_ctl_event(
		e->ctl, "daemon", NULL, "auth.failure",
		json_pack("{s:s, s:s, s:s}", "reason", why, "front", "e2b", "sandbox", sandbox));
	refuse(req, 401, why);
	return -1;
}

/* The user name of "Basic base64(USER:)", in a new string; NULL when it is not one. */
static char *basic_user(const char *h)
{
	_cleanup_free_ unsigned char *raw = NULL;
	_cleanup_free_ char *std = NULL;
	size_t n = 0, len;
	char *colon;

	if (strncmp(h, "Basic ", 6) != 0 || strlen(h + 6) > 256)
		return NULL;
	/* base64 to base64url without padding: the decoder paddock has (token.h). */
	std = pdk_xstrdup(h + 6);
	len = strcspn(std, "=");
	std[len] = '\0';
	for (char *p = std; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	if (pdk_token_b64url_decode(std, len, &raw, &n) < 0)
		return NULL;
	colon = memchr(raw, ':', n);
	if (colon == NULL)
		return NULL;
	return strndup((char *)raw, (size_t)(colon - (char *)raw));
}

/*
 * The user a request names: E2B's "user" (the default) or "root". Both are
 * the sandbox's one user: paddock never switches identity inside a sandbox
 * (docs/e2b.md, "Users"), so naming root gains nothing.
 */
static int choose_user(struct evhttp_request *req, char **user)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	_cleanup_free_ char *u = NULL;

	*user = NULL;
	if (h == NULL)
		return 0;
	u = basic_user(h);
	if (u == NULL || (u[0] != '\0' && strcmp(u, "user") != 0 && strcmp(u, "root") != 0)) {
		refuse(req, 400,
		       "the Authorization header names no user this sandbox has: 'Basic "
		       "base64(USER:)' with USER 'user' or 'root'");
		return -1;
	}
	*user = u[0] ? steal_ptr(&u) : NULL;
	return 0;
}

/* Every envd request that passed the door is recorded in the audit chain, as e2b.request. */
static void record(struct pdk_e2b *e, struct evhttp_request *req, const char *path,
		   const struct pdk__e2b_envd *who)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	_cleanup_free_ char *route = pdk_xasprintf(
		"%s %s", evhttp_request_get_command(req) == EVHTTP_REQ_GET ? "GET" : "POST", path);

	pdk_ctl_event_held(e->ctl, who->sandbox, NULL, "e2b.request",
			   json_pack("{s:s, s:s, s:s, s:s?, s:s?}", "route", route, "front", "envd",
				     "sandbox", who->sandbox, "user", who->user, "query", q));
}

/* A request for another port of the sandbox, recorded before it is relayed. */
static void record_port(struct pdk_e2b *e, struct evhttp_request *req, const char *sandbox,
			const char *path, uint64_t port)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	const char *method = m == EVHTTP_REQ_GET      ? "GET"
			     : m == EVHTTP_REQ_POST   ? "POST"
			     : m == EVHTTP_REQ_DELETE ? "DELETE"
						      : "OTHER";
	_cleanup_free_ char *route = pdk_xasprintf("%s %s", method, path);

	pdk_ctl_event_held(e->ctl, sandbox, NULL, "e2b.request",
			   json_pack("{s:s, s:s, s:s, s:I}", "route", route, "front", "port",
				     "sandbox", sandbox, "port", (json_int_t)port));
}

static void health(struct evhttp_request *req)
{
	evhttp_send_reply(req, 204, "No Content", NULL);
}

void pdk__e2b_envd(struct pdk_e2b *e, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	const char *sandbox = evhttp_find_header(h, "E2b-Sandbox-Id");
	const char *port = evhttp_find_header(h, "E2b-Sandbox-Port");
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	struct pdk__e2b_envd who = {0};
	uint64_t pnum = 0;

	if (!pdk_ctl_name_ok(sandbox) || path == NULL) {
		refuse(req, 400, "E2b-Sandbox-Id must be a sandbox id");
		return;
	}
	if (port != NULL && (pdk_parse_u64(port, 65535, &pnum) < 0 || pnum == 0)) {
		refuse(req, 400, "E2b-Sandbox-Port must be a port number (1 to 65535)");
		return;
	}
	if (!is_envd_port(req)) {
		/* Another port of the sandbox: relayed through its port forwarding. */
		if (authenticate(e, req, sandbox) < 0)
			return;
		record_port(e, req, sandbox, path, pnum);
		pdk__e2b_port(e, req, sandbox, (uint16_t)pnum);
		return;
	}
	if (strcmp(path, "/health") == 0) {
		health(req);
		return;
	}
	if (authenticate(e, req, sandbox) < 0 || choose_user(req, &who.user) < 0)
		return;
	who.sandbox = pdk_xstrdup(sandbox);
	record(e, req, path, &who);
	if (strcmp(path, "/files") == 0) {
		pdk__e2b_files(e, req, sandbox);
		pdk__e2b_envd_release(&who);
		return;
	}
	pdk__e2b_connect_serve(e, req, path, &who);
}
