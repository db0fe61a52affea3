/*
 * Change-set storage and diff, without a sandbox: the tests write layers by
 * hand in overlayfs' format (0:0 whiteouts, user.overlay.opaque="y") and
 * check what pdk_ws_diff() makes of them, across snapshots.
 */
#include "common.h"
#include "json.h"
#include "util.h"
#include "workspace.h"
#include "test-helpers.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

struct fx {
	char root[64];
	char *ws;
	char *state;
	struct pdk_ws *set;
};

static void put(const char *dir, const char *rel, const char *content)
{
	_cleanup_free_ char *p = pdk_xasprintf("%s/%s", dir, rel);
	FILE *f = fopen(p, "w");

	cr_assert_not_null(f, "fopen %s", p);
	fputs(content, f);
	fclose(f);
}

static void mkd(const char *dir, const char *rel)
{
	_cleanup_free_ char *p = pdk_xasprintf("%s/%s", dir, rel);

	cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
}

static void whiteout(const char *dir, const char *rel)
{
	_cleanup_free_ char *p = pdk_xasprintf("%s/%s", dir, rel);

	cr_assert_eq(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0, "whiteout %s: %s", p,
		     strerror(errno));
}

static void opaque(const char *dir, const char *rel)
{
	_cleanup_free_ char *p = pdk_xasprintf("%s/%s", dir, rel);

	cr_assert_eq(setxattr(p, "user.overlay.opaque", "y", 1, 0), 0, "%s", strerror(errno));
}

static void setup_fx(struct fx *f)
{
	struct pdk_error *err = NULL;

	memset(f, 0, sizeof(*f));
	strcpy(f->root, "/tmp/pdk-ws-XXXXXX");
	cr_assert_not_null(mkdtemp(f->root));
	f->ws = pdk_xasprintf("%s/ws", f->root);
	f->state = pdk_xasprintf("%s/state", f->root);
	cr_assert_eq(mkdir(f->ws, 0755), 0);
	/* The host directory. */
	put(f->ws, "same", "same\n");
	put(f->ws, "mod", "old\n");
	put(f->ws, "chm", "x\n");
	put(f->ws, "gone", "bye\n");
	put(f->ws, "touched", "t\n");
	mkd(f->ws, "tree");
	mkd(f->ws, "tree/sub");
	put(f->ws, "tree/sub/leaf", "l\n");
	put(f->ws, "tree/top", "t\n");
	mkd(f->ws, "op");
	put(f->ws, "op/old1", "1\n");
	put(f->ws, "op/kept", "k\n");
	put(f->ws, "f2d", "file\n");
	cr_assert_eq(symlink("same", pdk_test_path(f->ws, "ln")), 0);
	cr_assert_eq(pdk_ws_create(f->state, f->ws, NULL, 0, NULL, &f->set, &err), 0, "%s",
		     err ? err->msg : "");
}

static void teardown_fx(struct fx *f)
{
	pdk_ws_free(f->set);
	(void)!pdk_rm_rf_at(AT_FDCWD, f->root);
	free(f->ws);
	free(f->state);
}

static const struct pdk_ws_change *find(const struct pdk_ws_diff *d, const char *path)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->v[i].path, path) == 0)
			return &d->v[i];
	return NULL;
}

static enum pdk_ws_kind kind_of(const struct pdk_ws_diff *d, const char *path)
{
	const struct pdk_ws_change *c = find(d, path);

	cr_assert_not_null(c, "no change for '%s'", path);
	return c->kind;
}

Test(workspace, diff_reads_overlay_format)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws_diff d;
	const char *up;

	setup_fx(&f);
	up = pdk_ws_upper_path(f.set);
	put(up, "mod", "new content\n");
	put(up, "chm", "x\n");
	cr_assert_eq(chmod(pdk_test_path(up, "chm"), 0700), 0);
	put(up, "touched", "t\n"); /* copied up, nothing changed */
	put(up, "same", "same\n");
	whiteout(up, "gone");
	whiteout(up, "tree");
	mkd(up, "op");
	opaque(up, "op");
	put(up, "op/kept", "k\n");
	put(up, "op/new", "n\n");
	mkd(up, "f2d");
	opaque(up, "f2d");
	put(up, "f2d/in", "i\n");
	put(up, "added", "a\n");
	cr_assert_eq(pdk_ws_diff(f.set, 0, PDK_WS_CURRENT, &d, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(kind_of(&d, "mod"), PDK_WS_MODIFIED);
	cr_assert_eq(find(&d, "mod")->size, 12);
	cr_assert_eq(find(&d, "mod")->old_size, 4);
	cr_assert_eq(kind_of(&d, "chm"), PDK_WS_MODE);
	cr_assert_eq(find(&d, "chm")->mode & 07777, 0700);
	cr_assert_null(find(&d, "touched"), "a copy-up without changes is no change");
	cr_assert_null(find(&d, "same"));
	cr_assert_eq(kind_of(&d, "gone"), PDK_WS_DELETED);
	cr_assert_eq(kind_of(&d, "tree"), PDK_WS_DELETED);
	cr_assert_eq(kind_of(&d, "tree/sub"), PDK_WS_DELETED);
	cr_assert_eq(kind_of(&d, "tree/sub/leaf"), PDK_WS_DELETED);
	cr_assert_eq(kind_of(&d, "tree/top"), PDK_WS_DELETED);
	cr_assert_eq(kind_of(&d, "op/old1"), PDK_WS_DELETED, "opaque dir hides the old entry");
	cr_assert_null(find(&d, "op/kept"), "same content under an opaque dir is no change");
	cr_assert_eq(kind_of(&d, "op/new"), PDK_WS_ADDED);
	cr_assert_eq(kind_of(&d, "f2d"), PDK_WS_REPLACED);
	cr_assert(S_ISDIR(find(&d, "f2d")->mode) && S_ISREG(find(&d, "f2d")->old_mode));
	cr_assert_eq(kind_of(&d, "f2d/in"), PDK_WS_ADDED);
	cr_assert_eq(kind_of(&d, "added"), PDK_WS_ADDED);
	cr_assert_eq(d.n, 12, "changes: %zu", d.n);
	/* A directory comes before its entries. */
	for (size_t i = 0; i < d.n; i++) {
		const char *slash = strrchr(d.v[i].path, '/');

		for (size_t j = i + 1; slash != NULL && j < d.n; j++)
			cr_assert(!(strlen(d.v[j].path) == (size_t)(slash - d.v[i].path) &&
				    strncmp(d.v[j].path, d.v[i].path, strlen(d.v[j].path)) == 0),
				  "'%s' comes after its entry '%s'", d.v[j].path, d.v[i].path);
	}
	pdk_ws_diff_release(&d);
	teardown_fx(&f);
}

Test(workspace, symlinks_and_renames)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws_diff d;
	const char *up;
	const struct pdk_ws_change *c;

	setup_fx(&f);
	up = pdk_ws_upper_path(f.set);
	cr_assert_eq(symlink("mod", pdk_test_path(up, "ln")), 0); /* retargeted */
	whiteout(up, "gone");
	put(up, "renamed", "bye\n"); /* gone's content */
	cr_assert_eq(symlink("/etc/passwd", pdk_test_path(up, "evil")), 0);
	cr_assert_eq(pdk_ws_diff(f.set, 0, PDK_WS_CURRENT, &d, &err), 0);
	c = find(&d, "ln");
	cr_assert_not_null(c);
	cr_assert_eq(c->kind, PDK_WS_MODIFIED);
	cr_assert_str_eq(c->link, "mod");
	c = find(&d, "renamed");
	cr_assert_not_null(c);
	cr_assert_str_eq(c->renamed_from, "gone");
	cr_assert_eq(kind_of(&d, "gone"), PDK_WS_DELETED);
	cr_assert_str_eq(find(&d, "evil")->link, "/etc/passwd");
	cr_assert(S_ISLNK(find(&d, "evil")->mode));
	pdk_ws_diff_release(&d);
	teardown_fx(&f);
}

/* A listing of the merged view at `top`, computed from the diff against 0. */
static char *view_summary(struct pdk_ws *set, unsigned to)
{
	struct pdk_error *err = NULL;
	struct pdk_ws_diff d;
	struct pdk_test_text t;
	FILE *out = pdk_test_text_open(&t);

	cr_assert_eq(pdk_ws_diff(set, 0, to, &d, &err), 0, "%s", err ? err->msg : "");
	for (size_t i = 0; i < d.n; i++)
		fprintf(out, "%s %s %o %llu\n", d.v[i].path, pdk_ws_kind_name(d.v[i].kind),
			(unsigned)d.v[i].mode, (unsigned long long)d.v[i].size);
	pdk_ws_diff_release(&d);
	return pdk_test_text_take(&t);
}

Test(workspace, snapshots_stack_and_roll_back)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws_diff d;
	char *s1, *s2, *again;
	const char *up;

	setup_fx(&f);
	up = pdk_ws_upper_path(f.set);
	put(up, "a1", "first\n");
	whiteout(up, "gone");
	s1 = view_summary(f.set, PDK_WS_CURRENT);
	cr_assert_eq(pdk_ws_snapshot(f.set, &err), 1, "%s", err ? err->msg : "");
	up = pdk_ws_upper_path(f.set);
	put(up, "gone", "back again\n"); /* over a whiteout of a lower snapshot */
	whiteout(up, "a1");
	put(up, "a2", "second\n");
	mkd(up, "tree");
	opaque(up, "tree");
	s2 = view_summary(f.set, PDK_WS_CURRENT);
	cr_assert_str_neq(s1, s2);
	/* Between snapshot 1 and now. */
	cr_assert_eq(pdk_ws_diff(f.set, 1, PDK_WS_CURRENT, &d, &err), 0);
	cr_assert_eq(kind_of(&d, "a1"), PDK_WS_DELETED);
	cr_assert_eq(kind_of(&d, "gone"), PDK_WS_ADDED);
	cr_assert_eq(kind_of(&d, "a2"), PDK_WS_ADDED);
	cr_assert_eq(kind_of(&d, "tree/sub"), PDK_WS_DELETED, "opaque dir in layer 2");
	cr_assert_eq(kind_of(&d, "tree/sub/leaf"), PDK_WS_DELETED);
	cr_assert_null(find(&d, "mod"), "unchanged since the snapshot");
	pdk_ws_diff_release(&d);
	/* The diff of snapshot 1 against the directory is what it was then. */
	again = view_summary(f.set, 1);
	cr_assert_str_eq(again, s1);
	free(again);
	cr_assert_eq(pdk_ws_snapshot(f.set, &err), 2);
	cr_assert_eq(pdk_ws_snapshots(f.set), 2);
	again = view_summary(f.set, PDK_WS_CURRENT);
	cr_assert_str_eq(again, s2, "a snapshot changes nothing in the view");
	free(again);
	cr_assert_eq(pdk_ws_rollback(f.set, 1, &err), 0, "%s", err ? err->msg : "");
	again = view_summary(f.set, PDK_WS_CURRENT);
	cr_assert_str_eq(again, s1, "rollback to 1 gives snapshot 1's view");
	free(again);
	cr_assert_eq(pdk_ws_rollback(f.set, 0, &err), 0);
	cr_assert_eq(pdk_ws_diff(f.set, 0, PDK_WS_CURRENT, &d, &err), 0);
	cr_assert_eq(d.n, 0, "rollback to 0: no change left");
	pdk_ws_diff_release(&d);
	cr_assert_lt(pdk_ws_rollback(f.set, 3, &err), 0);
	cr_assert_not_null(strstr(err->msg, "has no snapshot 3 (it has 0)"), "%s", err->msg);
	pdk_error_free(&err);
	free(s1);
	free(s2);
	teardown_fx(&f);
}

/* A snapshot copied from an upper layer that stays mounted (a running sandbox). */
Test(workspace, copied_snapshot_leaves_the_upper_layer)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws *again = NULL;
	struct pdk_ws_diff d;
	char *s1, *s2, *v, *layer;
	char **lower;
	const char *up;
	struct stat st, st2;
	char note[3000], got[4096];

	setup_fx(&f);
	up = pdk_ws_upper_path(f.set);
	put(up, "new", "n\n");
	put(up, "mod", "new content\n");
	whiteout(up, "gone");
	mkd(up, "op");
	opaque(up, "op");
	put(up, "op/fresh", "f\n");
	cr_assert_eq(chmod(pdk_test_path(up, "new"), 0), 0);
	memset(note, 'x', sizeof(note));
	cr_assert_eq(setxattr(pdk_test_path(up, "mod"), "user.note", note, sizeof(note), 0), 0,
		     "%s", strerror(errno));
	cr_assert_eq(chmod(pdk_test_path(up, "op"), 02750), 0);
	cr_assert_eq(stat(pdk_test_path(up, "mod"), &st), 0);
	s1 = view_summary(f.set, PDK_WS_CURRENT);
	cr_assert_eq(pdk_ws_snapshot_copy(f.set, &err), 1, "%s", err ? err->msg : "");
	layer = pdk_xasprintf("%s/layers/1", pdk_ws_dir(f.set));
	cr_assert_eq(stat(pdk_test_path(layer, "mod"), &st2), 0);
	cr_assert(st2.st_mtim.tv_sec == st.st_mtim.tv_sec &&
			  st2.st_mtim.tv_nsec == st.st_mtim.tv_nsec,
		  "the copy keeps the modification time");
	cr_assert_eq(getxattr(pdk_test_path(layer, "mod"), "user.note", got, sizeof(got)),
		     (ssize_t)sizeof(note), "the copy keeps a user attribute of %zu bytes",
		     sizeof(note));
	cr_assert_eq(stat(pdk_test_path(layer, "op"), &st2), 0);
	cr_assert_eq(st2.st_mode & 07777, 02750, "the copy keeps a directory's set-gid mode");
	free(layer);
	cr_assert_eq(stat(pdk_test_path(up, "new"), &st), 0, "the upper layer stays where it is");
	cr_assert_eq(st.st_mode & 07777, 0, "and as the agent left it");
	v = view_summary(f.set, 1);
	cr_assert_str_eq(v, s1, "snapshot 1 is the view at the copy");
	free(v);
	v = view_summary(f.set, PDK_WS_CURRENT);
	cr_assert_str_eq(v, s1, "the view is unchanged by the copy");
	free(v);
	cr_assert_eq(pdk_ws_diff(f.set, 1, PDK_WS_CURRENT, &d, &err), 0);
	cr_assert_eq(d.n, 0, "nothing changed since the copy");
	pdk_ws_diff_release(&d);
	lower = pdk_ws_lower_paths(f.set);
	cr_assert_eq(pdk_strv_len(lower), 1, "the mounted overlay's layers are unchanged");
	cr_assert_str_eq(lower[0], f.ws);
	pdk_strv_free(lower);
	/*
	 * Changes after the copy, as the mounted overlay makes them: a file made
	 * since the host directory is unlinked outright (no lower layer has it).
	 */
	cr_assert_eq(unlink(pdk_test_path(up, "op/fresh")), 0);
	cr_assert_eq(unlink(pdk_test_path(up, "new")), 0);
	put(up, "later", "l\n");
	cr_assert_eq(pdk_ws_diff(f.set, 1, PDK_WS_CURRENT, &d, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(kind_of(&d, "new"), PDK_WS_DELETED,
		     "in the copy only, not in the upper layer");
	cr_assert_eq(kind_of(&d, "op/fresh"), PDK_WS_DELETED, "under an opaque directory");
	cr_assert_eq(kind_of(&d, "later"), PDK_WS_ADDED);
	cr_assert_eq(d.n, 3);
	pdk_ws_diff_release(&d);
	s2 = view_summary(f.set, PDK_WS_CURRENT);
	/* The layers' parents are in the record. */
	cr_assert_eq(pdk_ws_open(f.state, pdk_ws_id(f.set), &again, &err), 0, "%s",
		     err ? err->msg : "");
	v = view_summary(again, 1);
	cr_assert_str_eq(v, s1, "snapshot 1 read back");
	free(v);
	v = view_summary(again, PDK_WS_CURRENT);
	cr_assert_str_eq(v, s2, "the current view read back");
	free(v);
	pdk_ws_free(again);
	/* A snapshot that moves the upper layer stacks it on the layer it was relative to. */
	cr_assert_eq(pdk_ws_snapshot(f.set, &err), 2, "%s", err ? err->msg : "");
	v = view_summary(f.set, 2);
	cr_assert_str_eq(v, s2, "snapshot 2 is the view it froze");
	free(v);
	lower = pdk_ws_lower_paths(f.set);
	cr_assert_eq(pdk_strv_len(lower), 2, "snapshot 2 over the host directory, not over 1");
	cr_assert_str_eq(lower[1], f.ws);
	pdk_strv_free(lower);
	cr_assert_eq(pdk_ws_rollback(f.set, 1, &err), 0, "%s", err ? err->msg : "");
	v = view_summary(f.set, PDK_WS_CURRENT);
	cr_assert_str_eq(v, s1, "rollback to the copy gives its view");
	free(v);
	lower = pdk_ws_lower_paths(f.set);
	cr_assert_eq(pdk_strv_len(lower), 2, "the copy under an empty upper layer");
	pdk_strv_free(lower);
	cr_assert_eq(pdk_ws_rollback(f.set, 0, &err), 0);
	cr_assert_eq(pdk_ws_diff(f.set, 0, PDK_WS_CURRENT, &d, &err), 0);
	cr_assert_eq(d.n, 0, "rollback to 0: no change left");
	pdk_ws_diff_release(&d);
	free(s1);
	free(s2);
	teardown_fx(&f);
}

Test(workspace, open_by_prefix_lock_list_remove)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws *other = NULL, *again = NULL;
	char **ids = NULL;
	char prefix[9];

	setup_fx(&f);
	usleep(2000); /* ids order by millisecond; within one, at random */
	cr_assert_eq(pdk_ws_create(f.state, f.ws, "sb-1", 1 << 20, NULL, &other, &err), 0);
	cr_assert_eq(pdk_ws_list(f.state, &ids, &err), 0);
	cr_assert_eq(pdk_strv_len(ids), 2);
	cr_assert_str_eq(ids[0], pdk_ws_id(f.set), "oldest first");
	pdk_strv_free(ids);
	/* Both ids share their time prefix: a short prefix is ambiguous. */
	memcpy(prefix, pdk_ws_id(other), 4);
	prefix[4] = '\0';
	cr_assert_lt(pdk_ws_open(f.state, prefix, &again, &err), 0);
	cr_assert_eq(err->status, EEXIST);
	pdk_error_free(&err);
	cr_assert_eq(pdk_ws_open(f.state, pdk_ws_id(other), &again, &err), 0);
	cr_assert_str_eq(pdk_ws_sandbox(again), "sb-1");
	cr_assert_eq(pdk_ws_disk_limit(again), 1 << 20);
	cr_assert_str_eq(pdk_ws_workspace(again), f.ws);
	/* `other` holds the lock since its creation. */
	cr_assert_lt(pdk_ws_lock(again, &err), 0);
	cr_assert_eq(err->status, EBUSY);
	pdk_error_free(&err);
	pdk_ws_free(other);
	cr_assert_eq(pdk_ws_lock(again, &err), 0, "free() released the lock");
	cr_assert_eq(pdk_ws_remove(again, &err), 0);
	pdk_ws_free(again);
	/* An interrupted removal is finished by the next listing. */
	cr_assert_eq(
		mkdir(pdk_test_path(f.state, "ws/01a20000-0000-7000-8000-000000000000.removing"),
		      0700),
		0);
	put(f.state, "ws/01a20000-0000-7000-8000-000000000000.removing/meta.json", "{}");
	cr_assert_eq(pdk_ws_list(f.state, &ids, &err), 0);
	cr_assert_eq(pdk_strv_len(ids), 1);
	pdk_strv_free(ids);
	cr_assert_eq(
		access(pdk_test_path(f.state, "ws/01a20000-0000-7000-8000-000000000000.removing"),
		       F_OK),
		-1);
	cr_assert_eq(pdk_ws_open(f.state, pdk_ws_id(f.set), &again, &err), 0, "no sandbox id: %s",
		     err ? err->msg : "");
	cr_assert_null(pdk_ws_sandbox(again));
	pdk_ws_free(again);
	cr_assert_lt(pdk_ws_open(f.state, "zz", &again, &err), 0, "bad id");
	pdk_error_free(&err);
	teardown_fx(&f);
}

Test(workspace, state_inside_workspace_is_refused)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws *set = NULL;
	_cleanup_free_ char *inner = NULL;

	setup_fx(&f);
	inner = pdk_xasprintf("%s/.state", f.ws);
	cr_assert_lt(pdk_ws_create(inner, f.ws, NULL, 0, NULL, &set, &err), 0);
	cr_assert_not_null(strstr(err->msg, "PADDOCK_STATE_DIR"), "%s", err->msg);
	pdk_error_free(&err);
	teardown_fx(&f);
}

Test(workspace, import_keeps_whiteouts_opaque_and_holes)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws_diff d;
	char src[] = "/tmp/pdk-ws-src-XXXXXX";
	_cleanup_free_ char *sparse = NULL;
	_cleanup_free_ char *copied = NULL;
	struct stat st;
	int fd;

	setup_fx(&f);
	cr_assert_not_null(mkdtemp(src));
	whiteout(src, "gone");
	mkd(src, "op");
	opaque(src, "op");
	put(src, "op/new", "n\n");
	cr_assert_eq(symlink("x", pdk_test_path(src, "sl")), 0);
	sparse = pdk_xasprintf("%s/sparse", src);
	fd = open(sparse, O_WRONLY | O_CREAT, 0600);
	cr_assert_eq(pwrite(fd, "end", 3, (off_t)1 << 30), 3);
	close(fd);
	cr_assert_eq(pdk_ws_import_upper(f.set, open(src, O_RDONLY | O_DIRECTORY), &err), 0, "%s",
		     err ? err->msg : "");
	copied = pdk_xasprintf("%s/sparse", pdk_ws_upper_path(f.set));
	cr_assert_eq(stat(copied, &st), 0);
	cr_assert_eq(st.st_size, (1 << 30) + 3);
	cr_assert_lt(st.st_blocks, 64, "holes stay holes (%lld blocks)", (long long)st.st_blocks);
	cr_assert_eq(pdk_ws_diff(f.set, 0, PDK_WS_CURRENT, &d, &err), 0);
	cr_assert_eq(kind_of(&d, "gone"), PDK_WS_DELETED);
	cr_assert_eq(kind_of(&d, "op/old1"), PDK_WS_DELETED);
	cr_assert_eq(kind_of(&d, "op/new"), PDK_WS_ADDED);
	cr_assert_eq(kind_of(&d, "sl"), PDK_WS_ADDED);
	cr_assert_eq(kind_of(&d, "sparse"), PDK_WS_ADDED);
	pdk_ws_diff_release(&d);
	(void)!pdk_rm_rf_at(AT_FDCWD, src);
	teardown_fx(&f);
}

/*
 * What a sandbox wrote, copied onto the host (an imported disk-limited
 * upper layer, a copied snapshot), never holds a set-id file nor a device
 * node other than a whiteout.
 */
Test(workspace, copies_make_no_set_id_file_and_no_device)
{
	struct fx f;
	struct pdk_error *err = NULL;
	char src[] = "/tmp/pdk-ws-src-XXXXXX";
	_cleanup_free_ char *layer = NULL;
	struct stat st;

	setup_fx(&f);
	cr_assert_not_null(mkdtemp(src));
	put(src, "suid", "#!/bin/sh\n");
	put(src, "sgid", "#!/bin/sh\n");
	cr_assert_eq(chmod(pdk_test_path(src, "suid"), 04755), 0);
	cr_assert_eq(chmod(pdk_test_path(src, "sgid"), 02755), 0);
	cr_assert_eq(pdk_ws_import_upper(f.set, open(src, O_RDONLY | O_DIRECTORY), &err), 0, "%s",
		     err ? err->msg : "");
	cr_assert_eq(stat(pdk_test_path(pdk_ws_upper_path(f.set), "suid"), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0755, "import: setuid stripped");
	cr_assert_eq(stat(pdk_test_path(pdk_ws_upper_path(f.set), "sgid"), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0755, "import: setgid stripped");
	cr_assert_eq(chmod(pdk_test_path(pdk_ws_upper_path(f.set), "suid"), 04755), 0);
	cr_assert_eq(pdk_ws_snapshot_copy(f.set, &err), 1, "%s", err ? err->msg : "");
	layer = pdk_xasprintf("%s/layers/1", pdk_ws_dir(f.set));
	cr_assert_eq(stat(pdk_test_path(layer, "suid"), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0755, "snapshot copy: setuid stripped");
	if (geteuid() == 0) {
		cr_assert_eq(mknod(pdk_test_path(pdk_ws_upper_path(f.set), "null"), S_IFCHR | 0666,
				   makedev(1, 3)),
			     0);
		cr_assert_lt(pdk_ws_snapshot_copy(f.set, &err), 0, "a device node is refused");
		cr_assert_not_null(strstr(err->msg, "device node"), "%s", err->msg);
		pdk_error_free(&err);
	}
	(void)!pdk_rm_rf_at(AT_FDCWD, src);
	teardown_fx(&f);
}

Test(workspace, json_and_printing_of_hostile_names)
{
	struct pdk_ws_change c = {
		.path = "bad\377name\n", .kind = PDK_WS_ADDED, .mode = S_IFREG | 0644};
	json_t *j = pdk_ws_change_json(&c);
	struct pdk_test_text t;
	char *buf;

	cr_assert(json_is_null(json_object_get(j, "path")));
	cr_assert_str_eq(json_string_value(json_object_get(j, "path_hex")), "626164ff6e616d650a");
	json_decref(j);
	pdk_ws_print_path(pdk_test_text_open(&t), c.path);
	pdk_ws_print_path(t.f, " plain/é");
	buf = pdk_test_text_take(&t);
	cr_assert_str_eq(buf, "\"bad\\xffname\\n\" plain/é");
	free(buf);
}

/* overlayfs's volatile mark, as a volatile mount leaves it: mode 000 directories. */
static char *make_mark(const struct pdk_ws *set)
{
	_cleanup_free_ char *ww = pdk_xasprintf("%s/work/work", pdk_ws_dir(set));
	_cleanup_free_ char *inc = pdk_xasprintf("%s/incompat", ww);
	char *vol = pdk_xasprintf("%s/volatile", inc);

	cr_assert_eq(mkdir(ww, 0), 0, "%s", strerror(errno));
	cr_assert_eq(mkdir(inc, 0), 0);
	cr_assert_eq(mkdir(vol, 0), 0);
	put(vol, "dirty", "");
	cr_assert_eq(chmod(pdk_test_path(vol, "dirty"), 0), 0);
	cr_assert_eq(chmod(vol, 0), 0);
	return vol;
}

/* The set's meta.json, its "boot_id" replaced by `id` (NULL: left out), the set opened again. */
static struct pdk_ws *reboot_meta(struct fx *f, const char *id)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/meta.json", pdk_ws_dir(f->set));
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ json_t *m = NULL;
	_cleanup_free_ char *out = NULL;
	struct pdk_error *err = NULL;
	struct pdk_ws *again = NULL;
	FILE *fp;

	cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, 1 << 16, &text, &err), 0);
	m = json_loads(text, 0, NULL);
	cr_assert_not_null(m);
	if (id != NULL)
		cr_assert_eq(json_object_set_new(m, "boot_id", json_string(id)), 0);
	else
		(void)json_object_del(m, "boot_id");
	out = json_dumps(m, JSON_COMPACT);
	fp = fopen(path, "w");
	cr_assert_not_null(fp);
	cr_assert_geq(fputs(out, fp), 0);
	cr_assert_eq(fclose(fp), 0);
	cr_assert_eq(pdk_ws_open(f->state, pdk_ws_id(f->set), &again, &err), 0, "%s",
		     err ? err->msg : "");
	return again;
}

/* meta.json's "boot_id" of the set, "" when there is none. */
static char *meta_boot_id(const struct pdk_ws *set)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/meta.json", pdk_ws_dir(set));
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ json_t *m = NULL;
	struct pdk_error *err = NULL;
	const char *v;

	cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, 1 << 16, &text, &err), 0);
	m = json_loads(text, 0, NULL);
	cr_assert_not_null(m);
	v = json_string_value(json_object_get(m, "boot_id"));
	return pdk_xstrdup(v ? v : "");
}

Test(workspace, volatile_mark_killed_crashed_settled)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws *again;
	_cleanup_free_ char *vol = NULL;
	_cleanup_free_ char *ww = NULL;
	struct stat st;

	setup_fx(&f);
	ww = pdk_xasprintf("%s/work/work", pdk_ws_dir(f.set));
	cr_assert_eq(pdk_ws_unsynced(f.set), PDK_WS_SYNCED, "a new set carries no mark");
	cr_assert_eq(pdk_ws_check_synced(f.set, false, true, &err), 0);
	vol = make_mark(f.set);
	cr_assert_eq(pdk_ws_unsynced(f.set), PDK_WS_KILLED, "marked in this boot");
	cr_assert_eq(pdk_ws_check_synced(f.set, false, false, &err), 0,
		     "a killed run's set passes");
	cr_assert_eq(stat(vol, &st), 0, "without `clear` the mark stays");
	/* Mounted in a boot before this one: the machine went down since. */
	again = reboot_meta(&f, "00000000-0000-4000-8000-000000000000");
	pdk_ws_free(f.set);
	f.set = again;
	cr_assert_eq(pdk_ws_unsynced(f.set), PDK_WS_CRASHED);
	cr_assert_lt(pdk_ws_check_synced(f.set, false, true, &err), 0);
	cr_assert_eq(err->status, EUCLEAN);
	cr_assert_not_null(strstr(err->msg, "when the machine went down"), "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, "ws commit --force"), "%s", err->msg);
	pdk_error_free(&err);
	cr_assert_eq(stat(vol, &st), 0, "a refused set keeps its mark");
	cr_assert_eq(pdk_ws_check_synced(f.set, true, true, &err), 0, "forced: %s",
		     err ? err->msg : "");
	cr_assert_eq(pdk_ws_unsynced(f.set), PDK_WS_SYNCED, "cleared");
	cr_assert_eq(stat(ww, &st), 0, "work/work itself stays for the next mount");
	/* Settled: synced and unmarked. */
	cr_assert_eq(rmdir(ww), 0);
	free(make_mark(f.set));
	cr_assert_eq(pdk_ws_settle(f.set, true, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(pdk_ws_unsynced(f.set), PDK_WS_SYNCED);
	cr_assert_eq(pdk_ws_settle(f.set, false, &err), 0, "no mark: nothing to do");
	/* A marked set that changed nothing is recycled as the spare, without its mark. */
	cr_assert_eq(rmdir(ww), 0);
	free(make_mark(f.set));
	cr_assert_eq(pdk_ws_recycle(f.set, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(stat(pdk_test_path(f.state, "ws/.spare/upper"), &st), 0, "kept as the spare");
	cr_assert_eq(stat(pdk_test_path(f.state, "ws/.spare/work/work"), &st), -1,
		     "without its work directory");
	cr_assert_eq(stat(pdk_test_path(f.state, "ws/.spare/work/.gone/incompat/volatile"), &st), 0,
		     "which is set aside, mark and all");
	/* The next set takes the spare and removes what was set aside, on a thread of its own. */
	pdk_ws_free(f.set);
	f.set = NULL;
	cr_assert_eq(pdk_ws_create(f.state, f.ws, NULL, 0, NULL, &f.set, &err), 0, "%s",
		     err ? err->msg : "");
	cr_assert_eq(stat(pdk_test_path(f.state, "ws/.spare"), &st), -1, "the spare was taken");
	pdk_ws_tidy_wait(f.set);
	pdk_ws_tidy_wait(f.set); /* idempotent */
	cr_assert_eq(stat(pdk_test_path(pdk_ws_dir(f.set), "work/.gone"), &st), -1,
		     "what was set aside is gone");
	cr_assert_eq(pdk_ws_unsynced(f.set), PDK_WS_SYNCED);
	teardown_fx(&f);
}

Test(workspace, volatile_mark_told_by_boot_id)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct timespec old[2], up;
	_cleanup_free_ char *vol = NULL;
	_cleanup_free_ char *now = NULL;
	char *rec;
	struct pdk_ws *again;

	setup_fx(&f);
	cr_assert_eq(pdk_read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, &now, &err),
		     0);
	now[strcspn(now, "\n")] = '\0';
	cr_assert_eq(strlen(now), 36);
	rec = meta_boot_id(f.set);
	cr_assert_str_eq(rec, now, "a new set records this boot before its first mount");
	free(rec);
	vol = make_mark(f.set);
	/* A clock set forward since the mount: the mark's time is before this boot's start. */
	cr_assert_eq(clock_gettime(CLOCK_BOOTTIME, &up), 0);
	old[0] = old[1] = (struct timespec){.tv_sec = time(NULL) - up.tv_sec - 60};
	cr_assert_eq(utimensat(AT_FDCWD, vol, old, 0), 0, "%s", strerror(errno));
	cr_assert_eq(pdk_ws_unsynced(f.set), PDK_WS_KILLED,
		     "this boot's mount: killed, whatever the clock");
	/* Mounted in another boot, the clock behind after the reboot: the mark's time looks recent.
	 */
	cr_assert_eq(utimensat(AT_FDCWD, vol, NULL, 0), 0);
	again = reboot_meta(&f, "00000000-0000-4000-8000-000000000000");
	cr_assert_eq(pdk_ws_unsynced(again), PDK_WS_CRASHED,
		     "another boot's mount: the machine went down");
	cr_assert_lt(pdk_ws_check_synced(again, false, true, &err), 0);
	cr_assert_eq(err->status, EUCLEAN);
	pdk_error_free(&err);
	rec = meta_boot_id(again);
	cr_assert_str_eq(rec, "00000000-0000-4000-8000-000000000000",
			 "a refused set is left as it is");
	free(rec);
	/* Forced (a reviewed set goes on): unmarked, and this boot recorded before the next mount.
	 */
	cr_assert_eq(pdk_ws_check_synced(again, true, true, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(pdk_ws_unsynced(again), PDK_WS_SYNCED);
	rec = meta_boot_id(again);
	cr_assert_str_eq(rec, now);
	free(rec);
	pdk_ws_free(again);
	/* A set an older paddock recorded, without a boot id: the mark's time against the boot's.
	 */
	cr_assert_eq(rmdir(pdk_test_path(pdk_ws_dir(f.set), "work/work")), 0);
	free(make_mark(f.set));
	again = reboot_meta(&f, NULL);
	cr_assert_eq(pdk_ws_unsynced(again), PDK_WS_KILLED, "marked in this boot, by the clock");
	cr_assert_eq(utimensat(AT_FDCWD, vol, old, 0), 0);
	cr_assert_eq(pdk_ws_unsynced(again), PDK_WS_CRASHED, "marked before it, by the clock");
	cr_assert_eq(pdk_ws_check_synced(again, true, true, &err), 0, "%s", err ? err->msg : "");
	rec = meta_boot_id(again);
	cr_assert_str_eq(rec, now, "recorded from now on");
	free(rec);
	pdk_ws_free(again);
	teardown_fx(&f);
}
