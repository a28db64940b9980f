/* What goes into a command and comes out of it: its environment, its captured output, the
 * UTF-8 repair that keeps every record valid JSON, signal names. */
#include "exec.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- environment ---- */

int dsec_env_set(struct dsec_env *e, const char *k, const char *v, struct dsec_err *err)
{
	size_t kl = strlen(k), i;
	char *s;

	if (!kl || strchr(k, '='))
		return dsec_err_set(err, EINVAL, "environment name '%.64s' is not valid", k);
	if (asprintf(&s, "%s=%s", k, v) < 0)
		return dsec_err_set(err, ENOMEM, "environment");
	for (i = 0; i < e->n; i++)
		if (!strncmp(e->v[i], k, kl) && e->v[i][kl] == '=') {
			free(e->v[i]);
			e->v[i] = s;
			return 0;
		}
	if (e->n + 2 > e->cap) {
		size_t nc = e->cap ? e->cap * 2 : 16;
		char **nv = realloc(e->v, nc * sizeof(*nv));

		if (!nv) {
			free(s);
			return dsec_err_set(err, ENOMEM, "environment");
		}
		e->v = nv;
		e->cap = nc;
	}
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
	return 0;
}

int dsec_env_put(struct dsec_env *e, const char *kv, struct dsec_err *err)
{
	const char *eq = strchr(kv, '=');
	char name[256];

	if (!eq) {
		const char *v = getenv(kv);

		return v ? dsec_env_set(e, kv, v, err) : 0;
	}
	if (eq == kv || (size_t)(eq - kv) >= sizeof(name))
		return dsec_err_set(err, EINVAL, "environment setting '%.64s' is not valid", kv);
	memcpy(name, kv, (size_t)(eq - kv));
	name[eq - kv] = '\0';
	return dsec_env_set(e, name, eq + 1, err);
}

int dsec_env_init(struct dsec_env *e, const struct dsec_sandbox *sb, struct dsec_err *err)
{
	size_t i;
	json_t *v;

	memset(e, 0, sizeof(*e));
	if (dsec_env_set(e, "PATH", DSEC_EXEC_PATH, err) < 0 ||
	    dsec_env_set(e, "HOME", DSEC_EXEC_HOME, err) < 0)
		return -1;
	if (sb && sb->hostname[0] && dsec_env_set(e, "HOSTNAME", sb->hostname, err) < 0)
		return -1;
	for (i = 0; sb && i < json_array_size(sb->env); i++) {
		v = json_array_get(sb->env, i);
		if (json_is_string(v) && dsec_env_put(e, json_string_value(v), err) < 0)
			return -1;
	}
	return 0;
}

void dsec_env_free(struct dsec_env *e)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		free(e->v[i]);
	free(e->v);
	memset(e, 0, sizeof(*e));
}

/* ---- capture ---- */

int dsec_capture_read(struct dsec_capture *c, int fd, struct dsec_err *err)
{
	char sink[65536];
	int budget;

	/* A bounded number of reads per call, so one endless writer cannot starve the others. */
	for (budget = 0; budget < 16; budget++) {
		size_t room = c->len < c->max ? c->max - c->len : 0;
		char *dst = sink;
		size_t want = sizeof(sink);
		ssize_t n;

		if (room) {
			if (c->cap - c->len < 65536 && c->cap < c->max) {
				size_t nc = c->cap ? c->cap * 2 : 65536;
				char *nb;

				if (nc > c->max)
					nc = c->max;
				nb = realloc(c->buf, nc);
				if (!nb)
					return dsec_err_set(err, ENOMEM, "capture buffer");
				c->buf = nb;
				c->cap = nc;
			}
			dst = c->buf + c->len;
			want = c->cap - c->len;
		}
		n = read(fd, dst, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 1;
		if (n < 0)
			return dsec_err_sys(err, "read output");
		if (n == 0)
			return 0;
		if (dst == sink)
			c->truncated = 1;
		else
			c->len += (size_t)n;
	}
	return 2;
}

void dsec_capture_free(struct dsec_capture *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

json_t *dsec_utf8_json(const char *s, size_t len)
{
	return dsec_utf8_json_max(s, len, SIZE_MAX, NULL, NULL);
}

/* What byte b (ASCII) takes in a JSON string as jansson writes it */
static size_t json_ascii_size(unsigned char b)
{
	if (b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t')
		return 2;
	return b < 0x20 ? 6 : 1; /* \u00XX */
}

json_t *dsec_utf8_json_max(const char *s, size_t len, size_t max, size_t *size, int *cut)
{
	const unsigned char *p = (const unsigned char *)s;
	char *out = malloc(len * 3 + 1);
	size_t i = 0, o = 0, enc = 2; /* the quotes */
	json_t *j;

	if (cut)
		*cut = 0;
	if (!out)
		return NULL;
	while (i < len) {
		unsigned char b = p[i];
		unsigned need, k;
		unsigned char lo = 0x80, hi = 0xbf;

		/* stop before a byte (or sequence: at most 4 bytes written) that may not fit */
		if (enc + 6 > max && enc + (b >= 0x80 ? 4 : json_ascii_size(b)) > max) {
			if (cut)
				*cut = 1;
			break;
		}
		if (b < 0x80) {
			enc += json_ascii_size(b);
			out[o++] = (char)b;
			i++;
			continue;
		}
		if (b >= 0xc2 && b <= 0xdf)
			need = 1;
		else if (b >= 0xe0 && b <= 0xef) {
			need = 2;
			if (b == 0xe0)
				lo = 0xa0;
			else if (b == 0xed)
				hi = 0x9f;
		} else if (b >= 0xf0 && b <= 0xf4) {
			need = 3;
			if (b == 0xf0)
				lo = 0x90;
			else if (b == 0xf4)
				hi = 0x8f;
		} else
			need = 0;
		for (k = 1; need && k <= need; k++) {
			unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xbf;

			if (i + k >= len || p[i + k] < l || p[i + k] > h)
				break;
		}
		if (need && k > need) {
			memcpy(out + o, p + i, need + 1);
			o += need + 1;
			enc += need + 1;
			i += need + 1;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3); /* U+FFFD for the maximal subpart */
			o += 3;
			enc += 3;
			i += need ? k : 1;
		}
	}
	if (size)
		*size = enc;
	j = json_stringn_nocheck(out, o);
	free(out);
	return j;
}

const char *dsec_signame(int sig)
{
	static char buf[32];
	const char *a = sig > 0 && sig < NSIG ? sigabbrev_np(sig) : NULL;

	if (a)
		snprintf(buf, sizeof(buf), "SIG%s", a);
	else if (sig >= SIGRTMIN && sig <= SIGRTMAX)
		snprintf(buf, sizeof(buf), "SIGRTMIN+%d", sig - SIGRTMIN);
	else
		snprintf(buf, sizeof(buf), "SIG%d", sig);
	return buf;
}
