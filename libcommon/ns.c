#include "ns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define STR_(x) #x
#define STR(x) STR_(x)
#define PTYS_MAX_STR STR(DSEC_PTYS_MAX)

/* Name of a layer's mount point in the template: 32 hex digits (128 bits) of its sha256 keep
 * the overlay's option string short enough for 64 layers in one page. */
#define LAYER_MNT_HEX 32

const char *dsec_layer_hex(const char *layer_id)
{
	const char *c = strchr(layer_id, ':');

	return c ? c + 1 : layer_id;
}

static int is_mntns(int fd)
{
	return ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWNS;
}

static void template_dir(const struct dsec_paths *p, char *buf, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/template%s%s", p->run, name ? "/" : "", name ? name : "");
}

static int open_pin(const struct dsec_paths *p)
{
	char pin[PATH_MAX];
	int fd;

	template_dir(p, pin, "mnt");
	fd = open(pin, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	if (!is_mntns(fd)) {
		close(fd);
		return -1;
	}
	return fd;
}

int dsec_template_exists(const struct dsec_paths *p)
{
	int fd = open_pin(p);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static ssize_t read_full(int fd, void *buf, size_t n)
{
	ssize_t r;

	do
		r = read(fd, buf, n);
	while (r < 0 && errno == EINTR);
	return r;
}

/* The template's id mapping. Its name changes with what a template holds, so that one made
 * by an older dsec (without /n, say, or with its layers idmapped) is not current and gets
 * replaced. */
#define IDMAP_FILE "idmap-r"

/* In the template: hide the host's network interfaces in sysfs copy ROOT under the mask dir
 * /m: the net dir of every device ROOT/class/net names (links like
 * ../../devices/pci0000:00/…/virtio0/net/eth0), once each, then the class dir itself. Once
 * per template, not per sandbox: a host (or a node of --net nat sandboxes) can have
 * thousands of interfaces, nearly all under the one devices/virtual/net. */
static int hide_net(const char *root, struct dsec_err *err)
{
	static const char pre[] = "../../devices/";
	char path[PATH_MAX], target[PATH_MAX];
	struct stat st, mst;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "%s/class/net", root);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : dsec_err_sys(err, "open '%s'", path);
	if (stat("/m", &mst) < 0) {
		closedir(d);
		return dsec_err_sys(err, "stat mask dir");
	}
	while ((e = readdir(d))) {
		char *slash;
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/class/net/%s", root, e->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		slash = strrchr(target, '/');
		if (strncmp(target, pre, sizeof(pre) - 1) || strstr(target + sizeof(pre) - 1, ".."))
			continue;
		*slash = '\0';
		snprintf(path, sizeof(path), "%s/%s", root, target + 6);
		/* already hidden: the dir is the mask's (each virtual interface shares one) */
		if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_dev == mst.st_dev)
			continue;
		if (mount("/m", path, NULL, MS_BIND, NULL) < 0) {
			dsec_err_sys(err, "hide '%s'", path);
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	snprintf(path, sizeof(path), "%s/class/net", root);
	if (mount("/m", path, NULL, MS_BIND, NULL) < 0)
		return dsec_err_sys(err, "hide '%s'", path);
	return 0;
}

/* In the template: hide what sysfs ROOT tells of the kernel itself under the mask dir /m and
 * the empty file /e: where its crash notes lie in physical memory (vmcoreinfo), its build
 * notes, its type information (btf) and the firmware's boot parameters, all of use to an
 * exploit and to nothing a sandbox runs. Once per template: the sandboxes' copies carry it. */
static int hide_kernel(const char *root, struct dsec_err *err)
{
	/* a file under the empty file /e, a dir under the empty dir /m */
	static const struct {
		const char *path, *mask;
	} hide[] = {{"kernel/vmcoreinfo", "/e"},
		    {"kernel/notes", "/e"},
		    {"kernel/btf", "/m"},
		    {"kernel/boot_params", "/m"}};
	char path[PATH_MAX];

	for (size_t i = 0; i < sizeof(hide) / sizeof(hide[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", root, hide[i].path);
		if (mount(hide[i].mask, path, NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
			return dsec_err_sys(err, "hide '%s'", path);
	}
	return 0;
}

/* The child that makes the template: a copy of our mount namespace, a tmpfs pivoted to its root,
 * everything of the host detached. One pivot_root per run dir, not per sandbox. */
static void template_child(const char *tdir, int sync)
{
	struct dsec_err err = {0};
	char c;

	if (unshare(CLONE_NEWNS) < 0) {
		dsec_err_sys(&err, "unshare mount namespace");
		goto fail;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		dsec_err_sys(&err, "make mounts private");
		goto fail;
	}
	if (mount("dsec-template", tdir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=4m") < 0) {
		dsec_err_sys(&err, "mount template tmpfs on '%s'", tdir);
		goto fail;
	}
	if (chdir(tdir) < 0 || mkdir("old", 0700) < 0 || syscall(SYS_pivot_root, ".", "old") < 0 ||
	    chdir("/") < 0) {
		dsec_err_sys(&err, "pivot_root into template");
		goto fail;
	}
	/* /s: the host's sysfs, read-only, without what is mounted below it (debugfs, cgroups…) */
	if (mkdir("/s", 0755) < 0 || mount("/old/sys", "/s", NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, "/s", NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		dsec_err_sys(&err, "bind sysfs into template");
		goto fail;
	}
	/* /m: empty and read-only, bound over what a sandbox must not see */
	if (mkdir("/m", 0555) < 0 || mount("/m", "/m", NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, "/m", NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		dsec_err_sys(&err, "make mask dir in template");
		goto fail;
	}
	/* /e: an empty read-only file, bound over the files of sysfs a sandbox must not read */
	{
		int fd = open("/e", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);

		if (fd < 0 || close(fd) < 0 || mount("/e", "/e", NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, "/e", NULL,
			  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  NULL) < 0) {
			dsec_err_sys(&err, "make mask file in template");
			goto fail;
		}
	}
	if (hide_kernel("/s", &err) < 0)
		goto fail;
	/* /n: the same sysfs for sandboxes with a network namespace of their own, without the
	 * host's interface names and addresses (a sysfs of their own would show only theirs, but
	 * cost ~0.3 ms more per spawn and per reap) */
	if (mkdir("/n", 0755) < 0 || mount("/old/sys", "/n", NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, "/n", NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		dsec_err_sys(&err, "bind sysfs into template");
		goto fail;
	}
	if (hide_net("/n", &err) < 0 || hide_kernel("/n", &err) < 0)
		goto fail;
	if (umount2("/old", MNT_DETACH) < 0 || rmdir("/old") < 0) {
		dsec_err_sys(&err, "detach host mounts");
		goto fail;
	}
	if (mkdir("/l", 0700) < 0 || mkdir("/sb", 0700) < 0) {
		dsec_err_sys(&err, "mkdir in template");
		goto fail;
	}
	if (write(sync, &err, sizeof(err)) != sizeof(err))
		_exit(1);
	/* stay until the parent has pinned our namespace */
	read_full(sync, &c, 1);
	_exit(0);
fail:
	if (write(sync, &err, sizeof(err)) < 0)
		_exit(1);
	_exit(1);
}

/* The id mapping of a new template: dsec's range, or none when $DSEC_USERNS is 0. */
static int write_idmap(const struct dsec_paths *p, struct dsec_err *err)
{
	struct dsec_idmap m = {0};
	const char *e = getenv("DSEC_USERNS");
	char file[PATH_MAX], buf[64];
	int n;

	if (!(e && !strcmp(e, "0")) && dsec_userns_range(&m, err) < 0)
		return dsec_err_wrap(err, "user namespace id range");
	template_dir(p, file, NULL);
	n = snprintf(buf, sizeof(buf), "%u %u %u\n", (unsigned)m.uid, (unsigned)m.gid, m.count);
	return dsec_write_atomic(AT_FDCWD, strcat(file, "/" IDMAP_FILE), buf, (size_t)n, 0600, 0,
				 err);
}

int dsec_template_idmap(const struct dsec_paths *p, struct dsec_idmap *m, struct dsec_err *err)
{
	char file[PATH_MAX], *s = NULL;
	unsigned u, g, c;

	template_dir(p, file, IDMAP_FILE);
	if (dsec_read_file(AT_FDCWD, file, 64, &s, err) < 0)
		return -1;
	if (sscanf(s, "%u %u %u", &u, &g, &c) != 3 || (c && (!u || !g))) {
		free(s);
		return dsec_err_set(err, EINVAL, "'%s': not \"UID GID COUNT\"", file);
	}
	free(s);
	m->uid = u;
	m->gid = g;
	m->count = c;
	return 0;
}

static int template_create(const struct dsec_paths *p, struct dsec_err *err)
{
	char tdir[PATH_MAX], pin[PATH_MAX], nspath[64];
	struct dsec_err cerr;
	int sv[2], fd, status, rc = -1;
	pid_t pid;

	template_dir(p, tdir, NULL);
	template_dir(p, pin, "mnt");
	/* a stale template (its pin gone, e.g. after a reboot of the run dir): start clean */
	umount2(pin, MNT_DETACH | UMOUNT_NOFOLLOW);
	if (dsec_rmtree(tdir, err) < 0)
		return dsec_err_wrap(err, "remove stale template");
	if (dsec_mkdir_p(tdir, 0700, err) < 0)
		return -1;
	fd = open(pin, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return dsec_err_sys(err, "create '%s'", pin);
	close(fd);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return dsec_err_sys(err, "socketpair");
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return dsec_err_sys(err, "fork");
	}
	if (pid == 0) {
		close(sv[0]);
		template_child(tdir, sv[1]);
	}
	close(sv[1]);
	if (read_full(sv[0], &cerr, sizeof(cerr)) != sizeof(cerr)) {
		dsec_err_set(err, EIO, "template: child died");
		goto out;
	}
	if (cerr.errnum || cerr.msg[0]) {
		*err = cerr;
		dsec_err_wrap(err, "template");
		goto out;
	}
	if (write_idmap(p, err) < 0)
		goto out;
	snprintf(nspath, sizeof(nspath), "/proc/%d/ns/mnt", (int)pid);
	if (mount(nspath, pin, NULL, MS_BIND, NULL) < 0) {
		dsec_err_sys(err, "pin template namespace on '%s'", pin);
		goto out;
	}
	rc = 0;
out:
	close(sv[0]); /* lets the child go */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return rc;
}

/* Made by this dsec (its id mapping under this dsec's IDMAP_FILE), not an older one without
 * /s, /m, /n, /e (hide_kernel) or idmaps?
 * Live sandboxes of an older template keep their copy when it is replaced. */
static int current(const struct dsec_paths *p)
{
	char file[PATH_MAX];

	template_dir(p, file, IDMAP_FILE);
	return access(file, F_OK) == 0;
}

int dsec_template_open(const struct dsec_paths *p, struct dsec_err *err)
{
	char lock[PATH_MAX];
	int fd, lfd;

	fd = open_pin(p);
	if (fd >= 0 && current(p))
		return fd;
	if (fd >= 0)
		close(fd);
	if (dsec_mkdir_p(p->run, 0755, err) < 0)
		return -1;
	snprintf(lock, sizeof(lock), "%s/template.lock", p->run);
	lfd = dsec_lock(lock, 1, 1, err);
	if (lfd < 0)
		return -1;
	fd = open_pin(p);
	if (fd >= 0 && !current(p)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0 && template_create(p, err) == 0) {
		fd = open_pin(p);
		if (fd < 0)
			dsec_err_sys(err, "open template namespace");
	}
	close(lfd);
	return fd;
}

/* A detached read-only mount of one layer, made in our namespace where the store is visible. */
static int layer_mount_fd(const struct dsec_layer_ref *l, struct dsec_err *err)
{
	if (l->format == DSEC_LAYER_EROFS) {
		int fs = fsopen("erofs", FSOPEN_CLOEXEC), m;

		if (fs < 0)
			return dsec_err_sys(err, "fsopen erofs");
		if (fsconfig(fs, FSCONFIG_SET_STRING, "source", l->path, 0) < 0 ||
		    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
			dsec_err_sys(err, "mount erofs '%s'", l->path);
			close(fs);
			return -1;
		}
		m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV);
		close(fs);
		if (m < 0)
			return dsec_err_sys(err, "fsmount erofs '%s'", l->path);
		return m;
	} else {
		struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV};
		int m = open_tree(AT_FDCWD, l->path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);

		if (m < 0)
			return dsec_err_sys(err, "bind layer '%s'", l->path);
		if (mount_setattr(m, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
			dsec_err_sys(err, "make layer '%s' read-only", l->path);
			close(m);
			return -1;
		}
		return m;
	}
}

static void layer_mnt_name(const char *layer_id, char *buf, size_t n)
{
	snprintf(buf, n, "/l/%.*s", LAYER_MNT_HEX, dsec_layer_hex(layer_id));
}

/* Helper process: detached mounts made here, then attached inside the template. Without an id
 * mapping: each sandbox with a user namespace mounts idmapped copies with its own over them. */
static void layers_child(const struct dsec_image *img, const int *need, int tmplfd, int out)
{
	struct dsec_err err = {0};
	int fds[DSEC_MAX_LAYERS];

	for (unsigned i = 0; i < img->n; i++) {
		fds[i] = -1;
		if (need[i] && (fds[i] = layer_mount_fd(&img->layer[i], &err)) < 0)
			goto fail;
	}
	if (setns(tmplfd, CLONE_NEWNS) < 0) {
		dsec_err_sys(&err, "enter template");
		goto fail;
	}
	for (unsigned i = 0; i < img->n; i++) {
		char mnt[64];
		struct stat st, pst;

		if (fds[i] < 0)
			continue;
		layer_mnt_name(img->layer[i].id, mnt, sizeof(mnt));
		if (mkdir(mnt, 0755) < 0 && errno != EEXIST) {
			dsec_err_sys(&err, "mkdir '%s' in template", mnt);
			goto fail;
		}
		if (stat(mnt, &st) == 0 && stat("/l", &pst) == 0 && st.st_dev != pst.st_dev)
			continue; /* mounted by an earlier helper that died before its marker */
		if (move_mount(fds[i], "", AT_FDCWD, mnt, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
			dsec_err_sys(&err, "attach layer '%s' in template", img->layer[i].id);
			goto fail;
		}
	}
	_exit(0);
fail:
	if (write(out, &err, sizeof(err)) < 0)
		_exit(1);
	_exit(1);
}

int dsec_template_layers(const struct dsec_paths *p, int tmplfd, const struct dsec_image *img,
			 struct dsec_err *err)
{
	char dir[PATH_MAX], lock[PATH_MAX], marker[PATH_MAX];
	int need[DSEC_MAX_LAYERS], nneed = 0, lfd, pfd[2], status, rc = -1;
	struct dsec_err cerr;
	pid_t pid;

	template_dir(p, dir, "layers");
	for (unsigned i = 0; i < img->n; i++) {
		snprintf(marker, sizeof(marker), "%s/%s", dir, dsec_layer_hex(img->layer[i].id));
		need[i] = access(marker, F_OK) < 0;
		nneed += need[i];
	}
	if (!nneed)
		return 0;
	snprintf(lock, sizeof(lock), "%s/template.lock", p->run);
	lfd = dsec_lock(lock, 1, 1, err);
	if (lfd < 0)
		return -1;
	nneed = 0;
	for (unsigned i = 0; i < img->n; i++) {
		snprintf(marker, sizeof(marker), "%s/%s", dir, dsec_layer_hex(img->layer[i].id));
		need[i] = access(marker, F_OK) < 0;
		nneed += need[i];
	}
	if (!nneed) {
		close(lfd);
		return 0;
	}
	if (dsec_mkdir_p(dir, 0700, err) < 0)
		goto out;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		dsec_err_sys(err, "pipe");
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		dsec_err_sys(err, "fork");
		close(pfd[0]);
		close(pfd[1]);
		goto out;
	}
	if (pid == 0) {
		close(pfd[0]);
		layers_child(img, need, tmplfd, pfd[1]);
	}
	close(pfd[1]);
	if (read_full(pfd[0], &cerr, sizeof(cerr)) == sizeof(cerr)) {
		*err = cerr;
		close(pfd[0]);
		waitpid(pid, &status, 0);
		goto out;
	}
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		dsec_err_set(err, EIO, "mount layers in template: helper failed");
		goto out;
	}
	for (unsigned i = 0; i < img->n; i++) {
		int fd;

		if (!need[i])
			continue;
		snprintf(marker, sizeof(marker), "%s/%s", dir, dsec_layer_hex(img->layer[i].id));
		fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			dsec_err_sys(err, "create '%s'", marker);
			goto out;
		}
		close(fd);
	}
	rc = 0;
out:
	close(lfd);
	return rc;
}

int dsec_template_destroy(const struct dsec_paths *p, struct dsec_err *err)
{
	char tdir[PATH_MAX], pin[PATH_MAX];

	template_dir(p, tdir, NULL);
	template_dir(p, pin, "mnt");
	if (umount2(pin, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
		return dsec_err_sys(err, "unmount template pin '%s'", pin);
	return dsec_rmtree(tdir, err);
}

int dsec_rootfs_overlay_opts(const struct dsec_image *img, struct dsec_rootfs_spec *spec,
			     struct dsec_err *err)
{
	size_t n = sizeof(spec->overlay_opts), len = 0;
	char *s = spec->overlay_opts;

	if (img->n == 0)
		return dsec_err_set(err, EINVAL, "image '%s' has no layers", img->name);
	len += (size_t)snprintf(s + len, n - len, "lowerdir=");
	for (unsigned i = img->n; i-- > 0 && len < n;) {
		char *mnt = spec->layer_mnt[i];

		layer_mnt_name(img->layer[i].id, mnt, sizeof(spec->layer_mnt[i]));
		len += (size_t)snprintf(s + len, n - len, "%s%s", mnt, i ? ":" : "");
	}
	spec->nlayers = img->n;
	if (len < n)
		len += (size_t)snprintf(s + len, n - len, ",upperdir=/sb/u,workdir=/sb/w");
	if (len >= n - 1)
		return dsec_err_set(err, E2BIG, "image '%s': too many layers", img->name);
	return 0;
}

static int mknod_dev(const char *name, unsigned maj, unsigned min, struct dsec_err *err)
{
	if (mknod(name, S_IFCHR | 0666, makedev(maj, min)) < 0)
		return dsec_err_sys(err, "mknod '%s'", name);
	/* the umask may have taken bits away */
	if (chmod(name, 0666) < 0)
		return dsec_err_sys(err, "chmod '%s'", name);
	return 0;
}

static int mkdir_maybe(const char *path, mode_t mode, struct dsec_err *err)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return dsec_err_sys(err, "mkdir '%s'", path);
	return 0;
}

/* /dev, made on the sandbox's tmpfs (so it and /dev/shm count against --disk, and the sandbox
 * costs no superblock more), bind-mounted onto the rootfs's /dev later. */
static int make_dev(const char *dir, struct dsec_err *err)
{
	static const struct {
		const char *name;
		unsigned maj, min;
	} nodes[] = {{"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
		     {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
	static const struct {
		const char *name, *target;
	} links[] = {{"ptmx", "pts/ptmx"},
		     {"fd", "/proc/self/fd"},
		     {"stdin", "/proc/self/fd/0"},
		     {"stdout", "/proc/self/fd/1"},
		     {"stderr", "/proc/self/fd/2"}};

	if (mkdir(dir, 0755) < 0 || chdir(dir) < 0)
		return dsec_err_sys(err, "mkdir '%s'", dir);
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
		if (mknod_dev(nodes[i].name, nodes[i].maj, nodes[i].min, err) < 0)
			return -1;
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (symlink(links[i].target, links[i].name) < 0)
			return dsec_err_sys(err, "symlink /dev/%s", links[i].name);
	if (mkdir("pts", 0755) < 0 || mkdir("shm", 01777) < 0 || chmod("shm", 01777) < 0)
		return dsec_err_sys(err, "mkdir /dev/pts, /dev/shm");
	if (chdir("/") < 0)
		return dsec_err_sys(err, "chdir /");
	return 0;
}

static int loopback_up(struct dsec_err *err)
{
	struct ifreq ifr = {0};
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return dsec_err_sys(err, "socket");
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		dsec_err_sys(err, "get flags of lo");
		close(s);
		return -1;
	}
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) {
		dsec_err_sys(err, "bring lo up");
		close(s);
		return -1;
	}
	close(s);
	return 0;
}

/* What /proc and /sys hide: /dev/null over files, the template's empty /m over dirs, read-only
 * binds over what may stay readable. Paths the kernel lacks are skipped. */
static const char *const proc_null[] = {
    "/proc/kcore",       "/proc/keys",         "/proc/key-users",     "/proc/timer_list",
    "/proc/timer_stats", "/proc/sched_debug",  "/proc/latency_stats", "/proc/kpagecgroup",
    "/proc/kpageflags",  "/proc/kpagecount",   "/proc/kmsg",          "/proc/kallsyms",
    "/proc/vmallocinfo", "/proc/pagetypeinfo", "/proc/cmdline",       "/proc/config.gz"};
static const char *const dir_mask[] = {"/proc/acpi",
				       "/proc/scsi",
				       "/proc/asound",
				       "/proc/driver",
				       "/sys/firmware",
				       "/sys/devices/virtual/powercap",
				       "/sys/kernel/mm/page_idle"};
static const char *const proc_ro[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus",
				      "/proc/fs"};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static int bind_ro(const char *path, struct dsec_err *err)
{
	if (mount(path, path, NULL, MS_BIND, NULL) < 0) {
		if (errno == ENOENT)
			return 0;
		return dsec_err_sys(err, "bind '%s'", path);
	}
	if (mount(NULL, path, NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return dsec_err_sys(err, "make '%s' read-only", path);
	return 0;
}

/* Attach a detached mount (from open_tree) at path without following a symlink there. */
static int attach(int fd, const char *path, struct dsec_err *err)
{
	if (move_mount(fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0 && errno != ENOENT)
		return dsec_err_sys(err, "mount on '%s'", path);
	return 0;
}

/* Write val to /proc/sys/net/ipv4/NAME of the sandbox's own network namespace (absent: 0). */
static int net_sysctl(const char *name, const char *val, struct dsec_err *err)
{
	char path[96];
	size_t n = strlen(val);
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : dsec_err_sys(err, "open %s", name);
	if (write(fd, val, n) != (ssize_t)n) {
		dsec_err_sys(err, "write %s", name);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* The sandbox's netns belongs to the host's user namespace, where root inside holds no
 * capability: let its groups open ping sockets, and every port be bound (root inside keeps
 * CAP_NET_BIND_SERVICE, which counts only in its own user namespace). */
static int net_sysctls(const struct dsec_idmap *m, struct dsec_err *err)
{
	char buf[48];

	if (m->count)
		snprintf(buf, sizeof(buf), "%u %u", (unsigned)m->gid,
			 (unsigned)(m->gid + m->count - 1));
	else
		snprintf(buf, sizeof(buf), "0 2147483647");
	if (net_sysctl("ping_group_range", buf, err) < 0)
		return -1;
	return net_sysctl("ip_unprivileged_port_start", "0", err);
}

static int own(const char *path, const struct dsec_idmap *m, struct dsec_err *err)
{
	if (m->count && chown(path, m->root, m->gid) < 0)
		return dsec_err_sys(err, "chown '%s'", path);
	return 0;
}

/* Does the hosts text name name (a whole word after an address, outside comments)? */
static int hosts_has(const char *text, size_t n, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < n;) {
		size_t e = i, w;
		int first = 1;

		while (e < n && text[e] != '\n')
			e++;
		for (w = i; w < e && text[w] != '#';) {
			size_t s;

			while (w < e && (text[w] == ' ' || text[w] == '\t'))
				w++;
			s = w;
			while (w < e && text[w] != ' ' && text[w] != '\t' && text[w] != '#')
				w++;
			if (!first && w - s == len && !memcmp(text + s, name, len))
				return 1;
			if (w > s)
				first = 0;
		}
		i = e + 1;
	}
	return 0;
}

/* The sandbox's /etc: its host name resolves (a line DSEC_HOSTS_SELF NAME in /etc/hosts, made
 * with the localhost lines when the image has none) and is /etc/hostname's, and with --net host
 * the node's resolver is its resolver. Runs after the chroot and before /proc is mounted, so every path is the
 * image's; an image without a directory /etc, or with a link at /etc/hosts, is left as it is
 * (a link at /etc/resolv.conf is replaced: it would lead to the image's resolver). What is
 * made is root's inside. */
static int etc_setup(const struct dsec_rootfs_spec *spec, struct dsec_err *err)
{
	static const char head[] =
	    "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
	char text[8192], line[128];
	struct stat st;
	ssize_t n = 0;
	int etc, fd, rc = 0;

	etc = open("/etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return 0;
	if (spec->hostname && spec->hostname[0]) {
		int len = snprintf(line, sizeof(line), DSEC_HOSTS_SELF "%s\n", spec->hostname);

		/* non-blocking: a fifo the image put there must not hang the holder */
		fd = openat(etc, "hosts", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			char last = '\n';

			if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
				n = read(fd, text, sizeof(text));
			else
				n = -1;
			/* a file longer than what was read: its own last byte decides */
			if (n > 0 && pread(fd, &last, 1, st.st_size - 1) != 1)
				last = text[n - 1];
			close(fd);
			if (n >= 0 && !hosts_has(text, (size_t)n, spec->hostname)) {
				fd = openat(etc, "hosts",
					    O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK |
						O_CLOEXEC);
				if (fd < 0 || (last != '\n' && dsec_write_all(fd, "\n", 1) < 0) ||
				    dsec_write_all(fd, line, (size_t)len) < 0)
					rc = dsec_err_sys(err, "write /etc/hosts");
				if (fd >= 0)
					close(fd);
			}
		} else if (errno == ENOENT) {
			fd = openat(etc, "hosts",
				    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (fd < 0 || dsec_write_all(fd, head, sizeof(head) - 1) < 0 ||
			    dsec_write_all(fd, line, (size_t)len) < 0 ||
			    (spec->map.count && fchown(fd, spec->map.root, spec->map.gid) < 0))
				rc = dsec_err_sys(err, "make /etc/hosts");
			if (fd >= 0)
				close(fd);
		}
	}
	/* /etc/hostname says the sandbox's name, as the UTS name does (made where the image has
	 * none); a link, dir or fifo there is the image's business */
	if (rc == 0 && spec->hostname && spec->hostname[0] &&
	    (fstatat(etc, "hostname", &st, AT_SYMLINK_NOFOLLOW) < 0 ? errno == ENOENT
								    : S_ISREG(st.st_mode))) {
		int len = snprintf(line, sizeof(line), "%s\n", spec->hostname);

		fd = openat(etc, "hostname",
			    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			    0644);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		    dsec_write_all(fd, line, (size_t)len) < 0 ||
		    (spec->map.count && st.st_uid != spec->map.root &&
		     fchown(fd, spec->map.root, spec->map.gid) < 0))
			rc = dsec_err_sys(err, "write /etc/hostname");
		if (fd >= 0)
			close(fd);
	}
	if (rc == 0 && spec->resolv) {
		int have = fstatat(etc, "resolv.conf", &st, AT_SYMLINK_NOFOLLOW) == 0;

		if (have && S_ISLNK(st.st_mode))
			unlinkat(etc, "resolv.conf", 0);
		/* a dir, fifo or the like there is the image's business */
		if (have && !S_ISLNK(st.st_mode) && !S_ISREG(st.st_mode)) {
			close(etc);
			return 0;
		}
		fd = openat(etc, "resolv.conf",
			    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			    0644);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		    dsec_write_all(fd, spec->resolv, strlen(spec->resolv)) < 0 ||
		    (spec->map.count && st.st_uid != spec->map.root &&
		     fchown(fd, spec->map.root, spec->map.gid) < 0))
			rc = dsec_err_sys(err, "write /etc/resolv.conf");
		if (fd >= 0)
			close(fd);
	}
	close(etc);
	return rc;
}

int dsec_resolv_is_nat(const char *text, size_t n)
{
	size_t m = strlen(DSEC_RESOLV_NAT_MARK);

	if (n < m || memcmp(text, DSEC_RESOLV_NAT_MARK, m))
		return 0;
	for (size_t i = m; i < n;) {
		const char *nl = memchr(text + i, '\n', n - i);
		size_t e = nl ? (size_t)(nl - text) : n;

		if (e - i < 11 || memcmp(text + i, "nameserver ", 11))
			return 0;
		i = e + 1;
	}
	return 1;
}

int dsec_rootfs_open(pid_t pid, const char *path, int flags, mode_t mode)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
			       .mode = (flags & O_CREAT) ? mode : 0,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	char root_path[64];
	int root, fd, e;

	snprintf(root_path, sizeof(root_path), "/proc/%d/root", (int)pid);
	if ((root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	e = errno;
	close(root);
	errno = e;
	return fd;
}

/* /etc/hostname as etc_setup wrote it (old), now name; anything else there is left. */
static int rename_hostname_file(pid_t pid, const char *old, const char *name, struct dsec_err *err)
{
	char text[128], want[128], line[128];
	struct stat st;
	int fd, rc = 0, wl, nl;
	ssize_t n;

	fd = dsec_rootfs_open(pid, "etc/hostname", O_RDWR | O_NOFOLLOW | O_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	wl = snprintf(want, sizeof(want), "%s\n", old);
	nl = snprintf(line, sizeof(line), "%s\n", name);
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == wl &&
	    (n = pread(fd, text, sizeof(text), 0)) == wl && !memcmp(text, want, (size_t)wl) &&
	    (ftruncate(fd, 0) < 0 || pwrite(fd, line, (size_t)nl, 0) != nl))
		rc = dsec_err_sys(err, "write /etc/hostname");
	close(fd);
	return rc;
}

int dsec_rootfs_rename_host(pid_t pid, const char *old, const char *name, struct dsec_err *err)
{
	char text[8192], out[8192 + 256], want[128];
	struct stat st;
	off_t base = 0;
	size_t wlen;
	ssize_t n;
	char *at;
	int fd, rc = 0;

	wlen = (size_t)snprintf(want, sizeof(want), DSEC_HOSTS_SELF "%s\n", old);
	fd = dsec_rootfs_open(pid, "etc/hosts", O_RDWR | O_NOFOLLOW, 0);
	if (fd < 0)
		return errno == ENOENT || errno == ELOOP ? 0 : dsec_err_sys(err, "open /etc/hosts");
	/* the line is the last one etc_setup wrote: look in the file's tail */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	if (st.st_size > (off_t)sizeof(text) - 1)
		base = st.st_size - (off_t)sizeof(text) + 1;
	n = pread(fd, text, sizeof(text) - 1, base);
	if (n < 0) {
		rc = dsec_err_sys(err, "read /etc/hosts");
	} else {
		text[n] = '\0';
		for (at = strstr(text, want); at && !(at == text ? base == 0 : at[-1] == '\n');)
			at = strstr(at + 1, want);
		if (at) {
			int len =
			    snprintf(out, sizeof(out), DSEC_HOSTS_SELF "%s\n%s", name, at + wlen);
			off_t off = base + (at - text);

			if (len >= (int)sizeof(out) || ftruncate(fd, off) < 0 ||
			    pwrite(fd, out, (size_t)len, off) != len)
				rc = dsec_err_sys(err, "write /etc/hosts");
		}
	}
	close(fd);
	return rc < 0 ? rc : rename_hostname_file(pid, old, name, err);
}

/* In the sandbox's copy of the template: an idmapped copy of each layer mounted with the
 * sandbox's user namespace over the template's (~10 us a layer), so that a layer's root is the
 * sandbox's own root on the host (userns.h). */
static int idmap_layers(const struct dsec_rootfs_spec *spec, struct dsec_err *err)
{
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP,
				  .userns_fd = (unsigned)spec->userns_fd};

	for (unsigned i = 0; i < spec->nlayers; i++) {
		const char *mnt = spec->layer_mnt[i];
		int fd = open_tree(AT_FDCWD, mnt, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);

		if (fd < 0)
			return dsec_err_sys(err, "clone layer mount '%s'", mnt);
		if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
			dsec_err_sys(
			    err,
			    "idmap layer '%s' (its filesystem may not support idmapped "
			    "mounts; DSEC_USERNS=0 runs sandboxes without user namespaces)",
			    mnt + 3);
			close(fd);
			return -1;
		}
		if (move_mount(fd, "", AT_FDCWD, mnt, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
			dsec_err_sys(err, "mount idmapped layer on '%s'", mnt);
			close(fd);
			return -1;
		}
		close(fd);
	}
	return 0;
}

int dsec_rootfs_setup(const struct dsec_rootfs_spec *spec, struct dsec_err *err)
{
	char opts[160];
	uint64_t inodes = spec->disk / 4096;
	const char *masked = NULL;
	int sysfd, tmpfs, mask, cgfd[8], ncg = 0, cgroot = -1;

	if (inodes < 16384)
		inodes = 16384;
	umask(022);
	/* the sandbox's own cgroup dirs, read-only, cut from the host's hierarchies while they can
	 * be reached; shown at /sys/fs/cgroup so that runtimes that size themselves (the JVM's
	 * heap, Go's and Rust's thread counts, Node) see the sandbox's limits, not the node's */
	for (int i = 0; i < spec->ncg && i < (int)NELEM(cgfd); i++) {
		cgfd[i] = open_tree(AT_FDCWD, spec->cg_dir[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (i < spec->cg_own && cgfd[i] < 0)
			return dsec_err_sys(err, "clone cgroup '%s'", spec->cg_dir[i]);
		ncg = i + 1;
	}
	if (setns(spec->template_fd, CLONE_NEWNS) < 0)
		return dsec_err_sys(err, "enter template mount namespace");
	if (unshare(CLONE_NEWNS | CLONE_NEWCGROUP) < 0)
		return dsec_err_sys(err, "unshare mount and cgroup namespaces");
	if (spec->userns_fd >= 0 && idmap_layers(spec, err) < 0)
		return -1;
	snprintf(opts, sizeof(opts), "mode=0755,size=%llu,nr_inodes=%llu",
		 (unsigned long long)spec->disk, (unsigned long long)inodes);
	/* not nodev: it holds /dev's nodes (the sandbox gets no CAP_MKNOD to add any) */
	if (mount("dsec", "/sb", "tmpfs", MS_NOSUID, opts) < 0)
		return dsec_err_sys(err, "mount tmpfs (--disk %llu)",
				    (unsigned long long)spec->disk);
	if (mkdir("/sb/u", 0755) < 0 || mkdir("/sb/w", 0700) < 0 || mkdir("/sb/r", 0755) < 0)
		return dsec_err_sys(err, "mkdir in sandbox tmpfs");
	/* the upper dir's owner is the owner of the sandbox's / */
	if (own("/sb/u", &spec->map, err) < 0)
		return -1;
	if (make_dev("/sb/dev", err) < 0 || own("/sb/dev", &spec->map, err) < 0 ||
	    own("/sb/dev/shm", &spec->map, err) < 0)
		return -1;
	/* v1: a dir of the sandbox's tmpfs holds a mount point per hierarchy */
	if (ncg && spec->cg_name[0]) {
		char dir[64];

		if (mkdir("/sb/cg", 0755) < 0 || own("/sb/cg", &spec->map, err) < 0)
			return dsec_err_sys(err, "mkdir cgroup view");
		for (int i = 0; i < ncg; i++) {
			snprintf(dir, sizeof(dir), "/sb/cg/%s", spec->cg_name[i]);
			if (mkdir(dir, 0555) < 0 && errno != EEXIST)
				return dsec_err_sys(err, "mkdir '%s'", dir);
		}
		cgroot = open_tree(AT_FDCWD, "/sb/cg", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (cgroot < 0)
			return dsec_err_sys(err, "clone cgroup view");
	}
	if (mount("overlay", "/sb/r", "overlay", 0, spec->overlay_opts) < 0)
		return dsec_err_sys(err, "mount overlay");
	/* a symlink the image put at /dev can only lead into this namespace's template copy, which
	 * holds nothing of the host */
	if (mkdir_maybe("/sb/r/dev", 0755, err) < 0)
		return -1;
	if (mount("/sb/dev", "/sb/r/dev", NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, "/sb/r/dev", NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, NULL) < 0)
		return dsec_err_sys(err, "mount /dev");
	tmpfs = open("/sb", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (tmpfs < 0)
		return dsec_err_sys(err, "open sandbox tmpfs");
	/* detached copies of the template's sysfs and mask dir, attached once inside. One copy
	 * of the mask dir only: a detached tree closed unattached (its target missing on this
	 * kernel) is dissolved, and that waits for an expedited RCU grace period (namespace_unlock:
	 * ~0.3 ms each here); the other masks are bind mounts of the first. */
	sysfd = open_tree(AT_FDCWD, spec->loopback ? "/n" : "/s",
			  OPEN_TREE_CLONE | AT_RECURSIVE | OPEN_TREE_CLOEXEC);
	if (sysfd < 0)
		return dsec_err_sys(err, "clone template sysfs");
	mask = open_tree(AT_FDCWD, "/m", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (mask < 0)
		return dsec_err_sys(err, "clone template mask dir");
	/* the overlay becomes / of this namespace: nothing of the template stays reachable */
	if (chdir("/sb/r") < 0)
		return dsec_err_sys(err, "chdir rootfs");
	if (mount(".", "/", NULL, MS_MOVE, NULL) < 0)
		return dsec_err_sys(err, "move rootfs to /");
	if (chroot(".") < 0 || chdir("/") < 0)
		return dsec_err_sys(err, "chroot");
	/* from here on, paths resolve inside the sandbox: a symlink the image planted at /proc or
	 * /dev can only point elsewhere inside it */
	if (etc_setup(spec, err) < 0)
		return -1;
	if (mkdir_maybe("/proc", 0555, err) < 0)
		return -1;
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return dsec_err_sys(err, "mount /proc");
	if (mkdir_maybe("/sys", 0555, err) < 0 || attach(sysfd, "/sys", err) < 0)
		return -1;
	close(sysfd);
	if (cgroot >= 0) {
		if (attach(cgroot, "/sys/fs/cgroup", err) < 0)
			return -1;
		close(cgroot);
	}
	for (int i = 0; i < ncg; i++) {
		char at[64];

		snprintf(at, sizeof(at), "/sys/fs/cgroup%s%s", spec->cg_name[i] ? "/" : "",
			 spec->cg_name[i] ? spec->cg_name[i] : "");
		if (cgfd[i] < 0)
			continue;
		if (attach(cgfd[i], at, err) < 0)
			return -1;
		close(cgfd[i]);
	}
	/* one call for the whole view (one per mount costs 30 us more a sandbox) */
	if (ncg) {
		struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
						    MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};

		if (mount_setattr(AT_FDCWD, "/sys/fs/cgroup", AT_RECURSIVE, &ro, sizeof(ro)) < 0)
			return dsec_err_sys(err, "make /sys/fs/cgroup read-only");
	}
	for (size_t i = 0; i < NELEM(proc_null); i++)
		if (mount("/dev/null", proc_null[i], NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
			return dsec_err_sys(err, "mask '%s'", proc_null[i]);
	for (size_t i = 0; i < NELEM(dir_mask); i++) {
		struct stat st;

		/* proc and sysfs: nothing in the sandbox can have planted a symlink there */
		if (lstat(dir_mask[i], &st) < 0 && errno == ENOENT)
			continue;
		if (!masked) {
			if (attach(mask, dir_mask[i], err) < 0)
				return -1;
			masked = dir_mask[i];
		} else if (mount(masked, dir_mask[i], NULL, MS_BIND, NULL) < 0) {
			return dsec_err_sys(err, "mask '%s'", dir_mask[i]);
		}
	}
	close(mask);
	/* ping without CAP_NET_RAW (which no sandbox gets): ICMP datagram sockets for the
	 * sandbox's own gids, in its own network namespace, before /proc/sys turns read-only */
	if (spec->loopback && net_sysctls(&spec->map, err) < 0)
		return -1;
	for (size_t i = 0; i < NELEM(proc_ro); i++)
		if (bind_ro(proc_ro[i], err) < 0)
			return -1;
	/* at most DSEC_PTYS_MAX ptys (ns.h) */
	if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620,max=" PTYS_MAX_STR) < 0)
		return dsec_err_sys(err, "mount /dev/pts");
	if (spec->hostname && sethostname(spec->hostname, strlen(spec->hostname)) < 0)
		return dsec_err_sys(err, "sethostname '%s'", spec->hostname);
	if (spec->loopback && loopback_up(err) < 0)
		return -1;
	return tmpfs;
}
