/* The integrity of a gzip stream: libarchive (3.6) reads a gzip member's trailer without
 * checking it ("XXX TODO: Verify the length and CRC"), so a flipped bit in stored or literal
 * data imports as wrong file contents. The compressed bytes are fed here as they are read,
 * inflated a second time by zlib, which checks each member's CRC-32 and length. */
#ifndef DSEC_GZCHECK_H
#define DSEC_GZCHECK_H

#include <stddef.h>

#include "err.h"

struct dsec_gzcheck;

/* A checker for a stream that may or may not be gzip: it decides on the stream's first four
 * bytes, and checks nothing when they do not start a gzip member. NULL when out of memory. */
struct dsec_gzcheck *dsec_gzcheck_new(void);

/* The next n bytes of the stream, in order. 0, or -1 with err (EILSEQ) at the first member
 * whose data or trailer is wrong. What follows the last member and is not another member
 * (padding) is not looked at. */
int dsec_gzcheck_feed(struct dsec_gzcheck *g, const void *buf, size_t n, struct dsec_err *err);

/* The stream has ended: -1 with err when it stops inside a member (its trailer cut short). */
int dsec_gzcheck_end(struct dsec_gzcheck *g, struct dsec_err *err);

void dsec_gzcheck_free(struct dsec_gzcheck *g);

#endif
