/* TEMPORARY stand-in for store.c (dsec-layer's branch) so the sandbox runtime links and its
 * tests run before the layer store is merged. Reads the layout documented in store.h only.
 * Delete this file when store.c lands. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

int dsec_image_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > DSEC_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		int alnum =
		    (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || !strchr("._:@-", c)))
			return 0;
	}
	return 1;
}

int dsec_image_resolve(const struct dsec_paths *p, const char *name, struct dsec_image *out,
		       struct dsec_err *err)
{
	char path[PATH_MAX], *buf;
	json_t *o, *layers, *v;
	size_t i;

	if (!dsec_image_name_ok(name))
		return dsec_err_set(err, EINVAL, "'%.64s': bad image name", name);
	snprintf(path, sizeof(path), "%s/images/%s.json", p->root, name);
	if (dsec_read_file(AT_FDCWD, path, 1 << 20, &buf, err) < 0)
		return dsec_err_set(err, ENOENT, "image '%s': not found", name);
	o = json_loads(buf, 0, NULL);
	free(buf);
	layers = json_object_get(o, "layers");
	if (!json_is_array(layers) || json_array_size(layers) == 0 ||
	    json_array_size(layers) > DSEC_MAX_LAYERS) {
		json_decref(o);
		return dsec_err_set(err, EINVAL, "image '%s': bad layer list", name);
	}
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", name);
	json_array_foreach(layers, i, v)
	{
		const char *id = json_string_value(v), *hex;
		struct dsec_layer_ref *l = &out->layer[out->n];

		if (!id || strncmp(id, "sha256:", 7) || strlen(id) != 71 || strchr(id, '/')) {
			json_decref(o);
			return dsec_err_set(err, EINVAL, "image '%s': bad layer id", name);
		}
		hex = id + 7;
		snprintf(l->id, sizeof(l->id), "%s", id);
		snprintf(path, sizeof(path), "%s/layers/%s/layer.erofs", p->root, hex);
		if (access(path, R_OK) == 0) {
			l->format = DSEC_LAYER_EROFS;
		} else {
			snprintf(path, sizeof(path), "%s/layers/%s/tree", p->root, hex);
			if (access(path, R_OK) < 0) {
				json_decref(o);
				return dsec_err_set(err, ENOENT, "image '%s': layer %s missing",
						    name, id);
			}
			l->format = DSEC_LAYER_DIR;
		}
		snprintf(l->path, sizeof(l->path), "%s", path);
		out->n++;
	}
	json_decref(o);
	return 0;
}
