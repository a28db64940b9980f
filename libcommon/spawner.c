/* Making sandboxes for dsec-spawn (spawner.h): spec records, claims first, cold otherwise, in
 * worker processes. */
#include "spawner.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "admit.h"
#include "cli.h"
#include "exec.h"
#include "jsonl.h"
#include "nofile.h"

int dsec_hostname_ok(const char *h)
{
	size_t n = strlen(h);

	if (n == 0 || n > DSEC_HOSTNAME_MAX || h[0] == '-' || h[0] == '.')
		return 0;
	for (; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') ||
		      (*h >= '0' && *h <= '9') || *h == '-' || *h == '.'))
			return 0;
	return 1;
}

/* "K=V" with a non-empty K free of '=' and NUL. */
int dsec_kv_ok(const char *s)
{
	const char *eq = strchr(s, '=');

	return eq && eq != s;
}

/* A limit member of a spec record: a number (bytes, CPUs, tasks) or a string with a unit,
 * parsed and bounded like the option of the same name. */
static int member_limit(json_t *rec, const char *name, struct dsec_spawn_spec *s,
			struct dsec_err *err)
{
	json_t *v = json_object_get(rec, name);
	char buf[64];

	if (!v)
		return 0;
	if (json_is_integer(v))
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
	else if (json_is_string(v))
		return dsec_limit_parse(name, json_string_value(v), 0, &s->lim, &s->net, err);
	else
		return dsec_err_set(err, EINVAL, "'%s': want a number or a string", name);
	return dsec_limit_parse(name, buf, 0, &s->lim, &s->net, err);
}

/* Apply a spec record's keys on top of the defaults in s. s->env and s->labels must be the
 * caller's own copies (it releases them, also on failure). */
int dsec_spawn_spec_from_record(json_t *rec, struct dsec_spawn_spec *s, struct dsec_err *err)
{
	json_t *v;
	uint64_t u;

	if ((v = json_object_get(rec, "image"))) {
		if (!json_is_string(v))
			return dsec_err_set(err, EINVAL, "'image': want a string");
		s->image = json_string_value(v);
	}
	if (member_limit(rec, "cpus", s, err) < 0 || member_limit(rec, "memory", s, err) < 0 ||
	    member_limit(rec, "disk", s, err) < 0 || member_limit(rec, "pids", s, err) < 0 ||
	    member_limit(rec, "nofile", s, err) < 0 || member_limit(rec, "net", s, err) < 0)
		return -1;
	{
		struct dsec_res r = {.lim = s->lim, .req = s->req, .cls = s->cls};
		unsigned set = 0;

		if (dsec_res_from_record(rec, 0, &r, &set, err) < 0)
			return -1;
		s->lim = r.lim;
		s->req = r.req;
		s->cls = r.cls;
	}
	if ((v = json_object_get(rec, "ttl"))) {
		if (json_is_number(v) && json_number_value(v) >= 0 &&
		    json_number_value(v) * 1e6 <= (double)DSEC_SPAWN_MAX_TTL_US)
			s->ttl_us = (uint64_t)(json_number_value(v) * 1e6);
		else if (!json_is_string(v) ||
			 dsec_parse_duration(json_string_value(v), DSEC_SPAWN_MAX_TTL_US, &u, "ttl",
					     err) < 0)
			return dsec_err_set(err, EINVAL, "'ttl': want seconds or a duration");
		else
			s->ttl_us = u;
	}
	if ((v = json_object_get(rec, "hostname"))) {
		if (!json_is_string(v) || !dsec_hostname_ok(json_string_value(v)))
			return dsec_err_set(err, EINVAL, "'hostname': not a valid host name");
		s->hostname = json_string_value(v);
	}
	/* "run_as", not "user": pipelines carry that key for their own ends */
	if ((v = json_object_get(rec, "workdir"))) {
		if (!dsec_workdir_ok(json_string_value(v)))
			return dsec_err_set(err, EINVAL, "'workdir': want an absolute path");
		s->workdir = json_string_value(v);
	}
	if ((v = json_object_get(rec, "run_as"))) {
		/* a uid may be a number, as dsec-exec takes it */
		if (!(s->user = dsec_user_json(v, s->user_buf, sizeof(s->user_buf))))
			return dsec_err_set(err, EINVAL,
					    "'run_as': want \"USER[:GROUP]\" or a uid");
	}
	if ((v = json_object_get(rec, "env"))) {
		json_t *e;
		const char *k;
		size_t i;

		/* an array of "K=V" or an object {"K":"V"}, added to the defaults */
		if (json_is_array(v)) {
			json_array_foreach(v, i, e)
			{
				if (!json_is_string(e) || !dsec_kv_ok(json_string_value(e)))
					return dsec_err_set(err, EINVAL,
							    "'env': want \"K=V\" strings");
				json_array_append(s->env, e);
			}
		} else if (json_is_object(v)) {
			json_object_foreach(v, k, e)
			{
				if (!json_is_string(e) || !*k || strchr(k, '='))
					return dsec_err_set(err, EINVAL,
							    "'env': want string values");
				json_array_append_new(
				    s->env, json_sprintf("%s=%s", k, json_string_value(e)));
			}
		} else {
			return dsec_err_set(err, EINVAL, "'env': want an array or object");
		}
	}
	if (json_object_get(rec, "allow") || json_object_get(rec, "bandwidth")) {
		json_t *e;
		size_t i;

		/* the record's allow-list adds to the options' */
		s->pol = memcpy(malloc(sizeof(*s->pol)), s->pol, sizeof(*s->pol));
		v = json_object_get(rec, "allow");
		if (v && !json_is_array(v))
			return dsec_err_set(err, EINVAL, "'allow': want an array of strings");
		json_array_foreach(v, i, e)
		{
			if (!json_is_string(e))
				return dsec_err_set(err, EINVAL, "'allow': want strings");
			if (dsec_net_allow_parse(json_string_value(e), s->pol, err) < 0)
				return -1;
		}
		if ((v = json_object_get(rec, "bandwidth")) &&
		    (!json_is_string(v) ||
		     dsec_net_rate_parse(json_string_value(v), &s->pol->rate, err) < 0))
			return dsec_err_set(err, EINVAL,
					    "'bandwidth': want a rate, e.g. \"10mbit\"");
	}
	if ((v = json_object_get(rec, "labels"))) {
		json_t *e;
		const char *k;

		if (!json_is_object(v))
			return dsec_err_set(err, EINVAL, "'labels': want an object");
		json_object_foreach(v, k, e)
		{
			if (!json_is_string(e))
				return dsec_err_set(err, EINVAL, "'labels': want string values");
			json_object_set(s->labels, k, e);
		}
	}
	return 0;
}

static json_t *record_for(json_t *rec, const struct dsec_sandbox *sb, int warm, uint64_t spawn_us)
{
	json_t *lim = json_pack("{s:f, s:I, s:I, s:I}", "cpus", sb->limits.cpus, "memory",
				(json_int_t)sb->limits.memory, "pids", (json_int_t)sb->limits.pids,
				"disk", (json_int_t)sb->limits.disk);

	if (sb->limits.cpus == floor(sb->limits.cpus))
		json_object_set_new(lim, "cpus", json_integer((json_int_t)sb->limits.cpus));
	json_object_set_new(lim, "nofile",
			    json_integer((json_int_t)DSEC_NOFILE_OF(sb->limits.nofile)));
	json_object_set_new(rec, "id", json_string(sb->id));
	json_object_set_new(rec, "image", json_string(sb->image));
	json_object_set_new(rec, "node", json_string(sb->node));
	json_object_set_new(rec, "warm", json_boolean(warm));
	json_object_set_new(rec, "spawn_us", json_integer((json_int_t)spawn_us));
	json_object_set_new(rec, "limits", lim);
	json_object_set_new(rec, "ttl",
			    json_integer((json_int_t)((sb->ttl_us + 999999) / 1000000)));
	json_object_set_new(rec, "net", json_string(dsec_net_mode_name(sb->net)));
	json_object_set_new(rec, "pid", json_integer(sb->holder_pid));
	dsec_res_record(rec, sb);
	return rec;
}

/* Image name's run config (store.h), read once per image for this run; borrowed, or NULL. */
static json_t *image_config(const struct dsec_paths *paths, const char *name)
{
	static char cached[DSEC_NAME_MAX + 1];
	static json_t *cfg;
	static int have;

	if (!have || strcmp(cached, name)) {
		json_decref(cfg);
		cfg = dsec_image_config(paths, name);
		snprintf(cached, sizeof(cached), "%s", name);
		have = 1;
	}
	return cfg;
}

/* The image and default user last found in a new sandbox of this process. A new sandbox's
 * passwd and group are its image's (cold or claimed, nothing has run in it yet), so one look
 * per image and user does for a run of many. */
static char known_image[DSEC_NAME_MAX + 1], known_user[DSEC_USER_MAX + 1];

/* sb's default user is in its sandbox: found before for its image, or now. 0 or -1 with err. */
static int user_check(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	struct dsec_exec_user who;

	if (!strcmp(known_image, sb->image) && !strcmp(known_user, sb->user))
		return 0;
	if (dsec_exec_user_resolve(sb, sb->user, &who, err) < 0)
		return -1;
	snprintf(known_image, sizeof(known_image), "%s", sb->image);
	snprintf(known_user, sizeof(known_user), "%s", sb->user);
	return 0;
}

/* Create one sandbox for rec (borrowed) and emit its record. Returns 0, 1 when it failed (an
 * error record was emitted), -1 when stdout is gone. */
static int spawn_one(struct dsec_spawner *sp, json_t *in, const struct dsec_spawn_spec *s)
{
	const struct dsec_paths *paths = sp->paths;
	struct dsec_sandbox sb;
	struct dsec_err err = {0};
	static char netpol[DSEC_NETPOL_MAX];
	json_t *rec = json_deep_copy(in), *nat = NULL, *cfg, *env = s->env, *ienv;
	uint64_t t0, w0 = dsec_now_us();
	unsigned round = 0;
	int rc, warm = 0;

	/* the image's environment first, so --env and the record's "env" win */
	cfg = s->image ? image_config(paths, s->image) : NULL;
	if (json_array_size(ienv = json_object_get(cfg, "env"))) {
		env = json_copy(ienv);
		if (s->env)
			json_array_extend(env, s->env);
	} else
		env = s->env ? json_incref(s->env) : NULL;
again:
	memset(&sb, 0, sizeof(sb));
	if (!s->image) {
		dsec_err_set(&err, EINVAL, "no image (give --image or an \"image\" member)");
		goto failed;
	}
	if (s->net != DSEC_NET_NAT && (s->pol->n || s->pol->rate)) {
		dsec_err_set(&err, EINVAL, "an allow-list or bandwidth needs net nat");
		goto failed;
	}
	snprintf(sb.image, sizeof(sb.image), "%s", s->image);
	sb.limits = s->lim;
	sb.req = s->req;
	sb.cls = s->cls;
	sb.ttl_us = s->ttl_us;
	sb.net = s->net;
	if (s->hostname)
		snprintf(sb.hostname, sizeof(sb.hostname), "%s", s->hostname);
	sb.env = env;
	sb.labels = s->labels;
	snprintf(sb.workdir, sizeof(sb.workdir), "%s",
		 s->workdir ? s->workdir : json_string_value(json_object_get(cfg, "workdir")) ?: "");
	snprintf(sb.user, sizeof(sb.user), "%s",
		 s->user ? s->user : json_string_value(json_object_get(cfg, "user")) ?: "");
	/* requests within the limits before a claim: a claim that then failed would cost a ready
	 * sandbox of the pool */
	if (dsec_res_check(&sb, &err) < 0) {
		sb.env = sb.labels = NULL;
		goto failed;
	}
	t0 = dsec_now_us();
	/* a nat pool matches only the same allow-list and bandwidth */
	sp->claimer.netpol = NULL;
	if (s->net == DSEC_NET_NAT) {
		dsec_net_policy_canon(s->pol, netpol, sizeof(netpol));
		sp->claimer.netpol = netpol;
	}
	warm = dsec_pool_claim(&sp->claimer, &sb, &err);
	if (warm == 0 && sp->warm_only) {
		sb.env = sb.labels = NULL;
		dsec_err_set(&err, ENOENT, "no warm sandbox ready for image '%s' (--warm-only)",
			     s->image);
		goto failed;
	}
	if (warm == 1) {
		rc = 0;
		if (sb.net == DSEC_NET_NAT)
			nat = dsec_net_info(paths, &sb);
	} else {
		rc = warm < 0 ? -1 : dsec_admit_create(paths, &sb, &err);
		sb.env = sb.labels = NULL; /* borrowed from s */
		/* --net nat: the veth into the holder's namespace, right after it started */
		if (rc == 0 && sb.net == DSEC_NET_NAT &&
		    dsec_net_attach(paths, &sb, s->pol, &nat, &err) < 0) {
			dsec_sandbox_destroy(paths, &sb, NULL);
			rc = -1;
		}
	}
	if (rc < 0 && err.errnum == ENOSPC && !dsec_stop_sig &&
	    dsec_admit_wait(w0, sp->wait_us, &round) == 0 && !dsec_stop_sig) {
		memset(&err, 0, sizeof(err));
		goto again;
	}
	if (rc < 0)
		goto failed;
	/* the commands' default user must exist in the sandbox now, or no command would run */
	if (sb.user[0] && user_check(&sb, &err) < 0) {
		dsec_sandbox_destroy(paths, &sb, NULL);
		if (warm == 1)
			dsec_sandbox_free(&sb);
		json_decref(nat);
		goto failed;
	}
	record_for(rec, &sb, warm == 1, dsec_now_us() - t0);
	if (nat)
		json_object_set_new(rec, "nat", nat);
	if (dsec_jsonl_emit(rec, &err) < 0) {
		/* nobody will learn of this sandbox: take it back */
		dsec_sandbox_destroy(paths, &sb, NULL);
		if (warm == 1)
			dsec_sandbox_free(&sb);
		json_decref(rec);
		json_decref(env);
		dsec_err_print(&err);
		return -1;
	}
	json_decref(rec);
	json_decref(env);
	/* a pipeline may already have run and reaped it: gone is handed out too */
	if (dsec_sandbox_commit(&sb, &err) < 0 && err.errnum != ENOENT)
		dsec_err_print(&err);
	if (warm == 1)
		dsec_sandbox_free(&sb);
	return 0;
failed:
	dsec_err_print(&err);
	dsec_jsonl_set_error(rec, &err, "dsec-spawn");
	rc = dsec_jsonl_emit(rec, &err);
	json_decref(rec);
	json_decref(env);
	return rc < 0 ? -1 : 1;
}

static int spawn_serial(struct dsec_spawner *sp, json_t *rec, const struct dsec_spawn_spec *s,
			long long n, int *failed)
{
	for (long long i = 0; i < n && !dsec_stop_sig; i++) {
		int r;

		dsec_stop_hold(1); /* an interrupt waits for this sandbox to be made or undone */
		r = spawn_one(sp, rec, s);
		dsec_stop_hold(0);
		if (r < 0)
			return -1;
		if (r > 0)
			*failed = 1;
		__atomic_add_fetch(sp->made, 1, __ATOMIC_RELAXED);
		dsec_progress(&sp->prog, "%ld of %lld sandboxes ", *sp->made, sp->total);
	}
	return 0;
}

/* n sandboxes of spec s for record rec: with --jobs, split over worker processes, each
 * printing its records as it goes (one write each: records are far below the pipe's atomic
 * size), since most of a cold sandbox's making is waiting on the kernel. 0 or -1 (stdout
 * gone, or a worker died). */
int dsec_spawn_n(struct dsec_spawner *sp, json_t *rec, const struct dsec_spawn_spec *s, long long n,
		 int *failed)
{
	long long j = sp->jobs < n / 2 ? sp->jobs : n / 2, cpus = sysconf(_SC_NPROCESSORS_ONLN);
	pid_t pids[64];
	int k = 0, rc = 0;

	/* making a sandbox is kernel work under the cgroup and namespace locks: more workers
	 * than CPUs only queue on them (8 made fewer a second than 2 on two cores) */
	if (cpus >= 2 && j > cpus)
		j = cpus;

	if (j < 2)
		return spawn_serial(sp, rec, s, n, failed);
	fflush(NULL);
	for (long long w = 0; w < j; w++) {
		long long share = n / j + (w < n % j);
		/* a worker dies with dsec-spawn: a kill -9 of it leaves what --orphans takes,
		 * not sandboxes still being made */
		pid_t pid = dsec_fork_worker();

		if (pid < 0) {
			/* make the rest here */
			long long rest = 0;

			for (long long v = w; v < j; v++)
				rest += n / j + (v < n % j);
			if (spawn_serial(sp, rec, s, rest, failed) < 0)
				rc = -1;
			break;
		}
		if (pid == 0) {
			int f = 0, r;

			sp->prog.on = 0; /* the parent shows the line */
			r = spawn_serial(sp, rec, s, share, &f);

			fflush(NULL);
			_exit(r < 0 ? DSEC_EXIT_FATAL : f ? DSEC_EXIT_FAILED : DSEC_EXIT_OK);
		}
		pids[k++] = pid;
	}
	dsec_stop_hold(1); /* until the workers, told of an interrupt, have stopped */
	for (int w = 0; w < k; w++) {
		int ws;

		if (dsec_progress_waitpid(&sp->prog, pids[w], &ws, sp->made, sp->total,
					  "sandboxes") < 0 ||
		    !WIFEXITED(ws) || WEXITSTATUS(ws) == DSEC_EXIT_FATAL)
			rc = -1;
		else if (WEXITSTATUS(ws))
			*failed = 1;
	}
	dsec_stop_hold(0);
	return rc;
}
