/* Layer import: hash the uncompressed tar stream while extracting it, safely, into a staging
 * dir; build the runtime form; publish by rename. See layer.h and store.h. */
#include "layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "layer-int.h"

/* ---- the pure parts ---- */

int dsec_utf8_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		unsigned c = *p, n, cp;

		if (c < 0x80) {
			p++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, cp = c & 0x07;
		else
			return 0;
		for (unsigned i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (p[i] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		p += n + 1;
	}
	return 1;
}

int dsec_layer_clean_path(const char *in, char *out, size_t outsz, int *was_abs,
			  struct dsec_err *err)
{
	size_t o = 0, len = strlen(in);
	const char *s = in;

	*was_abs = in[0] == '/';
	if (len >= PATH_MAX)
		return dsec_err_set(err, ENAMETOOLONG, "name of %zu bytes: longer than PATH_MAX",
				    len);
	if (!dsec_utf8_ok(in))
		return dsec_err_set(err, EILSEQ, "name is not valid UTF-8");
	while (*s) {
		size_t n;

		while (*s == '/')
			s++;
		n = strcspn(s, "/");
		if (n == 0)
			break;
		if (n == 1 && s[0] == '.') {
			s += n;
			continue;
		}
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return dsec_err_set(err, EINVAL, "'%s': '..' leads out of the layer", in);
		if (n > NAME_MAX)
			return dsec_err_set(err, ENAMETOOLONG, "component longer than NAME_MAX");
		if (o + n + 2 > outsz)
			return dsec_err_set(err, ENAMETOOLONG, "name too long");
		if (o)
			out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
		s += n;
	}
	out[o] = '\0';
	return 0;
}

int dsec_layer_whiteout(const char *clean, char *target, size_t targetsz, struct dsec_err *err)
{
	const char *slash = strrchr(clean, '/');
	const char *base = slash ? slash + 1 : clean;
	size_t dirlen = slash ? (size_t)(slash - clean) : 0;
	const char *victim;

	if (strncmp(base, ".wh.", 4))
		return DSEC_WH_NONE;
	if (dirlen + strlen(base) + 2 > targetsz)
		return dsec_err_set(err, ENAMETOOLONG, "whiteout name too long");
	if (!strcmp(base, ".wh..wh..opq")) {
		snprintf(target, targetsz, "%.*s", (int)dirlen, clean);
		return DSEC_WH_OPAQUE;
	}
	if (!strncmp(base, ".wh..wh.", 8))
		return DSEC_WH_IGNORE;
	victim = base + 4;
	if (!*victim || !strcmp(victim, ".") || !strcmp(victim, ".."))
		return dsec_err_set(err, EINVAL, "'%s': whiteout names '%s'", clean, victim);
	if (dirlen)
		snprintf(target, targetsz, "%.*s/%s", (int)dirlen, clean, victim);
	else
		snprintf(target, targetsz, "%s", victim);
	return DSEC_WH_FILE;
}

int dsec_layer_xattr_keep(const char *name, int allow_setuid)
{
	if (!strncmp(name, "user.overlay.", 13))
		return 0;
	if (!strcmp(name, "security.capability"))
		return allow_setuid;
	if (!strncmp(name, "user.", 5) || !strncmp(name, "security.", 9))
		return 1;
	return !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

mode_t dsec_layer_mode(mode_t mode, int allow_setuid)
{
	mode_t m = mode & 07777;

	if (!S_ISDIR(mode) && !allow_setuid)
		m &= ~(mode_t)(S_ISUID | S_ISGID);
	return m;
}

/* ---- extraction that never follows a symlink from the archive ---- */

static int openat2_dir(int dirfd, const char *path)
{
	struct open_how how = {
	    .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	    .resolve =
		RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

static int parent_error(const char *path, struct dsec_err *err)
{
	if (errno == ELOOP)
		return dsec_err_set(err, ELOOP, "'%s': path goes through a symlink", path);
	if (errno == ENOTDIR)
		return dsec_err_set(err, ENOTDIR, "'%s': a parent is not a directory", path);
	if (errno == EXDEV)
		return dsec_err_set(err, EXDEV, "'%s': path leaves the layer", path);
	return dsec_err_sys(err, "'%s': open parent", path);
}

/* Open the directory `dir` (clean, relative to the tree) as an O_PATH fd, creating missing
 * components (0755, whatever the umask) when create. Never follows a symlink. Returns an fd or
 * -1. */
static int open_dir(struct dsec_extract *x, const char *dir, int create, struct dsec_err *err)
{
	char buf[PATH_MAX];
	int fd = openat2_dir(x->tree_fd, dir);
	char *s, *slash;

	if (fd >= 0 || errno != ENOENT || !create)
		return fd >= 0 ? fd : parent_error(dir, err);
	snprintf(buf, sizeof(buf), "%s", dir);
	fd = dup(x->tree_fd);
	for (s = buf; fd >= 0 && *s; s = slash ? slash + 1 : s + strlen(s)) {
		int nfd;

		slash = strchr(s, '/');
		if (slash)
			*slash = '\0';
		if (mkdirat(fd, s, 0755) == 0) {
			x->implied++;
			/* just made, in our staging tree: no one else's link can be there */
			if (fchmodat(fd, s, 0755, 0) < 0) {
				close(fd);
				return dsec_err_sys(err, "'%s': chmod", dir);
			}
		} else if (errno != EEXIST) {
			close(fd);
			return dsec_err_sys(err, "'%s': mkdir", dir);
		}
		nfd = openat(fd, s, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = nfd;
		if (!slash)
			break;
	}
	return fd >= 0 ? fd : parent_error(dir, err);
}

/* The parent of clean path `path` as a borrowed fd (cached: archives list a directory's entries
 * together); *base gets the last component. */
static int parent_of(struct dsec_extract *x, const char *path, const char **base,
		     struct dsec_err *err)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	char dir[PATH_MAX];

	*base = slash ? slash + 1 : path;
	if (!n)
		return x->tree_fd;
	if (x->cache_fd >= 0 && strlen(x->cache_dir) == n && !memcmp(x->cache_dir, path, n))
		return x->cache_fd;
	memcpy(dir, path, n);
	dir[n] = '\0';
	if (x->cache_fd >= 0)
		close(x->cache_fd);
	x->cache_fd = open_dir(x, dir, 1, err);
	if (x->cache_fd < 0)
		return -1;
	memcpy(x->cache_dir, dir, n + 1);
	return x->cache_fd;
}

/* Something is in the way of creating `base`: a non-directory goes (a later entry wins, as in
 * tar); a directory stays when want_dir (return 1), else it is an error. */
static int clear_way(int pfd, const char *base, const char *path, int want_dir,
		     struct dsec_err *err)
{
	struct stat st;

	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : dsec_err_sys(err, "'%s': stat", path);
	if (S_ISDIR(st.st_mode)) {
		if (want_dir)
			return 1;
		return dsec_err_set(err, EEXIST, "'%s': would replace a directory", path);
	}
	if (unlinkat(pfd, base, 0) < 0)
		return dsec_err_sys(err, "'%s': replace", path);
	return 0;
}

static int set_xattrs(struct dsec_extract *x, int fd, struct archive_entry *e, const char *path,
		      struct dsec_err *err)
{
	const char *name;
	const void *val;
	size_t size;

	if (archive_entry_xattr_reset(e) == 0)
		return 0;
	while (archive_entry_xattr_next(e, &name, &val, &size) == ARCHIVE_OK) {
		if (!strcmp(name, "security.capability"))
			x->setuid++;
		if (!dsec_layer_xattr_keep(name, x->allow_setuid)) {
			x->stripped++;
			continue;
		}
		/* an EROFS xattr entry holds a value of at most 65535 bytes */
		if (size > 0xffff)
			return dsec_err_set(err, EFBIG,
					    "'%s': xattr '%s' of %zu bytes (at most 65535)", path,
					    name, size);
		if (fsetxattr(fd, name, val, size, 0) < 0)
			return dsec_err_sys(err, "'%s': set xattr '%s'", path, name);
		x->xattrs++;
	}
	return 0;
}

static int owner(struct archive_entry *e, uid_t *uid, gid_t *gid, const char *path,
		 struct dsec_err *err)
{
	la_int64_t u = archive_entry_uid(e), g = archive_entry_gid(e);

	if (u < 0 || u > 0xfffffffeLL || g < 0 || g > 0xfffffffeLL)
		return dsec_err_set(err, ERANGE, "'%s': owner %lld:%lld out of range", path,
				    (long long)u, (long long)g);
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

static void entry_times(struct archive_entry *e, struct timespec ts[2])
{
	ts[1].tv_sec = archive_entry_mtime(e);
	ts[1].tv_nsec = archive_entry_mtime_nsec(e);
	ts[0] = ts[1];
}

/* Owner, mode, xattrs on an open fd (mode after chown: chown clears setuid). */
static int apply_meta(struct dsec_extract *x, int fd, struct archive_entry *e, const char *path,
		      struct dsec_err *err)
{
	mode_t mode = archive_entry_mode(e);
	uid_t uid;
	gid_t gid;

	if (!S_ISDIR(mode) && (mode & (S_ISUID | S_ISGID)))
		x->setuid++;
	if (owner(e, &uid, &gid, path, err) < 0)
		return -1;
	if (fchown(fd, uid, gid) < 0)
		return dsec_err_sys(err, "'%s': chown", path);
	if (fchmod(fd, dsec_layer_mode(mode, x->allow_setuid)) < 0)
		return dsec_err_sys(err, "'%s': chmod", path);
	return set_xattrs(x, fd, e, path, err);
}

static int write_all(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = off < 0 ? write(fd, p, n) : pwrite(fd, p, n, off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
		if (off >= 0)
			off += w;
	}
	return 0;
}

int dsec_layer_room(int fd, uint64_t *budget, uint64_t n, const char *what, struct dsec_err *err)
{
	struct statvfs vs;
	uint64_t total, avail, keep;

	if (*budget >= n) {
		*budget -= n;
		return 0;
	}
	if (fstatvfs(fd, &vs) < 0)
		return 0; /* the write itself will say */
	total = (uint64_t)vs.f_blocks * vs.f_frsize;
	avail = (uint64_t)vs.f_bavail * vs.f_frsize;
	keep = total / 20 < (1ULL << 30) ? total / 20 : (1ULL << 30);
	if (avail < keep + n)
		return dsec_err_set(err, ENOSPC,
				    "'%s': the store's file system is down to %llu MiB free "
				    "(an import leaves %llu MiB)",
				    what, (unsigned long long)(avail >> 20),
				    (unsigned long long)(keep >> 20));
	/* look again after half of what is left above the reserve, 64 MiB at most */
	*budget = (avail - keep - n) / 2 < (64ULL << 20) ? (avail - keep - n) / 2 : (64ULL << 20);
	return 0;
}

int dsec_layer_zero(const void *buf, size_t n)
{
	const unsigned char *p = buf;

	return n && !p[0] && !memcmp(p, p + 1, n - 1);
}

int dsec_layer_data_next(int fd, loff_t *off, uint64_t *len, uint64_t size)
{
	off_t d, h;

	if ((uint64_t)*off >= size)
		return 0;
	d = lseek(fd, *off, SEEK_DATA);
	if (d < 0 && errno == ENXIO)
		return 0;
	if (d < 0) { /* a file system without SEEK_DATA: all of it */
		*len = size - (uint64_t)*off;
		return 1;
	}
	if ((uint64_t)d >= size)
		return 0;
	h = lseek(fd, d, SEEK_HOLE);
	if (h < 0 || (uint64_t)h > size)
		h = (off_t)size;
	*off = d;
	*len = (uint64_t)(h - d);
	return 1;
}

static int extract_file(struct dsec_extract *x, int pfd, const char *base, const char *path,
			struct archive_entry *e, struct dsec_err *err)
{
	la_int64_t size = archive_entry_size(e), end = 0;
	struct timespec ts[2];
	const void *buf;
	size_t n;
	la_int64_t off;
	int fd, r;

	if (size < 0 || (uint64_t)size > x->max_bytes - x->content_bytes)
		return dsec_err_set(err, EFBIG, "'%s': contents exceed --max-bytes %llu", path,
				    (unsigned long long)x->max_bytes);
	x->content_bytes += (uint64_t)size;
	while ((fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600)) < 0) {
		if (errno != EEXIST)
			return dsec_err_sys(err, "'%s': create", path);
		if (clear_way(pfd, base, path, 0, err) < 0)
			return -1;
	}
	while ((r = archive_read_data_block(x->ar, &buf, &n, &off)) == ARCHIVE_OK) {
		/* a sparse map may place data anywhere: only inside the size charged above */
		if (off < 0 || off > size || (uint64_t)n > (uint64_t)(size - off)) {
			dsec_err_set(err, EINVAL, "'%s': data beyond the entry's size %lld", path,
				     (long long)size);
			goto fail;
		}
		/* zeros are a hole, on disk and in the EROFS image: a bomb of zeros costs nothing */
		if (!n || dsec_layer_zero(buf, n))
			continue;
		if (dsec_layer_room(fd, &x->room, n, path, err) < 0)
			goto fail;
		if (write_all(fd, buf, n, off) < 0) {
			dsec_err_sys(err, "'%s': write", path);
			goto fail;
		}
		if (off + (la_int64_t)n > end)
			end = off + (la_int64_t)n;
	}
	if (r != ARCHIVE_EOF) {
		dsec_err_set(err, archive_errno(x->ar) > 0 ? archive_errno(x->ar) : EIO,
			     "'%s': read: %s", path, archive_error_string(x->ar));
		goto fail;
	}
	if (end < size && ftruncate(fd, size) < 0) {
		dsec_err_sys(err, "'%s': truncate", path);
		goto fail;
	}
	if (apply_meta(x, fd, e, path, err) < 0)
		goto fail;
	entry_times(e, ts);
	futimens(fd, ts);
	close(fd);
	return 0;
fail:
	close(fd);
	return -1;
}

static int set_dir_times(struct dsec_extract *x, struct dsec_err *err);

/* Bytes of deferred directory paths kept at most: an archive repeating one long directory
 * entry a million times would otherwise hold gigabytes of them (the times set early then may
 * be moved by later entries: only such an archive's) */
#define DT_BYTES_MAX (64u << 20)

static int defer_time(struct dsec_extract *x, const char *path, struct archive_entry *e)
{
	if (x->dtbytes > DT_BYTES_MAX) {
		struct dsec_err ignored;

		set_dir_times(x, &ignored);
	}
	if (x->ndt == x->capdt) {
		size_t cap = x->capdt ? x->capdt * 2 : 256;
		void *n = realloc(x->dt, cap * sizeof(*x->dt));

		if (!n)
			return -1;
		x->dt = n;
		x->capdt = cap;
	}
	x->dt[x->ndt].path = strdup(path);
	entry_times(e, x->dt[x->ndt].ts);
	if (!x->dt[x->ndt].path)
		return -1;
	x->dtbytes += strlen(path) + 1;
	x->ndt++;
	return 0;
}

/* Make (or reuse) directory `path`, 0700 until its entry's metadata is applied; *made says
 * whether it was made here (NULL: not asked). Returns an fd open on it for fsetxattr, or -1. */
static int make_dir(struct dsec_extract *x, const char *path, int *made, struct dsec_err *err)
{
	const char *base;
	int pfd, fd, fresh = 1;

	if (made)
		*made = 0;
	if (!*path)
		return openat(x->tree_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pfd = parent_of(x, path, &base, err);
	if (pfd < 0)
		return -1;
	while (mkdirat(pfd, base, 0700) < 0) {
		int r;

		if (errno != EEXIST)
			return dsec_err_sys(err, "'%s': mkdir", path);
		r = clear_way(pfd, base, path, 1, err);
		if (r < 0)
			return -1;
		if (r == 1) {
			fresh = 0;
			break;
		}
	}
	fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return dsec_err_sys(err, "'%s': open", path);
	if (made)
		*made = fresh;
	return fd;
}

/* The whiteout takes the entry's mtime, so the same archive gives the same image. */
static int make_whiteout(struct dsec_extract *x, const char *path, struct archive_entry *e,
			 struct dsec_err *err)
{
	struct timespec ts[2];
	const char *base;
	int pfd = parent_of(x, path, &base, err);

	if (pfd < 0)
		return -1;
	while (mknodat(pfd, base, S_IFCHR | 0, makedev(0, 0)) < 0) {
		if (errno != EEXIST)
			return dsec_err_sys(err, "'%s': make whiteout", path);
		if (clear_way(pfd, base, path, 0, err) < 0)
			return -1;
	}
	entry_times(e, ts);
	utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static int make_opaque(struct dsec_extract *x, const char *dir, struct dsec_err *err)
{
	int made, fd = make_dir(x, dir, &made, err);

	if (fd < 0)
		return -1;
	/* a directory the archive has not listed (yet) is made as one its paths imply; its own
	 * entry, should one come, sets its metadata */
	if (made && fchmod(fd, 0755) < 0) {
		dsec_err_sys(err, "'%s': chmod", dir);
		close(fd);
		return -1;
	}
	if (fsetxattr(fd, "trusted.overlay.opaque", "y", 1, 0) < 0 ||
	    fsetxattr(fd, "user.overlay.opaque", "y", 1, 0) < 0) {
		dsec_err_sys(err, "'%s': mark opaque", dir);
		close(fd);
		return -1;
	}
	x->xattrs += 2;
	close(fd);
	return 0;
}

static int extract_link(struct dsec_extract *x, int pfd, const char *base, const char *path,
			const char *target, struct dsec_err *err)
{
	char tclean[PATH_MAX];
	const char *tslash, *tbase;
	int was_abs, tfd;

	if (dsec_layer_clean_path(target, tclean, sizeof(tclean), &was_abs, err) < 0)
		return dsec_err_wrap(err, "'%s': hard link target", path);
	if (!*tclean)
		return dsec_err_set(err, EPERM, "'%s': hard link to the layer root", path);
	tslash = strrchr(tclean, '/');
	tbase = tslash ? tslash + 1 : tclean;
	if (tslash) {
		char tdir[PATH_MAX];

		snprintf(tdir, sizeof(tdir), "%.*s", (int)(tslash - tclean), tclean);
		tfd = open_dir(x, tdir, 0, err);
		if (tfd < 0) {
			if (err->errnum == ENOENT)
				dsec_err_set(err, ENOENT,
					     "'%s': hard link target '%s' not in the layer", path,
					     target);
			return -1;
		}
	} else {
		tfd = dup(x->tree_fd);
	}
	while (linkat(tfd, tbase, pfd, base, 0) < 0) {
		if (errno == ENOENT) {
			dsec_err_set(err, ENOENT, "'%s': hard link target '%s' not in the layer",
				     path, target);
			goto fail;
		}
		if (errno != EEXIST) {
			dsec_err_sys(err, "'%s': hard link to '%s'", path, target);
			goto fail;
		}
		if (clear_way(pfd, base, path, 0, err) < 0)
			goto fail;
	}
	close(tfd);
	return 0;
fail:
	close(tfd);
	return -1;
}

static int extract_symlink(struct dsec_extract *x, int pfd, const char *base, const char *path,
			   struct archive_entry *e, struct dsec_err *err)
{
	const char *target = archive_entry_symlink(e);
	struct timespec ts[2];
	uid_t uid;
	gid_t gid;

	if (!target || !*target)
		return dsec_err_set(err, EINVAL, "'%s': symlink without a target", path);
	if (owner(e, &uid, &gid, path, err) < 0)
		return -1;
	while (symlinkat(target, pfd, base) < 0) {
		if (errno != EEXIST)
			return dsec_err_sys(err, "'%s': symlink", path);
		if (clear_way(pfd, base, path, 0, err) < 0)
			return -1;
	}
	if (fchownat(pfd, base, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return dsec_err_sys(err, "'%s': chown", path);
	entry_times(e, ts);
	utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

int dsec_extract_entry(struct dsec_extract *x, struct archive_entry *e, struct dsec_err *err)
{
	const char *name = archive_entry_pathname(e), *hl = archive_entry_hardlink(e), *base;
	char path[PATH_MAX], target[PATH_MAX];
	mode_t type = archive_entry_filetype(e);
	int was_abs, wh, pfd, fd;

	if (!name)
		return dsec_err_set(err, EILSEQ, "entry without a usable name");
	if (dsec_layer_clean_path(name, path, sizeof(path), &was_abs, err) < 0)
		return -1;
	if (was_abs && !x->warned_abs++)
		dsec_warnx("leading '/' removed from member names");
	wh = dsec_layer_whiteout(path, target, sizeof(target), err);
	if (wh < 0)
		return -1;
	if (wh == DSEC_WH_IGNORE) {
		x->skipped++;
		return 0;
	}
	if (wh == DSEC_WH_OPAQUE)
		return make_opaque(x, target, err);
	if (wh == DSEC_WH_FILE)
		return make_whiteout(x, target, e, err);
	if (type == AE_IFDIR && !hl) {
		fd = make_dir(x, path, NULL, err);
		if (fd < 0)
			return -1;
		if (apply_meta(x, fd, e, path, err) < 0) {
			close(fd);
			return -1;
		}
		close(fd);
		if (defer_time(x, path, e) < 0)
			return dsec_err_set(err, ENOMEM, "'%s': out of memory", path);
		return 0;
	}
	if (!*path)
		return dsec_err_set(err, EINVAL, "'%s': the layer root is not a directory", name);
	pfd = parent_of(x, path, &base, err);
	if (pfd < 0)
		return -1;
	if (hl)
		return extract_link(x, pfd, base, path, hl, err);
	switch (type) {
	case AE_IFREG:
		return extract_file(x, pfd, base, path, e, err);
	case AE_IFLNK:
		return extract_symlink(x, pfd, base, path, e, err);
	case 0:
		/* a hard link entry (no data, so no type of its own) whose target libarchive does
		 * not give: libarchive 3.6 drops one named only by a pax linkpath, with an empty
		 * ustar link name */
		return dsec_err_set(err, EINVAL,
				    "'%s': hard link whose target cannot be read (a pax linkpath "
				    "with an empty ustar link name)",
				    path);
	case AE_IFCHR:
		if (archive_entry_rdev(e) == 0)
			return make_whiteout(x, path, e, err);
		/* fall through */
	default:
		/* device nodes, fifos, sockets: a rootfs needs none (the runtime provides /dev) */
		if (dsec_verbose > 0 || !x->warned_dev++)
			dsec_warnx("'%s': device node, fifo or socket skipped", path);
		x->skipped++;
		return 0;
	}
}

/* Set the deferred directory times, in entry order, and forget them. 0 or -1. */
static int set_dir_times(struct dsec_extract *x, struct dsec_err *err)
{
	int rc = 0;

	for (size_t i = 0; i < x->ndt; i++) {
		const char *base;
		int pfd;

		if (rc == 0 && !*x->dt[i].path) {
			futimens(x->tree_fd, x->dt[i].ts);
		} else if (rc == 0) {
			pfd = parent_of(x, x->dt[i].path, &base, err);
			if (pfd < 0)
				rc = -1;
			else
				utimensat(pfd, base, x->dt[i].ts, AT_SYMLINK_NOFOLLOW);
		}
		free(x->dt[i].path);
	}
	x->ndt = 0;
	x->dtbytes = 0;
	return rc;
}

int dsec_extract_finish(struct dsec_extract *x, struct dsec_err *err)
{
	return set_dir_times(x, err);
}

void dsec_extract_free(struct dsec_extract *x)
{
	for (size_t i = 0; i < x->ndt; i++)
		free(x->dt[i].path);
	free(x->dt);
	x->dt = NULL;
	x->ndt = x->capdt = 0;
	if (x->cache_fd >= 0)
		close(x->cache_fd);
	x->cache_fd = -1;
}
