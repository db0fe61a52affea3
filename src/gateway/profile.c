/*
 * profile.c - the paddock profile a stdio upstream runs under, written from
 * its permission manifest (docs/gateway.md, PERMISSIONS).
 *
 * It extends the built-in `strict` and replaces what a server must not
 * inherit: no workspace (strict's is the current directory, read-only),
 * the host's system directories plus the manifest's paths only (so no
 * home), the network off unless the manifest lists hosts, and no wall or
 * CPU-time limit (an MCP server lives as long as the gateway). Keys are
 * plain words; every value the config gave is written as a double-quoted
 * scalar (JSON's string escapes are YAML's), so no value can add a key.
 */
#include "common.h"
#include "base.h"
#include "gateway.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What strict (through default) binds of the host's root, which the list replaces. */
static const char *const system_dirs[] = {"/usr",   "/bin",   "/sbin",  "/lib",
					  "/lib32", "/lib64", "/libx32"};

/* Processes and threads of a server that starts no subprocess (node alone runs about a dozen). */
#define PIDS_NO_PROCESS "32"
/* With system.process: strict's own. */
#define PIDS_PROCESS "128"

struct out {
	FILE *f;
	char *text;
	size_t len;
};

static void put_quoted(FILE *f, const char *s)
{
	json_t *j = json_string(s);
	char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

	/* Not UTF-8 (json_string() refuses it): the profile reader refuses the empty value. */
	fputs(q ? q : "\"\"", f);
	free(q);
	json_decref(j);
}

static void put_list(FILE *f, const char *indent, const char *key, char *const *v)
{
	fprintf(f, "%s%s: [", indent, key);
	for (size_t i = 0; v && v[i]; i++) {
		if (i > 0)
			fputs(", ", f);
		put_quoted(f, v[i]);
	}
	fputs("]\n", f);
}

/* Whether `path` is `dir` or lies below it. */
static bool below(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool covered(char *const *v, const char *path)
{
	for (size_t i = 0; v && v[i]; i++) {
		if (below(path, v[i]))
			return true;
	}
	return false;
}

/*
 * The read-only binds: the system directories, the manifest's read paths,
 * and the directory of an absolute program when none of those holds it.
 */
static char **read_only_of(const struct pdk_gw_server *s)
{
	_cleanup_strv_ char **v = pdk_xcalloc(1, sizeof(*v));
	const char *prog = s->command ? s->command[0] : NULL;

	for (size_t i = 0; i < PDK_ARRAY_SIZE(system_dirs); i++)
		pdk_strv_push(&v, system_dirs[i]);
	for (size_t i = 0; s->perm.fs_read && s->perm.fs_read[i]; i++) {
		if (!covered(v, s->perm.fs_read[i]))
			pdk_strv_push(&v, s->perm.fs_read[i]);
	}
	if (prog != NULL && prog[0] == '/' && strrchr(prog, '/') != prog) {
		_cleanup_free_ char *dir = pdk_xstrdup(prog);

		*strrchr(dir, '/') = '\0';
		if (!covered(v, dir) && !covered(s->perm.fs_write, dir))
			pdk_strv_push(&v, dir);
	}
	return steal_ptr(&v);
}

static void put_filesystem(FILE *f, const struct pdk_gw_server *s)
{
	_cleanup_strv_ char **ro = read_only_of(s);

	fputs("filesystem:\n  workspace: {mode: none}\n", f);
	put_list(f, "  ", "read_only", ro);
	put_list(f, "  ", "read_write", s->perm.fs_write);
}

static void put_network(FILE *f, const struct pdk_gw_server *s)
{
	if (s->perm.net_client == NULL || s->perm.net_client[0] == NULL) {
		fputs("network:\n  mode: none\n", f);
		return;
	}
	fputs("network:\n  mode: allowlist\n", f);
	put_list(f, "  ", "allow", s->perm.net_client);
	fputs("  credentials:\n", f);
	if (s->n_creds == 0)
		fputs("    []\n", f);
	for (size_t i = 0; i < s->n_creds; i++) {
		fputs("    - host: ", f);
		put_quoted(f, s->creds[i].host);
		fputs("\n      header: ", f);
		put_quoted(f, s->creds[i].header);
		fputc('\n', f);
	}
}

/* Variables were checked at load: names are plain words, so they are written as keys. */
static void put_env(FILE *f, const struct pdk_gw_server *s)
{
	fputs("env:", f);
	if (s->perm.env == NULL || s->perm.env[0] == NULL)
		fputs(" {}", f);
	fputc('\n', f);
	for (size_t i = 0; s->perm.env && s->perm.env[i]; i++) {
		const char *eq = strchr(s->perm.env[i], '=');

		if (eq == NULL || eq == s->perm.env[i] ||
		    strspn(s->perm.env[i],
			   "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
			    (size_t)(eq - s->perm.env[i]))
			continue;
		fprintf(f, "  %.*s: ", (int)(eq - s->perm.env[i]), s->perm.env[i]);
		put_quoted(f, eq + 1);
		fputc('\n', f);
	}
}

/* What a server's limits start from (strict's, but no end of life: it lives with the gateway). */
static void put_limit(FILE *f, const struct pdk_gw_server *s, const char *key, const char *dflt)
{
	json_t *v = json_object_get(s->limits, key);

	fprintf(f, "  %s: ", key);
	if (json_is_string(v))
		put_quoted(f, json_string_value(v));
	else
		fputs(dflt, f);
	fputc('\n', f);
}

/* Limit names were checked at load (lowercase words); the server's own win. */
static void put_limits(FILE *f, const struct pdk_gw_server *s)
{
	static const char *const own[] = {"pids", "wall", "cpu_time"};
	const char *key;
	json_t *v;

	fputs("limits:\n", f);
	put_limit(f, s, "pids", s->perm.process ? PIDS_PROCESS : PIDS_NO_PROCESS);
	put_limit(f, s, "wall", "none");
	put_limit(f, s, "cpu_time", "none");
	json_object_foreach(s->limits, key, v)
	{
		bool done = false;

		for (size_t i = 0; i < PDK_ARRAY_SIZE(own); i++)
			done = done || strcmp(key, own[i]) == 0;
		if (!done && json_is_string(v) &&
		    strspn(key, "abcdefghijklmnopqrstuvwxyz_") == strlen(key)) {
			fprintf(f, "  %s: ", key);
			put_quoted(f, json_string_value(v));
			fputc('\n', f);
		}
	}
}

char *pdk_gw_profile_yaml(const struct pdk_gw_server *s)
{
	struct out o = {0};
	_cleanup_free_ char *name = pdk_xasprintf("gateway-%s", s->id ? s->id : "server");

	o.f = open_memstream(&o.text, &o.len);
	if (o.f == NULL)
		pdk_oom();
	fputs("# The sandbox of a gateway server, from its permission manifest.\n", o.f);
	fputs("extends: strict\nname: ", o.f);
	put_quoted(o.f, name);
	fputc('\n', o.f);
	if (s->image != NULL) {
		fputs("image: ", o.f);
		put_quoted(o.f, s->image);
		fputc('\n', o.f);
	}
	put_filesystem(o.f, s);
	put_network(o.f, s);
	put_env(o.f, s);
	put_limits(o.f, s);
	if (fclose(o.f) != 0)
		pdk_oom();
	return o.text;
}
