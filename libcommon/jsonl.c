#include "jsonl.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void dsec_jsonl_reader_init(struct dsec_jsonl_reader *r, FILE *f, const char *name, size_t max_line)
{
	const char *env = getenv("DSEC_MAX_LINE");

	memset(r, 0, sizeof(*r));
	r->f = f;
	r->name = name ? name : "<stdin>";
	if (!max_line && env && *env)
		max_line = strtoul(env, NULL, 10);
	r->max_line = max_line ? max_line : DSEC_JSONL_MAX_LINE_DEFAULT;
}

void dsec_jsonl_reader_free(struct dsec_jsonl_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = 0;
}

int dsec_jsonl_buffered(const struct dsec_jsonl_reader *r)
{
#ifdef __GLIBC__
	return r->f->_IO_read_ptr < r->f->_IO_read_end;
#else
	return 1;
#endif
}

/* Read one line into r->buf without ever holding more than max_line bytes. Returns the length,
 * -1 at EOF with nothing read, -2 when the line was too long (consumed), -3 on a read error. */
static long read_line(struct dsec_jsonl_reader *r, int *has_nul)
{
	size_t len = 0;
	int c, toolong = 0;

	*has_nul = 0;
	if (!r->buf) {
		/* allocated up front so that an empty first line has somewhere to go */
		r->cap = r->max_line + 1 < 4096 ? r->max_line + 1 : 4096;
		r->buf = malloc(r->cap);
		if (!r->buf)
			return -3;
	}
	while ((c = getc_unlocked(r->f)) != EOF) {
		if (c == '\n')
			break;
		if (toolong)
			continue;
		if (c == '\0')
			*has_nul = 1;
		if (len + 1 >= r->cap) {
			size_t ncap = r->cap ? r->cap * 2 : 4096;
			char *nb;

			if (ncap > r->max_line + 1)
				ncap = r->max_line + 1;
			if (len + 1 >= ncap) {
				toolong = 1;
				continue;
			}
			nb = realloc(r->buf, ncap);
			if (!nb)
				return -3;
			r->buf = nb;
			r->cap = ncap;
		}
		r->buf[len++] = (char)c;
	}
	if (c == EOF && ferror(r->f))
		return -3;
	if (c == EOF && len == 0 && !toolong)
		return -1;
	r->line++;
	if (toolong)
		return -2;
	r->buf[len] = '\0';
	return (long)len;
}

int dsec_jsonl_next(struct dsec_jsonl_reader *r, json_t **out, struct dsec_err *err)
{
	for (;;) {
		json_t *v;
		int has_nul;
		long len = read_line(r, &has_nul);
		const char *p;

		if (len == -1)
			return 0;
		if (len == -3)
			return dsec_err_sys(err, "%s:%lu: read", r->name, r->line + 1);
		if (len == -2)
			return dsec_err_set(err, E2BIG, "%s:%lu: line longer than %zu bytes",
					    r->name, r->line, r->max_line);
		if (has_nul)
			return dsec_err_set(err, EINVAL, "%s:%lu: NUL byte in line", r->name,
					    r->line);
		for (p = r->buf; *p == ' ' || *p == '\t' || *p == '\r'; p++)
			;
		if (!*p)
			continue;
		if (!(v = dsec_jsonl_parse(r->buf, (size_t)len, err)))
			return dsec_err_wrap(err, "%s:%lu", r->name, r->line);
		*out = v;
		return 1;
	}
}

/* Does v hold a string with a NUL (\u0000) anywhere? */
static int has_nul_string(json_t *v)
{
	const char *k;
	json_t *m;
	size_t i;

	if (json_is_string(v))
		return memchr(json_string_value(v), '\0', json_string_length(v)) != NULL;
	if (json_is_object(v)) {
		json_object_foreach(v, k, m) if (has_nul_string(m)) return 1;
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, m) if (has_nul_string(m)) return 1;
	}
	return 0;
}

json_t *dsec_jsonl_parse(const char *line, size_t len, struct dsec_err *err)
{
	json_error_t je;
	const char *k;
	json_t *v = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je), *m;

	if (!v)
		return dsec_err_set(err, EINVAL, "invalid JSON: %s", je.text), NULL;
	if (!json_is_object(v)) {
		json_decref(v);
		return dsec_err_set(err, EINVAL, "record is not a JSON object"), NULL;
	}
	/* a command's output and input keep their NUL bytes ("exec" is dsec-exec's; "stdin" is
	 * fed by its length); anywhere else a string with one would be cut short by every C string
	 * it becomes (an id, an argument, a path) */
	json_object_foreach(v, k, m)
	{
		if (strcmp(k, "exec") != 0 && strcmp(k, "stdin") != 0 && has_nul_string(m)) {
			dsec_err_set(err, EINVAL,
				     "\"%s\": \\u0000 is allowed only in \"exec\" and \"stdin\"",
				     k);
			json_decref(v);
			return NULL;
		}
	}
	return v;
}

int dsec_jsonl_emit(json_t *rec, struct dsec_err *err)
{
	char *s = json_dumps(rec, JSON_COMPACT);

	if (!s)
		return dsec_err_set(err, ENOMEM, "encode record");
	if (fputs(s, stdout) == EOF || putchar('\n') == EOF || fflush(stdout) == EOF) {
		free(s);
		return dsec_err_sys(err, "write to stdout");
	}
	free(s);
	return 0;
}

void dsec_jsonl_put(json_t *rec, int *gone)
{
	struct dsec_err err;

	if (!*gone && dsec_jsonl_emit(rec, &err) < 0) {
		*gone = 1;
		if (err.errnum != EPIPE)
			dsec_err_print(&err);
	}
	json_decref(rec);
}

json_t *dsec_jsonl_set_error(json_t *rec, const struct dsec_err *err, const char *tool)
{
	json_object_set_new(rec, "error", dsec_err_json(err, tool));
	return rec;
}

json_t *dsec_jsonl_error_record(const struct dsec_err *err, const char *tool)
{
	return dsec_jsonl_set_error(json_object(), err, tool);
}

void dsec_jsonl_init_output(void)
{
	signal(SIGPIPE, SIG_IGN);
}

int dsec_close_stdout(void)
{
	int bad = ferror(stdout);

	if (fclose(stdout) != 0 && errno != EBADF)
		bad = 1;
	return bad ? -1 : 0;
}
