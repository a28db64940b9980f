/* Requests, limits and classes of a sandbox, and changing them while it runs.
 *
 * A limit is what the sandbox can never exceed: cpus (cpu.max / cfs_quota_us), memory
 * (memory.max / limit_in_bytes), pids (pids.max), disk (the size of its writable tmpfs), io_bps
 * and io_iops (io.max / blkio.throttle.*, on the node's io device). A request is what it is
 * guaranteed: CPU weight (cpu.weight / cpu.shares), memory protection (memory.low / the v1 soft
 * limit), and, with pids and disk, what node admission (admit.h) sums. The class: "ls"
 * (latency-sensitive, the default) or "be" (best-effort: weight 1 / 2 shares, cpu.idle, SCHED_IDLE
 * for its processes, oom_score_adj 500, no memory protection, v1 soft limit 0).
 *
 * Spelling, the same everywhere: options --cpus --memory --pids --disk --io-bps --io-iops
 * --cpu-request --memory-request --pids-request --disk-request --io-weight --class; in records
 * the same names with '_' ("cpu_request"), or a "requests" object as the tools write it. */
#ifndef DSEC_RESOURCE_H
#define DSEC_RESOURCE_H

#include <jansson.h>
#include <stdint.h>

#include "err.h"
#include "sandbox.h"
#include "state.h"

/* What a sandbox asks for. */
struct dsec_res {
	struct dsec_limits lim;
	struct dsec_requests req;
	enum dsec_class cls;
};

/* Bits of what a parse set (for a resize: only those change). */
enum {
	DSEC_RES_CPUS = 1 << 0,
	DSEC_RES_MEMORY = 1 << 1,
	DSEC_RES_PIDS = 1 << 2,
	DSEC_RES_DISK = 1 << 3,
	DSEC_RES_IO_BPS = 1 << 4,
	DSEC_RES_IO_IOPS = 1 << 5,
	DSEC_RES_REQ_CPUS = 1 << 6,
	DSEC_RES_REQ_MEMORY = 1 << 7,
	DSEC_RES_REQ_PIDS = 1 << 8,
	DSEC_RES_REQ_DISK = 1 << 9,
	DSEC_RES_IO_WEIGHT = 1 << 10,
	DSEC_RES_CLASS = 1 << 11,
};

/* Parse one resource from its text form: name is an option name ("cpu-request") or a record
 * key ("cpu_request"); cpus, memory, pids and disk go through dsec_limit_parse. Sets the bit in
 * *set. -1 with EINVAL "not a resource" for any other name. The message names "--NAME" when opt,
 * else "'NAME'". */
int dsec_res_parse(const char *name, const char *val, int opt, struct dsec_res *r, unsigned *set,
		   struct dsec_err *err);

/* The resource members of a spec or resize record: cpu_request … class, and a "requests" object
 * {"cpus","memory","pids","disk","io_weight"}; with limits also cpus, memory, pids, disk. Numbers
 * or strings with units. 0 or -1. */
int dsec_res_from_record(json_t *rec, int limits, struct dsec_res *r, unsigned *set,
			 struct dsec_err *err);

/* Are the requests within the limits (a request above its limit could never be used)? 0 or -1. */
int dsec_res_check(const struct dsec_sandbox *sb, struct dsec_err *err);

/* Before creating sb: dsec_res_check, and the node's io device for io limits (none known: an
 * error). 0 or -1. */
int dsec_res_prepare(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_err *err);

/* The state file's members (sandbox.c calls these): io limits in "limits", "requests", "class". */
void dsec_res_to_json(const struct dsec_sandbox *sb, json_t *state);
void dsec_res_from_json(json_t *state, struct dsec_sandbox *sb);

/* For the tools' records: adds io limits to rec's "limits" object when it has one, and sets
 * "requests" and "class". */
void dsec_res_record(json_t *rec, const struct dsec_sandbox *sb);
json_t *dsec_res_requests_json(const struct dsec_requests *r);

/* {"cpu_us","memory","memory_peak","pids","io_read_bytes","io_write_bytes"} of the sandbox's
 * cgroup (io null where the kernel does not count them). New reference. */
json_t *dsec_res_usage_json(const struct dsec_sandbox *sb);

/* In a process about to become part of the sandbox (dsec-exec's child): a best-effort sandbox's
 * processes run SCHED_IDLE with oom_score_adj 500. Safe after fork (syscalls only). */
void dsec_res_exec_child(const struct dsec_sandbox *sb);

/* The holder's scheduling policy to match sb->cls. 0 or -1. */
int dsec_res_sched_holder(const struct dsec_sandbox *sb, struct dsec_err *err);

/* Make the live sandbox what sb says, coming from old: cgroup limits and requests, io, the
 * writable tmpfs's size, and on a class change every process's policy. 0 or -1 (what was
 * written stays; the caller decides). */
int dsec_res_apply(const struct dsec_sandbox *sb, const struct dsec_sandbox *old,
		   struct dsec_err *err);

/* Resize live sandbox id: the members of r named in set replace its own; admission takes a
 * request's growth (ENOSPC when the node is full); cgroup writes, tmpfs size; the state is
 * rewritten. out gets the sandbox as it now is (release with dsec_sandbox_free), *us the time
 * from the first write to the last. 0 or -1. */
int dsec_res_resize(const struct dsec_paths *p, const char *id, const struct dsec_res *r,
		    unsigned set, struct dsec_sandbox *out, uint64_t *us, struct dsec_err *err);

/* dsec-spawn --resize for one record rec (id given apart): opt (the options' values, bits in
 * opt_set) and rec's own resource keys, waiting up to wait_us for room (UINT64_MAX: no end);
 * adds "limits", "requests", "class" as they now are and "resize_us" to rec. 0 or -1. */
int dsec_res_resize_record(const struct dsec_paths *p, const char *id, json_t *rec,
			   const struct dsec_res *opt, unsigned opt_set, uint64_t wait_us,
			   struct dsec_err *err);

#endif
