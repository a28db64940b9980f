/* cgroup.c against the real kernel: paths, create with limits, attach, stats, kill, remove. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "tap.h"

static int read_eq(const char *dir, const char *file, const char *want)
{
	char path[PATH_MAX], buf[128] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return !strcmp(buf, want);
}

int main(void)
{
	struct dsec_err err = {0};
	struct dsec_paths p, q;
	struct dsec_sandbox sb, other;
	struct dsec_cgroup_stats st;
	const char *procs;
	int v, status;
	pid_t child;

	alarm(60); /* a hang is a failure */
	setenv("DSEC_RUN", "/tmp/dsec-unit-cgroup-run", 1);
	dsec_paths_init(&p, NULL, NULL, &err);
	v = dsec_cgroup_version(&err);
	ok(v == 1 || v == 2, "cgroup version %d", v);
	if (v < 0) {
		printf("# %s\n", err.msg);
		return tap_done();
	}

	memset(&sb, 0, sizeof(sb));
	snprintf(sb.id, sizeof(sb.id), "sb-%012x", (unsigned)getpid());
	ok(dsec_cgroup_paths(&p, &sb, &err) == 0, "paths");
	if (v == 2) {
		ok(strstr(sb.cg.v2, "/dsec-") && strstr(sb.cg.v2, sb.id), "v2 path %s", sb.cg.v2);
		procs = sb.cg.v2;
	} else {
		ok(strstr(sb.cg.v1[DSEC_CG_MEMORY], "/memory/dsec-") != NULL, "v1 memory path %s",
		   sb.cg.v1[DSEC_CG_MEMORY]);
		ok(sb.cg.v1[DSEC_CG_PIDS][0] && sb.cg.v1[DSEC_CG_CPU][0], "v1 pids and cpu paths");
		ok(strstr(sb.cg.v1[DSEC_CG_FREEZER], "/freezer/dsec-") != NULL,
		   "v1 freezer path (for pausing) %s", sb.cg.v1[DSEC_CG_FREEZER]);
		procs = sb.cg.v1[DSEC_CG_PIDS];
	}
	/* another run dir gets another parent; the default run dir gets plain "dsec" */
	memset(&other, 0, sizeof(other));
	snprintf(other.id, sizeof(other.id), "%s", sb.id);
	dsec_paths_init(&q, NULL, "/tmp/dsec-unit-cgroup-other", &err);
	dsec_cgroup_paths(&q, &other, &err);
	ok(strcmp(v == 2 ? other.cg.v2 : other.cg.v1[DSEC_CG_MEMORY],
		  v == 2 ? sb.cg.v2 : sb.cg.v1[DSEC_CG_MEMORY]) != 0,
	   "run dirs do not share a parent");
	dsec_paths_init(&q, NULL, DSEC_RUN_DEFAULT, &err);
	dsec_cgroup_paths(&q, &other, &err);
	ok(strstr(v == 2 ? other.cg.v2 : other.cg.v1[DSEC_CG_MEMORY], "/dsec/sb-") != NULL,
	   "default run dir: parent dsec");

	sb.limits.memory = 64 << 20;
	sb.limits.pids = 7;
	sb.limits.cpus = 0.25;
	ok(dsec_cgroup_create(&sb, &err) == 0, "create: %s", err.msg);
	if (v == 2) {
		ok(read_eq(sb.cg.v2, "memory.max", "67108864"), "memory.max");
		ok(read_eq(sb.cg.v2, "pids.max", "7"), "pids.max");
		ok(read_eq(sb.cg.v2, "cpu.max", "25000 100000"), "cpu.max");
	} else {
		ok(read_eq(sb.cg.v1[DSEC_CG_MEMORY], "memory.limit_in_bytes", "67108864"),
		   "memory.limit_in_bytes");
		ok(read_eq(sb.cg.v1[DSEC_CG_PIDS], "pids.max", "7"), "pids.max");
		ok(read_eq(sb.cg.v1[DSEC_CG_CPU], "cpu.cfs_quota_us", "25000"), "cfs_quota_us");
	}
	ok(dsec_cgroup_create(&sb, &err) < 0 && err.errnum == EEXIST, "create twice: EEXIST");

	child = fork();
	if (child == 0) {
		alarm(30);
		pause();
		_exit(0);
	}
	ok(dsec_cgroup_attach(&sb, child, &err) == 0, "attach: %s", err.msg);
	{
		char path[PATH_MAX], pid[32];
		char *buf = NULL;

		snprintf(path, sizeof(path), "%s/cgroup.procs", procs);
		snprintf(pid, sizeof(pid), "%d\n", (int)child);
		dsec_read_file(AT_FDCWD, path, 4096, &buf, &err);
		ok(buf && strstr(buf, pid), "child listed in cgroup.procs");
		free(buf);
	}
	ok(dsec_cgroup_stats(&sb, &st, &err) == 0 && st.pids == 1, "stats: pids %llu",
	   (unsigned long long)st.pids);
	ok(dsec_cgroup_remove(&sb, &err) < 0, "remove refused while populated");
	ok(dsec_cgroup_kill(&sb, &err) == 0, "kill: %s", err.msg);
	ok(waitpid(child, &status, 0) == child && WIFSIGNALED(status) &&
	       WTERMSIG(status) == SIGKILL,
	   "child killed");
	ok(dsec_cgroup_remove(&sb, &err) == 0, "remove: %s", err.msg);
	ok(access(procs, F_OK) < 0, "gone");
	ok(dsec_cgroup_remove(&sb, &err) == 0, "remove again is fine");
	ok(dsec_cgroup_kill(&sb, &err) == 0, "kill of a missing cgroup is fine");
	ok(dsec_cgroup_remove_parent(&p, &err) == 0, "remove parent");
	return tap_done();
}
