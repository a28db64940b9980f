/* Namespaces and mounts of a sandbox.
 *
 * The template mount namespace, one per run dir: its root is a private tmpfs holding
 *   /l/<hex>   each layer any sandbox of this run dir uses, mounted read-only once (EROFS straight
 *              from the layer file, or a bind mount of a dir-format layer)
 *   /sb        an empty dir where each sandbox mounts its own tmpfs
 * and nothing of the host (made by one pivot_root at creation). It is pinned by a bind mount of
 * its nsfs file on $DSEC_RUN/template/mnt, so it needs no process. A sandbox enters it, unshares a
 * copy (cost: a handful of mounts, whatever the number of sandboxes), mounts its tmpfs on /sb and
 * the overlay on /sb/r, moves the overlay onto / and chroots: no pivot_root per sandbox, nothing
 * above the root to escape to, and the host's mount table never changes.
 *
 * What still grows with the number of live sandboxes (measured, 10 vs 2,000 live: 5.2 vs 7.5 ms
 * CPU per spawn): each new memory cgroup allocates shrinker info sized by the number of
 * superblocks on the host (each sandbox adds 4: its tmpfs, which holds /dev too, overlay, proc,
 * devpts), and setting a CFS quota walks every cpu cgroup.
 *
 * User namespace (unless the template was made with DSEC_USERNS=0): the template records dsec's
 * id range (userns.h) in $DSEC_RUN/template/userns and mounts every layer idmapped with it, so
 * root-owned layer files belong to the sandbox's root. Every other namespace of a sandbox (mount,
 * pid, uts, ipc, net, cgroup) is made by host root and so owned by the initial user namespace;
 * only the holder then moves into a new user namespace (the parent writes its maps), and every
 * process dsec-exec starts joins it. Root inside therefore has no capability over any of the
 * sandbox's own namespaces: it cannot mount or unmount (the /proc and /sys masks stay), set the
 * hostname, or configure its network. The overlay is mounted by host root over the idmapped
 * lowers with its upper dir owned by the sandbox's root: files show as root's inside and writes
 * work (copy-up and whiteouts are done with the mounter's credentials).
 *
 * Template contents besides /l and /sb: /s, a read-only non-recursive bind of the host's sysfs
 * that each sandbox binds on its /sys (no sysfs superblock per sandbox; the host's /sys/class/net
 * names show, nothing of it is writable), and /m, an empty read-only dir bound over what is
 * masked (/proc/acpi, /sys/firmware, …). Files masked in /proc get /dev/null bound over them. */
#ifndef DSEC_NS_H
#define DSEC_NS_H

#include <stdint.h>

#include "err.h"
#include "state.h"
#include "store.h"
#include "userns.h"

/* What the sandbox child needs to build its rootfs, prepared by the parent before clone so the
 * child does not allocate. */
struct dsec_rootfs_spec {
	int template_fd;         /* the template mount namespace (nsfs fd) */
	char overlay_opts[4096]; /* "lowerdir=/l/<top>:…,upperdir=/sb/u,workdir=/sb/w,…" */
	uint64_t disk;           /* bytes for the tmpfs holding upper and work */
	const char *hostname;    /* NULL: leave */
	const char *resolv;      /* --net host: the node's resolv.conf, for /etc/resolv.conf */
	int loopback;            /* bring lo up (own network namespace) */
	struct dsec_idmap map;   /* the sandbox's ids on the host (count 0: no user namespace) */
	int userns_fd;           /* its user namespace, for its idmapped layers; -1: none */
	unsigned nlayers;        /* the layers' mount points in the template, bottom first */
	char layer_mnt[DSEC_MAX_LAYERS][40];
	int ncg;                /* its own cgroup dirs, shown read-only at /sys/fs/cgroup: */
	int cg_own;             /* the first cg_own are dsec's (the others may be missing) */
	const char *cg_dir[8];  /* host paths */
	const char *cg_name[8]; /* v1: the hierarchy's name there; v2: NULL (the dir is it) */
};

/* Open the template mount namespace of this run dir, creating it when missing or stale. Takes
 * $DSEC_RUN/template.lock while it creates. Returns an O_CLOEXEC fd or -1. */
int dsec_template_open(const struct dsec_paths *p, struct dsec_err *err);

/* Make sure every layer of img is mounted in the template (tmplfd from dsec_template_open).
 * Forks a helper for the layers not mounted yet; a marker under $DSEC_RUN/template/layers
 * remembers each. 0 or -1. */
int dsec_template_layers(const struct dsec_paths *p, int tmplfd, const struct dsec_image *img,
			 struct dsec_err *err);

/* Tear the template down: unmount its pin and remove $DSEC_RUN/template. Live sandboxes keep
 * their own copies of the layer mounts. 0 or -1. */
int dsec_template_destroy(const struct dsec_paths *p, struct dsec_err *err);

/* The id mapping the template's layers are mounted with (count 0: no user namespace), as
 * recorded when it was made. 0 or -1. */
int dsec_template_idmap(const struct dsec_paths *p, struct dsec_idmap *m, struct dsec_err *err);

/* Is the template of this run dir present (pinned)? 1 or 0. */
int dsec_template_exists(const struct dsec_paths *p);

/* Fill spec->overlay_opts for img (lowerdirs top first). 0 or -1 (too many/long layers). */
int dsec_rootfs_overlay_opts(const struct dsec_image *img, struct dsec_rootfs_spec *spec,
			     struct dsec_err *err);

/* In the sandbox's first process (pid 1 of a new pid namespace, in new uts/ipc/net namespaces):
 * enter the template, unshare mount and cgroup namespaces, mount tmpfs, overlay, /proc, /dev,
 * move the overlay to / and chroot into it, set the hostname, bring lo up. Safe after fork
 * (no allocation). Returns an O_PATH fd (O_CLOEXEC) of the sandbox's tmpfs root, unreachable by
 * path once the overlay covers it, which the holder keeps as fd DSEC_HOLDER_TMPFS_FD so that
 * host-side code reaches the upper dir at /proc/HOLDER/fd/4/u; or -1. */
int dsec_rootfs_setup(const struct dsec_rootfs_spec *spec, struct dsec_err *err);

/* The line dsec_rootfs_setup adds to the sandbox's /etc/hosts so that its host name resolves
 * inside (Java's getLocalHost, sudo, MPI and the like look it up). */
/* ptys a sandbox may have open at once (its devpts' max=): the kernel's limit,
 * kernel.pty.max, counts every devpts instance of the node together */
#define DSEC_PTYS_MAX 64
#define DSEC_HOSTS_SELF "127.0.1.1\t"

/* The first line of the /etc/resolv.conf dsec writes for a --net nat sandbox whose allow-list
 * names resolvers (port 53): "nameserver ADDR" lines follow, nothing else. */
#define DSEC_RESOLV_NAT_MARK "# dsec-spawn --net nat: the resolvers --allow names\n"

/* Is text a resolv.conf dsec wrote for --net nat (DSEC_RESOLV_NAT_MARK, then only nameserver
 * lines)? */
int dsec_resolv_is_nat(const char *text, size_t n);

/* Open path (relative) inside the sandbox whose holder is pid, from outside: every link is
 * resolved inside its root and no magic link is followed (openat2 RESOLVE_IN_ROOT). An fd, or
 * -1 with errno set. */
int dsec_rootfs_open(pid_t pid, const char *path, int flags, mode_t mode);

/* After the host name of the sandbox whose holder is pid changed from old to name: its line in
 * the sandbox's /etc/hosts follows (opened from outside, every link resolved inside). 0 when
 * there is no such line, 0 or -1. */
int dsec_rootfs_rename_host(pid_t pid, const char *old, const char *name, struct dsec_err *err);

#define DSEC_HOLDER_TMPFS_FD 4
#define DSEC_ROOTFS_UPPER "u" /* the overlay's upper dir, relative to the tmpfs root */

/* The hex part of "sha256:<hex>" (or the id itself when it has no prefix). */
const char *dsec_layer_hex(const char *layer_id);

#endif
