/*
 * tool-exec.c - run_command and run_code: a command in the sandbox,
 * answered at its end with its output cut the way a model reads it best
 * (control/: the head and the tail kept, what was dropped counted, all of
 * it kept in a file the file tools can read).
 */
#include "common.h"
#include "mcp-internal.h"

#include <string.h>

#define TIMEOUT_DEFAULT_S 300
#define OUTPUT_DEFAULT    16384

/* One stream as the model reads it: head, what was dropped and where all of it is, tail. */
static char *stream_text(const struct pdk_ctl_output *o)
{
	size_t hn, tn;
	_cleanup_free_ char *head = pdk_utf8_clean(o->head, o->head_len, true, &hn, NULL);
	_cleanup_free_ char *tail = pdk_utf8_clean(o->tail, o->tail_len, true, &tn, NULL);

	if (o->dropped == 0)
		return pdk_xasprintf("%s%s", head, tail);
	return pdk_xasprintf("%s\n[... %llu bytes (%llu lines) dropped; the whole output is in "
			     "%s: read it with file_read ...]\n%s",
			     head, (unsigned long long)o->dropped,
			     (unsigned long long)o->dropped_lines, o->file ? o->file : "(not kept)",
			     tail);
}

static json_t *stream_json(const struct pdk_ctl_output *o, const char *text)
{
	return json_pack("{s:s, s:I, s:I, s:o}", "text", text, "bytes", (json_int_t)o->total,
			 "dropped_bytes", (json_int_t)o->dropped, "full_output_file",
			 o->file ? json_string(o->file) : json_null());
}

static json_t *exit_json(const struct pdk_ctl_exit *e)
{
	return json_pack("{s:o, s:o, s:s, s:I}", "exit_code",
			 e->has_exit_code ? json_integer(e->exit_code) : json_null(), "signal",
			 e->has_signal && e->signal ? json_integer(e->signal) : json_null(), "end",
			 e->end, "duration_ms", (json_int_t)e->duration_ms);
}

static void exec_done(void *ctx, const struct pdk_ctl_exec_result *r, const struct pdk_error *err)
{
	struct pdk_mcp_call *call = ctx;
	_cleanup_free_ char *out = NULL, *errs = NULL, *text = NULL;
	json_t *s, *res;

	call->x = NULL;
	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	out = stream_text(&r->out);
	errs = stream_text(&r->err);
	text = pdk_xasprintf("%s %d%s%s%s%s", r->exit.has_exit_code ? "exit code" : r->exit.end,
			     r->exit.has_exit_code ? r->exit.exit_code : r->exit.signal,
			     out[0] ? "\n--- stdout ---\n" : "", out,
			     errs[0] ? "\n--- stderr ---\n" : "", errs);
	s = exit_json(&r->exit);
	pdk_json_set(s, "stdout", stream_json(&r->out, out));
	pdk_json_set(s, "stderr", stream_json(&r->err, errs));
	res = pdk__mcp_result(text, s);
	/* A command that failed is the tool's answer, not the tool's failure. */
	pdk__mcp_call_finish(call, res);
}

static const struct pdk_ctl_exec_cbs cbs = {.done = exec_done};

/* "K": "V" pairs as "K=V" strings (caller frees); NULL when there are none. */
static char **env_of(const json_t *env)
{
	const char *k;
	char **v = NULL;
	json_t *x;

	json_object_foreach((json_t *)env, k, x)
		pdk_strv_push_take(&v, pdk_xasprintf("%s=%s", k, json_string_value(x)));
	return v;
}

static void start(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb, char *const *argv)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_strv_ char **env = env_of(json_object_get(call->args, "env"));
	const char *in = pdk__mcp_arg_str(call, "stdin");
	_cleanup_free_ char *cwd = NULL;
	struct pdk_ctl_exec_req r = {
		.argv = argv,
		.env = env,
		.stdin_data = in,
		.stdin_len = in ? strlen(in) : 0,
		.timeout_ms = pdk__mcp_arg_u64(call, "timeout_s", TIMEOUT_DEFAULT_S) * 1000,
		.output_cap = pdk__mcp_arg_u64(call, "max_output_bytes", OUTPUT_DEFAULT),
	};

	if (pdk__mcp_arg_str(call, "cwd") != NULL &&
	    (cwd = pdk__mcp_arg_path(call, sb, "cwd")) == NULL)
		return;
	r.cwd = cwd;
	if (pdk_ctl_exec(sb, &r, false, &cbs, call, &call->x, &err) < 0) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	pdk__mcp_call_ticker(call);
}

void pdk__tool_run_command(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	const char *line = pdk__mcp_arg_str(call, "command");
	json_t *argv = json_object_get(call->args, "argv");
	_cleanup_strv_ char **v = NULL;
	size_t i;
	json_t *a;

	if ((line == NULL) == (argv == NULL)) {
		pdk__mcp_call_bad(call, line ? "argv" : "command",
				  "give either 'command' (a shell line) or 'argv' (a vector), not "
				  "%s",
				  line ? "both" : "neither");
		return;
	}
	if (argv != NULL && json_array_size(argv) == 0) {
		pdk__mcp_call_bad(call, "argv", "'argv' needs at least the program");
		return;
	}
	if (line != NULL) {
		pdk_strv_push(&v, "/bin/sh");
		pdk_strv_push(&v, "-c");
		pdk_strv_push(&v, line);
	}
	json_array_foreach(argv, i, a) pdk_strv_push(&v, json_string_value(a));
	start(call, sb, v);
}

void pdk__tool_run_code(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	const char *lang = pdk__mcp_arg_str(call, "language");
	const char *code = pdk__mcp_arg_str(call, "code");
	const char *prog = strcmp(lang, "python") == 0 ? "python3"
			   : strcmp(lang, "node") == 0 ? "node"
						       : "bash";
	const char *flag = strcmp(lang, "node") == 0 ? "-e" : "-c";
	char *const argv[] = {(char *)prog, (char *)flag, (char *)code, NULL};

	start(call, sb, argv);
}

static json_t *stream_schema(void)
{
	return json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:[s,s]}}, s:[s,s,s,s]}", "type",
			 "object", "properties", "text", "type", "string", "bytes", "type",
			 "integer", "dropped_bytes", "type", "integer", "full_output_file", "type",
			 "string", "null", "required", "text", "bytes", "dropped_bytes",
			 "full_output_file");
}

json_t *pdk__tool_run_output(void)
{
	json_t *o = json_pack(
		"{s:s, s:{s:{s:[s,s]}, s:{s:[s,s]}, s:{s:s}, s:{s:s}, s:o, s:o}, s:[s,s,s,s,s,s]}",
		"type", "object", "properties", "exit_code", "type", "integer", "null", "signal",
		"type", "integer", "null", "end", "type", "string", "duration_ms", "type",
		"integer", "stdout", stream_schema(), "stderr", stream_schema(), "required",
		"exit_code", "signal", "end", "duration_ms", "stdout", "stderr");

	if (o == NULL)
		pdk_oom();
	return o;
}
