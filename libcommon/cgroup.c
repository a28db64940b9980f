#include "cgroup.h"
#include "cgroup-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* v1: the memory controller's limit on socket buffers, which it counts apart from memory */
#define TCP_LIMIT_V1 "memory.kmem.tcp.limit_in_bytes"
/* a sandbox's share of the node's TCP memory before pressure, at most (tcp_limit_v1) */
#define DSEC_CG_TCP_SHARE 16
#define DSEC_CG_TCP_MIN (16ULL << 20)

static const char *const ctrl_name[DSEC_CG_NCTRL] = {"memory", "cpu",     "cpuacct",
						     "pids",   "freezer", "blkio"};

/* What this host offers, found once per process in /proc/self/mountinfo. */
static struct {
	int done, version;
	char v2root[DSEC_CG_PATH_MAX];
	char v1root[DSEC_CG_NCTRL][DSEC_CG_PATH_MAX];
	char cpuset[DSEC_CG_PATH_MAX]; /* v1: the dir of our own cpuset cgroup, "" when none */
	char cpuset_name[64];          /* the name of its hierarchy's dir ("cpuset") */
	struct dsec_err err;
} host;

/* Does the space-separated or comma-separated list contain word? */
static int has_word(const char *list, const char *word, char sep)
{
	size_t n = strlen(word);

	for (const char *s = list; (s = strstr(s, word)); s += n)
		if ((s == list || s[-1] == sep) && (s[n] == sep || s[n] == '\0' || s[n] == '\n'))
			return 1;
	return 0;
}

/* v1: the dir of our cpuset cgroup (a sandbox's too: dsec makes none, it inherits ours), under
 * the cpuset hierarchy mounted at mnt with root "/". Shown to the sandbox with its own cgroups:
 * the JVM trusts no v1 cgroup limit without a cpuset mount. */
static void find_cpuset(const char *mnt)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[DSEC_CG_PATH_MAX];
	const char *b = strrchr(mnt, '/');

	if (!f)
		return;
	if (!b || !b[1] || strlen(b + 1) >= sizeof(host.cpuset_name)) {
		fclose(f);
		return;
	}
	snprintf(host.cpuset_name, sizeof(host.cpuset_name), "%s", b + 1);
	while (fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *path = ctl ? strchr(ctl + 1, ':') : NULL;

		if (!path)
			continue;
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		if (has_word(ctl + 1, "cpuset", ',') && path[0] == '/' &&
		    strlen(mnt) + strlen(path) < sizeof(host.cpuset))
			snprintf(host.cpuset, sizeof(host.cpuset), "%s%s", mnt,
				 strcmp(path, "/") ? path : "");
	}
	fclose(f);
}

static int write_str(const char *dir, const char *file, const char *val, struct dsec_err *err)
{
	char path[DSEC_CG_PATH_MAX + 64];
	size_t n = strlen(val);
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return dsec_err_sys(err, "open '%s'", path);
	if (write(fd, val, n) != (ssize_t)n) {
		dsec_err_sys(err, "write '%s' to '%s'", val, path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static ssize_t read_small(const char *dir, const char *file, char *buf, size_t n)
{
	char path[DSEC_CG_PATH_MAX + 64];
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = '\0';
	return r;
}

static void unescape_mount(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

static void probe_host(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int forced = 0;
	const char *want = getenv("DSEC_CGROUP_VERSION");

	host.done = 1;
	if (want && *want)
		forced = atoi(want);
	if (!f) {
		dsec_err_sys(&host.err, "open /proc/self/mountinfo");
		return;
	}
	while (getline(&line, &cap, f) > 0) {
		/* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
		char *fields[6] = {0}, *dash, *save = NULL, *fstype, *superopts;
		int i = 0;

		dash = strstr(line, " - ");
		if (!dash)
			continue;
		*dash = '\0';
		for (char *t = strtok_r(line, " ", &save); t && i < 6;
		     t = strtok_r(NULL, " ", &save))
			fields[i++] = t;
		fstype = strtok_r(dash + 3, " ", &save);
		strtok_r(NULL, " ", &save); /* source */
		superopts = strtok_r(NULL, " \n", &save);
		if (i < 5 || !fstype)
			continue;
		unescape_mount(fields[4]);
		if (strlen(fields[4]) >= DSEC_CG_PATH_MAX - 80)
			continue;
		if (!strcmp(fstype, "cgroup2") && !host.v2root[0]) {
			char ctl[512];

			if (read_small(fields[4], "cgroup.controllers", ctl, sizeof(ctl)) >= 0 &&
			    has_word(ctl, "memory", ' ') && has_word(ctl, "cpu", ' ') &&
			    has_word(ctl, "pids", ' '))
				snprintf(host.v2root, sizeof(host.v2root), "%s", fields[4]);
		} else if (!strcmp(fstype, "cgroup") && superopts) {
			for (int c = 0; c < DSEC_CG_NCTRL; c++)
				if (!host.v1root[c][0] && has_word(superopts, ctrl_name[c], ','))
					snprintf(host.v1root[c], DSEC_CG_PATH_MAX, "%s", fields[4]);
			if (!host.cpuset[0] && has_word(superopts, "cpuset", ',') &&
			    !strcmp(fields[3], "/"))
				find_cpuset(fields[4]);
		}
	}
	free(line);
	fclose(f);
	if (host.v2root[0] && forced != 1)
		host.version = 2;
	else if (host.v1root[DSEC_CG_MEMORY][0] && host.v1root[DSEC_CG_CPU][0] &&
		 host.v1root[DSEC_CG_PIDS][0] && forced != 2)
		host.version = 1;
	else
		dsec_err_set(&host.err, ENOTSUP,
			     "no cgroup hierarchy offers the memory, cpu and pids controllers");
}

int dsec_cgroup_version(struct dsec_err *err)
{
	if (!host.done)
		probe_host();
	if (!host.version) {
		if (err)
			*err = host.err;
		return -1;
	}
	return host.version;
}

/* The parent cgroup's name for this run dir (see cgroup.h). */
static void parent_name(const struct dsec_paths *p, char *buf, size_t n)
{
	const char *env = getenv("DSEC_CGROUP_PARENT");
	uint32_t h = 2166136261u;

	if (env && *env) {
		while (*env == '/')
			env++;
		snprintf(buf, n, "%s", env);
		return;
	}
	if (!strcmp(p->run, DSEC_RUN_DEFAULT)) {
		snprintf(buf, n, "dsec");
		return;
	}
	for (const char *s = p->run; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	snprintf(buf, n, "dsec-%08x", h);
}

/* v1 blkio: a cgroup there costs a mkdir and a cgroup.procs write per exec, so only sandboxes
 * with io settings get one (or, for one found by id only, when it has one). */
static int blkio_wanted(const struct dsec_sandbox *sb, const char *root, const char *parent)
{
	char path[DSEC_CG_PATH_MAX + 128];

	if (sb->limits.io_bps || sb->limits.io_iops || sb->req.io_weight)
		return 1;
	snprintf(path, sizeof(path), "%s/%s/%s", root, parent, sb->id);
	return access(path, F_OK) == 0;
}

int dsec_cgroup_paths(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_err *err)
{
	char parent[128];
	int v = dsec_cgroup_version(err);

	if (v < 0)
		return -1;
	parent_name(p, parent, sizeof(parent));
	memset(&sb->cg, 0, sizeof(sb->cg));
	sb->cg.version = v;
	if (v == 2) {
		snprintf(sb->cg.v2, sizeof(sb->cg.v2), "%s/%s/%s", host.v2root, parent, sb->id);
		return 0;
	}
	for (int c = 0; c < DSEC_CG_NCTRL; c++) {
		/* the freezer pauses a sandbox (dsec-reap --pause) */
		if (!host.v1root[c][0])
			continue;
		if (c == DSEC_CG_BLKIO && !blkio_wanted(sb, host.v1root[c], parent))
			continue;
		/* co-mounted controllers (cpu,cpuacct) share one dir */
		snprintf(sb->cg.v1[c], DSEC_CG_PATH_MAX, "%s/%s/%s", host.v1root[c], parent,
			 sb->id);
		for (int d = 0; d < c; d++)
			if (!strcmp(sb->cg.v1[c], sb->cg.v1[d]))
				sb->cg.v1[c][0] = '\0';
	}
	return 0;
}

int dsec_cgroup_view(const struct dsec_sandbox *sb, const char **dir, const char **name, int max,
		     int *own)
{
	int n = 0;

	*own = 0;
	if (sb->cg.version == 2 && sb->cg.v2[0] && max > 0) {
		dir[0] = sb->cg.v2;
		name[0] = NULL;
		return *own = 1;
	}
	if (sb->cg.version != 1)
		return 0;
	for (int c = 0; c < DSEC_CG_NCTRL && n < max; c++) {
		const char *b = strrchr(host.v1root[c], '/');

		if (!sb->cg.v1[c][0] || !b || !b[1])
			continue;
		dir[n] = sb->cg.v1[c];
		name[n++] = b + 1;
	}
	*own = n;
	/* cpuset: our own cgroup there, under the name of the hierarchy's dir on the host */
	if (host.cpuset[0] && n < max) {
		dir[n] = host.cpuset;
		name[n++] = host.cpuset_name;
	}
	return n;
}

static void dirname_of(const char *path, char *buf, size_t n)
{
	char *s;

	snprintf(buf, n, "%s", path);
	s = strrchr(buf, '/');
	if (s && s != buf)
		*s = '\0';
}

/* The v2 parent needs our controllers in its subtree_control (its own parent, the hierarchy
 * root or a delegated cgroup, must offer them: dsec never writes there). Checked once. */
static int v2_parent(const char *dir, struct dsec_err *err)
{
	static char done[DSEC_CG_PATH_MAX];
	char parent[DSEC_CG_PATH_MAX], ctl[512], want[64] = "";

	dirname_of(dir, parent, sizeof(parent));
	if (!strcmp(done, parent))
		return 0;
	if (mkdir(parent, 0755) < 0 && errno != EEXIST)
		return dsec_err_sys(err, "mkdir cgroup '%s'", parent);
	if (read_small(parent, "cgroup.subtree_control", ctl, sizeof(ctl)) < 0)
		return dsec_err_sys(err, "read '%s/cgroup.subtree_control'", parent);
	if (!has_word(ctl, "memory", ' '))
		strcat(want, "+memory ");
	if (!has_word(ctl, "cpu", ' '))
		strcat(want, "+cpu ");
	if (!has_word(ctl, "pids", ' '))
		strcat(want, "+pids ");
	if (want[0] && write_str(parent, "cgroup.subtree_control", want, err) < 0)
		return dsec_err_wrap(err, "enable controllers");
	/* io is welcome but optional */
	if (read_small(parent, "cgroup.controllers", ctl, sizeof(ctl)) >= 0 &&
	    has_word(ctl, "io", ' ') &&
	    read_small(parent, "cgroup.subtree_control", ctl, sizeof(ctl)) >= 0 &&
	    !has_word(ctl, "io", ' '))
		write_str(parent, "cgroup.subtree_control", "+io", NULL);
	snprintf(done, sizeof(done), "%s", parent);
	return 0;
}

static int make_dir(const char *dir, struct dsec_err *err)
{
	char parent[DSEC_CG_PATH_MAX];

	if (mkdir(dir, 0755) == 0)
		return 0;
	if (errno != ENOENT)
		return dsec_err_sys(err, "mkdir cgroup '%s'", dir);
	dirname_of(dir, parent, sizeof(parent));
	if (mkdir(parent, 0755) < 0 && errno != EEXIST)
		return dsec_err_sys(err, "mkdir cgroup '%s'", parent);
	if (mkdir(dir, 0755) < 0)
		return dsec_err_sys(err, "mkdir cgroup '%s'", dir);
	return 0;
}

/* v1's TCP limit: the memory limit (none: unlimited), but at most DSEC_CG_TCP_SHARE of the TCP
 * memory the node has before pressure (net.ipv4.tcp_mem's first value, in pages), and at least
 * DSEC_CG_TCP_MIN. The kernel counts a sandbox's socket buffers in that node-wide figure too,
 * the host's own connections included: at a limit of --memory, two sandboxes of 1G put every
 * connection of the node under pressure, three at its hard limit. */
static void tcp_limit_v1(const char *dir, uint64_t memory)
{
	static uint64_t cap;
	char buf[128], val[32];
	uint64_t lim;

	if (!cap) {
		uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
		unsigned long long low = 0;

		/* in whole pages, as the kernel keeps it */
		cap = dsec_read_proc("/proc/sys/net/ipv4/tcp_mem", buf, sizeof(buf)) > 0 &&
			      sscanf(buf, "%llu", &low) == 1 && low
			  ? (uint64_t)low * page / DSEC_CG_TCP_SHARE / page * page
			  : UINT64_MAX;
		if (cap < DSEC_CG_TCP_MIN)
			cap = DSEC_CG_TCP_MIN;
	}
	lim = memory && memory < cap ? memory : cap;
	if (lim == UINT64_MAX)
		snprintf(val, sizeof(val), "-1");
	else
		snprintf(val, sizeof(val), "%llu", (unsigned long long)lim);
	write_str(dir, TCP_LIMIT_V1, val, NULL);
}

int dsec_cgroup_create(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	const struct dsec_limits *l = &sb->limits;
	char val[64];

	if (sb->cg.version == 2) {
		const char *d = sb->cg.v2;

		if (v2_parent(d, err) < 0 || make_dir(d, err) < 0)
			return -1; /* also EEXIST: not ours to remove */
		if (l->memory) {
			snprintf(val, sizeof(val), "%llu", (unsigned long long)l->memory);
			if (write_str(d, "memory.max", val, err) < 0)
				goto fail;
			/* swap would let a sandbox exceed --memory; absent without swap support */
			write_str(d, "memory.swap.max", "0", NULL);
		}
		if (l->cpus > 0) {
			snprintf(val, sizeof(val), "%llu 100000",
				 (unsigned long long)(l->cpus * 100000 + 0.5));
			if (write_str(d, "cpu.max", val, err) < 0)
				goto fail;
		}
		if (l->pids) {
			snprintf(val, sizeof(val), "%llu", (unsigned long long)l->pids);
			if (write_str(d, "pids.max", val, err) < 0)
				goto fail;
		}
		if (dsec_cgroup_set_resources(sb, NULL, err) < 0)
			goto fail;
		return 0;
	}
	for (int c = 0; c < DSEC_CG_NCTRL; c++) {
		if (sb->cg.v1[c][0] && make_dir(sb->cg.v1[c], err) < 0) {
			if (err && err->errnum == EEXIST)
				return -1; /* not ours to remove */
			goto fail;
		}
	}
	if (l->memory) {
		const char *d = sb->cg.v1[DSEC_CG_MEMORY];

		snprintf(val, sizeof(val), "%llu", (unsigned long long)l->memory);
		if (write_str(d, "memory.limit_in_bytes", val, err) < 0)
			goto fail;
		/* present only with swap accounting; keeps swap inside the limit */
		write_str(d, "memory.memsw.limit_in_bytes", val, NULL);
	}
	/* v1 charges socket buffers to a memory cgroup only once it has a TCP limit, and apart
	 * from its memory: without one, a sandbox's unread loopback data is the node's
	 * (net.ipv4.tcp_mem), past its --memory */
	if (sb->cg.v1[DSEC_CG_MEMORY][0])
		tcp_limit_v1(sb->cg.v1[DSEC_CG_MEMORY], l->memory);
	if (l->cpus > 0) {
		snprintf(val, sizeof(val), "%llu", (unsigned long long)(l->cpus * 100000 + 0.5));
		if (write_str(sb->cg.v1[DSEC_CG_CPU], "cpu.cfs_quota_us", val, err) < 0)
			goto fail;
	}
	if (l->pids) {
		snprintf(val, sizeof(val), "%llu", (unsigned long long)l->pids);
		if (write_str(sb->cg.v1[DSEC_CG_PIDS], "pids.max", val, err) < 0)
			goto fail;
	}
	if (dsec_cgroup_set_resources(sb, NULL, err) < 0)
		goto fail;
	return 0;
fail:
	dsec_cgroup_remove(sb, NULL);
	return -1;
}

int dsec_cgroup_open(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	int fd;

	if (sb->cg.version != 2)
		return dsec_err_set(err, ENOTSUP, "cgroup v1: no cgroup fd for clone3");
	fd = open(sb->cg.v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return dsec_err_sys(err, "open cgroup '%s'", sb->cg.v2);
	return fd;
}

int dsec_cgroup_attach(const struct dsec_sandbox *sb, pid_t pid, struct dsec_err *err)
{
	char val[32];

	snprintf(val, sizeof(val), "%d", (int)pid);
	if (sb->cg.version == 2)
		return write_str(sb->cg.v2, "cgroup.procs", val, err);
	for (int c = 0; c < DSEC_CG_NCTRL; c++)
		if (sb->cg.v1[c][0] && write_str(sb->cg.v1[c], "cgroup.procs", val, err) < 0)
			return -1;
	return 0;
}

/* The dir whose cgroup.procs lists every process of the sandbox. */
static const char *procs_dir(const struct dsec_sandbox *sb)
{
	if (sb->cg.version == 2)
		return sb->cg.v2;
	if (sb->cg.v1[DSEC_CG_PIDS][0])
		return sb->cg.v1[DSEC_CG_PIDS];
	return sb->cg.v1[DSEC_CG_MEMORY];
}

/* SIGKILL every pid listed in dir/cgroup.procs. Returns how many were listed, -1 when the
 * cgroup is gone. */
static int kill_listed(const char *dir)
{
	char path[DSEC_CG_PATH_MAX + 32], buf[4096];
	int fd, n = 0;
	ssize_t r;
	size_t have = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while ((r = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		char *s = buf, *nl;

		have += (size_t)r;
		buf[have] = '\0';
		while ((nl = strchr(s, '\n'))) {
			*nl = '\0';
			if (*s) {
				kill((pid_t)atoi(s), SIGKILL);
				n++;
			}
			s = nl + 1;
		}
		have = strlen(s);
		memmove(buf, s, have);
	}
	close(fd);
	return n;
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

int dsec_cgroup_kill(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	const char *d = procs_dir(sb);
	int used_kill = 0;

	if (!d[0])
		return 0;
	if (sb->cg.version == 2 && write_str(d, "cgroup.kill", "1", NULL) == 0)
		used_kill = 1;
	for (int i = 0; i < 5000; i++) {
		int n;

		if (used_kill) {
			char ev[256];

			if (read_small(d, "cgroup.events", ev, sizeof(ev)) < 0)
				return 0;
			n = strstr(ev, "populated 1") != NULL;
		} else {
			n = kill_listed(d);
		}
		if (n <= 0)
			return 0;
		sleep_us(i < 100 ? 100 : 1000);
	}
	return dsec_err_set(err, EBUSY, "processes in cgroup '%s' do not die", d);
}

static int rmdir_retry(const char *dir, struct dsec_err *err)
{
	for (int i = 0; i < 2000; i++) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			break;
		sleep_us(i < 100 ? 100 : 1000);
	}
	return dsec_err_sys(err, "rmdir cgroup '%s'", dir);
}

/* Remove a sandbox's cgroup dir and the per-exec cgroups below it (exec-*), which a dsec-exec
 * killed during a timed command leaves behind. Their processes died with the holder. */
static int rmdir_tree(const char *dir, struct dsec_err *err)
{
	char sub[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(dir);
	int rc = 0;

	if (d) {
		while ((de = readdir(d)))
			if (de->d_type == DT_DIR && !strncmp(de->d_name, "exec-", 5)) {
				snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
				if (rmdir_retry(sub, err) < 0)
					rc = -1;
			}
		closedir(d);
	}
	return rmdir_retry(dir, err) < 0 ? -1 : rc;
}

/* Did the process pid start no later than t (CLOCK_REALTIME)? Then it is the one that had
 * that pid at t. 0 when it started later (the pid was used again) or is gone. */
static int started_by(pid_t pid, const struct timespec *t)
{
	char path[64], buf[1024], *p;
	unsigned long long ticks = 0;
	struct timespec real, boot;
	long long at, start;
	long hz = sysconf(_SC_CLK_TCK);
	ssize_t len;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0 || hz <= 0)
		return 0;
	buf[len] = '\0';
	/* starttime, field 22: the 20th after the ")" that ends the command's name */
	p = strrchr(buf, ')');
	for (i = 0; p && i < 20; i++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &ticks) != 1)
		return 0;
	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	/* t on the boot clock the start is counted on, in ns; a tick of slack */
	at =
	    (long long)t->tv_sec * 1000000000LL + t->tv_nsec -
	    ((long long)(real.tv_sec - boot.tv_sec) * 1000000000LL + (real.tv_nsec - boot.tv_nsec));
	start = (long long)(ticks * (1000000000ULL / (unsigned long long)hz));
	return start <= at + 1000000000LL / hz;
}

/* Kill every process in an exec cgroup and remove it: cgroup.kill (v2), else freeze, SIGKILL
 * each listed, thaw, until empty. */
static int exec_cg_kill(const char *dir, int v2, int freezer, struct dsec_err *err)
{
	int used_kill = v2 && write_str(dir, "cgroup.kill", "1", NULL) == 0;

	for (int i = 0; i < 5000; i++) {
		char ev[256];
		int n;

		if (used_kill) {
			n = read_small(dir, "cgroup.events", ev, sizeof(ev)) < 0
				? 0
				: strstr(ev, "populated 1") != NULL;
		} else {
			if (freezer)
				write_str(dir, "freezer.state", "FROZEN", NULL);
			n = kill_listed(dir);
			if (freezer)
				write_str(dir, "freezer.state", "THAWED", NULL);
		}
		if (n <= 0)
			break;
		sleep_us(i < 100 ? 100 : 1000);
	}
	return rmdir_retry(dir, err);
}

int dsec_cgroup_exec_orphans(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	int n = 0, rc = 0;

	/* v2: below the sandbox's cgroup; v1: below its freezer cgroup, else its pids one */
	for (int c = 0; c < DSEC_CG_NCTRL; c++) {
		const char *dir = sb->cg.version == 2 ? sb->cg.v2 : sb->cg.v1[c];
		struct dirent *de;
		DIR *d;

		if (sb->cg.version != 2 && (sb->cg.version != 1 || !dir[0]))
			continue;
		if ((d = opendir(dir))) {
			while ((de = readdir(d))) {
				char sub[PATH_MAX];
				struct stat st;
				unsigned seq;
				int pid;

				if (de->d_type != DT_DIR ||
				    sscanf(de->d_name, "exec-%d-%u", &pid, &seq) != 2 || pid <= 0)
					continue;
				snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
				if (stat(sub, &st) < 0 || started_by((pid_t)pid, &st.st_mtim))
					continue; /* its dsec-exec still runs */
				if (exec_cg_kill(sub, sb->cg.version == 2, c == DSEC_CG_FREEZER,
						 err) < 0)
					rc = -1;
				else
					n++;
			}
			closedir(d);
		}
		if (sb->cg.version == 2)
			break;
	}
	return rc < 0 ? -1 : n;
}

int dsec_cgroup_remove(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	int rc = 0;

	if (sb->cg.version == 2)
		return sb->cg.v2[0] ? rmdir_tree(sb->cg.v2, err) : 0;
	for (int c = 0; c < DSEC_CG_NCTRL; c++)
		if (sb->cg.v1[c][0] && rmdir_tree(sb->cg.v1[c], err) < 0)
			rc = -1;
	return rc;
}

static uint64_t read_u64(const char *dir, const char *file)
{
	char buf[64];

	if (!dir[0] || read_small(dir, file, buf, sizeof(buf)) < 0)
		return 0;
	return strtoull(buf, NULL, 10);
}

int dsec_cgroup_stats(const struct dsec_sandbox *sb, struct dsec_cgroup_stats *st,
		      struct dsec_err *err)
{
	memset(st, 0, sizeof(*st));
	if (sb->cg.version == 2) {
		char buf[1024], *s;

		st->memory = read_u64(sb->cg.v2, "memory.current");
		st->pids = read_u64(sb->cg.v2, "pids.current");
		if (read_small(sb->cg.v2, "cpu.stat", buf, sizeof(buf)) >= 0 &&
		    (s = strstr(buf, "usage_usec ")))
			st->cpu_us = strtoull(s + 11, NULL, 10);
		return 0;
	}
	st->memory = read_u64(sb->cg.v1[DSEC_CG_MEMORY], "memory.usage_in_bytes");
	st->pids = read_u64(sb->cg.v1[DSEC_CG_PIDS], "pids.current");
	if (sb->cg.v1[DSEC_CG_CPUACCT][0])
		st->cpu_us = read_u64(sb->cg.v1[DSEC_CG_CPUACCT], "cpuacct.usage") / 1000;
	else
		st->cpu_us = read_u64(sb->cg.v1[DSEC_CG_CPU], "cpuacct.usage") / 1000;
	return 0;
}

/* The parent dirs of this run dir, one per hierarchy in use. */
static int parent_dirs(const struct dsec_paths *p, char dirs[][DSEC_CG_PATH_MAX],
		       struct dsec_err *err)
{
	char parent[128];
	int v = dsec_cgroup_version(err), n = 0;

	if (v < 0)
		return -1;
	parent_name(p, parent, sizeof(parent));
	if (v == 2) {
		snprintf(dirs[n++], DSEC_CG_PATH_MAX, "%s/%s", host.v2root, parent);
		return n;
	}
	for (int c = 0; c < DSEC_CG_NCTRL; c++) {
		if (!host.v1root[c][0])
			continue;
		snprintf(dirs[n], DSEC_CG_PATH_MAX, "%s/%s", host.v1root[c], parent);
		for (int d = 0; d < n; d++)
			if (!strcmp(dirs[d], dirs[n]))
				n--;
		n++;
	}
	return n;
}

int dsec_cgroup_foreach(const struct dsec_paths *p, dsec_cgroup_fn fn, void *ctx,
			struct dsec_err *err)
{
	char dirs[DSEC_CG_NCTRL][DSEC_CG_PATH_MAX];
	int n = parent_dirs(p, dirs, err);

	if (n < 0)
		return -1;
	/* every hierarchy: a crash may have left a dir in one and not in another; a name seen
	 * twice is reported twice, the callback is idempotent */
	for (int i = 0; i < n; i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *e;

		if (!d)
			continue;
		while ((e = readdir(d))) {
			if (e->d_type != DT_DIR || e->d_name[0] == '.')
				continue;
			if (fn(e->d_name, ctx) < 0)
				break;
		}
		closedir(d);
	}
	return 0;
}

void dsec_cgroup_parent_pids(const struct dsec_paths *p, uint64_t pids, int host_share)
{
	static int done;
	char parent[128], dir[DSEC_CG_PATH_MAX], val[32];
	int v;

	if (done || getenv("DSEC_CGROUP_PARENT")) /* set: a parent not ours to limit */
		return;
	done = 1;
	if (host_share) {
		if (pids <= 2 * DSEC_CG_HOST_PIDS)
			return; /* too few to share: the sandboxes' own limits alone */
		pids -= pids / 8 > DSEC_CG_HOST_PIDS ? pids / 8 : DSEC_CG_HOST_PIDS;
	}
	if ((v = dsec_cgroup_version(NULL)) < 0 || (v == 1 && !host.v1root[DSEC_CG_PIDS][0]))
		return;
	parent_name(p, parent, sizeof(parent));
	snprintf(dir, sizeof(dir), "%s/%s", v == 2 ? host.v2root : host.v1root[DSEC_CG_PIDS],
		 parent);
	snprintf(val, sizeof(val), "%llu", (unsigned long long)pids);
	write_str(dir, "pids.max", val, NULL);
}

int dsec_cgroup_remove_parent(const struct dsec_paths *p, struct dsec_err *err)
{
	char dirs[DSEC_CG_NCTRL][DSEC_CG_PATH_MAX];
	int n = parent_dirs(p, dirs, err), rc = 0;

	if (n < 0)
		return -1;
	if (getenv("DSEC_CGROUP_PARENT"))
		return 0; /* not ours to remove */
	for (int i = 0; i < n; i++)
		if (rmdir(dirs[i]) < 0 && errno != ENOENT && errno != EBUSY && errno != ENOTEMPTY)
			rc = dsec_err_sys(err, "rmdir cgroup '%s'", dirs[i]);
	return rc;
}

/* One limit as the cgroup file wants it: a number, or "max" (v2) / "-1" (v1) for none. */
static void limit_str(char *buf, size_t n, uint64_t v, int version)
{
	if (v)
		snprintf(buf, n, "%llu", (unsigned long long)v);
	else
		snprintf(buf, n, "%s", version == 2 ? "max" : "-1");
}

int dsec_cgroup_set_limits(const struct dsec_sandbox *sb, const struct dsec_limits *old,
			   const struct dsec_limits *l, struct dsec_err *err)
{
	int v = sb->cg.version;
	char val[64];

	if (v != 1 && v != 2)
		return 0;
	if (!old || old->memory != l->memory) {
		limit_str(val, sizeof(val), l->memory, v);
		if (v == 2) {
			if (write_str(sb->cg.v2, "memory.max", val, err) < 0)
				return -1;
		} else {
			const char *d = sb->cg.v1[DSEC_CG_MEMORY];
			int up = !old || !l->memory || (old->memory && l->memory > old->memory);

			/* memsw must stay >= the memory limit: raise it first, lower it last */
			if (up)
				write_str(d, "memory.memsw.limit_in_bytes", val, NULL);
			if (write_str(d, "memory.limit_in_bytes", val, err) < 0)
				return -1;
			if (!up)
				write_str(d, "memory.memsw.limit_in_bytes", val, NULL);
			tcp_limit_v1(d, l->memory); /* as at create */
		}
	}
	if (!old || old->cpus != l->cpus) {
		unsigned long long q = (unsigned long long)(l->cpus * 100000 + 0.5);

		if (v == 2) {
			if (l->cpus > 0)
				snprintf(val, sizeof(val), "%llu 100000", q);
			else
				snprintf(val, sizeof(val), "max 100000");
			if (write_str(sb->cg.v2, "cpu.max", val, err) < 0)
				return -1;
		} else {
			if (l->cpus > 0)
				snprintf(val, sizeof(val), "%llu", q);
			else
				snprintf(val, sizeof(val), "-1");
			if (write_str(sb->cg.v1[DSEC_CG_CPU], "cpu.cfs_quota_us", val, err) < 0)
				return -1;
		}
	}
	if (!old || old->pids != l->pids) {
		if (l->pids)
			snprintf(val, sizeof(val), "%llu", (unsigned long long)l->pids);
		else
			snprintf(val, sizeof(val), "max");
		if (write_str(v == 2 ? sb->cg.v2 : sb->cg.v1[DSEC_CG_PIDS], "pids.max", val, err) <
		    0)
			return -1;
	}
	return 0;
}

/* The dir whose freeze state is the sandbox's: v2's cgroup, v1's freezer cgroup. */
static const char *freeze_dir(const struct dsec_sandbox *sb)
{
	if (sb->cg.version == 2)
		return sb->cg.v2;
	if (sb->cg.version == 1)
		return sb->cg.v1[DSEC_CG_FREEZER];
	return "";
}

int dsec_cgroup_frozen(const struct dsec_sandbox *sb)
{
	const char *d = freeze_dir(sb);
	char buf[256];

	if (!d[0])
		return -1;
	if (sb->cg.version == 2) {
		if (read_small(d, "cgroup.freeze", buf, sizeof(buf)) < 0)
			return -1;
		return buf[0] == '1';
	}
	if (read_small(d, "freezer.state", buf, sizeof(buf)) < 0)
		return -1;
	return strncmp(buf, "THAWED", 6) != 0;
}

/* A pause made by a tool (dsec-layer commit) is marked in the sandbox's state dir with the
 * tool's pid and start time, from before the freeze to after the thaw: a tool killed in between
 * leaves the mark, and whoever finds its owner gone thaws the sandbox. */
#define PAUSE_MARK "tool-paused"

static void mark_path(const struct dsec_sandbox *sb, char *buf, size_t n)
{
	snprintf(buf, n, "%s/" PAUSE_MARK, sb->dir);
}

int dsec_cgroup_pause_stale(const struct dsec_sandbox *sb)
{
	char path[PATH_MAX], buf[64];
	unsigned long long start;
	ssize_t n;
	int pid, fd;

	mark_path(sb, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if (sscanf(buf, "%d %llu", &pid, &start) != 2 || pid <= 0)
		return 1;
	return dsec_proc_start_time(pid) != start;
}

void dsec_cgroup_pause_drop(const struct dsec_sandbox *sb)
{
	char path[PATH_MAX];

	mark_path(sb, path, sizeof(path));
	unlink(path);
}

int dsec_cgroup_pause(const struct dsec_sandbox *sb, int on, struct dsec_err *err)
{
	char path[PATH_MAX], buf[64];
	int n;

	if (!on) {
		if (dsec_cgroup_freeze(sb, 0, err) < 0)
			return -1;
		dsec_cgroup_pause_drop(sb);
		return 0;
	}
	mark_path(sb, path, sizeof(path));
	n = snprintf(buf, sizeof(buf), "%d %llu\n", (int)getpid(), dsec_proc_start_time(0));
	if (dsec_write_atomic(AT_FDCWD, path, buf, (size_t)n, 0600, 0, err) < 0)
		return -1;
	/* a pause of a killed tool is taken over as it is */
	if (dsec_cgroup_frozen(sb) != 1 && dsec_cgroup_freeze(sb, 1, err) < 0) {
		dsec_cgroup_freeze(sb, 0, NULL);
		dsec_cgroup_pause_drop(sb);
		return -1;
	}
	return 0;
}

int dsec_cgroup_pause_orphan(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	if (!dsec_cgroup_pause_stale(sb))
		return 0;
	return dsec_cgroup_pause(sb, 0, err) < 0 ? -1 : 1;
}

int dsec_cgroup_freeze(const struct dsec_sandbox *sb, int frozen, struct dsec_err *err)
{
	const char *d = freeze_dir(sb);
	char buf[256];

	if (!d[0])
		return dsec_err_set(err, ENOTSUP, "%s: no freezer cgroup", sb->id);
	if (sb->cg.version == 2) {
		if (write_str(d, "cgroup.freeze", frozen ? "1" : "0", err) < 0)
			return -1;
	} else if (write_str(d, "freezer.state", frozen ? "FROZEN" : "THAWED", err) < 0) {
		return -1;
	}
	/* freezing completes asynchronously: wait until every task has stopped (bounded) */
	for (int i = 0; frozen && i < 2000; i++) {
		if (sb->cg.version == 2 ? read_small(d, "cgroup.events", buf, sizeof(buf)) < 0 ||
					      strstr(buf, "frozen 1")
					: read_small(d, "freezer.state", buf, sizeof(buf)) < 0 ||
					      !strncmp(buf, "FROZEN", 6))
			return 0;
		sleep_us(i < 100 ? 50 : 1000);
	}
	if (frozen)
		return dsec_err_set(err, ETIMEDOUT, "%s: tasks do not freeze", sb->id);
	return 0;
}

/* For cgroup-res.c (cgroup-int.h). */
int dsec_cg_write(const char *dir, const char *file, const char *val, struct dsec_err *err)
{
	return write_str(dir, file, val, err);
}

ssize_t dsec_cg_read(const char *dir, const char *file, char *buf, size_t n)
{
	return read_small(dir, file, buf, n);
}

uint64_t dsec_cg_read_u64(const char *dir, const char *file)
{
	return read_u64(dir, file);
}
