/* What every tool shares on its command line: -h/--help, -V/--version, -q, -v, --root, --run,
 * the exit statuses, and the loop over records from argv or standard input. */
#ifndef DSEC_CLI_H
#define DSEC_CLI_H

#include <getopt.h>
#include <signal.h>
#include <jansson.h>
#include <sys/types.h>

#include "err.h"
#include "state.h"

#define DSEC_VERSION "0.1.0"

enum {
	DSEC_EXIT_OK = 0,     /* every record done */
	DSEC_EXIT_FAILED = 1, /* finished, some record failed */
	DSEC_EXIT_USAGE = 2,  /* bad command line */
	DSEC_EXIT_FATAL = 3,  /* state dir, lock, stdout */
};

/* Long-only option codes shared by all tools (beyond any tool's own short letters). */
enum {
	DSEC_OPT_ROOT = 0x1000,
	DSEC_OPT_RUN,
	DSEC_OPT_FIRST_TOOL, /* a tool numbers its own long-only options from here */
};

#define DSEC_COMMON_LONGOPTS                                                                       \
	{"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'},                     \
	    {"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},                \
	    {"root", required_argument, NULL, DSEC_OPT_ROOT},                                      \
	{                                                                                          \
		"run", required_argument, NULL, DSEC_OPT_RUN                                       \
	}

struct dsec_cli {
	const char *root_opt, *run_opt;
	const char *help; /* the whole --help text */
};

/* Handle a common option c (from getopt_long). Returns 1 when handled, 0 when c is not a
 * common option. Exits for --help, --version and '?'. */
int dsec_cli_common(struct dsec_cli *cli, int c, const char *optarg_);

/* Print "tool: error: msg" and "Try 'tool --help'" and exit 2. */
__attribute__((noreturn, format(printf, 1, 2))) void dsec_usage_error(const char *fmt, ...);

/* First thing in main: a closed stdin, stdout or stderr is made /dev/null opened read-only,
 * so no descriptor made later (the run dir's lock, a state file) takes its number and gets
 * records or messages; a write to a closed stdout still fails (EBADF), as it should. */
void dsec_stdio_reserve(void);

/* Print err and exit 3 (fatal). */
__attribute__((noreturn)) void dsec_fatal(const struct dsec_err *err);

/* Resolve --root/--run or exit 3. */
void dsec_cli_paths(struct dsec_cli *cli, struct dsec_paths *paths);

/* SIGINT, SIGTERM and SIGHUP (unless ignored) end the tool at once, as by default, except
 * while it holds (dsec_stop_hold(1)): making a sandbox, or waiting for the workers that do.
 * Then they only set dsec_stop_sig; the tool stops before its next sandbox and
 * dsec_cli_exit ends it by that signal, so an interrupt leaves nothing half made. Each is
 * passed on to the workers of dsec_fork_worker. */
extern volatile sig_atomic_t dsec_stop_sig;
void dsec_stop_on_signals(void);
void dsec_stop_hold(int on);

/* fork() for a worker of a tool's -j: the child dies with the tool (SIGKILL when its parent
 * goes, also by kill -9), so a killed tool leaves what --orphans takes, not workers going on.
 * Returns as fork() does. */
pid_t dsec_fork_worker(void);

/* Finish: close stdout (failure → 3, said on stderr unless status already is a failure),
 * else return status. */
int dsec_cli_exit(int status);

#endif
