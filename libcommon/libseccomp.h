/* libseccomp's own <seccomp.h>: our libcommon/seccomp.h shadows it on the -Ilibcommon path, so
 * include this (with angle brackets) to reach the system header behind it. */
#ifndef DSEC_LIBSECCOMP_H
#define DSEC_LIBSECCOMP_H
#include_next <seccomp.h>
#endif
