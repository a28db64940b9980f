/* dsec-exec cp: files into and out of a sandbox as tar streams (libarchive). The sandbox's half
 * runs inside the sandbox, as a contained process with the sandbox's own rights; the host's half
 * treats what comes out of the sandbox as hostile. */
#include "exec.h"

#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* libarchive is loaded when a copy needs it, not at every start of dsec-exec: its dependencies
 * (libxml2, ICU, …) cost more than a whole exec. Loaded on the host, before anything enters a
 * sandbox, so the sandbox's own libraries are never used. */
#define LA_FUNCS(X)                                                                                \
	X(archive_entry_filetype)                                                                  \
	X(archive_entry_free)                                                                      \
	X(archive_entry_hardlink)                                                                  \
	X(archive_entry_linkify)                                                                   \
	X(archive_entry_linkresolver_free)                                                         \
	X(archive_entry_linkresolver_new)                                                          \
	X(archive_entry_linkresolver_set_strategy)                                                 \
	X(archive_entry_mode)                                                                      \
	X(archive_entry_new)                                                                       \
	X(archive_entry_pathname)                                                                  \
	X(archive_entry_set_gname)                                                                 \
	X(archive_entry_set_mode)                                                                  \
	X(archive_entry_set_pathname)                                                              \
	X(archive_entry_set_uname)                                                                 \
	X(archive_error_string)                                                                    \
	X(archive_read_data)                                                                       \
	X(archive_read_data_block)                                                                 \
	X(archive_read_disk_descend)                                                               \
	X(archive_read_disk_new)                                                                   \
	X(archive_read_disk_open)                                                                  \
	X(archive_read_disk_set_symlink_physical)                                                  \
	X(archive_read_free)                                                                       \
	X(archive_read_new)                                                                        \
	X(archive_read_next_header)                                                                \
	X(archive_read_next_header2)                                                               \
	X(archive_read_open_fd)                                                                    \
	X(archive_read_support_filter_bzip2)                                                       \
	X(archive_read_support_filter_gzip)                                                        \
	X(archive_read_support_filter_xz)                                                          \
	X(archive_read_support_filter_zstd)                                                        \
	X(archive_read_support_format_tar)                                                         \
	X(archive_write_close)                                                                     \
	X(archive_write_data)                                                                      \
	X(archive_write_data_block)                                                                \
	X(archive_write_disk_new)                                                                  \
	X(archive_write_disk_set_options)                                                          \
	X(archive_write_finish_entry)                                                              \
	X(archive_write_free)                                                                      \
	X(archive_write_header)                                                                    \
	X(archive_write_new)                                                                       \
	X(archive_write_open_fd)                                                                   \
	X(archive_write_set_format_pax_restricted)

#define LA_PTR(f) static __typeof__(f) *la_##f;
LA_FUNCS(LA_PTR)
#define LA_ENTRY(f) {#f, (void **)&la_##f},
static const struct {
	const char *name;
	void **ptr;
} la_syms[] = {LA_FUNCS(LA_ENTRY)};
#define archive_entry_filetype (*la_archive_entry_filetype)
#define archive_entry_free (*la_archive_entry_free)
#define archive_entry_hardlink (*la_archive_entry_hardlink)
#define archive_entry_linkify (*la_archive_entry_linkify)
#define archive_entry_linkresolver_free (*la_archive_entry_linkresolver_free)
#define archive_entry_linkresolver_new (*la_archive_entry_linkresolver_new)
#define archive_entry_linkresolver_set_strategy (*la_archive_entry_linkresolver_set_strategy)
#define archive_entry_mode (*la_archive_entry_mode)
#define archive_entry_new (*la_archive_entry_new)
#define archive_entry_pathname (*la_archive_entry_pathname)
#define archive_entry_set_gname (*la_archive_entry_set_gname)
#define archive_entry_set_mode (*la_archive_entry_set_mode)
#define archive_entry_set_pathname (*la_archive_entry_set_pathname)
#define archive_entry_set_uname (*la_archive_entry_set_uname)
#define archive_error_string (*la_archive_error_string)
#define archive_read_data (*la_archive_read_data)
#define archive_read_data_block (*la_archive_read_data_block)
#define archive_read_disk_descend (*la_archive_read_disk_descend)
#define archive_read_disk_new (*la_archive_read_disk_new)
#define archive_read_disk_open (*la_archive_read_disk_open)
#define archive_read_disk_set_symlink_physical (*la_archive_read_disk_set_symlink_physical)
#define archive_read_free (*la_archive_read_free)
#define archive_read_new (*la_archive_read_new)
#define archive_read_next_header (*la_archive_read_next_header)
#define archive_read_next_header2 (*la_archive_read_next_header2)
#define archive_read_open_fd (*la_archive_read_open_fd)
#define archive_read_support_filter_bzip2 (*la_archive_read_support_filter_bzip2)
#define archive_read_support_filter_gzip (*la_archive_read_support_filter_gzip)
#define archive_read_support_filter_xz (*la_archive_read_support_filter_xz)
#define archive_read_support_filter_zstd (*la_archive_read_support_filter_zstd)
#define archive_read_support_format_tar (*la_archive_read_support_format_tar)
#define archive_write_close (*la_archive_write_close)
#define archive_write_data (*la_archive_write_data)
#define archive_write_data_block (*la_archive_write_data_block)
#define archive_write_disk_new (*la_archive_write_disk_new)
#define archive_write_disk_set_options (*la_archive_write_disk_set_options)
#define archive_write_finish_entry (*la_archive_write_finish_entry)
#define archive_write_free (*la_archive_write_free)
#define archive_write_header (*la_archive_write_header)
#define archive_write_new (*la_archive_write_new)
#define archive_write_open_fd (*la_archive_write_open_fd)
#define archive_write_set_format_pax_restricted (*la_archive_write_set_format_pax_restricted)

static int la_load(struct dsec_err *err)
{
	static void *h;
	size_t i;

	if (h)
		return 0;
	h = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen("libarchive.so", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return dsec_err_set(err, ENOENT, "load libarchive: %s", dlerror());
	for (i = 0; i < sizeof(la_syms) / sizeof(la_syms[0]); i++) {
		*la_syms[i].ptr = dlsym(h, la_syms[i].name);
		if (!*la_syms[i].ptr)
			return dsec_err_set(err, ENOENT, "libarchive lacks %s", la_syms[i].name);
	}
	return 0;
}

struct cp_job {
	const char *src, *dst;  /* the sandbox side's path */
	char top[NAME_MAX + 1]; /* cp_in: the top name the host gave the entries */
	int raw;                /* cp_in from "-": unpack as is into the directory dst */
};

/* Split path into a directory and a last component (copied into dir and base). A trailing '/'
 * sets *slash. Returns 0, or -1 for an empty path. */
static int split_path(const char *path, char *dir, size_t dn, char *base, size_t bn, int *slash)
{
	char tmp[PATH_MAX];
	size_t len;
	char *s;

	if (!*path || strlen(path) >= sizeof(tmp))
		return -1;
	snprintf(tmp, sizeof(tmp), "%s", path);
	len = strlen(tmp);
	*slash = 0;
	while (len > 1 && tmp[len - 1] == '/') {
		tmp[--len] = '\0';
		*slash = 1;
	}
	s = strrchr(tmp, '/');
	if (!s) {
		snprintf(dir, dn, ".");
		snprintf(base, bn, "%s", tmp);
	} else if (s == tmp) {
		snprintf(dir, dn, "/");
		snprintf(base, bn, "%s", s[1] ? s + 1 : ".");
	} else {
		*s = '\0';
		snprintf(dir, dn, "%s", tmp);
		snprintf(base, bn, "%s", s + 1);
	}
	if (!strcmp(base, "..") || !strcmp(base, "/"))
		snprintf(base, bn, ".");
	return 0;
}

/* Replace the first component of entry e's name (old) with new_top. Returns 0, or -1 when the
 * name does not start with old (a stream we did not ask for). */
static int retop(struct archive_entry *e, const char *old, const char *new_top)
{
	const char *p = archive_entry_pathname(e);
	size_t ol = strlen(old);
	char buf[PATH_MAX];

	if (!p)
		return -1;
	if (!strcmp(old, ".") && !strncmp(p, "./", 2))
		p += 1;
	else if (!strcmp(old, ".") && !strcmp(p, "."))
		p += 1;
	else if (!strncmp(p, old, ol) && (p[ol] == '\0' || p[ol] == '/'))
		p += ol;
	else
		return -1;
	if (snprintf(buf, sizeof(buf), "%s%s", new_top, p) >= (int)sizeof(buf))
		return -1;
	archive_entry_set_pathname(e, buf);
	return 0;
}

/* What the host side of a copy has moved, for its progress line (err.h): what it packs or
 * unpacks, or the bytes of a raw stream. */
struct progress {
	struct dsec_progress line;
	uint64_t bytes, files;
};

static void progress_add(struct progress *pg, uint64_t bytes, int files)
{
	if (!pg)
		return;
	pg->bytes += bytes;
	pg->files += (uint64_t)files;
	dsec_progress(&pg->line, "cp: %.1f MiB, %llu files ", (double)pg->bytes / (1 << 20),
		      (unsigned long long)pg->files);
}

/* Copy entries from reader r to disk writer w, renaming the top component old → new_top (none
 * when new_top is NULL). Only regular files, directories and symbolic links pass; hard links
 * and device nodes are skipped. 0 or -1 with msg. */
static int unpack(struct archive *r, struct archive *w, const char *old, const char *new_top,
		  struct progress *pg, char *msg, size_t mn)
{
	struct archive_entry *e;
	int rc;

	while ((rc = archive_read_next_header(r, &e)) == ARCHIVE_OK) {
		mode_t t = archive_entry_filetype(e);
		const void *buf;
		size_t size;
		la_int64_t off;

		if (archive_entry_hardlink(e) || (t != AE_IFREG && t != AE_IFDIR && t != AE_IFLNK))
			continue;
		if (new_top && retop(e, old, new_top) < 0) {
			snprintf(msg, mn, "unexpected entry '%s' in the stream",
				 archive_entry_pathname(e));
			return -1;
		}
		archive_entry_set_mode(e, archive_entry_mode(e) & ~(mode_t)(S_ISUID | S_ISGID));
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			snprintf(msg, mn, "'%s': %s", archive_entry_pathname(e),
				 archive_error_string(w));
			return -1;
		}
		progress_add(pg, 0, 1);
		while ((rc = archive_read_data_block(r, &buf, &size, &off)) == ARCHIVE_OK) {
			if (archive_write_data_block(w, buf, size, off) != ARCHIVE_OK) {
				snprintf(msg, mn, "'%s': %s", archive_entry_pathname(e),
					 archive_error_string(w));
				return -1;
			}
			progress_add(pg, size, 0);
		}
		if (rc != ARCHIVE_EOF) {
			snprintf(msg, mn, "read stream: %s", archive_error_string(r));
			return -1;
		}
		if (archive_write_finish_entry(w) != ARCHIVE_OK) {
			snprintf(msg, mn, "'%s': %s", archive_entry_pathname(e),
				 archive_error_string(w));
			return -1;
		}
	}
	if (rc != ARCHIVE_EOF) {
		snprintf(msg, mn, "read stream: %s", archive_error_string(r));
		return -1;
	}
	return 0;
}

static struct archive *disk_writer(void)
{
	struct archive *w = archive_write_disk_new();

	archive_write_disk_set_options(
	    w, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_UNLINK |
		   ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
		   ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
	return w;
}

/* Write path (relative to the cwd) as a pax tar on fd, entries named as found (no symlink
 * followed). 0 or -1 with msg. */
static int pack(const char *path, int fd, struct progress *pg, char *msg, size_t mn)
{
	struct archive *d = archive_read_disk_new(), *w = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	struct archive_entry_linkresolver *lr = archive_entry_linkresolver_new();
	char buf[65536];
	int rc, ret = -1;

	archive_read_disk_set_symlink_physical(d);
	archive_write_set_format_pax_restricted(w);
	/* a file's second and later names go as links, without its data again */
	if (lr)
		archive_entry_linkresolver_set_strategy(lr, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
	if (archive_write_open_fd(w, fd) != ARCHIVE_OK ||
	    archive_read_disk_open(d, path) != ARCHIVE_OK) {
		snprintf(msg, mn, "'%s': %s", path, archive_error_string(d));
		goto out;
	}
	while ((rc = archive_read_next_header2(d, e)) == ARCHIVE_OK) {
		ssize_t n;

		archive_read_disk_descend(d);
		archive_entry_set_uname(e, NULL);
		archive_entry_set_gname(e, NULL);
		if (lr && archive_entry_filetype(e) == AE_IFREG) {
			struct archive_entry *spare = NULL;

			/* the tar strategy changes e in place and holds nothing back */
			archive_entry_linkify(lr, &e, &spare);
		}
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			snprintf(msg, mn, "write stream: %s", archive_error_string(w));
			goto out;
		}
		progress_add(pg, 0, 1);
		if (archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e))
			while ((n = archive_read_data(d, buf, sizeof(buf))) > 0) {
				if (archive_write_data(w, buf, (size_t)n) < 0) {
					snprintf(msg, mn, "write stream: %s",
						 archive_error_string(w));
					goto out;
				}
				progress_add(pg, (uint64_t)n, 0);
			}
	}
	if (rc != ARCHIVE_EOF) {
		snprintf(msg, mn, "'%s': %s", path, archive_error_string(d));
		goto out;
	}
	if (archive_write_close(w) != ARCHIVE_OK) {
		snprintf(msg, mn, "write stream: %s", archive_error_string(w));
		goto out;
	}
	ret = 0;
out:
	if (lr)
		archive_entry_linkresolver_free(lr);
	archive_entry_free(e);
	archive_read_free(d);
	archive_write_free(w);
	return ret;
}

/* Read fd to its end: the writer's tar padding after the end-of-archive blocks must not meet
 * a closed pipe. */
static void drain(int fd)
{
	char buf[16384];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

/* ---- inside the sandbox (fn of dsec_exec_start; stdin/stdout are the stream, stderr the
 * message) ---- */

static int in_sandbox_fail(const char *msg)
{
	dprintf(2, "%s", msg);
	return -1;
}

static int sandbox_unpack(void *arg)
{
	struct cp_job *j = arg;
	char dir[PATH_MAX], base[NAME_MAX + 1], msg[768];
	const char *new_top = NULL;
	struct archive *r, *w;
	struct stat st;
	int slash, ret;

	if (split_path(j->dst, dir, sizeof(dir), base, sizeof(base), &slash) < 0)
		return in_sandbox_fail("empty destination path");
	if (stat(j->dst, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (chdir(j->dst) < 0)
			return snprintf(msg, sizeof(msg), "'%s': %s", j->dst, strerror(errno)),
			       in_sandbox_fail(msg);
	} else if (j->raw || slash) {
		snprintf(msg, sizeof(msg), "'%s': not a directory", j->dst);
		return in_sandbox_fail(msg);
	} else {
		if (chdir(dir) < 0)
			return snprintf(msg, sizeof(msg), "'%s': %s", dir, strerror(errno)),
			       in_sandbox_fail(msg);
		new_top = base;
	}
	r = archive_read_new();
	w = disk_writer();
	/* the filters libarchive has built in: for the others (lrzip, lzop, ...) it would run a
	 * program, here the sandbox's own */
	archive_read_support_filter_gzip(r);
	archive_read_support_filter_bzip2(r);
	archive_read_support_filter_xz(r);
	archive_read_support_filter_zstd(r);
	archive_read_support_format_tar(r);
	if (archive_read_open_fd(r, 0, 65536) != ARCHIVE_OK) {
		snprintf(msg, sizeof(msg), "read stream: %s", archive_error_string(r));
		ret = -1;
	} else
		ret = unpack(r, w, j->top, new_top, NULL, msg, sizeof(msg));
	if (ret == 0 && archive_write_close(w) != ARCHIVE_OK) {
		snprintf(msg, sizeof(msg), "%s", archive_error_string(w));
		ret = -1;
	}
	archive_read_free(r);
	archive_write_free(w);
	if (ret == 0)
		drain(0);
	return ret < 0 ? in_sandbox_fail(msg) : 0;
}

static int sandbox_pack(void *arg)
{
	struct cp_job *j = arg;
	char dir[PATH_MAX], base[NAME_MAX + 1], msg[768];
	int slash;

	if (split_path(j->src, dir, sizeof(dir), base, sizeof(base), &slash) < 0)
		return in_sandbox_fail("empty source path");
	if (chdir(dir) < 0)
		return snprintf(msg, sizeof(msg), "'%s': %s", dir, strerror(errno)),
		       in_sandbox_fail(msg);
	return pack(base, 1, NULL, msg, sizeof(msg)) < 0 ? in_sandbox_fail(msg) : 0;
}

/* ---- on the host ---- */

/* Start fn in the sandbox with stream as its stdin (in) or stdout (!in) and a pipe for its
 * message. */
static int start_copier(struct dsec_exec_target *t, int (*fn)(void *), struct cp_job *j, int stream,
			int in, struct dsec_exec_proc *pr, int *msgfd, struct dsec_err *err)
{
	static char name[] = "dsec-exec-cp";
	char *argv[] = {name, NULL}, *envp[] = {NULL};
	struct dsec_exec_spec s = {.argv = argv, .envp = envp, .fn = fn, .arg = j};
	int mp[2];

	if (pipe2(mp, O_CLOEXEC) < 0)
		return dsec_err_sys(err, "pipe");
	s.fd[0] = in ? stream : -1;
	s.fd[1] = in ? -1 : stream;
	s.fd[2] = mp[1];
	if (dsec_exec_start(t, &s, pr, err) < 0) {
		close(mp[0]);
		close(mp[1]);
		return -1;
	}
	close(mp[1]);
	*msgfd = mp[0];
	return 0;
}

/* Reap the copier; its message becomes err when it failed. 0 or -1. */
static int finish_copier(struct dsec_exec_proc *pr, int msgfd, const char *what,
			 struct dsec_err *err)
{
	char msg[1024];
	ssize_t n = read(msgfd, msg, sizeof(msg) - 1);
	struct dsec_err e;
	int st = 0;

	close(msgfd);
	msg[n > 0 ? n : 0] = '\0';
	if (dsec_exec_wait(pr, 0, &st, NULL, &e) < 0)
		st = 1;
	dsec_exec_release(pr);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	return dsec_err_set(err, EIO, "%s", msg[0] ? msg : what);
}

int dsec_cp_in(struct dsec_exec_target *t, const char *src, const char *dst, struct dsec_err *err)
{
	struct cp_job j = {.src = src, .dst = dst, .raw = !strcmp(src, "-")};
	char dir[PATH_MAX], base[NAME_MAX + 1], msg[768] = "";
	struct dsec_exec_proc pr;
	struct progress pg;
	int p[2], msgfd, slash, r = 0, cwd;

	if (la_load(err) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	if (!j.raw) {
		if (split_path(src, dir, sizeof(dir), base, sizeof(base), &slash) < 0)
			return dsec_err_set(err, EINVAL, "empty source path");
		if (access(src, F_OK) < 0)
			return dsec_err_sys(err, "'%s'", src);
		snprintf(j.top, sizeof(j.top), "%s", base);
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return dsec_err_sys(err, "pipe");
	if (start_copier(t, sandbox_unpack, &j, p[0], 1, &pr, &msgfd, err) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	close(p[0]);
	pg.bytes = pg.files = 0;
	dsec_progress_start(&pg.line, 1);
	if (j.raw) {
		char buf[65536];
		ssize_t n;

		while ((n = read(0, buf, sizeof(buf))) > 0) {
			if (write(p[1], buf, (size_t)n) != n)
				break;
			progress_add(&pg, (uint64_t)n, 0);
		}
	} else {
		cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cwd < 0 || chdir(dir) < 0)
			r = dsec_err_sys(err, "'%s'", dir);
		else
			r = pack(base, p[1], &pg, msg, sizeof(msg));
		if (cwd >= 0) {
			if (fchdir(cwd) < 0)
				r = -1;
			close(cwd);
		}
	}
	close(p[1]);
	dsec_progress_end(&pg.line);
	if (finish_copier(&pr, msgfd, "copy into the sandbox failed", err) < 0)
		return -1;
	if (r < 0 && msg[0])
		return dsec_err_set(err, EIO, "%s", msg);
	return r;
}

int dsec_cp_out(struct dsec_exec_target *t, const char *src, const char *dst, struct dsec_err *err)
{
	struct cp_job j = {.src = src};
	char sdir[PATH_MAX], sbase[NAME_MAX + 1], dir[PATH_MAX], base[NAME_MAX + 1], msg[768] = "";
	const char *new_top = NULL, *into = NULL;
	struct dsec_exec_proc pr;
	struct progress pg;
	struct stat st;
	int p[2], msgfd, slash, r = 0, cwd = -1;

	if (la_load(err) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	if (split_path(src, sdir, sizeof(sdir), sbase, sizeof(sbase), &slash) < 0)
		return dsec_err_set(err, EINVAL, "empty source path");
	if (strcmp(dst, "-") != 0) {
		if (split_path(dst, dir, sizeof(dir), base, sizeof(base), &slash) < 0)
			return dsec_err_set(err, EINVAL, "empty destination path");
		if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
			into = dst;
			new_top = strcmp(sbase, ".") ? sbase : "."; /* keep the name */
		} else if (slash)
			return dsec_err_set(err, ENOTDIR, "'%s': not a directory", dst);
		else {
			into = dir;
			new_top = base;
		}
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return dsec_err_sys(err, "pipe");
	if (start_copier(t, sandbox_pack, &j, p[1], 0, &pr, &msgfd, err) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	close(p[1]);
	pg.bytes = pg.files = 0;
	dsec_progress_start(&pg.line, 1);
	if (!into) {
		char buf[65536];
		ssize_t n;

		while ((n = read(p[0], buf, sizeof(buf))) > 0) {
			if (write(1, buf, (size_t)n) != n) {
				r = dsec_err_sys(err, "write to stdout");
				break;
			}
			progress_add(&pg, (uint64_t)n, 0);
		}
	} else {
		struct archive *rd = archive_read_new(), *w = disk_writer();

		archive_read_support_format_tar(rd);
		cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cwd < 0 || chdir(into) < 0)
			r = dsec_err_sys(err, "'%s'", into);
		else if (archive_read_open_fd(rd, p[0], 65536) != ARCHIVE_OK) {
			snprintf(msg, sizeof(msg), "read stream: %s", archive_error_string(rd));
			r = -1;
		} else if ((r = unpack(rd, w, sbase, new_top, &pg, msg, sizeof(msg))) == 0 &&
			   archive_write_close(w) != ARCHIVE_OK) {
			snprintf(msg, sizeof(msg), "%s", archive_error_string(w));
			r = -1;
		}
		archive_read_free(rd);
		archive_write_free(w);
		if (r == 0)
			drain(p[0]);
		if (cwd >= 0) {
			if (fchdir(cwd) < 0)
				r = -1;
			close(cwd);
		}
	}
	close(p[0]);
	dsec_progress_end(&pg.line);
	if (finish_copier(&pr, msgfd, "copy out of the sandbox failed", err) < 0)
		return -1;
	if (r < 0 && msg[0])
		return dsec_err_set(err, EIO, "%s", msg);
	return r;
}
