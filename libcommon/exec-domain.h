/* Each command dsec-exec starts gets a Landlock domain of its own. Landlock lets a process reach
 * another through ptrace_may_access (/proc/PID/mem, environ, fd, maps; pidfd_getfd) only when
 * the other's domain is its own or nested in it: a process one command leaves running can then
 * neither rewrite nor read a later command (the one that grades the result), though both run
 * as the same user; the seccomp filter already denies ptrace itself. The ruleset handles only
 * EXECUTE and REFER (which every ruleset denies unless a rule grants it) and grants both
 * beneath the sandbox's root: nothing a command may do changes but that. Kernels without
 * Landlock, or with its first ABI (which denies every rename across directories once any
 * access is handled), run commands without a domain. No includes, so the libc-free front
 * (front/exec-front.c) shares it with exec.c. */
#ifndef DSEC_EXEC_DOMAIN_H
#define DSEC_EXEC_DOMAIN_H

#define DSEC_NR_landlock_create_ruleset 444 /* the same on x86_64 and aarch64 */
#define DSEC_NR_landlock_add_rule 445
#define DSEC_NR_landlock_restrict_self 446

#define DSEC_LL_RULE_PATH_BENEATH 1
#define DSEC_LL_FS_EXECUTE (1ULL << 0)
#define DSEC_LL_FS_REFER (1ULL << 13) /* ABI 2 */
#define DSEC_LL_HANDLED (DSEC_LL_FS_EXECUTE | DSEC_LL_FS_REFER)

struct dsec_ll_ruleset_attr {
	unsigned long long handled_access_fs; /* the first member: a size of 8 suits every ABI */
};

struct dsec_ll_path_beneath {
	unsigned long long allowed_access;
	int parent_fd;
} __attribute__((packed));

#endif
