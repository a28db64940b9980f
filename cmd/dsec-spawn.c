/* dsec-spawn: create sandboxes and print one record per sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "jsonl.h"
#include "admit.h"
#include "exec.h"
#include "net.h"
#include "nofile.h"
#include "pool.h"
#include "resource.h"
#include "sandbox.h"
#include "state.h"

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

#define MAX_TTL_US (3650ULL * 86400 * 1000000)

/* What a sandbox is asked to be; the options make the defaults, a record overrides them. */
struct spec {
	const char *image;
	struct dsec_limits lim;
	struct dsec_requests req;
	enum dsec_class cls;
	uint64_t ttl_us;
	enum dsec_net net;
	const char *hostname;
	json_t *env;                 /* array of "K=V" */
	const char *workdir, *user;  /* commands' defaults; NULL: the image's */
	char user_buf[16];           /* a "run_as" given as a number */
	json_t *labels;              /* object */
	struct dsec_net_policy *pol; /* nat: allow-list and bandwidth */
};

/* The long name of option code c, for messages. */
static const char *longopt_name(int c)
{
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == c)
			return o->name;
	return "?";
}

static int hostname_ok(const char *h)
{
	size_t n = strlen(h);

	if (n == 0 || n > DSEC_HOSTNAME_MAX || h[0] == '-' || h[0] == '.')
		return 0;
	for (; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') ||
		      (*h >= '0' && *h <= '9') || *h == '-' || *h == '.'))
			return 0;
	return 1;
}

/* "K=V" with a non-empty K free of '=' and NUL. */
static int kv_ok(const char *s)
{
	const char *eq = strchr(s, '=');

	return eq && eq != s;
}

/* A limit member of a spec record: a number (bytes, CPUs, tasks) or a string with a unit,
 * parsed and bounded like the option of the same name. */
static int member_limit(json_t *rec, const char *name, struct spec *s, struct dsec_err *err)
{
	json_t *v = json_object_get(rec, name);
	char buf[64];

	if (!v)
		return 0;
	if (json_is_integer(v))
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
	else if (json_is_string(v))
		return dsec_limit_parse(name, json_string_value(v), 0, &s->lim, &s->net, err);
	else
		return dsec_err_set(err, EINVAL, "'%s': want a number or a string", name);
	return dsec_limit_parse(name, buf, 0, &s->lim, &s->net, err);
}

/* Apply a spec record's keys on top of the defaults in s. s->env and s->labels must be the
 * caller's own copies (it releases them, also on failure). */
static int spec_from_record(json_t *rec, struct spec *s, struct dsec_err *err)
{
	json_t *v;
	uint64_t u;

	if ((v = json_object_get(rec, "image"))) {
		if (!json_is_string(v))
			return dsec_err_set(err, EINVAL, "'image': want a string");
		s->image = json_string_value(v);
	}
	if (member_limit(rec, "cpus", s, err) < 0 || member_limit(rec, "memory", s, err) < 0 ||
	    member_limit(rec, "disk", s, err) < 0 || member_limit(rec, "pids", s, err) < 0 ||
	    member_limit(rec, "nofile", s, err) < 0 || member_limit(rec, "net", s, err) < 0)
		return -1;
	{
		struct dsec_res r = {.lim = s->lim, .req = s->req, .cls = s->cls};
		unsigned set = 0;

		if (dsec_res_from_record(rec, 0, &r, &set, err) < 0)
			return -1;
		s->lim = r.lim;
		s->req = r.req;
		s->cls = r.cls;
	}
	if ((v = json_object_get(rec, "ttl"))) {
		if (json_is_number(v) && json_number_value(v) >= 0 &&
		    json_number_value(v) * 1e6 <= (double)MAX_TTL_US)
			s->ttl_us = (uint64_t)(json_number_value(v) * 1e6);
		else if (!json_is_string(v) ||
			 dsec_parse_duration(json_string_value(v), MAX_TTL_US, &u, "ttl", err) < 0)
			return dsec_err_set(err, EINVAL, "'ttl': want seconds or a duration");
		else
			s->ttl_us = u;
	}
	if ((v = json_object_get(rec, "hostname"))) {
		if (!json_is_string(v) || !hostname_ok(json_string_value(v)))
			return dsec_err_set(err, EINVAL, "'hostname': not a valid host name");
		s->hostname = json_string_value(v);
	}
	/* "run_as", not "user": pipelines carry that key for their own ends */
	if ((v = json_object_get(rec, "workdir"))) {
		if (!dsec_workdir_ok(json_string_value(v)))
			return dsec_err_set(err, EINVAL, "'workdir': want an absolute path");
		s->workdir = json_string_value(v);
	}
	if ((v = json_object_get(rec, "run_as"))) {
		/* a uid may be a number, as dsec-exec takes it */
		if (!(s->user = dsec_user_json(v, s->user_buf, sizeof(s->user_buf))))
			return dsec_err_set(err, EINVAL,
					    "'run_as': want \"USER[:GROUP]\" or a uid");
	}
	if ((v = json_object_get(rec, "env"))) {
		json_t *e;
		const char *k;
		size_t i;

		/* an array of "K=V" or an object {"K":"V"}, added to the defaults */
		if (json_is_array(v)) {
			json_array_foreach(v, i, e)
			{
				if (!json_is_string(e) || !kv_ok(json_string_value(e)))
					return dsec_err_set(err, EINVAL,
							    "'env': want \"K=V\" strings");
				json_array_append(s->env, e);
			}
		} else if (json_is_object(v)) {
			json_object_foreach(v, k, e)
			{
				if (!json_is_string(e) || !*k || strchr(k, '='))
					return dsec_err_set(err, EINVAL,
							    "'env': want string values");
				json_array_append_new(
				    s->env, json_sprintf("%s=%s", k, json_string_value(e)));
			}
		} else {
			return dsec_err_set(err, EINVAL, "'env': want an array or object");
		}
	}
	if (json_object_get(rec, "allow") || json_object_get(rec, "bandwidth")) {
		json_t *e;
		size_t i;

		/* the record's allow-list adds to the options' */
		s->pol = memcpy(malloc(sizeof(*s->pol)), s->pol, sizeof(*s->pol));
		v = json_object_get(rec, "allow");
		if (v && !json_is_array(v))
			return dsec_err_set(err, EINVAL, "'allow': want an array of strings");
		json_array_foreach(v, i, e)
		{
			if (!json_is_string(e))
				return dsec_err_set(err, EINVAL, "'allow': want strings");
			if (dsec_net_allow_parse(json_string_value(e), s->pol, err) < 0)
				return -1;
		}
		if ((v = json_object_get(rec, "bandwidth")) &&
		    (!json_is_string(v) ||
		     dsec_net_rate_parse(json_string_value(v), &s->pol->rate, err) < 0))
			return dsec_err_set(err, EINVAL,
					    "'bandwidth': want a rate, e.g. \"10mbit\"");
	}
	if ((v = json_object_get(rec, "labels"))) {
		json_t *e;
		const char *k;

		if (!json_is_object(v))
			return dsec_err_set(err, EINVAL, "'labels': want an object");
		json_object_foreach(v, k, e)
		{
			if (!json_is_string(e))
				return dsec_err_set(err, EINVAL, "'labels': want string values");
			json_object_set(s->labels, k, e);
		}
	}
	return 0;
}

/* Warm pools: claims first (pool.h), cold only when none matches, unless --warm-only. */
static struct dsec_claimer claimer;
static int warm_only;
/* --wait: how long a spawn waits for room on the node (UINT64_MAX: no end; 0: it fails) */
static uint64_t wait_us;

static json_t *record_for(json_t *rec, const struct dsec_sandbox *sb, int warm, uint64_t spawn_us)
{
	json_t *lim = json_pack("{s:f, s:I, s:I, s:I}", "cpus", sb->limits.cpus, "memory",
				(json_int_t)sb->limits.memory, "pids", (json_int_t)sb->limits.pids,
				"disk", (json_int_t)sb->limits.disk);

	if (sb->limits.cpus == floor(sb->limits.cpus))
		json_object_set_new(lim, "cpus", json_integer((json_int_t)sb->limits.cpus));
	json_object_set_new(lim, "nofile",
			    json_integer((json_int_t)DSEC_NOFILE_OF(sb->limits.nofile)));
	json_object_set_new(rec, "id", json_string(sb->id));
	json_object_set_new(rec, "image", json_string(sb->image));
	json_object_set_new(rec, "node", json_string(sb->node));
	json_object_set_new(rec, "warm", json_boolean(warm));
	json_object_set_new(rec, "spawn_us", json_integer((json_int_t)spawn_us));
	json_object_set_new(rec, "limits", lim);
	json_object_set_new(rec, "ttl",
			    json_integer((json_int_t)((sb->ttl_us + 999999) / 1000000)));
	json_object_set_new(rec, "net", json_string(dsec_net_mode_name(sb->net)));
	json_object_set_new(rec, "pid", json_integer(sb->holder_pid));
	dsec_res_record(rec, sb);
	return rec;
}

/* Image name's run config (store.h), read once per image for this run; borrowed, or NULL. */
static json_t *image_config(const struct dsec_paths *paths, const char *name)
{
	static char cached[DSEC_NAME_MAX + 1];
	static json_t *cfg;
	static int have;

	if (!have || strcmp(cached, name)) {
		json_decref(cfg);
		cfg = dsec_image_config(paths, name);
		snprintf(cached, sizeof(cached), "%s", name);
		have = 1;
	}
	return cfg;
}

/* Create one sandbox for rec (borrowed) and emit its record. Returns 0, 1 when it failed (an
 * error record was emitted), -1 when stdout is gone. */
static int spawn_one(const struct dsec_paths *paths, json_t *in, const struct spec *s)
{
	struct dsec_sandbox sb;
	struct dsec_exec_user who;
	struct dsec_err err = {0};
	static char netpol[DSEC_NETPOL_MAX];
	json_t *rec = json_deep_copy(in), *nat = NULL, *cfg, *env = s->env, *ienv;
	uint64_t t0, w0 = dsec_now_us();
	unsigned round = 0;
	int rc, warm = 0;

	/* the image's environment first, so --env and the record's "env" win */
	cfg = s->image ? image_config(paths, s->image) : NULL;
	if (json_array_size(ienv = json_object_get(cfg, "env"))) {
		env = json_copy(ienv);
		if (s->env)
			json_array_extend(env, s->env);
	} else
		env = s->env ? json_incref(s->env) : NULL;
again:
	memset(&sb, 0, sizeof(sb));
	if (!s->image) {
		dsec_err_set(&err, EINVAL, "no image (give --image or an \"image\" member)");
		goto failed;
	}
	if (s->net != DSEC_NET_NAT && (s->pol->n || s->pol->rate)) {
		dsec_err_set(&err, EINVAL, "an allow-list or bandwidth needs net nat");
		goto failed;
	}
	snprintf(sb.image, sizeof(sb.image), "%s", s->image);
	sb.limits = s->lim;
	sb.req = s->req;
	sb.cls = s->cls;
	sb.ttl_us = s->ttl_us;
	sb.net = s->net;
	if (s->hostname)
		snprintf(sb.hostname, sizeof(sb.hostname), "%s", s->hostname);
	sb.env = env;
	sb.labels = s->labels;
	snprintf(sb.workdir, sizeof(sb.workdir), "%s",
		 s->workdir ? s->workdir : json_string_value(json_object_get(cfg, "workdir")) ?: "");
	snprintf(sb.user, sizeof(sb.user), "%s",
		 s->user ? s->user : json_string_value(json_object_get(cfg, "user")) ?: "");
	/* requests within the limits before a claim: a claim that then failed would cost a ready
	 * sandbox of the pool */
	if (dsec_res_check(&sb, &err) < 0) {
		sb.env = sb.labels = NULL;
		goto failed;
	}
	t0 = dsec_now_us();
	/* a nat pool matches only the same allow-list and bandwidth */
	claimer.netpol = NULL;
	if (s->net == DSEC_NET_NAT) {
		dsec_net_policy_canon(s->pol, netpol, sizeof(netpol));
		claimer.netpol = netpol;
	}
	warm = dsec_pool_claim(&claimer, &sb, &err);
	if (warm == 0 && warm_only) {
		sb.env = sb.labels = NULL;
		dsec_err_set(&err, ENOENT, "no warm sandbox ready for image '%s' (--warm-only)",
			     s->image);
		goto failed;
	}
	if (warm == 1) {
		rc = 0;
		if (sb.net == DSEC_NET_NAT)
			nat = dsec_net_info(paths, &sb);
	} else {
		rc = warm < 0 ? -1 : dsec_admit_create(paths, &sb, &err);
		sb.env = sb.labels = NULL; /* borrowed from s */
		/* --net nat: the veth into the holder's namespace, right after it started */
		if (rc == 0 && sb.net == DSEC_NET_NAT &&
		    dsec_net_attach(paths, &sb, s->pol, &nat, &err) < 0) {
			dsec_sandbox_destroy(paths, &sb, NULL);
			rc = -1;
		}
	}
	if (rc < 0 && err.errnum == ENOSPC && !dsec_stop_sig &&
	    dsec_admit_wait(w0, wait_us, &round) == 0 && !dsec_stop_sig) {
		memset(&err, 0, sizeof(err));
		goto again;
	}
	if (rc < 0)
		goto failed;
	/* the commands' default user must exist in the sandbox now, or no command would run */
	if (sb.user[0] && dsec_exec_user_resolve(&sb, sb.user, &who, &err) < 0) {
		dsec_sandbox_destroy(paths, &sb, NULL);
		if (warm == 1)
			dsec_sandbox_free(&sb);
		json_decref(nat);
		goto failed;
	}
	record_for(rec, &sb, warm == 1, dsec_now_us() - t0);
	if (nat)
		json_object_set_new(rec, "nat", nat);
	if (dsec_jsonl_emit(rec, &err) < 0) {
		/* nobody will learn of this sandbox: take it back */
		dsec_sandbox_destroy(paths, &sb, NULL);
		if (warm == 1)
			dsec_sandbox_free(&sb);
		json_decref(rec);
		json_decref(env);
		dsec_err_print(&err);
		return -1;
	}
	json_decref(rec);
	json_decref(env);
	/* a pipeline may already have run and reaped it: gone is handed out too */
	if (dsec_sandbox_commit(&sb, &err) < 0 && err.errnum != ENOENT)
		dsec_err_print(&err);
	if (warm == 1)
		dsec_sandbox_free(&sb);
	return 0;
failed:
	dsec_err_print(&err);
	dsec_jsonl_set_error(rec, &err, "dsec-spawn");
	rc = dsec_jsonl_emit(rec, &err);
	json_decref(rec);
	json_decref(env);
	return rc < 0 ? -1 : 1;
}

static long long jobs = 2;
/* --image with -n: a progress line on a terminal while the records go elsewhere */
static struct dsec_progress prog;
static long *made;
static long long total;

static int spawn_serial(const struct dsec_paths *paths, json_t *rec, const struct spec *s,
			long long n, int *failed)
{
	for (long long i = 0; i < n && !dsec_stop_sig; i++) {
		int r;

		dsec_stop_hold(1); /* an interrupt waits for this sandbox to be made or undone */
		r = spawn_one(paths, rec, s);
		dsec_stop_hold(0);
		if (r < 0)
			return -1;
		if (r > 0)
			*failed = 1;
		__atomic_add_fetch(made, 1, __ATOMIC_RELAXED);
		dsec_progress(&prog, "%ld of %lld sandboxes ", *made, total);
	}
	return 0;
}

/* n sandboxes of spec s for record rec: with --jobs, split over worker processes, each
 * printing its records as it goes (one write each: records are far below the pipe's atomic
 * size), since most of a cold sandbox's making is waiting on the kernel. 0 or -1 (stdout
 * gone, or a worker died). */
static int spawn_n(const struct dsec_paths *paths, json_t *rec, const struct spec *s, long long n,
		   int *failed)
{
	long long j = jobs < n / 2 ? jobs : n / 2, cpus = sysconf(_SC_NPROCESSORS_ONLN);
	pid_t pids[64];
	int k = 0, rc = 0;

	/* making a sandbox is kernel work under the cgroup and namespace locks: more workers
	 * than CPUs only queue on them (8 made fewer a second than 2 on two cores) */
	if (cpus >= 2 && j > cpus)
		j = cpus;

	if (j < 2)
		return spawn_serial(paths, rec, s, n, failed);
	fflush(NULL);
	for (long long w = 0; w < j; w++) {
		long long share = n / j + (w < n % j);
		/* a worker dies with dsec-spawn: a kill -9 of it leaves what --orphans takes,
		 * not sandboxes still being made */
		pid_t pid = dsec_fork_worker();

		if (pid < 0) {
			/* make the rest here */
			long long rest = 0;

			for (long long v = w; v < j; v++)
				rest += n / j + (v < n % j);
			if (spawn_serial(paths, rec, s, rest, failed) < 0)
				rc = -1;
			break;
		}
		if (pid == 0) {
			int f = 0, r;

			prog.on = 0; /* the parent shows the line */
			r = spawn_serial(paths, rec, s, share, &f);

			fflush(NULL);
			_exit(r < 0 ? DSEC_EXIT_FATAL : f ? DSEC_EXIT_FAILED : DSEC_EXIT_OK);
		}
		pids[k++] = pid;
	}
	dsec_stop_hold(1); /* until the workers, told of an interrupt, have stopped */
	for (int w = 0; w < k; w++) {
		int ws;

		if (dsec_progress_waitpid(&prog, pids[w], &ws, made, total, "sandboxes") < 0 ||
		    !WIFEXITED(ws) || WEXITSTATUS(ws) == DSEC_EXIT_FATAL)
			rc = -1;
		else if (WEXITSTATUS(ws))
			*failed = 1;
	}
	dsec_stop_hold(0);
	return rc;
}

/* --resize: one sandbox, from an id or a record with "id" (borrowed); emits the record. 0, 1
 * (failed: an error record went out), -1 (stdout gone). */
static int resize_one(const struct dsec_paths *paths, const char *id, json_t *in,
		      const struct dsec_res *opt, unsigned opt_set)
{
	struct dsec_err err = {0};
	json_t *rec = in ? json_deep_copy(in) : json_pack("{s:s}", "id", id);
	int rc = dsec_res_resize_record(paths, id, rec, opt, opt_set, wait_us, &err), failed;

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
	struct spec def = {.lim = {.cpus = DSEC_DEFAULT_CPUS,
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
			if (dsec_parse_count(optarg, 1, 64, &jobs, "--jobs", &err) < 0)
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
			wait_us = UINT64_MAX;
			if (optarg && dsec_parse_duration(optarg, 3650ULL * 86400 * 1000000,
							  &wait_us, "--wait", &err) < 0)
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
			if (dsec_parse_duration(optarg, MAX_TTL_US, &def.ttl_us, "--ttl", &err) < 0)
				dsec_usage_error("%s", err.msg);
			break;
		case OPT_ENV:
			if (!kv_ok(optarg))
				dsec_usage_error("--env '%s': want K=V", optarg);
			json_array_append_new(def.env, json_string(optarg));
			break;
		case OPT_HOSTNAME:
			if (!hostname_ok(optarg))
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
			warm_only = 1;
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
	claimer.paths = &paths;

	dsec_progress_start(&prog, def.image && !isatty(STDOUT_FILENO));
	made = dsec_progress_counter(&prog);
	if (def.image) {
		json_t *rec = json_object();
		int r;

		total = n;
		r = spawn_n(&paths, rec, &def, n, &failed);
		dsec_progress_end(&prog);
		json_decref(rec);
		if (r < 0)
			return dsec_cli_exit(DSEC_EXIT_FATAL);
	} else {
		struct dsec_jsonl_reader rd;
		json_t *rec;
		int r;

		dsec_jsonl_reader_init(&rd, stdin, "<stdin>", 0);
		while ((r = dsec_jsonl_next(&rd, &rec, &err)) != 0) {
			struct spec s = def;

			if (r < 0) {
				dsec_err_print(&err);
				failed = 1;
				rec = dsec_jsonl_error_record(&err, "dsec-spawn");
			} else if (json_object_get(rec, "error")) {
				/* failed upstream: pass it on untouched */
			} else {
				s.env = json_copy(def.env);
				s.labels = json_copy(def.labels);
				if (spec_from_record(rec, &s, &err) < 0) {
					dsec_errorx("<stdin>:%lu: %s", rd.line, err.msg);
					failed = 1;
					dsec_jsonl_set_error(rec, &err, "dsec-spawn");
				} else {
					r = spawn_n(&paths, rec, &s, n, &failed);
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
	dsec_claimer_free(&claimer);
	close(lock);
	json_decref(def.env);
	json_decref(def.labels);
	return dsec_cli_exit(failed ? DSEC_EXIT_FAILED : DSEC_EXIT_OK);
}
