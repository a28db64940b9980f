/* The record loop of dsec-exec: many commands at once over one poll(2), no thread per stream. */
#include "exec.h"
#include "resource.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "journal.h"
#include "jsonl.h"

struct tcache {
	struct dsec_exec_target t;
	int used, refs, stale; /* stale: replaced, closed once its running commands end */
	uint64_t last;
};

struct job {
	int used;
	unsigned long seq;
	json_t *rec;
	json_t *cmd;
	struct tcache *tc;
	struct dsec_exec_proc pr;
	int out, errfd, in, exited, status, timed_out;
	struct dsec_capture cout, cerr;
	char *stdin_buf;
	size_t stdin_len, stdin_off;
	uint64_t deadline;
	struct rusage ru;
	int64_t oom0; /* the sandbox's OOM kill count when it started (-1 unknown) */
	struct dsec_journal_step *js; /* its step in the journal, or NULL */
	size_t in_len;                /* the record's line as read */
};

struct done {
	unsigned long seq;
	json_t *rec;
};

struct loop {
	const struct dsec_execrec_opts *o;
	struct tcache *cache;
	size_t ncache;
	struct job *jobs;
	unsigned running;
	long failed;
	unsigned long seq_in, seq_out;
	struct done *done; /* keep_order: finished records waiting for their turn */
	size_t ndone, capdone;
	/* input */
	int infd, ieof;
	char *ibuf;
	size_t ioff, ilen, icap, max_line; /* pending input: ibuf[ioff..ilen) */
	unsigned long lineno;
	size_t rec_len; /* the line of the record take_record gave last */
	int skipping;   /* inside a line that is too long */
	char *obuf;     /* replayed records (whole lines) not yet written */
	size_t olen, ocap;
	struct done *durable; /* finished steps waiting for their journal entry to be synced */
	size_t ndurable, capdurable;
};

/* ---- output ---- */

/* Write the replayed records gathered in obuf: whole lines, in one write(2) if it can, so a
 * diagnostic on stderr never lands in the middle of a record. Called before anything else is
 * printed (records or diagnostics) and before the loop waits. */
static int flush_output(struct loop *L, struct dsec_err *err)
{
	size_t off = 0;

	if (!L->olen)
		return 0;
	if (fflush(stdout) == EOF)
		return dsec_err_sys(err, "write to stdout");
	while (off < L->olen) {
		ssize_t n = write(STDOUT_FILENO, L->obuf + off, L->olen - off);

		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = {STDOUT_FILENO, POLLOUT, 0};

			poll(&p, 1, -1);
		} else if (n < 0 && errno != EINTR) {
			L->olen = 0;
			return dsec_err_sys(err, "write to stdout");
		} else if (n > 0)
			off += (size_t)n;
	}
	L->olen = 0;
	return 0;
}

/* A record answered from the journal, in no time: gathered in obuf (reference to rec stolen),
 * as many come at once; with keep_order it takes its turn like the others. */
static int output_replayed(struct loop *L, unsigned long seq, json_t *rec, const char *line,
			   struct dsec_err *err);

static int emit_ready(struct loop *L, struct dsec_err *err)
{
	size_t i;

	for (i = 0; i < L->ndone;) {
		if (L->done[i].seq != L->seq_out) {
			i++;
			continue;
		}
		if (dsec_jsonl_emit(L->done[i].rec, err) < 0)
			return -1;
		json_decref(L->done[i].rec);
		L->done[i] = L->done[--L->ndone];
		L->seq_out++;
		i = 0;
	}
	return 0;
}

/* Hand a finished record (reference stolen) to the output. */
static int output(struct loop *L, unsigned long seq, json_t *rec, struct dsec_err *err)
{
	int r;

	if (flush_output(L, err) < 0) {
		json_decref(rec);
		return -1;
	}
	if (!L->o->keep_order) {
		r = dsec_jsonl_emit(rec, err);
		json_decref(rec);
		return r;
	}
	if (L->ndone == L->capdone) {
		size_t nc = L->capdone ? L->capdone * 2 : 64;
		struct done *nd = realloc(L->done, nc * sizeof(*nd));

		if (!nd) {
			json_decref(rec);
			return dsec_err_set(err, ENOMEM, "output queue");
		}
		L->done = nd;
		L->capdone = nc;
	}
	L->done[L->ndone++] = (struct done){seq, rec};
	return emit_ready(L, err);
}

/* A journaled step finished: its record (reference stolen) waits for release_durable, so that
 * the steps finishing together share one fdatasync. */
static int hold_durable(struct loop *L, unsigned long seq, json_t *rec, struct dsec_err *err)
{
	if (L->ndurable == L->capdurable) {
		size_t nc = L->capdurable ? L->capdurable * 2 : 16;
		struct done *nd = realloc(L->durable, nc * sizeof(*nd));

		if (!nd) {
			json_decref(rec);
			return dsec_err_set(err, ENOMEM, "output queue");
		}
		L->durable = nd;
		L->capdurable = nc;
	}
	L->durable[L->ndurable++] = (struct done){seq, rec};
	return 0;
}

/* Sync the journal and pass the held records on. Called before the loop waits. */
static int release_durable(struct loop *L, struct dsec_err *err)
{
	size_t i;

	if (!L->ndurable)
		return 0;
	if (dsec_journal_sync(L->o->journal, err) < 0)
		return -1;
	for (i = 0; i < L->ndurable; i++) {
		struct done d = L->durable[i];

		L->durable[i].rec = NULL;
		if (output(L, d.seq, d.rec, err) < 0) {
			while (++i < L->ndurable)
				json_decref(L->durable[i].rec);
			L->ndurable = 0;
			return -1;
		}
	}
	L->ndurable = 0;
	return 0;
}

static int output_replayed(struct loop *L, unsigned long seq, json_t *rec, const char *line,
			   struct dsec_err *err)
{
	char *dumped = NULL;
	size_t n;

	if (L->o->keep_order)
		return output(L, seq, rec, err);
	if (!line && !(line = dumped = json_dumps(rec, JSON_COMPACT))) {
		json_decref(rec);
		return dsec_err_set(err, ENOMEM, "encode record");
	}
	json_decref(rec);
	n = strlen(line);
	if (L->olen + n + 1 > L->ocap) {
		size_t nc = (L->olen + n + 1) * 2;
		char *nb = realloc(L->obuf, nc);

		if (!nb) {
			free(dumped);
			return dsec_err_set(err, ENOMEM, "output buffer");
		}
		L->obuf = nb;
		L->ocap = nc;
	}
	memcpy(L->obuf + L->olen, line, n);
	L->obuf[L->olen + n] = '\n';
	L->olen += n + 1;
	free(dumped);
	return L->olen >= 65536 ? flush_output(L, err) : 0;
}

static int fail_record(struct loop *L, unsigned long seq, json_t *rec, const struct dsec_err *e,
		       struct dsec_err *err)
{
	if (flush_output(L, err) < 0) {
		json_decref(rec);
		return -1;
	}
	L->failed++;
	if (dsec_verbose >= 0)
		dsec_errorx("%s", e->msg);
	return output(L, seq, dsec_jsonl_set_error(rec, e, L->o->tool), err);
}

/* ---- sandboxes, opened once per stream ---- */

static void target_drop(struct tcache *c)
{
	if (c->used && !c->refs) {
		dsec_exec_target_close(&c->t);
		c->used = 0;
	}
}

static struct tcache *target_get(struct loop *L, const char *id, struct dsec_err *err)
{
	struct tcache *free_slot = NULL, *lru = NULL;
	size_t i;

	for (i = 0; i < L->ncache; i++) {
		struct tcache *c = &L->cache[i];

		if (c->used && !c->stale && !strcmp(c->t.sb.id, id)) {
			/* open since an earlier record: still the sandbox the id names? (reaped,
			 * reset or paused since) */
			if (dsec_exec_target_fresh(&c->t)) {
				c->last = dsec_now_us();
				return c;
			}
			if (c->refs)
				c->stale = 1;
			else
				target_drop(c);
		}
		if (!c->used && !free_slot)
			free_slot = c;
		if (c->used && !c->refs && (!lru || c->last < lru->last))
			lru = c;
	}
	if (!free_slot) {
		if (!lru)
			return dsec_err_set(err, EAGAIN, "%s: too many sandboxes in flight", id),
			       NULL;
		dsec_exec_target_close(&lru->t);
		lru->used = 0;
		free_slot = lru;
	}
	if (dsec_exec_target_open(L->o->paths, id, &free_slot->t, err) < 0)
		return NULL;
	free_slot->used = 1;
	free_slot->refs = free_slot->stale = 0;
	free_slot->last = dsec_now_us();
	return free_slot;
}

/* ---- one record ---- */

static char **argv_of(json_t *cmd)
{
	size_t n = json_array_size(cmd), i;
	char **v = calloc(n + 1, sizeof(*v));

	for (i = 0; v && i < n; i++)
		v[i] = (char *)json_string_value(json_array_get(cmd, i));
	return v;
}

/* The command of a record: its "cmd" or "sh", else the options' argv. New reference or NULL. */
static json_t *command_of(struct loop *L, json_t *rec, struct dsec_err *err)
{
	json_t *cmd = json_object_get(rec, "cmd"), *sh = json_object_get(rec, "sh"), *v;
	size_t i;

	if (cmd && sh)
		return dsec_err_set(err, EINVAL, "record has both \"cmd\" and \"sh\""), NULL;
	if (sh) {
		if (!json_is_string(sh))
			return dsec_err_set(err, EINVAL, "\"sh\" is not a string"), NULL;
		return json_pack("[s,s,O]", "/bin/sh", "-c", sh);
	}
	if (cmd) {
		if (!json_is_array(cmd) || !json_array_size(cmd))
			return dsec_err_set(err, EINVAL, "\"cmd\" is not a non-empty array"), NULL;
		json_array_foreach(cmd, i, v) if (!json_is_string(v)) return dsec_err_set(
		    err, EINVAL, "\"cmd\"[%zu] is not a string", i),
		    NULL;
		return json_incref(cmd);
	}
	if (!L->o->argv || !L->o->argv[0])
		return dsec_err_set(err, EINVAL,
				    "no command: none given and the record has no "
				    "\"cmd\" or \"sh\""),
		       NULL;
	cmd = json_array();
	for (i = 0; L->o->argv[i]; i++)
		json_array_append_new(cmd, json_string(L->o->argv[i]));
	return cmd;
}

/* The command's environment as user (dsec_exec_env_as), then the options', then the
 * record's "env". */
static int record_env(struct loop *L, struct dsec_env *env, const struct dsec_exec_target *t,
		      const char *user, struct dsec_exec_user *who,
		      const struct dsec_exec_user **as, json_t *rec, struct dsec_err *err)
{
	json_t *e = json_object_get(rec, "env"), *v;
	const char *k;
	size_t i;

	if (dsec_exec_env_as(t, user, env, who, as, err) < 0)
		return -1;
	for (i = 0; L->o->env && L->o->env[i]; i++)
		if (dsec_env_put(env, L->o->env[i], err) < 0)
			return -1;
	if (!e)
		return 0;
	if (!json_is_object(e))
		return dsec_err_set(err, EINVAL, "\"env\" is not an object");
	json_object_foreach(e, k, v)
	{
		if (!json_is_string(v))
			return dsec_err_set(err, EINVAL, "\"env\".%s is not a string", k);
		if (dsec_env_set(env, k, json_string_value(v), err) < 0)
			return -1;
	}
	return 0;
}

/* The record's "run_as" (a string, or a uid as a number) or the option's; NULL: root. Not
 * "user": pipelines carry that key for their own ends (a chat turn, a person). */
static int record_user(struct loop *L, json_t *rec, char *buf, size_t n, const char **user,
		       struct dsec_err *err)
{
	json_t *u = json_object_get(rec, "run_as");

	*user = L->o->user;
	if (!u || json_is_null(u))
		return 0;
	if (!(*user = dsec_user_json(u, buf, n)))
		return dsec_err_set(err, EINVAL, "\"run_as\" is not a user name or a uid");
	return 0;
}

static int record_timeout(struct loop *L, json_t *rec, uint64_t *us, struct dsec_err *err)
{
	json_t *t = json_object_get(rec, "timeout");

	*us = L->o->timeout_us;
	if (!t || json_is_null(t))
		return 0;
	if (json_is_string(t))
		return dsec_parse_duration(json_string_value(t), 366ULL * 86400 * 1000000, us,
					   "\"timeout\"", err);
	if (json_is_number(t) && json_number_value(t) >= 0 &&
	    json_number_value(t) < 366.0 * 86400) {
		*us = (uint64_t)(json_number_value(t) * 1e6);
		return 0;
	}
	return dsec_err_set(err, EINVAL, "\"timeout\" is not a duration");
}

/* ---- the journal (journal.h) ---- */

/* Its say on rec before it runs: 1 answered from the journal (rec has its "exec", or *line is
 * the whole record to print), 0 run it (j->js set), -1 a failed record (e). A record naming a
 * sandbox that a rebuild replaced gets the new "id" and "rebuilt_from". */
static int journal_check(struct loop *L, struct job *j, json_t *rec, const char **line,
			 struct dsec_err *e)
{
	char id[DSEC_ID_MAX + 1];
	const char *cur;
	int r;

	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(rec, "id")));
	cur = dsec_journal_current(L->o->journal, id);
	if (strcmp(cur, id)) {
		json_object_set_new(rec, "id", json_string(cur));
		json_object_set_new(rec, "rebuilt_from", json_string(id));
	}
	*line = NULL;
	r = dsec_journal_lookup(L->o->journal, rec, id, j->cmd, L->o->keep_order ? NULL : line,
				&j->js, e);
	return r < 0 ? dsec_err_wrap(e, "%s", id) : r;
}

/* rec's sandbox is gone: rebuild it from the journal when asked (--rebuild). 0 when rec now names
 * the new one (with "rebuild":{…}), -1 otherwise (e keeps why it was gone, or says why the
 * rebuild failed). */
static int journal_rebuild(struct loop *L, json_t *rec, struct dsec_err *e)
{
	json_t *report = NULL, *from;
	struct dsec_err e2 = {0};
	int r;

	if (!L->o->journal || (e->errnum != ENOENT && e->errnum != ESRCH))
		return -1;
	r = dsec_journal_rebuild(L->o->journal, L->o->paths,
				 json_string_value(json_object_get(rec, "id")), &report, &e2);
	if (r > 0)
		return -1;
	if (r < 0) {
		*e = e2;
		return -1;
	}
	if (!json_object_get(rec, "rebuilt_from")) {
		from = json_object_get(rec, "id");
		json_object_set(rec, "rebuilt_from", from);
	}
	json_object_set(rec, "id", json_object_get(report, "id"));
	json_object_set_new(rec, "rebuild", report);
	return 0;
}

static void journal_abort(struct loop *L, struct job *j, const struct dsec_err *why)
{
	struct dsec_err e;

	if (j->js && dsec_journal_abort(L->o->journal, j->js, why->msg, &e) < 0)
		dsec_warnx("%s", e.msg);
	j->js = NULL;
}

static void job_clear(struct job *j)
{
	if (j->out >= 0)
		close(j->out);
	if (j->errfd >= 0)
		close(j->errfd);
	if (j->in >= 0)
		close(j->in);
	dsec_capture_free(&j->cout);
	dsec_capture_free(&j->cerr);
	json_decref(j->cmd);
	json_decref(j->rec);
	if (j->tc)
		j->tc->refs--;
	memset(j, 0, sizeof(*j));
	j->out = j->errfd = j->in = -1;
}

/* Start rec in slot j. Returns 1 when started, 0 when the record was finished at once (passed
 * through or failed), -1 on a fatal error. */
static int job_start(struct loop *L, struct job *j, json_t *rec, unsigned long seq,
		     struct dsec_err *err)
{
	struct dsec_err e = {0};
	struct dsec_exec_spec s = {0};
	struct dsec_env env = {0};
	json_t *id = json_object_get(rec, "id"), *cwd = json_object_get(rec, "cwd"),
	       *in = json_object_get(rec, "stdin");
	int po[2] = {-1, -1}, pe[2] = {-1, -1}, pi[2] = {-1, -1}, r, retried = 0, rebuilt = 0;
	int fatal = 0;
	char **argv = NULL, ubuf[32];
	const char *user;
	struct dsec_exec_user who;
	uint64_t tmo;

	if (json_object_get(rec, "error"))
		return output(L, seq, rec, err) < 0 ? -1 : 0;
	memset(j, 0, sizeof(*j));
	j->out = j->errfd = j->in = -1;
	j->rec = rec;
	j->seq = seq;
	j->in_len = L->rec_len;
	if (!json_is_string(id)) {
		dsec_err_set(&e, EINVAL, "<stdin>:%lu: record without an \"id\"", L->lineno);
		goto bad;
	}
	j->cmd = command_of(L, rec, &e);
	if (!j->cmd) {
		dsec_err_wrap(&e, "%s", json_string_value(id));
		goto bad;
	}
	if ((cwd && !json_is_string(cwd)) || (in && !json_is_string(in) && !json_is_null(in))) {
		dsec_err_set(&e, EINVAL, "%s: \"%s\" is not a string", json_string_value(id),
			     cwd && !json_is_string(cwd) ? "cwd" : "stdin");
		goto bad;
	}
	if (record_timeout(L, rec, &tmo, &e) < 0 ||
	    record_user(L, rec, ubuf, sizeof(ubuf), &user, &e) < 0) {
		dsec_err_wrap(&e, "%s", json_string_value(id));
		goto bad;
	}
	if (L->o->journal) {
		const char *line;

		r = journal_check(L, j, rec, &line, &e);
		if (r < 0)
			goto bad;
		if (r > 0) { /* answered from the journal */
			j->rec = NULL;
			job_clear(j);
			return output_replayed(L, seq, rec, line, err) < 0 ? -1 : 0;
		}
		id = json_object_get(rec, "id");
	}
again:
	j->tc = target_get(L, json_string_value(id), &e);
	if (!j->tc) {
		if (!rebuilt && flush_output(L, err) < 0) {
			fatal = 1;
			goto bad;
		}
		if (!rebuilt && journal_rebuild(L, rec, &e) == 0) {
			rebuilt = 1;
			id = json_object_get(rec, "id");
			goto again;
		}
		goto bad;
	}
	j->tc->refs++;
	if (record_env(L, &env, &j->tc->t, user, &who, &s.user, rec, &e) < 0) {
		dsec_err_wrap(&e, "%s", json_string_value(id));
		goto bad;
	}
	argv = argv_of(j->cmd);
	if (!argv || pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 ||
	    (json_is_string(in) && pipe2(pi, O_CLOEXEC) < 0)) {
		dsec_err_sys(&e, "%s: pipe", json_string_value(id));
		goto bad;
	}
	s.argv = argv;
	s.envp = env.v;
	s.cwd = cwd ? json_string_value(cwd) : L->o->cwd;
	s.fd[0] = pi[0];
	s.fd[1] = po[1];
	s.fd[2] = pe[1];
	s.killable = tmo > 0;
	if (j->js) {
		struct dsec_journal_spec sp = {.cmd = j->cmd,
					       .optenv = L->o->env,
					       .recenv = json_object_get(rec, "env"),
					       .cwd = s.cwd,
					       .user = user,
					       .stdin_s = json_string_value(in),
					       .stdin_len = json_string_length(in),
					       .timeout_us = tmo,
					       .max_output = L->o->max_output};

		/* durable before the command runs: a crash from here on leaves it unfinished */
		if (dsec_journal_start(L->o->journal, j->js, &j->tc->t.sb, &sp, err) < 0) {
			fatal = 1;
			goto bad;
		}
	}
	j->oom0 = dsec_cgroup_oom_kills(&j->tc->t.sb);
	r = dsec_exec_start(&j->tc->t, &s, &j->pr, &e);
	close(po[1]);
	close(pe[1]);
	if (pi[0] >= 0)
		close(pi[0]);
	po[1] = pe[1] = pi[0] = -1;
	free(argv);
	argv = NULL;
	dsec_env_free(&env);
	if (r == DSEC_EXEC_FAILED && !retried && e.errnum != ETIME) {
		/* A cached sandbox may have died since: look again, once (not when the sandbox
		 * itself stalled the command: that costs its time again). */
		retried = 1;
		j->tc->refs--;
		target_drop(j->tc);
		j->tc = NULL;
		close(po[0]);
		close(pe[0]);
		if (pi[1] >= 0)
			close(pi[1]);
		po[0] = pe[0] = pi[1] = -1;
		goto again;
	}
	if (r < 0) {
		if (r == DSEC_EXEC_CANNOT_RUN || r == DSEC_EXEC_NOT_FOUND)
			json_object_set_new(rec, "exec",
					    json_pack("{s:O,s:i}", "cmd", j->cmd, "exit",
						      r == DSEC_EXEC_NOT_FOUND ? 127 : 126));
		else {
			j->tc->refs--;
			target_drop(j->tc);
			j->tc = NULL;
		}
		dsec_err_wrap(&e, "%s", json_string_value(id));
		goto bad;
	}
	j->used = 1;
	j->out = po[0];
	j->errfd = pe[0];
	j->in = pi[1];
	fcntl(j->out, F_SETFL, O_NONBLOCK);
	fcntl(j->errfd, F_SETFL, O_NONBLOCK);
	if (j->in >= 0) {
		fcntl(j->in, F_SETFL, O_NONBLOCK);
		j->stdin_buf = (char *)json_string_value(in);
		j->stdin_len = json_string_length(in);
	}
	j->cout.max = j->cerr.max = L->o->max_output;
	j->deadline = tmo ? j->pr.start_us + tmo : 0;
	L->running++;
	return 1;
bad:
	if (!fatal)
		journal_abort(L, j, &e);
	free(argv);
	dsec_env_free(&env);
	for (r = 0; r < 2; r++) {
		if (po[r] >= 0)
			close(po[r]);
		if (pe[r] >= 0)
			close(pe[r]);
		if (pi[r] >= 0)
			close(pi[r]);
	}
	j->rec = NULL;
	job_clear(j);
	if (fatal) {
		json_decref(rec);
		return -1;
	}
	return fail_record(L, seq, rec, &e, err) < 0 ? -1 : 0;
}

static int job_finish(struct loop *L, struct job *j, struct dsec_err *err)
{
	json_t *x, *oerr, *rec = j->rec;
	size_t used, room, esize = 0;
	int ocut, ecut;
	struct dsec_journal_step *js;
	struct dsec_err e;
	unsigned long seq;
	int64_t oom;
	int k;

	/* What the command wrote before it exited is in the pipes: take it (bounded, since a
	 * process it left behind may still be writing). */
	for (k = 0; k < 4 && j->out >= 0; k++)
		if (dsec_capture_read(&j->cout, j->out, &e) < 2)
			break;
	for (k = 0; k < 4 && j->errfd >= 0; k++)
		if (dsec_capture_read(&j->cerr, j->errfd, &e) < 2)
			break;
	dsec_exec_release(&j->pr);
	x = json_pack("{s:O}", "cmd", j->cmd);
	json_object_set_new(
	    x, "exit", WIFEXITED(j->status) ? json_integer(WEXITSTATUS(j->status)) : json_null());
	json_object_set_new(x, "signal",
			    WIFSIGNALED(j->status) ? json_string(dsec_signame(WTERMSIG(j->status)))
						   : json_null());
	/* the record out must stay a line the tools downstream read (DSEC_MAX_LINE, as ours):
	 * what it came with, its command again, the rest of "exec" (4 KiB is plenty), and the
	 * output in what is left, stderr in at most half of it */
	used = j->in_len + json_dumpb(j->cmd, NULL, 0, JSON_COMPACT) + 4096;
	room = L->max_line > used ? L->max_line - used : 0;
	oerr = dsec_utf8_json_max(j->cerr.buf ? j->cerr.buf : "", j->cerr.len, room / 2, &esize,
				  &ecut);
	json_object_set_new(x, "stdout",
			    dsec_utf8_json_max(j->cout.buf ? j->cout.buf : "", j->cout.len,
					       room > esize ? room - esize : 0, NULL, &ocut));
	json_object_set_new(x, "stderr", oerr);
	json_object_set_new(x, "truncated",
			    json_boolean(j->cout.truncated || j->cerr.truncated || ocut || ecut));
	json_object_set_new(x, "timed_out", json_boolean(j->timed_out));
	/* processes of the sandbox the OOM killer ended while the command ran: the command or
	 * anything it started, or anything else running there then */
	oom = j->oom0 >= 0 ? dsec_cgroup_oom_kills(&j->tc->t.sb) : -1;
	json_object_set_new(x, "oom_kills",
			    j->oom0 >= 0 && oom >= j->oom0
				? json_integer((json_int_t)(oom - j->oom0))
				: json_null());
	json_object_set_new(x, "wall_us",
			    json_integer((json_int_t)(dsec_now_us() - j->pr.start_us)));
	json_object_set_new(
	    x, "cpu_us",
	    json_integer((json_int_t)(j->ru.ru_utime.tv_sec + j->ru.ru_stime.tv_sec) * 1000000 +
			 j->ru.ru_utime.tv_usec + j->ru.ru_stime.tv_usec));
	json_object_set_new(x, "max_rss_kb", json_integer(j->ru.ru_maxrss));
	/* the sandbox's totals so far (resource.h), for cost per rollout; part of the result, so
	 * a journal replays it as it was */
	json_object_set_new(x, "usage", dsec_res_usage_json(&j->tc->t.sb));
	json_object_set_new(rec, "exec", x);
	j->rec = NULL;
	seq = j->seq;
	js = j->js;
	job_clear(j);
	L->running--;
	if (js) { /* durable before the record is passed on (release_durable) */
		if (dsec_journal_done(L->o->journal, js, x, err) < 0) {
			json_decref(rec);
			return -1;
		}
		return hold_durable(L, seq, rec, err);
	}
	return output(L, seq, rec, err);
}

/* ---- input: complete lines from a non-blocking fd ---- */

/* The next complete line (NUL-terminated in place), or NULL. *len is set. */
static char *next_line(struct loop *L, size_t *len, size_t *consumed)
{
	char *p = L->ibuf + L->ioff, *nl = memchr(p, '\n', L->ilen - L->ioff);

	if (nl) {
		*len = (size_t)(nl - p);
		*consumed = *len + 1;
	} else if (L->ieof && L->ilen > L->ioff) {
		*len = L->ilen - L->ioff;
		*consumed = *len;
	} else
		return NULL;
	p[*len] = '\0';
	return p;
}

static int read_input(struct loop *L, struct dsec_err *err)
{
	ssize_t n;

	if (L->ioff) { /* consumed lines leave the buffer here, not one by one */
		memmove(L->ibuf, L->ibuf + L->ioff, L->ilen - L->ioff);
		L->ilen -= L->ioff;
		L->ioff = 0;
	}
	if (L->icap - L->ilen < 65536) {
		size_t nc = L->icap ? L->icap * 2 : 131072;
		char *nb = realloc(L->ibuf, nc + 1);

		if (!nb)
			return dsec_err_set(err, ENOMEM, "input buffer");
		L->ibuf = nb;
		L->icap = nc;
	}
	n = read(L->infd, L->ibuf + L->ilen, L->icap - L->ilen);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n < 0)
		return dsec_err_sys(err, "read standard input");
	if (n == 0)
		L->ieof = 1;
	L->ilen += (size_t)n;
	return 0;
}

/* Take one record from the buffer: 1 with *rec, 0 when no complete line is there, -1 with err
 * for a bad line (consumed). */
static int take_record(struct loop *L, json_t **rec, struct dsec_err *e)
{
	for (;;) {
		size_t len, used;
		char *line = next_line(L, &len, &used);
		const char *p;
		int bad = 0;

		if (!line) {
			if (L->ilen - L->ioff > L->max_line) { /* too long, no newline: drop it */
				if (!L->skipping) {
					L->lineno++;
					dsec_err_set(e, E2BIG,
						     "<stdin>:%lu: line longer than %zu bytes",
						     L->lineno, L->max_line);
					bad = 1;
				}
				L->skipping = 1;
				L->ilen = L->ioff = 0;
				return bad ? -1 : 0;
			}
			return 0;
		}
		if (L->skipping) { /* the rest of a line reported already */
			L->skipping = 0;
			L->ioff += used;
			continue;
		}
		L->lineno++;
		*rec = NULL;
		for (p = line; *p == ' ' || *p == '\t' || *p == '\r'; p++)
			;
		if (len > L->max_line)
			dsec_err_set(e, E2BIG, "<stdin>:%lu: line longer than %zu bytes", L->lineno,
				     L->max_line);
		else if (memchr(line, '\0', len))
			dsec_err_set(e, EINVAL, "<stdin>:%lu: NUL byte in line", L->lineno);
		else if (*p && !(*rec = dsec_jsonl_parse(line, len, e)))
			dsec_err_wrap(e, "<stdin>:%lu", L->lineno);
		L->ioff += used;
		L->rec_len = len;
		if (*rec)
			return 1;
		if (*p)
			return -1;
	}
}

/* ---- the loop ---- */

static void kill_all(struct loop *L)
{
	unsigned i;

	for (i = 0; i < L->o->jobs; i++)
		if (L->jobs[i].used) {
			dsec_exec_release(&L->jobs[i].pr);
			job_clear(&L->jobs[i]);
		}
	L->running = 0;
}

static int job_io(struct loop *L, struct job *j, struct pollfd *pf, struct dsec_err *err)
{
	struct dsec_err e;

	if (j->out >= 0 && pf[0].revents && dsec_capture_read(&j->cout, j->out, &e) == 0) {
		close(j->out);
		j->out = -1;
	}
	if (j->errfd >= 0 && pf[1].revents && dsec_capture_read(&j->cerr, j->errfd, &e) == 0) {
		close(j->errfd);
		j->errfd = -1;
	}
	if (j->in >= 0 && pf[2].revents) {
		ssize_t n = write(j->in, j->stdin_buf + j->stdin_off, j->stdin_len - j->stdin_off);

		if (n > 0)
			j->stdin_off += (size_t)n;
		if ((n < 0 && errno != EAGAIN && errno != EINTR) || j->stdin_off >= j->stdin_len) {
			close(j->in); /* all fed, or the command closed its stdin (EPIPE) */
			j->in = -1;
		}
	}
	if (pf[3].revents && !j->exited) {
		int r = dsec_exec_wait(&j->pr, 1, &j->status, &j->ru, &e);

		if (r != 0) {
			j->exited = 1;
			if (r < 0)
				j->status = W_EXITCODE(125, 0);
			return job_finish(L, j, err);
		}
	}
	return 0;
}

long dsec_execrec_run(const struct dsec_execrec_opts *o, int infd, struct dsec_err *err)
{
	struct loop L = {.o = o, .infd = infd};
	struct pollfd *pf;
	const char *ml = getenv("DSEC_MAX_LINE");
	unsigned i;
	long ret;
	int inflags;

	L.max_line = ml && *ml ? strtoul(ml, NULL, 10) : DSEC_JSONL_MAX_LINE_DEFAULT;
	if (!L.max_line)
		L.max_line = DSEC_JSONL_MAX_LINE_DEFAULT;
	L.ncache = o->jobs + 64;
	L.cache = calloc(L.ncache, sizeof(*L.cache));
	L.jobs = calloc(o->jobs, sizeof(*L.jobs));
	pf = calloc(o->jobs * 4 + 1, sizeof(*pf));
	inflags = -1;
	if (!L.cache || !L.jobs || !pf) {
		ret = dsec_err_set(err, ENOMEM, "job table");
		goto out;
	}
	for (i = 0; i < o->jobs; i++)
		L.jobs[i].out = L.jobs[i].errfd = L.jobs[i].in = -1;
	/* The open file description may be shared with the writer's side of a shell: put the
	 * flags back at the end. */
	inflags = fcntl(infd, F_GETFL);
	fcntl(infd, F_SETFL, inflags | O_NONBLOCK);
	for (;;) {
		uint64_t now, next = 0;
		int tmo = -1, n;

		/* start what fits */
		while (L.running < o->jobs && L.ndone < 1024) {
			struct dsec_err e;
			json_t *rec;
			int r = take_record(&L, &rec, &e);

			if (r == 0)
				break;
			if (r < 0) {
				if (fail_record(&L, L.seq_in++,
						dsec_jsonl_error_record(&e, o->tool), &e, err) < 0)
					goto fatal;
				continue;
			}
			for (i = 0; L.jobs[i].used; i++)
				;
			if (job_start(&L, &L.jobs[i], rec, L.seq_in++, err) < 0)
				goto fatal;
		}
		if (L.ieof && L.ilen == L.ioff && !L.running)
			break;
		n = 0;
		if (!L.ieof && L.running < o->jobs && L.ndone < 1024)
			pf[n++] = (struct pollfd){infd, POLLIN, 0};
		else
			pf[n++] = (struct pollfd){-1, 0, 0};
		now = dsec_now_us();
		for (i = 0; i < o->jobs; i++) {
			struct job *j = &L.jobs[i];

			if (!j->used) {
				pf[n++] = (struct pollfd){-1, 0, 0};
				pf[n++] = (struct pollfd){-1, 0, 0};
				pf[n++] = (struct pollfd){-1, 0, 0};
				pf[n++] = (struct pollfd){-1, 0, 0};
				continue;
			}
			if (j->deadline && !j->timed_out && now >= j->deadline) {
				struct dsec_err e;

				j->timed_out = 1;
				if (dsec_exec_kill(&j->pr, &e) < 0)
					dsec_warnx("%s", e.msg);
			}
			if (j->deadline && !j->timed_out && (!next || j->deadline < next))
				next = j->deadline;
			pf[n++] = (struct pollfd){j->out, POLLIN, 0};
			pf[n++] = (struct pollfd){j->errfd, POLLIN, 0};
			pf[n++] = (struct pollfd){j->in, POLLOUT, 0};
			pf[n++] = (struct pollfd){j->pr.pidfd, POLLIN, 0};
		}
		if (next)
			tmo = next > now ? (int)((next - now + 999) / 1000) : 0;
		if (release_durable(&L, err) < 0 || flush_output(&L, err) < 0)
			goto fatal;
		if (poll(pf, (nfds_t)n, tmo) < 0 && errno != EINTR) {
			ret = dsec_err_sys(err, "poll");
			goto fatal;
		}
		if (pf[0].revents && read_input(&L, err) < 0)
			goto fatal;
		for (i = 0; i < o->jobs; i++)
			if (L.jobs[i].used && job_io(&L, &L.jobs[i], &pf[1 + 4 * i], err) < 0)
				goto fatal;
	}
	if (release_durable(&L, err) < 0 || flush_output(&L, err) < 0)
		goto fatal;
	ret = L.failed;
	goto out;
fatal:
	ret = -1;
	kill_all(&L);
out:
	if (inflags >= 0)
		fcntl(infd, F_SETFL, inflags);
	for (i = 0; i < L.ndone; i++)
		json_decref(L.done[i].rec);
	for (i = 0; i < L.ndurable; i++)
		json_decref(L.durable[i].rec);
	free(L.durable);
	free(L.obuf);
	for (i = 0; L.cache && i < L.ncache; i++)
		if (L.cache[i].used)
			dsec_exec_target_close(&L.cache[i].t);
	free(L.done);
	free(L.cache);
	free(L.jobs);
	free(L.ibuf);
	free(pf);
	return ret;
}
