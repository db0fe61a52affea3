/*
 * Commit of hand-made change lists: the cases a sandbox cannot produce
 * through overlayfs (device nodes, inconsistent lists) and host-side races.
 * Each test runs as root and, forked, as nobody (rootless).
 */
#include "common.h"
#include "util.h"
#include "workspace.h"
#include "test-helpers.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

struct fx {
	char top[64];
	char dir[96];     /* the workspace */
	char layer[96];   /* the change set's layer */
	char outside[96]; /* a directory next to the workspace */
	int root_fd;
	int layer_fd;
};

static void put(const char *dir, const char *rel, const char *content)
{
	FILE *f = fopen(pdk_test_path(dir, rel), "w");

	cr_assert_not_null(f, "%s/%s: %s", dir, rel, strerror(errno));
	fputs(content, f);
	fclose(f);
}

static char *slurp(const char *path)
{
	char *s = NULL;
	struct pdk_error *err = NULL;

	if (pdk_read_file_at(AT_FDCWD, path, 1 << 20, &s, &err) < 0) {
		pdk_error_free(&err);
		return NULL;
	}
	return s;
}

static void setup_fx(struct fx *f)
{
	strcpy(f->top, "/tmp/pdk-commit-XXXXXX");
	cr_assert_not_null(mkdtemp(f->top));
	chmod(f->top, 0755);
	snprintf(f->dir, sizeof(f->dir), "%s/ws", f->top);
	snprintf(f->layer, sizeof(f->layer), "%s/layer", f->top);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->top);
	cr_assert_eq(mkdir(f->dir, 0755), 0);
	cr_assert_eq(mkdir(f->layer, 0755), 0);
	cr_assert_eq(mkdir(f->outside, 0755), 0);
	put(f->outside, "secret", "secret\n");
	put(f->dir, "keep", "keep\n");
	cr_assert_eq(mkdir(pdk_test_path(f->dir, "d"), 0755), 0);
	put(f->dir, "d/old", "old\n");
	f->root_fd = open(f->dir, O_RDONLY | O_DIRECTORY);
	f->layer_fd = open(f->layer, O_RDONLY | O_DIRECTORY);
	cr_assert(f->root_fd >= 0 && f->layer_fd >= 0);
}

static void teardown_fx(struct fx *f)
{
	close(f->root_fd);
	close(f->layer_fd);
	(void)!pdk_rm_rf_at(AT_FDCWD, f->top);
}

/* A change whose new entry is `rel` in the layer. */
static struct pdk_ws_change change(struct fx *f, const char *path, enum pdk_ws_kind kind,
				   mode_t old_mode)
{
	struct pdk_ws_change c = {.path = (char *)path,
				  .kind = kind,
				  .old_mode = old_mode,
				  .src_fd = f->layer_fd,
				  .base_fd = f->root_fd};
	struct stat st;

	if (kind != PDK_WS_DELETED && fstatat(f->layer_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		c.mode = st.st_mode;
		c.size = (uint64_t)st.st_size;
		if (S_ISLNK(st.st_mode)) {
			static char target[4][256];
			static unsigned i;
			char *t = target[i++ % 4];
			ssize_t n = readlinkat(f->layer_fd, path, t, 255);

			t[n > 0 ? n : 0] = '\0';
			c.link = t;
		}
	}
	return c;
}

/* "name mode size content-bytes" for each entry, recursively: equal listings, equal trees. */
static void listing(const char *dir, const char *rel, FILE *out)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s%s%s", dir, rel[0] ? "/" : "", rel);
	cr_assert_eq(lstat(path, &st), 0, "%s", path);
	fprintf(out, "%s %o %lld\n", rel, st.st_mode, (long long)st.st_size);
	if (S_ISREG(st.st_mode)) {
		char *s = slurp(path);

		fprintf(out, "%s\n", s ? s : "?");
		free(s);
	}
	if (S_ISDIR(st.st_mode)) {
		struct dirent **names;
		int n = scandir(path, &names, NULL, alphasort);

		for (int i = 0; i < n; i++) {
			char sub[512];

			if (strcmp(names[i]->d_name, ".") != 0 &&
			    strcmp(names[i]->d_name, "..") != 0) {
				snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "",
					 names[i]->d_name);
				listing(dir, sub, out);
			}
			free(names[i]);
		}
		free(names);
	}
}

static char *tree(const char *dir)
{
	struct pdk_test_text t;

	listing(dir, "", pdk_test_text_open(&t));
	return pdk_test_text_take(&t);
}

static void assert_tree(const char *dir, const char *want, const char *what)
{
	char *got = tree(dir);

	cr_assert_str_eq(got, want, "%s", what);
	free(got);
}

static void assert_content(const char *path, const char *want)
{
	char *got = slurp(path);

	cr_assert_str_eq(got ? got : "(none)", want, "%s", path);
	free(got);
}

static int commit(struct fx *f, struct pdk_ws_change *v, size_t n, unsigned flags,
		  struct pdk_ws_commit_report *rep, struct pdk_error **err)
{
	struct pdk_ws_diff d = {.v = v, .n = n};

	return pdk_ws_commit_at(f->root_fd, f->dir, &d, flags, rep, err);
}

/* Run `body` as root, then in a child as nobody (the fixture handed over to nobody). */
#define BOTH_IDS(body)                                                                           \
	do {                                                                                     \
		pid_t pid_;                                                                      \
		int st_;                                                                         \
		{body} pid_ = fork();                                                            \
		cr_assert_geq(pid_, 0);                                                          \
		if (pid_ == 0) {                                                                 \
			if (setresgid(65534, 65534, 65534) < 0 ||                                \
			    setresuid(65534, 65534, 65534) < 0)                                  \
				_exit(99);                                                       \
			{body} _exit(0);                                                         \
		}                                                                                \
		cr_assert_eq(waitpid(pid_, &st_, 0), pid_);                                      \
		cr_assert(WIFEXITED(st_) && WEXITSTATUS(st_) == 0, "as nobody: status %d", st_); \
	} while (0)

static void refused_kinds(void)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws_commit_report rep = {0};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	char *before;
	struct pdk_ws_change v[5];
	size_t n = 0;

	setup_fx(&f);
	before = tree(f.dir);
	cr_assert_eq(mkfifo(pdk_test_path(f.layer, "fifo"), 0644), 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", pdk_test_path(f.layer, "sock"));
	cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
	put(f.layer, "fine", "fine\n");
	cr_assert_eq(symlink("../outside/secret", pdk_test_path(f.layer, "up")), 0);
	v[n++] = change(&f, "fifo", PDK_WS_ADDED, 0);
	v[n++] = change(&f, "fine", PDK_WS_ADDED, 0);
	v[n++] = change(&f, "sock", PDK_WS_ADDED, 0);
	v[n++] = change(&f, "up", PDK_WS_ADDED, 0);
	if (geteuid() == 0) {
		cr_assert_eq(mknod(pdk_test_path(f.layer, "null"), S_IFCHR | 0666, makedev(1, 3)),
			     0);
		v[n++] = change(&f, "null", PDK_WS_ADDED, 0);
	}
	cr_assert_lt(commit(&f, v, n, 0, &rep, &err), 0);
	cr_assert_eq(err->status, EPERM);
	cr_assert_eq(rep.n_refused, n - 1, "all but 'fine' refused");
	cr_assert_str_eq(rep.refused[0].reason, "a FIFO");
	cr_assert_str_eq(rep.refused[1].reason, "a socket");
	cr_assert_not_null(strstr(rep.refused[2].reason, "leading outside"));
	if (n == 5)
		cr_assert_str_eq(rep.refused[3].reason, "a device node");
	assert_tree(f.dir, before, "nothing applied, not even 'fine'");
	pdk_ws_commit_report_release(&rep);
	pdk_error_free(&err);
	free(before);
	teardown_fx(&f);
}

Test(ws_commit, refuses_devices_fifos_sockets_outside_links)
{
	BOTH_IDS(refused_kinds(););
}

static void inconsistent_list(void)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws_commit_report rep = {0};
	char *before, *outside_before;
	struct pdk_ws_change v[2];

	setup_fx(&f);
	before = tree(f.dir);
	outside_before = tree(f.outside);
	/* "d" replaced by a symlink to the outside, then a file "in" it: a list overlayfs cannot
	 * make, that a naive commit would write through. */
	cr_assert_eq(symlink(f.outside, pdk_test_path(f.layer, "d")), 0);
	put(f.layer, "x", "pwned\n");
	v[0] = change(&f, "d", PDK_WS_REPLACED, S_IFDIR | 0755);
	v[1] = change(&f, "x", PDK_WS_ADDED, 0);
	v[1].path = "d/x";
	cr_assert_lt(commit(&f, v, 2, PDK_WS_COMMIT_ALLOW_OUTSIDE_LINKS, &rep, &err), 0);
	cr_assert_not_null(strstr(err->msg, "nothing is followed"), "%s", err->msg);
	assert_tree(f.outside, outside_before, "nothing written outside");
	assert_tree(f.dir, before, "the workspace is as it was");
	pdk_error_free(&err);
	pdk_ws_commit_report_release(&rep);
	free(before);
	free(outside_before);
	teardown_fx(&f);
}

Test(ws_commit, inconsistent_list_never_writes_through_a_symlink)
{
	BOTH_IDS(inconsistent_list(););
}

static void host_race(void)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws_commit_report rep = {0};
	char *outside_before;
	struct pdk_ws_change v[2];

	setup_fx(&f);
	outside_before = tree(f.outside);
	put(f.layer, "new", "n\n");
	cr_assert_eq(mkdir(pdk_test_path(f.layer, "d"), 0755), 0);
	put(f.layer, "d/x", "x\n");
	v[0] = change(&f, "d/x", PDK_WS_ADDED, 0);
	v[1] = change(&f, "new", PDK_WS_ADDED, 0);
	/* Between diff and commit, the host's d becomes a symlink to the outside. */
	cr_assert_eq(pdk_rm_rf_at(AT_FDCWD, pdk_test_path(f.dir, "d")), 0);
	cr_assert_eq(symlink(f.outside, pdk_test_path(f.dir, "d")), 0);
	cr_assert_lt(commit(&f, v, 2, 0, &rep, &err), 0);
	assert_tree(f.outside, outside_before, "nothing written through the link");
	cr_assert_eq(access(pdk_test_path(f.dir, "new"), F_OK), -1, "nothing else applied either");
	cr_assert_eq(rep.applied, 0);
	pdk_error_free(&err);
	pdk_ws_commit_report_release(&rep);
	free(outside_before);
	teardown_fx(&f);
}

Test(ws_commit, host_side_symlink_race_fails_closed)
{
	BOTH_IDS(host_race(););
}

static void all_or_nothing(void)
{
	struct fx f;
	struct pdk_error *err = NULL;
	struct pdk_ws_commit_report rep = {0};
	struct pdk_ws_change v[6];
	char *before;
	struct dirent **names;
	int n;

	setup_fx(&f);
	cr_assert_eq(chmod(pdk_test_path(f.dir, "keep"), 0600), 0);
	put(f.layer, "keep", "changed\n");
	cr_assert_eq(chmod(pdk_test_path(f.layer, "keep"), 0644), 0);
	cr_assert_eq(mkdir(pdk_test_path(f.layer, "newdir"), 0750), 0);
	put(f.layer, "newdir/f", "f\n");
	put(f.layer, "zlate", "z\n");
	v[0] = change(&f, "d", PDK_WS_DELETED, S_IFDIR | 0755);
	v[1] = change(&f, "d/old", PDK_WS_DELETED, S_IFREG | 0644);
	v[2] = change(&f, "keep", PDK_WS_MODIFIED, S_IFREG | 0600);
	v[3] = change(&f, "newdir", PDK_WS_ADDED, 0);
	v[4] = change(&f, "newdir/f", PDK_WS_ADDED, 0);
	v[5] = change(&f, "zlate", PDK_WS_ADDED, 0);
	/* The host creates "zlate" after the diff: the last step fails. */
	put(f.dir, "zlate", "host's own\n");
	before = tree(f.dir);
	cr_assert_lt(commit(&f, v, 6, 0, &rep, &err), 0);
	cr_assert_eq(err->status, EEXIST, "%s", err->msg);
	assert_tree(f.dir, before, "every step undone: names, modes, content");
	n = scandir(f.dir, &names, NULL, alphasort);
	cr_assert_eq(n, 5, "., .., d, keep, zlate: no stage or trash entry left");
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	pdk_error_free(&err);
	pdk_ws_commit_report_release(&rep);
	/* Without the conflict the same list goes through. */
	cr_assert_eq(unlink(pdk_test_path(f.dir, "zlate")), 0);
	cr_assert_eq(commit(&f, v, 6, 0, &rep, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(rep.applied, 6);
	cr_assert_eq(access(pdk_test_path(f.dir, "d"), F_OK), -1);
	assert_content(pdk_test_path(f.dir, "keep"), "changed\n");
	pdk_ws_commit_report_release(&rep);
	free(before);
	teardown_fx(&f);
}

Test(ws_commit, a_late_failure_undoes_everything)
{
	BOTH_IDS(all_or_nothing(););
}

static void links_judged(void)
{
	static const struct {
		const char *path, *target;
		bool inside;
	} cases[] = {
		{"a", "b", true},
		{"x/a", "../b", true},
		{"x/y/a", "../../b/c", true},
		{"a", "../b", false},
		{"x/a", "../../b", false},
		{"a", "b/../c", false}, /* ".." after a name: wherever b leads */
		{"a", "./b", true},
		{"a", "/etc/passwd", false},
		{"a", "", false},
	};
	struct fx f;

	setup_fx(&f);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(cases) + 2; i++) {
		struct pdk_error *err = NULL;
		struct pdk_ws_commit_report rep = {0};
		struct pdk_ws_change c = {
			.kind = PDK_WS_ADDED, .mode = S_IFLNK | 0777, .src_fd = f.layer_fd};
		bool inside;
		char abs[256];

		if (i < PDK_ARRAY_SIZE(cases)) {
			c.path = (char *)cases[i].path;
			c.link = (char *)cases[i].target;
			inside = cases[i].inside;
		} else { /* absolute, into the workspace itself or next to it */
			snprintf(abs, sizeof(abs),
				 i == PDK_ARRAY_SIZE(cases) ? "%s/keep" : "%s-x/k", f.dir);
			c.path = "abs";
			c.link = abs;
			inside = i == PDK_ARRAY_SIZE(cases);
		}
		(void)!pdk_ws_commit_at(f.root_fd, f.dir, &(struct pdk_ws_diff){.v = &c, .n = 1},
					PDK_WS_COMMIT_DRY_RUN, &rep, &err);
		cr_assert_eq(rep.n_refused == 0, inside, "%s -> %s", c.path, c.link);
		pdk_ws_commit_report_release(&rep);
		pdk_error_free(&err);
	}
	teardown_fx(&f);
}

Test(ws_commit, symlink_targets_inside_or_not)
{
	links_judged();
}

/* A symlink change `path` -> `target` (kind ADDED), or a directory when `target` is NULL. */
static struct pdk_ws_change link_change(const char *path, const char *target)
{
	struct pdk_ws_change c = {.path = (char *)path,
				  .kind = PDK_WS_ADDED,
				  .mode = target != NULL ? S_IFLNK | 0777 : S_IFDIR | 0755,
				  .link = (char *)target,
				  .src_fd = -1};

	return c;
}

/* Refusals of a dry run of `v`, as "path;path;" (and the reasons in `why`). */
static char *refused_of(struct fx *f, struct pdk_ws_change *v, size_t n, char *why, size_t size)
{
	struct pdk_error *err = NULL;
	struct pdk_ws_commit_report rep = {0};
	char *paths = pdk_xasprintf("%s", "");

	why[0] = '\0';
	(void)!commit(f, v, n, PDK_WS_COMMIT_DRY_RUN, &rep, &err);
	for (size_t i = 0; i < rep.n_refused; i++) {
		char *p = pdk_xasprintf("%s%s;", paths, rep.refused[i].path);

		free(paths);
		paths = p;
		snprintf(why + strlen(why), size - strlen(why), "%s\n", rep.refused[i].reason);
	}
	pdk_ws_commit_report_release(&rep);
	pdk_error_free(&err);
	return paths;
}

/*
 * Links judged where they lead once committed: through links the directory
 * already holds ("hostlink" -> the outside), links of the same change set,
 * chains, "..", and entries the change set deletes or replaces.
 */
static void links_resolved(void)
{
	struct fx f;
	char out_secret[160], why[4096];
	char *got;

	setup_fx(&f);
	snprintf(out_secret, sizeof(out_secret), "%s/secret", f.outside);
	cr_assert_eq(symlink(f.outside, pdk_test_path(f.dir, "hostlink")), 0);
	cr_assert_eq(symlink("../outside", pdk_test_path(f.dir, "relout")), 0);
	cr_assert_eq(symlink("d", pdk_test_path(f.dir, "indir")), 0);
	cr_assert_eq(symlink("indir", pdk_test_path(f.dir, "chain")), 0);
	{
		struct pdk_ws_change v[] = {link_change("via", "hostlink/secret")};

		got = refused_of(&f, v, 1, why, sizeof(why));
		cr_assert_str_eq(got, "via;", "a new link through a host link to the outside");
		cr_assert_not_null(strstr(why, out_secret), "%s", why);
		cr_assert_not_null(strstr(why, "through 'hostlink' -> '"), "%s", why);
		free(got);
	}
	{
		struct pdk_ws_change v[] = {link_change("a", "relout/secret"),
					    link_change("b", "chain/../relout"),
					    link_change("c", "d/../../outside/secret"),
					    link_change("e", "indir/../hostlink")};

		got = refused_of(&f, v, 4, why, sizeof(why));
		cr_assert_str_eq(got, "a;b;c;e;", "through host links, chains and '..': %s", why);
		free(got);
	}
	{
		struct pdk_ws_change v[] = {
			link_change("a", "indir/old"), link_change("b", "chain/../keep"),
			link_change("c", "d/../keep"), link_change("e", "./chain/old")};

		got = refused_of(&f, v, 4, why, sizeof(why));
		cr_assert_str_eq(got, "", "links that stay inside are accepted: %s", why);
		free(got);
	}
	{ /* A chain made by the change set itself, ending at a host link to the outside. */
		struct pdk_ws_change v[] = {link_change("mid", "hostlink"),
					    link_change("via", "mid/secret")};

		got = refused_of(&f, v, 2, why, sizeof(why));
		cr_assert_str_eq(got, "mid;via;", "%s", why);
		free(got);
	}
	{ /* The change set makes "hostlink" a directory: "via" then stays inside. */
		struct pdk_ws_change v[] = {link_change("hostlink", NULL),
					    link_change("via", "hostlink/secret")};

		v[0].kind = PDK_WS_REPLACED;
		v[0].old_mode = S_IFLNK | 0777;
		got = refused_of(&f, v, 2, why, sizeof(why));
		cr_assert_str_eq(got, "", "the directory as it will be: %s", why);
		free(got);
	}
	{ /* The change set deletes "indir": a link through it cannot be judged, nor climb. */
		struct pdk_ws_change v[] = {link_change("indir", NULL),
					    link_change("via", "indir/../../x")};

		v[0].kind = PDK_WS_DELETED;
		v[0].mode = 0;
		v[0].old_mode = S_IFLNK | 0777;
		got = refused_of(&f, v, 2, why, sizeof(why));
		cr_assert_str_eq(got, "via;", "%s", why);
		free(got);
	}
	{ /* A loop. */
		struct pdk_ws_change v[] = {link_change("l1", "l2"), link_change("l2", "l1/x")};

		got = refused_of(&f, v, 2, why, sizeof(why));
		cr_assert_str_eq(got, "l1;l2;", "%s", why);
		cr_assert_not_null(strstr(why, "more than 40 symlinks"), "%s", why);
		free(got);
	}
	teardown_fx(&f);
}

Test(ws_commit, symlinks_judged_where_they_lead_after_the_commit)
{
	BOTH_IDS(links_resolved(););
}

static void bad_paths(void)
{
	static const char *const paths[] = {"../escape", "/abs", "a/../../b", "a//b",
					    "a/",        ".",    ""};
	struct fx f;

	setup_fx(&f);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(paths); i++) {
		struct pdk_error *err = NULL;
		struct pdk_ws_commit_report rep = {0};
		struct pdk_ws_change c = {.path = (char *)paths[i],
					  .kind = PDK_WS_DELETED,
					  .old_mode = S_IFREG | 0644};

		cr_assert_lt(pdk_ws_commit_at(f.root_fd, f.dir,
					      &(struct pdk_ws_diff){.v = &c, .n = 1}, 0, &rep,
					      &err),
			     0, "'%s'", paths[i]);
		cr_assert_eq(rep.n_refused, 1);
		pdk_ws_commit_report_release(&rep);
		pdk_error_free(&err);
	}
	teardown_fx(&f);
}

Test(ws_commit, malformed_paths_are_refused)
{
	bad_paths();
}
