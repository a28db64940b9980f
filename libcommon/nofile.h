/* The descriptor limit (RLIMIT_NOFILE, soft and hard) every process of a sandbox starts with:
 * the holder and each command dsec-exec starts, whatever the caller's was. The host's table
 * of open files (fs.file-max) is one for the whole node and does not bind root, so only a
 * process of a sandbox meets its end: with the caller's limit (often tens of thousands), one
 * sandbox of 512 tasks could fill it and leave every other sandbox, and the host's unprivileged
 * services, failing with ENFILE. 1024 each is the OCI runtime spec's default (runc, crun), and
 * also bounds the descriptors a sender may have in flight over unix sockets. A caller whose hard
 * limit is lower keeps it, unless dsec holds CAP_SYS_RESOURCE to raise it. No includes:
 * dsec-exec's libc-free front (front/exec-front.c) uses it too. */
#ifndef DSEC_NOFILE_H
#define DSEC_NOFILE_H

#define DSEC_NOFILE 1024UL /* the default; --nofile N sets another (dsec-spawn) */
#define DSEC_NOFILE_MIN 64UL
#define DSEC_NOFILE_MAX 1048576UL /* the kernel's default fs.nr_open */

/* The limit of a sandbox whose limits.nofile is n (0: not set) */
#define DSEC_NOFILE_OF(n) ((n) ? (n) : DSEC_NOFILE)

#endif
