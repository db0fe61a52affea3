#include "common.h"
#include "json.h"
#include "util.h"

#include <string.h>
#include <sys/random.h>

char *pdk_json_dump_line(const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
	size_t n;

	if (s == NULL)
		return NULL;
	n = strlen(s);
	s = pdk_xrealloc(s, n + 2);
	s[n] = '\n';
	s[n + 1] = '\0';
	return s;
}

void pdk_json_seed(void)
{
	size_t seed = 0;

	/* A zero seed would make jansson read /dev/urandom after all. */
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed) && seed != 0)
		json_object_seed(seed);
}

json_t *pdk_json_strv(char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		/* Invalid UTF-8 (argv may hold any bytes) is kept visible, not dropped. */
		json_t *s = json_string(v[i]);

		if (s == NULL)
			s = json_stringn_nocheck(v[i], strlen(v[i]));
		json_array_append_new(a, s);
	}
	return a;
}

void pdk_json_set(json_t *obj, const char *key, json_t *value)
{
	if (value != NULL)
		json_object_set_new(obj, key, value);
}
