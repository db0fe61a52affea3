/*
 * build.c - the image builder's sequence (build.h): the steps of a recipe
 * in order, each looked up in the cache by its key or run, its layer
 * stored, and the image recorded at the end. The step's command runs in
 * build-step.c, the bootstrap in build-debian.c.
 */
#include "common.h"
#include "base.h"
#include "build-internal.h"
#include "image.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_MIRROR  "http://deb.debian.org/debian"
#define DEFAULT_VARIANT "apt"
#define DEFAULT_PATH    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define DIGEST_LEN      (7 + 64) /* "sha256:" and the hex digits */

enum step_kind { STEP_FROM, STEP_DEBIAN, STEP_PACKAGES, STEP_RUN };

/* One step of the plan. */
struct step {
	enum step_kind kind;
	char *what; /* for the notes and messages */
	char *text; /* what its key hashes: the command, the script, the bootstrap's words */
	int line;
};

/* What the steps so far have made. */
struct stack {
	char **layers; /* digests, bottom first */
	char *key;     /* the chain key of the last step */
	struct pdk_image_config config;
};

static void stack_release(struct stack *s)
{
	pdk_strv_free(s->layers);
	free(s->key);
	pdk_image_config_release(&s->config);
}

static void plan_free(struct step *v, size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++) {
		free(v[i].what);
		free(v[i].text);
	}
	free(v);
}

/* ---- keys and the cache ---- */

/*
 * The key of a step: sha256 over the key below it, the step's kind and
 * text, and the network entries, each ended by a NUL so that no two
 * different lists of fields hash the same bytes. New "HEX" string.
 */
static char *step_key(const char *parent, enum step_kind kind, const char *text, char *const *net)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int md_len = 0;
	char kind_c = (char)('0' + (int)kind);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	char *out = pdk_xmalloc(65);

	if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		pdk_oom();
	(void)EVP_DigestUpdate(ctx, "paddock-build-step-1", 21);
	(void)EVP_DigestUpdate(ctx, parent, strlen(parent) + 1);
	(void)EVP_DigestUpdate(ctx, &kind_c, 1);
	(void)EVP_DigestUpdate(ctx, text, strlen(text) + 1);
	for (size_t i = 0; net != NULL && net[i] != NULL; i++)
		(void)EVP_DigestUpdate(ctx, net[i], strlen(net[i]) + 1);
	if (EVP_DigestFinal_ex(ctx, md, &md_len) != 1 || md_len != sizeof(md))
		pdk_oom();
	EVP_MD_CTX_free(ctx);
	for (size_t i = 0; i < sizeof(md); i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
	return out;
}

static bool valid_digest(const char *s)
{
	if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != DIGEST_LEN)
		return false;
	for (s += 7; *s; s++) {
		if (!isdigit((unsigned char)*s) && !(*s >= 'a' && *s <= 'f'))
			return false;
	}
	return true;
}

static char *cache_dir(const struct pdk_build_opts *o)
{
	return pdk_xasprintf("%s/build/cache", pdk_image_store_dir(o->store));
}

/* The layer the cache holds for `key`, when the store still has it (new string), else NULL. */
static char *cache_get(const struct pdk_build_opts *o, const char *key)
{
	_cleanup_free_ char *dir = cache_dir(o);
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", dir, key);
	_cleanup_error_ struct pdk_error *err = NULL;
	char *digest = NULL;
	char *nl;

	if (pdk_read_file_at(AT_FDCWD, path, 128, &digest, &err) < 0)
		return NULL;
	nl = strchr(digest, '\n');
	if (nl != NULL)
		*nl = '\0';
	if (!valid_digest(digest) || !pdk_image_layer_exists(o->store, digest)) {
		free(digest);
		return NULL;
	}
	return digest;
}

/* Record key -> digest: a file written beside and renamed, so a reader sees all or nothing. */
static int cache_put(const struct pdk_build_opts *o, const char *key, const char *digest,
		     struct pdk_error **err)
{
	_cleanup_free_ char *dir = cache_dir(o);
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", dir, key);
	_cleanup_free_ char *tmp = pdk_xasprintf("%s/.%s.%d", dir, key, (int)getpid());
	_cleanup_free_ char *text = pdk_xasprintf("%s\n", digest);

	if (pdk_mkdir_p(dir, err) < 0 || pdk_replace_file(tmp, path, text, err) < 0)
		return -1;
	return 0;
}

/* ---- the plan ---- */

/*
 * apt's own directories for lists and downloads belong to _apt (uid 42),
 * which the step's user namespace does not map: even its root may not open
 * them. The step's apt keeps both under /tmp (the sandbox's tmpfs, never
 * part of the layer) instead, and runs its downloads as root.
 */
static const char packages_script[] =
	"set -e\n"
	"proxy=\"${http_proxy:-DIRECT}\"\n"
	"mkdir -p /tmp/apt/lists/partial /tmp/apt/archives/partial\n"
	"apt_get() {\n"
	"  apt-get -q -o APT::Sandbox::User=root -o Acquire::http::Proxy=\"$proxy\" \\\n"
	"    -o Acquire::https::Proxy=\"$proxy\" -o Dpkg::Use-Pty=0 \\\n"
	"    -o Dir::State::Lists=/tmp/apt/lists -o Dir::Cache::Archives=/tmp/apt/archives \"$@\"\n"
	"}\n"
	"apt_get update\n"
	"apt_get install -y --no-install-recommends";

/* `s` (taken) with " WORD" appended for each word of `v`. New string. */
static char *append_words(char *s, char *const *v)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		char *next = pdk_xasprintf("%s%s%s", s, *s ? " " : "", v[i]);

		free(s);
		s = next;
	}
	return s;
}

/* The packages step's script: apt-get through the egress proxy, its lists and downloads in /tmp. */
static char *packages_text(char *const *pkgs)
{
	_cleanup_free_ char *s = append_words(pdk_xstrdup(packages_script), pkgs);

	return pdk_xasprintf("%s\n", s);
}

/* The first line of a command, at most 60 bytes of it, for the notes. */
static char *short_what(const char *prefix, const char *cmd)
{
	size_t len = strcspn(cmd, "\n");
	bool more = len > 60 || cmd[len] != '\0';

	return pdk_xasprintf("%s %.*s%s", prefix, (int)(len > 60 ? 60 : len), cmd,
			     more ? " ..." : "");
}

static struct step *plan_new(const struct pdk_recipe *r, size_t *n)
{
	struct step *v = pdk_xcalloc(r->n_steps + 2, sizeof(*v));
	size_t i = 0;

	if (r->from != NULL) {
		v[i++] = (struct step){STEP_FROM, pdk_xasprintf("FROM %s", r->from),
				       pdk_xstrdup(r->from), 0};
	} else {
		const char *mirror = r->debian.mirror ? r->debian.mirror : DEFAULT_MIRROR;
		const char *variant = r->debian.variant ? r->debian.variant : DEFAULT_VARIANT;

		v[i++] = (struct step){
			STEP_DEBIAN,
			pdk_xasprintf("DEBIAN %s (%s, %s)", r->debian.suite, variant, mirror),
			/* The bootstrap's own version: its key changes with the way it is made. */
			pdk_xasprintf("mmdebstrap-2\n%s\n%s\n%s", r->debian.suite, mirror, variant),
			0};
	}
	if (r->packages != NULL && r->packages[0] != NULL) {
		_cleanup_free_ char *list = append_words(pdk_xstrdup(""), r->packages);

		v[i++] = (struct step){STEP_PACKAGES, short_what("PACKAGES", list),
				       packages_text(r->packages), 0};
	}
	for (size_t k = 0; k < r->n_steps; k++)
		v[i++] = (struct step){STEP_RUN, short_what("RUN", r->steps[k].run),
				       pdk_xstrdup(r->steps[k].run), r->steps[k].line};
	*n = i;
	return v;
}

/* ---- notes ---- */

static void note(struct pdk__build *b, const struct pdk_build_note *n)
{
	if (b->o->note != NULL)
		b->o->note(b->o->note_arg, n);
}

static void note_step(struct pdk__build *b)
{
	note(b, &(struct pdk_build_note){.kind = PDK_BUILD_NOTE_STEP,
					 .step = b->step,
					 .steps = b->steps,
					 .what = b->what,
					 .line = b->line});
}

static void note_done(struct pdk__build *b, const char *digest, bool cached, uint64_t start)
{
	note(b, &(struct pdk_build_note){.kind = PDK_BUILD_NOTE_DONE,
					 .step = b->step,
					 .steps = b->steps,
					 .what = b->what,
					 .line = b->line,
					 .cached = cached,
					 .digest = digest,
					 .elapsed_ns = pdk_now_mono_ns() - start});
}

void pdk__build_output(struct pdk__build *b, const char *text, size_t len)
{
	note(b, &(struct pdk_build_note){.kind = PDK_BUILD_NOTE_OUTPUT,
					 .step = b->step,
					 .steps = b->steps,
					 .what = b->what,
					 .line = b->line,
					 .text = text,
					 .len = len});
	for (size_t i = 0; i < len; i++) {
		b->tail[b->tail_pos] = text[i];
		b->tail_pos = (b->tail_pos + 1) % PDK__BUILD_TAIL;
		if (b->tail_len < PDK__BUILD_TAIL)
			b->tail_len++;
	}
}

char *pdk__build_tail(const struct pdk__build *b)
{
	size_t start = (b->tail_pos + PDK__BUILD_TAIL - b->tail_len) % PDK__BUILD_TAIL;
	char *out = pdk_xmalloc(b->tail_len + 1);
	char *from = out;

	for (size_t i = 0; i < b->tail_len; i++)
		out[i] = b->tail[(start + i) % PDK__BUILD_TAIL];
	out[b->tail_len] = '\0';
	/* A full ring was cut somewhere in a line: start at the next whole one. */
	if (b->tail_len == PDK__BUILD_TAIL && strchr(out, '\n') != NULL)
		from = strchr(out, '\n') + 1;
	memmove(out, from, strlen(from) + 1);
	return out;
}

void pdk__build_end_release(struct pdk__build_end *end)
{
	pdk_strv_free(end->denied);
	*end = (struct pdk__build_end){0};
}

void pdk_build_failure_release(struct pdk_build_failure *f)
{
	if (f == NULL)
		return;
	free(f->what);
	free(f->tail);
	pdk_strv_free(f->denied);
	*f = (struct pdk_build_failure){0};
}

/* A step's command failed: *why says which and how; -ECHILD + *err says it in one line. */
static int step_failed(struct pdk__build *b, struct pdk__build_end *end,
		       struct pdk_build_failure *why, struct pdk_error **err)
{
	_cleanup_free_ char *at = b->line > 0
					  ? pdk_xasprintf(" (%s:%d)", b->o->recipe->source, b->line)
					  : pdk_xstrdup("");
	_cleanup_free_ char *how = end->signal > 0
					   ? pdk_xasprintf("was killed by signal %d", end->signal)
					   : pdk_xasprintf("exited with status %d", end->exit_code);

	if (why != NULL) {
		*why = (struct pdk_build_failure){.step = b->step,
						  .line = b->line,
						  .what = pdk_xstrdup(b->what),
						  .exit_code = end->exit_code,
						  .signal = end->signal,
						  .tail = pdk__build_tail(b),
						  .denied = steal_ptr(&end->denied)};
	}
	return pdk_error_setx(err, ECHILD, "step %zu/%zu%s %s %s", b->step, b->steps, at, b->what,
			      how);
}

/* ---- the steps ---- */

/* Whether layers[i] is also above it in the stack (bottom first). */
static bool shadowed(char *const *layers, size_t i)
{
	for (size_t j = i + 1; layers[j] != NULL; j++) {
		if (strcmp(layers[j], layers[i]) == 0)
			return true;
	}
	return false;
}

/*
 * The stack without the lower copies of a layer that is in it twice (two
 * steps that made the same changes, two that changed nothing): overlayfs
 * refuses a directory given twice (ELOOP). Leaving them out changes
 * nothing: every path of the lower copy is also in the upper one, which
 * hides it. New strv, bottom first.
 */
static char **unique_layers(char *const *layers)
{
	char **v = NULL;

	for (size_t i = 0; layers != NULL && layers[i] != NULL; i++) {
		if (!shadowed(layers, i))
			pdk_strv_push(&v, layers[i]);
	}
	return v;
}

/* The environment of a step: a PATH, the image's variables, the recipe's, no prompts. */
static char **step_env(const struct stack *s, const struct pdk_recipe *r)
{
	char **env = NULL;

	pdk_env_set_take(&env, pdk_xstrdup(DEFAULT_PATH));
	pdk_env_set_take(&env, pdk_xstrdup("HOME=/root"));
	for (size_t i = 0; s->config.env != NULL && s->config.env[i] != NULL; i++)
		pdk_env_set_take(&env, pdk_xstrdup(s->config.env[i]));
	for (size_t i = 0; r->config.env != NULL && r->config.env[i] != NULL; i++)
		pdk_env_set_take(&env, pdk_xstrdup(r->config.env[i]));
	pdk_env_set_take(&env, pdk_xstrdup("DEBIAN_FRONTEND=noninteractive"));
	return env;
}

/* Make SCRATCH/ID/{upper,work}; *dir receives SCRATCH/ID. */
static int scratch_new(struct pdk__build *b, char **dir, struct pdk_error **err)
{
	char id[37];
	_cleanup_free_ char *d = NULL;
	_cleanup_free_ char *upper = NULL;
	_cleanup_free_ char *work = NULL;

	pdk_make_id(id);
	d = pdk_xasprintf("%s/%s", b->scratch, id);
	upper = pdk_xasprintf("%s/upper", d);
	work = pdk_xasprintf("%s/work", d);
	if (pdk_mkdir_p(upper, err) < 0 || pdk_mkdir_p(work, err) < 0)
		return -1;
	/* The upper layer is the root directory of the image: its mode is the root's. */
	if (chmod(upper, 0755) < 0)
		return pdk_error_set(err, errno, "chmod '%s'", upper);
	*dir = steal_ptr(&d);
	return 0;
}

static void scratch_remove(struct pdk__build *b, const char *dir)
{
	int rc = pdk_rm_rf_at(AT_FDCWD, dir);

	if (rc < 0)
		pdk_log(b->o->log, PDK_LOG_WARN, "cannot remove the build's scratch '%s': %s", dir,
			strerror(-rc));
}

/*
 * The image built so far, recorded nameless (source "build-step") so that
 * a step's sandbox runs on it the way any sandbox runs on an image: found
 * by digest and held while the step runs. `paddock image prune` removes
 * these records; the layers stay as long as an image lists them.
 */
static int stack_image(struct pdk__build *b, const struct stack *s, char **digest,
		       struct pdk_error **err)
{
	_cleanup_strv_ char **layers = unique_layers(s->layers);
	/*
	 * A step runs as root inside (uid and gid 0, mapped to the user who
	 * builds, as an image's user is): package managers need it, whatever
	 * user the base image names for the sandboxes that run on it.
	 */
	struct pdk_image_config c = s->config;
	struct pdk_image *img = NULL;

	c.user = "0:0";
	if (pdk_image_commit(b->o->store, NULL, layers, &c, "build-step", &img, err) < 0)
		return pdk_error_wrap(err, "step %zu/%zu: the image so far", b->step, b->steps);
	*digest = pdk_xstrdup(pdk_image_digest(img));
	pdk_image_free(img);
	return 0;
}

/* Run a RUN or PACKAGES step and store its upper layer; -ECHILD when the command failed. */
static int run_step(struct pdk__build *b, const struct step *st, struct stack *s, char **digest,
		    struct pdk_build_failure *why, struct pdk_error **err)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_free_ char *upper = NULL;
	_cleanup_free_ char *image = NULL;
	_cleanup_strv_ char **env = step_env(s, b->o->recipe);
	char *argv[] = {"/bin/sh", "-c", st->text, NULL};
	struct pdk__build_end end = {0};
	int rc;

	if (stack_image(b, s, &image, err) < 0 || scratch_new(b, &dir, err) < 0)
		return -1;
	upper = pdk_xasprintf("%s/upper", dir);
	rc = pdk__build_run_step(b, image, dir, argv, env, &end, err);
	if (rc == 0 && (end.exit_code != 0 || end.signal != 0))
		rc = step_failed(b, &end, why, err);
	if (rc == 0)
		rc = pdk_image_layer_add_dir(b->o->store, upper, PDK_IMAGE_LAYER_UPPER, digest,
					     NULL, err);
	pdk__build_end_release(&end);
	scratch_remove(b, dir);
	return rc;
}

/* The bootstrap: mmdebstrap's tar, stored as one layer. */
static int debian_step(struct pdk__build *b, char **digest, struct pdk_build_failure *why,
		       struct pdk_error **err)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_free_ char *tar = NULL;
	_cleanup_close_ int fd = -1;
	struct pdk__build_end end = {0};
	int rc;

	if (scratch_new(b, &dir, err) < 0)
		return -1;
	tar = pdk_xasprintf("%s/base.tar", dir);
	rc = pdk__build_debootstrap(b, tar, &end, err);
	if (rc == 0 && (end.exit_code != 0 || end.signal != 0))
		rc = step_failed(b, &end, why, err);
	if (rc == 0 && (fd = open(tar, O_RDONLY | O_CLOEXEC)) < 0)
		rc = pdk_error_set(err, errno, "cannot open mmdebstrap's output '%s'", tar);
	if (rc == 0)
		rc = pdk_image_layer_add_tar(b->o->store, fd, "the bootstrapped suite", 0, digest,
					     NULL, err);
	pdk__build_end_release(&end);
	scratch_remove(b, dir);
	return rc;
}

static int from_step(struct pdk__build *b, const struct step *st, struct stack *s,
		     struct pdk_error **err)
{
	struct pdk_image *img = NULL;
	const struct pdk_image_config *c;
	uint64_t start = pdk_now_mono_ns();

	note_step(b);
	if (pdk_image_lookup(b->o->store, st->text, &img, err) < 0)
		return pdk_error_wrap(err, "%s: the base image", st->what);
	c = pdk_image_config(img);
	s->layers = pdk_strv_dup(pdk_image_layers(img));
	s->key = pdk_xstrdup(pdk_image_digest(img));
	s->config = (struct pdk_image_config){
		.env = pdk_strv_dup(c->env),
		.workdir = c->workdir ? pdk_xstrdup(c->workdir) : NULL,
		.user = c->user ? pdk_xstrdup(c->user) : NULL,
		.entrypoint = pdk_strv_dup(c->entrypoint),
		.cmd = pdk_strv_dup(c->cmd),
	};
	note_done(b, NULL, true, start);
	pdk_image_free(img);
	return 0;
}

/*
 * A step that makes a layer: its key from the one below, the cache, else
 * the work; the layer goes on the stack.
 */
static int layer_step(struct pdk__build *b, const struct step *st, struct stack *s,
		      struct pdk_build_failure *why, struct pdk_error **err)
{
	const char *parent = s->key != NULL ? s->key : "";
	/* The bootstrap reaches its mirror from the host: the steps' network is not its key's. */
	char *const *net = st->kind == STEP_DEBIAN ? NULL : b->o->recipe->network;
	_cleanup_free_ char *key = step_key(parent, st->kind, st->text, net);
	_cleanup_free_ char *digest = b->o->no_cache ? NULL : cache_get(b->o, key);
	uint64_t start = pdk_now_mono_ns();
	bool cached = digest != NULL;
	int rc = 0;

	note_step(b);
	b->tail_len = b->tail_pos = 0;
	if (!cached && st->kind == STEP_DEBIAN)
		rc = debian_step(b, &digest, why, err);
	else if (!cached)
		rc = run_step(b, st, s, &digest, why, err);
	if (rc < 0)
		return rc;
	if (!cached && cache_put(b->o, key, digest, err) < 0)
		return -1;
	if (pdk_strv_len(s->layers) >= PDK_IMAGE_MAX_LAYERS)
		return pdk_error_setx(err, E2BIG, "step %zu/%zu: more than %d layers", b->step,
				      b->steps, PDK_IMAGE_MAX_LAYERS);
	pdk_strv_push(&s->layers, digest);
	free(s->key);
	s->key = steal_ptr(&key);
	note_done(b, digest, cached, start);
	return 0;
}

/* The image's config: the base image's, each field the recipe sets replacing it. */
static void apply_config(struct stack *s, const struct pdk_recipe *r)
{
	for (size_t i = 0; r->config.env != NULL && r->config.env[i] != NULL; i++)
		pdk_env_set_take(&s->config.env, pdk_xstrdup(r->config.env[i]));
	if (r->config.workdir != NULL) {
		free(s->config.workdir);
		s->config.workdir = pdk_xstrdup(r->config.workdir);
	}
	if (r->config.user != NULL) {
		free(s->config.user);
		s->config.user = pdk_xstrdup(r->config.user);
	}
	if (r->config.entrypoint != NULL) {
		/* A new entrypoint drops the base image's command, which was its argument. */
		pdk_strv_free(s->config.entrypoint);
		pdk_strv_free(s->config.cmd);
		s->config.entrypoint = pdk_strv_dup(r->config.entrypoint);
		s->config.cmd = NULL;
	}
}

static int run_steps(struct pdk__build *b, const struct step *plan, struct stack *s,
		     struct pdk_build_failure *why, struct pdk_error **err)
{
	for (size_t i = 0; i < b->steps; i++) {
		int rc;

		b->step = i + 1;
		b->what = plan[i].what;
		b->line = plan[i].line;
		rc = plan[i].kind == STEP_FROM ? from_step(b, &plan[i], s, err)
					       : layer_step(b, &plan[i], s, why, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int pdk_build_run(const struct pdk_build_opts *o, struct pdk_image **out,
		  struct pdk_build_failure *why, struct pdk_error **err)
{
	struct pdk__build b = {.o = o};
	struct stack s = {0};
	struct step *plan = plan_new(o->recipe, &b.steps);
	int rc;

	if (why != NULL)
		*why = (struct pdk_build_failure){0};
	b.scratch = pdk_xasprintf("%s/build/tmp", pdk_image_store_dir(o->store));
	rc = run_steps(&b, plan, &s, why, err);
	if (rc == 0) {
		_cleanup_strv_ char **layers = unique_layers(s.layers);

		apply_config(&s, o->recipe);
		rc = pdk_image_commit(o->store, o->recipe->name, layers, &s.config, "build", out,
				      err);
	}
	stack_release(&s);
	plan_free(plan, b.steps);
	free(b.scratch);
	return rc;
}
