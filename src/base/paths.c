/*
 * paths.c - the state, runtime and profile directories (paths.h).
 */
#include "common.h"
#include "paths.h"
#include "util.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The build sets it to PREFIX/LIBEXECDIR/paddock (src/base/meson.build). */
#ifndef PDK_LIBEXECDIR
#define PDK_LIBEXECDIR "/usr/local/libexec/paddock"
#endif

static bool absolute(const char *s)
{
	return s != NULL && s[0] == '/';
}

static char *state_dir(const struct pdk_paths_env *e)
{
	if (e->state_dir != NULL && e->state_dir[0] != '\0')
		return pdk_xstrdup(e->state_dir);
	if (absolute(e->xdg_state_home))
		return pdk_xasprintf("%s/paddock", e->xdg_state_home);
	if (e->euid == 0)
		return pdk_xstrdup("/var/lib/paddock");
	return pdk_xasprintf("%s/.local/state/paddock",
			     e->home != NULL && e->home[0] != '\0' ? e->home : "/tmp");
}

static char *runtime_dir(const struct pdk_paths_env *e)
{
	if (absolute(e->runtime_dir))
		return pdk_xstrdup(e->runtime_dir);
	if (absolute(e->xdg_runtime_dir))
		return pdk_xasprintf("%s/paddock", e->xdg_runtime_dir);
	if (e->euid == 0)
		return pdk_xstrdup("/run/paddock");
	return pdk_xasprintf("/tmp/paddock-%u", (unsigned)e->euid);
}

static char *profile_dir(const struct pdk_paths_env *e)
{
	if (absolute(e->xdg_config_home))
		return pdk_xasprintf("%s/paddock/profiles", e->xdg_config_home);
	if (absolute(e->home))
		return pdk_xasprintf("%s/.config/paddock/profiles", e->home);
	return NULL;
}

void pdk_paths_resolve(const struct pdk_paths_env *env, struct pdk_paths *out)
{
	out->state_dir = state_dir(env);
	out->runtime_dir = runtime_dir(env);
	out->profile_dir = profile_dir(env);
}

void pdk_paths_release(struct pdk_paths *p)
{
	free(p->state_dir);
	free(p->runtime_dir);
	free(p->profile_dir);
	*p = (struct pdk_paths){0};
}

int pdk_paths_private_dir(const char *path, struct pdk_error **err)
{
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (pdk_mkdir_p(path, err) < 0)
		return -1;
	fd = TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	if (fd < 0 || fstat(fd, &st) < 0)
		return pdk_error_set(err, errno, "cannot open directory '%s'", path);
	/* SECURITY: a directory someone else made (or can write) is not a place for our files. */
	if (st.st_uid != geteuid())
		return pdk_error_setx(err, EPERM, "'%s' belongs to uid %u, not to uid %u", path,
				      (unsigned)st.st_uid, (unsigned)geteuid());
	if ((st.st_mode & 077) != 0 && fchmod(fd, st.st_mode & 07700) < 0)
		return pdk_error_set(err, errno, "chmod '%s'", path);
	return 0;
}

char *pdk_paths_canonical(const char *path)
{
	char buf[PATH_MAX];
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *parent = NULL, *canon = NULL;

	if (realpath(path, buf) != NULL)
		return pdk_xstrdup(buf);
	if (slash == NULL || slash == path)
		return pdk_xstrdup(path[0] == '\0' ? "/" : path);
	parent = pdk_xasprintf("%.*s", (int)(slash - path), path);
	canon = pdk_paths_canonical(parent);
	if (strcmp(slash + 1, "") == 0 || strcmp(slash + 1, ".") == 0)
		return steal_ptr(&canon);
	if (strcmp(slash + 1, "..") == 0) {
		char *up = strrchr(canon, '/');

		up[up == canon ? 1 : 0] = '\0';
		return steal_ptr(&canon);
	}
	return pdk_xasprintf("%s%s", strcmp(canon, "/") == 0 ? "" : canon, slash);
}

bool pdk_paths_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The directory of the running executable (a new string), or NULL. */
static char *self_dir(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash == NULL)
		return NULL;
	*slash = '\0';
	return pdk_xstrdup(self);
}

/* `path` (taken) when it is an executable regular file, else NULL (and it is freed). */
static char *if_executable(char *path)
{
	struct stat st;

	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
		return path;
	free(path);
	return NULL;
}

char *pdk_paths_helper(const char *name)
{
	_cleanup_free_ char *dir = self_dir();
	char *p = NULL;

	if (dir != NULL)
		p = if_executable(pdk_xasprintf("%s/%s", dir, name));
	if (p == NULL && dir != NULL)
		p = if_executable(pdk_xasprintf("%s/../libexec/paddock/%s", dir, name));
	if (p == NULL)
		p = pdk_xasprintf("%s/%s", PDK_LIBEXECDIR, name);
	return p;
}
