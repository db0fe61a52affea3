/*
 * record.c - image records (STATE/images/images/HEX.json) and configs.
 *
 * An image's digest is the sha256 of the canonical JSON (compact, keys
 * sorted) of {"config": ..., "layers": [...]}: what a sandbox on it gets,
 * and nothing of where it came from, so one content imported twice, from
 * two kinds of source, is one image.
 */
#include "common.h"
#include "base.h"
#include "image-internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECORD_MAX (4u << 20)

void pdk_image_config_release(struct pdk_image_config *c)
{
	if (c == NULL)
		return;
	pdk_strv_free(c->env);
	free(c->workdir);
	free(c->user);
	pdk_strv_free(c->entrypoint);
	pdk_strv_free(c->cmd);
	memset(c, 0, sizeof(*c));
}

void pdk__img_config_copy(struct pdk_image_config *dst, const struct pdk_image_config *src)
{
	memset(dst, 0, sizeof(*dst));
	if (src == NULL)
		return;
	dst->env = pdk_strv_dup(src->env);
	dst->workdir = src->workdir ? pdk_xstrdup(src->workdir) : NULL;
	dst->user = src->user ? pdk_xstrdup(src->user) : NULL;
	dst->entrypoint = pdk_strv_dup(src->entrypoint);
	dst->cmd = pdk_strv_dup(src->cmd);
}

void pdk__img_config_merge(struct pdk_image_config *c, const struct pdk_image_config *over)
{
	if (over == NULL)
		return;
	for (size_t i = 0; over->env != NULL && over->env[i] != NULL; i++)
		pdk_env_set_take(&c->env, pdk_xstrdup(over->env[i]));
	if (over->workdir != NULL) {
		free(c->workdir);
		c->workdir = pdk_xstrdup(over->workdir);
	}
	if (over->user != NULL) {
		free(c->user);
		c->user = pdk_xstrdup(over->user);
	}
	if (over->entrypoint != NULL) {
		pdk_strv_free(c->entrypoint);
		c->entrypoint = pdk_strv_dup(over->entrypoint);
	}
	if (over->cmd != NULL) {
		pdk_strv_free(c->cmd);
		c->cmd = pdk_strv_dup(over->cmd);
	}
}

/* A JSON array of strings as a strv (NULL when it is not one, or empty). */
static char **strv_from_json(const json_t *a)
{
	char **v = NULL;
	size_t i;
	json_t *x;

	if (!json_is_array(a))
		return NULL;
	json_array_foreach(a, i, x) if (json_is_string(x)) pdk_strv_push(&v, json_string_value(x));
	return v;
}

static char *str_from_json(const json_t *s)
{
	return json_is_string(s) && json_string_value(s)[0] != '\0'
		       ? pdk_xstrdup(json_string_value(s))
		       : NULL;
}

void pdk__img_config_from_json(const json_t *cfg, struct pdk_image_config *out)
{
	memset(out, 0, sizeof(*out));
	if (!json_is_object(cfg))
		return;
	out->env = strv_from_json(json_object_get(cfg, "Env"));
	out->workdir = str_from_json(json_object_get(cfg, "WorkingDir"));
	out->user = str_from_json(json_object_get(cfg, "User"));
	out->entrypoint = strv_from_json(json_object_get(cfg, "Entrypoint"));
	out->cmd = strv_from_json(json_object_get(cfg, "Cmd"));
}

static json_t *config_json(const struct pdk_image_config *c)
{
	json_t *o = json_object();

	if (c->env != NULL)
		pdk_json_set(o, "env", pdk_json_strv(c->env));
	if (c->workdir != NULL)
		pdk_json_set(o, "workdir", json_string(c->workdir));
	if (c->user != NULL)
		pdk_json_set(o, "user", json_string(c->user));
	if (c->entrypoint != NULL)
		pdk_json_set(o, "entrypoint", pdk_json_strv(c->entrypoint));
	if (c->cmd != NULL)
		pdk_json_set(o, "cmd", pdk_json_strv(c->cmd));
	return o;
}

static void config_parse(const json_t *o, struct pdk_image_config *c)
{
	memset(c, 0, sizeof(*c));
	c->env = strv_from_json(json_object_get(o, "env"));
	c->workdir = str_from_json(json_object_get(o, "workdir"));
	c->user = str_from_json(json_object_get(o, "user"));
	c->entrypoint = strv_from_json(json_object_get(o, "entrypoint"));
	c->cmd = strv_from_json(json_object_get(o, "cmd"));
}

void pdk__img_compute_digest(struct pdk_image *img)
{
	_cleanup_json_ json_t *o = json_object();
	_cleanup_free_ char *text = NULL;

	pdk_json_set(o, "config", config_json(&img->config));
	pdk_json_set(o, "layers", pdk_json_strv(img->layers));
	text = pdk_json_dump_line(o);
	if (text == NULL)
		pdk_oom();
	free(img->digest);
	img->digest = pdk__img_sha256(text, strlen(text));
}

static json_t *record_json(const struct pdk_image *img)
{
	json_t *o = json_object();

	pdk_json_set(o, "digest", json_string(img->digest));
	pdk_json_set(o, "names", pdk_json_strv(img->names));
	pdk_json_set(o, "source", json_string(img->source ? img->source : ""));
	pdk_json_set(o, "created_ns", json_integer((json_int_t)img->created_ns));
	pdk_json_set(o, "size", json_integer((json_int_t)img->size));
	pdk_json_set(o, "layers", pdk_json_strv(img->layers));
	pdk_json_set(o, "config", config_json(&img->config));
	return o;
}

int pdk__img_record_write(struct pdk_image_store *st, const struct pdk_image *img,
			  struct pdk_error **err)
{
	_cleanup_json_ json_t *o = record_json(img);
	_cleanup_free_ char *text = pdk_json_dump_line(o);
	_cleanup_free_ char *tmp = pdk_xasprintf("images/.%s.tmp", pdk__img_hex(img->digest));
	_cleanup_free_ char *dst = pdk_xasprintf("images/%s.json", pdk__img_hex(img->digest));

	if (text == NULL)
		pdk_oom();
	if (pdk_write_file_at(st->dirfd, tmp, text, true, err) < 0)
		return -1;
	if (renameat(st->dirfd, tmp, st->dirfd, dst) < 0)
		return pdk_error_set(err, errno, "cannot record the image in '%s/%s'", st->dir,
				     dst);
	return 0;
}

static int record_parse(const char *text, const char *path, struct pdk_image **out,
			struct pdk_error **err)
{
	_cleanup_json_ json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	struct pdk_image *img;

	if (!json_is_object(o) || !json_is_string(json_object_get(o, "digest")) ||
	    !json_is_array(json_object_get(o, "layers")))
		return pdk_error_setx(err, EINVAL, "the image record '%s' does not read", path);
	img = pdk_xcalloc(1, sizeof(*img));
	img->digest = pdk_xstrdup(json_string_value(json_object_get(o, "digest")));
	img->names = strv_from_json(json_object_get(o, "names"));
	if (img->names == NULL)
		img->names = pdk_xcalloc(1, sizeof(char *));
	img->source = str_from_json(json_object_get(o, "source"));
	img->created_ns = (uint64_t)json_integer_value(json_object_get(o, "created_ns"));
	img->size = (uint64_t)json_integer_value(json_object_get(o, "size"));
	img->layers = strv_from_json(json_object_get(o, "layers"));
	if (img->layers == NULL)
		img->layers = pdk_xcalloc(1, sizeof(char *));
	config_parse(json_object_get(o, "config"), &img->config);
	*out = img;
	return 0;
}

int pdk__img_record_read(struct pdk_image_store *st, const char *hex, struct pdk_image **out,
			 struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("images/%s.json", hex);
	_cleanup_free_ char *text = NULL;

	if (pdk_read_file_at(st->dirfd, path, RECORD_MAX, &text, err) < 0)
		return -1;
	return record_parse(text, path, out, err);
}

const char *pdk__img_display(const struct pdk_image *img)
{
	return img->names[0] != NULL ? img->names[0] : img->digest;
}

bool pdk__img_has_name(const struct pdk_image *img, const char *name)
{
	for (size_t i = 0; img->names[i] != NULL; i++)
		if (strcmp(img->names[i], name) == 0)
			return true;
	return false;
}

void pdk__img_drop_name(struct pdk_image *img, const char *name)
{
	size_t w = 0;

	for (size_t i = 0; img->names[i] != NULL; i++) {
		if (strcmp(img->names[i], name) == 0)
			free(img->names[i]);
		else
			img->names[w++] = img->names[i];
	}
	img->names[w] = NULL;
}

void pdk__img_records_free(struct pdk_image **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pdk_image_free(v[i]);
	free(v);
}

/* Whether `name` is a record's file name: 64 hex digits and ".json". */
static bool record_name(const char *name)
{
	size_t len = strlen(name);

	return len == 64 + 5 && strcmp(name + 64, ".json") == 0 && name[0] != '.';
}

int pdk__img_records(struct pdk_image_store *st, struct pdk_image ***out, size_t *n,
		     struct pdk_error **err)
{
	int fd = openat(st->dirfd, "images", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct pdk_image **v = NULL;
	struct dirent *de;
	size_t cnt = 0;

	if (d == NULL) {
		if (fd >= 0)
			(void)close(fd);
		return pdk_error_set(err, errno, "cannot read '%s/images'", st->dir);
	}
	while ((de = readdir(d)) != NULL) {
		_cleanup_free_ char *hex = NULL;
		struct pdk_image *img = NULL;

		if (!record_name(de->d_name))
			continue;
		hex = pdk_xasprintf("%.64s", de->d_name);
		if (pdk__img_record_read(st, hex, &img, err) < 0) {
			if ((*err)->status == ENOENT) { /* removed meanwhile */
				pdk_error_free(err);
				continue;
			}
			pdk__img_records_free(v, cnt);
			return -1;
		}
		v = pdk_xrealloc(v, (cnt + 1) * sizeof(*v));
		v[cnt++] = img;
	}
	*out = v;
	*n = cnt;
	return 0;
}
