#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "jsonl.h"

static void stop_block(int how);

int dsec_cli_common(struct dsec_cli *cli, int c, const char *optarg_)
{
	switch (c) {
	case 'h':
		fputs(cli->help, stdout);
		exit(dsec_close_stdout() < 0 ? DSEC_EXIT_FATAL : DSEC_EXIT_OK);
	case 'V':
		printf("%s %s\n", dsec_prog, DSEC_VERSION);
		exit(dsec_close_stdout() < 0 ? DSEC_EXIT_FATAL : DSEC_EXIT_OK);
	case 'q':
		dsec_verbose = -1;
		return 1;
	case 'v':
		if (dsec_verbose < 0)
			dsec_verbose = 0;
		dsec_verbose++;
		return 1;
	case DSEC_OPT_ROOT:
	case DSEC_OPT_RUN:
		/* an empty one would fall back to the default state dirs, not $DSEC_ROOT/$DSEC_RUN */
		if (!*optarg_)
			dsec_usage_error("--%s: empty path", c == DSEC_OPT_ROOT ? "root" : "run");
		*(c == DSEC_OPT_ROOT ? &cli->root_opt : &cli->run_opt) = optarg_;
		return 1;
	case '?':
	case ':':
		fprintf(stderr, "Try '%s --help' for more information.\n", dsec_prog);
		exit(DSEC_EXIT_USAGE);
	default:
		return 0;
	}
}

void dsec_usage_error(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	dsec_errorx("%s", buf); /* control bytes of an argument as \xNN, like every message */
	fprintf(stderr, "Try '%s --help' for more information.\n", dsec_prog);
	exit(DSEC_EXIT_USAGE);
}

void dsec_stdio_reserve(void)
{
	/* in order, so each open takes the lowest free number: the closed one */
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF &&
		    open("/dev/null", O_RDONLY | O_NOCTTY) != fd)
			_exit(DSEC_EXIT_FATAL);
}

void dsec_fatal(const struct dsec_err *err)
{
	dsec_err_print(err);
	exit(DSEC_EXIT_FATAL);
}

void dsec_cli_paths(struct dsec_cli *cli, struct dsec_paths *paths)
{
	struct dsec_err err;

	if (dsec_paths_init(paths, cli->root_opt, cli->run_opt, &err) < 0)
		dsec_fatal(&err);
}

int dsec_cli_exit(int status)
{
	if (dsec_close_stdout() < 0) {
		/* a failure already said why (and the write that failed said so) */
		if (status == DSEC_EXIT_OK && !dsec_stop_sig)
			dsec_errorx("write to stdout failed");
		status = DSEC_EXIT_FATAL;
	}
	if (dsec_stop_sig) { /* stopped early by a signal: end by it, as the caller expects */
		signal(dsec_stop_sig, SIG_DFL);
		stop_block(SIG_UNBLOCK);
		raise(dsec_stop_sig);
	}
	return status;
}

volatile sig_atomic_t dsec_stop_sig;
static volatile sig_atomic_t stop_held, nworkers;
static pid_t workers[256];

static void on_stop(int sig)
{
	int e = errno;

	dsec_stop_sig = sig;
	for (sig_atomic_t i = 0; i < nworkers; i++)
		kill(workers[i], sig);
	if (!stop_held) {
		/* nothing half made: end as the signal would have, once this handler returns */
		signal(sig, SIG_DFL);
		kill(getpid(), sig);
	}
	errno = e;
}

void dsec_stop_on_signals(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART}, old;

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], &sa, &old) == 0 && old.sa_handler == SIG_IGN)
			sigaction(sigs[i], &old, NULL); /* nohup's stays ignored */
}

void dsec_stop_hold(int on)
{
	stop_held = on;
}

static void stop_block(int how)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(how, &set, NULL);
}

pid_t dsec_fork_worker(void)
{
	pid_t parent = getpid(), pid;

	stop_block(SIG_BLOCK); /* a stop signal reaches every worker, this one too */
	pid = fork();
	if (pid == 0) {
		nworkers = 0;
		stop_block(SIG_UNBLOCK);
		/* the parent may have gone before the signal was armed */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(DSEC_EXIT_FATAL);
		return 0;
	}
	if (pid > 0 && nworkers < (sig_atomic_t)(sizeof(workers) / sizeof(workers[0])))
		workers[nworkers++] = pid;
	stop_block(SIG_UNBLOCK);
	return pid;
}
