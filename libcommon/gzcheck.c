#include "gzcheck.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum gz_state {
	GZ_UNDECIDED, /* fewer than four bytes seen */
	GZ_MEMBER,    /* inside a member */
	GZ_BETWEEN,   /* after a member: another one, or padding */
	GZ_OFF,       /* not gzip, or padding after the last member: nothing more to check */
};

struct dsec_gzcheck {
	z_stream zs;
	int zinit;
	enum gz_state state;
	unsigned char head[4]; /* the first bytes of the stream or of the next member */
	size_t nhead;
	unsigned long members;
};

struct dsec_gzcheck *dsec_gzcheck_new(void)
{
	return calloc(1, sizeof(struct dsec_gzcheck));
}

void dsec_gzcheck_free(struct dsec_gzcheck *g)
{
	if (!g)
		return;
	if (g->zinit)
		inflateEnd(&g->zs);
	free(g);
}

/* Inflate p[0..n) into nothing; the rest of the input after a member's end is left in *rest. */
static int inflate_some(struct dsec_gzcheck *g, const unsigned char *p, size_t n, size_t *rest,
			struct dsec_err *err)
{
	static unsigned char out[65536];
	int r = Z_OK;

	g->zs.next_in = (unsigned char *)p;
	g->zs.avail_in = (uInt)n;
	for (;;) {
		g->zs.next_out = out;
		g->zs.avail_out = sizeof(out);
		r = inflate(&g->zs, Z_NO_FLUSH);
		if (r == Z_STREAM_END || r == Z_BUF_ERROR) /* a member's end; or wants input */
			break;
		if (r != Z_OK)
			return dsec_err_set(err, r == Z_MEM_ERROR ? ENOMEM : EILSEQ,
					    "gzip member %lu: %s", g->members + 1,
					    g->zs.msg ? g->zs.msg : "bad data");
		/* all taken and no output held back (a full buffer may hide more, the trailer
		 * and its check included) */
		if (g->zs.avail_in == 0 && g->zs.avail_out > 0)
			break;
	}
	*rest = g->zs.avail_in;
	if (r == Z_STREAM_END) {
		g->members++;
		g->state = GZ_BETWEEN;
		g->nhead = 0;
	}
	return 0;
}

/* Four bytes at a member's start decide, as libarchive's reader does: gzip's magic, deflate and
 * no reserved flag start one; anything else is padding, which libarchive ignores too. */
static int start_member(struct dsec_gzcheck *g, struct dsec_err *err)
{
	size_t rest;

	if (g->head[0] != 0x1f || g->head[1] != 0x8b || g->head[2] != 8 || (g->head[3] & 0xe0)) {
		g->state = GZ_OFF;
		return 0;
	}
	if (!g->zinit) {
		/* gzip only, its trailer checked */
		if (inflateInit2(&g->zs, 16 + MAX_WBITS) != Z_OK)
			return dsec_err_set(err, ENOMEM, "gzip check: out of memory");
		g->zinit = 1;
	} else if (inflateReset(&g->zs) != Z_OK) {
		return dsec_err_set(err, EIO, "gzip check: reset failed");
	}
	g->state = GZ_MEMBER;
	return inflate_some(g, g->head, sizeof(g->head), &rest, err);
}

int dsec_gzcheck_feed(struct dsec_gzcheck *g, const void *buf, size_t n, struct dsec_err *err)
{
	const unsigned char *p = buf;

	while (n > 0 && g->state != GZ_OFF) {
		if (g->state == GZ_UNDECIDED || g->state == GZ_BETWEEN) {
			g->head[g->nhead++] = *p++;
			n--;
			if (g->nhead == sizeof(g->head) && start_member(g, err) < 0)
				return -1;
			continue;
		}
		size_t rest;

		if (inflate_some(g, p, n, &rest, err) < 0)
			return -1;
		p += n - rest;
		n = rest;
	}
	return 0;
}

int dsec_gzcheck_end(struct dsec_gzcheck *g, struct dsec_err *err)
{
	if (g->state == GZ_MEMBER)
		return dsec_err_set(err, EILSEQ, "gzip member %lu: cut short (no trailer)",
				    g->members + 1);
	return 0;
}
