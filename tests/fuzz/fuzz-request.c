/*
 * fuzz-request.c - libFuzzer target for the daemon's request-body validators
 * (src/api/request.h): JSON straight from the network.
 *
 * The first byte picks the parser; the rest is the body. Every body must be
 * either accepted with the parser's invariants holding, or refused with a
 * message; nothing may crash, leak or read out of bounds.
 */
#include "common.h"
#include "request.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_refusal(int rc, const struct pdk_req_error *e)
{
	if (rc < 0 && e->msg[0] == '\0')
		abort(); /* a refusal always says why */
}

static void fuzz_create(const char *b, size_t n)
{
	struct pdk_req_create r;
	struct pdk_req_error e = {0};
	int rc = pdk_req_parse_create(b, n, &r, &e);

	check_refusal(rc, &e);
	if (rc == 0) {
		if (r.profile == NULL || !pdk_ctl_name_ok(r.profile) || !json_is_object(r.labels))
			abort();
		pdk_req_create_release(&r);
	}
}

static void fuzz_exec(const char *b, size_t n)
{
	struct pdk_req_exec r;
	struct pdk_req_error e = {0};
	int rc = pdk_req_parse_exec(b, n, &r, &e);

	check_refusal(rc, &e);
	if (rc == 0) {
		if (r.argv == NULL || r.argv[0] == NULL || r.argv[0][0] == '\0' ||
		    r.output_cap < 64 || r.output_cap > PDK_REQ_OUTPUT_CAP_MAX ||
		    (r.cwd != NULL && r.cwd[0] != '/'))
			abort();
		for (size_t i = 0; r.env != NULL && r.env[i] != NULL; i++)
			if (strchr(r.env[i], '=') == NULL)
				abort();
		pdk_req_exec_release(&r);
	}
}

static void fuzz_small(unsigned which, const char *b, size_t n)
{
	struct pdk_req_error e = {0};
	struct pdk_req_token t;
	struct pdk_req_kill k;
	uint64_t size = 0;
	char *name = NULL;
	bool restart = false;
	int sig = 0, rc;

	switch (which) {
	case 0:
		rc = pdk_req_parse_token(b, n, &t, &e);
		if (rc == 0 && (t.ops == 0 || t.ttl_s == 0 || t.ttl_s > PDK_REQ_TOKEN_TTL_MAX))
			abort();
		break;
	case 1:
		rc = pdk_req_parse_kill(b, n, &k, &e);
		if (rc == 0)
			pdk_req_kill_release(&k);
		break;
	case 2:
		rc = pdk_req_parse_pool(b, n, &size, &e);
		if (rc == 0 && size > PDK_REQ_POOL_MAX)
			abort();
		break;
	case 3:
		rc = pdk_req_parse_name(b, n, "name", false, &name, &e);
		if (rc == 0 && name != NULL && !pdk_ctl_name_ok(name))
			abort();
		free(name);
		name = NULL;
		rc = pdk_req_parse_ws(b, n, "snapshot", true, &name, &restart, &e);
		if (rc == 0 && (name == NULL || !pdk_ctl_name_ok(name)))
			abort();
		free(name);
		break;
	case 5: {
		uint64_t cols = 0, rows = 0;

		rc = pdk_req_parse_resize(b, n, &cols, &rows, &e);
		if (rc == 0 && (cols < 1 || cols > 1000 || rows < 1 || rows > 1000))
			abort();
		break;
	}
	default:
		rc = pdk_req_parse_signal(b, n, &sig, &e);
		if (rc == 0 && (sig < 1 || sig > 64))
			abort();
		break;
	}
	check_refusal(rc, &e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data + 1;
	unsigned which;

	if (size == 0)
		return 0;
	which = data[0] % 8;
	if (which == 0)
		fuzz_create(body, size - 1);
	else if (which == 1)
		fuzz_exec(body, size - 1);
	else
		fuzz_small(which - 2, body, size - 1);
	return 0;
}
