/*
 * fuzz-exectrace.c - libFuzzer target for what exec tracing reads from
 * untrusted sources: /proc/PID/status and /proc/PID/stat (whose process name
 * the sandboxed process chooses) and argv bytes (anything the process passed
 * to execve), turned into event attributes.
 *
 * Properties: the parsers never read past the text and accept only
 * non-negative pids; the JSON form of any bytes is valid UTF-8 that jansson
 * serializes; it equals the input exactly when jansson itself accepts the
 * input as UTF-8, and otherwise the hex form decodes back to the bytes.
 */
#include "common.h"
#include "exectrace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_parsers(const char *text)
{
	struct pdk__proc_status st;
	struct pdk__proc_stat pst;

	if (pdk__exectrace_parse_status(text, &st) == 0 &&
	    (st.tgid < 0 || st.ppid < 0 || st.nspid < 0))
		abort();
	if (pdk__exectrace_parse_stat(text, &pst) == 0 && pst.exit_code < 0)
		abort();
}

static void check_bytes(const char *s)
{
	json_t *o = json_object();
	json_t *ref = json_string(s); /* NULL when jansson finds the bytes invalid */
	const char *v, *hex;
	char *line;

	pdk__exectrace_set_bytes(o, "k", s);
	v = json_string_value(json_object_get(o, "k"));
	hex = json_string_value(json_object_get(o, "k_hex"));
	line = pdk_json_dump_line(o);
	if (v == NULL || line == NULL)
		abort(); /* every input must serialize */
	if ((ref != NULL) != (hex == NULL))
		abort(); /* our UTF-8 check and jansson's disagree */
	if (ref != NULL && strcmp(v, s) != 0)
		abort();
	if (hex != NULL) {
		size_t n = strlen(s);

		if (strlen(hex) != 2 * n)
			abort();
		for (size_t i = 0; i < n; i++) {
			unsigned x;

			if (sscanf(hex + 2 * i, "%2x", &x) != 1 || x != (unsigned char)s[i])
				abort();
		}
	}
	free(line);
	json_decref(ref);
	json_decref(o);
}

/* The input split at NUL bytes is an argv. */
static void check_argv(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1);
	char *argv[65];
	size_t n = 0;
	json_t *o = json_object();
	char *line;

	if (copy == NULL)
		abort();
	memcpy(copy, data, size);
	copy[size] = '\0';
	for (size_t i = 0; i <= size && n < 64; n++) {
		argv[n] = copy + i;
		i += strlen(copy + i) + 1;
	}
	argv[n] = NULL;
	pdk__exectrace_set_argv(o, argv);
	line = pdk_json_dump_line(o);
	if (line == NULL || json_array_size(json_object_get(o, "argv")) != n)
		abort();
	free(line);
	json_decref(o);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);

	if (text == NULL)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	check_parsers(text);
	check_bytes(text);
	check_argv(data, size);
	free(text);
	return 0;
}
