/* dsec-holder: pid 1 of a sandbox. It holds the sandbox's namespaces open by living, reaps the
 * zombies the kernel reparents to it, and does nothing else. It talks to nobody and reads no
 * input: code in the sandbox cannot make it do anything. SIGKILL from outside (dsec-reap) ends
 * it, and with it every process of its pid namespace.
 *
 * Built without libc where we know the syscall convention (x86_64, aarch64): exec'ing it maps
 * two pages and runs no start-up code, which on a virtual machine is most of a spawn's cost
 * (measured: 1.0 ms CPU for a libc-free static binary against 2.9 ms for a static glibc one and
 * 4.7 ms for a dynamic one). An idle sandbox then costs this process's page tables and a page
 * of stack. */

#if defined(DSEC_HOLDER_NOLIBC) && defined(__x86_64__)

#define NR_rt_sigprocmask 14
#define NR_wait4 61
#define NR_rt_sigtimedwait 128
#define NR_exit 60
#define NR_getpid 39
#define NR_write 1
#define NR_close 3
#define NR_fcntl 72
#define NR_setns 308
#define NR_setgroups 116
#define NR_setresuid 117
#define NR_setresgid 119
#define NR_prctl 157

static long sys4(long n, long a, long b, long c, long d)
{
	long ret;
	register long r10 __asm__("r10") = d;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
}

#define NR_munmap 11
#define HOLDER_TRIM 1
/* Where the start-up stack, vDSO and vvar lie: above everything the binary maps, up to the top of
 * the 47-bit user address space (a kernel with 5-level paging still puts them there). */
#define TRIM_TOP 0x7ffffffff000UL

/* The holder runs on this stack (a page of .bss, next to its code), so that it can unmap the one
 * the kernel gave it (see trim()). */
char holder_stack[4096] __attribute__((aligned(4096), used));

/* holder_main gets the kernel's stack pointer (argc, then argv) before the switch */
__asm__(".text\n.global _start\n_start:\n\txor %rbp,%rbp\n\tmov %rsp,%rdi\n"
	"\tlea holder_stack+4096(%rip),%rsp\n\tcall holder_main\n\thlt\n");

#elif defined(DSEC_HOLDER_NOLIBC) && defined(__aarch64__)

#define NR_rt_sigprocmask 135
#define NR_wait4 260
#define NR_rt_sigtimedwait 137
#define NR_exit 93
#define NR_getpid 172
#define NR_write 64
#define NR_close 57
#define NR_fcntl 25
#define NR_setns 268
#define NR_setgroups 159
#define NR_setresuid 147
#define NR_setresgid 149
#define NR_prctl 167

static long sys4(long n, long a, long b, long c, long d)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;

	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
	return x0;
}

__asm__(".text\n.global _start\n_start:\n\tmov x29, #0\n\tmov x0, sp\n\tbl holder_main\n\tb .\n");

#else /* any other architecture: plain libc */

#define _GNU_SOURCE
#include <sys/syscall.h>
#include <unistd.h>
#define NR_rt_sigprocmask SYS_rt_sigprocmask
#define NR_wait4 SYS_wait4
#define NR_rt_sigtimedwait SYS_rt_sigtimedwait
#define NR_exit SYS_exit
#define NR_getpid SYS_getpid
#define NR_write SYS_write
#define NR_close SYS_close
#define NR_fcntl SYS_fcntl
#define NR_setns SYS_setns
#define NR_setgroups SYS_setgroups
#define NR_setresuid SYS_setresuid
#define NR_setresgid SYS_setresgid
#define NR_prctl SYS_prctl
static long sys4(long n, long a, long b, long c, long d)
{
	return syscall(n, a, b, c, d);
}
void holder_main(long *sp);
int main(int argc, char **argv)
{
	long sp[4] = {argc, (long)argv[0], argc > 1 ? (long)argv[1] : 0,
		      argc > 2 ? (long)argv[2] : 0};

	holder_main(sp);
	return 0;
}

#endif

#ifdef HOLDER_TRIM
extern char _end[];

/* Unmap the start-up stack (argv, environment, auxv: nothing the holder reads), the vDSO and
 * vvar, all far above the binary. What an idle holder then costs in page tables is the tables
 * that map its own three pages: the upper half's PUD, PMD and PTE pages go (12 KiB of its 24,
 * besides the PGD), and its stack page with them. Best effort: on failure nothing changes. */
static void trim(void)
{
	unsigned long lo = ((unsigned long)_end + 4095) & ~4095UL;

	if (lo < TRIM_TOP)
		sys4(NR_munmap, (long)lo, (long)(TRIM_TOP - lo), 0, 0);
}
#else
static void trim(void)
{
}
#endif

#define SIG_BLOCK_ 0
#define WNOHANG_ 1
#define WALL_ 0x40000000
#define SIGCHLD_ 17
#define F_GETFD_ 1
#define PR_SET_DUMPABLE_ 4
#define CLONE_NEWUSER_ 0x10000000

/* With fd 5 open, dsec-spawn made the sandbox a user namespace of its own (userns.h): join it,
 * become its root (an unprivileged uid of the sandbox's own on the host), then say 'u' on fd 3
 * (dsec-spawn hands the sandbox out only after that: until then, a command joining our
 * namespaces would be host root). Any failure ends us: the spawn then fails. */
static void enter_userns(void)
{
	if (sys4(NR_fcntl, 5, F_GETFD_, 0, 0) < 0)
		return;
	if (sys4(NR_setns, 5, CLONE_NEWUSER_, 0, 0) < 0 || sys4(NR_setgroups, 0, 0, 0, 0) < 0 ||
	    sys4(NR_setresgid, 0, 0, 0, 0) < 0 || sys4(NR_setresuid, 0, 0, 0, 0) < 0 ||
	    sys4(NR_write, 3, (long)"u", 1, 0) != 1)
		sys4(NR_exit, 3, 0, 0, 0);
	sys4(NR_close, 5, 0, 0, 0);
	sys4(NR_close, 3, 0, 0, 0);
}

void holder_main(long *sp) __attribute__((noreturn, used));
void holder_main(long *sp)
{
	unsigned long all = ~0UL, chld = 1UL << (SIGCHLD_ - 1);

	(void)sp; /* argv[1], the sandbox's id, is for ps */
	/* only dsec-spawn starts it, as pid 1 of a new pid namespace; run by hand it would wait
	 * forever, so it says no (exit 2) instead */
	if (sys4(NR_getpid, 0, 0, 0, 0) != 1)
		sys4(NR_exit, 2, 0, 0, 0);

	/* fd 4 is the sandbox's tmpfs, for dsec on the host: no process of the sandbox may look
	 * into /proc/1/fd (also where root inside is host root, without a user namespace) */
	sys4(NR_prctl, PR_SET_DUMPABLE_, 0, 0, 0);
	enter_userns();
	trim();

	/* as pid 1 of its namespace it gets no signal from inside unless it has a handler; block
	 * everything anyway, and take SIGCHLD synchronously */
	sys4(NR_rt_sigprocmask, SIG_BLOCK_, (long)&all, 0, 8);
	for (;;) {
		while (sys4(NR_wait4, -1, 0, WNOHANG_ | WALL_, 0) > 0)
			;
		sys4(NR_rt_sigtimedwait, (long)&chld, 0, 0, 8);
	}
}
