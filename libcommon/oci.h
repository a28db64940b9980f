/* Inputs other than one plain layer tar: OCI image layouts and docker-save archives (each
 * imported as its layers plus an image), and directories (made into a deterministic tar). */
#ifndef DSEC_OCI_H
#define DSEC_OCI_H

#include "layer.h"
#include "userns.h"

enum { DSEC_OCI_NONE = 0, DSEC_OCI_LAYOUT = 1, DSEC_OCI_DOCKER = 2 };

/* What the directory dirfd holds: an OCI image layout (oci-layout and index.json), a
 * docker-save archive (manifest.json listing Layers) or neither. Never follows symlinks. */
int dsec_oci_detect_dir(int dirfd);

/* Import the image in dirfd (kind from dsec_oci_detect_dir): every layer in order (a record
 * each), then the image, named o->name or after the archive's tag (a record). 0 or -1. */
int dsec_oci_import(const struct dsec_paths *p, const struct dsec_import_opts *o, int dirfd,
		    int kind, dsec_import_cb cb, void *arg, struct dsec_err *err);

/* Write the tree at dirfd to fd as a tar stream (pax, zstd-compressed when zstd): entries
 * sorted by name, no user or group names, no atimes, hard links kept, nothing below another
 * mount, a file's 4 KiB blocks of zeros left out as holes of a sparse entry, so the same tree
 * gives the same stream and zeros cost it nothing. 0 or -1. */
int dsec_tar_dir_write(int dirfd, int fd, int zstd, struct dsec_err *err);

/* Import a directory as one layer through dsec_tar_dir_write (in a child process). 0 or -1. */
int dsec_tar_dir_import(const struct dsec_paths *p, const struct dsec_import_opts *o, int dirfd,
			dsec_import_cb cb, void *arg, struct dsec_err *err);

/* How dsec_tar_upper_write reads an overlay's upper dir. */
struct dsec_tar_upper {
	struct dsec_idmap map; /* the sandbox's ids (userns.h); count 0: no shift */
	const char *hostname;  /* its line in etc/hosts (ns.h) is dsec's: left out */
	const char *resolv;    /* --net host: an etc/resolv.conf of this text is left out
				* (as is the one dsec writes for --net nat, ns.h) */
};

/* Write an overlay upper dir as a layer tar: what dsec wrote into its /etc is left out (see
 * struct dsec_tar_upper), whiteouts (char 0:0) become ".wh.NAME" entries,
 * opaque dirs (trusted.overlay.opaque "y") get ".wh..wh..opq", owners in the id range are
 * shifted down to the sandbox's own view (others become 65534), sockets, fifos and devices are
 * left out, and so are the top-level dev, proc and sys dirs dsec made as mount points; holes
 * as in dsec_tar_dir_write. Never follows a symlink. 0 or -1. */
int dsec_tar_upper_write(int dirfd, int fd, const struct dsec_tar_upper *u, struct dsec_err *err);

/* Import an upper dir as one layer through dsec_tar_upper_write (in a child process). */
int dsec_tar_upper_import(const struct dsec_paths *p, const struct dsec_import_opts *o, int dirfd,
			  const struct dsec_tar_upper *u, dsec_import_cb cb, void *arg,
			  struct dsec_err *err);

#endif
