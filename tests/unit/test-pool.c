/* pool.c without sandboxes: keys, the pool file, ready lists, and the claim step under
 * concurrent claimers (plain files: the step itself creates no kernel object). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool.h"
#include "tap.h"

#define NIDS 400
#define NCLAIMERS 8

static void id_of(int i, char *buf)
{
	snprintf(buf, DSEC_ID_MAX, "sb-%012x", (unsigned)i + 0xa000);
}

int main(void)
{
	struct dsec_err err = {0};
	struct dsec_paths p;
	struct dsec_limits l = {.cpus = 1.0, .memory = 1ULL << 30, .pids = 512, .disk = 1ULL << 30},
			   l2 = l;
	struct dsec_pool a, b, c, loaded;
	struct dsec_pool_entry *e;
	char dir[] = "/tmp/dsec-unit-XXXXXX", path[PATH_MAX + 64], id[DSEC_ID_MAX], canon[512];
	struct stat st;
	size_t n;
	int readyfd, won = 0, fd;

	ok(mkdtemp(dir) != NULL, "temp dir");
	memset(&p, 0, sizeof(p));
	snprintf(p.run, sizeof(p.run), "%s/run", dir);
	snprintf(p.root, sizeof(p.root), "%s/root", dir);

	dsec_pool_canon("py", &l, DSEC_NET_NONE, canon, sizeof(canon));
	ok(strstr(canon, "image=py;net=none;disk=1073741824") == canon, "canonical: %s", canon);
	dsec_pool_init(&a, &p, "py", &l, DSEC_NET_NONE);
	dsec_pool_init(&b, &p, "py", &l, DSEC_NET_NONE);
	ok(!strcmp(a.key, b.key) && strlen(a.key) == 18 && !strncmp(a.key, "p-", 2),
	   "same profile, same key %s", a.key);
	l2.cpus = 1.0001;
	dsec_pool_init(&c, &p, "py", &l2, DSEC_NET_NONE);
	ok(!strcmp(a.key, c.key), "cpus to a thousandth");
	l2.cpus = 0.5;
	dsec_pool_init(&c, &p, "py", &l2, DSEC_NET_NONE);
	ok(strcmp(a.key, c.key) != 0, "other cpus, other key");
	dsec_pool_init(&c, &p, "py", &l, DSEC_NET_HOST);
	ok(strcmp(a.key, c.key) != 0, "other net, other key");
	dsec_pool_init(&c, &p, "py2", &l, DSEC_NET_NONE);
	ok(strcmp(a.key, c.key) != 0, "other image, other key");
	ok(strstr(a.dir, "/run/pools/p-") != NULL, "dir %s", a.dir);

	ok(dsec_pool_ready(&a, &e, &n, 0, &err) == 0 && n == 0, "missing pool is empty");
	free(e);
	ok(dsec_pool_save(&a, &err) == 0, "save: %s", err.msg);
	ok(dsec_pool_load(&p, a.key, &loaded, &err) == 0 && !strcmp(loaded.image, "py") &&
	       loaded.limits.memory == l.memory && loaded.limits.cpus == 1.0 &&
	       loaded.net == DSEC_NET_NONE,
	   "load gives the profile back");
	ok(dsec_pool_load(&p, "p-../../x", &loaded, &err) < 0 && err.errnum == EINVAL,
	   "a key with a path is refused");
	ok(dsec_pool_load(&p, "p-0000000000000000", &loaded, &err) < 0 && err.errnum == ENOENT,
	   "no such pool");

	fd = dsec_pool_lock(&a, 0, &err);
	ok(fd >= 0, "lock");
	ok(dsec_pool_lock(&a, 0, &err) < 0 && err.errnum == EWOULDBLOCK, "second lock refused");
	close(fd);

	/* NIDS ready entries, each with a state dir to be claimed into */
	for (int i = 0; i < NIDS; i++) {
		id_of(i, id);
		snprintf(path, sizeof(path), "%s/ready/%s", a.dir, id);
		close(open(path, O_WRONLY | O_CREAT, 0600));
		snprintf(path, sizeof(path), "%s/sandboxes/%s", p.run, id);
		dsec_mkdir_p(path, 0700, NULL);
		snprintf(path, sizeof(path), "%s/sandboxes/%s/sandbox.json", p.run, id);
		close(open(path, O_WRONLY | O_CREAT, 0600));
	}
	ok(dsec_pool_ready(&a, &e, &n, 1, &err) == 0 && n == NIDS && e[0].created_us > 0,
	   "ready list has %d entries with times", NIDS);
	free(e);
	ok(dsec_pool_record(&a) != NULL, "record");

	/* every pool's ready sandboxes at once, sorted, each with its pool */
	{
		struct dsec_pool_readyset rs;
		int sorted = 1;

		dsec_pool_init(&c, &p, "py2", &l, DSEC_NET_NONE);
		ok(dsec_pool_save(&c, &err) == 0, "save a second pool");
		for (int i = NIDS; i < NIDS + 3; i++) {
			id_of(i, id);
			snprintf(path, sizeof(path), "%s/ready/%s", c.dir, id);
			close(open(path, O_WRONLY | O_CREAT, 0600));
		}
		ok(dsec_pool_readyset(&p, &rs, &err) == 0 && rs.n == NIDS + 3,
		   "ready set of both pools: %zu", rs.n);
		for (size_t i = 1; i < rs.n; i++)
			sorted &= strcmp(rs.e[i - 1].id, rs.e[i].id) < 0;
		ok(sorted, "sorted by id");
		id_of(7, id);
		ok(dsec_pool_readyset_find(&rs, id) &&
		       !strcmp(dsec_pool_readyset_find(&rs, id), a.key),
		   "found in the first pool");
		id_of(NIDS + 1, id);
		ok(dsec_pool_readyset_find(&rs, id) &&
		       !strcmp(dsec_pool_readyset_find(&rs, id), c.key),
		   "found in the second pool");
		ok(dsec_pool_readyset_find(&rs, "sb-ffffffffffff") == NULL, "an id not ready");
		dsec_pool_readyset_free(&rs);
		ok(rs.n == 0 && rs.e == NULL, "freed");
		for (int i = NIDS; i < NIDS + 3; i++) {
			id_of(i, id);
			snprintf(path, sizeof(path), "%s/ready/%s", c.dir, id);
			unlink(path);
		}
		ok(dsec_pool_readyset(&p, &rs, &err) == 0 && rs.n == NIDS,
		   "the second pool emptied");
		dsec_pool_readyset_free(&rs);
	}

	/* the claim step: 8 processes each try every entry; each must be won exactly once */
	snprintf(path, sizeof(path), "%s/ready", a.dir);
	readyfd = open(path, O_RDONLY | O_DIRECTORY);
	for (int k = 0; k < NCLAIMERS; k++) {
		if (fork() == 0) {
			char out[PATH_MAX + 64];
			FILE *f;

			snprintf(out, sizeof(out), "%s/won.%d", dir, k);
			f = fopen(out, "w");
			for (int i = 0; i < NIDS; i++) {
				int j = (i + k * NIDS / NCLAIMERS) % NIDS;

				id_of(j, id);
				if (dsec_pool_take(readyfd, p.run, id, NULL) == 1)
					fprintf(f, "%s\n", id);
			}
			fclose(f);
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	{
		static char seen[NIDS];
		int dup = 0;

		for (int k = 0; k < NCLAIMERS; k++) {
			char out[PATH_MAX + 64], line[64];
			FILE *f;

			snprintf(out, sizeof(out), "%s/won.%d", dir, k);
			f = fopen(out, "r");
			while (f && fgets(line, sizeof(line), f)) {
				int i = (int)strtol(line + 3, NULL, 16) - 0xa000;

				if (i >= 0 && i < NIDS) {
					dup += seen[i];
					seen[i] = 1;
					won++;
				}
			}
			if (f)
				fclose(f);
		}
		ok(won == NIDS && dup == 0, "%d claimers: %d won, %d twice", NCLAIMERS, won, dup);
	}
	ok(dsec_pool_ready(&a, &e, &n, 0, &err) == 0 && n == 0, "nothing left ready");
	free(e);
	id_of(0, id);
	snprintf(path, sizeof(path), "%s/sandboxes/%s/claimed", p.run, id);
	ok(access(path, F_OK) == 0, "the ready entry became the claimed mark");
	snprintf(path, sizeof(path), "%s/sandboxes/%s/sandbox.json", p.run, id);
	ok(stat(path, &st) == 0 && (st.st_mode & 07777) == 0400, "and the sandbox is pending");

	/* a second claim of a claimed sandbox loses; a dangling entry is dropped */
	snprintf(path, sizeof(path), "%s/ready/%s", a.dir, id);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	ok(dsec_pool_take(readyfd, p.run, id, &err) == 0 && access(path, F_OK) < 0,
	   "claimed twice: lost, entry dropped");
	id_of(1, id);
	snprintf(path, sizeof(path), "%s/sandboxes/%s", p.run, id);
	dsec_rmtree(path, NULL);
	snprintf(path, sizeof(path), "%s/ready/%s", a.dir, id);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	ok(dsec_pool_take(readyfd, p.run, id, &err) == 0, "entry of a gone sandbox: not won");
	ok(access(path, F_OK) < 0 && errno == ENOENT, "and dropped");
	close(readyfd);

	ok(dsec_pool_remove_if_empty(&a, &err) == 1 && access(a.dir, F_OK) < 0,
	   "empty pool removed");
	ok(dsec_mem_available() > 0, "MemAvailable read");
	dsec_rmtree(dir, NULL);
	return tap_done();
}
