/* net.c: allow-list and bandwidth parsers, the policy's canonical text, the address
 * allocator. (The netlink and nftables parts need namespaces: tests/660-net.bats.) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"
#include "tap.h"

static struct dsec_net_policy pol, res;
static char hosts[1024];

static int lease_count(const char *dir)
{
	char cmd[PATH_MAX + 32];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls '%s' | wc -l", dir);
	if ((f = popen(cmd, "r"))) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

int main(void)
{
	struct dsec_err err = {0};
	char canon[1024], dir[] = "/tmp/dsec-unit-net-XXXXXX", path[PATH_MAX + 16], *buf = NULL;
	uint64_t rate;
	uint32_t a, b, c;
	int dfd, lfd, rc;

	/* allow-list entries */
	ok(dsec_net_allow_parse("192.0.2.10:80", &pol, &err) == 0 && pol.n == 1 &&
	       pol.allow[0].addr == 0xc000020a && pol.allow[0].prefix == 32 &&
	       pol.allow[0].port == 80 && !pol.allow[0].name[0],
	   "ADDR:PORT");
	ok(dsec_net_allow_parse("192.0.2.77/24", &pol, &err) == 0 && pol.n == 2 &&
	       pol.allow[1].addr == 0xc0000200 && pol.allow[1].prefix == 24 && !pol.allow[1].port,
	   "ADDR/PREFIX, host bits cleared, every port");
	ok(dsec_net_allow_parse("0.0.0.0/0:53", &pol, &err) == 0 && pol.allow[2].prefix == 0 &&
	       pol.allow[2].port == 53,
	   "/0 with a port (DNS anywhere)");
	ok(dsec_net_allow_parse("pypi.org:443", &pol, &err) == 0 &&
	       !strcmp(pol.allow[3].name, "pypi.org") && pol.allow[3].port == 443,
	   "NAME:PORT kept for resolution at spawn");
	ok(dsec_net_allow_parse("pypi", &pol, &err) == 0 && pol.n == 6 &&
	       !strcmp(pol.allow[5].name, "files.pythonhosted.org"),
	   "preset pypi: two names");
	ok(dsec_net_allow_parse("1.2.3.4/33", &pol, &err) < 0 && pol.n == 6,
	   "prefix 33 refused: %s", err.msg);
	ok(dsec_net_allow_parse("1.2.3.4:0", &pol, &err) < 0, "port 0 refused");
	ok(dsec_net_allow_parse("1.2.3.4:65536", &pol, &err) < 0, "port 65536 refused");
	ok(dsec_net_allow_parse("a b", &pol, &err) < 0 && strstr(err.msg, "ADDR"),
	   "junk refused: %s", err.msg);
	ok(dsec_net_allow_parse("host/24", &pol, &err) < 0, "a name with a prefix refused");
	ok(dsec_net_allow_parse("-x.example", &pol, &err) < 0, "a name starting with '-' refused");
	ok(dsec_net_allow_parse("", &pol, &err) < 0, "empty refused");

	/* canonical text: order kept, names unresolved */
	dsec_net_policy_canon(&pol, canon, sizeof(canon));
	ok(!strcmp(canon, "allow=192.0.2.10/32:80,192.0.2.0/24,0.0.0.0/0:53,pypi.org:443,pypi.org:"
			  "443,files.pythonhosted.org:443;rate=0"),
	   "canon: %s", canon);
	ok(dsec_net_policy_canon(&pol, canon, 8) > 8, "canon reports the length it needs");

	/* names resolve (localhost from /etc/hosts), addresses pass through */
	memset(&pol, 0, sizeof(pol));
	dsec_net_allow_parse("localhost:8080", &pol, &err);
	dsec_net_allow_parse("198.51.100.0/24", &pol, &err);
	dsec_net_allow_parse("localhost:9090", &pol, &err);
	rc = dsec_net_resolve(&pol, &res, hosts, sizeof(hosts), &err);
	ok(rc == 0 && res.n == 3 && res.allow[0].addr == 0x7f000001 && res.allow[0].port == 8080 &&
	       res.allow[1].prefix == 24 && res.allow[2].port == 9090,
	   "resolve localhost and keep the prefix");
	ok(!strcmp(hosts, "127.0.0.1 localhost\n"), "a hosts line per name and address, once: %s",
	   hosts);
	dsec_net_allow_parse("no-such-host.invalid", &pol, &err);
	ok(dsec_net_resolve(&pol, &res, NULL, 0, &err) < 0 &&
	       strstr(err.msg, "no-such-host.invalid"),
	   "an unknown name fails: %s", err.msg);

	/* rates: bits a second to bytes a second */
	ok(dsec_net_rate_parse("10mbit", &rate, &err) == 0 && rate == 1250000, "10mbit");
	ok(dsec_net_rate_parse("1g", &rate, &err) == 0 && rate == 125000000, "1g");
	ok(dsec_net_rate_parse("64k", &rate, &err) == 0 && rate == 8000, "64k");
	ok(dsec_net_rate_parse("1bit", &rate, &err) < 0 && err.errnum == ERANGE, "1bit too low");
	ok(dsec_net_rate_parse("200gbit", &rate, &err) < 0, "200gbit too high");
	ok(dsec_net_rate_parse("10mb", &rate, &err) < 0, "unknown unit refused");
	ok(dsec_net_rate_parse("fast", &rate, &err) < 0, "junk refused");

	/* the allocator: a /29 has .2 to .6 (.1 is the bridge, .7 broadcast) */
	ok(mkdtemp(dir) != NULL, "temp dir");
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	snprintf(path, sizeof(path), "%s/.lock", dir);
	lfd = open(path, O_RDWR | O_CREAT, 0600);
	ok(dsec_net_lease(dfd, lfd, 0x0a580000, 29, "sb-1\n", &a, &err) == 0 && a == 0x0a580002,
	   "first lease .2");
	ok(dsec_net_lease(dfd, lfd, 0x0a580000, 29, "sb-2\n", &b, &err) == 0 && b == 0x0a580003,
	   "next lease .3");
	snprintf(path, sizeof(path), "%s/10.88.0.2", dir);
	ok(dsec_read_file(AT_FDCWD, path, 64, &buf, &err) >= 0 && !strcmp(buf, "sb-1\n"),
	   "the lease holds its text");
	free(buf);
	for (int i = 0; i < 3; i++)
		dsec_net_lease(dfd, lfd, 0x0a580000, 29, "sb-x\n", &c, &err);
	ok(c == 0x0a580006, "fifth lease .6");
	ok(dsec_net_lease(dfd, lfd, 0x0a580000, 29, "sb-y\n", &c, &err) < 0 && err.errnum == ENOSPC,
	   "subnet full: %s", err.msg);
	unlink(path);
	ok(dsec_net_lease(dfd, lfd, 0x0a580000, 29, "sb-z\n", &c, &err) == 0 && c == 0x0a580002,
	   "a released address is reused");
	ok(lease_count(dir) == 5, "five leases");
	close(dfd);
	close(lfd);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	ok(system(path) == 0, "cleanup");
	return tap_done();
}
