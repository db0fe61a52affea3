/*
 * request.c - strict request-body validation (request.h).
 *
 * Each body type is a table of fields {name, checker}; check_object()
 * rejects unknown members and hands each known one to its checker, which
 * names the field path in the error.
 */
#include "common.h"
#include "base.h"
#include "control.h"
#include "request.h"

#include <ctype.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#define STR_MAX         4096
#define ARG_MAX_LEN     (128 * 1024)
#define ARGV_MAX        4096
#define ENV_MAX         1024
#define LABELS_MAX      64
#define LABEL_VALUE_MAX 256
#define IDEM_MAX        200
#define DURATION_MAX_S  (366ULL * 24 * 3600)

static int fail(struct pdk_req_error *e, const char *field, const char *fmt, ...) PDK_PRINTF(3, 4);
static int fail(struct pdk_req_error *e, const char *field, const char *fmt, ...)
{
	va_list ap;

	(void)snprintf(e->field, sizeof(e->field), "%s", field);
	va_start(ap, fmt);
	(void)vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

static json_t *load(const char *body, size_t len, struct pdk_req_error *e)
{
	json_error_t je;
	json_t *j;

	if (body == NULL || len == 0)
		return json_object();
	j = pdk_json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (j == NULL) {
		fail(e, "", "body is not valid JSON: %s (byte %d)", je.text, je.position);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		fail(e, "", "body must be a JSON object");
		return NULL;
	}
	return j;
}

struct field {
	const char *name;
	int (*check)(json_t *v, const char *path, void *out, struct pdk_req_error *e);
	size_t offset; /* into the output struct */
};

/* Every member of `obj` must be in `fields`; each is checked into (char *)out + offset. */
static int check_object(json_t *obj, const char *prefix, const struct field *fields, size_t n,
			void *out, struct pdk_req_error *e)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		char path[PDK_REQ_FIELD_MAX];
		size_t i;

		(void)snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", key);
		for (i = 0; i < n; i++)
			if (strcmp(key, fields[i].name) == 0)
				break;
		if (i == n)
			return fail(e, path, "unknown field '%s'", path);
		if (fields[i].check(v, path, (char *)out + fields[i].offset, e) < 0)
			return -1;
	}
	return 0;
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static int get_string(json_t *v, const char *path, size_t max, const char **out,
		      struct pdk_req_error *e)
{
	if (!json_is_string(v))
		return fail(e, path, "'%s' must be a string", path);
	if (json_string_length(v) > max)
		return fail(e, path, "'%s' is longer than %zu bytes", path, max);
	*out = json_string_value(v);
	return 0;
}

/* A printable string of at most STR_MAX bytes, copied into (char **)out. */
static int chk_str(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	const char *s;

	if (get_string(v, path, STR_MAX, &s, e) < 0)
		return -1;
	if (!printable(s))
		return fail(e, path, "'%s' must not contain control characters", path);
	free(*(char **)out);
	*(char **)out = pdk_xstrdup(s);
	return 0;
}

static int chk_name(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	if (chk_str(v, path, out, e) < 0)
		return -1;
	if (!pdk_ctl_name_ok(*(char **)out))
		return fail(e, path, "'%s' must be 1-64 of [A-Za-z0-9_.-], not starting with '.'",
			    path);
	return 0;
}

/*
 * A profile's name. A path is refused with what to do instead: the daemon
 * loads the profiles installed in its profile directory, never a file a
 * caller names.
 */
static int chk_profile(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	const char *s = json_string_value(v);
	size_t n = s != NULL ? strlen(s) : 0;

	/* What `paddock run --profile` would read as a file (docs/policy.md). */
	if (s != NULL && (strchr(s, '/') != NULL || (n > 5 && strcmp(s + n - 5, ".yaml") == 0) ||
			  (n > 4 && strcmp(s + n - 4, ".yml") == 0)))
		return fail(e, path,
			    "'%s' takes a profile name, not a path: copy the file to NAME.yaml "
			    "in the daemon's profile directory (~/.config/paddock/profiles or "
			    "/etc/paddock/profiles, docs/policy.md) and give NAME",
			    path);
	return chk_name(v, path, out, e);
}

/* "30s"/"10m"/... or a non-negative integer in `unit_ms` units, into milliseconds. */
static int duration(json_t *v, const char *path, uint64_t unit_ms, uint64_t *ms,
		    struct pdk_req_error *e)
{
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);

		if (i < 0 || (uint64_t)i > DURATION_MAX_S * 1000 / unit_ms)
			return fail(e, path, "'%s' is out of range", path);
		*ms = (uint64_t)i * unit_ms;
		return 0;
	}
	if (!json_is_string(v) || json_string_length(v) > 32 ||
	    pdk_parse_duration(json_string_value(v), ms) < 0)
		return fail(e, path,
			    "'%s' must be a duration (\"30s\", \"10m\", \"1h\") or a number", path);
	if (*ms > DURATION_MAX_S * 1000)
		return fail(e, path, "'%s' is out of range", path);
	return 0;
}

/* Seconds (a number is seconds). */
static int chk_dur_s(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	uint64_t ms;

	if (duration(v, path, 1000, &ms, e) < 0)
		return -1;
	*(uint64_t *)out = (ms + 999) / 1000;
	return 0;
}

/* Milliseconds (a number is milliseconds). */
static int chk_dur_ms(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	return duration(v, path, 1, (uint64_t *)out, e);
}

static int chk_bool(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	if (!json_is_boolean(v))
		return fail(e, path, "'%s' must be true or false", path);
	*(bool *)out = json_is_true(v);
	return 0;
}

static int uint_in(json_t *v, const char *path, uint64_t max, uint64_t *out,
		   struct pdk_req_error *e)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return fail(e, path, "'%s' must be an integer from 0 to %llu", path,
			    (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int chk_cap(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	if (uint_in(v, path, PDK_REQ_OUTPUT_CAP_MAX, out, e) < 0)
		return -1;
	if (*(uint64_t *)out < 64)
		return fail(e, path, "'%s' must be at least 64", path);
	return 0;
}

static int chk_dim(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	if (uint_in(v, path, 1000, out, e) < 0)
		return -1;
	if (*(uint64_t *)out == 0)
		return fail(e, path, "'%s' must be at least 1", path);
	return 0;
}

static bool env_name_ok(const char *k)
{
	if (k[0] == '\0' || isdigit((unsigned char)k[0]))
		return false;
	for (; *k; k++)
		if (!isalnum((unsigned char)*k) && *k != '_')
			return false;
	return true;
}

/* An object of strings; keys checked by `key_ok`, values printable-or-tab up to vmax. */
static int string_map(json_t *v, const char *path, size_t max_n, bool (*key_ok)(const char *),
		      size_t vmax, struct pdk_req_error *e)
{
	const char *k;
	json_t *x;

	if (!json_is_object(v))
		return fail(e, path, "'%s' must be an object of strings", path);
	if (json_object_size(v) > max_n)
		return fail(e, path, "'%s' has more than %zu entries", path, max_n);
	json_object_foreach(v, k, x)
	{
		char p[PDK_REQ_FIELD_MAX];
		const char *s;

		(void)snprintf(p, sizeof(p), "%s.%s", path, k);
		if (strlen(k) > 128 || !key_ok(k))
			return fail(e, p, "'%s' is not an acceptable name", p);
		if (get_string(x, p, vmax, &s, e) < 0)
			return -1;
		if (strlen(s) != json_string_length(x))
			return fail(e, p, "'%s' must not contain NUL", p);
	}
	return 0;
}

static int chk_env_obj(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	if (string_map(v, path, ENV_MAX, env_name_ok, ARG_MAX_LEN, e) < 0)
		return -1;
	json_decref(*(json_t **)out);
	*(json_t **)out = json_incref(v);
	return 0;
}

static bool label_key_ok(const char *k)
{
	if (k[0] == '\0' || strlen(k) > 63)
		return false;
	for (; *k; k++)
		if (!islower((unsigned char)*k) && !isdigit((unsigned char)*k) && *k != '_' &&
		    *k != '.' && *k != '-')
			return false;
	return true;
}

static int chk_labels(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	const char *k;
	json_t *x;

	if (string_map(v, path, LABELS_MAX, label_key_ok, LABEL_VALUE_MAX, e) < 0)
		return -1;
	json_object_foreach(v, k, x)
	{
		if (!printable(json_string_value(x))) {
			char p[PDK_REQ_FIELD_MAX];

			(void)snprintf(p, sizeof(p), "%s.%s", path, k);
			return fail(e, p, "'%s' must not contain control characters", p);
		}
	}
	json_decref(*(json_t **)out);
	*(json_t **)out = json_incref(v);
	return 0;
}

/*
 * ---- overrides: the policy file's names and units (docs/policy.md) ----
 *
 * Each limit's checker parses what the caller wrote ("512M", "30s", 256,
 * 0.5) and leaves its canonical number in *(json_t **)out: bytes for sizes,
 * milliseconds for durations, counts as integers, CPUs as a real.
 * chk_limits() puts these in place of the caller's values, so the spec the
 * daemon hands a supervisor holds numbers only, and text is parsed here,
 * at the API's edge, and nowhere after it.
 */

static int chk_size(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	uint64_t n = 0;

	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*(json_t **)out = json_incref(v);
		return 0;
	}
	if (!json_is_string(v) || json_string_length(v) > 32 ||
	    pdk_parse_size(json_string_value(v), &n) < 0)
		return fail(e, path, "'%s' must be a size (\"512M\", \"1G\") or a number of bytes",
			    path);
	if (n > INT64_MAX)
		return fail(e, path, "'%s' is out of range", path);
	*(json_t **)out = json_integer((json_int_t)n);
	return 0;
}

static int chk_count(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	uint64_t n = 0;

	if (uint_in(v, path, 1u << 30, &n, e) < 0)
		return -1;
	*(json_t **)out = json_integer((json_int_t)n);
	return 0;
}

static int chk_cpu(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	if (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) > 1024)
		return fail(e, path, "'%s' must be a number of CPUs above 0", path);
	*(json_t **)out = json_real(json_number_value(v));
	return 0;
}

/* A duration: text, or a number of seconds; in milliseconds. */
static int chk_dur_any(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	uint64_t ms;

	if (duration(v, path, 1000, &ms, e) < 0)
		return -1;
	*(json_t **)out = json_integer((json_int_t)ms);
	return 0;
}

/* The canonical value of each limit, by the limit's place in limit_fields. */
struct limit_values {
	json_t *v[10];
};

#define LIMIT(name, check, i)                                                          \
	{                                                                              \
		name, check, offsetof(struct limit_values, v) + (i) * sizeof(json_t *) \
	}

static const struct field limit_fields[] = {
	LIMIT("memory", chk_size, 0),       LIMIT("pids", chk_count, 1),
	LIMIT("cpu", chk_cpu, 2),           LIMIT("wall", chk_dur_any, 3),
	LIMIT("cpu_time", chk_dur_any, 4),  LIMIT("egress_bytes", chk_size, 5),
	LIMIT("commands", chk_count, 6),    LIMIT("output", chk_size, 7),
	LIMIT("output_bytes", chk_size, 8), LIMIT("disk", chk_size, 9),
};
_Static_assert(PDK_ARRAY_SIZE(limit_fields) == PDK_ARRAY_SIZE(((struct limit_values *)0)->v),
	       "one canonical value per limit");

static int chk_limits(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	struct limit_values canon = {0};
	int rc;

	(void)out;
	if (!json_is_object(v))
		return fail(e, path, "'%s' must be an object", path);
	rc = check_object(v, path, limit_fields, PDK_ARRAY_SIZE(limit_fields), &canon, e);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(limit_fields); i++) {
		if (rc == 0 && canon.v[i] != NULL)
			json_object_set(v, limit_fields[i].name, canon.v[i]);
		json_decref(canon.v[i]);
	}
	return rc;
}

static int chk_net_mode(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	const char *s;

	(void)out;
	if (get_string(v, path, 16, &s, e) < 0)
		return -1;
	if (strcmp(s, "none") != 0 && strcmp(s, "allowlist") != 0 && strcmp(s, "host") != 0)
		return fail(e, path, "'%s' must be none, allowlist or host", path);
	return 0;
}

static int chk_allow(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	size_t i;
	json_t *x;

	(void)out;
	if (!json_is_array(v) || json_array_size(v) > 256)
		return fail(e, path, "'%s' must be an array of at most 256 host:port strings",
			    path);
	json_array_foreach(v, i, x)
	{
		char p[PDK_REQ_FIELD_MAX];
		const char *s;

		(void)snprintf(p, sizeof(p), "%s[%zu]", path, i);
		if (get_string(x, p, 300, &s, e) < 0)
			return -1;
		if (s[0] == '\0' || !printable(s) || strchr(s, ' ') != NULL)
			return fail(e, p, "'%s' must be a host:port pattern", p);
	}
	return 0;
}

static const struct field network_fields[] = {
	{"mode", chk_net_mode, 0},
	{"allow", chk_allow, 0},
};

static int chk_network(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	if (!json_is_object(v))
		return fail(e, path, "'%s' must be an object", path);
	return check_object(v, path, network_fields, PDK_ARRAY_SIZE(network_fields), out, e);
}

static const struct field override_fields[] = {
	{"limits", chk_limits, 0},
	{"network", chk_network, 0},
};

/* An object checked against `fields` and kept whole (a reference in *(json_t **)out). */
static int kept_object(json_t *v, const char *path, const struct field *fields, size_t n, void *out,
		       struct pdk_req_error *e)
{
	if (!json_is_object(v))
		return fail(e, path, "'%s' must be an object", path);
	if (check_object(v, path, fields, n, out, e) < 0)
		return -1;
	json_decref(*(json_t **)out);
	*(json_t **)out = json_incref(v);
	return 0;
}

static int chk_overrides(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	return kept_object(v, path, override_fields, PDK_ARRAY_SIZE(override_fields), out, e);
}

static int chk_ws_path(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	const char *s;

	(void)out;
	if (json_is_null(v))
		return 0;
	if (get_string(v, path, 4096, &s, e) < 0)
		return -1;
	if (s[0] != '/' || !printable(s) || strstr(s, "/../") != NULL ||
	    (strlen(s) >= 3 && strcmp(s + strlen(s) - 3, "/..") == 0))
		return fail(e, path, "'%s' must be an absolute path without '..'", path);
	return 0;
}

static int chk_ws_mode(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	static const char *const modes[] = {"overlay", "rw", "ro", "tmpfs", "none"};
	const char *s;

	(void)out;
	if (get_string(v, path, 16, &s, e) < 0)
		return -1;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(modes); i++)
		if (strcmp(s, modes[i]) == 0)
			return 0;
	return fail(e, path, "'%s' must be overlay, rw, ro, tmpfs or none", path);
}

static const struct field ws_fields[] = {
	{"path", chk_ws_path, 0},
	{"mode", chk_ws_mode, 0},
};

static int chk_workspace(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	return kept_object(v, path, ws_fields, PDK_ARRAY_SIZE(ws_fields), out, e);
}

static int chk_idem(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	if (chk_str(v, path, out, e) < 0)
		return -1;
	if (strlen(*(char **)out) == 0 || strlen(*(char **)out) > IDEM_MAX)
		return fail(e, path, "'%s' must be 1 to %d characters", path, IDEM_MAX);
	return 0;
}

/* An image of the daemon's store: a name or digest, 1 to 255 printable characters. */
static int chk_image(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	const char *s = json_string_value(v);

	if (s == NULL || s[0] == '\0' || strlen(s) > 255 || !printable(s))
		return fail(e, path,
			    "'%s' must be an image name or digest (1 to 255 printable characters; "
			    "paddock image ls lists them), or \"host\"",
			    path);
	return chk_str(v, path, out, e);
}

/* "ops": a non-empty array of operation names, as a bit set in *out (unsigned). */
static int chk_ops(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	size_t i;
	json_t *x;

	if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 8)
		return fail(e, path, "'%s' must be a non-empty array of read, exec, files, control",
			    path);
	*(unsigned *)out = 0;
	json_array_foreach(v, i, x)
	{
		char p[PDK_REQ_FIELD_MAX];
		unsigned bit;

		(void)snprintf(p, sizeof(p), "%s[%zu]", path, i);
		bit = json_is_string(x) ? pdk_token_op_from_name(json_string_value(x)) : 0;
		if (bit == 0)
			return fail(e, p, "'%s' must be one of read, exec, files, control", p);
		*(unsigned *)out |= bit;
	}
	return 0;
}

static int chk_token_ttl(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	return uint_in(v, path, PDK_REQ_TOKEN_TTL_MAX, (uint64_t *)out, e);
}

struct create_token {
	unsigned ops;
	uint64_t ttl_s;
};

static const struct field create_token_fields[] = {
	{"ops", chk_ops, offsetof(struct create_token, ops)},
	{"ttl_s", chk_token_ttl, offsetof(struct create_token, ttl_s)},
};

/* "token": {"ops": [...], "ttl_s": N}, the scope and lifetime of the create answer's token. */
static int chk_create_token(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	struct create_token t = {0};
	struct pdk_req_create *cr = out;

	if (!json_is_object(v))
		return fail(e, path, "'%s' must be an object", path);
	if (check_object(v, path, create_token_fields, PDK_ARRAY_SIZE(create_token_fields), &t, e) <
	    0)
		return -1;
	if (json_object_get(v, "ttl_s") != NULL && t.ttl_s == 0)
		return fail(e, "token.ttl_s", "'token.ttl_s' must be from 1 to %d seconds",
			    PDK_REQ_TOKEN_TTL_MAX);
	cr->token_ops = t.ops;
	cr->token_ttl_s = t.ttl_s;
	return 0;
}

#define CF(name, fn, member)                                      \
	{                                                         \
		name, fn, offsetof(struct pdk_req_create, member) \
	}
static const struct field create_fields[] = {
	CF("profile", chk_profile, profile),
	CF("image", chk_image, image),
	CF("overrides", chk_overrides, overrides),
	CF("workspace", chk_workspace, workspace),
	CF("env", chk_env_obj, env),
	CF("labels", chk_labels, labels),
	CF("ttl", chk_dur_s, ttl_s),
	CF("idle_timeout", chk_dur_s, idle_timeout_s),
	CF("idempotency_key", chk_idem, idempotency_key),
	{"token", chk_create_token, 0},
};

void pdk_req_create_release(struct pdk_req_create *r)
{
	free(r->profile);
	free(r->image);
	json_decref(r->overrides);
	json_decref(r->workspace);
	json_decref(r->env);
	json_decref(r->labels);
	free(r->idempotency_key);
	memset(r, 0, sizeof(*r));
}

static bool is_tmpfs_mode(json_t *workspace)
{
	const char *m = json_string_value(json_object_get(workspace, "mode"));

	return m != NULL && strcmp(m, "tmpfs") == 0;
}

int pdk_req_parse_create(const char *body, size_t len, struct pdk_req_create *out,
			 struct pdk_req_error *e)
{
	_cleanup_json_ json_t *j = load(body, len, e);

	memset(out, 0, sizeof(*out));
	if (j == NULL ||
	    check_object(j, "", create_fields, PDK_ARRAY_SIZE(create_fields), out, e) < 0) {
		pdk_req_create_release(out);
		return -1;
	}
	/*
	 * limits.disk bounds a tmpfs workspace. An overlay's disk-limited upper layer would
	 * live on a tmpfs inside the sandbox, out of reach of diff, snapshot and commit, and
	 * be lost at the end: refused rather than ignored.
	 */
	if (json_object_get(json_object_get(out->overrides, "limits"), "disk") != NULL &&
	    !is_tmpfs_mode(out->workspace)) {
		pdk_req_create_release(out);
		return fail(e, "overrides.limits.disk",
			    "'overrides.limits.disk' needs workspace.mode \"tmpfs\" (an overlay "
			    "workspace cannot be disk-limited through the daemon)");
	}
	/* The create token cannot outlive the sandbox. */
	if (out->token_ttl_s != 0 && out->ttl_s != 0 && out->token_ttl_s > out->ttl_s) {
		unsigned long long tok = out->token_ttl_s, sb = out->ttl_s;

		pdk_req_create_release(out);
		return fail(e, "token.ttl_s",
			    "'token.ttl_s' (%llu s) must not exceed the sandbox's ttl (%llu s)",
			    tok, sb);
	}
	if (out->profile == NULL)
		out->profile = pdk_xstrdup("default");
	if (out->labels == NULL)
		out->labels = json_object();
	return 0;
}

/* ---- exec ---- */

struct exec_parse {
	struct pdk_req_exec r;
	json_t *argv, *cmd, *env, *stdin_text, *stdin_b64; /* borrowed from the document */
};

static int keep(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	(void)path;
	(void)e;
	*(json_t **)out = v;
	return 0;
}

static int chk_cwd(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	if (chk_str(v, path, out, e) < 0)
		return -1;
	if ((*(char **)out)[0] != '/')
		return fail(e, path, "'%s' must be an absolute path", path);
	return 0;
}

#define EF(name, fn, member)                                  \
	{                                                     \
		name, fn, offsetof(struct exec_parse, member) \
	}
static const struct field exec_fields[] = {
	EF("argv", keep, argv),
	EF("cmd", keep, cmd),
	EF("env", keep, env),
	EF("stdin", keep, stdin_text),
	EF("stdin_b64", keep, stdin_b64),
	EF("cwd", chk_cwd, r.cwd),
	EF("timeout", chk_dur_ms, r.timeout_ms),
	EF("output_cap", chk_cap, r.output_cap),
	EF("stream", chk_bool, r.stream),
	EF("pty", chk_bool, r.pty),
	EF("stdin_open", chk_bool, r.stdin_open),
	EF("cols", chk_dim, r.cols),
	EF("rows", chk_dim, r.rows),
};

static int exec_argv(json_t *argv, json_t *cmd, struct pdk_req_exec *r, struct pdk_req_error *e)
{
	const char *s;
	size_t i;
	json_t *x;

	if ((argv == NULL) == (cmd == NULL))
		return fail(e, argv ? "cmd" : "argv", "exactly one of 'argv' and 'cmd' is needed");
	if (cmd != NULL) {
		if (get_string(cmd, "cmd", ARG_MAX_LEN, &s, e) < 0)
			return -1;
		if (s[0] == '\0' || strlen(s) != json_string_length(cmd))
			return fail(e, "cmd", "'cmd' must be a non-empty string without NUL");
		pdk_strv_push(&r->argv, "/bin/sh");
		pdk_strv_push(&r->argv, "-c");
		pdk_strv_push(&r->argv, s);
		return 0;
	}
	if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > ARGV_MAX)
		return fail(e, "argv", "'argv' must be a non-empty array of at most %d strings",
			    ARGV_MAX);
	json_array_foreach(argv, i, x)
	{
		char p[32];

		(void)snprintf(p, sizeof(p), "argv[%zu]", i);
		if (get_string(x, p, ARG_MAX_LEN, &s, e) < 0)
			return -1;
		if (strlen(s) != json_string_length(x) || (i == 0 && s[0] == '\0'))
			return fail(e, p, "'%s' must be a %sstring without NUL", p,
				    i == 0 ? "non-empty " : "");
		pdk_strv_push(&r->argv, s);
	}
	return 0;
}

static int exec_env(json_t *env, struct pdk_req_exec *r, struct pdk_req_error *e)
{
	const char *k;
	json_t *x;

	if (env == NULL)
		return 0;
	if (string_map(env, "env", ENV_MAX, env_name_ok, ARG_MAX_LEN, e) < 0)
		return -1;
	json_object_foreach(env, k, x)
		pdk_strv_push_take(&r->env, pdk_xasprintf("%s=%s", k, json_string_value(x)));
	return 0;
}

/* Standard base64 (padding optional), through the base64url decoder. */
static int b64_decode(const char *s, char **out, size_t *out_len)
{
	_cleanup_free_ char *u = pdk_xstrdup(s);
	size_t n = strlen(u);

	while (n > 0 && u[n - 1] == '=' && strlen(s) - n < 2)
		n--;
	for (size_t i = 0; i < n; i++) {
		if (u[i] == '-' || u[i] == '_')
			return -EINVAL;
		if (u[i] == '+')
			u[i] = '-';
		else if (u[i] == '/')
			u[i] = '_';
	}
	return pdk_token_b64url_decode(u, n, (unsigned char **)out, out_len);
}

static int exec_stdin(json_t *text, json_t *b64, struct pdk_req_exec *r, struct pdk_req_error *e)
{
	const char *s;

	if (text != NULL && b64 != NULL)
		return fail(e, "stdin_b64", "only one of 'stdin' and 'stdin_b64' may be given");
	if (text != NULL) {
		if (get_string(text, "stdin", SIZE_MAX, &s, e) < 0)
			return -1;
		r->stdin_len = json_string_length(text);
		r->stdin_data = pdk_xmalloc(r->stdin_len + 1);
		memcpy(r->stdin_data, s, r->stdin_len + 1);
	}
	if (b64 != NULL) {
		if (get_string(b64, "stdin_b64", SIZE_MAX, &s, e) < 0)
			return -1;
		if (b64_decode(s, &r->stdin_data, &r->stdin_len) < 0)
			return fail(e, "stdin_b64", "'stdin_b64' is not valid base64");
	}
	return 0;
}

void pdk_req_exec_release(struct pdk_req_exec *r)
{
	pdk_strv_free(r->argv);
	pdk_strv_free(r->env);
	free(r->cwd);
	free(r->stdin_data);
	memset(r, 0, sizeof(*r));
}

int pdk_req_parse_exec(const char *body, size_t len, struct pdk_req_exec *out,
		       struct pdk_req_error *e)
{
	_cleanup_json_ json_t *j = load(body, len, e);
	struct exec_parse p = {0};

	memset(out, 0, sizeof(*out));
	p.r.output_cap = PDK_REQ_OUTPUT_CAP_DEFAULT;
	p.r.cols = 80;
	p.r.rows = 24;
	if (j == NULL || check_object(j, "", exec_fields, PDK_ARRAY_SIZE(exec_fields), &p, e) < 0 ||
	    exec_argv(p.argv, p.cmd, &p.r, e) < 0 || exec_env(p.env, &p.r, e) < 0 ||
	    exec_stdin(p.stdin_text, p.stdin_b64, &p.r, e) < 0) {
		pdk_req_exec_release(&p.r);
		return -1;
	}
	if (p.r.pty && p.r.stdin_data != NULL) {
		pdk_req_exec_release(&p.r);
		return fail(e, "stdin", "a pty session takes its input from the stdin route");
	}
	*out = p.r;
	return 0;
}

/* ---- tokens, kill, pools, names, signals ---- */

struct token_parse {
	json_t *ops;
	uint64_t ttl_s;
};

static const struct field token_fields[] = {
	{"ops", keep, offsetof(struct token_parse, ops)},
	{"ttl", chk_dur_s, offsetof(struct token_parse, ttl_s)},
};

int pdk_req_parse_token(const char *body, size_t len, struct pdk_req_token *out,
			struct pdk_req_error *e)
{
	_cleanup_json_ json_t *j = load(body, len, e);
	struct token_parse p = {.ttl_s = PDK_REQ_TOKEN_TTL_DEFAULT};
	size_t i;
	json_t *x;

	if (j == NULL || check_object(j, "", token_fields, PDK_ARRAY_SIZE(token_fields), &p, e) < 0)
		return -1;
	if (p.ops == NULL || !json_is_array(p.ops) || json_array_size(p.ops) == 0 ||
	    json_array_size(p.ops) > 8)
		return fail(e, "ops",
			    "'ops' must be a non-empty array of read, exec, files, control");
	memset(out, 0, sizeof(*out));
	json_array_foreach(p.ops, i, x)
	{
		char path[32];
		unsigned bit;

		(void)snprintf(path, sizeof(path), "ops[%zu]", i);
		bit = json_is_string(x) ? pdk_token_op_from_name(json_string_value(x)) : 0;
		if (bit == 0)
			return fail(e, path, "'%s' must be one of read, exec, files, control",
				    path);
		out->ops |= bit;
	}
	if (p.ttl_s == 0 || p.ttl_s > PDK_REQ_TOKEN_TTL_MAX)
		return fail(e, "ttl", "'ttl' must be from 1 s to 24 h");
	out->ttl_s = p.ttl_s;
	return 0;
}

struct kill_parse {
	struct pdk_req_kill r;
	json_t *ids;
};

#define KF(name, fn, member)                                  \
	{                                                     \
		name, fn, offsetof(struct kill_parse, member) \
	}
static const struct field kill_fields[] = {
	KF("session", chk_str, r.session),  KF("workflow", chk_str, r.workflow),
	KF("agent", chk_str, r.agent),      KF("reason", chk_str, r.reason),
	KF("labels", chk_labels, r.labels), KF("ids", keep, ids),
	KF("all", chk_bool, r.all),
};

void pdk_req_kill_release(struct pdk_req_kill *r)
{
	free(r->session);
	free(r->workflow);
	free(r->agent);
	free(r->reason);
	json_decref(r->labels);
	pdk_strv_free(r->ids);
	memset(r, 0, sizeof(*r));
}

static int kill_ids(json_t *ids, struct pdk_req_kill *r, struct pdk_req_error *e)
{
	size_t i;
	json_t *x;

	if (ids == NULL)
		return 0;
	if (!json_is_array(ids) || json_array_size(ids) > 10000)
		return fail(e, "ids", "'ids' must be an array of sandbox ids");
	json_array_foreach(ids, i, x)
	{
		char path[32];
		const char *s;

		(void)snprintf(path, sizeof(path), "ids[%zu]", i);
		if (get_string(x, path, 64, &s, e) < 0)
			return -1;
		if (!pdk_ctl_name_ok(s))
			return fail(e, path, "'%s' is not a sandbox id", path);
		pdk_strv_push(&r->ids, s);
	}
	return 0;
}

int pdk_req_parse_kill(const char *body, size_t len, struct pdk_req_kill *out,
		       struct pdk_req_error *e)
{
	_cleanup_json_ json_t *j = load(body, len, e);
	struct kill_parse p = {0};

	memset(out, 0, sizeof(*out));
	if (j == NULL || check_object(j, "", kill_fields, PDK_ARRAY_SIZE(kill_fields), &p, e) < 0 ||
	    kill_ids(p.ids, &p.r, e) < 0) {
		pdk_req_kill_release(&p.r);
		return -1;
	}
	if (p.r.all && (p.r.session != NULL || p.r.workflow != NULL || p.r.agent != NULL ||
			p.r.labels != NULL || p.ids != NULL)) {
		pdk_req_kill_release(&p.r);
		return fail(e, "all",
			    "'all' kills every sandbox and takes no other selector: give 'all' "
			    "alone (with a 'reason'), or session, workflow, agent, labels or ids "
			    "without it");
	}
	if (!p.r.all && p.r.session == NULL && p.r.workflow == NULL && p.r.agent == NULL &&
	    (p.r.labels == NULL || json_object_size(p.r.labels) == 0) && p.r.ids == NULL) {
		pdk_req_kill_release(&p.r);
		return fail(e, "session",
			    "an empty selector would kill nothing: give session, workflow, agent, "
			    "labels or ids (or \"all\": true for every sandbox)");
	}
	*out = p.r;
	return 0;
}

static int chk_pool_size(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	return uint_in(v, path, PDK_REQ_POOL_MAX, out, e);
}

int pdk_req_parse_pool(const char *body, size_t len, uint64_t *size, struct pdk_req_error *e)
{
	static const struct field fields[] = {{"size", chk_pool_size, 0}};
	_cleanup_json_ json_t *j = load(body, len, e);
	uint64_t n = UINT64_MAX;

	if (j == NULL || check_object(j, "", fields, 1, &n, e) < 0)
		return -1;
	if (n == UINT64_MAX)
		return fail(e, "size", "'size' is required");
	*size = n;
	return 0;
}

struct ws_body {
	char *name;
	bool restart;
};

int pdk_req_parse_ws(const char *body, size_t len, const char *key, bool required, char **name,
		     bool *restart, struct pdk_req_error *e)
{
	const struct field fields[] = {
		{"restart", chk_bool, offsetof(struct ws_body, restart)},
		{key ? key : "", chk_name, offsetof(struct ws_body, name)},
	};
	_cleanup_json_ json_t *j = load(body, len, e);
	struct ws_body w = {0};

	if (name != NULL)
		*name = NULL;
	if (j == NULL || check_object(j, "", fields, key && name ? 2 : 1, &w, e) < 0) {
		free(w.name);
		return -1;
	}
	if (w.name == NULL && key != NULL && required)
		return fail(e, key, "'%s' is required", key);
	if (name != NULL)
		*name = w.name;
	else
		free(w.name);
	if (restart != NULL)
		*restart = w.restart;
	return 0;
}

int pdk_req_parse_commit(const char *body, size_t len, struct pdk_req_commit *out,
			 struct pdk_req_error *e)
{
	const struct field fields[] = {
		{"restart", chk_bool, offsetof(struct pdk_req_commit, restart)},
		{"force", chk_bool, offsetof(struct pdk_req_commit, force)},
		{"dry_run", chk_bool, offsetof(struct pdk_req_commit, dry_run)},
	};
	_cleanup_json_ json_t *j = load(body, len, e);

	memset(out, 0, sizeof(*out));
	if (j == NULL || check_object(j, "", fields, PDK_ARRAY_SIZE(fields), out, e) < 0)
		return -1;
	return 0;
}

int pdk_req_parse_name(const char *body, size_t len, const char *key, bool required, char **out,
		       struct pdk_req_error *e)
{
	const struct field fields[] = {{key, chk_name, 0}};
	_cleanup_json_ json_t *j = load(body, len, e);
	char *name = NULL;

	*out = NULL;
	if (j == NULL || check_object(j, "", fields, 1, &name, e) < 0) {
		free(name);
		return -1;
	}
	if (name == NULL && required)
		return fail(e, key, "'%s' is required", key);
	*out = name;
	return 0;
}

int pdk_req_parse_approval(const char *body, size_t len, char **note, struct pdk_req_error *e)
{
	const struct field fields[] = {{"note", chk_str, 0}};
	_cleanup_json_ json_t *j = load(body, len, e);

	*note = NULL;
	if (j == NULL || check_object(j, "", fields, 1, note, e) < 0) {
		free(*note);
		*note = NULL;
		return -1;
	}
	return 0;
}

int pdk_req_parse_egress_allow(const char *body, size_t len, char **host, struct pdk_req_error *e)
{
	const struct field fields[] = {{"host", chk_str, 0}};
	_cleanup_json_ json_t *j = load(body, len, e);

	*host = NULL;
	if (j == NULL || check_object(j, "", fields, 1, host, e) < 0 ||
	    (*host == NULL && fail(e, "host", "'host' is required: a network.allow entry") < 0)) {
		free(*host);
		*host = NULL;
		return -1;
	}
	return 0;
}

static const struct {
	const char *name;
	int sig;
} signals[] = {
	{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"KILL", SIGKILL},
	{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},   {"CONT", SIGCONT},
	{"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"WINCH", SIGWINCH}, {"ALRM", SIGALRM},
};

static int chk_signal(json_t *v, const char *path, void *out, struct pdk_req_error *e)
{
	const char *s;

	if (json_is_integer(v)) {
		if (json_integer_value(v) < 1 || json_integer_value(v) > 64)
			return fail(e, path, "'%s' must be a signal number from 1 to 64", path);
		*(int *)out = (int)json_integer_value(v);
		return 0;
	}
	if (get_string(v, path, 16, &s, e) < 0)
		return -1;
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(signals); i++) {
		if (strcmp(s, signals[i].name) == 0) {
			*(int *)out = signals[i].sig;
			return 0;
		}
	}
	return fail(e, path, "'%s' is not a known signal name", path);
}

int pdk_req_parse_signal(const char *body, size_t len, int *sig, struct pdk_req_error *e)
{
	static const struct field fields[] = {{"signal", chk_signal, 0}};
	_cleanup_json_ json_t *j = load(body, len, e);
	int s = 0;

	if (j == NULL || check_object(j, "", fields, 1, &s, e) < 0)
		return -1;
	if (s == 0)
		return fail(e, "signal", "'signal' is required");
	*sig = s;
	return 0;
}

int pdk_req_parse_resize(const char *body, size_t len, uint64_t *cols, uint64_t *rows,
			 struct pdk_req_error *e)
{
	static const struct field fields[] = {{"cols", chk_dim, 0},
					      {"rows", chk_dim, sizeof(uint64_t)}};
	_cleanup_json_ json_t *j = load(body, len, e);
	uint64_t d[2] = {0, 0};

	if (j == NULL || check_object(j, "", fields, 2, d, e) < 0)
		return -1;
	if (d[0] == 0)
		return fail(e, "cols", "'cols' is required");
	if (d[1] == 0)
		return fail(e, "rows", "'rows' is required");
	*cols = d[0];
	*rows = d[1];
	return 0;
}
