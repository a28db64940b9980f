/* A small EROFS image writer for the layer store: uncompressed, 4 KiB blocks, extended inodes,
 * every inode's data in whole blocks (FLAT_PLAIN), inline xattrs. File data goes from the
 * staging tree into the image with copy_file_range(2), in the kernel, which is what makes it
 * several times faster than mkfs.erofs 1.5 (4 KiB read/pwrite pairs). Format: the kernel's
 * Documentation/filesystems/erofs.rst; images are checked with fsck.erofs in the tests. */
#include "erofs.h"
#include "layer-int.h"

#include <dirent.h>
#include <search.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <linux/openat2.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define BLK 4096U
#define SB_OFF 1024
#define MAGIC 0xE0F5E1E2U
#define INODE_SIZE 64
#define DIRENT_SIZE 12

struct enode {
	char *name; /* in the parent; "" for the root */
	struct stat st;
	struct enode **kids; /* directories: sorted by name */
	size_t nkids, capkids;
	struct enode *parent;
	char *link;           /* symlinks */
	unsigned char *xattr; /* inline xattr body (header + entries), or NULL */
	size_t xattr_len;
	uint64_t nid;
	uint32_t blkaddr;    /* first data block */
	uint64_t size;       /* i_size */
	unsigned char *data; /* directory blocks or symlink target, built here */
	char *path;          /* regular files: path below the tree, to copy the data from */
	int is_link_alias;   /* a second name of a hard-linked inode */
	struct enode *alias; /* for aliases: the inode */
	unsigned ino;
};

struct builder {
	int xattrs;
	struct enode **all; /* every inode (not aliases), root first */
	size_t n, cap;
	void *links; /* tsearch tree of hard-linked inodes, by st_ino */
	struct dsec_err *err;
	int tree_fd;
	char path[PATH_MAX]; /* of the directory being walked, below the tree */
	size_t plen;
	int no_cfr;    /* copy_file_range refused (another filesystem): use sendfile */
	uint64_t room; /* bytes that may be copied before the free space is looked at again */
};

static int push(void *arrp, size_t *n, size_t *cap, void *item, size_t size)
{
	char **arr = arrp;

	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		char *a = realloc(*arr, c * size);

		if (!a)
			return -1;
		*arr = a;
		*cap = c;
	}
	memcpy(*arr + *n * size, item, size);
	(*n)++;
	return 0;
}

static const struct {
	const char *prefix;
	unsigned char index;
	int whole; /* the name is the prefix itself */
} prefixes[] = {
    {"user.", 1, 0},
    {"system.posix_acl_access", 2, 1},
    {"system.posix_acl_default", 3, 1},
    {"trusted.", 4, 0},
    {"security.", 6, 0},
};

/* Serialize the xattrs of path into n->xattr. */
static int read_xattrs(struct builder *b, struct enode *n, const char *path)
{
	char names[65536], val[65536];
	ssize_t len = llistxattr(path, names, sizeof(names));
	unsigned char *buf = NULL;
	size_t off = 12;

	if (len <= 0)
		return 0;
	for (ssize_t o = 0; o < len; o += (ssize_t)strlen(names + o) + 1) {
		const char *name = names + o, *suffix = NULL;
		unsigned char idx = 0, *nb;
		ssize_t vl;
		size_t sl, need;

		for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
			size_t pl = strlen(prefixes[i].prefix);

			if (prefixes[i].whole ? !strcmp(name, prefixes[i].prefix)
					      : !strncmp(name, prefixes[i].prefix, pl)) {
				idx = prefixes[i].index;
				suffix = name + pl;
				break;
			}
		}
		if (!idx)
			continue;
		vl = lgetxattr(path, name, val, sizeof(val));
		sl = strlen(suffix);
		if (vl < 0 || sl > 255)
			continue;
		need = (4 + sl + (size_t)vl + 3) & ~3UL;
		/* the entry's value size is 16 bits, the inode's count of 4-byte words too: a
		 * longer value would be read as further entries, never write one */
		if (vl > 0xffff || off + need > 12 + 4 * 0xfffeUL) {
			free(buf);
			return dsec_err_set(b->err, EFBIG, "'%s': xattrs too large for EROFS",
					    path);
		}
		nb = realloc(buf, off + need);
		if (!nb) {
			free(buf);
			return dsec_err_set(b->err, ENOMEM, "out of memory");
		}
		buf = nb;
		if (off == 12)
			memset(buf, 0, 12);
		memset(buf + off, 0, need);
		buf[off] = (unsigned char)sl;
		buf[off + 1] = idx;
		buf[off + 2] = (unsigned char)(vl & 0xff);
		buf[off + 3] = (unsigned char)(vl >> 8);
		memcpy(buf + off + 4, suffix, sl);
		memcpy(buf + off + 4 + sl, val, (size_t)vl);
		off += need;
	}
	n->xattr = buf;
	n->xattr_len = buf ? off : 0;
	return 0;
}

static int name_cmp(const void *x, const void *y)
{
	return strcmp((*(struct enode *const *)x)->name, (*(struct enode *const *)y)->name);
}

static int ino_cmp(const void *x, const void *y)
{
	ino_t a = ((const struct enode *)x)->st.st_ino, c = ((const struct enode *)y)->st.st_ino;

	return a < c ? -1 : a > c;
}

static struct enode *add_node(struct builder *b, struct enode *parent, int dfd, const char *name,
			      const char *rel)
{
	struct enode *n = calloc(1, sizeof(*n));
	char path[64 + NAME_MAX];

	if (!n || !(n->name = strdup(name))) {
		free(n);
		dsec_err_set(b->err, ENOMEM, "out of memory");
		return NULL;
	}
	n->parent = parent ? parent : n;
	if (fstatat(dfd, *name ? name : ".", &n->st, AT_SYMLINK_NOFOLLOW) < 0) {
		dsec_err_sys(b->err, "'%s': stat", name);
		return NULL;
	}
	if (!S_ISDIR(n->st.st_mode) && n->st.st_nlink > 1) {
		struct enode **found = tfind(n, &b->links, ino_cmp);

		if (found) {
			n->is_link_alias = 1;
			n->alias = *found;
			return n;
		}
		if (!tsearch(n, &b->links, ino_cmp))
			return NULL;
	}
	if (push(&b->all, &b->n, &b->cap, &n, sizeof(n)) < 0)
		return NULL;
	n->ino = (unsigned)b->n;
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dfd, *name ? name : ".");
	if (b->xattrs && read_xattrs(b, n, path) < 0)
		return NULL;
	if (S_ISLNK(n->st.st_mode)) {
		char target[PATH_MAX];
		ssize_t l = readlinkat(dfd, name, target, sizeof(target));

		if (l < 0) {
			dsec_err_sys(b->err, "'%s': readlink", name);
			return NULL;
		}
		n->data = malloc((size_t)l + 1);
		if (!n->data)
			return NULL;
		memcpy(n->data, target, (size_t)l);
		n->size = (uint64_t)l;
	} else if (S_ISREG(n->st.st_mode)) {
		n->path = strdup(rel);
		if (!n->path)
			return NULL;
		n->size = (uint64_t)n->st.st_size;
	}
	return n;
}

/* Append "/name" (or "name" at the root) to b->path; returns the old length or -1. */
static int path_push(struct builder *b, const char *name)
{
	size_t old = b->plen, n = strlen(name);

	if (old + n + 2 > sizeof(b->path))
		return dsec_err_set(b->err, ENAMETOOLONG, "'%s/%s': path too long", b->path, name);
	if (old)
		b->path[b->plen++] = '/';
	memcpy(b->path + b->plen, name, n + 1);
	b->plen += n;
	return (int)old;
}

static void path_pop(struct builder *b, int old)
{
	b->plen = (size_t)old;
	b->path[old] = '\0';
}

/* Depth-first over the tree; the path is kept in b->path, so a deep (hostile) tree costs
 * little stack per level. */
static int walk(struct builder *b, struct enode *dir, int dfd, int depth)
{
	DIR *d;
	struct dirent *de;
	int fd = dup(dfd);

	if (depth > 4096)
		return dsec_err_set(b->err, ELOOP, "tree too deep");
	d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return dsec_err_sys(b->err, "opendir");
	}
	while ((de = readdir(d))) {
		struct enode *k;
		int old;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		old = path_push(b, de->d_name);
		if (old < 0) {
			closedir(d);
			return -1;
		}
		k = add_node(b, dir, dfd, de->d_name, b->path);
		path_pop(b, old);
		if (!k || push(&dir->kids, &dir->nkids, &dir->capkids, &k, sizeof(k)) < 0) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	if (dir->nkids)
		qsort(dir->kids, dir->nkids, sizeof(*dir->kids), name_cmp);
	for (size_t i = 0; i < dir->nkids; i++) {
		struct enode *k = dir->kids[i];
		int cfd, r, old;

		if (!S_ISDIR(k->st.st_mode))
			continue;
		cfd = openat(dfd, k->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0)
			return dsec_err_sys(b->err, "'%s': open", k->name);
		old = path_push(b, k->name);
		r = old < 0 ? -1 : walk(b, k, cfd, depth + 1);
		if (old >= 0)
			path_pop(b, old);
		close(cfd);
		if (r < 0)
			return -1;
	}
	return 0;
}

static unsigned char ftype(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return 1;
	case S_IFDIR:
		return 2;
	case S_IFCHR:
		return 3;
	case S_IFBLK:
		return 4;
	case S_IFIFO:
		return 5;
	case S_IFSOCK:
		return 6;
	case S_IFLNK:
		return 7;
	}
	return 0;
}

struct dent {
	const char *name;
	struct enode *n;
};

static int dent_cmp(const void *x, const void *y)
{
	return strcmp(((const struct dent *)x)->name, ((const struct dent *)y)->name);
}

static struct enode *target(struct enode *n)
{
	return n->is_link_alias ? n->alias : n;
}

/* Directory blocks: dirents then names, entries sorted across blocks (lookups bisect). */
static int build_dir(struct enode *d)
{
	size_t n = d->nkids + 2, blocks = 1, used = 0, i, start = 0;
	struct dent *e = malloc(n * sizeof(*e));
	unsigned char *buf;

	if (!e)
		return -1;
	e[0] = (struct dent){".", d};
	e[1] = (struct dent){"..", d->parent};
	for (i = 0; i < d->nkids; i++)
		e[i + 2] = (struct dent){d->kids[i]->name, d->kids[i]};
	qsort(e, n, sizeof(*e), dent_cmp);
	for (i = 0; i < n; i++) { /* count blocks */
		size_t need = DIRENT_SIZE + strlen(e[i].name);

		if (used + need > BLK) {
			blocks++;
			used = 0;
		}
		used += need;
	}
	buf = calloc(blocks, BLK);
	if (!buf) {
		free(e);
		return -1;
	}
	d->data = buf;
	used = 0;
	for (i = 0; i <= n; i++) {
		size_t need = i < n ? DIRENT_SIZE + strlen(e[i].name) : 0;

		if (i == n || used + need > BLK) {
			/* write entries start..i-1 into the current block */
			unsigned char *blk = buf;
			size_t cnt = i - start, nameoff = cnt * DIRENT_SIZE;

			for (size_t k = 0; k < cnt; k++) {
				struct dent *x = &e[start + k];
				uint64_t nid = htole64(target(x->n)->nid);
				uint16_t no = htole16((uint16_t)nameoff);
				size_t l = strlen(x->name);

				memcpy(blk + k * DIRENT_SIZE, &nid, 8);
				memcpy(blk + k * DIRENT_SIZE + 8, &no, 2);
				blk[k * DIRENT_SIZE + 10] = ftype(target(x->n)->st.st_mode);
				memcpy(blk + nameoff, x->name, l);
				nameoff += l;
			}
			if (i == n) {
				d->size = (uint64_t)(buf - d->data) + nameoff;
				break;
			}
			buf += BLK;
			start = i;
			used = 0;
		}
		used += need;
	}
	free(e);
	return 0;
}

static void put_inode(unsigned char *p, struct enode *n)
{
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	unsigned icount = n->xattr_len ? 1 + (unsigned)(n->xattr_len - 12) / 4 : 0;

	memset(p, 0, INODE_SIZE);
	u16 = htole16(1); /* extended inode, FLAT_PLAIN */
	memcpy(p, &u16, 2);
	u16 = htole16((uint16_t)icount);
	memcpy(p + 2, &u16, 2);
	u16 = htole16((uint16_t)n->st.st_mode);
	memcpy(p + 4, &u16, 2);
	u64 = htole64(n->size);
	memcpy(p + 8, &u64, 8);
	if (S_ISCHR(n->st.st_mode) || S_ISBLK(n->st.st_mode)) {
		unsigned ma = major(n->st.st_rdev), mi = minor(n->st.st_rdev);

		u32 = htole32((mi & 0xff) | (ma << 8) | ((mi & ~0xffU) << 12));
	} else {
		u32 = htole32(n->size ? n->blkaddr : 0);
	}
	memcpy(p + 16, &u32, 4);
	u32 = htole32(n->ino);
	memcpy(p + 20, &u32, 4);
	u32 = htole32(n->st.st_uid);
	memcpy(p + 24, &u32, 4);
	u32 = htole32(n->st.st_gid);
	memcpy(p + 28, &u32, 4);
	u64 = htole64((uint64_t)n->st.st_mtim.tv_sec);
	memcpy(p + 32, &u64, 8);
	u32 = htole32((uint32_t)n->st.st_mtim.tv_nsec);
	memcpy(p + 40, &u32, 4);
	u32 = htole32((uint32_t)n->st.st_nlink);
	memcpy(p + 44, &u32, 4);
	if (n->xattr_len)
		memcpy(p + INODE_SIZE, n->xattr, n->xattr_len);
}

static int copy_seg(struct builder *b, struct enode *n, int in, int out, loff_t *ioffp,
		    loff_t *offp, uint64_t left);

static int copy_data(struct builder *b, struct enode *n, int out)
{
	struct open_how how = {
	    .flags = O_RDONLY | O_CLOEXEC,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int in = (int)syscall(SYS_openat2, b->tree_fd, n->path, &how, sizeof(how));
	loff_t base = (loff_t)n->blkaddr * BLK, off = base, ioff = 0;
	uint64_t left = n->size;

	if (in < 0)
		return dsec_err_sys(b->err, "'%s': open", n->path);
	/* holes are not copied: the image is made as long as it must be at the end, so they
	 * read as zeros there too, and a sparse file of 8 GiB costs no disk */
	while (dsec_layer_data_next(in, &ioff, &left, n->size) > 0) {
		off = base + ioff;
		if (copy_seg(b, n, in, out, &ioff, &off, left) < 0) {
			close(in);
			return -1;
		}
	}
	close(in);
	return 0;
}

/* Copy left bytes of in at *ioff to out at *off, advancing both. 0 or -1. */
static int copy_seg(struct builder *b, struct enode *n, int in, int out, loff_t *ioffp,
		    loff_t *offp, uint64_t left)
{
	loff_t ioff = *ioffp, off = *offp;

	while (left > 0) {
		/* in steps, each after a look at the space left (dsec_layer_room) */
		size_t step = left > (64U << 20) ? (64U << 20) : (size_t)left;
		ssize_t c = -1;

		if (dsec_layer_room(out, &b->room, step, n->path, b->err) < 0)
			return -1;
		if (!b->no_cfr) {
			c = copy_file_range(in, &ioff, out, &off, step, 0);
			if (c < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP ||
				      errno == ENOSYS)) {
				b->no_cfr = 1;
				c = -1;
			}
		}
		if (b->no_cfr) {
			/* across filesystems: splice in the kernel at the right place */
			if (lseek(out, off, SEEK_SET) != off)
				return dsec_err_sys(b->err, "seek image");
			c = sendfile(out, in, &ioff, step);
			if (c > 0)
				off += c;
		}
		if (c <= 0) {
			/* a file that shrank, or copy_file_range refused: plain copy */
			char buf[65536];
			ssize_t r = c < 0 ? pread(in, buf, sizeof(buf), ioff) : 0;

			if (r <= 0 || pwrite(out, buf, (size_t)r, off) != r)
				return dsec_err_sys(b->err, "'%s': copy", n->path);
			c = r;
			ioff += r;
			off += r;
		}
		left -= (uint64_t)c;
	}
	*ioffp = ioff;
	*offp = off;
	return 0;
}

static void nofree(void *p)
{
	(void)p;
}

static void free_all(struct builder *b)
{
	for (size_t i = 0; i < b->n; i++) {
		struct enode *n = b->all[i];

		for (size_t k = 0; k < n->nkids; k++)
			if (n->kids[k]->is_link_alias) {
				free(n->kids[k]->name);
				free(n->kids[k]);
			}
		free(n->kids);
		free(n->name);
		free(n->xattr);
		free(n->data);
		free(n->path);
		free(n);
	}
	free(b->all);
	tdestroy(b->links, nofree);
}

int dsec_erofs_build(int tree_fd, int out_fd, int xattrs, struct dsec_err *err)
{
	struct builder b = {.xattrs = xattrs, .err = err, .tree_fd = tree_fd};
	struct enode *root;
	unsigned char *meta = NULL, sb[128];
	uint64_t pos = 32, meta_bytes; /* nid 0 stays unused: readdir(3) skips inode number 0 */
	uint32_t blk, meta_blocks;
	int rc = -1;

	root = add_node(&b, NULL, tree_fd, "", "");
	if (!root || walk(&b, root, tree_fd, 0) < 0)
		goto out;
	/* inodes, 32-byte slots from block 1; an inode and its xattrs never cross a block */
	for (size_t i = 0; i < b.n; i++) {
		struct enode *n = b.all[i];
		uint64_t sz = (INODE_SIZE + n->xattr_len + 31) & ~31UL;

		if (pos / BLK != (pos + sz - 1) / BLK)
			pos = (pos + BLK - 1) / BLK * BLK;
		n->nid = pos / 32;
		pos += sz;
	}
	if (root->nid > 0xffff || b.all[b.n - 1]->nid > 0xffffffffULL) {
		dsec_err_set(err, EFBIG, "too many inodes");
		goto out;
	}
	meta_bytes = pos;
	meta_blocks = (uint32_t)((meta_bytes + BLK - 1) / BLK);
	blk = 1 + meta_blocks;
	for (size_t i = 0; i < b.n; i++) { /* data blocks */
		struct enode *n = b.all[i];

		if (S_ISDIR(n->st.st_mode) && build_dir(n) < 0) {
			dsec_err_set(err, ENOMEM, "out of memory");
			goto out;
		}
		n->blkaddr = blk;
		if ((uint64_t)blk + (n->size + BLK - 1) / BLK > 0xffffffffULL) {
			dsec_err_set(err, EFBIG, "image over 16 TiB");
			goto out;
		}
		blk += (uint32_t)((n->size + BLK - 1) / BLK);
	}
	meta = calloc(meta_blocks ? meta_blocks : 1, BLK);
	if (!meta) {
		dsec_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < b.n; i++) {
		struct enode *n = b.all[i];

		put_inode(meta + n->nid * 32, n);
		if (n->data && n->size &&
		    pwrite(out_fd, n->data, n->size, (off_t)n->blkaddr * BLK) != (ssize_t)n->size) {
			dsec_err_sys(err, "write image");
			goto out;
		}
		if (S_ISREG(n->st.st_mode) && n->size && copy_data(&b, n, out_fd) < 0)
			goto out;
	}
	if (pwrite(out_fd, meta, (size_t)meta_blocks * BLK, BLK) != (ssize_t)meta_blocks * BLK) {
		dsec_err_sys(err, "write image");
		goto out;
	}
	memset(sb, 0, sizeof(sb));
	{
		uint32_t u32;
		uint64_t u64;
		uint16_t u16;
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		u32 = htole32(MAGIC);
		memcpy(sb, &u32, 4);
		sb[12] = 12; /* 4 KiB blocks */
		u16 = htole16((uint16_t)root->nid);
		memcpy(sb + 14, &u16, 2);
		u64 = htole64(b.n);
		memcpy(sb + 16, &u64, 8);
		u64 = htole64((uint64_t)now.tv_sec);
		memcpy(sb + 24, &u64, 8);
		u32 = htole32(blk);
		memcpy(sb + 36, &u32, 4);
		u32 = htole32(1); /* meta_blkaddr */
		memcpy(sb + 40, &u32, 4);
	}
	if (pwrite(out_fd, sb, sizeof(sb), SB_OFF) != sizeof(sb) ||
	    ftruncate(out_fd, (off_t)blk * BLK) < 0) {
		dsec_err_sys(err, "write image");
		goto out;
	}
	rc = 0;
out:
	free(meta);
	free_all(&b);
	return rc;
}
