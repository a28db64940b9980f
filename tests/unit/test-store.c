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
	ok(dsec_store_compose(&paths, "img", refs, 2, NULL, &rec, &err) == 0, "compose");
	ok(!json_object_get(rec, "config") && !dsec_image_config(&paths, "img"), "no config");
	json_decref(rec);
	{
		json_t *oci = json_loads("{\"Env\":[\"PATH=/go/bin:/bin\",\"=x\",\"NOEQ\",7,"
					 "\"A=\"],\"WorkingDir\":\"/go/src\",\"User\":\"1000:50\","
					 "\"Cmd\":[\"sh\"]}",
					 0, NULL),
		       *c = dsec_image_config_clean(oci, 1, "t"), *c2;

		ok(c && json_array_size(json_object_get(c, "env")) == 2 &&
		       !strcmp(json_string_value(json_array_get(json_object_get(c, "env"), 1)),
			       "A=") &&
		       !strcmp(json_string_value(json_object_get(c, "workdir")), "/go/src") &&
		       !strcmp(json_string_value(json_object_get(c, "user")), "1000:50") &&
		       json_object_size(c) == 3,
		   "OCI config: valid env entries, workdir and user kept, nothing else");
		ok(dsec_store_compose(&paths, "img2", refs, 2, c, &rec, &err) == 0 &&
		       json_equal(json_object_get(rec, "config"), c),
		   "compose with a config");
		json_decref(rec);
		c2 = dsec_image_config(&paths, "img2");
		ok(json_equal(c2, c), "the config is read back");
		json_decref(c2);
		json_decref(c);
		json_decref(oci);
		oci = json_loads("{\"Env\":\"PATH=/x\",\"WorkingDir\":\"rel\",\"User\":\"a b\"}", 0,
				 NULL);
		ok(!dsec_image_config_clean(oci, 1, "t"), "bad types, a relative dir, a user "
							  "with a space: nothing kept");
		json_decref(oci);
		oci = json_loads("{\"WorkingDir\":\"\",\"User\":\"\",\"Env\":null}", 0, NULL);
		ok(!dsec_image_config_clean(oci, 1, "t"), "docker's empty values are none");
		json_decref(oci);
		ok(dsec_user_spec_ok("root") && dsec_user_spec_ok("1000:1000") &&
		       !dsec_user_spec_ok(":x") && !dsec_user_spec_ok("x:") &&
		       !dsec_user_spec_ok("a:b:c") && !dsec_user_spec_ok("") &&
		       !dsec_user_spec_ok("a\tb"),
		   "user specs");
		ok(dsec_workdir_ok("/") && !dsec_workdir_ok("x") && !dsec_workdir_ok(""),
		   "workdirs");
	}
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
