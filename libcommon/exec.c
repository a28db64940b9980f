#include "exec.h"
#include "nofile.h"
#include "resource.h"
#include "caps.h"
#include "cgroup.h"
#include "exec-domain.h"
#include "seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <grp.h>
#include <linux/close_range.h>
#include <linux/openat2.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif
#define EXEC_CLONE_INTO_CGROUP 0x200000000ULL
#define DEVPTS_MAGIC 0x1cd1

/* struct clone_args of linux/sched.h, spelled out: glibc's headers clash with the kernel's. */
struct exec_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
	    set_tid_size, cgroup;
};

/* What the children tell the caller over the sync socket; sent whole. */
enum { MSG_PTY = 1, MSG_ERR };
struct exec_msg {
	int kind;
	int stage; /* MSG_ERR: DSEC_EXEC_FAILED, _CANNOT_RUN or _NOT_FOUND */
	pid_t pid;
	struct dsec_err err;
};

/* Everything the children need, prepared before the fork so they allocate nothing. */
struct exec_ctx {
	const struct dsec_exec_target *t;
	const struct dsec_exec_spec *s;
	int sock, peer;               /* the child's end of the sync socket, and the caller's */
	int procs[DSEC_CG_NCTRL + 1]; /* v1: tasks fds to write "0" into, -1 ends */
	sigset_t ignored;             /* signals not at SIG_DFL in the caller: reset in the child */
	sigset_t mask;                /* the caller's signal mask, restored after the clone */
	int devnull;                  /* the host's /dev/null, for fds the spec leaves at -1 */
	int fd[3];                    /* the spec's fds, as numbered in the child */
	int pidfd;                    /* the holder's pidfd, as numbered in the child */
	int low;                      /* > 0: the child shares our fd table and first unshares
				       * only the fds below low (see slots_place) */
	int guard;                    /* the child's setup timer (guard_arm), -1 none */
	int pts;                      /* tty: the pty's peer (open_tty) */
	int vm;                       /* the child shares our memory, and we wait for its exec */
	volatile int reached;         /* set by such a child at its execve */
};

/* The namespaces the command's process is born in (birth_enter); it joins the others itself. */
#define EXEC_BIRTH_NS (CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET)

/* A child sharing our memory holds us in clone3 (CLONE_VFORK) until its execve, and from its
 * setns into the sandbox's user namespace a process there may signal it: SIGSTOP, sent in a
 * loop, would keep it, and us, there for good. A timer of its own kills it at the deadline:
 * DSEC_EXEC_SETUP_MAX_S for the setup, DSEC_EXEC_LOAD_MAX_S from its execve (a binary that an
 * on-demand layer must fetch first); execve deletes it. Raw system calls: no libc state. */
static void guard_arm(struct exec_ctx *c, long secs)
{
	struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGKILL};
	struct itimerspec its = {.it_value = {.tv_sec = secs}};
	int id;

	if (c->guard < 0) {
		if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &id) < 0)
			return; /* best-effort: the setup then has no deadline, as before */
		c->guard = id;
	}
	syscall(SYS_timer_settime, c->guard, 0, &its, NULL);
}

int dsec_exec_target_open(const struct dsec_paths *p, const char *id, struct dsec_exec_target *t,
			  struct dsec_err *err)
{
	char path[DSEC_CG_PATH_MAX + 16], file[PATH_MAX + 64];
	int i;

	memset(t, 0, sizeof(*t));
	t->pidfd = t->cgdir = -1;
	for (i = 0; i < DSEC_CG_NCTRL; i++)
		t->cgprocs[i] = -1;
	if (!dsec_sandbox_id_ok(id))
		return dsec_err_set(err, EINVAL, "'%.64s': not a sandbox id", id);
	/* before the load: a state replaced after it shows in dsec_exec_target_fresh */
	snprintf(file, sizeof(file), "%s/sandboxes/%s/sandbox.json", p->run, id);
	if (stat(file, &t->state) < 0)
		memset(&t->state, 0, sizeof(t->state));
	if (dsec_sandbox_load(p, id, &t->sb, err) < 0) {
		if (err->errnum == ENOENT)
			return dsec_err_set(err, ENOENT, "%s: no such sandbox", id);
		return -1;
	}
	t->pidfd = dsec_sandbox_pidfd(&t->sb, err);
	if (t->pidfd < 0) {
		if (err->errnum == ESRCH)
			dsec_err_set(err, ESRCH, "%s: sandbox is not running (holder gone)", id);
		goto fail;
	}
	t->nsflags = dsec_sandbox_nsflags(&t->sb);
	/* a paused sandbox (dsec-reap --pause) resumes first: the command would freeze in it */
	if (dsec_cgroup_frozen(&t->sb) == 1 && dsec_cgroup_freeze(&t->sb, 0, err) < 0)
		goto fail;
	if (t->sb.cg.version == 2) {
		t->cgdir = open(t->sb.cg.v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (t->cgdir < 0) {
			dsec_err_sys(err, "%s: open cgroup '%s'", id, t->sb.cg.v2);
			goto fail;
		}
	} else if (t->sb.cg.version == 1) {
		for (i = 0; i < DSEC_CG_NCTRL; i++) {
			if (!t->sb.cg.v1[i][0])
				continue;
			/* tasks, not cgroup.procs: moving the calling thread alone (the child is
			 * single-threaded) skips the write lock on cgroup_threadgroup_rwsem, which
			 * waits for an RCU grace period, milliseconds, at every exec */
			snprintf(path, sizeof(path), "%s/tasks", t->sb.cg.v1[i]);
			t->cgprocs[i] = open(path, O_WRONLY | O_CLOEXEC);
			if (t->cgprocs[i] < 0) {
				dsec_err_sys(err, "%s: open '%s'", id, path);
				goto fail;
			}
		}
	}
	return 0;
fail:
	dsec_exec_target_close(t);
	return -1;
}

int dsec_exec_target_fresh(struct dsec_exec_target *t)
{
	struct pollfd pfd = {.fd = t->pidfd, .events = POLLIN};
	char path[PATH_MAX + 16];
	struct stat st;

	if (t->pidfd < 0 || poll(&pfd, 1, 0) != 0) /* readable: the holder has exited */
		return 0;
	snprintf(path, sizeof(path), "%s/sandbox.json", t->sb.dir);
	if (stat(path, &st) < 0 || st.st_ino != t->state.st_ino || st.st_dev != t->state.st_dev ||
	    st.st_mtim.tv_sec != t->state.st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != t->state.st_mtim.tv_nsec)
		return 0;
	if (dsec_cgroup_frozen(&t->sb) == 1 && dsec_cgroup_freeze(&t->sb, 0, NULL) < 0)
		return 0;
	return 1;
}

void dsec_exec_target_close(struct dsec_exec_target *t)
{
	int i;

	if (t->pidfd >= 0)
		close(t->pidfd);
	if (t->cgdir >= 0)
		close(t->cgdir);
	for (i = 0; i < DSEC_CG_NCTRL; i++)
		if (t->cgprocs[i] >= 0)
			close(t->cgprocs[i]);
	t->pidfd = t->cgdir = -1;
	for (i = 0; i < DSEC_CG_NCTRL; i++)
		t->cgprocs[i] = -1;
	dsec_sandbox_free(&t->sb);
}

/* ---- in the children: async-signal-safe code only from here to start() ---- */

static int send_msg(int sock, int kind, int stage, pid_t pid, const struct dsec_err *err, int fd)
{
	ssize_t r;
	struct exec_msg m;
	struct iovec iov = {&m, sizeof(m)};
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	memset(&m, 0, sizeof(m));
	m.kind = kind;
	m.stage = stage;
	m.pid = pid;
	if (err)
		m.err = *err;
	if (fd >= 0) {
		struct cmsghdr *c;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	do
		r = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -1 : 0;
}

__attribute__((noreturn)) static void child_fail(struct exec_ctx *c, int stage,
						 struct dsec_err *err)
{
	send_msg(c->sock, MSG_ERR, stage, 0, err, -1);
	_exit(stage == DSEC_EXEC_NOT_FOUND ? 127 : stage == DSEC_EXEC_CANNOT_RUN ? 126 : 125);
}

static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/* execve argv[0], searched in envp's PATH (in the sandbox) when it has no '/'. Returns the
 * errno that counts: ENOENT when found nowhere, EACCES when something found was not runnable. */
static int exec_search(char *const *argv, char *const *envp)
{
	const char *file = argv[0], *path = env_get(envp, "PATH"), *p, *end;
	char buf[PATH_MAX];
	int seen_eacces = 0;

	if (!file || !*file)
		return ENOENT;
	if (strchr(file, '/')) {
		execve(file, argv, envp);
		return errno;
	}
	if (!path)
		path = DSEC_EXEC_PATH;
	for (p = path;; p = end + 1) {
		size_t dl;

		end = strchrnul(p, ':');
		dl = (size_t)(end - p);
		if (dl + 1 + strlen(file) + 1 <= sizeof(buf)) {
			memcpy(buf, p, dl);
			if (!dl)
				buf[dl++] = '.';
			buf[dl] = '/';
			strcpy(buf + dl + 1, file);
			execve(buf, argv, envp);
			if (errno == EACCES)
				seen_eacces = 1;
			else if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG)
				return errno;
		}
		if (!*end)
			break;
	}
	return seen_eacces ? EACCES : ENOENT;
}

/* The sandbox's /dev/pts/ptmx (or /dev/ptmx), opened inside its mount namespace and checked to
 * be a real devpts multiplexer: the sandbox may have replaced the path with anything. */
static int open_ptmx(void)
{
	static const char *paths[] = {"/dev/pts/ptmx", "/dev/ptmx"};
	unsigned i;

	for (i = 0; i < 2; i++) {
		struct stat st;
		struct statfs sf;
		int fd = open(paths[i], O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);

		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && fstatfs(fd, &sf) == 0 &&
		    (sf.f_type == DEVPTS_MAGIC ||
		     (major(st.st_rdev) == 5 && minor(st.st_rdev) == 2))) {
			int fl = fcntl(fd, F_GETFL);

			if (fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 &&
			    unlockpt(fd) == 0)
				return fd;
		}
		close(fd);
	}
	errno = ENXIO;
	return -1;
}

/* The pty, made in the sandbox's mount namespace while we are still the host's root: its master
 * goes to the caller from here, not from inside the user namespace, where the kernel would
 * count the descriptor in flight against the host uid every sandbox's root shares (any one of
 * them holding its limit's worth in flight would refuse ours with ETOOMANYREFS). Sets c->pts. */
static int open_tty(struct exec_ctx *c, struct dsec_err *err)
{
	int ptm, pts;

	ptm = open_ptmx();
	if (ptm < 0)
		return dsec_err_sys(err, "open the sandbox's /dev/pts/ptmx");
	pts = ioctl(ptm, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (pts < 0)
		return dsec_err_sys(err, "open the pty peer");
	/* The peer stays the host root's, unmapped in the sandbox, and only its owner's: no
	 * process of the sandbox can open it by its name (capabilities in a user namespace do
	 * not reach an inode of an unmapped owner), so none that another command left running
	 * reads this one's keystrokes or writes to its screen. The command has it open. */
	if (c->t->sb.userns && fchmod(pts, 0600) < 0)
		return dsec_err_sys(err, "keep the pty to the command");
	if (c->s->ws.ws_row && ioctl(pts, TIOCSWINSZ, &c->s->ws) < 0)
		return dsec_err_sys(err, "set the window size");
	if (send_msg(c->sock, MSG_PTY, 0, 0, NULL, ptm) < 0)
		return dsec_err_sys(err, "pass the pty to dsec-exec");
	close(ptm);
	c->pts = pts;
	return 0;
}

static int setup_tty(struct exec_ctx *c, struct dsec_err *err)
{
	int i;

	if (ioctl(c->pts, TIOCSCTTY, 0) < 0) /* a session leader already (child_enter) */
		return dsec_err_sys(err, "make the pty the controlling terminal");
	for (i = 0; i < 3; i++)
		if (dup2(c->pts, i) < 0)
			return dsec_err_sys(err, "dup2 pty");
	if (c->pts > 2)
		close(c->pts);
	return 0;
}

/* Make the spec's fds the command's 0, 1, 2, whatever numbers they have now. */
static int setup_fds(struct exec_ctx *c, struct dsec_err *err)
{
	int fd[3], i;

	for (i = 0; i < 3; i++) {
		struct stat st;
		int fl;

		fd[i] = c->fd[i] < 0 ? c->devnull : c->fd[i];
		/* A directory (or an O_PATH descriptor) of the host is a way out: openat(fd, "..")
		 * or /proc/self/fd/N walks the host's tree from there. */
		if (fd[i] >= 0) {
			if ((fl = fcntl(fd[i], F_GETFL)) < 0 || fstat(fd[i], &st) < 0)
				return dsec_err_sys(err, "fd %d", i);
			if ((fl & O_PATH) || S_ISDIR(st.st_mode))
				return dsec_err_set(err, EISDIR,
						    "fd %d is a directory or a path of the host: "
						    "refused",
						    i);
		}
		if (fd[i] >= 0 && fd[i] < 3 && fd[i] != i) {
			fd[i] = fcntl(fd[i], F_DUPFD_CLOEXEC, 3);
			if (fd[i] < 0)
				return dsec_err_sys(err, "dup fd");
		}
	}
	for (i = 0; i < 3; i++) {
		if (fd[i] == i) {
			if (fcntl(i, F_SETFD, 0) < 0)
				return dsec_err_sys(err, "fd %d", i);
		} else if (dup2(fd[i], i) < 0)
			return dsec_err_sys(err, "dup2 fd %d", i);
	}
	return 0;
}

/* chdir to cwd as the sandbox sees it, following no magic link (/proc/PID/cwd, /proc/PID/fd/N
 * and the like lead to whatever a process holds, not to a path of the sandbox). */
static int enter_cwd(const char *cwd)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	int fd, r;

	if (chdir("/") < 0)
		return -1;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, cwd, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS)
		return chdir(cwd); /* before 5.6: the host's descriptors are gone already */
	if (fd < 0)
		return -1;
	r = fchdir(fd);
	close(fd);
	return r;
}

/* The policy every command gets: capabilities and seccomp filter, prepared once in the parent
 * (libcap and libseccomp allocate) and only applied in the child (a few syscalls). */
static struct dsec_caps *policy_caps;
static struct dsec_seccomp *policy_sc;

int dsec_exec_policy(const char *seccomp_profile, struct dsec_err *err)
{
	dsec_seccomp_free(policy_sc);
	policy_sc = NULL;
	if (!policy_caps && dsec_caps_prepare(NULL, &policy_caps, err) < 0)
		return -1;
	return dsec_seccomp_prepare(seccomp_profile, &policy_sc, err);
}

/* Has the other end of the sync socket closed (its process died)? */
static int caller_gone(int sock)
{
	struct pollfd p = {.fd = sock};

	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

/* The command's process: in every namespace of the sandbox, in its cgroup. */
/* A Landlock domain of the command's own (exec-domain.h). 0, or -1 with err; 0 also where the
 * kernel has no Landlock, or only its first ABI. */
static int own_domain(struct dsec_err *err)
{
	struct dsec_ll_ruleset_attr ra = {.handled_access_fs = DSEC_LL_HANDLED};
	struct dsec_ll_path_beneath pb = {.allowed_access = DSEC_LL_HANDLED};
	long rs = syscall(DSEC_NR_landlock_create_ruleset, &ra, sizeof(ra), 0);
	int r = -1;

	if (rs < 0)
		return errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL
			   ? 0
			   : dsec_err_sys(err, "landlock ruleset");
	pb.parent_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pb.parent_fd < 0 ||
	    syscall(DSEC_NR_landlock_add_rule, rs, DSEC_LL_RULE_PATH_BENEATH, &pb, 0) < 0 ||
	    syscall(DSEC_NR_landlock_restrict_self, rs, 0) < 0)
		dsec_err_sys(err, "landlock domain");
	else
		r = 0;
	if (pb.parent_fd >= 0)
		close(pb.parent_fd);
	close((int)rs);
	return r;
}

__attribute__((noreturn)) static void child_command(struct exec_ctx *c)
{
	/* no cwd asked for: the sandbox's working dir (its image's), "/" while that is missing */
	int soft = !(c->s->cwd && *c->s->cwd) && c->t->sb.workdir[0];
	const char *cwd = c->s->cwd && *c->s->cwd ? c->s->cwd : soft ? c->t->sb.workdir : "/";
	const struct dsec_exec_user *u = c->s->user;
	struct dsec_err err = {0};
	sigset_t none;
	int i, e;

	if (c->s->tty ? setup_tty(c, &err) < 0 : setup_fds(c, &err) < 0)
		child_fail(c, DSEC_EXEC_FAILED, &err);
	/* Every host descriptor goes now, not at exec, and before the cwd is looked up: a cwd of
	 * /proc/self/fd/N would lead to it (CVE-2024-21626). Only the sync socket (CLOEXEC) stays
	 * until the exec succeeded. */
	if ((c->sock > 3 && syscall(SYS_close_range, 3U, (unsigned)c->sock - 1, 0U) < 0) ||
	    syscall(SYS_close_range, (unsigned)c->sock + 1, ~0U, 0U) < 0) {
		dsec_err_sys(&err, "close_range");
		child_fail(c, DSEC_EXEC_FAILED, &err);
	}
	/* Another user: capabilities go to the default set first (setuid needs two of them), then
	 * the ids, which clear what was left of them unless the user is root; the cwd is then
	 * looked up as that user. Raw system calls, as in child_enter. */
	if (u && (dsec_caps_apply(policy_caps, &err) < 0 ||
		  syscall(SYS_setgroups, u->ngroups, u->groups) < 0 ||
		  syscall(SYS_setresgid, u->gid, u->gid, u->gid) < 0 ||
		  syscall(SYS_setresuid, u->uid, u->uid, u->uid) < 0)) {
		if (!err.errnum)
			dsec_err_sys(&err, "become user %u:%u", (unsigned)u->uid, (unsigned)u->gid);
		child_fail(c, DSEC_EXEC_FAILED, &err);
	}
	if (enter_cwd(cwd) < 0 && !(soft && errno == ENOENT && enter_cwd("/") == 0)) {
		dsec_err_sys(&err, "cwd '%s'", cwd);
		child_fail(c, DSEC_EXEC_CANNOT_RUN, &err);
	}
	/* Ignored signals would stay ignored after exec. Handlers would go at exec by
	 * themselves, but this child may share the caller's memory (CLONE_VM): none of the
	 * caller's handlers may run here once signals are unblocked. */
	for (i = 1; i < NSIG; i++)
		if (sigismember(&c->ignored, i) == 1) {
			struct sigaction dfl = {.sa_handler = SIG_DFL};

			sigaction(i, &dfl, NULL);
		}
	/* libc keeps 32 and 33 to itself (sigaction and sigaddset refuse them), yet a caller can
	 * have inherited them ignored: the kernel's call resets them too */
	for (i = 32; i < SIGRTMIN; i++) {
		struct {
			void *handler;
			unsigned long flags;
			void *restorer;
			unsigned long long mask;
		} ksa = {SIG_DFL, 0, NULL, 0};

		syscall(SYS_rt_sigaction, i, &ksa, NULL, 8);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		dsec_err_sys(&err, "set no_new_privs");
		child_fail(c, DSEC_EXEC_FAILED, &err);
	}
	/* out of reach of what other commands leave running, and they of it */
	if (!c->s->fn && own_domain(&err) < 0)
		child_fail(c, DSEC_EXEC_FAILED, &err);
	/* The command dies with its dsec-exec (a kill -9 of it included), which alone enforces
	 * its timeout and collects its output: set after the ids changed (that clears it), and
	 * then the caller's end of the sync socket must still be open, or it died before. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || caller_gone(c->sock))
		_exit(125);
	/* last before exec: the filter denies what setting up needed */
	if ((!u && dsec_caps_apply(policy_caps, &err) < 0) ||
	    dsec_seccomp_apply(policy_sc, &err) < 0)
		child_fail(c, DSEC_EXEC_FAILED, &err);
	if (c->s->fn) {
		/* Stays undumpable (set in child_enter): the sandbox's processes share our uid and
		 * capabilities and could otherwise ptrace the code working for the host. */
		close(c->sock); /* setup done: the caller's start() returns */
		_exit(c->s->fn(c->s->arg) == 0 ? 0 : 1);
	}
	if (c->guard >= 0)
		guard_arm(c, DSEC_EXEC_LOAD_MAX_S);
	c->reached = 1;
	e = exec_search(c->s->argv, c->s->envp);
	errno = e;
	dsec_err_sys(&err, "exec '%s'", c->s->argv[0] ? c->s->argv[0] : "");
	child_fail(c, e == ENOENT ? DSEC_EXEC_NOT_FOUND : DSEC_EXEC_CANNOT_RUN, &err);
}

/* The command's process right after clone3: born in the sandbox's pid, mount and network
 * namespaces (and, on v2, its cgroup); joins the cgroup (v1) and every other namespace of the
 * holder. */
__attribute__((noreturn)) static void child_enter(struct exec_ctx *c)
{
	rlim_t nf = DSEC_NOFILE_OF(c->t->sb.limits.nofile);
	struct rlimit nofile = {nf, nf};
	struct dsec_err err = {0};
	int i;

	/* Not dumpable while it holds host descriptors and, after dropping capabilities, looks
	 * like any process of the sandbox: no ptrace, no /proc/PID/fd from inside. exec makes the
	 * command dumpable again. The flag belongs to the memory: a child sharing the caller's
	 * (CLONE_VM) leaves the caller undumpable too, which suits a tool working for the host
	 * next to sandboxes. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (c->vm) /* never with a function to run (dsec_exec_start) */
		guard_arm(c, DSEC_EXEC_SETUP_MAX_S);
	/* A table shared with the caller: a private copy of the fds below low, where the caller
	 * put all the child needs, and none of the others (its cached sandboxes' pidfds and
	 * cgroup files, its other jobs' pipes): the kernel neither copies nor closes them one
	 * by one, as a fork's copy and close_range would. */
	if (c->low > 0 &&
	    syscall(SYS_close_range, (unsigned)c->low, ~0U, CLOSE_RANGE_UNSHARE) < 0 &&
	    unshare(CLONE_FILES) < 0) {
		dsec_err_sys(&err, "unshare fds");
		child_fail(c, DSEC_EXEC_FAILED, &err);
	}
	if (c->peer < c->low || c->low <= 0)
		close(c->peer);
	/* A session and process group of its own, before it looks like the sandbox's: kill(0)
	 * or a terminal's signal from inside then reaches only this command's processes, not the
	 * commands this dsec-exec runs in other sandboxes (all of whose roots may be the same host
	 * uid), and stop signals other than SIGSTOP do not stop it (an orphaned group). */
	if (syscall(SYS_setsid) < 0) {
		dsec_err_sys(&err, "setsid");
		child_fail(c, DSEC_EXEC_FAILED, &err);
	}
	dsec_res_exec_child(&c->t->sb); /* best-effort: SCHED_IDLE, oom_score_adj (resource.h) */
	/* the sandbox's descriptor limit (nofile.h); refused only when raising a hard limit below
	 * it without CAP_SYS_RESOURCE, and then the caller's lower one stays */
	syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &nofile, NULL);
	for (i = 0; c->procs[i] >= 0; i++)
		if (write(c->procs[i], "0", 1) < 0) {
			dsec_err_sys(&err, "%s: join cgroup", c->t->sb.id);
			child_fail(c, DSEC_EXEC_FAILED, &err);
		}
	if (c->s->tty && open_tty(c, &err) < 0)
		child_fail(c, DSEC_EXEC_FAILED, &err);
	if (setns(c->pidfd, c->t->nsflags & ~EXEC_BIRTH_NS) < 0) {
		dsec_err_sys(&err, "%s: setns", c->t->sb.id);
		child_fail(c, DSEC_EXEC_FAILED, &err);
	}
	/* In a user namespace, become its root (host root_uid), not the unmapped overflow uid.
	 * Raw system calls: libc's would signal the caller's threads (setxid broadcast) from a
	 * child that may share its memory. */
	if (c->t->sb.userns) {
		syscall(SYS_setgroups, 0, NULL); /* refused when the namespace denies it: fine */
		if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0) {
			dsec_err_sys(&err, "%s: become root of the user namespace", c->t->sb.id);
			child_fail(c, DSEC_EXEC_FAILED, &err);
		}
	}
	child_command(c);
}

/* Signals set in the hex mask after "key" in /proc/self/status. 0, or -1 when missing. */
static int status_mask(const char *buf, const char *key, sigset_t *set)
{
	const char *p = strstr(buf, key);
	unsigned long long m;
	char *end;
	int i;

	if (!p)
		return -1;
	m = strtoull(p + strlen(key), &end, 16);
	if (end == p + strlen(key))
		return -1;
	for (i = 1; i < NSIG && i <= 64; i++)
		if (m & (1ULL << (i - 1)))
			sigaddset(set, i);
	return 0;
}

/* The signals this process ignores or handles (*set), and those it handles (*caught), looked
 * up once: dsec-exec sets its dispositions before its first exec and keeps them. From
 * /proc/self/status (one read, where asking sigaction for each signal takes 64 system calls,
 * 0.1 ms here), else one by one. */
static void ignored_signals(sigset_t *set, sigset_t *caught)
{
	static sigset_t ign, cgt;
	static int done;
	char buf[4096];
	ssize_t len = -1;
	int i, fd;

	if (!done) {
		sigemptyset(&ign);
		sigemptyset(&cgt);
		fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			len = read(fd, buf, sizeof(buf) - 1);
			close(fd);
		}
		if (len > 0)
			buf[len] = '\0';
		if (len <= 0 || status_mask(buf, "\nSigIgn:", &ign) < 0 ||
		    status_mask(buf, "\nSigCgt:", &cgt) < 0) {
			sigemptyset(&ign);
			sigemptyset(&cgt);
			for (i = 1; i < NSIG; i++) {
				struct sigaction sa;

				if (sigaction(i, NULL, &sa) < 0 || sa.sa_handler == SIG_DFL)
					continue;
				sigaddset(sa.sa_handler == SIG_IGN ? &ign : &cgt, i);
			}
		}
		done = 1;
	}
	sigorset(set, &ign, &cgt);
	*caught = cgt;
}

/* A stack for children that share our memory, made once: the caller waits (CLONE_VFORK) until
 * the child has exec'd or exited, so one serves every exec. A guard page below it. */
#define VM_STACK_SIZE (128 * 1024)
static void *vm_stack(void)
{
	static void *stack;
	char *p;

	if (stack)
		return stack;
	p = mmap(NULL, VM_STACK_SIZE + 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (mprotect(p, 4096, PROT_NONE) < 0) {
		munmap(p, VM_STACK_SIZE + 4096);
		return NULL;
	}
	stack = p + 4096;
	return stack;
}

#if defined(__x86_64__)
/* clone3 onto a stack of the child's own, where it calls fn(c) and never returns. Raw: glibc
 * 2.36 has no clone3 wrapper, and syscall() will not do, as the child would return through
 * the wrapper's frame on a stack that does not hold it. Returns the pid or -errno. */
static long clone3_vm(struct exec_clone_args *ca, void (*fn)(struct exec_ctx *), struct exec_ctx *c)
{
	register long rax __asm__("rax") = SYS_clone3;
	register struct exec_clone_args *rdi __asm__("rdi") = ca;
	register long rsi __asm__("rsi") = (long)sizeof(*ca);
	register void (*r12)(struct exec_ctx *) __asm__("r12") = fn;
	register struct exec_ctx *r13 __asm__("r13") = c;

	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xor %%ebp, %%ebp\n\t" /* the child: outermost frame */
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "ud2\n"
			 "1:"
			 : "+r"(rax)
			 : "r"(rdi), "r"(rsi), "r"(r12), "r"(r13)
			 : "rcx", "r11", "memory", "cc");
	return rax;
}
#define HAVE_CLONE3_VM 1
#else
/* elsewhere: fork-style clone3 (the child gets a copy of our memory) */
static long clone3_vm(struct exec_clone_args *ca, void (*fn)(struct exec_ctx *), struct exec_ctx *c)
{
	(void)ca, (void)fn, (void)c;
	return -ENOSYS;
}
#define HAVE_CLONE3_VM 0
#endif

/* Our own namespace of a type (CLONE_NEWPID, CLONE_NEWNS, CLONE_NEWNET), opened once, while
 * we are in it: to go back to after cloning into a sandbox's. */
static int own_ns(int type)
{
	static int fds[3] = {-1, -1, -1};
	static const char *const names[3] = {"pid", "mnt", "net"};
	int i = type == CLONE_NEWPID ? 0 : type == CLONE_NEWNS ? 1 : 2;
	char path[32];

	if (fds[i] < 0) {
		snprintf(path, sizeof(path), "/proc/self/ns/%s", names[i]);
		fds[i] = open(path, O_RDONLY | O_CLOEXEC);
	}
	return fds[i];
}

/* Where our next child is born: the sandbox's pid namespace and, when it has them, its mount
 * and network namespaces, joined here for the clone and left right after. A child born in
 * ours and joining them itself would show the host's mount table, interfaces and sockets to
 * any process of the sandbox that opens its /proc/PID/mountinfo or /proc/PID/net in between:
 * those files check no ptrace access and keep the namespaces of the moment they were opened.
 * Our root and cwd, which joining a mount namespace resets, are kept in home[]. */
static int birth_enter(const struct dsec_exec_target *t, int home[2])
{
	int f = t->nsflags & EXEC_BIRTH_NS;

	home[0] = home[1] = -1;
	if (((f & CLONE_NEWPID) && own_ns(CLONE_NEWPID) < 0) ||
	    ((f & CLONE_NEWNS) && own_ns(CLONE_NEWNS) < 0) ||
	    ((f & CLONE_NEWNET) && own_ns(CLONE_NEWNET) < 0))
		return -1;
	if ((f & CLONE_NEWNS) && ((home[0] = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
				  (home[1] = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0))
		goto fail;
	if (f && setns(t->pidfd, f) < 0)
		goto fail;
	return 0;
fail:
	if (home[0] >= 0)
		close(home[0]);
	if (home[1] >= 0)
		close(home[1]);
	return -1;
}

/* Back to our own namespaces, root and cwd. Aborts when that fails: every later child, path
 * and socket of ours would be the sandbox's. */
static void birth_leave(const struct dsec_exec_target *t, int home[2])
{
	int f = t->nsflags & EXEC_BIRTH_NS;

	if ((f & CLONE_NEWNS) && (setns(own_ns(CLONE_NEWNS), CLONE_NEWNS) < 0 ||
				  fchdir(home[0]) < 0 || chroot(".") < 0 || fchdir(home[1]) < 0))
		abort();
	if (((f & CLONE_NEWNET) && setns(own_ns(CLONE_NEWNET), CLONE_NEWNET) < 0) ||
	    ((f & CLONE_NEWPID) && setns(own_ns(CLONE_NEWPID), CLONE_NEWPID) < 0))
		abort();
	if (home[0] >= 0)
		close(home[0]);
	if (home[1] >= 0)
		close(home[1]);
}

/* ---- in the caller ---- */

static int write_str(const char *dir, const char *file, const char *s)
{
	char path[DSEC_CG_PATH_MAX + 64];
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	r = write(fd, s, strlen(s)) < 0 ? -1 : 0;
	close(fd);
	return r;
}

/* Read pids from dir/cgroup.procs into pids (at most n). Returns the count or -1. */
static int read_pids(const char *dir, pid_t *pids, int n)
{
	char path[DSEC_CG_PATH_MAX + 64], buf[8192], *p, *end;
	int fd, k = 0;
	ssize_t len;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len < 0)
		return -1;
	buf[len] = '\0';
	for (p = buf; k < n && *p; p = end) {
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		if (v > 0)
			pids[k++] = (pid_t)v;
	}
	return k;
}

/* A cgroup of the exec's own below the sandbox's: the unit dsec_exec_kill kills. */
static int exec_cgroup_make(struct dsec_exec_target *t, struct dsec_exec_proc *pr,
			    struct dsec_err *err)
{
	static unsigned seq;
	const char *par = NULL;

	if (t->sb.cg.version == 2)
		par = t->sb.cg.v2;
	else if (t->sb.cg.version == 1 && t->sb.cg.v1[DSEC_CG_FREEZER][0]) {
		par = t->sb.cg.v1[DSEC_CG_FREEZER];
		pr->cgctrl = DSEC_CG_FREEZER;
	} else if (t->sb.cg.version == 1 && t->sb.cg.v1[DSEC_CG_PIDS][0]) {
		/* no freezer: kill in rounds until empty; the sandbox's pids limit bounds a
		 * fork race */
		par = t->sb.cg.v1[DSEC_CG_PIDS];
		pr->cgctrl = DSEC_CG_PIDS;
	}
	if (!par)
		return 0; /* no cgroup to kill by: only the command itself gets killed */
	snprintf(pr->cgpar, sizeof(pr->cgpar), "%s", par);
	/* one of the name there already: a killed dsec-exec's that had our pid (dsec-reap
	 * --orphans ends it) */
	for (;;) {
		snprintf(pr->cg, sizeof(pr->cg), "%s/exec-%d-%u", par, (int)getpid(), ++seq);
		if (mkdir(pr->cg, 0755) == 0)
			break;
		if (errno != EEXIST || seq % 1000 == 0)
			return dsec_err_sys(err, "%s: mkdir '%s'", t->sb.id, pr->cg);
	}
	pr->cgver = t->sb.cg.version;
	return 0;
}

/* Slots: low fds held open on /dev/null, made once. Before a clone that shares our memory,
 * the fds the child needs are put into them and the child shares our fd table too: its first
 * step unshares only the fds below the slots' end (close_range with CLOSE_RANGE_UNSHARE), so
 * the fds of every sandbox we keep open and of our other jobs are neither copied into it nor
 * closed one by one there. With 70 sandboxes cached (dsec-exec -j 8 over many) that close was
 * about 60 us of each exec. Cleared again as soon as the clone returns. */
#define EXEC_SLOTS (DSEC_CG_NCTRL + 8)
static int slot_fd[EXEC_SLOTS], slot_null = -1, slot_low;

static int slots_init(void)
{
	int i, fd;

	if (slot_null >= 0)
		return 0;
	if (slot_low < 0)
		return -1; /* failed before: not again */
	slot_low = -1;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (i = 0; i < EXEC_SLOTS; i++) {
		slot_fd[i] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (slot_fd[i] < 0) {
			while (i-- > 0)
				close(slot_fd[i]);
			close(fd);
			return -1;
		}
	}
	slot_null = fd;
	slot_low = (fd > 2 ? fd : 2) + 1;
	for (i = 0; i < EXEC_SLOTS; i++)
		if (slot_fd[i] >= slot_low)
			slot_low = slot_fd[i] + 1;
	return 0;
}

/* Number *fd as the child will see it: below slot_low already, or put into the next free
 * slot (one slot per distinct fd). 0, or -1 when the slots are used up. */
static int slot_put(int *fd, int fds[], int *n)
{
	int i;

	if (*fd < slot_low)
		return 0;
	for (i = 0; i < *n; i++)
		if (fds[i] == *fd) {
			*fd = slot_fd[i];
			return 0;
		}
	if (*n == EXEC_SLOTS || dup3(*fd, slot_fd[*n], O_CLOEXEC) < 0)
		return -1;
	fds[(*n)++] = *fd;
	*fd = slot_fd[*n - 1];
	return 0;
}

static void slots_clear(int n)
{
	while (n-- > 0)
		dup3(slot_null, slot_fd[n], O_CLOEXEC);
}

/* Give c the child's numbering of every fd it uses; 1 when the slots serve (the child may
 * share our table), 0 when they do not (c keeps the numbers as they are). *used: the slots
 * to clear after the clone. */
static int slots_place(struct exec_ctx *c, int *used)
{
	struct exec_ctx was = *c;
	int fds[EXEC_SLOTS], n = 0, i, ok;

	*used = 0;
	if (slots_init() < 0)
		return 0;
	ok = slot_put(&c->sock, fds, &n) == 0 && slot_put(&c->pidfd, fds, &n) == 0 &&
	     (c->devnull < 0 || slot_put(&c->devnull, fds, &n) == 0);
	for (i = 0; ok && i < 3; i++)
		ok = c->fd[i] < 0 || slot_put(&c->fd[i], fds, &n) == 0;
	for (i = 0; ok && c->procs[i] >= 0; i++)
		ok = slot_put(&c->procs[i], fds, &n) == 0;
	if (!ok) {
		slots_clear(n);
		*c = was;
		return 0;
	}
	*used = n;
	c->low = slot_low;
	return 1;
}

int dsec_exec_start(struct dsec_exec_target *t, const struct dsec_exec_spec *spec,
		    struct dsec_exec_proc *pr, struct dsec_err *err)
{
	struct exec_ctx c = {.t = t,
			     .s = spec,
			     .fd = {spec->fd[0], spec->fd[1], spec->fd[2]},
			     .pidfd = t->pidfd,
			     .guard = -1,
			     .pts = -1};
	struct exec_clone_args ca = {.exit_signal = SIGCHLD};
	struct exec_msg m, got = {0};
	int sv[2], cgfd = -1, execprocs = -1, devnull = -1, n = 0, i, st, e, ret = 0, home[2];
	sigset_t caught;
	void *vm;
	pid_t child;
	int slots = 0;

	memset(pr, 0, sizeof(*pr));
	pr->pidfd = pr->ptm = -1;
	if (!policy_sc && dsec_exec_policy(NULL, err) < 0)
		return DSEC_EXEC_FAILED;
	pr->start_us = dsec_now_us();
	snprintf(pr->statedir, sizeof(pr->statedir), "%s", t->sb.dir);
	dsec_sandbox_touch(pr->statedir);
	ignored_signals(&c.ignored, &caught);
	/* Share our memory and wait until the child has exec'd, like posix_spawn: no page tables
	 * to copy and no copy-on-write faults in either process, the largest cost of an exec
	 * here after the exec itself. Not for fn, which runs while the caller goes on. */
	vm = HAVE_CLONE3_VM && !spec->fn ? vm_stack() : NULL;
	if (spec->killable && exec_cgroup_make(t, pr, err) < 0)
		return DSEC_EXEC_FAILED;
	if (t->sb.cg.version == 2) {
		cgfd = pr->cgver ? open(pr->cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : t->cgdir;
		if (cgfd < 0) {
			dsec_err_sys(err, "%s: open '%s'", t->sb.id, pr->cg);
			goto fail;
		}
		ca.flags |= EXEC_CLONE_INTO_CGROUP;
		ca.cgroup = (uint64_t)cgfd;
	} else if (t->sb.cg.version == 1) {
		if (pr->cgver) {
			char path[sizeof(pr->cg) + 16];

			snprintf(path, sizeof(path), "%s/tasks", pr->cg);
			execprocs = open(path, O_WRONLY | O_CLOEXEC);
			if (execprocs < 0) {
				dsec_err_sys(err, "%s: open '%s'", t->sb.id, path);
				goto fail;
			}
		}
		for (i = 0; i < DSEC_CG_NCTRL; i++) {
			if (i == pr->cgctrl && execprocs >= 0)
				c.procs[n++] = execprocs;
			else if (t->cgprocs[i] >= 0)
				c.procs[n++] = t->cgprocs[i];
		}
	}
	c.procs[n] = -1;
	for (i = 0; i < 3 && !spec->tty; i++)
		if (spec->fd[i] < 0 && devnull < 0 &&
		    (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
			dsec_err_sys(err, "open /dev/null");
			goto fail;
		}
	c.devnull = devnull;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		dsec_err_sys(err, "%s: socketpair", t->sb.id);
		goto fail;
	}
	c.sock = sv[1];
	/* One clone, straight into the sandbox's pid, mount and network namespaces (birth_enter) */
	if (birth_enter(t, home) < 0) {
		dsec_err_sys(err, "%s: setns", t->sb.id);
		close(sv[0]);
		close(sv[1]);
		goto fail;
	}
	ca.flags |= CLONE_PIDFD;
	ca.pidfd = (uint64_t)(uintptr_t)&pr->pidfd;
	/* The child starts with every signal we handle blocked and unblocks them after resetting
	 * the dispositions: no handler of ours runs in it. Signals left at their default stay
	 * open: one that kills still kills us while we wait for the child's exec. */
	sigprocmask(SIG_BLOCK, &caught, &c.mask);
	c.peer = sv[0];
	if (vm) {
		long r;

		ca.flags |= CLONE_VM | CLONE_VFORK;
		c.vm = 1;
		if (slots_place(&c, &slots))
			ca.flags |= CLONE_FILES;
		ca.stack = (uint64_t)(uintptr_t)vm;
		ca.stack_size = VM_STACK_SIZE;
		r = clone3_vm(&ca, child_enter, &c);
		slots_clear(slots);
		child = r < 0 ? -1 : (pid_t)r;
		e = r < 0 ? (int)-r : 0;
	} else {
		child = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (child == 0)
			child_enter(&c);
		e = errno;
	}
	sigprocmask(SIG_SETMASK, &c.mask, NULL);
	birth_leave(t, home);
	close(sv[1]);
	if (child < 0) {
		errno = e;
		dsec_err_sys(err, "%s: clone3", t->sb.id);
		close(sv[0]);
		pr->pidfd = -1;
		goto fail;
	}
	pr->pid = child;
	for (;;) {
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = {&m, sizeof(m)};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *cm;
		ssize_t len = recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC);

		if (len < 0 && errno == EINTR)
			continue;
		if (len <= 0)
			break;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm), sizeof(int));
				if (m.kind == MSG_PTY && pr->ptm < 0)
					pr->ptm = fd;
				else
					close(fd);
			}
		if (len == (ssize_t)sizeof(m) && m.kind == MSG_ERR && !got.kind)
			got = m;
	}
	close(sv[0]);
	if (c.vm && !c.reached && got.kind != MSG_ERR) {
		/* gone before its execve without a word: killed, by its guard or from inside */
		got.kind = MSG_ERR;
		got.stage = DSEC_EXEC_FAILED;
		dsec_err_set(&got.err, ETIME, "%s", DSEC_EXEC_STALLED);
	}
	if (got.kind == MSG_ERR) {
		*err = got.err;
		ret = got.stage;
		while (waitpid(child, &st, 0) < 0 && errno == EINTR)
			;
		pr->reaped = 1;
	}
	if (cgfd >= 0 && cgfd != t->cgdir)
		close(cgfd);
	if (execprocs >= 0)
		close(execprocs);
	if (devnull >= 0)
		close(devnull);
	if (ret < 0)
		dsec_exec_release(pr);
	return ret;
fail:
	if (cgfd >= 0 && cgfd != t->cgdir)
		close(cgfd);
	if (execprocs >= 0)
		close(execprocs);
	if (devnull >= 0)
		close(devnull);
	dsec_exec_release(pr);
	return DSEC_EXEC_FAILED;
}

/* v1: freeze, SIGKILL every task, thaw, until the cgroup is empty (without a freezer: kill
 * rounds until empty). */
static int kill_v1(const char *cg, int freezer)
{
	pid_t pids[1024];
	int round, k, i;

	for (round = 0; round < 200; round++) {
		char state[16] = "";
		int tries;

		if (freezer)
			write_str(cg, "freezer.state", "FROZEN");
		for (tries = 0; freezer && tries < 100; tries++) {
			char path[DSEC_CG_PATH_MAX + 64];
			ssize_t len;
			int fd;

			snprintf(path, sizeof(path), "%s/freezer.state", cg);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				break;
			len = read(fd, state, sizeof(state) - 1);
			close(fd);
			state[len > 0 ? len : 0] = '\0';
			if (!strncmp(state, "FROZEN", 6))
				break;
			usleep(200);
		}
		k = read_pids(cg, pids, 1024);
		for (i = 0; i < k; i++)
			kill(pids[i], SIGKILL);
		if (freezer)
			write_str(cg, "freezer.state", "THAWED");
		if (k <= 0)
			return k < 0 ? -1 : 0;
		usleep(round < 10 ? 200 : 5000);
	}
	errno = EBUSY;
	return -1;
}

int dsec_exec_kill(struct dsec_exec_proc *pr, struct dsec_err *err)
{
	pid_t pids[1024];
	int r = 0, k, i;

	if (pr->cgver == 2) {
		/* cgroup.kill (5.14+) acts at once but the tasks die after it returns: wait for the
		 * cgroup to empty, killing again in case cgroup.kill is missing */
		int have_kill = write_str(pr->cg, "cgroup.kill", "1") == 0;

		for (i = 0; i < 2000 && (k = read_pids(pr->cg, pids, 1024)) > 0; i++) {
			if (!have_kill)
				while (k-- > 0)
					kill(pids[k], SIGKILL);
			usleep(i < 20 ? 100 : 1000);
		}
	} else if (pr->cgver == 1 && kill_v1(pr->cg, pr->cgctrl == DSEC_CG_FREEZER) < 0) {
		r = dsec_err_sys(err, "kill every process in '%s'", pr->cg);
	}
	pr->killed = 1;
	if (!pr->reaped && pr->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, pr->pidfd, SIGKILL, NULL, 0);
	return r;
}

int dsec_exec_wait(struct dsec_exec_proc *pr, int nohang, int *status, struct rusage *ru,
		   struct dsec_err *err)
{
	pid_t r;

	if (pr->reaped)
		return dsec_err_set(err, ECHILD, "already reaped");
	do
		r = wait4(pr->pid, status, nohang ? WNOHANG : 0, ru);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return dsec_err_sys(err, "wait4 %d", (int)pr->pid);
	if (r == 0)
		return 0;
	pr->reaped = 1;
	return 1;
}

void dsec_exec_release(struct dsec_exec_proc *pr)
{
	int tries;

	if (pr->pid > 0 && !pr->reaped) {
		struct dsec_err e;
		int st;

		dsec_exec_kill(pr, &e);
		dsec_exec_wait(pr, 0, &st, NULL, &e);
	}
	if (pr->cgver) {
		/* Processes the command left behind move up to the sandbox's cgroup: they are the
		 * sandbox's business now, like after `docker exec … sh -c 'cmd &'`. */
		for (tries = 0; rmdir(pr->cg) < 0 && errno == EBUSY && tries < 100; tries++) {
			pid_t pids[1024];
			int k = pr->killed ? 0 : read_pids(pr->cg, pids, 1024), i;
			char buf[16];

			for (i = 0; i < k; i++) {
				snprintf(buf, sizeof(buf), "%d", (int)pids[i]);
				write_str(pr->cgpar, "cgroup.procs", buf);
			}
			if (tries > 2)
				usleep(1000);
		}
		pr->cgver = 0;
	}
	if (pr->pidfd >= 0)
		close(pr->pidfd);
	if (pr->ptm >= 0)
		close(pr->ptm);
	pr->pidfd = pr->ptm = -1;
	if (pr->statedir[0])
		dsec_sandbox_touch(pr->statedir);
	pr->statedir[0] = '\0';
}
