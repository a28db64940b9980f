/* dsec's default capability set as a bit mask (bit n = capability n): the names of
 * DSEC_CAPS_DEFAULT in caps.h (chown 0, dac_override 1, fowner 3, fsetid 4, kill 5, setgid 6,
 * setuid 7, setpcap 8, net_bind_service 10, audit_write 29, setfcap 31). Without includes, for
 * dsec-exec's libc-free front (front/exec-front.c); test-caps checks that caps.c's parse of
 * DSEC_CAPS_DEFAULT gives the same. */
#ifndef DSEC_CAPS_DEFAULT_H
#define DSEC_CAPS_DEFAULT_H

#define DSEC_CAPS_DEFAULT_MASK                                                                     \
	((1ULL << 0) | (1ULL << 1) | (1ULL << 3) | (1ULL << 4) | (1ULL << 5) | (1ULL << 6) |       \
	 (1ULL << 7) | (1ULL << 8) | (1ULL << 10) | (1ULL << 29) | (1ULL << 31))

#endif
