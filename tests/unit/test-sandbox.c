/* sandbox.c without creating sandboxes: ids, state round trip, holder checks, ns flags. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox.h"
#include "tap.h"

int main(void)
{
	struct dsec_err err = {0};
	struct dsec_paths p;
	struct dsec_sandbox sb, back;
	char id[DSEC_ID_MAX], id2[DSEC_ID_MAX], dir[] = "/tmp/dsec-unit-sb-XXXXXX";
	int fd;

	ok(dsec_sandbox_id_ok("sb-0123456789ab"), "id ok");
	ok(!dsec_sandbox_id_ok("sb-../../etc"), "dots refused");
	ok(!dsec_sandbox_id_ok("sb-"), "empty refused");
	ok(!dsec_sandbox_id_ok("xx-0123"), "prefix needed");
	ok(!dsec_sandbox_id_ok("sb-ABC"), "uppercase refused");
	ok(dsec_sandbox_new_id(id, &err) == 0 && dsec_sandbox_id_ok(id) && strlen(id) == 15,
	   "new id %s", id);
	dsec_sandbox_new_id(id2, &err);
	ok(strcmp(id, id2) != 0, "ids differ");

	if (!mkdtemp(dir))
		return 1;
	dsec_paths_init(&p, dir, dir, &err);
	memset(&sb, 0, sizeof(sb));
	snprintf(sb.id, sizeof(sb.id), "%s", id);
	snprintf(sb.image, sizeof(sb.image), "busybox");
	snprintf(sb.node, sizeof(sb.node), "n1");
	sb.nlayers = 2;
	snprintf(sb.layers[0], sizeof(sb.layers[0]), "sha256:aa");
	snprintf(sb.layers[1], sizeof(sb.layers[1]), "sha256:bb");
	sb.limits =
	    (struct dsec_limits){.cpus = 0.5, .memory = 1 << 20, .pids = 9, .disk = 2 << 20};
	sb.created_us = 123;
	sb.ttl_us = 456;
	snprintf(sb.hostname, sizeof(sb.hostname), "h");
	sb.env = json_pack("[s]", "A=1");
	sb.labels = json_pack("{s:s}", "k", "v");
	sb.holder_pid = getpid();
	sb.holder_start = dsec_proc_start_time(getpid());
	sb.cg.version = 1;
	snprintf(sb.cg.v1[DSEC_CG_PIDS], DSEC_CG_PATH_MAX, "/x/pids");
	snprintf(sb.dir, sizeof(sb.dir), "%s/sandboxes/%s", dir, id);
	ok(sb.holder_start > 0, "start time of self");
	ok(dsec_sandbox_save(&p, &sb, &err) == 0, "save: %s", err.msg);
	ok(dsec_sandbox_load(&p, id, &back, &err) == 0, "load: %s", err.msg);
	ok(!strcmp(back.image, "busybox") && back.nlayers == 2 &&
	       !strcmp(back.layers[1], "sha256:bb"),
	   "image and layers");
	ok(back.limits.cpus == 0.5 && back.limits.memory == 1 << 20 && back.limits.pids == 9 &&
	       back.limits.disk == 2 << 20,
	   "limits");
	ok(back.created_us == 123 && back.ttl_us == 456, "times");
	ok(json_equal(back.env, sb.env) && json_equal(back.labels, sb.labels), "env, labels");
	ok(back.cg.version == 1 && !strcmp(back.cg.v1[DSEC_CG_PIDS], "/x/pids") &&
	       !back.cg.v1[DSEC_CG_MEMORY][0],
	   "cgroup paths");
	ok(!strcmp(back.dir, sb.dir), "dir");
	ok(dsec_sandbox_alive(&back), "self counts as alive");
	fd = dsec_sandbox_pidfd(&back, &err);
	ok(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC), "pidfd of self, cloexec");
	if (fd >= 0)
		close(fd);
	back.holder_start++;
	ok(dsec_sandbox_pidfd(&back, &err) < 0 && err.errnum == ESRCH, "reused pid: ESRCH");
	ok(!dsec_sandbox_alive(&back), "reused pid: not alive");
	ok((dsec_sandbox_nsflags(&back) & (CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID)) ==
	       (CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID),
	   "ns flags: net none joins the netns");
	back.net = DSEC_NET_HOST;
	ok(!(dsec_sandbox_nsflags(&back) & CLONE_NEWNET), "ns flags: net host does not");
	ok(!(dsec_sandbox_nsflags(&back) & CLONE_NEWUSER), "no user ns");
	dsec_sandbox_free(&back);
	ok(dsec_sandbox_load(&p, "sb-000000000000", &back, &err) < 0 && err.errnum == ENOENT,
	   "unknown id: ENOENT");
	ok(dsec_sandbox_load(&p, "../x", &back, &err) < 0 && err.errnum == EINVAL,
	   "bad id: EINVAL");
	/* a corrupt state file is an error, not a crash */
	{
		char path[PATH_MAX];
		FILE *f;

		snprintf(path, sizeof(path), "%s/sandbox.json", sb.dir);
		f = fopen(path, "w");
		fputs("{\"id\":7", f);
		fclose(f);
		ok(dsec_sandbox_load(&p, id, &back, &err) < 0 && err.errnum == EINVAL,
		   "corrupt state: EINVAL");
	}
	/* the last activity: the later of creation (or claim) and the last touch of the dir */
	{
		uint64_t now = dsec_wall_us(), idle;

		sb.created_us = now + 3600ULL * 1000000;
		ok(dsec_sandbox_last_active(&sb) == sb.created_us, "created after the dir's mtime");
		sb.created_us = now - 3600ULL * 1000000;
		dsec_sandbox_touch(sb.dir);
		ok(dsec_sandbox_last_active(&sb) + 1000000 > now &&
		       dsec_sandbox_last_active(&sb) < dsec_wall_us() + 1000,
		   "touched: now");
		ok(dsec_sandbox_pending(&p, sb.id) == 0, "a handed-out state is not pending");
		{
			char path[PATH_MAX];

			snprintf(path, sizeof(path), "%s/sandbox.json", sb.dir);
			chmod(path, 0400);
			ok(dsec_sandbox_pending(&p, sb.id) == 1, "mode 0400: pending");
		}
		sb.holder_pid = 0; /* no holder: never idle */
		ok(dsec_sandbox_idle(&sb, now, &idle) == 0, "a dead sandbox is not idle");
	}
	dsec_sandbox_free(&sb);
	dsec_rmtree(dir, &err);
	return tap_done();
}
