/* Capability sets after dsec_caps_apply, read back from /proc/self/status and checked with
 * real calls that need a dropped capability; each call also runs without the drop (the
 * control) and must then work, or the check proves nothing. Runs as root in forked children;
 * the calls are harmless (chroot to "/", a device node in a private temporary directory, a
 * packet socket that is closed at once). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"
#include "tap.h"

static char dir[] = "/tmp/dsec-caps-XXXXXX";

/* One hex field of /proc/self/status ("CapEff"), or ~0 when missing. */
static uint64_t status_hex(const char *key)
{
	char line[256];
	uint64_t v = ~0ULL;
	size_t n = strlen(key);
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			v = strtoull(line + n + 1, NULL, 16);
	if (f)
		fclose(f);
	return v;
}

struct probe_result {
	uint64_t inh, prm, eff, bnd, amb, exec_eff;
	int uid, chroot_rc, mknod_rc, packet_rc, apply_rc;
	char msg[DSEC_ERR_MSG_MAX];
};

static int errno_of(int rc)
{
	return rc < 0 ? errno : 0;
}

/* CapEff of a shell exec'd now, as root: what a sandbox's command starts with. */
static uint64_t exec_eff(void)
{
	char buf[64] = {0};
	int fds[2], st;
	pid_t pid;

	if (pipe(fds) < 0)
		return ~0ULL;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		execl("/bin/sh", "sh", "-c", "sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status",
		      (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	if (read(fds[0], buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	close(fds[0]);
	waitpid(pid, &st, 0);
	return buf[0] ? strtoull(buf, NULL, 16) : ~0ULL;
}

/* In a child: raise an ambient capability first (so clearing it is shown), apply caps unless
 * NULL, then look. */
static int probe(const struct dsec_caps *caps, struct probe_result *r)
{
	int fds[2], st;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		struct dsec_err err = {0};
		struct probe_result c = {0};
		char node[64];
		cap_t cur = cap_get_proc();
		cap_value_t kill = CAP_KILL;
		int fd;

		if (cur && cap_set_flag(cur, CAP_INHERITABLE, 1, &kill, CAP_SET) == 0 &&
		    cap_set_proc(cur) == 0)
			prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_KILL, 0, 0);
		cap_free(cur);
		c.apply_rc = caps ? dsec_caps_apply(caps, &err) : 0;
		memcpy(c.msg, err.msg, sizeof(c.msg));
		c.inh = status_hex("CapInh");
		c.prm = status_hex("CapPrm");
		c.eff = status_hex("CapEff");
		c.bnd = status_hex("CapBnd");
		c.amb = status_hex("CapAmb");
		c.exec_eff = exec_eff();
		c.uid = (int)getuid();
		snprintf(node, sizeof(node), "%s/null", dir);
		c.mknod_rc = errno_of(mknod(node, S_IFCHR | 0600, makedev(1, 3)));
		unlink(node);
		fd = socket(AF_PACKET, SOCK_DGRAM, 0);
		c.packet_rc = errno_of(fd);
		if (fd >= 0)
			close(fd);
		c.chroot_rc = errno_of(chroot("/")); /* last: it changes this child's root */
		_exit(write(fds[1], &c, sizeof(c)) == sizeof(c) ? 0 : 1);
	}
	close(fds[1]);
	if (read(fds[0], r, sizeof(*r)) != sizeof(*r))
		r->apply_rc = -2;
	close(fds[0]);
	waitpid(pid, &st, 0);
	return r->apply_rc;
}

/* As a sandbox's exec: in a user namespace of its own, holding every capability there. */
static int userns_apply(const struct dsec_caps *caps)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		struct dsec_err err;

		if (unshare(CLONE_NEWUSER) < 0 || dsec_caps_apply(caps, &err) < 0)
			_exit(1);
		_exit(status_hex("CapBnd") == dsec_caps_mask(caps) ? 0 : 2);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

static uint64_t bit(int c)
{
	return 1ULL << c;
}

int main(void)
{
	const uint64_t want = bit(CAP_CHOWN) | bit(CAP_DAC_OVERRIDE) | bit(CAP_FOWNER) |
			      bit(CAP_FSETID) | bit(CAP_KILL) | bit(CAP_SETGID) | bit(CAP_SETUID) |
			      bit(CAP_SETPCAP) | bit(CAP_NET_BIND_SERVICE) | bit(CAP_SETFCAP) |
			      bit(CAP_AUDIT_WRITE);
	struct dsec_caps *caps = NULL, *none = NULL, *c2 = NULL;
	struct dsec_err err = {0};
	struct probe_result r;
	static const struct {
		const char *list, *want;
	} bad[] = {{"sys_admin", "capability 'sys_admin': not in Docker's default set"},
		   {"chown,cap_sys_module", "capability 'cap_sys_module': not in Docker's"},
		   {"bogus", "capability 'bogus': unknown"},
		   {"", "empty or overlong name"},
		   {"chown,,kill", "empty or overlong name"},
		   {"chown,", "empty or overlong name"}};
	size_t i;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root\n");
		return 0;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	ok(dsec_caps_prepare(NULL, &caps, &err) == 0 && dsec_caps_mask(caps) == want,
	   "default set: %#" PRIx64, dsec_caps_mask(caps));
	ok(dsec_caps_mask(caps) == DSEC_CAPS_DEFAULT_MASK,
	   "caps-default.h (dsec-exec's front) holds the same set: %#llx", DSEC_CAPS_DEFAULT_MASK);

	ok(probe(NULL, &r) == 0, "control child ran");
	ok(r.chroot_rc == 0 && r.mknod_rc == 0 && r.packet_rc == 0,
	   "control (no drop): chroot, mknod of a device, packet socket all work (%d %d %d)",
	   r.chroot_rc, r.mknod_rc, r.packet_rc);
	ok(r.amb == bit(CAP_KILL), "control: the ambient capability was raised (%#" PRIx64 ")",
	   r.amb);

	ok(probe(caps, &r) == 0, "apply in a child: %s", r.msg);
	ok(r.eff == want && r.prm == want && r.bnd == want,
	   "effective, permitted and bounding = the kept set (%#" PRIx64 " %#" PRIx64 " %#" PRIx64
	   ")",
	   r.eff, r.prm, r.bnd);
	ok(r.inh == 0 && r.amb == 0, "inheritable and ambient empty (%#" PRIx64 " %#" PRIx64 ")",
	   r.inh, r.amb);
	ok(r.exec_eff == want, "root after execve holds the kept set, no more (%#" PRIx64 ")",
	   r.exec_eff);
	ok(r.uid == 0, "still uid 0");
	ok(r.chroot_rc == EPERM, "chroot: EPERM without CAP_SYS_CHROOT (%d)", r.chroot_rc);
	ok(r.mknod_rc == EPERM, "mknod of a device: EPERM without CAP_MKNOD (%d)", r.mknod_rc);
	ok(r.packet_rc == EPERM, "packet socket: EPERM without CAP_NET_RAW (%d)", r.packet_rc);

	ok(userns_apply(caps) == 0, "apply inside a new user namespace (the sandbox's case)");
	ok(dsec_caps_prepare("none", &none, &err) == 0 && dsec_caps_mask(none) == 0, "\"none\"");
	ok(probe(none, &r) == 0 && r.eff == 0 && r.bnd == 0 && r.exec_eff == 0,
	   "\"none\": no capability left, not even after exec (%#" PRIx64 ")", r.exec_eff);
	ok(dsec_caps_prepare("CHOWN,cap_kill", &c2, &err) == 0 &&
	       dsec_caps_mask(c2) == (bit(CAP_CHOWN) | bit(CAP_KILL)),
	   "names with or without cap_, any case: %s", err.msg);
	dsec_caps_free(c2);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c2 = NULL;
		memset(&err, 0, sizeof(err));
		ok(dsec_caps_prepare(bad[i].list, &c2, &err) == -1 && !c2 &&
		       strstr(err.msg, bad[i].want),
		   "refused '%s': %s", bad[i].list, err.msg);
	}
	ok(dsec_caps_apply(NULL, &err) == -1 && err.errnum == EINVAL, "apply(NULL) refused");
	dsec_caps_free(caps);
	dsec_caps_free(none);
	dsec_caps_free(NULL);
	rmdir(dir);
	return tap_done();
}
