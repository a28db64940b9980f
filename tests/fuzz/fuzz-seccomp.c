/* libFuzzer harness: the seccomp profile parser and compiler (dsec-seccomp(5)). Any input must
 * give a filter or one clear error line, never a crash, a leak or a multi-line message. The
 * filter is never loaded: that would confine the fuzzer itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "seccomp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dsec_seccomp *sc = NULL;
	struct dsec_err err = {0};

	if (dsec_seccomp_prepare_buf((const char *)data, size, "fuzz", &sc, &err) == 0) {
		if (!sc || dsec_seccomp_insns(sc) == 0)
			abort();
		dsec_seccomp_free(sc);
		return 0;
	}
	if (sc || !err.msg[0] || strchr(err.msg, '\n') || strncmp(err.msg, "seccomp profile", 15))
		abort();
	return 0;
}
