#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl.h"
#include "tap.h"

static FILE *mem(const char *s)
{
	return fmemopen((void *)s, strlen(s), "r");
}

int main(void)
{
	struct dsec_jsonl_reader r;
	struct dsec_err err;
	json_t *v = NULL;
	const char *in = "{\"b\":1,\"a\":2,\"task\":\"x\"}\n\n  \n[1]\n{bad\n{\"z\":true}";
	FILE *f = mem(in);
	char *s;

	dsec_jsonl_reader_init(&r, f, "<test>", 0);
	ok(dsec_jsonl_next(&r, &v, &err) == 1, "first record parsed");
	s = json_dumps(v, JSON_COMPACT);
	ok(!strcmp(s, "{\"b\":1,\"a\":2,\"task\":\"x\"}"), "members keep their order: %s", s);
	free(s);
	json_decref(v);
	ok(dsec_jsonl_next(&r, &v, &err) == -1, "array is refused");
	ok(strstr(err.msg, "<test>:4:") != NULL, "line number counts blank lines: %s", err.msg);
	ok(dsec_jsonl_next(&r, &v, &err) == -1 && err.errnum == EINVAL, "malformed line refused");
	ok(dsec_jsonl_next(&r, &v, &err) == 1, "reader goes on after bad lines");
	ok(json_is_true(json_object_get(v, "z")), "last line without newline read");
	json_decref(v);
	ok(dsec_jsonl_next(&r, &v, &err) == 0, "end of input");
	dsec_jsonl_reader_free(&r);
	fclose(f);

	f = mem("{\"a\":\"0123456789012345678901234567890123456789\"}\n{\"b\":1}\n");
	dsec_jsonl_reader_init(&r, f, "<test>", 16);
	ok(dsec_jsonl_next(&r, &v, &err) == -1 && err.errnum == E2BIG, "long line refused: %s",
	   err.msg);
	ok(dsec_jsonl_next(&r, &v, &err) == 1, "next line after a long one is read");
	json_decref(v);
	dsec_jsonl_reader_free(&r);
	fclose(f);

	f = fmemopen((void *)"{\"a\":\"\0\"}\n", 10, "r");
	dsec_jsonl_reader_init(&r, f, "<test>", 0);
	ok(dsec_jsonl_next(&r, &v, &err) == -1, "NUL byte refused");
	dsec_jsonl_reader_free(&r);
	fclose(f);

	f = mem("{\"a\":1,\"a\":2}\n");
	dsec_jsonl_reader_init(&r, f, "<test>", 0);
	ok(dsec_jsonl_next(&r, &v, &err) == -1, "duplicate keys refused");
	dsec_jsonl_reader_free(&r);
	fclose(f);

	dsec_err_set(&err, ENOENT, "no such sandbox '%s'", "sb-1");
	v = dsec_jsonl_error_record(&err, "dsec-reap");
	s = json_dumps(v, JSON_COMPACT);
	ok(!strcmp(s, "{\"error\":{\"tool\":\"dsec-reap\",\"errno\":2,\"msg\":\"no such sandbox "
		      "'sb-1'\"}}"),
	   "error record: %s", s);
	free(s);
	json_decref(v);
	return tap_done();
}
