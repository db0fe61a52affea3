/*
 * pools.c - warm pools: ready sandboxes of a profile, kept at the pool's
 * size, each warmed up by one command before it can be claimed; the refill
 * after a claim held back until the claimed sandbox's first exec answered.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define POOL_STARTING_MAX 4 /* supervisors of one pool starting at once */

/* ---- the warm-up ---- */

/*
 * The warm-up of a pool member. The first command in a fresh sandbox costs
 * about 1.5 ms more than the next ones (the init's first vfork, the
 * tracer's first notification, the first exec of the program in the new
 * mount namespace: page tables, dentries, the cgroup's first charges).
 * A pool member therefore runs `true` once, with /dev/null as its stdio,
 * before it can be claimed: the claimer's first exec is then as fast as
 * any other. The exec is recorded like any other (the supervisor marks it
 * "warm" and does not charge it to the commands budget).
 */
#define WARM_TIMEOUT_MS 5000

bool pdk__warm_exited(struct pdk_ctl_sb *sb, json_t *exit)
{
	const char *end = json_string_value(json_object_get(exit, "end"));

	if (!sb->warming || sb->warm_exec == NULL ||
	    !json_equal(sb->warm_exec, json_object_get(exit, "exec")))
		return false;
	if (end == NULL || strcmp(end, "exited") != 0 ||
	    json_integer_value(json_object_get(exit, "exit_code")) != 0)
		pdk_ctl_event(sb->c, sb->row.id, sb->labels, "pool.warm_failed",
			      json_pack("{s:O}", "exit", exit));
	sb->warming = false;
	json_decref(sb->warm_exec);
	sb->warm_exec = NULL;
	return true;
}

static void warm_started(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	(void)ctx;
	pdk__close_fds(fds, nfds);
	if (pdk__svc_failed(reply)) {
		/* Claimable anyway: the warm-up is an optimisation, not a check. */
		if (reply != NULL)
			pdk_ctl_event(sb->c, sb->row.id, sb->labels, "pool.warm_failed",
				      json_pack("{s:O}", "error", json_object_get(reply, "error")));
		sb->warming = false;
		return;
	}
	sb->warm_exec = json_incref(json_object_get(reply, "exec"));
}

void pdk__warm_start(struct pdk_ctl_sb *sb)
{
	int null[3] = {-1, -1, -1};
	json_t *op;

	for (int i = 0; i < 3; i++)
		if ((null[i] = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
			goto out;
	op = json_pack("{s:s, s:[s], s:[], s:I, s:b, s:b}", "op", "exec", "argv", "true", "env",
		       "timeout_ms", (json_int_t)WARM_TIMEOUT_MS, "pty", 0, "warm", 1);
	if (pdk__sb_call(sb, op, null, 3, warm_started, NULL) == 0)
		sb->warming = true;
out:
	pdk__close_fds(null, 3);
}

/* ---- the passes ---- */

/*
 * Whether a pool member runs on the image a create names (r->image NULL: the
 * profile's, which the member has). A warm pool per image is a pool of a
 * profile that names the image (`image:`): a create of that profile, or of
 * it with the same image named, claims from it.
 */
static bool same_image(const struct pdk_ctl_sb *sb, const struct pdk_ctl_create *r)
{
	const json_t *img = json_object_get(sb->facts, "image");
	const char *name = json_string_value(json_object_get(img, "name"));

	if (r->image == NULL)
		return true;
	if (strcmp(r->image, "host") == 0)
		return !json_is_object(img);
	return name != NULL && strcmp(name, r->image) == 0;
}

struct pdk_ctl_sb *pdk__pool_member(struct pdk_ctl *c, const struct pdk_ctl_create *r)
{
	/* A scoped create token is kept in the spec, which a pool member was started without. */
	if (r->workspace != NULL || r->overrides != NULL || r->env != NULL || r->token_ops != 0 ||
	    r->token_ttl_s != 0)
		return NULL;
	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next)
		if (sb->row.pool && !sb->destroying && !sb->warming && sb->ctl_fd >= 0 &&
		    strcmp(sb->row.state, "running") == 0 &&
		    strcmp(sb->row.profile, r->profile) == 0 && same_image(sb, r))
			return sb;
	return NULL;
}

static int pool_fill(void *data, const char *profile, uint64_t size)
{
	struct pdk_ctl *c = data;
	uint64_t have = 0, starting = 0;

	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next) {
		if (!sb->row.pool || sb->destroying || strcmp(sb->row.profile, profile) != 0)
			continue;
		/* A pool that shrank gives back its extra ready members. */
		if (have >= size && strcmp(sb->row.state, "running") == 0)
			pdk__sb_destroy(sb, "pool_shrink");
		else
			have++;
		if (strcmp(sb->row.state, "starting") == 0)
			starting++;
	}
	/*
	 * The whole deficit at once, bounded: at most POOL_STARTING_MAX members of a pool start
	 * at the same time (the rest at the next tick or claim), so a refill never floods the
	 * machine.
	 */
	while (have < size && starting < POOL_STARTING_MAX) {
		_cleanup_error_ struct pdk_error *err = NULL;
		_cleanup_json_ json_t *labels = json_object();
		struct pdk_ctl_create r = {.profile = profile, .labels = labels};

		if (pdk__sb_start(c, &r, true, &err) == NULL) {
			pdk__ctl_log(c, PDK_LOG_WARN, "pool '%s': %s", profile, err->msg);
			break;
		}
		have++;
		starting++;
	}
	return 0;
}

static void pools_pass(struct pdk_ctl *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (c->stopping || !c->started)
		return;
	if (pdk_store_pool_each(c->store, pool_fill, c, &err) < 0)
		pdk__ctl_log(c, PDK_LOG_WARN, "pools: %s", err->msg);
}

/*
 * The refill after a claim is held back: a replacement's start (a supervisor
 * building a sandbox: tens of ms of CPU) would compete with the claimed
 * sandbox's first exec for the CPUs, and that exec is what the client waits
 * for. It starts when no claimed sandbox waits for its first exec any more,
 * and at the latest REFILL_HOLD_MS after the claim (a client that never
 * execs does not stop the pool from refilling).
 */
#define REFILL_HOLD_MS 200

static void refill_due(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl *c = arg;

	(void)fd;
	(void)what;
	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next)
		sb->first_exec_pending = false; /* the hold is over for every claim so far */
	pools_pass(c);
}

void pdk__pools_claimed(struct pdk_ctl *c)
{
	struct timeval tv = {0, REFILL_HOLD_MS * 1000};

	if (c->refill == NULL && (c->refill = evtimer_new(c->base, refill_due, c)) == NULL)
		pdk_oom();
	/* A later claim does not push the first one's deadline back. */
	if (!evtimer_pending(c->refill, NULL) && evtimer_add(c->refill, &tv) < 0)
		pdk_oom();
}

void pdk__sb_first_exec_done(struct pdk_ctl_sb *sb)
{
	struct pdk_ctl *c = sb->c;

	if (!sb->first_exec_pending)
		return;
	sb->first_exec_pending = false;
	for (struct pdk_ctl_sb *o = c->sandboxes; o != NULL; o = o->next)
		if (o->first_exec_pending && !o->destroying)
			return;
	/*
	 * Not here: the exec's answer is only queued; the front end writes it on
	 * the loop's next turn. A zero timer runs after that write (the loop
	 * handles the ready sockets before the expired timers of the same turn).
	 */
	if (c->refill != NULL && evtimer_pending(c->refill, NULL)) {
		struct timeval now = {0, 0};

		evtimer_del(c->refill);
		if (evtimer_add(c->refill, &now) < 0)
			pdk_oom();
	}
}

void pdk__pools_tick(struct pdk_ctl *c)
{
	if (c->refill != NULL && evtimer_pending(c->refill, NULL))
		return; /* held back after a claim: refill_due() runs the pass */
	pools_pass(c);
}

void pdk__pools_now(struct pdk_ctl *c)
{
	pools_pass(c);
}

/* ---- the pools' public side ---- */

struct pool_list {
	struct pdk_ctl *c;
	struct pdk_ctl_pool *v;
	size_t n;
};

static int pool_entry(void *data, const char *profile, uint64_t size)
{
	struct pool_list *l = data;
	struct pdk_ctl_pool p = {.profile = pdk_xstrdup(profile), .size = size};

	for (struct pdk_ctl_sb *sb = l->c->sandboxes; sb != NULL; sb = sb->next) {
		if (!sb->row.pool || sb->destroying || strcmp(sb->row.profile, profile) != 0)
			continue;
		if (strcmp(sb->row.state, "starting") == 0 || sb->warming)
			p.starting++;
		else if (strcmp(sb->row.state, "running") == 0)
			p.ready++;
	}
	l->v = pdk_xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	l->v[l->n++] = p;
	return 0;
}

int pdk_ctl_pools(struct pdk_ctl *c, struct pdk_ctl_pool **pools, size_t *n, struct pdk_error **err)
{
	struct pool_list l = {.c = c};

	if (pdk_store_pool_each(c->store, pool_entry, &l, err) < 0) {
		pdk_ctl_pools_free(l.v, l.n);
		return -EIO;
	}
	*pools = l.v;
	*n = l.n;
	return 0;
}

void pdk_ctl_pools_free(struct pdk_ctl_pool *pools, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(pools[i].profile);
	free(pools);
}

int pdk_ctl_pool_set(struct pdk_ctl *c, const char *profile, uint64_t size, struct pdk_error **err)
{
	if (!pdk_ctl_name_ok(profile))
		return pdk_error_set_field(err, EINVAL, "profile", "bad profile name");
	if (size > PDK_CTL_POOL_MAX)
		return pdk_error_set_field(err, EINVAL, "size", "a pool holds at most %d sandboxes",
					   PDK_CTL_POOL_MAX);
	if (pdk_store_pool_set(c->store, profile, size, err) < 0)
		return -EIO;
	/* A new or larger pool starts filling now, not at the next tick. */
	pdk__pools_now(c);
	return 0;
}
