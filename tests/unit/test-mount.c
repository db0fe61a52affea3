#include "common.h"
#include "mount.h"
#include "policy.h"
#include "util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Render the plan as text (one operation a line) for assertions. */
static char *plan_text(const struct pdk_mount_plan *plan)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	pdk_mount_plan_print(plan, f);
	fclose(f);
	return buf;
}

static struct pdk_policy *policy(void)
{
	struct pdk_error *err = NULL;
	struct pdk_policy *p = pdk_policy_load("default", NULL, &err);

	cr_assert_not_null(p, "%s", err ? err->msg : "");
	return p;
}

static struct pdk_mount_spec spec_for(struct pdk_policy *p, const char *ws)
{
	struct pdk_mount_spec s = {
		.policy = p,
		.workspace = ws,
		.ws_mode = PDK_WS_RW,
		.uid = 1000,
		.gid = 1000,
		.user_name = "alice",
		.hostname = "paddock",
	};
	return s;
}

/* Line index of the first line that starts with `kind` and names `path`, or -1. */
static int line_of(const char *text, const char *kind, const char *path)
{
	int n = 0;

	for (const char *s = text; *s != '\0'; n++) {
		const char *nl = strchr(s, '\n');
		size_t len = nl ? (size_t)(nl - s) : strlen(s);
		char line[512];

		snprintf(line, sizeof(line), "%.*s", (int)len, s);
		if (strncmp(line, kind, strlen(kind)) == 0 && strstr(line, path) != NULL)
			return n;
		s = nl ? nl + 1 : s + len;
	}
	return -1;
}

Test(mount, tmpfs_before_workspace_under_it)
{
	struct pdk_policy *p = policy();
	char dir[] = "/tmp/pdk-mount-XXXXXX";
	struct pdk_error *err = NULL;
	struct pdk_mount_spec s;
	struct pdk_mount_plan *plan;
	char *text;

	cr_assert_not_null(mkdtemp(dir));
	s = spec_for(p, dir);
	plan = pdk_mount_plan_new(&s, NULL, &err);
	cr_assert_not_null(plan, "%s", err ? err->msg : "");
	text = plan_text(plan);
	cr_assert_geq(line_of(text, "tmpfs", "/tmp "), 0, "%s", text);
	cr_assert_gt(line_of(text, "bind", dir), line_of(text, "tmpfs", "/tmp "),
		     "the workspace under /tmp must be mounted after the /tmp tmpfs:\n%s", text);
	cr_assert_gt(line_of(text, "bind", "/dev/null"), line_of(text, "tmpfs", "/dev "), "%s",
		     text);
	cr_assert_gt(line_of(text, "ro-remount", "/proc/sys"), line_of(text, "proc", "/proc"), "%s",
		     text);
	free(text);
	pdk_mount_plan_free(plan);
	pdk_policy_free(p);
	rmdir(dir);
}

/* Line index of the last line that starts with `kind`, or -1. */
static int last_line_of(const char *text, const char *kind)
{
	int n = 0, last = -1;

	for (const char *s = text; *s != '\0'; n++) {
		const char *nl = strchr(s, '\n');

		if (strncmp(s, kind, strlen(kind)) == 0)
			last = n;
		if (nl == NULL)
			break;
		s = nl + 1;
	}
	return last;
}

Test(mount, masks_come_last)
{
	struct pdk_policy *p = policy();
	struct pdk_error *err = NULL;
	struct pdk_mount_spec s = spec_for(p, NULL);
	struct pdk_mount_plan *plan;
	char *text;
	int first_mask;

	s.ws_mode = PDK_WS_NONE;
	plan = pdk_mount_plan_new(&s, NULL, &err);
	cr_assert_not_null(plan);
	text = plan_text(plan);
	first_mask = line_of(text, "mask", "/");
	cr_assert_geq(first_mask, 0, "the default profile hides /etc/ssl/private:\n%s", text);
	cr_assert_gt(first_mask, last_line_of(text, "bind"), "%s", text);
	free(text);
	pdk_mount_plan_free(plan);
	pdk_policy_free(p);
}

Test(mount, symlinked_system_dirs_are_replicated_as_symlinks)
{
	struct pdk_policy *p = policy();
	struct pdk_error *err = NULL;
	struct pdk_mount_spec s = spec_for(p, NULL);
	struct pdk_mount_plan *plan;
	struct stat st;
	char *text;

	if (lstat("/bin", &st) < 0 || !S_ISLNK(st.st_mode))
		cr_skip_test("/bin is not a symlink on this system (no merged /usr)");
	s.ws_mode = PDK_WS_NONE;
	plan = pdk_mount_plan_new(&s, NULL, &err);
	cr_assert_not_null(plan);
	text = plan_text(plan);
	cr_assert_geq(line_of(text, "symlink", "/bin"), 0, "%s", text);
	cr_assert_eq(line_of(text, "bind", "/bin "), -1, "%s", text);
	free(text);
	pdk_mount_plan_free(plan);
	pdk_policy_free(p);
}

Test(mount, missing_workspace_is_an_error_naming_it)
{
	struct pdk_policy *p = policy();
	struct pdk_error *err = NULL;
	struct pdk_mount_spec s = spec_for(p, "/nonexistent/workspace");

	cr_assert_null(pdk_mount_plan_new(&s, NULL, &err));
	cr_assert_not_null(strstr(err->msg, "/nonexistent/workspace"), "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, "workspace"), "%s", err->msg);
	pdk_error_free(&err);
	pdk_policy_free(p);
}

Test(mount, extra_binds_must_be_absolute_and_exist)
{
	struct pdk_policy *p = policy();
	struct pdk_error *err = NULL;
	struct pdk_mount_spec s = spec_for(p, NULL);
	char *rel[] = {"relative/path", NULL};
	char *missing[] = {"/nonexistent-extra", NULL};

	s.ws_mode = PDK_WS_NONE;
	s.extra_ro = rel;
	cr_assert_null(pdk_mount_plan_new(&s, NULL, &err));
	cr_assert_not_null(strstr(err->msg, "not an absolute path"), "%s", err->msg);
	pdk_error_free(&err);
	s.extra_ro = missing;
	cr_assert_null(pdk_mount_plan_new(&s, NULL, &err));
	cr_assert_not_null(strstr(err->msg, "/nonexistent-extra"), "%s", err->msg);
	pdk_error_free(&err);
	pdk_policy_free(p);
}

Test(mount, identity_files_are_generated)
{
	struct pdk_policy *p = policy();
	struct pdk_error *err = NULL;
	struct pdk_mount_spec s = spec_for(p, NULL);
	struct pdk_mount_plan *plan;
	char *text;

	s.ws_mode = PDK_WS_NONE;
	plan = pdk_mount_plan_new(&s, NULL, &err);
	cr_assert_not_null(plan);
	text = plan_text(plan);
	cr_assert_geq(line_of(text, "file", "/etc/passwd"), 0, "%s", text);
	cr_assert_geq(line_of(text, "file", "/etc/group"), 0, "%s", text);
	cr_assert_geq(line_of(text, "file", "/etc/hostname"), 0, "%s", text);
	cr_assert_eq(line_of(text, "bind", "/etc/shadow"), -1, "%s", text);
	free(text);
	pdk_mount_plan_free(plan);
	pdk_policy_free(p);
}

Test(mount, file_binds_land_read_only_on_top_of_their_directory)
{
	struct pdk_error *err = NULL;
	struct pdk_policy *p = policy();
	char *files[] = {"/run/scratch/ca-bundle.crt", "/etc/ssl/certs/ca-certificates.crt", NULL};
	char *relative[] = {"scratch/ca-bundle.crt", "/etc/ssl/certs/x.crt", NULL};
	struct pdk_mount_spec s = spec_for(p, NULL);
	struct pdk_mount_plan *plan;
	char *text;

	s.ro_files = files;
	plan = pdk_mount_plan_new(&s, NULL, &err);
	cr_assert_not_null(plan, "%s", err ? err->msg : "");
	text = plan_text(plan);
	cr_assert_not_null(strstr(text, "bind       /etc/ssl/certs/ca-certificates.crt <- "
					"/run/scratch/ca-bundle.crt\n"),
			   "%s", text);
	/* After the bind of /etc/ssl that it covers. */
	cr_assert_gt(line_of(text, "bind", "/etc/ssl/certs/ca-certificates.crt"),
		     line_of(text, "bind", "/etc/ssl"), "%s", text);
	free(text);
	pdk_mount_plan_free(plan);
	s.ro_files = relative;
	cr_assert_null(pdk_mount_plan_new(&s, NULL, &err));
	cr_assert_not_null(strstr(err->msg, "not absolute"), "%s", err->msg);
	pdk_error_free(&err);
	pdk_policy_free(p);
}
