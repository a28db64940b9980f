/* OCI image layouts, docker-save archives and directories as layer sources. See oci.h. */
#include "oci.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <search.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "layer-int.h"
#include "ns.h"

#define JSON_MAX (16UL << 20)
#define MAX_DEPTH 4
#define TW_BUF (1U << 20)
/* A file's blocks of this size (at multiples of it) that hold only zeros, holes or written
 * zeros alike, are holes in its tar entry; see tw_sparse_map */
#define ZBLK 4096U

/* Open a regular file below dirfd without following any symlink or leaving the tree. Looked at
 * through an O_PATH descriptor first, so a fifo or device there is refused without being
 * opened (no wait on a fifo, no driver's open). */
static int open_beneath(int dirfd, const char *path, struct dsec_err *err)
{
	struct open_how how = {
	    .flags = O_PATH | O_CLOEXEC,
	    .resolve =
		RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	char self[64];
	struct stat st;
	int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how)), rfd;

	if (fd < 0)
		return dsec_err_sys(err, "'%s'", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return dsec_err_set(err, EINVAL, "'%s': not a regular file", path);
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	rfd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	close(fd);
	if (rfd < 0)
		return dsec_err_sys(err, "'%s'", path);
	return rfd;
}

static json_t *read_json_blob(int dirfd, const char *path, const char *digest,
			      struct dsec_err *err);

static json_t *read_json(int dirfd, const char *path, struct dsec_err *err)
{
	return read_json_blob(dirfd, path, NULL, err);
}

/* Does buf hash to digest ("sha256:<hex>")? */
static int digest_ok(const char *buf, size_t len, const char *digest)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	char hex[65];

	if (!EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL))
		return 0;
	for (unsigned i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
	return !strcmp(hex, digest + 7);
}

/* A JSON file of the archive; with digest, its bytes must hash to it (an OCI blob, a docker
 * config named by its hash). */
static json_t *read_json_blob(int dirfd, const char *path, const char *digest, struct dsec_err *err)
{
	size_t len = 0;
	int fd = open_beneath(dirfd, path, err);
	char *buf = NULL;
	json_error_t je;
	json_t *j;

	if (fd < 0)
		return NULL;
	{
		size_t cap = 65536;
		ssize_t n;

		buf = malloc(cap + 1);
		while (buf && (n = read(fd, buf + len, cap - len)) > 0) {
			len += (size_t)n;
			if (len == cap) {
				char *nb = cap >= JSON_MAX ? NULL : realloc(buf, cap * 2 + 1);

				if (!nb) {
					free(buf);
					buf = NULL;
					break;
				}
				buf = nb;
				cap *= 2;
			}
		}
		if (buf)
			buf[len] = '\0';
	}
	close(fd);
	if (!buf) {
		dsec_err_set(err, EFBIG, "'%s': unreadable or too big", path);
		return NULL;
	}
	if (digest && !digest_ok(buf, len, digest)) {
		free(buf);
		dsec_err_set(err, EINVAL, "'%s': its content does not match its digest", path);
		return NULL;
	}
	j = json_loadb(buf, len, 0, &je);
	free(buf);
	if (!j)
		dsec_err_set(err, EINVAL, "'%s': line %d: %s", path, je.line, je.text);
	return j;
}

static int is_reg(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

int dsec_oci_detect_dir(int dirfd)
{
	json_t *m;
	int kind = DSEC_OCI_NONE;

	if (is_reg(dirfd, "oci-layout") && is_reg(dirfd, "index.json"))
		return DSEC_OCI_LAYOUT;
	if (!is_reg(dirfd, "manifest.json"))
		return DSEC_OCI_NONE;
	m = read_json(dirfd, "manifest.json", NULL);
	if (json_is_array(m) && json_is_array(json_object_get(json_array_get(m, 0), "Layers")))
		kind = DSEC_OCI_DOCKER;
	json_decref(m);
	return kind;
}

/* "sha256:<hex>" → "blobs/sha256/<hex>" */
static int blob_path(const char *digest, char *out, size_t outsz, struct dsec_err *err)
{
	if (!digest || !dsec_layer_id_ok(digest))
		return dsec_err_set(err, EINVAL, "unsupported or bad digest '%s'",
				    digest ? digest : "(none)");
	snprintf(out, outsz, "blobs/sha256/%s", digest + 7);
	return 0;
}

/* A docker-save member named by its content's hash ("blobs/sha256/<hex>", as docker 25 and
 * later write, or "<hex>.json" for a config): its digest into dg (80 bytes). 1, or 0 when its
 * name says nothing (an older archive's "<v1 id>/layer.tar"). */
static int docker_digest(const char *path, char *dg)
{
	const char *hex = NULL;
	size_t n = strlen(path);

	if (!strncmp(path, "blobs/sha256/", 13) && n == 13 + 64)
		hex = path + 13;
	else if (n == 64 + 5 && !strcmp(path + 64, ".json"))
		hex = path;
	if (!hex)
		return 0;
	snprintf(dg, 80, "sha256:%.64s", hex);
	return dsec_layer_id_ok(dg);
}

static int is_index(json_t *desc)
{
	const char *mt = json_string_value(json_object_get(desc, "mediaType"));

	return mt && (strstr(mt, "image.index") || strstr(mt, "manifest.list"));
}

/* Pick the manifest from an index: linux/amd64 when platforms are given, else the first. */
static json_t *pick(json_t *manifests)
{
	json_t *d;
	size_t i;

	json_array_foreach(manifests, i, d)
	{
		json_t *pf = json_object_get(d, "platform");
		const char *os = json_string_value(json_object_get(pf, "os"));
		const char *arch = json_string_value(json_object_get(pf, "architecture"));

		if (!pf || (os && !strcmp(os, "linux") && arch && !strcmp(arch, "amd64")))
			return d;
	}
	return json_array_get(manifests, 0);
}

/* The layers of an image being imported. Their records go out only once the image is made:
 * an import that fails at its third layer, or at the config's check, prints no layer of it and
 * takes back from the store the layers it added. */
struct collect {
	const char *ids[DSEC_MAX_LAYERS];
	char store[DSEC_MAX_LAYERS][80];
	char diff[DSEC_MAX_LAYERS][80]; /* their streams' sha256, what a config's diff ids say */
	json_t *recs[DSEC_MAX_LAYERS];
	int published[DSEC_MAX_LAYERS]; /* this import added the layer */
	unsigned n;
};

static int collect_cb(json_t *rec, void *arg, struct dsec_err *err)
{
	struct collect *c = arg;
	const char *id = json_string_value(json_object_get(rec, "layer"));
	const char *diff = json_string_value(json_object_get(rec, "diff_id"));

	if (!id || c->n >= DSEC_MAX_LAYERS)
		return dsec_err_set(err, EINVAL, "layer %u: no record", c->n);
	snprintf(c->store[c->n], sizeof(c->store[0]), "%s", id);
	/* a layer stored before records had a diff id: its id is one */
	snprintf(c->diff[c->n], sizeof(c->diff[0]), "%s", diff ? diff : id);
	c->ids[c->n] = c->store[c->n];
	c->recs[c->n] = json_incref(rec);
	c->n++;
	return 0;
}

/* After a failure: remove the layers this import added that no image has taken since. */
static void collect_undo(const struct dsec_paths *p, struct collect *c)
{
	for (unsigned i = 0; i < c->n; i++) {
		json_t *rec = NULL;

		if (c->published[i] && dsec_store_rm(p, c->ids[i], 0, &rec, NULL) == 0)
			dsec_infox("%s: removed, its image was not imported", c->ids[i]);
		json_decref(rec);
	}
}

static void collect_free(struct collect *c)
{
	for (unsigned i = 0; i < c->n; i++)
		json_decref(c->recs[i]);
}

/* What names layer i of a manifest: its path in a docker archive, its digest in OCI. */
static const char *layer_key(json_t *layers, size_t i, int kind)
{
	json_t *v = json_array_get(layers, i);

	return kind == DSEC_OCI_DOCKER ? json_string_value(v)
				       : json_string_value(json_object_get(v, "digest"));
}

/* The first index before i whose layer is layer i's blob, or i. */
static size_t layer_seen(json_t *layers, size_t i, int kind)
{
	const char *key = layer_key(layers, i, kind), *k;

	for (size_t j = 0; key && j < i; j++)
		if ((k = layer_key(layers, j, kind)) && !strcmp(k, key))
			return j;
	return i;
}

static const char *kind_at(const struct dsec_import_opts *o, size_t i, size_t n)
{
	if (o->kind)
		return o->kind;
	if (i == 0)
		return "base";
	return i + 1 == n ? "application" : "intermediate";
}

int dsec_oci_import(const struct dsec_paths *p, const struct dsec_import_opts *o, int dirfd,
		    int kind, dsec_import_cb cb, void *arg, struct dsec_err *err)
{
	struct collect c = {.n = 0};
	json_t *top = NULL, *man = NULL, *layers, *v, *rec = NULL;
	char path[PATH_MAX], name[DSEC_NAME_MAX + 1] = "";
	const char *tag = NULL, *cfg_path = NULL, *cfg_digest = NULL;
	char cfgbuf[PATH_MAX], cfgdg[80];
	json_t *cfg = NULL, *diff_ids, *runcfg = NULL;
	size_t i, n;
	int rc = -1;

	if (kind == DSEC_OCI_DOCKER) {
		top = read_json(dirfd, "manifest.json", err);
		if (!top)
			goto out;
		man = json_incref(json_array_get(top, 0));
		if (json_array_size(top) > 1)
			dsec_warnx("manifest.json lists %zu images, importing the first",
				   json_array_size(top));
		tag = json_string_value(json_array_get(json_object_get(man, "RepoTags"), 0));
		layers = json_object_get(man, "Layers");
		cfg_path = json_string_value(json_object_get(man, "Config"));
		if (cfg_path && docker_digest(cfg_path, cfgdg))
			cfg_digest = cfgdg;
	} else {
		json_t *desc;
		int depth = 0;

		top = read_json(dirfd, "index.json", err);
		if (!top)
			goto out;
		desc = pick(json_object_get(top, "manifests"));
		tag = json_string_value(json_object_get(json_object_get(desc, "annotations"),
							"org.opencontainers.image.ref.name"));
		/* a multi-platform image (skopeo copy --all, buildx type=oci) lists an index that
		 * lists the manifests: follow indexes, a few deep. desc and its digest live in the
		 * index read before (top, then man): copied out before that one is released */
		for (;;) {
			const char *d = json_string_value(json_object_get(desc, "digest"));
			char dg[80];
			int nested = is_index(desc);

			if (!desc) {
				dsec_err_set(err, EINVAL, "OCI layout: index lists no manifest");
				goto out;
			}
			if (blob_path(d, path, sizeof(path), err) < 0)
				goto out;
			snprintf(dg, sizeof(dg), "%s", d);
			json_decref(man);
			man = NULL;
			if (!name[0] && !tag)
				snprintf(name, sizeof(name), "oci-%.12s", dg + 7);
			man = read_json_blob(dirfd, path, dg, err);
			if (!man)
				goto out;
			if (!nested && !json_object_get(man, "manifests"))
				break;
			if (++depth > MAX_DEPTH) {
				dsec_err_set(err, ELOOP, "OCI layout: indexes nested too deep");
				goto out;
			}
			desc = pick(json_object_get(man, "manifests"));
		}
		layers = json_object_get(man, "layers");
		cfg_digest =
		    json_string_value(json_object_get(json_object_get(man, "config"), "digest"));
		if (blob_path(cfg_digest, cfgbuf, sizeof(cfgbuf), err) < 0) {
			dsec_err_wrap(err, "OCI manifest: config");
			goto out;
		}
		cfg_path = cfgbuf;
	}
	if (!json_is_array(layers) || !(n = json_array_size(layers)) || n > DSEC_MAX_LAYERS) {
		dsec_err_set(err, EINVAL, "%s: no layers or more than %d",
			     kind == DSEC_OCI_DOCKER ? "manifest.json" : "OCI manifest",
			     DSEC_MAX_LAYERS);
		goto out;
	}
	/* the config is a blob as the layers are: there, and hashing to its digest where its name
	 * gives one (an old docker archive's is named by its v1 id), before any layer is taken */
	if (!cfg_path) {
		dsec_err_set(err, EINVAL, "manifest.json: no Config");
		goto out;
	}
	cfg = read_json_blob(dirfd, cfg_path, cfg_digest, err);
	if (!cfg) {
		dsec_err_wrap(err, "image config");
		goto out;
	}
	if (o->name)
		snprintf(name, sizeof(name), "%s", o->name);
	else if (tag && dsec_image_name_sanitize(tag, name, sizeof(name)) < 0)
		snprintf(name, sizeof(name), "image");
	/* the config's diff ids are the sha256 of our layers' streams: a mismatch means the
	 * archive was altered. Their count before any layer is taken, and each layer against its
	 * own as soon as it is in: an archive that lists more layers, or one layer many times,
	 * than its config fails before it costs their extraction */
	diff_ids = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
	if (json_is_array(diff_ids) && json_array_size(diff_ids) != json_array_size(layers)) {
		dsec_err_set(err, EINVAL, "config lists %zu diff ids for %zu layers",
			     json_array_size(diff_ids), json_array_size(layers));
		goto out;
	}
	json_array_foreach(layers, i, v)
	{
		struct dsec_import_opts lo = *o;
		const char *lp = kind == DSEC_OCI_DOCKER
				     ? json_string_value(v)
				     : json_string_value(json_object_get(v, "digest"));
		char dg[80];
		int fd;

		if (kind != DSEC_OCI_DOCKER) {
			if (blob_path(lp, path, sizeof(path), err) < 0)
				goto out;
			lo.blob_digest = lp;
			lp = path;
		} else if (lp && docker_digest(lp, dg)) {
			lo.blob_digest = dg;
		}
		if (!lp) {
			dsec_err_set(err, EINVAL, "layer %zu: no path", i);
			goto out;
		}
		/* a blob the manifest listed before is that layer again: not unpacked twice */
		size_t j = layer_seen(layers, i, kind);

		if (j < i) {
			memcpy(c.store[c.n], c.store[j], sizeof(c.store[0])); /* j < c.n: apart */
			memcpy(c.diff[c.n], c.diff[j], sizeof(c.diff[0]));
			c.ids[c.n] = c.store[c.n];
			c.recs[c.n] = json_incref(c.recs[j]);
			c.published[c.n] = 0;
			c.n++;
			goto check_diff;
		}
		fd = open_beneath(dirfd, lp, err);
		if (fd < 0)
			goto out;
		lo.kind = kind_at(o, i, n);
		lo.name = NULL;
		lo.published = &c.published[c.n];
		rc = dsec_layer_import_fd(p, &lo, fd, 0, collect_cb, &c, err);
		close(fd);
		if (rc < 0) {
			dsec_err_wrap(err, "layer %zu '%s'", i, lp);
			goto out;
		}
	check_diff:
		rc = -1;
		if (json_is_array(diff_ids)) {
			const char *want = json_string_value(json_array_get(diff_ids, i));

			if (!want || strcmp(want, c.diff[i])) {
				dsec_err_set(err, EINVAL, "layer %zu is %s, the config says %s", i,
					     c.diff[i], want ? want : "(none)");
				goto out;
			}
		}
	}
	if (!json_is_array(diff_ids))
		dsec_warnx("no config with diff ids: layer contents not verified");
	/* what the image's commands get by default: its environment, working dir and user */
	runcfg = dsec_image_config_clean(json_object_get(cfg, "config"), 1, name);
	/* an archive's own tag replaces an image of that name, as docker load does: say so */
	if (!o->name) {
		json_t *old = dsec_store_image_json(p, name, NULL);
		json_t *was = json_object_get(old, "layers");
		int same = json_array_size(was) == c.n;

		for (i = 0; same && i < c.n; i++)
			same = !strcmp(json_string_value(json_array_get(was, i)) ?: "", c.ids[i]);
		if (old && !same)
			dsec_warnx("image '%s' replaced: it named other layers (--name keeps both)",
				   name);
		json_decref(old);
	}
	if (dsec_store_compose(p, name, c.ids, c.n, runcfg, &rec, err) < 0)
		goto out;
	json_object_set_new(rec, "node", json_string(dsec_node()));
	rc = 0;
	for (i = 0; i < c.n && rc == 0; i++)
		rc = cb ? cb(c.recs[i], arg, err) : 0;
	if (rc == 0)
		rc = cb ? cb(rec, arg, err) : 0;
out:
	if (rc < 0 && !rec)
		collect_undo(p, &c);
	collect_free(&c);
	json_decref(runcfg);
	json_decref(cfg);
	json_decref(rec);
	json_decref(man);
	json_decref(top);
	return rc;
}

/* ---- a directory as a deterministic tar stream ---- */

struct hlink {
	dev_t dev;
	ino_t ino;
	char *path;
};

struct tw {
	struct archive *a;
	struct archive_entry *e;
	void *links;
	char *buf;
	dev_t dev;    /* of the tree's root */
	uint64_t mnt; /* the root's mount id, when statx gives one (have_mnt) */
	int have_mnt;
	const struct dsec_tar_upper *upper; /* reading an overlay upper dir */
	struct dsec_err *err;
};

static unsigned long shift_id(unsigned long id, unsigned long base, unsigned long count)
{
	if (!count)
		return id;
	return id >= base && id - base < count ? id - base : 65534;
}

/* A host uid of the upper dir as the sandbox saw it (unmapped: 65534) */
static unsigned long shift_uid(const struct dsec_idmap *m, unsigned long id)
{
	long in = m->count ? dsec_idmap_inside(m, id) : (long)id;

	return in < 0 ? 65534 : (unsigned long)in;
}

/* An empty regular file entry (a whiteout marker) at rel. */
static int tw_marker(struct tw *w, const char *rel)
{
	archive_entry_clear(w->e);
	archive_entry_copy_pathname(w->e, rel);
	archive_entry_set_filetype(w->e, AE_IFREG);
	archive_entry_set_perm(w->e, 0600);
	archive_entry_set_size(w->e, 0);
	if (archive_write_header(w->a, w->e) < ARCHIVE_WARN)
		return dsec_err_set(w->err, EIO, "'%s': %s", rel, archive_error_string(w->a));
	return 0;
}

/* Upper dir entries that are not plain tree entries: whiteouts become markers; what a layer
 * cannot hold is skipped. 1 handled (or skipped), 0 go on as usual, -1 error. */
static int tw_upper_special(struct tw *w, const char *name, const char *rel, const struct stat *st)
{
	char *path;
	int rc;

	if (!strchr(rel, '/') && S_ISDIR(st->st_mode) &&
	    (!strcmp(name, "dev") || !strcmp(name, "proc") || !strcmp(name, "sys")))
		return 1;
	if (S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0)) {
		path = malloc(PATH_MAX);
		if (!path)
			return dsec_err_set(w->err, ENOMEM, "out of memory");
		snprintf(path, PATH_MAX, "%.*s.wh.%s", (int)(strlen(rel) - strlen(name)), rel,
			 name);
		rc = tw_marker(w, path);
		free(path);
		return rc < 0 ? -1 : 1;
	}
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode))
		return 1;
	return 0;
}

/* What dsec wrote into the sandbox's /etc (ns.c) is not the sandbox's work: its host line is
 * dropped from etc/hosts (*out: the rest, malloc'd), and a --net host sandbox's resolv.conf
 * that still is the node's is left out. 1 leave the entry out, 0 go on, -1 error. */
static int tw_etc(struct tw *w, int dfd, const char *name, const char *rel, const struct stat *st,
		  char **out, size_t *outlen)
{
	const struct dsec_tar_upper *u = w->upper;
	int hosts = u->hostname && !strcmp(rel, "etc/hosts");
	int resolv = !strcmp(rel, "etc/resolv.conf");
	char line[128], *text, *at;
	ssize_t got;
	size_t n, ll;

	if ((!hosts && !resolv) || st->st_size > (1 << 20))
		return 0;
	if ((got = dsec_read_file(dfd, name, 1 << 20, &text, w->err)) < 0)
		return dsec_err_wrap(w->err, "'%s'", rel);
	n = (size_t)got;
	if (resolv) {
		int same = (u->resolv && n == strlen(u->resolv) && !memcmp(text, u->resolv, n)) ||
			   dsec_resolv_is_nat(text, n);

		free(text);
		return same;
	}
	ll = (size_t)snprintf(line, sizeof(line), DSEC_HOSTS_SELF "%s\n", u->hostname);
	for (at = text; (at = memmem(at, n - (size_t)(at - text), line, ll)); at++)
		if (at == text || at[-1] == '\n') {
			memmove(at, at + ll, n - (size_t)(at - text) - ll);
			*out = text;
			*outlen = n - ll;
			return 0;
		}
	free(text);
	return 0;
}

static int hl_cmp(const void *x, const void *y)
{
	const struct hlink *a = x, *b = y;

	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	return a->ino < b->ino ? -1 : a->ino > b->ino;
}

static int str_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* xattr names of fd, sorted, into w->e */
static void tw_xattrs(struct tw *w, int fd)
{
	char names[65536], *list[1024] = {NULL};
	ssize_t len = flistxattr(fd, names, sizeof(names));
	size_t n = 0;

	for (ssize_t o = 0; o < len && n < 1024; o += (ssize_t)strlen(names + o) + 1)
		list[n++] = names + o;
	qsort(list, n, sizeof(*list), str_cmp);
	for (size_t i = 0; i < n; i++) {
		char val[65536];
		ssize_t vl;

		/* an upper dir's overlay bookkeeping (origin, impure, uuid; opaque becomes a
		 * marker) is not part of the tree */
		if (w->upper && (!strncmp(list[i], "trusted.overlay.", 16) ||
				 !strncmp(list[i], "user.overlay.", 13)))
			continue;
		vl = fgetxattr(fd, list[i], val, sizeof(val));

		if (vl >= 0)
			archive_entry_xattr_add_entry(w->e, list[i], val, (size_t)vl);
	}
}

/* Give the entry in w->e (a regular file of size bytes, open as fd) a sparse map when some of
 * its ZBLK blocks are all zeros: the writer then stores only the runs of other blocks (pax with
 * GNU sparse 1.0, which GNU tar, libarchive and Go's archive/tar read), so a sparse file of
 * 8 GiB, or 8 GiB of written zeros, is a few blocks of the stream and of the layer's source
 * copy, not 8 GiB of zeros. The map depends on the content alone, not on how the file was
 * written, so the same tree still gives the same stream. Only the stretches SEEK_DATA finds
 * are read. Files under ZBLK, and those without such a block, stay plain entries. 0 or -1. */
static int tw_sparse_map(struct tw *w, int fd, uint64_t size, const char *rel)
{
	uint64_t run = 0, end = 0, next = 0, len, data = 0;
	loff_t off = 0;
	int have = 0;

	if (size < ZBLK)
		return 0;
	while (dsec_layer_data_next(fd, &off, &len, size) > 0) {
		uint64_t at = (uint64_t)off & ~(uint64_t)(ZBLK - 1), stop = (uint64_t)off + len;

		stop = stop > size - ZBLK ? size : (stop + ZBLK - 1) & ~(uint64_t)(ZBLK - 1);
		if (at < next)
			at = next;
		while (at < stop) {
			size_t want = stop - at < TW_BUF ? (size_t)(stop - at) : TW_BUF;
			ssize_t n = pread(fd, w->buf, want, (off_t)at);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return dsec_err_sys(w->err, "'%s': read", rel);
			if (n == 0) /* shrank: the writer pads what is missing with zeros */
				break;
			for (size_t b = 0; b < (size_t)n; b += ZBLK) {
				size_t bl = (size_t)n - b < ZBLK ? (size_t)n - b : ZBLK;

				if (dsec_layer_zero(w->buf + b, bl))
					continue;
				if (have && end == at + b) {
					end += bl;
					continue;
				}
				if (have)
					archive_entry_sparse_add_entry(w->e, (la_int64_t)run,
								       (la_int64_t)(end - run));
				data += end - run;
				run = at + b;
				end = run + bl;
				have = 1;
			}
			at += (uint64_t)n;
		}
		next = at > stop ? at : stop;
		off = (loff_t)next;
	}
	data += end - run;
	if (data == size) /* no block of zeros: a plain entry */
		return 0;
	/* the last run, or for a file of zeros an empty one at its end (the map needs one) */
	archive_entry_sparse_add_entry(w->e, (la_int64_t)(have ? run : size),
				       (la_int64_t)(have ? end - run : 0));
	return 0;
}

/* The data of the entry just written from fd (size bytes), as its map says: the runs read from
 * fd, a hole between them passed as that many bytes, which the pax writer counts and skips
 * (it wants them all, not an offset). 0 or -1. */
static int tw_data(struct tw *w, int fd, uint64_t size, const char *rel)
{
	la_int64_t off = 0, len = (la_int64_t)size;
	uint64_t pos = 0;
	int sparse = archive_entry_sparse_reset(w->e) > 0;

	while (!sparse || archive_entry_sparse_next(w->e, &off, &len) == ARCHIVE_OK) {
		for (size_t n; pos < (uint64_t)off; pos += n) {
			n = (uint64_t)off - pos < TW_BUF ? (size_t)((uint64_t)off - pos) : TW_BUF;
			if (archive_write_data(w->a, w->buf, n) < 0)
				return dsec_err_set(w->err, EIO, "'%s': %s", rel,
						    archive_error_string(w->a));
		}
		while (len > 0) {
			size_t want = (uint64_t)len < TW_BUF ? (size_t)len : TW_BUF;
			ssize_t n = pread(fd, w->buf, want, (off_t)pos);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return dsec_err_sys(w->err, "'%s': read", rel);
			if (n == 0) /* shrank: the writer pads what is missing with zeros */
				return 0;
			if (archive_write_data(w->a, w->buf, (size_t)n) < 0)
				return dsec_err_set(w->err, EIO, "'%s': %s", rel,
						    archive_error_string(w->a));
			pos += (uint64_t)n;
			len -= n;
		}
		if (!sparse)
			break;
	}
	return 0;
}

static int tw_dir(struct tw *w, int dfd, const char *rel, int depth);

/* The mount id of fd's file (statx, Linux 5.8). 0, or -1 when the kernel has none to give. */
static int mount_id(int fd, uint64_t *id)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &sx) < 0 ||
	    !(sx.stx_mask & STATX_MNT_ID))
		return -1;
	*id = sx.stx_mnt_id;
	return 0;
}

/* Is fd (st its stat) the root of another mount than the tree's? A bind mount of the tree's
 * own file system has its st_dev: only the mount id tells it apart (st_dev where there is no
 * mount id). */
static int tw_other_mount(const struct tw *w, int fd, const struct stat *st)
{
	uint64_t id;

	if (w->have_mnt && mount_id(fd, &id) == 0)
		return id != w->mnt;
	return st->st_dev != w->dev;
}

static int tw_entry(struct tw *w, int dfd, const char *name, const char *rel)
{
	struct archive_entry *e = w->e;
	struct stat st;
	char *subst = NULL; /* what to store instead of the file's content (tw_etc) */
	size_t subst_len = 0;
	int fd = -1, rc = -1, data = 0, other_mount = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return dsec_err_sys(w->err, "'%s': stat", rel);
	if (w->upper && (rc = tw_upper_special(w, name, rel, &st)) != 0)
		return rc < 0 ? -1 : 0;
	/* a socket is an endpoint of a live program, not content: tar cannot hold one, and a
	 * rootfs needs none (an import skips device nodes and fifos as well) */
	if (S_ISSOCK(st.st_mode)) {
		dsec_warnx("'%s': socket skipped", rel);
		return 0;
	}
	if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		mode_t was = st.st_mode & S_IFMT;

		/* the name may be another file by now: O_NONBLOCK keeps a fifo swapped in from
		 * hanging the open (O_NOCTTY a terminal from becoming ours), and what gets read is
		 * what is open, by its own stat, which must still be of the type seen (reads of
		 * files and directories do not heed O_NONBLOCK) */
		fd = openat(dfd, name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
				(S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
		if (fd < 0)
			return dsec_err_sys(w->err, "'%s': open", rel);
		if (fstat(fd, &st) < 0) {
			rc = dsec_err_sys(w->err, "'%s': stat", rel);
			goto out;
		}
		if ((st.st_mode & S_IFMT) != was) {
			rc = dsec_err_set(w->err, EAGAIN,
					  "'%s': changed while the tree was read: no longer a %s",
					  rel, was == S_IFDIR ? "directory" : "regular file");
			goto out;
		}
		/* nothing below another mount: a directory another file system or a bind mount
		 * is mounted on stays empty, a file mounted over is left out */
		other_mount = tw_other_mount(w, fd, &st);
		if (other_mount && S_ISREG(st.st_mode)) {
			dsec_warnx("'%s': a mount point, left out", rel);
			rc = 0;
			goto out;
		}
	}
	rc = -1;
	archive_entry_clear(e);
	archive_entry_copy_pathname(e, rel);
	archive_entry_set_mode(e, st.st_mode);
	archive_entry_set_uid(e, w->upper ? shift_uid(&w->upper->map, st.st_uid) : st.st_uid);
	archive_entry_set_gid(
	    e, w->upper ? shift_id(st.st_gid, w->upper->map.gid, w->upper->map.count) : st.st_gid);
	archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	if (S_ISLNK(st.st_mode)) {
		char *target = malloc(PATH_MAX); /* off the stack: this recurses per level */
		ssize_t n = target ? readlinkat(dfd, name, target, PATH_MAX - 1) : -1;

		if (n < 0) {
			free(target);
			return dsec_err_sys(w->err, "'%s': readlink", rel);
		}
		target[n] = '\0';
		archive_entry_copy_symlink(e, target);
		free(target);
	} else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
		archive_entry_set_rdev(e, st.st_rdev);
	} else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		tw_xattrs(w, fd);
		if (S_ISREG(st.st_mode)) {
			int r = w->upper ? tw_etc(w, dfd, name, rel, &st, &subst, &subst_len) : 0;

			if (r != 0) {
				rc = r < 0 ? -1 : 0;
				goto out;
			}
			archive_entry_set_size(e, subst ? (la_int64_t)subst_len : st.st_size);
			data = 1;
		}
	}
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		struct hlink key = {st.st_dev, st.st_ino, NULL}, **found, *h;

		found = tfind(&key, &w->links, hl_cmp);
		if (found) {
			archive_entry_copy_hardlink(e, (*found)->path);
			archive_entry_set_size(e, 0);
			data = 0;
		} else if ((h = malloc(sizeof(*h)))) {
			*h = key;
			h->path = strdup(rel);
			tsearch(h, &w->links, hl_cmp);
		}
	}
	if (data && !subst && tw_sparse_map(w, fd, (uint64_t)st.st_size, rel) < 0)
		goto out;
	if (archive_write_header(w->a, e) < ARCHIVE_WARN) {
		dsec_err_set(w->err, EIO, "'%s': %s", rel, archive_error_string(w->a));
		goto out;
	}
	if (data && subst) {
		if (archive_write_data(w->a, subst, subst_len) < 0) {
			dsec_err_set(w->err, EIO, "'%s': %s", rel, archive_error_string(w->a));
			goto out;
		}
		data = 0;
	}
	if (data && tw_data(w, fd, (uint64_t)st.st_size, rel) < 0)
		goto out;
	rc = 0;
	if (S_ISDIR(st.st_mode) && w->upper) {
		char opq[2];

		if (fgetxattr(fd, "trusted.overlay.opaque", opq, sizeof(opq)) == 1 &&
		    opq[0] == 'y') {
			char *path = malloc(PATH_MAX);

			if (!path) {
				rc = dsec_err_set(w->err, ENOMEM, "out of memory");
				goto out;
			}
			snprintf(path, PATH_MAX, "%s%s.wh..wh..opq", strcmp(rel, "./") ? rel : "",
				 strcmp(rel, "./") ? "/" : "");
			rc = tw_marker(w, path);
			free(path);
		}
	}
	if (rc == 0 && S_ISDIR(st.st_mode) && !other_mount)
		rc = tw_dir(w, fd, rel, 0);
out:
	free(subst);
	if (fd >= 0)
		close(fd);
	return rc;
}

static int tw_dir(struct tw *w, int dfd, const char *rel, int depth)
{
	int fd = dup(dfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int rc = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return dsec_err_sys(w->err, "'%s': opendir", rel);
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				return dsec_err_set(w->err, ENOMEM, "out of memory");
		}
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), str_cmp);
	char *path = malloc(PATH_MAX); /* off the stack: this recurses per level */

	if (!path)
		rc = dsec_err_set(w->err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		if (rc == 0) {
			if (snprintf(path, PATH_MAX, "%s%s%s", strcmp(rel, "./") ? rel : "",
				     strcmp(rel, "./") ? "/" : "", names[i]) >= PATH_MAX)
				rc = dsec_err_set(w->err, ENAMETOOLONG,
						  "'%.80s...': path over %d bytes", rel, PATH_MAX);
			else
				rc = tw_entry(w, dfd, names[i], path);
		}
		free(names[i]);
	}
	free(path);
	free(names);
	return rc;
}

static int tar_write(int dirfd, int fd, int zstd, const struct dsec_tar_upper *u,
		     struct dsec_err *err)
{
	struct tw w = {.err = err, .upper = u};
	struct stat st;
	int rc = -1;

	if (fstat(dirfd, &st) < 0)
		return dsec_err_sys(err, "stat");
	w.dev = st.st_dev;
	w.have_mnt = mount_id(dirfd, &w.mnt) == 0;
	w.a = archive_write_new();
	w.e = archive_entry_new();
	w.buf = malloc(TW_BUF);
	if (!w.a || !w.e || !w.buf) {
		dsec_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	archive_write_set_format_pax_restricted(w.a);
	if (zstd)
		archive_write_add_filter_zstd(w.a);
	archive_write_set_bytes_in_last_block(w.a, 1);
	if (archive_write_open_fd(w.a, fd) != ARCHIVE_OK) {
		dsec_err_set(err, EIO, "%s", archive_error_string(w.a));
		goto out;
	}
	if (tw_entry(&w, dirfd, ".", "./") < 0)
		goto out; /* no close: a truncated stream fails the reader */
	if (archive_write_close(w.a) != ARCHIVE_OK) {
		dsec_err_set(err, EIO, "%s", archive_error_string(w.a));
		goto out;
	}
	rc = 0;
out:
	if (w.a)
		archive_write_free(w.a);
	archive_entry_free(w.e);
	free(w.buf);
	return rc;
}

int dsec_tar_dir_write(int dirfd, int fd, int zstd, struct dsec_err *err)
{
	return tar_write(dirfd, fd, zstd, NULL, err);
}

int dsec_tar_upper_write(int dirfd, int fd, const struct dsec_tar_upper *u, struct dsec_err *err)
{
	return tar_write(dirfd, fd, 0, u, err);
}

/* The walker feeding an import: its exit says whether the stream was all of the tree, and
 * *why (shared memory it fills before exiting 1) what stopped it. */
struct walker {
	pid_t pid;
	int status;
	struct dsec_err *why;
};

static int walker_wait(struct walker *wk)
{
	while (wk->pid > 0 && waitpid(wk->pid, &wk->status, 0) < 0) {
		if (errno != EINTR) {
			wk->status = -1;
			break;
		}
	}
	wk->pid = 0;
	return WIFEXITED(wk->status) && WEXITSTATUS(wk->status) == 0 ? 0 : -1;
}

/* Wait for the walker; when it failed, err says so, with its reason when it gave one (the
 * import's one error line: the walker prints nothing). 0 or -1. */
static int walker_failed(struct walker *wk, struct dsec_err *err)
{
	if (walker_wait(wk) == 0)
		return 0;
	if (wk->why->msg[0])
		return dsec_err_set(err, wk->why->errnum ? wk->why->errnum : EIO,
				    "reading the directory failed: %s", wk->why->msg);
	return dsec_err_set(err, EIO, "reading the directory failed");
}

static int walker_done(void *ctx, struct dsec_err *err)
{
	return walker_failed(ctx, err);
}

static int tar_import(const struct dsec_paths *p, const struct dsec_import_opts *o, int dirfd,
		      const struct dsec_tar_upper *u, dsec_import_cb cb, void *arg,
		      struct dsec_err *err)
{
	struct dsec_import_opts o2 = *o;
	struct walker wk = {0, 0, NULL};
	struct dsec_err why;
	int pfd[2], rc;

	wk.why =
	    mmap(NULL, sizeof(*wk.why), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (wk.why == MAP_FAILED)
		return dsec_err_sys(err, "mmap");
	memset(wk.why, 0, sizeof(*wk.why));
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		munmap(wk.why, sizeof(*wk.why));
		return dsec_err_sys(err, "pipe");
	}
	wk.pid = fork();
	if (wk.pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		munmap(wk.why, sizeof(*wk.why));
		return dsec_err_sys(err, "fork");
	}
	if (wk.pid == 0) {
		close(pfd[0]);
		signal(SIGPIPE, SIG_DFL);
		_exit(tar_write(dirfd, pfd[1], !u, u, wk.why) < 0 ? 1 : 0);
	}
	close(pfd[1]);
	/* the layer is published only once the walker has said the stream was whole: a tree it
	 * could not read to the end must not become a layer (and a record) first */
	o2.stream_done = walker_done;
	o2.stream_ctx = &wk;
	rc = dsec_layer_import_fd(p, &o2, pfd[0], 0, cb, arg, err);
	close(pfd[0]);
	/* a walker that stopped ended the stream short: its reason, not the reader's "truncated",
	 * is the error (one that died of the closed pipe has none: the reader's stands) */
	if (walker_failed(&wk, &why) < 0 && (rc == 0 || wk.why->msg[0])) {
		*err = why;
		rc = -1;
	}
	munmap(wk.why, sizeof(*wk.why));
	return rc;
}

int dsec_tar_dir_import(const struct dsec_paths *p, const struct dsec_import_opts *o, int dirfd,
			dsec_import_cb cb, void *arg, struct dsec_err *err)
{
	return tar_import(p, o, dirfd, NULL, cb, arg, err);
}

int dsec_tar_upper_import(const struct dsec_paths *p, const struct dsec_import_opts *o, int dirfd,
			  const struct dsec_tar_upper *u, dsec_import_cb cb, void *arg,
			  struct dsec_err *err)
{
	return tar_import(p, o, dirfd, u, cb, arg, err);
}
