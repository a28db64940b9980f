#include "pool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admit.h"
#include "cgroup.h"
#include "resource.h"
#include "net.h"

#define POOL_FILE "pool.json"
#define CLAIM_FILE "claim.json"
#define CLAIMED_FILE "claimed"

int dsec_pool_canon(const char *image, const struct dsec_limits *l, enum dsec_net net, char *buf,
		    size_t n)
{
	/* cpus to a thousandth: 1, 1.0 and 1.0001 name one profile, as the cgroup quota does */
	return snprintf(buf, n, "image=%s;net=%s;disk=%llu;memory=%llu;pids=%llu;cpus=%.3f", image,
			dsec_net_mode_name(net), (unsigned long long)l->disk,
			(unsigned long long)l->memory, (unsigned long long)l->pids, l->cpus);
}

void dsec_pool_rekey(struct dsec_pool *pool, const struct dsec_paths *p)
{
	char canon[DSEC_NAME_MAX + 512];
	const struct dsec_requests *r = &pool->req;
	uint64_t h = 14695981039346656037ULL;
	int k = dsec_pool_canon(pool->image, &pool->limits, pool->net, canon, sizeof(canon));

	/* resource.h's members only when set: the keys of default profiles stay as they were */
	if (pool->limits.io_bps || pool->limits.io_iops)
		k += snprintf(canon + k, sizeof(canon) - (size_t)k, ";io=%llu,%llu",
			      (unsigned long long)pool->limits.io_bps,
			      (unsigned long long)pool->limits.io_iops);
	if (r->cpus > 0 || r->memory || r->pids || r->disk || r->io_weight)
		k += snprintf(canon + k, sizeof(canon) - (size_t)k, ";req=%.3f,%llu,%llu,%llu,%u",
			      r->cpus, (unsigned long long)r->memory, (unsigned long long)r->pids,
			      (unsigned long long)r->disk, r->io_weight);
	if (pool->cls == DSEC_CLASS_BE)
		snprintf(canon + k, sizeof(canon) - (size_t)k, ";class=be");
	for (const char *s = canon; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	/* net nat: its allow-list and bandwidth are part of the profile */
	for (const char *s = pool->netpol; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	snprintf(pool->key, sizeof(pool->key), "p-%016llx", (unsigned long long)h);
	snprintf(pool->dir, sizeof(pool->dir), "%s/pools/%s", p->run, pool->key);
}

static void pool_init(struct dsec_pool *pool, const struct dsec_paths *p, const char *image,
		      const struct dsec_limits *l, enum dsec_net net, const char *netpol)
{
	memset(pool, 0, sizeof(*pool));
	snprintf(pool->image, sizeof(pool->image), "%s", image);
	snprintf(pool->netpol, sizeof(pool->netpol), "%s", netpol);
	pool->limits = *l;
	pool->net = net;
	dsec_pool_rekey(pool, p);
}

void dsec_pool_init(struct dsec_pool *pool, const struct dsec_paths *p, const char *image,
		    const struct dsec_limits *l, enum dsec_net net)
{
	pool_init(pool, p, image, l, net, "");
}

void dsec_pool_init_nat(struct dsec_pool *pool, const struct dsec_paths *p, const char *image,
			const struct dsec_limits *l, const char *netpol)
{
	pool_init(pool, p, image, l, DSEC_NET_NAT, netpol);
}

/* A profile's requests and class into a pool record (resource.h's spelling). */
static void pool_res_json(json_t *o, const struct dsec_pool *pool)
{
	struct dsec_sandbox sb;

	memset(&sb, 0, sizeof(sb));
	sb.limits = pool->limits;
	sb.req = pool->req;
	sb.cls = pool->cls;
	dsec_res_record(o, &sb);
	json_object_del(json_object_get(o, "limits"), "io_device");
}

json_t *dsec_pool_limits_json(const struct dsec_limits *l)
{
	json_t *o = json_object();

	if (l->cpus == (double)(long long)l->cpus)
		json_object_set_new(o, "cpus", json_integer((json_int_t)l->cpus));
	else
		json_object_set_new(o, "cpus", json_real(l->cpus));
	json_object_set_new(o, "memory", json_integer((json_int_t)l->memory));
	json_object_set_new(o, "pids", json_integer((json_int_t)l->pids));
	json_object_set_new(o, "disk", json_integer((json_int_t)l->disk));
	if (l->io_bps || l->io_iops) {
		json_object_set_new(o, "io_bps", json_integer((json_int_t)l->io_bps));
		json_object_set_new(o, "io_iops", json_integer((json_int_t)l->io_iops));
	}
	if (l->nofile) /* a claim's: applied by each exec (nofile.h), no pool has one */
		json_object_set_new(o, "nofile", json_integer((json_int_t)l->nofile));
	return o;
}

int dsec_pool_save(const struct dsec_pool *pool, struct dsec_err *err)
{
	char path[PATH_MAX + 16], *s;
	json_t *o;
	int rc;

	snprintf(path, sizeof(path), "%s/ready", pool->dir);
	if (dsec_mkdir_p(path, 0700, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/" POOL_FILE, pool->dir);
	if (access(path, F_OK) == 0)
		return 0;
	o = json_pack("{s:s, s:s, s:o, s:s}", "pool", pool->key, "image", pool->image, "limits",
		      dsec_pool_limits_json(&pool->limits), "net", dsec_net_mode_name(pool->net));
	if (pool->net == DSEC_NET_NAT)
		json_object_set_new(o, "net_policy", json_string(pool->netpol));
	pool_res_json(o, pool);
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return dsec_err_set(err, ENOMEM, "%s: encode pool", pool->key);
	rc = dsec_write_atomic(AT_FDCWD, path, s, strlen(s), 0600, 0, err);
	free(s);
	return rc;
}

int dsec_pool_load(const struct dsec_paths *p, const char *key, struct dsec_pool *pool,
		   struct dsec_err *err)
{
	char path[PATH_MAX + 64], *buf;
	json_t *o, *lim, *v;

	memset(pool, 0, sizeof(*pool));
	if (strncmp(key, "p-", 2) || strlen(key) >= DSEC_POOL_KEY_MAX || strchr(key, '/') ||
	    strchr(key, '.'))
		return dsec_err_set(err, EINVAL, "'%.64s': not a pool key", key);
	snprintf(pool->dir, sizeof(pool->dir), "%s/pools/%s", p->run, key);
	snprintf(path, sizeof(path), "%s/" POOL_FILE, pool->dir);
	if (dsec_read_file(AT_FDCWD, path, 65536, &buf, err) < 0)
		return -1;
	o = json_loads(buf, 0, NULL);
	free(buf);
	v = json_object_get(o, "image");
	if (!json_is_string(v) || strlen(json_string_value(v)) > DSEC_NAME_MAX) {
		json_decref(o);
		return dsec_err_set(err, EINVAL, "%s: malformed pool file", key);
	}
	snprintf(pool->key, sizeof(pool->key), "%s", key);
	snprintf(pool->image, sizeof(pool->image), "%s", json_string_value(v));
	lim = json_object_get(o, "limits");
	pool->limits.cpus = json_number_value(json_object_get(lim, "cpus"));
	pool->limits.memory = (uint64_t)json_integer_value(json_object_get(lim, "memory"));
	pool->limits.pids = (uint64_t)json_integer_value(json_object_get(lim, "pids"));
	pool->limits.disk = (uint64_t)json_integer_value(json_object_get(lim, "disk"));
	v = json_object_get(o, "net");
	pool->net = DSEC_NET_NONE;
	if (json_is_string(v))
		dsec_limit_parse("net", json_string_value(v), 0, &pool->limits, &pool->net, NULL);
	v = json_object_get(o, "net_policy");
	if (json_is_string(v))
		snprintf(pool->netpol, sizeof(pool->netpol), "%s", json_string_value(v));
	{
		struct dsec_sandbox sb;

		memset(&sb, 0, sizeof(sb));
		dsec_res_from_json(o, &sb);
		pool->limits.io_bps = sb.limits.io_bps;
		pool->limits.io_iops = sb.limits.io_iops;
		pool->req = sb.req;
		pool->cls = sb.cls;
	}
	json_decref(o);
	return 0;
}

int dsec_pool_lock(const struct dsec_pool *pool, uint64_t wait_us, struct dsec_err *err)
{
	char path[PATH_MAX + 16], what[300];

	snprintf(path, sizeof(path), "%s/lock", pool->dir);
	snprintf(what, sizeof(what), "pool %s (another dsec-warm at work on it)", pool->key);
	return dsec_lock_until(path, 1, wait_us, what, err);
}

int dsec_pool_ready(const struct dsec_pool *pool, struct dsec_pool_entry **out, size_t *n,
		    int times, struct dsec_err *err)
{
	char path[PATH_MAX + 16];
	struct dsec_pool_entry *e = NULL;
	size_t cap = 0, k = 0;
	struct dirent *d;
	DIR *dir;

	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "%s/ready", pool->dir);
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? 0 : dsec_err_sys(err, "open '%s'", path);
	while ((d = readdir(dir))) {
		struct stat st;

		if (!dsec_sandbox_id_ok(d->d_name))
			continue;
		if (k == cap) {
			struct dsec_pool_entry *ne;

			cap = cap ? cap * 2 : 256;
			ne = realloc(e, cap * sizeof(*e));
			if (!ne) {
				free(e);
				closedir(dir);
				return dsec_err_set(err, ENOMEM, "%s: ready list", pool->key);
			}
			e = ne;
		}
		snprintf(e[k].id, sizeof(e[k].id), "%s", d->d_name);
		e[k].created_us = 0;
		if (times && fstatat(dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			e[k].created_us = (uint64_t)st.st_mtim.tv_sec * 1000000 +
					  (uint64_t)st.st_mtim.tv_nsec / 1000;
		k++;
	}
	closedir(dir);
	*out = e;
	*n = k;
	return 0;
}

int dsec_pool_take(int readyfd, const char *run, const char *id, struct dsec_err *err)
{
	char to[PATH_MAX], state[PATH_MAX];
	int e;

	if (snprintf(to, sizeof(to), "%s/sandboxes/%s/" CLAIMED_FILE, run, id) >= (int)sizeof(to))
		return dsec_err_set(err, ENAMETOOLONG, "%s: path too long", id);
	if (renameat2(readyfd, id, AT_FDCWD, to, RENAME_NOREPLACE) == 0) {
		/* ours: pending again (sandbox.h: the state file's mode 0400) until the claimer has
		 * printed its record and committed, so a claimer killed here leaves an orphan that
		 * dsec-reap --orphans removes, not a sandbox nobody knows of */
		snprintf(state, sizeof(state), "%s/sandboxes/%s/sandbox.json", run, id);
		if (chmod(state, 0400) < 0)
			return dsec_err_sys(err, "%s: mark claimed sandbox pending", id);
		return 1;
	}
	e = errno;
	if (e == ENOENT || e == EEXIST) {
		/* another claimer won, or the sandbox's state is gone: drop a dangling entry */
		unlinkat(readyfd, id, 0);
		return 0;
	}
	errno = e;
	return dsec_err_sys(err, "%s: claim", id);
}

/* Write what a claim changes into sandboxes/<id>/claim.json, a new file next to sandbox.json
 * (dsec_sandbox_load merges it). Not a rewrite of sandbox.json: on ext4 a rename over an
 * existing file forces the new file's data out to disk (auto_da_alloc), and deleting the old
 * one frees blocks; each cost about a millisecond a claim on this machine's disk. Not durable:
 * the run dir is gone at reboot anyway. */
static int write_claim(const struct dsec_sandbox *sb, const char *key, struct dsec_err *err)
{
	char path[PATH_MAX + 16], to[PATH_MAX + 16], *s;
	json_t *o = json_object();
	size_t n;
	int rc, fd;

	json_object_set_new(o, "limits", dsec_pool_limits_json(&sb->limits));
	dsec_res_record(o, sb); /* io limits with their device, requests, class */
	json_object_set_new(o, "created", json_integer((json_int_t)sb->created_us));
	json_object_set_new(o, "ttl_us", json_integer((json_int_t)sb->ttl_us));
	json_object_set_new(o, "env", sb->env ? json_incref(sb->env) : json_array());
	json_object_set_new(o, "labels", sb->labels ? json_incref(sb->labels) : json_object());
	dsec_sandbox_defaults_json(o, sb);
	json_object_set_new(o, "pool", json_string(key));
	json_object_set_new(o, "warm", json_true());
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return dsec_err_set(err, ENOMEM, "%s: encode claim", sb->id);
	n = strlen(s);
	s[n] = '\n'; /* overwrites the NUL: written with its length */
	snprintf(path, sizeof(path), "%s/" CLAIMED_FILE, sb->dir);
	/* into the claimed mark, the inode the claim's rename brought along, then renamed to its
	 * name: no new inode per claim (ext4 allocates them slowly after mass deletions) */
	fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC); /* empty: made so by dsec-warm */
	if (fd < 0) {
		rc = dsec_err_sys(err, "%s: open '%s'", sb->id, path);
	} else {
		ssize_t w = write(fd, s, n + 1);

		close(fd);
		snprintf(to, sizeof(to), "%s/" CLAIM_FILE, sb->dir);
		if (w != (ssize_t)(n + 1))
			rc = dsec_err_sys(err, "%s: write '%s'", sb->id, path);
		else if (rename(path, to) < 0)
			rc = dsec_err_sys(err, "%s: rename '%s'", sb->id, path);
		else
			rc = 0;
	}
	free(s);
	return rc;
}

int dsec_pool_claimed(const struct dsec_sandbox *sb)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/" CLAIM_FILE, sb->dir);
	return access(path, F_OK) == 0;
}

int dsec_pool_merge_claim(const char *dir, json_t *state)
{
	char path[PATH_MAX + 16], *buf;
	struct dsec_err err;
	json_t *o;

	snprintf(path, sizeof(path), "%s/" CLAIM_FILE, dir);
	if (dsec_read_file(AT_FDCWD, path, 1 << 20, &buf, &err) < 0)
		return err.errnum == ENOENT ? 0 : -1;
	o = json_loads(buf, 0, NULL);
	free(buf);
	if (!json_is_object(o)) {
		json_decref(o);
		return -1;
	}
	json_object_update(state, o);
	json_decref(o);
	return 0;
}

int dsec_pool_make(const struct dsec_paths *p, const struct dsec_pool *pool,
		   struct dsec_sandbox *sb, struct dsec_err *err)
{
	char path[PATH_MAX + 64];
	int fd;

	memset(sb, 0, sizeof(*sb));
	snprintf(sb->image, sizeof(sb->image), "%s", pool->image);
	sb->limits = pool->limits;
	sb->req = pool->req;
	sb->cls = pool->cls;
	sb->net = pool->net;
	sb->ttl_us = 0; /* a ready sandbox never expires; --max-age recycles it */
	/* ready sandboxes count against the node's capacity with the profile's requests */
	if (dsec_admit_create(p, sb, err) < 0)
		return -1;
	/* --net nat: the network is made here, so that a claim adds nothing (net.h) */
	if (pool->net == DSEC_NET_NAT) {
		static struct dsec_net_policy pol;

		if (dsec_net_policy_parse(pool->netpol, &pol, err) < 0 ||
		    dsec_net_attach(p, sb, &pol, NULL, err) < 0)
			goto fail;
	}
	snprintf(path, sizeof(path), "%s/ready/%s", pool->dir, sb->id);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		dsec_err_sys(err, "create '%s'", path);
		goto fail;
	}
	close(fd);
	/* from here a claimer may take it, even before this commit: it marks the sandbox pending
	 * again itself, and commits it when it has handed it out */
	if (dsec_sandbox_commit(sb, err) < 0) {
		unlink(path);
		goto fail;
	}
	return 0;
fail:
	dsec_err_wrap(err, "%s", pool->key);
	dsec_sandbox_destroy(p, sb, NULL);
	dsec_sandbox_free(sb);
	return -1;
}

int dsec_pool_retire(const struct dsec_paths *p, const struct dsec_pool *pool, const char *id,
		     struct dsec_err *err)
{
	char path[PATH_MAX + 16];
	struct dsec_sandbox sb;
	int fd, r;

	snprintf(path, sizeof(path), "%s/ready", pool->dir);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : dsec_err_sys(err, "open '%s'", path);
	r = dsec_pool_take(fd, p->run, id, err);
	close(fd);
	if (r <= 0)
		return r;
	if (dsec_sandbox_load(p, id, &sb, err) < 0)
		return -1;
	r = dsec_sandbox_destroy(p, &sb, err);
	dsec_sandbox_free(&sb);
	return r < 0 ? -1 : 1;
}

int dsec_pool_prune(const struct dsec_paths *p, const struct dsec_pool *pool, struct dsec_err *err)
{
	struct dsec_pool_entry *e;
	size_t n, left = 0;

	if (dsec_pool_ready(pool, &e, &n, 0, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct dsec_sandbox sb;
		char path[PATH_MAX + 64];
		int alive;

		if (dsec_sandbox_load(p, e[i].id, &sb, NULL) < 0) {
			snprintf(path, sizeof(path), "%s/ready/%s", pool->dir, e[i].id);
			unlink(path);
			continue;
		}
		alive = dsec_sandbox_alive(&sb);
		dsec_sandbox_free(&sb);
		if (alive)
			left++;
		else
			dsec_pool_retire(p, pool, e[i].id, NULL);
	}
	free(e);
	return (int)left;
}

int dsec_pool_remove_if_empty(const struct dsec_pool *pool, struct dsec_err *err)
{
	char path[PATH_MAX + 16];
	int lock, r = 0;

	lock = dsec_pool_lock(pool, 0, NULL);
	if (lock < 0)
		return 0; /* a dsec-warm run is at work */
	snprintf(path, sizeof(path), "%s/ready", pool->dir);
	if (rmdir(path) == 0 || errno == ENOENT) {
		snprintf(path, sizeof(path), "%s/" POOL_FILE, pool->dir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/lock", pool->dir);
		unlink(path);
		if (rmdir(pool->dir) < 0 && errno != ENOENT)
			r = dsec_err_sys(err, "remove '%s'", pool->dir);
		else
			r = 1;
	}
	close(lock);
	return r;
}

int dsec_pool_foreach(const struct dsec_paths *p, dsec_pool_fn fn, void *ctx, struct dsec_err *err)
{
	char path[PATH_MAX];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/pools", p->run);
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? 0 : dsec_err_sys(err, "open '%s'", path);
	while ((d = readdir(dir))) {
		struct dsec_pool pool;

		if (d->d_name[0] == '.' || dsec_pool_load(p, d->d_name, &pool, NULL) < 0)
			continue;
		if (fn(&pool, ctx) < 0)
			break;
	}
	closedir(dir);
	return 0;
}

struct readyset_ctx {
	struct dsec_pool_readyset *rs;
	size_t cap;
	int failed;
	struct dsec_err *err;
};

static int readyset_one(const struct dsec_pool *pool, void *ctx)
{
	struct readyset_ctx *c = ctx;
	struct dsec_pool_entry *e;
	size_t n;

	if (dsec_pool_ready(pool, &e, &n, 0, c->err) < 0) {
		c->failed = 1;
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct dsec_pool_readyset *rs = c->rs;

		if (rs->n == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 256;
			void *m = realloc(rs->e, cap * sizeof(*rs->e));

			if (!m) {
				free(e);
				c->failed = 1;
				dsec_err_set(c->err, ENOMEM, "%s: list ready sandboxes", pool->key);
				return -1;
			}
			rs->e = m;
			c->cap = cap;
		}
		snprintf(rs->e[rs->n].id, sizeof(rs->e[rs->n].id), "%s", e[i].id);
		snprintf(rs->e[rs->n].pool, sizeof(rs->e[rs->n].pool), "%s", pool->key);
		rs->n++;
	}
	free(e);
	return 0;
}

static int ready_id_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dsec_pool_ready_id *)a)->id,
		      ((const struct dsec_pool_ready_id *)b)->id);
}

int dsec_pool_readyset(const struct dsec_paths *p, struct dsec_pool_readyset *rs,
		       struct dsec_err *err)
{
	struct readyset_ctx c = {.rs = rs, .err = err};

	memset(rs, 0, sizeof(*rs));
	if (dsec_pool_foreach(p, readyset_one, &c, err) < 0 || c.failed)
		return -1;
	if (rs->n)
		qsort(rs->e, rs->n, sizeof(*rs->e), ready_id_cmp);
	return 0;
}

const char *dsec_pool_readyset_find(const struct dsec_pool_readyset *rs, const char *id)
{
	struct dsec_pool_ready_id key;
	const struct dsec_pool_ready_id *f;

	if (!rs->n)
		return NULL;
	snprintf(key.id, sizeof(key.id), "%s", id);
	f = bsearch(&key, rs->e, rs->n, sizeof(*rs->e), ready_id_cmp);
	return f ? f->pool : NULL;
}

void dsec_pool_readyset_free(struct dsec_pool_readyset *rs)
{
	free(rs->e);
	memset(rs, 0, sizeof(*rs));
}

struct cleanup_ctx {
	const struct dsec_paths *p;
	int failed;
	struct dsec_err *err;
};

static int cleanup_one(const struct dsec_pool *pool, void *ctx)
{
	struct cleanup_ctx *c = ctx;

	if (dsec_pool_prune(c->p, pool, c->err) < 0 || dsec_pool_remove_if_empty(pool, c->err) < 0)
		c->failed = 1;
	return 0;
}

int dsec_pool_cleanup(const struct dsec_paths *p, struct dsec_err *err)
{
	struct cleanup_ctx c = {.p = p, .err = err};
	char path[PATH_MAX];

	if (dsec_pool_foreach(p, cleanup_one, &c, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/pools", p->run);
	rmdir(path); /* fails while a pool is left: fine */
	return c.failed ? -1 : 0;
}

json_t *dsec_pool_record(const struct dsec_pool *pool)
{
	struct dsec_pool_entry *e;
	size_t n = 0;
	uint64_t oldest = 0, now = dsec_wall_us();
	json_t *o;

	char sbdir[PATH_MAX + 32];
	size_t live = 0;
	int sfd;

	if (dsec_pool_ready(pool, &e, &n, 1, NULL) < 0)
		e = NULL;
	/* an entry whose sandbox was reaped by id stays until a claim or dsec-warm prunes it:
	 * count the ready ones that still have their state ($DSEC_RUN/sandboxes/ID) */
	snprintf(sbdir, sizeof(sbdir), "%s/../../sandboxes", pool->dir);
	sfd = open(sbdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; i < n; i++) {
		if (sfd >= 0 && faccessat(sfd, e[i].id, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		live++;
		if (e[i].created_us && (!oldest || e[i].created_us < oldest))
			oldest = e[i].created_us;
	}
	if (sfd >= 0)
		close(sfd);
	n = live;
	free(e);
	o = json_pack("{s:s, s:s, s:I, s:o, s:s}", "pool", pool->key, "image", pool->image, "ready",
		      (json_int_t)n, "limits", dsec_pool_limits_json(&pool->limits), "net",
		      dsec_net_mode_name(pool->net));
	pool_res_json(o, pool);
	json_object_set_new(
	    o, "oldest_age",
	    json_integer(oldest && now > oldest ? (json_int_t)((now - oldest) / 1000000) : 0));
	return o;
}

long dsec_pool_live(const struct dsec_paths *p, struct dsec_err *err)
{
	char path[PATH_MAX];
	struct dirent *d;
	long n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/sandboxes", p->run);
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? 0 : dsec_err_sys(err, "open '%s'", path);
	while ((d = readdir(dir)))
		if (dsec_sandbox_id_ok(d->d_name))
			n++;
	closedir(dir);
	return n;
}

uint64_t dsec_mem_available(void)
{
	return dsec_meminfo("MemAvailable:");
}

/* One pool as a claimer sees it: its ready entries as read, and how far it got. */
struct dsec_claim_pool {
	struct dsec_pool pool;
	int readyfd;
	struct dsec_pool_entry *e;
	size_t n, next;
	int empty; /* a read found nothing: do not read again in this run */
};

static int add_pool(const struct dsec_pool *pool, void *ctx)
{
	struct dsec_claimer *c = ctx;
	struct dsec_claim_pool *np = realloc(c->pools, (c->npools + 1) * sizeof(*np));
	char path[PATH_MAX + 16];

	if (!np)
		return -1;
	c->pools = np;
	np += c->npools;
	memset(np, 0, sizeof(*np));
	np->pool = *pool;
	snprintf(path, sizeof(path), "%s/ready", pool->dir);
	np->readyfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (np->readyfd < 0)
		return 0;
	c->npools++;
	return 0;
}

/* (Re)read a pool's ready dir, and start at an offset of our own: concurrent claimers then
 * mostly try different entries instead of all racing for the first. */
static int reload(struct dsec_claim_pool *cp, struct dsec_err *err)
{
	size_t off;

	free(cp->e);
	cp->e = NULL;
	cp->next = 0;
	if (dsec_pool_ready(&cp->pool, &cp->e, &cp->n, 0, err) < 0)
		return -1;
	if (!cp->n) {
		cp->empty = 1;
		return 0;
	}
	off = ((size_t)getpid() * 2654435761u) % cp->n;
	if (off) {
		struct dsec_pool_entry *r = malloc(cp->n * sizeof(*r));

		if (!r)
			return dsec_err_set(err, ENOMEM, "ready list");
		memcpy(r, cp->e + off, (cp->n - off) * sizeof(*r));
		memcpy(r + (cp->n - off), cp->e, off * sizeof(*r));
		free(cp->e);
		cp->e = r;
	}
	return 0;
}

/* Make the claimed sandbox what the request asked for: limits, requests and class are cgroup
 * writes (and the holder's policy); requests that grow go through admission first. 0, -1, or
 * -2 with ENOSPC when the node has no room for the growth (nothing changed). */
static int apply(const struct dsec_paths *p, const struct dsec_pool *pool, struct dsec_sandbox *sb,
		 const struct dsec_sandbox *req, struct dsec_err *err)
{
	struct dsec_sandbox want = *sb;
	int64_t a[DSEC_R_N], b[DSEC_R_N], d[DSEC_R_N];
	int any = 0;

	want.limits = req->limits;
	want.limits.disk = sb->limits.disk;
	want.req = req->req;
	want.cls = req->cls;
	if (dsec_res_prepare(p, &want, err) < 0)
		return -1;
	dsec_admit_amounts(&sb->req, a);
	dsec_admit_amounts(&want.req, b);
	for (int r = 0; r < DSEC_R_N; r++)
		any |= (d[r] = b[r] - a[r]) != 0;
	if (any && dsec_admit(p, sb->id, sb->holder_pid, sb->holder_start, d, err) < 0)
		return err->errnum == ENOSPC ? -2 : -1;
	if (dsec_res_apply(&want, sb, err) < 0)
		return -1;
	sb->limits = want.limits;
	sb->req = want.req;
	sb->cls = want.cls;
	snprintf(sb->io_dev, sizeof(sb->io_dev), "%s", want.io_dev);
	sb->ttl_us = req->ttl_us;
	sb->created_us = dsec_wall_us();
	json_decref(sb->env);
	json_decref(sb->labels);
	sb->env = req->env ? json_incref(req->env) : NULL;
	sb->labels = req->labels ? json_incref(req->labels) : NULL;
	snprintf(sb->workdir, sizeof(sb->workdir), "%s", req->workdir);
	snprintf(sb->user, sizeof(sb->user), "%s", req->user);
	return write_claim(sb, pool->key, err);
}

/* Give a claimed sandbox back to its pool (the inverse of dsec_pool_take). 0 or -1. */
static int put_back(int readyfd, const struct dsec_sandbox *sb)
{
	char from[PATH_MAX + 16], state[PATH_MAX + 16];

	snprintf(from, sizeof(from), "%s/" CLAIMED_FILE, sb->dir);
	snprintf(state, sizeof(state), "%s/sandbox.json", sb->dir);
	if (chmod(state, 0600) < 0 || renameat(AT_FDCWD, from, readyfd, sb->id) < 0)
		return -1;
	return 0;
}

/* Try pool cp's entries until one is won and made the request. 1, 0 (none left), -1. */
static int claim_from(struct dsec_claimer *c, struct dsec_claim_pool *cp, struct dsec_sandbox *sb,
		      struct dsec_err *err)
{
	struct dsec_sandbox req = *sb;

	for (;;) {
		const char *id;
		int r;

		if (cp->next >= cp->n) {
			if (cp->empty || reload(cp, err) < 0 || cp->empty)
				return cp->empty ? 0 : -1;
		}
		id = cp->e[cp->next++].id;
		r = dsec_pool_take(cp->readyfd, c->paths->run, id, NULL);
		if (r <= 0)
			continue; /* gone, or still being made */
		if (dsec_sandbox_load(c->paths, id, sb, err) < 0) {
			*sb = req;
			continue; /* reaped under us */
		}
		if (!dsec_sandbox_alive(sb)) {
			dsec_sandbox_destroy(c->paths, sb, NULL);
			dsec_sandbox_free(sb);
			*sb = req;
			continue;
		}
		r = apply(c->paths, &cp->pool, sb, &req, err);
		if (r == -2 && put_back(cp->readyfd, sb) == 0) {
			/* no room for what this request adds to the pool's profile: the sandbox
			 * stays ready for a smaller one */
			dsec_sandbox_free(sb);
			*sb = req;
			return -1;
		}
		if (r < 0) {
			dsec_err_wrap(err, "%s: claim", id);
			dsec_sandbox_destroy(c->paths, sb, NULL);
			dsec_sandbox_free(sb);
			*sb = req;
			return -1;
		}
		return 1;
	}
}

static int matches(const struct dsec_pool *pool, const struct dsec_sandbox *sb, const char *netpol,
		   int exact)
{
	const struct dsec_limits *a = &pool->limits, *b = &sb->limits;

	/* io limits too: a v1 sandbox without them has no blkio cgroup to put them in */
	if (strcmp(pool->image, sb->image) || pool->net != sb->net || a->disk != b->disk ||
	    a->io_bps != b->io_bps || a->io_iops != b->io_iops)
		return 0;
	if (pool->net == DSEC_NET_NAT && strcmp(pool->netpol, netpol ? netpol : ""))
		return 0;
	return !exact || (a->cpus == b->cpus && a->memory == b->memory && a->pids == b->pids &&
			  !memcmp(&pool->req, &sb->req, sizeof(sb->req)) && pool->cls == sb->cls);
}

int dsec_pool_claim(struct dsec_claimer *c, struct dsec_sandbox *sb, struct dsec_err *err)
{
	if (sb->hostname[0])
		return 0;
	if (!c->loaded) {
		c->loaded = 1;
		if (dsec_pool_foreach(c->paths, add_pool, c, err) < 0)
			return -1;
	}
	/* the pool of exactly this profile first, then one that differs only in cgroup limits */
	for (int exact = 1; exact >= 0; exact--)
		for (size_t i = 0; i < c->npools; i++) {
			struct dsec_claim_pool *cp = &c->pools[i];
			int r;

			if (cp->empty || matches(&cp->pool, sb, c->netpol, 1) != exact ||
			    !matches(&cp->pool, sb, c->netpol, 0))
				continue;
			r = claim_from(c, cp, sb, err);
			if (r != 0)
				return r;
		}
	return 0;
}

void dsec_claimer_free(struct dsec_claimer *c)
{
	for (size_t i = 0; i < c->npools; i++) {
		close(c->pools[i].readyfd);
		free(c->pools[i].e);
	}
	free(c->pools);
	c->pools = NULL;
	c->npools = 0;
	c->loaded = 0;
}
