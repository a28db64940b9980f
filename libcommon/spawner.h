/* Making sandboxes for dsec-spawn: what one is asked to be (a spec: the options make the
 * defaults, a spec record's keys override them), and the making of N of them for one record,
 * each claimed from a matching warm pool first (pool.h), else created cold (sandbox.h) with
 * room on the node (admit.h), each emitting its record on stdout as soon as it is made. */
#ifndef DSEC_SPAWNER_H
#define DSEC_SPAWNER_H

#include <jansson.h>
#include <stdint.h>

#include "err.h"
#include "net.h"
#include "pool.h"
#include "resource.h"
#include "sandbox.h"
#include "state.h"

/* the longest TTL a sandbox takes: ten years */
#define DSEC_SPAWN_MAX_TTL_US (3650ULL * 86400 * 1000000)

/* What a sandbox is asked to be. */
struct dsec_spawn_spec {
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

/* A host name of 1 to DSEC_HOSTNAME_MAX letters, digits, '-' and '.', not starting with '-'
 * or '.'. 1 or 0. */
int dsec_hostname_ok(const char *h);
/* "K=V" with a non-empty K free of '='. 1 or 0. */
int dsec_kv_ok(const char *s);

/* Apply a spec record's keys (image, cpus, memory, pids, nofile, disk, net, the resource keys
 * of resource.h, ttl, hostname, workdir, run_as, env, allow, bandwidth, labels) over the
 * defaults in s, checked as the options of the same names are. s->env and s->labels must be
 * the caller's own copies, which the record's entries are added to; a record with "allow" or
 * "bandwidth" gets s->pol of its own (malloc'd, also on failure: the caller frees it when it
 * is not the defaults'). Members of rec are borrowed. 0, or -1 with err (EINVAL, ERANGE for a value out of bounds). */
int dsec_spawn_spec_from_record(json_t *rec, struct dsec_spawn_spec *s, struct dsec_err *err);

/* One dsec-spawn run's making: set paths, jobs (1 to 64), warm_only and wait_us, then
 * dsec_progress_start(&prog, …), made = dsec_progress_counter(&prog) and total (for the line)
 * before the first dsec_spawn_n; dsec_claimer_free(&claimer) at the end. */
struct dsec_spawner {
	const struct dsec_paths *paths;
	struct dsec_claimer claimer; /* claimer.paths = paths */
	long long jobs;              /* worker processes at most (at most one per CPU) */
	int warm_only;               /* no cold sandbox: an empty pool is an error record */
	uint64_t wait_us; /* a full node: wait this long for room (UINT64_MAX: no end; 0 fail) */
	struct dsec_progress prog;
	long *made;
	long long total;
};

/* n sandboxes of spec s, each emitting rec (borrowed; copied, its members pass through) with
 * the sandbox's keys, or with an error, in up to sp->jobs worker processes. A failed sandbox
 * sets *failed; a sandbox made but not handed out (stdout gone) is undone. 0, or -1 (stdout
 * gone, or a worker died). Holds off dsec_stop_sig's interrupt while a sandbox is made. */
int dsec_spawn_n(struct dsec_spawner *sp, json_t *rec, const struct dsec_spawn_spec *s, long long n,
		 int *failed);

#endif
