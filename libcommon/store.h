/* The layer store under $DSEC_ROOT (persistent, content-addressed). The contract between
 * dsec-layer (which writes it) and the sandbox runtime (which reads it):
 *
 *   $DSEC_ROOT/layers/<hex>/meta.json   {"layer":"sha256:<hex>","kind":…,"name":…,"bytes":…,
 *                                        "files":…,"format":"erofs"|"dir","created":…}
 *   $DSEC_ROOT/layers/<hex>/layer.erofs the runtime form (format "erofs"), mounted read-only
 *   $DSEC_ROOT/layers/<hex>/tree/       the fallback form (format "dir"), never written after
 *                                        publication
 *   $DSEC_ROOT/images/<name>.json       {"image":name,"layers":["sha256:…",…]} bottom to top
 *   $DSEC_ROOT/tmp/                     staging; a layer is published by rename(2) into layers/
 *   $DSEC_ROOT/store.lock               flock: shared while reading/publishing, exclusive for gc
 *
 * <hex> is the sha256 of the layer's uncompressed tar stream (the OCI diff id). Layer content
 * keeps real owners (root is uid 0): the runtime maps them with idmapped mounts. Overlay
 * whiteouts are char devices 0:0; opaque directories carry both trusted.overlay.opaque and
 * user.overlay.opaque = "y" (the latter for overlays mounted in a user namespace, userxattr). */
#ifndef DSEC_STORE_H
#define DSEC_STORE_H

#include <limits.h>

#include "err.h"
#include "state.h"

#define DSEC_MAX_LAYERS 64
#define DSEC_NAME_MAX 128

enum dsec_layer_format { DSEC_LAYER_EROFS, DSEC_LAYER_DIR };

struct dsec_layer_ref {
	char id[80];         /* "sha256:<64 hex>" */
	char path[PATH_MAX]; /* absolute path of layer.erofs or tree/ */
	enum dsec_layer_format format;
};

struct dsec_image {
	char name[DSEC_NAME_MAX + 1];
	unsigned n;                                   /* number of layers */
	struct dsec_layer_ref layer[DSEC_MAX_LAYERS]; /* bottom to top */
};

/* Is name a valid image name: [A-Za-z0-9][A-Za-z0-9._:@-]*, at most DSEC_NAME_MAX. */
int dsec_image_name_ok(const char *name);

/* Load image `name` from the store and resolve every layer to its runtime path. Returns 0, or
 * -1 with ENOENT for an unknown image or a missing layer. Not safe after fork (allocates). */
int dsec_image_resolve(const struct dsec_paths *p, const char *name, struct dsec_image *out,
		       struct dsec_err *err);

#endif
