/* Importing layers into the store (see store.h for the layout): a tar stream (plain, gzip, xz,
 * zstd, bzip2, lz4; recognised by content) is hashed as it is extracted into a staging dir under
 * $DSEC_ROOT/tmp, neutralised on the way (paths, links, devices, setuid bits, overlay xattrs),
 * built into an EROFS image and published by rename(2). The layer keeps its source stream as
 * received (source), so that `export` gives back a stream with the same diff id. */
#ifndef DSEC_LAYER_H
#define DSEC_LAYER_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <sys/types.h>

#include "err.h"
#include "state.h"
#include "store.h"

#define DSEC_LAYER_MAX_BYTES_DEFAULT (64ULL << 30)
#define DSEC_LAYER_MAX_FILES_DEFAULT 1000000ULL
/* Uncompressed bytes a layer's stream may carry after the tar's end (its padding is some KiB) */
#define DSEC_LAYER_TRAIL_MAX (16 << 20)

struct dsec_import_opts {
	const char *kind;   /* "base", "intermediate", "application", or NULL */
	const char *name;   /* layer name (or, for OCI/docker archives, the image name), or NULL */
	int allow_setuid;   /* keep setuid/setgid bits and security.capability */
	uint64_t max_bytes; /* bound on the uncompressed stream and on the file contents */
	uint64_t max_files; /* bound on the number of entries */
	int format_dir;     /* keep an unpacked tree instead of building EROFS */
	int progress;       /* progress line on stderr (a terminal) for imports over a second */
	/* Asked once the stream has been read to its end, before anything is published: whoever
	 * writes the stream (a directory's walker) says whether it sent all of it. NULL: it did.
	 * 0, or -1 with err set. */
	int (*stream_done)(void *ctx, struct dsec_err *err);
	void *stream_ctx;
	/* "sha256:<hex>" the input itself (before decompression) must hash to, all of it read:
	 * an OCI blob's digest. NULL: not checked. */
	const char *blob_digest;
	/* Set to 1 when this import added the layer to the store (it was not there before), so
	 * an import of several layers that fails later can take back what it added. */
	int *published;
};

/* Called once per record an import produces (each layer, then an image for OCI and docker
 * archives). rec is borrowed. A negative return stops the import with that error. */
typedef int (*dsec_import_cb)(json_t *rec, void *arg, struct dsec_err *err);

/* Defaults for opts (limits, kind NULL, EROFS). */
void dsec_import_opts_init(struct dsec_import_opts *o);

/* Import PATH: "-" (standard input), a file (a tar stream in any supported compression, an OCI
 * image layout tar or a docker-save archive) or a directory (a rootfs tree, made into a
 * deterministic tar stream first, or an OCI image layout). Calls cb for each record. Returns 0,
 * or -1 with err set; nothing partial is left in the store. Not safe after fork. */
int dsec_layer_import(const struct dsec_paths *p, const struct dsec_import_opts *o,
		      const char *path, dsec_import_cb cb, void *arg, struct dsec_err *err);

/* Import one layer from a tar stream on fd (not closed). detect: when the stream turns out to be
 * an OCI layout or docker-save archive, import what it holds (cb gets every record). Without
 * detect, the stream is always one layer. The fuzzing entry point. 0 or -1. */
int dsec_layer_import_fd(const struct dsec_paths *p, const struct dsec_import_opts *o, int fd,
			 int detect, dsec_import_cb cb, void *arg, struct dsec_err *err);

/* Write layer `id` ("sha256:<hex>") as a tar.zst on fd: its uncompressed stream hashes to id.
 * 0 or -1. */
int dsec_layer_export(const struct dsec_paths *p, const char *id, int fd, struct dsec_err *err);

/* Remove staging dirs under $DSEC_ROOT/tmp whose importer is gone (their lock is free).
 * Returns the number removed or -1. */
int dsec_layer_clean_staging(const struct dsec_paths *p, struct dsec_err *err);

/* ---- the pure parts, exposed for the unit tests ---- */

/* Normalise an archive member name into a path relative to the layer root: leading '/' are
 * dropped (*was_abs set), "." and empty components removed. Rejects ".." components (EINVAL),
 * invalid UTF-8 (EILSEQ), names of PATH_MAX or more and components over NAME_MAX
 * (ENAMETOOLONG). out gets "" for the root itself. 0 or -1. */
int dsec_layer_clean_path(const char *in, char *out, size_t outsz, int *was_abs,
			  struct dsec_err *err);

/* Is s valid UTF-8 (no overlong forms, no surrogates)? 1 or 0. */
int dsec_utf8_ok(const char *s);

enum dsec_whiteout {
	DSEC_WH_NONE,   /* an ordinary entry */
	DSEC_WH_FILE,   /* ".wh.NAME": target is dir/NAME, to become a char device 0:0 */
	DSEC_WH_OPAQUE, /* ".wh..wh..opq": target is the directory to mark opaque */
	DSEC_WH_IGNORE, /* other ".wh..wh.*" (aufs bookkeeping): dropped */
};

/* Classify a clean path (from dsec_layer_clean_path) as an OCI whiteout and give the path it
 * applies to in target. Returns the kind, or -1 (EINVAL) for a whiteout naming "", "." or "..". */
int dsec_layer_whiteout(const char *clean, char *target, size_t targetsz, struct dsec_err *err);

/* Should xattr `name` from an archive be kept? Never overlay xattrs (trusted.overlay.*,
 * user.overlay.*: they could redirect an overlay), nor other trusted.*; security.capability only
 * with allow_setuid; user.*, security.* and system.posix_acl_* otherwise. 1 or 0. */
int dsec_layer_xattr_keep(const char *name, int allow_setuid);

/* The permission bits to apply for an entry: 07777 of mode, without setuid/setgid on
 * non-directories unless allow_setuid. */
mode_t dsec_layer_mode(mode_t mode, int allow_setuid);

#endif
