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
		if (status == DSEC_EXIT_OK)
			dsec_errorx("write to stdout failed");
		return DSEC_EXIT_FATAL;
	}
	return status;
}

pid_t dsec_fork_worker(void)
{
	pid_t parent = getpid(), pid = fork();

	/* the parent may have gone before the signal was armed */
	if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent))
		_exit(DSEC_EXIT_FATAL);
	return pid;
}
