/* The default seccomp profile against real system calls, custom profiles, and bad profiles.
 *
 * Every denied call is made three times, each in a forked child: with the filter and dropped
 * capabilities (the sandbox's setup), with the filter alone (the filter, not the missing
 * capabilities, does the denying), and with neither (the control: the same call must then NOT
 * fail with EPERM, or the test proves nothing). So every call here must be harmless for a
 * process of host root without any filter: invalid magic numbers, NULL or invalid pointers,
 * paths that do not exist, a private pty, and private mount and UTS namespaces made first. */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <linux/reboot.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <linux/netlink.h>
#include <time.h>
#include <unistd.h>

#include "caps.h"
#include "seccomp.h"
#include "state.h"
#include "tap.h"

#define CLONE_DENIED_TEST                                                                          \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |             \
	 CLONE_NEWPID | CLONE_NEWNET | CLONE_PARENT)
#define NOPATH "/nonexistent-dsec-seccomp-probe"

static int pty = -1; /* the probe child's own pty (master side, then slave) */

#define R(x) ((x) < 0 ? errno : 0)

static int have_ia32 = 1; /* int 0x80 works here (not with ia32_emulation off) */

static void skip(const char *what, const char *why)
{
	printf("ok %d - %s # SKIP %s\n", ++tap_n, what, why);
}

/* clone(2) as fork with extra flags: the child leaves at once. */
static int clone_flags(unsigned long flags)
{
	long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);

	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return errno;
	waitpid((pid_t)pid, NULL, 0);
	return 0;
}

static int p_keyctl(void)
{
	return R(syscall(SYS_keyctl, 9999, 0, 0, 0, 0));
}
static int p_add_key(void)
{
	return R(syscall(SYS_add_key, NULL, NULL, NULL, 0, 0));
}
static int p_request_key(void)
{
	return R(syscall(SYS_request_key, NULL, NULL, NULL, 0));
}
static int p_mount(void)
{
	return R(mount("none", NOPATH, "tmpfs", 0, NULL));
}
static int p_umount2(void)
{
	return R(umount2(NOPATH, 0));
}
static int p_pivot_root(void)
{
	return R(syscall(SYS_pivot_root, NOPATH, NOPATH));
}
static int p_chroot(void)
{
	return R(chroot(NOPATH));
}
static int p_open_tree(void)
{
	return R(syscall(SYS_open_tree, -1, NOPATH, 0));
}
static int p_move_mount(void)
{
	return R(syscall(SYS_move_mount, -1, NOPATH, -1, NOPATH, 0));
}
static int p_fsopen(void)
{
	return R(syscall(SYS_fsopen, NULL, 0));
}
static int p_fsconfig(void)
{
	return R(syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0));
}
static int p_fsmount(void)
{
	return R(syscall(SYS_fsmount, -1, 0, 0));
}
static int p_fspick(void)
{
	return R(syscall(SYS_fspick, -1, NOPATH, 0));
}
static int p_mount_setattr(void)
{
	return R(syscall(SYS_mount_setattr, -1, NOPATH, 0, NULL, 0));
}
static int p_unshare_user(void)
{
	return R(unshare(CLONE_NEWUSER));
}
static int p_unshare_ns(void)
{
	return R(unshare(CLONE_NEWNS));
}
static int p_unshare_net(void)
{
	return R(unshare(CLONE_NEWNET));
}
static int p_clone_user(void)
{
	return clone_flags(CLONE_NEWUSER);
}
static int p_clone_pid(void)
{
	return clone_flags(CLONE_NEWPID);
}
static int p_clone_user_hi(void)
{
	return clone_flags(CLONE_NEWUSER | (1UL << 40));
}
static int p_clone3(void)
{
	return R(syscall(SYS_clone3, NULL, 0));
}
static int p_setns(void)
{
	return R(setns(-1, 0));
}
static int p_clock_settime(void)
{
	return R(syscall(SYS_clock_settime, CLOCK_REALTIME, NULL));
}
static int p_settimeofday(void)
{
	return R(syscall(SYS_settimeofday, NULL, NULL));
}
static int p_adjtimex(void)
{
	struct timex tx = {.modes = 0}; /* read only */
	return R(syscall(SYS_adjtimex, &tx));
}
static int p_clock_adjtime(void)
{
	struct timex tx = {.modes = 0};
	return R(syscall(SYS_clock_adjtime, CLOCK_REALTIME, &tx));
}
static int p_reboot(void)
{
	return R(syscall(SYS_reboot, 0, 0, LINUX_REBOOT_CMD_CAD_OFF, NULL));
}
static int p_init_module(void)
{
	return R(syscall(SYS_init_module, NULL, 0, ""));
}
static int p_finit_module(void)
{
	return R(syscall(SYS_finit_module, -1, "", 0));
}
static int p_delete_module(void)
{
	return R(syscall(SYS_delete_module, "dsec_no_such", O_NONBLOCK));
}
/* flag bits no kernel accepts, and an unknown arch: refused before anything is unloaded */
static int p_kexec_load(void)
{
	return R(syscall(SYS_kexec_load, 0, 0, NULL, 0x80008000UL));
}
static int p_kexec_file_load(void)
{
	return R(syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0x80000000UL));
}
static int p_open_by_handle_at(void)
{
	return R(syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, 0));
}
static int p_name_to_handle_at(void)
{
	return R(syscall(SYS_name_to_handle_at, AT_FDCWD, "/", NULL, NULL, 0));
}
static int p_bpf(void)
{
	return R(syscall(SYS_bpf, 0xffff, NULL, 0));
}
static int p_perf_event_open(void)
{
	return R(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
}
static int p_userfaultfd(void)
{
	return R(syscall(SYS_userfaultfd, 0x7fffffff));
}
static int p_io_uring_setup(void)
{
	return R(syscall(SYS_io_uring_setup, 0, NULL));
}
static int p_io_setup(void)
{
	unsigned long ctx = 0;
	int r = R(syscall(SYS_io_setup, 1, &ctx));

	if (r == 0)
		syscall(SYS_io_destroy, ctx);
	return r;
}
static int p_io_submit(void)
{
	/* no such context: EINVAL where the call is let through */
	return R(syscall(SYS_io_submit, 0UL, 0L, NULL)) == EINVAL ? 0 : errno;
}
static int p_io_uring_enter(void)
{
	return R(syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
}
static int p_io_uring_register(void)
{
	return R(syscall(SYS_io_uring_register, -1, 0, NULL, 0));
}
static int p_fanotify_init(void)
{
	return R(syscall(SYS_fanotify_init, 0xffffffffu, 0));
}
static int p_swapon(void)
{
	return R(syscall(SYS_swapon, NOPATH, 0));
}
static int p_swapoff(void)
{
	return R(syscall(SYS_swapoff, NOPATH));
}
static int p_acct(void)
{
	return R(syscall(SYS_acct, NOPATH));
}
static int p_iopl(void)
{
	return R(syscall(SYS_iopl, 4));
}
static int p_ioperm(void)
{
	return R(syscall(SYS_ioperm, 0x10000UL, 1UL, 1));
}
static int p_quotactl(void)
{
	return R(syscall(SYS_quotactl, 0, NULL, 0, NULL));
}
static int p_lookup_dcookie(void)
{
	return R(syscall(SYS_lookup_dcookie, 0, NULL, 0));
}
static int p_nfsservctl(void)
{
	return R(syscall(SYS_nfsservctl, 0, NULL, NULL));
}
static int p_personality_rie(void)
{
	return R(syscall(SYS_personality, READ_IMPLIES_EXEC));
}
static int p_personality_aslr(void)
{
	return R(syscall(SYS_personality, ADDR_NO_RANDOMIZE | (1UL << 32)));
}
static int p_ptrace(void)
{
	return R(syscall(SYS_ptrace, 0x7fff, getppid(), 0, 0));
}
static int p_process_vm_readv(void)
{
	return R(syscall(SYS_process_vm_readv, getpid(), NULL, 0, NULL, 0, 0));
}
static int p_process_vm_writev(void)
{
	return R(syscall(SYS_process_vm_writev, getpid(), NULL, 0, NULL, 0, 0));
}
static int p_kcmp(void)
{
	return R(syscall(SYS_kcmp, getpid(), getpid(), 1 /* KCMP_VM */, 0, 0));
}
static int p_pidfd_getfd(void)
{
	return R(syscall(SYS_pidfd_getfd, -1, 0, 0));
}
static int p_syslog(void)
{
	return R(syscall(SYS_syslog, 10 /* SIZE_BUFFER */, NULL, 0));
}
static int p_vhangup(void)
{
	return R(syscall(SYS_vhangup));
} /* no controlling tty: see probe_child */
static int p_uselib(void)
{
	return R(syscall(SYS_uselib, NULL));
}
static int p_ustat(void)
{
	return R(syscall(SYS_ustat, 0, NULL));
}
static int p_sysfs(void)
{
	return R(syscall(SYS_sysfs, 1, NULL));
}
static int p_create_module(void)
{
	return R(syscall(SYS_create_module, NULL, 0));
}
static int p_get_kernel_syms(void)
{
	return R(syscall(SYS_get_kernel_syms, NULL));
}
static int p_query_module(void)
{
	return R(syscall(SYS_query_module, NULL, 0, NULL, 0, NULL));
}
static int p_mbind(void)
{
	return R(syscall(SYS_mbind, NULL, 0, 0xdead, NULL, 0, 0));
}
static int p_set_mempolicy(void)
{
	return R(syscall(SYS_set_mempolicy, 0xdead, NULL, 0));
}
static int p_move_pages(void)
{
	return R(syscall(SYS_move_pages, 0, 0, NULL, NULL, NULL, 0));
}
static int p_sethostname(void)
{
	return R(sethostname("dsec-probe", 10));
} /* private UTS ns */
static int p_modify_ldt(void)
{
	char b[16];
	return R(syscall(SYS_modify_ldt, 0, b, sizeof(b)));
}
static int p_tiocsti(void)
{
	char c = 'x';
	return R(ioctl(pty, TIOCSTI, &c));
}
static int p_tiocsti_hi(void)
{
	char c = 'x';
	return R(syscall(SYS_ioctl, pty, (1UL << 32) | TIOCSTI, &c));
}
static int p_tiocsti_sext(void)
{
	char c = 'x';
	return R(syscall(SYS_ioctl, pty, 0xffffffff00000000UL | TIOCSTI, &c));
}
static int p_tioclinux(void)
{
	char c = 0;
	return R(ioctl(pty, TIOCLINUX, &c));
}
static int sock(int family, int type, int proto)
{
	int fd = socket(family, type, proto);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}
static int p_af_packet(void)
{
	return sock(AF_PACKET, SOCK_DGRAM, 0);
}
static int p_af_vsock(void)
{
	return sock(40 /* AF_VSOCK */, SOCK_STREAM, 0);
}
static int p_af_alg(void)
{
	return sock(38 /* AF_ALG */, SOCK_SEQPACKET, 0);
}
/* The i386 ABI through int 0x80, here from a 64-bit process: getpid is 20 there. */
static int p_i386_getpid(void)
{
	long ret;

	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
	return ret < 0 ? (int)-ret : 0;
}
static int p_x32_getpid(void)
{
	return R(syscall(0x40000000L | SYS_getpid));
}

/* What a sandbox must keep doing. */
static int p_file_io(void)
{
	char path[] = "/tmp/dsec-seccomp-XXXXXX", buf[4];
	int fd = mkstemp(path), rc = 0;

	if (fd < 0)
		return errno;
	if (write(fd, "abc", 3) != 3 || pread(fd, buf, 3, 0) != 3 || memcmp(buf, "abc", 3))
		rc = errno ? errno : EIO;
	close(fd);
	unlink(path);
	return rc;
}
static int p_fork(void)
{
	int st;
	pid_t pid = fork();

	if (pid == 0)
		_exit(3);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 3 ? 0 : EIO;
}
static void *thread_fn(void *arg)
{
	return arg;
}
static int p_thread(void)
{
	pthread_t t;
	void *r = NULL;
	int rc = pthread_create(&t, NULL, thread_fn, (void *)7);

	if (rc)
		return rc;
	pthread_join(t, &r);
	return r == (void *)7 ? 0 : EIO;
}
static int p_exec(void)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		execl("/bin/sh", "sh", "-c",
		      "cat /proc/self/status | grep -q '^Seccomp:' && exit 7", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : EIO;
}
static int p_tcp(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return errno;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0)
		rc = errno;
	close(fd);
	return rc;
}
static int p_inet6(void)
{
	return sock(AF_INET6, SOCK_DGRAM, 0);
}
static int p_unix(void)
{
	return sock(AF_UNIX, SOCK_STREAM, 0);
}
static int p_netlink(void)
{
	return sock(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
}
static int p_socketpair(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return errno;
	close(sv[0]);
	close(sv[1]);
	return 0;
}
static int p_winsz(void)
{
	struct winsize ws;

	if (ioctl(pty, TIOCGWINSZ, &ws) < 0)
		return errno;
	ws.ws_col = 100; /* TIOCSWINSZ shares every bit but three with TIOCSTI and TIOCLINUX */
	return R(ioctl(pty, TIOCSWINSZ, &ws));
}
static int p_fionread(void)
{
	int n;
	return R(ioctl(pty, FIONREAD, &n));
}
static int p_personality_query(void)
{
	return R(syscall(SYS_personality, 0xffffffffUL));
}
static int p_personality_linux(void)
{
	return R(syscall(SYS_personality, PER_LINUX));
}
static int p_unshare_files(void)
{
	return R(unshare(CLONE_FILES | CLONE_FS));
}
static int p_nnp(void)
{
	return prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) >= 0 ? 0 : errno;
}
static int p_time(void)
{
	struct timespec ts;
	char b[8];

	if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0 ||
	    nanosleep(&(struct timespec){0, 1000}, NULL) || getrandom(b, sizeof(b), 0) != sizeof(b))
		return errno;
	return 0;
}

#define DENY(f)                                                                                    \
	{                                                                                          \
#f, p_##f, EPERM                                                                   \
	}
#define OK(f)                                                                                      \
	{                                                                                          \
#f, p_##f, 0                                                                       \
	}
static const struct probe {
	const char *name;
	int (*fn)(void);
	int want; /* under the filter: 0 (works), EPERM or ENOSYS */
} probes[] = {DENY(keyctl),
	      DENY(add_key),
	      DENY(request_key),
	      DENY(mount),
	      DENY(umount2),
	      DENY(pivot_root),
	      DENY(chroot),
	      DENY(open_tree),
	      DENY(move_mount),
	      DENY(fsopen),
	      DENY(fsconfig),
	      DENY(fsmount),
	      DENY(fspick),
	      DENY(mount_setattr),
	      DENY(unshare_user),
	      DENY(unshare_ns),
	      DENY(unshare_net),
	      DENY(clone_user),
	      DENY(clone_pid),
	      DENY(clone_user_hi),
	      {"clone3", p_clone3, ENOSYS},
	      {"io_setup", p_io_setup, ENOSYS},
	      {"io_submit", p_io_submit, ENOSYS},
	      DENY(setns),
	      DENY(clock_settime),
	      DENY(settimeofday),
	      DENY(adjtimex),
	      DENY(clock_adjtime),
	      DENY(reboot),
	      DENY(init_module),
	      DENY(finit_module),
	      DENY(delete_module),
	      DENY(kexec_load),
	      DENY(kexec_file_load),
	      DENY(open_by_handle_at),
	      DENY(name_to_handle_at),
	      DENY(bpf),
	      DENY(perf_event_open),
	      DENY(userfaultfd),
	      DENY(io_uring_setup),
	      DENY(io_uring_enter),
	      DENY(io_uring_register),
	      DENY(fanotify_init),
	      DENY(swapon),
	      DENY(swapoff),
	      DENY(acct),
	      DENY(iopl),
	      DENY(ioperm),
	      DENY(quotactl),
	      DENY(lookup_dcookie),
	      DENY(nfsservctl),
	      DENY(personality_rie),
	      DENY(personality_aslr),
	      DENY(ptrace),
	      DENY(process_vm_readv),
	      DENY(process_vm_writev),
	      DENY(kcmp),
	      DENY(pidfd_getfd),
	      DENY(syslog),
	      DENY(vhangup),
	      DENY(uselib),
	      DENY(ustat),
	      DENY(sysfs),
	      DENY(create_module),
	      DENY(get_kernel_syms),
	      DENY(query_module),
	      DENY(mbind),
	      DENY(set_mempolicy),
	      DENY(move_pages),
	      DENY(sethostname),
	      DENY(modify_ldt),
	      DENY(tiocsti),
	      DENY(tiocsti_hi),
	      DENY(tiocsti_sext),
	      DENY(tioclinux),
	      DENY(af_packet),
	      DENY(af_vsock),
	      DENY(af_alg),
	      DENY(i386_getpid),
	      DENY(x32_getpid),
	      OK(file_io),
	      OK(fork),
	      OK(thread),
	      OK(exec),
	      OK(tcp),
	      OK(inet6),
	      OK(unix),
	      OK(netlink),
	      OK(socketpair),
	      OK(winsz),
	      OK(fionread),
	      OK(personality_query),
	      OK(personality_linux),
	      DENY(unshare_files),
	      OK(nnp),
	      OK(time)};
#define NPROBES (sizeof(probes) / sizeof(probes[0]))

enum mode { M_CONTROL, M_FILTER, M_BOTH };
static const char *const mode_name[] = {"no filter", "filter only", "caps + filter"};

struct result {
	int rc[NPROBES];
	long apply_ns;
	int setup_failed;
};

/* One probe in a child of its own, so a namespace or personality it makes does not leak into
 * the next one: its exit status carries the errno (0: the call worked). */
static int run_probe(const struct probe *p)
{
	int st;
	pid_t pid = fork();

	if (pid == 0)
		_exit(p->fn() & 0xff);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

/* The child for one mode: private namespaces for the calls that would reach the host's if the
 * filter were missing, a session of its own without controlling tty (vhangup), its own pty. */
static void probe_child(enum mode m, const struct dsec_seccomp *sc, const struct dsec_caps *caps,
			int out)
{
	struct result r = {0};
	struct dsec_err err;
	struct timespec t0, t1;
	size_t i;
	int master;

	if (setsid() < 0 || unshare(CLONE_NEWNS | CLONE_NEWUTS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || access(NOPATH, F_OK) == 0)
		r.setup_failed = 1;
	master = posix_openpt(O_RDWR | O_NOCTTY);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
	    (pty = open(ptsname(master), O_RDWR | O_NOCTTY)) < 0)
		r.setup_failed = 1;
	if (!r.setup_failed) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if ((m == M_BOTH && dsec_caps_apply(caps, &err) < 0) ||
		    (m != M_CONTROL && dsec_seccomp_apply(sc, &err) < 0))
			r.setup_failed = 2;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		r.apply_ns = (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec);
	}
	for (i = 0; !r.setup_failed && i < NPROBES; i++)
		r.rc[i] = run_probe(&probes[i]);
	if (write(out, &r, sizeof(r)) != sizeof(r))
		_exit(1);
	_exit(0);
}

static int run_mode(enum mode m, const struct dsec_seccomp *sc, const struct dsec_caps *caps,
		    struct result *r)
{
	int fds[2], st;
	pid_t pid;

	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		probe_child(m, sc, caps, fds[1]);
	}
	close(fds[1]);
	memset(r, 0, sizeof(*r));
	if (read(fds[0], r, sizeof(*r)) != sizeof(*r))
		r->setup_failed = 3;
	close(fds[0]);
	waitpid(pid, &st, 0);
	return r->setup_failed ? -1 : 0;
}

static const char *errname(int e)
{
	static char buf[32];

	if (e == 0)
		return "ok";
	if (e >= 1000) {
		snprintf(buf, sizeof(buf), "signal %d", e - 1000);
		return buf;
	}
	return strerrorname_np(e) ? strerrorname_np(e) : "?";
}

/* A profile from text: 0 and a loaded filter, or -1 and err. */
static int prep(const char *json, struct dsec_seccomp **sc, struct dsec_err *err)
{
	return dsec_seccomp_prepare_buf(json, strlen(json), "t.json", sc, err);
}

/* Apply sc in a child and return what fn gives there. */
static int in_child(const struct dsec_seccomp *sc, int (*fn)(void))
{
	int st;
	pid_t pid = fork();
	struct dsec_err err;

	if (pid == 0) {
		if (dsec_seccomp_apply(sc, &err) < 0)
			_exit(255);
		_exit(fn() & 0xff);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

static int p_getcwd(void)
{
	char b[256];
	return getcwd(b, sizeof(b)) ? 0 : errno;
}
static int p_getpid(void)
{
	return R(syscall(SYS_getpid));
}
static int p_uname(void)
{
	struct utsname u;
	return R(uname(&u));
}

static void custom_profiles(void)
{
	struct dsec_seccomp *sc = NULL;
	struct dsec_err err = {0};
	char path[] = "/tmp/dsec-seccomp-profile-XXXXXX";
	const char *json = "{\"comment\":\"test\",\"default\":\"allow\",\"rules\":["
			   "{\"names\":[\"getcwd\"],\"action\":\"errno\",\"errno\":13},"
			   "{\"names\":[\"getpid\"],\"action\":\"errno\",\"errno\":5,"
			   "\"args\":[{\"index\":0,\"op\":\"masked_eq\",\"mask\":\"0xff\","
			   "\"value\":0}]}]}";
	int fd = mkstemp(path);

	ok(fd >= 0 && write(fd, json, strlen(json)) == (ssize_t)strlen(json), "write a profile");
	close(fd);
	ok(dsec_seccomp_prepare(path, &sc, &err) == 0, "custom profile from a file loads: %s",
	   err.msg);
	ok(sc && in_child(sc, p_getcwd) == EACCES, "custom profile: getcwd -> EACCES as written");
	ok(sc && in_child(sc, p_getpid) == EIO, "custom profile: masked_eq argument rule applies");
	ok(sc && in_child(sc, p_mount) != EPERM, "custom profile: default allow, mount not EPERM");
	dsec_seccomp_free(sc);
	sc = NULL;
	unlink(path);

	ok(prep("{\"base\":\"default\",\"rules\":[{\"names\":[\"ptrace\",\"process_vm_readv\"],"
		"\"action\":\"allow\"},{\"names\":[\"uname\"],\"action\":\"errno\",\"errno\":22}]}",
		&sc, &err) == 0,
	   "profile on the default base loads: %s", err.msg);
	ok(sc && in_child(sc, p_ptrace) != EPERM && in_child(sc, p_process_vm_readv) == 0,
	   "base default + allow ptrace: ptrace and process_vm_readv allowed");
	ok(sc && in_child(sc, p_keyctl) == EPERM && in_child(sc, p_mount) == EPERM,
	   "base default + allow ptrace: the rest of the default still denies");
	ok(sc && in_child(sc, p_uname) == EINVAL,
	   "a file rule replaces the base's rule for that call (uname -> EINVAL)");
	dsec_seccomp_free(sc);
	sc = NULL;

	ok(prep(
	       "{\"default\":\"errno\",\"errno\":38,\"arches\":[\"x86_64\",\"x86\"],\"rules\":"
	       "[{\"names\":[\"exit_group\",\"exit\",\"getpid\",\"uname\"],\"action\":\"allow\"}]}",
	       &sc, &err) == 0,
	   "profile with extra arches loads: %s", err.msg);
	if (have_ia32)
		ok(sc && in_child(sc, p_i386_getpid) == 0, "arches x86: i386 getpid allowed");
	else
		skip("arches x86: i386 getpid allowed", "no i386 emulation in this kernel");
	ok(sc && in_child(sc, p_getcwd) == ENOSYS, "default errno 38: getcwd -> ENOSYS");
	dsec_seccomp_free(sc);
	sc = NULL;
	ok(prep("{\"default\":\"allow\",\"rules\":[{\"names\":[\"mseal\",\"statmount\"],"
		"\"action\":\"errno\"}]}",
		&sc, &err) == 0,
	   "calls newer than libseccomp's tables can be named: %s", err.msg);
	dsec_seccomp_free(sc);
}

static void bad_profiles(void)
{
	static const struct {
		const char *json, *want;
	} bad[] = {
	    {"", "line 1 column 0"},
	    {"{\"default\":\"allow\",", "line 1"},
	    {"[]", "must be a JSON object"},
	    {"{\"default\":\"allow\",\"default\":\"allow\"}", "duplicate"},
	    {"{\"rules\":[]}", "default: missing"},
	    {"{\"default\":\"deny\"}", "default: unknown action 'deny'"},
	    {"{\"default\":\"allow\",\"errno\":1}", "\"errno\" only goes with action \"errno\""},
	    {"{\"default\":\"errno\",\"errno\":0}", "errno must be an integer 1..4095"},
	    {"{\"default\":\"errno\",\"errno\":\"1\"}", "errno must be an integer 1..4095"},
	    {"{\"default\":\"allow\",\"rulez\":[]}", "profile: unknown member 'rulez'"},
	    {"{\"default\":\"allow\",\"rules\":{}}", "rules: must be an array"},
	    {"{\"default\":\"allow\",\"rules\":[1]}", "rules[0]: must be an object"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":\"read\",\"action\":\"allow\"}]}",
	     "rules[0].names: must be an array of 1..1024 strings"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[],\"action\":\"allow\"}]}",
	     "rules[0].names: must be an array"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\",\"fooo\"],\"action\":"
	     "\"errno\"}]}",
	     "rules[0].names[1]: unknown system call 'fooo'"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\",7],\"action\":\"errno\"}]}",
	     "rules[0].names[1]: must be a system call name"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\"]}]}",
	     "rules[0].action: missing"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\"],\"action\":\"errno\","
	     "\"errno\":99999}]}",
	     "rules[0].action: errno must be an integer 1..4095"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\"],\"action\":\"errno\","
	     "\"args\":[{\"index\":6,\"op\":\"eq\",\"value\":1}]}]}",
	     "rules[0].args[0].index: must be an integer 0..5"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\"],\"action\":\"errno\","
	     "\"args\":[{\"index\":0,\"op\":\"like\",\"value\":1}]}]}",
	     "rules[0].args[0].op: unknown operator 'like'"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\"],\"action\":\"errno\","
	     "\"args\":[{\"index\":0,\"op\":\"eq\",\"value\":-1}]}]}",
	     "rules[0].args[0].value: must be a non-negative integer"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\"],\"action\":\"errno\","
	     "\"args\":[{\"index\":0,\"op\":\"eq\",\"value\":\"0x1g\"}]}]}",
	     "rules[0].args[0].value: must be a non-negative integer"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\"],\"action\":\"errno\","
	     "\"args\":[{\"index\":0,\"op\":\"eq\",\"value\":1,\"mask\":1}]}]}",
	     "rules[0].args[0].mask: required with masked_eq, only there"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\"],\"action\":\"errno\","
	     "\"args\":[{\"index\":0,\"op\":\"eq\",\"value\":1},{\"index\":0,\"op\":\"eq\","
	     "\"value\":2}]}]}",
	     "each argument may be compared once per rule"},
	    {"{\"default\":\"errno\",\"rules\":[{\"names\":[\"read\"],\"action\":\"allow\"},"
	     "{\"names\":[\"read\"],\"action\":\"kill\",\"args\":[{\"index\":0,\"op\":\"eq\","
	     "\"value\":9}]}]}",
	     "rules[1].names[0]: 'read': conflicts with an earlier rule"},
	    {"{\"base\":\"default\",\"default\":\"allow\"}", "come from the base profile"},
	    {"{\"default\":\"allow\",\"arches\":[\"x86\"],\"rules\":[{\"names\":[\"mseal\"],"
	     "\"action\":\"errno\"}]}",
	     "'mseal': newer than this libseccomp, usable for the native architecture only"},
	    {"{\"base\":\"other\"}", "base: must be \"default\" or \"none\""},
	    {"{\"default\":\"allow\",\"arches\":[\"vax\"]}", "arches[0]: unknown architecture"},
	    {"{\"default\":\"allow\",\"rules\":[{\"names\":[\"read\"],\"action\":\"allow\","
	     "\"extra\":1}]}",
	     "rules[0]: unknown member 'extra'"},
	};
	struct dsec_seccomp *sc;
	struct dsec_err err;
	char *huge;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		sc = NULL;
		ok(prep(bad[i].json, &sc, &err) == -1 && !sc && strstr(err.msg, bad[i].want) &&
		       !strchr(err.msg, '\n') &&
		       !strncmp(err.msg, "seccomp profile 't.json': ", 26),
		   "bad profile %zu: %s", i, err.msg);
	}
	ok(dsec_seccomp_prepare("/nonexistent/p.json", &sc, &err) == -1 &&
	       strstr(err.msg, "seccomp profile '/nonexistent/p.json': No such file"),
	   "missing file: %s", err.msg);
	ok(dsec_seccomp_prepare("/tmp", &sc, &err) == -1 && strstr(err.msg, "not a regular file"),
	   "directory: %s", err.msg);
	huge = malloc(DSEC_SECCOMP_MAX_FILE + 2);
	memset(huge, ' ', DSEC_SECCOMP_MAX_FILE + 1);
	huge[DSEC_SECCOMP_MAX_FILE + 1] = 0;
	ok(prep(huge, &sc, &err) == -1 && strstr(err.msg, "larger than"), "huge: %s", err.msg);
	free(huge);
	ok(dsec_seccomp_apply(NULL, &err) == -1 && err.errnum == EINVAL, "apply(NULL) refused");
}

/* Time f in a fresh child (where dsec-exec calls it), in ns. */
static long time_child(int (*f)(const void *), const void *arg)
{
	struct timespec t0, t1;
	int fds[2];
	long ns = -1;
	pid_t pid;

	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (f(arg) < 0)
			_exit(1);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ns = (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec);
		_exit(write(fds[1], &ns, sizeof(ns)) == sizeof(ns) ? 0 : 1);
	}
	close(fds[1]);
	if (read(fds[0], &ns, sizeof(ns)) != sizeof(ns))
		ns = -1;
	close(fds[0]);
	waitpid(pid, NULL, 0);
	return ns;
}

static int apply_filter(const void *sc)
{
	struct dsec_err err;
	return dsec_seccomp_apply(sc, &err);
}

static int apply_caps(const void *caps)
{
	struct dsec_err err;
	return dsec_caps_apply(caps, &err);
}

/* The smallest filter there is (allow everything), loaded the same way: the kernel's fixed
 * cost of attaching any filter, to tell it from the cost of ours. */
static int apply_trivial(const void *unused)
{
	struct sock_filter insn = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {1, &insn};

	(void)unused;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

static int cmp_long(const void *a, const void *b)
{
	return *(const long *)a < *(const long *)b ? -1 : *(const long *)a > *(const long *)b;
}

static long median_us(int (*f)(const void *), const void *arg)
{
	long v[7];
	int i;

	for (i = 0; i < 7; i++)
		v[i] = time_child(f, arg);
	qsort(v, 7, sizeof(v[0]), cmp_long);
	return v[0] < 0 ? -1 : v[3] / 1000;
}

static void timing(const struct dsec_seccomp *sc, const struct dsec_caps *caps)
{
	long ours = median_us(apply_filter, sc), base = median_us(apply_trivial, NULL);
	long capsus = median_us(apply_caps, caps);

	printf("# median of 7, in a forked child: filter apply %ld us (1-instruction filter: %ld "
	       "us), caps apply %ld us\n",
	       ours, base, capsus);
	ok(ours >= 0 && base >= 0 && capsus >= 0, "apply works in a forked child");
	/* The budget is 1 ms for all of exec. Here (syscalls cost ~5 us in this VM) attaching
	 * even a 1-instruction filter takes about 0.5 ms, and other jobs on the machine make
	 * single runs noisy: so check only that ours costs the same order as the smallest filter,
	 * which a pathological filter (thousands of instructions, a linear scan) would not. */
	ok(ours < 1000 || ours < 5 * base + 1000,
	   "filter apply costs about the kernel's fixed cost (%ld us, trivial %ld us)", ours, base);
}

/* A classic-BPF interpreter for what libseccomp emits, to run the compiled default filter over
 * cases the kernel here cannot show (the i386 ABI when its emulation is off) and over many
 * argument values. Returns the filter's verdict, or 0xdeadbeef for anything unexpected. */
static uint32_t run_bpf(const struct sock_fprog *p, const struct seccomp_data *d)
{
	uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = {0};
	unsigned pc;

	for (pc = 0; pc < p->len; pc++) {
		const struct sock_filter *f = &p->filter[pc];

		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (f->k > sizeof(*d) - 4 || f->k % 4)
				return 0xdeadbeef;
			memcpy(&A, (const char *)d + f->k, 4);
			break;
		case BPF_LD | BPF_IMM:
			A = f->k;
			break;
		case BPF_LDX | BPF_IMM:
			X = f->k;
			break;
		case BPF_LD | BPF_MEM:
			A = M[f->k % BPF_MEMWORDS];
			break;
		case BPF_LDX | BPF_MEM:
			X = M[f->k % BPF_MEMWORDS];
			break;
		case BPF_ST:
			M[f->k % BPF_MEMWORDS] = A;
			break;
		case BPF_STX:
			M[f->k % BPF_MEMWORDS] = X;
			break;
		case BPF_ALU | BPF_AND | BPF_K:
			A &= f->k;
			break;
		case BPF_ALU | BPF_AND | BPF_X:
			A &= X;
			break;
		case BPF_ALU | BPF_OR | BPF_K:
			A |= f->k;
			break;
		case BPF_MISC | BPF_TAX:
			X = A;
			break;
		case BPF_MISC | BPF_TXA:
			A = X;
			break;
		case BPF_JMP | BPF_JA:
			pc += f->k;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += A == f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGT | BPF_K:
			pc += A > f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			pc += A >= f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			pc += A & f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JEQ | BPF_X:
			pc += A == X ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGT | BPF_X:
			pc += A > X ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGE | BPF_X:
			pc += A >= X ? f->jt : f->jf;
			break;
		case BPF_RET | BPF_K:
			return f->k;
		case BPF_RET | BPF_A:
			return A;
		default:
			return 0xdeadbeef;
		}
	}
	return 0xdeadbeef;
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static uint32_t verdict(const struct sock_fprog *p, uint32_t arch, int nr, uint64_t a0, uint64_t a1)
{
	struct seccomp_data d = {.nr = nr, .arch = arch, .args = {a0, a1}};

	return run_bpf(p, &d);
}

#define ALLOW SECCOMP_RET_ALLOW
#define EPERM_RET (SECCOMP_RET_ERRNO | EPERM)

/* The default filter through the interpreter: ABIs, and argument checks against their
 * definition over edge cases and 200000 random values each. */
static void bpf_properties(const struct dsec_seccomp *sc)
{
	const struct sock_fprog *p = dsec_seccomp_prog(sc);
	const uint32_t X64 = AUDIT_ARCH_X86_64;
	static const uint32_t fam_ok[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
	static const uint32_t pers_ok[] = {0, 8, 0x20000, 0x20008, 0xffffffff};
	int bad_ioctl = 0, bad_clone = 0, bad_socket = 0, bad_pers = 0, i, j;
	uint64_t v;
	uint32_t lo, want;

	ok(verdict(p, X64, SYS_getpid, 0, 0) == ALLOW, "bpf: x86_64 getpid allowed");
	ok(verdict(p, X64, SYS_keyctl, 0, 0) == EPERM_RET, "bpf: x86_64 keyctl EPERM");
	ok(verdict(p, X64, SYS_clone3, 0, 0) == (SECCOMP_RET_ERRNO | ENOSYS), "bpf: clone3 ENOSYS");
	ok(verdict(p, X64, 1000, 0, 0) == EPERM_RET, "bpf: unknown number EPERM");
	ok(verdict(p, AUDIT_ARCH_I386, 20 /* getpid */, 0, 0) == EPERM_RET,
	   "bpf: i386 ABI getpid EPERM (the whole ABI is denied)");
	ok(verdict(p, AUDIT_ARCH_I386, 288 /* keyctl */, 0, 0) == EPERM_RET,
	   "bpf: i386 keyctl EPERM");
	ok(verdict(p, X64, 0x40000000 | SYS_getpid, 0, 0) == EPERM_RET,
	   "bpf: x32 ABI getpid EPERM (the whole ABI is denied)");
	ok(verdict(p, AUDIT_ARCH_AARCH64, SYS_getpid, 0, 0) == EPERM_RET, "bpf: other arch EPERM");
	for (i = 0; i < 200000; i++) {
		/* ioctl: around TIOCSTI/TIOCLINUX (a few bits flipped), and anything */
		v = i % 2 ? rnd()
			  : ((rnd() & 0xffffffff00000000ULL) | (TIOCSTI ^ (rnd() & rnd() & 0xff)));
		if (i < 6)
			v = (uint64_t[]){TIOCSTI,
					 TIOCLINUX,
					 (1ULL << 32) | TIOCSTI,
					 0xffffffff00000000ULL | TIOCLINUX,
					 TIOCSWINSZ,
					 0x5410}[i];
		lo = (uint32_t)v;
		want = lo == TIOCSTI || lo == TIOCLINUX ? EPERM_RET : ALLOW;
		bad_ioctl += verdict(p, X64, SYS_ioctl, 3, v) != want;
		/* clone: namespace flags or CLONE_PARENT anywhere among random flags */
		v = rnd() & (i % 2 ? ~0ULL : ~(uint64_t)CLONE_DENIED_TEST);
		want = v & CLONE_DENIED_TEST ? EPERM_RET : ALLOW;
		bad_clone += verdict(p, X64, SYS_clone, v, 0) != want;
		/* socket: small families, with and without upper bits */
		v = (rnd() % 48) | (i % 3 ? 0 : rnd() << 32);
		for (want = EPERM_RET, j = 0; j < 4; j++)
			if ((uint32_t)v == fam_ok[j])
				want = ALLOW;
		bad_socket += verdict(p, X64, SYS_socket, v, 0) != want;
		/* personality */
		v = i % 2 ? rnd() : (rnd() << 32) | pers_ok[i % 5];
		for (want = EPERM_RET, j = 0; j < 5; j++)
			if ((uint32_t)v == pers_ok[j])
				want = ALLOW;
		bad_pers += verdict(p, X64, SYS_personality, v, 0) != want;
	}
	ok(bad_ioctl == 0,
	   "bpf: ioctl denied exactly when the low 32 bits are TIOCSTI or TIOCLINUX "
	   "(%d wrong)",
	   bad_ioctl);
	ok(bad_clone == 0,
	   "bpf: clone denied exactly when a namespace flag or CLONE_PARENT is set (%d wrong)",
	   bad_clone);
	{
		/* netlink: the protocol (the third argument, read as an int) decides */
		static const struct {
			uint64_t proto;
			uint32_t want;
		} nl[] = {{0, ALLOW},
			  {4, ALLOW},
			  {9, ALLOW},
			  {12, ALLOW},
			  {16, ALLOW},
			  {15, EPERM_RET},
			  {11, EPERM_RET},
			  {(1ULL << 32) | 15, EPERM_RET},
			  {(1ULL << 32) | 0, ALLOW}};
		int bad_nl = 0;

		for (size_t k = 0; k < sizeof(nl) / sizeof(nl[0]); k++) {
			struct seccomp_data d = {.nr = SYS_socket,
						 .arch = X64,
						 .args = {AF_NETLINK, SOCK_DGRAM, nl[k].proto}};

			bad_nl += run_bpf(p, &d) != nl[k].want;
		}
		ok(bad_nl == 0,
		   "bpf: netlink allowed exactly for route, sock_diag, audit, netfilter, generic "
		   "(%d wrong)",
		   bad_nl);
	}
	ok(bad_socket == 0, "bpf: socket allowed exactly for unix, inet, inet6, netlink (%d wrong)",
	   bad_socket);
	ok(bad_pers == 0, "bpf: personality allowed exactly for the safe values (%d wrong)",
	   bad_pers);
}

/* Do two programs give the same verdict? Over every architecture check, every call number to
 * 1100 and past the x32 bit, numbers at the edges of 32 bits, and for each a few argument
 * vectors; where a number's verdict depends on its arguments, every constant of either program
 * and each of its one-bit neighbours in every argument word (the other half 0, all ones or
 * random), and 4000 vectors more, built from those constants (bits flipped, in either half)
 * and random values. Returns the number of inputs on which they differ. */
static int cmp_k(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

static long differ(const struct sock_fprog *a, const struct sock_fprog *b)
{
	static const uint32_t arches[] = {
	    AUDIT_ARCH_X86_64, AUDIT_ARCH_I386,      AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM, 0,
	    0xffffffff,        AUDIT_ARCH_X86_64 ^ 1};
	static const uint32_t edges[] = {0x3fffffff, 0x7fffffff, 0x80000000, 0xfffffffe,
					 0xffffffff};
	uint32_t nrs[1100 + 600 + 5], ks[2 * BPF_MAXINSNS];
	struct seccomp_data d;
	size_t nnr = 0, nk = 0, ai, i, v;
	long bad = 0;

	for (i = 0; i < 1100; i++)
		nrs[nnr++] = (uint32_t)i;
	for (i = 0; i < 600; i++)
		nrs[nnr++] = 0x40000000u + (uint32_t)i;
	for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		nrs[nnr++] = edges[i];
	for (i = 0; i < a->len; i++)
		if (BPF_CLASS(a->filter[i].code) == BPF_JMP ||
		    BPF_CLASS(a->filter[i].code) == BPF_ALU)
			ks[nk++] = a->filter[i].k;
	for (i = 0; i < b->len; i++)
		if (BPF_CLASS(b->filter[i].code) == BPF_JMP ||
		    BPF_CLASS(b->filter[i].code) == BPF_ALU)
			ks[nk++] = b->filter[i].k;
	qsort(ks, nk, sizeof(*ks), cmp_k);
	for (i = 0, v = 0; i < nk; i++)
		if (!v || ks[i] != ks[v - 1])
			ks[v++] = ks[i];
	nk = v;
	for (ai = 0; ai < sizeof(arches) / sizeof(arches[0]); ai++) {
		for (i = 0; i < nnr; i++) {
			uint32_t v0, v1;
			int dep;

			memset(&d, 0, sizeof(d));
			d.arch = arches[ai];
			d.nr = (int)nrs[i];
			v0 = run_bpf(a, &d);
			bad += v0 != run_bpf(b, &d);
			memset(d.args, 0xff, sizeof(d.args));
			v1 = run_bpf(a, &d);
			bad += v1 != run_bpf(b, &d);
			/* depends on its arguments: some constant gives another verdict */
			dep = v0 != v1;
			for (v = 0; !dep && arches[ai] == AUDIT_ARCH_X86_64 && v < nk; v++) {
				for (int k = 0; k < 6; k++)
					d.args[k] = (uint64_t)ks[v] << 32 | ks[v];
				dep = run_bpf(a, &d) != v0 || run_bpf(b, &d) != v0;
			}
			for (v = 0; dep && v < nk * 33; v++) {
				uint32_t c = ks[v / 33] ^ (v % 33 ? 1u << (v % 33 - 1) : 0);

				for (int half = 0; half < 2; half++)
					for (int other = 0; other < 3; other++) {
						for (int k = 0; k < 6; k++) {
							uint64_t o = other == 0   ? 0
								     : other == 1 ? 0xffffffffULL
										  : rnd() >> 32;

							d.args[k] = half ? (uint64_t)c << 32 | o
									 : o << 32 | c;
						}
						bad += run_bpf(a, &d) != run_bpf(b, &d);
					}
			}
			for (v = 0; v < (dep ? 4000u : 6u); v++) {
				for (int k = 0; k < 6; k++) {
					uint64_t x = rnd();

					if (v % 3 && nk) {
						uint64_t c = ks[rnd() % nk] ^
							     (v % 2 ? 0 : 1ULL << (rnd() % 32));

						x = v % 4 == 1 ? c
							       : (x & 0xffffffff00000000ULL) | c;
					}
					d.args[k] = x;
				}
				bad += run_bpf(a, &d) != run_bpf(b, &d);
			}
		}
	}
	return bad;
}

/* Checks that spare a few values of one word, spelled as libseccomp spells them (a rule per
 * shared bit, one per other combination of the bits that differ), become a JEQ per value; a
 * check whose exceptions are a range, or which reads a second word, is copied as it is. Each
 * program: x86_64 only, call 7 goes to the checks, 8 is allowed, the rest EPERM. */
#define PT_ALLOW SECCOMP_RET_ALLOW
#define PT_EPERM (SECCOMP_RET_ERRNO | 1)
static unsigned pt_head(struct sock_filter *f)
{
	unsigned n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, PT_EPERM);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 8, 0, 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, PT_ALLOW);
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 7, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, PT_EPERM);
	return n;
}

/* "allow unless args[3]'s upper word is one of ex" the way seccomp.c asks libseccomp for it;
 * the last exception gets ERRNO(7) of a rule of its own, the others the default's EPERM.
 * mixed: a range of values (the top byte 0x7f) answers ERRNO(9) too. */
static unsigned pt_block(struct sock_filter *f, unsigned n, const uint32_t *ex, int nex, int mixed)
{
	uint32_t w = offsetof(struct seccomp_data, args[3]) + 4, differ = 0, base, bit, v;
	unsigned c, j;
	int e, excluded;

	for (e = 1; e < nex; e++)
		differ |= ex[0] ^ ex[e];
	base = ex[0] & ~differ;
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, w - 4); /* masked away */
	f[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0);
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, PT_EPERM);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, w);
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ex[nex - 1], 0, 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 7);
	if (mixed) {
		f[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff000000);
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x7f000000, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 9);
	}
	for (bit = 1u << 31; bit; bit >>= 1) {
		if (differ & bit)
			continue;
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, w);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, bit);
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ~base & bit, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, PT_ALLOW);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, w);
	for (c = 0; c < (1u << __builtin_popcount(differ)); c++) {
		for (v = base, bit = 1, j = 0; bit; bit <<= 1)
			if (differ & bit && (c >> j++) & 1)
				v |= bit;
		for (excluded = 0, e = 0; e < nex; e++)
			excluded |= v == ex[e];
		if (excluded)
			continue;
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, v, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, PT_ALLOW);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, PT_EPERM);
	return n;
}

static void compact_points(void)
{
	static const uint32_t ex[] = {0x5412, 0x541c, 0x5416};
	static struct sock_filter f[400];
	struct dsec_err err = {0};
	struct sock_fprog in, out;
	int mixed, r;

	for (mixed = 0; mixed < 2; mixed++) {
		in.len = (unsigned short)pt_block(f, pt_head(f), ex, 3, mixed);
		in.filter = f;
		r = dsec_seccomp_compact(&in, &out, &err);
		if (mixed) {
			/* left alone (1), or rewritten with the checks copied: as long, near enough */
			ok(r == 1 || (r == 0 && out.len + 20 > in.len && differ(&in, &out) == 0),
			   "compact: with a range among the exceptions, the checks stay (%u, %u)",
			   in.len, r == 0 ? out.len : in.len);
		} else {
			ok(r == 0 && differ(&in, &out) == 0,
			   "compact: three values of one word spared: same verdicts");
			ok(r == 0 && out.len <= 20,
			   "compact: ... in a JEQ and a RET each (%u instructions, from %u)",
			   r == 0 ? out.len : 0, in.len);
		}
		if (r == 0)
			free(out.filter);
	}
}

/* Every program dsec loads went through dsec_seccomp_compact: the default profile and custom
 * ones, each against what libseccomp wrote for it. */
static void compact_matches(void)
{
	static const char *const profiles[] = {
	    "{\"default\":\"allow\"}",
	    "{\"default\":\"kill\",\"rules\":[{\"names\":[\"socket\"],\"action\":\"allow\","
	    "\"args\":[{\"index\":0,\"op\":\"le\",\"value\":2},{\"index\":1,\"op\":\"ne\","
	    "\"value\":3}]},{\"names\":[\"mseal\"],\"action\":\"log\"}]}",
	    "{\"base\":\"default\",\"rules\":[{\"names\":[\"ptrace\"],\"action\":\"allow\"},"
	    "{\"names\":[\"uname\"],\"action\":\"errno\",\"errno\":22},{\"names\":[\"getpid\"],"
	    "\"action\":\"errno\",\"errno\":5,\"args\":[{\"index\":0,\"op\":\"masked_eq\","
	    "\"mask\":\"0xff\",\"value\":0}]}]}",
	    "{\"default\":\"errno\",\"errno\":38,\"rules\":[{\"names\":[\"read\",\"write\","
	    "\"exit_group\"],\"action\":\"allow\"},{\"names\":[\"openat\"],\"action\":\"log\"}]}",
	};
	struct dsec_seccomp *raw = NULL, *c = NULL;
	struct dsec_err err = {0};
	size_t i;

	dsec_seccomp_no_compact = 1;
	ok(dsec_seccomp_compile_default(&raw, &err) == 0, "libseccomp's own default: %s", err.msg);
	dsec_seccomp_no_compact = 0;
	ok(dsec_seccomp_compile_default(&c, &err) == 0, "compacted default: %s", err.msg);
	if (raw && c) {
		printf("# default: %u BPF instructions from libseccomp, %u compacted\n",
		       dsec_seccomp_prog(raw)->len, dsec_seccomp_prog(c)->len);
		ok(dsec_seccomp_prog(c)->len * 3 < dsec_seccomp_prog(raw)->len * 2,
		   "compact: the default shrinks by a third at least");
		ok(differ(dsec_seccomp_prog(raw), dsec_seccomp_prog(c)) == 0,
		   "compact: the default gives libseccomp's verdict on every input tried");
		/* the comparison can fail: one leaf of the search changed is found */
		struct sock_fprog m = *dsec_seccomp_prog(c);
		struct sock_filter *f = malloc(m.len * sizeof(*f));

		for (i = 0; f && i < m.len; i++)
			f[i] = m.filter[i];
		for (i = 0; f && i < m.len && f[i].code != (BPF_RET | BPF_K); i++)
			;
		if (f && i < m.len)
			f[i].k ^= 1;
		m.filter = f;
		ok(f && differ(dsec_seccomp_prog(raw), &m) > 0,
		   "compact: a changed verdict is caught");
		free(f);
	}
	dsec_seccomp_free(raw);
	dsec_seccomp_free(c);
	for (i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
		raw = c = NULL;
		dsec_seccomp_no_compact = 1;
		ok(prep(profiles[i], &raw, &err) == 0, "profile %zu, libseccomp's: %s", i, err.msg);
		dsec_seccomp_no_compact = 0;
		ok(prep(profiles[i], &c, &err) == 0, "profile %zu, compacted: %s", i, err.msg);
		ok(raw && c && dsec_seccomp_prog(c)->len <= dsec_seccomp_prog(raw)->len &&
		       differ(dsec_seccomp_prog(raw), dsec_seccomp_prog(c)) == 0,
		   "compact: profile %zu gives the same verdicts (%u and %u instructions)", i,
		   raw ? dsec_seccomp_prog(raw)->len : 0, c ? dsec_seccomp_prog(c)->len : 0);
		dsec_seccomp_free(raw);
		dsec_seccomp_free(c);
	}
	/* a program it does not rewrite (the X register in the dispatch) comes back as is */
	struct sock_filter xf[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_STMT(BPF_MISC | BPF_TAX, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog xp = {.len = 3, .filter = xf}, xo;

	ok(dsec_seccomp_compact(&xp, &xo, &err) == 1 && xo.filter == NULL,
	   "compact: a shape it does not model is left alone");
	compact_points();
}

/* The program built in at compile time (seccomp-gen) is exactly what libseccomp makes of the
 * default profile now, compacted (dsec_seccomp_compact): same length, same bytes, so the architecture checks (x86_64, x32 and
 * i386 denied) and every rule are the ones the profile says. */
static void builtin_matches(const struct dsec_seccomp *builtin)
{
	struct dsec_seccomp *now = NULL;
	struct dsec_err err = {0};
	const struct sock_fprog *a = dsec_seccomp_prog(builtin), *b;
	uint64_t t0 = dsec_now_us(), t1;

	ok(dsec_seccomp_compile_default(&now, &err) == 0, "libseccomp compiles the default: %s",
	   err.msg);
	t1 = dsec_now_us();
	printf("# libseccomp compile + export: %llu us\n", (unsigned long long)(t1 - t0));
	b = dsec_seccomp_prog(now);
	ok(a && b && a->len == b->len && a->len > 0,
	   "built-in program has libseccomp's length (%u, %u)", a ? a->len : 0, b ? b->len : 0);
	ok(a && b && a->len == b->len &&
	       memcmp(a->filter, b->filter, a->len * sizeof(*a->filter)) == 0,
	   "built-in program equals libseccomp's, byte for byte");
	ok(a && a->filter[0].code == (BPF_LD | BPF_W | BPF_ABS) &&
	       a->filter[0].k == offsetof(struct seccomp_data, arch),
	   "built-in program starts with the architecture check");
	dsec_seccomp_free(now);
}

int main(int argc, char **argv)
{
	struct dsec_seccomp *sc = NULL;
	struct dsec_caps *caps = NULL;
	struct dsec_err err = {0};
	struct result res[3];
	uint64_t t0, t1;
	size_t i;
	int m, fails;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (namespaces for the control run)\n");
		return 0;
	}
	t0 = dsec_now_us();
	ok(dsec_seccomp_prepare(NULL, &sc, &err) == 0, "default profile compiles: %s", err.msg);
	t1 = dsec_now_us();
	printf("# prepare (built in): %llu us, %zu BPF instructions\n",
	       (unsigned long long)(t1 - t0), dsec_seccomp_insns(sc));
	builtin_matches(sc);
	ok(dsec_caps_prepare(NULL, &caps, &err) == 0, "default capabilities: %s", err.msg);
	if (!sc || !caps)
		return tap_done();
	for (m = M_CONTROL; m <= M_BOTH; m++) {
		ok(run_mode(m, sc, caps, &res[m]) == 0, "%s: child set up (%d)", mode_name[m],
		   res[m].setup_failed);
		if (m != M_CONTROL)
			printf("# %s: apply took %ld us\n", mode_name[m], res[m].apply_ns / 1000);
	}
	timing(sc, caps);
	for (i = 0; i < NPROBES; i++) {
		const struct probe *p = &probes[i];

		if (p->fn == p_i386_getpid && res[M_CONTROL].rc[i] >= 1000) {
			have_ia32 = 0; /* int 0x80 faults even without a filter */
			skip("i386 ABI denied", "no i386 emulation in this kernel");
			continue;
		}
		for (m = M_FILTER; m <= M_BOTH; m++)
			ok(res[m].rc[i] == p->want, "%s: %s -> %s (want %s)", mode_name[m], p->name,
			   errname(res[m].rc[i]), errname(p->want));
		/* the control: without the filter the same call must not give the same answer,
		 * else this probe could not catch a missing rule */
		if (p->want)
			ok(res[M_CONTROL].rc[i] != p->want, "no filter: %s -> %s (not %s)", p->name,
			   errname(res[M_CONTROL].rc[i]), errname(p->want));
		else
			ok(res[M_CONTROL].rc[i] == 0, "no filter: %s works", p->name);
	}
	for (fails = 0, i = 0; i < NPROBES; i++)
		fails += probes[i].want && res[M_CONTROL].rc[i] == probes[i].want &&
			 (have_ia32 || probes[i].fn != p_i386_getpid);
	ok(fails == 0, "every denial probe answers differently without the filter");
	bpf_properties(sc);
	compact_matches();
	custom_profiles();
	bad_profiles();
	dsec_seccomp_free(sc);
	dsec_caps_free(caps);
	(void)argc;
	(void)argv;
	return tap_done();
}
