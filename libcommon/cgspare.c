/* Spare cgroups: a reaped sandbox's cgroups, emptied, kept for the next sandbox of the run dir
 * instead of removed and made again (cgroup.h).
 *
 * Why: making a memory cgroup allocates its share of the kernel's shrinker bookkeeping, a bit
 * and a counter for every superblock on the host (five a sandbox), and removing one reparents
 * it over every superblock's LRU lists; a CPU quota write checks every cpu cgroup of the host.
 * All three grow with the number of live sandboxes: at 5,000 live they were most of a spawn and
 * of a reap. A spare costs none of them again.
 *
 * How: the reaper renames the sandbox's dir in every hierarchy to spare-<hex> (v1 renames
 * within a parent), resets what counts (CPU time, memory peak and failures), thaws it, and
 * writes $DSEC_RUN/cgspare/spare-<hex>.json, the state of the sandbox it held, last. A spawn
 * takes one by reading and unlinking its marker (one taker wins), renames the dirs to its own
 * id and writes only the limits and requests that differ from the old state. Crashes: a spare
 * dir without a marker, or a taken one not yet named by a state, is an orphan (--orphans
 * removes it); a marker whose dirs are gone is dropped by the taker.
 *
 * Only cgroup v1 (this kernel's v2 cannot rename a cgroup, nor reset memory.peak, which every
 * record reports per sandbox), never with a blkio cgroup (made only for io limits). */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup-int.h"
#include "sandbox.h"
#include "state.h"

#define SPARE_DIR "cgspare"
#define SPARE_PREFIX "spare-"
#define SPARE_DEFAULT 1024

/* How many spares a run dir keeps: $DSEC_SPARE_CGROUPS, default 1024; 0 turns them off. */
static long spare_max(void)
{
	static long max = -1;

	if (max < 0) {
		const char *e = getenv("DSEC_SPARE_CGROUPS");
		char *end;

		max = SPARE_DEFAULT;
		if (e && *e) {
			long v = strtol(e, &end, 10);

			if (!*end && v >= 0)
				max = v;
		}
	}
	return max;
}

static void spare_path(const struct dsec_paths *p, const char *name, char *buf, size_t n)
{
	if (name)
		snprintf(buf, n, "%s/" SPARE_DIR "/%s", p->run, name);
	else
		snprintf(buf, n, "%s/" SPARE_DIR, p->run);
}

/* The dir next to path (same parent) named name. */
static void sibling(const char *path, const char *name, char *buf, size_t n)
{
	const char *s = strrchr(path, '/');

	snprintf(buf, n, "%.*s/%s", s ? (int)(s - path) : 0, path, name);
}

static int same_parent(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');

	return sa && sb && sa - a == sb - b && !strncmp(a, b, (size_t)(sa - a));
}

/* A marker: spare-<hex>.json (not the temporary file one is written through). */
static int is_marker(const char *name)
{
	size_t n = strlen(name);

	return !strncmp(name, SPARE_PREFIX, strlen(SPARE_PREFIX)) && n > 5 &&
	       !strcmp(name + n - 5, ".json");
}

/* How many markers there are. A readdir of the whole dir at every reap grew with the spares
 * (a fifth of a reap with 1,000): on a tmpfs (where the run dir belongs) a dir's size is 20
 * bytes an entry, which bounds it in one stat; elsewhere, count. */
long dsec_cgspare_count(const struct dsec_paths *p)
{
	char dir[PATH_MAX];
	struct dirent *e;
	struct statfs sf;
	struct stat st;
	long n = 0;
	DIR *d;

	spare_path(p, NULL, dir, sizeof(dir));
	if (statfs(dir, &sf) == 0 && sf.f_type == TMPFS_MAGIC && stat(dir, &st) == 0)
		return st.st_size > 40 ? (long)(st.st_size / 20 - 2) : 0; /* "." and ".." too */
	if (!(d = opendir(dir)))
		return 0;
	while ((e = readdir(d)))
		n += is_marker(e->d_name);
	closedir(d);
	return n;
}

/* Rename every hierarchy's dir of from to the matching one of to; all or none (best effort
 * back on failure). 0 or -1. */
static int rename_all(const struct dsec_cgroup *from, const struct dsec_cgroup *to)
{
	int c, k;

	for (c = 0; c < DSEC_CG_NCTRL; c++) {
		if (!from->v1[c][0])
			continue;
		if (rename(from->v1[c], to->v1[c]) < 0) {
			for (k = 0; k < c; k++)
				if (from->v1[k][0])
					rename(to->v1[k], from->v1[k]);
			return -1;
		}
	}
	return 0;
}

/* Nothing left in any of the sandbox's dirs, and no exec-* cgroup below them. */
static int empty_all(const struct dsec_cgroup *cg)
{
	char buf[64], sub[DSEC_CG_PATH_MAX + 64];
	struct dirent *e;
	struct stat st;
	DIR *d;

	for (int c = 0; c < DSEC_CG_NCTRL; c++) {
		if (!cg->v1[c][0])
			continue;
		if (dsec_cg_read(cg->v1[c], "cgroup.procs", buf, sizeof(buf)) != 0)
			return 0;
		/* a cgroup dir's link count is 2 + its child cgroups: no readdir without one */
		if (stat(cg->v1[c], &st) < 0)
			return 0;
		if (st.st_nlink == 2)
			continue;
		if (!(d = opendir(cg->v1[c])))
			return 0;
		while ((e = readdir(d)))
			if (e->d_type == DT_DIR && !strncmp(e->d_name, "exec-", 5)) {
				snprintf(sub, sizeof(sub), "%s/%s", cg->v1[c], e->d_name);
				if (rmdir(sub) < 0) {
					closedir(d);
					return 0;
				}
			}
		closedir(d);
	}
	return 1;
}

int dsec_cgspare_put(const struct dsec_paths *p, const struct dsec_sandbox *sb)
{
	struct dsec_sandbox spare = *sb;
	char name[32], file[PATH_MAX], dir[PATH_MAX];
	unsigned char r[6];
	json_t *o;
	char *s;
	int rc;

	/* only a state read whole: the taker trusts its limits to be what the dirs hold */
	if (sb->cg.version != 1 || !sb->image[0] || sb->cg.v1[DSEC_CG_BLKIO][0] || !spare_max() ||
	    dsec_cgspare_count(p) >= spare_max() || !empty_all(&sb->cg))
		return 1;
	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		return 1;
	snprintf(name, sizeof(name), SPARE_PREFIX "%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
		 r[3], r[4], r[5]);
	spare.env = spare.labels = NULL; /* none of it is the next sandbox's business */
	for (int c = 0; c < DSEC_CG_NCTRL; c++)
		if (sb->cg.v1[c][0])
			sibling(sb->cg.v1[c], name, spare.cg.v1[c], sizeof(spare.cg.v1[c]));
	if (rename_all(&sb->cg, &spare.cg) < 0)
		return 1;
	/* what counts starts again at 0 for the next sandbox */
	dsec_cg_write(spare.cg.v1[DSEC_CG_CPUACCT][0] ? spare.cg.v1[DSEC_CG_CPUACCT]
						      : spare.cg.v1[DSEC_CG_CPU],
		      "cpuacct.usage", "0", NULL);
	dsec_cg_write(spare.cg.v1[DSEC_CG_MEMORY], "memory.max_usage_in_bytes", "0", NULL);
	dsec_cg_write(spare.cg.v1[DSEC_CG_MEMORY], "memory.failcnt", "0", NULL);
	dsec_cg_write(spare.cg.v1[DSEC_CG_MEMORY], "memory.memsw.max_usage_in_bytes", "0", NULL);
	dsec_cg_write(spare.cg.v1[DSEC_CG_MEMORY], "memory.memsw.failcnt", "0", NULL);
	if (spare.cg.v1[DSEC_CG_FREEZER][0])
		dsec_cg_write(spare.cg.v1[DSEC_CG_FREEZER], "freezer.state", "THAWED", NULL);
	/* the marker last: a spare without one is an orphan */
	o = dsec_sandbox_to_json(&spare);
	s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	spare_path(p, NULL, dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s.json", name);
	rc = s && (mkdir(dir, 0700) == 0 || errno == EEXIST) ? 0 : -1;
	if (rc == 0) {
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		rc = dfd < 0 ? -1 : dsec_write_atomic(dfd, file, s, strlen(s), 0600, 0, NULL);
		if (dfd >= 0)
			close(dfd);
	}
	free(s);
	if (rc < 0) /* no marker: the dirs go now, not at the next --orphans */
		dsec_cgroup_remove(&spare, NULL);
	return 0;
}

/* Take the spare whose marker is name (in dir fd dfd) for sb: 0, or -1 (the marker is gone
 * either way; what is left of the spare is removed). */
static int take_one(int dfd, const char *name, struct dsec_sandbox *sb, struct dsec_err *err)
{
	struct dsec_sandbox old;
	json_error_t je;
	char *buf = NULL;
	json_t *o;
	int rc;

	if (dsec_read_file(dfd, name, 1 << 20, &buf, NULL) < 0)
		return -1;
	if (unlinkat(dfd, name, 0) < 0) { /* another spawn took it first */
		free(buf);
		return -1;
	}
	o = json_loads(buf, 0, &je);
	free(buf);
	memset(&old, 0, sizeof(old));
	rc = json_is_object(o) ? dsec_sandbox_parse(o, &old, NULL) : -1;
	json_decref(o);
	if (rc < 0 || old.cg.version != 1) {
		dsec_sandbox_free(&old);
		return -1;
	}
	for (int c = 0; c < DSEC_CG_NCTRL; c++) {
		const char *base = strrchr(old.cg.v1[c], '/');

		/* the same hierarchies, under the same parent, and a spare's name */
		if (!old.cg.v1[c][0] != !sb->cg.v1[c][0] ||
		    (old.cg.v1[c][0] && (!same_parent(old.cg.v1[c], sb->cg.v1[c]) || !base ||
					 strncmp(base + 1, SPARE_PREFIX, strlen(SPARE_PREFIX))))) {
			dsec_sandbox_free(&old);
			return -1;
		}
	}
	if (rename_all(&old.cg, &sb->cg) < 0) {
		dsec_cgroup_remove(&old, NULL);
		dsec_sandbox_free(&old);
		return -1;
	}
	/* what differs from the sandbox it held: no write at all for the same profile */
	if (dsec_cgroup_set_limits(sb, &old.limits, &sb->limits, err) < 0 ||
	    dsec_cgroup_set_resources(sb, &old, err) < 0) {
		dsec_cgroup_remove(sb, NULL);
		dsec_sandbox_free(&old);
		return -1;
	}
	dsec_sandbox_free(&old);
	return 0;
}

int dsec_cgspare_take(const struct dsec_paths *p, struct dsec_sandbox *sb)
{
	/* a small buffer: one spare is wanted, and the first entry is one unless another spawn
	 * took it, where readdir's 32 KiB would list a thousand every time */
	char dir[PATH_MAX], buf[1024];
	struct dsec_err err;
	long n;
	int fd, rc = 1;

	if (sb->cg.version != 1 || sb->cg.v1[DSEC_CG_BLKIO][0] || !spare_max())
		return 1;
	spare_path(p, NULL, dir, sizeof(dir));
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return 1;
	while (rc && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
		for (long off = 0; rc && off < n;) {
			struct dirent64 *e = (struct dirent64 *)(buf + off);

			off += e->d_reclen;
			if (is_marker(e->d_name) && take_one(fd, e->d_name, sb, &err) == 0)
				rc = 0;
		}
	close(fd);
	return rc;
}

/* Every hierarchy's dir named name under this run dir's parents. */
static void remove_named(const struct dsec_paths *p, const char *name)
{
	struct dsec_sandbox sb;
	struct dsec_err err;

	memset(&sb, 0, sizeof(sb));
	snprintf(sb.id, sizeof(sb.id), "%s", name);
	if (dsec_cgroup_paths(p, &sb, &err) == 0)
		dsec_cgroup_remove(&sb, NULL);
}

struct clear_ctx {
	const struct dsec_paths *p;
	int all;
};

static int clear_dir(const char *name, void *ctx)
{
	struct clear_ctx *c = ctx;
	char marker[PATH_MAX + 64];

	if (strncmp(name, SPARE_PREFIX, strlen(SPARE_PREFIX)))
		return 0;
	spare_path(c->p, name, marker, sizeof(marker));
	strcat(marker, ".json");
	if (c->all || access(marker, F_OK) < 0) {
		unlink(marker);
		remove_named(c->p, name);
	}
	return 0;
}

void dsec_cgspare_clear(const struct dsec_paths *p, int all)
{
	struct clear_ctx c = {p, all};
	char dir[PATH_MAX], name[64];
	struct dirent *e;
	DIR *d;

	if (dsec_cgroup_version(NULL) != 1)
		return;
	dsec_cgroup_foreach(p, clear_dir, &c, NULL);
	/* markers whose dirs are gone */
	spare_path(p, NULL, dir, sizeof(dir));
	if (!(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		struct dsec_sandbox sb;
		struct dsec_err err;

		if (!is_marker(e->d_name)) { /* a marker's temporary file a crash left */
			if (e->d_name[0] != '.')
				unlinkat(dirfd(d), e->d_name, 0);
			continue;
		}
		if (n - 5 >= sizeof(name))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(n - 5), e->d_name);
		memset(&sb, 0, sizeof(sb));
		snprintf(sb.id, sizeof(sb.id), "%s", name);
		if (all || dsec_cgroup_paths(p, &sb, &err) < 0 ||
		    access(sb.cg.v1[DSEC_CG_MEMORY], F_OK) < 0)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
	if (all)
		rmdir(dir);
}
