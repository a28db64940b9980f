/* The state of a sandbox: what dsec-spawn writes, what dsec-exec, dsec-reap and dsec-ps read.
 *
 * No daemon: a sandbox is its holder process plus one state dir under the run dir:
 *
 *   $DSEC_RUN/sandboxes/<id>/sandbox.json   the record below; first published by writing it in
 *                                           sandboxes/.tmp-<id>/ and renaming that dir, later
 *                                           replaced tmp+rename, never edited in place: readers
 *                                           see a whole file or none. Mode 0400 while the
 *                                           sandbox is pending (created, record not yet printed),
 *                                           0600 once handed out (dsec_sandbox_commit).
 *                                           The dir's mtime: the last start or end of a
 *                                           command in it (dsec_sandbox_touch)
 *   $DSEC_RUN/template/mnt                  bind mount of the template mount namespace (nsfs)
 *   $DSEC_RUN/template/layers/<hex>         marker: layer <hex> is mounted in the template
 *   $DSEC_RUN/cgspare/spare-<hex>.json      a reaped sandbox's cgroups kept for the next one
 *                                           (cgroup.h: dsec_cgspare_put)
 *   $DSEC_RUN/lock                          flock: shared by dsec-spawn while it creates
 *                                           sandboxes, exclusive by dsec-reap --orphans and by
 *                                           the template teardown of dsec-reap --all
 *
 * sandbox.json (one compact object):
 *   {"id":"sb-<12 hex>","image":"busybox","node":"host1",
 *    "layers":["sha256:…",…],                       bottom to top, for dsec-layer rm / gc
 *    "limits":{"cpus":1.0,"memory":B,"pids":N,"disk":B[,"io_bps":B,"io_iops":N,
 *              "io_device":"MAJ:MIN"]},
 *    "requests":{"cpus":0.1,"memory":B,"pids":N,"disk":B[,"io_weight":W]},"class":"ls"|"be",
 *                                                  (resource.h; absent in older state: zeros, ls)
 *    "created":<wall µs>,"ttl_us":<µs, 0 = none>,
 *    "hostname":"…","env":["K=V",…],"labels":{"k":"v",…},
 *    ["workdir":"/dir","user":"U[:G]",]             commands' defaults, from the image (store.h)
 *    "holder":{"pid":P,"start":T},                  T = field 22 of /proc/P/stat (clock ticks)
 *    "cgroup":{"version":2,"path":"/sys/fs/cgroup/dsec-…/sb-…"}
 *         or {"version":1,"paths":{"memory":"…","cpu":"…","cpuacct":"…","pids":"…",
 *                                  "freezer":"…"}}   (only the controllers present)
 *    "net":"none"|"host"|"nat",                    nat: net.h (its address: net-addr)
 *    "userns":null | {"uid":U,"gid":G,"count":N,   host ids that root inside maps to,
 *                     "owner":O}}                   and the namespace's owner (userns.h)
 *
 * Entering a sandbox (what dsec-exec does): pidfd = dsec_sandbox_pidfd(); then
 * setns(pidfd, dsec_sandbox_nsflags(sb)) joins every namespace of the holder at once (the kernel
 * orders user namespace first). After joining the mount namespace the caller's root and cwd are
 * the sandbox's rootfs (the overlay is stacked on the namespace's root mount and setns follows
 * mounts down), so no chroot is needed; chdir("/") anyway. Join the cgroup with
 * dsec_cgroup_attach() or, on v2, clone3(CLONE_INTO_CGROUP) with dsec_cgroup_open() (cgroup.h).
 * (dsec-spawn's own first process attaches itself by writing cgroup.procs, on v2 too: it runs on
 * its own stack with CLONE_VM|CLONE_VFORK, for which glibc has only clone(), not clone3.)
 */
#ifndef DSEC_SANDBOX_H
#define DSEC_SANDBOX_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "state.h"
#include "store.h"
#include "userns.h"

#define DSEC_ID_MAX 32       /* "sb-" + 12 hex, room to grow */
#define DSEC_HOSTNAME_MAX 64 /* HOST_NAME_MAX */
#define DSEC_CG_PATH_MAX 256
/* the state file in a sandbox's state dir, and its modes: handed out, pending */
#define DSEC_STATE_FILE "sandbox.json"
#define DSEC_STATE_MODE 0600
#define DSEC_STATE_PENDING_MODE 0400

/* Defaults of dsec-spawn (also in dsec-spawn(1)). */
#define DSEC_DEFAULT_CPUS 1.0
#define DSEC_DEFAULT_MEMORY (1ULL << 30)
#define DSEC_DEFAULT_PIDS 512
#define DSEC_DEFAULT_DISK (1ULL << 30)
#define DSEC_DEFAULT_TTL_US (3600ULL * 1000000)

struct dsec_limits {
	double cpus;     /* CPU bandwidth in CPUs, e.g. 0.5; 0 = unlimited */
	uint64_t memory; /* bytes; 0 = unlimited */
	uint64_t pids;   /* max tasks; 0 = unlimited */
	uint64_t disk;   /* size of the tmpfs holding the writable layer, bytes */
	uint64_t
	    io_bps; /* block I/O bytes/s, read and write each, on the node's io device; 0 = none */
	uint64_t io_iops; /* block I/O operations/s, read and write each; 0 = none */
	uint64_t nofile;  /* RLIMIT_NOFILE of its processes, soft and hard; 0 = DSEC_NOFILE */
};

/* What a sandbox is guaranteed (resource.h): CPU weight, memory protection; admission (admit.h)
 * sums them per node. 0 = nothing asked for. */
struct dsec_requests {
	double cpus;        /* CPUs */
	uint64_t memory;    /* bytes */
	uint64_t pids;      /* tasks (admission only) */
	uint64_t disk;      /* bytes of writable layer (admission only) */
	unsigned io_weight; /* 1..10000, 0 = the kernel's default */
};

/* Scheduling class: latency-sensitive (default) or best-effort (low weight, SCHED_IDLE, first
 * reclaimed). */
enum dsec_class { DSEC_CLASS_LS = 0, DSEC_CLASS_BE = 1 };

enum dsec_net { DSEC_NET_NONE = 0, DSEC_NET_HOST = 1, DSEC_NET_NAT = 2 /* net.h */ };

/* "none", "host" or "nat". */
const char *dsec_net_mode_name(enum dsec_net net);

/* v1 controllers dsec uses; index into dsec_cgroup.v1. */
enum dsec_cg_ctrl {
	DSEC_CG_MEMORY,
	DSEC_CG_CPU,
	DSEC_CG_CPUACCT,
	DSEC_CG_PIDS,
	DSEC_CG_FREEZER,
	DSEC_CG_BLKIO, /* only when the sandbox has io limits or an io weight */
	DSEC_CG_NCTRL
};

struct dsec_cgroup {
	int version;                              /* 0 none, 1, 2 */
	char v2[DSEC_CG_PATH_MAX];                /* version 2: the sandbox's cgroup dir */
	char v1[DSEC_CG_NCTRL][DSEC_CG_PATH_MAX]; /* version 1: one dir per controller, "" absent */
};

struct dsec_sandbox {
	char id[DSEC_ID_MAX];
	char image[DSEC_NAME_MAX + 1];
	char node[256];
	unsigned nlayers;
	char layers[DSEC_MAX_LAYERS][80]; /* "sha256:<hex>", bottom to top */
	struct dsec_limits limits;
	uint64_t created_us; /* wall clock */
	uint64_t ttl_us;     /* 0 = never expires */
	char hostname[DSEC_HOSTNAME_MAX + 1];
	json_t *env;                        /* array of "K=V" strings (owned; may be NULL) */
	char workdir[DSEC_WORKDIR_MAX + 1]; /* commands' default cwd, "" = "/" */
	char user[DSEC_USER_MAX + 1];       /* commands' default user, "" = root inside */
	json_t *labels;                     /* object of strings (owned; may be NULL) */
	pid_t holder_pid;
	unsigned long long holder_start; /* /proc/PID/stat field 22 */
	struct dsec_cgroup cg;
	enum dsec_net net;
	int userns;     /* 1 when the sandbox has its own user namespace */
	uid_t uid_base; /* userns only (userns.h): host uid of uid 1 inside, less 1 */
	gid_t gid_base; /* host gid of gid 0 inside */
	unsigned id_count;
	uid_t owner;              /* host uid owning its user namespace (userns.h), 0: host root */
	uid_t root_uid;           /* host uid of root inside: the owner, or uid_base */
	char dir[PATH_MAX];       /* $DSEC_RUN/sandboxes/<id> */
	struct dsec_requests req; /* resource.h; in the state as "requests" */
	enum dsec_class cls;      /* in the state as "class" */
	char io_dev[24];          /* "MAJ:MIN" the io limits apply to, "" none */
};

/* Set one resource limit from its text form, as an option or a spec record gives it: name is
 * "cpus" (0.01..4096), "memory" (4M..1P), "pids" (2..4194304), "disk" (1M..1P) or "net"
 * (none|host|nat; net may be NULL for the others). Every tool parses limits here, so the bounds are
 * the same everywhere. The message names "--NAME" when opt is set, else "'NAME'". 0 or -1. */
int dsec_limit_parse(const char *name, const char *val, int opt, struct dsec_limits *l,
		     enum dsec_net *net, struct dsec_err *err);

/* Is id a well-formed sandbox id ("sb-" + lowercase hex, no '/' or dots)? 1 or 0. */
int dsec_sandbox_id_ok(const char *id);

/* A new random id "sb-<12 hex>" into buf (at least DSEC_ID_MAX). 0 or -1. */
int dsec_sandbox_new_id(char *buf, struct dsec_err *err);

/* The sandbox's id mapping (count 0: no user namespace). */
static inline struct dsec_idmap dsec_sandbox_idmap(const struct dsec_sandbox *sb)
{
	struct dsec_idmap m = {0};

	if (sb->userns) {
		m.uid = sb->uid_base;
		m.gid = sb->gid_base;
		m.count = sb->id_count;
		m.root = sb->root_uid;
	}
	return m;
}

/* Read $DSEC_RUN/sandboxes/<id>/sandbox.json into sb (zeroed first). Returns 0; -1 with
 * errnum ENOENT when there is no such sandbox, EINVAL for a malformed id or file. On success
 * the caller releases sb with dsec_sandbox_free(). Does not check that the holder lives. */
int dsec_sandbox_load(const struct dsec_paths *p, const char *id, struct dsec_sandbox *sb,
		      struct dsec_err *err);

/* Fill sb (zeroed by the caller) from o, an object in the sandbox.json format. 0, or -1 with err
 * naming the member at fault. Release with dsec_sandbox_free. */
int dsec_sandbox_parse(json_t *o, struct dsec_sandbox *sb, struct dsec_err *err);

/* Write sb->dir/sandbox.json (tmp+rename), creating sb->dir; a pending state stays pending. 0
 * or -1. */
int dsec_sandbox_save(const struct dsec_paths *p, const struct dsec_sandbox *sb,
		      struct dsec_err *err);

/* sb as a JSON object in the sandbox.json format (new reference). */
json_t *dsec_sandbox_to_json(const struct dsec_sandbox *sb);
/* The commands' defaults of sb, "workdir" and "user", into o when set (the state file, a
 * claim, the journal's sandbox entry). */
void dsec_sandbox_defaults_json(json_t *o, const struct dsec_sandbox *sb);

/* Release what load or spawn allocated (env, labels). sb stays usable for its plain fields. */
void dsec_sandbox_free(struct dsec_sandbox *sb);

/* Start time (field 22 of /proc/PID/stat) of pid (0: the caller, through /proc/self), or 0 when
 * it does not exist. No allocation: safe in a vfork-style child. */
unsigned long long dsec_proc_start_time(pid_t pid);

/* A pidfd (O_CLOEXEC) for the holder, checked against pid reuse: the process must exist, not be
 * a zombie, and have the recorded start time. Returns the fd, or -1 with errnum ESRCH when the holder is gone.
 * Caller closes. */
int dsec_sandbox_pidfd(const struct dsec_sandbox *sb, struct dsec_err *err);

/* Is the holder alive (same check as dsec_sandbox_pidfd, no fd kept)? 1 or 0. */
int dsec_sandbox_alive(const struct dsec_sandbox *sb);

/* Mark now as the sandbox's last activity: the mtime of its state dir (dir, sb->dir), which
 * dsec-exec sets when a command starts and when it ends. Errors are ignored. No allocation. */
void dsec_sandbox_touch(const char *dir);

/* The wall time (µs) of the sandbox's last activity: the later of its creation or claim and
 * the last dsec_sandbox_touch. */
uint64_t dsec_sandbox_last_active(const struct dsec_sandbox *sb);

/* Is the sandbox idle: its holder alive, not paused, no task in it but the holder? Then 1, and
 * *idle_us is the time since its last activity (the later of its creation or claim and the
 * last dsec_sandbox_touch) up to now_us (wall clock). 0 when something runs in it, it is
 * paused or dead, or its task count cannot be read. */
int dsec_sandbox_idle(const struct dsec_sandbox *sb, uint64_t now_us, uint64_t *idle_us);

/* Is sandbox id pending: being created or claimed, not yet handed out (or its creator died
 * before it did)? 1 or 0. */
int dsec_sandbox_pending(const struct dsec_paths *p, const char *id);

/* The CLONE_NEW* flags of the namespaces a process joins to enter the sandbox: mount, pid, uts,
 * ipc, cgroup, net (unless --net host), user (when sb->userns). For setns(pidfd, flags). */
int dsec_sandbox_nsflags(const struct dsec_sandbox *sb);

/* Create a sandbox: cgroup, holder, namespaces, rootfs. sb carries the request (image, limits,
 * ttl, hostname, env, labels, net; id filled when empty) and gets the rest on success; the
 * state file is written before it returns. On failure nothing of the sandbox is left (what a
 * kill -9 leaves behind is found by dsec_sandbox_orphans). The caller holds the run dir lock
 * shared (dsec_run_lock). Not thread-safe; forks. */
int dsec_sandbox_create(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_err *err);

/* Hand the sandbox out: clear the "pending" mark (the state file's mode 0400) create left, after
 * the caller has emitted its record. Until then dsec_sandbox_orphans counts it as an orphan (its
 * creator died before anyone learned of it). 0 or -1. */
int dsec_sandbox_commit(const struct dsec_sandbox *sb, struct dsec_err *err);

/* Kill every process of the sandbox, wait until they are gone, remove its cgroup and its state.
 * Tolerant of parts already gone (a dead holder, a missing cgroup). 0 or -1. */
int dsec_sandbox_destroy(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_err *err);

/* The same in two halves, for tearing many down at once: dsec_sandbox_kill thaws the sandbox
 * and sends its holder SIGKILL, returning the holder's pidfd (readable once every process of
 * the sandbox is gone) or -1 when there is no holder left to wait for; then, once it is
 * readable (or after a timeout), dsec_sandbox_destroy_rest removes the rest (cgroup, after
 * killing whatever is still in it; network; state). */
int dsec_sandbox_kill(const struct dsec_sandbox *sb);
int dsec_sandbox_destroy_rest(const struct dsec_paths *p, struct dsec_sandbox *sb,
			      struct dsec_err *err);

/* Reset sb to its image's state under the same id, keeping its image, limits, requests,
 * class, TTL (counted anew), host name, network mode, env and labels. Not for --net nat
 * sandboxes (ENOTSUP). The caller holds the run lock shared, as for create.
 *
 * A new sandbox takes sb's place: a ready one of the same profile claimed from a warm pool
 * (pool.h) when there is one, else one made now with sb's image (looked up by name again) and
 * profile. It takes sb's id, state dir and host name in one renameat2(RENAME_EXCHANGE) of the
 * two state dirs; *old then receives the replaced sandbox, already out of the id's way and
 * marked pending (--orphans removes it should the caller die): the caller destroys it with
 * dsec_sandbox_destroy once it has reported, and frees it. On success sb describes the new
 * sandbox, handed out. 1 (from a pool), 0 (made now), or -1 with sb as it was. */
int dsec_sandbox_reset(const struct dsec_paths *p, struct dsec_sandbox *sb,
		       struct dsec_sandbox *old, struct dsec_err *err);

/* Take the run dir lock ($DSEC_RUN/lock): exclusive or shared, waiting. Returns the fd (close
 * to release) or -1. Creates $DSEC_RUN when missing. */
int dsec_run_lock(const struct dsec_paths *p, int exclusive, struct dsec_err *err);

/* Callback for every sandbox id that has a state dir, in directory order. Return < 0 to stop. */
typedef int (*dsec_sandbox_fn)(const char *id, void *ctx);
int dsec_sandbox_foreach(const struct dsec_paths *p, dsec_sandbox_fn fn, void *ctx,
			 struct dsec_err *err);

/* Clean what crashed tools left in this run dir: state without a live holder, cgroups without
 * state (killing what runs in them), state dirs without sandbox.json. Call with the run lock
 * held exclusive. fn (may be NULL) is told each id removed. Returns the count or -1. */
int dsec_sandbox_orphans(const struct dsec_paths *p, dsec_sandbox_fn fn, void *ctx,
			 struct dsec_err *err);

/* When no sandbox state is left in the run dir: tear the template namespace down and remove the
 * parent cgroups. Call with the run lock held exclusive. Returns 1 when it cleaned, 0 when
 * sandboxes remain, -1 on error. */
int dsec_run_cleanup(const struct dsec_paths *p, struct dsec_err *err);

/* The node's resolver configuration, which a --net host sandbox gets as its /etc/resolv.conf
 * (read at each call: a long dsec-spawn sees the node's changes), in a static buffer; NULL
 * when the node has none or an empty one. */
const char *dsec_host_resolv(void);

#endif
