/* The import pipeline: input → (tee to the layer's source file) → decompression (libarchive,
 * format "raw") → sha256 of the uncompressed stream → tar reader → extractor; then the runtime
 * form (EROFS) and publication by rename(2). Also export and the staging-dir janitor. */
#include "layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "erofs.h"
#include "gzcheck.h"
#include "layer-int.h"
#include "oci.h"

#define IN_BUF (1 << 20)

extern char **environ;

/* A staging dir tmp/import-<pid>-<rand>/ holding layer/ (what gets published as
 * layers/<hex>/). Its lock file tmp/import-<pid>-<rand>.lock is held for the importer's life
 * and appears already locked (linked in from an O_TMPFILE), so a janitor that gets the lock
 * knows the importer is gone. */
struct stage {
	char name[64];
	char dir[PATH_MAX];
	int tmp_fd, lock_fd, layer_fd;
	int tmpfs; /* tree/ is a tmpfs in this process's private mount namespace */
};

struct pipeline {
	int in_fd, src_fd;
	unsigned char *inbuf;
	struct archive *raw, *tar;
	EVP_MD_CTX *md;
	EVP_MD_CTX *blob_md; /* of the input as read, when its digest is known */
	int raw_eof;
	uint64_t stream_bytes, max_bytes;
	uint64_t room;           /* of the source copy, as dsec_extract's */
	uint64_t src_off;        /* bytes of the source copy so far, its holes included */
	uint64_t trail;          /* uncompressed bytes after the archive's end */
	struct dsec_gzcheck *gz; /* a gzip stream's CRCs, checked when no digest covers it */
	int stopped;             /* errno of a limit the stream stopped at (EFBIG, ENOSPC), or 0 */
	uint64_t t0;
	struct dsec_progress pg;
	uint64_t *files;
};

/* Unmount the tmpfs holding tree/ (freeing it) and remove the mount point. */
static void stage_drop_tmpfs(struct stage *st)
{
	char tree[PATH_MAX];

	if (!st->tmpfs)
		return;
	snprintf(tree, sizeof(tree), "%s/layer/tree", st->dir);
	umount2(tree, MNT_DETACH);
	rmdir(tree);
	st->tmpfs = 0;
}

/* Staging on tmpfs saves writing the tree to disk and deleting it again (half the time of an
 * import). The tmpfs lives in a mount namespace of our own, so the host never sees it, and
 * it goes away with the process even when killed. */
static int private_mount_ns(void)
{
	static int done;

	if (!done) {
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			return -1;
		done = 1;
	}
	return 0;
}

/* Call after private_mount_ns() and before opening the stage: an fd opened in the old mount
 * namespace would look up paths there and never see the tmpfs. */
static int stage_mount_tmpfs(struct stage *st)
{
	const char *size = getenv("DSEC_LAYER_TMPFS_SIZE");
	char tree[PATH_MAX], opts[128];

	snprintf(tree, sizeof(tree), "%s/layer/tree", st->dir);
	snprintf(opts, sizeof(opts), "mode=0755,size=%s",
		 size && *size && strlen(size) < 32 && !strchr(size, ',') ? size : "25%");
	if (mount("dsec-stage", tree, "tmpfs", MS_NOSUID, opts) < 0)
		return -1;
	st->tmpfs = 1;
	return 0;
}

static void stage_close(struct stage *st)
{
	stage_drop_tmpfs(st);
	if (st->layer_fd >= 0)
		close(st->layer_fd);
	if (st->tmp_fd >= 0 && st->name[0]) {
		char lock[80];

		dsec_rmtree_at(st->tmp_fd, st->name, NULL);
		snprintf(lock, sizeof(lock), "%s.lock", st->name);
		unlinkat(st->tmp_fd, lock, 0);
	}
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	if (st->tmp_fd >= 0)
		close(st->tmp_fd);
	st->layer_fd = st->lock_fd = st->tmp_fd = -1;
}

static int stage_open(const struct dsec_paths *p, struct stage *st, struct dsec_err *err)
{
	char path[PATH_MAX], proc[64], lock[80];
	unsigned rnd;
	int fd;

	memset(st, 0, sizeof(*st));
	st->tmp_fd = st->lock_fd = st->layer_fd = -1;
	/* layers/ is root's alone: an unpacked tree keeps its archive's modes (a 1777 /tmp, a
	 * setuid file with --allow-setuid), which must not be reachable by the node's users;
	 * a store made before this was 0755 */
	if (dsec_store_path(p, path, "layers") < 0 || dsec_mkdir_p(path, 0700, err) < 0)
		return dsec_err_wrap(err, "store '%s'", p->root);
	if (chmod(path, 0700) < 0)
		return dsec_err_sys(err, "store '%s': chmod layers", p->root);
	if (dsec_store_path(p, path, "tmp") < 0 || dsec_mkdir_p(path, 0700, err) < 0)
		return dsec_err_wrap(err, "store '%s'", p->root);
	dsec_layer_clean_staging(p, NULL);
	st->tmp_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->tmp_fd < 0)
		return dsec_err_sys(err, "open '%s'", path);
	fd = openat(st->tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		dsec_err_sys(err, "staging lock in '%s'", path);
		goto fail;
	}
	st->lock_fd = fd;
	if (getentropy(&rnd, sizeof(rnd)) < 0)
		rnd = (unsigned)dsec_now_us();
	snprintf(st->name, sizeof(st->name), "import-%d-%08x", (int)getpid(), rnd);
	snprintf(lock, sizeof(lock), "%s.lock", st->name);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, st->tmp_fd, lock, AT_SYMLINK_FOLLOW) < 0) {
		dsec_err_sys(err, "staging lock '%s/%s'", path, lock);
		st->name[0] = '\0';
		goto fail;
	}
	snprintf(st->dir, sizeof(st->dir), "%s/%s", path, st->name);
	if (mkdirat(st->tmp_fd, st->name, 0700) < 0) {
		dsec_err_sys(err, "staging dir '%s/%s'", path, st->name);
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/layer", st->dir);
	if (mkdir(path, 0755) < 0 || mkdir(strcat(path, "/tree"), 0755) < 0) {
		dsec_err_sys(err, "staging dir '%s'", path);
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/layer", st->dir);
	st->layer_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->layer_fd < 0) {
		dsec_err_sys(err, "open '%s'", path);
		goto fail;
	}
	return 0;
fail:
	stage_close(st);
	return -1;
}

/* ---- the stream: tee, decompress, hash ---- */

/* libarchive's message for a, which some failures leave unset (a gzip trailer cut short) */
static const char *la_err(struct archive *a)
{
	const char *m = archive_error_string(a);

	return m ? m : "truncated or corrupt stream";
}

#define SRC_BLOCK 4096

/* Append n bytes to the source copy: its 4 KiB blocks of zeros (by offset in the file) as holes,
 * so that an uncompressed stream of zeros costs no disk there either; the size is set at the
 * end (src_end). 0, or -1 with the error set on a. */
static int src_write(struct pipeline *pl, struct archive *a, const unsigned char *p, size_t n)
{
	static const unsigned char zero[SRC_BLOCK];
	uint64_t data = 0;
	struct dsec_err e;
	size_t i, len;

	for (i = 0; i < n; i += len) { /* the bytes to write, for the reserve */
		len = SRC_BLOCK - (size_t)((pl->src_off + i) % SRC_BLOCK);
		if (len > n - i)
			len = n - i;
		if (memcmp(p + i, zero, len))
			data += len;
	}
	/* the copy is on the store's disk as the tree is: the same reserve is kept */
	if (data && dsec_layer_room(pl->src_fd, &pl->room, data, "source copy", &e) < 0) {
		pl->stopped = e.errnum;
		archive_set_error(a, e.errnum, "%s", e.msg);
		return -1;
	}
	for (i = 0; i < n; i += len) {
		len = SRC_BLOCK - (size_t)((pl->src_off + i) % SRC_BLOCK);
		if (len > n - i)
			len = n - i;
		if (!memcmp(p + i, zero, len))
			continue;
		for (size_t done = 0; done < len;) {
			ssize_t w = pwrite(pl->src_fd, p + i + done, len - done,
					   (off_t)(pl->src_off + i + done));

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				archive_set_error(a, errno, "write source copy: %s",
						  strerror(errno));
				return -1;
			}
			done += (size_t)w;
		}
	}
	pl->src_off += n;
	return 0;
}

/* The source copy's size, its last blocks holes or not. */
static int src_end(struct pipeline *pl, struct dsec_err *err)
{
	if (pl->src_fd >= 0 && ftruncate(pl->src_fd, (off_t)pl->src_off) < 0)
		return dsec_err_sys(err, "write source copy");
	return 0;
}

static la_ssize_t raw_read(struct archive *a, void *arg, const void **buf)
{
	struct pipeline *pl = arg;
	ssize_t n;

	do
		n = read(pl->in_fd, pl->inbuf, IN_BUF);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		archive_set_error(a, errno, "read input: %s", strerror(errno));
		return -1;
	}
	if (n > 0 && pl->blob_md)
		EVP_DigestUpdate(pl->blob_md, pl->inbuf, (size_t)n);
	if (n > 0 && pl->src_fd >= 0 && src_write(pl, a, pl->inbuf, (size_t)n) < 0)
		return -1;
	if (n > 0 && pl->gz) {
		struct dsec_err e = {0};

		if (dsec_gzcheck_feed(pl->gz, pl->inbuf, (size_t)n, &e) < 0) {
			archive_set_error(a, e.errnum, "%s", e.msg);
			return -1;
		}
	}
	*buf = pl->inbuf;
	return n;
}

static la_ssize_t tar_read(struct archive *a, void *arg, const void **buf)
{
	struct pipeline *pl = arg;
	la_int64_t off;
	size_t n;
	int r;

	if (pl->raw_eof)
		return 0;
	r = archive_read_data_block(pl->raw, buf, &n, &off);
	if (r == ARCHIVE_EOF) {
		pl->raw_eof = 1;
		return 0;
	}
	if (r < ARCHIVE_WARN) {
		archive_set_error(a, archive_errno(pl->raw), "%s", la_err(pl->raw));
		return -1;
	}
	EVP_DigestUpdate(pl->md, *buf, n);
	pl->stream_bytes += n;
	if (pl->stream_bytes > pl->max_bytes) {
		pl->stopped = EFBIG;
		/* libarchive's formatter knows %jd, not %llu */
		archive_set_error(a, EFBIG, "uncompressed stream exceeds --max-bytes %jd",
				  (intmax_t)pl->max_bytes);
		return -1;
	}
	dsec_progress(&pl->pg, "import: %.1f MiB, %llu files ",
		      (double)pl->stream_bytes / (1 << 20),
		      (unsigned long long)(pl->files ? *pl->files : 0));
	return (la_ssize_t)n;
}

static void pipeline_free(struct pipeline *pl)
{
	if (pl->tar)
		archive_read_free(pl->tar);
	if (pl->raw)
		archive_read_free(pl->raw);
	if (pl->md)
		EVP_MD_CTX_free(pl->md);
	if (pl->blob_md)
		EVP_MD_CTX_free(pl->blob_md);
	dsec_gzcheck_free(pl->gz);
	free(pl->inbuf);
	memset(pl, 0, sizeof(*pl));
}

static int pipeline_open(struct pipeline *pl, int in_fd, int src_fd, uint64_t max_bytes,
			 int with_tar, int hash_input, struct dsec_err *err)
{
	struct archive_entry *e;
	int r;

	memset(pl, 0, sizeof(*pl));
	pl->in_fd = in_fd;
	pl->src_fd = src_fd;
	pl->max_bytes = max_bytes;
	pl->inbuf = malloc(IN_BUF);
	pl->md = EVP_MD_CTX_new();
	pl->raw = archive_read_new();
	pl->tar = archive_read_new();
	if (!pl->inbuf || !pl->md || !pl->raw || !pl->tar ||
	    !EVP_DigestInit_ex(pl->md, EVP_sha256(), NULL))
		return dsec_err_set(err, ENOMEM, "out of memory");
	if (hash_input && (!(pl->blob_md = EVP_MD_CTX_new()) ||
			   !EVP_DigestInit_ex(pl->blob_md, EVP_sha256(), NULL)))
		return dsec_err_set(err, ENOMEM, "out of memory");
	/* a blob's digest covers its bytes; a stream of its own has only its CRCs (gzcheck.h) */
	if (!hash_input && !(pl->gz = dsec_gzcheck_new()))
		return dsec_err_set(err, ENOMEM, "out of memory");
	/* the decompressors libarchive has built in; never external programs */
	archive_read_support_filter_gzip(pl->raw);
	archive_read_support_filter_bzip2(pl->raw);
	archive_read_support_filter_xz(pl->raw);
	archive_read_support_filter_lzma(pl->raw);
	archive_read_support_filter_zstd(pl->raw);
	archive_read_support_filter_lz4(pl->raw);
	archive_read_support_format_raw(pl->raw);
	if (archive_read_open(pl->raw, pl, NULL, raw_read, NULL) != ARCHIVE_OK)
		return dsec_err_set(err, EINVAL, "input: %s", la_err(pl->raw));
	r = archive_read_next_header(pl->raw, &e);
	if (r == ARCHIVE_EOF)
		return dsec_err_set(err, EINVAL, "input is empty");
	if (r < ARCHIVE_WARN)
		return dsec_err_set(err, EINVAL, "input: %s", la_err(pl->raw));
	if (!with_tar)
		return 0;
	archive_read_support_format_tar(pl->tar);
	if (archive_read_open(pl->tar, pl, NULL, tar_read, NULL) != ARCHIVE_OK)
		return dsec_err_set(err, EINVAL, "not a tar archive: %s", la_err(pl->tar));
	return 0;
}

/* Hash whatever follows the end-of-archive marker too: the id covers the whole stream. */
static int pipeline_drain(struct pipeline *pl, char hex[65], struct dsec_err *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	const void *buf;

	while (!pl->raw_eof) {
		la_ssize_t n = tar_read(pl->tar, pl, &buf);

		if (n < 0)
			return dsec_err_set(
			    err, archive_errno(pl->tar) > 0 ? archive_errno(pl->tar) : EIO, "%s",
			    la_err(pl->tar));
		if (n == 0)
			break;
		/* what follows the end is hashed into the diff id, as the tar's padding is;
		 * megabytes of it are no layer (an endless stream of zeros is an empty tar) */
		pl->trail += (uint64_t)n;
		if (pl->trail > DSEC_LAYER_TRAIL_MAX)
			return dsec_err_set(err, EFBIG,
					    "bad archive: more than %d MiB after its end",
					    DSEC_LAYER_TRAIL_MAX >> 20);
	}
	if (src_end(pl, err) < 0 || (pl->gz && dsec_gzcheck_end(pl->gz, err) < 0))
		return -1;
	EVP_DigestFinal_ex(pl->md, md, &mdlen);
	for (unsigned i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
	return 0;
}

/* The input hashes to want ("sha256:<hex>"), what follows the compressed stream included. */
static int pipeline_check_blob(struct pipeline *pl, const char *want, struct dsec_err *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	char got[65];
	ssize_t n;

	while ((n = read(pl->in_fd, pl->inbuf, IN_BUF)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return dsec_err_sys(err, "read input");
		EVP_DigestUpdate(pl->blob_md, pl->inbuf, (size_t)n);
	}
	EVP_DigestFinal_ex(pl->blob_md, md, &mdlen);
	for (unsigned i = 0; i < 32; i++)
		sprintf(got + 2 * i, "%02x", md[i]);
	if (strcmp(got, want + 7))
		return dsec_err_set(err, EINVAL,
				    "blob is sha256:%.12s..., its digest says %.19s...", got, want);
	return 0;
}

/* ---- the runtime form ---- */

static int run_wait(const char *what, pid_t pid, struct dsec_err *err)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return dsec_err_sys(err, "wait for %s", what);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		return dsec_err_set(err, EIO, "%s: killed by signal %d", what, WTERMSIG(status));
	return dsec_err_set(err, EIO, "%s: exit status %d", what, WEXITSTATUS(status));
}

/* Build layer.erofs from tree/ with mkfs.erofs. 0, 1 when it is missing, -1 on failure. */
static int run_mkfs_erofs(struct stage *st, int xattrs, struct dsec_err *err)
{
	char img[PATH_MAX], tree[PATH_MAX];
	char a0[] = "mkfs.erofs", a1[] = "--quiet", a2[] = "--preserve-mtime", a3[] = "-x-1";
	/* without xattrs in the tree, spare mkfs.erofs an llistxattr per file */
	char *argv[] = {a0,  a1, a2, xattrs ? img : a3, xattrs ? tree : img, xattrs ? NULL : tree,
			NULL};
	pid_t pid;
	int r;

	snprintf(img, sizeof(img), "%s/layer/layer.erofs", st->dir);
	snprintf(tree, sizeof(tree), "%s/layer/tree", st->dir);
	unlink(img);
	r = posix_spawnp(&pid, "mkfs.erofs", NULL, NULL, argv, environ);
	if (r == ENOENT)
		return 1;
	if (r) {
		errno = r;
		return dsec_err_sys(err, "run mkfs.erofs");
	}
	return run_wait("mkfs.erofs", pid, err);
}

/* Build layer.erofs from tree/: with our own writer (erofs.c), or with mkfs.erofs when
 * $DSEC_LAYER_MKFS is "mkfs.erofs" or our writer failed. 0, 1 when no way is left, -1. */
static int build_erofs(struct stage *st, int xattrs, struct dsec_err *err)
{
	const char *how = getenv("DSEC_LAYER_MKFS");
	uint64_t t0 = dsec_now_us();
	int r, tfd, ofd;

	if (how && !strcmp(how, "mkfs.erofs")) {
		r = run_mkfs_erofs(st, xattrs, err);
		dsec_infox("mkfs.erofs: %llu ms", (unsigned long long)(dsec_now_us() - t0) / 1000);
		return r;
	}
	tfd = openat(st->layer_fd, "tree", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ofd = openat(st->layer_fd, "layer.erofs", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	r = tfd < 0 || ofd < 0 ? dsec_err_sys(err, "open tree or image")
			       : dsec_erofs_build(tfd, ofd, xattrs, err);
	if (tfd >= 0)
		close(tfd);
	if (ofd >= 0)
		close(ofd);
	dsec_infox("EROFS image: %llu ms", (unsigned long long)(dsec_now_us() - t0) / 1000);
	/* a full disk stays full, and what our writer refuses (an xattr EROFS cannot hold) is
	 * not for mkfs.erofs to write either */
	if (r < 0 && (err->errnum == ENOSPC || err->errnum == EDQUOT || err->errnum == EFBIG))
		return -1;
	if (r < 0) {
		dsec_warnx("building the EROFS image: %s; trying mkfs.erofs", err->msg);
		r = run_mkfs_erofs(st, xattrs, err);
	}
	return r;
}

/* Can this kernel mount the image? Tried in a child in a private mount namespace, so nothing
 * shows in the host's mount table. 1 yes, 0 no. */
static int erofs_mounts(struct stage *st)
{
	char img[PATH_MAX], mnt[PATH_MAX];
	pid_t pid;
	int status;

	snprintf(img, sizeof(img), "%s/layer/layer.erofs", st->dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", st->dir);
	if (mkdir(mnt, 0700) < 0)
		return 0;
	pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount(img, mnt, "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID, NULL) < 0)
			_exit(1);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 0;
	rmdir(mnt);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static json_t *record_for(const struct dsec_paths *p, const char *id, struct dsec_err *err)
{
	json_t *m = dsec_store_layer_meta(p, id, err);

	if (m)
		json_object_set_new(m, "node", json_string(dsec_node()));
	return m;
}

static int too_many(uint64_t entries, const struct dsec_import_opts *o, struct dsec_err *err)
{
	if (entries <= o->max_files)
		return 0;
	return dsec_err_set(err, EFBIG, "more than --max-files %llu entries",
			    (unsigned long long)o->max_files);
}

/* Publish stage/layer as layers/<hex> (losing a race to an identical import is success). */
static int publish(const struct dsec_paths *p, struct stage *st, const char *hex, int *published,
		   struct dsec_err *err)
{
	char from[PATH_MAX], to[PATH_MAX], lock[PATH_MAX];
	int lfd, r;

	snprintf(from, sizeof(from), "%s/layer", st->dir);
	if (dsec_store_path(p, to, "layers/%s", hex) < 0 ||
	    dsec_store_path(p, lock, "store.lock") < 0)
		return dsec_err_sys(err, "layer %s", hex);
	lfd = dsec_lock(lock, 0, 1, err);
	if (lfd < 0)
		return -1;
	r = rename(from, to);
	if (r == 0 && published)
		*published = 1;
	if (r < 0 && (errno == EEXIST || errno == ENOTEMPTY))
		r = 0;
	else if (r < 0)
		dsec_err_sys(err, "publish layer sha256:%s", hex);
	close(lfd);
	return r;
}

/* The layer's id (hex) from its stream's sha256 (diff_hex): the diff id itself, unless the
 * stream holds setuid or setgid files or file capabilities and they were kept
 * (--allow-setuid): then the sha256 of "allow-setuid:sha256:<diff hex>". The two builds of one
 * stream are two layers, so an import never gets the other one's setuid bits from the store. */
static void layer_hex(const char *diff_hex, int kept, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	char in[96];
	int n;

	if (!kept) {
		memcpy(hex, diff_hex, 65);
		return;
	}
	n = snprintf(in, sizeof(in), "allow-setuid:sha256:%s", diff_hex);
	EVP_Digest(in, (size_t)n, md, &mdlen, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
}

static int write_meta(struct stage *st, const char *id, const char *diff_id, int setuid,
		      const struct dsec_import_opts *o, uint64_t bytes, uint64_t files,
		      uint64_t skipped, int dirfmt, struct dsec_err *err)
{
	json_t *m =
	    json_pack("{s:s, s:s, s:s?, s:s?, s:I, s:I, s:s, s:I, s:s, s:I, s:b}", "layer", id,
		      "diff_id", diff_id, "kind", o->kind, "name", o->name, "bytes",
		      (json_int_t)bytes, "files", (json_int_t)files, "format",
		      dirfmt ? "dir" : "erofs", "created", (json_int_t)(dsec_wall_us() / 1000000),
		      "source", "source", "skipped", (json_int_t)skipped, "setuid", setuid);
	char *text;
	int r;

	if (!o->kind)
		json_object_set_new(m, "kind", json_null());
	if (!o->name)
		json_object_set_new(m, "name", json_null());
	text = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	if (!text)
		return dsec_err_set(err, ENOMEM, "out of memory");
	r = dsec_write_atomic(st->layer_fd, "meta.json", text, strlen(text), 0644, 0, err);
	free(text);
	return r;
}

static int import_once(const struct dsec_paths *p, const struct dsec_import_opts *o, int fd,
		       int detect, int tmpfs, dsec_import_cb cb, void *arg, struct dsec_err *err)
{
	struct stage st;
	struct pipeline pl;
	struct dsec_extract x = {.cache_fd = -1, .tree_fd = -1};
	char diff_hex[65], hex[65], id[80], diff_id[80], path[PATH_MAX];
	uint64_t files = 0;
	json_t *rec = NULL;
	int rc = -1, src_fd = -1, dirfmt = o->format_dir, r;

	if (tmpfs && private_mount_ns() < 0) {
		dsec_infox("private mount namespace: %s; staging on disk", strerror(errno));
		tmpfs = 0;
	}
	if (stage_open(p, &st, err) < 0)
		return -1;
	if (tmpfs && stage_mount_tmpfs(&st) < 0)
		dsec_infox("staging on tmpfs: %s; staging on disk", strerror(errno));
	src_fd = openat(st.layer_fd, "source", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (src_fd < 0) {
		dsec_err_sys(err, "create source copy");
		goto out;
	}
	if (pipeline_open(&pl, fd, src_fd, o->max_bytes, 1, !!o->blob_digest, err) < 0)
		goto out_pl;

	dsec_progress_start(&pl.pg, o->progress);
	pl.t0 = dsec_now_us();
	pl.files = &files;
	x.ar = pl.tar;
	x.allow_setuid = o->allow_setuid;
	x.max_bytes = o->max_bytes;
	x.tree_fd = openat(st.layer_fd, "tree", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (;;) {
		struct archive_entry *e;

		r = archive_read_next_header(pl.tar, &e);
		if (r == ARCHIVE_EOF)
			break;
		/* a damaged header is the end: libarchive would go on looking for the next one
		 * inside the damaged entry's data, where other readers see file contents */
		if (r == ARCHIVE_RETRY || r < ARCHIVE_WARN) {
			dsec_err_set(err, pl.stopped ? pl.stopped : EINVAL, "%s%s",
				     pl.stopped ? "" : "bad archive: ", la_err(pl.tar));
			goto out_pl;
		}
		/* the directories an entry's path implies count as entries too: a name of 4 KiB
		 * can imply 2,000 of them */
		if (too_many(++files + x.implied, o, err) < 0 || dsec_extract_entry(&x, e, err) < 0)
			goto out_pl;
	}
	if (too_many(files + x.implied, o, err) < 0)
		goto out_pl;
	if (pipeline_drain(&pl, diff_hex, err) < 0 || dsec_extract_finish(&x, err) < 0)
		goto out_pl;
	if (o->stream_done && o->stream_done(o->stream_ctx, err) < 0)
		goto out_pl;
	if (o->blob_digest && pipeline_check_blob(&pl, o->blob_digest, err) < 0)
		goto out_pl;
	dsec_progress_end(&pl.pg);
	layer_hex(diff_hex, o->allow_setuid && x.setuid, hex);
	dsec_infox("sha256:%s: extracted %llu entries in %llu ms", hex, (unsigned long long)files,
		   (unsigned long long)(dsec_now_us() - pl.t0) / 1000);
	snprintf(id, sizeof(id), "sha256:%s", hex);
	snprintf(diff_id, sizeof(diff_id), "sha256:%s", diff_hex);
	dsec_extract_free(&x);
	if (x.tree_fd >= 0)
		close(x.tree_fd);
	x.tree_fd = -1;
	close(src_fd);
	src_fd = -1;

	if (detect) {
		int tfd = openat(st.layer_fd, "tree", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int kind = tfd < 0 ? 0 : dsec_oci_detect_dir(tfd);

		if (kind > 0)
			rc = dsec_oci_import(p, o, tfd, kind, cb, arg, err);
		if (tfd >= 0)
			close(tfd);
		if (kind > 0)
			goto out_pl;
	}
	/* an identical layer is already there: nothing to build */
	if (dsec_store_path(p, path, "layers/%s/meta.json", hex) == 0 && access(path, F_OK) == 0)
		goto done;
	if (!dirfmt) {
		r = build_erofs(&st, x.xattrs > 0, err);
		if (r < 0)
			goto out_pl;
		if (r == 1 || !erofs_mounts(&st)) {
			dsec_infox("sha256:%s: EROFS %s, keeping an unpacked tree", hex,
				   r == 1 ? "cannot be built" : "does not mount here");
			if (st.tmpfs) {
				/* the tree must live on disk: the caller imports again there */
				dsec_err_set(err, EAGAIN, "EROFS unusable, staging on disk");
				goto out_pl;
			}
			unlinkat(st.layer_fd, "layer.erofs", 0);
			dirfmt = 1;
		} else if (st.tmpfs) {
			stage_drop_tmpfs(&st);
		} else if (dsec_rmtree_at(st.layer_fd, "tree", err) < 0) {
			goto out_pl;
		}
		dsec_infox("sha256:%s: EROFS built at %llu ms", hex,
			   (unsigned long long)(dsec_now_us() - pl.t0) / 1000);
	}
	if (write_meta(&st, id, diff_id, o->allow_setuid && x.setuid, o, x.content_bytes, files,
		       x.skipped, dirfmt, err) < 0 ||
	    publish(p, &st, hex, o->published, err) < 0)
		goto out_pl;
done:
	rec = record_for(p, id, err);
	if (!rec)
		goto out_pl;
	rc = cb ? cb(rec, arg, err) : 0;
	json_decref(rec);
out_pl:
	dsec_progress_end(&pl.pg);
	pipeline_free(&pl);
out:
	dsec_extract_free(&x);
	if (x.tree_fd >= 0)
		close(x.tree_fd);
	if (src_fd >= 0)
		close(src_fd);
	stage_close(&st);
	return rc;
}

int dsec_layer_import_fd(const struct dsec_paths *p, const struct dsec_import_opts *o, int fd,
			 int detect, dsec_import_cb cb, void *arg, struct dsec_err *err)
{
	const char *how = getenv("DSEC_LAYER_STAGE");
	off_t start = lseek(fd, 0, SEEK_CUR);
	struct stat sb;
	int tmpfs, rc;

	/* tmpfs when the input can be read again should the tree not fit in memory */
	tmpfs = !o->format_dir && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && start >= 0;
	if (how && !strcmp(how, "disk"))
		tmpfs = 0;
	rc = import_once(p, o, fd, detect, tmpfs, cb, arg, err);
	if (rc < 0 && tmpfs && (err->errnum == ENOSPC || err->errnum == EAGAIN) &&
	    lseek(fd, start, SEEK_SET) == start) {
		struct dsec_import_opts o2 = *o;

		o2.format_dir = err->errnum == EAGAIN;
		dsec_infox("%s, importing again on disk",
			   err->errnum == EAGAIN ? "EROFS unusable" : "staging tmpfs full");
		rc = import_once(p, &o2, fd, detect, 0, cb, arg, err);
	}
	return rc;
}

static int is_link(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

int dsec_layer_import(const struct dsec_paths *p, const struct dsec_import_opts *o,
		      const char *path, dsec_import_cb cb, void *arg, struct dsec_err *err)
{
	struct stat sb;
	int fd, rc;

	if (!strcmp(path, "-")) {
		rc = dsec_layer_import_fd(p, o, STDIN_FILENO, 1, cb, arg, err);
		return rc < 0 ? dsec_err_wrap(err, "<stdin>") : rc;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return dsec_err_sys(err, "'%s'", path);
	if (fstat(fd, &sb) < 0) {
		close(fd);
		return dsec_err_sys(err, "'%s'", path);
	}
	if (S_ISDIR(sb.st_mode)) {
		int kind = dsec_oci_detect_dir(fd);
		/* an archive's index that is a link (to anywhere) is neither followed nor taken
		 * for a rootfs of that name: the user meant an image */
		if (kind == 0 && (is_link(fd, "manifest.json") || is_link(fd, "index.json"))) {
			close(fd);
			return dsec_err_set(err, EINVAL,
					    "'%s': its manifest.json or index.json is a symbolic "
					    "link, not an image's",
					    path);
		}
		if (kind > 0)
			rc = dsec_oci_import(p, o, fd, kind, cb, arg, err);
		else
			rc = dsec_tar_dir_import(p, o, fd, cb, arg, err);
	} else {
		rc = dsec_layer_import_fd(p, o, fd, 1, cb, arg, err);
	}
	close(fd);
	if (rc < 0)
		dsec_err_wrap(err, "'%s'", path);
	return rc;
}

void dsec_import_opts_init(struct dsec_import_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->max_bytes = DSEC_LAYER_MAX_BYTES_DEFAULT;
	o->max_files = DSEC_LAYER_MAX_FILES_DEFAULT;
}

/* ---- export ---- */

static int copy_fd(int in, int out, struct dsec_err *err)
{
	static char buf[1 << 16];
	ssize_t n;

	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return dsec_err_sys(err, "read source");
		}
		for (ssize_t o = 0; o < n;) {
			ssize_t w = write(out, buf + o, (size_t)(n - o));

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return dsec_err_sys(err, "write");
			o += w;
		}
	}
	return 0;
}

static int zstd_out(ZSTD_CCtx *z, int fd, const void *src, size_t n, ZSTD_EndDirective end,
		    struct dsec_err *err)
{
	static char obuf[1 << 17];
	ZSTD_inBuffer in = {src, n, 0};
	size_t left;

	do {
		ZSTD_outBuffer out = {obuf, sizeof(obuf), 0};
		const char *p = obuf;

		left = ZSTD_compressStream2(z, &out, &in, end);
		if (ZSTD_isError(left))
			return dsec_err_set(err, EIO, "zstd: %s", ZSTD_getErrorName(left));
		for (size_t o = 0; o < out.pos;) {
			ssize_t w = write(fd, p + o, out.pos - o);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return dsec_err_sys(err, "write");
			o += (size_t)w;
		}
	} while (end == ZSTD_e_end ? left != 0 : in.pos < in.size);
	return 0;
}

int dsec_layer_export(const struct dsec_paths *p, const char *id, int fd, struct dsec_err *err)
{
	static const unsigned char zmagic[4] = {0x28, 0xb5, 0x2f, 0xfd};
	unsigned char head[4];
	char path[PATH_MAX];
	struct pipeline pl;
	ZSTD_CCtx *z;
	const void *buf;
	int in, rc = -1;

	if (!dsec_layer_id_ok(id) || dsec_store_path(p, path, "layers/%s/source", id + 7) < 0)
		return dsec_err_set(err, EINVAL, "'%s': not a layer id", id);
	in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return dsec_err_sys(err, "layer %s: source stream", id);
	if (read(in, head, 4) == 4 && !memcmp(head, zmagic, 4)) {
		lseek(in, 0, SEEK_SET);
		rc = copy_fd(in, fd, err);
		close(in);
		return rc;
	}
	lseek(in, 0, SEEK_SET);
	z = ZSTD_createCCtx();
	if (pipeline_open(&pl, in, -1, UINT64_MAX, 0, 0, err) < 0)
		goto out;
	for (;;) {
		la_ssize_t n = tar_read(pl.raw, &pl, &buf);

		if (n < 0) {
			dsec_err_set(err, EIO, "layer %s: %s", id, la_err(pl.raw));
			goto out;
		}
		if (n == 0)
			break;
		if (zstd_out(z, fd, buf, (size_t)n, ZSTD_e_continue, err) < 0)
			goto out;
	}
	rc = zstd_out(z, fd, NULL, 0, ZSTD_e_end, err);
out:
	pipeline_free(&pl);
	ZSTD_freeCCtx(z);
	close(in);
	return rc;
}
