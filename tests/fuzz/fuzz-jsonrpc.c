/*
 * fuzz-jsonrpc.c - libFuzzer target for the MCP server's JSON-RPC parser
 * (src/mcp/jsonrpc.h): the first bytes every MCP client sends.
 *
 * Every input is either a message whose invariants hold or a refusal with
 * a JSON-RPC code and a reason; an answer built for either serialises.
 * Nothing may crash, leak or read out of bounds. And any JSON document in
 * the input is written by pdk_json_dump_wire() (base/json.c, the
 * serialiser of every message on the wire) byte for byte as jansson's
 * compact, ASCII-only dump writes it, and pdk_json_wire_size() counts it;
 * pdk_json_dump_sorted() writes it as jansson's sorted dump does.
 * Whatever pdk_json_parse_plain() accepts, jansson accepts as the same
 * document, keys in the same order.
 */
#include "common.h"
#include "jsonrpc.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_call(const struct pdk_rpc_msg *m)
{
	if (m->method == NULL || m->method[0] == '\0' ||
	    (m->params != NULL && !json_is_object(m->params)))
		abort();
}

static void check_message(const struct pdk_rpc_msg *m)
{
	switch (m->kind) {
	case PDK_RPC_REQUEST:
		if (m->id == NULL || !(json_is_string(m->id) || json_is_integer(m->id)))
			abort();
		check_call(m);
		break;
	case PDK_RPC_NOTIFICATION:
		check_call(m);
		break;
	case PDK_RPC_RESPONSE:
		if (m->id == NULL || !json_is_object(m->result) || m->error != NULL)
			abort();
		break;
	case PDK_RPC_ERROR:
		if (!json_is_object(m->error) || m->result != NULL)
			abort();
		break;
	default:
		abort();
	}
}

static void check_answer(json_t *answer)
{
	char *line = pdk_json_dump_line(answer);

	if (line == NULL)
		abort();
	free(line);
	json_decref(answer);
}

/*
 * The plain parser against jansson's: what it accepts, jansson accepts
 * (with the flags pdk_rpc_parse() gives it) as the same document, its keys
 * in the same order; what it leaves, jansson may take or refuse.
 */
static void check_plain(const uint8_t *data, size_t size)
{
	json_t *ours = pdk_json_parse_plain((const char *)data, size);
	json_t *theirs =
		ours ? json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL) : NULL;
	char *a, *b;

	if (ours == NULL)
		return;
	if (theirs == NULL || !json_equal(ours, theirs))
		abort();
	a = pdk_json_dump_wire(ours);
	b = pdk_json_dump_wire(theirs);
	if (a == NULL || b == NULL || strcmp(a, b) != 0)
		abort();
	free(a);
	free(b);
	json_decref(ours);
	json_decref(theirs);
}

/* Our serialiser against jansson's, on whatever JSON the input holds. */
static void check_wire(const uint8_t *data, size_t size)
{
	json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	char *ours = v ? pdk_json_dump_wire(v) : NULL;
	char *theirs = v ? json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	size_t n = theirs ? strlen(theirs) : 0;

	if ((ours == NULL) != (theirs == NULL))
		abort();
	if (ours != NULL &&
	    (strlen(ours) != n + 1 || memcmp(ours, theirs, n) != 0 || ours[n] != '\n'))
		abort();
	/* The size counted without writing is the written line's. */
	if (v != NULL && pdk_json_wire_size(v) != (ours ? strlen(ours) : 0))
		abort();
	/* The sorted dump (the audit store's canonical records) is jansson's sorted one. */
	if (v != NULL) {
		size_t len = 0;
		char *s_ours = pdk_json_dump_sorted(v, &len);
		char *s_theirs = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);

		if ((s_ours == NULL) != (s_theirs == NULL) ||
		    (s_ours != NULL && (len != strlen(s_theirs) || strcmp(s_ours, s_theirs) != 0)))
			abort();
		free(s_ours);
		free(s_theirs);
	}
	free(ours);
	free(theirs);
	json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pdk_rpc_msg m;
	struct pdk_rpc_refusal why;

	check_wire(data, size);
	check_plain(data, size);
	if (pdk_rpc_parse((const char *)data, size, 0, &m, &why) == 0) {
		check_message(&m);
		check_answer(pdk_rpc_result(m.id, NULL));
		pdk_rpc_msg_release(&m);
		return 0;
	}
	if (why.msg[0] == '\0' ||
	    (why.code != PDK_RPC_PARSE_ERROR && why.code != PDK_RPC_INVALID_REQUEST))
		abort(); /* a refusal always says why, with one of the two codes */
	check_answer(pdk_rpc_error(why.id, why.code, why.msg, NULL));
	pdk_rpc_refusal_release(&why);
	return 0;
}
