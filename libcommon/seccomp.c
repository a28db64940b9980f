/* The sandbox's seccomp filter: profiles (compiled-in default or JSON file, dsec-seccomp(5)) are
 * turned into a libseccomp filter and exported as BPF in the parent; the child only loads it. */
#include "seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <libseccomp.h> /* the system one, see there */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct dsec_seccomp {
	struct sock_fprog prog;
	int builtin; /* prog.filter is dsec_seccomp_builtin, not ours to free */
};

/* The default profile as compiled at build time by seccomp-gen (build/gen/seccomp-builtin.c):
 * libseccomp needs milliseconds for it, at every start of dsec-exec. A length of 0 (in
 * seccomp-gen itself) means: compile it now. */
extern const struct sock_filter dsec_seccomp_builtin[];
extern const unsigned dsec_seccomp_builtin_len;

#define MAX_RULES 1024
#define MAX_NAMES 1024 /* per rule */
#define MAX_NAME 64
#define MAX_TOTAL_NAMES 4096

/* The clone flags a sandbox may not use: every namespace flag clone takes (CLONE_NEWTIME's bit
 * is the exit signal's there), and CLONE_PARENT, which makes the new process a child of its
 * caller's parent: for a command, dsec-exec on the host, where nobody waits for it, so its
 * zombies would hold pids of the sandbox's cgroup (and of the host) past the reap. */
#define CLONE_DENIED                                                                               \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |             \
	 CLONE_NEWPID | CLONE_NEWNET | CLONE_PARENT)

/* What a sandbox may call. Everything else fails with EPERM: among others (dsec-seccomp(5) has
 * the full list and the reasons) kernel modules, kexec, reboot, swap, accounting, clock and time
 * setting (adjtimex and clock_adjtime too, even read-only), mount and the new mount API,
 * pivot_root, chroot, setns, keyrings, bpf, perf_event_open, fanotify_init, userfaultfd,
 * io_uring, Linux AIO (ENOSYS: see default_rules), open_by_handle_at and name_to_handle_at,
 * quotactl, syslog, vhangup, iopl/ioperm, modify_ldt, NUMA policy, ptrace and its relatives (process_vm_readv/writev, kcmp,
 * pidfd_getfd, process_madvise: a process left behind by one command must not attach to a later
 * command, such as the grader, in the same sandbox), sethostname, lsm_*, and every system call
 * newer than this list. Names libseccomp does not know are skipped (see resolve()). */
static const char *const allowed[] = {
    /* files and descriptors */
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
    "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range", "lseek", "dup",
    "dup2", "dup3", "pipe", "pipe2", "fcntl", "flock", "fsync", "fdatasync", "sync", "syncfs",
    "sync_file_range", "fallocate", "ftruncate", "truncate", "sendfile", "splice", "tee",
    "vmsplice", "copy_file_range", "readahead", "fadvise64", "stat", "lstat", "fstat", "newfstatat",
    "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat",
    "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink",
    "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask",
    "utime", "utimes", "utimensat", "futimesat", "mknod", "mknodat", "getxattr", "lgetxattr",
    "fgetxattr", "setxattr", "lsetxattr", "fsetxattr", "listxattr", "llistxattr", "flistxattr",
    "removexattr", "lremovexattr", "fremovexattr", "getxattrat", "setxattrat", "listxattrat",
    "removexattrat", "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
    "fanotify_mark", "statmount", "listmount",
    /* memory */
    "brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "mincore", "msync", "mlock", "mlock2",
    "munlock", "mlockall", "munlockall", "memfd_create", "memfd_secret", "pkey_alloc", "pkey_free",
    "pkey_mprotect", "membarrier", "remap_file_pages", "map_shadow_stack", "mseal", "cachestat",
    "process_mrelease",
    /* processes (clone, personality: see default_rules; unshare and setns stay denied, as in
     * Docker's profile) */
    "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "kill", "tkill",
    "tgkill", "getpid", "getppid", "gettid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid",
    "set_tid_address", "set_robust_list", "get_robust_list", "rseq", "arch_prctl",
    "get_thread_area", "set_thread_area", "prctl", "seccomp", "capget", "capset", "getpriority",
    "setpriority", "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getattr",
    "sched_setattr", "sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval", "getrlimit",
    "setrlimit", "prlimit64", "getrusage", "times", "sysinfo", "uname", "pidfd_open",
    "pidfd_send_signal", "restart_syscall", "uretprobe", "ioprio_get", "ioprio_set", "getcpu",
    "getrandom", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
    /* credentials (in the sandbox's user namespace) */
    "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "setuid",
    "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups",
    /* signals and time */
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend",
    "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "signalfd",
    "signalfd4", "pause", "alarm", "time", "gettimeofday", "clock_gettime", "clock_getres",
    "clock_nanosleep", "nanosleep", "getitimer", "setitimer", "timer_create", "timer_settime",
    "timer_gettime", "timer_getoverrun", "timer_delete", "timerfd_create", "timerfd_settime",
    "timerfd_gettime",
    /* waiting */
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "futex", "futex_waitv",
    "futex_wake", "futex_wait", "futex_requeue",
    /* sockets (socket itself: see default_rules) and System V / POSIX IPC */
    "socketpair", "bind", "listen", "accept", "accept4", "connect", "getsockname", "getpeername",
    "getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
    "shutdown", "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semctl", "semtimedop",
    "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
    "mq_timedreceive", "mq_notify", "mq_getsetattr"};

/* Socket families a sandbox may open; socket() for any other fails with EPERM. */
static const int families[] = {AF_UNIX, AF_INET, AF_INET6};

/* The netlink protocols a sandbox may open: routing (ip, getifaddrs), socket diagnostics (ss),
 * audit (login and sudo log through it), netfilter and generic netlink (ethtool, taskstats).
 * Not NETLINK_KOBJECT_UEVENT: the network namespace of a sandbox belongs to the host's user
 * namespace, so it would hear every device event of the host. */
static const int netlink_protocols[] = {NETLINK_ROUTE, NETLINK_SOCK_DIAG, NETLINK_AUDIT,
					NETLINK_NETFILTER, NETLINK_GENERIC};

/* personality(2) values that turn on nothing unsafe (Docker's list): PER_LINUX, PER_LINUX32,
 * UNAME26 with either, and the 0xffffffff query. */
static const uint32_t personalities[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};

/* System calls newer than libseccomp 2.5.4's tables, by their x86_64 number, so profiles can
 * name them (and the default can allow the harmless ones). */
static const struct {
	const char *name;
	int nr;
} newer[] = {{"uretprobe", 335},
	     {"statmount", 457},
	     {"listmount", 458},
	     {"lsm_get_self_attr", 459},
	     {"lsm_set_self_attr", 460},
	     {"lsm_list_modules", 461},
	     {"mseal", 462},
	     {"setxattrat", 463},
	     {"getxattrat", 464},
	     {"listxattrat", 465},
	     {"removexattrat", 466},
	     {"open_tree_attr", 467},
	     {"file_getattr", 468},
	     {"file_setattr", 469}};

/* The number of a system call by name, or __NR_SCMP_ERROR when neither libseccomp nor the
 * table above knows it. */
static int resolve(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	size_t i;

	if (nr != __NR_SCMP_ERROR)
		return nr;
#if defined(__x86_64__)
	for (i = 0; i < sizeof(newer) / sizeof(newer[0]); i++)
		if (!strcmp(newer[i].name, name))
			return newer[i].nr;
#else
	(void)i;
#endif
	return __NR_SCMP_ERROR;
}

/* A filter being built. libseccomp silently drops a conditional rule for a system call that
 * already has an unconditional one with another action (and an unconditional one after
 * conditional ones replaces them), so every rule is checked against what came before. */
struct build {
	scmp_filter_ctx ctx;
	uint32_t def;    /* the default action */
	const int *skip; /* calls the file's rules own: the base profile leaves them alone */
	size_t n_skip;
	struct seen {
		int nr;
		uint32_t uncond_act, cond_act;
		unsigned char uncond, cond, cond_mixed;
	} * seen;
	size_t n_seen, cap_seen;
};

/* 0, -1 with err set (out of memory), or -2 when the rule contradicts an earlier one. */
static int conflict(struct build *b, int nr, uint32_t act, unsigned n, struct dsec_err *err)
{
	struct seen *e = NULL, *grown;
	size_t i;

	for (i = 0; i < b->n_seen && !e; i++)
		if (b->seen[i].nr == nr)
			e = &b->seen[i];
	if (!e) {
		if (b->n_seen == b->cap_seen) {
			b->cap_seen = b->cap_seen ? 2 * b->cap_seen : 64;
			grown = realloc(b->seen, b->cap_seen * sizeof(*b->seen));
			if (!grown)
				return dsec_err_set(err, ENOMEM, "out of memory");
			b->seen = grown;
		}
		e = &b->seen[b->n_seen++];
		memset(e, 0, sizeof(*e));
		e->nr = nr;
	}
	if (n == 0) {
		if ((e->uncond && e->uncond_act != act) ||
		    (e->cond && (e->cond_mixed || e->cond_act != act)))
			return -2;
		e->uncond = 1;
		e->uncond_act = act;
		return 0;
	}
	if (e->uncond && e->uncond_act != act)
		return -2;
	if (e->cond && e->cond_act != act)
		e->cond_mixed = 1;
	e->cond = 1;
	e->cond_act = act;
	return 0;
}

/* Add a rule for one system call. where names the profile member for messages, NULL for the
 * compiled-in profile (whose names an older libseccomp may not know: they stay denied). */
static int add(struct build *b, uint32_t action, const char *name, unsigned n,
	       const struct scmp_arg_cmp *args, const char *where, struct dsec_err *err)
{
	int nr = resolve(name), rc;
	size_t i;

	if (nr == __NR_SCMP_ERROR) {
		if (!where)
			return 0;
		return dsec_err_set(err, EINVAL, "%s: unknown system call '%s'", where, name);
	}
	for (i = 0; !where && i < b->n_skip; i++)
		if (b->skip[i] == nr)
			return 0;
	rc = conflict(b, nr, action, n, err);
	if (rc == -1)
		return -1;
	if (rc < 0)
		return dsec_err_set(err, EINVAL,
				    "%s%s'%s': conflicts with an earlier rule for it (one call "
				    "takes one unconditional rule, or conditional ones, of "
				    "one action)",
				    where ? where : "", where ? ": " : "", name);
	rc = seccomp_rule_add_array(b->ctx, action, nr, n, args);
	if (rc == -EACCES && action == b->def) /* the default already: nothing to add */
		return 0;
	if (rc == -EFAULT && seccomp_syscall_resolve_name(name) == __NR_SCMP_ERROR)
		return dsec_err_set(err, EINVAL,
				    "%s%s'%s': newer than this libseccomp, usable for the native "
				    "architecture only",
				    where ? where : "", where ? ": " : "", name);
	if (rc == -EINVAL && n > 1)
		return dsec_err_set(err, EINVAL,
				    "%s%s'%s': each argument may be compared once per rule",
				    where ? where : "", where ? ": " : "", name);
	if (rc < 0)
		return dsec_err_set(err, -rc, "%s%sadd rule for '%s': %s", where ? where : "",
				    where ? ": " : "", name, strerror(-rc));
	return 0;
}

/* Allow name unless the low 32 bits of argument idx are one of the values in ex (which must
 * differ from each other in at most 8 bits). seccomp has no masked "not equal", and one rule
 * cannot compare an argument twice, so: allow when any bit that all of ex share differs (one
 * rule per such bit), and allow the values that agree on all of those bits but are not in ex. */
static int allow_except32(struct build *b, const char *name, unsigned idx, const uint32_t *ex,
			  size_t n_ex, struct dsec_err *err)
{
	uint32_t differ = 0, mask, base, v, bit;
	struct scmp_arg_cmp a;
	uint64_t combo;
	size_t i, j;
	int excluded;

	for (i = 1; i < n_ex; i++)
		differ |= ex[0] ^ ex[i];
	if (__builtin_popcount(differ) > 8)
		return dsec_err_set(err, EINVAL, "%s: excluded values too far apart", name);
	mask = ~differ;
	base = ex[0] & mask;
	for (bit = 1; bit; bit <<= 1) {
		if (!(mask & bit))
			continue;
		a = SCMP_CMP64(idx, SCMP_CMP_MASKED_EQ, bit, ~base & bit);
		if (add(b, SCMP_ACT_ALLOW, name, 1, &a, NULL, err) < 0)
			return -1;
	}
	for (combo = 0; combo < (1ULL << __builtin_popcount(differ)); combo++) {
		/* spread the bits of combo over the positions set in differ */
		for (v = base, bit = 1, j = 0; bit; bit <<= 1)
			if (differ & bit && (combo >> j++) & 1)
				v |= bit;
		for (excluded = 0, i = 0; i < n_ex; i++)
			excluded |= v == ex[i];
		if (excluded)
			continue;
		a = SCMP_CMP64(idx, SCMP_CMP_MASKED_EQ, 0xffffffffu, v);
		if (add(b, SCMP_ACT_ALLOW, name, 1, &a, NULL, err) < 0)
			return -1;
	}
	return 0;
}

static int default_rules(struct build *b, struct dsec_err *err)
{
	static const uint32_t tty_ex[] = {TIOCSTI, TIOCLINUX};
	static const char *const aio[] = {"io_setup",  "io_destroy",   "io_submit",
					  "io_cancel", "io_getevents", "io_pgetevents"};
	struct scmp_arg_cmp a;
	size_t i;

	for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (add(b, SCMP_ACT_ALLOW, allowed[i], 0, NULL, NULL, err) < 0)
			return -1;
	/* Threads and fork, but no namespace and no CLONE_PARENT; clone3 hides its flags behind a pointer seccomp
	 * cannot read, so it answers ENOSYS and libc falls back to clone. */
	a = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_DENIED, 0);
	if (add(b, SCMP_ACT_ALLOW, "clone", 1, &a, NULL, err) < 0 ||
	    add(b, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, NULL, err) < 0)
		return -1;
	/* Linux AIO: every io_setup takes from one host-wide count (fs.aio-max-nr) that binds
	 * host root too, so one sandbox could leave none for the host's databases and VMs. ENOSYS,
	 * as from a kernel without it: libaio's users fall back to threads. */
	for (i = 0; i < sizeof(aio) / sizeof(aio[0]); i++)
		if (add(b, SCMP_ACT_ERRNO(ENOSYS), aio[i], 0, NULL, NULL, err) < 0)
			return -1;
	/* The kernel reads ioctl's command, personality's persona and socket's family as 32-bit:
	 * compare only those bits, so setting the upper half slips past nothing. TIOCSTI pushes
	 * input into a terminal another process reads; TIOCLINUX reaches the console. */
	if (allow_except32(b, "ioctl", 1, tty_ex, 2, err) < 0)
		return -1;
	for (i = 0; i < sizeof(personalities) / sizeof(personalities[0]); i++) {
		a = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, personalities[i]);
		if (add(b, SCMP_ACT_ALLOW, "personality", 1, &a, NULL, err) < 0)
			return -1;
	}
	for (i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
		a = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint64_t)families[i]);
		if (add(b, SCMP_ACT_ALLOW, "socket", 1, &a, NULL, err) < 0)
			return -1;
	}
	for (i = 0; i < sizeof(netlink_protocols) / sizeof(netlink_protocols[0]); i++) {
		struct scmp_arg_cmp nl[2] = {
		    SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint64_t)AF_NETLINK),
		    SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint64_t)netlink_protocols[i])};

		if (add(b, SCMP_ACT_ALLOW, "socket", 2, nl, NULL, err) < 0)
			return -1;
	}
	return 0;
}

/* A new filter context with default action act and only the native ABI; every other ABI (on
 * x86_64: i386 through int 0x80, and x32) answers EPERM to every call, so the argument checks
 * above cannot be sidestepped through a compat entry point (i386 has socketcall, whose
 * arguments seccomp cannot see). */
int dsec_seccomp_no_compact;

static scmp_filter_ctx new_ctx(uint32_t act, struct dsec_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(act);
	int rc;

	if (!ctx) {
		dsec_err_set(err, ENOMEM, "seccomp_init failed");
		return NULL;
	}
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
	/* A binary tree instead of a linear scan: the allow-list is long. */
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (rc < 0) {
		dsec_err_set(err, -rc, "seccomp filter attributes: %s", strerror(-rc));
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

/* Compile ctx to BPF into a new object. libseccomp 2.5.4 only exports to a descriptor, so
 * export into a memfd and read the program back. */
static int export(scmp_filter_ctx ctx, struct dsec_seccomp **out, struct dsec_err *err)
{
	struct dsec_seccomp *sc = NULL;
	struct stat st;
	size_t n;
	int fd, rc;

	fd = memfd_create("dsec-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return dsec_err_sys(err, "memfd_create");
	rc = seccomp_export_bpf(ctx, fd);
	if (rc < 0) {
		close(fd);
		return dsec_err_set(err, -rc, "export seccomp filter: %s", strerror(-rc));
	}
	if (fstat(fd, &st) < 0) {
		dsec_err_sys(err, "stat exported filter");
		goto fail;
	}
	n = (size_t)st.st_size / sizeof(struct sock_filter);
	if (n == 0 || n > BPF_MAXINSNS || (size_t)st.st_size % sizeof(struct sock_filter)) {
		dsec_err_set(err, E2BIG, "seccomp filter has %zu bytes: too large or malformed",
			     (size_t)st.st_size);
		goto fail;
	}
	sc = calloc(1, sizeof(*sc));
	if (sc)
		sc->prog.filter = calloc(n, sizeof(struct sock_filter));
	if (!sc || !sc->prog.filter) {
		dsec_err_set(err, ENOMEM, "seccomp filter: out of memory");
		goto fail;
	}
	sc->prog.len = (unsigned short)n;
	if (pread(fd, sc->prog.filter, (size_t)st.st_size, 0) != st.st_size) {
		dsec_err_sys(err, "read exported filter");
		goto fail;
	}
	close(fd);
	fd = -1;
	if (!dsec_seccomp_no_compact) {
		struct sock_fprog c;

		rc = dsec_seccomp_compact(&sc->prog, &c, err);
		if (rc < 0)
			goto fail;
		if (rc == 0) {
			free(sc->prog.filter);
			sc->prog = c;
		}
	}
	*out = sc;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	dsec_seccomp_free(sc);
	return -1;
}

static int parse_action(json_t *v, const char *where, uint32_t *act, json_t *errno_v,
			struct dsec_err *err)
{
	const char *s = json_string_value(v);
	json_int_t e = 1; /* EPERM */

	if (!s)
		return dsec_err_set(err, EINVAL, "%s: must be a string", where);
	if (errno_v && strcmp(s, "errno"))
		return dsec_err_set(err, EINVAL, "%s: \"errno\" only goes with action \"errno\"",
				    where);
	if (errno_v) {
		if (!json_is_integer(errno_v) || (e = json_integer_value(errno_v)) < 1 || e > 4095)
			return dsec_err_set(err, EINVAL, "%s: errno must be an integer 1..4095",
					    where);
	}
	if (!strcmp(s, "allow"))
		*act = SCMP_ACT_ALLOW;
	else if (!strcmp(s, "errno"))
		*act = SCMP_ACT_ERRNO((uint32_t)e);
	else if (!strcmp(s, "kill"))
		*act = SCMP_ACT_KILL_PROCESS;
	else if (!strcmp(s, "log"))
		*act = SCMP_ACT_LOG;
	else
		return dsec_err_set(err, EINVAL,
				    "%s: unknown action '%.40s' (allow, errno, kill or log)", where,
				    s);
	return 0;
}

/* A comparison operand: a non-negative JSON integer or a string holding an unsigned number
 * in C notation ("0x5412"), for values above 2^63. */
static int parse_u64(json_t *v, const char *where, uint64_t *out, struct dsec_err *err)
{
	const char *s;
	char *end;

	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	s = json_string_value(v);
	if (s && *s >= '0' && *s <= '9') {
		errno = 0;
		*out = strtoull(s, &end, 0);
		if (!errno && !*end)
			return 0;
	}
	return dsec_err_set(
	    err, EINVAL, "%s: must be a non-negative integer or a string like \"0x5412\"", where);
}

static int check_keys(json_t *obj, const char *where, const char *const *keys, struct dsec_err *err)
{
	const char *k, *const *p;
	json_t *v;

	json_object_foreach(obj, k, v)
	{
		for (p = keys; *p && strcmp(*p, k); p++)
			;
		if (!*p)
			return dsec_err_set(err, EINVAL, "%s: unknown member '%.40s'", where, k);
	}
	return 0;
}

static int parse_arg(json_t *o, const char *where, struct scmp_arg_cmp *c, struct dsec_err *err)
{
	static const char *const keys[] = {"index", "op", "value", "mask", NULL};
	static const struct {
		const char *name;
		enum scmp_compare op;
	} ops[] = {{"eq", SCMP_CMP_EQ},
		   {"ne", SCMP_CMP_NE},
		   {"lt", SCMP_CMP_LT},
		   {"le", SCMP_CMP_LE},
		   {"gt", SCMP_CMP_GT},
		   {"ge", SCMP_CMP_GE},
		   {"masked_eq", SCMP_CMP_MASKED_EQ}};
	json_t *idx = json_object_get(o, "index"), *mask = json_object_get(o, "mask");
	const char *op = json_string_value(json_object_get(o, "op"));
	char w[256];
	size_t i;

	if (!json_is_object(o))
		return dsec_err_set(err, EINVAL, "%s: must be an object", where);
	if (check_keys(o, where, keys, err) < 0)
		return -1;
	if (!json_is_integer(idx) || json_integer_value(idx) < 0 || json_integer_value(idx) > 5)
		return dsec_err_set(err, EINVAL, "%s.index: must be an integer 0..5", where);
	if (!op)
		return dsec_err_set(err, EINVAL, "%s.op: must be a string", where);
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]) && strcmp(ops[i].name, op); i++)
		;
	if (i == sizeof(ops) / sizeof(ops[0]))
		return dsec_err_set(err, EINVAL,
				    "%s.op: unknown operator '%.40s' (eq, ne, lt, le, gt, ge, "
				    "masked_eq)",
				    where, op);
	memset(c, 0, sizeof(*c));
	c->arg = (unsigned)json_integer_value(idx);
	c->op = ops[i].op;
	if ((c->op == SCMP_CMP_MASKED_EQ) != !!mask)
		return dsec_err_set(err, EINVAL, "%s.mask: required with masked_eq, only there",
				    where);
	snprintf(w, sizeof(w), "%s.value", where);
	if (!json_object_get(o, "value"))
		return dsec_err_set(err, EINVAL, "%s: missing", w);
	if (mask) {
		/* libseccomp takes the mask first, the value second */
		if (parse_u64(json_object_get(o, "value"), w, &c->datum_b, err) < 0)
			return -1;
		snprintf(w, sizeof(w), "%s.mask", where);
		return parse_u64(mask, w, &c->datum_a, err);
	}
	return parse_u64(json_object_get(o, "value"), w, &c->datum_a, err);
}

static int parse_rule(struct build *b, json_t *r, const char *where, struct dsec_err *err)
{
	static const char *const keys[] = {"names", "action", "errno", "args", "comment", NULL};
	json_t *names = json_object_get(r, "names"), *args = json_object_get(r, "args"), *v;
	struct scmp_arg_cmp cmp[6];
	char w[256];
	uint32_t act;
	size_t i, n = 0;

	if (!json_is_object(r))
		return dsec_err_set(err, EINVAL, "%s: must be an object", where);
	if (check_keys(r, where, keys, err) < 0)
		return -1;
	snprintf(w, sizeof(w), "%s.action", where);
	if (!json_object_get(r, "action"))
		return dsec_err_set(err, EINVAL, "%s: missing", w);
	if (parse_action(json_object_get(r, "action"), w, &act, json_object_get(r, "errno"), err) <
	    0)
		return -1;
	if (args) {
		if (!json_is_array(args) || json_array_size(args) > 6)
			return dsec_err_set(err, EINVAL, "%s.args: must be an array of at most 6",
					    where);
		json_array_foreach(args, i, v)
		{
			snprintf(w, sizeof(w), "%s.args[%zu]", where, i);
			if (parse_arg(v, w, &cmp[i], err) < 0)
				return -1;
		}
		n = json_array_size(args);
	}
	if (!json_is_array(names) || !json_array_size(names) || json_array_size(names) > MAX_NAMES)
		return dsec_err_set(err, EINVAL, "%s.names: must be an array of 1..%d strings",
				    where, MAX_NAMES);
	json_array_foreach(names, i, v)
	{
		const char *s = json_string_value(v);

		snprintf(w, sizeof(w), "%s.names[%zu]", where, i);
		if (!s || !*s || strlen(s) > MAX_NAME)
			return dsec_err_set(err, EINVAL, "%s: must be a system call name", w);
		if (add(b, act, s, (unsigned)n, cmp, w, err) < 0)
			return -1;
	}
	return 0;
}

/* The calls the file's rules name, which the base profile then leaves to them. Bad members
 * are skipped here: parse_rule reports them. */
static int collect_names(json_t *rules, int **out, size_t *n_out, struct dsec_err *err)
{
	json_t *r, *v;
	size_t i, j, n = 0, cap = 0;
	int *nrs = NULL, *grown, nr;

	json_array_foreach(rules, i, r){json_array_foreach(json_object_get(r, "names"), j, v){
	    if (!json_is_string(v) ||
		(nr = resolve(json_string_value(v))) == __NR_SCMP_ERROR) continue;
	if (n == MAX_TOTAL_NAMES) {
		free(nrs);
		return dsec_err_set(err, E2BIG, "rules: more than %d names in all",
				    MAX_TOTAL_NAMES);
	}
	if (n == cap) {
		cap = cap ? 2 * cap : 64;
		grown = realloc(nrs, cap * sizeof(*nrs));
		if (!grown) {
			free(nrs);
			return dsec_err_set(err, ENOMEM, "out of memory");
		}
		nrs = grown;
	}
	nrs[n++] = nr;
}
}
*out = nrs;
*n_out = n;
return 0;
}

static int parse_profile(json_t *root, struct build *b, struct dsec_err *err)
{
	static const char *const keys[] = {"base",  "default", "errno", "arches",
					   "rules", "comment", NULL};
	json_t *base = json_object_get(root, "base"), *def = json_object_get(root, "default");
	json_t *arches = json_object_get(root, "arches"), *rules = json_object_get(root, "rules");
	int on_default = 0, rc = -1, *skip = NULL;
	uint32_t act = SCMP_ACT_ERRNO(EPERM);
	size_t i, n_skip = 0;
	char w[64];
	json_t *v;

	if (!json_is_object(root))
		return dsec_err_set(err, EINVAL, "must be a JSON object");
	if (check_keys(root, "profile", keys, err) < 0)
		return -1;
	if (base && (!json_is_string(base) || (strcmp(json_string_value(base), "default") &&
					       strcmp(json_string_value(base), "none"))))
		return dsec_err_set(err, EINVAL, "base: must be \"default\" or \"none\"");
	on_default = base && !strcmp(json_string_value(base), "default");
	if (on_default) {
		if (def || json_object_get(root, "errno") || arches)
			return dsec_err_set(err, EINVAL,
					    "default, errno and arches come from the base profile");
	} else if (!def) {
		return dsec_err_set(err, EINVAL, "default: missing (or set \"base\": \"default\")");
	} else if (parse_action(def, "default", &act, json_object_get(root, "errno"), err) < 0) {
		return -1;
	}
	if (arches && (!json_is_array(arches) || json_array_size(arches) > 8))
		return dsec_err_set(err, EINVAL, "arches: must be an array of at most 8 strings");
	if (rules && (!json_is_array(rules) || json_array_size(rules) > MAX_RULES))
		return dsec_err_set(err, EINVAL, "rules: must be an array of at most %d rules",
				    MAX_RULES);
	b->def = act;
	b->ctx = new_ctx(act, err);
	if (!b->ctx)
		return -1;
	json_array_foreach(arches, i, v)
	{
		const char *s = json_string_value(v);
		uint32_t a = s ? seccomp_arch_resolve_name(s) : 0;
		int r;

		if (!a)
			return dsec_err_set(err, EINVAL,
					    "arches[%zu]: unknown architecture '%.40s'", i,
					    s ? s : "");
		r = seccomp_arch_add(b->ctx, a);
		if (r < 0 && r != -EEXIST)
			return dsec_err_set(err, -r, "arches[%zu]: add '%s': %s", i, s,
					    strerror(-r));
	}
	if (on_default) {
		if (collect_names(rules, &skip, &n_skip, err) < 0)
			return -1;
		b->skip = skip;
		b->n_skip = n_skip;
		if (default_rules(b, err) < 0)
			goto out;
		b->skip = NULL;
		b->n_skip = 0;
	}
	json_array_foreach(rules, i, v)
	{
		snprintf(w, sizeof(w), "rules[%zu]", i);
		if (parse_rule(b, v, w, err) < 0)
			goto out;
	}
	rc = 0;
out:
	free(skip);
	return rc;
}

/* Build and compile: from root when given, else the compiled-in default. */
static int build(json_t *root, struct dsec_seccomp **out, struct dsec_err *err)
{
	struct build b = {0};
	int rc;

	if (root) {
		rc = parse_profile(root, &b, err);
	} else {
		b.def = SCMP_ACT_ERRNO(EPERM);
		b.ctx = new_ctx(b.def, err);
		rc = b.ctx ? default_rules(&b, err) : -1;
	}
	if (rc == 0)
		rc = export(b.ctx, out, err);
	if (b.ctx)
		seccomp_release(b.ctx);
	free(b.seen);
	return rc;
}

/* Messages quote names from the profile: keep them one printable line. Returns -1. */
static int one_line(struct dsec_err *err)
{
	char *p;

	if (!err)
		return -1;
	for (p = err->msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return -1;
}

static int prepare_buf(const char *buf, size_t len, const char *source, struct dsec_seccomp **out,
		       struct dsec_err *err);

int dsec_seccomp_prepare_buf(const char *buf, size_t len, const char *source,
			     struct dsec_seccomp **out, struct dsec_err *err)
{
	return prepare_buf(buf, len, source, out, err) < 0 ? one_line(err) : 0;
}

static int prepare_buf(const char *buf, size_t len, const char *source, struct dsec_seccomp **out,
		       struct dsec_err *err)
{
	json_error_t je;
	json_t *root;
	int rc;

	if (len > DSEC_SECCOMP_MAX_FILE)
		return dsec_err_set(err, EFBIG, "seccomp profile '%s': larger than %d bytes",
				    source, DSEC_SECCOMP_MAX_FILE);
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return dsec_err_set(err, EINVAL, "seccomp profile '%s': line %d column %d: %s",
				    source, je.line, je.column, je.text);
	rc = build(root, out, err);
	json_decref(root);
	return rc < 0 ? dsec_err_wrap(err, "seccomp profile '%s'", source) : 0;
}

int dsec_seccomp_compile_default(struct dsec_seccomp **out, struct dsec_err *err)
{
	return build(NULL, out, err) < 0 ? dsec_err_wrap(err, "default seccomp profile") : 0;
}

int dsec_seccomp_prepare(const char *path, struct dsec_seccomp **out, struct dsec_err *err)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int fd, rc;

	if (!path && dsec_seccomp_builtin_len) {
		struct dsec_seccomp *sc = calloc(1, sizeof(*sc));

		if (!sc)
			return dsec_err_set(err, ENOMEM, "default seccomp profile: out of memory");
		sc->prog.len = (unsigned short)dsec_seccomp_builtin_len;
		sc->prog.filter = (struct sock_filter *)dsec_seccomp_builtin;
		sc->builtin = 1;
		*out = sc;
		return 0;
	}
	if (!path)
		return dsec_seccomp_compile_default(out, err);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return dsec_err_sys(err, "seccomp profile '%s'", path), one_line(err);
	if (fstat(fd, &st) < 0) {
		dsec_err_sys(err, "seccomp profile '%s'", path);
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > DSEC_SECCOMP_MAX_FILE) {
		close(fd);
		return dsec_err_set(err, EINVAL,
				    "seccomp profile '%s': not a regular file of at most %d bytes",
				    path, DSEC_SECCOMP_MAX_FILE);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return dsec_err_set(err, ENOMEM, "seccomp profile '%s': out of memory", path);
	}
	n = read(fd, buf, (size_t)st.st_size + 1);
	if (n < 0) {
		dsec_err_sys(err, "read seccomp profile '%s'", path);
		free(buf);
		close(fd);
		return -1;
	}
	close(fd);
	rc = prepare_buf(buf, (size_t)n, path, out, err);
	free(buf);
	return rc < 0 ? one_line(err) : 0;
}

int dsec_seccomp_apply(const struct dsec_seccomp *sc, struct dsec_err *err)
{
	if (!sc || !sc->prog.filter)
		return dsec_err_nolocale(err, "load seccomp filter: no filter", EINVAL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return dsec_err_nolocale(err, "set no_new_privs", errno);
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &sc->prog) == 0)
		return 0;
	if (errno == ENOSYS &&
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, (unsigned long)&sc->prog, 0, 0) == 0)
		return 0;
	return dsec_err_nolocale(err, "load seccomp filter", errno);
}

size_t dsec_seccomp_insns(const struct dsec_seccomp *sc)
{
	return sc ? sc->prog.len : 0;
}

const struct sock_fprog *dsec_seccomp_prog(const struct dsec_seccomp *sc)
{
	return sc ? &sc->prog : NULL;
}

void dsec_seccomp_free(struct dsec_seccomp *sc)
{
	if (!sc)
		return;
	if (!sc->builtin)
		free(sc->prog.filter);
	free(sc);
}
