/* Internal to the layer modules (layer.c, layer-import.c, oci.c, erofs.c): the extractor and
 * what the writers share to keep holes holes and the store's disk from filling. */
#ifndef DSEC_LAYER_INT_H
#define DSEC_LAYER_INT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "err.h"

struct archive;
struct archive_entry;

struct dsec_dirtime {
	char *path;
	struct timespec ts[2];
};

/* Extraction state: entries are created below tree_fd, never through a symlink. */
struct dsec_extract {
	struct archive *ar; /* the tar reader the entries come from */
	int tree_fd;        /* the staging tree (O_RDONLY directory) */
	int allow_setuid;
	uint64_t max_bytes, content_bytes;
	uint64_t skipped, stripped;
	/* entries with what --allow-setuid is about (a setuid or setgid file, a
	 * security.capability xattr), kept or not: such a stream kept gets an id of its own */
	uint64_t setuid;
	uint64_t implied; /* directories made for a path's parents, no entry of their own */
	uint64_t xattrs;  /* xattrs set: none lets mkfs.erofs skip looking for them */
	uint64_t room;    /* bytes that may be written before the free space is looked at again */
	int warned_abs, warned_dev;
	int cache_fd; /* last parent directory, O_PATH */
	char cache_dir[PATH_MAX];
	struct dsec_dirtime *dt; /* directory times, set once all entries are in */
	size_t ndt, capdt;
	size_t dtbytes; /* of their paths: past DT_BYTES_MAX they are set then and there */
};

/* Before n more bytes are written to fd: look at the free space of fd's file system now and
 * then (*budget: what may be written before the next look; 0 to start). An import stops
 * (ENOSPC) while 5% of it, at most 1 GiB, is still free, so a bomb within --max-bytes cannot
 * fill the disk the store shares with the host. 0 or -1. */
int dsec_layer_room(int fd, uint64_t *budget, uint64_t n, const char *what, struct dsec_err *err);

/* Are the n bytes at buf all zero (n > 0)? Such stretches are written as holes. */
int dsec_layer_zero(const void *buf, size_t n);

/* The next stretch of data in fd at or after *off, below size (SEEK_DATA/SEEK_HOLE): *off
 * moves to its start and *len gets its length; what lies between stretches is a hole and reads
 * as zeros. A file system without SEEK_DATA gives the rest of the file as one stretch. 1, or
 * 0 when only holes are left. Moves fd's file offset. */
int dsec_layer_data_next(int fd, loff_t *off, uint64_t *len, uint64_t size);

/* Extract one entry (header just read from x->ar; its data is read here). 0 or -1. */
int dsec_extract_entry(struct dsec_extract *x, struct archive_entry *e, struct dsec_err *err);

/* Set the deferred directory times. 0 or -1. */
int dsec_extract_finish(struct dsec_extract *x, struct dsec_err *err);

void dsec_extract_free(struct dsec_extract *x);

#endif
