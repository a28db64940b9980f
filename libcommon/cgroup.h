/* One cgroup per sandbox, under a parent owned by dsec: cgroup v2 when a cgroup2 mount offers
 * the memory, cpu and pids controllers, else cgroup v1 (one dir per controller). dsec never
 * writes the settings of a hierarchy's root cgroup, only of the cgroups it makes.
 *
 * Parent name: "dsec" for the default run dir (/run/dsec), "dsec-<8 hex of a hash of the run
 * dir>" otherwise, so test run dirs never see each other's cgroups. $DSEC_CGROUP_PARENT
 * overrides it (a name or path relative to the hierarchy root, e.g. "system.slice/dsec").
 *
 *   v2: <cgroup2 mount>/<parent>/<id>         (the parent's cgroup.subtree_control enables
 *                                              memory cpu pids [io])
 *   v1: /sys/fs/cgroup/<ctrl>/<parent>/<id>   for ctrl in memory cpu cpuacct pids freezer
 *                                              (freezer: for pausing), and blkio when the
 *                                              sandbox has io settings
 */
#ifndef DSEC_CGROUP_H
#define DSEC_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "sandbox.h"
#include "state.h"

struct dsec_cgroup_stats {
	uint64_t memory; /* bytes in use (memory.current / memory.usage_in_bytes) */
	uint64_t cpu_us; /* CPU time used (cpu.stat usage_usec / cpuacct.usage) */
	uint64_t pids;   /* tasks (pids.current) */
};

/* Which version this host gives dsec: 2 or 1, or -1 with err when neither offers memory, cpu
 * and pids. Cached for the process. */
int dsec_cgroup_version(struct dsec_err *err);

/* What the sandbox is shown of its own cgroups at /sys/fs/cgroup (ns.h): v2, its dir (name[0]
 * NULL); v1, each of its dirs with the name of its hierarchy's dir on the host ("memory",
 * "cpu"), then the cpuset cgroup it inherits from us. Returns how many, at most max; *own,
 * how many of them are dirs dsec made (the rest may be missing: not an error). */
int dsec_cgroup_view(const struct dsec_sandbox *sb, const char **dir, const char **name, int max,
		     int *own);

/* Fill sb->cg with the paths for sandbox sb->id (nothing created). 0 or -1. */
int dsec_cgroup_paths(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_err *err);

/* Create the cgroup(s) of sb (parents as needed) and write sb->limits. 0 or -1 (anything made
 * is removed again). */
int dsec_cgroup_create(const struct dsec_sandbox *sb, struct dsec_err *err);

/* Change the limits of sb's existing cgroup(s) from old to l: writes only cpus, memory and
 * pids that differ (old NULL: all of them); disk is not a cgroup setting. For claims from a
 * warm pool: no cgroup is created. 0 or -1. */
int dsec_cgroup_set_limits(const struct dsec_sandbox *sb, const struct dsec_limits *old,
			   const struct dsec_limits *l, struct dsec_err *err);

/* An O_DIRECTORY fd of the v2 cgroup for clone3(CLONE_INTO_CGROUP). -1 with errnum ENOTSUP on
 * v1. Caller closes. */
int dsec_cgroup_open(const struct dsec_sandbox *sb, struct dsec_err *err);

/* Move process pid (0: the caller) into the sandbox's cgroup(s) (cgroup.procs of each). 0 or -1.
 * Safe after fork and in a CLONE_VM child (no allocation). */
int dsec_cgroup_attach(const struct dsec_sandbox *sb, pid_t pid, struct dsec_err *err);

/* Kill every process in the sandbox's cgroup(s): cgroup.kill on v2 when available, else freeze,
 * SIGKILL each pid in cgroup.procs, thaw, repeat until empty. Waits (bounded) until empty.
 * Tolerant of a missing cgroup. 0 or -1. */
int dsec_cgroup_kill(const struct dsec_sandbox *sb, struct dsec_err *err);

/* Remove the sandbox's cgroup dir(s) (rmdir; retries while the last tasks exit). Tolerant of
 * missing dirs. 0 or -1. */
int dsec_cgroup_remove(const struct dsec_sandbox *sb, struct dsec_err *err);

/* The per-exec cgroups (exec-PID-N, exec.c) below sb's whose dsec-exec is gone (killed before
 * it could remove them): every process in each is killed and the cgroup removed. A dsec-exec
 * that still runs keeps its own. Returns how many were removed, or -1 (err set). */
int dsec_cgroup_exec_orphans(const struct dsec_sandbox *sb, struct dsec_err *err);

/* Freeze (pause) or thaw every process of the sandbox: cgroup.freeze on v2, the freezer
 * controller's freezer.state on v1. Freezing waits (bounded, 2 s) until every task stopped.
 * 0 or -1. */
int dsec_cgroup_freeze(const struct dsec_sandbox *sb, int frozen, struct dsec_err *err);

/* Is the sandbox frozen (or freezing)? 1, 0, or -1 when there is no freezer to ask. */
int dsec_cgroup_frozen(const struct dsec_sandbox *sb);

/* A tool's pause (dsec-layer commit): on, mark the sandbox's state dir with our pid and start
 * time, then freeze (a sandbox still frozen by a killed tool is taken over as it is); off, thaw
 * and drop the mark. 0 or -1. */
int dsec_cgroup_pause(const struct dsec_sandbox *sb, int on, struct dsec_err *err);

/* Is there a pause mark whose tool is gone? 1 or 0. */
int dsec_cgroup_pause_stale(const struct dsec_sandbox *sb);

/* Forget a tool's pause mark: the user paused or resumed the sandbox, which is theirs now. */
void dsec_cgroup_pause_drop(const struct dsec_sandbox *sb);

/* Thaw a sandbox a killed tool left paused and drop its mark (dsec-reap --orphans). 1 done,
 * 0 nothing to do, -1 error. */
int dsec_cgroup_pause_orphan(const struct dsec_sandbox *sb, struct dsec_err *err);

/* Usage of the sandbox's cgroup. Fields that cannot be read are 0. 0 or -1. */
int dsec_cgroup_stats(const struct dsec_sandbox *sb, struct dsec_cgroup_stats *st,
		      struct dsec_err *err);

/* Write the sandbox's requests, class and io settings (resource.h) into its cgroup: CPU weight
 * (v2 cpu.weight, v1 cpu.shares), cpu.idle for best-effort, memory protection (v2 memory.low,
 * v1 memory.soft_limit_in_bytes and swappiness), io limits on sb->io_dev (v2 io.max, v1
 * blkio.throttle.*), io weight (v2 io.weight, v1 blkio.bfq.weight where present). Writes what
 * differs from old; old NULL: from the kernel's defaults (a new cgroup). Limits proper are
 * dsec_cgroup_set_limits'. 0 or -1. */
int dsec_cgroup_set_resources(const struct dsec_sandbox *sb, const struct dsec_sandbox *old,
			      struct dsec_err *err);

/* Accounting totals of the sandbox's cgroup since it was made. */
struct dsec_cgroup_usage {
	struct dsec_cgroup_stats now;
	uint64_t memory_peak; /* bytes (v2 memory.peak, v1 memory.max_usage_in_bytes); 0 unknown */
	int io_known;         /* the io counters below exist (v2 io.stat, v1 a blkio cgroup) */
	uint64_t io_rbytes, io_wbytes; /* block I/O bytes read and written */
};
int dsec_cgroup_usage(const struct dsec_sandbox *sb, struct dsec_cgroup_usage *u,
		      struct dsec_err *err);

/* How many processes the OOM killer has ended in the sandbox's memory cgroup since it was made
 * (v2 memory.events, v1 memory.oom_control "oom_kill"), or -1 when unknown. A count, not a
 * total per sandbox: a spare cgroup (below) keeps its count, so take differences. */
int64_t dsec_cgroup_oom_kills(const struct dsec_sandbox *sb);

/* Callback for each sandbox cgroup (child dir of the parent) in every hierarchy in use, by name;
 * a name present in several v1 hierarchies comes once per hierarchy. */
/* Spare cgroups (cgspare.c; cgroup v1): a reaped sandbox's cgroups kept, emptied, for the next
 * sandbox of the run dir, which then skips the kernel's per-cgroup costs that grow with the
 * number of live sandboxes. $DSEC_SPARE_CGROUPS caps how many a run dir keeps (default 1024, 0
 * none).
 *
 * dsec_cgspare_put: sb's cgroups, whose processes are all gone (dsec_cgroup_kill), become a
 * spare. Returns 0 when they did (nothing is left under sb's paths), 1 when they are not fit
 * or not wanted: the caller removes them. sb must be a state read whole (its limits are what
 * the cgroups hold). Never fails otherwise.
 *
 * dsec_cgspare_take: give sb (its paths from dsec_cgroup_paths) a spare instead of new
 * cgroups: renamed to sb's paths, with sb's limits and requests written where they differ.
 * Returns 0 when it did, 1 when there was none to take: the caller creates them.
 *
 * dsec_cgspare_clear: remove every spare (all), or only what a crash left of one (a spare
 * without its marker, a marker without its spare). The caller holds the run lock exclusive. */
int dsec_cgspare_put(const struct dsec_paths *p, const struct dsec_sandbox *sb);
int dsec_cgspare_take(const struct dsec_paths *p, struct dsec_sandbox *sb);
void dsec_cgspare_clear(const struct dsec_paths *p, int all);
/* How many spares the run dir holds (dsec-ps --node). */
long dsec_cgspare_count(const struct dsec_paths *p);

typedef int (*dsec_cgroup_fn)(const char *name, void *ctx);
int dsec_cgroup_foreach(const struct dsec_paths *p, dsec_cgroup_fn fn, void *ctx,
			struct dsec_err *err);

/* rmdir the parent cgroup(s) of this run dir when empty (after the last sandbox). 0 or -1;
 * EBUSY is not an error. */
int dsec_cgroup_remove_parent(const struct dsec_paths *p, struct dsec_err *err);

/* The tasks the sandboxes of the run dir may have together: pids.max of their parent cgroup
 * (made by then), pids, less an eighth of it (at least DSEC_CG_HOST_PIDS) kept for the host
 * when host_share (pids is the node's: node.conf's auto). Each sandbox's --pids is its own;
 * this keeps many of them, all forking, from using up the node's pids. Set once per process,
 * best-effort; not with DSEC_CGROUP_PARENT (a parent that is not dsec's). */
#define DSEC_CG_HOST_PIDS 1024ULL
void dsec_cgroup_parent_pids(const struct dsec_paths *p, uint64_t pids, int host_share);

#endif
