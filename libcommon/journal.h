/* The trajectory journal of dsec-exec (--journal FILE): every step a record runs is appended to
 * a JSON-lines file, durably, so that a pipeline preempted half-way and started again with the
 * same records answers the steps that completed from the journal instead of running them twice.
 * The format is in dsec-journal(5).
 *
 * A step is named by the record's "traj" (string or integer, compared as text) and "step"
 * (integer or string); without "step" by its ordinal among the records of that trajectory in the
 * input (0, 1, ...); without "traj" the trajectory is the record's sandbox id. Two entries per
 * step, each one write(2) on an O_APPEND descriptor: "start", synced (fdatasync(2)) before the
 * command runs, and "done" with the whole "exec" result, synced before the record is passed on
 * (one fdatasync for all the steps that finished together). A "start"
 * without its "done" is a step that may have run: it is reported, not run again, unless the
 * journal was opened with DSEC_JOURNAL_RERUN. One dsec-exec at a time uses a journal (flock);
 * its -j commands share it, and entries never interleave.
 *
 * Not thread-safe; a journal handle belongs to one process (it is CLOEXEC). */
#ifndef DSEC_JOURNAL_H
#define DSEC_JOURNAL_H

#include <jansson.h>
#include <stdint.h>

#include "err.h"
#include "sandbox.h"
#include "state.h"

#define DSEC_JOURNAL_VERSION 1

enum {
	DSEC_JOURNAL_RERUN = 1, /* run unfinished steps again instead of reporting them */
	DSEC_JOURNAL_REBUILD =
	    2, /* a gone sandbox is rebuilt from its image (dsec_journal_rebuild) */
	DSEC_JOURNAL_NOSYNC = 4, /* no fdatasync (tests and benchmarks only: not durable) */
};

struct dsec_journal;
struct dsec_journal_step;

/* Open (create 0600 when missing) and load the journal at path, waiting for its lock when
 * another process holds it (said once on stderr). A torn last line (a crash in the middle of an
 * append) is cut off with one warning; a malformed line before it, or a file that is not a dsec
 * journal, is an error. Returns the handle or NULL with err. */
struct dsec_journal *dsec_journal_open(const char *path, int flags, struct dsec_err *err);

/* Release the lock and everything; steps still in flight are left unfinished in the file. */
void dsec_journal_close(struct dsec_journal *j);

/* How many steps the journal knows as done, as started and not done (loaded and appended). */
void dsec_journal_counts(const struct dsec_journal *j, unsigned long *done,
			 unsigned long *unfinished);

/* The sandbox a record naming id should use now: the one that replaced it by a rebuild (this run
 * or an earlier one), or id itself. Static storage of the journal. */
const char *dsec_journal_current(struct dsec_journal *j, const char *id);

/* Look up the step of rec (borrowed), whose sandbox is id (the record's "id" as it came in) and
 * command cmd. Call once per record, in input order (the ordinals count here). Returns
 *   1  the step completed before. With line NULL, rec got its recorded "exec" with
 *      "replayed":true added. Otherwise *line is the whole record to print, rec with that
 *      "exec", as one line of compact JSON without its newline (valid until the next call),
 *      made from the journal's text without parsing it, and rec is left as it was;
 *   0  run it: *step is the handle for dsec_journal_start / _done / _abort;
 *  -1  the record fails with err: bad "traj"/"step", the same step recorded with another
 *      command (EEXIST), the step already running (EBUSY), or started and never finished
 *      (EINPROGRESS, unless DSEC_JOURNAL_RERUN). */
int dsec_journal_lookup(struct dsec_journal *j, json_t *rec, const char *id, json_t *cmd,
			const char **line, struct dsec_journal_step **step, struct dsec_err *err);

/* What a step runs, as far as a rebuild needs it to run it again. */
struct dsec_journal_spec {
	json_t *cmd;         /* array of strings */
	char *const *optenv; /* "K=V" (or "K": the host's value) from the options, or NULL */
	json_t *recenv;      /* the record's "env" object, set after optenv, or NULL */
	const char *cwd;     /* NULL = "/" */
	const char *user;    /* "USER[:GROUP]", NULL = root inside */
	const char *stdin_s; /* NULL = none */
	size_t stdin_len;
	uint64_t timeout_us; /* 0 = none */
	uint64_t max_output; /* per stream */
};

/* The step is about to run in sb: append its "start" entry (and, the first time, the sandbox's:
 * image, limits, net, env, hostname), durably. 0, or -1 with err: the journal cannot be written
 * and nothing may run (fatal for the caller). */
int dsec_journal_start(struct dsec_journal *j, struct dsec_journal_step *step,
		       const struct dsec_sandbox *sb, const struct dsec_journal_spec *spec,
		       struct dsec_err *err);

/* The step finished with result exec (borrowed): append its "done" entry, not yet synced: the
 * caller calls dsec_journal_sync before it passes the record on, once for all the steps that
 * finished meanwhile (group commit). 0 or -1 (fatal). The handle is spent either way. */
int dsec_journal_done(struct dsec_journal *j, struct dsec_journal_step *step, json_t *exec,
		      struct dsec_err *err);

/* Make every entry appended so far durable (fdatasync, when anything was appended since the
 * last one). 0 or -1 (fatal). */
int dsec_journal_sync(struct dsec_journal *j, struct dsec_err *err);

/* The step could not be started (nothing ran): append an "abort" entry, so a later run tries it
 * again. Also for a step looked up but never started (start not called). The handle is spent. */
int dsec_journal_abort(struct dsec_journal *j, struct dsec_journal_step *step, const char *why,
		       struct dsec_err *err);

/* The sandbox id (a record's, or the one that replaced it) is gone: spawn a fresh one from the
 * image the journal recorded for it, with the same limits, net, env and hostname, run the
 * completed steps of its trajectories again in journal order (synchronously) to restore its
 * state, compare each result with the recorded one (exit, signal, stdout, stderr), append a
 * "rebuild" entry and make the new sandbox the current one for id. *report gets
 * {"from":…,"id":…,"image":…,"steps":N,"differ":[{"traj":…,"step":…,"fields":[…]}]} (new
 * reference). Returns 0; 1 when the journal was not opened with DSEC_JOURNAL_REBUILD (nothing
 * done); -1 with err (ENOENT: the journal knows no image for id; nothing of a new sandbox is
 * left). Forks; the caller must be single-threaded. */
int dsec_journal_rebuild(struct dsec_journal *j, const struct dsec_paths *paths, const char *id,
			 json_t **report, struct dsec_err *err);

#endif
