#include "common.h"
#include "base.h"
#include "dns.h"
#include "mount.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#define NEWROOT "/newroot"
#define OLDROOT "/oldroot"
/*
 * Where the overlay's layers are bound in the scratch root before the
 * overlay is made of them: overlayfs shows the paths it was given in
 * /proc/self/mountinfo, and the sandbox must not learn the state
 * directory or the change set's id from them.
 */
#define LAYERS "/layers"
/* An image root's layers and its writable layer, in the scratch root (same reason). */
#define IMAGE_LAYERS "/ilayers"
#define IMAGE_RW     "/rootrw"

enum op_kind {
	OP_BIND,    /* src -> dst, then attrs applied recursively */
	OP_TMPFS,   /* tmpfs on dst with `data` options, attrs */
	OP_PROC,    /* a new procfs on dst */
	OP_DEVPTS,  /* a new devpts instance on dst */
	OP_SYMLINK, /* dst -> data */
	OP_FILE,    /* dst (in the root tmpfs) gets `data` as content */
	OP_ROBIND,  /* dst bound onto itself, read-only (used inside /proc) */
	OP_MASK,    /* dst hidden: an empty read-only tmpfs (dir) or /dev/null (file) */
	OP_PRIVATE, /* dst, a state or runtime directory: hidden, reached without symlinks */
	OP_OVERLAY, /* the workspace overlay on dst: `lowers`, src = upper, data = work */
};

struct op {
	enum op_kind kind;
	bool is_dir;   /* dst is a directory (else a file to create as mount point) */
	bool optional; /* ignore ENOENT on the source / target */
	uint64_t attr; /* MOUNT_ATTR_* to set after the mount */
	char *src;     /* "/oldroot/..." for binds */
	char *dst;     /* "/newroot/..." */
	/* A host bind: what the plan looked at, which the mount must show (add_host_bind()). */
	dev_t dev;
	ino_t ino; /* 0: not checked */
	char *data;
	/* OP_OVERLAY */
	char **lowers;    /* "/oldroot/..." topmost first */
	dev_t *lower_dev; /* each lower's identity when planned (add_overlay()) */
	ino_t *lower_ino;
	char **lower_as;     /* the neutral name each is bound at: LAYERS "/N" */
	char *lowerdir;      /* lower_as as one "lowerdir=" value, for kernels before 6.8 */
	char *set_dir;       /* "/oldroot/..." the directory of upper and work */
	char *upper_as;      /* LAYERS "/set/NAME" */
	char *work_as;       /* LAYERS "/set/NAME" */
	char *tmpfs;         /* options of the tmpfs holding upper and work, or NULL */
	mode_t mode;         /* of the upper root on that tmpfs */
	bool volatile_upper; /* mounted "volatile" (pdk_mount_spec.ws_volatile) */
};

struct pdk_mount_plan {
	struct op *ops;
	size_t n;
	size_t cap;
	char *root_opts; /* options of the root tmpfs (an image root: of its writable layer's) */
	/* An image root: its layers ("/oldroot/..." topmost first) and their neutral names. */
	char **image_lowers;
	char **image_as;
	char *image_lowerdir; /* image_as as one "lowerdir=" value, for kernels before 6.8 */
	char *image_rw_dir; /* "/oldroot/..." the kept writable layer's directory; NULL: a tmpfs */
	dev_t root_dev;     /* the host root's disk, which refuse_kernel_fs() does not ask */
};

static const char *const op_names[] = {
	[OP_BIND] = "bind",         [OP_TMPFS] = "tmpfs",     [OP_PROC] = "proc",
	[OP_DEVPTS] = "devpts",     [OP_SYMLINK] = "symlink", [OP_FILE] = "file",
	[OP_ROBIND] = "ro-remount", [OP_MASK] = "mask",       [OP_OVERLAY] = "overlay",
	[OP_PRIVATE] = "private",
};

static struct op *add_op(struct pdk_mount_plan *p, enum op_kind kind, const char *dst)
{
	struct op *o;

	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 32;
		p->ops = pdk_xrealloc(p->ops, p->cap * sizeof(*p->ops));
	}
	o = &p->ops[p->n++];
	memset(o, 0, sizeof(*o));
	o->kind = kind;
	o->is_dir = true;
	o->dst = pdk_xasprintf(NEWROOT "%s", strcmp(dst, "/") == 0 ? "" : dst);
	return o;
}

/*
 * SECURITY: -EPERM + *err when `path` (looked at as `st`) lies on an interface of
 * the host's kernel (pdk_paths_kernel_fs(): procfs, sysfs, cgroupfs, ...),
 * -errno when statfs() cannot say. A path on the root's disk is not asked: the root
 * is none of them.
 */
static int refuse_kernel_fs(const char *path, const struct stat *st, dev_t root_dev,
			    struct pdk_error **err)
{
	struct statfs fs;
	const char *name;

	if (st->st_dev == root_dev)
		return 0;
	if (statfs(path, &fs) < 0) /* fail closed: what it is on is unknown */
		return pdk_error_set(err, errno, "cannot bind '%s' into the sandbox: statfs", path);
	if ((name = pdk_paths_kernel_fs((long)fs.f_type, NULL)) != NULL)
		return pdk_error_setx(
			err, EPERM,
			"cannot bind '%s' into the sandbox: it is on %s, an interface "
			"of the host's kernel that reaches past the sandbox's "
			"namespaces (the sandbox has a /proc of its own)",
			path, name);
	return 0;
}

/*
 * Add a bind of host `path` at the same path; replicate symlinks; skip missing optional ones.
 *
 * SECURITY: the source is looked at once (no symlink followed at its end), and its
 * identity kept: the masks are placed by it, not by a name looked up again
 * (add_private_masks()). The child binds it by its path milliseconds later, when a
 * directory on the way that another sandbox can write could be a symlink (to the state
 * directory); apply_op() refuses a bind that shows anything but what the plan saw.
 */
static int add_host_bind(struct pdk_mount_plan *p, struct pdk_landlock *ll, const char *path,
			 bool rw, bool optional, struct pdk_error **err)
{
	struct stat st;
	struct op *o;

	if (path[0] != '/')
		return pdk_error_setx(err, EINVAL, "bind source '%s' is not an absolute path",
				      path);
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT && optional)
			return 0;
		return pdk_error_set(err, errno, "cannot bind '%s' into the sandbox", path);
	}
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(path, target, sizeof(target) - 1);

		if (n < 0)
			return pdk_error_set(err, errno, "cannot read link '%s'", path);
		target[n] = '\0';
		o = add_op(p, OP_SYMLINK, path);
		o->data = pdk_xstrdup(target);
		return 0;
	}
	if (refuse_kernel_fs(path, &st, p->root_dev, err) < 0)
		return -1;
	o = add_op(p, OP_BIND, path);
	o->src = pdk_xasprintf(OLDROOT "%s", path);
	o->is_dir = S_ISDIR(st.st_mode);
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	/* SECURITY: nothing bound from the host may carry setuid bits or device access. */
	o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY);
	if (ll != NULL && rw)
		pdk_landlock_add_path(ll, path, PDK_LANDLOCK_RW);
	return 0;
}

static int add_bind_list(struct pdk_mount_plan *p, struct pdk_landlock *ll, char *const *v, bool rw,
			 bool optional, struct pdk_error **err)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		int rc = add_host_bind(p, ll, v[i], rw, optional, err);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Host files bound read-only at another path inside (pairs: source, destination). */
static int add_file_binds(struct pdk_mount_plan *p, char *const *v, struct pdk_error **err)
{
	for (size_t i = 0; v != NULL && v[i] != NULL && v[i + 1] != NULL; i += 2) {
		struct op *o;

		if (v[i][0] != '/' || v[i + 1][0] != '/')
			return pdk_error_setx(err, EINVAL, "file bind '%s' on '%s': not absolute",
					      v[i], v[i + 1]);
		o = add_op(p, OP_BIND, v[i + 1]);
		o->src = pdk_xasprintf(OLDROOT "%s", v[i]);
		o->is_dir = false;
		o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_RDONLY;
	}
	return 0;
}

static void add_file(struct pdk_mount_plan *p, const char *dst, char *content)
{
	struct op *o = add_op(p, OP_FILE, dst);

	o->is_dir = false;
	o->data = content;
}

/* The filtered /etc: chosen host entries read-only, identity files generated. */
/* The generated /etc/passwd and /etc/group of the host-rootfs view (an image keeps its own). */
static void add_identity(struct pdk_mount_plan *p, const struct pdk_mount_spec *s)
{
	add_file(p, "/etc/passwd",
		 s->uid == 0 ? pdk_xstrdup("root:x:0:0:root:/tmp:/bin/sh\n")
			     : pdk_xasprintf("root:x:0:0:root:/root:/usr/sbin/nologin\n"
					     "%s:x:%u:%u::/tmp:/bin/sh\n",
					     s->user_name, s->uid, s->gid));
	add_file(p, "/etc/group",
		 s->gid == 0 ? pdk_xstrdup("root:x:0:\n")
			     : pdk_xasprintf("root:x:0:\n%s:x:%u:\n", s->user_name, s->gid));
}

/*
 * Whether host file /etc/NAME belongs in the view: all the policy lists on
 * the host's root; on an image's, only the name servers of a sandbox on
 * the host's network (the image's /etc is its own).
 */
static bool etc_wanted(const struct pdk_mount_spec *s, const char *name)
{
	if (strcmp(name, "resolv.conf") == 0)
		return !s->own_net; /* the host's name servers are out of reach: ours is below */
	return s->root_layers == NULL;
}

static int add_etc(struct pdk_mount_plan *p, const struct pdk_mount_spec *s, struct pdk_error **err)
{
	char *const *etc = s->policy->etc;

	for (size_t i = 0; etc != NULL && etc[i] != NULL; i++) {
		_cleanup_free_ char *host = pdk_xasprintf("/etc/%s", etc[i]);
		int rc;

		if (!etc_wanted(s, etc[i]))
			continue;
		rc = add_host_bind(p, NULL, host, false, true, err);

		if (rc < 0)
			return rc;
	}
	if (s->root_layers == NULL)
		add_identity(p, s);
	/* An image being built keeps its own: whatever is written here becomes a layer. */
	if (s->root_rw_dir != NULL)
		return 0;
	add_file(p, "/etc/hostname", pdk_xasprintf("%s\n", s->hostname));
	add_file(p, "/etc/hosts",
		 pdk_xasprintf("127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost\n",
			       s->hostname));
	if (s->own_net)
		add_file(p, "/etc/resolv.conf", pdk_xstrdup(PDK_DNS_RESOLV_CONF));
	return 0;
}

static void add_proc(struct pdk_mount_plan *p)
{
	/* SECURITY: kernel-wide knobs stay read-only even for uid 0 in the sandbox. */
	static const char *const ro[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq",
					 "/proc/bus", "/proc/fs"};
	static const char *const masked[] = {"/proc/kcore", "/proc/keys", "/proc/timer_list"};
	struct op *o;

	add_op(p, OP_PROC, "/proc");
	for (size_t i = 0; i < PDK_ARRAY_SIZE(ro); i++) {
		o = add_op(p, OP_ROBIND, ro[i]);
		o->optional = true;
		o->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	}
	for (size_t i = 0; i < PDK_ARRAY_SIZE(masked); i++) {
		o = add_op(p, OP_MASK, masked[i]);
		o->is_dir = false;
		o->optional = true;
	}
}

static void add_dev(struct pdk_mount_plan *p, struct pdk_landlock *ll)
{
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
	static const char *const links[][2] = {
		{"/dev/ptmx", "pts/ptmx"},          {"/dev/fd", "/proc/self/fd"},
		{"/dev/stdin", "/proc/self/fd/0"},  {"/dev/stdout", "/proc/self/fd/1"},
		{"/dev/stderr", "/proc/self/fd/2"},
	};
	struct op *o;

	o = add_op(p, OP_TMPFS, "/dev");
	o->data = pdk_xstrdup("mode=0755,size=64k,nr_inodes=64");
	o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(nodes); i++) {
		_cleanup_free_ char *dev = pdk_xasprintf("/dev/%s", nodes[i]);

		o = add_op(p, OP_BIND, dev);
		o->src = pdk_xasprintf(OLDROOT "%s", dev);
		o->is_dir = false;
		o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
		if (ll != NULL)
			pdk_landlock_add_path(ll, dev, PDK_LANDLOCK_DEV);
	}
	for (size_t i = 0; i < PDK_ARRAY_SIZE(links); i++)
		add_op(p, OP_SYMLINK, links[i][0])->data = pdk_xstrdup(links[i][1]);
	o = add_op(p, OP_DEVPTS, "/dev/pts");
	o->data = pdk_xstrdup("newinstance,ptmxmode=0666,mode=0620");
	o = add_op(p, OP_TMPFS, "/dev/shm");
	o->data = pdk_xstrdup("mode=1777,size=64m");
	o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
	if (ll != NULL) {
		pdk_landlock_add_path(ll, "/dev/pts", PDK_LANDLOCK_RW);
		pdk_landlock_add_path(ll, "/dev/shm", PDK_LANDLOCK_RW);
	}
}

static void add_tmpfs_list(struct pdk_mount_plan *p, struct pdk_landlock *ll,
			   const struct pdk_policy *pol)
{
	for (size_t i = 0; pol->tmpfs != NULL && pol->tmpfs[i] != NULL; i++) {
		struct op *o = add_op(p, OP_TMPFS, pol->tmpfs[i]);

		o->data = pol->limits.tmp_size
				  ? pdk_xasprintf("mode=1777,size=%llu",
						  (unsigned long long)pol->limits.tmp_size)
				  : pdk_xstrdup("mode=1777");
		o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
		if (ll != NULL)
			pdk_landlock_add_path(ll, pol->tmpfs[i], PDK_LANDLOCK_RW);
	}
}

/* "a:b" with ':', ',' and '\\' escaped, as overlayfs' lowerdir= option wants. */
static char *join_lowerdir(char *const *v)
{
	size_t len = 1;
	char *s, *w;

	for (size_t i = 0; v[i] != NULL; i++)
		len += 2 * strlen(v[i]) + 1;
	s = w = pdk_xmalloc(len);
	for (size_t i = 0; v[i] != NULL; i++) {
		if (i > 0)
			*w++ = ':';
		for (const char *c = v[i]; *c != '\0'; c++) {
			if (*c == ':' || *c == ',' || *c == '\\')
				*w++ = '\\';
			*w++ = *c;
		}
	}
	*w = '\0';
	return s;
}

/* Where the sandbox sees the workspace: its own path unless the spec names another. */
static const char *ws_view(const struct pdk_mount_spec *s)
{
	return s->ws_view != NULL ? s->ws_view : s->workspace;
}

/*
 * The overlay's upper and work directories are bound at neutral names
 * through the one directory that holds both (overlayfs wants them on the
 * same mount): the change set's directory.
 */
static int set_names(struct op *o, const struct pdk_mount_spec *s, struct pdk_error **err)
{
	const char *u = strrchr(s->ws_upper, '/');
	const char *w = strrchr(s->ws_work, '/');

	if (u == NULL || w == NULL || u == s->ws_upper || u - s->ws_upper != w - s->ws_work ||
	    strncmp(s->ws_upper, s->ws_work, (size_t)(u - s->ws_upper)) != 0)
		return pdk_error_setx(err, EINVAL,
				      "workspace: the upper layer '%s' and the work directory '%s' "
				      "are not in one directory",
				      s->ws_upper, s->ws_work);
	o->set_dir = pdk_xasprintf(OLDROOT "%.*s", (int)(u - s->ws_upper), s->ws_upper);
	o->upper_as = pdk_xasprintf(LAYERS "/set%s", u);
	o->work_as = pdk_xasprintf(LAYERS "/set%s", w);
	return 0;
}

/* Lower layer `i` of the overlay, looked at once: its identity (as add_host_bind()). */
static int pin_lower(const struct pdk_mount_plan *p, struct op *o, size_t i, const char *path,
		     struct pdk_error **err)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return pdk_error_set(err, errno, "workspace: cannot read '%s'", path);
	if (refuse_kernel_fs(path, &st, p->root_dev, err) < 0)
		return pdk_error_wrap(err, "workspace");
	o->lower_dev[i] = st.st_dev;
	o->lower_ino[i] = st.st_ino;
	return 0;
}

static int add_overlay(struct pdk_mount_plan *p, struct pdk_landlock *ll,
		       const struct pdk_mount_spec *s, struct pdk_error **err)
{
	struct op *o;
	struct stat st;
	size_t n;

	if (s->ws_lowers == NULL || s->ws_lowers[0] == NULL || s->ws_upper == NULL ||
	    s->ws_work == NULL)
		return pdk_error_setx(err, EINVAL, "workspace: overlay mode without a change set");
	if (stat(s->workspace, &st) < 0)
		return pdk_error_set(err, errno, "workspace: cannot read '%s'", s->workspace);
	o = add_op(p, OP_OVERLAY, ws_view(s));
	n = pdk_strv_len(s->ws_lowers);
	o->lower_dev = pdk_xcalloc(n, sizeof(*o->lower_dev));
	o->lower_ino = pdk_xcalloc(n, sizeof(*o->lower_ino));
	for (size_t i = 0; i < n; i++) {
		pdk_strv_push_take(&o->lowers, pdk_xasprintf(OLDROOT "%s", s->ws_lowers[i]));
		pdk_strv_push_take(&o->lower_as, pdk_xasprintf(LAYERS "/%zu", i));
		/* SECURITY: as add_host_bind(): bind_layers() binds only what is seen now. */
		if (pin_lower(p, o, i, s->ws_lowers[i], err) < 0)
			return -1;
	}
	o->lowerdir = join_lowerdir(o->lower_as);
	o->src = pdk_xasprintf(OLDROOT "%s", s->ws_upper);
	o->data = pdk_xasprintf(OLDROOT "%s", s->ws_work);
	if (set_names(o, s, err) < 0)
		return -1;
	o->mode = st.st_mode & 07777;
	if (s->ws_disk > 0)
		o->tmpfs = pdk_xasprintf("mode=0700,size=%llu", (unsigned long long)s->ws_disk);
	/* A tmpfs upper has nothing to sync, and its mark would go with it. */
	o->volatile_upper = s->ws_volatile && s->ws_disk == 0;
	if (ll != NULL)
		pdk_landlock_add_path(ll, ws_view(s), PDK_LANDLOCK_RW);
	return 0;
}

/* An rw or ro workspace bound at its view path (a directory; no symlink is replicated). */
static int add_ws_bind(struct pdk_mount_plan *p, struct pdk_landlock *ll,
		       const struct pdk_mount_spec *s)
{
	bool rw = s->ws_mode == PDK_WS_RW;
	struct op *o = add_op(p, OP_BIND, s->ws_view);

	o->src = pdk_xasprintf(OLDROOT "%s", s->workspace);
	/* SECURITY: nothing bound from the host may carry setuid bits or device access. */
	o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY);
	if (ll != NULL && rw)
		pdk_landlock_add_path(ll, s->ws_view, PDK_LANDLOCK_RW);
	return 0;
}

static int add_workspace(struct pdk_mount_plan *p, struct pdk_landlock *ll,
			 const struct pdk_mount_spec *s, struct pdk_error **err)
{
	struct op *o;

	if (s->workspace == NULL)
		return 0;
	switch (s->ws_mode) {
	case PDK_WS_NONE:
		return 0;
	case PDK_WS_OVERLAY:
		return add_overlay(p, ll, s, err);
	case PDK_WS_TMPFS:
		o = add_op(p, OP_TMPFS, ws_view(s));
		o->data = s->ws_disk ? pdk_xasprintf("mode=0755,size=%llu",
						     (unsigned long long)s->ws_disk)
				     : pdk_xstrdup("mode=0755");
		o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
		if (ll != NULL)
			pdk_landlock_add_path(ll, ws_view(s), PDK_LANDLOCK_RW);
		return 0;
	case PDK_WS_RW:
	case PDK_WS_RO:
	default:
		if (s->ws_view != NULL)
			return add_ws_bind(p, ll, s);
		if (add_host_bind(p, ll, s->workspace, s->ws_mode == PDK_WS_RW, false, err) < 0)
			return pdk_error_wrap(err, "workspace");
		return 0;
	}
}

static void add_hidden(struct pdk_mount_plan *p, char *const *hidden)
{
	for (size_t i = 0; hidden != NULL && hidden[i] != NULL; i++) {
		struct stat st;
		struct op *o;

		if (stat(hidden[i], &st) < 0)
			continue; /* nothing there to hide */
		o = add_op(p, OP_MASK, hidden[i]);
		o->is_dir = S_ISDIR(st.st_mode);
		o->optional = true;
	}
}

/*
 * SECURITY: the runtime and state directories (the daemon's and the supervisors'
 * sockets, tokens, keys, the audit store) are hidden wherever a bind or the workspace
 * brings them into the view: `cd /tmp && paddock run --workspace-mode ro` with the
 * runtime directory /tmp/paddock-UID, a workspace in $HOME with the state directory
 * under it. The host path of each bind (its source; the workspace for the overlay,
 * bound at its own path) is compared canonically: a private directory at or under it
 * is masked at the same place under the bind's path inside.
 */
/* The mask of a private directory at `rest` ("" or "/...") below `view` inside. */
static void add_mask_at(struct pdk_mount_plan *p, const char *view, const char *rest)
{
	_cleanup_free_ char *inside =
		pdk_xasprintf("%s%s", strcmp(view, "/") == 0 ? "" : view, rest);
	_cleanup_free_ char *dst = pdk_xasprintf(NEWROOT "%s", inside[0] != '\0' ? inside : "");

	/* One mask a place (a private directory and a place a mount shows it can meet). */
	for (size_t i = 0; i < p->n; i++)
		if (p->ops[i].kind == OP_PRIVATE && strcmp(p->ops[i].dst, dst) == 0)
			return;
	add_op(p, OP_PRIVATE, inside[0] != '\0' ? inside : "/");
}

static void add_private_masks_of(struct pdk_mount_plan *p, const char *canon, const char *view,
				 char *const *private_dirs)
{
	for (size_t i = 0; private_dirs[i] != NULL; i++) {
		const char *dir = private_dirs[i];

		if (pdk_paths_within(dir, canon))
			add_mask_at(p, view, dir + (strcmp(canon, "/") == 0 ? 0 : strlen(canon)));
	}
}

/* A directory on the way to a private one (or that one): its identity, and the rest below. */
struct above {
	dev_t dev;
	ino_t ino;
	const char *dir; /* the private directory; this one is its first `end` bytes */
	size_t end;
};

/* "" or "/...": where the private directory lies below `a`. */
static const char *rest_below(const struct above *a)
{
	return a->dir + (a->end == 1 ? 0 : a->end);
}

/*
 * Every directory from "/" down to each private directory that exists, by identity:
 * a bind of any of them holds that private directory at the bind's view plus the rest.
 * A directory named twice ("/", "/var" of two private ones) is looked at once.
 */
static struct above *private_aboves(char *const *private_dirs, size_t *n)
{
	struct above *a = NULL;
	size_t cap = 0;

	*n = 0;
	for (size_t i = 0; private_dirs != NULL && private_dirs[i] != NULL; i++) {
		const char *dir = private_dirs[i];
		size_t len = strlen(dir);
		_cleanup_free_ char *prefix = pdk_xstrdup(dir);

		for (size_t end = 1; end <= len; end++) {
			struct stat st;
			ssize_t seen = -1;

			if (end > 1 && end < len && dir[end] != '/')
				continue;
			for (size_t k = 0; k < *n && seen < 0; k++)
				if (a[k].end == end && strncmp(a[k].dir, dir, end) == 0)
					seen = (ssize_t)k;
			if (seen >= 0) {
				st.st_dev = a[seen].dev;
				st.st_ino = a[seen].ino;
			} else {
				memcpy(prefix, dir, end);
				prefix[end] = '\0';
				if (stat(prefix, &st) < 0)
					break; /* not there (yet): nothing below it to hide */
			}
			if (*n == cap)
				a = pdk_xrealloc(a, (cap = cap != 0 ? cap * 2 : 16) * sizeof(*a));
			a[(*n)++] = (struct above){
				.dev = st.st_dev, .ino = st.st_ino, .dir = dir, .end = end};
		}
	}
	return a;
}

/*
 * SECURITY: a host bind or the workspace that holds a state or runtime directory (or a
 * place a mount shows it, session-view.c) gets the mask there. A host bind and the
 * overlay's workspace are matched by identity (the directory the plan opened: no name,
 * no race with the name), others by their canonical path.
 */
static void add_private_masks(struct pdk_mount_plan *p, char *const *private_dirs)
{
	size_t n = p->n, n_above = 0;
	_cleanup_free_ struct above *above = private_aboves(private_dirs, &n_above);

	for (size_t i = 0; private_dirs != NULL && i < n; i++) {
		_cleanup_free_ char *host = NULL, *view = NULL;
		const struct op *o = &p->ops[i];
		dev_t dev = 0;
		ino_t ino = 0;

		if (o->kind == OP_BIND && o->is_dir) {
			dev = o->dev;
			ino = o->ino;
			host = ino == 0 ? pdk_paths_canonical(o->src + strlen(OLDROOT)) : NULL;
		} else if (o->kind == OP_OVERLAY) {
			size_t ws = pdk_strv_len(o->lowers) - 1; /* the workspace is the last */

			dev = o->lower_dev[ws];
			ino = o->lower_ino[ws];
		} else {
			continue;
		}
		view = pdk_xstrdup(o->dst[strlen(NEWROOT)] != '\0' ? o->dst + strlen(NEWROOT)
								   : "/");
		/* add_op() may move p->ops: `o` is not used past this line. */
		if (host != NULL) {
			add_private_masks_of(p, host, view, private_dirs);
			continue;
		}
		for (size_t k = 0; k < n_above; k++)
			if (above[k].dev == dev && above[k].ino == ino)
				add_mask_at(p, view, rest_below(&above[k]));
	}
}

static size_t depth(const struct op *o)
{
	size_t d = 0;

	for (const char *s = o->dst + strlen(NEWROOT); *s != '\0'; s++)
		d += *s == '/';
	/* Masks go after everything: they hide what the binds brought in. */
	return o->kind == OP_MASK || o->kind == OP_PRIVATE ? d + 4096 : d;
}

/*
 * Order operations so that a mount never hides one made before it: by the
 * depth of the destination (a tmpfs on /tmp before a workspace bound at
 * /tmp/ws), stable so that equal depths keep the order they were added in.
 */
static void sort_by_depth(struct pdk_mount_plan *p)
{
	for (size_t i = 1; i < p->n; i++) {
		struct op cur = p->ops[i];
		size_t d = depth(&cur);
		size_t j = i;

		for (; j > 0 && depth(&p->ops[j - 1]) > d; j--)
			p->ops[j] = p->ops[j - 1];
		p->ops[j] = cur;
	}
}

/* The host-rootfs view: an empty read-only tmpfs, the policy's read-only host paths on it. */
static int add_host_root(struct pdk_mount_plan *p, struct pdk_landlock *ll,
			 const struct pdk_policy *pol, struct pdk_error **err)
{
	p->root_opts = pdk_xstrdup("mode=0755,size=1m,nr_inodes=4096");
	if (ll != NULL)
		pdk_landlock_add_path(ll, "/", PDK_LANDLOCK_RO);
	return add_bind_list(p, ll, pol->read_only, false, true, err);
}

/*
 * An image's root: its layers, bound at neutral names in the scratch root
 * and stacked by overlay under the sandbox's writable layer (a tmpfs). The
 * whole root is the sandbox's to write (its own layer takes the writes), so
 * Landlock gives it "/" read-write; what must stay read-only (/proc/sys,
 * read-only binds) is read-only by its mount.
 */
static int add_image_root(struct pdk_mount_plan *p, struct pdk_landlock *ll,
			  const struct pdk_mount_spec *s, struct pdk_error **err)
{
	if (s->root_layers[0] == NULL)
		return pdk_error_setx(err, EINVAL, "image: no layers");
	for (size_t i = 0; s->root_layers[i] != NULL; i++) {
		if (s->root_layers[i][0] != '/')
			return pdk_error_setx(err, EINVAL,
					      "image layer '%s' is not an absolute path",
					      s->root_layers[i]);
		pdk_strv_push_take(&p->image_lowers,
				   pdk_xasprintf(OLDROOT "%s", s->root_layers[i]));
		pdk_strv_push_take(&p->image_as, pdk_xasprintf(IMAGE_LAYERS "/%zu", i));
	}
	p->image_lowerdir = join_lowerdir(p->image_as);
	if (s->root_rw_dir != NULL && s->root_rw_dir[0] != '/')
		return pdk_error_setx(err, EINVAL,
				      "image: the writable layer '%s' is not an absolute "
				      "path",
				      s->root_rw_dir);
	if (s->root_rw_dir != NULL)
		p->image_rw_dir = pdk_xasprintf(OLDROOT "%s", s->root_rw_dir);
	p->root_opts = s->root_size ? pdk_xasprintf("mode=0755,size=%llu",
						    (unsigned long long)s->root_size)
				    : pdk_xstrdup("mode=0755");
	if (ll != NULL)
		pdk_landlock_add_path(ll, "/", PDK_LANDLOCK_RW);
	return 0;
}

struct pdk_mount_plan *pdk_mount_plan_new(const struct pdk_mount_spec *s, struct pdk_landlock *ll,
					  struct pdk_error **err)
{
	struct pdk_mount_plan *p = pdk_xcalloc(1, sizeof(*p));
	const struct pdk_policy *pol = s->policy;
	struct stat root;
	int rc;

	/* Unknown (no "/"?): every bind's file system is asked. */
	p->root_dev = stat("/", &root) == 0 ? root.st_dev : (dev_t)-1;

	if (s->root_layers != NULL)
		rc = add_image_root(p, ll, s, err);
	else
		rc = add_host_root(p, ll, pol, err);
	if (rc == 0)
		rc = add_etc(p, s, err);
	if (rc == 0)
		rc = add_bind_list(p, ll, pol->read_write, true, true, err);
	if (rc == 0)
		rc = add_bind_list(p, ll, s->extra_ro, false, false, err);
	if (rc == 0)
		rc = add_bind_list(p, ll, s->extra_rw, true, false, err);
	if (rc == 0)
		rc = add_file_binds(p, s->ro_files, err);
	if (rc == 0) {
		add_dev(p, ll);
		add_proc(p);
		add_tmpfs_list(p, ll, pol);
		rc = add_workspace(p, ll, s, err);
	}
	if (rc == 0) {
		add_private_masks(p, s->private_dirs);
		add_hidden(p, pol->hidden);
		sort_by_depth(p);
	}
	if (rc < 0) {
		pdk_mount_plan_free(p);
		return NULL;
	}
	return p;
}

size_t pdk_mount_plan_len(const struct pdk_mount_plan *plan)
{
	return plan->n;
}

void pdk_mount_plan_print(const struct pdk_mount_plan *plan, FILE *out)
{
	for (size_t j = 0; plan->image_lowers != NULL && plan->image_lowers[j] != NULL; j++)
		fprintf(out, "%-10s / <- %s\n", j == 0 ? "image" : "",
			plan->image_lowers[j] + strlen(OLDROOT));
	if (plan->image_rw_dir != NULL)
		fprintf(out, "%-10s / <- %s\n", "image-rw", plan->image_rw_dir + strlen(OLDROOT));
	for (size_t i = 0; i < plan->n; i++) {
		const struct op *o = &plan->ops[i];

		if (o->kind == OP_OVERLAY) {
			fprintf(out, "%-10s %s <-", op_names[o->kind], o->dst + strlen(NEWROOT));
			for (size_t j = 0; o->lowers[j] != NULL; j++)
				fprintf(out, "%s%s", j > 0 ? ":" : " ",
					o->lowers[j] + strlen(OLDROOT));
			fprintf(out, " upper=%s%s\n", o->tmpfs ? "tmpfs," : "",
				o->tmpfs ? o->tmpfs : o->src + strlen(OLDROOT));
			continue;
		}
		fprintf(out, "%-10s %s%s%s%s%s\n", op_names[o->kind], o->dst + strlen(NEWROOT),
			o->src ? " <- " : "", o->src ? o->src + strlen(OLDROOT) : "",
			o->data && o->kind != OP_FILE ? " " : "",
			o->data && o->kind != OP_FILE ? o->data : "");
	}
}

void pdk_mount_plan_free(struct pdk_mount_plan *plan)
{
	if (plan == NULL)
		return;
	for (size_t i = 0; i < plan->n; i++) {
		free(plan->ops[i].src);
		free(plan->ops[i].dst);
		free(plan->ops[i].lower_dev);
		free(plan->ops[i].lower_ino);
		free(plan->ops[i].data);
		pdk_strv_free(plan->ops[i].lowers);
		pdk_strv_free(plan->ops[i].lower_as);
		free(plan->ops[i].lowerdir);
		free(plan->ops[i].set_dir);
		free(plan->ops[i].upper_as);
		free(plan->ops[i].work_as);
		free(plan->ops[i].tmpfs);
	}
	free(plan->ops);
	free(plan->root_opts);
	pdk_strv_free(plan->image_lowers);
	pdk_strv_free(plan->image_as);
	free(plan->image_lowerdir);
	free(plan->image_rw_dir);
	free(plan);
}

/* ---- child side: no allocation below this line ---- */

/* Record "WHAT 'A'[ on 'B']: strerror(errno)" in *ce (child.h); returns -errno. */
static int fail(struct pdk_child_error *ce, const char *what, const char *a, const char *b)
{
	return pdk_child_error_set(ce, errno, "%s '%s'%s%s%s", what, a, b ? " on '" : "",
				   b ? b : "", b ? "'" : "");
}

/* A bind source that is not what the plan looked at ("/oldroot/..."): no sandbox. */
static int changed(struct pdk_child_error *ce, const char *src)
{
	return pdk_child_error_setx(ce, EAGAIN,
				    "'%s' is not what it was when the sandbox was planned (a "
				    "directory on its way replaced meanwhile, by a symlink or a "
				    "rename): nothing is bound from a path that changes under it",
				    src + strlen(OLDROOT));
}

/* mkdir -p for the parents of `path` (all but its last component). */
static int make_parents(const char *path)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *s = buf + 1; *s != '\0'; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

/*
 * `path` made as a dir or an empty file, its parents there; -errno (-ENOENT:
 * a parent is missing; -EEXIST: something is where the file was to be).
 * The file is made by mknod(): one system call, no open file to close, and
 * a symlink there is not followed.
 */
static int make_last(const char *path, bool last_is_dir)
{
	if (last_is_dir)
		return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
	return mknod(path, S_IFREG | 0644, 0) < 0 ? -errno : 0;
}

/*
 * mkdir -p for `path`; the last component is a dir or an empty file. The
 * plan's mount points mostly have their parents already (the root's
 * directories, made for the mounts before), so the last component is made
 * first and the parents only when that finds one missing: one system call
 * instead of one per component, most of which found the directory there.
 */
static int make_path(const char *path, bool last_is_dir)
{
	int rc = make_last(path, last_is_dir);

	if (rc != -ENOENT)
		return rc;
	rc = make_parents(path);
	return rc < 0 ? rc : make_last(path, last_is_dir);
}

/* symlink(target, path), its parents made when one is missing (as make_path()). */
static int make_symlink(const char *target, const char *path)
{
	int rc;

	if (symlink(target, path) == 0)
		return 0;
	if (errno != ENOENT)
		return -errno;
	rc = make_parents(path);
	if (rc < 0)
		return rc;
	return symlink(target, path) < 0 ? -errno : 0;
}

#define FILE_LINKS_MAX 8 /* symlinks followed to a file bind's target */

/* openat2() inside the root: -errno on failure. */
static int open_in_root(int rootfd, const char *path, uint64_t flags)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, rootfd, path[0] ? path : ".", &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

/* The directory that holds path's last component (resolved in the root), and that component. */
static int parent_in_root(int rootfd, char *path, const char **name)
{
	char *slash = strrchr(path, '/');
	int fd;

	if (slash == NULL) {
		*name = path;
		return open_in_root(rootfd, ".", O_PATH | O_DIRECTORY);
	}
	*slash = '\0';
	fd = open_in_root(rootfd, path, O_PATH | O_DIRECTORY);
	*slash = '/';
	*name = slash + 1;
	return fd;
}

/* mkdir -p inside the root for every directory above path's last component. */
static int make_parents_in_root(int rootfd, char *path)
{
	for (char *s = strchr(path, '/'); s != NULL; s = strchr(s + 1, '/')) {
		const char *name;
		int fd, pfd, rc = 0;

		*s = '\0';
		fd = open_in_root(rootfd, path, O_PATH | O_DIRECTORY);
		if (fd >= 0)
			(void)close(fd);
		else if (fd != -ENOENT)
			rc = fd;
		else if ((pfd = parent_in_root(rootfd, path, &name)) < 0)
			rc = pfd;
		else {
			if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST)
				rc = -errno;
			(void)close(pfd);
		}
		*s = '/';
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Create the missing file `path` (an empty one) inside the root. */
static int create_in_root(int rootfd, char *path)
{
	const char *name;
	int rc = make_parents_in_root(rootfd, path);
	int pfd, fd;

	if (rc < 0)
		return rc;
	pfd = parent_in_root(rootfd, path, &name);
	if (pfd < 0)
		return pfd;
	/* O_EXCL|O_NOFOLLOW: a link that appeared meanwhile is not followed out of the root. */
	fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	rc = fd < 0 ? -errno : 0;
	if (fd >= 0)
		(void)close(fd);
	(void)close(pfd);
	return rc;
}

/* The next path of the chain: the link at `cur` read, made relative to the root. */
static int follow_link(int rootfd, char *cur, size_t size)
{
	char target[PATH_MAX];
	int fd = open_in_root(rootfd, cur, O_PATH | O_NOFOLLOW);
	char *slash;
	ssize_t n;
	size_t dir, tlen;

	if (fd < 0)
		return fd;
	n = readlinkat(fd, "", target, sizeof(target) - 1);
	(void)close(fd);
	if (n < 0)
		return errno == ENOENT ? -EINVAL : -errno; /* not a link */
	target[n] = '\0';
	if (target[0] == '/') {
		const char *t = target;

		while (*t == '/')
			t++;
		tlen = strlen(t);
		if (tlen >= size)
			return -ENAMETOOLONG;
		memmove(cur, t, tlen + 1);
		return 0;
	}
	slash = strrchr(cur, '/');
	dir = slash ? (size_t)(slash - cur) + 1 : 0;
	tlen = (size_t)n;
	if (dir + tlen >= size)
		return -ENAMETOOLONG;
	memcpy(cur + dir, target, tlen + 1);
	return 0;
}

int pdk__mount_file_target_at(int rootfd, const char *path)
{
	char cur[PATH_MAX];
	size_t len;
	struct stat st;

	while (*path == '/')
		path++;
	len = strlen(path);
	if (len >= sizeof(cur))
		return -ENAMETOOLONG;
	memcpy(cur, path, len + 1);
	for (int hops = 0; hops <= FILE_LINKS_MAX; hops++) {
		int fd = open_in_root(rootfd, cur, O_PATH);
		int rc;

		if (fd >= 0) {
			rc = fstat(fd, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0 : -EINVAL;
			if (rc == 0)
				return fd;
			(void)close(fd);
			return rc;
		}
		if (fd != -ENOENT)
			return fd;
		/* Something on the way is missing: the last link's target, or cur itself. */
		rc = follow_link(rootfd, cur, sizeof(cur));
		if (rc == -ENOENT || rc == -EINVAL) {
			rc = create_in_root(rootfd, cur);
			if (rc < 0)
				return rc;
		} else if (rc < 0) {
			return rc;
		}
	}
	return -ELOOP;
}

int pdk__mount_bind_onto(const char *src, int target_fd, uint64_t attr)
{
	struct mount_attr ma = {.attr_set = attr};
	int tree = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	int rc = -1;

	if (tree < 0)
		return -1;
	if ((attr == 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &ma, sizeof(ma)) == 0) &&
	    move_mount(tree, "", target_fd, "",
		       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) == 0)
		rc = 0;
	(void)close(tree);
	return rc;
}

/*
 * SECURITY: a file bind whose destination is a symlink (another
 * distribution's bundle path) goes onto the link's target as the sandbox
 * sees it, resolved inside the new root: never a path of the host.
 */
static int bind_file_via_link(const struct op *o, struct pdk_child_error *ce)
{
	int root = open(NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int fd, rc;

	if (root < 0)
		return fail(ce, "cannot open", NEWROOT, NULL);
	fd = pdk__mount_file_target_at(root, o->dst + strlen(NEWROOT));
	(void)close(root);
	if (fd < 0) {
		errno = -fd;
		return fail(ce, "cannot find the file that the symlink leads to", o->dst, NULL);
	}
	rc = pdk__mount_bind_onto(o->src, fd, o->attr);
	if (rc < 0)
		rc = fail(ce, "cannot bind", o->src, o->dst);
	(void)close(fd);
	return rc;
}

static int set_attr(const char *path, uint64_t attr, bool recursive)
{
	struct mount_attr ma = {.attr_set = attr};

	if (attr == 0)
		return 0;
	return mount_setattr(AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &ma, sizeof(ma));
}

static int write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	int rc;

	if (fd < 0)
		return -1;
	rc = pdk_write_all(fd, data, strlen(data));
	(void)close(fd);
	if (rc < 0)
		errno = -rc;
	return rc < 0 ? -1 : 0;
}

static int apply_mask(const struct op *o)
{
	if (o->is_dir) {
		if (mount("tmpfs", o->dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  "mode=0555,size=4k,nr_inodes=2") < 0)
			return -1;
		return 0;
	}
	return mount(NEWROOT "/dev/null", o->dst, NULL, MS_BIND, NULL);
}

/*
 * A runtime or state directory hidden: an empty read-only tmpfs attached to the
 * directory, reached from /newroot without following a symlink. SECURITY: a bind is
 * live, and an rw one is writable by other sandboxes: a symlink planted on the way
 * since the plan was made cannot move the mask elsewhere and leave the directory in
 * sight; the sandbox then fails to start.
 */
static int apply_private(const struct op *o, struct pdk_child_error *ce)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	int dfd = (int)syscall(SYS_openat2, AT_FDCWD, o->dst, &how, sizeof(how));
	int fs = -1, mnt = -1, rc = -1;

	if (dfd < 0)
		return fail(ce, "cannot hide the private directory", o->dst, NULL);
	fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0555", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", "2", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		rc = fail(ce, "cannot make the tmpfs that hides", o->dst, NULL);
		goto out;
	}
	mnt = fsmount(fs, FSMOUNT_CLOEXEC,
		      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (mnt < 0 ||
	    move_mount(mnt, "", dfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
		rc = fail(ce, "cannot hide the private directory", o->dst, NULL);
		goto out;
	}
	rc = 0;
out:
	if (mnt >= 0)
		(void)close(mnt);
	if (fs >= 0)
		(void)close(fs);
	(void)close(dfd);
	return rc;
}

/* fail(), with the filesystem context's own log (the kernel's reason) appended. */
static int fail_fs(int fs, struct pdk_child_error *ce, const char *what, const char *a)
{
	int rc = fail(ce, what, a, NULL);
	char *msg = ce != NULL ? ce->msg : NULL;
	size_t len = sizeof(ce->msg);
	size_t used;
	ssize_t n;

	if (msg == NULL)
		return rc;
	used = strlen(msg);
	if (fs >= 0 && used + 4 < len) {
		memcpy(msg + used, " (", 2);
		n = read(fs, msg + used + 2, len - used - 4);
		if (n > 0) {
			used += 2 + (size_t)n;
			if (msg[used - 1] == '\n')
				used--;
			msg[used++] = ')';
		}
		msg[used] = '\0';
	}
	return rc;
}

/*
 * The workspace overlay, built with the new mount API so that every layer
 * is one parameter ("lowerdir+", Linux 6.8) and no option string limits
 * the number of snapshots; older kernels get the escaped "lowerdir" list.
 * userxattr: inside a user namespace overlayfs keeps whiteouts and opaque
 * marks in user.overlay.* xattrs.
 */
/*
 * Bind `src` at the neutral name `as` in the scratch root (recursively: a
 * directory with mounts below it cannot be bound alone in a user namespace).
 */
static int bind_layer(const char *src, const char *as, struct pdk_child_error *ce)
{
	if (mkdir(as, 0700) < 0 && errno != EEXIST)
		return fail(ce, "cannot create", as, NULL);
	if (mount(src, as, NULL, MS_BIND | MS_REC, NULL) < 0)
		return fail(ce, "cannot bind the workspace layer", src, as);
	return 0;
}

/*
 * SECURITY: the layers under neutral names, so that the overlay's options in
 * /proc/self/mountinfo (which show the paths it was given) name no host path:
 * not the state directory, not the change set, not the workspace's own.
 * Upper and work of a disk-limited workspace are on /wsupper already.
 */
static int bind_layers(const struct op *o, struct pdk_child_error *ce)
{
	int rc = 0;

	if (mkdir(LAYERS, 0700) < 0)
		return fail(ce, "cannot create", LAYERS, NULL);
	for (size_t i = 0; rc == 0 && o->lowers[i] != NULL; i++) {
		struct stat st;

		rc = bind_layer(o->lowers[i], o->lower_as[i], ce);
		/* SECURITY: what the plan looked at (pin_lower()), or no sandbox. */
		if (rc == 0 && o->lower_ino != NULL &&
		    (stat(o->lower_as[i], &st) < 0 || st.st_dev != o->lower_dev[i] ||
		     st.st_ino != o->lower_ino[i]))
			rc = changed(ce, o->lowers[i]);
	}
	if (rc == 0 && o->tmpfs == NULL)
		rc = bind_layer(o->set_dir, LAYERS "/set", ce);
	return rc;
}

/* The upper and work directories on a tmpfs of the disk limit's size; *upper_fd opened. */
static int make_disk_upper(const struct op *o, int *upper_fd, struct pdk_child_error *ce)
{
	if (mkdir("/wsupper", 0700) < 0 ||
	    mount("tmpfs", "/wsupper", "tmpfs", MS_NOSUID | MS_NODEV, o->tmpfs) < 0)
		return fail(ce, "cannot mount the workspace's disk-limited tmpfs on", "/wsupper",
			    NULL);
	if (mkdir("/wsupper/upper", 0700) < 0 || chmod("/wsupper/upper", o->mode) < 0 ||
	    mkdir("/wsupper/work", 0700) < 0)
		return fail(ce, "cannot prepare", "/wsupper", NULL);
	*upper_fd = open("/wsupper/upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*upper_fd < 0)
		return fail(ce, "cannot open", "/wsupper/upper", NULL);
	return 0;
}

/* The overlay's lower layers: one "lowerdir+" each, else (before 6.8) one "lowerdir". */
static int set_lowers(int fs, const struct op *o, struct pdk_child_error *ce)
{
	if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", o->lower_as[0], 0) == 0) {
		for (size_t i = 1; o->lower_as[i] != NULL; i++)
			if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", o->lower_as[i], 0) < 0)
				return fail_fs(fs, ce, "overlay: bad lower layer", o->lowers[i]);
		return 0;
	}
	if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", o->lowerdir, 0) < 0)
		return fail_fs(fs, ce, "overlay: bad lower layers", o->lowers[0]);
	return 0;
}

/*
 * The workspace overlay, built with the new mount API so that every layer
 * is one parameter ("lowerdir+", Linux 6.8) and no option string limits
 * the number of snapshots; older kernels get the escaped "lowerdir" list.
 * userxattr: inside a user namespace overlayfs keeps whiteouts and opaque
 * marks in user.overlay.* xattrs.
 */
static int apply_overlay(const struct op *o, int *upper_fd, struct pdk_child_error *ce)
{
	const char *upper = o->upper_as, *work = o->work_as;
	int fs = -1, mnt = -1, rc = -1;

	if (o->tmpfs != NULL) {
		if (make_disk_upper(o, upper_fd, ce) < 0)
			return -1;
		upper = "/wsupper/upper";
		work = "/wsupper/work";
	}
	if (bind_layers(o, ce) < 0)
		return -1;
	fs = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return fail(ce, "cannot create an overlay for", o->dst, NULL);
	if (set_lowers(fs, o, ce) < 0)
		goto out;
	if (fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", upper, 0) < 0) {
		rc = fail_fs(fs, ce, "overlay: bad upper layer", o->tmpfs ? upper : o->src);
		goto out;
	}
	if (fsconfig(fs, FSCONFIG_SET_STRING, "workdir", work, 0) < 0) {
		rc = fail_fs(fs, ce, "overlay: bad work directory", o->tmpfs ? work : o->data);
		goto out;
	}
	/*
	 * No sync of the whole upper file system at the unmount, which the
	 * init's exit waited for: the caller syncs a set with changes.
	 * EINVAL: a kernel before 5.10, which syncs as it always did.
	 */
	if (o->volatile_upper && fsconfig(fs, FSCONFIG_SET_FLAG, "volatile", NULL, 0) < 0 &&
	    errno != EINVAL) {
		rc = fail_fs(fs, ce, "overlay: cannot set 'volatile' on", o->dst);
		goto out;
	}
	if (fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		rc = fail_fs(fs, ce, "cannot create the workspace overlay on", o->dst);
		goto out;
	}
	mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0) {
		rc = fail_fs(fs, ce, "cannot mount the workspace overlay on", o->dst);
		goto out;
	}
	if (move_mount(mnt, "", AT_FDCWD, o->dst, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		rc = fail(ce, "cannot attach the workspace overlay on", o->dst, NULL);
		goto out;
	}
	rc = 0;
out:
	if (mnt >= 0)
		(void)close(mnt);
	(void)close(fs);
	return rc;
}

/* Whether a symlink of the image where `o` goes may be replaced (by a generated file, a file bind).
 */
static bool replaceable(const struct op *o)
{
	return o->kind == OP_FILE || (o->kind == OP_BIND && !o->is_dir);
}

/*
 * SECURITY: in an image's root, the way to a mount point must not pass
 * through a symlink. The image's symlinks lead wherever its author chose,
 * and a mkdir, a mount or a write on such a path would act on what the
 * link names in the scratch root, where the host's tree is (/oldroot).
 * Each component is looked at without following it (nothing else writes
 * the new root yet: no race). A symlink where a generated file or a file
 * bind goes is removed (from the sandbox's own writable layer); any other
 * fails the start. Past the first missing component everything is made by
 * us, as directories.
 */
static int check_image_path(const struct op *o, struct pdk_child_error *ce)
{
	char buf[PATH_MAX];
	size_t len = strlen(o->dst);

	if (len >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return fail(ce, "cannot reach", o->dst, NULL);
	}
	memcpy(buf, o->dst, len + 1);
	for (size_t i = strlen(NEWROOT) + 1; i <= len; i++) {
		struct stat st;
		bool last = i == len;

		if (!last && buf[i] != '/')
			continue;
		buf[i] = '\0';
		if (lstat(buf, &st) < 0)
			return errno == ENOENT ? 0 : fail(ce, "cannot read", buf, NULL);
		if (S_ISLNK(st.st_mode) && last && replaceable(o))
			return unlink(buf) < 0 ? fail(ce, "cannot replace the symlink", buf, NULL)
					       : 0;
		if (S_ISLNK(st.st_mode)) {
			errno = ELOOP;
			return fail(ce, "the image has a symlink on the way to a mount point",
				    buf + strlen(NEWROOT), o->dst + strlen(NEWROOT));
		}
		buf[i] = '/';
	}
	return 0;
}

static int apply_op(const struct op *o, bool image, int *upper_fd, struct pdk_child_error *ce)
{
	int rc = 0;

	struct stat st;

	if (image && check_image_path(o, ce) < 0)
		return -1;
	/*
	 * A file bind's mount point is made first, and looked at only when
	 * something is there: on the least root nothing ever is (one mknod(),
	 * where a look first took three calls). A symlink there is followed
	 * inside the root; a file is mounted on as it is, even on a read-only
	 * bind. A generated file is made by its own write (write_file()).
	 */
	if (o->kind == OP_BIND && !o->is_dir) {
		rc = make_path(o->dst, false);
		if (rc == -EEXIST && lstat(o->dst, &st) == 0) {
			if (S_ISLNK(st.st_mode))
				return bind_file_via_link(o, ce);
			rc = S_ISREG(st.st_mode) ? 0 : S_ISDIR(st.st_mode) ? -EISDIR : rc;
		}
	} else if (o->kind != OP_ROBIND && o->kind != OP_MASK && o->kind != OP_SYMLINK &&
		   o->kind != OP_PRIVATE && o->kind != OP_FILE) {
		rc = make_path(o->dst, o->is_dir);
	}
	if (rc < 0) {
		errno = -rc;
		return fail(ce, "cannot create mount point", o->dst, NULL);
	}
	switch (o->kind) {
	case OP_BIND:
		if (mount(o->src, o->dst, NULL, MS_BIND | MS_REC, NULL) < 0)
			return fail(ce, "cannot bind", o->src, o->dst);
		/* SECURITY: what the plan looked at (add_host_bind()), or no sandbox. */
		if (o->ino != 0 &&
		    (stat(o->dst, &st) < 0 || st.st_dev != o->dev || st.st_ino != o->ino))
			return changed(ce, o->src);
		if (set_attr(o->dst, o->attr, true) < 0)
			return fail(ce, "cannot set mount attributes of", o->dst, NULL);
		return 0;
	case OP_TMPFS:
		if (mount("tmpfs", o->dst, "tmpfs", MS_NOSUID | MS_NODEV, o->data) < 0)
			return fail(ce, "cannot mount tmpfs on", o->dst, NULL);
		if (set_attr(o->dst, o->attr, false) < 0)
			return fail(ce, "cannot set mount attributes of", o->dst, NULL);
		return 0;
	case OP_PROC:
		if (mount("proc", o->dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			return fail(ce, "cannot mount proc on", o->dst, NULL);
		return 0;
	case OP_DEVPTS:
		if (mount("devpts", o->dst, "devpts", MS_NOSUID | MS_NOEXEC, o->data) < 0)
			return fail(ce, "cannot mount devpts on", o->dst, NULL);
		return 0;
	case OP_SYMLINK:
		rc = make_symlink(o->data, o->dst);
		if (rc < 0) {
			errno = -rc;
			return fail(ce, "cannot create symlink", o->dst, NULL);
		}
		return 0;
	case OP_FILE:
		rc = write_file(o->dst, o->data);
		if (rc < 0 && errno == ENOENT) {
			rc = make_parents(o->dst);
			if (rc < 0) {
				errno = -rc;
				return fail(ce, "cannot create the directory of", o->dst, NULL);
			}
			rc = write_file(o->dst, o->data);
		}
		if (rc < 0)
			return fail(ce, "cannot write", o->dst, NULL);
		return 0;
	case OP_ROBIND:
		if (mount(o->dst, o->dst, NULL, MS_BIND | MS_REC, NULL) < 0 ||
		    set_attr(o->dst, o->attr, true) < 0) {
			if (errno == ENOENT && o->optional)
				return 0;
			return fail(ce, "cannot make read-only", o->dst, NULL);
		}
		return 0;
	case OP_MASK:
		if (apply_mask(o) < 0 && !(errno == ENOENT && o->optional))
			return fail(ce, "cannot hide", o->dst, NULL);
		return 0;
	case OP_OVERLAY:
		return apply_overlay(o, upper_fd, ce);
	case OP_PRIVATE:
		return apply_private(o, ce);
	default:
		errno = EINVAL;
		return fail(ce, "unknown mount operation for", o->dst, NULL);
	}
}

/* The image's lower layers: one "lowerdir+" each, else (before 6.8) one "lowerdir". */
static int set_image_lowers(int fs, const struct pdk_mount_plan *plan, struct pdk_child_error *ce)
{
	if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", plan->image_as[0], 0) == 0) {
		for (size_t i = 1; plan->image_as[i] != NULL; i++)
			if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", plan->image_as[i], 0) <
			    0)
				return fail_fs(fs, ce, "image: bad layer", plan->image_lowers[i]);
		return 0;
	}
	if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", plan->image_lowerdir, 0) < 0)
		return fail_fs(fs, ce, "image: bad layers", plan->image_lowers[0]);
	return 0;
}

/*
 * The image's layers under neutral names (SECURITY: the overlay's options
 * in /proc/self/mountinfo name no host path, not the state directory), and
 * the sandbox's writable layer on a tmpfs of its own (or, for an image
 * being built, the caller's directory bound at the same neutral name).
 */
static int image_parts(const struct pdk_mount_plan *plan, struct pdk_child_error *ce)
{
	if (mkdir(IMAGE_LAYERS, 0700) < 0)
		return fail(ce, "cannot create", IMAGE_LAYERS, NULL);
	for (size_t i = 0; plan->image_lowers[i] != NULL; i++) {
		if (mkdir(plan->image_as[i], 0700) < 0)
			return fail(ce, "cannot create", plan->image_as[i], NULL);
		if (mount(plan->image_lowers[i], plan->image_as[i], NULL, MS_BIND | MS_REC, NULL) <
		    0)
			return fail(ce, "cannot bind the image layer", plan->image_lowers[i],
				    plan->image_as[i]);
	}
	if (mkdir(IMAGE_RW, 0700) < 0)
		return fail(ce, "cannot create", IMAGE_RW, NULL);
	/* An image being built: the caller's directory, with its upper and work, is the layer. */
	if (plan->image_rw_dir != NULL) {
		if (mount(plan->image_rw_dir, IMAGE_RW, NULL, MS_BIND, NULL) < 0)
			return fail(ce, "cannot bind the image's writable layer",
				    plan->image_rw_dir, IMAGE_RW);
		return 0;
	}
	if (mount("tmpfs", IMAGE_RW, "tmpfs", MS_NOSUID | MS_NODEV, plan->root_opts) < 0)
		return fail(ce, "cannot mount the image's writable layer on", IMAGE_RW, NULL);
	if (mkdir(IMAGE_RW "/upper", 0755) < 0 || chmod(IMAGE_RW "/upper", 0755) < 0 ||
	    mkdir(IMAGE_RW "/work", 0700) < 0)
		return fail(ce, "cannot prepare", IMAGE_RW, NULL);
	return 0;
}

/* Step 3 for an image: the overlay of its layers and the writable layer at /newroot. */
static int mount_image_root(const struct pdk_mount_plan *plan, struct pdk_child_error *ce)
{
	int fs = -1, mnt = -1, rc = -1;

	if (image_parts(plan, ce) < 0)
		return -1;
	fs = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return fail(ce, "cannot create an overlay for", NEWROOT, NULL);
	if (set_image_lowers(fs, plan, ce) < 0)
		goto out;
	if (fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", IMAGE_RW "/upper", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "workdir", IMAGE_RW "/work", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		rc = fail_fs(fs, ce, "cannot create the image's root overlay on", NEWROOT);
		goto out;
	}
	/* SECURITY: no set-id program and no device node of an image takes effect. */
	mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mnt < 0 || move_mount(mnt, "", AT_FDCWD, NEWROOT, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		rc = fail_fs(fs, ce, "cannot mount the image's root on", NEWROOT);
		goto out;
	}
	rc = 0;
out:
	if (mnt >= 0)
		(void)close(mnt);
	(void)close(fs);
	return rc;
}

/* Steps 1-2: private mounts, scratch root on /tmp, host root at /oldroot, tmpfs at /newroot. */
static int prepare_base(const struct pdk_mount_plan *plan, struct pdk_child_error *ce)
{
	/*
	 * SECURITY: private, not slaves. A slave receives what is mounted on the
	 * host afterwards: where the host's mounts are shared (systemd makes /
	 * shared), a later mount under a bound directory appeared inside a
	 * running sandbox, writable even under a read-only bind, whatever it
	 * showed (the state directory's keys, the host's /proc). The view is
	 * what the plan checked, for the sandbox's whole life.
	 */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(ce, "cannot make mounts private", "/", NULL);
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16k") < 0)
		return fail(ce, "cannot mount scratch tmpfs on", "/tmp", NULL);
	if (chdir("/tmp") < 0 || mkdir("newroot", 0755) < 0 || mkdir("oldroot", 0755) < 0)
		return fail(ce, "cannot prepare", "/tmp", NULL);
	if (syscall(SYS_pivot_root, ".", "oldroot") < 0)
		return fail(ce, "cannot pivot_root to", "/tmp", NULL);
	if (chdir("/") < 0)
		return fail(ce, "cannot chdir to", "/", NULL);
	if (plan->image_lowers != NULL)
		return mount_image_root(plan, ce);
	if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, plan->root_opts) < 0)
		return fail(ce, "cannot mount root tmpfs on", NEWROOT, NULL);
	return 0;
}

/*
 * Steps 4-5: make /newroot the root, drop the host tree, seal the root
 * read-only (an image's root stays writable: its writes go to the
 * sandbox's own layer).
 */
static int switch_root(bool image, struct pdk_child_error *ce)
{
	if (chdir(NEWROOT) < 0)
		return fail(ce, "cannot chdir to", NEWROOT, NULL);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return fail(ce, "cannot pivot_root to", NEWROOT, NULL);
	/*
	 * SECURITY: the scratch root now sits on top of the new root, with the
	 * host tree mounted under it at /oldroot; a lazy unmount detaches a
	 * mount and every mount below it, so this one call drops both. One
	 * unmount, not two: each waits for an expedited RCU grace period
	 * (docs/internals/performance.md, "The tail").
	 */
	if (umount2(".", MNT_DETACH) < 0)
		return fail(ce, "cannot detach", "the scratch root and the host tree", NULL);
	if (chdir("/") < 0)
		return fail(ce, "cannot chdir to", "/", NULL);
	/* SECURITY: the root holds only mount points and generated /etc files: seal it. */
	if (!image &&
	    set_attr("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false) < 0)
		return fail(ce, "cannot make read-only", "/", NULL);
	return 0;
}

int pdk_mount_apply_child(const struct pdk_mount_plan *plan, int *upper_fd,
			  struct pdk_child_error *ce)
{
	int rc = prepare_base(plan, ce);

	*upper_fd = -1;
	for (size_t i = 0; rc == 0 && i < plan->n; i++)
		rc = apply_op(&plan->ops[i], plan->image_lowers != NULL, upper_fd, ce);
	if (rc == 0)
		rc = switch_root(plan->image_lowers != NULL, ce);
	return rc;
}
