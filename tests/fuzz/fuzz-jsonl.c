/* libFuzzer harness: the JSON-lines record reader on arbitrary bytes. */
#include <stdint.h>
#include <stdio.h>

#include "jsonl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dsec_jsonl_reader r;
	struct dsec_err err;
	json_t *v;
	FILE *f;
	int rc, n = 0;

	if (size == 0)
		return 0;
	f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	dsec_jsonl_reader_init(&r, f, "<fuzz>", 4096);
	while ((rc = dsec_jsonl_next(&r, &v, &err)) != 0 && n++ < 10000) {
		if (rc > 0) {
			char *s = json_dumps(v, JSON_COMPACT);

			free(s);
			json_decref(v);
		}
	}
	dsec_jsonl_reader_free(&r);
	fclose(f);
	return 0;
}
