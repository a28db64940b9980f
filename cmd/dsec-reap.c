/* dsec-reap: tear sandboxes down, by id, from records, all, expired, idle, or orphaned; or
 * pause, resume or reset them. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "cli.h"
#include "jsonl.h"
#include "net.h"
#include "pool.h"
#include "sandbox.h"
#include "state.h"

static const char usage[] =
    "Usage: dsec-reap [OPTION]... ID...\n"
    "   or: ... | dsec-reap [OPTION]...\n"
    "   or: dsec-reap --all | --expired | --idle D | --orphans\n"
    "   or: dsec-reap --pause | --resume | --reset [ID]...\n"
    "Kill every process of each sandbox, remove its cgroup and state (its rootfs goes with its\n"
    "last process), and print its record with \"reaped\":true. Records on standard input pass\n"
    "through with every member kept; a record carrying an \"error\" still has the sandbox it\n"
    "names reaped. Up to 64 go at once; records come out in input order.\n"
    "\n"
    "  -a, --all             reap every sandbox of the run dir, then its template namespace\n"
    "      --expired         reap the sandboxes whose TTL has run out\n"
    "      --idle D          reap the sandboxes idle for D (e.g. 30m): nothing running in them\n"
    "                        but their holder, no command started or ended since, not paused,\n"
    "                        not a warm pool's ready ones (\"idle\":seconds in the record);\n"
    "                        with --expired, both kinds\n"
    "      --orphans         clean up after crashed tools: state without a live holder, cgroups\n"
    "                        without state, sandboxes whose creator died before handing them out,\n"
    "                        and the nat network (addresses, rules) of sandboxes gone\n"
    "      --pause           freeze every process of the given sandboxes instead "
    "(\"paused\":true)\n"
    "      --resume          thaw them again (\"paused\":false); dsec-exec resumes by itself\n"
    "      --reset           reset them to their image's state instead: every process killed,\n"
    "                        every write discarded, same id, limits and labels (\"reset\":true);\n"
    "                        a ready sandbox of a warm pool of the same profile takes its place\n"
    "                        when there is one (\"reset_warm\":true)\n"
    "      --root DIR        layer store (default $DSEC_ROOT or /var/lib/dsec)\n"
    "      --run DIR         run dir holding sandbox state (default $DSEC_RUN or /run/dsec)\n"
    "  -q, --quiet           no warnings\n"
    "  -v, --verbose         more diagnostics\n"
    "  -h, --help            show this help and exit\n"
    "  -V, --version         show the version and exit\n"
    "\n"
    "Output: the input record (or {\"id\":…}) with \"reaped\":true (or \"paused\", \"reset\").\n"
    "Exit status: 0 all reaped, 1 some failed (unknown id), 2 usage error, 3 fatal.\n";

enum { OPT_EXPIRED = DSEC_OPT_FIRST_TOOL, OPT_IDLE, OPT_ORPHANS, OPT_PAUSE, OPT_RESUME, OPT_RESET };

static const struct option longopts[] = {DSEC_COMMON_LONGOPTS,
					 {"all", no_argument, NULL, 'a'},
					 {"expired", no_argument, NULL, OPT_EXPIRED},
					 {"idle", required_argument, NULL, OPT_IDLE},
					 {"orphans", no_argument, NULL, OPT_ORPHANS},
					 {"pause", no_argument, NULL, OPT_PAUSE},
					 {"resume", no_argument, NULL, OPT_RESUME},
					 {"reset", no_argument, NULL, OPT_RESET},
					 {NULL, 0, NULL, 0}};

static struct dsec_paths paths;
static int failed, out_gone;
/* --all, --expired, --idle: a progress line on a terminal while the records go elsewhere */
static struct dsec_progress prog;
static long nreaped;
/* What is done to each sandbox named: reaped (0), or one of these. */
static enum { ACT_REAP, ACT_PAUSE, ACT_RESUME, ACT_RESET } action;

/* Records waiting to be printed, in input order: one whose sandbox is still going holds back
 * those after it (the teardowns overlap, the output keeps its order). */
static struct {
	json_t **rec; /* NULL: its sandbox is still going */
	size_t head, n, cap;
} outq;

/* Print what is ready at the head of the queue. */
static void outq_flush(void)
{
	while (outq.head < outq.n && outq.rec[outq.head]) {
		dsec_jsonl_put(outq.rec[outq.head], &out_gone);
		outq.rec[outq.head++] = NULL;
	}
	if (outq.head == outq.n)
		outq.head = outq.n = 0;
}

/* A place in the queue for a record to come; its index, or -1 (out of memory: print now). */
static long outq_reserve(void)
{
	if (outq.n == outq.cap) {
		size_t cap = outq.cap ? 2 * outq.cap : 256;
		json_t **n = realloc(outq.rec, cap * sizeof(*n));

		if (!n)
			return -1;
		outq.rec = n;
		outq.cap = cap;
	}
	outq.rec[outq.n] = NULL;
	return (long)outq.n++;
}

/* Emit rec (consumed) into place slot (-1: next in line). Remembers a gone reader: the rest is
 * still reaped, silently. */
static void emit_at(long slot, json_t *rec)
{
	if (slot < 0 && outq.head == outq.n) {
		dsec_jsonl_put(rec, &out_gone);
		return;
	}
	if (slot < 0 && (slot = outq_reserve()) < 0) {
		dsec_jsonl_put(rec, &out_gone);
		return;
	}
	outq.rec[slot] = rec;
	outq_flush();
}

static void emit(json_t *rec)
{
	emit_at(-1, rec);
}

/* Sandboxes being reaped: their holders were sent SIGKILL and we wait for their pidfds, many
 * at once, since a sandbox takes milliseconds of the kernel's waiting (namespaces, mounts,
 * RCU) to go but little CPU. Their records come out as each is gone. */
#define FLY_MAX 64
struct fly {
	struct dsec_sandbox sb;
	json_t *rec;
	int fd;
	long slot; /* its place in outq, -1: none */
};
static struct fly fly[FLY_MAX];
static size_t nfly;

/* Finish reaping fly[i] (its processes are gone, or we gave up waiting) and emit its record,
 * if it has one. */
static void reap_finish(size_t i)
{
	struct dsec_err err = {0};
	struct fly *f = &fly[i];
	int rc;

	if (f->fd >= 0)
		close(f->fd);
	rc = dsec_sandbox_destroy_rest(&paths, &f->sb, &err);
	if (rc < 0) {
		dsec_err_print(&err);
		failed = 1;
	}
	dsec_sandbox_free(&f->sb);
	if (f->rec) {
		if (rc < 0)
			f->rec = dsec_jsonl_set_error(f->rec, &err, "dsec-reap");
		else
			json_object_set_new(f->rec, "reaped", json_true());
		if (f->slot >= 0)
			emit_at(f->slot, f->rec);
		else
			dsec_jsonl_put(f->rec, &out_gone);
		dsec_progress(&prog, "%ld sandboxes reaped ", ++nreaped);
	}
	fly[i] = fly[--nfly];
}

/* Wait for sandboxes in flight to go and finish those gone: with block, until at least one
 * is (10 s at most, then all are finished as they are), or until fd (>= 0) is readable. */
static void reap_wait(int block, int fd)
{
	struct pollfd pfd[FLY_MAX + 1];
	size_t n = 0;
	int r;

	for (size_t i = 0; i < nfly; i++)
		pfd[n++] = (struct pollfd){.fd = fly[i].fd, .events = POLLIN};
	if (fd >= 0)
		pfd[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
	do
		r = poll(pfd, n, block ? 10000 : 0);
	while (r < 0 && errno == EINTR);
	/* from the end: reap_finish moves the last one into the slot it frees */
	for (size_t i = nfly; i-- > 0;)
		if (pfd[i].revents || (block && r == 0))
			reap_finish(i);
}

/* Start reaping sb (consumed) for record rec (consumed; NULL: no record of its own, as for the
 * sandbox a reset replaced, whose errors are only told). */
static void reap_start(struct dsec_sandbox *sb, json_t *rec)
{
	while (nfly == FLY_MAX)
		reap_wait(1, -1);
	fly[nfly] = (struct fly){
	    .sb = *sb, .rec = rec, .fd = dsec_sandbox_kill(sb), .slot = rec ? outq_reserve() : -1};
	if (fly[nfly++].fd < 0)
		reap_finish(nfly - 1);
	else
		reap_wait(0, -1);
}

static void reap_drain(void)
{
	while (nfly)
		reap_wait(1, -1);
	free(outq.rec);
	memset(&outq, 0, sizeof(outq));
}

/* Reap sandbox id and put the outcome into rec (consumed, emitted). */
static void reap_id(const char *id, json_t *rec)
{
	struct dsec_sandbox sb, old = {0};
	struct dsec_err err = {0};
	int warm = 0;

	uint64_t t0 = dsec_now_us();
	int rc = dsec_sandbox_load(&paths, id, &sb, &err);

	if (rc == 0 && action == ACT_REAP) {
		reap_start(&sb, rec);
		return;
	}
	if (rc == 0 && !dsec_sandbox_alive(&sb))
		rc = dsec_err_set(&err, ESRCH, "%s: sandbox is not running (holder gone)", id);
	if (rc == 0 && (action == ACT_PAUSE || action == ACT_RESUME)) {
		rc = dsec_cgroup_freeze(&sb, action == ACT_PAUSE, &err);
		if (rc == 0)
			dsec_cgroup_pause_drop(&sb); /* theirs now, not a killed commit's to undo */
	} else if (rc == 0 && action == ACT_RESET)
		rc = warm = dsec_sandbox_reset(&paths, &sb, &old, &err);
	if (rc < 0) {
		dsec_err_print(&err);
		failed = 1;
		dsec_sandbox_free(&sb);
		emit(dsec_jsonl_set_error(rec, &err, "dsec-reap"));
		return;
	}
	if (action == ACT_RESET) {
		json_object_set_new(rec, "reset", json_true());
		json_object_set_new(rec, "reset_us",
				    json_integer((json_int_t)(dsec_now_us() - t0)));
		json_object_set_new(rec, "reset_warm", json_boolean(warm == 1));
		json_object_set_new(rec, "pid", json_integer(sb.holder_pid));
	} else {
		json_object_set_new(rec, "paused", json_boolean(action == ACT_PAUSE));
	}
	dsec_sandbox_free(&sb);
	emit(rec);
	/* a reset: the replaced sandbox goes once the record is out, with the reaps in flight */
	if (old.id[0])
		reap_start(&old, NULL);
}

/* Which sandboxes --all, --expired and --idle take. */
struct pick {
	int expired; /* those whose TTL ran out */
	int idle;    /* those idle for idle_us or longer */
	uint64_t idle_us;
	struct dsec_pool_readyset ready; /* the warm pools' ready sandboxes: never idle */
};

static int reap_all_fn(const char *id, void *ctx)
{
	struct pick *k = ctx;
	json_t *rec;

	if (k->expired || k->idle) {
		struct dsec_sandbox sb;
		struct dsec_err err;
		uint64_t now = dsec_wall_us(), idle_us = 0;
		int expired, idle = 0;

		if (dsec_sandbox_load(&paths, id, &sb, &err) < 0)
			return 0; /* half-made or being made: --orphans' business */
		expired = k->expired && sb.ttl_us && sb.created_us + sb.ttl_us <= now;
		/* a ready pool sandbox is the pool's (dsec-warm --max-age); one being made or
		 * claimed is not handed out yet; one replaced by a reset is on its way out */
		if (!expired && k->idle && strcmp(sb.id, id) == 0 &&
		    !dsec_pool_readyset_find(&k->ready, id) && !dsec_sandbox_pending(&paths, id))
			idle = dsec_sandbox_idle(&sb, now, &idle_us) == 1 && idle_us >= k->idle_us;
		dsec_sandbox_free(&sb);
		if (!expired && !idle)
			return 0;
		rec = json_pack("{s:s}", "id", id);
		if (idle)
			json_object_set_new(rec, "idle",
					    json_integer((json_int_t)(idle_us / 1000000)));
		reap_id(id, rec);
		return 0;
	}
	reap_id(id, json_pack("{s:s}", "id", id));
	return 0;
}

static int orphan_fn(const char *id, void *ctx)
{
	emit(json_pack("{s:s, s:b, s:b}", "id", id, "reaped", 1, "orphan", 1));
	return 0;
}

static void reap_records(void)
{
	struct dsec_jsonl_reader rd;
	struct dsec_err err;
	json_t *rec;
	int r;

	dsec_jsonl_reader_init(&rd, stdin, "<stdin>", 0);
	for (;;) {
		/* while the next record is not there yet, the sandboxes in flight finish */
		while (nfly && !dsec_jsonl_buffered(&rd)) {
			struct pollfd in = {.fd = fileno(stdin), .events = POLLIN};

			if (poll(&in, 1, 0) > 0)
				break;
			reap_wait(1, fileno(stdin));
		}
		if ((r = dsec_jsonl_next(&rd, &rec, &err)) == 0)
			break;
		json_t *id;

		if (r < 0) {
			dsec_err_print(&err);
			failed = 1;
			emit(dsec_jsonl_error_record(&err, "dsec-reap"));
			continue;
		}
		id = json_object_get(rec, "id");
		if (json_is_string(id)) {
			reap_id(json_string_value(id), rec);
		} else if (json_object_get(rec, "error")) {
			emit(rec); /* failed upstream before it had a sandbox */
		} else {
			dsec_err_set(&err, EINVAL, "<stdin>:%lu: record without an \"id\"",
				     rd.line);
			dsec_err_print(&err);
			failed = 1;
			emit(dsec_jsonl_set_error(rec, &err, "dsec-reap"));
		}
	}
	dsec_jsonl_reader_free(&rd);
}

int main(int argc, char **argv)
{
	struct dsec_cli cli = {.help = usage};
	struct dsec_err err = {0};
	struct pick pick = {0};
	int c, all = 0, expired = 0, orphans = 0, lock;

	dsec_prog = "dsec-reap";
	dsec_stdio_reserve();
	while ((c = getopt_long(argc, argv, "hVqva", longopts, NULL)) != -1) {
		if (dsec_cli_common(&cli, c, optarg))
			continue;
		switch (c) {
		case 'a':
			all = 1;
			break;
		case OPT_EXPIRED:
			expired = 1;
			break;
		case OPT_IDLE:
			if (dsec_parse_duration(optarg, 3650ULL * 86400 * 1000000, &pick.idle_us,
						"--idle", &err) < 0)
				dsec_usage_error("%s", err.msg);
			pick.idle = 1;
			break;
		case OPT_ORPHANS:
			orphans = 1;
			break;
		case OPT_PAUSE:
		case OPT_RESUME:
		case OPT_RESET:
			if (action)
				dsec_usage_error(
				    "--pause, --resume and --reset exclude each other");
			action = c == OPT_PAUSE    ? ACT_PAUSE
				 : c == OPT_RESUME ? ACT_RESUME
						   : ACT_RESET;
			break;
		default:
			dsec_usage_error("unknown option");
		}
	}
	/* --expired and --idle together take both kinds */
	if (all + (expired || pick.idle) + orphans > 1)
		dsec_usage_error("--all, --expired or --idle, and --orphans exclude each other");
	if (action && all + expired + pick.idle + orphans)
		dsec_usage_error("--pause, --resume and --reset take ids or records, not --all, "
				 "--expired, --idle or --orphans");
	if (all + expired + pick.idle + orphans && optind < argc)
		dsec_usage_error("ids given with --all, --expired, --idle or --orphans");
	if (!(all + expired + pick.idle + orphans) && optind == argc && isatty(STDIN_FILENO))
		dsec_usage_error("no sandbox ids and no records on standard input");
	dsec_cli_paths(&cli, &paths);
	dsec_jsonl_init_output();

	if (orphans) {
		/* exclusive: no dsec-spawn is half-way through a sandbox while we look */
		lock = dsec_run_lock(&paths, 1, &err);
		if (lock < 0)
			dsec_fatal(&err);
		if (dsec_sandbox_orphans(&paths, orphan_fn, NULL, &err) < 0) {
			dsec_err_print(&err);
			failed = 1;
		}
		/* --net nat: rules, veth and lease of sandboxes whose state is gone */
		if (dsec_net_orphans(&paths, &err) < 0) {
			dsec_err_print(&err);
			failed = 1;
		}
		/* warm pools: drop ready entries whose sandbox is gone */
		if (dsec_pool_cleanup(&paths, &err) < 0) {
			dsec_err_print(&err);
			failed = 1;
		}
		if (dsec_run_cleanup(&paths, &err) < 0) {
			dsec_err_print(&err);
			failed = 1;
		}
		close(lock);
		return dsec_cli_exit(failed ? DSEC_EXIT_FAILED : DSEC_EXIT_OK);
	}
	/* no run dir: nothing to reap, and nothing to create (it would be left behind) */
	if ((all || expired || pick.idle) && access(paths.run, F_OK) < 0 && errno == ENOENT)
		return dsec_cli_exit(DSEC_EXIT_OK);
	lock = dsec_run_lock(&paths, 0, &err);
	if (lock < 0)
		dsec_fatal(&err);
	if (all || expired || pick.idle) {
		dsec_progress_start(&prog, !isatty(STDOUT_FILENO));
		pick.expired = expired;
		if (pick.idle && dsec_pool_readyset(&paths, &pick.ready, &err) < 0)
			dsec_fatal(&err);
		if (dsec_sandbox_foreach(&paths, reap_all_fn, &pick, &err) < 0)
			dsec_fatal(&err);
		dsec_pool_readyset_free(&pick.ready);
		reap_drain();
		dsec_progress_end(&prog);
		/* --all took the warm pools' sandboxes too: remove the pools */
		if (all && dsec_pool_cleanup(&paths, &err) < 0) {
			dsec_err_print(&err);
			failed = 1;
		}
	} else if (optind < argc) {
		for (int i = optind; i < argc; i++)
			reap_id(argv[i], json_pack("{s:s}", "id", argv[i]));
	} else {
		reap_records();
	}
	reap_drain();
	close(lock);
	if (all) {
		/* the last one out tears the template down, unless a dsec-spawn is at work */
		char path[PATH_MAX + 8];

		snprintf(path, sizeof(path), "%s/lock", paths.run);
		lock = dsec_lock(path, 1, 0, &err);
		if (lock >= 0) {
			if (dsec_sandbox_orphans(&paths, orphan_fn, NULL, &err) < 0 ||
			    dsec_net_orphans(&paths, &err) < 0 ||
			    dsec_run_cleanup(&paths, &err) < 0) {
				dsec_err_print(&err);
				failed = 1;
			}
			close(lock);
		}
	}
	return dsec_cli_exit(failed ? DSEC_EXIT_FAILED : out_gone ? DSEC_EXIT_FATAL : DSEC_EXIT_OK);
}
