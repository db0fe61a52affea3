/*
 * otlp-config.c - the exporter's configuration (OTEL_* variables, --otlp)
 * and what to do with a collector's answer (retry classification,
 * Retry-After, backoff). Pure functions: the environment is a parameter.
 */
#include "common.h"
#include "base.h"
#include "otlp.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *str_of(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* ---- export outcome ---- */

enum pdk_otlp_verdict pdk_otlp_classify(bool transport_failed, long http_status)
{
	if (transport_failed)
		return PDK_OTLP_RETRY;
	if (http_status >= 200 && http_status < 300)
		return PDK_OTLP_OK;
	if (http_status == 429 || http_status == 502 || http_status == 503 || http_status == 504)
		return PDK_OTLP_RETRY;
	return PDK_OTLP_FAIL;
}

int64_t pdk_otlp_retry_after_ms(const char *value, uint64_t now_real_ns)
{
	uint64_t secs;
	struct tm tm = {0};
	const char *end;
	time_t t;

	while (value && (*value == ' ' || *value == '\t'))
		value++;
	if (value == NULL || *value == '\0')
		return -1;
	if (pdk_parse_u64(value, 86400ULL * 365, &secs) == 0)
		return (int64_t)(secs * 1000);
	/* IMF-fixdate, e.g. "Wed, 21 Oct 2015 07:28:00 GMT" (RFC 9110). */
	end = strptime(value, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end == NULL || *end != '\0' || (t = timegm(&tm)) < 0)
		return -1;
	if ((uint64_t)t * 1000ULL <= now_real_ns / 1000000ULL)
		return 0;
	return (int64_t)((uint64_t)t * 1000ULL - now_real_ns / 1000000ULL);
}

uint64_t pdk_otlp_backoff_ms(unsigned attempt)
{
	return attempt >= 5 ? 2000 : 100ULL << attempt;
}

/* ---- configuration ---- */

void pdk_otlp_config_init(struct pdk_otlp_config *cfg)
{
	*cfg = (struct pdk_otlp_config){
		.timeout_ms = PDK_OTLP_DEFAULT_TIMEOUT_MS,
		.deadline_ms = PDK_OTLP_DEFAULT_DEADLINE_MS,
		.queue_max = PDK_OTLP_DEFAULT_QUEUE_MAX,
		.batch_max = PDK_OTLP_DEFAULT_BATCH_MAX,
		.delay_ms = PDK_OTLP_DEFAULT_DELAY_MS,
	};
}

void pdk_otlp_config_release(struct pdk_otlp_config *cfg)
{
	free(cfg->endpoint);
	free(cfg->service_name);
	for (size_t i = 0; cfg->headers && cfg->headers[i]; i++)
		explicit_bzero(cfg->headers[i], strlen(cfg->headers[i]));
	pdk_strv_free(cfg->headers);
	cfg->endpoint = NULL;
	cfg->service_name = NULL;
	cfg->headers = NULL;
}

int pdk_otlp_config_set_endpoint(struct pdk_otlp_config *cfg, const char *url,
				 struct pdk_error **err)
{
	size_t n = strlen(url);
	size_t scheme = strncmp(url, "http://", 7) == 0    ? 7
			: strncmp(url, "https://", 8) == 0 ? 8
							   : 0;
	size_t host_len;

	if (scheme == 0)
		return pdk_error_setx(err, EINVAL,
				      "OTLP endpoint '%.64s': only http:// and https:// URLs", url);
	if (n > PDK_OTLP_URL_MAX)
		return pdk_error_setx(err, EINVAL, "OTLP endpoint longer than %d bytes",
				      PDK_OTLP_URL_MAX);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f || url[i] == '?' ||
		    url[i] == '#')
			return pdk_error_setx(err, EINVAL,
					      "OTLP endpoint: no space, control byte, query or "
					      "fragment allowed");
	host_len = strcspn(url + scheme, "/");
	if (host_len == 0 || url[scheme] == ':')
		return pdk_error_setx(err, EINVAL, "OTLP endpoint '%s' has no host", url);
	/* SECURITY: credentials belong in OTEL_EXPORTER_OTLP_HEADERS, never in a URL we print. */
	if (memchr(url + scheme, '@', host_len) != NULL)
		return pdk_error_setx(err, EINVAL,
				      "OTLP endpoint: user:password@ is not allowed (use "
				      "OTEL_EXPORTER_OTLP_HEADERS)");
	while (n > scheme + host_len && url[n - 1] == '/')
		n--;
	free(cfg->endpoint);
	cfg->endpoint = pdk_xasprintf("%.*s", (int)n, url);
	return 0;
}

static bool is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static void trim(const char **s, size_t *n)
{
	while (*n > 0 && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
		(*n)--;
}

/* Percent-decode v[0..n) into a new string; -EINVAL on a bad escape or a CR, LF or NUL. */
static int url_decode(const char *v, size_t n, char **out)
{
	_cleanup_free_ char *d = pdk_xmalloc(n + 1);
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = v[i];

		if (c == '%') {
			if (i + 2 >= n || pdk_hexval(v[i + 1]) < 0 || pdk_hexval(v[i + 2]) < 0)
				return -EINVAL;
			c = (char)(pdk_hexval(v[i + 1]) * 16 + pdk_hexval(v[i + 2]));
			i += 2;
		}
		/* SECURITY: no header injection through a decoded value. */
		if (c == '\r' || c == '\n' || c == '\0')
			return -EINVAL;
		d[o++] = c;
	}
	d[o] = '\0';
	*out = steal_ptr(&d);
	return 0;
}

static int parse_header(struct pdk_otlp_config *cfg, const char *item, size_t len,
			struct pdk_error **err)
{
	const char *eq = memchr(item, '=', len);
	const char *k = item, *v;
	size_t kn, vn;
	_cleanup_free_ char *val = NULL;

	if (eq == NULL)
		return pdk_error_setx(
			err, EINVAL,
			"OTEL_EXPORTER_OTLP_HEADERS: an entry has no '=' (want k=v,k=v)");
	kn = (size_t)(eq - item);
	v = eq + 1;
	vn = len - kn - 1;
	trim(&k, &kn);
	trim(&v, &vn);
	if (kn == 0)
		return pdk_error_setx(err, EINVAL,
				      "OTEL_EXPORTER_OTLP_HEADERS: an entry has no key");
	for (size_t i = 0; i < kn; i++)
		if (!is_tchar(k[i]))
			return pdk_error_setx(err, EINVAL,
					      "OTEL_EXPORTER_OTLP_HEADERS: invalid header name");
	if (url_decode(v, vn, &val) < 0)
		return pdk_error_setx(err, EINVAL,
				      "OTEL_EXPORTER_OTLP_HEADERS: the value of '%.*s' is not a "
				      "valid percent-encoded header value",
				      (int)kn, k);
	pdk_strv_push_take(&cfg->headers, pdk_xasprintf("%.*s: %s", (int)kn, k, val));
	explicit_bzero(val, strlen(val));
	return 0;
}

int pdk_otlp_config_parse_headers(struct pdk_otlp_config *cfg, const char *s,
				  struct pdk_error **err)
{
	if (strlen(s) > PDK_OTLP_HEADERS_MAX)
		return pdk_error_setx(err, EINVAL,
				      "OTEL_EXPORTER_OTLP_HEADERS longer than %d bytes",
				      PDK_OTLP_HEADERS_MAX);
	while (*s) {
		size_t len = strcspn(s, ",");
		const char *item = s;
		size_t n = len;

		trim(&item, &n);
		if (n > 0 && parse_header(cfg, item, n, err) < 0)
			return -EINVAL;
		s += len;
		if (*s == ',')
			s++;
	}
	return 0;
}

static int env_ms(char *const *envp, const char *name, bool duration, uint64_t *out,
		  struct pdk_error **err)
{
	const char *v = pdk_env_get(envp, name);
	uint64_t x;

	if (v == NULL || *v == '\0')
		return 0;
	if ((duration ? pdk_parse_duration(v, &x) : pdk_parse_u64(v, 86400000, &x)) < 0 || x == 0)
		return pdk_error_setx(err, EINVAL, "%s: invalid value '%.32s' (want %s)", name, v,
				      duration ? "a duration such as 500ms or 2s"
					       : "milliseconds above 0");
	*out = x;
	return 0;
}

int pdk_otlp_config_from_env(struct pdk_otlp_config *cfg, char *const *envp, const char *endpoint,
			     struct pdk_error **err)
{
	const char *url = endpoint ? endpoint : pdk_env_get(envp, "OTEL_EXPORTER_OTLP_ENDPOINT");
	const char *disabled = pdk_env_get(envp, "OTEL_SDK_DISABLED");
	const char *headers = pdk_env_get(envp, "OTEL_EXPORTER_OTLP_HEADERS");
	const char *service = pdk_env_get(envp, "OTEL_SERVICE_NAME");

	cfg->envp = envp;

	if (endpoint != NULL && *endpoint == '\0')
		return pdk_error_setx(err, EINVAL, "--otlp: an empty URL");
	if (url == NULL || *url == '\0')
		return 0;
	if (endpoint == NULL && disabled && strcasecmp(disabled, "true") == 0)
		return 0;
	if (pdk_otlp_config_set_endpoint(cfg, url, err) < 0)
		return pdk_error_wrap(err, "%s",
				      endpoint ? "--otlp" : "OTEL_EXPORTER_OTLP_ENDPOINT");
	if (headers && pdk_otlp_config_parse_headers(cfg, headers, err) < 0)
		return -EINVAL;
	if (env_ms(envp, "OTEL_EXPORTER_OTLP_TIMEOUT", false, &cfg->timeout_ms, err) < 0 ||
	    env_ms(envp, "PADDOCK_OTLP_DEADLINE", true, &cfg->deadline_ms, err) < 0)
		return -EINVAL;
	if (service && *service) {
		free(cfg->service_name);
		cfg->service_name = pdk_xstrdup(service);
	}
	return 1;
}

json_t *pdk_otlp_config_to_json(const struct pdk_otlp_config *cfg)
{
	json_t *j = json_object();

	pdk_json_set(j, "endpoint", json_string(cfg->endpoint));
	pdk_json_set(j, "headers", pdk_json_strv(cfg->headers));
	if (cfg->service_name) {
		_cleanup_json_ json_t *raw =
			json_stringn_nocheck(cfg->service_name, strlen(cfg->service_name));

		pdk_json_set(j, "service_name", pdk_otlp_sanitize(raw));
	}
	pdk_json_set(j, "timeout_ms", json_integer((json_int_t)cfg->timeout_ms));
	pdk_json_set(j, "deadline_ms", json_integer((json_int_t)cfg->deadline_ms));
	pdk_json_set(j, "queue_max", json_integer((json_int_t)cfg->queue_max));
	pdk_json_set(j, "batch_max", json_integer((json_int_t)cfg->batch_max));
	pdk_json_set(j, "delay_ms", json_integer((json_int_t)cfg->delay_ms));
	return j;
}

static int get_u64(const json_t *j, const char *key, uint64_t *out, struct pdk_error **err)
{
	json_t *v = json_object_get(j, key);

	if (!json_is_integer(v) || json_integer_value(v) <= 0)
		return pdk_error_setx(err, EINVAL, "exporter configuration: bad '%s'", key);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int pdk_otlp_config_from_json(struct pdk_otlp_config *cfg, const json_t *j, struct pdk_error **err)
{
	json_t *h = json_object_get(j, "headers");
	json_t *x;
	size_t i;

	if (!json_is_string(json_object_get(j, "endpoint")) || !json_is_array(h))
		return pdk_error_setx(err, EINVAL, "exporter configuration: no endpoint");
	if (pdk_otlp_config_set_endpoint(cfg, str_of(j, "endpoint"), err) < 0)
		return -EINVAL;
	for (i = 0; i < json_array_size(h) && (x = json_array_get(h, i)); i++) {
		if (!json_is_string(x) || strpbrk(json_string_value(x), "\r\n") != NULL)
			return pdk_error_setx(err, EINVAL, "exporter configuration: bad header");
		pdk_strv_push(&cfg->headers, json_string_value(x));
	}
	if (str_of(j, "service_name") != NULL)
		cfg->service_name = pdk_xstrdup(str_of(j, "service_name"));
	if (get_u64(j, "timeout_ms", &cfg->timeout_ms, err) < 0 ||
	    get_u64(j, "deadline_ms", &cfg->deadline_ms, err) < 0 ||
	    get_u64(j, "queue_max", &cfg->queue_max, err) < 0 ||
	    get_u64(j, "batch_max", &cfg->batch_max, err) < 0 ||
	    get_u64(j, "delay_ms", &cfg->delay_ms, err) < 0)
		return -EINVAL;
	return 0;
}
