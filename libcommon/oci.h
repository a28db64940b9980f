/* Inputs other than one plain layer tar: OCI image layouts and docker-save archives (each
 * imported as its layers plus an image), and directories (made into a deterministic tar). */
#ifndef DSEC_OCI_H
#define DSEC_OCI_H

#include "layer.h"

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
 * mount, so the same tree gives the same stream. 0 or -1. */
int dsec_tar_dir_write(int dirfd, int fd, int zstd, struct dsec_err *err);

/* Import a directory as one layer through dsec_tar_dir_write (in a child process). 0 or -1. */
int dsec_tar_dir_import(const struct dsec_paths *p, const struct dsec_import_opts *o, int dirfd,
			dsec_import_cb cb, void *arg, struct dsec_err *err);

#endif
