/*
 * session-image.c - an image's `user` resolved to the ids the sandbox's
 * user has inside: numbers as they are, names from the image's own
 * /etc/passwd and /etc/group (read from its layers, topmost first, each
 * opened inside its layer: a symlink of the image cannot lead to a host
 * file).
 */
#include "common.h"
#include "base.h"
#include "session-internal.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ID_FILE_MAX (1u << 20)

/* The file `rel` of the image: the topmost layer's that has it (a whiteout hides it). */
static char *image_file(char *const *layers, const char *rel)
{
	for (size_t i = 0; layers != NULL && layers[i] != NULL; i++) {
		struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY,
				       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
		_cleanup_close_ int root = open(layers[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		_cleanup_close_ int fd = -1;
		struct stat st;
		char *text = NULL;
		ssize_t n;

		if (root < 0)
			return NULL;
		if (fstatat(root, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode))
			return NULL; /* a whiteout: the layers below do not count */
		fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
		if (fd < 0)
			continue;
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > ID_FILE_MAX)
			return NULL;
		text = pdk_xmalloc((size_t)st.st_size + 1);
		n = pdk_read_all(fd, text, (size_t)st.st_size);
		if (n < 0) {
			free(text);
			return NULL;
		}
		text[n] = '\0';
		return text;
	}
	return NULL;
}

/* The third (id) and fourth (group) fields of the line of `name` in a passwd or group text. */
static bool id_of(const char *text, const char *name, uint64_t *id, uint64_t *gid)
{
	size_t n = strlen(name);

	for (const char *l = text; l != NULL && *l != '\0';) {
		const char *next = strchr(l, '\n');
		const char *f2 =
			strncmp(l, name, n) == 0 && l[n] == ':' ? strchr(l + n + 1, ':') : NULL;

		if (f2 != NULL) {
			char *end = NULL;

			*id = strtoull(f2 + 1, &end, 10);
			if (end != f2 + 1 && *end == ':') {
				if (gid != NULL)
					*gid = strtoull(end + 1, NULL, 10);
				return true;
			}
		}
		l = next ? next + 1 : NULL;
	}
	return false;
}

/* One id: a number, or a name of the image's `file` (etc/passwd, etc/group). */
static int one_id(char *const *layers, const char *spec, const char *file, uint64_t *id,
		  uint64_t *gid, struct pdk_error **err)
{
	_cleanup_free_ char *text = NULL;

	if (pdk_parse_u64(spec, UINT32_MAX - 1, id) == 0)
		return 1; /* a number: no group of its own */
	text = image_file(layers, file);
	if (text == NULL || !id_of(text, spec, id, gid))
		return pdk_error_set_field(err, EINVAL, "image",
					   "the image's user '%s' is not a number and not in its "
					   "/%s",
					   spec, file);
	return 0;
}

int pdk__session_image_user(char *const *layers, const char *user, uid_t *uid, gid_t *gid,
			    struct pdk_error **err)
{
	_cleanup_free_ char *u = pdk_xstrdup(user);
	char *colon = strchr(u, ':');
	uint64_t id = 0, g = 0;
	int rc;

	if (colon != NULL)
		*colon = '\0';
	rc = one_id(layers, u, "etc/passwd", &id, &g, err);
	if (rc < 0)
		return -1;
	if (rc == 1)
		g = id; /* "1000" alone: group 1000, as docker does */
	if (colon != NULL && one_id(layers, colon + 1, "etc/group", &g, NULL, err) < 0)
		return -1;
	*uid = (uid_t)id;
	*gid = (gid_t)g;
	return 0;
}
