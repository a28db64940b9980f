/* Internal to cgroup.c and cgroup-res.c: the file helpers of cgroup.c. */
#ifndef DSEC_CGROUP_INT_H
#define DSEC_CGROUP_INT_H

#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* Write val to dir/file (one write). 0 or -1 with err (may be NULL). */
int dsec_cg_write(const char *dir, const char *file, const char *val, struct dsec_err *err);

/* Read dir/file into buf (NUL-terminated, at most n - 1 bytes). Length or -1. */
ssize_t dsec_cg_read(const char *dir, const char *file, char *buf, size_t n);

/* dir/file as a number; 0 when unreadable or dir is "". */
uint64_t dsec_cg_read_u64(const char *dir, const char *file);

#endif
