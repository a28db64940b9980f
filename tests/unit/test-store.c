/* Unit tests for the store: names, ids, resolution of an image to its layers' paths. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "tap.h"

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
}

#define HEX_A "aaaa000000000000000000000000000000000000000000000000000000000001"
#define HEX_B "bbbb000000000000000000000000000000000000000000000000000000000002"

int main(void)
{
	char dir[] = "/tmp/test-store.XXXXXX", p[PATH_MAX], out[DSEC_NAME_MAX + 1], id[80];
	struct dsec_paths paths;
	struct dsec_image img;
	struct dsec_err err;
	json_t *rec;
	const char *refs[2];

	ok(dsec_image_name_ok("py"), "simple name");
	ok(dsec_image_name_ok("demo:1.0@x_y-z"), "name with . _ : @ -");
	ok(!dsec_image_name_ok(""), "empty name refused");
	ok(!dsec_image_name_ok("-x"), "leading dash refused");
	ok(!dsec_image_name_ok("a/b"), "slash refused");
	ok(!dsec_image_name_ok("../x"), "dot-dot refused");
	{
		char longname[DSEC_NAME_MAX + 2];

		memset(longname, 'a', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = '\0';
		ok(!dsec_image_name_ok(longname), "name over DSEC_NAME_MAX refused");
		longname[DSEC_NAME_MAX] = '\0';
		ok(dsec_image_name_ok(longname), "name of DSEC_NAME_MAX accepted");
	}

	ok(dsec_image_name_sanitize("docker.io/library/busybox:latest", out, sizeof(out)) == 0 &&
	       !strcmp(out, "docker.io-library-busybox:latest"),
	   "tag sanitised: %s", out);
	ok(dsec_image_name_sanitize("/x", out, sizeof(out)) == 0 && !strcmp(out, "x"),
	   "leading non-alphanumerics dropped");
	ok(dsec_image_name_sanitize("///", out, sizeof(out)) < 0, "nothing usable left");

	ok(dsec_layer_id_ok("sha256:" HEX_A), "layer id ok");
	ok(!dsec_layer_id_ok("sha256:" HEX_A "0"), "too long id refused");
	ok(!dsec_layer_id_ok(
	       "sha256:AAAA000000000000000000000000000000000000000000000000000000000001"),
	   "uppercase id refused");
	ok(!dsec_layer_id_ok("sha512:" HEX_A), "other algorithm refused");

	if (!mkdtemp(dir))
		return 1;
	snprintf(paths.root, sizeof(paths.root), "%s/root", dir);
	snprintf(paths.run, sizeof(paths.run), "%s/run", dir);
	snprintf(p, sizeof(p), "%s/layers/" HEX_A, paths.root);
	dsec_mkdir_p(p, 0755, &err);
	snprintf(p, sizeof(p), "%s/layers/" HEX_A "/meta.json", paths.root);
	put(p, "{\"layer\":\"sha256:" HEX_A "\",\"name\":\"base\",\"format\":\"erofs\"}");
	snprintf(p, sizeof(p), "%s/layers/" HEX_A "/layer.erofs", paths.root);
	put(p, "");
	snprintf(p, sizeof(p), "%s/layers/" HEX_B "/tree", paths.root);
	dsec_mkdir_p(p, 0755, &err);
	snprintf(p, sizeof(p), "%s/layers/" HEX_B "/meta.json", paths.root);
	put(p, "{\"layer\":\"sha256:" HEX_B "\",\"name\":null,\"format\":\"dir\"}");

	ok(dsec_store_find_layer(&paths, "base", id, &err) == 0 && !strcmp(id, "sha256:" HEX_A),
	   "layer found by name");
	ok(dsec_store_find_layer(&paths, "bbbb", id, &err) == 0 && !strcmp(id, "sha256:" HEX_B),
	   "layer found by hex prefix");
	ok(dsec_store_find_layer(&paths, "sha256:bbbb0", id, &err) == 0, "prefix with sha256:");
	ok(dsec_store_find_layer(&paths, "cccc", id, &err) < 0 && err.errnum == ENOENT,
	   "unknown layer");
	refs[0] = "base";
	refs[1] = "bbbb";
	ok(dsec_store_compose(&paths, "img", refs, 2, &rec, &err) == 0, "compose");
	json_decref(rec);
	ok(dsec_image_resolve(&paths, "img", &img, &err) == 0 && img.n == 2, "resolve: %s",
	   err.msg);
	ok(img.layer[0].format == DSEC_LAYER_EROFS && strstr(img.layer[0].path, "/layer.erofs") &&
	       !strcmp(img.layer[0].id, "sha256:" HEX_A),
	   "bottom layer is the EROFS image");
	ok(img.layer[1].format == DSEC_LAYER_DIR && strstr(img.layer[1].path, HEX_B "/tree"),
	   "top layer is the unpacked tree");
	ok(dsec_image_resolve(&paths, "nope", &img, &err) < 0 && err.errnum == ENOENT,
	   "unknown image is ENOENT");
	snprintf(p, sizeof(p), "%s/layers/" HEX_A "/meta.json", paths.root);
	unlink(p);
	ok(dsec_image_resolve(&paths, "img", &img, &err) < 0 && err.errnum == ENOENT,
	   "missing layer is ENOENT");
	ok(dsec_image_resolve(&paths, "../x", &img, &err) < 0, "bad name refused");
	dsec_rmtree(dir, &err);
	return tap_done();
}
