#include "admit.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "resource.h"

const char *const dsec_res_name[DSEC_R_N] = {"cpu", "memory", "pids", "disk"};

#define HEADER_LEN 128
#define LEDGER "ledger"
#define LEDGER_LOCK "ledger.lock"

/* ---- node.conf ---- */

static double pid_max(void)
{
	char buf[32];

	return dsec_read_proc("/proc/sys/kernel/pid_max", buf, sizeof(buf)) > 0 ? strtod(buf, NULL)
										: 32768;
}

/* "MAJ:MIN" of the whole disk behind dev (a partition's parent), "" for a device that is no
 * block device (tmpfs, overlay: major 0). */
static void whole_disk(dev_t dev, char *buf, size_t n)
{
	char path[128], dv[32];
	int fd;
	ssize_t r;

	buf[0] = '\0';
	if (major(dev) == 0)
		return;
	snprintf(buf, n, "%u:%u", major(dev), minor(dev));
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/partition", major(dev), minor(dev));
	if (access(path, F_OK) < 0)
		return;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../dev", major(dev), minor(dev));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	r = read(fd, dv, sizeof(dv) - 1);
	close(fd);
	if (r > 0) {
		dv[r] = '\0';
		dv[strcspn(dv, "\n")] = '\0';
		snprintf(buf, n, "%s", dv);
	}
}

static int set_io_device(struct dsec_node *n, const char *p, const char *val, unsigned line,
			 struct dsec_err *err)
{
	struct stat st;
	unsigned ma, mi;
	char end;

	if (!strcmp(val, "none")) {
		n->io_dev[0] = '\0';
	} else if (!strcmp(val, "auto")) {
		n->io_dev[0] = '\0';
		if (stat(p, &st) == 0)
			whole_disk(st.st_dev, n->io_dev, sizeof(n->io_dev));
	} else if (sscanf(val, "%u:%u%c", &ma, &mi, &end) == 2) {
		snprintf(n->io_dev, sizeof(n->io_dev), "%u:%u", ma, mi);
	} else if (val[0] == '/' && stat(val, &st) == 0 && S_ISBLK(st.st_mode)) {
		whole_disk(st.st_rdev, n->io_dev, sizeof(n->io_dev));
	} else {
		return dsec_err_set(err, EINVAL,
				    "node.conf:%u: io_device '%s': want auto, none, MAJ:MIN or a "
				    "block device",
				    line, val);
	}
	return 0;
}

static int conf_line(struct dsec_node *n, const struct dsec_paths *p, char *key, char *val,
		     unsigned line, struct dsec_err *err)
{
	char what[64];
	double d;
	char *end;

	snprintf(what, sizeof(what), "node.conf:%u: %s", line, key);
	if (!strcmp(key, "io_device"))
		return set_io_device(n, p->root, val, line, err);
	for (int r = 0; r < DSEC_R_N; r++) {
		size_t k = strlen(dsec_res_name[r]);

		if (!strncmp(key, dsec_res_name[r], k) && !strcmp(key + k, "_ratio")) {
			errno = 0;
			d = strtod(val, &end);
			if (errno || end == val || *end || !isfinite(d) || d <= 0 || d > 1000)
				return dsec_err_set(err, EINVAL,
						    "%s '%s': want a ratio above 0, at most 1000",
						    what, val);
			n->ratio[r] = d;
			return 0;
		}
		if (strcmp(key, dsec_res_name[r]))
			continue;
		if (!strcmp(val, "auto"))
			return 0;
		if (r == DSEC_R_MEMORY || r == DSEC_R_DISK) {
			uint64_t u;

			if (dsec_parse_size(val, 1ULL << 60, &u, what, err) < 0)
				return -1;
			d = (double)u;
		} else {
			errno = 0;
			d = strtod(val, &end);
			if (errno || end == val || *end || !isfinite(d) || d <= 0 || d > 1e9)
				return dsec_err_set(err, EINVAL, "%s '%s': want auto or a number",
						    what, val);
		}
		n->cap[r] = d;
		n->cap_auto[r] = 0;
		return 0;
	}
	return dsec_err_set(err, EINVAL, "node.conf:%u: unknown key '%s'", line, key);
}

int dsec_node_load(const struct dsec_paths *p, struct dsec_node *n, struct dsec_err *err)
{
	char path[PATH_MAX], *buf = NULL, *line, *save = NULL;
	unsigned lineno = 0;
	cpu_set_t cs;
	int rc = 0;

	memset(n, 0, sizeof(*n));
	n->ratio[DSEC_R_CPU] = 4.0;
	n->ratio[DSEC_R_MEMORY] = n->ratio[DSEC_R_PIDS] = n->ratio[DSEC_R_DISK] = 1.0;
	for (int r = 0; r < DSEC_R_N; r++)
		n->cap_auto[r] = 1;
	n->cap[DSEC_R_CPU] = sched_getaffinity(0, sizeof(cs), &cs) == 0
				 ? CPU_COUNT(&cs)
				 : (double)sysconf(_SC_NPROCESSORS_ONLN);
	n->cap[DSEC_R_MEMORY] = (double)dsec_meminfo("MemTotal:");
	n->cap[DSEC_R_PIDS] = pid_max();
	/* the writable layers are tmpfs: RAM and swap */
	n->cap[DSEC_R_DISK] = (double)(dsec_meminfo("MemTotal:") + dsec_meminfo("SwapTotal:"));
	set_io_device(n, p->root, "auto", 0, NULL);
	snprintf(path, sizeof(path), "%s/node.conf", p->root);
	if (dsec_read_file(AT_FDCWD, path, 1 << 16, &buf, err) < 0)
		return err && err->errnum == ENOENT ? 0 : dsec_err_wrap(err, "read node.conf");
	for (line = buf; line; line = save) {
		char *eq, *key, *val, *e;

		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		lineno++;
		if ((e = strchr(line, '#')))
			*e = '\0';
		for (key = line; isspace((unsigned char)*key); key++)
			;
		if (!*key)
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			rc = dsec_err_set(err, EINVAL, "node.conf:%u: want KEY = VALUE", lineno);
			break;
		}
		for (e = eq; e > key && isspace((unsigned char)e[-1]); e--)
			;
		*e = '\0';
		for (val = eq + 1; isspace((unsigned char)*val); val++)
			;
		for (e = val + strlen(val); e > val && isspace((unsigned char)e[-1]); e--)
			;
		*e = '\0';
		if ((rc = conf_line(n, p, key, val, lineno, err)) < 0)
			break;
	}
	free(buf);
	return rc;
}

const struct dsec_node *dsec_node_get(const struct dsec_paths *p, struct dsec_err *err)
{
	static struct dsec_node node;
	static int loaded;

	if (!loaded) {
		if (dsec_node_load(p, &node, err) < 0)
			return NULL;
		loaded = 1;
	}
	return &node;
}

void dsec_admit_amounts(const struct dsec_requests *r, int64_t out[DSEC_R_N])
{
	out[DSEC_R_CPU] = (int64_t)llround(r->cpus * 1000);
	out[DSEC_R_MEMORY] = (int64_t)r->memory;
	out[DSEC_R_PIDS] = (int64_t)r->pids;
	out[DSEC_R_DISK] = (int64_t)r->disk;
}

/* ---- the ledger ---- */

struct entry {
	char id[DSEC_ID_MAX];
	long pid;
	unsigned long long start;
	int64_t v[DSEC_R_N];
	size_t seq;
};

struct ledger {
	int fd;
	int64_t len, n, ids, sum[DSEC_R_N];
};

static int parse_entry(const char *s, struct entry *e)
{
	long long v[DSEC_R_N];

	if (sscanf(s, "%31s %ld %llu %lld %lld %lld %lld", e->id, &e->pid, &e->start, &v[0], &v[1],
		   &v[2], &v[3]) != 7 ||
	    !dsec_sandbox_id_ok(e->id))
		return -1;
	for (int r = 0; r < DSEC_R_N; r++)
		e->v[r] = v[r];
	return 0;
}

static int write_header(struct ledger *l, struct dsec_err *err)
{
	char h[HEADER_LEN + 1];
	int k =
	    snprintf(h, sizeof(h),
		     "dsec-ledger1 len=%lld n=%lld ids=%lld cpu=%lld memory=%lld "
		     "pids=%lld disk=%lld",
		     (long long)l->len, (long long)l->n, (long long)l->ids, (long long)l->sum[0],
		     (long long)l->sum[1], (long long)l->sum[2], (long long)l->sum[3]);

	memset(h + k, ' ', (size_t)(HEADER_LEN - k));
	h[HEADER_LEN - 1] = '\n';
	if (pwrite(l->fd, h, HEADER_LEN, 0) != HEADER_LEN)
		return dsec_err_sys(err, "write ledger header");
	return 0;
}

/* Read a whole region of the ledger (from off to the end) into a new buffer. */
static char *read_from(int fd, int64_t off, int64_t size)
{
	char *buf = malloc((size_t)(size - off) + 1);
	ssize_t r;

	if (!buf)
		return NULL;
	r = pread(fd, buf, (size_t)(size - off), off);
	if (r < 0) {
		free(buf);
		return NULL;
	}
	buf[r] = '\0';
	return buf;
}

/* Open the ledger (lock held) and bring the header up to date with a tail a dead writer left. */
static int ledger_open(const struct dsec_paths *p, struct ledger *l, struct dsec_err *err)
{
	char path[PATH_MAX], h[HEADER_LEN + 1];
	long long v[7];
	struct stat st;

	memset(l, 0, sizeof(*l));
	snprintf(path, sizeof(path), "%s/" LEDGER, p->run);
	l->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (l->fd < 0)
		return dsec_err_sys(err, "open '%s'", path);
	if (fstat(l->fd, &st) < 0)
		return dsec_err_sys(err, "stat '%s'", path);
	if (st.st_size < HEADER_LEN) {
		l->len = HEADER_LEN;
		if (ftruncate(l->fd, 0) < 0)
			return dsec_err_sys(err, "truncate '%s'", path);
		return write_header(l, err);
	}
	if (pread(l->fd, h, HEADER_LEN, 0) != HEADER_LEN)
		return dsec_err_sys(err, "read '%s'", path);
	h[HEADER_LEN] = '\0';
	if (sscanf(h,
		   "dsec-ledger1 len=%lld n=%lld ids=%lld cpu=%lld memory=%lld pids=%lld "
		   "disk=%lld",
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) != 7 ||
	    v[0] < HEADER_LEN || v[0] > st.st_size)
		return dsec_err_set(err, EINVAL, "'%s': malformed ledger header", path);
	l->len = v[0];
	l->n = v[1];
	l->ids = v[2];
	for (int r = 0; r < DSEC_R_N; r++)
		l->sum[r] = v[3 + r];
	if (st.st_size > l->len) {
		char *buf = read_from(l->fd, l->len, st.st_size), *s, *nl;
		struct entry e;

		if (!buf)
			return dsec_err_sys(err, "read '%s'", path);
		for (s = buf; (nl = strchr(s, '\n')); s = nl + 1) {
			*nl = '\0';
			if (parse_entry(s, &e) == 0) {
				for (int r = 0; r < DSEC_R_N; r++)
					l->sum[r] += e.v[r];
				l->n++;
			}
		}
		/* a torn last line: cut it, the next append starts clean */
		l->len = st.st_size - (int64_t)strlen(s);
		free(buf);
		if (ftruncate(l->fd, l->len) < 0 || write_header(l, err) < 0)
			return dsec_err_sys(err, "repair '%s'", path);
	}
	return 0;
}

static int by_id_seq(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Same process (start time against pid reuse), and not a zombie waiting to be reaped. */
static int alive(pid_t pid, unsigned long long start)
{
	struct dsec_sandbox sb = {.holder_pid = pid, .holder_start = start};

	return pid > 0 && start && dsec_sandbox_alive(&sb);
}

/* A keeper that died between creating its sandbox and binding it (a killed dsec-spawn): while
 * the sandbox's holder lives (until dsec-reap --orphans), it keeps the requests. 1 or 0. */
static int rebind(const struct dsec_paths *p, struct entry *e)
{
	struct dsec_sandbox sb;
	int live;

	if (dsec_sandbox_load(p, e->id, &sb, NULL) < 0)
		return 0;
	live = dsec_sandbox_alive(&sb);
	if (live) {
		e->pid = sb.holder_pid;
		e->start = sb.holder_start;
	}
	dsec_sandbox_free(&sb);
	return live;
}

/* Sum the entries per id, drop the ids whose keeper is gone or whose sum is nothing, rewrite
 * the ledger with one entry per id left. l stays open on the new file. */
static int compact(const struct dsec_paths *p, struct ledger *l, struct dsec_err *err)
{
	char path[PATH_MAX], *buf, *s, *nl, *out = NULL;
	struct entry *e = NULL;
	size_t n = 0, cap = 0, olen = 0, ocap = 0;
	struct ledger nl_ = {0};
	struct stat st;
	int rc = -1;

	if (fstat(l->fd, &st) < 0 || !(buf = read_from(l->fd, HEADER_LEN, st.st_size)))
		return dsec_err_sys(err, "read ledger");
	for (s = buf; (nl = strchr(s, '\n')); s = nl + 1) {
		*nl = '\0';
		if (n == cap) {
			struct entry *ne = realloc(e, (cap = cap ? cap * 2 : 256) * sizeof(*e));

			if (!ne)
				goto out;
			e = ne;
		}
		if (parse_entry(s, &e[n]) == 0) {
			e[n].seq = n;
			n++;
		}
	}
	qsort(e, n, sizeof(*e), by_id_seq);
	for (size_t i = 0, j; i < n; i = j) {
		int64_t t[DSEC_R_N] = {0};
		int any = 0;
		char line[160];
		int k;

		for (j = i; j < n && !strcmp(e[j].id, e[i].id); j++)
			for (int r = 0; r < DSEC_R_N; r++)
				t[r] += e[j].v[r];
		for (int r = 0; r < DSEC_R_N; r++)
			any |= t[r] != 0;
		/* the last entry names who keeps the id alive */
		if (!any || (!alive((pid_t)e[j - 1].pid, e[j - 1].start) && !rebind(p, &e[j - 1])))
			continue;
		k = snprintf(line, sizeof(line), "%s %ld %llu %lld %lld %lld %lld\n", e[i].id,
			     e[j - 1].pid, e[j - 1].start, (long long)t[0], (long long)t[1],
			     (long long)t[2], (long long)t[3]);
		if (olen + (size_t)k + 1 > ocap) {
			char *no = realloc(out, ocap = (ocap + (size_t)k + 1) * 2);

			if (!no)
				goto out;
			out = no;
		}
		memcpy(out + olen, line, (size_t)k);
		olen += (size_t)k;
		for (int r = 0; r < DSEC_R_N; r++)
			nl_.sum[r] += t[r];
		nl_.n++;
	}
	nl_.ids = nl_.n;
	nl_.len = HEADER_LEN + (int64_t)olen;
	/* a new file renamed into place: a crash leaves the old ledger or the new, whole */
	snprintf(path, sizeof(path), "%s/" LEDGER ".new", p->run);
	nl_.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (nl_.fd < 0) {
		dsec_err_sys(err, "create '%s'", path);
		goto out;
	}
	if (write_header(&nl_, err) < 0 ||
	    (olen && pwrite(nl_.fd, out, olen, HEADER_LEN) != (ssize_t)olen)) {
		dsec_err_sys(err, "write '%s'", path);
		close(nl_.fd);
		goto out;
	}
	{
		char to[PATH_MAX];

		snprintf(to, sizeof(to), "%s/" LEDGER, p->run);
		if (rename(path, to) < 0) {
			dsec_err_sys(err, "rename '%s'", path);
			close(nl_.fd);
			goto out;
		}
	}
	close(l->fd);
	*l = nl_;
	rc = 0;
out:
	if (rc < 0 && err && !err->errnum)
		dsec_err_set(err, ENOMEM, "compact ledger");
	free(buf);
	free(e);
	free(out);
	return rc;
}

static int append(struct ledger *l, const char *id, pid_t pid, unsigned long long start,
		  const int64_t d[DSEC_R_N], struct dsec_err *err)
{
	char line[160];
	int k = snprintf(line, sizeof(line), "%s %ld %llu %lld %lld %lld %lld\n", id, (long)pid,
			 start, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3]);

	if (pwrite(l->fd, line, (size_t)k, l->len) != k)
		return dsec_err_sys(err, "append to ledger");
	l->len += k;
	l->n++;
	for (int r = 0; r < DSEC_R_N; r++)
		l->sum[r] += d[r];
	return write_header(l, err);
}

static int lock_run(const struct dsec_paths *p, struct dsec_err *err)
{
	char path[PATH_MAX];

	if (dsec_mkdir_p(p->run, 0755, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/" LEDGER_LOCK, p->run);
	return dsec_lock(path, 1, 1, err);
}

/* The first resource delta takes past its allowance, or -1. */
static int over(const struct dsec_node *nd, const int64_t sum[DSEC_R_N], const int64_t d[DSEC_R_N])
{
	for (int r = 0; r < DSEC_R_N; r++) {
		double allowed = nd->cap[r] * nd->ratio[r] * (r == DSEC_R_CPU ? 1000 : 1);

		if (d[r] > 0 && (double)(sum[r] + d[r]) > allowed + 1e-6)
			return r;
	}
	return -1;
}

static void fmt_amount(int r, double v, char *buf, size_t n)
{
	if (r == DSEC_R_CPU)
		snprintf(buf, n, "%.3g", v / 1000);
	else if (r == DSEC_R_MEMORY || r == DSEC_R_DISK)
		snprintf(buf, n, "%.1fM", v / 1048576);
	else
		snprintf(buf, n, "%.0f", v);
}

int dsec_admit(const struct dsec_paths *p, const char *id, pid_t pid, unsigned long long start,
	       const int64_t delta[DSEC_R_N], struct dsec_err *err)
{
	const struct dsec_node *nd = dsec_node_get(p, err);
	struct ledger l = {.fd = -1};
	int lock, r, rc = -1;

	if (!nd)
		return -1;
	if (!pid) {
		pid = getpid();
		start = dsec_proc_start_time(pid);
	}
	if ((lock = lock_run(p, err)) < 0)
		return -1;
	if (ledger_open(p, &l, err) < 0)
		goto out;
	/* compact now and then, so the file holds about one entry per live id */
	if (l.n > 2 * l.ids + 256 && compact(p, &l, err) < 0)
		goto out;
	if ((r = over(nd, l.sum, delta)) >= 0) {
		/* the sums may still count sandboxes that are gone: decide on the exact ones */
		if (compact(p, &l, err) < 0)
			goto out;
		if ((r = over(nd, l.sum, delta)) >= 0) {
			char a[32], b[32], c[32];

			fmt_amount(r, (double)l.sum[r], a, sizeof(a));
			fmt_amount(r, (double)delta[r], b, sizeof(b));
			fmt_amount(r, nd->cap[r] * (r == DSEC_R_CPU ? 1000 : 1), c, sizeof(c));
			dsec_err_set(err, ENOSPC,
				     "node full: %s requests %s + %s would pass capacity %s x "
				     "ratio %g (node.conf)",
				     dsec_res_name[r], a, b, c, nd->ratio[r]);
			goto out;
		}
	}
	rc = append(&l, id, pid, start, delta, err);
out:
	if (l.fd >= 0)
		close(l.fd);
	close(lock);
	return rc;
}

int dsec_admit_bind(const struct dsec_paths *p, const char *id, pid_t pid, unsigned long long start,
		    struct dsec_err *err)
{
	static const int64_t zero[DSEC_R_N];
	struct ledger l = {.fd = -1};
	int lock, rc;

	if ((lock = lock_run(p, err)) < 0)
		return -1;
	rc = ledger_open(p, &l, err);
	if (rc == 0)
		rc = append(&l, id, pid, start, zero, err);
	if (l.fd >= 0)
		close(l.fd);
	close(lock);
	return rc;
}

int dsec_admit_sums(const struct dsec_paths *p, int64_t sum[DSEC_R_N], struct dsec_err *err)
{
	struct ledger l = {.fd = -1};
	int lock, rc;

	if ((lock = lock_run(p, err)) < 0)
		return -1;
	rc = ledger_open(p, &l, err);
	if (rc == 0)
		rc = compact(p, &l, err);
	if (rc == 0)
		memcpy(sum, l.sum, sizeof(l.sum));
	if (l.fd >= 0)
		close(l.fd);
	close(lock);
	return rc;
}

int dsec_admit_create(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_err *err)
{
	int64_t d[DSEC_R_N];
	int any = 0;

	dsec_admit_amounts(&sb->req, d);
	for (int r = 0; r < DSEC_R_N; r++)
		any |= d[r] != 0;
	if (dsec_res_prepare(p, sb, err) < 0)
		return -1;
	if (any) {
		if (!sb->id[0] && dsec_sandbox_new_id(sb->id, err) < 0)
			return -1;
		if (dsec_admit(p, sb->id, 0, 0, d, err) < 0)
			return dsec_err_wrap(err, "%s", sb->id);
	}
	if (dsec_sandbox_create(p, sb, err) < 0) {
		if (any) {
			for (int r = 0; r < DSEC_R_N; r++)
				d[r] = -d[r];
			dsec_admit(p, sb->id, 0, 0, d, NULL);
		}
		return -1;
	}
	/* unbound, its requests would be dropped when this process exits: no sandbox then */
	if (any && dsec_admit_bind(p, sb->id, sb->holder_pid, sb->holder_start, err) < 0) {
		dsec_sandbox_destroy(p, sb, NULL);
		return dsec_err_wrap(err, "%s", sb->id);
	}
	if (sb->cls == DSEC_CLASS_BE)
		dsec_res_sched_holder(sb, NULL);
	return 0;
}

int dsec_admit_wait(uint64_t t0, uint64_t wait_us, unsigned *round)
{
	uint64_t now = dsec_now_us(), step = 2000ULL << (*round < 6 ? *round : 6);

	if (!wait_us || (wait_us != UINT64_MAX && now - t0 >= wait_us))
		return -1;
	if (wait_us != UINT64_MAX && now - t0 + step > wait_us)
		step = wait_us - (now - t0);
	(*round)++;
	usleep((useconds_t)step);
	return 0;
}
