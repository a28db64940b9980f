#include <errno.h>
#include <string.h>

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
	ok(untouched.errnum == 0 && untouched.msg[0] == 0, "untouched on success");
	ok(dsec_err_set(NULL, 1, "x") == -1, "NULL err tolerated");
	return tap_done();
}
