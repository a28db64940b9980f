/* libFuzzer harness: the parsers of sizes, durations and counts that every option and spec
 * record goes through. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dsec_err err;
	char *s = malloc(size + 1);
	uint64_t u;
	long long n;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (dsec_parse_size(s, 1ULL << 50, &u, "size", &err) == 0 && u > (1ULL << 50))
		abort();
	if (dsec_parse_duration(s, 86400ULL * 1000000 * 365, &u, "d", &err) == 0 &&
	    u > 86400ULL * 1000000 * 365)
		abort();
	if (dsec_parse_count(s, -5, 1000000, &n, "n", &err) == 0 && (n < -5 || n > 1000000))
		abort();
	free(s);
	return 0;
}
