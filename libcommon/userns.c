#include "userns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <linux/securebits.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "state.h"

int dsec_subid_find(const char *text, const char *name, unsigned long *start, unsigned long *count)
{
	size_t nlen = strlen(name);

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		char *end;

		if (strncmp(l, name, nlen) || l[nlen] != ':')
			continue;
		*start = strtoul(l + nlen + 1, &end, 10);
		if (*end != ':')
			continue;
		*count = strtoul(end + 1, &end, 10);
		if (*count == 0 || (*end && *end != '\n'))
			continue;
		return 0;
	}
	return -1;
}

/* Does [s, s+n) overlap any "name:start:count" line of text? */
static int overlaps(const char *text, unsigned long s, unsigned long n)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *c = strchr(l, ':');
		unsigned long a, k;
		char *end;

		if (!c || (strchr(l, '\n') && c > strchr(l, '\n')))
			continue;
		a = strtoul(c + 1, &end, 10);
		if (*end != ':')
			continue;
		k = strtoul(end + 1, &end, 10);
		if (a < s + n && s < a + k)
			return 1;
	}
	return 0;
}

unsigned long dsec_subid_free(const char *a, const char *b, unsigned long min, unsigned long count)
{
	unsigned long s = (min + count - 1) / count * count;

	for (; s + count <= 0xffffffffUL; s += count)
		if (!overlaps(a, s, count) && !overlaps(b, s, count))
			return s;
	return 0;
}

static const char *subid_file(const char *env, const char *dflt)
{
	const char *e = getenv(env);

	return e && *e ? e : dflt;
}

/* Read a subid file; a missing one reads as empty. */
static char *read_subid(const char *path, struct dsec_err *err)
{
	char *s = NULL;

	if (dsec_read_file(AT_FDCWD, path, 1 << 20, &s, err) < 0) {
		if (err->errnum != ENOENT)
			return NULL;
		s = strdup("");
		if (!s)
			dsec_err_set(err, ENOMEM, "out of memory");
	}
	return s;
}

static int append_line(const char *path, const char *old, const char *line, struct dsec_err *err)
{
	size_t n = strlen(old);
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	char buf[128];
	int len;

	if (fd < 0)
		return dsec_err_sys(err, "open '%s'", path);
	len = snprintf(buf, sizeof(buf), "%s%s\n", n && old[n - 1] != '\n' ? "\n" : "", line);
	if (write(fd, buf, (size_t)len) != len || fsync(fd) < 0) {
		dsec_err_sys(err, "append to '%s'", path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* One writer of the subid files at a time: the lock is the uid file itself, never replaced.
 * Returns the fd holding it, or -1. */
static int lock_subid(const char *uf, struct dsec_err *err)
{
	int fd = open(uf, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);

	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		dsec_err_sys(err, "lock '%s'", uf);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Append the entry "name:start:count" to the subid file at path, whose contents are old. */
static int append_entry(const char *path, const char *old, const char *name, unsigned long start,
			unsigned long count, struct dsec_err *err)
{
	char line[96];

	snprintf(line, sizeof(line), "%s:%lu:%lu", name, start, count);
	return append_line(path, old, line, err);
}

int dsec_userns_range(struct dsec_idmap *m, struct dsec_err *err)
{
	const char *uf = subid_file("DSEC_SUBUID_FILE", "/etc/subuid");
	const char *gf = subid_file("DSEC_SUBGID_FILE", "/etc/subgid");
	unsigned long us, uc, gs, gc, s;
	char *u = NULL, *g = NULL;
	int lfd = -1, rc = -1;

	for (int locked = 0;; locked = 1) {
		free(u);
		free(g);
		g = NULL;
		if (!(u = read_subid(uf, err)) || !(g = read_subid(gf, err)))
			goto out;
		if (dsec_subid_find(u, DSEC_SUBID_NAME, &us, &uc) == 0 &&
		    dsec_subid_find(g, DSEC_SUBID_NAME, &gs, &gc) == 0)
			break;
		if (locked)
			break;
		if ((lfd = lock_subid(uf, err)) < 0)
			goto out;
	}
	if (dsec_subid_find(u, DSEC_SUBID_NAME, &us, &uc) < 0) {
		s = dsec_subid_free(u, g, DSEC_SUBID_MIN, DSEC_SUBID_COUNT);
		if (!s) {
			dsec_err_set(err, ENOSPC, "no free range of %u ids in '%s' and '%s'",
				     DSEC_SUBID_COUNT, uf, gf);
			goto out;
		}
		if (append_entry(uf, u, DSEC_SUBID_NAME, s, DSEC_SUBID_COUNT, err) < 0)
			goto out;
		us = s;
		uc = DSEC_SUBID_COUNT;
	}
	if (dsec_subid_find(g, DSEC_SUBID_NAME, &gs, &gc) < 0) {
		s = overlaps(g, us, uc) ? dsec_subid_free(u, g, DSEC_SUBID_MIN, uc) : us;
		if (!s) {
			dsec_err_set(err, ENOSPC, "no free range of %lu ids in '%s'", uc, gf);
			goto out;
		}
		if (append_entry(gf, g, DSEC_SUBID_NAME, s, uc, err) < 0)
			goto out;
		gs = s;
		gc = uc;
	}
	if (us == 0 || gs == 0) {
		dsec_err_set(err, EINVAL, "'%s' entry in '%s'/'%s' maps root to host root",
			     DSEC_SUBID_NAME, uf, gf);
		goto out;
	}
	m->uid = (uid_t)us;
	m->gid = (gid_t)gs;
	m->count = (unsigned)(uc < gc ? uc : gc);
	rc = 0;
out:
	if (lfd >= 0)
		close(lfd);
	free(u);
	free(g);
	return rc;
}

int dsec_userns_owners(unsigned long *base, struct dsec_err *err)
{
	const char *uf = subid_file("DSEC_SUBUID_FILE", "/etc/subuid");
	const char *gf = subid_file("DSEC_SUBGID_FILE", "/etc/subgid");
	unsigned long start, count;
	char *u = NULL, *g = NULL;
	int lfd = -1, rc = -1;

	for (int locked = 0;; locked = 1) {
		free(u);
		if (!(u = read_subid(uf, err)))
			goto out;
		if (dsec_subid_find(u, DSEC_OWNER_NAME, &start, &count) == 0) {
			if (count < DSEC_OWNER_COUNT || start == 0) {
				dsec_err_set(err, EINVAL, "'%s' entry in '%s': fewer than %lu ids",
					     DSEC_OWNER_NAME, uf, DSEC_OWNER_COUNT);
				goto out;
			}
			*base = start;
			rc = 0;
			goto out;
		}
		if (locked)
			break;
		if ((lfd = lock_subid(uf, err)) < 0)
			goto out;
	}
	/* clear of every block either file names, so no one's subordinate ids are owners */
	if (!(g = read_subid(gf, err)))
		goto out;
	start = dsec_subid_free(u, g, DSEC_SUBID_MIN, DSEC_OWNER_COUNT);
	if (!start) {
		dsec_err_set(err, ENOSPC, "no free block of %lu ids in '%s'", DSEC_OWNER_COUNT, uf);
		goto out;
	}
	if (append_entry(uf, u, DSEC_OWNER_NAME, start, DSEC_OWNER_COUNT, err) < 0)
		goto out;
	*base = start;
	rc = 0;
out:
	if (lfd >= 0)
		close(lfd);
	free(u);
	free(g);
	return rc;
}

static int write_map(unsigned long pid, const char *file, const char *buf, int n,
		     struct dsec_err *err)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%lu/%s", pid, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return dsec_err_sys(err, "open '%s'", path);
	if (write(fd, buf, (size_t)n) != n) {
		dsec_err_sys(err, "write '%s'", path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* What the maker of a user namespace and its child share (one at a time per process). */
struct maker {
	int state; /* 0 starting, 1 in its namespace, 2 to exit, -1 failed (errnum) */
	int errnum;
	unsigned long owner, host_pid;
	pid_t pid;
};

static struct maker mk;
static char mk_stack[16384] __attribute__((aligned(16)));

static long futex(int *addr, int op, int val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* The child: raw system calls only (it shares our memory, and errno with it), then it waits in
 * its new namespace until told to exit. Its effective uid is the owner's, its capabilities kept
 * (no set*id fixup): the namespace belongs to that uid. */
static int maker_child(void *arg)
{
	struct maker *k = arg;
	char self[24];
	long n, e = 0;

	if (k->owner &&
	    (syscall(SYS_prctl, PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0 ||
	     syscall(SYS_setresuid, -1, k->owner, -1) < 0))
		e = 1;
	/* its pid in our /proc, which is not its own pid namespace's when we are pid 1 of one */
	n = e ? -1 : syscall(SYS_readlinkat, AT_FDCWD, "/proc/self", self, sizeof(self) - 1);
	for (long i = 0; i < n && self[i] >= '0' && self[i] <= '9'; i++)
		k->host_pid = k->host_pid * 10 + (unsigned long)(self[i] - '0');
	if (e || n <= 0 || syscall(SYS_unshare, CLONE_NEWUSER) < 0) {
		k->errnum = n == 0 ? EIO : errno;
		__atomic_store_n(&k->state, -1, __ATOMIC_RELEASE);
		futex(&k->state, FUTEX_WAKE, 1);
		syscall(SYS_exit, 1);
	}
	__atomic_store_n(&k->state, 1, __ATOMIC_RELEASE);
	futex(&k->state, FUTEX_WAKE, 1);
	while (__atomic_load_n(&k->state, __ATOMIC_ACQUIRE) == 1)
		futex(&k->state, FUTEX_WAIT, 1);
	syscall(SYS_exit, 0);
	return 0;
}

int dsec_userns_start(unsigned long owner, struct dsec_err *err)
{
	memset(&mk, 0, sizeof(mk));
	mk.owner = owner;
	mk.pid = clone(maker_child, mk_stack + sizeof(mk_stack), CLONE_VM | SIGCHLD, &mk);
	if (mk.pid < 0)
		return dsec_err_sys(err, "clone");
	return 0;
}

int dsec_userns_finish(const struct dsec_idmap *m, struct dsec_err *err)
{
	char buf[96], path[64];
	int fd = -1, n, st;

	while ((st = __atomic_load_n(&mk.state, __ATOMIC_ACQUIRE)) == 0)
		futex(&mk.state, FUTEX_WAIT, 0);
	if (st < 0) {
		dsec_err_set(err, mk.errnum, "cannot create a user namespace");
		return -1;
	}
	if (m->root && m->root != m->uid)
		n = snprintf(buf, sizeof(buf), "0 %lu 1\n1 %lu %u\n", (unsigned long)m->root,
			     (unsigned long)m->uid + 1, m->count - 1);
	else
		n = snprintf(buf, sizeof(buf), "0 %lu %u\n", (unsigned long)m->uid, m->count);
	if (write_map(mk.host_pid, "uid_map", buf, n, err) < 0)
		goto out;
	n = snprintf(buf, sizeof(buf), "0 %lu %u\n", (unsigned long)m->gid, m->count);
	if (write_map(mk.host_pid, "gid_map", buf, n, err) < 0)
		goto out;
	snprintf(path, sizeof(path), "/proc/%lu/ns/user", mk.host_pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		dsec_err_sys(err, "open '%s'", path);
out:
	/* it exits while we go on; dsec_userns_reap collects it */
	__atomic_store_n(&mk.state, 2, __ATOMIC_RELEASE);
	futex(&mk.state, FUTEX_WAKE, 1);
	return fd;
}

void dsec_userns_reap(void)
{
	if (mk.pid <= 0)
		return;
	kill(mk.pid, SIGKILL); /* when not finished; harmless once it has exited */
	while (waitpid(mk.pid, NULL, __WALL) < 0 && errno == EINTR)
		;
	mk.pid = 0;
}

int dsec_userns_fd(const struct dsec_idmap *m, unsigned long owner, struct dsec_err *err)
{
	int fd;

	if (dsec_userns_start(owner, err) < 0)
		return -1;
	fd = dsec_userns_finish(m, err);
	dsec_userns_reap();
	return fd;
}
