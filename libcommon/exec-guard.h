/* How long a command may take to start before dsec-exec gives up on it. A process of the
 * sandbox can stop the command's process there (exec.c: guard_arm). Seconds. There are no
 * includes, so dsec-exec's libc-free front (front/exec-front.c) can use the same values and
 * message. */
#ifndef DSEC_EXEC_GUARD_H
#define DSEC_EXEC_GUARD_H

#define DSEC_EXEC_SETUP_MAX_S 5 /* clone to execve */
#define DSEC_EXEC_LOAD_MAX_S 60 /* the execve: a binary an on-demand layer must fetch first */

#define DSEC_EXEC_GUARD_STR_(x) #x
#define DSEC_EXEC_GUARD_STR(x) DSEC_EXEC_GUARD_STR_(x)
#define DSEC_EXEC_STALLED                                                                          \
	"the command was stopped or killed before it could start (a process of the sandbox "       \
	"signalling it?): given up after " DSEC_EXEC_GUARD_STR(DSEC_EXEC_SETUP_MAX_S) " s at most"

#endif
