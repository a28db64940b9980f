#include "err.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *dsec_prog = "dsec";
int dsec_verbose;

/* Room for a message before it is fitted: names up to PATH_MAX and some words around them */
#define ERR_LONG (PATH_MAX * 2 + 256)

/* s into out (DSEC_ERR_MSG_MAX bytes): whole when it fits, else its start and its end around
 * "...". A long name in the middle (a path 2000 levels deep) must not push out what went
 * wrong, which comes last. */
static void fit(char *out, const char *s)
{
	size_t len = strlen(s), max = DSEC_ERR_MSG_MAX - 1, head = max / 3, tail = max - head - 3;

	if (len <= max) {
		memmove(out, s, len + 1);
		return;
	}
	memmove(out, s, head);
	memmove(out + head, "...", 3);
	memmove(out + head + 3, s + len - tail, tail + 1);
}

int dsec_err_set(struct dsec_err *err, int errnum, const char *fmt, ...)
{
	char buf[ERR_LONG];
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	err->errnum = errnum;
	fit(err->msg, buf);
	return -1;
}

int dsec_err_sys(struct dsec_err *err, const char *fmt, ...)
{
	int saved = errno;
	char buf[ERR_LONG], all[ERR_LONG + 128];
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	err->errnum = saved;
	snprintf(all, sizeof(all), "%s: %s", buf, strerror(saved));
	fit(err->msg, all);
	errno = saved;
	return -1;
}

int dsec_err_nolocale(struct dsec_err *err, const char *what, int errnum)
{
	const char *desc = strerrordesc_np(errnum), *p;
	size_t n = 0;

	if (!err)
		return -1;
	err->errnum = errnum;
	for (p = what; *p && n < sizeof(err->msg) - 1; p++)
		err->msg[n++] = *p;
	for (p = ": "; *p && n < sizeof(err->msg) - 1; p++)
		err->msg[n++] = *p;
	for (p = desc ? desc : "unknown error"; *p && n < sizeof(err->msg) - 1; p++)
		err->msg[n++] = *p;
	err->msg[n] = '\0';
	return -1;
}

int dsec_err_wrap(struct dsec_err *err, const char *fmt, ...)
{
	char ctx[ERR_LONG], all[ERR_LONG + DSEC_ERR_MSG_MAX];
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	snprintf(all, sizeof(all), "%s: %s", ctx, err->msg);
	fit(err->msg, all);
	return -1;
}

json_t *dsec_err_json(const struct dsec_err *err, const char *tool)
{
	json_t *j =
	    json_pack("{s:s, s:i, s:s}", "tool", tool, "errno", err->errnum, "msg", err->msg);
	char msg[DSEC_ERR_MSG_MAX];

	if (j)
		return j;
	/* not UTF-8 (a name from an archive, or a message cut inside a character): the error
	 * must still be recorded, so every byte past ASCII becomes '?' */
	for (size_t i = 0; i < sizeof(msg); i++) {
		unsigned char c = (unsigned char)err->msg[i];

		msg[i] = c >= 0x80 ? '?' : (char)c;
		if (!c)
			break;
	}
	msg[sizeof(msg) - 1] = '\0';
	return json_pack("{s:s, s:i, s:s}", "tool", tool, "errno", err->errnum, "msg", msg);
}

static void vmsg(const char *kind, const char *fmt, va_list ap)
{
	char buf[2048], out[4 * sizeof(buf)];
	size_t o = 0;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	/* a message is one line, and names from archives or sandboxes may hold escape
	 * sequences for the terminal it is read on: control bytes are printed as \xNN */
	for (const unsigned char *p = (const unsigned char *)buf; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			o += (size_t)snprintf(out + o, sizeof(out) - o, "\\x%02x", *p);
		else
			out[o++] = (char)*p;
	}
	out[o] = '\0';
	fprintf(stderr, "%s: %s%s\n", dsec_prog, kind, out);
}

void dsec_warnx(const char *fmt, ...)
{
	va_list ap;

	if (dsec_verbose < 0)
		return;
	va_start(ap, fmt);
	vmsg("warning: ", fmt, ap);
	va_end(ap);
}

void dsec_errorx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("error: ", fmt, ap);
	va_end(ap);
}

void dsec_infox(const char *fmt, ...)
{
	va_list ap;

	if (dsec_verbose <= 0)
		return;
	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

void dsec_err_print(const struct dsec_err *err)
{
	dsec_errorx("%s", err->msg);
}
