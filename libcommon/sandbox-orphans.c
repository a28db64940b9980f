/* Walking a run dir's sandboxes (dsec_sandbox_foreach), finding the ones nobody will reap
 * (dsec_sandbox_orphans: dead holders, never handed out, cgroups without state) and removing a
 * run dir's shared objects once its last sandbox is gone (dsec_run_cleanup). */
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "net.h"
#include "ns.h"

int dsec_sandbox_foreach(const struct dsec_paths *p, dsec_sandbox_fn fn, void *ctx,
			 struct dsec_err *err)
{
	char dir[PATH_MAX];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/sandboxes", p->run);
	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		return dsec_err_sys(err, "open '%s'", dir);
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !dsec_sandbox_id_ok(e->d_name))
			continue;
		if (fn(e->d_name, ctx) < 0)
			break;
	}
	closedir(d);
	return 0;
}

struct orphan_ctx {
	const struct dsec_paths *p;
	dsec_sandbox_fn fn;
	void *ctx;
	int count, failed;
	struct dsec_err *err;
	/* names of the cgroups live sandboxes use: a reset from a warm pool leaves a sandbox in
	 * the cgroup named after the pool sandbox it was (cgroup v2 cannot rename one) */
	char (*used)[DSEC_ID_MAX];
	size_t nused, capused;
};

/* Remember the name of the cgroup sb lives in (its leaf dir). */
static void orphan_note_cgroup(struct orphan_ctx *o, const struct dsec_sandbox *sb)
{
	const char *path = sb->cg.version == 2 ? sb->cg.v2 : NULL, *base;

	for (int c = 0; !path && sb->cg.version == 1 && c < DSEC_CG_NCTRL; c++)
		if (sb->cg.v1[c][0])
			path = sb->cg.v1[c];
	if (!path || !(base = strrchr(path, '/')) || !strcmp(base + 1, sb->id))
		return;
	if (o->nused == o->capused) {
		size_t cap = o->capused ? 2 * o->capused : 16;
		void *n = realloc(o->used, cap * sizeof(*o->used));

		if (!n)
			return;
		o->used = n;
		o->capused = cap;
	}
	snprintf(o->used[o->nused++], sizeof(o->used[0]), "%s", base + 1);
}

/* Remove a sandbox known only by id: whatever state, cgroup and holder it has left. */
static int orphan_remove(struct orphan_ctx *o, const char *id)
{
	struct dsec_sandbox sb;
	struct dsec_err e;

	if (dsec_sandbox_load(o->p, id, &sb, &e) < 0) {
		memset(&sb, 0, sizeof(sb));
		snprintf(sb.id, sizeof(sb.id), "%s", id);
		snprintf(sb.dir, sizeof(sb.dir), "%s/sandboxes/%s", o->p->run, id);
		if (dsec_cgroup_paths(o->p, &sb, &e) < 0)
			sb.cg.version = 0;
	}
	if (dsec_sandbox_destroy(o->p, &sb, &e) < 0) {
		*o->err = e;
		o->failed = 1;
	} else {
		o->count++;
		if (o->fn)
			o->fn(id, o->ctx);
	}
	dsec_sandbox_free(&sb);
	return 0;
}

static int orphan_state(const char *id, void *ctx)
{
	struct orphan_ctx *o = ctx;
	struct dsec_sandbox sb;
	struct dsec_err e;
	int orphan;

	if (dsec_sandbox_load(o->p, id, &sb, &e) < 0)
		return orphan_remove(o, id);
	/* pending: created, but the spawn died before it handed the sandbox out */
	orphan = !dsec_sandbox_alive(&sb) || dsec_sandbox_pending(o->p, id);
	if (!orphan) {
		orphan_note_cgroup(o, &sb);
		/* a live sandbox: what a killed dsec-exec left running in it, the pause of a killed
		 * dsec-layer commit */
		if (dsec_cgroup_exec_orphans(&sb, &e) < 0 ||
		    dsec_cgroup_pause_orphan(&sb, &e) < 0) {
			*o->err = e;
			o->failed = 1;
		}
	}
	dsec_sandbox_free(&sb);
	return orphan ? orphan_remove(o, id) : 0;
}

static int orphan_cgroup(const char *name, void *ctx)
{
	struct orphan_ctx *o = ctx;
	char dir[PATH_MAX];

	if (!dsec_sandbox_id_ok(name))
		return 0;
	snprintf(dir, sizeof(dir), "%s/sandboxes/%s", o->p->run, name);
	if (access(dir, F_OK) == 0)
		return 0;
	for (size_t i = 0; i < o->nused; i++)
		if (!strcmp(o->used[i], name))
			return 0;
	return orphan_remove(o, name);
}

/* State dirs a spawn was still writing when it died. */
static void remove_tmp_dirs(const struct dsec_paths *p)
{
	char dir[PATH_MAX];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/sandboxes", p->run);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, ".tmp-", 5))
			dsec_rmtree_at(dirfd(d), e->d_name, NULL);
	closedir(d);
}

int dsec_sandbox_orphans(const struct dsec_paths *p, dsec_sandbox_fn fn, void *ctx,
			 struct dsec_err *err)
{
	struct orphan_ctx o = {.p = p, .fn = fn, .ctx = ctx, .err = err};

	remove_tmp_dirs(p);

	if (dsec_sandbox_foreach(p, orphan_state, &o, err) < 0 ||
	    (dsec_cgroup_version(NULL) > 0 && dsec_cgroup_foreach(p, orphan_cgroup, &o, err) < 0)) {
		free(o.used);
		return -1;
	}
	free(o.used);
	dsec_cgspare_clear(p, 0); /* what a crash left of a spare (cgspare.c) */
	return o.failed ? -1 : o.count;
}

/* Is there any sandbox state left in this run dir? */
static int count_one(const char *id, void *ctx)
{
	(*(int *)ctx)++;
	return -1;
}

int dsec_run_cleanup(const struct dsec_paths *p, struct dsec_err *err)
{
	int n = 0;
	char dir[PATH_MAX];

	if (dsec_sandbox_foreach(p, count_one, &n, err) < 0)
		return -1;
	if (n)
		return 0;
	if (dsec_template_destroy(p, err) < 0 || dsec_net_node_cleanup(p, err) < 0)
		return -1;
	dsec_cgspare_clear(p, 1);
	if (dsec_cgroup_version(NULL) > 0 && dsec_cgroup_remove_parent(p, err) < 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s/sandboxes", p->run);
	rmdir(dir);
	return 1;
}
