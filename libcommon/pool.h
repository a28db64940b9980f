/* Warm pools: sandboxes made ahead of demand (dsec-warm) and handed out by dsec-spawn.
 *
 * A pool is an image and a resource profile (cpus, memory, pids, disk, net). Its key is
 * "p-<16 hex>", an FNV-1a hash of the canonical profile string (dsec_pool_canon). Layout:
 *
 *   $DSEC_RUN/pools/<key>/pool.json    {"pool":key,"image":…,"limits":{…},"net":…,
 *                                       "net_policy":"allow=…;rate=…" (net nat only)}
 *   $DSEC_RUN/pools/<key>/lock         flock: one dsec-warm run per pool at a time
 *   $DSEC_RUN/pools/<key>/ready/<id>   an empty file per ready sandbox; its mtime is the
 *                                      sandbox's creation time (for --max-age)
 *
 * A ready sandbox is a whole sandbox (holder, namespaces, rootfs, cgroup) with its state in
 * $DSEC_RUN/sandboxes/<id>/ like any other, and no TTL. A claim writes what it changes (limits,
 * TTL, creation time, env, labels, "pool", "warm":true) into sandboxes/<id>/claim.json, which
 * dsec_sandbox_load merges over sandbox.json.
 *
 * Claim: renameat2(ready/<id>, sandboxes/<id>/claimed, RENAME_NOREPLACE). One rename of one
 * directory entry: of any number of claimers exactly one succeeds, the others get ENOENT. The
 * winner then marks the sandbox pending (sandbox.h: its state file's mode), so a claimer killed
 * before it hands the sandbox out leaves an orphan that dsec-reap --orphans removes. No fork,
 * no mount, no cgroup mkdir: cpus, memory and pids that differ from the pool's profile are
 * cgroup writes. Disk is the size of the tmpfs mounted inside the sandbox's mount namespace;
 * changing it would take a remount in there, so a pool matches a request only with the same
 * image, net and disk (and no --hostname: the hostname was set at creation).
 *
 * Making: dsec-warm creates the sandbox (pending), links the ready entry, then commits it. A
 * dsec-warm killed in between leaves a pending sandbox for dsec-reap --orphans and a ready
 * entry that the next claim or dsec-warm run drops.
 */
#ifndef DSEC_POOL_H
#define DSEC_POOL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "sandbox.h"
#include "state.h"

#define DSEC_POOL_KEY_MAX 24 /* "p-" + 16 hex */

#define DSEC_NETPOL_MAX 4096

struct dsec_pool {
	char key[DSEC_POOL_KEY_MAX];
	char image[DSEC_NAME_MAX + 1];
	struct dsec_limits limits;
	enum dsec_net net;
	char netpol[DSEC_NETPOL_MAX]; /* net nat: dsec_net_policy_canon text, else "" */
	char dir[PATH_MAX];           /* $DSEC_RUN/pools/<key> */
	struct dsec_requests req;     /* resource.h: requests and class of the profile; admission */
	enum dsec_class cls;          /* counts a ready sandbox with them */
};

/* The canonical profile string, e.g. "image=py;net=none;disk=1073741824;memory=…;pids=512;
 * cpus=1.000". Returns its length (snprintf-style). */
int dsec_pool_canon(const char *image, const struct dsec_limits *l, enum dsec_net net, char *buf,
		    size_t n);

/* Fill pool (key, dir) for image and profile. Creates nothing. Requests and class: set
 * pool->req and pool->cls after, then dsec_pool_rekey. */
void dsec_pool_init(struct dsec_pool *pool, const struct dsec_paths *p, const char *image,
		    const struct dsec_limits *l, enum dsec_net net);

/* Recompute the key and dir after pool->req or pool->cls changed (they join the canonical string
 * only when not the defaults, so a default profile keeps its key). */
void dsec_pool_rekey(struct dsec_pool *pool, const struct dsec_paths *p);

/* dsec_pool_init for --net nat: netpol (dsec_net_policy_canon) is part of the profile and the
 * key, and every sandbox made has that network (net.h). */
void dsec_pool_init_nat(struct dsec_pool *pool, const struct dsec_paths *p, const char *image,
			const struct dsec_limits *l, const char *netpol);

/* Create the pool's dirs and pool.json (when missing). 0 or -1. */
int dsec_pool_save(const struct dsec_pool *pool, struct dsec_err *err);

/* Read $DSEC_RUN/pools/<key>/pool.json. 0 or -1 (ENOENT: no such pool). */
int dsec_pool_load(const struct dsec_paths *p, const char *key, struct dsec_pool *pool,
		   struct dsec_err *err);

/* Take the pool's lock exclusive, waiting at most wait_us for another run holding it (0: not
 * at all; UINT64_MAX: for good; past a second it says so on stderr): -1 with errnum
 * EWOULDBLOCK when the wait runs out. Returns the fd (close to release). */
int dsec_pool_lock(const struct dsec_pool *pool, uint64_t wait_us, struct dsec_err *err);

/* A ready entry: id and creation time (wall µs, from the entry's mtime). */
struct dsec_pool_entry {
	char id[DSEC_ID_MAX];
	uint64_t created_us;
};

/* Read the pool's ready dir once: *out (caller frees) gets *n entries in directory order,
 * with their creation times when times (a stat per entry; claims do without). 0 or -1. A
 * missing dir is an empty pool. */
int dsec_pool_ready(const struct dsec_pool *pool, struct dsec_pool_entry **out, size_t *n,
		    int times, struct dsec_err *err);

/* Every ready sandbox of the run dir's pools, sorted by id, with its pool's key: what is the
 * pools' and not handed out (dsec-reap --idle leaves them, dsec-ps names their pool). A
 * snapshot: a claim may take one at any time. */
struct dsec_pool_ready_id {
	char id[DSEC_ID_MAX];
	char pool[DSEC_POOL_KEY_MAX];
};
struct dsec_pool_readyset {
	struct dsec_pool_ready_id *e;
	size_t n;
};
/* Fill rs (zeroed first). 0 or -1 (a ready dir could not be read); free with
 * dsec_pool_readyset_free either way. */
int dsec_pool_readyset(const struct dsec_paths *p, struct dsec_pool_readyset *rs,
		       struct dsec_err *err);
/* The key of the pool id is ready in, or NULL. */
const char *dsec_pool_readyset_find(const struct dsec_pool_readyset *rs, const char *id);
void dsec_pool_readyset_free(struct dsec_pool_readyset *rs);

/* The claim step on plain files: rename readyfd/<id> to run/sandboxes/<id>/claimed without
 * replacing, then mark the sandbox pending (chmod of its state file). Returns 1 when this
 * caller won the entry, 0 when it is gone (claimed by another, or its sandbox is gone: the
 * dangling entry is removed), -1 with err otherwise. Async-signal-safe, no allocation. */
int dsec_pool_take(int readyfd, const char *run, const char *id, struct dsec_err *err);

/* Make one ready sandbox in the pool (its dirs exist): create it with the pool's profile, no
 * TTL, "pool" in its state; link the ready entry; commit. sb gets the sandbox. Caller holds
 * the run lock shared. 0 or -1 (nothing left behind). Forks (dsec_sandbox_create). */
int dsec_pool_make(const struct dsec_paths *p, const struct dsec_pool *pool,
		   struct dsec_sandbox *sb, struct dsec_err *err);

/* Take ready sandbox id out of the pool and destroy it (drain, --max-age). Returns 1 when
 * destroyed, 0 when a claimer got it first, -1 on error. */
int dsec_pool_retire(const struct dsec_paths *p, const struct dsec_pool *pool, const char *id,
		     struct dsec_err *err);

/* Remove ready entries whose sandbox state is gone or whose holder is dead (destroying what is
 * left of those). Returns the number of ready sandboxes left, or -1. */
int dsec_pool_prune(const struct dsec_paths *p, const struct dsec_pool *pool, struct dsec_err *err);

/* Remove the pool's dir when it has no ready entry and no run holds its lock. 1 removed, 0
 * kept, -1 on error. */
int dsec_pool_remove_if_empty(const struct dsec_pool *pool, struct dsec_err *err);

/* Callback for each pool of the run dir (pool.json readable). Return < 0 to stop. */
typedef int (*dsec_pool_fn)(const struct dsec_pool *pool, void *ctx);
int dsec_pool_foreach(const struct dsec_paths *p, dsec_pool_fn fn, void *ctx, struct dsec_err *err);

/* Prune every pool and remove the empty ones (dsec-reap --all, --orphans). 0 or -1. */
int dsec_pool_cleanup(const struct dsec_paths *p, struct dsec_err *err);

/* The pool as a dsec-ps record: {"pool":key,"image":…,"ready":N,"limits":{…},"net":…,
 * "oldest_us":…} (new reference). Reads the ready dir. */
json_t *dsec_pool_record(const struct dsec_pool *pool);

/* {"cpus":…,"memory":…,"pids":…,"disk":…} (new reference). */
json_t *dsec_pool_limits_json(const struct dsec_limits *l);

/* Count the sandbox state dirs of the run dir (live sandboxes, pools and claimed). -1 on
 * error. */
long dsec_pool_live(const struct dsec_paths *p, struct dsec_err *err);

/* MemAvailable from /proc/meminfo, bytes; 0 when it cannot be read. */
uint64_t dsec_mem_available(void);

/* Merge sandboxes/<id>/claim.json (what a claim changed: limits, created, ttl_us, env, labels,
 * "pool", "warm") into state, the object read from sandbox.json. For dsec_sandbox_load. 0 (also
 * when the sandbox was never claimed) or -1 when the file is unreadable. */
int dsec_pool_merge_claim(const char *dir, json_t *state);

/* Was sb claimed from a warm pool (claim.json present)? 1 or 0. */
int dsec_pool_claimed(const struct dsec_sandbox *sb);

/* Claims for one dsec-spawn run: each pool's ready dir is read once (again only when the
 * entries read are used up), and entries are tried from a per-process offset so concurrent
 * claimers rarely race for the same entry. */
struct dsec_claim_pool;
struct dsec_claimer {
	const struct dsec_paths *paths;
	const char *netpol; /* the request's nat policy (dsec_net_policy_canon), NULL for none */
	int loaded;
	size_t npools;
	struct dsec_claim_pool *pools;
};

/* Claim a ready sandbox matching sb's request (image, limits, net; sb->hostname empty), and
 * make it the request: cgroup limits that differ are written, TTL, env and labels replace the
 * pool's, the creation time becomes now, and its state says "warm":true. sb is filled from
 * the sandbox's state (release with dsec_sandbox_free; env and labels are new references).
 * The sandbox is pending until the caller emits its record and calls dsec_sandbox_commit.
 * Returns 1 claimed, 0 no match ready, -1 on error (a claimed sandbox that failed is
 * destroyed). */
int dsec_pool_claim(struct dsec_claimer *c, struct dsec_sandbox *sb, struct dsec_err *err);
void dsec_claimer_free(struct dsec_claimer *c);

#endif
