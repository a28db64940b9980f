/* Capabilities of a sandbox's processes: a bounding set no wider than Docker's default, built
 * in the parent, applied in the forked child just before execve (then dsec_seccomp_apply).
 *
 * Kept by default: chown, dac_override, fowner, fsetid, kill, setgid, setuid, setpcap,
 * net_bind_service, setfcap, audit_write. Dropped against Docker's list: sys_chroot (the
 * sandbox root is reached by chroot, DESIGN.md), mknod (no device may appear in a sandbox) and
 * net_raw (raw and packet sockets are kernel attack surface; ping needs it). Effective and
 * permitted hold the kept set, inheritable and ambient are empty (so a non-root program cannot
 * gain capabilities from file capabilities, CVE-2022-24769), uids are left alone: root inside
 * stays uid 0 and regains the kept set, no more, at every execve. */
#ifndef DSEC_CAPS_H
#define DSEC_CAPS_H

#include <stdint.h>

#include "caps-default.h"
#include "err.h"

struct dsec_caps; /* opaque: the prepared sets */

#define DSEC_CAPS_DEFAULT                                                                          \
	"chown,dac_override,fowner,fsetid,kill,setgid,setuid,setpcap,net_bind_service,setfcap,"    \
	"audit_write"

/* Prepare the capability sets from list, a comma-separated list of capability names
 * ("chown,kill" or "cap_chown,cap_kill"), "none" for no capability at all, or NULL for
 * DSEC_CAPS_DEFAULT. Names outside Docker's default set (the kept ones plus sys_chroot, mknod,
 * net_raw) are refused. On success *out owns a new object (dsec_caps_free). Returns 0, or -1
 * with err naming the bad entry. Allocates: call before fork. */
int dsec_caps_prepare(const char *list, struct dsec_caps **out, struct dsec_err *err);

/* Drop every other capability from the bounding set, clear the ambient set, and set
 * effective, permitted and inheritable as prepared. Needs CAP_SETPCAP for the bounding set
 * (root of the sandbox's user namespace has it); a capability already out of the bounding set
 * is fine. Async-signal-safe, allocates nothing: for a forked child. Returns 0, or -1 with err
 * filled (without strerror's locale machinery). */
int dsec_caps_apply(const struct dsec_caps *caps, struct dsec_err *err);

/* The kept capabilities as a bit mask (bit n = capability n). */
uint64_t dsec_caps_mask(const struct dsec_caps *caps);

/* Free an object from dsec_caps_prepare; NULL is fine. */
void dsec_caps_free(struct dsec_caps *caps);

/* dsec_caps_prepare(NULL) + dsec_caps_apply + dsec_caps_free in one call, for a process that
 * is about to exec and may allocate (a single-threaded parent, or before fork). Returns 0 or
 * -1. */
int dsec_caps_drop(struct dsec_err *err);

#endif
