/* libFuzzer harness: the archive importer (dsec_layer_import_fd) on arbitrary bytes, as a tar
 * stream in any compression or an OCI/docker archive. Imports go into a private store under
 * /tmp that is emptied after every input; the layer is kept as a tree (no EROFS build) to keep
 * the runs fast. Nothing may escape the store, crash, or be left in its staging dir. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "layer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static struct dsec_paths paths;
static char top[64];

static void cleanup(void)
{
	struct dsec_err err;

	if (top[0])
		dsec_rmtree(top, &err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct dsec_err err;

	strcpy(top, "/tmp/dsec-fuzz.XXXXXX");
	if (!mkdtemp(top))
		abort();
	atexit(cleanup);
	setenv("DSEC_LAYER_STAGE", "disk", 1);
	snprintf(paths.root, sizeof(paths.root), "%s/root", top);
	snprintf(paths.run, sizeof(paths.run), "%s/run", top);
	if (dsec_mkdir_p(paths.root, 0700, &err) < 0)
		abort();
	dsec_verbose = -1;
	return 0;
}

static int count(json_t *rec, void *arg, struct dsec_err *err)
{
	(*(int *)arg)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dsec_import_opts o;
	struct dsec_err err;
	int fd = memfd_create("fuzz", MFD_CLOEXEC), n = 0;
	char path[PATH_MAX + 16];

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return 0;
	}
	dsec_import_opts_init(&o);
	o.format_dir = 1;
	o.max_bytes = 4 << 20;
	o.max_files = 2000;
	dsec_layer_import_fd(&paths, &o, fd, 1, count, &n, &err);
	close(fd);
	/* a failed import leaves nothing in staging */
	snprintf(path, sizeof(path), "%s/tmp", paths.root);
	dsec_rmtree(path, &err);
	snprintf(path, sizeof(path), "%s/layers", paths.root);
	dsec_rmtree(path, &err);
	snprintf(path, sizeof(path), "%s/images", paths.root);
	dsec_rmtree(path, &err);
	return 0;
}
