/*
 * plane-create.c - POST /sandboxes and /v2/sandboxes (E2B's NewSandbox):
 * the body checked field by field and translated into a paddock create
 * (docs/e2b.md, "Creating a sandbox"). Every field E2B defines is either
 * mapped or refused with its name; none is dropped silently.
 */
#include "common.h"
#include "e2b-internal.h"
#include "policy.h"

#include <string.h>

/* E2B's longest timeout (a day, its Pro plan's), and the SDKs' default. */
#define TIMEOUT_MAX_S     (24 * 3600)
#define TIMEOUT_DEFAULT_S 15
#define META_MAX          64
#define META_KEY_MAX      63
#define META_VALUE_MAX    256
#define ENV_MAX           256

/* What a NewSandbox body becomes (every member owned). */
struct create_req {
	char *profile;
	char *image;       /* the root's image (templateID names one), or NULL */
	json_t *labels;    /* metadata + the front door's own labels */
	json_t *env;       /* envVars, or NULL */
	json_t *overrides; /* the network, or NULL */
	uint64_t ttl_s;
};

static void create_req_release(struct create_req *c)
{
	free(c->profile);
	free(c->image);
	json_decref(c->labels);
	json_decref(c->env);
	json_decref(c->overrides);
}

/* A refusal of `field` (400): a printf-style message. */
#define bad(err, field, ...) pdk_error_set_field((err), EINVAL, (field), __VA_ARGS__)

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

/* An object of at most `max` strings, keys 1..kmax printable bytes, values at most vmax. */
static int string_map(json_t *v, const char *field, size_t max, size_t kmax, size_t vmax,
		      struct pdk_error **err)
{
	const char *k;
	json_t *x;

	if (!json_is_object(v) || json_object_size(v) > max)
		return pdk_error_set_field(err, EINVAL, field,
					   "%s must be an object of at most %zu strings", field,
					   max);
	json_object_foreach(v, k, x)
	{
		const char *s = json_string_value(x);

		if (k[0] == '\0' || strlen(k) > kmax || !printable(k))
			return bad(err, field,
				   "%s has a key that is empty, too long or not printable", field);
		if (s == NULL || strlen(s) > vmax || !printable(s))
			return pdk_error_set_field(
				err, EINVAL, field,
				"%s.%s must be a printable string of at most %zu "
				"bytes",
				field, k, vmax);
	}
	return 0;
}

/*
 * templateID: an image of the daemon's store (run with the default profile),
 * else a profile's name (which may name an image of its own); E2B's "base"
 * and "code-interpreter-v1" (the code interpreter SDK's default) are
 * paddock's default profile on the host's root: the interpreter is started
 * in the sandbox on first use (envd-port.c).
 */
static int template_of(struct pdk_ctl *ctl, json_t *body, struct create_req *c,
		       struct pdk_error **err)
{
	const char *t = json_string_value(json_object_get(body, "templateID"));

	if (t == NULL)
		return bad(err, "templateID", "templateID is required: a paddock profile's name");
	if (!pdk_ctl_name_ok(t))
		return bad(err, "templateID", "templateID '%s' is no profile name ([A-Za-z0-9_.-])",
			   t);
	if (strcmp(t, "base") == 0 || strcmp(t, "code-interpreter-v1") == 0) {
		c->profile = pdk_xstrdup("default");
	} else if (pdk_ctl_image_known(ctl, t)) {
		c->profile = pdk_xstrdup("default");
		c->image = pdk_xstrdup(t);
	} else {
		c->profile = pdk_xstrdup(t);
	}
	json_object_set_new(c->labels, PDK__E2B_LABEL_TEMPLATE, json_string(t));
	return 0;
}

static int metadata_of(json_t *body, struct create_req *c, struct pdk_error **err)
{
	json_t *m = json_object_get(body, "metadata");
	const char *k;
	json_t *x;

	if (m == NULL || json_is_null(m))
		return 0;
	if (string_map(m, "metadata", META_MAX, META_KEY_MAX, META_VALUE_MAX, err) < 0)
		return -EINVAL;
	json_object_foreach(m, k, x)
	{
		/* SECURITY: the front door's own labels (the owning key) are never a caller's. */
		if (strncmp(k, PDK__E2B_LABEL_PREFIX, strlen(PDK__E2B_LABEL_PREFIX)) == 0)
			return bad(err, "metadata",
				   "metadata keys starting with 'e2b.' are "
				   "paddock's own: rename '%s'",
				   k);
		json_object_set(c->labels, k, x);
	}
	return 0;
}

static int env_of(json_t *body, struct create_req *c, struct pdk_error **err)
{
	json_t *v = json_object_get(body, "envVars");
	const char *k;
	json_t *x;

	if (v == NULL || json_is_null(v))
		return 0;
	if (string_map(v, "envVars", ENV_MAX, 256, 128 * 1024, err) < 0)
		return -EINVAL;
	json_object_foreach(v, k, x)
	{
		if (strchr(k, '=') != NULL)
			return bad(err, "envVars", "envVars key '%s' holds '='", k);
	}
	c->env = json_incref(v);
	return 0;
}

static int timeout_of(json_t *body, struct create_req *c, struct pdk_error **err)
{
	json_t *v = json_object_get(body, "timeout");

	c->ttl_s = TIMEOUT_DEFAULT_S;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > TIMEOUT_MAX_S)
		return pdk_error_set_field(err, EINVAL, "timeout",
					   "timeout must be 0 to %d seconds", TIMEOUT_MAX_S);
	/* E2B's 0 is its shortest life, never "forever": paddock's TTL of 0 is none. */
	c->ttl_s = json_integer_value(v) ? (uint64_t)json_integer_value(v) : 1;
	return 0;
}

/* One allowOut entry as a network.allow entry: a host, *.domain, or one address (a /32). */
static int allow_entry(const char *s, size_t i, json_t *allow, struct pdk_error **err)
{
	_cleanup_free_ char *entry = pdk_xstrdup(s), *why = NULL;
	char *slash = strchr(entry, '/');
	struct pdk_net_rule rule;

	if (slash != NULL && (strcmp(slash, "/32") == 0 || strcmp(slash, "/128") == 0))
		*slash = '\0';
	else if (slash != NULL)
		return pdk_error_set_field(err, EINVAL, "network.allowOut",
					   "network.allowOut[%zu] '%s' is an address range: "
					   "paddock's egress allows hosts, *.domains and single "
					   "addresses",
					   i, s);
	if (pdk_net_rule_parse(entry, &rule, &why) < 0)
		return pdk_error_set_field(err, EINVAL, "network.allowOut",
					   "network.allowOut[%zu] '%s': %s", i, s, why);
	pdk_net_rule_release(&rule);
	json_array_append_new(allow, json_string(entry));
	return 0;
}

/* denyOut: paddock's egress is an allow list; only "deny everything" can be said. */
static int deny_of(json_t *deny, bool *deny_all, struct pdk_error **err)
{
	size_t i;
	json_t *x;

	*deny_all = false;
	if (deny == NULL)
		return 0;
	if (!json_is_array(deny))
		return bad(err, "network.denyOut", "network.denyOut must be an array");
	json_array_foreach(deny, i, x)
	{
		const char *s = json_string_value(x);

		if (s == NULL || (strcmp(s, "0.0.0.0/0") != 0 && strcmp(s, "::/0") != 0))
			return pdk_error_set_field(
				err, EINVAL, "network.denyOut",
				"network.denyOut[%zu]: paddock's egress is an allow list (nothing "
				"is reachable that is not allowed): only 0.0.0.0/0 can be denied",
				i);
		*deny_all = true;
	}
	return 0;
}

static int network_fields_ok(json_t *net, struct pdk_error **err)
{
	static const char *const known[] = {"allowOut", "denyOut", "allowPublicTraffic"};
	const char *k;
	json_t *x;

	json_object_foreach(net, k, x)
	{
		bool ok = false;

		for (size_t i = 0; i < PDK_ARRAY_SIZE(known); i++)
			ok = ok || strcmp(k, known[i]) == 0;
		if (!ok && !json_is_null(x))
			return pdk_error_set_field(
				err, EINVAL, "network",
				"network.%s is not served: paddock's egress is an allow list of "
				"hosts (allowOut), without rewriting, proxies or masks",
				k);
	}
	return 0;
}

/*
 * allow_internet_access and network into the egress policy. SECURITY: the
 * profile's policy stays unless the request narrows it or names what to
 * allow: allow_internet_access true never opens the sandbox to everything.
 */
static int network_of(json_t *body, struct create_req *c, struct pdk_error **err)
{
	json_t *net = json_object_get(body, "network"), *aia, *allow_out;
	_cleanup_json_ json_t *allow = json_array();
	bool deny_all = false;
	size_t i;
	json_t *x;

	aia = json_object_get(body, "allow_internet_access");
	if (aia != NULL && !json_is_boolean(aia) && !json_is_null(aia))
		return bad(err, "allow_internet_access",
			   "allow_internet_access must be true or "
			   "false");
	if (net != NULL && !json_is_null(net) && !json_is_object(net))
		return bad(err, "network", "network must be an object");
	if (json_is_object(net) && (network_fields_ok(net, err) < 0 ||
				    deny_of(json_object_get(net, "denyOut"), &deny_all, err) < 0))
		return -EINVAL;
	allow_out = json_is_object(net) ? json_object_get(net, "allowOut") : NULL;
	if (allow_out != NULL && !json_is_null(allow_out) && !json_is_array(allow_out))
		return bad(err, "network.allowOut", "network.allowOut must be an array");
	json_array_foreach(allow_out, i, x)
	{
		if (!json_is_string(x))
			return bad(err, "network.allowOut",
				   "network.allowOut[%zu] must be a string", i);
		if (allow_entry(json_string_value(x), i, allow, err) < 0)
			return -EINVAL;
	}
	if (json_array_size(allow) > 0)
		c->overrides =
			json_pack("{s:{s:s, s:O}}", "network", "mode", "allowlist", "allow", allow);
	else if (deny_all || json_is_false(aia))
		c->overrides = json_pack("{s:{s:s}}", "network", "mode", "none");
	return 0;
}

/* Fields paddock cannot honour: refused when they ask for something, never ignored. */
static int refused_of(json_t *body, struct pdk_error **err)
{
	json_t *ar = json_object_get(body, "autoResume");
	json_t *vm = json_object_get(body, "volumeMounts");
	json_t *iam = json_object_get(body, "iam");
	json_t *mcp = json_object_get(body, "mcp");

	if (json_is_true(json_object_get(body, "autoPause")))
		return bad(err, "autoPause",
			   "autoPause is not served: a paddock sandbox ends at its "
			   "timeout (pause it yourself: POST "
			   "/sandboxes/ID/pause)");
	if (json_is_true(json_object_get(ar, "enabled")))
		return bad(err, "autoResume", "autoResume is not served: resume with connect");
	if (json_array_size(vm) > 0)
		return bad(err, "volumeMounts",
			   "volumeMounts are not served: use a profile's "
			   "workspace");
	if (json_object_size(json_object_get(iam, "tokens")) > 0)
		return bad(err, "iam", "workload identity (iam) is not served");
	if (mcp != NULL && !json_is_null(mcp))
		return bad(err, "mcp", "the MCP gateway (mcp) is not served");
	return 0;
}

static int fields_known(json_t *body, struct pdk_error **err)
{
	static const char *const known[] = {"templateID",
					    "timeout",
					    "autoPause",
					    "autoPauseMemory",
					    "autoResume",
					    "secure",
					    "allow_internet_access",
					    "network",
					    "metadata",
					    "envVars",
					    "mcp",
					    "iam",
					    "volumeMounts"};
	const char *k;
	json_t *x;

	json_object_foreach(body, k, x)
	{
		bool ok = false;

		for (size_t i = 0; i < PDK_ARRAY_SIZE(known); i++)
			ok = ok || strcmp(k, known[i]) == 0;
		if (!ok)
			return bad(err, k, "'%s' is not a field of E2B's NewSandbox", k);
	}
	return 0;
}

static int parse_create(struct pdk_ctl *ctl, json_t *body, const char *key, struct create_req *c,
			struct pdk_error **err)
{
	*c = (struct create_req){.labels = json_object()};
	json_object_set_new(c->labels, PDK__E2B_LABEL_KEY, json_string(key));
	if (fields_known(body, err) < 0 || template_of(ctl, body, c, err) < 0 ||
	    metadata_of(body, c, err) < 0 || env_of(body, c, err) < 0 ||
	    timeout_of(body, c, err) < 0 || network_of(body, c, err) < 0 ||
	    refused_of(body, err) < 0)
		return -EINVAL;
	return 0;
}

/* A create's request and door, until the control layer answers it (freed by created()). */
struct create_wait {
	struct pdk_e2b *e;
	struct evhttp_request *req;
};

static void created(void *ctx, const struct pdk_ctl_created *cr, const struct pdk_error *err)
{
	struct create_wait *w = ctx;

	if (err != NULL)
		pdk__e2b_plane_error(w->req, err);
	else
		pdk_http_json(w->req, 201,
			      pdk__e2b_sandbox_json(&cr->view, cr->token, w->e->domain));
	free(w);
}

void pdk__e2b_route_create(struct pdk__e2b_req *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	struct create_req c;
	struct pdk_ctl_create cc;
	struct create_wait *w;

	if (pdk__e2b_json_body(r, &body) < 0)
		return;
	if (parse_create(r->e->ctl, body, r->key, &c, &err) < 0) {
		create_req_release(&c);
		pdk__e2b_plane_error(r->req, err);
		return;
	}
	pdk__e2b_record(r, "POST /sandboxes", NULL);
	cc = (struct pdk_ctl_create){.profile = c.profile,
				     .image = c.image,
				     .overrides = c.overrides,
				     .env = c.env,
				     .labels = c.labels,
				     .ttl_s = c.ttl_s};
	w = pdk_xcalloc(1, sizeof(*w));
	*w = (struct create_wait){.e = r->e, .req = r->req};
	if (pdk_ctl_create(r->e->ctl, &cc, created, w, &err) < 0) {
		free(w);
		pdk__e2b_plane_error(r->req, err);
	}
	create_req_release(&c);
}
