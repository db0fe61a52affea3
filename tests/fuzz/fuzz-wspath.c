/*
 * fuzz-wspath.c - libFuzzer target for the way change-set entry names (bytes
 * chosen by the sandboxed code) are shown: pdk_ws_change_json() and
 * pdk_ws_print_path().
 *
 * Properties: the JSON always serializes; it carries the name as a string
 * exactly when jansson accepts the bytes as UTF-8, else as hex that decodes
 * back to the bytes; the printed form is one line of printable ASCII or
 * UTF-8 (no control character reaches a terminal) and, when quoted, decodes
 * back to the bytes.
 */
#include "common.h"
#include "workspace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_json(const char *name)
{
	struct pdk_ws_change c = {
		.path = (char *)name, .kind = PDK_WS_ADDED, .mode = S_IFREG | 0644};
	json_t *j = pdk_ws_change_json(&c);
	json_t *js = json_string(name); /* NULL when jansson finds the bytes invalid */
	const char *p = json_string_value(json_object_get(j, "path"));
	const char *hex = json_string_value(json_object_get(j, "path_hex"));
	char *line = pdk_json_dump_line(j);

	if (line == NULL)
		abort();
	if ((js != NULL) != (p != NULL) || (p != NULL && strcmp(p, name) != 0))
		abort(); /* our UTF-8 check and jansson's disagree */
	if (p == NULL) {
		size_t n = strlen(name);

		if (hex == NULL || strlen(hex) != 2 * n)
			abort();
		for (size_t i = 0; i < n; i++) {
			unsigned v;

			if (sscanf(hex + 2 * i, "%2x", &v) != 1 || v != (unsigned char)name[i])
				abort();
		}
	}
	free(line);
	json_decref(js);
	json_decref(j);
}

/* Undo the C-style quoting of pdk_ws_print_path(); abort on anything it must not print. */
static void check_print(const char *name)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	char *back;
	size_t n = 0;

	if (f == NULL)
		abort();
	pdk_ws_print_path(f, name);
	if (fclose(f) != 0)
		abort();
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			abort(); /* a control character would reach the terminal */
	if (len == 0 || buf[0] != '"') {
		if (strcmp(buf, name) != 0)
			abort();
		free(buf);
		return;
	}
	back = malloc(len + 1);
	if (back == NULL || buf[len - 1] != '"')
		abort();
	for (size_t i = 1; i + 1 < len; i++) {
		if (buf[i] != '\\') {
			back[n++] = buf[i];
			continue;
		}
		i++;
		if (buf[i] == 'n') {
			back[n++] = '\n';
		} else if (buf[i] == 't') {
			back[n++] = '\t';
		} else if (buf[i] == 'x') {
			unsigned v;

			if (sscanf(buf + i + 1, "%2x", &v) != 1)
				abort();
			back[n++] = (char)v;
			i += 2;
		} else {
			back[n++] = buf[i];
		}
	}
	back[n] = '\0';
	if (strcmp(back, name) != 0)
		abort();
	free(back);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *name = malloc(size + 1);

	if (name == NULL)
		abort();
	memcpy(name, data, size);
	name[size] = '\0'; /* a file name cannot hold NUL; stop at the first */
	check_json(name);
	check_print(name);
	free(name);
	return 0;
}
