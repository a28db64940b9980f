#include "commit.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cgroup.h"
#include "layer.h"
#include "ns.h"
#include "oci.h"
#include "sandbox.h"
#include "store.h"

struct got {
	char layer[80];
};

static int got_layer(json_t *rec, void *arg, struct dsec_err *err)
{
	struct got *g = arg;
	const char *id = json_string_value(json_object_get(rec, "layer"));

	if (id)
		snprintf(g->layer, sizeof(g->layer), "%s", id);
	return 0;
}

/* The upper dir of sb, opened through its holder. -1 with err when unreachable. */
static int open_upper(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	char path[64];
	struct statfs sfs;
	int tfd, ufd;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)sb->holder_pid, DSEC_HOLDER_TMPFS_FD);
	tfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tfd < 0)
		return dsec_err_sys(err, "%s: open the sandbox's tmpfs (made by an older dsec?)",
				    sb->id);
	/* the pid could have been reused between load and open: same start time still? */
	if (!dsec_sandbox_alive(sb) || fstatfs(tfd, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC) {
		close(tfd);
		return dsec_err_set(err, ESRCH, "%s: sandbox is not running (holder gone)", sb->id);
	}
	ufd = openat(tfd, DSEC_ROOTFS_UPPER, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(tfd);
	if (ufd < 0)
		return dsec_err_sys(err, "%s: open upper dir", sb->id);
	return ufd;
}

int dsec_commit(const struct dsec_paths *p, const char *id, const char *image, json_t **rec,
		struct dsec_err *err)
{
	struct dsec_sandbox sb;
	struct dsec_import_opts o;
	struct dsec_tar_upper u = {0};
	struct got g = {""};
	const char *refs[DSEC_MAX_LAYERS + 1];
	uint64_t t0 = dsec_now_us();
	int ufd = -1, paused = 0, frozen, rc = -1;
	json_t *img = NULL, *cfg, *clean;
	int r;

	*rec = NULL;
	if (!dsec_sandbox_id_ok(id))
		return dsec_err_set(err, EINVAL, "'%.64s': not a sandbox id", id);
	if (image && !dsec_image_name_ok(image))
		return dsec_err_set(err, EINVAL, "'%.64s': not a valid image name", image);
	if (dsec_sandbox_load(p, id, &sb, err) < 0)
		return -1;
	if (sb.nlayers >= DSEC_MAX_LAYERS) {
		dsec_err_set(err, E2BIG, "%s: image '%s' has %u layers already", id, sb.image,
			     sb.nlayers);
		goto out;
	}
	if ((ufd = open_upper(&sb, err)) < 0)
		goto out;
	u.map = dsec_sandbox_idmap(&sb);
	u.hostname = sb.hostname;
	u.resolv = sb.net == DSEC_NET_HOST ? dsec_host_resolv() : NULL;
	/* one consistent state: nothing in the sandbox writes while it is read; paused by a
	 * commit that died, it is ours to resume */
	frozen = dsec_cgroup_frozen(&sb);
	if (frozen == 0 || (frozen == 1 && dsec_cgroup_pause_stale(&sb))) {
		if (dsec_cgroup_pause(&sb, 1, err) < 0)
			goto out;
		paused = 1;
	}
	dsec_import_opts_init(&o);
	o.kind = "application";
	/* as an import shows it (cmd/dsec-layer.c): a big upper takes seconds */
	o.progress = isatty(STDERR_FILENO) && dsec_verbose >= 0;
	o.name = image ? image : id;
	rc = dsec_tar_upper_import(p, &o, ufd, &u, got_layer, &g, err);
	if (paused && dsec_cgroup_pause(&sb, 0, rc < 0 ? NULL : err) < 0)
		rc = -1;
	if (rc < 0)
		goto out;
	rc = -1;
	if (!g.layer[0]) {
		dsec_err_set(err, EIO, "%s: import gave no layer", id);
		goto out;
	}
	for (unsigned i = 0; i < sb.nlayers; i++)
		refs[i] = sb.layers[i];
	refs[sb.nlayers] = g.layer;
	/* the sandbox's environment, working dir and user go with it, as docker commit does */
	cfg = json_object();
	if (json_array_size(sb.env))
		json_object_set(cfg, "env", sb.env);
	if (sb.workdir[0])
		json_object_set_new(cfg, "workdir", json_string(sb.workdir));
	if (sb.user[0])
		json_object_set_new(cfg, "user", json_string(sb.user));
	clean = dsec_image_config_clean(cfg, 0, image ? image : id);
	json_decref(cfg);
	r = dsec_store_compose(p, image ? image : id, refs, sb.nlayers + 1, clean, &img, err);
	json_decref(clean);
	if (r < 0)
		goto out;
	*rec = json_pack("{s:s, s:s, s:s, s:O, s:s, s:I}", "id", id, "image", image ? image : id,
			 "layer", g.layer, "layers", json_object_get(img, "layers"), "from",
			 sb.image, "commit_us", (json_int_t)(dsec_now_us() - t0));
	rc = *rec ? 0 : dsec_err_set(err, ENOMEM, "out of memory");
out:
	if (rc < 0)
		dsec_err_wrap(err, "commit");
	json_decref(img);
	if (ufd >= 0)
		close(ufd);
	dsec_sandbox_free(&sb);
	return rc;
}
