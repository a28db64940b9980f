/* probe: a small static program run inside sandboxes to look at them from within. Each
 * subcommand prints one line on stdout and exits 0, or prints "error: ..." and exits 1.
 * Built with -static by the Makefile (build/tests/probe); tests copy it into a sandbox.
 *
 *   pid | ppid | uid | hostname | cwd | nnp | seccomp | landlock-abi | fds | caps | mounts
 *   cgroup | ns
 *   tty | env NAME | read PATH | write PATH [DATA] | syscall NAME | exit N | kill SIG
 *   sleep SECS | sleepers N (N background sleepers, each setsid and ignoring SIGTERM)
 *   open PATH MODE | reopen PATH MODE (O_PATH, then again through /proc/self/fd: the
 *     CVE-2019-5736 trick; MODE r w rw dir) | chdir DIR CMD... (chdir, then run another
 *     subcommand) | ls DIR | procscan (what every other visible process gives away)
 *   watch SECS (count dsec-* processes seen and whose cwd, fd, exe or root opened) | decoy
 *   nswatch SECS (open each next pid's mountinfo and net/dev at its birth: count those seen
 *     and those showing other mounts or interfaces than ours)
 *   ptsopen [mine] (open every /dev/pts/N by its name: "N:ok" or "N:ERRNO" each; with mine,
 *     a pty of our own first)
 *   ioctl tiocsti|tioclinux | serve-unix NAME SECS | serve-tcp PORT SECS | connect-unix NAME
 *   connect-tcp PORT | tcp-fill SECS (queue unread data on loopback connections, print the
 *   MiB queued, hold them SECS) | inflight SECS (descriptors in flight over a unix socket
 *   until refused, print how many, hold them SECS) | ipc KEY create|find | shm NAME create|find | alloc MB | forks N
 *   fill PATH MB | files DIR N | inotify SECS (open inotify instances until refused, print how
 *   many, hold them SECS) | nsowner PATH (the owner uid of the user namespace at PATH)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <linux/nsfs.h>
#include <sys/inotify.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
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
	else if (!strcmp(name, "uevent")) { /* a listener for the kernel's device events */
		r = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
		if (r >= 0)
			close((int)r);
	} else if (!strcmp(name, "clone-parent")) { /* a sibling; it exits at once */
		r = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
		if (r == 0)
			_exit(0);
	} else if (!strcmp(name, "chroot"))
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
	else if (!strcmp(name, "io_setup")) { /* one AIO context of one event, let go at once */
		unsigned long ctx = 0;

		r = syscall(SYS_io_setup, 1, &ctx);
		if (r == 0)
			syscall(SYS_io_destroy, ctx);
	} else {
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

static const char *ename(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "E?";
}

/* "ok" or the errno name of the last failure, for one-word results. */
static const char *res(int r)
{
	return r < 0 ? ename(errno) : "ok";
}

static int mode_flags(const char *m)
{
	if (!strcmp(m, "w"))
		return O_WRONLY;
	if (!strcmp(m, "rw"))
		return O_RDWR;
	if (!strcmp(m, "dir"))
		return O_RDONLY | O_DIRECTORY;
	if (!strcmp(m, "path"))
		return O_PATH;
	return O_RDONLY;
}

static int do_open(const char *path, const char *mode, int reopen)
{
	char via[64];
	int fd, fd2;

	fd = open(path, reopen ? O_PATH | O_CLOEXEC : mode_flags(mode) | O_CLOEXEC);
	if (fd < 0 || !reopen) {
		printf("%s\n", res(fd));
		return 0;
	}
	snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
	fd2 = open(via, mode_flags(mode) | O_CLOEXEC);
	printf("%s\n", res(fd2));
	return 0;
}

static int do_ls(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int first = 1;

	if (!d)
		return fail(dir);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		printf("%s%s", first ? "" : " ", e->d_name);
		first = 0;
	}
	closedir(d);
	printf("\n");
	return 0;
}

/* Compare what path leads to with our own root: "same" when it is our root, else "other". */
static const char *where(const char *path)
{
	struct stat a, b;

	if (stat(path, &a) < 0)
		return ename(errno);
	if (stat("/", &b) < 0)
		return "E?";
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino ? "same" : "other";
}

/* How many descriptors the fd directory path lists ("0" also when the kernel hides them),
 * else why not. Static storage. */
static const char *fd_list(const char *path)
{
	static char n[16];
	DIR *d = opendir(path);
	struct dirent *e;
	int k = 0;

	if (!d)
		return ename(errno);
	errno = 0;
	while ((e = readdir(d)))
		k += e->d_name[0] != '.';
	closedir(d);
	if (errno)
		return ename(errno);
	snprintf(n, sizeof(n), "%d", k);
	return n;
}

static void comm_of(const char *pid, char *buf, size_t n)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/comm", pid);
	buf[0] = '\0';
	f = fopen(path, "r");
	if (f) {
		if (!fgets(buf, (int)n, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
	if (!buf[0])
		snprintf(buf, n, "?");
}

/* For every other visible process: can its exe be read or written (directly and reopened
 * through an O_PATH descriptor), does its root or cwd lead elsewhere than our root, can its
 * fds be listed, can a file be written through its root? One line per process. */
static int do_procscan(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char self[16], path[512], comm[64], via[64];

	if (!d)
		return fail("/proc");
	snprintf(self, sizeof(self), "%d", getpid());
	while ((e = readdir(d))) {
		int fd, w, rw;
		const char *reopen_w = "-";

		if (e->d_name[0] < '1' || e->d_name[0] > '9' || !strcmp(e->d_name, self))
			continue;
		comm_of(e->d_name, comm, sizeof(comm));
		snprintf(path, sizeof(path), "/proc/%s/exe", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		printf("%s %s exe_r=%s", e->d_name, comm, res(fd));
		if (fd >= 0)
			close(fd);
		w = open(path, O_WRONLY | O_CLOEXEC);
		printf(" exe_w=%s", res(w));
		if (w >= 0)
			close(w);
		fd = open(path, O_PATH | O_CLOEXEC);
		if (fd >= 0) {
			snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
			rw = open(via, O_WRONLY | O_CLOEXEC);
			reopen_w = res(rw);
			if (rw >= 0)
				close(rw);
			close(fd);
		} else
			reopen_w = ename(errno);
		printf(" exe_reopen_w=%s", reopen_w);
		snprintf(path, sizeof(path), "/proc/%s/root/", e->d_name);
		printf(" root=%s", where(path));
		snprintf(path, sizeof(path), "/proc/%s/cwd/", e->d_name);
		printf(" cwd=%s", where(path));
		snprintf(path, sizeof(path), "/proc/%s/fd", e->d_name);
		printf(" fd=%s", fd_list(path));
		snprintf(path, sizeof(path), "/proc/%s/root/.probe-%s", e->d_name, self);
		w = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		printf(" root_w=%s\n", res(w));
		if (w >= 0) {
			close(w);
			unlink(path);
		}
	}
	closedir(d);
	return 0;
}

/* 1 when the file fd is a regular file or a directory that is not what its own path names in
 * here: something of the host's, or of another root. */
static int foreign(int fd)
{
	char via[64], target[PATH_MAX];
	struct stat a, b;
	ssize_t n;

	if (fstat(fd, &a) < 0 || !(S_ISREG(a.st_mode) || S_ISDIR(a.st_mode)))
		return 0;
	snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
	n = readlink(via, target, sizeof(target) - 1);
	if (n <= 0)
		return 1;
	target[n] = '\0';
	return target[0] != '/' || stat(target, &b) < 0 || a.st_dev != b.st_dev ||
	       a.st_ino != b.st_ino;
}

/* Race the processes dsec starts in the sandbox (comm "dsec-*": before their exec, or a
 * copier of dsec-exec cp) for SECS seconds: count the ones seen, and the ones whose cwd,
 * root, exe or an open file could be opened and is foreign (see above). A foreign exe is
 * kept, and at the end reopened for writing through /proc/self/fd once the process has gone
 * (CVE-2019-5736). */
static int do_watch(int secs)
{
	time_t end = time(NULL) + secs;
	char self[16], path[512], comm[64], first[256] = "";
	unsigned long seen = 0, leaked = 0, exe_w = 0;
	int exes[64], nexe = 0, i;

	snprintf(self, sizeof(self), "%d", getpid());
	while (time(NULL) < end) {
		DIR *d = opendir("/proc");
		struct dirent *e;

		if (!d)
			return fail("/proc");
		while ((e = readdir(d))) {
			static const char *what[] = {"cwd", "root", "exe"};
			unsigned k;
			int hit = 0, fd;
			DIR *fds;
			struct dirent *f;

			if (e->d_name[0] < '1' || e->d_name[0] > '9' || !strcmp(e->d_name, self))
				continue;
			comm_of(e->d_name, comm, sizeof(comm));
			if (strncmp(comm, "dsec-", 5))
				continue;
			seen++;
			for (k = 0; k < 3; k++) {
				snprintf(path, sizeof(path), "/proc/%s/%s", e->d_name, what[k]);
				fd = open(path, O_PATH | O_CLOEXEC);
				if (fd < 0)
					continue;
				if (!foreign(fd)) {
					close(fd);
					continue;
				}
				if (k == 2 && nexe < 64)
					exes[nexe++] = fd;
				else
					close(fd);
				if (!first[0])
					snprintf(first, sizeof(first), " first=%s/%s", comm,
						 what[k]);
				hit = 1;
			}
			snprintf(path, sizeof(path), "/proc/%s/fd", e->d_name);
			fds = opendir(path);
			while (fds && (f = readdir(fds))) {
				char fp[1024];

				if (f->d_name[0] == '.')
					continue;
				snprintf(fp, sizeof(fp), "%s/%s", path, f->d_name);
				fd = open(fp, O_PATH | O_CLOEXEC);
				if (fd < 0)
					continue;
				if (foreign(fd)) {
					if (!first[0])
						snprintf(first, sizeof(first), " first=%s/fd",
							 comm);
					hit = 1;
				}
				close(fd);
			}
			if (fds)
				closedir(fds);
			leaked += hit;
		}
		closedir(d);
	}
	usleep(300000); /* let the processes finish: a running exe is ETXTBSY */
	for (i = 0; i < nexe; i++) {
		char via[64];
		int w;

		snprintf(via, sizeof(via), "/proc/self/fd/%d", exes[i]);
		w = open(via, O_WRONLY | O_CLOEXEC);
		if (w >= 0) {
			exe_w++;
			close(w);
		}
	}
	printf("seen=%lu leaked=%lu exe_w=%lu%s\n", seen, leaked, exe_w, first);
	return 0;
}

/* All of a /proc file, NUL-terminated, in buf (at most n - 1 bytes). -1 when unreadable. */
static ssize_t slurp(int fd, char *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n - 1 && (r = read(fd, buf + got, n - 1 - got)) > 0)
		got += (size_t)r;
	buf[got] = '\0';
	return got ? (ssize_t)got : -1;
}

/* The interface names of a net/dev, one per line in out (the counters change as we read). */
static void ifnames(const char *dev, char *out, size_t n)
{
	const char *p = strchr(dev, '\n');
	size_t k = 0;

	out[0] = '\0';
	while (p && (p = strchr(p + 1, '\n')) && p[1]) { /* two header lines */
		const char *name = p + 1, *colon = strchr(name, ':');

		if (!colon || k + (size_t)(colon - name) + 2 >= n)
			break;
		k += (size_t)snprintf(out + k, n - k, "%.*s\n", (int)(colon - name), name);
	}
}

/* Wait for each next pid of this namespace (ns_last_pid + 1) for SECS seconds and open its
 * mountinfo and net/dev the moment it exists: they show the namespaces it was in then, for
 * as long as they stay open. A process dsec starts here that is born before it has joined
 * the sandbox's mount and network namespaces shows the host's. */
static int do_nswatch(int secs)
{
	static char own_mi[1 << 16], own_if[4096], mi[1 << 16], dev[1 << 14], ifs[4096];
	time_t end = time(NULL) + secs;
	unsigned long seen = 0, leaked = 0;
	char path[64], num[32];
	int fd, next;

	fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || slurp(fd, own_mi, sizeof(own_mi)) < 0)
		return fail("/proc/self/mountinfo");
	close(fd);
	fd = open("/proc/self/net/dev", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || slurp(fd, dev, sizeof(dev)) < 0)
		return fail("/proc/self/net/dev");
	close(fd);
	ifnames(dev, own_if, sizeof(own_if));
	next = 0;
	while (time(NULL) < end) {
		int mfd, nfd, last;

		fd = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || slurp(fd, num, sizeof(num)) < 0)
			return fail("/proc/sys/kernel/ns_last_pid");
		close(fd);
		last = atoi(num);
		if (!next || last < next) { /* not born yet */
			next = next ? next : last + 1;
			continue;
		}
		if (last > next) /* missed some: the newest */
			next = last;
		snprintf(path, sizeof(path), "/proc/%d/mountinfo", next++);
		mfd = open(path, O_RDONLY | O_CLOEXEC);
		if (mfd < 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/net/dev", next - 1);
		nfd = open(path, O_RDONLY | O_CLOEXEC);
		if (slurp(mfd, mi, sizeof(mi)) > 0) { /* else gone before it showed anything */
			seen++;
			if (nfd >= 0 && slurp(nfd, dev, sizeof(dev)) > 0)
				ifnames(dev, ifs, sizeof(ifs));
			else
				snprintf(ifs, sizeof(ifs), "%s", own_if);
			leaked += strcmp(mi, own_mi) || strcmp(ifs, own_if);
		}
		close(mfd);
		if (nfd >= 0)
			close(nfd);
		next++;
	}
	printf("seen=%lu leaked=%lu\n", seen, leaked);
	return 0;
}

/* Open each /dev/pts/N by name, read and write, as a process lying in wait for another
 * command's terminal would; with mine, a pty of our own is made first (the control: one made
 * in here is open to any process here). One line: "N:ok" or "N:ERRNO" for each. */
static int do_ptsopen(int mine)
{
	char line[1024] = "", path[300];
	struct dirent *e;
	DIR *d;
	int own = -1;

	if (mine &&
	    ((own = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || unlockpt(own) < 0))
		return fail("/dev/ptmx");
	d = opendir("/dev/pts");
	if (!d)
		return fail("/dev/pts");
	while ((e = readdir(d))) {
		size_t k = strlen(line);
		int fd;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/dev/pts/%s", e->d_name);
		fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		snprintf(line + k, sizeof(line) - k, "%s%s:%s", k ? " " : "", e->d_name,
			 fd >= 0 ? "ok" : ename(errno));
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
	if (own >= 0)
		close(own);
	printf("%s\n", line[0] ? line : "none");
	return 0;
}

/* The positive control of watch: a process named like one of dsec's that keeps whatever
 * descriptors it was given, with every capability dropped (as dumpable and as weak as the
 * sandbox's own processes, so they can look into it). */
static int do_decoy(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct c[2];

	memset(c, 0, sizeof(c));
	prctl(PR_SET_NAME, "dsec-exec", 0, 0, 0);
	if (syscall(SYS_capset, &h, c) < 0)
		return fail("capset");
	printf("decoy %d\n", getpid());
	fflush(stdout);
	for (;;)
		pause();
}

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static int do_ioctl(const char *what)
{
	int r;

	if (!strcmp(what, "tiocsti")) {
		char c = '\n';

		r = ioctl(0, TIOCSTI, &c);
	} else if (!strcmp(what, "tioclinux")) {
		char sub = 6; /* TIOCL_GETSHIFTSTATE: reads only */

		r = ioctl(0, TIOCLINUX, &sub);
	} else {
		printf("error: unknown ioctl %s\n", what);
		return 1;
	}
	printf("%s\n", res(r));
	return 0;
}

/* Accept and close connections on fd for secs seconds. */
static int serve(int fd, int secs)
{
	time_t end = time(NULL) + secs;

	while (time(NULL) < end) {
		struct pollfd p = {fd, POLLIN, 0};

		if (poll(&p, 1, 200) > 0) {
			int c = accept(fd, NULL, NULL);

			if (c >= 0) {
				if (write(c, "hi\n", 3) < 0)
					(void)0;
				close(c);
			}
		}
	}
	return 0;
}

static socklen_t unix_addr(struct sockaddr_un *a, const char *name)
{
	size_t n = strlen(name);

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (n > sizeof(a->sun_path) - 1)
		n = sizeof(a->sun_path) - 1;
	memcpy(a->sun_path + 1, name, n); /* abstract: leading NUL */
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int do_serve_unix(const char *name, int secs)
{
	struct sockaddr_un a;
	socklen_t len = unix_addr(&a, name);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) < 0 || listen(fd, 16) < 0)
		return fail("abstract socket");
	printf("listening\n");
	fflush(stdout);
	return serve(fd, secs);
}

static int do_serve_tcp(int port, int secs)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return fail("tcp socket");
	printf("%d\n", ntohs(a.sin_port));
	fflush(stdout);
	return serve(fd, secs);
}

/* Queue data nobody reads on up to 64 loopback TCP connections, each written until it takes
 * no more (non-blocking): print the MiB queued, then hold them SECS. The buffers are socket
 * memory, charged to the sandbox's memory cgroup where the kernel accounts it. */
static int do_tcp_fill(int secs)
{
	static char buf[65536];
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	long long total = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 64) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &len) < 0)
		return fail("tcp listener");
	for (int i = 0; i < 64; i++) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ssize_t n;

		if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    accept4(lfd, NULL, NULL, SOCK_CLOEXEC) < 0)
			break;
		while ((n = send(c, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			total += n;
	}
	printf("%lld\n", total >> 20);
	fflush(stdout);
	sleep((unsigned)secs);
	return 0;
}

/* Put descriptors in flight over a unix socket nobody reads, 250 a message, until the kernel
 * refuses: print how many and why, then hold them SECS. The kernel counts them per host uid. */
static int do_inflight(int secs)
{
	int sv[2], fds[250];
	long n = 0;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
		return fail("socketpair");
	for (int i = 0; i < 250; i++)
		fds[i] = sv[0];
	for (;;) {
		char cbuf[CMSG_SPACE(sizeof(fds))], b = 0;
		struct iovec iov = {&b, 1};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(fds));
		memcpy(CMSG_DATA(cm), fds, sizeof(fds));
		if (sendmsg(sv[0], &mh, MSG_DONTWAIT) < 0)
			break;
		n += 250;
	}
	printf("%ld %s\n", n, ename(errno));
	fflush(stdout);
	sleep((unsigned)secs);
	return 0;
}

/* Connect, and read the greeting: "ok" only when the server answered. */
static int do_connect(int fd, struct sockaddr *a, socklen_t len)
{
	char buf[8];

	if (fd < 0 || connect(fd, a, len) < 0) {
		printf("%s\n", ename(errno));
		return 0;
	}
	printf("%s\n",
	       read(fd, buf, sizeof(buf)) == 3 && !memcmp(buf, "hi\n", 3) ? "ok" : "noanswer");
	return 0;
}

static int do_ipc(const char *key, const char *how)
{
	key_t k = (key_t)strtol(key, NULL, 0);
	int fl = !strcmp(how, "create") ? IPC_CREAT | 0600 : 0;
	int shm = shmget(k, 4096, fl), sem, msg;

	printf("shm=%s", res(shm));
	sem = semget(k, 1, fl);
	printf(" sem=%s", res(sem));
	msg = msgget(k, fl);
	printf(" msg=%s\n", res(msg));
	return 0;
}

static int do_shm(const char *name, const char *how)
{
	int fd = shm_open(name, !strcmp(how, "create") ? O_RDWR | O_CREAT : O_RDONLY, 0600);

	printf("%s\n", res(fd));
	return 0;
}

/* Allocate and touch mb MiB; print "ok" when all of it is there. */
static int do_alloc(long mb)
{
	size_t n = (size_t)mb << 20;
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t i;

	if (p == MAP_FAILED)
		return fail("mmap");
	for (i = 0; i < n; i += 4096)
		p[i] = 1;
	printf("ok %ld\n", mb);
	return 0;
}

/* Fork up to n children that wait; print how many there were and why it stopped. */
static int do_forks(int n)
{
	int k = 0, e = 0, p[2];

	if (pipe(p) < 0)
		return fail("pipe");
	for (; k < n; k++) {
		pid_t c = fork();

		if (c < 0) {
			e = errno;
			break;
		}
		if (c == 0) {
			char b;

			close(p[1]);
			if (read(p[0], &b, 1) < 0)
				(void)0;
			_exit(0);
		}
	}
	close(p[1]); /* every child's read returns: they go */
	while (wait(NULL) > 0)
		;
	printf("forked=%d err=%s\n", k, e ? ename(e) : "none");
	return 0;
}

/* Write up to mb MiB into path; print the MiB written and why it stopped. */
static int do_fill(const char *path, long mb)
{
	static char buf[1 << 20];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	long i = 0;
	int e = 0;

	if (fd < 0)
		return fail(path);
	memset(buf, 'x', sizeof(buf));
	for (; i < mb; i++) {
		size_t off = 0;

		while (off < sizeof(buf)) {
			ssize_t w = write(fd, buf + off, sizeof(buf) - off);

			if (w < 0) {
				e = errno;
				break;
			}
			off += (size_t)w;
		}
		if (e)
			break;
	}
	close(fd);
	printf("mb=%ld err=%s\n", i, e ? ename(e) : "none");
	return 0;
}

/* Create up to n empty files in dir; print how many and why it stopped. */
static int do_files(const char *dir, long n)
{
	char path[PATH_MAX];
	long i = 0;
	int e = 0;

	for (; i < n; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/f%ld", dir, i);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0) {
			e = errno;
			break;
		}
		close(fd);
	}
	printf("files=%ld err=%s\n", i, e ? ename(e) : "none");
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

/* Say how many of something were had (of at most 100000) and why no more, then keep them for
 * secs seconds. */
static int hold(int n, int secs)
{
	printf("%d %s\n", n, n < 100000 ? ename(errno) : "-");
	fflush(stdout);
	if (secs > 0)
		sleep((unsigned)secs);
	return 0;
}

static int do_inotify(int secs)
{
	int n = 0;

	while (n < 100000 && inotify_init1(IN_CLOEXEC) >= 0)
		n++;
	return hold(n, secs);
}

/* Open ptys (a master and its slave each) until refused; print the count and why; hold them. */
static int do_ptys(int secs)
{
	int n = 0, m;

	while (n < 100000 && (m = posix_openpt(O_RDWR | O_NOCTTY)) >= 0) {
		if (grantpt(m) < 0 || unlockpt(m) < 0 || open(ptsname(m), O_RDWR | O_NOCTTY) < 0)
			break;
		n++;
	}
	return hold(n, secs);
}

static int do_nsowner(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uid_t uid;

	if (fd < 0 || ioctl(fd, NS_GET_OWNER_UID, &uid) < 0)
		return fail(path);
	printf("%u\n", (unsigned)uid);
	close(fd);
	return 0;
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return dispatch(argc, argv);
}

static int dispatch(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	char buf[PATH_MAX];

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
	else if (!strcmp(c, "landlock-abi")) /* the kernel's Landlock ABI, -1 without */
		printf("%ld\n", syscall(444 /* landlock_create_ruleset */, NULL, 0, 1UL));
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
	else if (!strcmp(c, "open") && argc > 3)
		return do_open(argv[2], argv[3], 0);
	else if (!strcmp(c, "reopen") && argc > 3)
		return do_open(argv[2], argv[3], 1);
	else if (!strcmp(c, "chdir") && argc > 3) {
		if (chdir(argv[2]) < 0)
			return fail(argv[2]);
		return dispatch(argc - 2, argv + 2);
	} else if (!strcmp(c, "ls") && argc > 2)
		return do_ls(argv[2]);
	else if (!strcmp(c, "procscan"))
		return do_procscan();
	else if (!strcmp(c, "watch") && argc > 2)
		return do_watch(atoi(argv[2]));
	else if (!strcmp(c, "ptsopen"))
		return do_ptsopen(argc > 2 && !strcmp(argv[2], "mine"));
	else if (!strcmp(c, "nswatch") && argc > 2)
		return do_nswatch(atoi(argv[2]));
	else if (!strcmp(c, "decoy"))
		return do_decoy();
	else if (!strcmp(c, "ioctl") && argc > 2)
		return do_ioctl(argv[2]);
	else if (!strcmp(c, "serve-unix") && argc > 3)
		return do_serve_unix(argv[2], atoi(argv[3]));
	else if (!strcmp(c, "serve-tcp") && argc > 3)
		return do_serve_tcp(atoi(argv[2]), atoi(argv[3]));
	else if (!strcmp(c, "inflight") && argc > 2)
		return do_inflight(atoi(argv[2]));
	else if (!strcmp(c, "tcp-fill") && argc > 2)
		return do_tcp_fill(atoi(argv[2]));
	else if (!strcmp(c, "connect-unix") && argc > 2) {
		struct sockaddr_un a;
		socklen_t len = unix_addr(&a, argv[2]);

		return do_connect(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0),
				  (struct sockaddr *)&a, len);
	} else if (!strcmp(c, "connect-tcp") && argc > 2) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons((uint16_t)atoi(argv[2]))};

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return do_connect(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0),
				  (struct sockaddr *)&a, sizeof(a));
	} else if (!strcmp(c, "ipc") && argc > 3)
		return do_ipc(argv[2], argv[3]);
	else if (!strcmp(c, "shm") && argc > 3)
		return do_shm(argv[2], argv[3]);
	else if (!strcmp(c, "alloc") && argc > 2)
		return do_alloc(atol(argv[2]));
	else if (!strcmp(c, "forks") && argc > 2)
		return do_forks(atoi(argv[2]));
	else if (!strcmp(c, "fill") && argc > 3)
		return do_fill(argv[2], atol(argv[3]));
	else if (!strcmp(c, "files") && argc > 3)
		return do_files(argv[2], atol(argv[3]));
	else if (!strcmp(c, "inotify") && argc > 2)
		return do_inotify(atoi(argv[2]));
	else if (!strcmp(c, "ptys") && argc > 2)
		return do_ptys(atoi(argv[2]));
	else if (!strcmp(c, "nsowner") && argc > 2)
		return do_nsowner(argv[2]);
	else {
		fprintf(stderr,
			"usage: probe pid|ppid|uid|hostname|cwd|nnp|seccomp|fds|caps|mounts|"
			"cgroup|ns|tty|env N|read P|write P [D]|syscall N|exit N|kill S|"
			"sleep S|sleepers N|open P M|reopen P M|chdir D CMD..|ls D|procscan|"
			"watch S|decoy|ioctl tiocsti|tioclinux|serve-unix N S|serve-tcp P S|"
			"connect-unix N|connect-tcp P|ipc K create|find|shm N create|find|"
			"alloc MB|forks N|fill P MB|files D N|inotify S|nsowner P\n");
		return 2;
	}
	return 0;
}
