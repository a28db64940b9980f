/* The sandbox's seccomp filter: built and compiled to BPF once in the parent, loaded in the
 * child just before execve with one system call.
 *
 * The default profile is compiled in (nothing at run time can be missing): an allow-list at
 * least as strict as Docker's default, every other call failing with EPERM, clone3 with ENOSYS
 * (so libc falls back to clone, whose flags are checked), the i386 and x32 ABIs denied whole.
 * A custom profile is a small JSON file, dsec-seccomp(5); {"default":"allow"} filters nothing
 * but foreign ABIs (for tests that show a probe failing without the filter).
 *
 * The default profile is compiled to BPF at build time (seccomp-gen), so loading it costs no
 * libseccomp work at run time; custom profiles are compiled when prepared.
 *
 * Use (dsec-exec):
 *   parent, once:  dsec_seccomp_prepare(path_or_NULL, &sc, &err);
 *                  dsec_caps_prepare(NULL, &caps, &err);            (caps.h)
 *   each child, after setns/chdir/descriptors, last before execve:
 *                  dsec_caps_apply(caps, &err) < 0 || dsec_seccomp_apply(sc, &err) < 0
 *                  -> report err to the parent, _exit
 *   parent, at the end: dsec_seccomp_free(sc); dsec_caps_free(caps); */
#ifndef DSEC_SECCOMP_H
#define DSEC_SECCOMP_H

#include <stddef.h>

#include "err.h"

struct dsec_seccomp; /* opaque: the compiled BPF program and where it came from */

/* Largest profile file accepted, in bytes. */
#define DSEC_SECCOMP_MAX_FILE (1 << 20)

/* Build the filter from the profile file at path and compile it to BPF, or, when path is
 * NULL, take the default profile's program compiled at build time. On success *out owns a new object (dsec_seccomp_free).
 * Returns 0, or -1 with err naming the file and, for a bad profile, the member at fault
 * ("rules[2].names[0]: unknown system call 'fooo'"). Allocates: call before fork. */
int dsec_seccomp_prepare(const char *path, struct dsec_seccomp **out, struct dsec_err *err);

/* The compiled-in default profile compiled by libseccomp now, as dsec_seccomp_prepare(NULL)
 * did before the build started doing it once (seccomp-gen writes this program out as a C
 * array; the unit test checks that both agree byte for byte). Same contract as
 * dsec_seccomp_prepare. */
int dsec_seccomp_compile_default(struct dsec_seccomp **out, struct dsec_err *err);

/* Like dsec_seccomp_prepare for a profile held in memory (len bytes of JSON, not necessarily
 * NUL-terminated); source names it in messages. Used by the fuzzer and the tests. */
int dsec_seccomp_prepare_buf(const char *buf, size_t len, const char *source,
			     struct dsec_seccomp **out, struct dsec_err *err);

/* Set no_new_privs and load the filter into the calling thread (and so into everything it
 * execs). Async-signal-safe, allocates nothing: meant for a forked child just before execve.
 * Drop capabilities first (dsec_caps_apply): the filter itself allows capset and prctl, but
 * doing it in that order keeps the window with full capabilities and no filter short and
 * obvious. Returns 0, or -1 with err filled (without strerror's locale machinery). */
int dsec_seccomp_apply(const struct dsec_seccomp *sc, struct dsec_err *err);

/* Number of BPF instructions in the compiled filter (for -v and the tests). */
size_t dsec_seccomp_insns(const struct dsec_seccomp *sc);

/* The compiled program itself (for the tests, which run it through a BPF interpreter over
 * every ABI and argument edge case). Owned by sc. */
struct sock_fprog;
const struct sock_fprog *dsec_seccomp_prog(const struct dsec_seccomp *sc);

/* The same verdicts in fewer instructions (seccomp-compact.c): the dispatch on the call number
 * of in, a program as libseccomp writes them, becomes a binary search over runs of numbers
 * with one outcome; the argument checks are copied. Returns 0 with out->filter a new
 * allocation (free), 1 when in is not of a shape it rewrites, or not shorter (out empty), -1
 * with err set when out of memory. Every program dsec_seccomp_prepare returns went through
 * it, unless dsec_seccomp_no_compact is set (the tests compare both). */
int dsec_seccomp_compact(const struct sock_fprog *in, struct sock_fprog *out, struct dsec_err *err);
extern int dsec_seccomp_no_compact;

/* Free an object from dsec_seccomp_prepare; NULL is fine. */
void dsec_seccomp_free(struct dsec_seccomp *sc);

#endif
