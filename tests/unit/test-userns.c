/* userns: dsec's entry in /etc/subuid and /etc/subgid, the free-range search, and a user
 * namespace made with a mapping (real kernel, as root). */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "state.h"
#include "tap.h"
#include "userns.h"

/* The uid_map seen by a child that joined the user namespace fd, squeezed to single spaces. */
static void map_of(int fd, char *buf, size_t n)
{
	int p[2];
	pid_t pid;

	buf[0] = '\0';
	if (pipe(p) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		char b[256];
		int m, k;

		if (setns(fd, CLONE_NEWUSER) < 0)
			_exit(1);
		m = open("/proc/self/uid_map", O_RDONLY);
		k = m < 0 ? -1 : (int)read(m, b, sizeof(b));
		if (k > 0 && write(p[1], b, (size_t)k) < 0)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	if (pid > 0) {
		char raw[256];
		ssize_t r = read(p[0], raw, sizeof(raw) - 1);
		size_t o = 0;

		for (ssize_t i = 0; i < r && o < n - 1; i++) {
			char c = raw[i] == '\n' ? ' ' : raw[i];

			if (c == ' ' && (o == 0 || buf[o - 1] == ' '))
				continue;
			buf[o++] = c;
		}
		while (o && buf[o - 1] == ' ')
			o--;
		buf[o] = '\0';
		waitpid(pid, NULL, 0);
	}
	close(p[0]);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
}

int main(void)
{
	char dir[] = "/tmp/dsec-userns-XXXXXX", uf[64], gf[64], *s = NULL;
	struct dsec_err err = {0};
	struct dsec_idmap m = {0}, m2 = {0};
	unsigned long st, n;
	int fd;

	ok(dsec_subid_find("alice:100000:65536\ndsec:231072:65536\n", "dsec", &st, &n) == 0 &&
	       st == 231072 && n == 65536,
	   "find the dsec entry among others");
	ok(dsec_subid_find("dsecx:1:2\nxdsec:3:4\n", "dsec", &st, &n) < 0,
	   "names that merely contain dsec do not count");
	ok(dsec_subid_find("dsec:abc:65536\ndsec:5:0\n", "dsec", &st, &n) < 0,
	   "malformed and empty entries are ignored");
	ok(dsec_subid_free("", "", 100000, 65536) == 131072, "first aligned block at or above min");
	ok(dsec_subid_free("alice:100000:65536\n", "bob:196608:10\n", 100000, 65536) == 262144,
	   "skips blocks overlapping either file");
	ok(dsec_subid_free("x:0:4294967295\n", "", 100000, 65536) == 0, "none left: 0");

	if (!mkdtemp(dir))
		return 1;
	snprintf(uf, sizeof(uf), "%s/subuid", dir);
	snprintf(gf, sizeof(gf), "%s/subgid", dir);
	put(uf, "alice:100000:65536");
	put(gf, "alice:100000:65536\nbob:131072:65536\n");
	setenv("DSEC_SUBUID_FILE", uf, 1);
	setenv("DSEC_SUBGID_FILE", gf, 1);
	ok(dsec_userns_range(&m, &err) == 0, "range made on first use (%s)", err.msg);
	ok(m.uid == 196608 && m.gid == 196608 && m.count == 65536,
	   "one block free in both files: %u %u %u", (unsigned)m.uid, (unsigned)m.gid, m.count);
	dsec_read_file(AT_FDCWD, uf, 4096, &s, &err);
	ok(s && !strcmp(s, "alice:100000:65536\ndsec:196608:65536\n"),
	   "appended after a last line without newline: %s", s ? s : "(null)");
	free(s);
	ok(dsec_userns_range(&m2, &err) == 0 && m2.uid == m.uid && m2.gid == m.gid,
	   "second use finds the same range");
	put(uf, "dsec:0:65536\n");
	ok(dsec_userns_range(&m2, &err) < 0 && strstr(err.msg, "host root"),
	   "an entry mapping root to root is refused: %s", err.msg);

	/* the owners' block: clear of both files' entries, aligned, in the uid file only */
	unsigned long ob = 0, ob2 = 0;

	put(uf, "alice:100000:65536\ndsec:4194304:65536\n");
	put(gf, "bob:8388608:10\n");
	memset(&err, 0, sizeof(err));
	ok(dsec_userns_owners(&ob, &err) == 0 && ob == 12582912,
	   "owners: the first free aligned block of 2^22 (%lu, %s)", ob, err.msg);
	s = NULL;
	dsec_read_file(AT_FDCWD, uf, 4096, &s, &err);
	ok(s && strstr(s, "\ndsec-owner:12582912:4194304\n"), "owners: appended to the uid file");
	free(s);
	s = NULL;
	dsec_read_file(AT_FDCWD, gf, 4096, &s, &err);
	ok(s && !strstr(s, "dsec-owner"), "owners: nothing in the gid file");
	free(s);
	ok(dsec_userns_owners(&ob2, &err) == 0 && ob2 == ob, "owners: found again");
	put(uf, "dsec-owner:4194304:1000\n");
	ok(dsec_userns_owners(&ob2, &err) < 0 && strstr(err.msg, "fewer than"),
	   "owners: a block too small for every pid is refused: %s", err.msg);

	memset(&err, 0, sizeof(err));
	fd = dsec_userns_fd(&m, 0, &err);
	ok(fd >= 0 && ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWUSER, "user namespace fd (%s)", err.msg);
	if (fd >= 0) {
		char map[128], want[128];
		uid_t owner = 1;

		map_of(fd, map, sizeof(map));
		snprintf(want, sizeof(want), "0 %lu %u", (unsigned long)m.uid, m.count);
		ok(!strcmp(map, want), "one range: '%s'", map);
		ok(ioctl(fd, NS_GET_OWNER_UID, &owner) == 0 && owner == 0, "owned by root");
		close(fd);
	}
	/* root inside a uid of its own, owning the namespace; 1.. the range's */
	m.root = (uid_t)(ob + 4242);
	fd = dsec_userns_fd(&m, m.root, &err);
	ok(fd >= 0, "split user namespace fd (%s)", err.msg);
	if (fd >= 0) {
		char map[128], want[128];
		uid_t owner = 0;

		map_of(fd, map, sizeof(map));
		snprintf(want, sizeof(want), "0 %lu 1 1 %lu %u", (unsigned long)m.root,
			 (unsigned long)m.uid + 1, m.count - 1);
		ok(!strcmp(map, want), "split: '%s'", map);
		ok(ioctl(fd, NS_GET_OWNER_UID, &owner) == 0 && owner == m.root,
		   "owned by root's uid");
		close(fd);
	}
	ok(dsec_idmap_inside(&m, m.root) == 0 && dsec_idmap_inside(&m, m.uid) == -1 &&
	       dsec_idmap_inside(&m, m.uid + 7) == 7 &&
	       dsec_idmap_inside(&m, m.uid + m.count) == -1 && dsec_idmap_inside(&m, 0) == -1,
	   "uids inside of host uids: the range's first is nobody's when root is another");
	m.root = 0;
	ok(dsec_idmap_inside(&m, m.uid) == 0 && dsec_idmap_inside(&m, m.uid + 1) == 1,
	   "no root of its own: the range's first is root");
	unlink(uf);
	unlink(gf);
	rmdir(dir);
	return tap_done();
}
