#include "sandbox.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "admit.h"
#include "cgroup.h"
#include "net.h"
#include "nofile.h"
#include "ns.h"
#include "pool.h"
#include "resource.h"

#define STATE_MAX (1 << 20)

/* clone3's argument, declared here: <linux/sched.h> clashes with <sched.h>. */
struct clone_args_v2 {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
	    set_tid_size, cgroup;
};
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

int dsec_limit_parse(const char *name, const char *val, int opt, struct dsec_limits *l,
		     enum dsec_net *net, struct dsec_err *err)
{
	char what[32];
	long long n;
	uint64_t u;
	double d;
	char *end;

	snprintf(what, sizeof(what), opt ? "--%s" : "'%s'", name);
	if (!strcmp(name, "cpus")) {
		errno = 0;
		d = strtod(val, &end);
		if (errno || end == val || *end || !isfinite(d) || d < 0.01 || d > 4096)
			return dsec_err_set(err, ERANGE, "%s '%s': want a number from 0.01 to 4096",
					    what, val);
		l->cpus = d;
	} else if (!strcmp(name, "memory") || !strcmp(name, "disk")) {
		uint64_t min = name[0] == 'm' ? 4ULL << 20 : 1ULL << 20;

		if (dsec_parse_size(val, 1ULL << 50, &u, what, err) < 0)
			return -1;
		if (u < min)
			return dsec_err_set(err, ERANGE, "%s '%s': at least %lluM", what, val,
					    (unsigned long long)(min >> 20));
		*(name[0] == 'm' ? &l->memory : &l->disk) = u;
	} else if (!strcmp(name, "pids")) {
		if (dsec_parse_count(val, 2, 4194304, &n, what, err) < 0)
			return -1;
		l->pids = (uint64_t)n;
	} else if (!strcmp(name, "nofile")) {
		if (dsec_parse_count(val, DSEC_NOFILE_MIN, DSEC_NOFILE_MAX, &n, what, err) < 0)
			return -1;
		l->nofile = (uint64_t)n;
	} else if (!strcmp(name, "net") && net) {
		if (!strcmp(val, "none"))
			*net = DSEC_NET_NONE;
		else if (!strcmp(val, "host"))
			*net = DSEC_NET_HOST;
		else if (!strcmp(val, "nat"))
			*net = DSEC_NET_NAT;
		else
			return dsec_err_set(err, EINVAL, "%s '%s': want none, host or nat", what,
					    val);
	} else {
		return dsec_err_set(err, EINVAL, "%s: not a limit", what);
	}
	return 0;
}

const char *dsec_net_mode_name(enum dsec_net net)
{
	return net == DSEC_NET_HOST ? "host" : net == DSEC_NET_NAT ? "nat" : "none";
}

int dsec_sandbox_id_ok(const char *id)
{
	size_t n = strlen(id);

	if (n < 4 || n >= DSEC_ID_MAX || strncmp(id, "sb-", 3) != 0)
		return 0;
	for (const char *s = id + 3; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return 0;
	return 1;
}

int dsec_sandbox_new_id(char *buf, struct dsec_err *err)
{
	unsigned char r[6];

	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		return dsec_err_sys(err, "getrandom");
	snprintf(buf, DSEC_ID_MAX, "sb-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4],
		 r[5]);
	return 0;
}

static void state_dir(const struct dsec_paths *p, const char *id, char *buf)
{
	snprintf(buf, PATH_MAX, "%s/sandboxes/%s", p->run, id);
}

static json_t *cpus_json(double cpus)
{
	if (cpus == (double)(long long)cpus)
		return json_integer((json_int_t)cpus);
	return json_real(cpus);
}

void dsec_sandbox_defaults_json(json_t *o, const struct dsec_sandbox *sb)
{
	if (sb->workdir[0])
		json_object_set_new(o, "workdir", json_string(sb->workdir));
	if (sb->user[0])
		json_object_set_new(o, "user", json_string(sb->user));
}

json_t *dsec_sandbox_to_json(const struct dsec_sandbox *sb)
{
	json_t *o = json_object(), *layers = json_array(), *cg = json_object();

	for (unsigned i = 0; i < sb->nlayers; i++)
		json_array_append_new(layers, json_string(sb->layers[i]));
	json_object_set_new(o, "id", json_string(sb->id));
	json_object_set_new(o, "image", json_string(sb->image));
	json_object_set_new(o, "node", json_string(sb->node));
	json_object_set_new(o, "layers", layers);
	json_object_set_new(o, "limits",
			    json_pack("{s:o, s:I, s:I, s:I}", "cpus", cpus_json(sb->limits.cpus),
				      "memory", (json_int_t)sb->limits.memory, "pids",
				      (json_int_t)sb->limits.pids, "disk",
				      (json_int_t)sb->limits.disk));
	if (sb->limits.nofile)
		json_object_set_new(json_object_get(o, "limits"), "nofile",
				    json_integer((json_int_t)sb->limits.nofile));
	json_object_set_new(o, "created", json_integer((json_int_t)sb->created_us));
	json_object_set_new(o, "ttl_us", json_integer((json_int_t)sb->ttl_us));
	json_object_set_new(o, "hostname", json_string(sb->hostname));
	dsec_sandbox_defaults_json(o, sb);
	if (sb->env)
		json_object_set(o, "env", sb->env);
	else
		json_object_set_new(o, "env", json_array());
	if (sb->labels)
		json_object_set(o, "labels", sb->labels);
	else
		json_object_set_new(o, "labels", json_object());
	json_object_set_new(o, "holder",
			    json_pack("{s:i, s:I}", "pid", (int)sb->holder_pid, "start",
				      (json_int_t)sb->holder_start));
	json_object_set_new(cg, "version", json_integer(sb->cg.version));
	if (sb->cg.version == 2) {
		json_object_set_new(cg, "path", json_string(sb->cg.v2));
	} else if (sb->cg.version == 1) {
		static const char *const names[DSEC_CG_NCTRL] = {"memory", "cpu",     "cpuacct",
								 "pids",   "freezer", "blkio"};
		json_t *paths = json_object();

		for (int c = 0; c < DSEC_CG_NCTRL; c++)
			if (sb->cg.v1[c][0])
				json_object_set_new(paths, names[c], json_string(sb->cg.v1[c]));
		json_object_set_new(cg, "paths", paths);
	}
	json_object_set_new(o, "cgroup", cg);
	json_object_set_new(o, "net", json_string(dsec_net_mode_name(sb->net)));
	if (sb->userns)
		json_object_set_new(
		    o, "userns",
		    json_pack("{s:I, s:I, s:I, s:I, s:I}", "uid", (json_int_t)sb->uid_base, "gid",
			      (json_int_t)sb->gid_base, "count", (json_int_t)sb->id_count, "owner",
			      (json_int_t)sb->owner, "root", (json_int_t)sb->root_uid));
	else
		json_object_set_new(o, "userns", json_null());
	dsec_res_to_json(sb, o);
	return o;
}

static int copy_str(char *dst, size_t n, json_t *v, const char *what, struct dsec_err *err)
{
	const char *s = json_string_value(v);

	if (!s || strlen(s) >= n)
		return dsec_err_set(err, EINVAL, "bad '%s'", what);
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

int dsec_sandbox_parse(json_t *o, struct dsec_sandbox *sb, struct dsec_err *err)
{
	json_t *v, *lim, *cg;
	size_t i;

	if (copy_str(sb->id, sizeof(sb->id), json_object_get(o, "id"), "id", err) < 0 ||
	    copy_str(sb->image, sizeof(sb->image), json_object_get(o, "image"), "image", err) < 0)
		return -1;
	copy_str(sb->node, sizeof(sb->node), json_object_get(o, "node"), "node", NULL);
	copy_str(sb->hostname, sizeof(sb->hostname), json_object_get(o, "hostname"), "hostname",
		 NULL);
	copy_str(sb->workdir, sizeof(sb->workdir), json_object_get(o, "workdir"), "workdir", NULL);
	copy_str(sb->user, sizeof(sb->user), json_object_get(o, "user"), "user", NULL);
	json_array_foreach(json_object_get(o, "layers"), i, v)
	{
		if (sb->nlayers >= DSEC_MAX_LAYERS ||
		    copy_str(sb->layers[sb->nlayers], sizeof(sb->layers[0]), v, "layers", err) < 0)
			return dsec_err_set(err, EINVAL, "bad 'layers'");
		sb->nlayers++;
	}
	lim = json_object_get(o, "limits");
	sb->limits.cpus = json_number_value(json_object_get(lim, "cpus"));
	sb->limits.memory = (uint64_t)json_integer_value(json_object_get(lim, "memory"));
	sb->limits.pids = (uint64_t)json_integer_value(json_object_get(lim, "pids"));
	sb->limits.disk = (uint64_t)json_integer_value(json_object_get(lim, "disk"));
	sb->limits.nofile = (uint64_t)json_integer_value(json_object_get(lim, "nofile"));
	sb->created_us = (uint64_t)json_integer_value(json_object_get(o, "created"));
	sb->ttl_us = (uint64_t)json_integer_value(json_object_get(o, "ttl_us"));
	v = json_object_get(o, "env");
	sb->env = json_is_array(v) ? json_incref(v) : NULL;
	v = json_object_get(o, "labels");
	sb->labels = json_is_object(v) ? json_incref(v) : NULL;
	v = json_object_get(o, "holder");
	sb->holder_pid = (pid_t)json_integer_value(json_object_get(v, "pid"));
	sb->holder_start = (unsigned long long)json_integer_value(json_object_get(v, "start"));
	cg = json_object_get(o, "cgroup");
	sb->cg.version = (int)json_integer_value(json_object_get(cg, "version"));
	if (sb->cg.version == 2) {
		if (copy_str(sb->cg.v2, sizeof(sb->cg.v2), json_object_get(cg, "path"), "cgroup",
			     err) < 0)
			return -1;
	} else if (sb->cg.version == 1) {
		static const char *const names[DSEC_CG_NCTRL] = {"memory", "cpu",     "cpuacct",
								 "pids",   "freezer", "blkio"};
		json_t *paths = json_object_get(cg, "paths");

		for (int c = 0; c < DSEC_CG_NCTRL; c++)
			if ((v = json_object_get(paths, names[c])) &&
			    copy_str(sb->cg.v1[c], DSEC_CG_PATH_MAX, v, "cgroup", err) < 0)
				return -1;
	}
	v = json_object_get(o, "net");
	sb->net = DSEC_NET_NONE;
	if (json_is_string(v))
		dsec_limit_parse("net", json_string_value(v), 0, &sb->limits, &sb->net, NULL);
	v = json_object_get(o, "userns");
	if (json_is_object(v)) {
		sb->userns = 1;
		sb->uid_base = (uid_t)json_integer_value(json_object_get(v, "uid"));
		sb->gid_base = (gid_t)json_integer_value(json_object_get(v, "gid"));
		sb->id_count = (unsigned)json_integer_value(json_object_get(v, "count"));
		sb->owner = (uid_t)json_integer_value(json_object_get(v, "owner"));
		/* a state of an older dsec: root inside was the range's first uid */
		sb->root_uid = json_is_integer(json_object_get(v, "root"))
				   ? (uid_t)json_integer_value(json_object_get(v, "root"))
				   : sb->uid_base;
	}
	dsec_res_from_json(o, sb);
	return 0;
}

int dsec_sandbox_load(const struct dsec_paths *p, const char *id, struct dsec_sandbox *sb,
		      struct dsec_err *err)
{
	char path[PATH_MAX], *buf = NULL;
	json_error_t jerr;
	json_t *o;
	int rc;

	memset(sb, 0, sizeof(*sb));
	if (!dsec_sandbox_id_ok(id))
		return dsec_err_set(err, EINVAL, "'%.64s': not a sandbox id", id);
	state_dir(p, id, sb->dir);
	snprintf(path, sizeof(path), "%s/" DSEC_STATE_FILE, sb->dir);
	if (dsec_read_file(AT_FDCWD, path, STATE_MAX, &buf, err) < 0) {
		if (err && err->errnum == ENOENT)
			return dsec_err_set(err, ENOENT, "%s: no such sandbox", id);
		return -1;
	}
	o = json_loads(buf, 0, &jerr);
	free(buf);
	if (!json_is_object(o)) {
		json_decref(o);
		return dsec_err_set(err, EINVAL, "%s: malformed state file", id);
	}
	/* a sandbox claimed from a warm pool: what the claim changed (pool.h) */
	if (dsec_pool_merge_claim(sb->dir, o) < 0) {
		json_decref(o);
		return dsec_err_set(err, EINVAL, "%s: malformed claim file", id);
	}
	rc = dsec_sandbox_parse(o, sb, err);
	json_decref(o);
	if (rc < 0) {
		dsec_sandbox_free(sb);
		return dsec_err_wrap(err, "%s: state file", id);
	}
	state_dir(p, id, sb->dir);
	return 0;
}

int dsec_sandbox_save(const struct dsec_paths *p, const struct dsec_sandbox *sb,
		      struct dsec_err *err)
{
	json_t *o = dsec_sandbox_to_json(sb);
	char *s = json_dumps(o, JSON_COMPACT);
	int rc = -1, dfd;

	json_decref(o);
	if (!s)
		return dsec_err_set(err, ENOMEM, "%s: encode state", sb->id);
	dfd = open(sb->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 && errno == ENOENT && dsec_mkdir_p(sb->dir, 0700, err) == 0)
		dfd = open(sb->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		dsec_err_sys(err, "%s: open state dir", sb->id);
	} else {
		size_t n = strlen(s);
		struct stat st;
		/* a pending sandbox stays pending: only dsec_sandbox_commit hands it out */
		mode_t mode = fstatat(dfd, DSEC_STATE_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				      (st.st_mode & 07777) == DSEC_STATE_PENDING_MODE
				  ? DSEC_STATE_PENDING_MODE
				  : DSEC_STATE_MODE;

		s[n] = '\n';
		rc = dsec_write_atomic(dfd, DSEC_STATE_FILE, s, n + 1, mode, 0, err);
		close(dfd);
	}
	free(s);
	return rc;
}

void dsec_sandbox_free(struct dsec_sandbox *sb)
{
	json_decref(sb->env);
	json_decref(sb->labels);
	sb->env = sb->labels = NULL;
}

/* Field 22 (start time) of /proc/PID/stat (pid 0: /proc/self/stat) and the state letter
 * (field 3); 0 when gone. No allocation: the sandbox's first process calls it. */
static unsigned long long proc_stat(pid_t pid, char *state)
{
	char path[64], buf[1024], *s;

	*state = '?';
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	if (dsec_read_proc(path, buf, sizeof(buf)) < 0)
		return 0;
	/* the command name may hold spaces and parentheses: fields start after the last ')' */
	s = strrchr(buf, ')');
	if (!s || !s[1] || !s[2])
		return 0;
	*state = s[2];
	s++;
	/* s is at the space before field 3 (state); start time is field 22 */
	for (int field = 3; field < 22 && s; field++)
		s = strchr(s + 1, ' ');
	return s ? strtoull(s + 1, NULL, 10) : 0;
}

unsigned long long dsec_proc_start_time(pid_t pid)
{
	char state;

	return proc_stat(pid, &state);
}

/* The holder runs: same start time, and not a zombie waiting for its parent's wait(). */
static int holder_running(const struct dsec_sandbox *sb)
{
	char state;
	unsigned long long st;

	if (sb->holder_pid <= 0)
		return 0;
	st = proc_stat(sb->holder_pid, &state);
	return st && st == sb->holder_start && state != 'Z' && state != 'X';
}

int dsec_sandbox_pidfd(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	int fd;

	if (sb->holder_pid <= 0)
		return dsec_err_set(err, ESRCH, "%s: no holder", sb->id);
	fd = (int)syscall(SYS_pidfd_open, sb->holder_pid, 0);
	if (fd < 0)
		return dsec_err_set(err, ESRCH, "%s: holder %d is gone", sb->id,
				    (int)sb->holder_pid);
	/* checked after opening: the fd then names the process whose start time we read */
	if (!holder_running(sb)) {
		close(fd);
		return dsec_err_set(err, ESRCH, "%s: holder %d is gone", sb->id,
				    (int)sb->holder_pid);
	}
	/* pidfd_open has no O_CLOEXEC flag: its fds are always close-on-exec */
	return fd;
}

int dsec_sandbox_alive(const struct dsec_sandbox *sb)
{
	return holder_running(sb);
}

void dsec_sandbox_touch(const char *dir)
{
	utimensat(AT_FDCWD, dir, NULL, 0);
}

uint64_t dsec_sandbox_last_active(const struct dsec_sandbox *sb)
{
	struct stat st;
	uint64_t m;

	if (stat(sb->dir, &st) < 0)
		return sb->created_us;
	m = (uint64_t)st.st_mtim.tv_sec * 1000000 + (uint64_t)st.st_mtim.tv_nsec / 1000;
	return m > sb->created_us ? m : sb->created_us;
}

int dsec_sandbox_idle(const struct dsec_sandbox *sb, uint64_t now_us, uint64_t *idle_us)
{
	struct dsec_cgroup_stats cs;
	/* the time first, the tasks after: a dsec-exec touches the dir before its command joins
	 * the cgroup, so one that started after this look at the tasks was already seen here */
	uint64_t last = dsec_sandbox_last_active(sb);

	/* the holder alone: one task (0 would be a count the kernel does not keep) */
	if (!dsec_sandbox_alive(sb) || dsec_cgroup_frozen(sb) == 1 ||
	    dsec_cgroup_stats(sb, &cs, NULL) < 0 || cs.pids != 1)
		return 0;
	*idle_us = now_us > last ? now_us - last : 0;
	return 1;
}

int dsec_sandbox_nsflags(const struct dsec_sandbox *sb)
{
	int f = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP;

	if (sb->net != DSEC_NET_HOST)
		f |= CLONE_NEWNET;
	if (sb->userns)
		f |= CLONE_NEWUSER;
	return f;
}

int dsec_run_lock(const struct dsec_paths *p, int exclusive, struct dsec_err *err)
{
	char path[PATH_MAX];

	if (dsec_mkdir_p(p->run, 0755, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/lock", p->run);
	/* exclusive (dsec-reap --orphans, --all): every spawn and warm run goes first, one
	 * stopped half-way holds us up until it goes on, and we say so */
	return exclusive ? dsec_lock_until(path, 1, UINT64_MAX, "the run dir's lock", err)
			 : dsec_lock(path, 0, 1, err);
}

/* The holder binary: $DSEC_HOLDER, else dsec-holder next to this tool (installed in libexec,
 * and the build tree), one dir up (build/libexec/dsec-exec), else ../libexec/dsec/dsec-holder
 * (installed tools). Opened once per process. */
static int holder_fd(struct dsec_err *err)
{
	static int fd = -1;
	char exe[PATH_MAX], path[PATH_MAX + 64];
	const char *env = getenv("DSEC_HOLDER");

	if (fd >= 0)
		return fd;
	if (env && *env) {
		fd = open(env, O_PATH | O_CLOEXEC);
		if (fd < 0)
			return dsec_err_sys(err, "open holder '%s' ($DSEC_HOLDER)", env);
		return fd;
	}
	if (dsec_self_dir(exe, sizeof(exe), err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/dsec-holder", exe);
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	/* the full dsec-exec of the build tree: build/libexec/ */
	snprintf(path, sizeof(path), "%s/../dsec-holder", exe);
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "%s/../libexec/dsec/dsec-holder", exe);
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return dsec_err_sys(err, "open holder '%s'", path);
	return fd;
}

/* The resolved image, kept for the next sandbox of the same image (-n N). */
static struct dsec_image cached_img;

static int resolve_image(const struct dsec_paths *p, const char *name, struct dsec_err *err)
{
	if (cached_img.n && !strcmp(cached_img.name, name))
		return 0;
	memset(&cached_img, 0, sizeof(cached_img));
	if (dsec_image_resolve(p, name, &cached_img, err) < 0) {
		cached_img.n = 0;
		return -1;
	}
	return 0;
}

static int cached_template = -1;

/* What the sandbox's first process gets. It shares our memory (CLONE_VM) and we sleep until it
 * execs the holder or dies (CLONE_VFORK), so it writes its error straight into err. */
struct child_arg {
	struct dsec_rootfs_spec *spec; /* ours to finish: the user namespace is made here */
	const struct dsec_sandbox *sb;
	int hfd;
	int usock; /* user namespace: the holder's end of the handshake, passed as its fd 3 */
	unsigned long owner_base; /* user namespace: first uid of dsec's owners, 0 none */
	unsigned long owner;      /* the uid chosen: owner_base + its host pid, 0 none */
	unsigned long long start; /* its start time (proc_stat), read by itself */
	uint64_t tc[4]; /* -vv: when it began, began its user namespace, its rootfs, ended that */
	struct dsec_err err;
};

/* The sandbox's first process: join the cgroup, build the rootfs, exec the holder. Runs on its
 * own stack in our address space: no allocation, nothing but syscalls and snprintf. Once it
 * is in the sandbox's cgroup, dsec-reap --orphans finds it even if we die before writing the
 * state file; before that, the death signal takes it with us. */
static int child_main(void *argp)
{
	struct child_arg *a = argp;
	rlim_t nf = DSEC_NOFILE_OF(a->sb->limits.nofile);
	struct rlimit nofile = {nf, nf};
	struct dsec_err *err = &a->err;
	char *argv[] = {(char *)"dsec-holder", (char *)a->sb->id, NULL};
	char *const envp[] = {NULL};
	int fd, tmpfs, usock, usfd = -1, hfd;

	a->tc[0] = dsec_verbose > 1 ? dsec_now_us() : 0;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* a session of its own: a signal to the caller's process group or session (timeout -s
	 * KILL, a shell's kill -9 -PGID, a terminal's hangup) must not end a sandbox already handed
	 * out; until the exec, the death signal still takes it with us */
	setsid();
	/* the owner of its user namespace and its root there (userns.h): one uid per live holder,
	 * by its host pid, which /proc/self names (we are pid 1 of our own namespace by now) */
	if (a->owner_base) {
		char self[24];
		ssize_t n = readlink("/proc/self", self, sizeof(self) - 1);
		unsigned long pid = 0;

		for (ssize_t i = 0; i < n && self[i] >= '0' && self[i] <= '9'; i++)
			pid = pid * 10 + (unsigned long)(self[i] - '0');
		if (pid == 0 || pid >= DSEC_OWNER_COUNT) {
			dsec_err_set(err, EIO, "host pid of the holder: readlink /proc/self");
			goto fail;
		}
		a->owner = a->owner_base + pid;
	}
	/* the sandbox's user namespace (userns.h), made by a child while we go on; it is pid 2
	 * of our namespace, so it dies with us */
	if (a->usock >= 0 && dsec_userns_start(a->owner, err) < 0)
		goto fail;
	/* before anything else, so that its cgroup namespace is rooted there (v2 as v1: clone3's
	 * CLONE_INTO_CGROUP would need a clone3 wrapper for a child on its own stack) */
	if (dsec_cgroup_attach(a->sb, 0, err) < 0)
		goto fail;
	/* read here, not by the parent once clone returns: the holder's exec is still going on
	 * then, and /proc/PID/stat waits for it */
	a->start = dsec_proc_start_time(0);
	/* the OOM killer should take the sandbox's processes, not the holder that owns it (needs
	 * CAP_SYS_RESOURCE; without it the holder is merely the smallest process there) */
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "-1000", 5) < 0)
			(void)0;
		close(fd);
	}
	/* the sandbox's descriptor limit (nofile.h), the holder's and so that of anything it ever
	 * starts; refused only when raising a lower hard limit of ours, which then stays */
	setrlimit(RLIMIT_NOFILE, &nofile);
	/* the user namespace's maps, root the sandbox's own uid, before the rootfs: its layers
	 * are mounted idmapped with it (the spec is ours to fill in: dsec-spawn sets it afresh
	 * for every sandbox) */
	a->spec->userns_fd = -1;
	a->tc[1] = dsec_verbose > 1 ? dsec_now_us() : 0;
	if (a->usock >= 0) {
		a->spec->map.root = (uid_t)(a->owner ? a->owner : a->spec->map.uid);
		if ((usfd = dsec_userns_finish(&a->spec->map, err)) < 0)
			goto fail;
		a->spec->userns_fd = usfd;
	}
	a->tc[2] = dsec_verbose > 1 ? dsec_now_us() : 0;
	if ((tmpfs = dsec_rootfs_setup(a->spec, err)) < 0)
		goto fail;
	a->tc[3] = dsec_verbose > 1 ? dsec_now_us() : 0;
	if (a->usock >= 0)
		dsec_userns_reap(); /* long gone by now: it ran on our memory, which exec leaves */
	syscall(SYS_close_range, 0U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);
	/* what the holder gets: with a user namespace, fd 5, the namespace, and fd 3, the socket
	 * it says 'u' on once it has joined it (holder.c); fd 4, the sandbox's tmpfs, which
	 * dsec-layer commit reads the upper dir from. Moved up first so that no dup2 closes
	 * another. */
	hfd = fcntl(a->hfd, F_DUPFD_CLOEXEC, 10);
	tmpfs = fcntl(tmpfs, F_DUPFD_CLOEXEC, 10);
	usock = a->usock >= 0 ? fcntl(a->usock, F_DUPFD_CLOEXEC, 10) : -1;
	usfd = usfd >= 0 ? fcntl(usfd, F_DUPFD_CLOEXEC, 10) : -1;
	if (hfd < 0 || tmpfs < 0 || (a->usock >= 0 && (usock < 0 || usfd < 0)) ||
	    (usock >= 0 && (dup2(usock, 3) < 0 || dup2(usfd, 5) < 0)) ||
	    dup2(tmpfs, DSEC_HOLDER_TMPFS_FD) < 0) {
		dsec_err_sys(err, "pass descriptors to holder");
		goto fail;
	}
	prctl(PR_SET_PDEATHSIG, 0);
	syscall(SYS_execveat, hfd, "", argv, envp, AT_EMPTY_PATH);
	dsec_err_sys(err, "exec holder");
fail:
	if (a->usock >= 0)
		dsec_userns_reap();
	if (!err->errnum)
		err->errnum = EIO;
	_exit(127);
}

/* The child's stack, reused for every sandbox (one child at a time: we sleep while it runs). */
static void *child_stack(struct dsec_err *err)
{
	static void *stack;
	const size_t size = 256 << 10;

	if (!stack) {
		stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (stack == MAP_FAILED) {
			stack = NULL;
			dsec_err_sys(err, "mmap child stack");
			return NULL;
		}
	}
	return (char *)stack + size;
}

static void reap_children(void)
{
	while (waitpid(-1, NULL, WNOHANG | __WALL) > 0)
		;
}

/* Publish the state: written in a private dir, the dir renamed into place, so readers see a
 * sandbox complete or not at all. The file's mode says "pending" (0400) until commit (0600). */
static int publish_state(const struct dsec_paths *p, const struct dsec_sandbox *sb,
			 struct dsec_err *err)
{
	char tmp[PATH_MAX], file[PATH_MAX + 32], *s;
	json_t *o = dsec_sandbox_to_json(sb);
	size_t n;
	int fd, rc = -1;

	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return dsec_err_set(err, ENOMEM, "encode state");
	snprintf(tmp, sizeof(tmp), "%s/sandboxes/.tmp-%s", p->run, sb->id);
	if (mkdir(tmp, 0700) < 0) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s/sandboxes", p->run);
		if (errno != ENOENT || dsec_mkdir_p(dir, 0700, err) < 0 || mkdir(tmp, 0700) < 0) {
			dsec_err_sys(err, "mkdir '%s'", tmp);
			goto out;
		}
	}
	snprintf(file, sizeof(file), "%s/" DSEC_STATE_FILE, tmp);
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		  DSEC_STATE_PENDING_MODE);
	if (fd < 0) {
		dsec_err_sys(err, "create '%s'", file);
		goto out;
	}
	n = strlen(s);
	s[n] = '\n';
	if (write(fd, s, n + 1) != (ssize_t)(n + 1)) {
		dsec_err_sys(err, "write '%s'", file);
		close(fd);
		goto out;
	}
	close(fd);
	if (rename(tmp, sb->dir) < 0) {
		dsec_err_sys(err, "rename '%s'", tmp);
		goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		dsec_rmtree(tmp, NULL);
	free(s);
	return rc;
}

/* The holder says 'u' once it is root of its user namespace (holder.c). Bounded wait: a holder
 * that hangs is killed by the caller's error path. */
static int userns_handshake(int sock, struct dsec_err *err)
{
	struct pollfd pfd = {.fd = sock, .events = POLLIN};
	char c = 0;
	int r;

	do
		r = poll(&pfd, 1, 10000);
	while (r < 0 && errno == EINTR);
	if (r <= 0 || read(sock, &c, 1) != 1 || c != 'u')
		return dsec_err_set(err, EIO, "holder did not enter its user namespace");
	return 0;
}

const char *dsec_host_resolv(void)
{
	static char buf[4096];

	return dsec_read_proc("/etc/resolv.conf", buf, sizeof(buf)) < 0 ? NULL : buf;
}

int dsec_sandbox_create(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_err *err)
{
	static struct dsec_rootfs_spec spec;
	static struct child_arg arg;
	static struct dsec_idmap map;
	static unsigned long owner_base;
	static int have_map;
	uint64_t t0 = dsec_now_us(), t[8] = {0};
	int pidfd = -1, hfd, flags, us[2] = {-1, -1}, published = 0;
	const struct dsec_node *node;
	void *stack;
	pid_t pid = -1;
#define T(i) (t[i] = dsec_verbose > 1 ? dsec_now_us() : 0)

	reap_children();
	if (!sb->id[0] && dsec_sandbox_new_id(sb->id, err) < 0)
		return -1;
	state_dir(p, sb->id, sb->dir);
	if (resolve_image(p, sb->image, err) < 0)
		return -1;
	snprintf(sb->image, sizeof(sb->image), "%s", cached_img.name);
	sb->nlayers = cached_img.n;
	for (unsigned i = 0; i < cached_img.n; i++)
		snprintf(sb->layers[i], sizeof(sb->layers[i]), "%s", cached_img.layer[i].id);
	snprintf(sb->node, sizeof(sb->node), "%s", dsec_node());
	if (!sb->hostname[0])
		snprintf(sb->hostname, sizeof(sb->hostname), "%s", sb->id);
	if ((hfd = holder_fd(err)) < 0 || !(stack = child_stack(err)))
		return -1;
	if (cached_template < 0 && (cached_template = dsec_template_open(p, err)) < 0)
		return -1;
	if (dsec_template_layers(p, cached_template, &cached_img, err) < 0)
		return -1;
	if (!have_map) {
		struct dsec_err oerr = {0};

		if (dsec_template_idmap(p, &map, err) < 0)
			return -1;
		/* a read-only /etc/subuid that holds dsec's range but no owners' block: the
		 * sandboxes still run, owned by root as before, and say what they lack */
		if (map.count && dsec_userns_owners(&owner_base, &oerr) < 0) {
			dsec_warnx(
			    "user namespace owners: %s: every sandbox's root is one host "
			    "uid, which shares its per-user limits (inotify instances, epoll "
			    "watches, descriptors in flight) with every other's",
			    oerr.msg);
			owner_base = 0;
		}
		have_map = 1;
	}
	spec.map = map;
	sb->userns = map.count > 0;
	sb->uid_base = map.uid;
	sb->gid_base = map.gid;
	sb->id_count = map.count;
	spec.template_fd = cached_template;
	if (dsec_rootfs_overlay_opts(&cached_img, &spec, err) < 0)
		return -1;
	spec.disk = sb->limits.disk ? sb->limits.disk : DSEC_DEFAULT_DISK;
	spec.hostname = sb->hostname;
	spec.loopback = sb->net != DSEC_NET_HOST;
	spec.resolv = sb->net == DSEC_NET_HOST ? dsec_host_resolv() : NULL;
	if (dsec_cgroup_paths(p, sb, err) < 0)
		return -1;
	spec.ncg =
	    dsec_cgroup_view(sb, spec.cg_dir, spec.cg_name,
			     (int)(sizeof(spec.cg_dir) / sizeof(spec.cg_dir[0])), &spec.cg_own);
	T(0);
	/* the cgroup first: from here a crash leaves something dsec-reap --orphans finds; a
	 * spare of a reaped sandbox when there is one (cgspare.c) */
	if (dsec_cgspare_take(p, sb) != 0 && dsec_cgroup_create(sb, err) < 0)
		return dsec_err_wrap(err, "%s", sb->id);
	/* all the run's sandboxes together: node.conf's pids (auto: pid_max, less the host's) */
	if ((node = dsec_node_get(p, &(struct dsec_err){0})))
		dsec_cgroup_parent_pids(p, (uint64_t)node->cap[DSEC_R_PIDS],
					node->cap_auto[DSEC_R_PIDS]);
	T(1);
	memset(&arg, 0, sizeof(arg));
	arg.spec = &spec;
	arg.sb = sb;
	arg.hfd = hfd;
	arg.usock = -1;
	if (sb->userns) {
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, us) < 0) {
			dsec_err_sys(err, "socketpair");
			goto fail;
		}
		arg.usock = us[1];
		arg.owner_base = owner_base;
	}
	flags = CLONE_VM | CLONE_VFORK | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_PIDFD |
		SIGCHLD;
	if (sb->net != DSEC_NET_HOST) /* nat: the veth comes later (dsec_net_attach) */
		flags |= CLONE_NEWNET;
	/* CLONE_VM | CLONE_VFORK as posix_spawn does: no copy of our page tables, which on a
	 * virtual machine costs more than the rest of the spawn */
	pid = clone(child_main, stack, flags, &arg, &pidfd);
	T(2);
	if (pid < 0) {
		dsec_err_sys(err, "clone");
		goto fail;
	}
	if (arg.err.errnum) {
		*err = arg.err;
		goto fail;
	}
	sb->holder_pid = pid;
	sb->owner = (uid_t)arg.owner;
	sb->root_uid = spec.map.root;
	sb->holder_start = arg.start ? arg.start : dsec_proc_start_time(pid);
	sb->created_us = dsec_wall_us();
	if (us[1] >= 0) {
		close(us[1]);
		us[1] = -1;
	}
	/* written (pending, not handed out) while the holder enters its user namespace */
	if (publish_state(p, sb, err) < 0)
		goto fail;
	published = 1;
	if (us[0] >= 0) {
		if (userns_handshake(us[0], err) < 0)
			goto fail;
		close(us[0]);
		us[0] = -1;
	}
	if (!dsec_sandbox_alive(sb)) {
		dsec_err_set(err, EIO, "holder died at start");
		goto fail;
	}
	T(3);
	close(pidfd);
	if (dsec_verbose > 1)
		dsec_infox(
		    "%s: µs: prepare %llu, cgroup %llu, clone+rootfs+exec %llu (clone %llu, "
		    "start %llu, user namespace %llu, rootfs %llu), state %llu",
		    sb->id, (unsigned long long)(t[0] - t0), (unsigned long long)(t[1] - t[0]),
		    (unsigned long long)(t[2] - t[1]), (unsigned long long)(arg.tc[0] - t[1]),
		    (unsigned long long)(arg.tc[1] - arg.tc[0]),
		    (unsigned long long)(arg.tc[2] - arg.tc[1]),
		    (unsigned long long)(arg.tc[3] - arg.tc[2]), (unsigned long long)(t[3] - t[2]));
	return 0;
fail:
	dsec_err_wrap(err, "%s", sb->id);
	for (int i = 0; i < 2; i++)
		if (us[i] >= 0)
			close(us[i]);
	if (published)
		dsec_rmtree(sb->dir, NULL);
	if (pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		close(pidfd);
	}
	if (pid > 0)
		while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
			;
	dsec_cgroup_kill(sb, NULL);
	dsec_cgroup_remove(sb, NULL);
	return -1;
#undef T
}

int dsec_sandbox_commit(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	char file[PATH_MAX + 32];

	snprintf(file, sizeof(file), "%s/" DSEC_STATE_FILE, sb->dir);
	if (chmod(file, DSEC_STATE_MODE) < 0)
		return dsec_err_sys(err, "%s: commit '%s'", sb->id, file);
	return 0;
}

/* Was the sandbox never handed out (its creator died between creating it and printing it)? */
static int state_pending(const struct dsec_paths *p, const char *id)
{
	char file[PATH_MAX + 32];
	struct stat st;

	snprintf(file, sizeof(file), "%s/sandboxes/%s/" DSEC_STATE_FILE, p->run, id);
	return lstat(file, &st) == 0 && (st.st_mode & 07777) == DSEC_STATE_PENDING_MODE;
}

int dsec_sandbox_pending(const struct dsec_paths *p, const char *id)
{
	return state_pending(p, id);
}

int dsec_sandbox_kill(const struct dsec_sandbox *sb)
{
	int fd = dsec_sandbox_pidfd(sb, NULL);

	/* a paused sandbox's tasks (v1 freezer) would not die before they thaw */
	if (sb->cg.version && dsec_cgroup_frozen(sb) == 1)
		dsec_cgroup_freeze(sb, 0, NULL);
	/* the holder is pid 1 of the sandbox: the kernel kills the whole pid namespace and
	 * signals the pidfd only once all of it is gone */
	if (fd >= 0 && syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int dsec_sandbox_destroy(const struct dsec_paths *p, struct dsec_sandbox *sb, struct dsec_err *err)
{
	int fd = dsec_sandbox_kill(sb);

	if (fd >= 0) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};

		poll(&pfd, 1, 10000);
		close(fd);
	}
	return dsec_sandbox_destroy_rest(p, sb, err);
}

int dsec_sandbox_destroy_rest(const struct dsec_paths *p, struct dsec_sandbox *sb,
			      struct dsec_err *err)
{
	int rc = 0;

	reap_children();
	/* --net nat: rules, veth and address of the sandbox (net.h); nothing for the others */
	if (dsec_net_detach(p, sb, err) < 0)
		rc = -1;
	if (sb->cg.version) {
		if (dsec_cgroup_kill(sb, err) < 0)
			rc = -1;
		/* kept for the next sandbox when it can be (cgspare.c), else removed */
		if ((rc < 0 || dsec_cgspare_put(p, sb) != 0) &&
		    dsec_cgroup_remove(sb, rc < 0 ? NULL : err) < 0)
			rc = -1;
	}
	if (sb->dir[0] && dsec_rmtree(sb->dir, rc < 0 ? NULL : err) < 0)
		rc = -1;
	if (rc < 0)
		return dsec_err_wrap(err, "%s", sb->id);
	return 0;
}
