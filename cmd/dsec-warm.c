/* dsec-warm: top a pool of ready sandboxes up to N, print a record per sandbox made, exit. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "jsonl.h"
#include "admit.h"
#include "net.h"
#include "pool.h"
#include "resource.h"
#include "sandbox.h"
#include "state.h"
#include "store.h"

static const char usage[] =
    "Usage: dsec-warm --image IMAGE --count N [OPTION]...\n"
    "   or: dsec-warm --image IMAGE --drain [OPTION]...\n"
    "   or: dsec-warm --list\n"
    "Top the warm pool of IMAGE and a resource profile up to N ready sandboxes, print one\n"
    "record per sandbox made, and exit. Safe to run from cron: a run that finds the pool full\n"
    "makes nothing, and a second run on the same pool exits at once (or waits, --wait).\n"
    "dsec-spawn claims these sandboxes when its request matches the pool's image, --net (with\n"
    "--allow and --bandwidth) and --disk; it writes --cpus, --memory and --pids that differ into "
    "the cgroup at claim time.\n"
    "\n"
    "  -i, --image IMAGE     image from the layer store (see dsec-layer)\n"
    "  -n, --count N         ready sandboxes wanted in the pool (0 to 100000)\n"
    "      --cpus F          CPU bandwidth of the profile in CPUs (default 1)\n"
    "      --memory SIZE     memory limit of the profile (default 1G)\n"
    "      --pids N          task limit of the profile (default 512)\n"
    "      --disk SIZE       size of each sandbox's writable tmpfs (default 1G)\n"
    "      --net MODE        none (default), host or nat (see dsec-spawn; the network is\n"
    "                        made with the sandbox, a claim adds nothing)\n"
    "      --allow RULE      nat: the pool's allow-list (see dsec-spawn), repeatable\n"
    "      --bandwidth RATE  nat: the pool's bandwidth cap, e.g. 10mbit\n"
    "      --io-bps SIZE     block I/O limit of the profile in bytes/s\n"
    "      --io-iops N       block I/O limit of the profile in operations/s\n"
    "      --cpu-request F   CPUs guaranteed to each sandbox, counted by admission\n"
    "      --memory-request SIZE  memory protected, counted by admission\n"
    "      --pids-request N  tasks counted by admission\n"
    "      --disk-request SIZE  writable layer counted by admission\n"
    "      --io-weight N     block I/O weight of the profile, 1 to 10000\n"
    "      --class CLASS     ls (default) or be (best-effort); ready sandboxes count against\n"
    "                        the node's capacity (dsec-node(5)) with the profile's requests\n"
    "      --max-age D       reap and replace ready sandboxes older than D (e.g. 10m;\n"
    "                        0, the default: never)\n"
    "      --max-total N     never grow the run dir past N sandboxes (all pools and claimed;\n"
    "                        1 to 10000000)\n"
    "      --min-free SIZE   never grow while MemAvailable is below SIZE\n"
    "      --wait[=D]        wait for another run on this pool instead of exiting, and for\n"
    "                        room on the node when it is full (at most D, e.g. 30s)\n"
    "      --drain           reap every ready sandbox of the pool and remove the pool\n"
    "                        (after the run at work on it, if any: --wait=D bounds that)\n"
    "      --list            print a record per pool of the run dir and exit\n"
    "  -j, --jobs N          create N sandboxes at a time (1 to 256, default 4)\n"
    "      --root DIR        layer store (default $DSEC_ROOT or /var/lib/dsec)\n"
    "      --run DIR         run dir holding sandbox state (default $DSEC_RUN or /run/dsec)\n"
    "  -q, --quiet           no warnings\n"
    "  -v, --verbose         tell what the run did (pool full, busy, recycled)\n"
    "  -h, --help            show this help and exit\n"
    "  -V, --version         show the version and exit\n"
    "\n"
    "Output: {\"id\":…,\"image\":…,\"pool\":…,\"warm\":true,\"node\":…,\"limits\":{…},"
    "\"net\":…,\"warm_us\":…}\n"
    "Exit status: 0 pool topped up (or busy), 1 some sandbox failed or a capacity limit\n"
    "stopped it, 2 usage error, 3 fatal.\n";

enum {
	OPT_CPUS = DSEC_OPT_FIRST_TOOL,
	OPT_MEMORY,
	OPT_PIDS,
	OPT_DISK,
	OPT_NET,
	OPT_MAX_AGE,
	OPT_MAX_TOTAL,
	OPT_MIN_FREE,
	OPT_WAIT,
	OPT_DRAIN,
	OPT_LIST,
	OPT_RES,
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
					 {"disk", required_argument, NULL, OPT_DISK},
					 {"net", required_argument, NULL, OPT_NET},
					 {"max-age", required_argument, NULL, OPT_MAX_AGE},
					 {"max-total", required_argument, NULL, OPT_MAX_TOTAL},
					 {"min-free", required_argument, NULL, OPT_MIN_FREE},
					 {"wait", optional_argument, NULL, OPT_WAIT},
					 {"io-bps", required_argument, NULL, OPT_RES},
					 {"io-iops", required_argument, NULL, OPT_RES},
					 {"cpu-request", required_argument, NULL, OPT_RES},
					 {"memory-request", required_argument, NULL, OPT_RES},
					 {"pids-request", required_argument, NULL, OPT_RES},
					 {"disk-request", required_argument, NULL, OPT_RES},
					 {"io-weight", required_argument, NULL, OPT_RES},
					 {"class", required_argument, NULL, OPT_RES},
					 {"drain", no_argument, NULL, OPT_DRAIN},
					 {"list", no_argument, NULL, OPT_LIST},
					 {"allow", required_argument, NULL, OPT_ALLOW},
					 {"bandwidth", required_argument, NULL, OPT_BANDWIDTH},
					 {NULL, 0, NULL, 0}};

/* A worker's exit status when the free-memory floor stopped it. */
#define EXIT_LOW_MEMORY 10

static struct dsec_paths paths;
static struct dsec_pool pool;
static uint64_t min_free;
static uint64_t wait_us; /* --wait=D for room on the node (UINT64_MAX: no end) */
/* A progress line on a terminal while records go elsewhere: sandboxes made of how many */
static struct dsec_progress prog;
static long *made;
static long long total;

/* Make n ready sandboxes, emitting a record each. Returns 0, 1 (some failed), 3 (stdout gone)
 * or EXIT_LOW_MEMORY. */
static int make_n(long long n)
{
	int status = 0;

	for (long long i = 0; i < n && !dsec_stop_sig; i++) {
		struct dsec_sandbox sb;
		struct dsec_err err = {0};
		uint64_t t0 = dsec_now_us();
		json_t *rec;

		uint64_t w0 = t0;
		unsigned round = 0;
		int r;

		if (min_free && dsec_mem_available() < min_free)
			return EXIT_LOW_MEMORY;
		dsec_stop_hold(1); /* an interrupt waits for this sandbox to be made or undone */
		while ((r = dsec_pool_make(&paths, &pool, &sb, &err)) < 0 && err.errnum == ENOSPC &&
		       !dsec_stop_sig && dsec_admit_wait(w0, wait_us, &round) == 0 &&
		       !dsec_stop_sig)
			memset(&err, 0, sizeof(err));
		dsec_stop_hold(0);
		__atomic_add_fetch(made, 1, __ATOMIC_RELAXED);
		dsec_progress(&prog, "%ld of %lld sandboxes made ", *made, total);
		if (r < 0) {
			dsec_err_print(&err);
			/* the node is full, or the image went: no use trying the rest */
			if (err.errnum == ENOSPC || err.errnum == ENOENT)
				return 1;
			status = 1;
			continue;
		}
		rec = json_pack("{s:s, s:s, s:s, s:b, s:s, s:o, s:s, s:I}", "id", sb.id, "image",
				sb.image, "pool", pool.key, "warm", 1, "node", sb.node, "limits",
				dsec_pool_limits_json(&pool.limits), "net",
				dsec_net_mode_name(sb.net), "warm_us",
				(json_int_t)(dsec_now_us() - t0));
		dsec_res_record(rec, &sb);
		dsec_sandbox_free(&sb);
		if (dsec_jsonl_emit(rec, &err) < 0) {
			json_decref(rec);
			if (err.errnum != EPIPE)
				dsec_err_print(&err);
			return DSEC_EXIT_FATAL; /* the sandbox stays ready in the pool */
		}
		json_decref(rec);
	}
	return status;
}

/* Split n over jobs worker processes; the exit status is the worst of theirs. */
static int make_parallel(long long n, int jobs)
{
	int status = 0, low = 0;
	pid_t pids[256];
	int k = 0;

	if (jobs <= 1 || n <= 1)
		return make_n(n);
	if (jobs > n)
		jobs = (int)n;
	fflush(NULL);
	for (int j = 0; j < jobs; j++) {
		long long share = n / jobs + (j < n % jobs);
		/* a worker dies with dsec-warm: after a kill -9 no worker goes on filling the
		 * pool or holding its lock */
		pid_t pid = dsec_fork_worker();

		if (pid < 0) {
			dsec_errorx("%s: fork: %s", pool.key, strerror(errno));
			status = 1;
			break;
		}
		if (pid == 0) {
			int r;

			prog.on = 0; /* the parent shows the line */
			r = make_n(share);

			fflush(NULL);
			_exit(r);
		}
		pids[k++] = pid;
	}
	dsec_stop_hold(1); /* until the workers, told of an interrupt, have stopped */
	for (int j = 0; j < k; j++) {
		int ws;

		if (dsec_progress_waitpid(&prog, pids[j], &ws, made, total, "sandboxes made") < 0 ||
		    !WIFEXITED(ws) || WEXITSTATUS(ws) == DSEC_EXIT_FATAL)
			status = DSEC_EXIT_FATAL;
		else if (WEXITSTATUS(ws) == EXIT_LOW_MEMORY)
			low = 1;
		else if (WEXITSTATUS(ws) && status == 0)
			status = 1;
	}
	dsec_stop_hold(0);
	return low && status != DSEC_EXIT_FATAL ? EXIT_LOW_MEMORY : status;
}

static int drain(void)
{
	struct dsec_pool_entry *e;
	struct dsec_err err = {0};
	size_t n;
	int status = 0;

	if (dsec_pool_ready(&pool, &e, &n, 0, &err) < 0)
		dsec_fatal(&err);
	for (size_t i = 0; i < n; i++) {
		int r = dsec_pool_retire(&paths, &pool, e[i].id, &err);

		if (r < 0) {
			dsec_err_print(&err);
			status = 1;
		} else if (r > 0) {
			json_t *rec = json_pack("{s:s, s:s, s:s, s:b}", "id", e[i].id, "image",
						pool.image, "pool", pool.key, "reaped", 1);

			if (status != DSEC_EXIT_FATAL && dsec_jsonl_emit(rec, &err) < 0) {
				if (err.errnum != EPIPE)
					dsec_err_print(&err); /* once; the drain goes on */
				status = DSEC_EXIT_FATAL;
			}
			json_decref(rec);
		}
	}
	free(e);
	return status;
}

/* Recycle ready sandboxes older than max_age; returns how many are left ready. */
static long long recycle(uint64_t max_age)
{
	struct dsec_pool_entry *e;
	struct dsec_err err = {0};
	uint64_t now = dsec_wall_us();
	size_t n;
	long long left = 0, old = 0;

	if (dsec_pool_ready(&pool, &e, &n, max_age > 0, &err) < 0)
		dsec_fatal(&err);
	for (size_t i = 0; i < n; i++) {
		if (max_age && e[i].created_us + max_age <= now &&
		    dsec_pool_retire(&paths, &pool, e[i].id, &err) != 0) {
			old++;
			continue;
		}
		left++;
	}
	free(e);
	if (old)
		dsec_infox("%s: recycled %lld ready sandboxes older than --max-age", pool.key, old);
	return left;
}

/* An image that is not in the store fails the run before a pool entry is made for it: one
 * line and one error record, not one per sandbox wanted. */
static int image_missing(const char *image)
{
	struct dsec_image *img = malloc(sizeof(*img));
	struct dsec_err err = {0};
	json_t *rec;
	int r;

	if (!img)
		return 0; /* dsec_pool_make says it again */
	r = dsec_image_resolve(&paths, image, img, &err);
	free(img);
	if (r == 0 || err.errnum != ENOENT)
		return 0;
	dsec_err_print(&err);
	rec = dsec_jsonl_error_record(&err, "dsec-warm");
	json_object_set_new(rec, "image", json_string(image));
	json_object_set_new(rec, "pool", json_string(pool.key));
	dsec_jsonl_emit(rec, NULL);
	json_decref(rec);
	return 1;
}

static int list_one(const struct dsec_pool *p, void *ctx)
{
	struct dsec_err err;
	json_t *rec = dsec_pool_record(p);
	int r = dsec_jsonl_emit(rec, &err);

	json_decref(rec);
	return r;
}

int main(int argc, char **argv)
{
	struct dsec_cli cli = {.help = usage};
	struct dsec_err err = {0};
	struct dsec_limits lim = {.cpus = DSEC_DEFAULT_CPUS,
				  .memory = DSEC_DEFAULT_MEMORY,
				  .pids = DSEC_DEFAULT_PIDS,
				  .disk = DSEC_DEFAULT_DISK};
	enum dsec_net net = DSEC_NET_NONE;
	static struct dsec_net_policy netpol;
	const char *image = NULL, *min_free_s = NULL;
	long long count = -1, jobs = 4, max_total = 0, ready, need, allowed, live;
	uint64_t max_age = 0;
	int c, li, wait = 0, drain_opt = 0, list = 0, runlock, plock, status;
	const struct option *o;
	struct dsec_res res = {0};
	unsigned res_set = 0;

	dsec_prog = "dsec-warm";
	dsec_stdio_reserve();
	while ((c = getopt_long(argc, argv, "hVqvi:n:j:", longopts, &li)) != -1) {
		if (dsec_cli_common(&cli, c, optarg))
			continue;
		switch (c) {
		case 'i':
			if (!dsec_image_name_ok(optarg))
				dsec_usage_error("--image '%s': not an image name", optarg);
			image = optarg;
			break;
		case 'n':
			if (dsec_parse_count(optarg, 0, 100000, &count, "--count", &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case 'j':
			if (dsec_parse_count(optarg, 1, 256, &jobs, "--jobs", &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_CPUS:
		case OPT_MEMORY:
		case OPT_PIDS:
		case OPT_DISK:
		case OPT_NET:
			for (o = longopts; o->name && o->val != c; o++)
				;
			if (dsec_limit_parse(o->name, optarg, 1, &lim, &net, &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_MAX_AGE:
			if (dsec_parse_duration(optarg, 3650ULL * 86400 * 1000000, &max_age,
						"--max-age", &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_MAX_TOTAL:
			if (dsec_parse_count(optarg, 1, 10000000, &max_total, "--max-total", &err) <
			    0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_MIN_FREE:
			if (dsec_parse_size(optarg, 1ULL << 50, &min_free, "--min-free", &err) < 0)
				dsec_usage_error("%s", err.msg);
			min_free_s = optarg;
			break;
		case OPT_WAIT:
			wait = 1;
			wait_us = UINT64_MAX;
			if (optarg && dsec_parse_duration(optarg, 3650ULL * 86400 * 1000000,
							  &wait_us, "--wait", &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_RES:
			res.lim = lim;
			if (dsec_res_parse(longopts[li].name, optarg, 1, &res, &res_set, &err) < 0)
				dsec_usage_error("%s", err.msg);
			lim = res.lim;
			break;
		case OPT_DRAIN:
			drain_opt = 1;
			break;
		case OPT_LIST:
			list = 1;
			break;
		case OPT_ALLOW:
			if (dsec_net_allow_parse(optarg, &netpol, &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_BANDWIDTH:
			if (dsec_net_rate_parse(optarg, &netpol.rate, &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		default:
			dsec_usage_error("unknown option");
		}
	}
	if (optind < argc)
		dsec_usage_error("unexpected argument '%s'", argv[optind]);
	dsec_cli_paths(&cli, &paths);
	dsec_jsonl_init_output();
	dsec_stop_on_signals();
	if (list) {
		if (image || drain_opt || count >= 0)
			dsec_usage_error("--list takes no pool");
		if (dsec_pool_foreach(&paths, list_one, NULL, &err) < 0)
			dsec_fatal(&err);
		return dsec_cli_exit(DSEC_EXIT_OK);
	}
	if (!image)
		dsec_usage_error("no --image");
	if (drain_opt == (count >= 0))
		dsec_usage_error("give one of --count and --drain");

	if ((netpol.n || netpol.rate) && net != DSEC_NET_NAT)
		dsec_usage_error("--allow and --bandwidth need --net nat");
	if (net == DSEC_NET_NAT) {
		char canon[DSEC_NETPOL_MAX];

		if (dsec_net_policy_canon(&netpol, canon, sizeof(canon)) >= (int)sizeof(canon))
			dsec_usage_error("--allow: the allow-list is too long for a pool");
		dsec_pool_init_nat(&pool, &paths, image, &lim, canon);
	} else {
		dsec_pool_init(&pool, &paths, image, &lim, net);
	}
	pool.req = res.req;
	pool.cls = res.cls;
	dsec_pool_rekey(&pool, &paths);
	{
		struct dsec_sandbox chk = {.limits = lim, .req = res.req};

		if (dsec_res_check(&chk, &err) < 0)
			dsec_usage_error("%s", err.msg);
	}
	/* shared, as dsec-spawn: the template namespace stays while we create */
	runlock = dsec_run_lock(&paths, 0, &err);
	if (runlock < 0)
		dsec_fatal(&err);
	if (!drain_opt && image_missing(image)) {
		close(runlock);
		return dsec_cli_exit(DSEC_EXIT_FAILED);
	}
	if (dsec_pool_save(&pool, &err) < 0)
		dsec_fatal(&err);
	/* a drain waits for a run at work on the pool (it would leave it full otherwise), for
	 * good unless --wait=D says how long */
	plock = dsec_pool_lock(&pool, wait ? wait_us : drain_opt ? UINT64_MAX : 0, &err);
	if (plock < 0 && err.errnum == EWOULDBLOCK && drain_opt) {
		dsec_err_print(&err); /* --wait=D ran out: the pool stays */
		return dsec_cli_exit(DSEC_EXIT_FAILED);
	}
	if (plock < 0) {
		if (err.errnum == EWOULDBLOCK) {
			if (wait)
				dsec_warnx("%s: gave up waiting", err.msg);
			else
				dsec_infox("%s: another dsec-warm is at work on this pool",
					   pool.key);
			return dsec_cli_exit(DSEC_EXIT_OK);
		}
		dsec_fatal(&err);
	}
	if (drain_opt) {
		status = drain();
		close(plock);
		if (dsec_pool_remove_if_empty(&pool, &err) < 0) {
			dsec_err_print(&err);
			status = status ? status : 1;
		}
		close(runlock);
		return dsec_cli_exit(status);
	}

	if (dsec_pool_prune(&paths, &pool, &err) < 0)
		dsec_fatal(&err);
	ready = recycle(max_age);
	need = count - ready;
	if (need <= 0) {
		dsec_infox("%s: %lld ready, nothing to make", pool.key, ready);
		close(plock);
		close(runlock);
		return dsec_cli_exit(DSEC_EXIT_OK);
	}
	allowed = need;
	live = 0;
	if (max_total) {
		live = dsec_pool_live(&paths, &err);
		if (live < 0)
			dsec_fatal(&err);
		allowed = max_total > live ? max_total - live : 0;
		if (allowed > need)
			allowed = need;
	}
	/* records on a terminal are progress enough */
	dsec_progress_start(&prog, !isatty(STDOUT_FILENO));
	made = dsec_progress_counter(&prog);
	total = allowed;
	status = allowed ? make_parallel(allowed, (int)jobs) : 0;
	dsec_progress_end(&prog);
	if (status == EXIT_LOW_MEMORY) {
		dsec_errorx("%s: MemAvailable %llu MiB is below --min-free %s: not growing the "
			    "pool",
			    pool.key, (unsigned long long)(dsec_mem_available() >> 20), min_free_s);
		status = DSEC_EXIT_FAILED;
	} else if (allowed < need && status != DSEC_EXIT_FATAL) {
		dsec_errorx("%s: --max-total %lld reached (%lld sandboxes live): made %lld of the "
			    "%lld wanted",
			    pool.key, max_total, live, allowed, need);
		status = DSEC_EXIT_FAILED;
	} else {
		dsec_infox("%s: made %lld, %lld ready", pool.key, allowed, ready + allowed);
	}
	close(plock);
	/* a run that made nothing leaves no empty pool entry behind (dsec-ps would list it) */
	dsec_pool_remove_if_empty(&pool, NULL);
	close(runlock);
	return dsec_cli_exit(status);
}
