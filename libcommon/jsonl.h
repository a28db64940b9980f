/* JSON lines: one compact object per line in and out. Readers keep unknown members in order
 * (jansson keeps insertion order), so a user's keys pass through every tool. */
#ifndef DSEC_JSONL_H
#define DSEC_JSONL_H

#include <stdio.h>
#include <jansson.h>

#include "err.h"

#define DSEC_JSONL_MAX_LINE_DEFAULT (64UL << 20)

struct dsec_jsonl_reader {
	FILE *f;
	const char *name; /* "<stdin>" or a file name, for diagnostics */
	unsigned long line;
	size_t max_line;
	char *buf;
	size_t cap;
};

/* Set up a reader on f (not owned). max_line 0 means DSEC_JSONL_MAX_LINE_DEFAULT, or
 * $DSEC_MAX_LINE when set. */
void dsec_jsonl_reader_init(struct dsec_jsonl_reader *r, FILE *f, const char *name,
			    size_t max_line);
void dsec_jsonl_reader_free(struct dsec_jsonl_reader *r);

/* Does the reader's stream hold input read from its fd but not yet consumed (so that poll on
 * the fd would not tell)? 1 or 0; 1 where the C library does not say. */
int dsec_jsonl_buffered(const struct dsec_jsonl_reader *r);

/* Next record. Returns 1 with *out a new object reference, 0 at end of input, -1 on a bad
 * line (not an object, malformed, too long, NUL byte): err says "<name>:LINE: why" and the
 * line is consumed, so the caller may go on with the next. Blank lines are skipped. */
int dsec_jsonl_next(struct dsec_jsonl_reader *r, json_t **out, struct dsec_err *err);

/* Parse one line of a record stream: an object, no repeated key, \u0000 only within the
 * "exec" member (a command's output) and "stdin"; else NULL with err ("invalid JSON: ...",
 * no line). */
json_t *dsec_jsonl_parse(const char *line, size_t len, struct dsec_err *err);

/* Write rec as one compact line on stdout and flush. Returns 0, or -1 with err set when the
 * write failed (EPIPE: the reader has gone). */
int dsec_jsonl_emit(json_t *rec, struct dsec_err *err);

/* Emit rec and release it. Once a write failed, *gone is set and later records are dropped
 * silently (the caller goes on with its work: a reaper still reaps); the failure is reported on
 * stderr unless it is EPIPE (the reader has simply gone). */
void dsec_jsonl_put(json_t *rec, int *gone);

/* Add "error":{tool,errno,msg} to rec (replacing an older one) and return rec. */
json_t *dsec_jsonl_set_error(json_t *rec, const struct dsec_err *err, const char *tool);

/* A new record holding only an error, for input that could not be parsed at all. */
json_t *dsec_jsonl_error_record(const struct dsec_err *err, const char *tool);

/* Ignore SIGPIPE so that writes fail with EPIPE instead of killing the tool. */
void dsec_jsonl_init_output(void);

/* Close stdout and report a failed flush or close (util-linux closestream). 0 or -1. */
int dsec_close_stdout(void);

#endif
