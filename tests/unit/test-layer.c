/* Unit tests for the pure parts of layer import: member names, whiteouts, xattrs, modes. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "layer.h"
#include "tap.h"

static int clean(const char *in, char *out, int *abs_, int *errnum)
{
	struct dsec_err err = {0};
	int r = dsec_layer_clean_path(in, out, PATH_MAX, abs_, &err);

	*errnum = err.errnum;
	return r;
}

int main(void)
{
	char out[PATH_MAX], big[PATH_MAX + 10], t[PATH_MAX];
	struct dsec_err err;
	int abs_, e;

	ok(clean("etc/passwd", out, &abs_, &e) == 0 && !strcmp(out, "etc/passwd") && !abs_,
	   "plain path kept");
	ok(clean("./usr//lib/./x/", out, &abs_, &e) == 0 && !strcmp(out, "usr/lib/x"),
	   "'.', empty components and trailing slash removed");
	ok(clean("/etc/shadow", out, &abs_, &e) == 0 && !strcmp(out, "etc/shadow") && abs_,
	   "leading slash removed and reported");
	ok(clean("./", out, &abs_, &e) == 0 && !strcmp(out, ""), "'./' is the root");
	ok(clean("../x", out, &abs_, &e) < 0 && e == EINVAL, "'..' refused");
	ok(clean("a/../../x", out, &abs_, &e) < 0 && e == EINVAL, "inner '..' refused");
	ok(clean("a/..", out, &abs_, &e) < 0, "trailing '..' refused");
	ok(clean("a/..b/c..", out, &abs_, &e) == 0 && !strcmp(out, "a/..b/c.."),
	   "names merely containing dots kept");
	ok(clean("bad\xff", out, &abs_, &e) < 0 && e == EILSEQ, "invalid UTF-8 refused");
	ok(clean("caf\xc3\xa9", out, &abs_, &e) == 0, "valid UTF-8 kept");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ok(clean(big, out, &abs_, &e) < 0 && e == ENAMETOOLONG, "name over PATH_MAX refused");
	memset(big, 'a', 300);
	big[300] = '\0';
	ok(clean(big, out, &abs_, &e) < 0 && e == ENAMETOOLONG, "component over NAME_MAX refused");

	ok(dsec_utf8_ok("\xed\xa0\x80") == 0, "UTF-8 surrogate refused");
	ok(dsec_utf8_ok("\xc0\xaf") == 0, "overlong UTF-8 refused");
	ok(dsec_utf8_ok("\xf0\x9f\x98\x80") == 1, "4-byte UTF-8 accepted");
	ok(dsec_utf8_ok("\xe2\x82") == 0, "truncated UTF-8 refused");

	ok(dsec_layer_whiteout("etc/passwd", t, sizeof(t), &err) == DSEC_WH_NONE, "no whiteout");
	ok(dsec_layer_whiteout("etc/.wh.passwd", t, sizeof(t), &err) == DSEC_WH_FILE &&
	       !strcmp(t, "etc/passwd"),
	   ".wh.NAME whites out dir/NAME");
	ok(dsec_layer_whiteout(".wh.top", t, sizeof(t), &err) == DSEC_WH_FILE && !strcmp(t, "top"),
	   "whiteout at the root");
	ok(dsec_layer_whiteout("opt/.wh..wh..opq", t, sizeof(t), &err) == DSEC_WH_OPAQUE &&
	       !strcmp(t, "opt"),
	   "opaque marker names its directory");
	ok(dsec_layer_whiteout(".wh..wh..opq", t, sizeof(t), &err) == DSEC_WH_OPAQUE &&
	       !strcmp(t, ""),
	   "opaque root");
	ok(dsec_layer_whiteout("x/.wh..wh.plnk", t, sizeof(t), &err) == DSEC_WH_IGNORE,
	   "aufs bookkeeping ignored");
	ok(dsec_layer_whiteout("x/.wh...", t, sizeof(t), &err) < 0, "whiteout of '..' refused");
	ok(dsec_layer_whiteout("x/.wh..", t, sizeof(t), &err) < 0, "whiteout of '.' refused");
	ok(dsec_layer_whiteout("x/.wh.", t, sizeof(t), &err) < 0, "whiteout of nothing refused");
	ok(dsec_layer_whiteout("x/a.wh.b", t, sizeof(t), &err) == DSEC_WH_NONE,
	   "'.wh.' inside a name is no whiteout");

	ok(dsec_layer_xattr_keep("user.mime_type", 0), "user.* kept");
	ok(!dsec_layer_xattr_keep("user.overlay.opaque", 0), "user.overlay.* dropped");
	ok(!dsec_layer_xattr_keep("trusted.overlay.redirect", 1), "trusted.overlay.* dropped");
	ok(!dsec_layer_xattr_keep("trusted.other", 0), "trusted.* dropped");
	ok(!dsec_layer_xattr_keep("security.capability", 0), "capability dropped by default");
	ok(dsec_layer_xattr_keep("security.capability", 1), "capability kept with allow_setuid");
	ok(dsec_layer_xattr_keep("security.selinux", 0), "security.selinux kept");
	ok(dsec_layer_xattr_keep("system.posix_acl_access", 0), "ACL kept");
	ok(!dsec_layer_xattr_keep("system.nfs4_acl", 0), "other system.* dropped");

	ok(dsec_layer_mode(S_IFREG | 06755, 0) == 0755, "setuid/setgid stripped from files");
	ok(dsec_layer_mode(S_IFREG | 06755, 1) == 06755, "kept with allow_setuid");
	ok(dsec_layer_mode(S_IFDIR | 03775, 0) == 03775, "setgid and sticky kept on directories");
	return tap_done();
}
