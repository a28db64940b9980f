/* dsec_sandbox_reset (sandbox.h): a sandbox made again under its own id, by swapping in a
 * ready one from a warm pool of its profile, else by making a fresh one and swapping that in. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "admit.h"
#include "ns.h"
#include "pool.h"

/* Give the sandbox whose holder is reachable through pidfd the host name name: join its uts
 * namespace (made by host root, so ours to change), set it, come back. 0 or -1. */
static int set_hostname(int pidfd, const char *name, struct dsec_err *err)
{
	int self = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC), rc = 0;

	if (self < 0)
		return dsec_err_sys(err, "open /proc/self/ns/uts");
	if (setns(pidfd, CLONE_NEWUTS) < 0)
		rc = dsec_err_sys(err, "join the uts namespace");
	else if (sethostname(name, strlen(name)) < 0)
		rc = dsec_err_sys(err, "sethostname '%s'", name);
	if (setns(self, CLONE_NEWUTS) < 0 && rc == 0)
		rc = dsec_err_sys(err, "return to our uts namespace");
	close(self);
	return rc;
}

/* Put w, a sandbox made or claimed for the reset (pending, under its own id and state dir), in
 * sb's place: w's state takes sb's id and host name, sb is marked pending, and one
 * renameat2(RENAME_EXCHANGE) swaps the two state dirs. Then *old is the replaced sandbox, out of
 * the id's way (its state under w's former dir; --orphans removes it should the caller die),
 * and sb is w. 0, or -1 with w destroyed and sb as it was. */
static int reset_swap_in(const struct dsec_paths *p, struct dsec_sandbox *sb,
			 struct dsec_sandbox *w, struct dsec_sandbox *old, struct dsec_err *err)
{
	char wdir[PATH_MAX], file[PATH_MAX + 32];

	snprintf(wdir, sizeof(wdir), "%s", w->dir);
	snprintf(w->id, sizeof(w->id), "%s", sb->id);
	snprintf(w->hostname, sizeof(w->hostname), "%s", sb->hostname);
	if (dsec_sandbox_save(p, w, err) < 0)
		goto fail;
	snprintf(file, sizeof(file), "%s/" DSEC_STATE_FILE, sb->dir);
	if (chmod(file, DSEC_STATE_PENDING_MODE) < 0) {
		dsec_err_sys(err, "%s: mark for removal", sb->id);
		goto fail;
	}
	/* one atomic step: the id's dir now holds the new sandbox, the other dir the old */
	if (syscall(SYS_renameat2, AT_FDCWD, wdir, AT_FDCWD, sb->dir, RENAME_EXCHANGE) < 0) {
		dsec_err_sys(err, "%s: swap state dirs", sb->id);
		chmod(file, DSEC_STATE_MODE);
		goto fail;
	}
	snprintf(w->dir, sizeof(w->dir), "%s", sb->dir);
	*old = *sb;
	snprintf(old->dir, sizeof(old->dir), "%s", wdir);
	*sb = *w;
	return 0;
fail:
	dsec_sandbox_destroy(p, w, NULL);
	dsec_sandbox_free(w);
	return -1;
}

/* Reset by swap: claim a ready sandbox of the same profile from a warm pool, give it sb's id
 * (state, host name, admission), and move sb out of the way for the caller to destroy. 1 when
 * swapped (*old is the replaced sandbox, sb the new one), 0 when no pool had one, -1. */
static int reset_swap(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_sandbox *old,
		      struct dsec_err *err)
{
	struct dsec_claimer c = {.paths = p};
	struct dsec_sandbox w = *sb;
	int64_t a[DSEC_R_N];
	int r, fd;

	/* env and labels are lent: a claim takes references of its own */
	w.hostname[0] = '\0';
	r = dsec_pool_claim(&c, &w, err);
	dsec_claimer_free(&c);
	if (r <= 0)
		return r < 0 ? dsec_err_wrap(err, "%s: reset from a warm pool", sb->id) : 0;
	/* w is the claimed sandbox, pending, under its own id and state dir */
	fd = dsec_sandbox_pidfd(&w, err);
	if (fd < 0 || set_hostname(fd, sb->hostname, err) < 0 ||
	    dsec_rootfs_rename_host(w.holder_pid, w.hostname, sb->hostname, err) < 0) {
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	close(fd);
	/* what the pool's sandbox asked of admission is now the id's: its old requests stay
	 * counted for the id, the pool sandbox's entry is taken back */
	dsec_admit_amounts(&w.req, a);
	for (int i = 0; i < DSEC_R_N; i++)
		a[i] = -a[i];
	if ((a[DSEC_R_CPU] || a[DSEC_R_MEMORY] || a[DSEC_R_PIDS] || a[DSEC_R_DISK]) &&
	    dsec_admit(p, w.id, w.holder_pid, w.holder_start, a, err) < 0)
		goto fail;
	return reset_swap_in(p, sb, &w, old, err) < 0 ? -1 : 1;
fail:
	dsec_sandbox_destroy(p, &w, NULL);
	dsec_sandbox_free(&w);
	return -1;
}

/* Reset without a pool: make the sandbox again, under a new id of its own, with sb's image
 * (looked up by name again: a re-composed image gives its new layers), profile and host name,
 * and swap it in. The id's admission entries stay, kept alive by the new holder its state
 * names; the new one asked for none. 0 or -1 (sb as it was). */
static int reset_fresh(const struct dsec_paths *p, struct dsec_sandbox *sb,
		       struct dsec_sandbox *old, struct dsec_err *err)
{
	struct dsec_sandbox n;

	memset(&n, 0, sizeof(n));
	snprintf(n.image, sizeof(n.image), "%s", sb->image);
	snprintf(n.hostname, sizeof(n.hostname), "%s", sb->hostname);
	n.limits = sb->limits;
	n.req = sb->req;
	n.cls = sb->cls;
	snprintf(n.io_dev, sizeof(n.io_dev), "%s", sb->io_dev);
	n.ttl_us = sb->ttl_us;
	n.net = sb->net;
	n.env = json_incref(sb->env);
	n.labels = json_incref(sb->labels);
	snprintf(n.workdir, sizeof(n.workdir), "%s", sb->workdir);
	snprintf(n.user, sizeof(n.user), "%s", sb->user);
	if (dsec_sandbox_create(p, &n, err) < 0) {
		dsec_sandbox_free(&n);
		return dsec_err_wrap(err, "%s: reset", sb->id);
	}
	return reset_swap_in(p, sb, &n, old, err);
}

int dsec_sandbox_reset(const struct dsec_paths *p, struct dsec_sandbox *sb,
		       struct dsec_sandbox *old, struct dsec_err *err)
{
	int warm;

	memset(old, 0, sizeof(*old));
	/* its veth, address and allow-list are made by dsec-spawn after create (net.h), from a
	 * policy the state does not keep */
	if (sb->net == DSEC_NET_NAT)
		return dsec_err_set(err, ENOTSUP,
				    "%s: reset of a --net nat sandbox is not supported", sb->id);
	warm = reset_swap(p, sb, old, err);
	if (warm == 0 && reset_fresh(p, sb, old, err) < 0)
		return -1;
	if (warm < 0 || dsec_sandbox_commit(sb, err) < 0)
		return -1;
	return warm;
}
