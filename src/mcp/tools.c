/*
 * tools.c - the tool table: each tool's name, description, schemas,
 * annotations and work (docs/mcp.md, "Tools").
 */
#include "common.h"
#include "mcp-internal.h"

#include <string.h>

static const char *const languages[] = {"python", "node", "bash", NULL};
static const char *const encodings[] = {"text", "base64", NULL};

/* The arguments run_command and run_code share. */
static json_t *exec_common(json_t *p)
{
	pdk_json_set(p, "sandbox_id", pdk__schema_handle());
	pdk_json_set(p, "cwd", pdk__schema_str("the working directory (default: the workspace)"));
	pdk_json_set(p, "env", pdk__schema_strmap("variables added to the environment"));
	pdk_json_set(p, "stdin", pdk__schema_str("the command's standard input"));
	pdk_json_set(
		p, "timeout_s",
		pdk__schema_int("seconds before the command is killed (default 300)", 1, 86400));
	pdk_json_set(p, "max_output_bytes",
		     pdk__schema_int("bytes of each stream kept: the first and the last half "
				     "(default 16384); the rest is counted and kept in a file",
				     64, 1 << 20));
	return p;
}

static json_t *in_run_command(void)
{
	json_t *p = json_object();

	pdk_json_set(p, "command", pdk__schema_str("a shell line, run by /bin/sh -c"));
	pdk_json_set(p, "argv",
		     pdk__schema_strv("the program and its arguments (instead of "
				      "command)"));
	return pdk__schema_object(exec_common(p), NULL);
}

static json_t *in_run_code(void)
{
	static const char *const req[] = {"language", "code", NULL};
	json_t *p = json_object();

	pdk_json_set(p, "language", pdk__schema_enum("python (python3), node or bash", languages));
	pdk_json_set(p, "code", pdk__schema_str("the program's source"));
	return pdk__schema_object(exec_common(p), req);
}

static json_t *in_file_read(void)
{
	static const char *const req[] = {"path", NULL};
	json_t *p = json_object();

	pdk_json_set(p, "sandbox_id", pdk__schema_handle());
	pdk_json_set(p, "path",
		     pdk__schema_str("the file (absolute, or relative to the "
				     "workspace)"));
	pdk_json_set(p, "encoding",
		     pdk__schema_enum("text, or base64 (default: text when the file is UTF-8)",
				      encodings));
	pdk_json_set(p, "max_bytes",
		     pdk__schema_int("the largest file read (default 1 MiB)", 1, 64 << 20));
	return pdk__schema_object(p, req);
}

static const struct pdk_mcp_tool tools[] = {
	{"run_command", "Run a command",
	 "Run a command in the sandbox (a shell line, or an argv vector) and answer its exit "
	 "status and output. Long output keeps its head and tail; the whole of it is kept in a "
	 "file that file_read can read.",
	 PDK_MCP_TOOL_SANDBOX | PDK_MCP_TOOL_DESTRUCTIVE, in_run_command, pdk__tool_run_output,
	 pdk__tool_run_command},
	{"run_code", "Run code",
	 "Run a Python, Node or Bash program in the sandbox, in its workspace (files written "
	 "there stay for the next call).",
	 PDK_MCP_TOOL_SANDBOX | PDK_MCP_TOOL_DESTRUCTIVE, in_run_code, pdk__tool_run_output,
	 pdk__tool_run_code},
	{"file_read", "Read a file",
	 "Read a file of the sandbox: UTF-8 text as text, anything else as a base64 resource.",
	 PDK_MCP_TOOL_SANDBOX | PDK_MCP_TOOL_READ_ONLY | PDK_MCP_TOOL_IDEMPOTENT, in_file_read,
	 NULL, pdk__tool_file_read},
};

const struct pdk_mcp_tool *pdk__mcp_tool_find(const char *name)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(tools); i++)
		if (strcmp(tools[i].name, name) == 0)
			return &tools[i];
	return NULL;
}

static json_t *annotations(const struct pdk_mcp_tool *t)
{
	unsigned f = t->flags;

	/*
	 * Truthful hints: nothing reaches beyond the sandbox (openWorldHint false: its
	 * network is the profile's allowlist); a tool that changes nothing says so.
	 */
	return json_pack("{s:s, s:b, s:b, s:b, s:b}", "title", t->title, "readOnlyHint",
			 (f & PDK_MCP_TOOL_READ_ONLY) != 0, "destructiveHint",
			 (f & PDK_MCP_TOOL_DESTRUCTIVE) != 0, "idempotentHint",
			 (f & PDK_MCP_TOOL_IDEMPOTENT) != 0, "openWorldHint",
			 (f & PDK_MCP_TOOL_OPEN_WORLD) != 0);
}

json_t *pdk__mcp_tools_json(void)
{
	json_t *a = json_array();

	for (size_t i = 0; i < PDK_ARRAY_SIZE(tools); i++) {
		const struct pdk_mcp_tool *t = &tools[i];
		json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", t->name, "title",
				      t->title, "description", t->description, "inputSchema",
				      t->input(), "annotations", annotations(t));

		if (o == NULL)
			pdk_oom();
		if (t->output != NULL)
			pdk_json_set(o, "outputSchema", t->output());
		(void)json_array_append_new(a, o);
	}
	return a;
}
