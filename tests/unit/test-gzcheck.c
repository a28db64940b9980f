/* gzcheck: each gzip member's CRC and length, whatever the pieces the stream comes in. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gzcheck.h"
#include "tap.h"

/* data as one gzip member into out (at most cap bytes); its length */
static size_t gz(const unsigned char *data, size_t n, unsigned char *out, size_t cap)
{
	z_stream zs = {0};
	size_t len;

	deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
	zs.next_in = (unsigned char *)data;
	zs.avail_in = (uInt)n;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	deflate(&zs, Z_FINISH);
	len = cap - zs.avail_out;
	deflateEnd(&zs);
	return len;
}

/* Feed s in pieces of step bytes (0: at once); 0 or -1, err set. */
static int check(const unsigned char *s, size_t n, size_t step, struct dsec_err *err)
{
	struct dsec_gzcheck *g = dsec_gzcheck_new();
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < n; i += step ? step : n)
		rc = dsec_gzcheck_feed(g, s + i, step && n - i > step ? step : n - i, err);
	if (rc == 0)
		rc = dsec_gzcheck_end(g, err);
	dsec_gzcheck_free(g);
	return rc;
}

int main(void)
{
	static unsigned char data[300000], s[700000];
	struct dsec_err err = {0};
	size_t a, b, n, steps[] = {0, 1, 7, 4096};

	for (size_t i = 0; i < sizeof(data); i++) /* some of it compresses, some does not */
		data[i] = i < 100000 ? (unsigned char)rand() : (unsigned char)(i % 7);
	a = gz(data, 150000, s, sizeof(s));
	b = gz(data + 150000, 150000, s + a, sizeof(s) - a);
	n = a + b;
	for (unsigned k = 0; k < 4; k++)
		ok(check(s, n, steps[k], &err) == 0, "two members, pieces of %zu: %s", steps[k],
		   err.msg);
	memset(s + n, 0, 512); /* padding after the last member */
	ok(check(s, n + 512, 1, &err) == 0, "padding after them: %s", err.msg);
	ok(check((const unsigned char *)"plain tar", 9, 1, &err) == 0, "not gzip: not checked");
	memcpy(s + n, "\x1f\x8b\x00\x00junk", 8); /* gzip's magic, no member: padding */
	ok(check(s, n + 8, 1, &err) == 0, "magic then junk after the last member: %s", err.msg);
	ok(check(s, n + 2, 0, &err) == 0, "magic alone after the last member: %s", err.msg);
	s[a - 8] ^= 1; /* the first member's CRC */
	ok(check(s, n, 7, &err) < 0 && err.errnum == EILSEQ && strstr(err.msg, "member 1"),
	   "first member's CRC: %s", err.msg);
	s[a - 8] ^= 1;
	s[n - 2] ^= 1; /* the second member's length */
	ok(check(s, n, 0, &err) < 0 && strstr(err.msg, "member 2") && strstr(err.msg, "length"),
	   "second member's length: %s", err.msg);
	s[n - 2] ^= 1;
	s[a / 2] ^= 0x10; /* data gzip stored as it was: only the CRC tells */
	ok(check(s, n, 4096, &err) < 0 && strstr(err.msg, "member 1"), "stored data: %s", err.msg);
	s[a / 2] ^= 0x10;
	ok(check(s, n - 3, 1, &err) < 0 && strstr(err.msg, "cut short"), "trailer cut: %s",
	   err.msg);
	return tap_done();
}
