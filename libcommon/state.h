/* State directories, locks and atomic files. No daemon: everything dsec knows is in files under
 * the root (layers, images; persistent) and the run dir (sandboxes, pools; gone at reboot). */
#ifndef DSEC_STATE_H
#define DSEC_STATE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define DSEC_ROOT_DEFAULT "/var/lib/dsec"
#define DSEC_RUN_DEFAULT "/run/dsec"

struct dsec_paths {
	char root[PATH_MAX]; /* --root, $DSEC_ROOT, /var/lib/dsec */
	char run[PATH_MAX];  /* --run, $DSEC_RUN, /run/dsec */
};

/* Resolve root and run from the options (NULL when not given), then the environment, then the
 * defaults; made absolute. Creates nothing. Returns 0 or -1. */
int dsec_paths_init(struct dsec_paths *p, const char *root_opt, const char *run_opt,
		    struct dsec_err *err);

/* mkdir -p with mode for every component made. 0 or -1. */
int dsec_mkdir_p(const char *path, mode_t mode, struct dsec_err *err);

/* Write data to dir/name through a temporary file, fsync when durable, and rename over name,
 * so readers see the old content or the new, never a part. dirfd may be AT_FDCWD. 0 or -1. */
int dsec_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
		      int durable, struct dsec_err *err);

/* Read a whole small file (at most max bytes) into a new NUL-terminated buffer. Caller frees.
 * Does not follow a symlink in the last component. Returns length or -1. */
ssize_t dsec_read_file(int dirfd, const char *name, size_t max, char **out, struct dsec_err *err);

/* Write all n bytes of buf to fd (again after EINTR or a short write). 0 or -1 (errno set). */
int dsec_write_all(int fd, const void *buf, size_t n);

/* Read what one read(2) gives of a small kernel file (/proc, /sys) into buf (n bytes, kept
 * NUL-terminated). Returns the length, or -1 (nothing read, buf ""). */
ssize_t dsec_read_proc(const char *path, char *buf, size_t n);

/* The /proc/meminfo field key (e.g. "MemAvailable:") in bytes; 0 when missing. */
uint64_t dsec_meminfo(const char *key);

/* Take an flock on path (created 0600 when missing). wait: block; else fail with EWOULDBLOCK.
 * exclusive: LOCK_EX, else LOCK_SH. Returns the fd holding the lock (close it to release) or -1. */
int dsec_lock(const char *path, int exclusive, int wait, struct dsec_err *err);

/* dsec_lock waiting at most wait_us (0: not at all, UINT64_MAX: for good; dsec_lock is this
 * with WHAT NULL). A wait past a second says on stderr once "waiting for WHAT, held by pid N
 * (dsec-spawn, stopped)" (WHAT NULL: quiet, and a wait for good blocks in the kernel at once);
 * one that runs out fails with EWOULDBLOCK, and with WHAT a message naming the holders. */
int dsec_lock_until(const char *path, int exclusive, uint64_t wait_us, const char *what,
		    struct dsec_err *err);

/* Remove a tree below dirfd without following any symlink; tolerant of ENOENT. Does not cross
 * into other mounts (fails with EBUSY). 0 or -1. */
int dsec_rmtree_at(int dirfd, const char *name, struct dsec_err *err);
int dsec_rmtree(const char *path, struct dsec_err *err);

/* Parse "512", "64K", "1.5G", "2GiB", "1M"; bounded by max. 0 or -1 with a message naming what. */
int dsec_parse_size(const char *s, uint64_t max, uint64_t *out, const char *what,
		    struct dsec_err *err);
/* Parse "250ms", "30s", "5m", "1h", "2d", "1.5s"; a bare number is seconds. Microseconds. */
int dsec_parse_duration(const char *s, uint64_t max_us, uint64_t *out_us, const char *what,
			struct dsec_err *err);
/* Parse a whole decimal number in [min, max]. */
int dsec_parse_count(const char *s, long long min, long long max, long long *out, const char *what,
		     struct dsec_err *err);

/* Monotonic and wall clocks in microseconds. */
uint64_t dsec_now_us(void);

/* A progress line on stderr for an operation that takes over a second (an import, a commit, a
 * copy): shown when asked (want), stderr is a terminal and -q was not given; at most five times
 * a second, each line over the last. */
struct dsec_progress {
	int on, shown;
	uint64_t t0, last;
};
void dsec_progress_start(struct dsec_progress *p, int want);
/* "\rtool: " and fmt, when a line is due. */
void dsec_progress(struct dsec_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* End the line, if one was shown. */
void dsec_progress_end(struct dsec_progress *p);
/* For work split over forked workers: a count they add to (__atomic_add_fetch), shared with
 * this process when the line is on (one shared page, made at the first call), else one of
 * each process's own. Never NULL. A worker turns its copy of the line off. */
long *dsec_progress_counter(const struct dsec_progress *p);
/* waitpid(pid, ws, 0), showing "COUNT of TOTAL WHAT" (from *count) while it waits when the
 * line is on (then a child's exit is seen within 100 ms). As waitpid, EINTR retried. */
pid_t dsec_progress_waitpid(struct dsec_progress *p, pid_t pid, int *ws, const long *count,
			    long long total, const char *what);
uint64_t dsec_wall_us(void);

/* The directory of this program's own binary (/proc/self/exe) into buf, for the tools and
 * helpers installed next to it. 0, or -1 with err. */
int dsec_self_dir(char *buf, size_t n, struct dsec_err *err);

/* This node's name (hostname, or $DSEC_NODE). Static storage. */
const char *dsec_node(void);

#endif
