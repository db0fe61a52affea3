#include "common.h"
#include "mount.h"
#include "policy.h"
#include "util.h"
#include "test-helpers.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* The plan of `s`, which must be made, as text (one operation a line) for assertions. */
static char *plan_text(const struct pdk_mount_spec *s)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_mount_plan *plan = pdk_mount_plan_new(s, NULL, &err);
	struct pdk_test_text t;

	cr_assert_not_null(plan, "%s", err ? err->msg : "");
	pdk_mount_plan_print(plan, pdk_test_text_open(&t));
	pdk_mount_plan_free(plan);
	return pdk_test_text_take(&t);
}

static struct pdk_policy *policy(void)
{
	struct pdk_error *err = NULL;
	struct pdk_policy *p = pdk_policy_load("default", NULL, NULL, &err);

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
	struct pdk_mount_spec s;
	char *text;

	cr_assert_not_null(mkdtemp(dir));
	s = spec_for(p, dir);
	text = plan_text(&s);
	cr_assert_geq(line_of(text, "tmpfs", "/tmp "), 0, "%s", text);
	cr_assert_gt(line_of(text, "bind", dir), line_of(text, "tmpfs", "/tmp "),
		     "the workspace under /tmp must be mounted after the /tmp tmpfs:\n%s", text);
	cr_assert_gt(line_of(text, "bind", "/dev/null"), line_of(text, "tmpfs", "/dev "), "%s",
		     text);
	cr_assert_gt(line_of(text, "ro-remount", "/proc/sys"), line_of(text, "proc", "/proc"), "%s",
		     text);
	free(text);
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
	struct pdk_mount_spec s = spec_for(p, NULL);
	char *text;
	int first_mask;

	s.ws_mode = PDK_WS_NONE;
	text = plan_text(&s);
	first_mask = line_of(text, "mask", "/");
	cr_assert_geq(first_mask, 0, "the default profile hides /etc/ssl/private:\n%s", text);
	cr_assert_gt(first_mask, last_line_of(text, "bind"), "%s", text);
	free(text);
	pdk_policy_free(p);
}

/*
 * A private directory (the runtime directory) under the workspace, named through a symlink
 * to the workspace's parent: hidden at its place under the workspace, after the bind; one
 * outside every bind adds nothing.
 */
Test(mount, private_dirs_in_a_bind_are_hidden_after_it)
{
	struct pdk_policy *p = policy();
	char dir[] = "/tmp/pdk-mount-XXXXXX";
	_cleanup_free_ char *ws = NULL, *run = NULL, *link = NULL, *named = NULL, *want = NULL;
	char *priv[] = {NULL, "/nowhere/paddock", NULL};
	struct pdk_mount_spec s;
	char *text;

	cr_assert_not_null(mkdtemp(dir));
	ws = pdk_xasprintf("%s/ws", dir);
	run = pdk_xasprintf("%s/ws/run", dir);
	link = pdk_xasprintf("%s/link", dir);
	named = pdk_xasprintf("%s/link/ws/run", dir);
	cr_assert_eq(pdk_mkdir_p(run, NULL), 0);
	cr_assert_eq(symlink(dir, link), 0);
	priv[0] = pdk_paths_canonical(named);
	s = spec_for(p, ws);
	s.ws_mode = PDK_WS_RO;
	s.private_dirs = priv;
	text = plan_text(&s);
	want = pdk_xasprintf("private    %s\n", run);
	cr_assert(strstr(text, want) != NULL, "%s", text);
	cr_assert_gt(line_of(text, "private", run), line_of(text, "bind", ws), "%s", text);
	cr_assert_eq(line_of(text, "private", "/nowhere"), -1, "%s", text);
	free(text);
	free(priv[0]);
	pdk_policy_free(p);
	(void)!pdk_rm_rf_at(AT_FDCWD, dir);
}

Test(mount, symlinked_system_dirs_are_replicated_as_symlinks)
{
	struct pdk_policy *p = policy();
	struct pdk_mount_spec s = spec_for(p, NULL);
	struct stat st;
	char *text;

	if (lstat("/bin", &st) < 0 || !S_ISLNK(st.st_mode))
		cr_skip_test("/bin is not a symlink on this system (no merged /usr)");
	s.ws_mode = PDK_WS_NONE;
	text = plan_text(&s);
	cr_assert_geq(line_of(text, "symlink", "/bin"), 0, "%s", text);
	cr_assert_eq(line_of(text, "bind", "/bin "), -1, "%s", text);
	free(text);
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
	struct pdk_mount_spec s = spec_for(p, NULL);
	char *text;

	s.ws_mode = PDK_WS_NONE;
	text = plan_text(&s);
	cr_assert_geq(line_of(text, "file", "/etc/passwd"), 0, "%s", text);
	cr_assert_geq(line_of(text, "file", "/etc/group"), 0, "%s", text);
	cr_assert_geq(line_of(text, "file", "/etc/hostname"), 0, "%s", text);
	cr_assert_eq(line_of(text, "bind", "/etc/shadow"), -1, "%s", text);
	free(text);
	pdk_policy_free(p);
}

/*
 * An image being built: its writable layer is the caller's directory, and
 * paddock writes none of its own files (/etc/hostname, /etc/hosts,
 * /etc/resolv.conf) into the root, where they would become the step's layer.
 */
Test(mount, image_being_built_keeps_its_writable_layer_and_gets_no_files)
{
	struct pdk_policy *p = policy();
	struct pdk_mount_spec s = spec_for(p, NULL);
	char *const layers[] = {"/state/layers/b/root", "/state/layers/a/root", NULL};
	char *text;

	s.ws_mode = PDK_WS_NONE;
	s.own_net = true;
	s.root_layers = layers;
	text = plan_text(&s);
	cr_assert_geq(line_of(text, "file", "/etc/hostname"), 0, "%s", text);
	cr_assert_eq(line_of(text, "image-rw", "/"), -1, "%s", text);
	free(text);
	s.root_rw_dir = "/state/images/build/tmp/x";
	text = plan_text(&s);
	cr_assert_geq(line_of(text, "image-rw", "/ <- /state/images/build/tmp/x"), 0, "%s", text);
	cr_assert_eq(line_of(text, "file", "/etc/hostname"), -1, "%s", text);
	cr_assert_eq(line_of(text, "file", "/etc/hosts"), -1, "%s", text);
	cr_assert_eq(line_of(text, "file", "/etc/resolv.conf"), -1, "%s", text);
	cr_assert_gt(line_of(text, "tmpfs", "/tmp "), 0, "%s", text);
	free(text);
	pdk_policy_free(p);
}

Test(mount, image_being_built_needs_an_absolute_writable_layer)
{
	struct pdk_policy *p = policy();
	struct pdk_mount_spec s = spec_for(p, NULL);
	char *const layers[] = {"/l", NULL};
	_cleanup_error_ struct pdk_error *err = NULL;

	s.ws_mode = PDK_WS_NONE;
	s.root_layers = layers;
	s.root_rw_dir = "relative/x";
	cr_assert_null(pdk_mount_plan_new(&s, NULL, &err));
	cr_assert_not_null(strstr(err->msg, "the writable layer 'relative/x'"), "%s", err->msg);
	pdk_policy_free(p);
}

Test(mount, file_binds_land_read_only_on_top_of_their_directory)
{
	struct pdk_error *err = NULL;
	struct pdk_policy *p = policy();
	char *files[] = {"/run/scratch/ca-bundle.crt", "/etc/ssl/certs/ca-certificates.crt", NULL};
	char *relative[] = {"scratch/ca-bundle.crt", "/etc/ssl/certs/x.crt", NULL};
	struct pdk_mount_spec s = spec_for(p, NULL);
	char *text;

	s.ro_files = files;
	text = plan_text(&s);
	cr_assert_not_null(strstr(text, "bind       /etc/ssl/certs/ca-certificates.crt <- "
					"/run/scratch/ca-bundle.crt\n"),
			   "%s", text);
	/* After the bind of /etc/ssl that it covers. */
	cr_assert_gt(line_of(text, "bind", "/etc/ssl/certs/ca-certificates.crt"),
		     line_of(text, "bind", "/etc/ssl"), "%s", text);
	free(text);
	s.ro_files = relative;
	cr_assert_null(pdk_mount_plan_new(&s, NULL, &err));
	cr_assert_not_null(strstr(err->msg, "not absolute"), "%s", err->msg);
	pdk_error_free(&err);
	pdk_policy_free(p);
}

/* ---- a file bind whose destination is a symlink (pdk__mount_file_target_at) ---- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Remove a scratch root (nothing may be mounted in it). */
static void rm_root(const char *root)
{
	cr_assert_eq(nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0, "remove %s", root);
}

/* A scratch "root" with etc/ssl/certs/ in it; *root is its path (caller frees). */
static int fake_root(char **root)
{
	char tmpl[] = "/tmp/pdk-mount-root-XXXXXX";
	_cleanup_free_ char *certs = NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	int fd;

	cr_assert_not_null(mkdtemp(tmpl));
	*root = pdk_xstrdup(tmpl);
	certs = pdk_xasprintf("%s/etc/ssl/certs", tmpl);
	cr_assert_eq(pdk_mkdir_p(certs, &err), 0);
	fd = open(tmpl, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	return fd;
}

static void put_file(const char *root, const char *rel, const char *text)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", root, rel);
	_cleanup_free_ char *dir = pdk_xstrdup(path);
	_cleanup_error_ struct pdk_error *err = NULL;
	FILE *f;

	*strrchr(dir, '/') = '\0';
	cr_assert_eq(pdk_mkdir_p(dir, &err), 0);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

static void put_link(const char *root, const char *rel, const char *target)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", root, rel);

	cr_assert_eq(symlink(target, path), 0, "symlink %s: %s", path, strerror(errno));
}

/* Is the O_PATH fd the file root/rel? */
static bool same_file(int fd, const char *root, const char *rel)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", root, rel);
	struct stat a, b;

	cr_assert_eq(fstat(fd, &a), 0);
	if (stat(path, &b) < 0)
		return false;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino && S_ISREG(b.st_mode);
}

#define BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* The file pdk__mount_file_target_at() opens for `path` is root/rel. */
static void expect_target(int rfd, const char *root, const char *path, const char *rel)
{
	int fd = pdk__mount_file_target_at(rfd, path);

	cr_assert_geq(fd, 0, "%s", strerror(-fd));
	cr_assert(same_file(fd, root, rel), "%s: not %s in the root", path, rel);
	(void)close(fd);
}

Test(mount, file_target_absolute_link_resolves_inside_the_root)
{
	_cleanup_free_ char *root = NULL;
	int rfd = fake_root(&root);

	put_file(root, "etc/pki/tls/certs/ca-bundle.crt", "inside");
	put_link(root, "etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt");
	expect_target(rfd, root, BUNDLE, "etc/pki/tls/certs/ca-bundle.crt");
	(void)close(rfd);
	rm_root(root);
}

Test(mount, file_target_dangling_link_creates_the_file_inside_the_root)
{
	_cleanup_free_ char *root = NULL;
	_cleanup_free_ char *host = pdk_xasprintf("/tmp/pdk-mount-escape-%d", (int)getpid());
	_cleanup_free_ char *up = pdk_xasprintf("../../../../../../../../..%s", host);
	int rfd = fake_root(&root);
	int fd;
	struct stat st;

	/* Nothing at the target (on a Debian host /etc/pki does not exist either). */
	put_link(root, "etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt");
	fd = pdk__mount_file_target_at(rfd, BUNDLE);
	cr_assert_geq(fd, 0, "%s", strerror(-fd));
	cr_assert(same_file(fd, root, "etc/pki/tls/certs/ca-bundle.crt"), "created in the root");
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_size, 0);
	(void)close(fd);

	/* SECURITY: ".." past the root stays in it; the host's /tmp gets nothing. */
	(void)unlink(host);
	put_link(root, "etc/ssl/certs/escape", up);
	fd = pdk__mount_file_target_at(rfd, "etc/ssl/certs/escape");
	cr_assert_geq(fd, 0, "%s", strerror(-fd));
	cr_assert(same_file(fd, root, host + 1), "the file is made at ROOT%s", host);
	cr_assert_eq(lstat(host, &st), -1, "nothing was made on the host at %s", host);
	(void)close(fd);
	(void)close(rfd);
	rm_root(root);
}

Test(mount, file_target_relative_chain_loop_and_directory)
{
	_cleanup_free_ char *root = NULL;
	int rfd = fake_root(&root);

	put_file(root, "etc/ssl/real/bundle.pem", "x");
	put_link(root, "etc/ssl/certs/a", "b");
	put_link(root, "etc/ssl/certs/b", "../real/bundle.pem");
	expect_target(rfd, root, "/etc/ssl/certs/a", "etc/ssl/real/bundle.pem");
	put_link(root, "etc/ssl/certs/loop1", "loop2");
	put_link(root, "etc/ssl/certs/loop2", "loop1");
	cr_assert_eq(pdk__mount_file_target_at(rfd, "etc/ssl/certs/loop1"), -ELOOP);
	put_link(root, "etc/ssl/certs/dir", "/etc/ssl/real");
	cr_assert_eq(pdk__mount_file_target_at(rfd, "etc/ssl/certs/dir"), -EINVAL);
	(void)close(rfd);
	rm_root(root);
}

/* The bind itself, in a mount namespace of this test's own (each test is a process). */
Test(mount, file_bind_onto_a_symlinked_bundle_is_read_only)
{
	_cleanup_free_ char *root = NULL;
	_cleanup_free_ char *src = NULL;
	_cleanup_free_ char *via = NULL;
	_cleanup_free_ char *text = NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	int rfd = fake_root(&root);
	int fd;

	put_file(root, "src/bundle", "the sandbox's bundle\n");
	src = pdk_xasprintf("%s/src/bundle", root);
	put_link(root, "etc/ssl/certs/ca-certificates.crt", "/etc/pki/ca-bundle.crt");
	cr_assert_eq(unshare(geteuid() == 0 ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS), 0,
		     "unshare: %s", strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	/* The root fd must belong to this mount namespace (move_mount refuses another's). */
	(void)close(rfd);
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(rfd, 0);
	fd = pdk__mount_file_target_at(rfd, BUNDLE);
	cr_assert_geq(fd, 0, "%s", strerror(-fd));
	cr_assert_eq(pdk__mount_bind_onto(src, fd, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID), 0,
		     "bind: %s", strerror(errno));
	(void)close(fd);
	via = pdk_xasprintf("%s/etc/pki/ca-bundle.crt", root);
	cr_assert_eq(pdk_read_file_at(AT_FDCWD, via, 4096, &text, &err), 0);
	cr_assert_str_eq(text, "the sandbox's bundle\n", "the link's target shows the bound file");
	cr_assert_eq(open(via, O_WRONLY | O_CLOEXEC), -1);
	cr_assert_eq(errno, EROFS, "the bound bundle is read-only (%s)", strerror(errno));
	(void)close(rfd);
	cr_assert_eq(umount2(via, MNT_DETACH), 0);
	rm_root(root);
}
