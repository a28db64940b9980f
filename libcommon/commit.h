/* Snapshots: a sandbox's changes become a layer and an image on top of the sandbox's image.
 *
 * The changes are the overlay's upper dir on the sandbox's tmpfs, which only the holder can
 * reach (its fd 4, see ns.h): dsec opens it through /proc/HOLDER/fd/4, checks the holder is
 * still the sandbox's (pid reuse), and from there reads the tree without following any link the
 * sandbox planted (openat with O_NOFOLLOW at every step, dsec_tar_upper_write), shifting owners
 * back from dsec's host range to the ids seen inside. The sandbox is paused while it is read, so
 * the layer is one consistent state; it resumes unless it was paused before. */
#ifndef DSEC_COMMIT_H
#define DSEC_COMMIT_H

#include <jansson.h>

#include "err.h"
#include "state.h"

/* Commit sandbox id: import its changes as an "application" layer and compose image `image`
 * (NULL: the sandbox's id) from the sandbox's layers plus that one. *rec gets
 * {"id":…,"image":…,"layer":…,"layers":[…],"from":<image of the sandbox>,"commit_us":…}.
 * 0 or -1. */
int dsec_commit(const struct dsec_paths *p, const char *id, const char *image, json_t **rec,
		struct dsec_err *err);

#endif
