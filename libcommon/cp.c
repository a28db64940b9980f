/* dsec-exec cp: files into and out of a sandbox as tar streams (libarchive). The sandbox's half
 * runs inside the sandbox, as a contained process with the sandbox's own rights; the host's half
 * treats what comes out of the sandbox as hostile. */
#include "exec.h"

#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long the host's side of a copy waits for the sandbox's side to move a byte (or, after the
 * stream, to finish) before it kills it and fails: a stopped copier must not hang dsec-exec.
 * Seconds; DSEC_CP_STALL_S in the environment overrides it (for tests). */
#define DSEC_CP_STALL_S 30

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
	X(archive_entry_set_hardlink)                                                              \
	X(archive_entry_set_mode)                                                                  \
	X(archive_entry_set_pathname)                                                              \
	X(archive_entry_set_uname)                                                                 \
	X(archive_error_string)                                                                    \
	X(archive_read_data)                                                                       \
	X(archive_read_data_block)                                                                 \
	X(archive_read_disk_descend)                                                               \
	X(archive_read_disk_new)                                                                   \
	X(archive_read_disk_open)                                                                  \
	X(archive_read_disk_set_behavior)                                                          \
	X(archive_read_disk_set_symlink_physical)                                                  \
	X(archive_read_free)                                                                       \
	X(archive_read_new)                                                                        \
	X(archive_read_next_header)                                                                \
	X(archive_read_next_header2)                                                               \
	X(archive_read_open)                                                                       \
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
	X(archive_write_open)                                                                      \
	X(archive_write_open_fd)                                                                   \
	X(archive_write_set_bytes_in_last_block)                                                   \
	X(archive_write_set_format_pax_restricted)                                                 \
	X(archive_write_set_options)

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
#define archive_entry_set_hardlink (*la_archive_entry_set_hardlink)
#define archive_entry_set_mode (*la_archive_entry_set_mode)
#define archive_entry_set_pathname (*la_archive_entry_set_pathname)
#define archive_entry_set_uname (*la_archive_entry_set_uname)
#define archive_error_string (*la_archive_error_string)
#define archive_read_data (*la_archive_read_data)
#define archive_read_data_block (*la_archive_read_data_block)
#define archive_read_disk_descend (*la_archive_read_disk_descend)
#define archive_read_disk_new (*la_archive_read_disk_new)
#define archive_read_disk_open (*la_archive_read_disk_open)
#define archive_read_disk_set_behavior (*la_archive_read_disk_set_behavior)
#define archive_read_disk_set_symlink_physical (*la_archive_read_disk_set_symlink_physical)
#define archive_read_free (*la_archive_read_free)
#define archive_read_new (*la_archive_read_new)
#define archive_read_next_header (*la_archive_read_next_header)
#define archive_read_next_header2 (*la_archive_read_next_header2)
#define archive_read_open (*la_archive_read_open)
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
#define archive_write_open (*la_archive_write_open)
#define archive_write_open_fd (*la_archive_write_open_fd)
#define archive_write_set_bytes_in_last_block (*la_archive_write_set_bytes_in_last_block)
#define archive_write_set_format_pax_restricted (*la_archive_write_set_format_pax_restricted)
#define archive_write_set_options (*la_archive_write_set_options)

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

/* p with its top component old renamed new_top, in buf. 0, or -1 when p is not under old (a
 * stream we did not ask for). */
static int retop_name(const char *p, const char *old, const char *new_top, char *buf, size_t n)
{
	size_t ol = strlen(old);

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
	return snprintf(buf, n, "%s%s", new_top, p) >= (int)n ? -1 : 0;
}

/* The entry's name, and a hard link's target, with the top component renamed (retop_name). */
static int retop(struct archive_entry *e, const char *old, const char *new_top)
{
	const char *link = archive_entry_hardlink(e);
	char buf[PATH_MAX];

	if (retop_name(archive_entry_pathname(e), old, new_top, buf, sizeof(buf)) < 0)
		return -1;
	archive_entry_set_pathname(e, buf);
	if (link) {
		if (retop_name(link, old, new_top, buf, sizeof(buf)) < 0)
			return -1;
		archive_entry_set_hardlink(e, buf);
	}
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

/* Does entry name name top itself ("top", "top/", "top/." or, for ".", "./")? */
static int is_top(const char *name, const char *top)
{
	size_t n = strlen(top);

	while (n > 1 && top[n - 1] == '/')
		n--;
	if (!strcmp(top, ".") && (!strcmp(name, ".") || !strcmp(name, "./")))
		return 1;
	return !strncmp(name, top, n) &&
	       (!name[n] || !strcmp(name + n, "/") || !strcmp(name + n, "/."));
}

static int is_dir(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A regular file is written under a temporary name next to its own, ".dsec-cp-PID-NAME", and
 * renamed into place once whole: a copy killed half-way (kill -9 of dsec-exec) leaves no
 * truncated file under the name, only that temporary one. *tmp gets it ("" if the name is too
 * long for one: then the file is written in place). */
static void tmp_name(const char *path, char *tmp, size_t n)
{
	const char *slash = strrchr(path, '/');
	size_t dl = slash ? (size_t)(slash - path) + 1 : 0;

	if (snprintf(tmp, n, "%.*s.dsec-cp-%d-%s", (int)dl, path, (int)getpid(), path + dl) >=
		(int)n ||
	    strlen(path + dl) + 24 > NAME_MAX)
		tmp[0] = '\0';
}

/* Copy entries from reader r to disk writer w, renaming the top component old → new_top (none
 * when new_top is NULL). Only regular files, directories and symbolic links pass, and hard
 * links when links is set (inside the sandbox, where a link can reach only the sandbox's own
 * files; on the host a file's further names are skipped); device nodes are skipped. 0 or -1
 * with msg. */
static int unpack(struct archive *r, struct archive *w, const char *old, const char *new_top,
		  int links, struct progress *pg, char *msg, size_t mn)
{
	char name[PATH_MAX], tmp[PATH_MAX] = "";
	struct archive_entry *e;
	int rc;

	while ((rc = archive_read_next_header(r, &e)) == ARCHIVE_OK) {
		mode_t t = archive_entry_filetype(e);
		const void *buf;
		size_t size;
		la_int64_t off;

		if (archive_entry_hardlink(e) ? !links
					      : t != AE_IFREG && t != AE_IFDIR && t != AE_IFLNK)
			continue;
		if (new_top && retop(e, old, new_top) < 0) {
			snprintf(msg, mn, "unexpected entry '%s' in the stream",
				 archive_entry_pathname(e));
			return -1;
		}
		snprintf(name, sizeof(name), "%s", archive_entry_pathname(e));
		/* the destination dir itself, when it was there (a copy of DIR/. or of /): the
		 * user's, so its mode, owner and times stay, whatever the stream says */
		if (t == AE_IFDIR && is_top(name, new_top ? new_top : ".") && is_dir(name))
			continue;
		tmp[0] = '\0';
		if (t == AE_IFREG && !archive_entry_hardlink(e))
			tmp_name(name, tmp, sizeof(tmp));
		if (tmp[0])
			archive_entry_set_pathname(e, tmp);
		archive_entry_set_mode(e, archive_entry_mode(e) & ~(mode_t)(S_ISUID | S_ISGID));
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			snprintf(msg, mn, "'%s': %s", name, archive_error_string(w));
			goto fail;
		}
		progress_add(pg, 0, 1);
		while ((rc = archive_read_data_block(r, &buf, &size, &off)) == ARCHIVE_OK) {
			if (archive_write_data_block(w, buf, size, off) != ARCHIVE_OK) {
				snprintf(msg, mn, "'%s': %s", name, archive_error_string(w));
				goto fail;
			}
			progress_add(pg, size, 0);
		}
		if (rc != ARCHIVE_EOF) {
			snprintf(msg, mn, "read stream: %s", archive_error_string(r));
			goto fail;
		}
		if (archive_write_finish_entry(w) != ARCHIVE_OK) {
			snprintf(msg, mn, "'%s': %s", name, archive_error_string(w));
			goto fail;
		}
		/* whatever stood at the name goes, as libarchive's unlink would have had it */
		if (tmp[0] && rename(tmp, name) < 0) {
			snprintf(msg, mn, "'%s': %s", name, strerror(errno));
			goto fail;
		}
	}
	if (rc != ARCHIVE_EOF) {
		snprintf(msg, mn, "read stream: %s", archive_error_string(r));
		return -1;
	}
	return 0;
fail:
	if (tmp[0]) {
		archive_write_finish_entry(w); /* closes the file before it goes */
		unlink(tmp);
	}
	return -1;
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

/* The host's end of a pipe to or from the sandbox's copier, non-blocking, so that no wait on it
 * outlasts the stall deadline: a process of the sandbox can stop the copier (SIGSTOP from a
 * loop over /proc), and the host's side must not hang on it. --timeout bounds the whole copy,
 * waits on the host's own standard input and output included. When a wait runs out the copier
 * is killed at once, so what is still to be read or written finds the pipe closed. */
enum { CP_STALLED = 1, CP_TIMED_OUT };
struct cp_pipe {
	int fd;
	int stall_s;
	uint64_t timeout_us, deadline; /* --timeout, and when it expires (monotonic); 0 = none */
	int gave_up; /* CP_STALLED or CP_TIMED_OUT: every further call fails at once */
	struct dsec_exec_proc *pr;
	char buf[65536]; /* the reader callback's */
};

/* DSEC_CP_STALL_S, whole seconds, for tests; otherwise (or when it is not 1..86400) the
 * default. */
static int stall_seconds(void)
{
	const char *s = getenv("DSEC_CP_STALL_S");
	char *end;
	long v;

	if (!s || !*s)
		return DSEC_CP_STALL_S;
	errno = 0;
	v = strtol(s, &end, 10);
	return errno || *end || v < 1 || v > 86400 ? DSEC_CP_STALL_S : (int)v;
}

static int give_up(struct cp_pipe *cp, int why)
{
	struct dsec_err e;

	if (!cp->gave_up && cp->pr)
		dsec_exec_kill(cp->pr, &e);
	cp->gave_up = why;
	errno = ETIMEDOUT;
	return -1;
}

/* Wait until fd is ready for ev: at most the stall deadline when stall (the copier's pipe),
 * and never past --timeout. 0, or -1 (given up: errno ETIMEDOUT). */
static int wait_fd(struct cp_pipe *cp, int fd, short ev, int stall)
{
	uint64_t end = stall ? dsec_now_us() + (uint64_t)cp->stall_s * 1000000 : UINT64_MAX;
	struct pollfd pfd = {.fd = fd, .events = ev};

	if (cp->gave_up)
		return errno = ETIMEDOUT, -1;
	if (cp->deadline && cp->deadline < end)
		end = cp->deadline;
	if (end == UINT64_MAX)
		return 0; /* nothing to bound: the read or write itself waits */
	for (;;) {
		uint64_t now = dsec_now_us();
		int r;

		if (now >= end)
			return give_up(cp, end == cp->deadline ? CP_TIMED_OUT : CP_STALLED);
		r = poll(&pfd, 1, (int)((end - now + 999) / 1000));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* read(2) on cp, waiting at most the deadline for a byte. */
static ssize_t pipe_read(struct cp_pipe *cp, void *buf, size_t n)
{
	for (;;) {
		ssize_t r;

		if (cp->gave_up || (cp->deadline && dsec_now_us() >= cp->deadline))
			return give_up(cp, cp->gave_up ? cp->gave_up : CP_TIMED_OUT);
		r = read(cp->fd, buf, n);
		if (r >= 0)
			return r;
		if (errno != EINTR && (errno != EAGAIN || wait_fd(cp, cp->fd, POLLIN, 1) < 0))
			return -1;
	}
}

/* All of buf onto cp, the deadline counted afresh whenever the reader takes some. 0 or -1. */
static int pipe_write(struct cp_pipe *cp, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t r;

		if (cp->gave_up || (cp->deadline && dsec_now_us() >= cp->deadline))
			return give_up(cp, cp->gave_up ? cp->gave_up : CP_TIMED_OUT);
		r = write(cp->fd, p, n);
		if (r > 0) {
			p += r;
			n -= (size_t)r;
		} else if (r == 0 || (errno != EINTR &&
				      (errno != EAGAIN || wait_fd(cp, cp->fd, POLLOUT, 1) < 0)))
			return -1;
	}
	return 0;
}

/* All of buf onto the host's standard output, within --timeout: a pipe there takes a page
 * without blocking once poll says it is writable. 0 or -1. */
static int out_write(struct cp_pipe *cp, const char *p, size_t n)
{
	while (n > 0) {
		size_t k = cp->deadline && n > PIPE_BUF ? PIPE_BUF : n;
		ssize_t r;

		if (wait_fd(cp, 1, POLLOUT, 0) < 0)
			return -1;
		r = write(1, p, k);
		if (r > 0) {
			p += r;
			n -= (size_t)r;
		} else if (r == 0 || errno != EINTR)
			return -1;
	}
	return 0;
}

static la_ssize_t la_pipe_read(struct archive *a, void *data, const void **buf)
{
	struct cp_pipe *cp = data;

	(void)a;
	*buf = cp->buf;
	return pipe_read(cp, cp->buf, sizeof(cp->buf));
}

static la_ssize_t la_pipe_write(struct archive *a, void *data, const void *buf, size_t n)
{
	(void)a;
	return pipe_write(data, buf, n) < 0 ? -1 : (la_ssize_t)n;
}

/* Make fd, the host's end of a pipe to the copier pr (started later), a cp_pipe; --timeout
 * timeout_us (0 = none) counts from now. 0 or -1 (fcntl). */
static int pipe_open(struct cp_pipe *cp, int fd, uint64_t timeout_us, struct dsec_exec_proc *pr)
{
	cp->fd = fd;
	cp->stall_s = stall_seconds();
	cp->timeout_us = timeout_us;
	cp->deadline = timeout_us ? dsec_now_us() + timeout_us : 0;
	cp->gave_up = 0;
	cp->pr = pr;
	return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Write path (relative to the cwd) as a pax tar on cp (the host) or fd (the sandbox), entries
 * named as found (no symlink followed). 0 or -1 with msg. */
static int pack(const char *path, int fd, struct cp_pipe *cp, struct progress *pg, char *msg,
		size_t mn)
{
	struct archive *d = archive_read_disk_new(), *w = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	struct archive_entry_linkresolver *lr = archive_entry_linkresolver_new();
	char buf[65536];
	int rc, ret = -1;

	archive_read_disk_set_symlink_physical(d);
	/* one file system, as tar --one-file-system: a copy of / takes the sandbox's files, not
	 * its /proc, /sys or /dev (their dirs come, empty) */
	archive_read_disk_set_behavior(d, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS);
	archive_write_set_format_pax_restricted(w);
	/* names go as the bytes they are (pax hdrcharset=BINARY): converting them to UTF-8 by
	 * the locale failed for every name past ASCII in the C locale, and any name not UTF-8 */
	archive_write_set_options(w, "hdrcharset=BINARY");
	/* a file's second and later names go as links, without its data again */
	if (lr)
		archive_entry_linkresolver_set_strategy(lr, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
	if (cp) /* as archive_write_open_fd does on a pipe: no padding after the end */
		archive_write_set_bytes_in_last_block(w, 1);
	if ((cp ? archive_write_open(w, cp, NULL, la_pipe_write, NULL)
		: archive_write_open_fd(w, fd)) != ARCHIVE_OK ||
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
		ret = unpack(r, w, j->top, new_top, 1, NULL, msg, sizeof(msg));
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
	return pack(base, 1, NULL, NULL, msg, sizeof(msg)) < 0 ? in_sandbox_fail(msg) : 0;
}

/* ---- on the host ---- */

/* The error of a copy given up on (cp->gave_up). -1. */
static int gave_up_err(const struct cp_pipe *cp, struct dsec_err *err)
{
	if (cp->gave_up == CP_TIMED_OUT)
		return dsec_err_set(err, ETIMEDOUT, "cp: timed out after %g s (--timeout)",
				    (double)cp->timeout_us / 1e6);
	return dsec_err_set(err, ETIMEDOUT, "cp: no progress for %d s: the sandbox side stopped",
			    cp->stall_s);
}

/* dsec_exec_start waits until the copier's setup is done, and once the copier has entered the
 * sandbox's user namespace a process there can stop it (SIGSTOP). The start has no guard of its
 * own for a process that runs a function, so our timer kills it by its pidfd at the stall
 * deadline (or --timeout) and the wait ends. */
static struct dsec_exec_proc *volatile starting;
static volatile sig_atomic_t start_killed;

static void start_alarm(int sig)
{
	struct dsec_exec_proc *pr = starting;

	(void)sig;
	if (pr && pr->pidfd > 2) { /* set by clone3; the start's own fds come after stdio */
		syscall(SYS_pidfd_send_signal, pr->pidfd, SIGKILL, NULL, 0);
		start_killed = 1;
	}
}

/* Start fn in the sandbox with stream as its stdin (in) or stdout (!in) and a pipe for its
 * message; io (the stream) gives the deadlines and is marked given up when the start did not
 * finish within them. 0 or -1. */
static int start_copier(struct dsec_exec_target *t, int (*fn)(void *), struct cp_job *j, int stream,
			int in, struct dsec_exec_proc *pr, int *msgfd, struct cp_pipe *io,
			struct dsec_err *err)
{
	static char name[] = "dsec-exec-cp";
	char *argv[] = {name, NULL}, *envp[] = {NULL};
	struct dsec_exec_spec s = {.argv = argv, .envp = envp, .fn = fn, .arg = j};
	struct sigaction sa = {.sa_handler = start_alarm, .sa_flags = SA_RESTART}, old;
	uint64_t us = (uint64_t)io->stall_s * 1000000, now = dsec_now_us();
	struct itimerval it = {{0, 0}, {0, 0}}, off = {{0, 0}, {0, 0}};
	int mp[2], why = CP_STALLED, r;

	if (io->deadline && io->deadline < now + us) {
		us = io->deadline > now ? io->deadline - now : 1;
		why = CP_TIMED_OUT;
	}
	if (pipe2(mp, O_CLOEXEC) < 0)
		return dsec_err_sys(err, "pipe");
	s.fd[0] = in ? stream : -1;
	s.fd[1] = in ? -1 : stream;
	s.fd[2] = mp[1];
	it.it_value.tv_sec = (time_t)(us / 1000000);
	it.it_value.tv_usec = (suseconds_t)(us % 1000000);
	sigemptyset(&sa.sa_mask);
	pr->pidfd = -1;
	starting = pr;
	start_killed = 0;
	sigaction(SIGALRM, &sa, &old);
	setitimer(ITIMER_REAL, &it, NULL);
	r = dsec_exec_start(t, &s, pr, err);
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old, NULL);
	starting = NULL;
	close(mp[1]);
	if (start_killed) {
		if (r == 0)
			dsec_exec_release(pr); /* reaps it */
		close(mp[0]);
		io->gave_up = why;
		return gave_up_err(io, err);
	}
	if (r < 0) {
		close(mp[0]);
		return -1;
	}
	*msgfd = mp[0];
	return 0;
}

/* Read the copier's message to its end (it exits) and reap it. Giving up, on the stream io or
 * in this wait, becomes err; else the copier's message when it failed. 0 or -1. */
static int finish_copier(struct dsec_exec_proc *pr, int msgfd, struct cp_pipe *io, const char *what,
			 struct dsec_err *err)
{
	char msg[1024];
	struct cp_pipe mp;
	struct dsec_err e;
	size_t len = 0;
	ssize_t n;
	int st = 0;

	(void)pipe_open(&mp, msgfd, 0, pr); /* should fcntl fail, it is read blocking */
	mp.timeout_us = io->timeout_us;
	mp.deadline = io->deadline;
	while (!io->gave_up && len < sizeof(msg) - 1 &&
	       (n = pipe_read(&mp, msg + len, sizeof(msg) - 1 - len)) > 0)
		len += (size_t)n;
	close(msgfd);
	msg[len] = '\0';
	if (dsec_exec_wait(pr, 0, &st, NULL, &e) < 0)
		st = 1;
	dsec_exec_release(pr);
	if (io->gave_up || mp.gave_up)
		return gave_up_err(io->gave_up ? io : &mp, err);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	return dsec_err_set(err, EIO, "%s", msg[0] ? msg : what);
}

int dsec_cp_in(struct dsec_exec_target *t, const char *src, const char *dst, uint64_t timeout_us,
	       struct dsec_err *err)
{
	struct cp_job j = {.src = src, .dst = dst, .raw = !strcmp(src, "-")};
	char dir[PATH_MAX], base[NAME_MAX + 1], msg[768] = "";
	struct dsec_exec_proc pr;
	struct progress pg;
	struct cp_pipe io;
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
	if (pipe_open(&io, p[1], timeout_us, &pr) < 0)
		r = dsec_err_sys(err, "pipe");
	if (r < 0 || start_copier(t, sandbox_unpack, &j, p[0], 1, &pr, &msgfd, &io, err) < 0) {
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

		/* standard input may take its time: only --timeout bounds it, not the stall
		 * deadline of the sandbox's side */
		while (wait_fd(&io, 0, POLLIN, 0) == 0 && (n = read(0, buf, sizeof(buf))) > 0) {
			if (pipe_write(&io, buf, (size_t)n) < 0)
				break;
			progress_add(&pg, (uint64_t)n, 0);
		}
	} else {
		cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cwd < 0 || chdir(dir) < 0)
			r = dsec_err_sys(err, "'%s'", dir);
		else
			r = pack(base, -1, &io, &pg, msg, sizeof(msg));
		if (cwd >= 0) {
			if (fchdir(cwd) < 0)
				r = -1;
			close(cwd);
		}
	}
	close(p[1]);
	dsec_progress_end(&pg.line);
	if (finish_copier(&pr, msgfd, &io, "copy into the sandbox failed", err) < 0)
		return -1;
	if (r < 0 && msg[0])
		return dsec_err_set(err, EIO, "%s", msg);
	return r;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* Remove name in dirfd and everything below it, no symbolic link followed, no mount crossed.
 * 0 or -1. */
static int remove_tree(int dirfd, const char *name)
{
	int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = -1;

	if (cwd < 0)
		return -1;
	if (fchdir(dirfd) == 0)
		r = nftw(name, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (fchdir(cwd) < 0)
		r = -1;
	close(cwd);
	return r;
}

/* After a failed copy out: remove top (in dirfd, shown as shown to the user) when this copy
 * made it; else, when something was written, say in err what stays. */
static void undo_out(struct dsec_err *err, int dirfd, const char *top, int existed, uint64_t files,
		     const char *shown)
{
	size_t len = strlen(err->msg);
	struct stat st;

	if (!existed && fstatat(dirfd, top, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return; /* nothing made */
	if (!existed && remove_tree(dirfd, top) == 0)
		return;
	if (existed && !files)
		return;
	snprintf(err->msg + len, sizeof(err->msg) - len,
		 existed ? "; what was copied so far stays in '%s'"
			 : "; could not remove the partial copy '%s'",
		 shown);
}

int dsec_cp_out(struct dsec_exec_target *t, const char *src, const char *dst, uint64_t timeout_us,
		struct dsec_err *err)
{
	struct cp_job j = {.src = src};
	char sdir[PATH_MAX], sbase[NAME_MAX + 1], dir[PATH_MAX], base[NAME_MAX + 1], msg[768] = "";
	char shown[PATH_MAX + NAME_MAX + 2] = "";
	const char *new_top = NULL, *into = NULL;
	struct dsec_exec_proc pr;
	struct progress pg;
	struct cp_pipe io;
	struct stat st;
	int p[2], msgfd, slash, r = 0, cwd = -1, intofd = -1, existed = 1;

	if (la_load(err) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	if (split_path(src, sdir, sizeof(sdir), sbase, sizeof(sbase), &slash) < 0)
		return dsec_err_set(err, EINVAL, "empty source path");
	if (strcmp(dst, "-") != 0) {
		if (split_path(dst, dir, sizeof(dir), base, sizeof(base), &slash) < 0)
			return dsec_err_set(err, EINVAL, "empty destination path");
		/* An earlier copy out may have left a symbolic link there, pointing wherever the
		 * sandbox chose: one to a directory is followed only when the user asks for it
		 * with a trailing '/'. A link to anything else is replaced, never followed
		 * (libarchive unlinks it, as any link in the tree). */
		if (!slash && lstat(dst, &st) == 0 && S_ISLNK(st.st_mode) && stat(dst, &st) == 0 &&
		    S_ISDIR(st.st_mode))
			return dsec_err_set(err, ELOOP,
					    "cp: destination '%s' is a symbolic link: not followed "
					    "(write '%s/' to copy into the directory it points to)",
					    dst, dst);
		if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
			into = dst;
			new_top = strcmp(sbase, ".") ? sbase : "."; /* keep the name */
		} else if (slash)
			return dsec_err_set(err, ENOTDIR, "'%s': not a directory", dst);
		else {
			into = dir;
			new_top = base;
		}
		/* the directory checked, not what its name may lead to later */
		intofd = open(into, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
					(into == dst && !slash ? O_NOFOLLOW : 0));
		if (intofd < 0)
			return dsec_err_sys(err, "'%s'", into);
		existed = !strcmp(new_top, ".") ||
			  fstatat(intofd, new_top, &st, AT_SYMLINK_NOFOLLOW) == 0;
		if (into == dst && strcmp(new_top, "."))
			snprintf(shown, sizeof(shown), "%s%s%s", dst,
				 dst[strlen(dst) - 1] == '/' ? "" : "/", new_top);
		else
			snprintf(shown, sizeof(shown), "%s", dst);
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		r = dsec_err_sys(err, "pipe");
		goto out;
	}
	if (pipe_open(&io, p[0], timeout_us, &pr) < 0)
		r = dsec_err_sys(err, "pipe");
	if (r < 0 || start_copier(t, sandbox_pack, &j, p[1], 0, &pr, &msgfd, &io, err) < 0) {
		close(p[0]);
		close(p[1]);
		r = -1;
		goto out;
	}
	close(p[1]);
	pg.bytes = pg.files = 0;
	dsec_progress_start(&pg.line, 1);
	if (!into) {
		ssize_t n;

		while ((n = pipe_read(&io, io.buf, sizeof(io.buf))) > 0) {
			if (out_write(&io, io.buf, (size_t)n) < 0) {
				if (!io.gave_up)
					r = dsec_err_sys(err, "write to stdout");
				break;
			}
			progress_add(&pg, (uint64_t)n, 0);
		}
	} else {
		struct archive *rd = archive_read_new(), *w = disk_writer();

		archive_read_support_format_tar(rd);
		cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cwd < 0 || fchdir(intofd) < 0)
			r = dsec_err_sys(err, "'%s'", into);
		else if (archive_read_open(rd, &io, NULL, la_pipe_read, NULL) != ARCHIVE_OK) {
			snprintf(msg, sizeof(msg), "read stream: %s", archive_error_string(rd));
			r = -1;
		} else if ((r = unpack(rd, w, sbase, new_top, 0, &pg, msg, sizeof(msg))) == 0 &&
			   archive_write_close(w) != ARCHIVE_OK) {
			snprintf(msg, sizeof(msg), "%s", archive_error_string(w));
			r = -1;
		}
		archive_read_free(rd);
		archive_write_free(w);
		if (r == 0) /* the writer's padding after the end-of-archive blocks */
			while (pipe_read(&io, io.buf, sizeof(io.buf)) > 0)
				;
		if (cwd >= 0) {
			if (fchdir(cwd) < 0)
				r = dsec_err_sys(err, "back to the working directory");
			close(cwd);
		}
	}
	close(p[0]);
	dsec_progress_end(&pg.line);
	if (finish_copier(&pr, msgfd, &io, "copy out of the sandbox failed", err) < 0)
		r = -1;
	else if (r < 0 && msg[0])
		dsec_err_set(err, EIO, "%s", msg);
	if (r < 0 && into)
		undo_out(err, intofd, new_top, existed, pg.files, shown);
out:
	if (intofd >= 0)
		close(intofd);
	return r;
}
