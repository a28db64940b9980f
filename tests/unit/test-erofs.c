/* Unit tests for the EROFS writer: superblock, root inode and a directory block, read back
 * from the image bytes (the bats suite mounts images and compares them with mkfs.erofs). */
#include <endian.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "erofs.h"
#include "state.h"
#include "tap.h"

static uint32_t le32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint16_t le16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return le16toh(v);
}

int main(void)
{
	char dir[] = "/tmp/test-erofs.XXXXXX", p[PATH_MAX];
	struct dsec_err err = {0};
	unsigned char *img;
	struct stat st;
	int tfd, ofd;

	if (!mkdtemp(dir))
		return 1;
	snprintf(p, sizeof(p), "%s/tree", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/tree/sub", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/tree/file", dir);
	close(open(p, O_WRONLY | O_CREAT, 0644));
	ok(truncate(p, 5000) == 0, "make a file");
	snprintf(p, sizeof(p), "%s/tree/wh", dir);
	mknod(p, S_IFCHR, makedev(0, 0));
	snprintf(p, sizeof(p), "%s/tree", dir);
	tfd = open(p, O_RDONLY | O_DIRECTORY);
	snprintf(p, sizeof(p), "%s/img", dir);
	ofd = open(p, O_RDWR | O_CREAT, 0644);
	ok(dsec_erofs_build(tfd, ofd, 0, &err) == 0, "build: %s", err.msg);
	fstat(ofd, &st);
	ok(st.st_size % 4096 == 0 && st.st_size >= 4 * 4096, "image is whole blocks (%lld)",
	   (long long)st.st_size);
	img = malloc((size_t)st.st_size);
	ok(pread(ofd, img, (size_t)st.st_size, 0) == st.st_size, "read the image");
	ok(le32(img + 1024) == 0xE0F5E1E2, "superblock magic");
	ok(img[1024 + 12] == 12, "4 KiB blocks");
	ok((uint64_t)le32(img + 1024 + 36) * 4096 == (uint64_t)st.st_size, "block count");
	{
		uint16_t root = le16(img + 1024 + 14);
		uint32_t meta = le32(img + 1024 + 40);
		const unsigned char *ino = img + (size_t)meta * 4096 + (size_t)root * 32;
		uint32_t blk = le32(ino + 16);
		const unsigned char *d = img + (size_t)blk * 4096;
		uint16_t first = le16(d + 8);

		ok(root != 0, "root nid is not 0 (readdir skips inode 0)");
		ok((le16(ino) & 1) == 1, "extended inode");
		ok(S_ISDIR(le16(ino + 4)), "root is a directory");
		ok(le32(ino + 44) == 3, "root has 3 links");
		ok(first / 12 == 5, "root block holds 5 dirents (., .., file, sub, wh)");
		ok(!memcmp(d + first, "...filesubwh", 12), "names sorted and packed");
	}
	free(img);
	close(tfd);
	close(ofd);
	dsec_rmtree(dir, &err);
	return tap_done();
}
