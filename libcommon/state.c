#include "state.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int absolutize(char *dst, const char *src, struct dsec_err *err)
{
	char cwd[PATH_MAX];

	if (!*src)
		return dsec_err_set(err, EINVAL, "empty directory name");
	if (src[0] == '/') {
		if (strlen(src) >= PATH_MAX - 64)
			return dsec_err_set(err, ENAMETOOLONG, "'%s': path too long", src);
		strcpy(dst, src);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return dsec_err_sys(err, "getcwd");
		if (strlen(cwd) + strlen(src) + 2 >= PATH_MAX - 64)
			return dsec_err_set(err, ENAMETOOLONG, "'%s': path too long", src);
		snprintf(dst, PATH_MAX, "%s/%s", cwd, src);
	}
	/* strip trailing slashes */
	for (size_t n = strlen(dst); n > 1 && dst[n - 1] == '/'; n--)
		dst[n - 1] = '\0';
	return 0;
}

int dsec_paths_init(struct dsec_paths *p, const char *root_opt, const char *run_opt,
		    struct dsec_err *err)
{
	const char *root = root_opt, *run = run_opt;

	if (!root)
		root = getenv("DSEC_ROOT");
	if (!root || !*root)
		root = DSEC_ROOT_DEFAULT;
	if (!run)
		run = getenv("DSEC_RUN");
	if (!run || !*run)
		run = DSEC_RUN_DEFAULT;
	if (absolutize(p->root, root, err) < 0)
		return dsec_err_wrap(err, "--root");
	if (absolutize(p->run, run, err) < 0)
		return dsec_err_wrap(err, "--run");
	return 0;
}

int dsec_mkdir_p(const char *path, mode_t mode, struct dsec_err *err)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return dsec_err_set(err, ENAMETOOLONG, "'%s': path too long", path);
	memcpy(buf, path, n + 1);
	for (char *s = buf + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;

			*s = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return dsec_err_sys(err, "mkdir '%s'", buf);
			*s = c;
			if (!c)
				break;
		}
	}
	return 0;
}

int dsec_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
		      int durable, struct dsec_err *err)
{
	char tmp[PATH_MAX];
	const char *p = data;
	int fd;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", name, (int)getpid()) >= (int)sizeof(tmp))
		return dsec_err_set(err, ENAMETOOLONG, "'%s': name too long", name);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return dsec_err_sys(err, "create '%s'", tmp);
	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			dsec_err_sys(err, "write '%s'", tmp);
			goto fail;
		}
		p += w;
		len -= (size_t)w;
	}
	if (durable && fsync(fd) < 0) {
		dsec_err_sys(err, "fsync '%s'", tmp);
		goto fail;
	}
	if (close(fd) < 0) {
		fd = -1;
		dsec_err_sys(err, "close '%s'", tmp);
		goto fail;
	}
	fd = -1;
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		dsec_err_sys(err, "rename '%s'", name);
		goto fail;
	}
	if (durable && dirfd != AT_FDCWD)
		fsync(dirfd);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(dirfd, tmp, 0);
	return -1;
}

int dsec_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

ssize_t dsec_read_proc(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r = fd >= 0 ? read(fd, buf, n - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[r > 0 ? r : 0] = '\0';
	return r > 0 ? r : -1;
}

uint64_t dsec_meminfo(const char *key)
{
	char buf[4096], *s;

	if (dsec_read_proc("/proc/meminfo", buf, sizeof(buf)) < 0)
		return 0;
	s = strstr(buf, key);
	return s ? strtoull(s + strlen(key), NULL, 10) * 1024 : 0;
}

ssize_t dsec_read_file(int dirfd, const char *name, size_t max, char **out, struct dsec_err *err)
{
	size_t cap = 4096, len = 0;
	char *buf;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return dsec_err_sys(err, "open '%s'", name);
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return dsec_err_set(err, ENOMEM, "read '%s': out of memory", name);
	}
	for (;;) {
		ssize_t r;

		if (len + 1 >= cap) {
			char *nb;

			if (cap > max) {
				free(buf);
				close(fd);
				return dsec_err_set(err, EFBIG, "'%s': larger than %zu bytes", name,
						    max);
			}
			cap *= 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				close(fd);
				return dsec_err_set(err, ENOMEM, "read '%s': out of memory", name);
			}
			buf = nb;
		}
		r = read(fd, buf + len, cap - len - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			dsec_err_sys(err, "read '%s'", name);
			free(buf);
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (len > max) {
		free(buf);
		return dsec_err_set(err, EFBIG, "'%s': larger than %zu bytes", name, max);
	}
	buf[len] = '\0';
	*out = buf;
	return (ssize_t)len;
}

/* Who holds the flock on fd, for a message: "pid 123 (dsec-spawn, stopped)" and so on, from
 * /proc/locks; "" when nothing is found. */
static void lock_holders(int fd, char *out, size_t n)
{
	char line[256], comm[64], path[64], st[512];
	struct stat sb;
	size_t len = 0;
	FILE *f;

	out[0] = '\0';
	if (fstat(fd, &sb) < 0 || !(f = fopen("/proc/locks", "re")))
		return;
	while (fgets(line, sizeof(line), f) && len + 80 < n) {
		unsigned maj, min;
		unsigned long ino;
		char type[16], *p;
		int pid;

		if (strstr(line, "->") ||
		    sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%lu", type, &pid, &maj, &min, &ino) !=
			5 ||
		    strcmp(type, "FLOCK") || maj != major(sb.st_dev) || min != minor(sb.st_dev) ||
		    ino != (unsigned long)sb.st_ino || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		if (dsec_read_proc(path, comm, sizeof(comm)) <= 0)
			snprintf(comm, sizeof(comm), "?");
		comm[strcspn(comm, "\n")] = '\0';
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		p = dsec_read_proc(path, st, sizeof(st)) > 0 ? strrchr(st, ')') : NULL;
		len += (size_t)snprintf(out + len, n - len, "%spid %d (%s%s)", len ? ", " : "", pid,
					comm, p && (p[2] == 'T' || p[2] == 't') ? ", stopped" : "");
	}
	fclose(f);
}

int dsec_lock_until(const char *path, int exclusive, uint64_t wait_us, const char *what,
		    struct dsec_err *err)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	int op = (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB, said = 0, e = 0;
	uint64_t t0 = dsec_now_us(), waited;

	if (fd < 0)
		return dsec_err_sys(err, "open lock '%s'", path);
	/* nothing to say: a wait without end blocks in the kernel from the start */
	if (!what && wait_us == UINT64_MAX)
		op &= ~LOCK_NB;
	for (;;) {
		char who[400];

		if (flock(fd, op) == 0)
			return fd;
		if ((e = errno) == EINTR)
			continue;
		waited = dsec_now_us() - t0;
		if (e != EWOULDBLOCK || waited >= wait_us)
			break;
		if (!said && waited >= 1000000) {
			if (what) {
				lock_holders(fd, who, sizeof(who));
				dsec_warnx("waiting for %s%s%s", what, who[0] ? ", held by " : "",
					   who);
			}
			said = 1;
			/* said so: a wait without end blocks in the kernel from here */
			if (wait_us == UINT64_MAX)
				op &= ~LOCK_NB;
		}
		if (op & LOCK_NB)
			poll(NULL, 0, 20);
	}
	if (e == EWOULDBLOCK && what) {
		char who[400];

		lock_holders(fd, who, sizeof(who));
		dsec_err_set(err, EWOULDBLOCK, "%s is busy%s%s", what, who[0] ? ", held by " : "",
			     who);
	} else {
		errno = e;
		dsec_err_sys(err, "lock '%s'", path);
	}
	close(fd);
	return -1;
}

int dsec_lock(const char *path, int exclusive, int wait, struct dsec_err *err)
{
	return dsec_lock_until(path, exclusive, wait ? UINT64_MAX : 0, NULL, err);
}

/* A removal holds one descriptor per level down to RMTREE_FD_DEPTH (or as many as it may
 * open); a directory deeper than that is moved up into the top directory being removed (by
 * descriptors, renameat2) and taken apart from there. So no tree is too deep to remove under a low RLIMIT_NOFILE (an archive's
 * 2000 levels, under PATH_MAX, with 1024 descriptors), and no path is ever followed. */
#define RMTREE_FD_DEPTH 128

struct rmtree {
	dev_t dev;           /* the top's file system: a mount point under it is not entered */
	int top;             /* the top directory, once open */
	unsigned long moved; /* directories moved up into it */
	struct dsec_err *err;
};

static int rmtree_entry(struct rmtree *r, int pfd, const char *name, int depth)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	int fd, rc = 0;
	unsigned long before;

	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return dsec_err_sys(r->err, "stat '%s'", name);
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(pfd, name, 0) < 0 && errno != ENOENT)
			return dsec_err_sys(r->err, "unlink '%s'", name);
		return 0;
	}
	if (depth && st.st_dev != r->dev)
		return dsec_err_set(r->err, EBUSY, "'%s': is a mount point", name);
	fd = depth < RMTREE_FD_DEPTH
		 ? openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
		 : -1;
	if (fd < 0 && depth >= 2 && (depth >= RMTREE_FD_DEPTH || errno == EMFILE)) {
		char up[32];

		for (;;) {
			snprintf(up, sizeof(up), ".dsec-rm-%lu", r->moved++);
			if (renameat2(pfd, name, r->top, up, RENAME_NOREPLACE) == 0)
				return 0;
			if (errno != EEXIST)
				return dsec_err_sys(r->err, "move '%s' up", name);
		}
	}
	if (fd < 0)
		return dsec_err_sys(r->err, "open '%s'", name);
	/* a directory without write or search permission (from an archive) cannot be emptied */
	if ((st.st_mode & 0700) != 0700)
		fchmod(fd, (st.st_mode & 07777) | 0700);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return dsec_err_sys(r->err, "opendir '%s'", name);
	}
	if (!depth) {
		r->dev = st.st_dev;
		r->top = fd;
	}
	do { /* the top again while directories were moved up into it */
		before = r->moved;
		while (rc == 0 && (de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				rc = rmtree_entry(r, fd, de->d_name, depth + 1);
		if (!depth && rc == 0 && r->moved != before)
			rewinddir(d);
	} while (!depth && rc == 0 && r->moved != before);
	closedir(d);
	if (rc < 0)
		return rc;
	if (unlinkat(pfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return dsec_err_sys(r->err, "rmdir '%s'", name);
	return 0;
}

static int rmtree_fd(int pfd, const char *name, struct dsec_err *err)
{
	struct rmtree r = {.top = -1, .err = err};

	return rmtree_entry(&r, pfd, name, 0);
}

int dsec_rmtree_at(int dirfd, const char *name, struct dsec_err *err)
{
	return rmtree_fd(dirfd, name, err);
}

int dsec_rmtree(const char *path, struct dsec_err *err)
{
	return rmtree_fd(AT_FDCWD, path, err);
}

int dsec_parse_size(const char *s, uint64_t max, uint64_t *out, const char *what,
		    struct dsec_err *err)
{
	char *end;
	double v;
	uint64_t mul = 1;

	if (!s || !*s || isspace((unsigned char)*s) || *s == '-')
		goto bad;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		goto bad;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'B':
		end++;
		break;
	case 'K':
		mul = 1ULL << 10;
		end++;
		break;
	case 'M':
		mul = 1ULL << 20;
		end++;
		break;
	case 'G':
		mul = 1ULL << 30;
		end++;
		break;
	case 'T':
		mul = 1ULL << 40;
		end++;
		break;
	default:
		goto bad;
	}
	if (mul > 1 && (!strcasecmp(end, "ib") || !strcasecmp(end, "b")))
		end += strlen(end);
	if (*end)
		goto bad;
	v *= (double)mul;
	if (v > (double)max)
		return dsec_err_set(err, ERANGE, "%s '%s': larger than %llu bytes", what, s,
				    (unsigned long long)max);
	*out = (uint64_t)v;
	return 0;
bad:
	return dsec_err_set(err, EINVAL, "%s '%s': not a size (like 512M, 2G)", what, s ? s : "");
}

int dsec_parse_duration(const char *s, uint64_t max_us, uint64_t *out_us, const char *what,
			struct dsec_err *err)
{
	char *end;
	double v, mul = 1e6;

	if (!s || !*s || isspace((unsigned char)*s) || *s == '-')
		goto bad;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		goto bad;
	if (!*end || !strcmp(end, "s"))
		mul = 1e6;
	else if (!strcmp(end, "ms"))
		mul = 1e3;
	else if (!strcmp(end, "us"))
		mul = 1;
	else if (!strcmp(end, "m"))
		mul = 60e6;
	else if (!strcmp(end, "h"))
		mul = 3600e6;
	else if (!strcmp(end, "d"))
		mul = 86400e6;
	else
		goto bad;
	v *= mul;
	if (v > (double)max_us)
		return dsec_err_set(err, ERANGE, "%s '%s': too long", what, s);
	*out_us = (uint64_t)v;
	return 0;
bad:
	return dsec_err_set(err, EINVAL, "%s '%s': not a duration (like 500ms, 30s, 1h)", what,
			    s ? s : "");
}

int dsec_parse_count(const char *s, long long min, long long max, long long *out, const char *what,
		     struct dsec_err *err)
{
	char *end;
	long long v;

	if (!s || !*s || isspace((unsigned char)*s))
		goto bad;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || *end)
		goto bad;
	if (errno == ERANGE || v < min || v > max)
		return dsec_err_set(err, ERANGE, "%s '%s': out of range %lld..%lld", what, s, min,
				    max);
	*out = v;
	return 0;
bad:
	return dsec_err_set(err, EINVAL, "%s '%s': not a number", what, s ? s : "");
}

uint64_t dsec_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t dsec_wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

const char *dsec_node(void)
{
	static char name[256];
	const char *env;

	if (name[0])
		return name;
	env = getenv("DSEC_NODE");
	if (env && *env)
		snprintf(name, sizeof(name), "%s", env);
	else if (gethostname(name, sizeof(name) - 1) < 0 || !name[0])
		strcpy(name, "localhost");
	return name;
}

void dsec_progress_start(struct dsec_progress *p, int want)
{
	p->on = want && isatty(STDERR_FILENO) && dsec_verbose >= 0;
	p->shown = 0;
	p->t0 = dsec_now_us();
	p->last = 0;
}

void dsec_progress(struct dsec_progress *p, const char *fmt, ...)
{
	uint64_t now;
	va_list ap;

	if (!p || !p->on)
		return;
	now = dsec_now_us();
	if (now - p->t0 < 1000000 || now - p->last < 200000)
		return;
	p->last = now;
	p->shown = 1;
	fprintf(stderr, "\r%s: ", dsec_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

int dsec_self_dir(char *buf, size_t n, struct dsec_err *err)
{
	ssize_t len = readlink("/proc/self/exe", buf, n - 1);
	char *slash;

	if (len < 0)
		return dsec_err_sys(err, "readlink /proc/self/exe");
	buf[len] = '\0';
	if ((slash = strrchr(buf, '/')))
		*slash = '\0';
	return 0;
}

long *dsec_progress_counter(const struct dsec_progress *p)
{
	static long local, *shared;

	if (p->on && !shared) {
		void *m = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

		shared = m == MAP_FAILED ? NULL : m;
	}
	return p->on && shared ? shared : &local;
}

pid_t dsec_progress_waitpid(struct dsec_progress *p, pid_t pid, int *ws, const long *count,
			    long long total, const char *what)
{
	for (;;) {
		pid_t r = waitpid(pid, ws, p->on ? WNOHANG : 0);

		if (r > 0 || (r < 0 && errno != EINTR))
			return r;
		if (r == 0) {
			dsec_progress(p, "%ld of %lld %s ",
				      __atomic_load_n(count, __ATOMIC_RELAXED), total, what);
			poll(NULL, 0, 100);
		}
	}
}

void dsec_progress_end(struct dsec_progress *p)
{
	if (p->shown)
		fputc('\n', stderr);
	p->shown = 0;
}
