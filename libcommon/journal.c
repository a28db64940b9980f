/* The trajectory journal of dsec-exec (journal.h; the file format is dsec-journal(5)). The file
 * is mapped once at open and indexed (a hash of steps to the offsets of their entries); an entry
 * is parsed whole only when its step is replayed or rebuilt, so opening stays fast and memory
 * small for big outputs. Step entries are indexed from their first members alone, which dsec
 * always writes first and in this order: {"t":…,"traj":…,"step":…,"id":…. */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "journal-int.h"

#define HEADER "{\"t\":\"journal\",\"version\":1}"
#define FNV_INIT 1469598103934665603ULL

/* ---- a string-keyed hash map (open addressing, power-of-two size) ---- */

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *c = p;

	while (n--)
		h = (h ^ *c++) * 1099511628211ULL;
	return h;
}

static int map_grow(struct map *m)
{
	size_t nc = m->cap ? m->cap * 2 : 64, i, k;
	struct slot *nv = calloc(nc, sizeof(*nv));

	if (!nv)
		return -1;
	for (i = 0; i < m->cap; i++) {
		if (!m->v[i].key)
			continue;
		for (k = m->v[i].h & (nc - 1); nv[k].key; k = (k + 1) & (nc - 1))
			;
		nv[k] = m->v[i];
	}
	free(m->v);
	m->v = nv;
	m->cap = nc;
	return 0;
}

/* The slot of key; with add, a new one (val NULL) when missing, NULL only when out of memory. */
struct slot *dsec_jn_map_get(struct map *m, const char *key, int add)
{
	uint64_t h = fnv(key, strlen(key), FNV_INIT);
	size_t i;

	if (add && (m->n + 1) * 2 > m->cap && map_grow(m) < 0)
		return NULL;
	if (!m->cap)
		return NULL;
	for (i = h & (m->cap - 1); m->v[i].key; i = (i + 1) & (m->cap - 1))
		if (m->v[i].h == h && !strcmp(m->v[i].key, key))
			return &m->v[i];
	if (!add || !(m->v[i].key = strdup(key)))
		return NULL;
	m->v[i].h = h;
	m->v[i].val = NULL;
	m->n++;
	return &m->v[i];
}

void *dsec_jn_map_val(struct map *m, const char *key)
{
	struct slot *s = dsec_jn_map_get(m, key, 0);

	return s ? s->val : NULL;
}

static void map_free(struct map *m, void (*fr)(void *))
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->v[i].key) {
			if (fr)
				fr(m->v[i].val);
			free(m->v[i].key);
		}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static void step_free(void *p)
{
	struct dsec_journal_step *s = p;

	json_decref(s->traj);
	json_decref(s->step);
	free(s);
}

static void json_free(void *p)
{
	json_decref(p);
}

/* ---- keys ---- */

/* "traj\x1fstep" into buf (at least TRAJ_MAX + STEP_MAX + 32). 0, or -1 with err. */
static int make_key(char *buf, size_t n, const char *traj, json_t *step, struct dsec_err *err)
{
	if (strlen(traj) > TRAJ_MAX || strchr(traj, '\x1f'))
		return dsec_err_set(err, EINVAL, "\"traj\" longer than %d bytes or with a \\x1f",
				    TRAJ_MAX);
	if (json_is_integer(step) && json_integer_value(step) >= 0)
		snprintf(buf, n, "%s\x1f%" JSON_INTEGER_FORMAT, traj, json_integer_value(step));
	else if (json_is_string(step) && json_string_length(step) > 0 &&
		 json_string_length(step) <= STEP_MAX && !strchr(json_string_value(step), '\x1f'))
		snprintf(buf, n, "%s\x1f%s", traj, json_string_value(step));
	else
		return dsec_err_set(err, EINVAL,
				    "\"step\" is not a non-negative integer or a string of 1 to %d "
				    "bytes",
				    STEP_MAX);
	return 0;
}

/* The step as text for messages: 3 or "x". Static storage. */
const char *dsec_jn_step_text(const struct dsec_journal_step *s)
{
	static char buf[STEP_MAX + 8];

	if (json_is_integer(s->step))
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(s->step));
	else
		snprintf(buf, sizeof(buf), "'%s'", json_string_value(s->step));
	return buf;
}

/* ---- the file ---- */

/* json_dump_callback's: add to a struct buf (one spare byte kept for a NUL or newline). */
static int buf_cb(const char *data, size_t size, void *b_)
{
	struct buf *b = b_;

	if (b->len + size + 2 > b->cap) {
		size_t nc = (b->len + size + 2) * 2;
		char *nb = realloc(b->p, nc);

		if (!nb)
			return -1;
		b->p = nb;
		b->cap = nc;
	}
	memcpy(b->p + b->len, data, size);
	b->len += size;
	return 0;
}

/* Append e as one line with one write(2); *off and *len (may be NULL) get where its text is.
 * A partial write (disk full) is cut off again, so no torn line stays behind a good one. */
int dsec_jn_append(struct dsec_journal *j, json_t *e, int sync, off_t *off, size_t *len,
		   struct dsec_err *err)
{
	ssize_t n;

	j->wb.len = 0;
	if (json_dump_callback(e, buf_cb, &j->wb, JSON_COMPACT) < 0 || buf_cb("\n", 1, &j->wb) < 0)
		return dsec_err_set(err, ENOMEM, "journal '%s': encode entry", j->path);
	n = write(j->fd, j->wb.p, j->wb.len);
	if (n != (ssize_t)j->wb.len) {
		int e2 = n < 0 ? errno : ENOSPC;

		if (n > 0 && ftruncate(j->fd, j->size) < 0)
			dsec_warnx("journal '%s': cut a partial entry: %s", j->path,
				   strerror(errno));
		errno = e2;
		return dsec_err_sys(err, "journal '%s': append", j->path);
	}
	if (off)
		*off = j->size;
	if (len)
		*len = j->wb.len - 1;
	j->size += n;
	j->dirty = 1;
	return sync ? dsec_journal_sync(j, err) : 0;
}

int dsec_journal_sync(struct dsec_journal *j, struct dsec_err *err)
{
	if (!j->dirty)
		return 0;
	j->dirty = 0;
	if (!(j->flags & DSEC_JOURNAL_NOSYNC) && fdatasync(j->fd) < 0)
		return dsec_err_sys(err, "journal '%s': fdatasync", j->path);
	return 0;
}

/* The bytes of the entry at off (len, no newline): in the map, or read into j->rbuf (valid until
 * the next read). NULL with err. */
static const char *entry_bytes(struct dsec_journal *j, off_t off, size_t len, struct dsec_err *err)
{
	ssize_t n;

	if (j->map && (size_t)off + len <= j->maplen)
		return j->map + off;
	if (len + 1 > j->rcap) {
		char *nb = realloc(j->rbuf, len + 1);

		if (!nb)
			return dsec_err_set(err, ENOMEM, "journal '%s': read", j->path), NULL;
		j->rbuf = nb;
		j->rcap = len + 1;
	}
	n = pread(j->fd, j->rbuf, len, off);
	if (n != (ssize_t)len)
		return dsec_err_set(err, n < 0 ? errno : EIO, "journal '%s': read at %lld: %s",
				    j->path, (long long)off,
				    n < 0 ? strerror(errno) : "short read"),
		       NULL;
	return j->rbuf;
}

/* The entry at off (len bytes, no newline): a new reference, or NULL with err. */
json_t *dsec_jn_read_entry(struct dsec_journal *j, off_t off, size_t len, struct dsec_err *err)
{
	const char *p = entry_bytes(j, off, len, err);
	json_error_t je;
	json_t *e;

	if (!p)
		return NULL;
	e = json_loadb(p, len, JSON_ALLOW_NUL, &je);
	if (!json_is_object(e)) {
		json_decref(e);
		return dsec_err_set(err, EIO, "journal '%s': entry at %lld changed under us",
				    j->path, (long long)off),
		       NULL;
	}
	return e;
}

static int push_order(struct dsec_journal *j, struct dsec_journal_step *s)
{
	if (j->norder == j->caporder) {
		size_t nc = j->caporder ? j->caporder * 2 : 256;
		struct dsec_journal_step **no = realloc(j->order, nc * sizeof(*no));

		if (!no)
			return -1;
		j->order = no;
		j->caporder = nc;
	}
	s->order = j->norder;
	j->order[j->norder++] = s;
	return 0;
}

/* The step named by traj and step (borrowed), created (state S_NEW) when missing. */
static struct dsec_journal_step *step_get(struct dsec_journal *j, const char *traj, json_t *step,
					  int add, struct dsec_err *err)
{
	char key[TRAJ_MAX + STEP_MAX + 32];
	struct dsec_journal_step *s;
	struct slot *sl;

	if (make_key(key, sizeof(key), traj, step, err) < 0)
		return NULL;
	sl = dsec_jn_map_get(&j->steps, key, add);
	if (!sl)
		return add ? (dsec_err_set(err, ENOMEM, "journal index"), NULL) : NULL;
	if (sl->val)
		return sl->val;
	s = calloc(1, sizeof(*s));
	if (!s)
		return dsec_err_set(err, ENOMEM, "journal index"), NULL;
	s->key = sl->key;
	s->traj = json_string(traj);
	s->step = json_incref(step);
	sl->val = s;
	return s;
}

const char *dsec_jn_root_of(struct dsec_journal *j, const char *id)
{
	json_t *sb = dsec_jn_map_val(&j->sbs, id), *r = json_object_get(sb, "root");

	return json_is_string(r) ? json_string_value(r) : id;
}

const char *dsec_journal_current(struct dsec_journal *j, const char *id)
{
	const char *c = dsec_jn_map_val(&j->cur, dsec_jn_root_of(j, id));

	return c ? c : id;
}

/* Take a loaded step entry (kind 's'tart, 'd'one, 'a'bort) into the index. */
static int apply_step(struct dsec_journal *j, int kind, const char *traj, json_t *step,
		      const char *id, off_t off, size_t len, struct dsec_err *err)
{
	struct dsec_journal_step *s = step_get(j, traj, step, 1, err);

	if (!s)
		return -1;
	if (kind == 's') {
		if (!id || !dsec_sandbox_id_ok(id))
			return dsec_err_set(err, EINVAL, "start entry without a sandbox \"id\"");
		snprintf(s->id, sizeof(s->id), "%s", id);
		s->state = S_STARTED;
		s->start_off = off;
		s->start_len = len;
		return push_order(j, s) < 0 ? dsec_err_set(err, ENOMEM, "journal index") : 0;
	}
	if (kind == 'd') {
		if (s->state != S_STARTED)
			return dsec_err_set(err, EINVAL, "done entry without its start");
		s->state = S_DONE;
		s->done_off = off;
		s->done_len = len;
	} else
		s->state = S_NEW;
	return 0;
}

/* Take one loaded entry (parsed) into the index. */
static int apply(struct dsec_journal *j, json_t *e, off_t off, size_t len, struct dsec_err *err)
{
	const char *t = json_string_value(json_object_get(e, "t"));
	json_t *id = json_object_get(e, "id"), *traj = json_object_get(e, "traj");
	struct slot *sl;

	if (!t)
		return dsec_err_set(err, EINVAL, "entry without \"t\"");
	if (!strcmp(t, "sandbox") || !strcmp(t, "rebuild")) {
		if (!json_is_string(id) || !dsec_sandbox_id_ok(json_string_value(id)))
			return dsec_err_set(err, EINVAL, "%s entry without a sandbox \"id\"", t);
		if (t[0] == 's') {
			sl = dsec_jn_map_get(&j->sbs, json_string_value(id), 1);
			if (!sl)
				return dsec_err_set(err, ENOMEM, "journal index");
			json_decref(sl->val);
			sl->val = json_incref(e);
			return 0;
		}
		if (!json_is_string(json_object_get(e, "from")))
			return dsec_err_set(err, EINVAL, "rebuild entry without \"from\"");
		sl = dsec_jn_map_get(&j->cur, json_string_value(json_object_get(e, "from")), 1);
		if (!sl)
			return dsec_err_set(err, ENOMEM, "journal index");
		free(sl->val);
		sl->val = strdup(json_string_value(id));
		return sl->val ? 0 : dsec_err_set(err, ENOMEM, "journal index");
	}
	if (strcmp(t, "start") && strcmp(t, "done") && strcmp(t, "abort"))
		return 0; /* a later version's entry: not ours to judge */
	if (!json_is_string(traj))
		return dsec_err_set(err, EINVAL, "%s entry without \"traj\"", t);
	if (t[0] == 's' && !json_is_array(json_object_get(e, "cmd")))
		return dsec_err_set(err, EINVAL, "start entry without \"cmd\"");
	return apply_step(j, t[0], json_string_value(traj), json_object_get(e, "step"),
			  json_string_value(id), off, len, err);
}

/* Skip the literal lit at *p (within end). */
static int lit(const char **p, const char *end, const char *lit_)
{
	size_t n = strlen(lit_);

	if ((size_t)(end - *p) < n || memcmp(*p, lit_, n))
		return 0;
	*p += n;
	return 1;
}

/* A JSON string without escapes at *p (after its opening quote): its bytes into buf. */
static int plain_string(const char **p, const char *end, char *buf, size_t n)
{
	const char *q = *p;

	while (q < end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
		q++;
	if (q >= end || *q != '"' || (size_t)(q - *p) >= n)
		return 0;
	memcpy(buf, *p, (size_t)(q - *p));
	buf[q - *p] = '\0';
	*p = q + 1;
	return 1;
}

/* The fast path of load for a step entry as dsec writes it: {"t":"start|done|abort",
 * "traj":"…","step":N|"…","id":"…",… read without building the JSON tree. 1 when it was taken
 * into the index, 0 when the line does not have that form (the caller parses it whole), -1. */
static int apply_quick(struct dsec_journal *j, const char *p, size_t len, off_t off,
		       struct dsec_err *err)
{
	const char *end = p + len, *q = p;
	char traj[TRAJ_MAX + 1], sstep[STEP_MAX + 1], id[DSEC_ID_MAX];
	json_t *step;
	int kind, r;

	if (lit(&q, end, "{\"t\":\"start\","))
		kind = 's';
	else if (lit(&q, end, "{\"t\":\"done\","))
		kind = 'd';
	else if (lit(&q, end, "{\"t\":\"abort\","))
		kind = 'a';
	else
		return 0;
	if (!lit(&q, end, "\"traj\":\"") || !plain_string(&q, end, traj, sizeof(traj)) ||
	    !lit(&q, end, ",\"step\":"))
		return 0;
	if (q < end && *q == '"') {
		q++;
		if (!plain_string(&q, end, sstep, sizeof(sstep)))
			return 0;
		step = json_string(sstep);
	} else {
		long long v = 0;
		const char *d = q;

		while (q < end && *q >= '0' && *q <= '9' && q - d < 18)
			v = v * 10 + (*q++ - '0');
		if (q == d || (q - d > 1 && *d == '0'))
			return 0;
		step = json_integer(v);
	}
	if (!lit(&q, end, ",\"id\":\"") || !plain_string(&q, end, id, sizeof(id)) ||
	    (q < end && *q != ',' && *q != '}')) {
		json_decref(step);
		return 0;
	}
	r = apply_step(j, kind, traj, step, id, off, len, err);
	json_decref(step);
	return r < 0 ? -1 : 1;
}

static int fsync_dir(const char *path)
{
	char *d = strdup(path), *sl;
	int fd, r;

	if (!d)
		return -1;
	sl = strrchr(d, '/');
	if (sl == d)
		sl[1] = '\0';
	else if (sl)
		*sl = '\0';
	fd = open(sl ? d : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(d);
	if (fd < 0)
		return -1;
	r = fsync(fd);
	close(fd);
	return r;
}

static int load(struct dsec_journal *j, struct dsec_err *err)
{
	struct stat st;
	const char *buf = NULL;
	size_t len, pos = 0;
	unsigned long line = 0;
	int r = 0;

	if (fstat(j->fd, &st) < 0)
		return dsec_err_sys(err, "journal '%s': stat", j->path);
	if (!S_ISREG(st.st_mode))
		return dsec_err_set(err, EINVAL, "journal '%s': not a regular file", j->path);
	len = (size_t)st.st_size;
	if (len) {
		void *m = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, j->fd, 0);

		if (m == MAP_FAILED)
			return dsec_err_sys(err, "journal '%s': map", j->path);
		buf = j->map = m;
		j->maplen = j->mapsize = len;
	}
	while (pos < len && r == 0) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - buf) : len, hl = strlen(HEADER);
		int last = !nl || end + 1 == len;
		json_error_t je;
		json_t *e = NULL;

		line++;
		/* the last line is parsed whole: it may be torn */
		if (line > 1 && !last) {
			r = apply_quick(j, buf + pos, end - pos, (off_t)pos, err);
			if (r != 0) {
				if (r < 0)
					dsec_err_wrap(err, "journal '%s':%lu", j->path, line);
				r = r < 0 ? -1 : 0;
				pos = end + 1;
				continue;
			}
		}
		if (line > 1 || (end - pos == hl && !memcmp(buf + pos, HEADER, hl)))
			e = json_loadb(buf + pos, end - pos,
				       JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
		if (!nl || !json_is_object(e)) {
			/* Only the last line may be torn (a crash in the middle of an append); a
			 * torn first line is one only when it is a part of the header. */
			int torn = last;

			if (line == 1)
				torn = torn && end - pos <= hl &&
				       !memcmp(buf + pos, HEADER, end - pos);
			json_decref(e);
			if (!torn) {
				r = dsec_err_set(err, EINVAL, "journal '%s':%lu: %s", j->path, line,
						 line == 1 ? "not a dsec journal"
							   : "malformed entry");
				break;
			}
			dsec_warnx("journal '%s':%lu: torn last entry (%zu bytes) ignored", j->path,
				   line, len - pos);
			if (ftruncate(j->fd, (off_t)pos) < 0 || fdatasync(j->fd) < 0)
				r = dsec_err_sys(err, "journal '%s': cut the torn entry", j->path);
			len = pos;
			j->maplen = len;
			break;
		}
		if (line > 1 && apply(j, e, (off_t)pos, end - pos, err) < 0)
			r = dsec_err_wrap(err, "journal '%s':%lu", j->path, line);
		json_decref(e);
		pos = end + 1;
	}
	j->size = (off_t)len;
	if (r == 0 && len == 0) {
		json_t *h = json_pack("{s:s,s:i}", "t", "journal", "version", DSEC_JOURNAL_VERSION);

		r = dsec_jn_append(j, h, 1, NULL, NULL, err);
		json_decref(h);
		if (r == 0 && !(j->flags & DSEC_JOURNAL_NOSYNC) && fsync_dir(j->path) < 0)
			r = dsec_err_sys(err, "journal '%s': fsync its directory", j->path);
	}
	return r;
}

struct dsec_journal *dsec_journal_open(const char *path, int flags, struct dsec_err *err)
{
	struct dsec_journal *j = calloc(1, sizeof(*j));

	if (!j || !(j->path = strdup(path))) {
		free(j);
		return dsec_err_set(err, ENOMEM, "journal"), NULL;
	}
	j->flags = flags;
	j->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (j->fd < 0) {
		dsec_err_sys(err, "journal '%s': open", path);
		goto fail;
	}
	if (flock(j->fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK) {
			dsec_err_sys(err, "journal '%s': lock", path);
			goto fail;
		}
		dsec_warnx("journal '%s': in use by another dsec-exec, waiting", path);
		while (flock(j->fd, LOCK_EX) < 0)
			if (errno != EINTR) {
				dsec_err_sys(err, "journal '%s': lock", path);
				goto fail;
			}
	}
	if (load(j, err) < 0)
		goto fail;
	return j;
fail:
	dsec_journal_close(j);
	return NULL;
}

void dsec_journal_close(struct dsec_journal *j)
{
	if (!j)
		return;
	if (j->map)
		munmap((void *)j->map, j->mapsize);
	if (j->fd >= 0)
		close(j->fd);
	map_free(&j->steps, step_free);
	map_free(&j->counters, NULL);
	map_free(&j->sbs, json_free);
	map_free(&j->cur, free);
	free(j->order);
	free(j->wb.p);
	free(j->ob.p);
	free(j->rbuf);
	free(j->path);
	free(j);
}

void dsec_journal_counts(const struct dsec_journal *j, unsigned long *done,
			 unsigned long *unfinished)
{
	*done = *unfinished = 0;
	for (size_t i = 0; i < j->steps.cap; i++) {
		struct dsec_journal_step *s = j->steps.v[i].val;

		if (!j->steps.v[i].key)
			continue;
		*done += s->state == S_DONE;
		*unfinished += s->state == S_STARTED || (s->state == S_RUNNING && s->written);
	}
}

/* ---- the record path ---- */

/* rec's step s is recorded (started, maybe done): its entry whole (new reference) when it was
 * recorded with cmd, else NULL with err (EEXIST when the command differs). */
static json_t *recorded(struct dsec_journal *j, struct dsec_journal_step *s, const char *traj,
			json_t *cmd, struct dsec_err *err)
{
	json_t *e, *was;
	char *c;

	if (s->state == S_DONE) {
		e = dsec_jn_read_entry(j, s->done_off, s->done_len, err);
		was = json_object_get(json_object_get(e, "exec"), "cmd");
	} else {
		e = dsec_jn_read_entry(j, s->start_off, s->start_len, err);
		was = json_object_get(e, "cmd");
	}
	if (!e)
		return NULL;
	if (json_equal(was, cmd))
		return e;
	c = json_dumps(was, JSON_COMPACT);
	dsec_err_set(err, EEXIST, "journal: traj '%s' step %s: recorded with another command: %s",
		     traj, dsec_jn_step_text(s), c ? c : "(none)");
	free(c);
	json_decref(e);
	return NULL;
}

/* The replayed record of done step s as text: rec's members, then "exec" spliced from the done
 * entry (always its last member) with "replayed":true added, into j->ob. It is what printing rec
 * with the parsed "exec" gives (jansson wrote that text and writes it again the same), without
 * building a tree. 1 done; 0 when the entry does not look as dsec writes it, rec has an "exec"
 * already, or the command's text differs (the caller parses and compares values instead). */
static int replay_text(struct dsec_journal *j, struct dsec_journal_step *s, json_t *rec,
		       json_t *cmd, struct dsec_err *err)
{
	static const char key[] = ",\"exec\":{\"cmd\":", tail[] = ",\"replayed\":true}}";
	const char *p = entry_bytes(j, s->done_off, s->done_len, err), *x;
	size_t len = s->done_len, xl, cl;

	if (!p || json_object_get(rec, "exec") || len < sizeof(key) + 2 || p[len - 1] != '}' ||
	    p[len - 2] != '}' || !(x = memmem(p, len, key, sizeof(key) - 1)))
		return 0;
	x += 8; /* the exec object: {"cmd":…} */
	xl = (size_t)(p + len - 1 - x);
	j->ob.len = 0;
	if (json_dump_callback(cmd, buf_cb, &j->ob, JSON_COMPACT) < 0)
		return 0;
	cl = j->ob.len;
	if (xl < 7 + cl + 1 || memcmp(x + 7, j->ob.p, cl) || (x[7 + cl] != ',' && x[7 + cl] != '}'))
		return 0;
	j->ob.len = 0;
	if (json_dump_callback(rec, buf_cb, &j->ob, JSON_COMPACT) < 0 || j->ob.len < 2)
		return 0;
	j->ob.len--; /* its closing brace */
	if ((j->ob.len > 1 && buf_cb(",", 1, &j->ob) < 0) || buf_cb("\"exec\":", 7, &j->ob) < 0 ||
	    buf_cb(x, xl - 1, &j->ob) < 0 || buf_cb(tail, sizeof(tail) - 1, &j->ob) < 0)
		return 0;
	j->ob.p[j->ob.len] = '\0';
	return 1;
}

int dsec_journal_lookup(struct dsec_journal *j, json_t *rec, const char *id, json_t *cmd,
			const char **line, struct dsec_journal_step **step, struct dsec_err *err)
{
	json_t *tv = json_object_get(rec, "traj"), *sv = json_object_get(rec, "step"), *x, *e;
	struct dsec_journal_step *s;
	char tbuf[32];
	const char *traj = id;
	int own = 0;

	if (json_is_string(tv))
		traj = json_string_value(tv);
	else if (json_is_integer(tv)) {
		snprintf(tbuf, sizeof(tbuf), "%" JSON_INTEGER_FORMAT, json_integer_value(tv));
		traj = tbuf;
	} else if (tv)
		return dsec_err_set(err, EINVAL, "\"traj\" is not a string or an integer");
	if (!sv) { /* its place among the records of its trajectory */
		struct slot *sl = dsec_jn_map_get(&j->counters, traj, 1);

		if (!sl)
			return dsec_err_set(err, ENOMEM, "journal index");
		sv = json_integer((json_int_t)(uintptr_t)sl->val);
		sl->val = (void *)((uintptr_t)sl->val + 1);
		own = 1;
	}
	s = step_get(j, traj, sv, 1, err);
	if (own)
		json_decref(sv);
	if (!s)
		return -1;
	if (s->state == S_RUNNING)
		return dsec_err_set(err, EBUSY, "journal: traj '%s' step %s: already running", traj,
				    dsec_jn_step_text(s));
	if (s->state == S_DONE && line) {
		int r = replay_text(j, s, rec, cmd, err);

		if (r != 0) {
			*line = j->ob.p;
			return r;
		}
	}
	if (s->state == S_DONE || s->state == S_STARTED) {
		e = recorded(j, s, traj, cmd, err);
		if (!e)
			return -1;
		if (s->state == S_STARTED) {
			json_decref(e);
			if (!(j->flags & DSEC_JOURNAL_RERUN))
				return dsec_err_set(
				    err, EINPROGRESS,
				    "journal: traj '%s' step %s: started in %s and never "
				    "finished (it may have run; --rerun-unfinished runs it again)",
				    traj, dsec_jn_step_text(s), s->id);
		} else {
			x = json_object_get(e, "exec");
			if (!json_is_object(x)) {
				json_decref(e);
				return dsec_err_set(err, EINVAL,
						    "journal: traj '%s' step %s: no result", traj,
						    dsec_jn_step_text(s));
			}
			json_object_set_new(x, "replayed", json_true());
			json_object_set(rec, "exec", x);
			json_decref(e);
			return 1;
		}
	}
	s->prev = s->state;
	s->state = S_RUNNING;
	s->written = 0;
	*step = s;
	return 0;
}

int dsec_journal_start(struct dsec_journal *j, struct dsec_journal_step *s,
		       const struct dsec_sandbox *sb, const struct dsec_journal_spec *sp,
		       struct dsec_err *err)
{
	json_t *e, *env = json_array(), *v;
	const char *k;
	int r;

	if (!dsec_jn_map_val(&j->sbs, sb->id) && dsec_jn_note_sandbox(j, sb, NULL, 0, err) < 0)
		return -1;
	for (size_t i = 0; sp->optenv && sp->optenv[i]; i++) {
		const char *kv = sp->optenv[i], *hv = getenv(kv);

		if (strchr(kv, '='))
			json_array_append_new(env, json_string(kv));
		else if (hv)
			json_array_append_new(env, json_pack("s++", kv, "=", hv));
	}
	json_object_foreach(sp->recenv, k, v)
	{
		json_array_append_new(
		    env, json_pack("s++", k, "=", json_is_string(v) ? json_string_value(v) : ""));
	}
	e = json_pack("{s:s,s:O,s:O,s:s,s:O,s:o}", "t", "start", "traj", s->traj, "step", s->step,
		      "id", sb->id, "cmd", sp->cmd, "env", env);
	if (sp->cwd)
		json_object_set_new(e, "cwd", json_string(sp->cwd));
	if (sp->user)
		json_object_set_new(e, "user", json_string(sp->user));
	if (sp->stdin_s)
		json_object_set_new(e, "stdin", json_stringn(sp->stdin_s, sp->stdin_len));
	if (sp->timeout_us)
		json_object_set_new(e, "timeout_us", json_integer((json_int_t)sp->timeout_us));
	json_object_set_new(e, "max_output", json_integer((json_int_t)sp->max_output));
	json_object_set_new(e, "ts", json_integer((json_int_t)dsec_wall_us()));
	r = dsec_jn_append(j, e, 1, &s->start_off, &s->start_len, err);
	json_decref(e);
	if (r < 0)
		return -1;
	s->written = 1;
	snprintf(s->id, sizeof(s->id), "%s", sb->id);
	return push_order(j, s) < 0 ? dsec_err_set(err, ENOMEM, "journal index") : 0;
}

int dsec_journal_done(struct dsec_journal *j, struct dsec_journal_step *s, json_t *exec,
		      struct dsec_err *err)
{
	json_t *e = json_pack("{s:s,s:O,s:O,s:s,s:O}", "t", "done", "traj", s->traj, "step",
			      s->step, "id", s->id, "exec", exec);
	int r = dsec_jn_append(j, e, 0, &s->done_off, &s->done_len, err);

	json_decref(e);
	s->state = r < 0 ? S_STARTED : S_DONE;
	return r;
}

int dsec_journal_abort(struct dsec_journal *j, struct dsec_journal_step *s, const char *why,
		       struct dsec_err *err)
{
	json_t *e;
	int r = 0;

	if (!s->written) {
		s->state = s->prev;
		return 0;
	}
	/* Not synced: were it lost, the step would look unfinished and be reported, never
	 * silently run twice. */
	e = json_pack("{s:s,s:O,s:O,s:s}", "t", "abort", "traj", s->traj, "step", s->step, "msg",
		      why ? why : "");
	r = dsec_jn_append(j, e, 0, NULL, NULL, err);
	json_decref(e);
	s->state = r < 0 ? S_STARTED : S_NEW;
	return r;
}
