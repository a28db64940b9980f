/* The host side of `dsec-exec -t`: the user's terminal in raw mode, and a relay between it and
 * the pseudo-terminal master that dsec_exec_start brought out of the sandbox's devpts. */
#ifndef DSEC_PTY_H
#define DSEC_PTY_H

#include <stdint.h>
#include <termios.h>

#include "err.h"

/* Put terminal fd in raw mode, saving the old settings in *saved. Returns 1 when done, 0 when
 * fd is not a terminal (nothing changed), -1 on error. */
int dsec_tty_raw(int fd, struct termios *saved, struct dsec_err *err);

/* Restore what dsec_tty_raw saved. Async-signal-safe. */
void dsec_tty_restore(int fd, const struct termios *saved);

/* Relay in → ptm and ptm → out until the command (pidfd) exited and its output is drained.
 * When `in` reaches EOF and is not a terminal, an end-of-file character is sent once. SIGWINCH
 * (blocked by this function while it runs) copies the window size of `in` (or `out`) to the
 * pty. deadline_us (monotonic, 0 = none) stops the relay early: returns 1 then, 0 when the
 * command exited, -1 on error. */
int dsec_pty_relay(int ptm, int pidfd, int in, int out, uint64_t deadline_us, struct dsec_err *err);

#endif
