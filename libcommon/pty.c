#include "pty.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "state.h"

int dsec_tty_raw(int fd, struct termios *saved, struct dsec_err *err)
{
	struct termios raw;

	if (!isatty(fd))
		return 0;
	if (tcgetattr(fd, saved) < 0)
		return dsec_err_sys(err, "tcgetattr");
	raw = *saved;
	cfmakeraw(&raw);
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(fd, TCSADRAIN, &raw) < 0)
		return dsec_err_sys(err, "tcsetattr");
	return 1;
}

void dsec_tty_restore(int fd, const struct termios *saved)
{
	tcsetattr(fd, TCSADRAIN, saved);
}

static void copy_winsize(int from_a, int from_b, int ptm)
{
	struct winsize ws;

	if (ioctl(from_a, TIOCGWINSZ, &ws) == 0 || ioctl(from_b, TIOCGWINSZ, &ws) == 0)
		ioctl(ptm, TIOCSWINSZ, &ws);
}

int dsec_pty_relay(int ptm, int pidfd, int in, int out, uint64_t deadline_us, struct dsec_err *err)
{
	char ibuf[4096], obuf[16384];
	size_t ilen = 0, ioff = 0;
	int in_open = in >= 0, exited = 0, ret = 0, sfd, fl;
	sigset_t ws, old;

	sigemptyset(&ws);
	sigaddset(&ws, SIGWINCH);
	sigprocmask(SIG_BLOCK, &ws, &old);
	sfd = signalfd(-1, &ws, SFD_CLOEXEC | SFD_NONBLOCK);
	fl = fcntl(ptm, F_GETFL);
	fcntl(ptm, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		struct pollfd p[4] = {{-1, 0, 0}, {-1, 0, 0}, {-1, 0, 0}, {-1, 0, 0}};
		int tmo = -1, n;
		ssize_t r;

		if (in_open && ilen == ioff && !exited)
			p[0] = (struct pollfd){in, POLLIN, 0};
		p[1] = (struct pollfd){ptm, (short)(POLLIN | (ilen > ioff ? POLLOUT : 0)), 0};
		if (!exited)
			p[2] = (struct pollfd){pidfd, POLLIN, 0};
		p[3] = (struct pollfd){sfd, POLLIN, 0};
		if (exited)
			tmo = 0; /* drain what is there, then stop */
		else if (deadline_us) {
			uint64_t now = dsec_now_us();

			if (now >= deadline_us) {
				ret = 1;
				break;
			}
			tmo = (int)((deadline_us - now + 999) / 1000);
		}
		n = poll(p, 4, tmo);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = dsec_err_sys(err, "poll");
			break;
		}
		if (p[3].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) > 0)
				;
			copy_winsize(in, out, ptm);
		}
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			r = read(ptm, obuf, sizeof(obuf));
			if (r > 0) {
				if (dsec_write_all(out, obuf, (size_t)r) < 0) {
					ret = dsec_err_sys(err, "write output");
					break;
				}
				continue; /* keep draining before looking at exit */
			}
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
				break; /* EIO: every holder of the slave has closed it */
		}
		if ((p[1].revents & POLLOUT) && ilen > ioff) {
			r = write(ptm, ibuf + ioff, ilen - ioff);
			if (r > 0)
				ioff += (size_t)r;
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			r = read(in, ibuf, sizeof(ibuf));
			if (r > 0) {
				ilen = (size_t)r;
				ioff = 0;
			} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
				in_open = 0;
				if (!isatty(in)) {
					ibuf[0] = 4; /* ^D: end of file for a canonical reader */
					ilen = 1;
					ioff = 0;
				}
			}
		}
		if (p[2].revents & POLLIN)
			exited = 1;
		else if (exited && n == 0)
			break;
	}
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return ret;
}
