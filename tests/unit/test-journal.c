/* The trajectory journal without sandboxes: keys, replay, unfinished and aborted steps, torn and
 * malformed files, the lock. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "tap.h"

static char dir[] = "/tmp/dsec-test-journal.XXXXXX", path[256];
static struct dsec_sandbox sb = {.id = "sb-00000000000a", .image = "busybox"};

static json_t *rec(const char *js)
{
	json_error_t je;

	return json_loads(js, 0, &je);
}

/* Run rec (JSON text) with command cmd as a step that finishes with stdout out. */
static int run(struct dsec_journal *j, const char *r, json_t *cmd, const char *out)
{
	struct dsec_journal_step *s;
	struct dsec_journal_spec sp = {.cmd = cmd, .max_output = 1 << 20};
	struct dsec_err err;
	json_t *x = rec(r), *ex;
	int k = dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s, &err);

	if (k == 0) {
		ex = json_pack("{s:O,s:i,s:n,s:s,s:s}", "cmd", cmd, "exit", 0, "signal", "stdout",
			       out, "stderr", "");
		if (dsec_journal_start(j, s, &sb, &sp, &err) < 0 ||
		    dsec_journal_done(j, s, ex, &err) < 0)
			k = -2;
		json_decref(ex);
	}
	json_decref(x);
	return k;
}

static off_t size_of(void)
{
	struct stat st;

	return stat(path, &st) < 0 ? -1 : st.st_size;
}

static void append_raw(const char *s)
{
	int fd = open(path, O_WRONLY | O_APPEND);

	if (fd >= 0) {
		if (write(fd, s, strlen(s)) < 0)
			perror("write");
		close(fd);
	}
}

int main(void)
{
	struct dsec_journal *j;
	struct dsec_journal_step *s, *s2;
	struct dsec_err err;
	unsigned long done, unf;
	json_t *cmd = json_pack("[s,s,s]", "/bin/sh", "-c", "echo hi"),
	       *other = json_pack("[s]", "ls");
	json_t *x, *report = NULL;
	struct dsec_journal_spec sp = {.cmd = cmd};
	const char *line = NULL;
	char *text;
	off_t sz;
	int fd;

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/journal", dir);

	j = dsec_journal_open(path, 0, &err);
	ok(j != NULL, "a new journal is created");
	ok(size_of() == (off_t)strlen("{\"t\":\"journal\",\"version\":1}\n"), "holding the header");
	fd = open(path, O_RDONLY);
	ok(flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK, "and locked while open");
	close(fd);
	ok(run(j, "{\"traj\":\"t\",\"step\":0}", cmd, "one\n") == 0, "a new step runs");
	ok(run(j, "{\"traj\":\"t\",\"step\":\"b\"}", cmd, "two\n") == 0, "a string step runs");
	ok(run(j, "{\"traj\":\"a\\\"b\",\"step\":1}", cmd, "esc\n") == 0,
	   "a traj with a quote runs");
	ok(run(j, "{}", cmd, "o0\n") == 0 && run(j, "{}", cmd, "o1\n") == 0,
	   "records without traj/step run, keyed by sandbox id and order");
	ok(run(j, "{\"traj\":\"t\",\"step\":0}", cmd, "x") == 1,
	   "a done step is replayed in the same run");
	x = rec("{\"traj\":\"t\",\"step\":-1}");
	ok(dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s, &err) < 0 && err.errnum == EINVAL,
	   "a negative step is refused: %s", err.msg);
	json_decref(x);
	x = rec("{\"traj\":[1],\"step\":1}");
	ok(dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s, &err) < 0 && err.errnum == EINVAL,
	   "a traj that is not a string or integer is refused");
	json_decref(x);
	x = rec("{\"traj\":\"t\",\"step\":7}");
	ok(dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s, &err) == 0, "step 7 looked up");
	ok(dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s2, &err) < 0 && err.errnum == EBUSY,
	   "the same step again while it runs: EBUSY");
	ok(dsec_journal_abort(j, s, "nothing ran", &err) == 0, "abort before start");
	ok(dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s, &err) == 0 &&
	       dsec_journal_start(j, s, &sb, &sp, &err) == 0,
	   "then started");
	ok(dsec_journal_abort(j, s, "exec failed", &err) == 0, "and aborted after start");
	json_decref(x);
	x = rec("{\"traj\":\"t\",\"step\":8}");
	ok(dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s, &err) == 0 &&
	       dsec_journal_start(j, s, &sb, &sp, &err) == 0,
	   "step 8 started and left unfinished");
	json_decref(x);
	dsec_journal_counts(j, &done, &unf);
	ok(done == 5 && unf == 1, "5 done, 1 unfinished (%lu, %lu)", done, unf);
	ok(!strcmp(dsec_journal_current(j, sb.id), sb.id), "no rebuild: the sandbox is its own");
	ok(dsec_journal_rebuild(j, NULL, sb.id, &report, &err) == 1 && !report,
	   "rebuild without DSEC_JOURNAL_REBUILD does nothing");
	dsec_journal_close(j);

	j = dsec_journal_open(path, 0, &err);
	ok(j != NULL, "reopened");
	dsec_journal_counts(j, &done, &unf);
	ok(done == 5 && unf == 1, "the same counts after reopening (%lu, %lu)", done, unf);
	x = rec("{\"traj\":\"t\",\"step\":0,\"task\":\"k\"}");
	ok(dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s, &err) == 1, "a done step is answered");
	text = json_dumps(x, JSON_COMPACT);
	ok(!strcmp(text, "{\"traj\":\"t\",\"step\":0,\"task\":\"k\",\"exec\":{\"cmd\":[\"/bin/sh\","
			 "\"-c\",\"echo hi\"],\"exit\":0,\"signal\":null,\"stdout\":\"one\\n\","
			 "\"stderr\":\"\",\"replayed\":true}}"),
	   "with its whole result and replayed: %s", text);
	free(text);
	json_decref(x);
	x = rec("{\"traj\":\"t\",\"step\":0,\"task\":\"k\"}");
	ok(dsec_journal_lookup(j, x, sb.id, cmd, &line, &s, &err) == 1 && line &&
	       !strcmp(line, "{\"traj\":\"t\",\"step\":0,\"task\":\"k\",\"exec\":{\"cmd\":[\"/bin/"
			     "sh\",\"-c\",\"echo hi\"],\"exit\":0,\"signal\":null,\"stdout\":"
			     "\"one\\n\",\"stderr\":\"\",\"replayed\":true}}") &&
	       !json_object_get(x, "exec"),
	   "as text, the same record, rec untouched: %s", line ? line : "(null)");
	json_decref(x);
	x = rec("{\"traj\":\"t\",\"step\":0,\"exec\":1}");
	line = NULL;
	ok(dsec_journal_lookup(j, x, sb.id, cmd, &line, &s, &err) == 1 && !line &&
	       json_is_object(json_object_get(x, "exec")),
	   "a record with an \"exec\" already gets it replaced in place (the tree path)");
	json_decref(x);
	ok(run(j, "{\"traj\":\"t\",\"step\":\"b\"}", cmd, "") == 1, "string step replayed");
	ok(run(j, "{\"traj\":\"a\\\"b\",\"step\":1}", cmd, "") == 1,
	   "escaped traj replayed (full parse path)");
	ok(run(j, "{}", cmd, "") == 1 && run(j, "{}", cmd, "") == 1 && run(j, "{}", cmd, "z") == 0,
	   "order keys: the first two replayed, the third is new");
	x = rec("{\"traj\":\"t\",\"step\":0}");
	ok(dsec_journal_lookup(j, x, sb.id, other, NULL, &s, &err) < 0 && err.errnum == EEXIST &&
	       strstr(err.msg, "echo hi"),
	   "the same step with another command: EEXIST naming the recorded one: %s", err.msg);
	json_decref(x);
	x = rec("{\"traj\":\"t\",\"step\":8}");
	ok(dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s, &err) < 0 && err.errnum == EINPROGRESS,
	   "an unfinished step is reported: %s", err.msg);
	ok(dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s, &err) < 0 && err.errnum == EINPROGRESS,
	   "and again");
	json_decref(x);
	ok(run(j, "{\"traj\":\"t\",\"step\":7}", cmd, "seven") == 0, "an aborted step runs again");
	dsec_journal_close(j);

	j = dsec_journal_open(path, DSEC_JOURNAL_RERUN, &err);
	x = rec("{\"traj\":\"t\",\"step\":8}");
	ok(j && dsec_journal_lookup(j, x, sb.id, cmd, NULL, &s, &err) == 0,
	   "with DSEC_JOURNAL_RERUN the unfinished step runs");
	json_decref(x);
	dsec_journal_close(j);

	sz = size_of();
	append_raw("{\"t\":\"done\",\"traj\":\"t\",\"st");
	j = dsec_journal_open(path, 0, &err);
	ok(j != NULL, "a torn last line is not an error");
	ok(size_of() == sz, "it is cut off (%lld, %lld)", (long long)size_of(), (long long)sz);
	dsec_journal_close(j);
	append_raw("{\"t\":\"done\",\"traj\":\"t\",\"step\":0\n");
	j = dsec_journal_open(path, 0, &err);
	ok(j != NULL && size_of() == sz, "a malformed last line with its newline too");
	dsec_journal_close(j);

	append_raw("garbage\n{\"t\":\"abort\",\"traj\":\"t\",\"step\":7,\"msg\":\"\"}\n");
	sz = size_of();
	j = dsec_journal_open(path, 0, &err);
	ok(!j && err.errnum == EINVAL && strstr(err.msg, "malformed"),
	   "a malformed line before the last is an error: %s", err.msg);
	ok(size_of() == sz, "and the file is left alone");

	snprintf(path, sizeof(path), "%s/results.jsonl", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	if (fd >= 0) {
		if (write(fd, "{\"id\":\"sb-1\"}\n", 14) < 0)
			perror("write");
		close(fd);
	}
	j = dsec_journal_open(path, 0, &err);
	ok(!j && strstr(err.msg, "not a dsec journal"), "another JSON-lines file is refused: %s",
	   err.msg);
	ok(size_of() == 14, "and left alone");

	snprintf(path, sizeof(path), "%s/torn-header", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	if (fd >= 0) {
		if (write(fd, "{\"t\":\"jour", 10) < 0)
			perror("write");
		close(fd);
	}
	j = dsec_journal_open(path, 0, &err);
	ok(j != NULL && size_of() == 28, "a torn header is written again");
	dsec_journal_close(j);

	json_decref(cmd);
	json_decref(other);
	ok(dsec_rmtree(dir, &err) == 0, "cleaned up");
	return tap_done();
}
