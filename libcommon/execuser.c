/* dsec-exec --user: who a command runs as inside its sandbox. Names are looked up in the
 * sandbox's own /etc/passwd and /etc/group, opened from outside with every link resolved inside
 * its root (dsec_rootfs_open) and read bounded: the files are the sandbox's and may be anything. */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ns.h"

#define DB_MAX (4u << 20) /* bytes of /etc/passwd or /etc/group read at most */
#define LINE_MAX_ 4096    /* longer lines are skipped */

/* The sandbox's file at path (relative), NUL-terminated, or NULL (missing, not a regular file,
 * not the sandbox's, unreadable, or over DB_MAX: *too_big then). We read as host root: with a
 * user namespace, a file its ids do not own (a link to something of /sys or /proc only host
 * root may read) is not taken, so nothing the sandbox could not read comes back to it. */
static char *read_db(const struct dsec_sandbox *sb, const char *path, int *too_big)
{
	struct dsec_idmap m = dsec_sandbox_idmap(sb);
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	ssize_t n;
	int fd =
	    dsec_rootfs_open(sb->holder_pid, path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);

	*too_big = 0;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (sb->userns && dsec_idmap_inside(&m, st.st_uid) < 0) || !(buf = malloc(DB_MAX + 1)))
		goto fail;
	while (len < DB_MAX && (n = read(fd, buf + len, DB_MAX - len)) > 0)
		len += (size_t)n;
	if (len == DB_MAX) {
		char c;

		if (read(fd, &c, 1) == 1) {
			*too_big = 1;
			goto fail;
		}
	}
	close(fd);
	buf[len] = '\0';
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

/* A decimal id (no sign, no spaces, below 2^32-1), or -1. */
static long long parse_id(const char *s)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v >= 0xffffffffULL)
		return -1;
	return (long long)v;
}

/* Split line (copied into copy) into up to nf ':'-separated fields; the count. */
static int split(const char *line, size_t len, char *copy, char **f, int nf)
{
	int k = 0;
	char *s;

	memcpy(copy, line, len);
	copy[len] = '\0';
	for (s = copy; k < nf; k++) {
		f[k] = s;
		if (!(s = strchr(s, ':'))) {
			k++;
			break;
		}
		*s++ = '\0';
	}
	return k;
}

/* The first line of db with at least nf fields whose field key is name (when name) or the
 * number num (otherwise): its fields in f (pointing into copy). 1 found, 0 not. */
static int db_find(const char *db, int nf, int key, const char *name, long long num, char *copy,
		   char **f)
{
	const char *l, *e;

	for (l = db; l && *l; l = e ? e + 1 : NULL) {
		size_t len;

		e = strchr(l, '\n');
		len = e ? (size_t)(e - l) : strlen(l);
		if (len >= LINE_MAX_ || *l == '#' || split(l, len, copy, f, nf) < nf)
			continue;
		if (name ? !strcmp(f[key], name) : parse_id(f[key]) == num)
			return 1;
	}
	return 0;
}

static int add_group(struct dsec_exec_user *u, gid_t g)
{
	for (size_t i = 0; i < u->ngroups; i++)
		if (u->groups[i] == g)
			return 0;
	if (u->ngroups == DSEC_EXEC_USER_GROUPS)
		return -1;
	u->groups[u->ngroups++] = g;
	return 0;
}

/* Every group of /etc/group that lists name as a member (below limit, when not 0: a gid the
 * sandbox does not map is left out). */
static void member_groups(const char *db, const char *name, struct dsec_exec_user *u,
			  unsigned limit, char *copy)
{
	const char *l, *e;
	char *f[4];

	for (l = db; l && *l; l = e ? e + 1 : NULL) {
		long long g;
		size_t len;

		e = strchr(l, '\n');
		len = e ? (size_t)(e - l) : strlen(l);
		if (len >= LINE_MAX_ || split(l, len, copy, f, 4) < 4 || (g = parse_id(f[2])) < 0 ||
		    (limit && g >= limit))
			continue;
		for (char *save = NULL, *m = strtok_r(f[3], ",", &save); m;
		     m = strtok_r(NULL, ",", &save))
			if (!strcmp(m, name)) {
				if (add_group(u, (gid_t)g) < 0)
					return;
				break;
			}
	}
}

int dsec_exec_user_resolve(const struct dsec_sandbox *sb, const char *spec,
			   struct dsec_exec_user *u, struct dsec_err *err)
{
	char *passwd = NULL, *group = NULL, *copy = NULL, *f[7], uname[256], gname[256];
	const char *colon = strchr(spec, ':');
	long long uid, gid = -1;
	int big_p, big_g, r = -1, have_pw;
	size_t ul = colon ? (size_t)(colon - spec) : strlen(spec);

	memset(u, 0, sizeof(*u));
	if (!ul || ul >= sizeof(uname) ||
	    (colon && (!colon[1] || strlen(colon + 1) >= sizeof(gname))))
		return dsec_err_set(err, EINVAL, "user '%.64s': not USER[:GROUP]", spec);
	memcpy(uname, spec, ul);
	uname[ul] = '\0';
	snprintf(gname, sizeof(gname), "%s", colon ? colon + 1 : "");
	passwd = read_db(sb, "etc/passwd", &big_p);
	group = read_db(sb, "etc/group", &big_g);
	if (big_p || big_g) {
		dsec_err_set(err, EFBIG, "user '%.64s': the sandbox's /etc/%s is over %u MiB", spec,
			     big_p ? "passwd" : "group", DB_MAX >> 20);
		goto out;
	}
	if (!(copy = malloc(LINE_MAX_))) {
		dsec_err_set(err, ENOMEM, "user");
		goto out;
	}
	uid = parse_id(uname);
	have_pw = db_find(passwd, 7, uid < 0 ? 0 : 2, uid < 0 ? uname : NULL, uid, copy, f);
	if (uid < 0 && !have_pw) {
		dsec_err_set(err, ENOENT, "user '%s': not in the sandbox's /etc/passwd", uname);
		goto out;
	}
	if (have_pw) {
		uid = parse_id(f[2]);
		gid = parse_id(f[3]);
		snprintf(u->home, sizeof(u->home), "%s", *f[5] == '/' ? f[5] : "/");
		snprintf(uname, sizeof(uname), "%s", f[0]);
		if (uid < 0) {
			dsec_err_set(err, EINVAL, "user '%s': bad uid in the sandbox's /etc/passwd",
				     uname);
			goto out;
		}
	} else
		snprintf(u->home, sizeof(u->home), "/");
	if (gname[0]) {
		gid = parse_id(gname);
		if (gid < 0) {
			char *g[4];

			if (!db_find(group, 4, 0, gname, 0, copy, g) ||
			    (gid = parse_id(g[2])) < 0) {
				dsec_err_set(err, ENOENT,
					     "group '%s': not in the sandbox's /etc/group", gname);
				goto out;
			}
		}
	} else if (gid < 0)
		gid = 0; /* a uid with no passwd entry: group 0, as docker and runc do */
	if (sb->userns && (uid >= sb->id_count || gid >= sb->id_count)) {
		dsec_err_set(err, ERANGE,
			     "user '%.64s': %s %lld is not mapped in the sandbox (0-%u)", spec,
			     uid >= sb->id_count ? "uid" : "gid", uid >= sb->id_count ? uid : gid,
			     sb->id_count - 1);
		goto out;
	}
	u->uid = (uid_t)uid;
	u->gid = (gid_t)gid;
	add_group(u, u->gid);
	if (have_pw)
		member_groups(group, uname, u, sb->userns ? sb->id_count : 0, copy);
	r = 0;
out:
	free(passwd);
	free(group);
	free(copy);
	return r;
}

int dsec_exec_env_as(const struct dsec_exec_target *t, const char *user, struct dsec_env *env,
		     struct dsec_exec_user *who, const struct dsec_exec_user **as,
		     struct dsec_err *err)
{
	size_t i;
	json_t *v;

	*as = NULL;
	if (!user && t->sb.user[0])
		user = t->sb.user;
	if ((user && dsec_exec_user_resolve(&t->sb, user, who, err) < 0) ||
	    dsec_env_init(env, &t->sb, err) < 0)
		return -1;
	if (!user)
		return 0;
	*as = who;
	json_array_foreach(t->sb.env, i, v)
	{
		if (json_is_string(v) && !strncmp(json_string_value(v), "HOME=", 5))
			return 0;
	}
	return dsec_env_set(env, "HOME", who->home, err);
}
