/* dsec-exec: run a command in a sandbox, in the foreground (like docker exec, tty too) or for
 * each record on standard input, many at once; and copy files in and out (dsec-exec cp). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include "cli.h"
#include "exec.h"
#include "exec-stdio.h"
#include "journal.h"
#include "jsonl.h"
#include "pty.h"

static const char help[] =
    "Usage: dsec-exec [OPTIONS] ID [--] CMD [ARG]...\n"
    "       dsec-exec [OPTIONS] [-- CMD [ARG]...] < RECORDS\n"
    "       dsec-exec cp [OPTIONS] SRC DST\n"
    "Run a command inside a sandbox.\n"
    "\n"
    "With an ID, run CMD in that sandbox in the foreground: standard input, output and error\n"
    "are relayed to and from the command through pipes (/dev/null is passed as it is; -t for\n"
    "a terminal), and end with it; signals sent to dsec-exec go to its process group;\n"
    "dsec-exec exits with its status (128+N when killed by signal N, 124 when --timeout\n"
    "expired, 125 when dsec-exec failed or the command could not start within 5 s, 126 when\n"
    "CMD could not be run, 127 when it was not found).\n"
    "\n"
    "Without an ID, read records (JSON lines with an \"id\", e.g. from dsec-spawn) and run CMD,\n"
    "or the record's own \"cmd\" (array) or \"sh\" (string for /bin/sh -c), in each record's\n"
    "sandbox; print each record with \"exec\":{cmd,exit,signal,stdout,stderr,truncated,\n"
    "timed_out,oom_kills,wall_us,cpu_us,max_rss_kb} added, as the commands finish. A record\n"
    "may also carry \"stdin\" (string), \"env\" (object), \"cwd\", \"run_as\" (a user) and\n"
    "\"timeout\".\n"
    "\n"
    "Copy files (a file or a directory tree, like docker cp; PATH inside the sandbox is\n"
    "resolved there, never on the host):\n"
    "  dsec-exec cp HOSTPATH ID:PATH    copy into the sandbox\n"
    "  dsec-exec cp ID:PATH HOSTPATH    copy out of the sandbox\n"
    "  dsec-exec cp - ID:DIR            unpack a tar stream from standard input into DIR\n"
    "  dsec-exec cp ID:PATH -           write PATH as a tar stream to standard output\n"
    "\n"
    "Options:\n"
    "  -t, --tty              allocate a pseudo-terminal in the sandbox (interactive shell)\n"
    "  -e, --env K=V          set an environment variable (K alone: take the host's value)\n"
    "  -w, --workdir DIR      working directory inside the sandbox (default: the sandbox's,\n"
    "                         from dsec-spawn --workdir or its image, else /)\n"
    "  -u, --user U[:G]       run as user U (name or uid, from the sandbox's /etc/passwd)\n"
    "                         and group G, with no capabilities (default: the sandbox's,\n"
    "                         from dsec-spawn --user or its image, else root inside)\n"
    "      --timeout D        kill the command and everything it started after D (30s, 2m;\n"
    "                         0: never, the default)\n"
    "  -j, --jobs N           records: run up to N commands at once (1 to 4096, default 1)\n"
    "  -k, --keep-order       records: print them in input order, not as they finish\n"
    "      --max-output SIZE  records: capture at most SIZE of stdout and of stderr (1M, at\n"
    "                         most 1G)\n"
    "      --seccomp FILE     seccomp profile for the commands (default: the built-in one,\n"
    "                         see dsec-seccomp(5))\n"
    "      --journal FILE     records: append every step run to the trajectory journal\n"
    "                         FILE (durably) and answer the steps it holds as done from\n"
    "                         it, with \"replayed\":true, instead of running them again;\n"
    "                         a step is named by the record's \"traj\" and \"step\" (see\n"
    "                         dsec-journal(5))\n"
    "      --rerun-unfinished  with --journal: run a step that started and never finished\n"
    "                         again (default: an error record, as it may have run)\n"
    "      --rebuild          with --journal: when a record's sandbox is gone, spawn a new\n"
    "                         one from the image the journal recorded and run the steps it\n"
    "                         holds as done again in it, then go on there\n"
    "  -q, --quiet            no diagnostics but errors\n"
    "  -v, --verbose          more diagnostics\n"
    "      --root DIR         layer store (default $DSEC_ROOT or /var/lib/dsec)\n"
    "      --run DIR          sandbox state (default $DSEC_RUN or /run/dsec)\n"
    "  -h, --help             show this help\n"
    "  -V, --version          show the version\n"
    "\n"
    "Exit status with records: 0 all done (a command exiting non-zero is a result, not a\n"
    "failure), 1 some record failed, 2 usage error, 3 fatal.\n";

enum {
	OPT_TIMEOUT = DSEC_OPT_FIRST_TOOL,
	OPT_MAX_OUTPUT,
	OPT_SECCOMP,
	OPT_JOURNAL,
	OPT_RERUN,
	OPT_REBUILD
};

static const struct option longopts[] = {
    DSEC_COMMON_LONGOPTS,
    {"tty", no_argument, NULL, 't'},
    {"env", required_argument, NULL, 'e'},
    {"workdir", required_argument, NULL, 'w'},
    {"user", required_argument, NULL, 'u'},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"jobs", required_argument, NULL, 'j'},
    {"keep-order", no_argument, NULL, 'k'},
    {"max-output", required_argument, NULL, OPT_MAX_OUTPUT},
    {"seccomp", required_argument, NULL, OPT_SECCOMP},
    {"journal", required_argument, NULL, OPT_JOURNAL},
    {"rerun-unfinished", no_argument, NULL, OPT_RERUN},
    {"rebuild", no_argument, NULL, OPT_REBUILD},
    {NULL, 0, NULL, 0},
};

static volatile sig_atomic_t fg_pid;

/* Signals sent to dsec-exec go to the command's process group (it leads a session of its own,
 * out of reach of our terminal), until it has been waited for: its pid is not reused before. */
static void forward(int sig, siginfo_t *si, void *uc)
{
	(void)si, (void)uc;
	if (fg_pid > 0)
		kill(-fg_pid, sig);
}

static int status_of(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 125;
}

/* stdio reaches the command through pipes of ours, unless it is /dev/null or another memory
 * device. A host file handed over as it is could be reopened through /proc/self/fd/N with
 * the sandbox's credentials (runc's fd-leak class) and its other contents read; a host
 * terminal, pipe or socket would stay with whatever the command leaves running after it
 * exits: the caller's $(...) waits for it, and it reads what the user types next. Relayed,
 * the command's exit ends our hold and theirs: what they write later goes nowhere. */
struct relay {
	int file, pipe; /* ours: the host fd and our end of the pipe; -1 when done */
	int in;         /* 1: file -> pipe (stdin), 0: pipe -> file */
	int wait;       /* the host fd blocks (not a regular file): poll it before each use */
	int peek;       /* stdin from a file: the command's end, kept to count what it left */
	size_t off, len;
	char buf[65536];
};

static struct relay relays[3];

/* The command's end of a pipe relaying stdio fd i into *cmd_fd; *cmd_fd stays i when it goes
 * as it is. stderr on the same file as stdout shares its pipe, keeping their order. */
static int relay_setup(int i, int *cmd_fd, struct dsec_err *err)
{
	struct relay *r = &relays[i];
	struct stat st, o;
	int p[2];

	r->file = r->pipe = r->peek = -1;
	r->off = r->len = 0;
	if (fstat(i, &st) < 0 || (S_ISCHR(st.st_mode) && major(st.st_rdev) == DSEC_MEM_MAJOR &&
				  DSEC_MEM_MINOR_PLAIN(minor(st.st_rdev))))
		return 0; /* closed (the command finds it closed too), or /dev/null and kin */
	if (S_ISDIR(st.st_mode) || (fcntl(i, F_GETFL) & O_PATH))
		return 0; /* as it is, for dsec_exec_start to refuse */
	if (i == 0 && isatty(0) && tcgetpgrp(0) != getpgrp()) {
		/* a background job: reading the terminal would stop us; the command reads nothing */
		*cmd_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		return *cmd_fd < 0 ? dsec_err_sys(err, "open /dev/null") : 0;
	}
	if (i == 2 && relays[1].pipe >= 0 && fstat(1, &o) == 0 && o.st_dev == st.st_dev &&
	    o.st_ino == st.st_ino) {
		*cmd_fd = -2; /* the caller gives it stdout's pipe */
		return 0;
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return dsec_err_sys(err, "pipe");
	r->file = i;
	r->in = i == 0;
	r->wait = !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode);
	r->pipe = r->in ? p[1] : p[0];
	*cmd_fd = r->in ? p[0] : p[1];
	if (r->in && !r->wait)
		r->peek = p[0];
	fcntl(r->pipe, F_SETFL, O_NONBLOCK);
	return 0;
}

static void relay_stop(struct relay *r)
{
	if (r->pipe >= 0)
		close(r->pipe);
	r->pipe = r->file = -1;
}

/* The fd and events relay r waits for, the host fd only when it can block: 1 (and fd -1)
 * when it need not wait, as a regular file never does. */
static int relay_want(const struct relay *r, struct pollfd *p)
{
	int src = r->in ? r->file : r->pipe, dst = r->in ? r->pipe : r->file;
	int full = r->off < r->len;

	*p = (struct pollfd){full ? dst : src, (short)(full ? POLLOUT : POLLIN), 0};
	if (r->wait || p->fd != r->file)
		return 0;
	p->fd = -1;
	return 1;
}

/* Move what can move without blocking: our pipe end is non-blocking, a host fd that can
 * block is used once per readiness poll reported (rev), in pieces a pipe or terminal that
 * said it has room takes whole. */
static void relay_step(struct relay *r, short rev)
{
	int src = r->in ? r->file : r->pipe, dst = r->in ? r->pipe : r->file;
	ssize_t n;

	while (r->pipe >= 0) {
		if (r->off == r->len) {
			if (src == r->file && r->wait && !(rev & (POLLIN | POLLHUP | POLLERR)))
				return;
			n = read(src, r->buf, src == r->file && r->wait ? 4096 : sizeof(r->buf));
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			if (n <= 0) { /* end of input, or every writer of the pipe gone */
				relay_stop(r);
				return;
			}
			if (src == r->file)
				rev = 0;
			r->off = 0;
			r->len = (size_t)n;
		}
		if (dst == r->file && r->wait && !(rev & (POLLOUT | POLLHUP | POLLERR)))
			return;
		n = write(dst, r->buf + r->off,
			  dst == r->file && r->wait && r->len - r->off > 4096 ? 4096
									      : r->len - r->off);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) { /* the command closed its input, or the reader went away */
			relay_stop(r);
			return;
		}
		if (dst == r->file)
			rev = 0;
		r->off += (size_t)n;
	}
}

/* After the command's exit. stdin from a file is left where the command stopped reading: what
 * it did not take (in its pipe, in our buffer) is given back, so `while read` loops over a file
 * work. Output: what our buffer and its pipe held then (the command's last output, and what it
 * left running wrote so far) goes out, blocking on the host fd; nothing after. */
static void relay_drain(struct relay *r)
{
	int left = 0;
	ssize_t n;

	if (r->peek >= 0) {
		off_t back = r->pipe >= 0 ? (off_t)(r->len - r->off) : 0;

		if (ioctl(r->peek, FIONREAD, &left) == 0)
			back += left;
		if (back > 0)
			lseek(0, -back, SEEK_CUR);
		close(r->peek);
		r->peek = -1;
	} else if (r->pipe >= 0 && !r->in && ioctl(r->pipe, FIONREAD, &left) == 0) {
		while (r->off < r->len || left > 0) {
			if (r->off == r->len) {
				n = read(r->pipe, r->buf,
					 (size_t)left < sizeof(r->buf) ? (size_t)left
								       : sizeof(r->buf));
				if (n <= 0)
					break;
				left -= (int)n;
				r->off = 0;
				r->len = (size_t)n;
			}
			n = write(r->file, r->buf + r->off, r->len - r->off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			r->off += (size_t)n;
		}
	}
	relay_stop(r);
}

/* Relay until the command exits or the deadline (0: none) passes: 1 when the deadline passed
 * first. Processes the command left behind keep no hold on us. */
static int relay_run(int pidfd, uint64_t deadline)
{
	signal(SIGPIPE, SIG_IGN); /* a command that closed its input: EPIPE, not death */
	for (;;) {
		struct pollfd p[4] = {{pidfd, POLLIN, 0}};
		int n = 1, r, at[3], ready = 0;
		uint64_t now = dsec_now_us();

		if (deadline && now >= deadline)
			return 1;
		for (int i = 0; i < 3; i++) {
			at[i] = -1;
			if (relays[i].pipe < 0)
				continue;
			ready |= relay_want(&relays[i], &p[n]);
			if (p[n].fd >= 0)
				at[i] = n++;
		}
		r = poll(p, (nfds_t)n,
			 ready      ? 0
			 : deadline ? (int)((deadline - now + 999) / 1000)
				    : -1);
		if (r < 0 && errno != EINTR)
			return 0;
		for (int i = 0; i < 3; i++)
			relay_step(&relays[i], at[i] >= 0 ? p[at[i]].revents : 0);
		if (p[0].revents & POLLIN)
			break;
	}
	for (int i = 0; i < 3; i++)
		relay_drain(&relays[i]);
	return 0;
}

static int foreground(const struct dsec_paths *paths, const char *id, char **argv, char **envset,
		      const char *cwd, const char *user, int tty, uint64_t timeout_us)
{
	static const int fwd[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT};
	struct dsec_exec_target t;
	struct dsec_exec_spec s = {.argv = argv, .cwd = cwd, .tty = tty, .fd = {0, 1, 2}};
	struct dsec_exec_proc pr;
	struct dsec_exec_user who;
	struct dsec_env env = {0};
	struct dsec_err err = {0};
	struct termios saved;
	struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
	int r, st = 0, raw = 0, timed_out = 0;
	uint64_t t0 = dsec_now_us(), t1, t2;
	unsigned i;

	if (dsec_exec_target_open(paths, id, &t, &err) < 0) {
		dsec_err_print(&err);
		return 125;
	}
	if (dsec_exec_env_as(&t, user, &env, &who, &s.user, &err) < 0 ||
	    (tty &&
	     dsec_env_set(&env, "TERM", getenv("TERM") ? getenv("TERM") : "xterm", &err) < 0))
		goto fail;
	for (i = 0; envset[i]; i++)
		if (dsec_env_put(&env, envset[i], &err) < 0)
			goto fail;
	s.envp = env.v;
	s.killable = timeout_us > 0;
	if (tty && ioctl(0, TIOCGWINSZ, &s.ws) < 0 && ioctl(1, TIOCGWINSZ, &s.ws) < 0)
		s.ws.ws_row = 0;
	for (i = 0; !tty && i < 3; i++)
		if (relay_setup((int)i, &s.fd[i], &err) < 0)
			goto fail;
	if (s.fd[2] == -2)
		s.fd[2] = s.fd[1];
	t1 = dsec_now_us();
	r = dsec_exec_start(&t, &s, &pr, &err);
	t2 = dsec_now_us();
	for (i = 0; !tty && i < 3; i++) {
		int shared = i == 2 && s.fd[2] == s.fd[1]; /* closed as stdout's */

		if (s.fd[i] != (int)i && !shared && s.fd[i] != relays[i].peek)
			close(s.fd[i]); /* the command's end of a relay pipe */
	}
	if (r < 0) {
		dsec_errorx("%s: %s", id, err.msg);
		dsec_env_free(&env);
		dsec_exec_target_close(&t);
		return r == DSEC_EXEC_NOT_FOUND ? 127 : r == DSEC_EXEC_CANNOT_RUN ? 126 : 125;
	}
	dsec_env_free(&env);
	fg_pid = pr.pid;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++)
		sigaction(fwd[i], &sa, NULL);
	if (tty) {
		uint64_t deadline = timeout_us ? pr.start_us + timeout_us : 0;

		raw = dsec_tty_raw(0, &saved, &err);
		if (raw < 0)
			dsec_warnx("%s: %s", id, err.msg);
		r = dsec_pty_relay(pr.ptm, pr.pidfd, 0, 1, deadline, &err);
		if (raw > 0)
			dsec_tty_restore(0, &saved);
		if (r < 0)
			dsec_warnx("%s: %s", id, err.msg);
		timed_out = r == 1;
	} else if (relays[0].pipe >= 0 || relays[1].pipe >= 0 || relays[2].pipe >= 0) {
		timed_out = relay_run(pr.pidfd, timeout_us ? pr.start_us + timeout_us : 0);
	} else if (timeout_us) {
		struct pollfd p = {pr.pidfd, POLLIN, 0};
		uint64_t deadline = pr.start_us + timeout_us, now;

		while ((now = dsec_now_us()) < deadline) {
			r = poll(&p, 1, (int)((deadline - now + 999) / 1000));
			if (r > 0)
				break;
		}
		timed_out = !(p.revents & POLLIN);
	}
	if (timed_out && dsec_exec_kill(&pr, &err) < 0)
		dsec_err_print(&err);
	{
		/* waited for without reaping, then no more forwarding, then reaped */
		siginfo_t si;

		while (waitid(P_PIDFD, (id_t)pr.pidfd, &si, WEXITED | WNOWAIT) < 0 &&
		       errno == EINTR)
			;
		fg_pid = 0; /* a handler runs on this thread: none after this line sees the pid */
	}
	if (dsec_exec_wait(&pr, 0, &st, NULL, &err) < 0)
		st = W_EXITCODE(125, 0);
	if (dsec_verbose > 1)
		dsec_infox("%s: open %llu us, start (clone to exec) %llu us, run %llu us", id,
			   (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1),
			   (unsigned long long)(dsec_now_us() - t2));
	dsec_exec_release(&pr);
	dsec_exec_target_close(&t);
	if (timed_out) {
		dsec_errorx("%s: timed out", id);
		return 124;
	}
	return status_of(st);
fail:
	dsec_errorx("%s: %s", id, err.msg);
	dsec_env_free(&env);
	dsec_exec_target_close(&t);
	return 125;
}

/* "ID:PATH" → id (copied into buf) and path; NULL when arg names a host path. */
static const char *split_ref(const char *arg, char *buf, size_t n)
{
	const char *colon = strchr(arg, ':'), *slash = strchr(arg, '/');

	if (!colon || colon == arg || (slash && slash < colon) || (size_t)(colon - arg) >= n)
		return NULL;
	memcpy(buf, arg, (size_t)(colon - arg));
	buf[colon - arg] = '\0';
	return colon + 1;
}

static int copy(const struct dsec_paths *paths, const char *src, const char *dst,
		uint64_t timeout_us)
{
	char sid[DSEC_ID_MAX + 1], did[DSEC_ID_MAX + 1];
	const char *sp = split_ref(src, sid, sizeof(sid)), *dp = split_ref(dst, did, sizeof(did));
	struct dsec_exec_target t;
	struct dsec_err err = {0};
	int r;

	if (!!sp == !!dp)
		dsec_usage_error("cp: exactly one of SRC and DST must be ID:PATH");
	if (dsec_exec_target_open(paths, sp ? sid : did, &t, &err) < 0) {
		dsec_err_print(&err);
		return DSEC_EXIT_FAILED;
	}
	r = sp ? dsec_cp_out(&t, sp, dst, timeout_us, &err)
	       : dsec_cp_in(&t, src, dp, timeout_us, &err);
	if (r < 0)
		dsec_errorx("%s: %s", t.sb.id, err.msg);
	dsec_exec_target_close(&t);
	return r < 0 ? DSEC_EXIT_FAILED : DSEC_EXIT_OK;
}

static int open_journal(struct dsec_execrec_opts *ro, const char *path, int flags)
{
	struct dsec_err err = {0};
	unsigned long done, unfinished;
	const char *nosync = getenv("DSEC_JOURNAL_NOSYNC");

	/* for benchmarks of the rest of the loop only: an unsynced journal survives no crash */
	if (nosync && !strcmp(nosync, "1"))
		flags |= DSEC_JOURNAL_NOSYNC;
	ro->journal = dsec_journal_open(path, flags, &err);
	if (!ro->journal) {
		dsec_err_print(&err);
		return -1;
	}
	dsec_journal_counts(ro->journal, &done, &unfinished);
	dsec_infox("journal '%s': %lu steps done, %lu started and not finished", path, done,
		   unfinished);
	return 0;
}

int main(int argc, char **argv)
{
	struct dsec_cli cli = {.help = help};
	struct dsec_paths paths;
	struct dsec_execrec_opts ro = {.jobs = 1, .max_output = 1 << 20, .tool = "dsec-exec"};
	struct dsec_err err = {0};
	const char *cwd = NULL, *user = NULL;
	char **envset = calloc((size_t)argc + 1, sizeof(char *));
	int c, tty = 0, nenv = 0, recopts = 0;
	long long n;
	uint64_t u;
	long failed;
	const char *seccomp = NULL, *journal = NULL;
	int jflags = 0;
	uint32_t seed = 0;

	dsec_prog = "dsec-exec";
	/* jansson seeds its hash function from /dev/urandom (open, read, close) at the first
	 * object: one getrandom call is cheaper at every start */
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == sizeof(seed) && seed)
		json_object_seed(seed);
	dsec_stdio_reserve(); /* the command finds a closed one closed too (EBADF) */
	if (!envset)
		return DSEC_EXIT_FATAL;
	while ((c = getopt_long(argc, argv, "+hVqvte:w:u:j:k", longopts, NULL)) != -1) {
		if (dsec_cli_common(&cli, c, optarg))
			continue;
		switch (c) {
		case 't':
			tty = 1;
			break;
		case 'e':
			if (!*optarg || *optarg == '=' || strcspn(optarg, "=") >= 256)
				dsec_usage_error("-e '%s': want NAME=VALUE or NAME", optarg);
			envset[nenv++] = optarg;
			break;
		case 'w':
			cwd = optarg;
			break;
		case 'u':
			if (!*optarg)
				dsec_usage_error("--user: empty");
			user = optarg;
			break;
		case 'j':
			if (dsec_parse_count(optarg, 1, 4096, &n, "--jobs", &err) < 0)
				dsec_usage_error("%s", err.msg);
			ro.jobs = (unsigned)n;
			recopts = 1;
			break;
		case 'k':
			ro.keep_order = 1;
			recopts = 1;
			break;
		case OPT_TIMEOUT:
			if (dsec_parse_duration(optarg, 366ULL * 86400 * 1000000, &u, "--timeout",
						&err) < 0)
				dsec_usage_error("%s", err.msg);
			ro.timeout_us = u;
			break;
		case OPT_MAX_OUTPUT:
			if (dsec_parse_size(optarg, 1ULL << 30, &u, "--max-output", &err) < 0)
				dsec_usage_error("%s", err.msg);
			ro.max_output = u;
			recopts = 1;
			break;
		case OPT_SECCOMP:
			seccomp = optarg;
			break;
		case OPT_JOURNAL:
			if (!*optarg)
				dsec_usage_error("--journal: empty file name");
			journal = optarg;
			recopts = 1;
			break;
		case OPT_RERUN:
			jflags |= DSEC_JOURNAL_RERUN;
			recopts = 1;
			break;
		case OPT_REBUILD:
			jflags |= DSEC_JOURNAL_REBUILD;
			recopts = 1;
			break;
		default:
			dsec_usage_error("unknown option");
		}
	}
	if (jflags && !journal)
		dsec_usage_error("--rerun-unfinished and --rebuild need --journal");
	dsec_cli_paths(&cli, &paths);
	/* a bad profile is a usage error, found before any sandbox is touched */
	if (dsec_exec_policy(seccomp, &err) < 0)
		dsec_usage_error("%s", err.msg);
	if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
		const char *id = argv[optind++];

		if (!strcmp(id, "cp")) {
			if (argc - optind != 2)
				dsec_usage_error("cp takes SRC and DST");
			return dsec_cli_exit(
			    copy(&paths, argv[optind], argv[optind + 1], ro.timeout_us));
		}
		if (optind < argc && !strcmp(argv[optind], "--"))
			optind++;
		if (optind >= argc)
			dsec_usage_error("%s: no command given", id);
		if (recopts)
			dsec_usage_error("-j, -k, --max-output and the journal options apply to "
					 "records, not to one ID");
		exit(foreground(&paths, id, argv + optind, envset, cwd, user, tty, ro.timeout_us));
	}
	if (tty)
		dsec_usage_error("-t needs a sandbox ID");
	if (isatty(0))
		dsec_usage_error("no ID given and standard input is a terminal (records expected)");
	dsec_jsonl_init_output();
	ro.paths = &paths;
	ro.argv = optind < argc ? argv + optind : NULL;
	ro.env = envset;
	ro.cwd = cwd;
	ro.user = user;
	if (journal && open_journal(&ro, journal, jflags) < 0)
		return dsec_cli_exit(DSEC_EXIT_FATAL);
	failed = dsec_execrec_run(&ro, 0, &err);
	dsec_journal_close(ro.journal);
	free(envset);
	if (failed < 0) {
		dsec_err_print(&err);
		dsec_close_stdout();
		return DSEC_EXIT_FATAL;
	}
	return dsec_cli_exit(failed ? DSEC_EXIT_FAILED : DSEC_EXIT_OK);
}
