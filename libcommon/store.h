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

/* ---- store management (dsec-layer); additions to the contract above ---- */

#include <jansson.h>

/* Is id "sha256:" followed by 64 lowercase hex digits? 1 or 0. */
int dsec_layer_id_ok(const char *id);

/* Make an image name from an archive tag: characters outside the image-name charset become '-',
 * a leading non-alphanumeric is dropped, cut at DSEC_NAME_MAX. Returns 0, or -1 when nothing
 * usable is left. */
int dsec_image_name_sanitize(const char *in, char *out, size_t outsz);

/* Find a layer by full id, unique hex prefix (with or without "sha256:", 4 digits at least) or
 * unique layer name. id gets "sha256:<hex>". 0, or -1 (ENOENT unknown, EEXIST ambiguous). */
int dsec_store_find_layer(const struct dsec_paths *p, const char *ref, char id[80],
			  struct dsec_err *err);
/* The same, for a ref that may also have named an image (rm, inspect, after the image was
 * looked for): an unknown one says "no such image or layer". */
int dsec_store_find_ref(const struct dsec_paths *p, const char *ref, char id[80],
			struct dsec_err *err);

/* The layer's meta.json as a new object. NULL with err set when missing or unreadable. */
json_t *dsec_store_layer_meta(const struct dsec_paths *p, const char *id, struct dsec_err *err);

/* The image's json as a new object, NULL with err set (ENOENT unknown). */
json_t *dsec_store_image_json(const struct dsec_paths *p, const char *name, struct dsec_err *err);

/* An image's run config, what commands in its sandboxes get by default:
 * {"env":["K=V",...],"workdir":"/abs/dir","user":"USER[:GROUP]"}, each member optional. */
#define DSEC_WORKDIR_MAX 255
#define DSEC_USER_MAX 63

/* Is s a user for commands, "USER[:GROUP]": at most DSEC_USER_MAX bytes, no spaces or control
 * characters, one ':' at most with something on both sides? Is d an absolute path of at most
 * DSEC_WORKDIR_MAX bytes? 1 or 0. */
int dsec_user_spec_ok(const char *s);
int dsec_workdir_ok(const char *d);

/* A record's "run_as": a USER[:GROUP] string (dsec_user_spec_ok) or a uid as a number, which is
 * written into buf. The user as a string, or NULL when v is neither. */
const char *dsec_user_json(json_t *v, char *buf, size_t n);

/* What is valid of a config: in is an OCI image config's "config" object (Env, WorkingDir,
 * User) when oci, else ours. A new object, or NULL when nothing is left. Each member dropped
 * (a bad type, an env entry without a name, a relative or too long dir, a user with spaces) is
 * warned about once, after what. */
json_t *dsec_image_config_clean(json_t *in, int oci, const char *what);

/* Image name's config (new reference), or NULL: none, or the image cannot be read. */
json_t *dsec_image_config(const struct dsec_paths *p, const char *name);

/* Compose image `name` from layers refs[0..n) (bottom to top, resolved as by
 * dsec_store_find_layer), with run config (borrowed, may be NULL; dsec_image_config_clean'd)
 * and write images/<name>.json atomically. *rec gets the image record (new reference). 0 or
 * -1. */
int dsec_store_compose(const struct dsec_paths *p, const char *name, const char *const *refs,
		       unsigned n, json_t *config, json_t **rec, struct dsec_err *err);

/* Why layer id may not be removed: used by an image, a live sandbox or the template mount
 * namespace. Returns 1 with why filled, 0 when unused, -1 on error. */
int dsec_store_layer_in_use(const struct dsec_paths *p, const char *id, char *why, size_t whysz,
			    struct dsec_err *err);

/* Call cb for every layer (meta.json, plus "node") then every image, sorted. 0 or -1. */
int dsec_store_list(const struct dsec_paths *p, int (*cb)(json_t *rec, void *arg), void *arg,
		    struct dsec_err *err);

/* Remove an image (by name) or a layer (by reference). A layer in use is refused (EBUSY)
 * unless force. *rec gets {"image":…,"removed":true} or {"layer":…,"removed":true}. 0 or -1. */
int dsec_store_rm(const struct dsec_paths *p, const char *ref, int force, json_t **rec,
		  struct dsec_err *err);

/* Remove every layer that no image, sandbox or template uses, under store.lock held
 * exclusively. cb gets {"layer":…,"removed":true} per layer. Returns the count or -1. */
int dsec_store_gc(const struct dsec_paths *p, int (*cb)(json_t *rec, void *arg), void *arg,
		  struct dsec_err *err);

/* Path helpers: "<root>/layers/<hex>" etc. into buf (PATH_MAX). 0 or -1 (ENAMETOOLONG). */
int dsec_store_path(const struct dsec_paths *p, char *buf, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
