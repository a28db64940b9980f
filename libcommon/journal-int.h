/* Internal to the journal modules (journal.c: the file, the index, the record path;
 * journal-rebuild.c: rebuilding a gone sandbox). */
#ifndef DSEC_JOURNAL_INT_H
#define DSEC_JOURNAL_INT_H

#include <sys/types.h>

#include "journal.h"

#define TRAJ_MAX 1024
#define STEP_MAX 256

enum { S_NEW, S_STARTED, S_DONE, S_RUNNING };

struct dsec_journal_step {
	const char *key;          /* traj \x1f step (the map's copy) */
	json_t *traj, *step;      /* as entries carry them */
	char id[DSEC_ID_MAX];     /* the sandbox its latest start ran in */
	int state, prev, written; /* written: this run appended its start */
	size_t order;             /* index of its latest start in j->order */
	off_t start_off, done_off;
	size_t start_len, done_len;
};

struct slot {
	char *key;
	void *val;
	uint64_t h;
};

struct map {
	struct slot *v;
	size_t cap, n;
};

struct buf {
	char *p;
	size_t len, cap;
};

struct dsec_journal {
	int fd, flags;
	char *path;
	off_t size;
	int dirty;           /* appended since the last fdatasync */
	struct map steps;    /* key -> struct dsec_journal_step * */
	struct map counters; /* traj -> next ordinal (uintptr_t) */
	struct map sbs;      /* sandbox id -> its "sandbox" entry (json_t *) */
	struct map cur;      /* root sandbox id -> the id that replaced it (char *) */
	struct dsec_journal_step **order;
	size_t norder, caporder;
	struct buf wb, ob; /* an entry to append; a replayed record */
	char *rbuf;
	size_t rcap;
	const char *map;        /* the file as loaded (its entries never change), or NULL */
	size_t maplen, mapsize; /* maplen: what is read from it (a torn tail cut off) */
};

/* The slot of key in m; with add, a new one (val NULL) when missing, NULL only when out of
 * memory. */
struct slot *dsec_jn_map_get(struct map *m, const char *key, int add);
void *dsec_jn_map_val(struct map *m, const char *key);

/* The step as text for messages: 3 or 'x'. Static storage. */
const char *dsec_jn_step_text(const struct dsec_journal_step *s);

/* Append entry e as one line with one write(2), synced when sync; *off, *len (may be NULL) get
 * where its text is. 0 or -1. */
int dsec_jn_append(struct dsec_journal *j, json_t *e, int sync, off_t *off, size_t *len,
		   struct dsec_err *err);

/* The entry at off (len bytes): a new reference, or NULL with err. */
json_t *dsec_jn_read_entry(struct dsec_journal *j, off_t off, size_t len, struct dsec_err *err);

/* The sandbox id replaces by a rebuild, or id itself. */
const char *dsec_jn_root_of(struct dsec_journal *j, const char *id);

/* Append the "sandbox" entry of sb (root: the sandbox it replaces, or NULL). 0 or -1. */
int dsec_jn_note_sandbox(struct dsec_journal *j, const struct dsec_sandbox *sb, const char *root,
			 int sync, struct dsec_err *err);

#endif
