/*
 * sources.c - images from outside: an OCI image layout (a directory, or a
 * tar of one: oci-archive), a `docker save` archive (or its unpacked
 * directory), a root filesystem as one tar or as a directory.
 *
 * Archives are read where they lie: the outer tar of an oci-archive or a
 * docker save is indexed (each member's offset and size) and each blob
 * read from its place with pread(), never unpacked to a scratch copy.
 * Every blob an OCI manifest names is checked against its digest, and
 * every layer's content against the diff_id the image's config declares.
 */
#include "common.h"
#include "base.h"
#include "image-internal.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define JSON_MAX       (4u << 20) /* a manifest, an index, a config */
#define MEMBERS_MAX    65536

#define MT_OCI_INDEX   "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define ANNOT_REF_NAME "org.opencontainers.image.ref.name"

struct member {
	char *name;
	char *link; /* a symlink member: the member it names, or NULL */
	uint64_t off, size;
};

/* Where a source's files are: a directory, or the members of a plain tar. */
struct source {
	const char *path;
	int dirfd; /* a directory source, else -1 */
	int fd;    /* an archive, else -1 */
	struct member *m;
	size_t n;
};

/* One layer to store: bytes of a file, and what the image declares of them. */
struct layer_ref {
	int fd; /* borrowed from the source, or owned (own_fd) */
	bool own_fd;
	uint64_t off, size;
	char *label;
	char *blob_digest; /* may be NULL */
	char *diff_id;     /* may be NULL */
};

struct plan {
	struct layer_ref *layers;
	size_t n;
	struct pdk_image_config config;
	char *name; /* the source's own name, or NULL */
};

static void plan_release(struct plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		if (p->layers[i].own_fd)
			(void)close(p->layers[i].fd);
		free(p->layers[i].label);
		free(p->layers[i].blob_digest);
		free(p->layers[i].diff_id);
	}
	free(p->layers);
	pdk_image_config_release(&p->config);
	free(p->name);
}

static void source_release(struct source *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->m[i].name);
		free(s->m[i].link);
	}
	free(s->m);
	if (s->dirfd >= 0)
		(void)close(s->dirfd);
	if (s->fd >= 0)
		(void)close(s->fd);
}

static const char *const kind_names[] = {
	[PDK_IMAGE_AUTO] = "auto",
	[PDK_IMAGE_OCI_LAYOUT] = "oci-layout",
	[PDK_IMAGE_OCI_ARCHIVE] = "oci-archive",
	[PDK_IMAGE_DOCKER_ARCHIVE] = "docker-archive",
	[PDK_IMAGE_ROOTFS_TAR] = "rootfs-tar",
	[PDK_IMAGE_ROOTFS_DIR] = "rootfs-dir",
};

const char *pdk_image_kind_name(enum pdk_image_kind kind)
{
	return (size_t)kind < PDK_ARRAY_SIZE(kind_names) ? kind_names[kind] : NULL;
}

int pdk_image_kind_parse(const char *name, enum pdk_image_kind *out)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(kind_names); i++)
		if (strcmp(kind_names[i], name) == 0) {
			*out = (enum pdk_image_kind)i;
			return 0;
		}
	return -EINVAL;
}

/* ---- the index of a plain tar ---- */

static int index_text(int fd, uint64_t off, uint64_t size, char **out)
{
	char *buf;

	if (size > PATH_MAX)
		return -1;
	buf = pdk_xmalloc((size_t)size + 1);
	if (pread(fd, buf, (size_t)size, (off_t)off) != (ssize_t)size) {
		free(buf);
		return -1;
	}
	buf[size] = '\0';
	free(*out);
	*out = buf;
	return 0;
}

/* A pax header's "path" (the only record the index needs). */
static int index_pax(int fd, uint64_t off, uint64_t size, char **path)
{
	_cleanup_free_ unsigned char *d = NULL;
	const char *k, *v;
	size_t o = 0, kn, vn;
	int rc;

	if (size > (1u << 20))
		return -1;
	d = pdk_xmalloc((size_t)size + 1);
	if (pread(fd, d, (size_t)size, (off_t)off) != (ssize_t)size)
		return -1;
	while ((rc = pdk_tar_pax_next(d, (size_t)size, &o, &k, &kn, &v, &vn)) > 0)
		if (kn == 4 && memcmp(k, "path", 4) == 0) {
			free(*path);
			*path = pdk_xasprintf("%.*s", (int)vn, v);
		}
	return rc;
}

static void add_member(struct source *s, const char *name, const char *link, uint64_t off,
		       uint64_t size)
{
	struct pdk_error *err = NULL;
	char *clean = NULL;

	if (pdk__img_clean_path(name, s->path, &clean, &err) < 0) {
		pdk_error_free(&err); /* a name no lookup can ask for */
		return;
	}
	s->m = pdk_xrealloc(s->m, (s->n + 1) * sizeof(*s->m));
	s->m[s->n++] = (struct member){clean, link ? pdk_xstrdup(link) : NULL, off, size};
}

static char *member_link(const char *name, const char *target)
{
	const char *slash = strrchr(name, '/');

	if (target[0] == '/')
		return pdk_xstrdup(target + 1);
	return slash ? pdk_xasprintf("%.*s/%s", (int)(slash - name), name, target)
		     : pdk_xstrdup(target);
}

static int index_bad(struct source *s, uint64_t off, struct pdk_error **err)
{
	return pdk_error_setx(err, EINVAL,
			      "'%s' is not a tar archive that can be read (at byte "
			      "%llu)",
			      s->path, (unsigned long long)off);
}

/* One header at *off into the index; 1 read, 0 at the end, negative + *err. */
static int index_one(struct source *s, uint64_t *off, char **lname, struct pdk_error **err)
{
	unsigned char h[PDK_TAR_BLOCK];
	_cleanup_free_ char *name = NULL, *target = NULL;
	uint64_t size, data;

	ssize_t n = pread(s->fd, h, sizeof(h), (off_t)*off);

	if (n == 0)
		return 0; /* no end blocks: read as tar does */
	if (n != (ssize_t)sizeof(h))
		return index_bad(s, *off, err);
	if (pdk_tar_zero_block(h))
		return 0;
	if (!pdk_tar_header_valid(h) || pdk_tar_num(h + PDK_TAR_SIZE, PDK_TAR_SIZE_LEN, &size) < 0)
		return index_bad(s, *off, err);
	data = *off + PDK_TAR_BLOCK;
	*off = data + (size + PDK_TAR_BLOCK - 1) / PDK_TAR_BLOCK * PDK_TAR_BLOCK;
	switch (h[PDK_TAR_TYPE]) {
	case 'L':
		return index_text(s->fd, data, size, lname) < 0 ? index_bad(s, data, err) : 1;
	case 'x':
		return index_pax(s->fd, data, size, lname) < 0 ? index_bad(s, data, err) : 1;
	default:
		break;
	}
	name = *lname ? steal_ptr(lname) : pdk_xasprintf("%.*s", (int)strnlen((char *)h, 100), h);
	if (h[PDK_TAR_TYPE] == '0' || h[PDK_TAR_TYPE] == '\0')
		add_member(s, name, NULL, data, size);
	else if (h[PDK_TAR_TYPE] == '2') {
		target = pdk_xasprintf("%.*s", (int)strnlen((char *)h + PDK_TAR_LINK, 100),
				       h + PDK_TAR_LINK);
		_cleanup_free_ char *to = member_link(name, target);
		add_member(s, name, to, 0, 0);
	}
	return s->n > MEMBERS_MAX ? pdk_error_setx(err, E2BIG, "'%s' has too many members", s->path)
				  : 1;
}

static int index_archive(struct source *s, struct pdk_error **err)
{
	_cleanup_free_ char *lname = NULL;
	uint64_t off = 0;
	int rc;

	while ((rc = index_one(s, &off, &lname, err)) > 0)
		;
	return rc;
}

static const struct member *find_member(const struct source *s, const char *name)
{
	for (int hops = 0; hops < 8; hops++) {
		const struct member *m = NULL;
		_cleanup_free_ char *clean = NULL;
		struct pdk_error *err = NULL;

		if (pdk__img_clean_path(name, s->path, &clean, &err) < 0) {
			pdk_error_free(&err);
			return NULL;
		}
		for (size_t i = 0; i < s->n && m == NULL; i++)
			if (strcmp(s->m[i].name, clean) == 0)
				m = &s->m[i];
		if (m == NULL || m->link == NULL)
			return m;
		name = m->link;
	}
	return NULL;
}

/* ---- a source's files ---- */

/*
 * The bytes of file `name` of the source: *fd (owned when *own), *off,
 * *size. In a directory, opened beneath it (RESOLVE_BENEATH: a symlink of
 * the layout cannot lead out of it).
 */
static int open_file(struct source *s, const char *name, int *fd, bool *own, uint64_t *off,
		     uint64_t *size, struct pdk_error **err)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
	const struct member *m;
	struct stat st;
	int f;

	if (s->dirfd >= 0) {
		f = (int)syscall(SYS_openat2, s->dirfd, name, &how, sizeof(how));
		if (f < 0 || fstat(f, &st) < 0 || !S_ISREG(st.st_mode)) {
			int e = f < 0 ? errno : EINVAL;

			if (f >= 0)
				(void)close(f);
			return pdk_error_set(err, e, "'%s': cannot open '%s'", s->path, name);
		}
		*fd = f, *own = true, *off = 0, *size = (uint64_t)st.st_size;
		return 0;
	}
	m = find_member(s, name);
	if (m == NULL)
		return pdk_error_setx(err, ENOENT, "'%s' has no member '%s'", s->path, name);
	*fd = s->fd, *own = false, *off = m->off, *size = m->size;
	return 0;
}

/* A JSON file of the source, checked against `digest` when it is given. */
static int read_json(struct source *s, const char *name, const char *digest, json_t **out,
		     struct pdk_error **err)
{
	_cleanup_free_ char *buf = NULL, *got = NULL;
	uint64_t off, size;
	bool own;
	int fd;
	ssize_t n;

	if (open_file(s, name, &fd, &own, &off, &size, err) < 0)
		return -1;
	if (size > JSON_MAX) {
		if (own)
			(void)close(fd);
		return pdk_error_setx(err, E2BIG, "'%s': '%s' is larger than %u bytes", s->path,
				      name, JSON_MAX);
	}
	buf = pdk_xmalloc((size_t)size + 1);
	n = pread(fd, buf, (size_t)size, (off_t)off);
	if (own)
		(void)close(fd);
	if (n != (ssize_t)size)
		return pdk_error_setx(err, EIO, "'%s': cannot read '%s'", s->path, name);
	got = pdk__img_sha256(buf, (size_t)size);
	if (digest != NULL && strcmp(got, digest) != 0)
		return pdk_error_setx(err, EINVAL, "'%s': '%s' has the digest %s, not %s", s->path,
				      name, got, digest);
	*out = json_loadb(buf, (size_t)size, JSON_REJECT_DUPLICATES, NULL);
	if (*out == NULL)
		return pdk_error_setx(err, EINVAL, "'%s': '%s' is not JSON", s->path, name);
	return 0;
}

static char *blob_path(const char *digest)
{
	return pdk_xasprintf("blobs/sha256/%s", pdk__img_hex(digest));
}

static int add_layer(struct source *s, struct plan *p, const char *file, const char *blob,
		     const char *diff, struct pdk_error **err)
{
	struct layer_ref r = {0};

	if (open_file(s, file, &r.fd, &r.own_fd, &r.off, &r.size, err) < 0)
		return -1;
	r.label = pdk_xasprintf("%s: layer '%s'", s->path, file);
	r.blob_digest = blob ? pdk_xstrdup(blob) : NULL;
	r.diff_id = diff ? pdk_xstrdup(diff) : NULL;
	p->layers = pdk_xrealloc(p->layers, (p->n + 1) * sizeof(*p->layers));
	p->layers[p->n++] = r;
	return 0;
}

/* The image config's diff_ids (may be NULL) and process config. */
static const json_t *diff_ids_of(const json_t *cfg)
{
	return json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
}

static const char *diff_id_at(const json_t *ids, size_t i)
{
	const char *d = json_string_value(json_array_get(ids, i));

	return pdk__img_digest_valid(d) ? d : NULL;
}

/* ---- OCI ---- */

static const char *ref_name(const json_t *desc)
{
	return json_string_value(
		json_object_get(json_object_get(desc, "annotations"), ANNOT_REF_NAME));
}

static int pick_desc(struct source *s, const json_t *mans, const char *select, const json_t **out,
		     struct pdk_error **err)
{
	size_t i;
	const json_t *d;

	if (!json_is_array(mans) || json_array_size(mans) == 0)
		return pdk_error_setx(err, EINVAL, "'%s': its index lists no image", s->path);
	if (select == NULL) {
		if (json_array_size(mans) == 1) {
			*out = json_array_get(mans, 0);
			return 0;
		}
		return pdk_error_set_field(err, EINVAL, "select",
					   "'%s' holds %zu images: name one (--select REF)",
					   s->path, json_array_size(mans));
	}
	json_array_foreach(mans, i, d) if (ref_name(d) != NULL && strcmp(ref_name(d), select) == 0)
	{
		*out = d;
		return 0;
	}
	return pdk_error_set_field(err, ENOENT, "select", "'%s' has no image '%s'", s->path,
				   select);
}

/* In an index of platforms, the one of this machine (amd64, arm64, ...): linux first. */
static const json_t *pick_platform(const json_t *mans)
{
#if defined(__x86_64__)
	const char *arch = "amd64";
#elif defined(__aarch64__)
	const char *arch = "arm64";
#else
	const char *arch = "";
#endif
	size_t i;
	const json_t *d;

	json_array_foreach(mans, i, d)
	{
		const json_t *pl = json_object_get(d, "platform");
		const char *a = json_string_value(json_object_get(pl, "architecture"));
		const char *os = json_string_value(json_object_get(pl, "os"));

		if (a != NULL && strcmp(a, arch) == 0 && (os == NULL || strcmp(os, "linux") == 0))
			return d;
	}
	return json_array_size(mans) == 1 ? json_array_get(mans, 0) : NULL;
}

static bool is_index(const json_t *desc)
{
	const char *mt = json_string_value(json_object_get(desc, "mediaType"));

	return mt != NULL && (strcmp(mt, MT_OCI_INDEX) == 0 || strcmp(mt, MT_DOCKER_LIST) == 0);
}

/* The manifest a descriptor leads to (through one nested index of platforms). */
static int oci_manifest(struct source *s, const json_t *desc, json_t **out, struct pdk_error **err)
{
	const char *digest = json_string_value(json_object_get(desc, "digest"));
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *idx = NULL;
	const json_t *d;

	if (!pdk__img_digest_valid(digest))
		return pdk_error_setx(err, EINVAL, "'%s': a descriptor without a sha256 digest",
				      s->path);
	path = blob_path(digest);
	if (!is_index(desc))
		return read_json(s, path, digest, out, err);
	if (read_json(s, path, digest, &idx, err) < 0)
		return -1;
	d = pick_platform(json_object_get(idx, "manifests"));
	if (d == NULL)
		return pdk_error_setx(err, ENOENT, "'%s': no image for this machine's platform",
				      s->path);
	digest = json_string_value(json_object_get(d, "digest"));
	if (!pdk__img_digest_valid(digest) || is_index(d))
		return pdk_error_setx(err, EINVAL, "'%s': a nested index that does not read",
				      s->path);
	free(path);
	path = blob_path(digest);
	return read_json(s, path, digest, out, err);
}

/* A name for an image whose ref name is a bare tag ("latest"): the source's file name with it. */
static char *oci_name(const char *path, const char *ref)
{
	_cleanup_free_ char *base = NULL;
	const char *slash;
	char *dot;

	if (ref == NULL)
		return NULL;
	if (strchr(ref, ':') != NULL || strchr(ref, '/') != NULL)
		return pdk_xstrdup(ref);
	while (strlen(path) > 1 && path[strlen(path) - 1] == '/')
		path = base = pdk_xasprintf("%.*s", (int)strlen(path) - 1, path);
	slash = strrchr(path, '/');
	_cleanup_free_ char *b = pdk_xstrdup(slash ? slash + 1 : path);
	dot = strchr(b, '.');
	if (dot != NULL && dot != b)
		*dot = '\0';
	return pdk_xasprintf("%s:%s", b, ref);
}

static int oci_layers(struct source *s, struct plan *p, const json_t *man, const json_t *cfg,
		      struct pdk_error **err)
{
	const json_t *layers = json_object_get(man, "layers"), *ids = diff_ids_of(cfg), *l;
	size_t i;

	if (!json_is_array(layers) || json_array_size(layers) > PDK_IMAGE_MAX_LAYERS)
		return pdk_error_setx(err, EINVAL,
				      "'%s': the manifest's layers do not read (at "
				      "most %d)",
				      s->path, PDK_IMAGE_MAX_LAYERS);
	if (json_is_array(ids) && json_array_size(ids) != json_array_size(layers))
		return pdk_error_setx(err, EINVAL,
				      "'%s': %zu layers, but the config declares %zu diff_ids",
				      s->path, json_array_size(layers), json_array_size(ids));
	json_array_foreach(layers, i, l)
	{
		const char *digest = json_string_value(json_object_get(l, "digest"));
		_cleanup_free_ char *path = NULL;

		if (!pdk__img_digest_valid(digest))
			return pdk_error_setx(err, EINVAL, "'%s': layer %zu has no sha256 digest",
					      s->path, i);
		path = blob_path(digest);
		if (add_layer(s, p, path, digest, diff_id_at(ids, i), err) < 0)
			return -1;
	}
	return 0;
}

static int read_oci(struct source *s, const char *select, struct plan *p, struct pdk_error **err)
{
	_cleanup_json_ json_t *layout = NULL, *index = NULL, *man = NULL, *cfg = NULL;
	const json_t *desc = NULL;
	const char *cdigest;
	_cleanup_free_ char *cpath = NULL;

	if (read_json(s, "oci-layout", NULL, &layout, err) < 0 ||
	    read_json(s, "index.json", NULL, &index, err) < 0 ||
	    pick_desc(s, json_object_get(index, "manifests"), select, &desc, err) < 0 ||
	    oci_manifest(s, desc, &man, err) < 0)
		return -1;
	cdigest = json_string_value(json_object_get(json_object_get(man, "config"), "digest"));
	if (!pdk__img_digest_valid(cdigest))
		return pdk_error_setx(err, EINVAL, "'%s': the manifest names no config", s->path);
	cpath = blob_path(cdigest);
	if (read_json(s, cpath, cdigest, &cfg, err) < 0)
		return -1;
	pdk__img_config_from_json(json_object_get(cfg, "config"), &p->config);
	p->name = oci_name(s->path, ref_name(desc));
	return oci_layers(s, p, man, cfg, err);
}

/* ---- docker save ---- */

static bool has_tag(const json_t *entry, const char *tag)
{
	size_t i;
	const json_t *t;

	json_array_foreach(json_object_get(entry, "RepoTags"), i,
			   t) if (json_is_string(t) &&
				  strcmp(json_string_value(t), tag) == 0) return true;
	return false;
}

static int pick_docker(struct source *s, const json_t *man, const char *select, const json_t **out,
		       struct pdk_error **err)
{
	size_t i;
	const json_t *e;

	if (!json_is_array(man) || json_array_size(man) == 0)
		return pdk_error_setx(err, EINVAL, "'%s': manifest.json lists no image", s->path);
	if (select == NULL && json_array_size(man) == 1) {
		*out = json_array_get(man, 0);
		return 0;
	}
	if (select == NULL)
		return pdk_error_set_field(err, EINVAL, "select",
					   "'%s' holds %zu images: name one (--select TAG)",
					   s->path, json_array_size(man));
	json_array_foreach(man, i, e) if (has_tag(e, select))
	{
		*out = e;
		return 0;
	}
	return pdk_error_set_field(err, ENOENT, "select", "'%s' has no image tagged '%s'", s->path,
				   select);
}

static int read_docker(struct source *s, const char *select, struct plan *p, struct pdk_error **err)
{
	_cleanup_json_ json_t *man = NULL, *cfg = NULL;
	const json_t *entry = NULL, *layers, *ids, *l;
	const char *cname;
	size_t i;

	if (read_json(s, "manifest.json", NULL, &man, err) < 0 ||
	    pick_docker(s, man, select, &entry, err) < 0)
		return -1;
	cname = json_string_value(json_object_get(entry, "Config"));
	if (cname == NULL || read_json(s, cname, NULL, &cfg, err) < 0)
		return cname == NULL ? pdk_error_setx(err, EINVAL,
						      "'%s': no Config in manifest.json", s->path)
				     : -1;
	pdk__img_config_from_json(json_object_get(cfg, "config"), &p->config);
	if (select != NULL)
		p->name = pdk_xstrdup(select);
	else if (json_string_value(json_array_get(json_object_get(entry, "RepoTags"), 0)) != NULL)
		p->name = pdk_xstrdup(
			json_string_value(json_array_get(json_object_get(entry, "RepoTags"), 0)));
	layers = json_object_get(entry, "Layers");
	ids = diff_ids_of(cfg);
	if (!json_is_array(layers) || json_array_size(layers) > PDK_IMAGE_MAX_LAYERS ||
	    (json_is_array(ids) && json_array_size(ids) != json_array_size(layers)))
		return pdk_error_setx(err, EINVAL,
				      "'%s': the layers of manifest.json and the config's "
				      "diff_ids do not match",
				      s->path);
	json_array_foreach(layers, i,
			   l) if (!json_is_string(l) ||
				  add_layer(s, p, json_string_value(l), NULL, diff_id_at(ids, i),
					    err) < 0) return json_is_string(l)
		? -1
		: pdk_error_setx(err, EINVAL,
				 "'%s': a layer that is not a "
				 "file name",
				 s->path);
	return 0;
}

/* ---- detection ---- */

static bool dir_has(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* Open the source, index an archive, and tell its kind. */
static int open_source(struct source *s, const char *path, enum pdk_image_kind *kind,
		       struct pdk_error **err)
{
	unsigned char magic[4] = {0};
	struct stat st;

	memset(s, 0, sizeof(*s));
	s->path = path;
	s->dirfd = s->fd = -1;
	if (stat(path, &st) < 0)
		return pdk_error_set_field(err, errno, "source", "cannot read '%s'", path);
	if (S_ISDIR(st.st_mode)) {
		s->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (s->dirfd < 0)
			return pdk_error_set(err, errno, "cannot open '%s'", path);
		*kind = dir_has(s->dirfd, "oci-layout")      ? PDK_IMAGE_OCI_LAYOUT
			: dir_has(s->dirfd, "manifest.json") ? PDK_IMAGE_DOCKER_ARCHIVE
							     : PDK_IMAGE_ROOTFS_DIR;
		return 0;
	}
	s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (s->fd < 0 || !S_ISREG(st.st_mode))
		return pdk_error_set_field(err, s->fd < 0 ? errno : EINVAL, "source",
					   "'%s' is neither a directory nor an archive", path);
	if (pread(s->fd, magic, sizeof(magic), 0) < 0)
		return pdk_error_set(err, errno, "cannot read '%s'", path);
	if ((magic[0] == 0x1f && magic[1] == 0x8b) ||
	    (magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd)) {
		*kind = PDK_IMAGE_ROOTFS_TAR; /* oci-archive and docker save are plain tars */
		return 0;
	}
	if (index_archive(s, err) < 0)
		return -1;
	*kind = find_member(s, "oci-layout")      ? PDK_IMAGE_OCI_ARCHIVE
		: find_member(s, "manifest.json") ? PDK_IMAGE_DOCKER_ARCHIVE
						  : PDK_IMAGE_ROOTFS_TAR;
	return 0;
}

int pdk_image_detect(const char *path, enum pdk_image_kind *out, struct pdk_error **err)
{
	struct source s;
	int rc = open_source(&s, path, out, err);

	source_release(&s);
	return rc;
}

/* ---- import ---- */

static int store_layers(struct pdk_image_store *st, struct plan *p, unsigned flags, char ***out,
			struct pdk_image_import_stats *stats, struct pdk_error **err)
{
	for (size_t i = 0; i < p->n; i++) {
		struct layer_ref *r = &p->layers[i];
		char *digest = NULL;

		if (r->diff_id != NULL && pdk_image_layer_exists(st, r->diff_id)) {
			pdk_strv_push(out, r->diff_id); /* stored once: not unpacked again */
			continue;
		}
		if (pdk__img_layer_from(st, r->fd, r->off, r->size, r->label, flags, r->blob_digest,
					r->diff_id, &digest, stats, err) < 0)
			return -1;
		pdk_strv_push_take(out, digest);
	}
	return 0;
}

static int read_plan(struct pdk_image_store *st, struct source *s, enum pdk_image_kind kind,
		     const struct pdk_image_import_opts *o, struct plan *p, char ***layers,
		     struct pdk_image_import_stats *stats, struct pdk_error **err)
{
	unsigned flags = (o->flags & PDK_IMAGE_STRICT) ? PDK_IMAGE_LAYER_STRICT : 0;
	char *digest = NULL;

	switch (kind) {
	case PDK_IMAGE_OCI_LAYOUT:
	case PDK_IMAGE_OCI_ARCHIVE:
		if (read_oci(s, o->select, p, err) < 0)
			return -1;
		break;
	case PDK_IMAGE_DOCKER_ARCHIVE:
		if (read_docker(s, o->select, p, err) < 0)
			return -1;
		break;
	case PDK_IMAGE_ROOTFS_TAR:
		p->layers = pdk_xcalloc(1, sizeof(*p->layers));
		p->layers[0] = (struct layer_ref){
			.fd = s->fd, .size = UINT64_MAX, .label = pdk_xstrdup(s->path)};
		p->n = 1;
		break;
	case PDK_IMAGE_ROOTFS_DIR:
		if (pdk__img_layer_dir(st, o->path, flags, &digest, stats, err) < 0)
			return -1;
		pdk_strv_push_take(layers, digest);
		return 0;
	case PDK_IMAGE_AUTO:
	default:
		return pdk_error_setx(err, EINVAL, "no kind of source");
	}
	return store_layers(st, p, flags, layers, stats, err);
}

int pdk_image_import(struct pdk_image_store *st, const struct pdk_image_import_opts *o,
		     struct pdk_image **out, struct pdk_image_import_stats *stats,
		     struct pdk_error **err)
{
	struct pdk_image_import_stats s = {0};
	_cleanup_close_ int hold = -1;
	_cleanup_strv_ char **layers = NULL;
	struct source src;
	struct plan p = {0};
	enum pdk_image_kind kind;
	int rc = pdk__img_import_hold(st, &hold, err);

	if (rc < 0)
		return -1;
	rc = open_source(&src, o->path, &kind, err);
	if (rc == 0 && o->kind != PDK_IMAGE_AUTO && o->kind != kind &&
	    !(o->kind == PDK_IMAGE_ROOTFS_TAR && src.fd >= 0))
		rc = pdk_error_set_field(err, EINVAL, "kind",
					 "'%s' holds an image of kind '%s', not '%s'", o->path,
					 pdk_image_kind_name(kind), pdk_image_kind_name(o->kind));
	if (rc == 0 && o->kind != PDK_IMAGE_AUTO)
		kind = o->kind;
	if (rc == 0)
		rc = read_plan(st, &src, kind, o, &p, &layers, &s, err);
	if (rc == 0) {
		pdk__img_config_merge(&p.config, o->config);
		s.layers = (unsigned)pdk_strv_len(layers);
		rc = pdk__img_commit(st, o->name ? o->name : p.name, layers, &p.config,
				     pdk_image_kind_name(kind), out, err);
	}
	plan_release(&p);
	source_release(&src);
	if (stats != NULL)
		*stats = s;
	return rc;
}
