/* The layer store: names, resolution of images to layer paths, compose, list, rm, gc. */
#include "store.h"

#include <dirent.h>
#include <signal.h>
#include <sys/file.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layer.h"

#define META_MAX (1UL << 20)

static int name_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == ':' || c == '@' || c == '-';
}

static int alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int dsec_image_name_ok(const char *name)
{
	size_t n;

	if (!name || !alnum(name[0]))
		return 0;
	for (n = 0; name[n]; n++)
		if (!name_char_ok(name[n]) || n >= DSEC_NAME_MAX)
			return 0;
	return 1;
}

int dsec_image_name_sanitize(const char *in, char *out, size_t outsz)
{
	size_t o = 0;

	if (!outsz)
		return -1;
	for (; *in && o + 1 < outsz && o < DSEC_NAME_MAX; in++) {
		char c = name_char_ok(*in) ? *in : '-';

		if (!o && !alnum(c))
			continue;
		out[o++] = c;
	}
	out[o] = '\0';
	return o ? 0 : -1;
}

int dsec_layer_id_ok(const char *id)
{
	if (!id || strncmp(id, "sha256:", 7))
		return 0;
	for (int i = 0; i < 64; i++) {
		char c = id[7 + i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return id[71] == '\0';
}

int dsec_store_path(const struct dsec_paths *p, char *buf, const char *fmt, ...)
{
	char rel[PATH_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(rel) ||
	    snprintf(buf, PATH_MAX, "%s/%s", p->root, rel) >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

static json_t *load_json(const char *path, struct dsec_err *err)
{
	char *buf = NULL;
	json_error_t je;
	json_t *j;

	if (dsec_read_file(AT_FDCWD, path, META_MAX, &buf, err) < 0)
		return NULL;
	j = json_loads(buf, 0, &je);
	free(buf);
	if (!json_is_object(j)) {
		json_decref(j);
		dsec_err_set(err, EINVAL, "'%s': not a JSON object", path);
		return NULL;
	}
	return j;
}

json_t *dsec_store_layer_meta(const struct dsec_paths *p, const char *id, struct dsec_err *err)
{
	char path[PATH_MAX];

	if (!dsec_layer_id_ok(id)) {
		dsec_err_set(err, EINVAL, "'%s': not a layer id", id);
		return NULL;
	}
	if (dsec_store_path(p, path, "layers/%s/meta.json", id + 7) < 0) {
		dsec_err_sys(err, "'%s'", id);
		return NULL;
	}
	return load_json(path, err);
}

json_t *dsec_store_image_json(const struct dsec_paths *p, const char *name, struct dsec_err *err)
{
	char path[PATH_MAX];

	if (!dsec_image_name_ok(name)) {
		dsec_err_set(err, EINVAL, "'%s': not a valid image name", name);
		return NULL;
	}
	if (dsec_store_path(p, path, "images/%s.json", name) < 0) {
		dsec_err_sys(err, "'%s'", name);
		return NULL;
	}
	if (access(path, F_OK) < 0 && errno == ENOENT) {
		dsec_err_set(err, ENOENT,
			     "no such image in the store %s (dsec-layer ls lists them)", p->root);
		return NULL;
	}
	return load_json(path, err);
}

int dsec_image_resolve(const struct dsec_paths *p, const char *name, struct dsec_image *out,
		       struct dsec_err *err)
{
	json_t *img, *layers, *v;
	size_t i;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	img = dsec_store_image_json(p, name, err);
	if (!img)
		return dsec_err_wrap(err, "image '%s'", name);
	layers = json_object_get(img, "layers");
	if (!json_is_array(layers) || json_array_size(layers) == 0 ||
	    json_array_size(layers) > DSEC_MAX_LAYERS) {
		dsec_err_set(err, EINVAL, "image '%s': bad or empty layer list", name);
		goto out;
	}
	snprintf(out->name, sizeof(out->name), "%s", name);
	json_array_foreach(layers, i, v)
	{
		struct dsec_layer_ref *l = &out->layer[i];
		const char *id = json_string_value(v);
		const char *fmt;
		json_t *meta;

		if (!dsec_layer_id_ok(id)) {
			dsec_err_set(err, EINVAL, "image '%s': layer %zu: not a layer id", name, i);
			goto out;
		}
		meta = dsec_store_layer_meta(p, id, err);
		if (!meta) {
			dsec_err_wrap(err, "image '%s': layer %s", name, id);
			err->errnum = ENOENT;
			goto out;
		}
		fmt = json_string_value(json_object_get(meta, "format"));
		l->format = fmt && !strcmp(fmt, "dir") ? DSEC_LAYER_DIR : DSEC_LAYER_EROFS;
		json_decref(meta);
		snprintf(l->id, sizeof(l->id), "%s", id);
		if (dsec_store_path(p, l->path, "layers/%s/%s", id + 7,
				    l->format == DSEC_LAYER_DIR ? "tree" : "layer.erofs") < 0) {
			dsec_err_sys(err, "image '%s': layer %s", name, id);
			goto out;
		}
		if (access(l->path, F_OK) < 0) {
			dsec_err_sys(err, "image '%s': layer '%s'", name, l->path);
			goto out;
		}
		out->n = (unsigned)i + 1;
	}
	rc = 0;
out:
	json_decref(img);
	return rc;
}

/* Sorted names in dir (without "." entries); n gets the count. NULL with n 0 when dir is
 * missing. Caller frees every name and the array. */
static char **list_dir(const char *dir, size_t *n)
{
	struct dirent **ents = NULL;
	char **names;
	int k = scandir(dir, &ents, NULL, alphasort), j = 0;

	*n = 0;
	if (k <= 0)
		return NULL;
	names = calloc((size_t)k, sizeof(*names));
	for (int i = 0; i < k; i++) {
		if (names && ents[i]->d_name[0] != '.')
			names[j++] = strdup(ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
	*n = (size_t)j;
	return names;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int hex_prefix(const char *s)
{
	size_t n = strlen(s);

	if (n < 4 || n > 64)
		return 0;
	return strspn(s, "0123456789abcdef") == n;
}

int dsec_store_find_layer(const struct dsec_paths *p, const char *ref, char id[80],
			  struct dsec_err *err)
{
	char dir[PATH_MAX];
	const char *hex = !strncmp(ref, "sha256:", 7) ? ref + 7 : ref;
	char **names;
	size_t n, found = 0;

	if (dsec_store_path(p, dir, "layers") < 0)
		return dsec_err_sys(err, "'%s'", ref);
	names = list_dir(dir, &n);
	if (hex_prefix(hex)) {
		for (size_t i = 0; i < n; i++)
			if (!strncmp(names[i], hex, strlen(hex)) && strlen(names[i]) == 64) {
				if (!found++)
					snprintf(id, 80, "sha256:%s", names[i]);
			}
	}
	if (!found && hex == ref) {
		for (size_t i = 0; i < n; i++) {
			char lid[80];
			json_t *meta;
			const char *nm;

			snprintf(lid, sizeof(lid), "sha256:%.64s", names[i]);
			meta = dsec_store_layer_meta(p, lid, NULL);
			nm = json_string_value(json_object_get(meta, "name"));
			if (nm && !strcmp(nm, ref) && !found++)
				snprintf(id, 80, "%s", lid);
			json_decref(meta);
		}
	}
	free_names(names, n);
	if (!found)
		return dsec_err_set(err, ENOENT, "'%s': no such layer", ref);
	if (found > 1)
		return dsec_err_set(err, EEXIST, "'%s': ambiguous, %zu layers match", ref, found);
	return 0;
}

int dsec_store_find_ref(const struct dsec_paths *p, const char *ref, char id[80],
			struct dsec_err *err)
{
	if (dsec_store_find_layer(p, ref, id, err) == 0)
		return 0;
	if (err->errnum == ENOENT && dsec_image_name_ok(ref))
		dsec_err_set(err, ENOENT, "'%s': no such image or layer (dsec-layer ls lists them)",
			     ref);
	return -1;
}

#define CONFIG_ENV_MAX 4096           /* entries */
#define CONFIG_ENV_BYTES (256u << 10) /* all of them */

/* A "K=V" string with a name: no NUL inside, K not empty. */
static int env_entry_ok(json_t *v)
{
	const char *s = json_string_value(v), *eq;

	if (!s || strlen(s) != json_string_length(v) || !(eq = strchr(s, '=')) || eq == s)
		return 0;
	return 1;
}

int dsec_user_spec_ok(const char *s)
{
	const char *c;

	if (!s || !*s || strlen(s) > DSEC_USER_MAX)
		return 0;
	for (c = s; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return 0;
	c = strchr(s, ':');
	return !c || (c > s && c[1] && !strchr(c + 1, ':'));
}

const char *dsec_user_json(json_t *v, char *buf, size_t n)
{
	if (json_is_integer(v) && json_integer_value(v) >= 0 &&
	    json_integer_value(v) < 0xffffffffLL) {
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
		return buf;
	}
	return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v) &&
		       dsec_user_spec_ok(json_string_value(v))
		   ? json_string_value(v)
		   : NULL;
}

int dsec_workdir_ok(const char *d)
{
	return d && *d == '/' && strlen(d) <= DSEC_WORKDIR_MAX;
}

/* A JSON string without a NUL inside. */
static const char *cstr(json_t *v)
{
	const char *s = json_string_value(v);

	return s && strlen(s) == json_string_length(v) ? s : NULL;
}

json_t *dsec_image_config_clean(json_t *in, int oci, const char *what)
{
	json_t *out = json_object(), *env, *wd, *user, *v, *keep = json_array();
	size_t i, bytes = 0, dropped = 0;

	if (!json_is_object(in)) {
		json_decref(keep);
		json_decref(out);
		return NULL;
	}
	env = json_object_get(in, oci ? "Env" : "env");
	wd = json_object_get(in, oci ? "WorkingDir" : "workdir");
	user = json_object_get(in, oci ? "User" : "user");
	json_array_foreach(env, i, v)
	{
		if (!env_entry_ok(v) || json_array_size(keep) == CONFIG_ENV_MAX ||
		    bytes + json_string_length(v) > CONFIG_ENV_BYTES) {
			dropped++;
			continue;
		}
		bytes += json_string_length(v);
		json_array_append(keep, v);
	}
	if (env && !json_is_array(env) && !json_is_null(env))
		dsec_warnx("%s: environment left out (not an array)", what);
	else if (dropped)
		dsec_warnx("%s: %zu environment entries left out (not NAME=VALUE, or over %u "
			   "entries or %u KiB)",
			   what, dropped, CONFIG_ENV_MAX, CONFIG_ENV_BYTES >> 10);
	if (json_array_size(keep))
		json_object_set(out, "env", keep);
	json_decref(keep);
	if (json_is_string(wd) && json_string_length(wd)) { /* "" is docker's "none" */
		const char *d = json_string_value(wd);

		if (dsec_workdir_ok(cstr(wd)))
			json_object_set(out, "workdir", wd);
		else
			dsec_warnx(
			    "%s: working dir '%.64s' left out (not an absolute path of at most "
			    "%d bytes)",
			    what, d, DSEC_WORKDIR_MAX);
	} else if (wd && !json_is_null(wd) && !json_is_string(wd))
		dsec_warnx("%s: working dir left out (not a string)", what);
	if (json_is_string(user) && json_string_length(user)) {
		if (dsec_user_spec_ok(cstr(user)))
			json_object_set(out, "user", user);
		else
			dsec_warnx("%s: user '%.64s' left out (not USER[:GROUP])", what,
				   json_string_value(user));
	} else if (user && !json_is_null(user) && !json_is_string(user))
		dsec_warnx("%s: user left out (not a string)", what);
	if (!json_object_size(out)) {
		json_decref(out);
		return NULL;
	}
	return out;
}

json_t *dsec_image_config(const struct dsec_paths *p, const char *name)
{
	json_t *img = dsec_store_image_json(p, name, NULL), *c;

	c = json_object_get(img, "config");
	c = json_is_object(c) ? json_incref(c) : NULL;
	json_decref(img);
	return c;
}

int dsec_store_compose(const struct dsec_paths *p, const char *name, const char *const *refs,
		       unsigned n, json_t *config, json_t **rec, struct dsec_err *err)
{
	char dir[PATH_MAX], file[DSEC_NAME_MAX + 8];
	json_t *img, *arr;
	char *text;
	int rc;

	if (!dsec_image_name_ok(name))
		return dsec_err_set(err, EINVAL, "'%s': not a valid image name", name);
	if (n == 0 || n > DSEC_MAX_LAYERS)
		return dsec_err_set(err, EINVAL, "image '%s': needs 1 to %d layers", name,
				    DSEC_MAX_LAYERS);
	arr = json_array();
	for (unsigned i = 0; i < n; i++) {
		char id[80];
		json_t *meta;

		if (dsec_store_find_layer(p, refs[i], id, err) < 0) {
			json_decref(arr);
			return dsec_err_wrap(err, "image '%s'", name);
		}
		meta = dsec_store_layer_meta(p, id, err);
		if (!meta) {
			json_decref(arr);
			return dsec_err_wrap(err, "image '%s'", name);
		}
		json_decref(meta);
		json_array_append_new(arr, json_string(id));
	}
	img = json_pack("{s:s, s:o}", "image", name, "layers", arr);
	if (config && json_object_size(config))
		json_object_set(img, "config", config);
	text = json_dumps(img, JSON_COMPACT);
	if (dsec_store_path(p, dir, "images") < 0 || dsec_mkdir_p(dir, 0755, err) < 0) {
		free(text);
		json_decref(img);
		return dsec_err_set(err, errno, "image '%s': cannot make '%s'", name, dir);
	}
	snprintf(file, sizeof(file), "%s.json", name);
	{
		int dfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);

		rc = dfd < 0 ? dsec_err_sys(err, "open '%s'", dir)
			     : dsec_write_atomic(dfd, file, text, strlen(text), 0644, 1, err);
		if (dfd >= 0)
			close(dfd);
	}
	free(text);
	if (rc < 0) {
		json_decref(img);
		return dsec_err_wrap(err, "image '%s'", name);
	}
	*rec = img;
	return 0;
}

/* Does the JSON file at path hold a "layers" array containing id? */
static int file_lists_layer(const char *path, const char *id)
{
	json_t *j = load_json(path, NULL), *v;
	size_t i;
	int hit = 0;

	json_array_foreach(json_object_get(j, "layers"), i, v)
	{
		const char *s = json_string_value(v);

		if (s && !strcmp(s, id))
			hit = 1;
	}
	json_decref(j);
	return hit;
}

int dsec_store_layer_in_use(const struct dsec_paths *p, const char *id, char *why, size_t whysz,
			    struct dsec_err *err)
{
	char dir[PATH_MAX], f[PATH_MAX];
	char **names;
	size_t n;
	int hit = 0;

	if (dsec_store_path(p, dir, "images") < 0)
		return dsec_err_sys(err, "'%s'", id);
	names = list_dir(dir, &n);
	for (size_t i = 0; i < n && !hit; i++) {
		size_t l = strlen(names[i]);

		if (l < 6 || strcmp(names[i] + l - 5, ".json"))
			continue;
		snprintf(f, sizeof(f), "%s/%s", dir, names[i]);
		if (file_lists_layer(f, id)) {
			snprintf(why, whysz, "used by image '%.*s'", (int)(l - 5), names[i]);
			hit = 1;
		}
	}
	free_names(names, n);
	snprintf(dir, sizeof(dir), "%s/sandboxes", p->run);
	names = list_dir(dir, &n);
	for (size_t i = 0; i < n && !hit; i++) {
		snprintf(f, sizeof(f), "%s/%s/sandbox.json", dir, names[i]);
		if (file_lists_layer(f, id)) {
			snprintf(why, whysz, "used by sandbox '%s'", names[i]);
			hit = 1;
		}
	}
	free_names(names, n);
	snprintf(f, sizeof(f), "%s/template/layers/%s", p->run, id + 7);
	if (!hit && access(f, F_OK) == 0) {
		snprintf(why, whysz, "mounted in the template namespace");
		hit = 1;
	}
	return hit;
}

int dsec_store_list(const struct dsec_paths *p, int (*cb)(json_t *rec, void *arg), void *arg,
		    struct dsec_err *err)
{
	char dir[PATH_MAX];
	char **names;
	size_t n;
	int rc = 0;

	if (dsec_store_path(p, dir, "layers") < 0)
		return dsec_err_sys(err, "layers");
	names = list_dir(dir, &n);
	for (size_t i = 0; i < n && rc == 0; i++) {
		char id[80];
		json_t *meta;
		struct dsec_err e2;

		snprintf(id, sizeof(id), "sha256:%.64s", names[i]);
		if (!dsec_layer_id_ok(id))
			continue;
		meta = dsec_store_layer_meta(p, id, &e2);
		if (!meta)
			continue; /* being removed */
		json_object_set_new(meta, "node", json_string(dsec_node()));
		rc = cb(meta, arg);
		json_decref(meta);
	}
	free_names(names, n);
	if (dsec_store_path(p, dir, "images") < 0)
		return dsec_err_sys(err, "images");
	names = list_dir(dir, &n);
	for (size_t i = 0; i < n && rc == 0; i++) {
		char nm[DSEC_NAME_MAX + 1];
		size_t l = strlen(names[i]);
		json_t *img;

		if (l < 6 || l - 5 > DSEC_NAME_MAX || strcmp(names[i] + l - 5, ".json"))
			continue;
		snprintf(nm, sizeof(nm), "%.*s", (int)(l - 5), names[i]);
		img = dsec_store_image_json(p, nm, NULL);
		if (!img)
			continue;
		json_object_set_new(img, "node", json_string(dsec_node()));
		rc = cb(img, arg);
		json_decref(img);
	}
	free_names(names, n);
	if (rc < 0)
		return dsec_err_set(err, errno, "write records");
	return 0;
}

/* Staging dirs tmp/import-<pid>-<rand>/ are guarded by tmp/import-<pid>-<rand>.lock, which the
 * importer holds locked for its whole life (see layer-import.c): a free lock means a dead
 * importer. */
int dsec_layer_clean_staging(const struct dsec_paths *p, struct dsec_err *err)
{
	char dir[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int n = 0, dfd;

	if (dsec_store_path(p, dir, "tmp") < 0)
		return dsec_err_sys(err, "tmp");
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : dsec_err_sys(err, "open '%s'", dir);
	dfd = dirfd(d);
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char stem[NAME_MAX + 1];
		int fd;

		if (strncmp(de->d_name, "import-", 7) || l < 6 ||
		    strcmp(de->d_name + l - 5, ".lock"))
			continue;
		fd = openat(dfd, de->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			snprintf(stem, sizeof(stem), "%.*s", (int)(l - 5), de->d_name);
			if (dsec_rmtree_at(dfd, stem, err) == 0) {
				unlinkat(dfd, de->d_name, 0);
				n++;
			}
		}
		close(fd);
	}
	/* dirs whose lock is gone: a janitor died between removing the two, or rm leftovers */
	rewinddir(d);
	while ((de = readdir(d))) {
		char lock[NAME_MAX + 8];

		if (strncmp(de->d_name, "import-", 7) && strncmp(de->d_name, "rm-", 3))
			continue;
		if (strstr(de->d_name, ".lock"))
			continue;
		if (!strncmp(de->d_name, "rm-", 3)) {
			/* rm-<pid>-…: removal interrupted when pid is gone */
			int pid = atoi(de->d_name + 3);

			if (pid > 0 && kill(pid, 0) == 0)
				continue;
		} else {
			snprintf(lock, sizeof(lock), "%s.lock", de->d_name);
			if (faccessat(dfd, lock, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
				continue;
		}
		if (dsec_rmtree_at(dfd, de->d_name, err) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* Take layers/<hex> out of the store with one rename (readers see it or not), then delete. */
static int remove_layer(const struct dsec_paths *p, const char *id, struct dsec_err *err)
{
	char from[PATH_MAX], to[PATH_MAX], tmp[PATH_MAX];

	if (dsec_store_path(p, from, "layers/%s", id + 7) < 0 ||
	    dsec_store_path(p, tmp, "tmp") < 0 ||
	    dsec_store_path(p, to, "tmp/rm-%d-%.12s", (int)getpid(), id + 7) < 0)
		return dsec_err_sys(err, "layer %s", id);
	if (dsec_mkdir_p(tmp, 0700, err) < 0)
		return -1;
	if (rename(from, to) < 0)
		return dsec_err_sys(err, "layer %s: rename out of the store", id);
	return dsec_rmtree(to, err);
}

int dsec_store_rm(const struct dsec_paths *p, const char *ref, int force, json_t **rec,
		  struct dsec_err *err)
{
	char id[80], why[256], path[PATH_MAX];
	int lockfd, rc;

	if (dsec_image_name_ok(ref) && dsec_store_path(p, path, "images/%s.json", ref) == 0 &&
	    access(path, F_OK) == 0) {
		if (unlink(path) < 0)
			return dsec_err_sys(err, "image '%s': unlink", ref);
		*rec = json_pack("{s:s, s:b}", "image", ref, "removed", 1);
		return 0;
	}
	if (dsec_store_find_ref(p, ref, id, err) < 0)
		return -1;
	if (dsec_store_path(p, path, "store.lock") < 0)
		return dsec_err_sys(err, "store.lock");
	lockfd = dsec_lock(path, 1, 1, err);
	if (lockfd < 0)
		return -1;
	rc = dsec_store_layer_in_use(p, id, why, sizeof(why), err);
	if (rc > 0 && !force)
		rc = dsec_err_set(err, EBUSY, "layer %s: %s (use --force)", id, why);
	else if (rc >= 0)
		rc = remove_layer(p, id, err);
	close(lockfd);
	if (rc < 0)
		return -1;
	*rec = json_pack("{s:s, s:b}", "layer", id, "removed", 1);
	return 0;
}

int dsec_store_gc(const struct dsec_paths *p, int (*cb)(json_t *rec, void *arg), void *arg,
		  struct dsec_err *err)
{
	char dir[PATH_MAX], why[256];
	char **names;
	size_t n;
	int lockfd, count = 0, rc = 0;

	if (dsec_store_path(p, dir, "store.lock") < 0)
		return dsec_err_sys(err, "store.lock");
	if (access(p->root, F_OK) < 0)
		return 0;
	lockfd = dsec_lock(dir, 1, 1, err);
	if (lockfd < 0)
		return -1;
	if (dsec_layer_clean_staging(p, err) < 0) {
		close(lockfd);
		return -1;
	}
	dsec_store_path(p, dir, "layers");
	names = list_dir(dir, &n);
	for (size_t i = 0; i < n && rc == 0; i++) {
		char id[80];
		json_t *r;

		snprintf(id, sizeof(id), "sha256:%.64s", names[i]);
		if (!dsec_layer_id_ok(id))
			continue;
		rc = dsec_store_layer_in_use(p, id, why, sizeof(why), err);
		if (rc != 0) {
			rc = rc > 0 ? 0 : -1;
			continue;
		}
		rc = remove_layer(p, id, err);
		if (rc < 0)
			break;
		count++;
		r = json_pack("{s:s, s:b}", "layer", id, "removed", 1);
		if (cb && cb(r, arg) < 0)
			rc = dsec_err_set(err, errno, "write records");
		json_decref(r);
	}
	free_names(names, n);
	close(lockfd);
	return rc < 0 ? -1 : count;
}
