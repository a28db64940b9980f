/* cgroup writes for requests, classes and io, and the usage totals (resource.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup-int.h"
#include "cgroup.h"

/* CPU request to v1 shares (1024 a CPU, as the kernel's default for one) and v2 weight (the
 * same mapping Kubernetes uses: 2..262144 shares onto 1..10000). No request: the default. */
static unsigned long long cpu_shares(const struct dsec_sandbox *sb)
{
	double s;

	if (sb->cls == DSEC_CLASS_BE)
		return 2;
	if (sb->req.cpus <= 0)
		return 1024;
	s = sb->req.cpus * 1024 + 0.5;
	return s < 2 ? 2 : s > 262144 ? 262144 : (unsigned long long)s;
}

static unsigned long long cpu_weight(const struct dsec_sandbox *sb)
{
	unsigned long long sh = cpu_shares(sb);

	if (sb->cls != DSEC_CLASS_BE && sb->req.cpus <= 0)
		return 100;
	return 1 + (sh - 2) * 9999 / 262142;
}

/* Memory protected from reclaim: the request, nothing for best-effort. */
static uint64_t mem_protect(const struct dsec_sandbox *sb)
{
	return sb->cls == DSEC_CLASS_BE ? 0 : sb->req.memory;
}

static int v2_io_max(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	char val[160], b[24], i[24];

	if (sb->limits.io_bps)
		snprintf(b, sizeof(b), "%llu", (unsigned long long)sb->limits.io_bps);
	else
		snprintf(b, sizeof(b), "max");
	if (sb->limits.io_iops)
		snprintf(i, sizeof(i), "%llu", (unsigned long long)sb->limits.io_iops);
	else
		snprintf(i, sizeof(i), "max");
	snprintf(val, sizeof(val), "%s rbps=%s wbps=%s riops=%s wiops=%s", sb->io_dev, b, b, i, i);
	return dsec_cg_write(sb->cg.v2, "io.max", val, err);
}

static int v1_io_max(const struct dsec_sandbox *sb, struct dsec_err *err)
{
	static const char *const files[4] = {
	    "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
	    "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"};
	const char *d = sb->cg.v1[DSEC_CG_BLKIO];
	char val[64];

	if (!d[0])
		return dsec_err_set(err, ENOTSUP,
				    "no blkio cgroup: on cgroup v1 give io limits at spawn");
	for (int k = 0; k < 4; k++) {
		snprintf(val, sizeof(val), "%s %llu", sb->io_dev,
			 (unsigned long long)(k < 2 ? sb->limits.io_bps : sb->limits.io_iops));
		if (dsec_cg_write(d, files[k], val, err) < 0)
			return -1;
	}
	return 0;
}

/* The io weight where the kernel has a knob for it (v2 io.weight; v1 only with BFQ). */
static void io_weight(const struct dsec_sandbox *sb)
{
	char val[32];
	unsigned w = sb->req.io_weight ? sb->req.io_weight : 100;

	if (sb->cg.version == 2) {
		snprintf(val, sizeof(val), "default %u", w);
		dsec_cg_write(sb->cg.v2, "io.weight", val, NULL);
		return;
	}
	if (!sb->cg.v1[DSEC_CG_BLKIO][0])
		return;
	snprintf(val, sizeof(val), "%u", w > 1000 ? 1000 : w);
	if (dsec_cg_write(sb->cg.v1[DSEC_CG_BLKIO], "blkio.bfq.weight", val, NULL) < 0)
		dsec_cg_write(sb->cg.v1[DSEC_CG_BLKIO], "blkio.weight", val, NULL);
}

int dsec_cgroup_set_resources(const struct dsec_sandbox *sb, const struct dsec_sandbox *old,
			      struct dsec_err *err)
{
	static const struct dsec_sandbox none;
	int v = sb->cg.version, be = sb->cls == DSEC_CLASS_BE;
	const char *cpu = v == 2 ? sb->cg.v2 : sb->cg.v1[DSEC_CG_CPU];
	const char *mem = v == 2 ? sb->cg.v2 : sb->cg.v1[DSEC_CG_MEMORY];
	char val[64];

	if (v != 1 && v != 2)
		return 0;
	if (!old)
		old = &none; /* a new cgroup: write what differs from the kernel's defaults */
	/* a cgroup with cpu.idle set refuses a weight: leave idle before, enter it after */
	if (sb->cls != old->cls && !be)
		dsec_cg_write(cpu, "cpu.idle", "0", NULL);
	if (cpu_shares(sb) != cpu_shares(old) && !be) {
		if (v == 2)
			snprintf(val, sizeof(val), "%llu", cpu_weight(sb));
		else
			snprintf(val, sizeof(val), "%llu", cpu_shares(sb));
		if (dsec_cg_write(cpu, v == 2 ? "cpu.weight" : "cpu.shares", val, err) < 0)
			return -1;
	}
	if (sb->cls != old->cls) {
		/* cpu.idle (5.15+): the whole cgroup is SCHED_IDLE to its siblings; absent: the
		 * lowest weight alone */
		if (be) {
			dsec_cg_write(cpu, v == 2 ? "cpu.weight" : "cpu.shares", v == 2 ? "1" : "2",
				      NULL);
			dsec_cg_write(cpu, "cpu.idle", "1", NULL);
		}
		if (v == 1) {
			char sw[16] = "60";

			if (!be) {
				int fd = open("/proc/sys/vm/swappiness", O_RDONLY | O_CLOEXEC);
				ssize_t r = fd >= 0 ? read(fd, sw, sizeof(sw) - 1) : -1;

				sw[r > 0 ? r : 2] = '\0';
				if (fd >= 0)
					close(fd);
			}
			dsec_cg_write(mem, "memory.swappiness", be ? "100" : sw, NULL);
		}
	}
	if (mem_protect(sb) != mem_protect(old) || sb->cls != old->cls) {
		uint64_t m = mem_protect(sb);

		if (v == 2) {
			snprintf(val, sizeof(val), "%llu", (unsigned long long)m);
			if (dsec_cg_write(mem, "memory.low", val, err) < 0)
				return -1;
		} else {
			/* v1 has no protection: the soft limit is what global reclaim takes from
			 * first, so best-effort (0) goes first and a request is kept longest */
			if (be)
				snprintf(val, sizeof(val), "0");
			else if (m)
				snprintf(val, sizeof(val), "%llu", (unsigned long long)m);
			else
				snprintf(val, sizeof(val), "-1");
			if (dsec_cg_write(mem, "memory.soft_limit_in_bytes", val, err) < 0)
				return -1;
		}
	}
	if (sb->limits.io_bps != old->limits.io_bps || sb->limits.io_iops != old->limits.io_iops ||
	    strcmp(sb->io_dev, old->io_dev)) {
		if (!sb->io_dev[0]) {
			if (sb->limits.io_bps || sb->limits.io_iops)
				return dsec_err_set(err, ENODEV,
						    "io limits: no block device known (io_device "
						    "in node.conf)");
		} else if ((v == 2 ? v2_io_max(sb, err) : v1_io_max(sb, err)) < 0) {
			return -1;
		}
	}
	if (sb->req.io_weight != old->req.io_weight)
		io_weight(sb);
	return 0;
}

/* Sum the "<key>=N" fields of every line of io.stat. */
static uint64_t io_stat_sum(const char *buf, const char *key)
{
	uint64_t sum = 0;
	size_t n = strlen(key);

	for (const char *s = buf; (s = strstr(s, key)); s += n)
		if (s > buf && s[-1] == ' ' && s[n] == '=')
			sum += strtoull(s + n + 1, NULL, 10);
	return sum;
}

/* v1 blkio.throttle.io_service_bytes: "MAJ:MIN Read N" lines, summed per op. */
static uint64_t blkio_sum(const char *buf, const char *op)
{
	uint64_t sum = 0;
	size_t n = strlen(op);

	for (const char *s = buf; (s = strstr(s, op)); s += n)
		if (s > buf && s[-1] == ' ' && s[n] == ' ')
			sum += strtoull(s + n + 1, NULL, 10);
	return sum;
}

int64_t dsec_cgroup_oom_kills(const struct dsec_sandbox *sb)
{
	const char *dir = sb->cg.version == 2 ? sb->cg.v2 : sb->cg.v1[DSEC_CG_MEMORY];
	const char *file = sb->cg.version == 2 ? "memory.events" : "memory.oom_control";
	char buf[512];
	const char *s;

	if (!dir[0] || dsec_cg_read(dir, file, buf, sizeof(buf)) < 0)
		return -1;
	for (s = buf; (s = strstr(s, "oom_kill ")); s += 9)
		if (s == buf || s[-1] == '\n')
			return (int64_t)strtoull(s + 9, NULL, 10);
	return -1;
}

int dsec_cgroup_usage(const struct dsec_sandbox *sb, struct dsec_cgroup_usage *u,
		      struct dsec_err *err)
{
	char buf[4096];

	memset(u, 0, sizeof(*u));
	u->io_known = 0;
	if (dsec_cgroup_stats(sb, &u->now, err) < 0)
		return -1;
	if (sb->cg.version == 2) {
		u->memory_peak = dsec_cg_read_u64(sb->cg.v2, "memory.peak");
		if (dsec_cg_read(sb->cg.v2, "io.stat", buf, sizeof(buf)) >= 0) {
			u->io_known = 1;
			u->io_rbytes = io_stat_sum(buf, "rbytes");
			u->io_wbytes = io_stat_sum(buf, "wbytes");
		}
		return 0;
	}
	u->memory_peak = dsec_cg_read_u64(sb->cg.v1[DSEC_CG_MEMORY], "memory.max_usage_in_bytes");
	if (sb->cg.v1[DSEC_CG_BLKIO][0] &&
	    dsec_cg_read(sb->cg.v1[DSEC_CG_BLKIO], "blkio.throttle.io_service_bytes_recursive", buf,
			 sizeof(buf)) >= 0) {
		u->io_known = 1;
		u->io_rbytes = blkio_sum(buf, "Read");
		u->io_wbytes = blkio_sum(buf, "Write");
	}
	return 0;
}
