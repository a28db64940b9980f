/* Capability sets of a sandbox's processes (libcap): prepared in the parent, applied after fork. */
#include "caps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>

struct dsec_caps {
	cap_t sets;       /* effective = permitted = kept, inheritable empty */
	uint64_t keep;    /* kept capabilities, bit n = capability n */
	cap_value_t last; /* highest capability this kernel knows */
};

/* Docker's default bounding set: nothing outside it may be asked for. */
static const cap_value_t docker_default[] = {
    CAP_CHOWN,   CAP_DAC_OVERRIDE, CAP_FSETID,           CAP_FOWNER,
    CAP_MKNOD,   CAP_NET_RAW,      CAP_SETGID,           CAP_SETUID,
    CAP_SETFCAP, CAP_SETPCAP,      CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
    CAP_KILL,    CAP_AUDIT_WRITE};

static int parse_list(const char *list, uint64_t *keep, struct dsec_err *err)
{
	char name[64], full[72];
	const char *p = list, *end;
	cap_value_t c;
	size_t len, i;
	int ok;

	*keep = 0;
	if (!strcmp(list, "none"))
		return 0;
	for (;;) {
		end = strchr(p, ',');
		len = end ? (size_t)(end - p) : strlen(p);
		if (len == 0 || len >= sizeof(name))
			return dsec_err_set(err, EINVAL,
					    "capabilities '%.200s': empty or overlong "
					    "name",
					    list);
		memcpy(name, p, len);
		name[len] = '\0';
		for (i = 0; i < len; i++)
			name[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
		snprintf(full, sizeof(full), "%s%s", strncmp(name, "cap_", 4) ? "cap_" : "", name);
		if (cap_from_name(full, &c) < 0 || c < 0 || c > 63)
			return dsec_err_set(err, EINVAL, "capability '%s': unknown", name);
		for (ok = 0, i = 0; i < sizeof(docker_default) / sizeof(docker_default[0]); i++)
			ok |= docker_default[i] == c;
		if (!ok)
			return dsec_err_set(err, EPERM,
					    "capability '%s': not in Docker's default set, which "
					    "bounds every sandbox",
					    name);
		*keep |= 1ULL << c;
		if (!end)
			return 0;
		p = end + 1;
	}
}

int dsec_caps_prepare(const char *list, struct dsec_caps **out, struct dsec_err *err)
{
	struct dsec_caps *caps;
	cap_value_t v[64];
	int n = 0, c;
	uint64_t keep;

	if (parse_list(list ? list : DSEC_CAPS_DEFAULT, &keep, err) < 0)
		return -1;
	caps = calloc(1, sizeof(*caps));
	if (!caps)
		return dsec_err_set(err, ENOMEM, "capabilities: out of memory");
	caps->keep = keep;
	caps->last = cap_max_bits() - 1;
	if (caps->last < 0 || caps->last > 63)
		caps->last = 63;
	for (c = 0; c < 64; c++)
		if (keep & (1ULL << c))
			v[n++] = c;
	caps->sets = cap_init(); /* all clear */
	if (!caps->sets || (n && (cap_set_flag(caps->sets, CAP_EFFECTIVE, n, v, CAP_SET) < 0 ||
				  cap_set_flag(caps->sets, CAP_PERMITTED, n, v, CAP_SET) < 0))) {
		dsec_err_sys(err, "capabilities: build sets");
		dsec_caps_free(caps);
		return -1;
	}
	*out = caps;
	return 0;
}

int dsec_caps_apply(const struct dsec_caps *caps, struct dsec_err *err)
{
	cap_value_t c;

	if (!caps || !caps->sets)
		return dsec_err_nolocale(err, "drop capabilities: not prepared", EINVAL);
	/* The bounding set first, while CAP_SETPCAP is surely still effective. One system call
	 * per capability and no probing first: each costs microseconds in some VMs. */
	for (c = 0; c <= caps->last; c++) {
		if (caps->keep & (1ULL << c) || cap_drop_bound(c) == 0)
			continue;
		if (errno == EINVAL) /* beyond this kernel's capabilities */
			continue;
		if (errno != EPERM || cap_get_bound(c) != 0) /* EPERM: fine if already gone */
			return dsec_err_nolocale(err, "drop capability from the bounding set",
						 errno);
	}
	/* directly, not cap_reset_ambient, which reads every capability first */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return dsec_err_nolocale(err, "clear ambient capabilities", errno);
	if (cap_set_proc(caps->sets) < 0)
		return dsec_err_nolocale(err, "set capabilities", errno);
	return 0;
}

uint64_t dsec_caps_mask(const struct dsec_caps *caps)
{
	return caps ? caps->keep : 0;
}

void dsec_caps_free(struct dsec_caps *caps)
{
	if (!caps)
		return;
	if (caps->sets)
		cap_free(caps->sets);
	free(caps);
}

int dsec_caps_drop(struct dsec_err *err)
{
	struct dsec_caps *caps;
	int rc;

	if (dsec_caps_prepare(NULL, &caps, err) < 0)
		return -1;
	rc = dsec_caps_apply(caps, err);
	dsec_caps_free(caps);
	return rc;
}
