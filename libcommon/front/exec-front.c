/* dsec-exec's front: the common case, `dsec-exec [--run DIR] [-w DIR] [-e K=V]... [-u U[:G]]
 * [--timeout D] ID [--] CMD...` in the foreground, done without libc; everything else handed
 * to the full dsec-exec (libexec/dsec-exec next to this binary in the build tree,
 * ../libexec/dsec/dsec-exec installed) by execve, untouched.
 *
 * Why: on a virtual machine that traps CPUID, the start of a glibc program costs some 0.6 ms
 * (its cache-size probe runs the instruction about 80 times), about the half of one exec into a
 * sandbox that is not the command itself. A program without libc starts in microseconds.
 *
 * What it does is what the full one does for a plain foreground exec (exec.c), step for step:
 * the holder found by pidfd and checked against its start time, the command cloned into the
 * sandbox's pid namespace (and cgroup on v2), joining its v1 cgroups and every other namespace,
 * root of its user namespace (or the user asked for, or the sandbox's default), host
 * descriptors closed, cwd "/" or the sandbox's working dir, signals reset, no_new_privs, dsec's
 * default capabilities (caps.h) and seccomp program (compiled in at build time), the sandbox's
 * environment, argv[0] searched in its PATH inside; with --timeout, the command's own cgroup,
 * killed whole at the deadline. Signals sent to dsec-exec go to the command; the exit status
 * is the command's, 128+N when a signal killed it, 124 when the time was up.
 *
 * Host files as stdio are relayed through pipes, as the full one does. It hands over, before
 * doing anything that shows, whenever the request is not that plain: any other option, a state
 * it does not expect (a paused sandbox, a user it cannot resolve, a file too big for it, an
 * escape in a string it needs), a directory or O_PATH descriptor as stdio (the full one refuses
 * it), or any failure up to the command's execve (the full one then does it all again and says
 * what failed). A sandbox claimed from a warm pool is read as the full one reads it: its claim
 * file over its state.
 * DSEC_EXEC_FAST=0 always hands over. */

#include <asm/unistd.h>
#include <linux/capability.h>
#include <linux/fcntl.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/prctl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <linux/signalfd.h>
#include <linux/stat.h>
#include <linux/wait.h>
#include <stddef.h>
#include <stdint.h>

#include "../caps-default.h"
#include "../exec-domain.h"
#include "../exec-guard.h"
#include "../exec-stdio.h"
#include "../nofile.h"

/* ---- system calls ---- */

#if defined(__x86_64__)
static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
/* main gets the kernel's stack pointer: argc, argv[], NULL, envp[], NULL */
__asm__(".text\n.global _start\n_start:\n\txor %rbp,%rbp\n\tmov %rsp,%rdi\n"
	"\tand $-16,%rsp\n\tcall front_main\n\thlt\n");
#elif defined(__aarch64__)
static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}
__asm__(".text\n.global _start\n_start:\n\tmov x29, #0\n\tmov x0, sp\n\tbl front_main\n\tb .\n");
#else /* the Makefile builds the front for x86_64 and aarch64 only; this keeps analyzers going */
static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	(void)n, (void)a, (void)b, (void)c, (void)d, (void)e, (void)f;
	return -38; /* ENOSYS: every step fails, everything goes to the full one */
}
#endif

#define S1(n, a) sys6(n, (long)(a), 0, 0, 0, 0, 0)
#define S2(n, a, b) sys6(n, (long)(a), (long)(b), 0, 0, 0, 0)
#define S3(n, a, b, c) sys6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define S4(n, a, b, c, d) sys6(n, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define S5(n, a, b, c, d, e) sys6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

#define AT_FDCWD_ -100
#define AT_EMPTY_PATH_ 0x1000
#define ENOENT_ 2
#define EINTR_ 4
#define EAGAIN_ 11
#define EINVAL_ 22
#define ENOSYS_ 38
#define EOPNOTSUPP_ 95
#define SIGCHLD_ 17
#define SIGKILL_ 9
#define SIGSTOP_ 19
#define SIGINT_ 2
#define SIGQUIT_ 3
#define SI_KERNEL_ 0x80
#define SIG_SETMASK_ 2
#define SIG_BLOCK_ 0
#define SCHED_IDLE_ 5
#define RLIMIT_NOFILE_ 7
#define POLLIN_ 1
#define EBUSY_ 16
#define CLOCK_MONOTONIC_ 1

static int sys_open(const char *path, int flags)
{
	return (int)S4(__NR_openat, AT_FDCWD_, path, flags | O_CLOEXEC, 0);
}
static long sys_read(int fd, void *buf, unsigned long n)
{
	return S3(__NR_read, fd, buf, n);
}
static long sys_write(int fd, const void *buf, unsigned long n)
{
	return S3(__NR_write, fd, buf, n);
}
static void sys_close(int fd)
{
	S1(__NR_close, fd);
}
__attribute__((noreturn)) static void sys_exit(int code)
{
	for (;;)
		S1(__NR_exit_group, code);
}

/* ---- small helpers (no libc) ---- */

static unsigned long slen(const char *s)
{
	unsigned long n = 0;

	while (s[n])
		n++;
	return n;
}
static int seq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}
static int starts(const char *s, const char *p)
{
	while (*p && *s == *p)
		s++, p++;
	return !*p;
}
/* memcpy/memset for what the compiler emits itself (struct copies and zeroing) */
static int memcmp_(const void *a, const void *b, unsigned long n)
{
	const unsigned char *x = a, *y = b;

	for (unsigned long i = 0; i < n; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}
void *memcpy(void *d, const void *s, unsigned long n);
void *memset(void *d, int c, unsigned long n);
void *memcpy(void *d, const void *s, unsigned long n)
{
	unsigned char *o = d;
	const unsigned char *i = s;

	while (n--)
		*o++ = *i++;
	return d;
}
void *memset(void *d, int c, unsigned long n)
{
	unsigned char *o = d;

	while (n--)
		*o++ = (unsigned char)c;
	return d;
}

/* Append src to dst (capacity cap, NUL-terminated). 0, or -1 when it does not fit. */
static int cat(char *dst, unsigned long cap, const char *src)
{
	unsigned long n = slen(dst), m = slen(src);

	if (n + m + 1 > cap)
		return -1;
	memcpy(dst + n, src, m + 1);
	return 0;
}

/* "dsec-exec: error: ID: WHY" on stderr, the full one's form, and exit with status. */
__attribute__((noreturn)) static void fail_exit(const char *id, const char *why, int status)
{
	static char msg[512];

	msg[0] = '\0';
	cat(msg, sizeof(msg), "dsec-exec: error: ");
	cat(msg, sizeof(msg), id);
	cat(msg, sizeof(msg), ": ");
	cat(msg, sizeof(msg), why);
	cat(msg, sizeof(msg), "\n");
	sys_write(2, msg, slen(msg));
	sys_exit(status);
}

static void utoa(unsigned long long v, char *buf)
{
	char t[24];
	int n = 0, i;

	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	for (i = 0; i < n; i++)
		buf[i] = t[n - 1 - i];
	buf[n] = '\0';
}

/* Read path whole into buf, NUL-terminated. Its length; -errno when it cannot be opened, -1
 * for any other failure. */
static long read_file(const char *path, char *buf, unsigned long cap)
{
	long n = 0, r;
	int fd = sys_open(path, O_RDONLY | O_NOFOLLOW);

	if (fd < 0)
		return fd;
	while ((unsigned long)n < cap - 1 && (r = sys_read(fd, buf + n, cap - 1 - n)) > 0)
		n += r;
	sys_close(fd);
	if (r < 0 || (unsigned long)n >= cap - 1)
		return -1; /* an error, or too big for us: the full one reads it */
	buf[n] = '\0';
	return n;
}

/* ---- the state file: just what an exec needs, in the format dsec writes (sandbox.h) ---- */

#define MAX_ENV 256
#define NCG 6 /* memory, cpu, cpuacct, pids, freezer, blkio */

static const char *const cg_names[NCG] = {"memory", "cpu", "cpuacct", "pids", "freezer", "blkio"};

static struct {
	char *id, *hostname, *net, *cls, *v2, *workdir, *user;
	char *v1[NCG];
	unsigned long long pid, start, uid_base, id_count, root_uid, nofile;
	int have_root;
	int cgver, userns, nenv;
	char *env[MAX_ENV];
} st;

static char pool[1 << 17]; /* decoded strings */
static unsigned long pool_used;

struct parser {
	const char *p;
	int bad;
};

static void ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r')
		ps->p++;
}

/* A string into the pool; escapes but \" \\ \/ \n \t make the parse fail (the full one then
 * reads the state). */
static char *str(struct parser *ps)
{
	char *out = pool + pool_used;
	unsigned long n = 0;

	ws(ps);
	if (*ps->p != '"') {
		ps->bad = 1;
		return 0;
	}
	for (ps->p++; *ps->p != '"'; ps->p++) {
		char c = *ps->p;

		if (!c || pool_used + n + 2 >= sizeof(pool) || (unsigned char)c < 0x20) {
			ps->bad = 1;
			return 0;
		}
		if (c == '\\') {
			c = *++ps->p;
			if (c == 'n')
				c = '\n';
			else if (c == 't')
				c = '\t';
			else if (c != '"' && c != '\\' && c != '/') {
				ps->bad = 1;
				return 0;
			}
		}
		out[n++] = c;
	}
	ps->p++;
	out[n] = '\0';
	pool_used += n + 1;
	return out;
}

static unsigned long long num(struct parser *ps)
{
	unsigned long long v = 0;
	int digits = 0;

	ws(ps);
	if (*ps->p == '-')
		ps->bad = 1;
	while (*ps->p >= '0' && *ps->p <= '9' && digits < 19) {
		v = v * 10 + (unsigned long long)(*ps->p++ - '0');
		digits++;
	}
	if (!digits || (*ps->p >= '0' && *ps->p <= '9') || *ps->p == '.' || *ps->p == 'e' ||
	    *ps->p == 'E')
		ps->bad = 1;
	return v;
}

static void skip(struct parser *ps, int depth);

/* Walk an object: for each member, call fn(ps, key, ctx), which reads or skips the value. */
static void object(struct parser *ps, void (*fn)(struct parser *, const char *, int), int ctx)
{
	ws(ps);
	if (*ps->p != '{') {
		ps->bad = 1;
		return;
	}
	ps->p++;
	ws(ps);
	if (*ps->p == '}') {
		ps->p++;
		return;
	}
	while (!ps->bad) {
		char *k = str(ps);

		ws(ps);
		if (ps->bad || *ps->p != ':') {
			ps->bad = 1;
			return;
		}
		ps->p++;
		fn(ps, k, ctx);
		ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == '}') {
			ps->p++;
			return;
		}
		ps->bad = 1;
	}
}

/* Walk an array: fn(ps, ctx) reads or skips each element. */
static void array(struct parser *ps, void (*fn)(struct parser *, int), int ctx)
{
	ws(ps);
	if (*ps->p != '[') {
		ps->bad = 1;
		return;
	}
	ps->p++;
	ws(ps);
	if (*ps->p == ']') {
		ps->p++;
		return;
	}
	while (!ps->bad) {
		fn(ps, ctx);
		ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == ']') {
			ps->p++;
			return;
		}
		ps->bad = 1;
	}
}

static void skip_element(struct parser *ps, int depth)
{
	skip(ps, depth + 1);
}

static void env_element(struct parser *ps, int ctx)
{
	(void)ctx;
	if (st.nenv >= MAX_ENV)
		ps->bad = 1;
	else
		st.env[st.nenv++] = str(ps);
}

static void skip_member(struct parser *ps, const char *k, int depth)
{
	(void)k;
	skip(ps, depth + 1);
}

static void skip(struct parser *ps, int depth)
{
	ws(ps);
	if (depth > 32) {
		ps->bad = 1;
		return;
	}
	switch (*ps->p) {
	case '"': {
		unsigned long mark = pool_used;

		str(ps);
		pool_used = mark;
		return;
	}
	case '{':
		object(ps, skip_member, depth);
		return;
	case '[':
		array(ps, skip_element, depth);
		return;
	default:
		if (starts(ps->p, "true"))
			ps->p += 4;
		else if (starts(ps->p, "false"))
			ps->p += 5;
		else if (starts(ps->p, "null"))
			ps->p += 4;
		else if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) {
			ps->p++;
			while ((*ps->p >= '0' && *ps->p <= '9') || *ps->p == '.' || *ps->p == 'e' ||
			       *ps->p == 'E' || *ps->p == '+' || *ps->p == '-')
				ps->p++;
		} else
			ps->bad = 1;
	}
}

static void holder_member(struct parser *ps, const char *k, int ctx)
{
	(void)ctx;
	if (seq(k, "pid"))
		st.pid = num(ps);
	else if (seq(k, "start"))
		st.start = num(ps);
	else
		skip(ps, 1);
}

static void paths_member(struct parser *ps, const char *k, int ctx)
{
	(void)ctx;
	for (int c = 0; c < NCG; c++)
		if (seq(k, cg_names[c])) {
			st.v1[c] = str(ps);
			return;
		}
	ps->bad = 1; /* a controller this front does not know */
}

static void cgroup_member(struct parser *ps, const char *k, int ctx)
{
	(void)ctx;
	if (seq(k, "version"))
		st.cgver = (int)num(ps);
	else if (seq(k, "path"))
		st.v2 = str(ps);
	else if (seq(k, "paths"))
		object(ps, paths_member, 0);
	else
		skip(ps, 1);
}

static void userns_member(struct parser *ps, const char *k, int ctx)
{
	(void)ctx;
	if (seq(k, "uid"))
		st.uid_base = num(ps);
	else if (seq(k, "count"))
		st.id_count = num(ps);
	else if (seq(k, "root")) {
		st.root_uid = num(ps);
		st.have_root = 1;
	} else
		skip(ps, 1);
}

static void limits_member(struct parser *ps, const char *k, int ctx)
{
	(void)ctx;
	if (seq(k, "nofile"))
		st.nofile = num(ps);
	else
		skip(ps, 1);
}

static void top_member(struct parser *ps, const char *k, int ctx)
{
	(void)ctx;
	if (seq(k, "id"))
		st.id = str(ps);
	else if (seq(k, "hostname"))
		st.hostname = str(ps);
	else if (seq(k, "net"))
		st.net = str(ps);
	else if (seq(k, "class"))
		st.cls = str(ps);
	else if (seq(k, "limits"))
		object(ps, limits_member, 0);
	else if (seq(k, "holder"))
		object(ps, holder_member, 0);
	else if (seq(k, "cgroup"))
		object(ps, cgroup_member, 0);
	else if (seq(k, "userns")) {
		ws(ps);
		st.userns = *ps->p == '{';
		if (st.userns)
			object(ps, userns_member, 0);
		else
			skip(ps, 1);
	} else if (seq(k, "env")) {
		st.nenv = 0; /* a claim's replaces the state's (pool.c: dsec_pool_merge_claim) */
		array(ps, env_element, 0);
	} else if (seq(k, "workdir"))
		st.workdir = str(ps);
	else if (seq(k, "user"))
		st.user = str(ps); /* the commands' default user (a claim's replaces it) */
	else
		skip(ps, 1);
}

/* ---- the exec ---- */

static char *const *orig_argv;
static char *const *orig_envp;

/* Hand everything to the full dsec-exec, as if it had been run. */
__attribute__((noreturn)) static void full(void)
{
	static char self[4096], path[4200];
	long n = S4(__NR_readlinkat, AT_FDCWD_, "/proc/self/exe", self, sizeof(self) - 1);
	char *slash = 0;

	if (n > 0) {
		self[n] = '\0';
		for (char *p = self; *p; p++)
			if (*p == '/')
				slash = p;
	}
	if (slash) {
		*slash = '\0';
		path[0] = '\0';
		/* the build tree: build/libexec/dsec-exec; installed: ../libexec/dsec/dsec-exec */
		if (!cat(path, sizeof(path), self) &&
		    !cat(path, sizeof(path), "/libexec/dsec-exec"))
			S3(__NR_execve, path, orig_argv, orig_envp);
		path[0] = '\0';
		if (!cat(path, sizeof(path), self) &&
		    !cat(path, sizeof(path), "/../libexec/dsec/dsec-exec"))
			S3(__NR_execve, path, orig_argv, orig_envp);
	}
	sys_write(2, "dsec-exec: error: the full dsec-exec (libexec/dsec/dsec-exec) is missing\n",
		  74);
	sys_exit(125);
}

static const char *getenv_(const char *name)
{
	unsigned long n = slen(name);

	for (char *const *e = orig_envp; *e; e++)
		if (starts(*e, name) && (*e)[n] == '=')
			return *e + n + 1;
	return 0;
}

/* The command's environment: PATH, HOME, HOSTNAME, then the sandbox's own (a later one of a
 * name replaces an earlier one), as dsec_env_init builds it. */
#define MAX_OPT_ENV 64
static char *envp_buf[MAX_ENV + MAX_OPT_ENV + 8];
/* -e/--env K=V given to us, applied after the sandbox's own (as dsec_env_put does) */
static char *opt_env[MAX_OPT_ENV];
static int n_opt_env;
/* -w/--workdir DIR given to us: it must exist (the full one reports why not), where the
 * sandbox's default working dir falls back to "/" */
static const char *opt_cwd;
static char env_path[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
static char env_home[] = "HOME=/root";
static char env_home_user[520]; /* "HOME=" the user's home, with another user */
static char env_host[128];

static int env_put(int n, char *kv)
{
	unsigned long k = 0;

	while (kv[k] && kv[k] != '=')
		k++;
	/* "K" alone takes the host's value, and a name too long is refused: the full one's */
	if (!kv[k] || !k || k >= 256)
		return -1;
	for (int i = 0; i < n; i++) {
		unsigned long j = 0;

		while (j < k && envp_buf[i][j] == kv[j])
			j++;
		if (j == k && envp_buf[i][k] == '=') {
			envp_buf[i] = kv;
			return n;
		}
	}
	envp_buf[n++] = kv;
	return n;
}

static int build_env(void)
{
	int n = 0;

	n = env_put(n, env_path);
	n = env_put(n, env_home_user[0] ? env_home_user : env_home);
	if (st.hostname && st.hostname[0]) {
		env_host[0] = '\0';
		if (cat(env_host, sizeof(env_host), "HOSTNAME=") ||
		    cat(env_host, sizeof(env_host), st.hostname))
			return -1;
		n = env_put(n, env_host);
	}
	for (int i = 0; i < st.nenv && n >= 0; i++)
		n = env_put(n, st.env[i]);
	for (int i = 0; i < n_opt_env && n >= 0; i++)
		n = env_put(n, opt_env[i]);
	if (n < 0)
		return -1;
	envp_buf[n] = 0;
	return 0;
}

/* execve argv[0] as exec.c's exec_search does: as is with a '/', else in the PATH of envp. */
static void exec_search(char *const *argv)
{
	static char buf[4096];
	const char *file = argv[0], *path = 0;

	for (int i = 0; envp_buf[i]; i++)
		if (starts(envp_buf[i], "PATH="))
			path = envp_buf[i] + 5;
	for (const char *s = file; *s; s++)
		if (*s == '/') {
			S3(__NR_execve, file, argv, envp_buf);
			return;
		}
	for (const char *p = path;; p++) {
		const char *end = p;
		unsigned long dl;

		while (*end && *end != ':')
			end++;
		dl = (unsigned long)(end - p);
		if (dl + slen(file) + 3 <= sizeof(buf)) {
			memcpy(buf, p, dl);
			if (!dl)
				buf[dl++] = '.';
			buf[dl] = '/';
			memcpy(buf + dl + 1, file, slen(file) + 1);
			S3(__NR_execve, buf, argv, envp_buf);
		}
		if (!*end)
			return;
		p = end;
	}
}

/* stdio reaches the command through pipes of ours, as the full one relays it (dsec-exec.c),
 * unless it is /dev/null or another memory device: a host file handed over as it is could be
 * reopened through /proc/self/fd/N and the rest of a shared log read; a host terminal, pipe or
 * socket would stay with what the command leaves running after its exit. */
static struct relay {
	int file, pipe, cmd; /* the host fd, our end of the pipe, the command's; -1 none */
	int in;              /* 1: file -> pipe (stdin), 0: pipe -> file */
	int wait;            /* the host fd can block: polled before each use */
	long off, len;
	char buf[65536];
} relays[3];

#define POLLOUT_ 4
#define POLLERR_ 8
#define POLLHUP_ 16
#define FIONREAD_ 0x541B
#define TIOCGPGRP_ 0x540F

/* stdio the command may have: a file, block or character device, pipe or socket, relayed
 * but for the memory devices; stderr on the file of stdout shares its pipe. Anything else (a
 * directory, an O_PATH descriptor, a closed one), or a terminal as stdin of a background job,
 * is the full one's to handle (it refuses a directory). 1 or 0. */
static int plain_stdio(void)
{
	struct statx sx[3];

	for (int fd = 0; fd < 3; fd++) {
		struct relay *r = &relays[fd];
		long fl = S2(__NR_fcntl, fd, F_GETFL);
		unsigned t;
		int p[2], pg, me;

		r->file = r->pipe = r->cmd = -1;
		r->off = r->len = 0;
		if (fl < 0 || (fl & O_PATH) ||
		    S5(__NR_statx, fd, "", AT_EMPTY_PATH_, STATX_TYPE | STATX_INO, &sx[fd]) < 0)
			return 0;
		t = sx[fd].stx_mode & 0170000;
		if (t == 0020000 && sx[fd].stx_rdev_major == DSEC_MEM_MAJOR &&
		    DSEC_MEM_MINOR_PLAIN(sx[fd].stx_rdev_minor)) /* /dev/null and kin */
			continue;
		if (t != 0020000 && t != 0010000 && t != 0140000 && t != 0100000 && t != 0060000)
			return 0;
		if (t == 0020000 && fd == 0 && S3(__NR_ioctl, 0, TIOCGPGRP_, &pg) == 0 &&
		    (me = (int)S1(__NR_getpgid, 0)) >= 0 && pg != me)
			return 0;
		if (fd == 2 && relays[1].pipe >= 0 && sx[2].stx_ino == sx[1].stx_ino &&
		    sx[2].stx_dev_major == sx[1].stx_dev_major &&
		    sx[2].stx_dev_minor == sx[1].stx_dev_minor) {
			r->cmd = relays[1].cmd; /* closed with stdout's */
			continue;
		}
		if (S2(__NR_pipe2, p, O_CLOEXEC) < 0)
			return 0;
		r->file = fd;
		r->in = fd == 0;
		r->wait = t != 0100000 && t != 0060000;
		r->pipe = r->in ? p[1] : p[0];
		r->cmd = r->in ? p[0] : p[1];
		S3(__NR_fcntl, r->pipe, F_SETFL, O_NONBLOCK);
	}
	return 1;
}

static void relay_stop(struct relay *r)
{
	if (r->pipe >= 0)
		sys_close(r->pipe);
	r->pipe = -1;
}

/* The fd and events relay r waits for: 1 (and fd -1) when it need not wait, as a regular
 * host file never does. */
static int relay_want(const struct relay *r, int *fd, short *ev)
{
	int full = r->off < r->len;

	*fd = full ? (r->in ? r->pipe : r->file) : (r->in ? r->file : r->pipe);
	*ev = full ? POLLOUT_ : POLLIN_;
	if (r->wait || *fd != r->file)
		return 0;
	*fd = -1;
	return 1;
}

/* Move what can move without blocking: our end is non-blocking, a host fd that can block is
 * used once for each readiness reported (rev), a page at a time. */
static void relay_step(struct relay *r, short rev)
{
	int src = r->in ? r->file : r->pipe, dst = r->in ? r->pipe : r->file;
	long n;

	while (r->pipe >= 0) {
		if (r->off == r->len) {
			if (src == r->file && r->wait && !(rev & (POLLIN_ | POLLHUP_ | POLLERR_)))
				return;
			n = sys_read(src, r->buf,
				     src == r->file && r->wait ? 4096 : sizeof(r->buf));
			if (n == -EAGAIN_ || n == -EINTR_)
				return;
			if (n <= 0) { /* end of input, or every writer of the pipe gone */
				relay_stop(r);
				return;
			}
			if (src == r->file)
				rev = 0;
			r->off = 0;
			r->len = n;
		}
		if (dst == r->file && r->wait && !(rev & (POLLOUT_ | POLLHUP_ | POLLERR_)))
			return;
		n = sys_write(dst, r->buf + r->off,
			      (unsigned long)(dst == r->file && r->wait && r->len - r->off > 4096
						  ? 4096
						  : r->len - r->off));
		if (n == -EAGAIN_ || n == -EINTR_)
			return;
		if (n <= 0) { /* the command closed its input, or the reader went away */
			relay_stop(r);
			return;
		}
		if (dst == r->file)
			rev = 0;
		r->off += n;
	}
}

/* After the command's exit, as the full one's (dsec-exec.c): stdin from a file is given back
 * what the command did not take (in its pipe, whose end we kept, and in our buffer); output
 * what its pipe held then goes out, blocking on the host fd; nothing its leftovers write
 * later. */
static void relay_drain(struct relay *r)
{
	int left = 0;
	long n;

	if (r->in && !r->wait && r->cmd >= 0) {
		long back = r->pipe >= 0 ? r->len - r->off : 0;

		if (S3(__NR_ioctl, r->cmd, FIONREAD_, &left) == 0)
			back += left;
		if (back > 0)
			S3(__NR_lseek, 0, -back, 1 /* SEEK_CUR */);
		sys_close(r->cmd);
		r->cmd = -1;
	} else if (r->pipe >= 0 && !r->in && S3(__NR_ioctl, r->pipe, FIONREAD_, &left) == 0) {
		while (r->off < r->len || left > 0) {
			if (r->off == r->len) {
				n = sys_read(r->pipe, r->buf,
					     left < (int)sizeof(r->buf) ? (unsigned long)left
									: sizeof(r->buf));
				if (n <= 0)
					break;
				left -= (int)n;
				r->off = 0;
				r->len = n;
			}
			n = sys_write(r->file, r->buf + r->off, (unsigned long)(r->len - r->off));
			if (n == -EINTR_)
				continue;
			if (n <= 0)
				break;
			r->off += n;
		}
	}
	relay_stop(r);
}

/* The holder is the process the state names: same start time, not a zombie. */
static int holder_ok(int pidfd)
{
	static char buf[1024], path[64];
	char num_[24], *p, *last = 0;
	int field = 2;
	unsigned long long start = 0;

	(void)pidfd;
	path[0] = '\0';
	utoa(st.pid, num_);
	if (cat(path, sizeof(path), "/proc/") || cat(path, sizeof(path), num_) ||
	    cat(path, sizeof(path), "/stat") || read_file(path, buf, sizeof(buf)) < 0)
		return 0;
	for (p = buf; *p; p++)
		if (*p == ')')
			last = p;
	if (!last)
		return 0;
	for (p = last + 1; *p && field < 22; p++)
		if (*p == ' ') {
			field++;
			if (field == 3 && p[1] == 'Z')
				return 0;
		}
	while (*p >= '0' && *p <= '9')
		start = start * 10 + (unsigned long long)(*p++ - '0');
	return field == 22 && start == st.start;
}

/* Is the sandbox paused? 1, 0, or -1 when that cannot be told. */
static int frozen(void)
{
	static char path[4200], buf[256];

	path[0] = '\0';
	if (st.cgver == 2) {
		if (cat(path, sizeof(path), st.v2) || cat(path, sizeof(path), "/cgroup.freeze") ||
		    read_file(path, buf, sizeof(buf)) < 0)
			return -1;
		return buf[0] != '0';
	}
	if (!st.v1[4])
		return 0;
	if (cat(path, sizeof(path), st.v1[4]) || cat(path, sizeof(path), "/freezer.state") ||
	    read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	return !starts(buf, "THAWED");
}

/* ---- another user: -u/--user U[:G], or the sandbox's default ----
 *
 * As the full one resolves it (execuser.c: dsec_exec_user_resolve): names looked up in the
 * sandbox's own /etc/passwd and /etc/group, opened through the holder's root with every link
 * resolved inside it, a file its ids do not own not taken; the user's groups, its home for
 * HOME. Anything this does not settle (a file over the buffer, a name or group not there, an id
 * not mapped) goes to the full one, which says why. */
#define MAX_GROUPS 64 /* DSEC_EXEC_USER_GROUPS */
static const char *opt_user;
static struct {
	int on;
	unsigned uid, gid, ngroups;
	unsigned groups[MAX_GROUPS];
	char home[512];
} who;

/* Is host uid h one of the sandbox's (its root's, or the range's but for its first when root is
 * another; a state of an older dsec has no root: the range's first uid was root's)? What
 * dsec_idmap_inside (userns.h) says, for this libc-free build that does not take that header. */
static int mapped_uid(unsigned long long h)
{
	unsigned long long root = st.have_root ? st.root_uid : st.uid_base;

	if (root != st.uid_base && (h == root || h == st.uid_base))
		return h == root;
	return h >= st.uid_base && h - st.uid_base < st.id_count;
}

/* The sandbox's file at path (relative to its root) into buf, NUL-terminated: its length, or -1
 * when missing or not to be taken (as read_db leaves it NULL), -2 when over the buffer. */
static long read_db(const char *path, char *buf, unsigned long cap)
{
	static char root[64];
	struct open_how how = {.flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	struct statx sx;
	char num_[24];
	long rfd, fd, len = 0, n;

	root[0] = '\0';
	utoa(st.pid, num_);
	if (cat(root, sizeof(root), "/proc/") || cat(root, sizeof(root), num_) ||
	    cat(root, sizeof(root), "/root"))
		return -1;
	rfd = S4(__NR_openat, AT_FDCWD_, root, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	if (rfd < 0)
		return -1;
	fd = S4(__NR_openat2, rfd, path, &how, sizeof(how));
	sys_close((int)rfd);
	if (fd < 0)
		return -1;
	if (S5(__NR_statx, fd, "", AT_EMPTY_PATH_, STATX_TYPE | STATX_UID, &sx) < 0 ||
	    (sx.stx_mode & 0170000) != 0100000 || (st.userns && !mapped_uid(sx.stx_uid))) {
		sys_close((int)fd);
		return -1;
	}
	while (len < (long)cap - 1 &&
	       (n = sys_read((int)fd, buf + len, cap - 1 - (unsigned long)len)) > 0)
		len += n;
	if (len == (long)cap - 1) {
		char c;

		if (sys_read((int)fd, &c, 1) == 1)
			len = -2;
	}
	sys_close((int)fd);
	if (len >= 0)
		buf[len] = '\0';
	return len;
}

/* A decimal id (no sign, below 2^32-1): 0 with *v set, -1 for anything else. */
static int parse_id(const char *s, unsigned long n, unsigned *v)
{
	unsigned long long x = 0;

	if (!n)
		return -1;
	for (unsigned long i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || x > 0xffffffffULL)
			return -1;
		x = x * 10 + (unsigned long long)(s[i] - '0');
	}
	if (x >= 0xffffffffULL)
		return -1;
	*v = (unsigned)x;
	return 0;
}

/* Fields of one line: start and length of each of the first nf ':'-separated ones. The count. */
struct field {
	const char *p;
	unsigned long n;
};
static int split(const char *l, unsigned long len, struct field *f, int nf)
{
	int k = 0;
	unsigned long a = 0;

	for (unsigned long i = 0; i <= len && k < nf; i++)
		if (i == len || l[i] == ':') {
			f[k].p = l + a;
			f[k++].n = i - a;
			a = i + 1;
			if (i == len)
				break;
		}
	return k;
}

static int feq(const struct field *f, const char *s)
{
	unsigned long n = slen(s);

	return f->n == n && (n == 0 || memcmp_(f->p, s, n) == 0);
}

/* The first line of db with at least nf fields whose field key is name (when name) or the
 * number num: its fields in f. 1 found, 0 not. Lines of 4096 bytes or more, and comments, are
 * skipped, as the full one does. */
static int db_find(const char *db, int nf, int key, const char *name, unsigned num, struct field *f)
{
	for (const char *l = db; l && *l;) {
		const char *e = l;
		unsigned v;

		while (*e && *e != '\n')
			e++;
		if ((unsigned long)(e - l) < 4096 && *l != '#' &&
		    split(l, (unsigned long)(e - l), f, nf) >= nf &&
		    (name ? feq(&f[key], name) : parse_id(f[key].p, f[key].n, &v) == 0 && v == num))
			return 1;
		l = *e ? e + 1 : 0;
	}
	return 0;
}

static int add_group(unsigned g)
{
	for (unsigned i = 0; i < who.ngroups; i++)
		if (who.groups[i] == g)
			return 0;
	if (who.ngroups == MAX_GROUPS)
		return -1;
	who.groups[who.ngroups++] = g;
	return 0;
}

/* Every group of /etc/group listing name as a member (below limit, when not 0). */
static void member_groups(const char *db, const char *name, unsigned long long limit)
{
	struct field f[4];

	for (const char *l = db; l && *l;) {
		const char *e = l;
		unsigned g;

		while (*e && *e != '\n')
			e++;
		if ((unsigned long)(e - l) < 4096 && split(l, (unsigned long)(e - l), f, 4) >= 4 &&
		    parse_id(f[2].p, f[2].n, &g) == 0 && (!limit || g < limit)) {
			/* the members, comma-separated; empty items are no one (strtok skips them) */
			const char *m = f[3].p, *end = f[3].p + f[3].n;

			while (m < end) {
				const char *c = m;

				while (c < end && *c != ',')
					c++;
				if (c > m) {
					struct field one = {m, (unsigned long)(c - m)};

					if (feq(&one, name)) {
						if (add_group(g) < 0)
							return;
						break;
					}
				}
				m = c + 1;
			}
		}
		l = *e ? e + 1 : 0;
	}
}

/* Resolve spec into who: 0, or -1 (the full one's to do). */
static int resolve_user(const char *spec)
{
	static char passwd[1 << 16], group[1 << 16], uname[256], gname[256];
	struct field f[7], g[4];
	const char *colon = spec;
	unsigned long ul;
	long lp, lg;
	unsigned uid = 0, gid = 0;
	int have_uid, have_gid = 0, have_pw;

	while (*colon && *colon != ':')
		colon++;
	ul = (unsigned long)(colon - spec);
	if (!ul || ul >= sizeof(uname) ||
	    (*colon && (!colon[1] || slen(colon + 1) >= sizeof(gname))))
		return -1;
	memcpy(uname, spec, ul);
	uname[ul] = '\0';
	gname[0] = '\0';
	if (*colon)
		cat(gname, sizeof(gname), colon + 1);
	lp = read_db("etc/passwd", passwd, sizeof(passwd));
	lg = read_db("etc/group", group, sizeof(group));
	if (lp == -2 || lg == -2)
		return -1;
	have_uid = parse_id(uname, ul, &uid) == 0;
	have_pw = lp >= 0 && db_find(passwd, 7, have_uid ? 2 : 0, have_uid ? 0 : uname, uid, f);
	if (!have_uid && !have_pw)
		return -1;
	if (have_pw) {
		if (parse_id(f[2].p, f[2].n, &uid) < 0 || f[0].n >= sizeof(uname) ||
		    f[5].n >= sizeof(who.home))
			return -1;
		have_gid = parse_id(f[3].p, f[3].n, &gid) == 0;
		if (f[5].n && f[5].p[0] == '/') {
			memcpy(who.home, f[5].p, f[5].n);
			who.home[f[5].n] = '\0';
		} else {
			who.home[0] = '/';
			who.home[1] = '\0';
		}
		memcpy(uname, f[0].p, f[0].n);
		uname[f[0].n] = '\0';
	} else {
		who.home[0] = '/';
		who.home[1] = '\0';
	}
	if (gname[0]) {
		if (parse_id(gname, slen(gname), &gid) < 0 &&
		    (lg < 0 || !db_find(group, 4, 0, gname, 0, g) ||
		     parse_id(g[2].p, g[2].n, &gid) < 0))
			return -1;
	} else if (!have_gid) {
		gid = 0; /* a uid with no passwd entry (or a bad gid there): group 0 */
	}
	if (st.userns && (uid >= st.id_count || gid >= st.id_count))
		return -1;
	who.uid = uid;
	who.gid = gid;
	who.ngroups = 0;
	add_group(gid);
	if (have_pw && lg >= 0)
		member_groups(group, uname, st.userns ? st.id_count : 0);
	who.on = 1;
	return 0;
}

/* ---- --timeout: the command in a cgroup of its own, killed whole at the deadline ----
 *
 * As the full one does it (exec.c: exec_cgroup_make, dsec_exec_kill, dsec_exec_release): a
 * cgroup exec-PID-1 below the sandbox's (v2), or below its freezer cgroup (v1; its pids
 * cgroup without a freezer); at the deadline every process in it is killed (cgroup.kill, or
 * frozen, killed and thawed until empty); at the end it is removed, what the command left
 * running moved up to the sandbox's cgroup first. */
static unsigned long long opt_timeout_us; /* 0: none */
static char exec_cg[4300];                /* "" while there is none */
static const char *exec_par;
static int exec_ctrl = -1; /* v1: the controller exec_cg belongs to */

static unsigned long long now_us(void)
{
	struct {
		long sec, nsec;
	} ts = {0, 0};

	S2(__NR_clock_gettime, CLOCK_MONOTONIC_, &ts);
	return (unsigned long long)ts.sec * 1000000ULL + (unsigned long long)ts.nsec / 1000;
}

static void sleep_us(long us)
{
	struct {
		long sec, nsec;
	} ts = {us / 1000000, (us % 1000000) * 1000};

	S2(__NR_nanosleep, &ts, 0);
}

/* "30s", "500ms", "2m", "1h", "1d", "100us" or seconds, in whole numbers: 0 with *us set; -1
 * for anything else (the full one parses it, or says why not) */
static int parse_duration(const char *s, unsigned long long *us)
{
	unsigned long long v = 0, mul;
	int digits = 0;

	for (; *s >= '0' && *s <= '9'; s++, digits++)
		if (digits > 12)
			return -1;
		else
			v = v * 10 + (unsigned long long)(*s - '0');
	if (!digits)
		return -1;
	if (!*s || seq(s, "s"))
		mul = 1000000ULL;
	else if (seq(s, "ms"))
		mul = 1000ULL;
	else if (seq(s, "us"))
		mul = 1ULL;
	else if (seq(s, "m"))
		mul = 60000000ULL;
	else if (seq(s, "h"))
		mul = 3600000000ULL;
	else if (seq(s, "d"))
		mul = 86400000000ULL;
	else
		return -1;
	*us = v * mul;
	return *us > 366ULL * 86400000000ULL ? -1 : 0;
}

static int cg_write(const char *dir, const char *file, const char *val)
{
	static char path[4400];
	int fd;
	long r;

	path[0] = '\0';
	if (cat(path, sizeof(path), dir) || cat(path, sizeof(path), file) ||
	    (fd = sys_open(path, O_WRONLY)) < 0)
		return -1;
	r = sys_write(fd, val, slen(val));
	sys_close(fd);
	return r < 0 ? -1 : 0;
}

/* The pids in exec_cg (at most n): their count, or -1. */
static int cg_pids(int *pids, int n)
{
	static char path[4400], buf[8192];
	long len;
	int k = 0;

	path[0] = '\0';
	if (cat(path, sizeof(path), exec_cg) || cat(path, sizeof(path), "/cgroup.procs") ||
	    (len = read_file(path, buf, sizeof(buf))) < 0)
		return -1;
	for (char *p = buf; *p && k < n;) {
		int v = 0;

		if (*p < '0' || *p > '9') {
			p++;
			continue;
		}
		while (*p >= '0' && *p <= '9')
			v = v * 10 + (*p++ - '0');
		if (v > 0)
			pids[k++] = v;
	}
	return k;
}

/* Kill every process in exec_cg and wait until it is empty. */
static void cg_kill(void)
{
	static char path[4400], state[16];
	int pids[1024], k, i, round;

	if (st.cgver == 2) {
		int have_kill = cg_write(exec_cg, "/cgroup.kill", "1") == 0;

		for (i = 0; i < 2000 && (k = cg_pids(pids, 1024)) > 0; i++) {
			while (!have_kill && k-- > 0)
				S2(__NR_kill, pids[k], SIGKILL_);
			sleep_us(i < 20 ? 100 : 1000);
		}
		return;
	}
	for (round = 0; round < 200; round++) {
		int freezer = exec_ctrl == 4;

		if (freezer)
			cg_write(exec_cg, "/freezer.state", "FROZEN");
		for (i = 0; freezer && i < 100; i++) {
			path[0] = '\0';
			if (cat(path, sizeof(path), exec_cg) ||
			    cat(path, sizeof(path), "/freezer.state") ||
			    read_file(path, state, sizeof(state)) < 0 || starts(state, "FROZEN"))
				break;
			sleep_us(200);
		}
		k = cg_pids(pids, 1024);
		for (i = 0; i < k; i++)
			S2(__NR_kill, pids[i], SIGKILL_);
		if (freezer)
			cg_write(exec_cg, "/freezer.state", "THAWED");
		if (k <= 0)
			return;
		sleep_us(round < 10 ? 200 : 5000);
	}
}

/* Remove exec_cg; what the command left running there moves up to the sandbox's cgroup (unless
 * killed: then it is only waited for). */
static void cg_release(int killed)
{
	int pids[1024], k, i, tries;
	char num_[24];

	if (!exec_cg[0])
		return;
	for (tries = 0;
	     S3(__NR_unlinkat, AT_FDCWD_, exec_cg, 0x200 /* AT_REMOVEDIR */) == -EBUSY_ &&
	     tries < 100;
	     tries++) {
		k = killed ? 0 : cg_pids(pids, 1024);
		for (i = 0; i < k; i++) {
			utoa((unsigned long long)pids[i], num_);
			cg_write(exec_par, "/cgroup.procs", num_);
		}
		if (tries > 2)
			sleep_us(1000);
	}
	exec_cg[0] = '\0';
}

/* full(), with the exec cgroup made so far removed first */
__attribute__((noreturn)) static void full_clean(void)
{
	cg_release(0);
	full();
}

extern const struct sock_filter dsec_seccomp_builtin[];
extern const unsigned dsec_seccomp_builtin_len;

/* caps.c: dsec_caps_apply, the default set. 0 or -1. */
static int caps_apply(void)
{
	struct __user_cap_header_struct ch = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct cd[2];
	uint64_t keep = DSEC_CAPS_DEFAULT_MASK;

	for (long c = 0; c < 64; c++) {
		if (keep & (1ULL << c))
			continue;
		if (S5(__NR_prctl, PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
			long e = S5(__NR_prctl, PR_CAPBSET_READ, c, 0, 0, 0);

			if (e < 0) /* EINVAL: beyond this kernel's capabilities */
				break;
			if (e != 0)
				return -1;
		}
	}
	if (S5(__NR_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -1;
	cd[0].effective = cd[0].permitted = (uint32_t)keep;
	cd[1].effective = cd[1].permitted = (uint32_t)(keep >> 32);
	cd[0].inheritable = cd[1].inheritable = 0;
	return S2(__NR_capset, &ch, cd) < 0 ? -1 : 0;
}

/* The namespaces the command's process is born in (exec.c: birth_enter); it joins the others. */
#define BIRTH_NS (CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET)

/* v1: the tasks files of the sandbox's cgroups (the command's own for exec_ctrl), opened on
 * the host before the clone; -1 none */
static int v1_tasks[NCG] = {-1, -1, -1, -1, -1, -1};

/* Our own mount and network namespaces, root and cwd, saved by birth_enter */
static int home_mnt = -1, home_net = -1, home_root = -1, home_cwd = -1;

/* Join the sandbox's pid, mount and network namespaces (as it has them) for the clone, so that
 * the command's process is born in them: in ours, until it joined them, a process of the
 * sandbox could open its /proc/PID/mountinfo and /proc/PID/net and read the host's (exec.c:
 * birth_enter). Whatever the child needs by a host path is opened first. */
static int birth_enter(int pidfd, int nsflags)
{
	static char path[4200];

	for (int c = 0; st.cgver == 1 && c < NCG; c++) {
		if (!st.v1[c])
			continue;
		path[0] = '\0';
		if (cat(path, sizeof(path), c == exec_ctrl ? exec_cg : st.v1[c]) ||
		    cat(path, sizeof(path), "/tasks") ||
		    (v1_tasks[c] = sys_open(path, O_WRONLY)) < 0)
			return -1;
	}
	if ((nsflags & CLONE_NEWNS) && ((home_mnt = sys_open("/proc/self/ns/mnt", O_RDONLY)) < 0 ||
					(home_root = sys_open("/", O_PATH | O_DIRECTORY)) < 0 ||
					(home_cwd = sys_open(".", O_PATH | O_DIRECTORY)) < 0))
		return -1;
	if ((nsflags & CLONE_NEWNET) && (home_net = sys_open("/proc/self/ns/net", O_RDONLY)) < 0)
		return -1;
	return S2(__NR_setns, pidfd, nsflags & BIRTH_NS) < 0 ? -1 : 0;
}

/* Back to our own mount and network namespaces, root and cwd (the pid namespace of our
 * children stays the sandbox's: we clone no other); 0, or -1 when that failed, and then we
 * may run nothing and open nothing: paths would be the sandbox's. */
static int birth_leave(void)
{
	for (int c = 0; c < NCG; c++)
		if (v1_tasks[c] >= 0) {
			sys_close(v1_tasks[c]);
			v1_tasks[c] = -1;
		}
	if (home_mnt >= 0 &&
	    (S2(__NR_setns, home_mnt, CLONE_NEWNS) < 0 || S1(__NR_fchdir, home_root) < 0 ||
	     S1(__NR_chroot, ".") < 0 || S1(__NR_fchdir, home_cwd) < 0))
		return -1;
	if (home_net >= 0 && S2(__NR_setns, home_net, CLONE_NEWNET) < 0)
		return -1;
	if (home_mnt >= 0) {
		sys_close(home_mnt);
		sys_close(home_root);
		sys_close(home_cwd);
	}
	if (home_net >= 0)
		sys_close(home_net);
	home_mnt = home_net = home_root = home_cwd = -1;
	return 0;
}

/* The command's process, right after the clone: in the sandbox's pid, mount and network
 * namespaces (and cgroup on v2). Any failure: a byte on errfd, exit; the parent hands over to
 * the full one. */
__attribute__((noreturn)) static void child(int pidfd, int nsflags, int errfd, char *const *argv)
{
	struct sock_fprog prog = {(unsigned short)dsec_seccomp_builtin_len,
				  (struct sock_filter *)dsec_seccomp_builtin};
	unsigned long long none = 0;
	unsigned long long nofile[2] = {DSEC_NOFILE_OF(st.nofile), DSEC_NOFILE_OF(st.nofile)};

	S5(__NR_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* a session of its own (exec.c: child_enter): kill(0) inside reaches no other command */
	if (S1(__NR_setsid, 0) < 0)
		goto fail;
	if (st.cls && seq(st.cls, "be")) { /* resource.c: dsec_res_exec_child */
		int p[1] = {0}, fd;

		S3(__NR_sched_setscheduler, 0, SCHED_IDLE_, p);
		if ((fd = sys_open("/proc/self/oom_score_adj", O_WRONLY)) >= 0) {
			sys_write(fd, "500", 3);
			sys_close(fd);
		}
	}
	/* the sandbox's descriptor limit (nofile.h; exec.c: child_enter) */
	S4(__NR_prlimit64, 0, RLIMIT_NOFILE_, nofile, 0);
	for (int c = 0; c < NCG; c++)
		if (v1_tasks[c] >= 0 && sys_write(v1_tasks[c], "0", 1) != 1)
			goto fail;
	if (S2(__NR_setns, pidfd, nsflags & ~BIRTH_NS) < 0)
		goto fail;
	if (st.userns) {
		S2(__NR_setgroups, 0, 0);
		if (S3(__NR_setresgid, 0, 0, 0) < 0 || S3(__NR_setresuid, 0, 0, 0) < 0)
			goto fail;
	}
	/* host descriptors: 0-2 stay (kept open across exec), or become the relays' pipes;
	 * everything else goes now */
	for (int fd = 0; fd < 3; fd++)
		if (relays[fd].cmd >= 0 ? S3(__NR_dup3, relays[fd].cmd, fd, 0) < 0
					: S3(__NR_fcntl, fd, F_SETFD, 0) < 0)
			goto fail;
	if ((errfd > 3 && S3(__NR_close_range, 3, errfd - 1, 0) < 0) ||
	    S3(__NR_close_range, errfd + 1, ~0U, 0) < 0)
		goto fail;
	/* another user: the default capabilities first (setuid needs two of them), then the ids,
	 * which clear what was left of them unless the user is root; the cwd is then looked up
	 * as that user (exec.c: child_command) */
	if (who.on && (caps_apply() < 0 || S2(__NR_setgroups, who.ngroups, who.groups) < 0 ||
		       S3(__NR_setresgid, who.gid, who.gid, who.gid) < 0 ||
		       S3(__NR_setresuid, who.uid, who.uid, who.uid) < 0))
		goto fail;
	if (S1(__NR_chdir, "/") < 0)
		goto fail;
	/* the working dir asked for, else the sandbox's, resolved inside its root as the full one
	 * does (exec.c: enter_cwd); the sandbox's is "/" while it is missing, one asked for must
	 * be there (else the full one says why not) */
	if (opt_cwd || st.workdir) {
		struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
		long wfd =
		    S4(__NR_openat2, AT_FDCWD_, opt_cwd ? opt_cwd : st.workdir, &how, sizeof(how));

		if (wfd < 0 && (opt_cwd || wfd != -ENOENT_))
			goto fail;
		if (wfd >= 0) {
			long r = S1(__NR_fchdir, wfd);

			sys_close((int)wfd);
			if (r < 0)
				goto fail;
		}
	}
	for (long sig = 1; sig <= 64; sig++) {
		struct {
			void *handler;
			unsigned long flags;
			void *restorer;
			unsigned long long mask;
		} dfl = {0, 0, 0, 0};

		if (sig != SIGKILL_ && sig != SIGSTOP_)
			S4(__NR_rt_sigaction, sig, &dfl, 0, 8);
	}
	S4(__NR_rt_sigprocmask, SIG_SETMASK_, &none, 0, 8);
	if (S5(__NR_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		goto fail;
	/* a Landlock domain of its own, as the full one gives (exec.c: own_domain) */
	{
		struct dsec_ll_ruleset_attr ra = {DSEC_LL_HANDLED};
		struct dsec_ll_path_beneath pb = {DSEC_LL_HANDLED, -1};
		long rs = S3(DSEC_NR_landlock_create_ruleset, &ra, sizeof(ra), 0);

		if (rs >= 0) {
			long r = pb.parent_fd = sys_open("/", O_PATH | O_DIRECTORY);

			if (r >= 0)
				r = S4(DSEC_NR_landlock_add_rule, rs, DSEC_LL_RULE_PATH_BENEATH,
				       &pb, 0);
			if (r >= 0)
				r = S2(DSEC_NR_landlock_restrict_self, rs, 0);
			if (pb.parent_fd >= 0)
				sys_close(pb.parent_fd);
			sys_close((int)rs);
			if (r < 0)
				goto fail;
		} else if (rs != -ENOSYS_ && rs != -EOPNOTSUPP_ && rs != -EINVAL_)
			goto fail;
	}
	/* dies with us (exec.c: child_command), once the ids are set (that clears it); a pipe
	 * whose reader is gone reports an error: we died before */
	{
		struct {
			int fd;
			short events, revents;
		} pf = {errfd, 0, 0};

		if (S5(__NR_prctl, PR_SET_PDEATHSIG, SIGKILL_, 0, 0, 0) < 0 ||
		    (S3(__NR_poll, &pf, 1, 0) > 0 && (pf.revents & 8 /* POLLERR */)))
			sys_exit(125);
	}
	if (!who.on && caps_apply() < 0)
		goto fail;
	if (!dsec_seccomp_builtin_len || S3(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		goto fail;
	exec_search(argv);
fail:
	sys_write(errfd, "x", 1);
	sys_exit(125);
}

struct clone_args_ {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
	    set_tid_size, cgroup;
};

void front_main(long *sp) __attribute__((noreturn, used));
void front_main(long *sp)
{
	static char run_buf[4096], path[4400], sdir[4400], state[1 << 16], claim[1 << 14];
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	const char *run = 0, *id, *fast = 0;
	int i = 1, pidfd, nsflags, cpidfd = -1, cgfd = -1, ep[2], sfd;
	unsigned long long mask, blocked, t0, deadline;
	long claim_len;
	int timed_out = 0;
	struct parser ps;
	struct clone_args_ ca;
	long pid;

	orig_argv = argv;
	orig_envp = argv + argc + 1;
	fast = getenv_("DSEC_EXEC_FAST");
	if (fast && seq(fast, "0"))
		full();
	/* [--run DIR | --root DIR | -q | -w DIR | -e K=V (and their --long[=] forms)]... ID [--]
	 * CMD... */
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (seq(argv[i], "--run") && i + 1 < argc)
			run = argv[++i];
		else if (starts(argv[i], "--run="))
			run = argv[i] + 6;
		else if ((seq(argv[i], "-w") || seq(argv[i], "--workdir")) && i + 1 < argc &&
			 argv[i + 1][0])
			opt_cwd = argv[++i];
		else if (starts(argv[i], "--workdir=") && argv[i][10])
			opt_cwd = argv[i] + 10;
		else if ((seq(argv[i], "-e") || seq(argv[i], "--env")) && i + 1 < argc &&
			 n_opt_env < MAX_OPT_ENV)
			opt_env[n_opt_env++] = argv[++i];
		else if (starts(argv[i], "--env=") && n_opt_env < MAX_OPT_ENV)
			opt_env[n_opt_env++] = argv[i] + 6;
		else if ((seq(argv[i], "-u") || seq(argv[i], "--user")) && i + 1 < argc)
			opt_user = argv[++i];
		else if (starts(argv[i], "--user="))
			opt_user = argv[i] + 7;
		else if (seq(argv[i], "--timeout") && i + 1 < argc &&
			 parse_duration(argv[i + 1], &opt_timeout_us) == 0)
			i++;
		else if (starts(argv[i], "--timeout=") &&
			 parse_duration(argv[i] + 10, &opt_timeout_us) == 0)
			;
		else if (seq(argv[i], "--root") && i + 1 < argc)
			i++;
		else if (starts(argv[i], "--root=") || seq(argv[i], "-q") ||
			 seq(argv[i], "--quiet"))
			;
		else
			full();
	}
	if (i >= argc || seq(argv[i], "cp") || !starts(argv[i], "sb-"))
		full();
	id = argv[i++];
	for (const char *c = id + 3; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			full();
	if (i < argc && seq(argv[i], "--"))
		i++;
	if (i >= argc || !plain_stdio())
		full();
	if (!run)
		run = getenv_("DSEC_RUN");
	if (!run || !run[0])
		run = "/run/dsec";
	run_buf[0] = path[0] = '\0';
	if (cat(run_buf, sizeof(run_buf), run) || cat(path, sizeof(path), run_buf) ||
	    cat(path, sizeof(path), "/sandboxes/") || cat(path, sizeof(path), id) ||
	    cat(path, sizeof(path), "/claim.json"))
		full();
	/* a sandbox claimed from a warm pool: what the claim changed (its env, class, working
	 * dir, user) replaces what the state says, member by member, as the full one merges it */
	claim_len = read_file(path, claim, sizeof(claim));
	if (claim_len < 0 && claim_len != -ENOENT_)
		full();
	path[slen(path) - slen("claim.json")] = '\0';
	sdir[0] = '\0';
	cat(sdir, sizeof(sdir), path); /* fits: path is as long */
	if (cat(path, sizeof(path), "sandbox.json") || read_file(path, state, sizeof(state)) < 0)
		full();
	ps.p = state;
	ps.bad = 0;
	object(&ps, top_member, 0);
	if (claim_len >= 0 && !ps.bad) {
		ps.p = claim;
		object(&ps, top_member, 0);
	}
	if (ps.bad || !st.id || !seq(st.id, id) || !st.pid || !st.start ||
	    (st.cgver != 1 && st.cgver != 2) || (st.cgver == 2 && !st.v2) ||
	    (st.cgver == 1 && (!st.v1[0] || !st.v1[3])) || !st.net || build_env() < 0)
		full();
	if (frozen() != 0) /* a paused sandbox: the full one resumes it first */
		full();
	/* the sandbox's last activity, at the start and at the end of a command (sandbox.h:
	 * dsec_sandbox_touch) */
	S4(__NR_utimensat, AT_FDCWD_, sdir, 0, 0);
	pidfd = (int)S2(__NR_pidfd_open, st.pid, 0);
	if (pidfd < 0 || !holder_ok(pidfd))
		full();
	/* another user: -u, else the sandbox's default ("" is root) */
	if (opt_user || (st.user && st.user[0])) {
		if (resolve_user(opt_user ? opt_user : st.user) < 0)
			full();
		env_home_user[0] = '\0';
		if (cat(env_home_user, sizeof(env_home_user), "HOME=") ||
		    cat(env_home_user, sizeof(env_home_user), who.home) || build_env() < 0)
			full();
	}
	nsflags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP;
	if (!seq(st.net, "host"))
		nsflags |= CLONE_NEWNET;
	if (st.userns)
		nsflags |= CLONE_NEWUSER;
	if (opt_timeout_us) {
		char num_[24];

		/* the full one's name for it (exec.c: exec_cgroup_make), seq 1 */
		exec_par = st.cgver == 2 ? st.v2 : st.v1[4] ? st.v1[4] : st.v1[3];
		exec_ctrl = st.cgver == 2 ? -1 : st.v1[4] ? 4 : 3;
		utoa((unsigned long long)S1(__NR_getpid, 0), num_);
		if (cat(exec_cg, sizeof(exec_cg), exec_par) ||
		    cat(exec_cg, sizeof(exec_cg), "/exec-") ||
		    cat(exec_cg, sizeof(exec_cg), num_) || cat(exec_cg, sizeof(exec_cg), "-1") ||
		    S3(__NR_mkdirat, AT_FDCWD_, exec_cg, 0755) < 0) {
			exec_cg[0] = '\0';
			full();
		}
	}
	if (st.cgver == 2 &&
	    (cgfd = sys_open(exec_cg[0] ? exec_cg : st.v2, O_RDONLY | O_DIRECTORY)) < 0)
		full_clean();
	/* signals for the command, blocked from now and read from a signalfd */
	mask = (1ULL << (1 - 1)) | (1ULL << (2 - 1)) | (1ULL << (3 - 1)) | (1ULL << (10 - 1)) |
	       (1ULL << (12 - 1)) | (1ULL << (15 - 1)) | (1ULL << (18 - 1));
	/* and SIGPIPE: a command that closed its input makes a relay's write fail, not us die */
	blocked = mask | (1ULL << (13 - 1));
	S4(__NR_rt_sigprocmask, SIG_BLOCK_, &blocked, 0, 8);
	if (S2(__NR_pipe2, ep, O_CLOEXEC) < 0 || birth_enter(pidfd, nsflags) < 0)
		full_clean();
	memset(&ca, 0, sizeof(ca));
	t0 = now_us();
	ca.flags = CLONE_PIDFD | (cgfd >= 0 ? CLONE_INTO_CGROUP : 0);
	ca.pidfd = (uint64_t)(unsigned long)&cpidfd;
	ca.exit_signal = SIGCHLD_;
	ca.cgroup = (uint64_t)(cgfd >= 0 ? cgfd : 0);
	pid = S2(__NR_clone3, &ca, sizeof(ca));
	if (pid == 0)
		child(pidfd, nsflags, ep[1], argv + i);
	if (birth_leave() < 0) { /* nothing by path from here: no full one, no cleanup */
		if (pid > 0)
			S4(__NR_pidfd_send_signal, cpidfd, SIGKILL_, 0, 0);
		fail_exit(id, "cannot return to dsec-exec's own namespaces", 125);
	}
	if (pid < 0)
		full_clean();
	sys_close(ep[1]);
	{
		/* the pipe closes at the command's execve, or says why setup failed; a child that a
		 * process of the sandbox keeps stopped before its execve (it is visible there from
		 * its birth) is killed after DSEC_EXEC_SETUP_MAX_S, and the full one says so */
		struct {
			int fd;
			short events, revents;
		} pe = {ep[0], POLLIN_, 0};
		struct {
			long sec, nsec;
		} wait = {DSEC_EXEC_SETUP_MAX_S, 0};
		char c;
		long r;

		while ((r = S5(__NR_ppoll, &pe, 1, &wait, 0, 8)) == -EINTR_)
			;
		int stalled = r == 0; /* the full one would be too (exec.c: guard_arm) */

		r = r > 0 ? sys_read(ep[0], &c, 1) : -1;
		if (r != 0) { /* setup failed before the command ran: the full one, from scratch */
			struct {
				long pad[16];
			} info;

			S4(__NR_pidfd_send_signal, cpidfd, SIGKILL_, 0, 0);
			S5(__NR_waitid, P_PIDFD, cpidfd, &info, WEXITED, 0);
			if (stalled) {
				cg_release(1);
				fail_exit(id, DSEC_EXEC_STALLED, 125);
			}
			full_clean();
		}
	}
	sys_close(ep[0]);
	for (int fd = 0; fd < 3; fd++) {
		int shared = fd == 2 && relays[2].cmd == relays[1].cmd; /* closed as stdout's */
		int kept = fd == 0 && relays[0].in && !relays[0].wait;  /* for relay_drain */

		if (relays[fd].cmd >= 0 && !shared && !kept)
			sys_close(relays[fd].cmd);
	}
	sfd = (int)S4(__NR_signalfd4, -1, &mask, 8, O_CLOEXEC);
	deadline = opt_timeout_us ? t0 + opt_timeout_us : 0;
	for (int exited = 0;;) {
		struct {
			int fd;
			short events, revents;
		} pf[5] = {{cpidfd, POLLIN_, 0}, {sfd, POLLIN_, 0}};
		struct signalfd_siginfo si;
		int n = 2, at[3], ready = 0;
		struct {
			long sec, nsec;
		} left = {0, 0}, zero = {0, 0};

		for (int fd = 0; fd < 3; fd++) {
			at[fd] = -1;
			if (relays[fd].pipe < 0)
				continue;
			ready |= relay_want(&relays[fd], &pf[n].fd, &pf[n].events);
			if (pf[n].fd >= 0)
				at[fd] = n++;
		}
		if (deadline && !timed_out) {
			unsigned long long now = now_us();

			if (now >= deadline) {
				/* the whole tree, then the command itself; its exit ends the loop */
				cg_kill();
				S4(__NR_pidfd_send_signal, cpidfd, SIGKILL_, 0, 0);
				timed_out = 1;
				continue;
			}
			left.sec = (long)((deadline - now) / 1000000);
			left.nsec = (long)((deadline - now) % 1000000) * 1000;
		}
		if (S5(__NR_ppoll, pf, n,
		       ready                    ? &zero
		       : deadline && !timed_out ? &left
						: 0,
		       0, 8) < 0)
			continue;
		for (int fd = 0; fd < 3; fd++)
			relay_step(&relays[fd], at[fd] >= 0 ? pf[at[fd]].revents : 0);
		if (sfd >= 0 && (pf[1].revents & POLLIN_) &&
		    sys_read(sfd, &si, sizeof(si)) == (long)sizeof(si))
			/* to the command's process group: it leads a session of its own, out of
			 * reach of our terminal; not yet waited for, so the pid is still its */
			S2(__NR_kill, -pid, si.ssi_signo);
		if (pf[0].revents & POLLIN_) {
			struct {
				int signo, errno_, code, pad;
				int pid, uid, status;
				int more[25];
			} info;

			memset(&info, 0, sizeof(info));
			if (S5(__NR_waitid, P_PIDFD, cpidfd, &info, WEXITED, 0) < 0)
				sys_exit(125);
			/* CLD_EXITED 1; CLD_KILLED 2, CLD_DUMPED 3 */
			exited = 1 + (info.code == 1 ? (info.status & 0xff)
						     : 128 + (info.status & 0x7f));
			/* what it wrote before it exited is in the pipes, and goes out; what the
			 * processes it left behind write later does not, nor do they hold us */
			for (int fd = 0; fd < 3; fd++)
				relay_drain(&relays[fd]);
			cg_release(timed_out);
			S4(__NR_utimensat, AT_FDCWD_, sdir, 0, 0);
			if (timed_out)
				fail_exit(id, "timed out", 124);
			sys_exit(exited - 1);
		}
	}
}
