/*
 * egress-cred.c - credential injection (docs/internals/egress.md
 * "Credentials"): the secrets named by network.credentials, whose values
 * come from paddock's environment and never enter the sandbox; the rules
 * that say which host gets which header; and the checks of a request's
 * head and body for placeholders that may not go where they are sent.
 * Plain HTTP and the requests inside an intercepted tunnel alike.
 */
#include "common.h"
#include "base.h"
#include "egress-internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* A secret named by network.credentials: its value never enters the sandbox. */
struct pdk__egress_secret {
	char *name;
	char *placeholder; /* what the sandbox sees in PADDOCK_SECRET_<NAME> */
	char *value;       /* PADDOCK_SECRET_<NAME> in the front end's environment (secrets_env) */
};

struct pdk__egress_cred {
	struct pdk_net_rule host;
	char *field;   /* the header's name */
	char *line;    /* the header, with the secret's value in it */
	size_t secret; /* index into secrets */
};

/* net.credential: an injection, or a refused placeholder. False: not recorded. */
static bool emit_credential(struct pdk__egress_conn *c, const struct pdk__egress_secret *s,
			    const char *field, bool inject, const char *reason)
{
	json_t *a = json_object();

	pdk_json_set(a, "host", json_string(c->head.host));
	pdk_json_set(a, "port", json_integer(c->head.port));
	pdk_json_set(a, "secret", json_string(s->name));
	pdk_json_set(a, "header", field ? json_string(field) : json_null());
	pdk_json_set(a, "decision", json_string(inject ? "inject" : "deny"));
	if (reason != NULL)
		pdk_json_set(a, "reason", json_string(reason));
	return pdk__egress_emit(c->e, "net.credential", a);
}

static bool cred_matches(const struct pdk__egress_conn *c, const struct pdk__egress_cred *cr)
{
	const struct pdk__egress_head *h = &c->head;

	if (h->host_is_ip)
		return pdk_net_match_addr(&cr->host, 1, (const struct sockaddr *)&h->ip, h->port) !=
		       NULL;
	return pdk_net_match_host(&cr->host, 1, h->host, h->port) != NULL;
}

/* Does the request's target or a field value hold `needle`? */
static bool head_has(const struct pdk__egress_head *h, const char *data, const char *needle)
{
	size_t nl = strlen(needle);

	if (memmem(data + h->url.off, h->url.len, needle, nl) != NULL)
		return true;
	for (size_t i = 0; i < h->n_headers; i++) {
		if (memmem(data + h->values[i].off, h->values[i].len, needle, nl) != NULL)
			return true;
	}
	return false;
}

static bool secret_allowed_here(const struct pdk__egress_conn *c, size_t secret)
{
	for (size_t i = 0; i < c->e->n_creds; i++) {
		if (c->e->creds[i].secret == secret && cred_matches(c, &c->e->creds[i]))
			return true;
	}
	return false;
}

struct rewrite {
	struct pdk__egress_rewrite rw;
	const char **drop, **from, **to, **extra;
	const char *needles[PDK__EGRESS_SCAN_NEEDLES]; /* placeholders that may not go here */
	size_t n_needles;
};

static void rewrite_init(struct rewrite *r, const struct pdk_egress *e)
{
	r->drop = pdk_xcalloc(e->n_creds + 1, sizeof(*r->drop));
	r->extra = pdk_xcalloc(e->n_creds + 1, sizeof(*r->extra));
	r->from = pdk_xcalloc(e->n_secrets + 1, sizeof(*r->from));
	r->to = pdk_xcalloc(e->n_secrets + 1, sizeof(*r->to));
	r->rw.drop = r->drop;
	r->rw.from = r->from;
	r->rw.to = r->to;
	r->rw.extra = r->extra;
}

static void rewrite_release(struct rewrite *r)
{
	free(r->drop);
	free(r->from);
	free(r->to);
	free(r->extra);
}

/*
 * SECURITY: a placeholder goes only to a host a credential rule of its
 * secret names, where it becomes the value; anywhere else the request is
 * refused (and recorded), so the sandbox cannot learn which host would take
 * it. The placeholders that may not go here are the body scanner's needles.
 * Returns 0, or -1 after answering 403.
 */
static int swap_placeholders(struct pdk__egress_conn *c, const char *data, struct rewrite *r)
{
	struct pdk_egress *e = c->e;

	for (size_t i = 0; i < e->n_secrets; i++) {
		const struct pdk__egress_secret *s = &e->secrets[i];
		_cleanup_free_ char *why = NULL;
		bool allowed = secret_allowed_here(c, i);

		/* pdk__egress_cred_setup() keeps the count and lengths within the scanner's. */
		if (!allowed)
			r->needles[r->n_needles++] = s->placeholder;
		if (!head_has(&c->head, data, s->placeholder))
			continue;
		if (!allowed) {
			why = pdk_xasprintf("the placeholder of secret '%s' may not be sent to %s "
					    "port %u (no network.credentials rule names it)",
					    s->name, c->head.host, c->head.port);
			(void)emit_credential(c, s, NULL, false, why); /* refused either way */
			pdk__egress_answer(c, false, 403, why);
			return -1;
		}
		r->from[r->rw.n_swap] = s->placeholder;
		r->to[r->rw.n_swap++] = s->value;
	}
	return 0;
}

/*
 * Every credential rule that names the host: its header replaces any field
 * of that name the client sent. SECURITY: an injection that cannot be
 * recorded does not happen: -1 after answering 503.
 */
static int inject(struct pdk__egress_conn *c, struct rewrite *r)
{
	struct pdk_egress *e = c->e;

	for (size_t i = 0; i < e->n_creds; i++) {
		const struct pdk__egress_cred *cr = &e->creds[i];

		if (!cred_matches(c, cr))
			continue;
		r->drop[r->rw.n_drop++] = cr->field;
		r->extra[r->rw.n_extra++] = cr->line;
		if (!emit_credential(c, &e->secrets[cr->secret], cr->field, true, NULL)) {
			pdk__egress_unrecorded(c);
			return -1;
		}
	}
	return 0;
}

/* SECURITY: the body is scanned for the placeholders that may not go here. */
static int scan_body(struct pdk__egress_conn *c, const struct rewrite *r)
{
	if (r->n_needles == 0)
		return 0;
	if (pdk__egress_scan_init(&c->scan, r->needles, r->n_needles) < 0) {
		/* pdk__egress_cred_setup() keeps this from happening: fail closed. */
		pdk__egress_answer(c, false, 403,
				   "the request body cannot be checked for placeholders");
		return -1;
	}
	c->head.scan = &c->scan;
	return 0;
}

int pdk__egress_cred_head(struct pdk__egress_conn *c, const char *data)
{
	struct rewrite r = {0};
	int rc;

	rewrite_init(&r, c->e);
	rc = swap_placeholders(c, data, &r);
	if (rc == 0)
		rc = inject(c, &r);
	if (rc == 0)
		rc = scan_body(c, &r);
	if (rc == 0) {
		/* The upstream connection may serve this client's next request too. */
		c->head.upstream_keep_alive = c->head.keep_alive;
		c->up_head = pdk__egress_head_upstream(&c->head, data, &r.rw, &c->up_head_len);
	}
	rewrite_release(&r);
	if (rc < 0)
		return -1;
	if (c->up_head == NULL) {
		pdk__egress_answer(c, false, c->head.status, c->head.reason);
		return -1;
	}
	return 0;
}

/* A CONNECT is intercepted when the sandbox has a CA and a credential rule names its host. */
bool pdk__egress_wants_interception(const struct pdk__egress_conn *c)
{
	if (c->e->cfg.ca == NULL)
		return false;
	for (size_t i = 0; i < c->e->n_creds; i++) {
		if (cred_matches(c, &c->e->creds[i]))
			return true;
	}
	return false;
}

/*
 * SECURITY: a placeholder the body scanner found goes no further: the
 * upstream connection (if the request already went up) is cut before the
 * rest of the body, and the refusal is recorded as for a header. True when
 * the request was refused.
 */
bool pdk__egress_body_refused(struct pdk__egress_conn *c)
{
	const struct pdk__egress_secret *s = NULL;
	_cleanup_free_ char *why = NULL;

	if (c->head.scan == NULL || c->scan.found < 0)
		return false;
	for (size_t i = 0; i < c->e->n_secrets && s == NULL; i++) {
		if (c->e->secrets[i].placeholder == c->scan.needles[c->scan.found])
			s = &c->e->secrets[i];
	}
	why = pdk_xasprintf("the placeholder of secret '%s' may not be sent to %s port %u (in "
			    "the request body; no network.credentials rule names it)",
			    s ? s->name : "?", c->head.host, c->head.port);
	/* Refused whether or not the refusal is recorded. */
	if (s != NULL)
		(void)emit_credential(c, s, NULL, false, why);
	pdk__egress_close_up(c);
	if (!c->answered) {
		pdk__egress_answer(c, false, 403, why);
		return true;
	}
	(void)pdk__egress_emit_connect(c, false, 403, why);
	pdk__egress_finish(c);
	return true;
}

static size_t add_secret(struct pdk_egress *e, const char *name, struct pdk_error **err)
{
	_cleanup_free_ char *var = pdk_xasprintf("%s%s", PDK_EGRESS_SECRET_PREFIX, name);
	const char *value;
	struct pdk__egress_secret *s;

	for (size_t i = 0; i < e->n_secrets; i++) {
		if (strcmp(e->secrets[i].name, name) == 0)
			return i;
	}
	for (char *p = var; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	value = pdk_env_get(e->cfg.secrets_env, var);
	/* SECURITY: fail closed; a value that could end the header line is refused. */
	if (value == NULL || *value == '\0' || strpbrk(value, "\r\n") != NULL) {
		/* The caller's to fix: it names the field, so the daemon answers 400, not 500. */
		(void)pdk_error_set_field(
			err, ENOKEY, "network.credentials",
			"secret '%s': set %s (one line, not empty) in the environment paddock "
			"runs in: the shell's for 'paddock run', the daemon's environment for a "
			"sandbox of 'paddock serve' (restart the daemon with it)",
			name, var);
		return SIZE_MAX;
	}
	e->secrets = pdk_xrealloc(e->secrets, (e->n_secrets + 1) * sizeof(*e->secrets));
	s = &e->secrets[e->n_secrets];
	s->name = pdk_xstrdup(name);
	s->value = pdk_xstrdup(value);
	s->placeholder = pdk_egress_placeholder(name, e->cfg.sandbox_id ? e->cfg.sandbox_id : "");
	e->n_secrets++;
	/* The body scanner (egress-http.c) must be able to look for every placeholder. */
	if (e->n_secrets > PDK__EGRESS_SCAN_NEEDLES ||
	    strlen(s->placeholder) > PDK__EGRESS_SCAN_MAX) {
		(void)pdk_error_setx(err, E2BIG,
				     "secret '%s': at most %d secrets, of placeholders "
				     "of at most %d bytes",
				     name, PDK__EGRESS_SCAN_NEEDLES, PDK__EGRESS_SCAN_MAX);
		return SIZE_MAX;
	}
	return e->n_secrets - 1;
}

int pdk__egress_cred_setup(struct pdk_egress *e, struct pdk_error **err)
{
	char *const *v = e->cfg.credentials;
	size_t n = 0;

	while (v != NULL && v[n] != NULL && v[n + 1] != NULL)
		n += 2;
	e->creds = pdk_xcalloc(n / 2 + 1, sizeof(*e->creds));
	for (size_t i = 0; i < n; i += 2) {
		struct pdk__egress_cred *cr = &e->creds[e->n_creds];
		_cleanup_free_ char *secret = NULL;
		_cleanup_free_ char *why = NULL;
		_cleanup_free_ char *ref = NULL;
		const char *at;

		if (pdk_net_rule_parse(v[i], &cr->host, &why) < 0)
			return pdk_error_setx(err, EINVAL, "network.credentials: %s", why);
		e->n_creds++;
		if (pdk_net_cred_parse(v[i + 1], &cr->field, &secret, &why) < 0)
			return pdk_error_setx(err, EINVAL, "network.credentials: %s", why);
		cr->secret = add_secret(e, secret, err);
		if (cr->secret == SIZE_MAX)
			return -1;
		ref = pdk_xasprintf("${secret:%s}", secret);
		at = strstr(v[i + 1], ref);
		cr->line = pdk_xasprintf("%.*s%s%s", (int)(at - v[i + 1]), v[i + 1],
					 e->secrets[cr->secret].value, at + strlen(ref));
	}
	return 0;
}

void pdk__egress_cred_free(struct pdk_egress *e)
{
	for (size_t i = 0; i < e->n_creds; i++) {
		pdk_net_rule_release(&e->creds[i].host);
		free(e->creds[i].field);
		if (e->creds[i].line != NULL)
			explicit_bzero(e->creds[i].line, strlen(e->creds[i].line));
		free(e->creds[i].line);
	}
	for (size_t i = 0; i < e->n_secrets; i++) {
		explicit_bzero(e->secrets[i].value, strlen(e->secrets[i].value));
		free(e->secrets[i].value);
		free(e->secrets[i].name);
		free(e->secrets[i].placeholder);
	}
	free(e->creds);
	free(e->secrets);
}
