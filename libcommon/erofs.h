/* Build an EROFS image from a directory tree (the layer store's runtime form). */
#ifndef DSEC_EROFS_H
#define DSEC_EROFS_H

#include "err.h"

/* Write an uncompressed EROFS image of the tree at tree_fd to out_fd (an empty regular file):
 * modes, owners, mtimes (ns), hard links, symlinks, devices (whiteouts) and, when xattrs,
 * user.*, trusted.*, security.* and ACL xattrs. Never follows a symlink in the tree. Returns
 * 0 or -1. Not safe after fork (allocates). */
int dsec_erofs_build(int tree_fd, int out_fd, int xattrs, struct dsec_err *err);

#endif
