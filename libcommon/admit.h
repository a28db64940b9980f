/* Node admission: a sandbox is made (or claimed, or resized) only while the sum of the requests
 * of the node's live sandboxes stays within capacity x overcommit ratio, per resource.
 *
 * $DSEC_ROOT/node.conf (dsec-node(5)) gives capacity and ratio; capacity is detected from the
 * machine where the file does not set it. Only requests count, never limits, and a sandbox
 * without requests costs admission nothing (no lock, no ledger entry).
 *
 * The ledger, $DSEC_RUN/ledger (lock: $DSEC_RUN/ledger.lock, flock), is append-only text:
 *
 *   dsec-ledger1 len=L n=N ids=I cpu=C memory=M pids=P disk=D     (header, 128 bytes)
 *   <id> <pid> <start> <cpu milli> <memory> <pids> <disk>          (an entry: signed deltas)
 *
 * The header holds the sums of the first L bytes' entries; entries past L (a writer died between
 * its append and its header update) are added by the next reader. An entry's pid and start time
 * (/proc/PID/stat field 22) say what keeps the id's requests alive: the spawning process while
 * it creates the sandbox, the holder once bound. Nothing subtracts when a sandbox goes away
 * (dsec-reap, a crash, a kill -9 of anything): the sums can only be too high, never too low.
 * Before refusing, and every so many entries, the ledger is compacted: entries summed per id,
 * ids whose last pid is gone dropped (unless the id's state names a live holder: a spawner
 * killed before it bound the sandbox), the file rewritten. So a refusal is always decided on the
 * exact requests of the sandboxes alive at that moment, and a yes never passes the ratio. */
#ifndef DSEC_ADMIT_H
#define DSEC_ADMIT_H

#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "sandbox.h"
#include "state.h"

enum { DSEC_R_CPU, DSEC_R_MEMORY, DSEC_R_PIDS, DSEC_R_DISK, DSEC_R_N };

/* Names of the resources, as node.conf and records spell them: cpu memory pids disk. */
extern const char *const dsec_res_name[DSEC_R_N];

struct dsec_node {
	double cap[DSEC_R_N];   /* CPUs, bytes, tasks, bytes */
	double ratio[DSEC_R_N]; /* overcommit ratio */
	int cap_auto[DSEC_R_N]; /* detected from the machine */
	char io_dev[24];        /* "MAJ:MIN" for io limits, "" when none is known */
};

/* Read $DSEC_ROOT/node.conf (missing: all defaults) and detect what it leaves to auto.
 * Defaults: capacity auto, ratios cpu 4, memory 1, pids 1, disk 1, io_device auto (the disk
 * holding $DSEC_ROOT). -1 with a "node.conf:LINE: …" message for a bad file. */
int dsec_node_load(const struct dsec_paths *p, struct dsec_node *n, struct dsec_err *err);

/* The same, read once per process and kept. */
const struct dsec_node *dsec_node_get(const struct dsec_paths *p, struct dsec_err *err);

/* A request in ledger units (milli-CPUs, bytes, tasks, bytes). */
void dsec_admit_amounts(const struct dsec_requests *r, int64_t out[DSEC_R_N]);

/* Add delta to the ledger for id, kept alive by pid/start (0/0: this process). Refuses with
 * errnum ENOSPC (and a message naming the resource and the figures) when a positive part of
 * delta would take its sum past capacity x ratio; a delta with no positive part is always
 * taken. 0 or -1. */
int dsec_admit(const struct dsec_paths *p, const char *id, pid_t pid, unsigned long long start,
	       const int64_t delta[DSEC_R_N], struct dsec_err *err);

/* From now on id lives as long as pid/start (its holder). 0 or -1. */
int dsec_admit_bind(const struct dsec_paths *p, const char *id, pid_t pid, unsigned long long start,
		    struct dsec_err *err);

/* The exact sums of the live sandboxes' requests (compacts the ledger). 0 or -1. */
int dsec_admit_sums(const struct dsec_paths *p, int64_t sum[DSEC_R_N], struct dsec_err *err);

/* For --wait: sleep a little (2 ms, doubling up to 128 ms) before trying again for room. wait_us:
 * how long in all since t0 (dsec_now_us), UINT64_MAX no end, 0 no wait. 0 slept, -1 over. */
int dsec_admit_wait(uint64_t t0, uint64_t wait_us, unsigned *round);

/* Create a sandbox through admission: reserve sb->req, dsec_sandbox_create, bind the reservation
 * to the holder (or take it back on failure); a best-effort sandbox's holder gets SCHED_IDLE.
 * No requests: just dsec_sandbox_create. Same contract as dsec_sandbox_create; ENOSPC when the
 * node is full. */
int dsec_admit_create(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_err *err);

#endif
