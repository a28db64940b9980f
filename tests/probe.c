/* probe: a small static program run inside sandboxes to look at them from within. Each
 * subcommand prints one line on stdout and exits 0, or prints "error: ..." and exits 1.
 * Built with -static by the Makefile (build/tests/probe); tests copy it into a sandbox.
 *
 *   pid | ppid | uid | hostname | cwd | nnp | seccomp | fds | caps | mounts | cgroup | ns
 *   tty | env NAME | read PATH | write PATH [DATA] | syscall NAME | exit N | kill SIG
 *   sleep SECS | sleepers N (N background sleepers, each setsid and ignoring SIGTERM)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <termios.h>
#include <unistd.h>

static int fail(const char *what)
{
	printf("error: %s: %s\n", what, strerror(errno));
	return 1;
}

static int do_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int self, first = 1;

	if (!d)
		return fail("/proc/self/fd");
	self = dirfd(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == self)
			continue;
		printf("%s%s", first ? "" : " ", e->d_name);
		first = 0;
	}
	closedir(d);
	printf("\n");
	return 0;
}

static int do_caps(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct c[2];
	unsigned long long bnd = 0, amb = 0;
	int i;

	if (syscall(SYS_capget, &h, c) < 0)
		return fail("capget");
	for (i = 0; i < 64; i++) {
		int r = prctl(PR_CAPBSET_READ, i, 0, 0, 0);
		if (r < 0)
			break;
		if (r)
			bnd |= 1ULL << i;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, i, 0, 0) == 1)
			amb |= 1ULL << i;
	}
#define CAP64(f) ((unsigned long long)c[1].f << 32 | c[0].f)
	printf("eff=%016llx prm=%016llx inh=%016llx bnd=%016llx amb=%016llx\n", CAP64(effective),
	       CAP64(permitted), CAP64(inheritable), bnd, amb);
	return 0;
}

/* Print a file's lines joined by sep, with field `field` (0 = whole line) of each. */
static int join_file(const char *path, int field, const char *sep)
{
	char line[4096];
	FILE *f = fopen(path, "r");
	int first = 1;

	if (!f)
		return fail(path);
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *tok = NULL;
		int i;

		line[strcspn(line, "\n")] = '\0';
		if (field) {
			for (i = 0; i < field; i++)
				tok = strsep(&p, " ");
			if (!tok)
				continue;
			p = tok;
		}
		printf("%s%s", first ? "" : sep, p);
		first = 0;
	}
	fclose(f);
	printf("\n");
	return 0;
}

static int do_ns(void)
{
	static const char *names[] = {"mnt", "pid", "uts", "ipc", "net", "user", "cgroup"};
	char path[64], buf[64];
	unsigned i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/ns/%s", names[i]);
		n = readlink(path, buf, sizeof(buf) - 1);
		buf[n < 0 ? 0 : n] = '\0';
		printf("%s%s", i ? " " : "", n < 0 ? "?" : buf);
	}
	printf("\n");
	return 0;
}

static int do_tty(void)
{
	struct winsize ws = {0};
	char *name = ttyname(0);

	if (!isatty(0)) {
		printf("notty\n");
		return 0;
	}
	ioctl(0, TIOCGWINSZ, &ws);
	printf("%s %u %u\n", name ? name : "?", ws.ws_row, ws.ws_col);
	return 0;
}

/* Try a syscall with harmless arguments; print "ok" or the errno name. */
static int do_syscall(const char *name)
{
	long r;

	errno = 0;
	if (!strcmp(name, "mount"))
		r = mount("none", "/tmp", "tmpfs", 0, NULL);
	else if (!strcmp(name, "umount"))
		r = umount2("/proc", MNT_DETACH);
	else if (!strcmp(name, "unshare"))
		r = unshare(CLONE_NEWNS);
	else if (!strcmp(name, "unshare-user"))
		r = unshare(CLONE_NEWUSER);
	else if (!strcmp(name, "chroot"))
		r = chroot("/");
	else if (!strcmp(name, "ptrace"))
		r = syscall(SYS_ptrace, 0x4206 /* PTRACE_SEIZE */, 1, 0, 0);
	else if (!strcmp(name, "setns"))
		r = syscall(SYS_setns, -1, 0);
	else if (!strcmp(name, "keyctl"))
		r = syscall(SYS_keyctl, 0, 0, 0, 0, 0);
	else if (!strcmp(name, "add_key"))
		r = syscall(SYS_add_key, "user", "probe", "x", 1, -3);
	else if (!strcmp(name, "bpf"))
		r = syscall(SYS_bpf, 0, NULL, 0);
	else if (!strcmp(name, "perf_event_open"))
		r = syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
	else if (!strcmp(name, "userfaultfd"))
		r = syscall(SYS_userfaultfd, 0);
	else if (!strcmp(name, "init_module"))
		r = syscall(SYS_init_module, NULL, 0, "");
	else if (!strcmp(name, "kexec_load"))
		r = syscall(SYS_kexec_load, 0, 0, NULL, 0);
	else if (!strcmp(name, "reboot"))
		r = syscall(SYS_reboot, 0, 0, 0, NULL); /* bad magic: EINVAL when allowed */
	else if (!strcmp(name, "swapon"))
		r = syscall(SYS_swapon, "/nonexistent", 0);
	else if (!strcmp(name, "mknod"))
		r = mknod("/tmp/.probe-null", S_IFCHR | 0600, makedev(1, 3));
	else if (!strcmp(name, "sethostname"))
		r = sethostname("probe", 5);
	else if (!strcmp(name, "personality"))
		r = syscall(SYS_personality, 0xffffffff);
	else if (!strcmp(name, "getpid"))
		r = syscall(SYS_getpid);
	else {
		printf("error: unknown syscall %s\n", name);
		return 1;
	}
	if (!strcmp(name, "mknod") && r == 0)
		unlink("/tmp/.probe-null");
	if (r < 0)
		printf("%s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "E?");
	else
		printf("ok\n");
	return 0;
}

static int do_sleepers(int n)
{
	int i;

	for (i = 0; i < n; i++) {
		pid_t p = fork();

		if (p < 0)
			return fail("fork");
		if (p == 0) {
			int fd = open("/dev/null", O_RDWR);

			setsid();
			signal(SIGTERM, SIG_IGN);
			signal(SIGHUP, SIG_IGN);
			signal(SIGINT, SIG_IGN);
			if (fd >= 0) {
				dup2(fd, 0);
				dup2(fd, 1);
				dup2(fd, 2);
			}
			/* a grandchild too, so the tree is deeper than one level */
			if (fork() == 0)
				setsid();
			for (;;)
				pause();
		}
	}
	printf("%d\n", n);
	fflush(stdout);
	signal(SIGTERM, SIG_IGN);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	char buf[PATH_MAX];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(c, "pid"))
		printf("%d\n", getpid());
	else if (!strcmp(c, "ppid"))
		printf("%d\n", getppid());
	else if (!strcmp(c, "uid"))
		printf("%u:%u %u:%u\n", getuid(), getgid(), geteuid(), getegid());
	else if (!strcmp(c, "hostname"))
		return gethostname(buf, sizeof(buf)) < 0 ? fail("gethostname")
							 : printf("%s\n", buf),
		       0;
	else if (!strcmp(c, "cwd"))
		return getcwd(buf, sizeof(buf)) ? printf("%s\n", buf), 0 : fail("getcwd");
	else if (!strcmp(c, "nnp"))
		printf("%d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
	else if (!strcmp(c, "seccomp"))
		printf("%d\n", prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
	else if (!strcmp(c, "fds"))
		return do_fds();
	else if (!strcmp(c, "caps"))
		return do_caps();
	else if (!strcmp(c, "mounts"))
		return join_file("/proc/self/mounts", 2, " ");
	else if (!strcmp(c, "cgroup"))
		return join_file("/proc/self/cgroup", 0, " ");
	else if (!strcmp(c, "ns"))
		return do_ns();
	else if (!strcmp(c, "tty"))
		return do_tty();
	else if (!strcmp(c, "env") && argc > 2)
		printf("%s\n", getenv(argv[2]) ? getenv(argv[2]) : "(unset)");
	else if (!strcmp(c, "read") && argc > 2) {
		FILE *f = fopen(argv[2], "r");

		if (!f)
			return fail(argv[2]);
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
		buf[strcspn(buf, "\n")] = '\0';
		printf("%s\n", buf);
	} else if (!strcmp(c, "write") && argc > 2) {
		const char *data = argc > 3 ? argv[3] : "probe";
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd < 0 || write(fd, data, strlen(data)) < 0 || close(fd) < 0)
			return fail(argv[2]);
		printf("ok\n");
	} else if (!strcmp(c, "syscall") && argc > 2)
		return do_syscall(argv[2]);
	else if (!strcmp(c, "exit") && argc > 2)
		return atoi(argv[2]);
	else if (!strcmp(c, "kill") && argc > 2) {
		signal(atoi(argv[2]), SIG_DFL);
		kill(getpid(), atoi(argv[2]));
		return fail("still alive");
	} else if (!strcmp(c, "sleep") && argc > 2)
		sleep((unsigned)atoi(argv[2]));
	else if (!strcmp(c, "sleepers") && argc > 2)
		return do_sleepers(atoi(argv[2]));
	else {
		fprintf(stderr,
			"usage: probe pid|ppid|uid|hostname|cwd|nnp|seccomp|fds|caps|mounts|"
			"cgroup|ns|tty|env N|read P|write P [D]|syscall N|exit N|kill S|"
			"sleep S|sleepers N\n");
		return 2;
	}
	return 0;
}
