/*
 * errors.c - the one place a control error becomes an HTTP status and an
 * error body (api.h). Handlers never pick a status for a control error
 * themselves.
 */
#include "common.h"
#include "api-internal.h"
#include "base.h"

int pdk_api_http_status(int status, const char **code)
{
	static const struct {
		int status, http;
		const char *code;
	} map[] = {
		{ENOENT, 404, "not_found"},    {EEXIST, 409, "conflict"},
		{EALREADY, 409, "conflict"},   {EINVAL, 400, "bad_request"},
		{ENOEXEC, 400, "bad_request"}, {E2BIG, 413, "too_large"},
		{EACCES, 403, "forbidden"},    {EPERM, 403, "forbidden"},
		{EBUSY, 409, "busy"},          {ENOTCONN, 503, "unavailable"},
		{EDQUOT, 429, "limit"},        {EAGAIN, 429, "limit"},
		{ENOTSUP, 409, "conflict"},
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(map); i++)
		if (map[i].status == status) {
			*code = map[i].code;
			return map[i].http;
		}
	*code = "internal";
	return 500;
}

void pdk_api_error(struct evhttp_request *req, const struct pdk_error *err)
{
	const char *code;
	int http = pdk_api_http_status(err->status, &code);

	/* A limit on what runs at once (a sandbox's transfers): it may be retried soon. */
	if (err->status == EAGAIN)
		pdk_http_header(req, "Retry-After", "1");
	pdk_http_error(req, http, code, err->field, "%s", err->msg);
}

void pdk__api_error_details(struct evhttp_request *req, const struct pdk_error *err,
			    const json_t *details)
{
	static const char *const lists[] = {"conflicts", "refused"};
	const char *code;
	int http = pdk_api_http_status(err->status, &code);
	json_t *e = json_pack("{s:s, s:s}", "code", code, "message", err->msg);

	if (err->field != NULL && err->field[0] != '\0')
		pdk_json_set(e, "field", json_string(err->field));
	for (size_t i = 0; i < PDK_ARRAY_SIZE(lists); i++) {
		json_t *v = json_object_get(details, lists[i]);

		if (json_is_array(v))
			pdk_json_set(e, lists[i], json_deep_copy(v));
	}
	pdk_http_json(req, http, json_pack("{s:o}", "error", e));
}

void pdk__api_bad_request(struct evhttp_request *req, const struct pdk_req_error *e)
{
	pdk_http_error(req, 400, "bad_request", e->field, "%s", e->msg);
}
