/* The allow-list and bandwidth of --net nat: parsing, canonical text, resolution (net.h). */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---- allow-list, rate ---- */

static const struct {
	const char *name;
	const char *entries[3];
} presets[] = {
    {"pypi", {"pypi.org:443", "files.pythonhosted.org:443", NULL}},
};

static int parse_port(const char *s, uint16_t *port, const char *what, struct dsec_err *err)
{
	long long n;

	if (dsec_parse_count(s, 1, 65535, &n, what, err) < 0)
		return -1;
	*port = (uint16_t)n;
	return 0;
}

static int name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > DSEC_NET_NAME_MAX || s[0] == '-' || s[0] == '.')
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
			return 0;
	return 1;
}

int dsec_net_allow_parse(const char *s, struct dsec_net_policy *pol, struct dsec_err *err)
{
	char buf[DSEC_NET_NAME_MAX + 16], *colon, *slash;
	struct dsec_net_allow a;
	struct in_addr in;

	for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
		if (!strcmp(s, presets[i].name)) {
			for (int j = 0; presets[i].entries[j]; j++)
				if (dsec_net_allow_parse(presets[i].entries[j], pol, err) < 0)
					return -1;
			return 0;
		}
	if (strlen(s) >= sizeof(buf))
		return dsec_err_set(err, EINVAL, "--allow '%.64s…': too long", s);
	if (pol->n >= DSEC_NET_ALLOW_MAX)
		return dsec_err_set(err, E2BIG, "--allow '%s': more than %d entries", s,
				    DSEC_NET_ALLOW_MAX);
	memset(&a, 0, sizeof(a));
	strcpy(buf, s);
	if ((colon = strrchr(buf, ':'))) {
		*colon = '\0';
		if (parse_port(colon + 1, &a.port, "--allow port", err) < 0)
			return dsec_err_wrap(err, "--allow '%s'", s);
	}
	a.prefix = 32;
	if ((slash = strchr(buf, '/'))) {
		long long n;

		*slash = '\0';
		if (dsec_parse_count(slash + 1, 0, 32, &n, "prefix", err) < 0)
			return dsec_err_wrap(err, "--allow '%s'", s);
		a.prefix = (uint8_t)n;
	}
	if (inet_pton(AF_INET, buf, &in) == 1) {
		a.addr = ntohl(in.s_addr);
		if (a.prefix < 32)
			a.addr &= a.prefix ? ~0U << (32 - a.prefix) : 0;
	} else if (!slash && name_ok(buf)) {
		strcpy(a.name, buf);
	} else {
		return dsec_err_set(err, EINVAL,
				    "--allow '%s': want ADDR[/PREFIX][:PORT] or NAME[:PORT]", s);
	}
	pol->allow[pol->n++] = a;
	return 0;
}

int dsec_net_rate_parse(const char *s, uint64_t *bytes, struct dsec_err *err)
{
	char *end;
	double v, mul = 1;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v <= 0)
		goto bad;
	switch (*end) {
	case 'k':
	case 'K':
		mul = 1e3;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1e6;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1e9;
		end++;
		break;
	}
	if (*end && strcmp(end, "bit") && strcmp(end, "bps"))
		goto bad;
	v = v * mul / 8;
	if (v < 1000 || v > 100e9 / 8)
		return dsec_err_set(err, ERANGE, "--bandwidth '%s': want 8kbit to 100gbit", s);
	*bytes = (uint64_t)v;
	return 0;
bad:
	return dsec_err_set(err, EINVAL, "--bandwidth '%s': want bits a second, e.g. 10mbit", s);
}

int dsec_net_allow_text(const struct dsec_net_allow *a, char *buf, size_t n)
{
	char ip[INET_ADDRSTRLEN], port[8] = "";
	struct in_addr in = {htonl(a->addr)};

	if (a->port)
		snprintf(port, sizeof(port), ":%u", a->port);
	if (a->name[0])
		return snprintf(buf, n, "%s%s", a->name, port);
	inet_ntop(AF_INET, &in, ip, sizeof(ip));
	return snprintf(buf, n, "%s/%u%s", ip, a->prefix, port);
}

int dsec_net_policy_canon(const struct dsec_net_policy *pol, char *buf, size_t n)
{
	size_t len = 0;

#define ADD(...)                                                                                   \
	len += (size_t)snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, __VA_ARGS__)
	ADD("allow=");
	for (unsigned i = 0; i < pol->n; i++) {
		char e[DSEC_NET_NAME_MAX + 16];

		dsec_net_allow_text(&pol->allow[i], e, sizeof(e));
		ADD("%s%s", i ? "," : "", e);
	}
	ADD(";rate=%llu", (unsigned long long)pol->rate);
#undef ADD
	return (int)len;
}

int dsec_net_policy_parse(const char *canon, struct dsec_net_policy *pol, struct dsec_err *err)
{
	char *buf = strdup(canon), *rate, *e, *save = NULL;
	int rc = 0;

	memset(pol, 0, sizeof(*pol));
	if (!buf)
		return dsec_err_set(err, ENOMEM, "policy");
	rate = strstr(buf, ";rate=");
	if (strncmp(buf, "allow=", 6) || !rate) {
		free(buf);
		return dsec_err_set(err, EINVAL, "net policy '%.64s': malformed", canon);
	}
	*rate = '\0';
	pol->rate = strtoull(rate + 6, NULL, 10);
	for (e = strtok_r(buf + 6, ",", &save); e && rc == 0; e = strtok_r(NULL, ",", &save))
		rc = dsec_net_allow_parse(e, pol, err);
	free(buf);
	return rc;
}

json_t *dsec_net_policy_json(const struct dsec_net_policy *pol)
{
	json_t *a = json_array();

	for (unsigned i = 0; i < pol->n; i++) {
		char e[DSEC_NET_NAME_MAX + 16];

		dsec_net_allow_text(&pol->allow[i], e, sizeof(e));
		json_array_append_new(a, json_string(e));
	}
	return a;
}

/* Does text hold line as a whole line? */
static int has_line(const char *text, const char *line)
{
	for (const char *s = text; (s = strstr(s, line)); s++)
		if (s == text || s[-1] == '\n')
			return 1;
	return 0;
}

int dsec_net_resolve(const struct dsec_net_policy *in, struct dsec_net_policy *out, char *hosts,
		     size_t n, struct dsec_err *err)
{
	size_t len = 0;

	if (hosts && n)
		hosts[0] = '\0';
	memset(out, 0, sizeof(*out));
	out->rate = in->rate;
	for (unsigned i = 0; i < in->n; i++) {
		const struct dsec_net_allow *a = &in->allow[i];
		struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res,
				*r;
		int rc, found = 0;

		if (!a->name[0]) {
			if (out->n >= DSEC_NET_ALLOW_MAX)
				return dsec_err_set(err, E2BIG, "allow-list: too many entries");
			out->allow[out->n++] = *a;
			continue;
		}
		rc = getaddrinfo(a->name, NULL, &hints, &res);
		if (rc)
			return dsec_err_set(err, ENOENT, "--allow '%s': %s", a->name,
					    gai_strerror(rc));
		for (r = res; r; r = r->ai_next) {
			uint32_t ip = ntohl(((struct sockaddr_in *)r->ai_addr)->sin_addr.s_addr);
			int dup = 0;
			char line[DSEC_NET_NAME_MAX + 32];
			int w = snprintf(line, sizeof(line), "%u.%u.%u.%u %s\n", ip >> 24,
					 (ip >> 16) & 255, (ip >> 8) & 255, ip & 255, a->name);

			/* a name with several ports gives its lines once */
			if (hosts && w > 0 && len + (size_t)w < n && !has_line(hosts, line)) {
				memcpy(hosts + len, line, (size_t)w + 1);
				len += (size_t)w;
			}

			for (unsigned j = 0; j < out->n; j++)
				dup |= out->allow[j].addr == ip && out->allow[j].prefix == 32 &&
				       out->allow[j].port == a->port;
			if (dup)
				continue;
			if (out->n >= DSEC_NET_ALLOW_MAX) {
				freeaddrinfo(res);
				return dsec_err_set(err, E2BIG, "allow-list: too many addresses");
			}
			out->allow[out->n++] =
			    (struct dsec_net_allow){.addr = ip, .prefix = 32, .port = a->port};
			found = 1;
		}
		freeaddrinfo(res);
		(void)found;
	}
	return 0;
}
