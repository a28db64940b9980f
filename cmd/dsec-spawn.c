/* dsec-spawn: create sandboxes and print one record per sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "jsonl.h"
#include "spawner.h"

static const char usage[] =
    "Usage: dsec-spawn --image IMAGE [-n N] [OPTION]...\n"
    "   or: dsec-spawn --from ID [-n N] [OPTION]...\n"
    "   or: ... | dsec-spawn [-n N] [OPTION]...\n"
    "   or: dsec-spawn --resize [ID]... [RESOURCE OPTION]...\n"
    "Create sandboxes from IMAGE and print one JSON record per sandbox. Without --image, read\n"
    "one spec record per line on standard input (keys: image, cpus, memory, pids, nofile,\n"
    "disk, net, ttl, env, hostname, workdir, run_as, labels, allow, bandwidth, and the\n"
    "resource options' names with '_': cpu_request, …, class); the options then give the\n"
    "defaults, and every other member of a record passes through to its output. With\n"
    "--resize, change the limits, requests or class of live sandboxes (the IDs, or records\n"
    "with \"id\" on standard input) to what the options and the records' resource keys say,\n"
    "without restarting them.\n"
    "\n"
    "  -i, --image IMAGE     image from the layer store (see dsec-layer)\n"
    "  -n, --count N         create N sandboxes (per input record; 1 to 1000000, default 1)\n"
    "  -j, --jobs J          create up to J of those N at a time, in worker processes\n"
    "                        (1 to 64, default 2, at most one per CPU; 1: one after the other,\n"
    "                        records in order)\n"
    "      --cpus F          CPU bandwidth in CPUs, 0.01 to 4096, e.g. 0.5 (default 1)\n"
    "      --memory SIZE     memory limit, at least 4M, e.g. 512M (default 1G)\n"
    "      --pids N          maximum number of tasks, 2 to 4194304 (default 512)\n"
    "      --nofile N        descriptors each process may open (RLIMIT_NOFILE, soft and\n"
    "                        hard), 64 to 1048576 (default 1024)\n"
    "      --disk SIZE       size of the writable layer, a tmpfs, at least 1M (default 1G;\n"
    "                        a file per 4 KiB of it)\n"
    "      --io-bps SIZE     block I/O limit in bytes/s, reads and writes each (default none)\n"
    "      --io-iops N       block I/O limit in operations/s, reads and writes each\n"
    "      --cpu-request F   CPUs guaranteed (CPU weight), counted by admission (default 0)\n"
    "      --memory-request SIZE  memory protected from reclaim, counted by admission\n"
    "      --pids-request N  tasks counted by admission\n"
    "      --disk-request SIZE  writable layer counted by admission\n"
    "      --io-weight N     block I/O weight, 1 to 10000 (where the kernel has one)\n"
    "      --class CLASS     ls (latency-sensitive, default) or be (best-effort: low CPU\n"
    "                        weight, SCHED_IDLE, reclaimed and OOM-killed first)\n"
    "      --wait[=D]        when the node is full (see dsec-node(5)), wait for room, at most\n"
    "                        D (e.g. 30s; default: no end), instead of failing\n"
    "      --resize          resize live sandboxes instead of creating them\n"
    "      --net MODE        none (own network namespace, loopback only; default), host, or\n"
    "                        nat (own veth behind the node's dsec bridge, NAT, allow-list)\n"
    "      --allow RULE      nat: let it reach ADDR[/PREFIX][:PORT] or NAME[:PORT] (names\n"
    "                        resolved at spawn; preset: pypi); repeatable; else all dropped\n"
    "      --bandwidth RATE  nat: cap each direction at RATE bits/s, e.g. 10mbit\n"
    "      --ttl DURATION    lifetime before dsec-reap --expired takes it (default 1h; 0 = none)\n"
    "      --env K=V         environment for commands run in it (repeatable)\n"
    "      --hostname H      host name inside (default: the sandbox id)\n"
    "      --workdir DIR     commands' default working directory (default: the image's, else\n"
    "                        /); dsec-exec -w overrides it\n"
    "      --user U[:G]      commands' default user (default: the image's, else root); as\n"
    "                        dsec-exec -u, which overrides it; one the sandbox lacks is an\n"
    "                        error\n"
    "      --label K=V       a label kept in its state and shown by dsec-ps (repeatable)\n"
    "      --from ID         fork: start from the current files of sandbox ID (committed as\n"
    "                        image ID by dsec-layer commit), instead of --image\n"
    "      --warm-only       only claim from a warm pool (see dsec-warm); fail when none is\n"
    "                        ready instead of creating the sandbox cold\n"
    "      --root DIR        layer store (default $DSEC_ROOT or /var/lib/dsec)\n"
    "      --run DIR         run dir holding sandbox state (default $DSEC_RUN or /run/dsec)\n"
    "  -q, --quiet           no warnings\n"
    "  -v, --verbose         more diagnostics\n"
    "  -h, --help            show this help and exit\n"
    "  -V, --version         show the version and exit\n"
    "\n"
    "Output: "
    "{\"id\":…,\"image\":…,\"node\":…,\"warm\":false,\"spawn_us\":…,\"limits\":{…},\"ttl\":…,\n"
    "\"requests\":{…},\"class\":…}; with --resize: the record with \"limits\", \"requests\",\n"
    "\"class\" as they now are and \"resize_us\"\n"
    "Exit status: 0 all created, 1 some failed, 2 usage error, 3 fatal.\n";

enum {
	OPT_CPUS = DSEC_OPT_FIRST_TOOL,
	OPT_MEMORY,
	OPT_PIDS,
	OPT_NOFILE,
	OPT_DISK,
	OPT_NET,
	OPT_TTL,
	OPT_ENV,
	OPT_HOSTNAME,
	OPT_WORKDIR,
	OPT_USER,
	OPT_LABEL,
	OPT_WARM_ONLY,
	OPT_FROM,
	OPT_RES, /* the resource options: their long names go to dsec_res_parse */
	OPT_WAIT,
	OPT_RESIZE,
	OPT_ALLOW,
	OPT_BANDWIDTH
};

static const struct option longopts[] = {DSEC_COMMON_LONGOPTS,
					 {"image", required_argument, NULL, 'i'},
					 {"count", required_argument, NULL, 'n'},
					 {"jobs", required_argument, NULL, 'j'},
					 {"cpus", required_argument, NULL, OPT_CPUS},
					 {"memory", required_argument, NULL, OPT_MEMORY},
					 {"pids", required_argument, NULL, OPT_PIDS},
					 {"nofile", required_argument, NULL, OPT_NOFILE},
					 {"disk", required_argument, NULL, OPT_DISK},
					 {"net", required_argument, NULL, OPT_NET},
					 {"ttl", required_argument, NULL, OPT_TTL},
					 {"env", required_argument, NULL, OPT_ENV},
					 {"hostname", required_argument, NULL, OPT_HOSTNAME},
					 {"workdir", required_argument, NULL, OPT_WORKDIR},
					 {"user", required_argument, NULL, OPT_USER},
					 {"label", required_argument, NULL, OPT_LABEL},
					 {"warm-only", no_argument, NULL, OPT_WARM_ONLY},
					 {"from", required_argument, NULL, OPT_FROM},
					 {"io-bps", required_argument, NULL, OPT_RES},
					 {"io-iops", required_argument, NULL, OPT_RES},
					 {"cpu-request", required_argument, NULL, OPT_RES},
					 {"memory-request", required_argument, NULL, OPT_RES},
					 {"pids-request", required_argument, NULL, OPT_RES},
					 {"disk-request", required_argument, NULL, OPT_RES},
					 {"io-weight", required_argument, NULL, OPT_RES},
					 {"class", required_argument, NULL, OPT_RES},
					 {"wait", optional_argument, NULL, OPT_WAIT},
					 {"resize", no_argument, NULL, OPT_RESIZE},
					 {"allow", required_argument, NULL, OPT_ALLOW},
					 {"bandwidth", required_argument, NULL, OPT_BANDWIDTH},
					 {NULL, 0, NULL, 0}};

/* the making of this run's sandboxes (spawner.h); --wait's limit serves --resize too */
static struct dsec_spawner sp = {.jobs = 2};

/* The long name of option code c, for messages. */
static const char *longopt_name(int c)
{
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == c)
			return o->name;
	return "?";
}

/* --resize: one sandbox, from an id or a record with "id" (borrowed); emits the record. 0, 1
 * (failed: an error record went out), -1 (stdout gone). */
static int resize_one(const struct dsec_paths *paths, const char *id, json_t *in,
		      const struct dsec_res *opt, unsigned opt_set)
{
	struct dsec_err err = {0};
	json_t *rec = in ? json_deep_copy(in) : json_pack("{s:s}", "id", id);
	int rc = dsec_res_resize_record(paths, id, rec, opt, opt_set, sp.wait_us, &err), failed;

	if ((failed = rc < 0)) {
		dsec_err_print(&err);
		dsec_jsonl_set_error(rec, &err, "dsec-spawn");
	}
	rc = dsec_jsonl_emit(rec, &err);
	json_decref(rec);
	return rc < 0 ? -1 : failed;
}

static int resize_main(struct dsec_cli *cli, const struct dsec_res *opt, unsigned set, int nids,
		       char **ids)
{
	struct dsec_paths paths;
	struct dsec_err err = {0};
	int failed = 0, r = 0;

	if (!nids && isatty(STDIN_FILENO))
		dsec_usage_error("--resize: no ID and no records on standard input");
	dsec_cli_paths(cli, &paths);
	dsec_jsonl_init_output();
	for (int i = 0; i < nids && r >= 0; i++)
		if ((r = resize_one(&paths, ids[i], NULL, opt, set)) > 0)
			failed = 1;
	if (!nids) {
		struct dsec_jsonl_reader rd;
		json_t *rec, *id;

		dsec_jsonl_reader_init(&rd, stdin, "<stdin>", 0);
		while (r >= 0 && (r = dsec_jsonl_next(&rd, &rec, &err)) != 0) {
			if (r < 0) {
				dsec_err_print(&err);
				failed = 1;
				rec = dsec_jsonl_error_record(&err, "dsec-spawn");
			} else if (!json_is_string(id = json_object_get(rec, "id")) &&
				   !json_object_get(rec, "error")) {
				dsec_err_set(&err, EINVAL, "<stdin>:%lu: record without an \"id\"",
					     rd.line);
				dsec_err_print(&err);
				failed = 1;
				dsec_jsonl_set_error(rec, &err, "dsec-spawn");
			} else if (!json_object_get(rec, "error")) {
				r = resize_one(&paths, json_string_value(id), rec, opt, set);
				failed |= r > 0;
				json_decref(rec);
				continue;
			}
			r = dsec_jsonl_emit(rec, &err);
			json_decref(rec);
		}
		dsec_jsonl_reader_free(&rd);
	}
	return dsec_cli_exit(r < 0 ? DSEC_EXIT_FATAL : failed ? DSEC_EXIT_FAILED : DSEC_EXIT_OK);
}

extern char **environ;

/* --from ID: the source's files now, as image ID on top of its own, made by `dsec-layer commit`
 * run as a child (the dsec-layer next to this binary, as installed and in the build tree): the
 * commit needs libarchive, whose libraries (libxml2, ICU, libstdc++) would add some 3 ms to
 * every start of dsec-spawn were it linked in. When the commit fails (an unknown id, say) the
 * error record its record carries is ours, and the run ends with status 1; a commit that could
 * not be run ends it with 3. */
static void commit_from(const struct dsec_paths *p, const char *id)
{
	char exe[PATH_MAX], tool[PATH_MAX + 16];
	char *argv[] = {(char *)"dsec-layer",
			(char *)"--root",
			(char *)p->root,
			(char *)"--run",
			(char *)p->run,
			(char *)"commit",
			(char *)id,
			NULL,
			NULL};
	posix_spawn_file_actions_t fa;
	struct dsec_err err = {0};
	char out[8192];
	size_t len = 0;
	ssize_t n;
	json_t *rec, *e;
	pid_t pid;
	int ws, r, pfd[2];

	if (dsec_self_dir(exe, sizeof(exe), &err) < 0)
		dsec_fatal(&err);
	snprintf(tool, sizeof(tool), "%s/dsec-layer", exe);
	if (dsec_verbose < 0)
		argv[7] = (char *)"-q";
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		dsec_err_sys(&err, "%s: --from: pipe", id);
		dsec_fatal(&err);
	}
	/* its record is read here, not printed; its diagnostics go to our stderr */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	r = posix_spawn(&pid, tool, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (r != 0) {
		dsec_errorx("%s: --from: run '%s': %s", id, tool, strerror(r));
		exit(dsec_cli_exit(DSEC_EXIT_FATAL));
	}
	while ((n = read(pfd[0], out + len, sizeof(out) - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof(out) - 1)
			len = 0; /* only the last record matters: keep reading */
	}
	out[len] = '\0';
	close(pfd[0]);
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
		return;
	rec = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
	e = json_object_get(rec, "error");
	if (!json_is_object(e)) {
		dsec_errorx("%s: --from: dsec-layer commit failed", id);
		exit(dsec_cli_exit(DSEC_EXIT_FATAL));
	}
	err.errnum = (int)json_integer_value(json_object_get(e, "errno"));
	snprintf(err.msg, sizeof(err.msg), "--from %s",
		 json_string_value(json_object_get(e, "msg")) ?: "dsec-layer commit failed");
	json_decref(rec);
	rec = dsec_jsonl_error_record(&err, "dsec-spawn");
	json_object_set_new(rec, "from", json_string(id));
	dsec_jsonl_emit(rec, NULL);
	json_decref(rec);
	exit(dsec_cli_exit(DSEC_EXIT_FAILED));
}

int main(int argc, char **argv)
{
	struct dsec_cli cli = {.help = usage};
	struct dsec_paths paths;
	struct dsec_err err = {0};
	struct dsec_spawn_spec def = {.lim = {.cpus = DSEC_DEFAULT_CPUS,
					      .memory = DSEC_DEFAULT_MEMORY,
					      .pids = DSEC_DEFAULT_PIDS,
					      .disk = DSEC_DEFAULT_DISK},
				      .ttl_us = DSEC_DEFAULT_TTL_US,
				      .net = DSEC_NET_NONE};
	static struct dsec_net_policy defpol;
	long long n = 1;
	int c, li, failed = 0, lock, resize = 0;
	const char *from = NULL;
	const char *spawn_opt = NULL; /* an option that only creating takes, for --resize */
	struct dsec_res rz = {0};     /* the resource options as given, for --resize */
	unsigned rz_set = 0;

	dsec_prog = "dsec-spawn";
	dsec_stdio_reserve();
	def.env = json_array();
	def.labels = json_object();
	def.pol = &defpol;
	while ((c = getopt_long(argc, argv, "hVqvi:n:j:", longopts, &li)) != -1) {
		char *eq;
		struct dsec_res r;

		if (dsec_cli_common(&cli, c, optarg))
			continue;
		if (c == 'i' || c == 'n' || c == 'j' || c == OPT_NET || c == OPT_TTL ||
		    c == OPT_ENV || c == OPT_HOSTNAME || c == OPT_WORKDIR || c == OPT_USER ||
		    c == OPT_LABEL || c == OPT_WARM_ONLY || c == OPT_FROM || c == OPT_ALLOW ||
		    c == OPT_BANDWIDTH || c == OPT_NOFILE)
			spawn_opt = c == 'i'   ? "image"
				    : c == 'n' ? "count"
				    : c == 'j' ? "jobs"
					       : longopt_name(c);
		switch (c) {
		case 'i':
			if (!dsec_image_name_ok(optarg))
				dsec_usage_error("--image '%s': not an image name", optarg);
			def.image = optarg;
			break;
		case 'n':
			if (dsec_parse_count(optarg, 1, 1000000, &n, "-n", &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case 'j':
			if (dsec_parse_count(optarg, 1, 64, &sp.jobs, "--jobs", &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_CPUS:
		case OPT_MEMORY:
		case OPT_PIDS:
		case OPT_DISK:
		case OPT_NET:
			if (dsec_limit_parse(longopt_name(c), optarg, 1, &def.lim, &def.net, &err) <
			    0)
				dsec_usage_error("%s", err.msg);
			if (c != OPT_NET)
				dsec_res_parse(longopt_name(c), optarg, 1, &rz, &rz_set, NULL);
			break;
		case OPT_RES:
			r = (struct dsec_res){.lim = def.lim, .req = def.req, .cls = def.cls};
			if (dsec_res_parse(longopts[li].name, optarg, 1, &r, &rz_set, &err) < 0)
				dsec_usage_error("%s", err.msg);
			dsec_res_parse(longopts[li].name, optarg, 1, &rz, &rz_set, NULL);
			def.lim = r.lim;
			def.req = r.req;
			def.cls = r.cls;
			break;
		case OPT_WAIT:
			sp.wait_us = UINT64_MAX;
			if (optarg && dsec_parse_duration(optarg, 3650ULL * 86400 * 1000000,
							  &sp.wait_us, "--wait", &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_RESIZE:
			resize = 1;
			break;
		case OPT_NOFILE:
			if (dsec_limit_parse("nofile", optarg, 1, &def.lim, NULL, &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_TTL:
			if (dsec_parse_duration(optarg, DSEC_SPAWN_MAX_TTL_US, &def.ttl_us, "--ttl",
						&err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_ENV:
			if (!dsec_kv_ok(optarg))
				dsec_usage_error("--env '%s': want K=V", optarg);
			json_array_append_new(def.env, json_string(optarg));
			break;
		case OPT_HOSTNAME:
			if (!dsec_hostname_ok(optarg))
				dsec_usage_error("--hostname '%s': not a valid host name", optarg);
			def.hostname = optarg;
			break;
		case OPT_WORKDIR:
			if (!dsec_workdir_ok(optarg))
				dsec_usage_error(
				    "--workdir '%s': want an absolute path of at most %d "
				    "bytes",
				    optarg, DSEC_WORKDIR_MAX);
			def.workdir = optarg;
			break;
		case OPT_USER:
			if (!dsec_user_spec_ok(optarg))
				dsec_usage_error("--user '%s': want USER[:GROUP] (a name or an id)",
						 optarg);
			def.user = optarg;
			break;
		case OPT_WARM_ONLY:
			sp.warm_only = 1;
			break;
		case OPT_FROM:
			if (!dsec_sandbox_id_ok(optarg))
				dsec_usage_error("--from '%s': not a sandbox id", optarg);
			from = optarg;
			break;
		case OPT_ALLOW:
			if (dsec_net_allow_parse(optarg, &defpol, &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_BANDWIDTH:
			if (dsec_net_rate_parse(optarg, &defpol.rate, &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_LABEL:
			eq = strchr(optarg, '=');
			if (!eq || eq == optarg)
				dsec_usage_error("--label '%s': want K=V", optarg);
			*eq = '\0';
			json_object_set_new(def.labels, optarg, json_string(eq + 1));
			break;
		default:
			dsec_usage_error("unknown option");
		}
	}
	if (resize && spawn_opt)
		dsec_usage_error("--resize changes resources only, not --%s", spawn_opt);
	if (resize)
		return resize_main(&cli, &rz, rz_set, argc - optind, argv + optind);
	if (optind < argc)
		dsec_usage_error("unexpected argument '%s'", argv[optind]);
	if (from && def.image)
		dsec_usage_error("--from and --image exclude each other");
	if ((defpol.n || defpol.rate) && (def.image || from) && def.net != DSEC_NET_NAT)
		dsec_usage_error("--allow and --bandwidth need --net nat");
	if (!def.image && isatty(STDIN_FILENO))
		dsec_usage_error("no --image and no spec records on standard input");
	dsec_cli_paths(&cli, &paths);
	dsec_jsonl_init_output();
	dsec_stop_on_signals();
	if (from) {
		commit_from(&paths, from);
		def.image = from;
	}
	lock = dsec_run_lock(&paths, 0, &err);
	if (lock < 0)
		dsec_fatal(&err);
	sp.paths = sp.claimer.paths = &paths;
	dsec_progress_start(&sp.prog, def.image && !isatty(STDOUT_FILENO));
	sp.made = dsec_progress_counter(&sp.prog);
	if (def.image) {
		json_t *rec = json_object();
		int r;

		sp.total = n;
		r = dsec_spawn_n(&sp, rec, &def, n, &failed);
		dsec_progress_end(&sp.prog);
		json_decref(rec);
		if (r < 0)
			return dsec_cli_exit(DSEC_EXIT_FATAL);
	} else {
		struct dsec_jsonl_reader rd;
		json_t *rec;
		int r;

		dsec_jsonl_reader_init(&rd, stdin, "<stdin>", 0);
		while ((r = dsec_jsonl_next(&rd, &rec, &err)) != 0) {
			struct dsec_spawn_spec s = def;

			if (r < 0) {
				dsec_err_print(&err);
				failed = 1;
				rec = dsec_jsonl_error_record(&err, "dsec-spawn");
			} else if (json_object_get(rec, "error")) {
				/* failed upstream: pass it on untouched */
			} else {
				s.env = json_copy(def.env);
				s.labels = json_copy(def.labels);
				if (dsec_spawn_spec_from_record(rec, &s, &err) < 0) {
					dsec_errorx("<stdin>:%lu: %s", rd.line, err.msg);
					failed = 1;
					dsec_jsonl_set_error(rec, &err, "dsec-spawn");
				} else {
					r = dsec_spawn_n(&sp, rec, &s, n, &failed);
					json_decref(s.env);
					json_decref(s.labels);
					if (s.pol != def.pol)
						free(s.pol);
					json_decref(rec);
					if (r < 0 || dsec_stop_sig)
						break;
					continue;
				}
				json_decref(s.env);
				json_decref(s.labels);
				if (s.pol != def.pol)
					free(s.pol);
			}
			r = dsec_jsonl_emit(rec, &err);
			json_decref(rec);
			if (r < 0)
				break;
		}
		if (r != 0) {
			dsec_jsonl_reader_free(&rd);
			return dsec_cli_exit(DSEC_EXIT_FATAL);
		}
		dsec_jsonl_reader_free(&rd);
	}
	dsec_claimer_free(&sp.claimer);
	close(lock);
	json_decref(def.env);
	json_decref(def.labels);
	return dsec_cli_exit(failed ? DSEC_EXIT_FAILED : DSEC_EXIT_OK);
}
