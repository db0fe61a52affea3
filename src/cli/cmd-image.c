/*
 * cmd-image.c - `paddock image ls|import|inspect|rm|prune`: the image
 * store (image/image.h) that sandboxes run on with --image or a profile's
 * `image:`.
 */
#include "common.h"
#include "base.h"
#include "cli.h"
#include "image.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct image_opts {
	bool json;
	bool strict;
	const char *name;
	const char *kind;
	const char *select;
	struct pdk_image_config config;
};

enum {
	OPT_JSON = 256,
	OPT_STRICT,
	OPT_NAME,
	OPT_KIND,
	OPT_SELECT,
	OPT_ENV,
	OPT_WORKDIR,
	OPT_USER,
};

static const struct option long_opts[] = {
	{"json", no_argument, NULL, OPT_JSON},
	{"strict", no_argument, NULL, OPT_STRICT},
	{"name", required_argument, NULL, OPT_NAME},
	{"kind", required_argument, NULL, OPT_KIND},
	{"select", required_argument, NULL, OPT_SELECT},
	{"env", required_argument, NULL, OPT_ENV},
	{"workdir", required_argument, NULL, OPT_WORKDIR},
	{"user", required_argument, NULL, OPT_USER},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static void usage(FILE *out)
{
	fputs("usage: paddock image ls [--json]\n"
	      "       paddock image import SOURCE [--name NAME] [--kind KIND] [--select REF]\n"
	      "                            [--strict] [--env K=V]... [--workdir DIR] [--user U]\n"
	      "                            [--json] [-q]\n"
	      "       paddock image inspect IMAGE...\n"
	      "       paddock image rm IMAGE...\n"
	      "       paddock image prune\n"
	      "       paddock image build [--quiet] [--no-cache] RECIPE.yaml\n"
	      "\n"
	      "Root filesystems for sandboxes (run --image, create --image, a profile's\n"
	      "image:), kept as content-addressed layers in the state directory and shared\n"
	      "read-only by every sandbox that uses them. IMAGE is a name, a digest\n"
	      "(sha256:HEX) or at least 12 of its hex digits.\n"
	      "\n"
	      "  ls       the images: name, digest, size, layers, source\n"
	      "  import   store an image: an OCI image layout (a directory, or an\n"
	      "           oci-archive tar), a docker save archive, a root filesystem as a\n"
	      "           tar (plain, gzip, zstd) or a directory. --kind oci-layout,\n"
	      "           oci-archive, docker-archive, rootfs-tar or rootfs-dir overrides\n"
	      "           the detection; --select picks one image of several (an OCI ref\n"
	      "           name, a docker tag); --env, --workdir and --user override the\n"
	      "           image's config. Archive entries that would reach outside the\n"
	      "           image (absolute names, '..', links leading out), device nodes,\n"
	      "           FIFOs and layers past the store's quota are refused with the\n"
	      "           entry named; set-id bits are cleared (--strict: refused)\n"
	      "  inspect  an image's record as JSON: digest, config, layers (with the\n"
	      "           images that share each)\n"
	      "  rm       remove images, and the layers no other image uses; an image a\n"
	      "           running sandbox uses is refused\n"
	      "  prune    remove nameless images no sandbox uses, layers no image uses,\n"
	      "           and what interrupted imports left\n"
	      "  build    make an image from a recipe, one cached layer a step, each\n"
	      "           step in a sandbox (paddock image build --help)\n"
	      "\n"
	      "The store's quota is PADDOCK_IMAGE_QUOTA (default 32G).\n"
	      "\n"
	      "exit status: 0 done, 1 the operation failed or was refused, 122 usage error.\n",
	      out);
}

int pdk_cli_image_store(struct pdk_image_store **st)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_settings s;
	struct pdk_image_store_opts o = {.log = &pdk_cli_log};
	int rc = 0;

	pdk_cli_settings(&s);
	o.state_dir = s.paths.state_dir;
	if (s.image_quota != NULL && pdk_parse_size(s.image_quota, &o.quota) < 0) {
		pdk_cli_error("PADDOCK_IMAGE_QUOTA: '%s' is not a size (like 20G)", s.image_quota);
		rc = PDK_EXIT_POLICY;
	}
	if (rc == 0 && pdk_image_store_open(&o, st, &err) < 0) {
		pdk_cli_error("image: %s", err->msg);
		rc = 1;
	}
	pdk_settings_release(&s);
	return rc;
}

static json_t *config_json(const struct pdk_image_config *c)
{
	json_t *o = json_object();

	pdk_json_set(o, "env", c->env ? pdk_json_strv(c->env) : NULL);
	pdk_json_set(o, "workdir", c->workdir ? json_string(c->workdir) : NULL);
	pdk_json_set(o, "user", c->user ? json_string(c->user) : NULL);
	pdk_json_set(o, "entrypoint", c->entrypoint ? pdk_json_strv(c->entrypoint) : NULL);
	pdk_json_set(o, "cmd", c->cmd ? pdk_json_strv(c->cmd) : NULL);
	return o;
}

static json_t *image_json(const struct pdk_image *img)
{
	json_t *o = json_object();

	pdk_json_set(o, "name",
		     pdk_image_name(img) ? json_string(pdk_image_name(img)) : json_null());
	pdk_json_set(o, "digest", json_string(pdk_image_digest(img)));
	pdk_json_set(o, "source", json_string(pdk_image_source(img)));
	pdk_json_set(o, "size", json_integer((json_int_t)pdk_image_size(img)));
	pdk_json_set(o, "created_ns", json_integer((json_int_t)pdk_image_created_ns(img)));
	pdk_json_set(o, "layers", pdk_json_strv(pdk_image_layers(img)));
	pdk_json_set(o, "config", config_json(pdk_image_config(img)));
	return o;
}

static void print_row(const struct pdk_image *img, const char *name)
{
	char size[32], when[32] = "-";
	time_t t = (time_t)(pdk_image_created_ns(img) / 1000000000u);
	struct tm tm;

	pdk_cli_human_size(pdk_image_size(img), size, sizeof(size));
	if (localtime_r(&t, &tm) != NULL)
		(void)strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
	printf("%-32s %-19.19s %10s %6zu  %-14s %s\n", name ? name : "<none>",
	       pdk_image_digest(img), size, pdk_strv_len(pdk_image_layers(img)),
	       pdk_image_source(img), when);
}

static int cmd_ls(struct pdk_image_store *st, const struct image_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *arr = json_array();
	struct pdk_image **v = NULL;
	size_t n = 0;

	if (pdk_image_list(st, &v, &n, &err) < 0) {
		pdk_cli_error("image ls: %s", err->msg);
		return 1;
	}
	if (!o->json)
		printf("%-32s %-19s %10s %6s  %-14s %s\n", "NAME", "DIGEST", "SIZE", "LAYERS",
		       "SOURCE", "CREATED");
	for (size_t i = 0; i < n; i++) {
		char *const *names = pdk_image_names(v[i]);

		if (o->json)
			json_array_append_new(arr, image_json(v[i]));
		/* A row a name; a nameless image, one row of its own. */
		if (!o->json && names[0] == NULL)
			print_row(v[i], NULL);
		for (size_t j = 0; !o->json && names[j] != NULL; j++)
			print_row(v[i], names[j]);
		pdk_image_free(v[i]);
	}
	free(v);
	if (o->json)
		pdk_cli_print_json(arr);
	return 0;
}

static void print_import(const struct pdk_image *img, const struct pdk_image_import_stats *s,
			 const struct image_opts *o)
{
	char stored[32];
	json_t *j;

	if (o->json) {
		j = image_json(img);
		pdk_json_set(j, "layers_new", json_integer(s->layers_new));
		pdk_json_set(j, "bytes_in", json_integer((json_int_t)s->bytes_in));
		pdk_json_set(j, "bytes_stored", json_integer((json_int_t)s->bytes_stored));
		pdk_json_set(j, "entries", json_integer((json_int_t)s->entries));
		pdk_json_set(j, "setid_cleared", json_integer(s->setid_cleared));
		pdk_cli_print_json(j);
		json_decref(j);
		return;
	}
	pdk_cli_human_size(s->bytes_stored, stored, sizeof(stored));
	pdk_cli_note("image %s: %u layer%s, %u new (%s stored)",
		     o->name               ? o->name
		     : pdk_image_name(img) ? pdk_image_name(img)
					   : "<none>",
		     s->layers, s->layers == 1 ? "" : "s", s->layers_new, stored);
	printf("%s\n", pdk_image_digest(img));
}

static int cmd_import(struct pdk_image_store *st, const struct image_opts *o, char **args)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_image_import_opts io = {.name = o->name,
					   .select = o->select,
					   .flags = o->strict ? PDK_IMAGE_STRICT : 0,
					   .config = &o->config};
	struct pdk_image_import_stats s = {0};
	struct pdk_image *img = NULL;

	if (args[0] == NULL || args[1] != NULL) {
		pdk_cli_error("image import: expected one SOURCE (a directory or an archive)");
		return PDK_EXIT_POLICY;
	}
	if (o->kind != NULL && pdk_image_kind_parse(o->kind, &io.kind) < 0) {
		pdk_cli_error("image import: --kind '%s': expected oci-layout, oci-archive, "
			      "docker-archive, rootfs-tar or rootfs-dir",
			      o->kind);
		return PDK_EXIT_POLICY;
	}
	io.path = args[0];
	if (pdk_image_import(st, &io, &img, &s, &err) < 0) {
		pdk_cli_error("image import: %s", err->msg);
		return 1;
	}
	print_import(img, &s, o);
	pdk_image_free(img);
	return 0;
}

static json_t *layers_json(struct pdk_image_store *st, const struct pdk_image *img)
{
	json_t *arr = json_array();
	char *const *l = pdk_image_layers(img);

	for (size_t i = 0; l[i] != NULL; i++) {
		struct pdk_error *err = NULL;
		json_t *o = json_object();
		unsigned refs = 0;

		if (pdk_image_layer_refs(st, l[i], &refs, &err) < 0)
			pdk_error_free(&err);
		pdk_json_set(o, "digest", json_string(l[i]));
		pdk_json_set(o, "images", json_integer(refs));
		json_array_append_new(arr, o);
	}
	return arr;
}

static int cmd_inspect(struct pdk_image_store *st, char **args)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *arr = json_array();

	if (args[0] == NULL) {
		pdk_cli_error("image inspect: expected IMAGE");
		return PDK_EXIT_POLICY;
	}
	for (size_t i = 0; args[i] != NULL; i++) {
		struct pdk_image *img = NULL;
		json_t *j;

		if (pdk_image_lookup(st, args[i], &img, &err) < 0) {
			pdk_cli_error("image inspect: %s", err->msg);
			return 1;
		}
		j = image_json(img);
		pdk_json_set(j, "layers", layers_json(st, img));
		json_array_append_new(arr, j);
		pdk_image_free(img);
	}
	pdk_cli_print_json(json_array_size(arr) == 1 ? json_array_get(arr, 0) : arr);
	return 0;
}

static void print_rm(const char *what, const struct pdk_image_rm_stats *s)
{
	char freed[32];

	pdk_cli_human_size(s->bytes_freed, freed, sizeof(freed));
	pdk_cli_note("%s: %u image%s, %u layer%s removed (%s freed)", what, s->images,
		     s->images == 1 ? "" : "s", s->layers, s->layers == 1 ? "" : "s", freed);
}

static int cmd_rm(struct pdk_image_store *st, char **args)
{
	int rc = 0;

	if (args[0] == NULL) {
		pdk_cli_error("image rm: expected IMAGE...");
		return PDK_EXIT_POLICY;
	}
	for (size_t i = 0; args[i] != NULL; i++) {
		_cleanup_error_ struct pdk_error *err = NULL;
		struct pdk_image_rm_stats s = {0};

		if (pdk_image_remove(st, args[i], &s, &err) < 0) {
			pdk_cli_error("image rm: %s", err->msg);
			rc = 1;
			continue;
		}
		if (s.images == 0)
			pdk_cli_note("%s: name removed (the image keeps its other names)", args[i]);
		else
			print_rm(args[i], &s);
	}
	return rc;
}

static int cmd_prune(struct pdk_image_store *st, char **args)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_image_rm_stats s = {0};

	if (args[0] != NULL) {
		pdk_cli_error("image prune: takes no arguments");
		return PDK_EXIT_POLICY;
	}
	if (pdk_image_prune(st, &s, &err) < 0) {
		pdk_cli_error("image prune: %s", err->msg);
		return 1;
	}
	print_rm("prune", &s);
	return 0;
}

static int parse_opt(int c, struct image_opts *o)
{
	switch (c) {
	case OPT_JSON:
		o->json = true;
		return 0;
	case OPT_STRICT:
		o->strict = true;
		return 0;
	case OPT_NAME:
		o->name = optarg;
		return 0;
	case OPT_KIND:
		o->kind = optarg;
		return 0;
	case OPT_SELECT:
		o->select = optarg;
		return 0;
	case OPT_ENV:
		if (strchr(optarg, '=') == NULL) {
			pdk_cli_error("image import: --env '%s': expected K=V", optarg);
			return PDK_EXIT_POLICY;
		}
		pdk_strv_push(&o->config.env, optarg);
		return 0;
	case OPT_WORKDIR:
		o->config.workdir = pdk_xstrdup(optarg);
		return 0;
	case OPT_USER:
		o->config.user = pdk_xstrdup(optarg);
		return 0;
	case 'q':
		pdk_cli_quiet = true;
		return 0;
	default:
		fputs("Try 'paddock image --help'.\n", stderr);
		return PDK_EXIT_POLICY;
	}
}

static int dispatch(struct pdk_image_store *st, const char *verb, struct image_opts *o, char **args)
{
	if (strcmp(verb, "ls") == 0)
		return args[0] ? (pdk_cli_error("image ls: takes no arguments"), PDK_EXIT_POLICY)
			       : cmd_ls(st, o);
	if (strcmp(verb, "import") == 0)
		return cmd_import(st, o, args);
	if (strcmp(verb, "inspect") == 0)
		return cmd_inspect(st, args);
	if (strcmp(verb, "rm") == 0)
		return cmd_rm(st, args);
	if (strcmp(verb, "prune") == 0)
		return cmd_prune(st, args);
	pdk_cli_error("image: unknown command '%s' (ls, import, inspect, rm, prune, build)", verb);
	return PDK_EXIT_POLICY;
}

int pdk_cmd_image(int argc, char **argv)
{
	struct image_opts o = {0};
	struct pdk_image_store *st = NULL;
	const char *verb;
	int c, rc;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? PDK_EXIT_POLICY : 0;
	}
	verb = argv[1];
	/* build has options of its own (cmd-image-build.c). */
	if (strcmp(verb, "build") == 0)
		return pdk_cmd_image_build(argc - 1, argv + 1);
	optind = 1;
	while ((c = getopt_long(argc - 1, argv + 1, "hq", long_opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			pdk_image_config_release(&o.config);
			return 0;
		}
		rc = parse_opt(c, &o);
		if (rc != 0) {
			pdk_image_config_release(&o.config);
			return rc;
		}
	}
	rc = pdk_cli_image_store(&st);
	if (rc == 0)
		rc = dispatch(st, verb, &o, argv + 1 + optind);
	pdk_image_store_free(st);
	pdk_image_config_release(&o.config);
	return rc;
}
