/*
 * tools.c - the tool table: each tool's name, description, schemas,
 * annotations and work (docs/mcp.md, "Tools").
 */
#include "common.h"
#include "mcp-internal.h"

#include <stdarg.h>
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

/* A schema of the sandbox handle and `n` more properties (name, schema pairs). */
static json_t *with_handle(const char *const *req, ...)
{
	json_t *p = json_object();
	const char *name;
	va_list ap;

	pdk_json_set(p, "sandbox_id", pdk__schema_handle());
	va_start(ap, req);
	while ((name = va_arg(ap, const char *)) != NULL)
		pdk_json_set(p, name, va_arg(ap, json_t *));
	va_end(ap);
	return pdk__schema_object(p, req);
}

#define REQ(...) ((const char *const[]){__VA_ARGS__, NULL})
#define PATH_DOC "absolute in the sandbox, or relative to its workspace"

static json_t *in_file_write(void)
{
	return with_handle(
		REQ("path", "content"), "path", pdk__schema_str("the file, " PATH_DOC), "content",
		pdk__schema_str("what the file holds (replaced whole)"), "encoding",
		pdk__schema_enum("how content is written: text (default) or base64", encodings),
		NULL);
}

static json_t *in_file_list(void)
{
	return with_handle(NULL, "path",
			   pdk__schema_str("the directory, " PATH_DOC " (default: the workspace)"),
			   NULL);
}

static json_t *in_path(void)
{
	return with_handle(REQ("path"), "path", pdk__schema_str("the path, " PATH_DOC), NULL);
}

static json_t *in_file_delete(void)
{
	return with_handle(REQ("path"), "path", pdk__schema_str("the path, " PATH_DOC), "recursive",
			   pdk__schema_bool("a directory and all it holds (default false)"), NULL);
}

static json_t *in_file_move(void)
{
	return with_handle(REQ("from", "to"), "from", pdk__schema_str("the path, " PATH_DOC), "to",
			   pdk__schema_str("its new path (not a directory to move it into)"), NULL);
}

static json_t *in_sandbox_create(void)
{
	json_t *p = json_object();

	pdk_json_set(p, "profile",
		     pdk__schema_str("the sandbox's profile (default: the "
				     "server's, paddock mcp --profile)"));
	pdk_json_set(p, "labels", pdk__schema_strmap("labels of your own"));
	pdk_json_set(p, "ttl_s",
		     pdk__schema_int("seconds until the sandbox is destroyed (default: the "
				     "server's, 1 hour)",
				     60, 7 * 24 * 3600));
	return pdk__schema_object(p, NULL);
}

static json_t *in_none(void)
{
	return pdk__schema_object(json_object(), NULL);
}

static json_t *in_sandbox_destroy(void)
{
	json_t *p = json_object();

	pdk_json_set(p, "sandbox_id", pdk__schema_str("the handle sandbox_create gave"));
	return pdk__schema_object(p, REQ("sandbox_id"));
}

static json_t *in_handle_only(void)
{
	return with_handle(NULL, NULL);
}

static json_t *in_ws_diff(void)
{
	return with_handle(NULL, "patch",
			   pdk__schema_bool("also the unified diff (default false: the list)"),
			   NULL);
}

static json_t *in_ws_snapshot(void)
{
	return with_handle(NULL, "name",
			   pdk__schema_str("the snapshot's name (default: a new one)"), NULL);
}

static json_t *in_ws_rollback(void)
{
	return with_handle(REQ("snapshot"), "snapshot",
			   pdk__schema_str("the snapshot to put the workspace back to"), NULL);
}

static json_t *in_request_allow(void)
{
	return with_handle(REQ("host", "reason"), "host",
			   pdk__schema_str("the host the sandbox needs, as a network.allow entry: "
					   "host[:port], *.suffix[:port] or an IP literal"),
			   "reason", pdk__schema_str("why, for the human who decides"), NULL);
}

#define SB   PDK_MCP_TOOL_SANDBOX
#define RO   (PDK_MCP_TOOL_READ_ONLY | PDK_MCP_TOOL_IDEMPOTENT)
#define DEST PDK_MCP_TOOL_DESTRUCTIVE

static const struct pdk_mcp_tool tools[] = {
	{"run_command", "Run a command",
	 "Run a command in the sandbox (a shell line, or an argv vector) and answer its exit "
	 "status and output. Long output keeps its head and tail; the whole of it is kept in a "
	 "file that file_read can read.",
	 SB | DEST, in_run_command, pdk__tool_run_output, pdk__tool_run_command},
	{"run_code", "Run code",
	 "Run a Python, Node or Bash program in the sandbox, in its workspace (files written "
	 "there stay for the next call).",
	 SB | DEST, in_run_code, pdk__tool_run_output, pdk__tool_run_code},
	{"file_read", "Read a file",
	 "Read a file of the sandbox: UTF-8 text as text, anything else as a base64 resource.",
	 SB | RO, in_file_read, NULL, pdk__tool_file_read},
	{"file_write", "Write a file",
	 "Write a file in the sandbox (made with its missing parent directories).",
	 SB | DEST | PDK_MCP_TOOL_IDEMPOTENT, in_file_write, NULL, pdk__tool_file_write},
	{"file_list", "List a directory", "The entries of a directory of the sandbox.", SB | RO,
	 in_file_list, NULL, pdk__tool_file_list},
	{"file_stat", "Stat a path", "The type, size, mode and time of a path in the sandbox.",
	 SB | RO, in_path, NULL, pdk__tool_file_stat},
	{"file_delete", "Delete a path",
	 "Delete a file (or, recursive, a directory) in the sandbox.", SB | DEST, in_file_delete,
	 NULL, pdk__tool_file_delete},
	{"file_move", "Move a path", "Rename or move a file or directory within the sandbox.",
	 SB | DEST, in_file_move, NULL, pdk__tool_file_move},
	{"file_mkdir", "Make a directory", "Make a directory (and its parents) in the sandbox.",
	 SB | PDK_MCP_TOOL_IDEMPOTENT, in_path, NULL, pdk__tool_file_mkdir},
	{"sandbox_create", "Create a sandbox",
	 "Create a sandbox of its own and answer its handle (sandbox_id), usable by this client "
	 "only, until its TTL.",
	 0, in_sandbox_create, NULL, pdk__tool_sandbox_create},
	{"sandbox_list", "List sandboxes",
	 "This client's sandboxes: the session's own and those sandbox_create made.", RO, in_none,
	 NULL, pdk__tool_sandbox_list},
	{"sandbox_destroy", "Destroy a sandbox",
	 "Destroy a sandbox sandbox_create made, with everything in it.", DEST, in_sandbox_destroy,
	 NULL, pdk__tool_sandbox_destroy},
	{"workspace_diff", "Review the change set",
	 "What the sandbox changed in its workspace: the list, and with patch a unified diff.",
	 SB | RO, in_ws_diff, NULL, pdk__tool_ws_diff},
	{"workspace_snapshot", "Snapshot the workspace",
	 "Record the workspace's state under a name, to roll back to.", SB, in_ws_snapshot, NULL,
	 pdk__tool_ws_snapshot},
	{"workspace_rollback", "Roll the workspace back",
	 "Put the workspace back to a snapshot: later changes are lost.", SB | DEST, in_ws_rollback,
	 NULL, pdk__tool_ws_rollback},
	{"workspace_propose_commit", "Propose the change set",
	 "Ask for the change set to be applied to the host directory. A human approves or denies "
	 "it (paddock approvals, paddock approve ID), and the call waits for the decision; "
	 "approved, the change set is committed and the commit's result answered; denied or not "
	 "decided in time, nothing is applied.",
	 SB | DEST, in_handle_only, NULL, pdk__tool_ws_propose_commit},
	{"egress_rules", "Network allowlist",
	 "The sandbox's network mode and the destinations it may reach.", SB | RO, in_handle_only,
	 NULL, pdk__tool_egress_rules},
	{"egress_denials", "Refused connections",
	 "The sandbox's recent connections the egress proxy refused.", SB | RO, in_handle_only,
	 NULL, pdk__tool_egress_denials},
	{"egress_request_allow", "Ask to reach a host",
	 "Ask a human to allow the sandbox to reach a host (a network.allow entry). The call waits "
	 "for the decision (paddock approvals, paddock approve ID); approved, the sandbox's "
	 "allowlist is widened at once, without a restart; denied or not decided in time, it "
	 "stays as it was.",
	 SB, in_request_allow, NULL, pdk__tool_egress_request_allow},
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
