/* The sandboxes of the trajectory journal (journal.h): what it records of each (image, limits,
 * env, hostname), and rebuilding one that is gone: a fresh sandbox from the same image, the
 * completed steps run again in it in journal order, each result compared. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec.h"
#include "journal-int.h"

/* The entry describing sandbox sb (root: the sandbox it replaces, or NULL). New reference. */
static json_t *sandbox_entry(const struct dsec_sandbox *sb, const char *root)
{
	json_t *e = json_pack("{s:s,s:s}", "t", "sandbox", "id", sb->id);
	json_t *lim = json_object();

	if (root)
		json_object_set_new(e, "root", json_string(root));
	json_object_set_new(e, "image", json_string(sb->image));
	json_object_set_new(lim, "cpus", json_real(sb->limits.cpus));
	json_object_set_new(lim, "memory", json_integer((json_int_t)sb->limits.memory));
	json_object_set_new(lim, "pids", json_integer((json_int_t)sb->limits.pids));
	json_object_set_new(lim, "disk", json_integer((json_int_t)sb->limits.disk));
	if (sb->limits.nofile)
		json_object_set_new(lim, "nofile", json_integer((json_int_t)sb->limits.nofile));
	json_object_set_new(e, "limits", lim);
	json_object_set_new(e, "net", json_string(sb->net == DSEC_NET_HOST ? "host" : "none"));
	json_object_set_new(e, "ttl_us", json_integer((json_int_t)sb->ttl_us));
	json_object_set_new(e, "hostname", json_string(sb->hostname));
	json_object_set_new(e, "env", sb->env ? json_incref(sb->env) : json_array());
	dsec_sandbox_defaults_json(e, sb);
	return e;
}

int dsec_jn_note_sandbox(struct dsec_journal *j, const struct dsec_sandbox *sb, const char *root,
			 int sync, struct dsec_err *err)
{
	json_t *e = sandbox_entry(sb, root);
	struct slot *sl;

	if (dsec_jn_append(j, e, sync, NULL, NULL, err) < 0) {
		json_decref(e);
		return -1;
	}
	if (!(sl = dsec_jn_map_get(&j->sbs, sb->id, 1))) {
		json_decref(e);
		return dsec_err_set(err, ENOMEM, "journal index");
	}
	json_decref(sl->val);
	sl->val = e;
	return 0;
}

/* Run a started step (its "start" entry) again in t, synchronously: a new reference to
 * {"exit","signal","stdout","stderr","timed_out"}, or NULL with err. */
static json_t *run_again(struct dsec_exec_target *t, json_t *st, struct dsec_err *err)
{
	json_t *cmd = json_object_get(st, "cmd"), *in = json_object_get(st, "stdin"), *v, *x, *envs;
	const char *cwd = json_string_value(json_object_get(st, "cwd")),
		   *user = json_string_value(json_object_get(st, "user"));
	json_int_t tmo = json_integer_value(json_object_get(st, "timeout_us")),
		   mo = json_integer_value(json_object_get(st, "max_output"));
	struct dsec_exec_spec sp = {.cwd = cwd, .killable = tmo > 0};
	struct dsec_capture co = {.max = mo > 0 ? (size_t)mo : 1 << 20}, ce = {.max = co.max};
	struct dsec_exec_proc pr;
	struct dsec_exec_user who;
	struct dsec_env env = {0};
	struct rusage ru;
	int po[2] = {-1, -1}, pe[2] = {-1, -1}, pi[2] = {-1, -1}, r, st_ = 0, timed_out = 0;
	size_t i, inoff = 0, n = json_array_size(cmd);
	char **argv = calloc(n + 1, sizeof(*argv));
	uint64_t deadline;

	x = NULL;
	if (!argv || !n) {
		dsec_err_set(err, EINVAL, "start entry without a command");
		goto out;
	}
	for (i = 0; i < n; i++)
		argv[i] = (char *)json_string_value(json_array_get(cmd, i));
	if (dsec_exec_env_as(t, user, &env, &who, &sp.user, err) < 0)
		goto out;
	envs = json_object_get(st, "env");
	for (i = 0; i < json_array_size(envs); i++) {
		v = json_array_get(envs, i);
		if (json_is_string(v) && dsec_env_put(&env, json_string_value(v), err) < 0)
			goto out;
	}
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 ||
	    (json_is_string(in) && pipe2(pi, O_CLOEXEC) < 0)) {
		dsec_err_sys(err, "pipe");
		goto out;
	}
	sp.argv = argv;
	sp.envp = env.v;
	sp.fd[0] = pi[0];
	sp.fd[1] = po[1];
	sp.fd[2] = pe[1];
	r = dsec_exec_start(t, &sp, &pr, err);
	close(po[1]);
	close(pe[1]);
	if (pi[0] >= 0)
		close(pi[0]);
	po[1] = pe[1] = pi[0] = -1;
	if (r == DSEC_EXEC_NOT_FOUND || r == DSEC_EXEC_CANNOT_RUN) {
		x = json_pack("{s:i,s:n,s:s,s:s,s:b}", "exit", r == DSEC_EXEC_NOT_FOUND ? 127 : 126,
			      "signal", "stdout", "", "stderr", "", "timed_out", 0);
		goto out;
	}
	if (r < 0)
		goto out;
	fcntl(po[0], F_SETFL, O_NONBLOCK);
	fcntl(pe[0], F_SETFL, O_NONBLOCK);
	if (pi[1] >= 0)
		fcntl(pi[1], F_SETFL, O_NONBLOCK);
	deadline = tmo > 0 ? pr.start_us + (uint64_t)tmo : 0;
	for (;;) {
		struct pollfd pf[4] = {{po[0], POLLIN, 0},
				       {pe[0], POLLIN, 0},
				       {pi[1], POLLOUT, 0},
				       {pr.pidfd, POLLIN, 0}};
		uint64_t now = dsec_now_us();
		struct dsec_err e;

		if (deadline && !timed_out && now >= deadline) {
			timed_out = 1;
			dsec_exec_kill(&pr, &e);
		}
		if (poll(pf, 4, deadline && !timed_out ? (int)((deadline - now) / 1000 + 1) : -1) <
			0 &&
		    errno != EINTR)
			break;
		if (pf[0].revents && dsec_capture_read(&co, po[0], &e) == 0) {
			close(po[0]);
			po[0] = -1;
		}
		if (pf[1].revents && dsec_capture_read(&ce, pe[0], &e) == 0) {
			close(pe[0]);
			pe[0] = -1;
		}
		if (pf[2].revents) {
			ssize_t w = write(pi[1], json_string_value(in) + inoff,
					  json_string_length(in) - inoff);

			if (w > 0)
				inoff += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) ||
			    inoff >= json_string_length(in)) {
				close(pi[1]);
				pi[1] = -1;
			}
		}
		if (pf[3].revents && dsec_exec_wait(&pr, 1, &st_, &ru, &e) != 0)
			break;
	}
	for (int k = 0; k < 4 && po[0] >= 0; k++)
		if (dsec_capture_read(&co, po[0], err) < 2)
			break;
	for (int k = 0; k < 4 && pe[0] >= 0; k++)
		if (dsec_capture_read(&ce, pe[0], err) < 2)
			break;
	dsec_exec_release(&pr);
	x = json_object();
	json_object_set_new(x, "exit",
			    WIFEXITED(st_) ? json_integer(WEXITSTATUS(st_)) : json_null());
	json_object_set_new(
	    x, "signal", WIFSIGNALED(st_) ? json_string(dsec_signame(WTERMSIG(st_))) : json_null());
	json_object_set_new(x, "stdout", dsec_utf8_json(co.buf ? co.buf : "", co.len));
	json_object_set_new(x, "stderr", dsec_utf8_json(ce.buf ? ce.buf : "", ce.len));
	json_object_set_new(x, "timed_out", json_boolean(timed_out));
out:
	for (r = 0; r < 2; r++) {
		if (po[r] >= 0)
			close(po[r]);
		if (pe[r] >= 0)
			close(pe[r]);
		if (pi[r] >= 0)
			close(pi[r]);
	}
	dsec_capture_free(&co);
	dsec_capture_free(&ce);
	dsec_env_free(&env);
	free(argv);
	return x;
}

/* A sandbox request from a "sandbox" entry: image, limits, net, ttl, hostname, env (borrowed). */
static int request_of(json_t *info, struct dsec_sandbox *sb, struct dsec_err *err)
{
	json_t *lim = json_object_get(info, "limits");
	const char *img = json_string_value(json_object_get(info, "image")),
		   *hn = json_string_value(json_object_get(info, "hostname")), *net;

	memset(sb, 0, sizeof(*sb));
	if (!img || strlen(img) >= sizeof(sb->image))
		return dsec_err_set(err, EINVAL, "no image recorded");
	snprintf(sb->image, sizeof(sb->image), "%s", img);
	sb->limits.cpus = json_number_value(json_object_get(lim, "cpus"));
	sb->limits.memory = (uint64_t)json_integer_value(json_object_get(lim, "memory"));
	sb->limits.pids = (uint64_t)json_integer_value(json_object_get(lim, "pids"));
	sb->limits.disk = (uint64_t)json_integer_value(json_object_get(lim, "disk"));
	if (!sb->limits.disk)
		sb->limits.disk = DSEC_DEFAULT_DISK;
	sb->limits.nofile = (uint64_t)json_integer_value(json_object_get(lim, "nofile"));
	net = json_string_value(json_object_get(info, "net"));
	sb->net = net && !strcmp(net, "host") ? DSEC_NET_HOST : DSEC_NET_NONE;
	sb->ttl_us = (uint64_t)json_integer_value(json_object_get(info, "ttl_us"));
	if (hn)
		snprintf(sb->hostname, sizeof(sb->hostname), "%s", hn);
	sb->env = json_is_array(json_object_get(info, "env")) ? json_object_get(info, "env") : NULL;
	if (dsec_workdir_ok(json_string_value(json_object_get(info, "workdir"))))
		snprintf(sb->workdir, sizeof(sb->workdir), "%s",
			 json_string_value(json_object_get(info, "workdir")));
	if (dsec_user_spec_ok(json_string_value(json_object_get(info, "user"))))
		snprintf(sb->user, sizeof(sb->user), "%s",
			 json_string_value(json_object_get(info, "user")));
	return 0;
}

int dsec_journal_rebuild(struct dsec_journal *j, const struct dsec_paths *paths, const char *id,
			 json_t **report, struct dsec_err *err)
{
	static const char *const fields[] = {"exit", "signal", "stdout", "stderr", "timed_out"};
	char root[DSEC_ID_MAX];
	json_t *info, *differ = NULL, *e;
	struct dsec_exec_target t;
	struct dsec_sandbox sb;
	struct slot *sl;
	int lock = -1, made = 0, opened = 0;
	long steps = 0;

	if (!(j->flags & DSEC_JOURNAL_REBUILD))
		return 1;
	snprintf(root, sizeof(root), "%s", dsec_jn_root_of(j, id));
	info = dsec_jn_map_val(&j->sbs, root);
	if (!info)
		return dsec_err_set(err, ENOENT, "%s: gone, and the journal knows no image for it",
				    id);
	if (request_of(info, &sb, err) < 0)
		return dsec_err_wrap(err, "%s: journal", id);
	lock = dsec_run_lock(paths, 0, err);
	if (lock < 0)
		goto fail;
	if (dsec_sandbox_create(paths, &sb, err) < 0) {
		sb.env = NULL;
		dsec_err_wrap(err, "%s: rebuild from image '%s'", id, sb.image);
		goto fail;
	}
	sb.env = NULL; /* borrowed from info */
	made = 1;
	if (dsec_exec_target_open(paths, sb.id, &t, err) < 0)
		goto fail;
	opened = 1;
	if (dsec_jn_note_sandbox(j, &t.sb, root, 0, err) < 0)
		goto fail;
	differ = json_array();
	for (size_t i = 0; i < j->norder; i++) {
		struct dsec_journal_step *s = j->order[i];
		json_t *st, *rx, *dn, *fl;

		if (s->order != i || s->state != S_DONE || strcmp(dsec_jn_root_of(j, s->id), root))
			continue;
		st = dsec_jn_read_entry(j, s->start_off, s->start_len, err);
		dn = st ? dsec_jn_read_entry(j, s->done_off, s->done_len, err) : NULL;
		rx = dn ? run_again(&t, st, err) : NULL;
		json_decref(st);
		if (!rx) {
			json_decref(dn);
			dsec_err_wrap(err, "%s: rebuild: traj '%s' step %s", id,
				      json_string_value(s->traj), dsec_jn_step_text(s));
			goto fail;
		}
		steps++;
		fl = json_array();
		for (size_t f = 0; f < sizeof(fields) / sizeof(*fields); f++) {
			json_t *was = json_object_get(json_object_get(dn, "exec"), fields[f]);

			if (!json_equal(was ? was : json_false(), json_object_get(rx, fields[f])))
				json_array_append_new(fl, json_string(fields[f]));
		}
		if (json_array_size(fl)) {
			char *fs = json_dumps(fl, JSON_COMPACT);

			dsec_warnx(
			    "%s: rebuilt as %s: traj '%s' step %s: %s differ from the journal", id,
			    sb.id, json_string_value(s->traj), dsec_jn_step_text(s),
			    fs ? fs : "results");
			free(fs);
			json_array_append_new(differ, json_pack("{s:O,s:O,s:o}", "traj", s->traj,
								"step", s->step, "fields", fl));
		} else
			json_decref(fl);
		json_decref(rx);
		json_decref(dn);
	}
	e = json_pack("{s:s,s:s,s:s,s:i,s:i}", "t", "rebuild", "from", root, "id", sb.id, "steps",
		      (int)steps, "differ", (int)json_array_size(differ));
	if (dsec_jn_append(j, e, 1, NULL, NULL, err) < 0) {
		json_decref(e);
		goto fail;
	}
	json_decref(e);
	sl = dsec_jn_map_get(&j->cur, root, 1);
	if (!sl) {
		dsec_err_set(err, ENOMEM, "journal index");
		goto fail;
	}
	free(sl->val);
	sl->val = strdup(sb.id);
	if (dsec_sandbox_commit(&sb, err) < 0)
		dsec_err_print(err);
	dsec_exec_target_close(&t);
	close(lock);
	*report = json_pack("{s:s,s:s,s:s,s:i,s:o}", "from", root, "id", sb.id, "image", sb.image,
			    "steps", (int)steps, "differ", differ);
	dsec_sandbox_free(&sb);
	return 0;
fail:
	json_decref(differ);
	if (opened)
		dsec_exec_target_close(&t);
	if (made) {
		dsec_sandbox_destroy(paths, &sb, NULL);
		dsec_sandbox_free(&sb);
	}
	if (lock >= 0)
		close(lock);
	return -1;
}
