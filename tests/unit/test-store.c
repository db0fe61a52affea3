#include "common.h"
#include "store.h"
#include "util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static void setup(void)
{
	(void)snprintf(dir, sizeof(dir), "/tmp/pdk-store-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	(void)!pdk_rm_rf_at(AT_FDCWD, dir);
}

TestSuite(store, .init = setup, .fini = teardown);

static struct pdk_store *open_store(void)
{
	struct pdk_store *s = NULL;
	struct pdk_error *err = NULL;

	cr_assert_eq(pdk_store_open(dir, &s, &err), 0, "%s", err ? err->msg : "");
	return s;
}

static struct pdk_store_sandbox row(const char *id, const char *key)
{
	struct pdk_store_sandbox sb = {
		.id = (char *)id,
		.state = (char *)"starting",
		.profile = (char *)"default",
		.labels = (char *)"{\"session\":\"s1\"}",
		.spec = (char *)"{}",
		.idempotency_key = (char *)key,
		.created_ns = 42,
		.expires_ns = 1000,
		.idle_timeout_s = 60,
	};
	return sb;
}

/* Whether another process sees a lock of this one on the file at `path`. */
static bool locked_for_others(const char *path)
{
	pid_t pid = fork();
	int status = -1;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = open(path, O_RDWR | O_CLOEXEC);
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};

		_exit(fd >= 0 && fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/*
 * POSIX locks are the process's: a second connection's open and close must
 * not drop what the first holds, or another process's last close deletes
 * the WAL under the first (the approval queue lost its requests so).
 */
Test(store, a_second_connection_keeps_the_first_ones_locks)
{
	struct pdk_store *a = open_store(), *b;
	_cleanup_free_ char *path = pdk_xasprintf("%s/daemon.db", dir);
	struct pdk_store_sandbox out = {0};
	struct pdk_error *err = NULL;

	(void)!pdk_store_sandbox_get(a, "none", &out, &err);
	pdk_error_free(&err);
	cr_assert(locked_for_others(path), "an open WAL store holds its shared lock");
	b = open_store();
	pdk_store_free(b);
	cr_assert(locked_for_others(path), "the first connection's lock survives a second's life");
	pdk_store_free(a);
}

Test(store, created_private_and_round_trips)
{
	struct pdk_store *s = open_store();
	struct pdk_store_sandbox in = row("sb-1", "k1"), out = {0};
	_cleanup_free_ char *path = pdk_xasprintf("%s/daemon.db", dir);
	struct pdk_error *err = NULL;
	struct stat st;

	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(pdk_store_sandbox_insert(s, &in, &err), 0);
	cr_assert_eq(pdk_store_sandbox_get(s, "sb-1", &out, &err), 0);
	cr_assert_str_eq(out.state, "starting");
	cr_assert_str_eq(out.labels, "{\"session\":\"s1\"}");
	cr_assert_str_eq(out.idempotency_key, "k1");
	cr_assert_eq(out.created_ns, 42);
	cr_assert_eq(out.idle_timeout_s, 60);
	pdk_store_sandbox_release(&out);
	pdk_store_free(s);
}

Test(store, idempotency_key_is_unique)
{
	struct pdk_store *s = open_store();
	struct pdk_store_sandbox a = row("sb-a", "same"), b = row("sb-b", "same"), out = {0};
	struct pdk_error *err = NULL;

	cr_assert_eq(pdk_store_sandbox_insert(s, &a, &err), 0);
	cr_assert_eq(pdk_store_sandbox_insert(s, &b, &err), -EEXIST);
	cr_assert_not_null(err);
	pdk_error_free(&err);
	cr_assert_eq(pdk_store_sandbox_get(s, "sb-b", &out, &err), -ENOENT);
	pdk_error_free(&err);
	cr_assert_eq(pdk_store_sandbox_by_key(s, "same", &out, &err), 0);
	cr_assert_str_eq(out.id, "sb-a");
	pdk_store_sandbox_release(&out);
	pdk_store_free(s);
}

static int count_cb(void *data, const struct pdk_store_sandbox *sb)
{
	(void)sb;
	(*(int *)data)++;
	return 0;
}

Test(store, update_persists_across_reopen_and_delete)
{
	struct pdk_store *s = open_store();
	struct pdk_store_sandbox a = row("sb-a", NULL), out = {0};
	struct pdk_error *err = NULL;
	int n = 0;

	cr_assert_eq(pdk_store_sandbox_insert(s, &a, &err), 0);
	a.state = (char *)"running";
	a.supervisor_pid = 1234;
	a.spool_offset = 999;
	a.output_bytes = 5;
	a.commands = 2;
	cr_assert_eq(pdk_store_sandbox_update(s, &a, &err), 0);
	pdk_store_free(s);
	s = open_store();
	cr_assert_eq(pdk_store_sandbox_get(s, "sb-a", &out, &err), 0);
	cr_assert_str_eq(out.state, "running");
	cr_assert_eq(out.supervisor_pid, 1234);
	cr_assert_eq(out.spool_offset, 999);
	cr_assert_eq(out.commands, 2);
	pdk_store_sandbox_release(&out);
	cr_assert_eq(pdk_store_sandbox_each(s, count_cb, &n, &err), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(pdk_store_sandbox_delete(s, "sb-a", &err), 0);
	n = 0;
	cr_assert_eq(pdk_store_sandbox_each(s, count_cb, &n, &err), 0);
	cr_assert_eq(n, 0);
	a.id = (char *)"nope";
	cr_assert_eq(pdk_store_sandbox_update(s, &a, &err), -ENOENT);
	pdk_error_free(&err);
	pdk_store_free(s);
}

Test(store, tokens_hash_only_and_revoke)
{
	struct pdk_store *s = open_store();
	struct pdk_error *err = NULL;
	char *name = NULL;

	cr_assert_eq(pdk_store_token_add(s, "ci", "ab12", &err), 0);
	cr_assert_eq(pdk_store_token_add(s, "ci", "cd34", &err), -EEXIST);
	pdk_error_free(&err);
	cr_assert_eq(pdk_store_token_check(s, "ab12", &name, &err), 0);
	cr_assert_str_eq(name, "ci");
	free(name);
	cr_assert_eq(pdk_store_token_check(s, "zz", NULL, &err), -ENOENT);
	cr_assert_eq(pdk_store_token_revoke(s, "ci", &err), 0);
	cr_assert_eq(pdk_store_token_check(s, "ab12", NULL, &err), -ENOENT);
	cr_assert_eq(pdk_store_token_revoke(s, "ci", &err), -ENOENT);
	pdk_error_free(&err);
	pdk_store_free(s);
}

/* E2B API keys live apart from admin tokens: a hash of one is never the other. */
Test(store, e2b_keys_apart_from_tokens)
{
	struct pdk_store *s = open_store();
	struct pdk_error *err = NULL;
	char *name = NULL;

	cr_assert_eq(pdk_store_e2b_key_add(s, "k1", "ab12", &err), 0);
	cr_assert_eq(pdk_store_e2b_key_add(s, "k1", "cd34", &err), -EEXIST);
	pdk_error_free(&err);
	cr_assert_eq(pdk_store_e2b_key_check(s, "ab12", &name, &err), 0);
	cr_assert_str_eq(name, "k1");
	free(name);
	cr_assert_eq(pdk_store_token_check(s, "ab12", NULL, &err), -ENOENT);
	cr_assert_eq(pdk_store_token_add(s, "t1", "ef56", &err), 0);
	cr_assert_eq(pdk_store_e2b_key_check(s, "ef56", NULL, &err), -ENOENT);
	cr_assert_eq(pdk_store_e2b_key_revoke(s, "k1", &err), 0);
	cr_assert_eq(pdk_store_e2b_key_check(s, "ab12", NULL, &err), -ENOENT);
	cr_assert_eq(pdk_store_e2b_key_revoke(s, "k1", &err), -ENOENT);
	cr_assert(strstr(err->msg, "no E2B API key named 'k1'") != NULL, "%s", err->msg);
	pdk_error_free(&err);
	pdk_store_free(s);
}

static int pool_cb(void *data, const char *profile, uint64_t size)
{
	char *buf = data;
	size_t n = strlen(buf);

	(void)snprintf(buf + n, 64 - n, "%s=%llu;", profile, (unsigned long long)size);
	return 0;
}

Test(store, pools_set_update_remove)
{
	struct pdk_store *s = open_store();
	struct pdk_error *err = NULL;
	char buf[64] = "";

	cr_assert_eq(pdk_store_pool_set(s, "default", 4, &err), 0);
	cr_assert_eq(pdk_store_pool_set(s, "net", 1, &err), 0);
	cr_assert_eq(pdk_store_pool_set(s, "default", 2, &err), 0);
	cr_assert_eq(pdk_store_pool_each(s, pool_cb, buf, &err), 0);
	cr_assert_str_eq(buf, "default=2;net=1;");
	cr_assert_eq(pdk_store_pool_set(s, "net", 0, &err), 0);
	buf[0] = '\0';
	cr_assert_eq(pdk_store_pool_each(s, pool_cb, buf, &err), 0);
	cr_assert_str_eq(buf, "default=2;");
	pdk_store_free(s);
}

static int count_stop_cb(void *data, const struct pdk_store_sandbox *sb)
{
	(void)data;
	(void)sb;
	return 7;
}

/*
 * The kept statements: used many times, after a failed step, with bindings
 * that must not leak from one use into the next (a NULL key after a text one),
 * and freed with the store (ASan's leak check runs on this suite).
 */
Test(store, kept_statements_reused_with_fresh_bindings)
{
	struct pdk_store *s = open_store();
	struct pdk_store_sandbox a = row("sb-a", "ka"), b = row("sb-b", NULL), out = {0};
	struct pdk_error *err = NULL;

	cr_assert_eq(pdk_store_sandbox_insert(s, &a, &err), 0);
	/* The insert's kept statement after a constraint failure still works. */
	cr_assert_eq(pdk_store_sandbox_insert(s, &a, &err), -EEXIST);
	pdk_error_free(&err);
	cr_assert_eq(pdk_store_sandbox_insert(s, &b, &err), 0, "%s", err ? err->msg : "");
	for (uint64_t i = 1; i <= 500; i++) {
		a.commands = i;
		a.output_bytes = 2 * i;
		cr_assert_eq(pdk_store_sandbox_update(s, &a, &err), 0);
		cr_assert_eq(pdk_store_sandbox_get(s, i % 2 ? "sb-a" : "sb-b", &out, &err), 0);
		cr_assert_eq(out.commands, i % 2 ? i : 0);
		pdk_store_sandbox_release(&out);
	}
	/* sb-b's NULL key, bound after sb-a's text key: no key is found for sb-b's row. */
	cr_assert_eq(pdk_store_sandbox_by_key(s, "ka", &out, &err), 0);
	cr_assert_str_eq(out.id, "sb-a");
	cr_assert_eq(out.output_bytes, 1000);
	pdk_store_sandbox_release(&out);
	a.idempotency_key = NULL;
	cr_assert_eq(pdk_store_sandbox_update(s, &a, &err), 0);
	cr_assert_eq(pdk_store_sandbox_by_key(s, "ka", &out, &err), -ENOENT);
	pdk_error_free(&err);
	/* A statement left mid-walk (the callback stopped it) is reset for its next use. */
	cr_assert_eq(pdk_store_sandbox_each(s, count_stop_cb, NULL, &err), 7);
	cr_assert_eq(pdk_store_sandbox_delete(s, "sb-a", &err), 0);
	cr_assert_eq(pdk_store_sandbox_get(s, "sb-a", &out, &err), -ENOENT);
	pdk_error_free(&err);
	pdk_store_free(s);
}

/* A walk whose callback walks again (a pool pass that starts another): both see every row. */
struct nest {
	struct pdk_store *s;
	int outer, inner, depth;
	char buf[64];
};

static int nest_pool_cb(void *data, const char *profile, uint64_t size)
{
	struct nest *n = data;
	struct pdk_error *err = NULL;

	(void)profile;
	(void)size;
	n->outer++;
	if (n->depth++ == 0) {
		cr_assert_eq(pdk_store_pool_each(n->s, pool_cb, n->buf, &err), 0);
		/* A write from inside the walk, as pool_fill's start of a member does. */
		cr_assert_eq(pdk_store_pool_set(n->s, "zz", 3, &err), 0);
	}
	return 0;
}

static int nest_sb_cb(void *data, const struct pdk_store_sandbox *sb)
{
	struct nest *n = data;
	struct pdk_error *err = NULL;
	struct pdk_store_sandbox copy = *sb;

	n->outer++;
	if (n->depth++ == 0)
		cr_assert_eq(pdk_store_sandbox_each(n->s, count_cb, &n->inner, &err), 0);
	copy.state = (char *)"lost";
	cr_assert_eq(pdk_store_sandbox_update(n->s, &copy, &err), 0);
	return 0;
}

Test(store, nested_walks_use_their_own_statement)
{
	struct pdk_store *s = open_store();
	struct pdk_store_sandbox a = row("sb-a", NULL), b = row("sb-b", NULL), out = {0};
	struct pdk_error *err = NULL;
	struct nest n = {.s = s};

	cr_assert_eq(pdk_store_pool_set(s, "default", 4, &err), 0);
	cr_assert_eq(pdk_store_pool_set(s, "net", 1, &err), 0);
	cr_assert_eq(pdk_store_pool_each(s, nest_pool_cb, &n, &err), 0);
	cr_assert_str_eq(n.buf, "default=4;net=1;");
	cr_assert_geq(n.outer, 2);
	n.buf[0] = '\0';
	cr_assert_eq(pdk_store_pool_each(s, pool_cb, n.buf, &err), 0);
	cr_assert_str_eq(n.buf, "default=4;net=1;zz=3;");

	n = (struct nest){.s = s};
	cr_assert_eq(pdk_store_sandbox_insert(s, &a, &err), 0);
	cr_assert_eq(pdk_store_sandbox_insert(s, &b, &err), 0);
	cr_assert_eq(pdk_store_sandbox_each(s, nest_sb_cb, &n, &err), 0);
	cr_assert_eq(n.outer, 2);
	cr_assert_eq(n.inner, 2);
	cr_assert_eq(pdk_store_sandbox_get(s, "sb-b", &out, &err), 0);
	cr_assert_str_eq(out.state, "lost");
	pdk_store_sandbox_release(&out);
	pdk_store_free(s);
}

static int count_ended(void *data, const struct pdk_store_ended *e)
{
	(void)e;
	(*(int *)data)++;
	return 0;
}

Test(store, end_moves_the_row_and_purge_forgets)
{
	struct pdk_store *s = open_store();
	struct pdk_store_sandbox sb = row("sb-e", "key-e"), got = {0};
	struct pdk_store_ended e = {.id = (char *)"sb-e",
				    .idempotency_key = (char *)"key-e",
				    .ended_ns = 1000,
				    .reason = (char *)"ttl",
				    .sandbox = (char *)"{\"id\":\"sb-e\",\"state\":\"ended\"}"},
			       out = {0};
	struct pdk_error *err = NULL;
	int n = 0;

	cr_assert_eq(pdk_store_sandbox_insert(s, &sb, &err), 0);
	cr_assert_eq(pdk_store_sandbox_end(s, &e, &err), 0, "%s", err ? err->msg : "");
	/* One transaction: the live row is gone, the ended one is there. */
	cr_assert_eq(pdk_store_sandbox_get(s, "sb-e", &got, &err), -ENOENT);
	pdk_error_free(&err);
	cr_assert_eq(pdk_store_ended_get(s, "sb-e", &out, &err), 0);
	cr_assert_str_eq(out.reason, "ttl");
	cr_assert_eq(out.ended_ns, 1000);
	cr_assert_str_eq(out.sandbox, e.sandbox);
	pdk_store_ended_release(&out);
	cr_assert_eq(pdk_store_ended_by_key(s, "key-e", &out, &err), 0);
	cr_assert_str_eq(out.id, "sb-e");
	pdk_store_ended_release(&out);
	/* The key is free for a live row again (the ended table is apart). */
	sb = row("sb-f", "key-e");
	cr_assert_eq(pdk_store_sandbox_insert(s, &sb, &err), 0);
	cr_assert_eq(pdk_store_ended_each(s, count_ended, &n, &err), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(pdk_store_ended_purge(s, 1000, &err), 0, "not before its end");
	cr_assert_eq(pdk_store_ended_purge(s, 1001, &err), 1);
	cr_assert_eq(pdk_store_ended_get(s, "sb-e", &out, &err), -ENOENT);
	pdk_error_free(&err);
	pdk_store_free(s);
}

static struct pdk_store_ended ended_row(const char *id, const char *key, uint64_t ns,
					const char *reason)
{
	struct pdk_store_ended e = {.id = (char *)id,
				    .idempotency_key = (char *)key,
				    .ended_ns = ns,
				    .reason = (char *)reason,
				    .sandbox = (char *)"{\"state\":\"ended\"}"};
	return e;
}

/* Insert live row `id` and end it at `ns`. */
static void insert_and_end(struct pdk_store *s, const char *id, const char *key, uint64_t ns)
{
	struct pdk_store_sandbox sb = row(id, key);
	struct pdk_store_ended e = ended_row(id, key, ns, "ttl");
	struct pdk_error *err = NULL;

	cr_assert_eq(pdk_store_sandbox_insert(s, &sb, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(pdk_store_sandbox_end(s, &e, &err), 0, "%s", err ? err->msg : "");
}

/* One use of each function of the ended table, checking what each returns. */
static void ended_round(struct pdk_store *s, uint64_t i)
{
	char id[32], key[32];
	struct pdk_store_ended out = {0};
	struct pdk_error *err = NULL;
	int n = 0;

	(void)snprintf(id, sizeof(id), "sb-%llu", (unsigned long long)i);
	(void)snprintf(key, sizeof(key), "key-%llu", (unsigned long long)i);
	insert_and_end(s, id, key, 1000 + i);
	cr_assert_eq(pdk_store_ended_get(s, id, &out, &err), 0);
	cr_assert_eq(out.ended_ns, 1000 + i);
	pdk_store_ended_release(&out);
	cr_assert_eq(pdk_store_ended_by_key(s, key, &out, &err), 0);
	cr_assert_str_eq(out.id, id);
	pdk_store_ended_release(&out);
	cr_assert_eq(pdk_store_ended_each(s, count_ended, &n, &err), 0);
	cr_assert_eq(n, 1, "the previous round's row was purged");
	cr_assert_eq(pdk_store_ended_purge(s, 1001 + i, &err), 1);
}

/*
 * The ended table's statements are kept like the others: the first round
 * prepares them (BEGIN, the live row's delete, the insert, COMMIT, get, by key,
 * each, purge), and a hundred more rounds prepare nothing new. Prepared per
 * call, they were finalized before each function returned.
 */
Test(store, ended_statements_are_kept)
{
	struct pdk_store *s = open_store();
	struct pdk_store_sandbox warm = row("sb-warm", NULL);
	struct pdk_error *err = NULL;
	int before, after_first;

	cr_assert_eq(pdk_store_sandbox_insert(s, &warm, &err), 0);
	before = pdk__store_statements(s);
	ended_round(s, 0);
	after_first = pdk__store_statements(s);
	cr_assert_eq(after_first, before + 8, "%d statements kept, then %d", before, after_first);
	for (uint64_t i = 1; i <= 100; i++)
		ended_round(s, i);
	cr_assert_eq(pdk__store_statements(s), after_first);
	pdk_store_free(s);
}

/*
 * A failed end (reason is NOT NULL) rolls back with the kept ROLLBACK: the live
 * row stays, no ended row appears, and the kept BEGIN and insert work again.
 */
Test(store, failed_end_rolls_back_and_the_next_end_works)
{
	struct pdk_store *s = open_store();
	struct pdk_store_sandbox sb = row("sb-r", "key-r"), got = {0};
	struct pdk_store_ended bad = ended_row("sb-r", "key-r", 5, NULL), out = {0};
	struct pdk_error *err = NULL;

	cr_assert_eq(pdk_store_sandbox_insert(s, &sb, &err), 0);
	cr_assert_eq(pdk_store_sandbox_end(s, &bad, &err), -EIO);
	cr_assert_not_null(err);
	cr_assert_not_null(strstr(err->msg, "NOT NULL"), "%s", err->msg);
	pdk_error_free(&err);
	cr_assert_eq(pdk_store_sandbox_get(s, "sb-r", &got, &err), 0, "the delete was rolled back");
	pdk_store_sandbox_release(&got);
	cr_assert_eq(pdk_store_ended_get(s, "sb-r", &out, &err), -ENOENT);
	pdk_error_free(&err);

	bad.reason = (char *)"destroy";
	cr_assert_eq(pdk_store_sandbox_end(s, &bad, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(pdk_store_sandbox_get(s, "sb-r", &got, &err), -ENOENT);
	pdk_error_free(&err);
	cr_assert_eq(pdk_store_ended_get(s, "sb-r", &out, &err), 0);
	cr_assert_str_eq(out.reason, "destroy");
	pdk_store_ended_release(&out);
	pdk_store_free(s);
}

/* A walk of the ended table whose callback walks it again and reads rows: both see every row. */
struct ended_nest {
	struct pdk_store *s;
	int outer, inner, depth;
};

static int nest_ended_cb(void *data, const struct pdk_store_ended *e)
{
	struct ended_nest *n = data;
	struct pdk_store_ended out = {0};
	struct pdk_error *err = NULL;

	n->outer++;
	if (n->depth++ == 0)
		cr_assert_eq(pdk_store_ended_each(n->s, count_ended, &n->inner, &err), 0);
	cr_assert_eq(pdk_store_ended_get(n->s, e->id, &out, &err), 0);
	cr_assert_str_eq(out.id, e->id);
	pdk_store_ended_release(&out);
	return 0;
}

static int stop_ended(void *data, const struct pdk_store_ended *e)
{
	(void)data;
	(void)e;
	return 5;
}

Test(store, nested_ended_walks_use_their_own_statement)
{
	struct pdk_store *s = open_store();
	struct ended_nest n = {.s = s};
	struct pdk_error *err = NULL;

	insert_and_end(s, "sb-1", NULL, 1);
	insert_and_end(s, "sb-2", NULL, 2);
	insert_and_end(s, "sb-3", NULL, 3);
	cr_assert_eq(pdk_store_ended_each(s, nest_ended_cb, &n, &err), 0);
	cr_assert_eq(n.outer, 3);
	cr_assert_eq(n.inner, 3);
	/* A walk stopped by its callback leaves the kept statement reset: the next starts over. */
	cr_assert_eq(pdk_store_ended_each(s, stop_ended, NULL, &err), 5);
	n = (struct ended_nest){.s = s};
	cr_assert_eq(pdk_store_ended_each(s, nest_ended_cb, &n, &err), 0);
	cr_assert_eq(n.outer, 3);
	pdk_store_free(s);
}
