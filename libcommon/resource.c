#include "resource.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "admit.h"
#include "cgroup.h"
#include "pool.h"

/* The new mount API's constants (linux/mount.h clashes with glibc's sys/mount.h). */
#define RES_FSPICK_CLOEXEC 0x1
#define RES_FSPICK_EMPTY_PATH 0x8
#define RES_FSCONFIG_SET_STRING 1
#define RES_FSCONFIG_CMD_RECONFIGURE 7
#define RES_TMPFS_MAGIC 0x01021994

#define BE_OOM_SCORE_ADJ "500"

static const struct {
	const char *name; /* record key; the option is the same with '-' */
	unsigned bit;
} keys[] = {{"cpus", DSEC_RES_CPUS},
	    {"memory", DSEC_RES_MEMORY},
	    {"pids", DSEC_RES_PIDS},
	    {"disk", DSEC_RES_DISK},
	    {"io_bps", DSEC_RES_IO_BPS},
	    {"io_iops", DSEC_RES_IO_IOPS},
	    {"cpu_request", DSEC_RES_REQ_CPUS},
	    {"memory_request", DSEC_RES_REQ_MEMORY},
	    {"pids_request", DSEC_RES_REQ_PIDS},
	    {"disk_request", DSEC_RES_REQ_DISK},
	    {"io_weight", DSEC_RES_IO_WEIGHT},
	    {"class", DSEC_RES_CLASS}};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

int dsec_res_parse(const char *name, const char *val, int opt, struct dsec_res *r, unsigned *set,
		   struct dsec_err *err)
{
	char key[32], what[40];
	unsigned bit = 0;
	long long n;
	uint64_t u;
	double d;
	char *end;

	snprintf(key, sizeof(key), "%s", name);
	for (char *s = key; *s; s++)
		if (*s == '-')
			*s = '_';
	for (size_t i = 0; i < NKEYS; i++)
		if (!strcmp(key, keys[i].name))
			bit = keys[i].bit;
	if (!bit)
		return dsec_err_set(err, EINVAL, "'%s': not a resource", name);
	if (bit & (DSEC_RES_CPUS | DSEC_RES_MEMORY | DSEC_RES_PIDS | DSEC_RES_DISK)) {
		if (dsec_limit_parse(key, val, opt, &r->lim, NULL, err) < 0)
			return -1;
		*set |= bit;
		return 0;
	}
	if (opt) {
		snprintf(what, sizeof(what), "--%s", key);
		for (char *s = what; *s; s++)
			if (*s == '_')
				*s = '-';
	} else {
		snprintf(what, sizeof(what), "'%s'", key);
	}
	switch (bit) {
	case DSEC_RES_REQ_CPUS:
		errno = 0;
		d = strtod(val, &end);
		if (errno || end == val || *end || !isfinite(d) || d < 0 || d > 4096)
			return dsec_err_set(err, ERANGE, "%s '%s': want a number from 0 to 4096",
					    what, val);
		r->req.cpus = d;
		break;
	case DSEC_RES_REQ_MEMORY:
	case DSEC_RES_REQ_DISK:
	case DSEC_RES_IO_BPS:
		if (dsec_parse_size(val, 1ULL << 50, &u, what, err) < 0)
			return -1;
		if (bit == DSEC_RES_REQ_MEMORY)
			r->req.memory = u;
		else if (bit == DSEC_RES_REQ_DISK)
			r->req.disk = u;
		else
			r->lim.io_bps = u;
		break;
	case DSEC_RES_REQ_PIDS:
	case DSEC_RES_IO_IOPS:
		if (dsec_parse_count(val, 0, bit == DSEC_RES_REQ_PIDS ? 4194304 : 1000000000, &n,
				     what, err) < 0)
			return -1;
		*(bit == DSEC_RES_REQ_PIDS ? &r->req.pids : &r->lim.io_iops) = (uint64_t)n;
		break;
	case DSEC_RES_IO_WEIGHT:
		if (dsec_parse_count(val, 1, 10000, &n, what, err) < 0)
			return -1;
		r->req.io_weight = (unsigned)n;
		break;
	case DSEC_RES_CLASS:
		if (!strcmp(val, "ls"))
			r->cls = DSEC_CLASS_LS;
		else if (!strcmp(val, "be"))
			r->cls = DSEC_CLASS_BE;
		else
			return dsec_err_set(err, EINVAL, "%s '%s': want ls or be", what, val);
		break;
	}
	*set |= bit;
	return 0;
}

static int member(json_t *v, const char *key, struct dsec_res *r, unsigned *set,
		  struct dsec_err *err)
{
	char buf[64];

	if (json_is_integer(v))
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
	else if (json_is_string(v))
		snprintf(buf, sizeof(buf), "%s", json_string_value(v));
	else
		return dsec_err_set(err, EINVAL, "'%s': want a number or a string", key);
	return dsec_res_parse(key, buf, 0, r, set, err);
}

int dsec_res_from_record(json_t *rec, int limits, struct dsec_res *r, unsigned *set,
			 struct dsec_err *err)
{
	static const char *const req_keys[][2] = {{"cpus", "cpu_request"},
						  {"memory", "memory_request"},
						  {"pids", "pids_request"},
						  {"disk", "disk_request"},
						  {"io_weight", "io_weight"}};
	json_t *v, *req;

	for (size_t i = limits ? 0 : 4; i < NKEYS; i++)
		if ((v = json_object_get(rec, keys[i].name)) &&
		    member(v, keys[i].name, r, set, err) < 0)
			return -1;
	req = json_object_get(rec, "requests");
	if (req && !json_is_object(req))
		return dsec_err_set(err, EINVAL, "'requests': want an object");
	for (size_t i = 0; req && i < sizeof(req_keys) / sizeof(req_keys[0]); i++)
		if ((v = json_object_get(req, req_keys[i][0])) &&
		    member(v, req_keys[i][1], r, set, err) < 0)
			return -1;
	return 0;
}

int dsec_res_check(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	const struct dsec_limits *l = &sb->limits;
	const struct dsec_requests *q = &sb->req;

	if (l->cpus > 0 && q->cpus > l->cpus + 1e-9)
		return dsec_err_set(err, EINVAL, "cpu request %g is above the cpus limit %g",
				    q->cpus, l->cpus);
	if (l->memory && q->memory > l->memory)
		return dsec_err_set(err, EINVAL,
				    "memory request %llu is above the memory limit %llu",
				    (unsigned long long)q->memory, (unsigned long long)l->memory);
	if (l->pids && q->pids > l->pids)
		return dsec_err_set(err, EINVAL, "pids request %llu is above the pids limit %llu",
				    (unsigned long long)q->pids, (unsigned long long)l->pids);
	if (l->disk && q->disk > l->disk)
		return dsec_err_set(err, EINVAL, "disk request %llu is above the disk limit %llu",
				    (unsigned long long)q->disk, (unsigned long long)l->disk);
	return 0;
}

int dsec_res_prepare(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_err *err)
{
	const struct dsec_node *n;

	if (dsec_res_check(sb, err) < 0)
		return -1;
	if (!sb->limits.io_bps && !sb->limits.io_iops) {
		sb->io_dev[0] = '\0';
		return 0;
	}
	if (!(n = dsec_node_get(p, err)))
		return -1;
	if (!n->io_dev[0])
		return dsec_err_set(err, ENODEV,
				    "io limits: no block device known (set io_device in "
				    "node.conf)");
	snprintf(sb->io_dev, sizeof(sb->io_dev), "%s", n->io_dev);
	return 0;
}

json_t *dsec_res_requests_json(const struct dsec_requests *r)
{
	json_t *o = json_object();

	if (r->cpus == (double)(long long)r->cpus)
		json_object_set_new(o, "cpus", json_integer((json_int_t)r->cpus));
	else
		json_object_set_new(o, "cpus", json_real(r->cpus));
	json_object_set_new(o, "memory", json_integer((json_int_t)r->memory));
	json_object_set_new(o, "pids", json_integer((json_int_t)r->pids));
	json_object_set_new(o, "disk", json_integer((json_int_t)r->disk));
	if (r->io_weight)
		json_object_set_new(o, "io_weight", json_integer(r->io_weight));
	return o;
}

static void io_limits_json(json_t *lim, const struct dsec_sandbox *sb)
{
	if (!json_is_object(lim) || (!sb->limits.io_bps && !sb->limits.io_iops))
		return;
	json_object_set_new(lim, "io_bps", json_integer((json_int_t)sb->limits.io_bps));
	json_object_set_new(lim, "io_iops", json_integer((json_int_t)sb->limits.io_iops));
	json_object_set_new(lim, "io_device", json_string(sb->io_dev));
}

void dsec_res_to_json(const struct dsec_sandbox *sb, json_t *state)
{
	io_limits_json(json_object_get(state, "limits"), sb);
	json_object_set_new(state, "requests", dsec_res_requests_json(&sb->req));
	json_object_set_new(state, "class", json_string(sb->cls == DSEC_CLASS_BE ? "be" : "ls"));
}

void dsec_res_record(json_t *rec, const struct dsec_sandbox *sb)
{
	dsec_res_to_json(sb, rec);
}

void dsec_res_from_json(json_t *state, struct dsec_sandbox *sb)
{
	json_t *lim = json_object_get(state, "limits"), *req = json_object_get(state, "requests");
	json_t *v;

	sb->limits.io_bps = (uint64_t)json_integer_value(json_object_get(lim, "io_bps"));
	sb->limits.io_iops = (uint64_t)json_integer_value(json_object_get(lim, "io_iops"));
	v = json_object_get(lim, "io_device");
	snprintf(sb->io_dev, sizeof(sb->io_dev), "%s",
		 json_is_string(v) ? json_string_value(v) : "");
	sb->req.cpus = json_number_value(json_object_get(req, "cpus"));
	sb->req.memory = (uint64_t)json_integer_value(json_object_get(req, "memory"));
	sb->req.pids = (uint64_t)json_integer_value(json_object_get(req, "pids"));
	sb->req.disk = (uint64_t)json_integer_value(json_object_get(req, "disk"));
	sb->req.io_weight = (unsigned)json_integer_value(json_object_get(req, "io_weight"));
	v = json_object_get(state, "class");
	sb->cls = json_is_string(v) && !strcmp(json_string_value(v), "be") ? DSEC_CLASS_BE
									   : DSEC_CLASS_LS;
}

/* Bytes received and sent on the sandbox's own network namespace, loopback left out: the
 * holder's /proc/PID/net/dev. -1 when unknown (gone, or --net host: the host's counters). */
static int net_bytes(const struct dsec_sandbox *sb, uint64_t *rx, uint64_t *tx)
{
	char path[64], buf[8192], *l;

	*rx = *tx = 0;
	if (sb->net == DSEC_NET_HOST || sb->holder_pid <= 0)
		return -1;
	/* --net none: loopback is all there is, and nothing in the sandbox may add another
	 * interface (the namespace is the host's to configure): 0 without reading */
	if (sb->net == DSEC_NET_NONE)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/net/dev", (int)sb->holder_pid);
	if (dsec_read_proc(path, buf, sizeof(buf)) < 0)
		return -1;
	for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned long long v[9];
		char *c = strchr(line, ':');

		if (!c)
			continue; /* the two header lines */
		*c = '\0';
		l = line + strspn(line, " ");
		if (!strcmp(l, "lo") ||
		    sscanf(c + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
			   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) != 9)
			continue;
		*rx += v[0];
		*tx += v[8];
	}
	return 0;
}

json_t *dsec_res_usage_json(const struct dsec_sandbox *sb)
{
	struct dsec_cgroup_usage u;
	uint64_t rx, tx;
	int net = net_bytes(sb, &rx, &tx);

	if (dsec_cgroup_usage(sb, &u, NULL) < 0)
		memset(&u, 0, sizeof(u));
	return json_pack(
	    "{s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o}", "cpu_us", (json_int_t)u.now.cpu_us,
	    "memory", (json_int_t)u.now.memory, "memory_peak", (json_int_t)u.memory_peak, "pids",
	    (json_int_t)u.now.pids, "io_read_bytes",
	    u.io_known ? json_integer((json_int_t)u.io_rbytes) : json_null(), "io_write_bytes",
	    u.io_known ? json_integer((json_int_t)u.io_wbytes) : json_null(), "net_rx_bytes",
	    net == 0 ? json_integer((json_int_t)rx) : json_null(), "net_tx_bytes",
	    net == 0 ? json_integer((json_int_t)tx) : json_null());
}

void dsec_res_exec_child(const struct dsec_sandbox *sb)
{
	struct sched_param sp = {0};
	int fd;

	if (sb->cls != DSEC_CLASS_BE)
		return;
	sched_setscheduler(0, SCHED_IDLE, &sp);
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, BE_OOM_SCORE_ADJ, sizeof(BE_OOM_SCORE_ADJ) - 1) < 0)
			(void)0;
		close(fd);
	}
}

static int set_policy(pid_t tid, enum dsec_class cls)
{
	struct sched_param sp = {0};

	return sched_setscheduler(tid, cls == DSEC_CLASS_BE ? SCHED_IDLE : SCHED_OTHER, &sp);
}

int dsec_res_sched_holder(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	if (sb->holder_pid <= 0 || set_policy(sb->holder_pid, sb->cls) < 0)
		return dsec_err_sys(err, "%s: scheduling policy of holder %d", sb->id,
				    (int)sb->holder_pid);
	return 0;
}

/* Every task in dir (tasks on v1, cgroup.threads on v2) and its exec-* cgroups gets cls's
 * policy and OOM score; the holder keeps its -1000. */
static void sched_dir(const char *dir, const struct dsec_sandbox *sb, int depth)
{
	char path[PATH_MAX];
	struct dirent *de;
	FILE *f;
	DIR *d;
	int tid;

	snprintf(path, sizeof(path), "%s/%s", dir,
		 sb->cg.version == 2 ? "cgroup.threads" : "tasks");
	if ((f = fopen(path, "re"))) {
		while (fscanf(f, "%d", &tid) == 1) {
			char oom[64];
			int fd;

			set_policy(tid, sb->cls);
			if (tid == sb->holder_pid)
				continue;
			snprintf(oom, sizeof(oom), "/proc/%d/oom_score_adj", tid);
			fd = open(oom, O_WRONLY | O_CLOEXEC);
			if (fd >= 0) {
				const char *v = sb->cls == DSEC_CLASS_BE ? BE_OOM_SCORE_ADJ : "0";

				if (write(fd, v, strlen(v)) < 0)
					(void)0;
				close(fd);
			}
		}
		fclose(f);
	}
	if (depth > 0 || !(d = opendir(dir)))
		return;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && !strncmp(de->d_name, "exec-", 5)) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			sched_dir(path, sb, depth + 1);
		}
	closedir(d);
}

/* The writable tmpfs's size: reconfigured through the sandbox's /dev, which is a bind mount of
 * that tmpfs (ns.c), reached through the holder's root link; fspick needs no mount namespace
 * of ours and leaves the mount's flags alone. */
static int set_disk(const struct dsec_sandbox *sb, uint64_t disk, struct dsec_err *err)
{
	char path[64], val[32];
	struct statfs st;
	int pfd, fd;

	snprintf(path, sizeof(path), "/proc/%d/root/dev", (int)sb->holder_pid);
	pfd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return dsec_err_sys(err, "%s: open the sandbox's tmpfs", sb->id);
	if (!dsec_sandbox_alive(sb) || fstatfs(pfd, &st) < 0 || st.f_type != RES_TMPFS_MAGIC) {
		close(pfd);
		return dsec_err_set(err, ESRCH, "%s: the sandbox's tmpfs is gone", sb->id);
	}
	fd = (int)syscall(SYS_fspick, pfd, "", RES_FSPICK_CLOEXEC | RES_FSPICK_EMPTY_PATH);
	close(pfd);
	if (fd < 0)
		return dsec_err_sys(err, "%s: fspick the sandbox's tmpfs", sb->id);
	snprintf(val, sizeof(val), "%llu", (unsigned long long)disk);
	if (syscall(SYS_fsconfig, fd, RES_FSCONFIG_SET_STRING, "size", val, 0) < 0 ||
	    syscall(SYS_fsconfig, fd, RES_FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0) < 0) {
		/* tmpfs refuses a size below what is in use (EINVAL) */
		dsec_err_sys(err, "%s: resize tmpfs to %llu bytes (in use above that?)", sb->id,
			     (unsigned long long)disk);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int dsec_res_apply(const struct dsec_sandbox *sb, const struct dsec_sandbox *old,
		   struct dsec_err *err)
{
	if (dsec_cgroup_set_limits(sb, &old->limits, &sb->limits, err) < 0 ||
	    dsec_cgroup_set_resources(sb, old, err) < 0)
		return -1;
	if (sb->limits.disk != old->limits.disk && set_disk(sb, sb->limits.disk, err) < 0)
		return -1;
	if (sb->cls != old->cls) {
		if (sb->cg.version == 2)
			sched_dir(sb->cg.v2, sb, 0);
		else if (sb->cg.version == 1)
			sched_dir(sb->cg.v1[DSEC_CG_CPU], sb, 0);
		dsec_res_sched_holder(sb, NULL);
	}
	return 0;
}

/* Replace the resource members of dir/name (a JSON object), keeping its mode. */
static int update_file(const char *dir, const char *name, json_t *from, int cgroup,
		       struct dsec_err *err)
{
	static const char *const members[] = {"limits", "requests", "class", "cgroup"};
	char path[PATH_MAX + 32], *buf, *s;
	struct stat st;
	json_t *o;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (stat(path, &st) < 0 || dsec_read_file(AT_FDCWD, path, 1 << 20, &buf, err) < 0)
		return dsec_err_sys(err, "read '%s'", path);
	o = json_loads(buf, 0, NULL);
	free(buf);
	if (!json_is_object(o)) {
		json_decref(o);
		return dsec_err_set(err, EINVAL, "'%s': malformed", path);
	}
	for (size_t i = 0; i < (cgroup ? 4u : 3u); i++)
		json_object_set(o, members[i], json_object_get(from, members[i]));
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return dsec_err_set(err, ENOMEM, "encode '%s'", path);
	rc = dsec_write_atomic(AT_FDCWD, path, s, strlen(s), st.st_mode & 07777, 0, err);
	free(s);
	return rc;
}

/* Save what a resize changed: into claim.json when the sandbox came from a pool (it is merged
 * over sandbox.json), else into sandbox.json. */
static int save(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	json_t *o = dsec_sandbox_to_json(sb);
	int rc = dsec_pool_claimed(sb) ? update_file(sb->dir, "claim.json", o, 0, err)
				       : update_file(sb->dir, "sandbox.json", o, 1, err);

	json_decref(o);
	return rc;
}

int dsec_res_resize(const struct dsec_paths *p, const char *id, const struct dsec_res *r,
		    unsigned set, struct dsec_sandbox *out, uint64_t *us, struct dsec_err *err)
{
	struct dsec_sandbox old;
	int64_t a[DSEC_R_N], b[DSEC_R_N], d[DSEC_R_N];
	int lock = -1, any = 0, admitted = 0;
	uint64_t t0;

	memset(out, 0, sizeof(*out));
	if (dsec_sandbox_load(p, id, &old, err) < 0)
		return -1;
	/* one resize of a sandbox at a time: each reads the state the last one wrote */
	lock = open(old.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		dsec_err_sys(err, "%s: lock", id);
		goto fail;
	}
	dsec_sandbox_free(&old);
	if (dsec_sandbox_load(p, id, &old, err) < 0)
		goto fail;
	if (!dsec_sandbox_alive(&old)) {
		dsec_err_set(err, ESRCH, "%s: sandbox is not running (holder gone)", id);
		goto fail;
	}
	*out = old;
	out->env = old.env ? json_incref(old.env) : NULL;
	out->labels = old.labels ? json_incref(old.labels) : NULL;
#define TAKE(bit, to, from)                                                                        \
	if (set & (bit))                                                                           \
	out->to = r->from
	TAKE(DSEC_RES_CPUS, limits.cpus, lim.cpus);
	TAKE(DSEC_RES_MEMORY, limits.memory, lim.memory);
	TAKE(DSEC_RES_PIDS, limits.pids, lim.pids);
	TAKE(DSEC_RES_DISK, limits.disk, lim.disk);
	TAKE(DSEC_RES_IO_BPS, limits.io_bps, lim.io_bps);
	TAKE(DSEC_RES_IO_IOPS, limits.io_iops, lim.io_iops);
	TAKE(DSEC_RES_REQ_CPUS, req.cpus, req.cpus);
	TAKE(DSEC_RES_REQ_MEMORY, req.memory, req.memory);
	TAKE(DSEC_RES_REQ_PIDS, req.pids, req.pids);
	TAKE(DSEC_RES_REQ_DISK, req.disk, req.disk);
	TAKE(DSEC_RES_IO_WEIGHT, req.io_weight, req.io_weight);
	TAKE(DSEC_RES_CLASS, cls, cls);
#undef TAKE
	if (dsec_res_prepare(p, out, err) < 0)
		goto fail;
	dsec_admit_amounts(&old.req, a);
	dsec_admit_amounts(&out->req, b);
	for (int k = 0; k < DSEC_R_N; k++)
		any |= (d[k] = b[k] - a[k]) != 0;
	if (any) {
		if (dsec_admit(p, id, old.holder_pid, old.holder_start, d, err) < 0)
			goto fail;
		admitted = 1;
	}
	t0 = dsec_now_us();
	if (dsec_res_apply(out, &old, err) < 0) {
		dsec_res_apply(&old, out, NULL); /* back to what it was, as far as it goes */
		goto fail;
	}
	*us = dsec_now_us() - t0;
	if (save(out, err) < 0)
		goto fail;
	close(lock);
	dsec_sandbox_free(&old);
	return 0;
fail:
	if (admitted) {
		for (int k = 0; k < DSEC_R_N; k++)
			d[k] = -d[k];
		dsec_admit(p, id, old.holder_pid, old.holder_start, d, NULL);
	}
	dsec_err_wrap(err, "%s: resize", id);
	if (lock >= 0)
		close(lock);
	dsec_sandbox_free(&old);
	dsec_sandbox_free(out);
	return -1;
}

int dsec_res_resize_record(const struct dsec_paths *p, const char *id, json_t *rec,
			   const struct dsec_res *opt, unsigned opt_set, uint64_t wait_us,
			   struct dsec_err *err)
{
	struct dsec_res r = {0};
	unsigned set = 0, round = 0;
	struct dsec_sandbox sb;
	uint64_t us = 0, w0 = dsec_now_us();
	int rc;

	/* the options win: a record piped from dsec-spawn carries its current requests and class */
	if (dsec_res_from_record(rec, 1, &r, &set, err) < 0)
		return -1;
#define OPT(bit, field)                                                                            \
	if (opt_set & (bit))                                                                       \
	r.field = opt->field
	OPT(DSEC_RES_CPUS, lim.cpus);
	OPT(DSEC_RES_MEMORY, lim.memory);
	OPT(DSEC_RES_PIDS, lim.pids);
	OPT(DSEC_RES_DISK, lim.disk);
	OPT(DSEC_RES_IO_BPS, lim.io_bps);
	OPT(DSEC_RES_IO_IOPS, lim.io_iops);
	OPT(DSEC_RES_REQ_CPUS, req.cpus);
	OPT(DSEC_RES_REQ_MEMORY, req.memory);
	OPT(DSEC_RES_REQ_PIDS, req.pids);
	OPT(DSEC_RES_REQ_DISK, req.disk);
	OPT(DSEC_RES_IO_WEIGHT, req.io_weight);
	OPT(DSEC_RES_CLASS, cls);
#undef OPT
	set |= opt_set;
	if (!set)
		return dsec_err_set(err, EINVAL, "%s: nothing to change (give a resource option)",
				    id);
	while ((rc = dsec_res_resize(p, id, &r, set, &sb, &us, err)) < 0 && err &&
	       err->errnum == ENOSPC && dsec_admit_wait(w0, wait_us, &round) == 0)
		memset(err, 0, sizeof(*err));
	if (rc < 0)
		return -1;
	json_object_set_new(rec, "limits", dsec_pool_limits_json(&sb.limits));
	dsec_res_record(rec, &sb);
	json_object_set_new(rec, "resize_us", json_integer((json_int_t)us));
	dsec_sandbox_free(&sb);
	return 0;
}
