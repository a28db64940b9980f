/* Error objects: every fallible function takes a struct dsec_err *, returns < 0 and fills it on
 * failure, and leaves it untouched on success. Fixed-size so it stays usable after fork() and can
 * be sent whole over a pipe from a child to its parent. */
#ifndef DSEC_ERR_H
#define DSEC_ERR_H

#include <jansson.h>

#define DSEC_ERR_MSG_MAX 512

struct dsec_err {
	int errnum;                 /* errno-style code, 0 when none applies */
	char msg[DSEC_ERR_MSG_MAX]; /* one line, lowercase, no trailing period */
};

/* Fill err with errnum and a formatted message. Returns -1 always, so callers can write
 * `return dsec_err_set(err, errno, "...")`. Safe after fork (no allocation). */
int dsec_err_set(struct dsec_err *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like dsec_err_set with errno and ": strerror(errno)" appended. Returns -1. */
int dsec_err_sys(struct dsec_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like dsec_err_sys with errnum, "what: description", built without printf or strerror (their
 * locale machinery may lock): for a forked child. Returns -1. */
int dsec_err_nolocale(struct dsec_err *err, const char *what, int errnum);

/* Prefix the message with context ("context: old message"). Returns -1. */
int dsec_err_wrap(struct dsec_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A new JSON object {"tool":tool,"errno":n,"msg":...}. Caller owns the reference. */
json_t *dsec_err_json(const struct dsec_err *err, const char *tool);

/* Diagnostics on stderr, one line each, "tool: error: msg". dsec_prog is set by the tool. */
extern const char *dsec_prog;
extern int dsec_verbose; /* -v count; -q sets it to -1 */
void dsec_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dsec_errorx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dsec_infox(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dsec_err_print(const struct dsec_err *err);

#endif
