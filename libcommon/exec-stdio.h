/* Which character devices dsec-exec passes to a command as its stdio as they are, not through a
 * relay: the memory devices that hold nothing of the host, /dev/null (minor 3), zero (5), full
 * (7), random (8) and urandom (9). The others of major 1 (mem, kmem, port, kmsg) would hand the
 * command the host's memory, I/O ports or kernel log. No includes, so the libc-free front
 * (front/exec-front.c) shares it. */
#ifndef DSEC_EXEC_STDIO_H
#define DSEC_EXEC_STDIO_H

#define DSEC_MEM_MAJOR 1
#define DSEC_MEM_MINOR_PLAIN(m) ((m) == 3 || (m) == 5 || (m) == 7 || (m) == 8 || (m) == 9)

#endif
