/* Running a command inside a sandbox. Exec enters, it does not ask: nothing in the sandbox is
 * talked to or trusted. The caller points the pid namespace of its future children at the
 * holder's (setns(pidfd, CLONE_NEWPID)), clone3s the command straight into it (and on v2 into
 * the cgroup: CLONE_INTO_CGROUP), and goes back to its own; the command's process joins the
 * cgroup (v1: each hierarchy's tasks file) and every other namespace of the holder at once
 * (setns on the holder's pidfd). One clone per exec, and the command is the caller's own child:
 * wait4() gives its status and rusage. On x86_64 the clone shares the caller's memory and the
 * caller waits until the exec (CLONE_VM | CLONE_VFORK, as posix_spawn does): no page tables
 * copied, no copy-on-write faults. Before exec the command's process closes every inherited
 * descriptor, resets signals, sets no_new_privs and drops capabilities to dsec's default set.
 * Setup errors come back whole (struct dsec_err) over a CLOEXEC socket, the crun way.
 *
 * Killing the whole tree: an exec made killable gets a cgroup of its own below the sandbox's
 * (v2: <sandbox>/exec-<n>, killed with cgroup.kill; v1: freezer/<sandbox>/exec-<n>, frozen,
 * every task SIGKILLed, thawed; without a freezer, pids/<sandbox>/exec-<n> killed in rounds until
 * empty). setsid() or ignoring SIGTERM does not get a process out of it. */
#ifndef DSEC_EXEC_H
#define DSEC_EXEC_H

#include <jansson.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include "exec-guard.h"

#include "err.h"
#include "sandbox.h"
#include "state.h"

#define DSEC_EXEC_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define DSEC_EXEC_HOME "/root"

/* What dsec_exec_start returns besides 0: */
enum {
	DSEC_EXEC_FAILED = -1,     /* dsec could not set up the command (foreground exit 125) */
	DSEC_EXEC_CANNOT_RUN = -2, /* the command could not be run (EACCES, ENOEXEC, a bad
				    * cwd): foreground exit 126 */
	DSEC_EXEC_NOT_FOUND = -3,  /* the command was not found: foreground exit 127 */
};

/* A sandbox opened for exec: its state and a pidfd of its holder. */
struct dsec_exec_target {
	struct dsec_sandbox sb;
	int pidfd;
	int nsflags;
	int cgprocs[DSEC_CG_NCTRL]; /* v1: tasks file of each controller (freezer too), or -1 */
	int cgdir;                  /* v2: the sandbox's cgroup dir, or -1 */
	struct stat state;          /* its state file when opened: a new one means reopen */
};

/* Prepare the policy every command gets before exec: dsec's default capabilities and the
 * seccomp profile at seccomp_profile (NULL: the built-in default, dsec-seccomp(5)). Called by
 * dsec_exec_start when nothing was prepared. 0 or -1. Not safe after fork. */
int dsec_exec_policy(const char *seccomp_profile, struct dsec_err *err);

/* Load sandbox id and open its holder. Returns 0; -1 with errnum ENOENT (no such sandbox) or
 * ESRCH (holder gone). Release with dsec_exec_target_close. Not safe after fork. */
int dsec_exec_target_open(const struct dsec_paths *p, const char *id, struct dsec_exec_target *t,
			  struct dsec_err *err);
void dsec_exec_target_close(struct dsec_exec_target *t);

/* Is an open target still the sandbox its id names, fit for another command? 1 when its holder
 * lives and its state file is the one read at open (a reset, resize or commit replaces it);
 * a paused sandbox is resumed first, as at open. 0 when it is stale: close it and open the id
 * again. For callers that keep targets open across records. */
int dsec_exec_target_fresh(struct dsec_exec_target *t);

/* Who a command runs as (dsec-exec --user), resolved in the sandbox. */
#define DSEC_EXEC_USER_GROUPS 64
struct dsec_exec_user {
	uid_t uid; /* ids inside the sandbox's user namespace */
	gid_t gid;
	size_t ngroups; /* supplementary groups: gid first, then /etc/group's that list the user */
	gid_t groups[DSEC_EXEC_USER_GROUPS];
	char home[512]; /* from /etc/passwd, "/" without an entry */
};

/* Resolve "USER[:GROUP]" (names or numeric ids) in sb's /etc/passwd and /etc/group, read from
 * inside the sandbox (its holder must be alive): a name must be there, a numeric uid need not
 * (group 0 and home "/" then). Ids the sandbox's user namespace does not map are refused
 * (ERANGE). 0, or -1 with err. dsec-spawn checks its --user with this too. */
int dsec_exec_user_resolve(const struct dsec_sandbox *sb, const char *spec,
			   struct dsec_exec_user *u, struct dsec_err *err);

struct dsec_exec_spec {
	char *const *argv; /* argv[0] without '/' is searched in the PATH of envp, in the sandbox */
	char *const *envp; /* the whole environment (see dsec_env_*) */
	const char *cwd;   /* resolved inside the sandbox; relative to "/"; NULL = the sandbox's
			    * working dir (sb.workdir; "/" while it is missing), else "/" */
	int fd[3]; /* host fds that become the command's 0, 1, 2 (-1: /dev/null); not closed */
	int tty;   /* allocate a pty in the sandbox's devpts; fd[] is then ignored */
	struct winsize ws; /* tty: initial window size (0 rows = leave it) */
	int killable;      /* give it its own cgroup, so dsec_exec_kill gets every process */
	const struct dsec_exec_user *user; /* run as this user (NULL: root inside) */
	/* Instead of exec: call fn(arg) in the fully set up process (namespaces, cgroup, fds,
	 * capabilities, no_new_privs) and exit 0 when it returns 0, else 1. Start returns once the
	 * setup is done. For dsec-exec cp: file work done as the sandbox, inside it. */
	int (*fn)(void *arg);
	void *arg;
};

struct dsec_exec_proc {
	pid_t pid; /* host pid of the command, a child of the caller */
	int pidfd; /* readable once it exited */
	int ptm;   /* tty: the pseudo-terminal master (from the sandbox's devpts), else -1 */
	uint64_t start_us;              /* monotonic, taken before the first fork */
	int cgver;                      /* per-exec cgroup: 0 none, 1, 2 */
	int cgctrl;                     /* v1: its hierarchy (DSEC_CG_FREEZER, else DSEC_CG_PIDS) */
	char cg[DSEC_CG_PATH_MAX + 40]; /* its dir */
	char cgpar[DSEC_CG_PATH_MAX];   /* the sandbox cgroup it sits in (same hierarchy) */
	int reaped;
	int killed;              /* dsec_exec_kill ran: nothing is moved out of its cgroup */
	char statedir[PATH_MAX]; /* the sandbox's, touched when the command ends (idle time) */
};

/* Start spec in t. On success fills pr and returns 0: the command runs (its exec succeeded).
 * The start and the release each mark the sandbox active (dsec_sandbox_touch), for
 * dsec-reap --idle.
 * Otherwise DSEC_EXEC_FAILED, _CANNOT_RUN or _NOT_FOUND with err set; nothing is left running.
 * Forks; the caller must be single-threaded, have 0, 1 and 2 open and not ignore SIGCHLD. */
int dsec_exec_start(struct dsec_exec_target *t, const struct dsec_exec_spec *spec,
		    struct dsec_exec_proc *pr, struct dsec_err *err);

/* Kill every process of the exec: its cgroup when killable, else only the command. 0 or -1. */
int dsec_exec_kill(struct dsec_exec_proc *pr, struct dsec_err *err);

/* Reap the command: wait4 (blocking unless nohang). Returns 1 when reaped (status, ru filled),
 * 0 when still running (nohang), -1 on error. */
int dsec_exec_wait(struct dsec_exec_proc *pr, int nohang, int *status, struct rusage *ru,
		   struct dsec_err *err);

/* Release what start made: remove the per-exec cgroup (processes the command left running are
 * moved to the sandbox's cgroup first), close fds. Kills and reaps the command when it still
 * runs. */
void dsec_exec_release(struct dsec_exec_proc *pr);

/* An environment: "K=V" strings, later settings replace earlier ones of the same name. */
struct dsec_env {
	char **v; /* NULL-terminated */
	size_t n, cap;
};
/* Set "K=V" (copied). "K" alone takes K's value from the host environment, or is skipped when
 * unset there. 0, or -1 with EINVAL for an empty or '='-leading name. */
int dsec_env_put(struct dsec_env *e, const char *kv, struct dsec_err *err);
int dsec_env_set(struct dsec_env *e, const char *k, const char *v, struct dsec_err *err);
/* The defaults (PATH, HOME, HOSTNAME) then the sandbox's own env. */
int dsec_env_init(struct dsec_env *e, const struct dsec_sandbox *sb, struct dsec_err *err);
/* A command's environment when it runs as user (NULL: the sandbox's default user, its image's
 * or dsec-spawn --user's, else root inside): dsec_env_init, and for a user, that user resolved
 * into *who (dsec_exec_user_resolve) with its HOME unless the sandbox's own environment sets
 * HOME. *as gets who, or NULL for root inside, for dsec_exec_spec.user. The caller's settings
 * (-e, a record's "env") go on top. 0 or -1 with err. */
int dsec_exec_env_as(const struct dsec_exec_target *t, const char *user, struct dsec_env *env,
		     struct dsec_exec_user *who, const struct dsec_exec_user **as,
		     struct dsec_err *err);
void dsec_env_free(struct dsec_env *e);

/* Output captured up to max bytes; the rest is read and dropped (truncated set). */
struct dsec_capture {
	char *buf;
	size_t len, cap, max;
	int truncated;
};
/* Read fd (non-blocking) until EAGAIN or EOF, at most 1 MiB per call. Returns 0 at EOF, 1 at
 * EAGAIN, 2 when it stopped with more to read, -1 on error. */
int dsec_capture_read(struct dsec_capture *c, int fd, struct dsec_err *err);
void dsec_capture_free(struct dsec_capture *c);

/* A JSON string of bytes that may not be UTF-8: each invalid sequence becomes U+FFFD (one per
 * maximal invalid subpart, as Unicode recommends); NUL bytes are kept (\u0000). New reference. */
json_t *dsec_utf8_json(const char *s, size_t len);

/* The same, cut where the string as written in JSON (quotes and escapes included) would pass
 * max bytes: *cut 1 then (when not NULL); *size (when not NULL) is what it takes written. */
json_t *dsec_utf8_json_max(const char *s, size_t len, size_t max, size_t *size, int *cut);

/* "SIGKILL" for 9; static storage. */
const char *dsec_signame(int sig);

/* Records (execrec.c): for each JSON record read from infd, run a command in the sandbox the
 * record's "id" names, up to `jobs` at once in one poll loop, and emit the record with
 * "exec":{…} added as the commands finish (input order with keep_order). The record may bring
 * its own "cmd" (array), "sh" (string), "stdin", "env" (object), "cwd" and "timeout" (duration
 * string or seconds); they override the options. Records carrying an "error" pass through
 * untouched; unknown ids, dead sandboxes, malformed lines and commands that cannot be run become
 * error records and the rest go on. */
struct dsec_execrec_opts {
	const struct dsec_paths *paths;
	unsigned jobs;
	int keep_order;
	uint64_t timeout_us; /* 0 = none */
	uint64_t max_output; /* per stream */
	char *const *argv;   /* default command; NULL = each record brings one */
	char *const *env; /* "K=V" settings after the sandbox's env, NULL-terminated; may be NULL */
	const char *cwd;  /* default cwd; NULL = "/" */
	const char *user; /* default user, "USER[:GROUP]" (dsec_exec_user_resolve); NULL = root */
	const char *tool; /* names the tool in error objects */
	/* trajectory journal (journal.h) or NULL: steps that completed are answered from it,
	 * the others are recorded in it; a gone sandbox is rebuilt when the journal says so */
	struct dsec_journal *journal;
};

/* Run the loop until infd's end and every command has finished. Returns the number of failed
 * records, or -1 with err on a fatal error (stdout gone: every running command is killed). */
long dsec_execrec_run(const struct dsec_execrec_opts *o, int infd, struct dsec_err *err);

/* Copying (cp.c), docker cp style: a file or a tree; when dst is an existing directory the copy
 * goes into it under src's name, else it is created as dst. The sandbox side of the work runs
 * inside the sandbox as a contained process (dsec_exec_start with fn), so no host path is ever
 * resolved through the sandbox's symlinks. src "-" (cp_in): a tar stream on standard input,
 * unpacked into the directory dst. dst "-" (cp_out): src as a tar stream on standard output.
 * On the host, cp_out refuses absolute names, "..", links through symlinks, hard links and
 * device nodes from the sandbox, and never restores setuid bits or owners; a dst that is a
 * symbolic link to a directory is refused unless written with a trailing '/' (a link to
 * anything else is replaced); a failed cp_out removes what it created. The sandbox side moving
 * nothing for 30 s (DSEC_CP_STALL_S), or the whole copy taking over timeout_us (0 = no limit),
 * kills it and fails the copy. 0 or -1. */
int dsec_cp_in(struct dsec_exec_target *t, const char *src, const char *dst, uint64_t timeout_us,
	       struct dsec_err *err);
int dsec_cp_out(struct dsec_exec_target *t, const char *src, const char *dst, uint64_t timeout_us,
		struct dsec_err *err);

#endif
