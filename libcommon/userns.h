/* User namespaces: the host ids root inside a sandbox maps to.
 *
 * Every sandbox runs in a user namespace of its own whose ids 1..count-1 map to dsec's range
 * of host ids: the entry named "dsec" in /etc/subuid and /etc/subgid, made on first use (the
 * first free 65536-aligned block at or above 100000 that no entry of either file overlaps) when
 * missing. Root inside is a host uid of its own, the owner of its namespace (below): the kernel
 * counts some things per host uid alone (epoll watches, descriptors in flight over unix
 * sockets, pipe buffers), and one sandbox's root must not use up another's. Groups are shared:
 * gid 0..count-1 is the range's. The layers are mounted once per node without an id mapping
 * and each sandbox gets idmapped copies of them with its own (EROFS, tmpfs and the dir-format
 * layers' filesystems take idmapped mounts), so files owned by root in a layer look owned by
 * root inside and by the sandbox's unprivileged root on the host. */
#ifndef DSEC_USERNS_H
#define DSEC_USERNS_H

#include <sys/types.h>

#include "err.h"

#define DSEC_SUBID_NAME "dsec"
#define DSEC_SUBID_COUNT 65536U
#define DSEC_SUBID_MIN 100000U

struct dsec_idmap {
	uid_t uid;      /* first host uid of the range: uid+i is uid i inside, for i >= 1 */
	gid_t gid;      /* host gid of root inside; gid+i is gid i inside */
	unsigned count; /* ids mapped; 0: no user namespace */
	uid_t root;     /* host uid of root inside: uid when unset (0), or an owner uid */
};

/* The uid inside of host uid h (-1: not mapped). */
static inline long dsec_idmap_inside(const struct dsec_idmap *m, unsigned long h)
{
	if (m->root && m->root != m->uid && (h == m->root || h == m->uid))
		return h == m->root ? 0 : -1;
	return h >= m->uid && h - m->uid < m->count ? (long)(h - m->uid) : -1;
}

/* dsec's range from /etc/subuid and /etc/subgid ($DSEC_SUBUID_FILE, $DSEC_SUBGID_FILE for
 * tests), appending an entry to both when either has none. 0 or -1. */
int dsec_userns_range(struct dsec_idmap *m, struct dsec_err *err);

/* Pick the first free block of count ids at or above min, aligned to count, overlapping no
 * "name:start:count" line of a or b (file contents, NUL-terminated). Returns the start, or 0
 * when none is left below 2^32. Exposed for the unit test. */
unsigned long dsec_subid_free(const char *a, const char *b, unsigned long min, unsigned long count);

/* Look up name's entry in a subid file's contents: 0 with *start and *count set, -1 if none. */
int dsec_subid_find(const char *text, const char *name, unsigned long *start, unsigned long *count);

/* The owners of the sandboxes' user namespaces: one host uid per live sandbox, base + the
 * holder's host pid, from a block of DSEC_OWNER_COUNT uids (one per possible pid) named
 * "dsec-owner" in /etc/subuid, made on first use like dsec's range. No process runs as these
 * uids; a namespace owned by one of them has the kernel count per owner what it limits per
 * user (holder.c), so a sandbox cannot use up another's share, or host root's. */
#define DSEC_OWNER_NAME "dsec-owner"
#define DSEC_OWNER_COUNT 4194304UL /* PID_MAX_LIMIT on 64-bit */

/* The first uid of the "dsec-owner" block ($DSEC_SUBUID_FILE for tests), appending the entry
 * when missing. 0 or -1. */
int dsec_userns_owners(unsigned long *base, struct dsec_err *err);

/* An fd (O_CLOEXEC) of a new user namespace with mapping m ("0 root 1" and "1 uid+1 count-1"
 * when m->root is another uid, else "0 uid count"; "0 gid count"), owned by host uid owner (0:
 * by root), for setns and mount_setattr(MOUNT_ATTR_IDMAP). A short-lived child sharing our
 * memory makes it: safe in a CLONE_VM child of a threaded process (no allocation, no libc
 * set*id broadcast). -1 on error. */
int dsec_userns_fd(const struct dsec_idmap *m, unsigned long owner, struct dsec_err *err);

/* The same in three steps, so that the caller works while the child runs: start the child
 * (owner is known by then), finish (write the maps, get the fd; the child then exits), and reap
 * it before our memory goes (an exec, say). One at a time per process. */
int dsec_userns_start(unsigned long owner, struct dsec_err *err);
int dsec_userns_finish(const struct dsec_idmap *m, struct dsec_err *err);
void dsec_userns_reap(void);

#endif
