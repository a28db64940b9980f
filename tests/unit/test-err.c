#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "err.h"
#include "tap.h"

static int fails(struct dsec_err *err)
{
	errno = EACCES;
	return dsec_err_sys(err, "open '%s'", "/x");
}

int main(void)
{
	struct dsec_err err = {0}, untouched = {0};
	char big[2000];

	ok(fails(&err) == -1, "returns -1");
	ok(err.errnum == EACCES && !strcmp(err.msg, "open '/x': Permission denied"), "message: %s",
	   err.msg);
	dsec_err_wrap(&err, "sb-1");
	ok(!strcmp(err.msg, "sb-1: open '/x': Permission denied"), "wrap prefixes: %s", err.msg);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	dsec_err_set(&err, E2BIG, "%s", big);
	ok(strlen(err.msg) == DSEC_ERR_MSG_MAX - 1, "long message truncated, not overflowed");
	/* a long name in the middle: the start and what went wrong stay, around "..." */
	errno = EMFILE;
	dsec_err_sys(&err, "'%s': opendir", big);
	{
		const char *end = "a': opendir: Too many open files";
		size_t n = strlen(err.msg);

		ok(n == DSEC_ERR_MSG_MAX - 1 && !strncmp(err.msg, "'aaa", 4) &&
		       strstr(err.msg, "a...a") && !strcmp(err.msg + n - strlen(end), end),
		   "long name cut in the middle: %.8s...%s", err.msg, err.msg + n - strlen(end));
	}
	ok(untouched.errnum == 0 && untouched.msg[0] == 0, "untouched on success");
	ok(dsec_err_set(NULL, 1, "x") == -1, "NULL err tolerated");

	/* a message that is not UTF-8 still makes an error member, its bytes past ASCII as '?' */
	dsec_err_set(&err, EILSEQ, "'caf\xe9': bad");
	{
		json_t *j = dsec_err_json(&err, "dsec-x");
		const char *m = json_string_value(json_object_get(j, "msg"));

		ok(j && m && !strcmp(m, "'caf?': bad"), "invalid UTF-8 message recorded: %s",
		   m ? m : "(none)");
		json_decref(j);
	}

	/* control bytes reach the terminal as \xNN, on one line */
	{
		int mfd = memfd_create("stderr", 0), saved = dup(2);
		char got[256] = "";
		ssize_t n;

		fflush(stderr);
		dup2(mfd, 2);
		dsec_warnx("'%s': skipped", "a\x1b[31mred\nline");
		fflush(stderr);
		dup2(saved, 2);
		n = pread(mfd, got, sizeof(got) - 1, 0);
		got[n > 0 ? n : 0] = '\0';
		ok(strstr(got, "warning: 'a\\x1b[31mred\\x0aline': skipped\n") != NULL,
		   "control bytes escaped: %s", got);
		close(mfd);
		close(saved);
	}
	return tap_done();
}
