#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state.h"
#include "tap.h"

int main(void)
{
	struct dsec_err err = {0};
	uint64_t u;
	long long n;
	char dir[] = "/tmp/dsec-unit-XXXXXX", path[PATH_MAX], *buf;
	int fd, fd2;

	ok(dsec_parse_size("512M", UINT64_MAX, &u, "--memory", &err) == 0 && u == 512ULL << 20,
	   "512M");
	ok(dsec_parse_size("1.5GiB", UINT64_MAX, &u, "--memory", &err) == 0 && u == 3ULL << 29,
	   "1.5GiB");
	ok(dsec_parse_size("4096", UINT64_MAX, &u, "--disk", &err) == 0 && u == 4096, "bare bytes");
	ok(dsec_parse_size("-1G", UINT64_MAX, &u, "--disk", &err) < 0, "negative refused");
	ok(dsec_parse_size("12Q", UINT64_MAX, &u, "--disk", &err) < 0 &&
	       strstr(err.msg, "--disk '12Q'"),
	   "bad suffix names the option: %s", err.msg);
	ok(dsec_parse_size("2T", 1ULL << 40, &u, "--disk", &err) < 0 && err.errnum == ERANGE,
	   "over max refused");
	ok(dsec_parse_size("nan", UINT64_MAX, &u, "x", &err) < 0, "nan refused");
	ok(dsec_parse_duration("250ms", UINT64_MAX, &u, "-t", &err) == 0 && u == 250000, "250ms");
	ok(dsec_parse_duration("1h", UINT64_MAX, &u, "-t", &err) == 0 && u == 3600000000ULL, "1h");
	ok(dsec_parse_duration("2", UINT64_MAX, &u, "-t", &err) == 0 && u == 2000000, "bare secs");
	ok(dsec_parse_duration("3x", UINT64_MAX, &u, "-t", &err) < 0, "bad unit refused");
	ok(dsec_parse_duration("inf", UINT64_MAX, &u, "-t", &err) < 0, "inf refused");
	ok(dsec_parse_count("125", 1, 1000, &n, "-n", &err) == 0 && n == 125, "count");
	ok(dsec_parse_count("0", 1, 1000, &n, "-n", &err) < 0 && err.errnum == ERANGE, "count min");
	ok(dsec_parse_count("99999999999999999999", 1, 1000, &n, "-n", &err) < 0, "count overflow");
	ok(dsec_parse_count("12a", 1, 1000, &n, "-n", &err) < 0, "count junk");

	ok(mkdtemp(dir) != NULL, "temp dir");
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	ok(dsec_mkdir_p(path, 0700, &err) == 0, "mkdir -p");
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	ok(dsec_write_atomic(fd, "f", "hello", 5, 0600, 1, &err) == 0, "atomic write");
	ok(dsec_read_file(fd, "f", 100, &buf, &err) == 5 && !strcmp(buf, "hello"), "read back");
	free(buf);
	ok(dsec_read_file(fd, "f", 3, &buf, &err) < 0 && err.errnum == EFBIG, "read bound");
	ok(symlinkat("f", fd, "l") == 0, "symlink");
	ok(dsec_read_file(fd, "l", 100, &buf, &err) < 0 && err.errnum == ELOOP,
	   "read does not follow a symlink");

	snprintf(path, sizeof(path), "%s/lock", dir);
	fd2 = dsec_lock(path, 1, 0, &err);
	ok(fd2 >= 0, "lock taken");
	ok(dsec_lock(path, 1, 0, &err) < 0 && err.errnum == EWOULDBLOCK, "second lock refused");
	close(fd2);
	fd2 = dsec_lock(path, 1, 0, &err);
	ok(fd2 >= 0, "lock free again after close");
	close(fd2);

	/* rmtree must not follow a link out of the tree */
	snprintf(path, sizeof(path), "%s/outside", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/outside/keep", dir);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	snprintf(path, sizeof(path), "%s/outside", dir);
	ok(symlinkat(path, fd, "a/b/link") == 0, "link out planted");
	mkdirat(fd, "a/ro", 0);
	ok(dsec_rmtree_at(fd, "a", &err) == 0, "rmtree: %s", err.msg);
	snprintf(path, sizeof(path), "%s/outside/keep", dir);
	ok(access(path, F_OK) == 0, "file behind the link survives");
	ok(faccessat(fd, "a", F_OK, AT_SYMLINK_NOFOLLOW) < 0, "tree gone");
	/* a tree 1000 levels deep, each with a file and a directory that cannot be entered,
	 * removed under 64 descriptors: deeper than the descriptors it may hold */
	{
		struct rlimit was, low = {64, 64};
		int d = dup(fd), i, made = 1;

		for (i = 0; i < 1000 && made; i++) {
			int sub;

			made = mkdirat(d, i ? "d" : "deep", 0755) == 0 &&
			       close(openat(d, "f", O_CREAT | O_WRONLY | O_CLOEXEC, 0600)) == 0 &&
			       mkdirat(d, "locked", 0) == 0 &&
			       (sub = openat(d, i ? "d" : "deep", O_RDONLY | O_DIRECTORY)) >= 0;
			close(d);
			d = made ? sub : -1;
		}
		if (d >= 0)
			close(d);
		ok(made, "1000 levels made");
		getrlimit(RLIMIT_NOFILE, &was);
		ok(setrlimit(RLIMIT_NOFILE, &low) == 0, "64 descriptors");
		ok(dsec_rmtree_at(fd, "deep", &err) == 0, "deep tree removed: %s", err.msg);
		setrlimit(RLIMIT_NOFILE, &was);
		ok(faccessat(fd, "deep", F_OK, AT_SYMLINK_NOFOLLOW) < 0, "deep tree gone");
	}
	close(fd);
	ok(dsec_rmtree(dir, &err) == 0, "cleanup");
	return tap_done();
}
