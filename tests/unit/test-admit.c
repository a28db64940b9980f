/* admit.c: node.conf, and the ledger's sums against capacity x ratio, with dead keepers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "admit.h"
#include "tap.h"

static char dir[] = "/tmp/dsec-unit-XXXXXX";

static void conf(const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/node.conf", dir);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

int main(void)
{
	struct dsec_err err = {0};
	struct dsec_paths p;
	struct dsec_node n;
	int64_t d[DSEC_R_N] = {0}, sum[DSEC_R_N];
	pid_t child;
	int st;

	if (!mkdtemp(dir))
		return 1;
	dsec_paths_init(&p, dir, dir, &err);

	ok(dsec_node_load(&p, &n, &err) == 0, "no node.conf: defaults");
	ok(n.ratio[DSEC_R_CPU] == 4.0 && n.ratio[DSEC_R_MEMORY] == 1.0, "default ratios 4 and 1");
	ok(n.cap[DSEC_R_CPU] >= 1 && n.cap[DSEC_R_MEMORY] > 0 && n.cap_auto[DSEC_R_CPU],
	   "capacity detected");
	conf("# a node\ncpu = 2   # two\nmemory = 1G\ncpu_ratio=1.5\nio_device = 8:0\n");
	ok(dsec_node_load(&p, &n, &err) == 0 && n.cap[DSEC_R_CPU] == 2 &&
	       n.cap[DSEC_R_MEMORY] == 1073741824.0 && n.ratio[DSEC_R_CPU] == 1.5 &&
	       !strcmp(n.io_dev, "8:0") && !n.cap_auto[DSEC_R_CPU],
	   "values, comments, blanks");
	conf("cpu = 2\nwhat = 1\n");
	ok(dsec_node_load(&p, &n, &err) < 0 && strstr(err.msg, "node.conf:2: unknown key 'what'"),
	   "unknown key named with its line: %s", err.msg);
	conf("memory_ratio = 0\n");
	ok(dsec_node_load(&p, &n, &err) < 0 && err.errnum == EINVAL, "ratio 0 refused");
	conf("cpu\n");
	ok(dsec_node_load(&p, &n, &err) < 0, "no '=' refused");
	conf("io_device = /etc/passwd\n");
	ok(dsec_node_load(&p, &n, &err) < 0, "io_device not a block device refused");

	/* the ledger: capacity 2 x 1.5 = 3 CPUs (dsec_node_get reads node.conf once) */
	conf("cpu = 2\ncpu_ratio = 1.5\n");
	d[DSEC_R_CPU] = 1000;
	ok(dsec_admit(&p, "sb-000000000001", 0, 0, d, &err) == 0, "1 of 3 CPUs");
	ok(dsec_admit(&p, "sb-000000000002", 0, 0, d, &err) == 0, "2 of 3 CPUs");
	d[DSEC_R_CPU] = 1500;
	ok(dsec_admit(&p, "sb-000000000003", 0, 0, d, &err) < 0 && err.errnum == ENOSPC &&
	       strstr(err.msg, "node full: cpu"),
	   "3.5 of 3 refused: %s", err.msg);
	d[DSEC_R_CPU] = 1000;
	ok(dsec_admit(&p, "sb-000000000003", 0, 0, d, &err) == 0, "3 of 3 CPUs");
	d[DSEC_R_CPU] = -1000;
	ok(dsec_admit(&p, "sb-000000000002", 0, 0, d, &err) == 0, "a negative delta gives back");
	ok(dsec_admit_sums(&p, sum, &err) == 0 && sum[DSEC_R_CPU] == 2000, "sums exact: 2 CPUs");

	/* a keeper that dies: its requests go at the next compaction */
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	usleep(20000);
	ok(dsec_admit_bind(&p, "sb-000000000001", child, dsec_proc_start_time(child), &err) == 0,
	   "bound to a child");
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	ok(dsec_admit_sums(&p, sum, &err) == 0 && sum[DSEC_R_CPU] == 1000,
	   "dead keeper dropped: %lld", (long long)sum[DSEC_R_CPU]);
	d[DSEC_R_CPU] = 2000;
	ok(dsec_admit(&p, "sb-000000000004", 0, 0, d, &err) == 0, "room again after it");

	/* a keeper that died before binding, its sandbox's holder alive: kept, rebound */
	{
		pid_t keeper = fork(), holder;
		char path[PATH_MAX + 64];
		FILE *f;

		if (keeper == 0) {
			pause();
			_exit(0);
		}
		holder = fork();
		if (holder == 0) {
			pause();
			_exit(0);
		}
		usleep(20000);
		snprintf(path, sizeof(path), "%s/sandboxes/sb-000000000005", dir);
		dsec_mkdir_p(path, 0700, &err);
		strcat(path, "/sandbox.json");
		f = fopen(path, "w");
		fprintf(f,
			"{\"id\":\"sb-000000000005\",\"image\":\"x\",\"holder\":{\"pid\":%d,"
			"\"start\":%llu}}\n",
			(int)holder, dsec_proc_start_time(holder));
		fclose(f);
		d[DSEC_R_CPU] = -2000;
		dsec_admit(&p, "sb-000000000004", 0, 0, d, &err);
		d[DSEC_R_CPU] = 500;
		ok(dsec_admit(&p, "sb-000000000005", keeper, dsec_proc_start_time(keeper), d,
			      &err) == 0,
		   "reserved by a keeper");
		kill(keeper, SIGKILL);
		waitpid(keeper, &st, 0);
		ok(dsec_admit_sums(&p, sum, &err) == 0 && sum[DSEC_R_CPU] == 1500,
		   "its sandbox's live holder keeps the requests: %lld",
		   (long long)sum[DSEC_R_CPU]);
		kill(holder, SIGKILL);
		waitpid(holder, &st, 0);
		ok(dsec_admit_sums(&p, sum, &err) == 0 && sum[DSEC_R_CPU] == 1000,
		   "and drops them with it: %lld", (long long)sum[DSEC_R_CPU]);
	}
	{
		struct dsec_requests r = {.cpus = 0.25, .memory = 5, .pids = 6, .disk = 7};
		int64_t a[DSEC_R_N];

		dsec_admit_amounts(&r, a);
		ok(a[0] == 250 && a[1] == 5 && a[2] == 6 && a[3] == 7, "amounts in ledger units");
	}
	{
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 1;
	}
	return tap_done();
}
