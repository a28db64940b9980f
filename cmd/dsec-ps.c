/* dsec-ps: list sandboxes and their use as records. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "admit.h"
#include "cgroup.h"
#include "cli.h"
#include "jsonl.h"
#include "pool.h"
#include "resource.h"
#include "sandbox.h"
#include "state.h"

static const char usage[] =
    "Usage: dsec-ps [OPTION]... [ID]...\n"
    "List sandboxes (all of the run dir, or the given ids) as JSON records, one per line:\n"
    "id, image, node, state (running, paused or dead), pid (of its holder), age and ttl_left\n"
    "(seconds), idle (seconds since a command last started or ended in it; null while anything\n"
    "but its holder runs in it, or paused, or dead), memory (bytes in use), cpu_us (CPU time\n"
    "used), pids (tasks), disk (bytes written to its writable layer), disk_limit, warm\n"
    "(claimed from a warm pool), pool (the pool a ready sandbox waits in), limits, requests,\n"
    "class, labels, workdir and run_as (the commands' defaults, when set), and usage (totals\n"
    "of its cgroup: cpu_us, memory, memory_peak, pids, io_read_bytes, io_write_bytes,\n"
    "net_rx_bytes, net_tx_bytes).\n"
    "\n"
    "  -t, --table           a table for people instead of records: id, image, state, pid, age,\n"
    "                        ttl left, idle, memory, cpu time, disk, net, pool (or \"warm\" when\n"
    "                        claimed from one); sizes in K, M, G, times in s, m, h, d\n"
    "      --pools           list the warm pools instead (see dsec-warm): pool, image, ready,\n"
    "                        limits, requests, class, net, oldest_age\n"
    "      --node            print one record for the node instead: per resource its\n"
    "                        capacity, overcommit ratio and the live sandboxes' requests\n"
    "                        (see dsec-node(5))\n"
    "      --root DIR        layer store (default $DSEC_ROOT or /var/lib/dsec)\n"
    "      --run DIR         run dir holding sandbox state (default $DSEC_RUN or /run/dsec)\n"
    "  -q, --quiet           no warnings\n"
    "  -v, --verbose         more diagnostics\n"
    "  -h, --help            show this help and exit\n"
    "  -V, --version         show the version and exit\n"
    "\n"
    "Exit status: 0 listed, 1 some id unknown, 2 usage error, 3 fatal.\n";

static const struct option longopts[] = {DSEC_COMMON_LONGOPTS,
					 {"pools", no_argument, NULL, DSEC_OPT_FIRST_TOOL},
					 {"node", no_argument, NULL, DSEC_OPT_FIRST_TOOL + 1},
					 {"table", no_argument, NULL, 't'},
					 {NULL, 0, NULL, 0}};

static struct dsec_paths paths;
static int failed, out_gone, table;

/* --table: a size as people read it (1023, 1.5K, 12M, 3.0G), "-" for null */
static const char *h_size(const json_t *v, char *buf, size_t n)
{
	static const char units[] = "KMGTP";
	double x;
	int u = -1;

	if (!json_is_integer(v))
		return "-";
	x = (double)json_integer_value(v);
	while (x >= 1024 && u < 4) {
		x /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, n, "%.0f", x);
	else
		snprintf(buf, n, x < 10 ? "%.1f%c" : "%.0f%c", x, units[u]);
	return buf;
}

/* --table: seconds as people read them (45s, 12m, 2.5h, 30h, 2d), "-" for null */
static const char *h_secs(const json_t *v, char *buf, size_t n)
{
	long long s;

	if (!json_is_integer(v))
		return "-";
	s = json_integer_value(v);
	if (s < 120)
		snprintf(buf, n, "%llds", s);
	else if (s < 7200)
		snprintf(buf, n, "%lldm", s / 60);
	else if (s < 36000) /* tenths, rounded down: 3h less a second is 2.9h */
		snprintf(buf, n, "%lld.%lldh", s / 3600, s % 3600 / 360);
	else if (s < 172800)
		snprintf(buf, n, "%lldh", s / 3600);
	else
		snprintf(buf, n, "%lldd", s / 86400);
	return buf;
}

#define TABLE_FMT "%-16s %-12s %-7s %7s %5s %5s %5s %6s %7s %6s %-4s %s\n"

static void table_row(const json_t *rec)
{
	char age[24], ttl[24], idle[24], mem[24], disk[24], cpu[32], pid[24];
	const json_t *p = json_object_get(rec, "pid"), *c = json_object_get(rec, "cpu_us");
	const char *pool = json_string_value(json_object_get(rec, "pool"));

	if (json_is_integer(p))
		snprintf(pid, sizeof(pid), "%lld", (long long)json_integer_value(p));
	snprintf(cpu, sizeof(cpu), "%.2fs",
		 json_is_integer(c) ? (double)json_integer_value(c) / 1e6 : 0.0);
	if (printf(TABLE_FMT, json_string_value(json_object_get(rec, "id")),
		   json_string_value(json_object_get(rec, "image")),
		   json_string_value(json_object_get(rec, "state")), json_is_integer(p) ? pid : "-",
		   h_secs(json_object_get(rec, "age"), age, sizeof(age)),
		   h_secs(json_object_get(rec, "ttl_left"), ttl, sizeof(ttl)),
		   h_secs(json_object_get(rec, "idle"), idle, sizeof(idle)),
		   h_size(json_object_get(rec, "memory"), mem, sizeof(mem)), cpu,
		   h_size(json_object_get(rec, "disk"), disk, sizeof(disk)),
		   json_string_value(json_object_get(rec, "net")),
		   pool                                         ? pool
		   : json_is_true(json_object_get(rec, "warm")) ? "warm"
								: "-") < 0 ||
	    fflush(stdout) == EOF)
		out_gone = 1;
}

static void emit(json_t *rec)
{
	if (!table) {
		dsec_jsonl_put(rec, &out_gone);
		return;
	}
	/* error records have no row: their line on stderr says it */
	if (!json_object_get(rec, "error"))
		table_row(rec);
	json_decref(rec);
}

/* Bytes used on the sandbox's writable layer. statfs of its root (the overlay reports its
 * upper layer, the tmpfs) through the holder's /proc root link: the link is the kernel's, no
 * path inside the sandbox is followed. -1 when the holder is gone. */
static long long disk_used(const struct dsec_sandbox *sb)
{
	char path[64];
	struct statfs st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/root", (int)sb->holder_pid);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* the pid may have been reused between the check and the open: check again */
	if (!dsec_sandbox_alive(sb) || fstatfs(fd, &st) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	return (long long)(st.f_blocks - st.f_bfree) * (long long)st.f_bsize;
}

/* The warm pools' ready sandboxes, read once per run. */
static struct dsec_pool_readyset ready;

static json_t *record(const struct dsec_sandbox *sb)
{
	struct dsec_cgroup_stats cs;
	uint64_t now = dsec_wall_us();
	double age =
	    sb->created_us && now > sb->created_us ? (double)(now - sb->created_us) / 1e6 : 0;
	uint64_t last = dsec_sandbox_last_active(sb);
	int alive = dsec_sandbox_alive(sb), paused = alive && dsec_cgroup_frozen(sb) == 1;
	json_t *rec = json_object(), *ttl_left = json_null();
	long long disk = alive ? disk_used(sb) : -1;
	const char *pool;

	if (sb->ttl_us) {
		double left = (double)(sb->created_us + sb->ttl_us) / 1e6 - (double)now / 1e6;

		ttl_left = json_integer(left > 0 ? (json_int_t)left : 0);
	}
	if (dsec_cgroup_stats(sb, &cs, NULL) < 0)
		memset(&cs, 0, sizeof(cs));
	json_object_set_new(rec, "id", json_string(sb->id));
	json_object_set_new(rec, "image", json_string(sb->image));
	json_object_set_new(rec, "node", json_string(sb->node));
	json_object_set_new(rec, "state",
			    json_string(!alive   ? "dead"
					: paused ? "paused"
						 : "running"));
	json_object_set_new(rec, "pid", alive ? json_integer(sb->holder_pid) : json_null());
	json_object_set_new(rec, "age", json_integer((json_int_t)age));
	json_object_set_new(rec, "ttl_left", ttl_left);
	/* as dsec_sandbox_idle tells it, from what was read above: the holder alone in it */
	json_object_set_new(
	    rec, "idle",
	    alive && !paused && cs.pids == 1
		? json_integer((json_int_t)((now > last ? now - last : 0) / 1000000))
		: json_null());
	json_object_set_new(rec, "memory", json_integer((json_int_t)cs.memory));
	json_object_set_new(rec, "cpu_us", json_integer((json_int_t)cs.cpu_us));
	json_object_set_new(rec, "pids", json_integer((json_int_t)cs.pids));
	json_object_set_new(rec, "disk", disk >= 0 ? json_integer(disk) : json_null());
	json_object_set_new(rec, "disk_limit", json_integer((json_int_t)sb->limits.disk));
	json_object_set_new(rec, "net", json_string(dsec_net_mode_name(sb->net)));
	json_object_set_new(rec, "warm", json_boolean(dsec_pool_claimed(sb)));
	if ((pool = dsec_pool_readyset_find(&ready, sb->id)))
		json_object_set_new(rec, "pool", json_string(pool));
	json_object_set_new(rec, "labels", sb->labels ? json_incref(sb->labels) : json_object());
	if (sb->workdir[0])
		json_object_set_new(rec, "workdir", json_string(sb->workdir));
	if (sb->user[0])
		json_object_set_new(rec, "run_as", json_string(sb->user));
	json_object_set_new(rec, "limits", dsec_pool_limits_json(&sb->limits));
	dsec_res_record(rec, sb);
	json_object_set_new(rec, "usage", dsec_res_usage_json(sb));
	return rec;
}

/* --node: {"node":…,"cpu":{"capacity":…,"ratio":…,"allowed":…,"requested":…},…,
 * "io_device":…,"spare_cgroups":N} */
static int node_record(void)
{
	struct dsec_err err = {0};
	const struct dsec_node *n = dsec_node_get(&paths, &err);
	int64_t sum[DSEC_R_N];
	json_t *rec;

	if (!n || dsec_admit_sums(&paths, sum, &err) < 0)
		dsec_fatal(&err);
	rec = json_pack("{s:s}", "node", dsec_node());
	for (int r = 0; r < DSEC_R_N; r++) {
		double k = r == DSEC_R_CPU ? 1000 : 1;

		json_object_set_new(rec, dsec_res_name[r],
				    json_pack("{s:f, s:b, s:f, s:f, s:f}", "capacity", n->cap[r],
					      "auto", n->cap_auto[r], "ratio", n->ratio[r],
					      "allowed", n->cap[r] * n->ratio[r], "requested",
					      (double)sum[r] / k));
	}
	json_object_set_new(rec, "io_device", n->io_dev[0] ? json_string(n->io_dev) : json_null());
	json_object_set_new(rec, "spare_cgroups", json_integer(dsec_cgspare_count(&paths)));
	emit(rec);
	return 0;
}

static int pool_one(const struct dsec_pool *pool, void *ctx)
{
	emit(dsec_pool_record(pool));
	return out_gone ? -1 : 0;
}

static int list_one(const char *id, void *ctx)
{
	struct dsec_sandbox sb;
	struct dsec_err err;
	int explicit = ctx != NULL;

	if (dsec_sandbox_load(&paths, id, &sb, &err) < 0) {
		/* a sandbox being created or half-removed is not an error in a listing */
		if (explicit) {
			dsec_err_print(&err);
			failed = 1;
			emit(dsec_jsonl_set_error(json_pack("{s:s}", "id", id), &err, "dsec-ps"));
		}
		return 0;
	}
	/* a state whose id is not its dir's is a sandbox a reset replaced (dsec_sandbox_reset),
	 * on its way out under the pool sandbox's dir: the id belongs to its successor */
	if (strcmp(sb.id, id) != 0) {
		dsec_sandbox_free(&sb);
		return 0;
	}
	emit(record(&sb));
	dsec_sandbox_free(&sb);
	return out_gone ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct dsec_cli cli = {.help = usage};
	struct dsec_err err = {0};
	int c, pools = 0, node = 0;

	dsec_prog = "dsec-ps";
	dsec_stdio_reserve();
	while ((c = getopt_long(argc, argv, "hVqvt", longopts, NULL)) != -1) {
		if (dsec_cli_common(&cli, c, optarg))
			continue;
		if (c == 't') {
			table = 1;
			continue;
		}
		if (c == DSEC_OPT_FIRST_TOOL) {
			pools = 1;
			continue;
		}
		if (c == DSEC_OPT_FIRST_TOOL + 1) {
			node = 1;
			continue;
		}
		dsec_usage_error("unknown option");
	}
	dsec_cli_paths(&cli, &paths);
	dsec_jsonl_init_output();
	if (table && (node || pools))
		dsec_usage_error("--table lists sandboxes: not with --node or --pools");
	if (table && printf(TABLE_FMT, "ID", "IMAGE", "STATE", "PID", "AGE", "TTL", "IDLE", "MEM",
			    "CPU", "DISK", "NET", "POOL") < 0)
		out_gone = 1;
	if (node) {
		if (pools || optind < argc)
			dsec_usage_error("--node takes no ids and no --pools");
		node_record();
	} else if (pools) {
		if (optind < argc)
			dsec_usage_error("--pools takes no ids");
		if (dsec_pool_foreach(&paths, pool_one, NULL, &err) < 0)
			dsec_fatal(&err);
	} else {
		/* a warm pool's ready sandboxes are named as such ("pool"); should a ready dir
		 * not be read, they are listed without */
		if (dsec_pool_readyset(&paths, &ready, &err) < 0)
			dsec_err_print(&err);
		if (optind < argc) {
			for (int i = optind; i < argc && !out_gone; i++)
				list_one(argv[i], &paths);
		} else if (dsec_sandbox_foreach(&paths, list_one, NULL, &err) < 0) {
			dsec_fatal(&err);
		}
		dsec_pool_readyset_free(&ready);
	}
	return dsec_cli_exit(out_gone ? DSEC_EXIT_FATAL : failed ? DSEC_EXIT_FAILED : DSEC_EXIT_OK);
}
