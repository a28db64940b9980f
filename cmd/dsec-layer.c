/* dsec-layer: the image store. Import layers, compose images, list, inspect, remove, gc,
 * export. Logic lives in libcommon/layer*.c, oci.c and store.c. */
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commit.h"
#include "jsonl.h"
#include "layer.h"
#include "store.h"

static const char help[] =
    "Usage: dsec-layer import [OPTION]... PATH|-\n"
    "       dsec-layer compose --name IMAGE LAYER...\n"
    "       dsec-layer commit [--name IMAGE] SANDBOX-ID\n"
    "       dsec-layer ls | inspect REF... | rm [--force] REF... | gc | export LAYER\n"
    "The dsec image store: content-addressed layers (EROFS images) and images made of them.\n"
    "\n"
    "import reads a tar (plain, gzip, xz, zstd, bzip2, lz4), a directory, an OCI image layout\n"
    "or a docker-save archive (file or directory), or standard input ('-').\n"
    "commit makes a live sandbox's changes (writes, deletions, renames) an application layer\n"
    "and an image (--name, default the sandbox's id) on top of the sandbox's image.\n"
    "\n"
    "Options:\n"
    "      --kind KIND       layer kind: base, intermediate or application\n"
    "      --name NAME       layer name (import), or image name (compose, commit, OCI/docker\n"
    "                        import)\n"
    "      --allow-setuid    keep setuid/setgid bits and file capabilities\n"
    "      --max-bytes SIZE  bound on the uncompressed stream and contents (default 64G)\n"
    "      --max-files N     bound on the number of entries (default 1000000)\n"
    "      --format FMT      runtime form: erofs (default) or dir (an unpacked tree)\n"
    "      --force           rm: remove a layer even when an image or a sandbox uses it\n"
    "  -q, --quiet           no warnings\n"
    "  -v, --verbose         more diagnostics\n"
    "      --root DIR        store root (default $DSEC_ROOT or /var/lib/dsec)\n"
    "      --run DIR         run dir (default $DSEC_RUN or /run/dsec)\n"
    "  -h, --help            show this help and exit\n"
    "  -V, --version         show the version and exit\n"
    "\n"
    "Records (one JSON object per line) go to standard output, diagnostics to standard error.\n"
    "Exit status: 0 done, 1 some record failed, 2 usage error, 3 fatal.\n";

enum {
	OPT_KIND = DSEC_OPT_FIRST_TOOL,
	OPT_NAME,
	OPT_ALLOW_SETUID,
	OPT_MAX_BYTES,
	OPT_MAX_FILES,
	OPT_FORMAT,
	OPT_FORCE,
};

static const struct option longopts[] = {
    DSEC_COMMON_LONGOPTS,
    {"kind", required_argument, NULL, OPT_KIND},
    {"name", required_argument, NULL, OPT_NAME},
    {"allow-setuid", no_argument, NULL, OPT_ALLOW_SETUID},
    {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
    {"max-files", required_argument, NULL, OPT_MAX_FILES},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"force", no_argument, NULL, OPT_FORCE},
    {NULL, 0, NULL, 0},
};

static int failed;

static int emit(json_t *rec, void *arg, struct dsec_err *err)
{
	if (dsec_jsonl_emit(rec, err) < 0)
		dsec_fatal(err);
	return 0;
}

static int emit_plain(json_t *rec, void *arg)
{
	struct dsec_err err;

	return emit(rec, arg, &err);
}

/* A failed record: one line on stderr, an error record on stdout. */
static void fail(const char *key, const char *subject, struct dsec_err *err)
{
	json_t *rec = json_object();

	if (key && subject)
		json_object_set_new(rec, key, json_string(subject));
	dsec_jsonl_set_error(rec, err, "dsec-layer");
	dsec_err_print(err); /* the messages name their subject already */
	emit(rec, NULL, err);
	json_decref(rec);
	failed = 1;
}

static int cmd_import(const struct dsec_paths *p, struct dsec_import_opts *o, int argc, char **argv)
{
	struct dsec_err err;

	if (argc != 1)
		dsec_usage_error("import takes one PATH (or '-')");
	if (!strcmp(argv[0], "-") && isatty(STDIN_FILENO))
		dsec_usage_error("import -: standard input is a terminal");
	o->progress = isatty(STDERR_FILENO) && dsec_verbose >= 0;
	if (dsec_layer_import(p, o, argv[0], emit, NULL, &err) < 0)
		fail("input", argv[0], &err);
	return 0;
}

static int cmd_commit(const struct dsec_paths *p, const char *name, int argc, char **argv)
{
	struct dsec_err err;
	json_t *rec;

	if (argc != 1)
		dsec_usage_error("commit takes one SANDBOX-ID");
	if (name && !dsec_image_name_ok(name))
		dsec_usage_error("--name '%s': not a valid image name", name);
	if (dsec_commit(p, argv[0], name, &rec, &err) < 0) {
		fail("id", argv[0], &err);
		return 0;
	}
	json_object_set_new(rec, "node", json_string(dsec_node()));
	emit(rec, NULL, &err);
	json_decref(rec);
	return 0;
}

static int cmd_compose(const struct dsec_paths *p, const char *name, int argc, char **argv)
{
	struct dsec_err err;
	json_t *rec;

	if (!name)
		dsec_usage_error("compose needs --name IMAGE");
	if (!dsec_image_name_ok(name))
		dsec_usage_error("--name '%s': not a valid image name", name);
	if (argc < 1)
		dsec_usage_error("compose needs at least one LAYER");
	if (argc > DSEC_MAX_LAYERS)
		dsec_usage_error("compose takes at most %d layers", DSEC_MAX_LAYERS);
	if (dsec_store_compose(p, name, (const char *const *)argv, (unsigned)argc, NULL, &rec,
			       &err) < 0) {
		fail("image", name, &err);
		return 0;
	}
	json_object_set_new(rec, "node", json_string(dsec_node()));
	emit(rec, NULL, &err);
	json_decref(rec);
	return 0;
}

static void cmd_inspect(const struct dsec_paths *p, const char *ref)
{
	struct dsec_err err;
	char id[80];
	json_t *rec = NULL;

	if (dsec_image_name_ok(ref))
		rec = dsec_store_image_json(p, ref, NULL);
	if (!rec) {
		if (dsec_store_find_ref(p, ref, id, &err) < 0 ||
		    !(rec = dsec_store_layer_meta(p, id, &err))) {
			fail("ref", ref, &err);
			return;
		}
		if (dsec_store_layer_in_use(p, id, id, sizeof(id), &err) == 1)
			json_object_set_new(rec, "in_use", json_string(id));
	}
	json_object_set_new(rec, "node", json_string(dsec_node()));
	emit(rec, NULL, &err);
	json_decref(rec);
}

static void cmd_rm(const struct dsec_paths *p, const char *ref, int force)
{
	struct dsec_err err;
	json_t *rec;

	if (dsec_store_rm(p, ref, force, &rec, &err) < 0) {
		fail("ref", ref, &err);
		return;
	}
	emit(rec, NULL, &err);
	json_decref(rec);
}

static void cmd_export(const struct dsec_paths *p, const char *ref)
{
	struct dsec_err err;
	char id[80];

	if (isatty(STDOUT_FILENO))
		dsec_usage_error("export: standard output is a terminal");
	if (dsec_store_find_layer(p, ref, id, &err) < 0 ||
	    dsec_layer_export(p, id, STDOUT_FILENO, &err) < 0) {
		/* stdout carries the archive: the error goes to stderr only */
		dsec_err_print(&err);
		failed = 1;
	}
}

int main(int argc, char **argv)
{
	struct dsec_cli cli = {.help = help};
	struct dsec_paths paths;
	struct dsec_import_opts o;
	struct dsec_err err;
	const char *verb;
	int c, force = 0;

	dsec_prog = "dsec-layer";
	dsec_stdio_reserve();
	setlocale(LC_CTYPE, "C.UTF-8");
	dsec_jsonl_init_output();
	dsec_import_opts_init(&o);
	while ((c = getopt_long(argc, argv, "hVqv", longopts, NULL)) != -1) {
		long long n;

		if (dsec_cli_common(&cli, c, optarg))
			continue;
		switch (c) {
		case OPT_KIND:
			if (strcmp(optarg, "base") && strcmp(optarg, "intermediate") &&
			    strcmp(optarg, "application"))
				dsec_usage_error(
				    "--kind '%s': not base, intermediate or application", optarg);
			o.kind = optarg;
			break;
		case OPT_NAME:
			if (!dsec_image_name_ok(optarg))
				dsec_usage_error("--name '%s': use [A-Za-z0-9][A-Za-z0-9._:@-]*, "
						 "at most %d characters",
						 optarg, DSEC_NAME_MAX);
			o.name = optarg;
			break;
		case OPT_ALLOW_SETUID:
			o.allow_setuid = 1;
			break;
		case OPT_MAX_BYTES:
			if (dsec_parse_size(optarg, UINT64_MAX / 2, &o.max_bytes, "--max-bytes",
					    &err) < 0 ||
			    o.max_bytes == 0)
				dsec_usage_error("%s", o.max_bytes ? err.msg
								   : "--max-bytes: must be > 0");
			break;
		case OPT_MAX_FILES:
			if (dsec_parse_count(optarg, 1, 1LL << 40, &n, "--max-files", &err) < 0)
				dsec_usage_error("%s", err.msg);
			o.max_files = (uint64_t)n;
			break;
		case OPT_FORMAT:
			if (!strcmp(optarg, "dir"))
				o.format_dir = 1;
			else if (strcmp(optarg, "erofs"))
				dsec_usage_error("--format '%s': not erofs or dir", optarg);
			break;
		case OPT_FORCE:
			force = 1;
			break;
		default:
			dsec_usage_error("unknown option");
		}
	}
	if (optind >= argc)
		dsec_usage_error(
		    "no command (import, compose, commit, ls, inspect, rm, gc, export)");
	verb = argv[optind++];
	argc -= optind;
	argv += optind;
	dsec_cli_paths(&cli, &paths);

	if (!strcmp(verb, "import")) {
		cmd_import(&paths, &o, argc, argv);
	} else if (!strcmp(verb, "commit")) {
		cmd_commit(&paths, o.name, argc, argv);
	} else if (!strcmp(verb, "compose")) {
		cmd_compose(&paths, o.name, argc, argv);
	} else if (!strcmp(verb, "ls")) {
		if (argc)
			dsec_usage_error("ls takes no arguments");
		if (dsec_store_list(&paths, emit_plain, NULL, &err) < 0)
			dsec_fatal(&err);
	} else if (!strcmp(verb, "inspect") || !strcmp(verb, "rm")) {
		if (!argc)
			dsec_usage_error("%s needs a LAYER or IMAGE", verb);
		for (int i = 0; i < argc; i++)
			if (verb[0] == 'i')
				cmd_inspect(&paths, argv[i]);
			else
				cmd_rm(&paths, argv[i], force);
	} else if (!strcmp(verb, "gc")) {
		if (argc)
			dsec_usage_error("gc takes no arguments");
		if (dsec_store_gc(&paths, emit_plain, NULL, &err) < 0)
			fail(NULL, NULL, &err);
	} else if (!strcmp(verb, "export")) {
		if (argc != 1)
			dsec_usage_error("export takes one LAYER");
		cmd_export(&paths, argv[0]);
	} else {
		dsec_usage_error("'%s': unknown command", verb);
	}
	return dsec_cli_exit(failed ? DSEC_EXIT_FAILED : DSEC_EXIT_OK);
}
