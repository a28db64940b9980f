/* --net nat: veth, bridge, NAT, allow-list, bandwidth cap. See net.h for the layout. */
#include "net.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/pkt_sched.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <netdb.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define ADDR_LINK "net-addr" /* in the sandbox's state dir: -> "a.b.c.d" */

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

static int entry_text(const struct dsec_net_allow *a, char *buf, size_t n)
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

		entry_text(&pol->allow[i], e, sizeof(e));
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

		entry_text(&pol->allow[i], e, sizeof(e));
		json_array_append_new(a, json_string(e));
	}
	return a;
}

int dsec_net_resolve(const struct dsec_net_policy *in, struct dsec_net_policy *out,
		     struct dsec_err *err)
{
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

/* ---- configuration: environment, else our keys of $DSEC_ROOT/node.conf ---- */

struct net_conf {
	char ns[PATH_MAX]; /* "" = the namespace we run in */
	uint32_t subnet;   /* host order */
	int prefix;
	char bridge[IFNAMSIZ];
};

/* The value of key in node.conf ("key = value" lines, '#' comments) into val; 1 found. */
static int conf_get(const char *file, const char *key, char *val, size_t n)
{
	char line[PATH_MAX + 64];
	int found = 0;
	FILE *f = fopen(file, "re");

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *k = line + strspn(line, " \t"), *v, *e;

		if (strncmp(k, key, strlen(key)))
			continue;
		v = k + strlen(key);
		v += strspn(v, " \t");
		if (*v != '=')
			continue;
		v++;
		v += strspn(v, " \t");
		e = v + strcspn(v, "#\r\n");
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		*e = '\0';
		snprintf(val, n, "%s", v);
		found = 1;
	}
	fclose(f);
	return found;
}

static int conf_load(const struct dsec_paths *p, struct net_conf *c, struct dsec_err *err)
{
	char file[PATH_MAX + 16], v[PATH_MAX], *slash;
	const char *e;
	struct in_addr in;
	long long n;

	memset(c, 0, sizeof(*c));
	snprintf(file, sizeof(file), "%s/node.conf", p->root);
	if ((e = getenv("DSEC_NET_NS")))
		snprintf(c->ns, sizeof(c->ns), "%s", e);
	else if (conf_get(file, "net_ns", v, sizeof(v)))
		snprintf(c->ns, sizeof(c->ns), "%s", v);
	snprintf(c->bridge, sizeof(c->bridge), "dsec0");
	if ((e = getenv("DSEC_NET_BRIDGE")) ||
	    (conf_get(file, "net_bridge", v, sizeof(v)) && (e = v))) {
		if (!*e || strlen(e) >= 12 || strchr(e, '/'))
			return dsec_err_set(err, EINVAL, "net_bridge '%s': want 1 to 11 characters",
					    e);
		snprintf(c->bridge, sizeof(c->bridge), "%s", e);
	}
	snprintf(v, sizeof(v), "10.88.0.0/16");
	if ((e = getenv("DSEC_NET_SUBNET")))
		snprintf(v, sizeof(v), "%s", e);
	else
		conf_get(file, "net_subnet", v, sizeof(v));
	slash = strchr(v, '/');
	if (!slash || (*slash = '\0', inet_pton(AF_INET, v, &in) != 1) ||
	    dsec_parse_count(slash + 1, 8, 29, &n, "prefix", NULL) < 0)
		return dsec_err_set(err, EINVAL, "net_subnet '%s': want A.B.C.D/8..29", v);
	c->prefix = (int)n;
	c->subnet = ntohl(in.s_addr) & (~0U << (32 - n));
	return 0;
}

/* ---- netlink ---- */

struct nlbuf {
	char b[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	size_t len, msg; /* total; offset of the message being built */
	unsigned n;
	uint32_t seq0;
};

static void nl_put(struct nlbuf *nb, const void *data, size_t len)
{
	memcpy(nb->b + nb->len, data, len);
	memset(nb->b + nb->len + len, 0, NLMSG_ALIGN(len) - len);
	nb->len += NLMSG_ALIGN(len);
	((struct nlmsghdr *)(nb->b + nb->msg))->nlmsg_len = (uint32_t)(nb->len - nb->msg);
}

static void nl_msg(struct nlbuf *nb, int type, int flags, const void *hdr, size_t hlen)
{
	struct nlmsghdr h = {.nlmsg_type = (uint16_t)type,
			     .nlmsg_flags = (uint16_t)(NLM_F_REQUEST | NLM_F_ACK | flags),
			     .nlmsg_seq = nb->seq0 + nb->n++};

	nb->msg = nb->len;
	nl_put(nb, &h, sizeof(h));
	nl_put(nb, hdr, hlen);
}

/* nfnetlink batch begin/end: no ack asked, not counted (an error answers with seq0 + 60). */
static void nl_batch(struct nlbuf *nb, int type)
{
	struct nlmsghdr h = {
	    .nlmsg_type = (uint16_t)type, .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = nb->seq0 + 60};
	struct nfgenmsg g = {.nfgen_family = AF_UNSPEC,
			     .version = NFNETLINK_V0,
			     .res_id = htons(NFNL_SUBSYS_NFTABLES)};

	nb->msg = nb->len;
	nl_put(nb, &h, sizeof(h));
	nl_put(nb, &g, sizeof(g));
}

static void nl_attr(struct nlbuf *nb, int type, const void *data, size_t len)
{
	struct rtattr a = {.rta_len = (unsigned short)RTA_LENGTH(len),
			   .rta_type = (unsigned short)type};
	size_t at = nb->len;

	nl_put(nb, &a, sizeof(a));
	nb->len = at + RTA_LENGTH(0);
	nl_put(nb, data, len);
}

static size_t nl_nest(struct nlbuf *nb, int type)
{
	struct rtattr a = {.rta_len = RTA_LENGTH(0),
			   .rta_type = (unsigned short)(type | NLA_F_NESTED)};
	size_t at = nb->len;

	nl_put(nb, &a, sizeof(a));
	return at;
}

static void nl_nest_end(struct nlbuf *nb, size_t at)
{
	((struct rtattr *)(nb->b + at))->rta_len = (unsigned short)(nb->len - at);
}

static void nl_str(struct nlbuf *nb, int type, const char *s)
{
	nl_attr(nb, type, s, strlen(s) + 1);
}

static void nl_u32(struct nlbuf *nb, int type, uint32_t v)
{
	nl_attr(nb, type, &v, sizeof(v));
}

static uint32_t nl_seq;

static void nl_init(struct nlbuf *nb)
{
	nb->len = nb->msg = nb->n = 0;
	nb->seq0 = nl_seq += 64;
}

/* Send the batch and read one ack per message. With ok_errno, that error of a message is
 * no failure (ENODEV when deleting what may be gone). -1 with the first error. */
static int nl_talk(int fd, struct nlbuf *nb, const char *what, int ok_errno, struct dsec_err *err)
{
	char rb[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	unsigned left = nb->n, at = 0;
	int first = 0;

	if (send(fd, nb->b, nb->len, 0) != (ssize_t)nb->len)
		return dsec_err_sys(err, "%s: netlink send", what);
	while (left) {
		ssize_t r = recv(fd, rb, sizeof(rb), 0);
		struct nlmsghdr *h;

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return dsec_err_sys(err, "%s: netlink recv", what);
		}
		for (h = (struct nlmsghdr *)rb; NLMSG_OK(h, (size_t)r); h = NLMSG_NEXT(h, r)) {
			int e;

			if (h->nlmsg_type != NLMSG_ERROR)
				continue;
			e = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
			if (h->nlmsg_seq == nb->seq0 + 60 && e) {
				/* the batch itself failed: nothing else will answer */
				first = e;
				left = 0;
				break;
			}
			if (h->nlmsg_seq < nb->seq0 || h->nlmsg_seq >= nb->seq0 + nb->n)
				continue;
			if (e && e != ok_errno && !first) {
				first = e;
				at = h->nlmsg_seq - nb->seq0;
			}
			left--;
		}
	}
	if (first) {
		errno = first;
		return dsec_err_sys(err, "%s (step %u)", what, at + 1);
	}
	return 0;
}

/* The ifindex of name, 0 when there is none, -1 on error. */
static int nl_ifindex(int fd, const char *name, struct dsec_err *err)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
	char rb[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlbuf nb;

	nl_init(&nb);
	nl_msg(&nb, RTM_GETLINK, 0, &ifi, sizeof(ifi));
	((struct nlmsghdr *)nb.b)->nlmsg_flags = NLM_F_REQUEST;
	nl_str(&nb, IFLA_IFNAME, name);
	if (send(fd, nb.b, nb.len, 0) != (ssize_t)nb.len)
		return dsec_err_sys(err, "netlink send");
	for (;;) {
		ssize_t r = recv(fd, rb, sizeof(rb), 0);
		struct nlmsghdr *h;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return dsec_err_sys(err, "netlink recv");
		for (h = (struct nlmsghdr *)rb; NLMSG_OK(h, (size_t)r); h = NLMSG_NEXT(h, r)) {
			if (h->nlmsg_seq != nb.seq0)
				continue;
			if (h->nlmsg_type == RTM_NEWLINK)
				return ((struct ifinfomsg *)NLMSG_DATA(h))->ifi_index;
			if (h->nlmsg_type == NLMSG_ERROR) {
				int e = -((struct nlmsgerr *)NLMSG_DATA(h))->error;

				if (e == ENODEV)
					return 0;
				errno = e;
				return dsec_err_sys(err, "get link '%s'", name);
			}
		}
	}
}

static void nl_addr(struct nlbuf *nb, int ifindex, uint32_t addr, int prefix)
{
	struct ifaddrmsg ifa = {.ifa_family = AF_INET,
				.ifa_prefixlen = (unsigned char)prefix,
				.ifa_index = (unsigned)ifindex};
	uint32_t a = htonl(addr);

	nl_msg(nb, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, &ifa, sizeof(ifa));
	nl_u32(nb, IFA_LOCAL, a);
	nl_u32(nb, IFA_ADDRESS, a);
}

/* ---- namespaces ---- */

static int self_ns = -1, node_ns = -1, node_sock = -1, node_ready;
static struct net_conf conf;
static struct nft_ctx *nft;

/* A socket made in namespace nsfd (-1: ours). */
static int socket_in(int nsfd, int domain, int type, int proto, struct dsec_err *err)
{
	int s, e;

	if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
		return dsec_err_sys(err, "enter network namespace");
	s = socket(domain, type | SOCK_CLOEXEC, proto);
	e = errno;
	if (nsfd >= 0 && setns(self_ns, CLONE_NEWNET) < 0)
		abort(); /* we would go on in the wrong namespace */
	if (s < 0) {
		errno = e;
		return dsec_err_sys(err, "socket");
	}
	return s;
}

/* Run nft commands in the node namespace. 0 or -1 with nft's message. */
static int nft_run(const char *cmds, struct dsec_err *err)
{
	int rc;

	if (node_ns >= 0 && setns(node_ns, CLONE_NEWNET) < 0)
		return dsec_err_sys(err, "enter node network namespace");
	/* its netlink socket is made by nft_ctx_new: in the node namespace */
	if (!nft && (nft = nft_ctx_new(NFT_CTX_DEFAULT))) {
		nft_ctx_buffer_error(nft);
		nft_ctx_buffer_output(nft);
	}
	rc = nft ? nft_run_cmd_from_buffer(nft, cmds) : -1;
	if (node_ns >= 0 && setns(self_ns, CLONE_NEWNET) < 0)
		abort();
	if (!nft)
		return dsec_err_set(err, ENOMEM, "nft_ctx_new");
	if (rc) {
		const char *m = nft_ctx_get_error_buffer(nft);
		char line[256];

		snprintf(line, sizeof(line), "%s", m && *m ? m : "failed");
		line[strcspn(line, "\n")] = '\0';
		return dsec_err_set(err, EIO, "nftables: %s", line);
	}
	return 0;
}

static void ip_text(uint32_t a, char *buf)
{
	struct in_addr in = {htonl(a)};

	inet_ntop(AF_INET, &in, buf, INET_ADDRSTRLEN);
}

/* The node side, made once: nftables first and the bridge last, so a bridge means the rest is
 * there. Caller holds the net lock. */
static int node_make(struct dsec_err *err)
{
	char cmds[2048], net[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN];
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_flags = IFF_UP, .ifi_change = IFF_UP};
	struct nlbuf nb;
	size_t li;
	int fd, idx;

	ip_text(conf.subnet, net);
	ip_text(conf.subnet + 1, gw);
	snprintf(cmds, sizeof(cmds),
		 "add table inet dsec\n"
		 "delete table inet dsec\n"
		 "table inet dsec {\n"
		 " set allow {\n"
		 "  type ipv4_addr . ipv4_addr . inet_proto . inet_service; flags interval;\n"
		 " }\n"
		 " chain forward {\n"
		 "  type filter hook forward priority filter; policy accept;\n"
		 "  iifname \"%1$s\" ct state established,related accept\n"
		 "  iifname \"%1$s\" ip saddr . ip daddr . meta l4proto . th dport @allow accept\n"
		 "  iifname \"%1$s\" drop\n"
		 "  oifname \"%1$s\" ct state established,related accept\n"
		 "  oifname \"%1$s\" drop\n"
		 " }\n"
		 " chain input {\n"
		 "  type filter hook input priority filter; policy accept;\n"
		 "  iifname \"%1$s\" drop\n"
		 " }\n"
		 " chain post {\n"
		 "  type nat hook postrouting priority srcnat; policy accept;\n"
		 "  ip saddr %2$s/%3$d oifname != \"%1$s\" masquerade\n"
		 " }\n"
		 "}\n",
		 conf.bridge, net, conf.prefix);
	if (nft_run(cmds, err) < 0)
		return dsec_err_wrap(err, "node ruleset");
	/* forwarding in the node namespace only: /proc/sys/net is the opener's namespace */
	if (node_ns >= 0 && setns(node_ns, CLONE_NEWNET) < 0)
		return dsec_err_sys(err, "enter node network namespace");
	fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
	if (node_ns >= 0 && setns(self_ns, CLONE_NEWNET) < 0)
		abort();
	if (fd < 0 || write(fd, "1\n", 2) != 2) {
		dsec_err_sys(err, "set net.ipv4.ip_forward");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	nl_init(&nb);
	nl_msg(&nb, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof(ifi));
	nl_str(&nb, IFLA_IFNAME, conf.bridge);
	li = nl_nest(&nb, IFLA_LINKINFO);
	nl_str(&nb, IFLA_INFO_KIND, "bridge");
	nl_nest_end(&nb, li);
	if (nl_talk(node_sock, &nb, "create bridge", EEXIST, err) < 0)
		return -1;
	if ((idx = nl_ifindex(node_sock, conf.bridge, err)) <= 0)
		return idx < 0 ? -1 : dsec_err_set(err, ENODEV, "bridge '%s' gone", conf.bridge);
	nl_init(&nb);
	nl_addr(&nb, idx, conf.subnet + 1, conf.prefix);
	return nl_talk(node_sock, &nb, "bridge address", 0, err);
}

/* Open what every nat operation needs, once per process: our and the node's namespace, a
 * netlink socket there. */
static int node_open(const struct dsec_paths *p, struct dsec_err *err)
{
	if (node_sock >= 0)
		return 0;
	if (conf_load(p, &conf, err) < 0)
		return -1;
	if (self_ns < 0 && (self_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		return dsec_err_sys(err, "open /proc/self/ns/net");
	if (conf.ns[0] && node_ns < 0 && (node_ns = open(conf.ns, O_RDONLY | O_CLOEXEC)) < 0)
		return dsec_err_sys(err, "open node network namespace '%s'", conf.ns);
	node_sock = socket_in(node_ns, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, err);
	return node_sock < 0 ? -1 : 0;
}

static int net_lock(const struct dsec_paths *p, struct dsec_err *err)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/net/leases", p->run);
	if (dsec_mkdir_p(path, 0700, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/net/lock", p->run);
	return dsec_lock(path, 1, 1, err);
}

/* ---- addresses ---- */

int dsec_net_lease(int dirfd, int lockfd, uint32_t subnet, int prefix, const char *text,
		   uint32_t *addr, struct dsec_err *err)
{
	uint32_t size = 1U << (32 - prefix), cur = 0, first = 2, last = size - 2;
	uint32_t span = last >= first ? last - first + 1 : 0;

	if (pread(lockfd, &cur, sizeof(cur), 0) != sizeof(cur))
		cur = 0;
	for (uint32_t i = 0; i < span; i++) {
		uint32_t off = first + (cur + i) % span, a = subnet + off;
		char name[INET_ADDRSTRLEN];
		int fd;

		ip_text(a, name);
		fd =
		    openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			if (errno == EEXIST)
				continue;
			return dsec_err_sys(err, "lease '%s'", name);
		}
		if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
			dsec_err_sys(err, "lease '%s'", name);
			close(fd);
			unlinkat(dirfd, name, 0);
			return -1;
		}
		close(fd);
		cur = (cur + i + 1) % span;
		if (pwrite(lockfd, &cur, sizeof(cur), 0) != sizeof(cur))
			(void)0; /* only a hint */
		*addr = a;
		return 0;
	}
	return dsec_err_set(err, ENOSPC, "no free address in the subnet");
}

/* ---- per sandbox ---- */

static void ifname_for(uint32_t addr, char *buf)
{
	snprintf(buf, IFNAMSIZ, "dsv%08x", addr);
}

static int del_link(uint32_t a, struct dsec_err *err)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
	char name[IFNAMSIZ];
	struct nlbuf nb;

	ifname_for(a, name);
	nl_init(&nb);
	nl_msg(&nb, RTM_DELLINK, 0, &ifi, sizeof(ifi));
	nl_str(&nb, IFLA_IFNAME, name);
	return nl_talk(node_sock, &nb, "delete veth", ENODEV, err);
}

/* ---- nftables: per sandbox, only elements of the set "allow" (raw nfnetlink: no
 * libnftables per spawn, whose first command in a process costs milliseconds) ---- */

static int nf_sock = -1;

/* The set's key: saddr . daddr . l4proto . dport, each field in a 4-byte register. */
struct elem {
	uint8_t key[16], end[16];
};

static void elem_set(uint8_t *k, uint32_t sa, uint32_t da, uint8_t proto, uint16_t port)
{
	uint32_t s = htonl(sa), d = htonl(da);

	memset(k, 0, 16);
	memcpy(k, &s, 4);
	memcpy(k + 4, &d, 4);
	k[8] = proto;
	k[12] = (uint8_t)(port >> 8);
	k[13] = (uint8_t)port;
}

/* The elements of sandbox address a under pol: an entry with a port gives TCP and UDP to that
 * port, one without every protocol and port. Returns the count (out has room for 2 per entry). */
static unsigned policy_elems(uint32_t a, const struct dsec_net_policy *pol, struct elem *out)
{
	unsigned n = 0;

	for (unsigned i = 0; i < pol->n; i++) {
		const struct dsec_net_allow *e = &pol->allow[i];
		uint32_t mask = e->prefix ? ~0U << (32 - e->prefix) : 0;
		uint32_t lo = e->addr & mask, hi = e->addr | ~mask;

		if (e->port) {
			static const uint8_t protos[] = {IPPROTO_TCP, IPPROTO_UDP};

			for (int j = 0; j < 2; j++) {
				elem_set(out[n].key, a, lo, protos[j], e->port);
				elem_set(out[n].end, a, hi, protos[j], e->port);
				n++;
			}
		} else {
			elem_set(out[n].key, a, lo, 0, 0);
			elem_set(out[n].end, a, hi, 255, 65535);
			n++;
		}
	}
	return n;
}

/* Is key k inside element e (every field between e's key and end)? Keys compare as bytes:
 * each field is big-endian or a single byte. */
static int elem_has(const struct elem *e, const uint8_t *k)
{
	static const int off[] = {0, 4, 8, 12}, len[] = {4, 4, 1, 2};

	for (int f = 0; f < 4; f++)
		if (memcmp(k + off[f], e->key + off[f], (size_t)len[f]) < 0 ||
		    memcmp(k + off[f], e->end + off[f], (size_t)len[f]) > 0)
			return 0;
	return 1;
}

/* Make e[0..n) acceptable to the kernel's interval set: drop elements inside another (and
 * duplicates), and order the rest so that no element is added after one that holds its start
 * key (which the set refuses with EEXIST; overlaps are otherwise fine, every element means
 * accept). Returns the new count. */
static unsigned elems_order(struct elem *e, unsigned n)
{
	unsigned m = 0;

	for (unsigned i = 0; i < n; i++) {
		int inside = 0;

		for (unsigned j = 0; j < n && !inside; j++)
			if (j != i && elem_has(&e[j], e[i].key) && elem_has(&e[j], e[i].end) &&
			    (!elem_has(&e[i], e[j].key) || !elem_has(&e[i], e[j].end) || j < i))
				inside = 1;
		if (!inside)
			e[m++] = e[i];
	}
	/* selection: first whatever holds no other's start... reversed: an element goes before
	 * every element that holds its start */
	for (unsigned i = 0; i < m; i++)
		for (unsigned j = i + 1; j < m; j++)
			if (elem_has(&e[i], e[j].key)) {
				struct elem t = e[j];

				memmove(&e[i + 1], &e[i], (j - i) * sizeof(*e));
				e[i] = t;
				j = i; /* look again from the new e[i] */
			}
	return m;
}

/* Add (or delete) elements e[0..n) in one transaction. */
static int nft_elems(int type, const struct elem *e, unsigned n, int ok_errno, struct dsec_err *err)
{
	struct nfgenmsg g = {.nfgen_family = NFPROTO_INET, .version = NFNETLINK_V0};
	static struct nlbuf nb;
	size_t list;

	if (!n)
		return 0;
	if (nf_sock < 0 &&
	    (nf_sock = socket_in(node_ns, AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER, err)) < 0)
		return -1;
	nl_init(&nb);
	nl_batch(&nb, NFNL_MSG_BATCH_BEGIN);
	nl_msg(&nb, (NFNL_SUBSYS_NFTABLES << 8) | type,
	       type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0, &g, sizeof(g));
	nl_str(&nb, NFTA_SET_ELEM_LIST_TABLE, "dsec");
	nl_str(&nb, NFTA_SET_ELEM_LIST_SET, "allow");
	list = nl_nest(&nb, NFTA_SET_ELEM_LIST_ELEMENTS);
	for (unsigned i = 0; i < n; i++) {
		size_t el = nl_nest(&nb, NFTA_LIST_ELEM), k;

		k = nl_nest(&nb, NFTA_SET_ELEM_KEY);
		nl_attr(&nb, NFTA_DATA_VALUE, e[i].key, 16);
		nl_nest_end(&nb, k);
		k = nl_nest(&nb, NFTA_SET_ELEM_KEY_END);
		nl_attr(&nb, NFTA_DATA_VALUE, e[i].end, 16);
		nl_nest_end(&nb, k);
		nl_nest_end(&nb, el);
	}
	nl_nest_end(&nb, list);
	nl_batch(&nb, NFNL_MSG_BATCH_END);
	return nl_talk(nf_sock, &nb,
		       type == NFT_MSG_NEWSETELEM ? "add allow-list" : "remove allow-list",
		       ok_errno, err);
}

/* The lease file: the sandbox id, then one allow entry a line (what its elements are). */
static int lease_read(const struct dsec_paths *p, const char *ip, char *id,
		      struct dsec_net_policy *pol)
{
	char path[PATH_MAX], *buf = NULL, *line, *save = NULL;
	int first = 1;

	memset(pol, 0, sizeof(*pol));
	id[0] = '\0';
	snprintf(path, sizeof(path), "%s/net/leases/%s", p->run, ip);
	if (dsec_read_file(AT_FDCWD, path, 1 << 20, &buf, NULL) < 0)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (first)
			snprintf(id, DSEC_ID_MAX, "%s", line);
		else if (!strncmp(line, "rate=", 5))
			pol->rate = strtoull(line + 5, NULL, 10);
		else
			dsec_net_allow_parse(line, pol, NULL);
		first = 0;
	}
	free(buf);
	return 0;
}

/* Remove the allow-list elements, the veth (with link) and the lease of address a (whatever
 * of them exists). Without link the veth is left to the kernel: it goes with the sandbox's
 * network namespace when the last process there is gone, batched with others, where a
 * RTM_DELLINK of our own waits for an RCU grace period (measured here: 17 ms a veth). */
static int teardown(const struct dsec_paths *p, uint32_t a, int link, struct dsec_err *err)
{
	static struct dsec_net_policy pol;
	static struct elem el[2 * DSEC_NET_ALLOW_MAX];
	char ip[INET_ADDRSTRLEN], lease[PATH_MAX], id[DSEC_ID_MAX];
	unsigned n;
	int rc = 0;

	ip_text(a, ip);
	if (lease_read(p, ip, id, &pol) == 0) {
		n = elems_order(el, policy_elems(a, &pol, el));
		if (nft_elems(NFT_MSG_DELSETELEM, el, n, 0, NULL) < 0)
			/* partly there (a transaction fails whole): one at a time */
			for (unsigned i = 0; i < n; i++)
				nft_elems(NFT_MSG_DELSETELEM, &el[i], 1, ENOENT, NULL);
	}
	if (link && del_link(a, err) < 0)
		rc = -1;
	snprintf(lease, sizeof(lease), "%s/net/leases/%s", p->run, ip);
	if (unlink(lease) < 0 && errno != ENOENT && rc == 0)
		rc = dsec_err_sys(err, "remove lease '%s'", lease);
	return rc;
}

/* A tbf qdisc on ifindex: rate bytes a second, a burst of 50 ms (at least 32 KiB), a queue of
 * 100 ms more. */
static void tbf_msg(struct nlbuf *nb, int ifindex, uint64_t rate)
{
	struct tcmsg tc = {.tcm_family = AF_UNSPEC,
			   .tcm_ifindex = ifindex,
			   .tcm_handle = 0x10000,
			   .tcm_parent = TC_H_ROOT};
	uint64_t burst = rate / 20 > 32768 ? rate / 20 : 32768, limit = rate / 10 + burst;
	struct tc_tbf_qopt q;
	size_t opt;

	memset(&q, 0, sizeof(q));
	q.rate.linklayer = TC_LINKLAYER_ETHERNET;
	q.rate.rate = rate >= 0xffffffffULL ? 0xffffffffU : (uint32_t)rate;
	q.limit = limit > 0xffffffffULL ? 0xffffffffU : (uint32_t)limit;
	q.buffer = 1; /* TCA_TBF_BURST replaces it */
	nl_msg(nb, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, &tc, sizeof(tc));
	nl_str(nb, TCA_KIND, "tbf");
	opt = nl_nest(nb, TCA_OPTIONS);
	nl_attr(nb, TCA_TBF_PARMS, &q, sizeof(q));
	nl_u32(nb, TCA_TBF_BURST, burst > 0xffffffffULL ? 0xffffffffU : (uint32_t)burst);
	if (rate >= 0xffffffffULL)
		nl_attr(nb, TCA_TBF_RATE64, &rate, sizeof(rate));
	nl_nest_end(nb, opt);
}

/* The sandbox's allow-list elements, and its download cap on the host end. */
static int sandbox_rules(uint32_t a, const struct dsec_net_policy *pol, struct dsec_err *err)
{
	static struct elem el[2 * DSEC_NET_ALLOW_MAX];
	char name[IFNAMSIZ];
	struct nlbuf nb;
	int idx;

	if (nft_elems(NFT_MSG_NEWSETELEM, el, elems_order(el, policy_elems(a, pol, el)), 0, err) <
	    0)
		return -1;
	if (!pol->rate)
		return 0;
	ifname_for(a, name);
	if ((idx = nl_ifindex(node_sock, name, err)) <= 0)
		return idx < 0 ? -1 : dsec_err_set(err, ENODEV, "veth '%s' gone", name);
	nl_init(&nb);
	tbf_msg(&nb, idx, pol->rate);
	return nl_talk(node_sock, &nb, "bandwidth (tbf)", 0, err);
}

/* No IPv6 link-local address (nor its duplicate address detection) on a veth end: nat is
 * IPv4, and every IPv6 packet from the bridge is dropped anyway. */
static void no_ipv6_ll(struct nlbuf *nb)
{
	uint8_t none = IN6_ADDR_GEN_MODE_NONE;
	size_t af = nl_nest(nb, IFLA_AF_SPEC), v6 = nl_nest(nb, AF_INET6);

	nl_attr(nb, IFLA_INET6_ADDR_GEN_MODE, &none, sizeof(none));
	nl_nest_end(nb, v6);
	nl_nest_end(nb, af);
}

/* The veth pair, the peer made inside the sandbox's namespace (nsfd) as eth0, up. */
static int make_veth(uint32_t a, int brindex, int nsfd, struct dsec_err *err)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
	struct ifinfomsg up = {.ifi_family = AF_UNSPEC, .ifi_flags = IFF_UP, .ifi_change = IFF_UP};
	/* the peer comes up inside (inside_config): veth_open refuses while the pair is half made */
	struct ifinfomsg peer = {.ifi_family = AF_UNSPEC};
	struct ifinfomsg set = {.ifi_family = AF_UNSPEC};
	char name[IFNAMSIZ];
	struct nlbuf nb;
	size_t li, data, pe;
	uint8_t one = 1;

	ifname_for(a, name);
	nl_init(&nb);
	nl_msg(&nb, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof(ifi));
	nl_str(&nb, IFLA_IFNAME, name);
	nl_u32(&nb, IFLA_MASTER, (uint32_t)brindex);
	li = nl_nest(&nb, IFLA_LINKINFO);
	nl_str(&nb, IFLA_INFO_KIND, "veth");
	data = nl_nest(&nb, IFLA_INFO_DATA);
	pe = nl_nest(&nb, VETH_INFO_PEER);
	((struct rtattr *)(nb.b + pe))->rta_type =
	    VETH_INFO_PEER; /* not NLA_F_NESTED: it starts with an ifinfomsg */
	nl_put(&nb, &peer, sizeof(peer));
	nl_str(&nb, IFLA_IFNAME, "eth0");
	nl_u32(&nb, IFLA_NET_NS_FD, (uint32_t)nsfd);
	nl_nest_end(&nb, pe);
	nl_nest_end(&nb, data);
	nl_nest_end(&nb, li);
	/* addrconf acts when the link comes up: its mode first */
	nl_msg(&nb, RTM_NEWLINK, 0, &set, sizeof(set));
	nl_str(&nb, IFLA_IFNAME, name);
	no_ipv6_ll(&nb);
	/* no frames between two isolated bridge ports: sandboxes do not see one another */
	nl_msg(&nb, RTM_NEWLINK, 0, &up, sizeof(up));
	nl_str(&nb, IFLA_IFNAME, name);
	li = nl_nest(&nb, IFLA_LINKINFO);
	nl_str(&nb, IFLA_INFO_SLAVE_KIND, "bridge");
	data = nl_nest(&nb, IFLA_INFO_SLAVE_DATA);
	nl_attr(&nb, IFLA_BRPORT_ISOLATED, &one, sizeof(one));
	nl_nest_end(&nb, data);
	nl_nest_end(&nb, li);
	return nl_talk(node_sock, &nb, "create veth", 0, err);
}

/* Inside: eth0's address and the default route via the bridge. */
static int inside_config(int nsfd, uint32_t a, uint64_t rate, struct dsec_err *err)
{
	struct rtmsg rt = {.rtm_family = AF_INET,
			   .rtm_table = RT_TABLE_MAIN,
			   .rtm_protocol = RTPROT_BOOT,
			   .rtm_scope = RT_SCOPE_UNIVERSE,
			   .rtm_type = RTN_UNICAST};
	struct ifinfomsg up = {.ifi_family = AF_UNSPEC, .ifi_flags = IFF_UP, .ifi_change = IFF_UP};
	struct ifinfomsg set = {.ifi_family = AF_UNSPEC};
	struct nlbuf nb;
	int s, rc, idx;

	if ((s = socket_in(nsfd, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, err)) < 0)
		return -1;
	if ((idx = nl_ifindex(s, "eth0", err)) <= 0) {
		close(s);
		return idx < 0 ? -1 : dsec_err_set(err, ENODEV, "no eth0 inside");
	}
	up.ifi_index = idx;
	nl_init(&nb);
	nl_msg(&nb, RTM_NEWLINK, 0, &set, sizeof(set));
	((struct ifinfomsg *)NLMSG_DATA(nb.b + nb.msg))->ifi_index = idx;
	no_ipv6_ll(&nb);
	nl_msg(&nb, RTM_NEWLINK, 0, &up, sizeof(up));
	nl_addr(&nb, idx, a, conf.prefix);
	nl_msg(&nb, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rt, sizeof(rt));
	nl_u32(&nb, RTA_GATEWAY, htonl(conf.subnet + 1));
	nl_u32(&nb, RTA_OIF, (uint32_t)idx);
	if (rate) /* uploads: eth0's egress, out of reach without CAP_NET_ADMIN inside */
		tbf_msg(&nb, idx, rate);
	rc = nl_talk(s, &nb, "configure eth0 inside", 0, err);
	close(s);
	return rc;
}

/* What a lease holds: the id, then the resolved allow-list, one entry a line. */
static char *lease_text(const char *id, const struct dsec_net_policy *pol)
{
	size_t cap = DSEC_ID_MAX + 32 + pol->n * 32, len;
	char *t = malloc(cap);

	if (!t)
		return NULL;
	len = (size_t)snprintf(t, cap, "%s\nrate=%llu\n", id, (unsigned long long)pol->rate);
	for (unsigned i = 0; i < pol->n; i++) {
		len += (size_t)entry_text(&pol->allow[i], t + len, cap - len);
		t[len++] = '\n';
		t[len] = '\0';
	}
	return t;
}

int dsec_net_attach(const struct dsec_paths *p, const struct dsec_sandbox *sb,
		    const struct dsec_net_policy *pol, json_t **info, struct dsec_err *err)
{
	static struct dsec_net_policy res;
	char path[PATH_MAX + 32], ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN];
	int lock = -1, dirfd = -1, nsfd = -1, brindex;
	uint32_t a = 0;
	uint64_t t0 = dsec_now_us(), t[4];
	char *text;

	if (node_open(p, err) < 0 || dsec_net_resolve(pol, &res, err) < 0)
		return -1;
	if ((lock = net_lock(p, err)) < 0)
		return -1;
	if (!node_ready) {
		if ((brindex = nl_ifindex(node_sock, conf.bridge, err)) < 0)
			goto fail;
		if (brindex == 0 && (node_make(err) < 0 ||
				     (brindex = nl_ifindex(node_sock, conf.bridge, err)) <= 0))
			goto fail;
		node_ready = brindex;
	}
	brindex = node_ready;
	snprintf(path, sizeof(path), "%s/net/leases", p->run);
	if ((dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		dsec_err_sys(err, "open '%s'", path);
		goto fail;
	}
	text = lease_text(sb->id, &res);
	if (!text || dsec_net_lease(dirfd, lock, conf.subnet, conf.prefix, text, &a, err) < 0) {
		if (!text)
			dsec_err_set(err, ENOMEM, "lease");
		free(text);
		goto fail;
	}
	free(text);
	close(lock);
	lock = -1;
	ip_text(a, ip);
	snprintf(path, sizeof(path), "%s/" ADDR_LINK, sb->dir);
	if (symlink(ip, path) < 0) {
		dsec_err_sys(err, "symlink '%s'", path);
		goto fail;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)sb->holder_pid);
	if ((nsfd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		dsec_err_sys(err, "open '%s'", path);
		goto fail;
	}
	t[0] = dsec_now_us();
	if (make_veth(a, brindex, nsfd, err) < 0) {
		/* the veth of this address's last sandbox, its namespace not yet cleaned up */
		if (err && err->errnum == EEXIST && del_link(a, err) == 0 &&
		    make_veth(a, brindex, nsfd, err) == 0)
			goto made;
		goto fail;
	}
made:
	t[1] = dsec_now_us();
	if (inside_config(nsfd, a, res.rate, err) < 0)
		goto fail;
	t[2] = dsec_now_us();
	if (sandbox_rules(a, &res, err) < 0)
		goto fail;
	t[3] = dsec_now_us();
	if (dsec_verbose > 1)
		dsec_infox("%s: net µs: lease %llu, veth %llu, inside %llu, nft %llu", sb->id,
			   (unsigned long long)(t[0] - t0), (unsigned long long)(t[1] - t[0]),
			   (unsigned long long)(t[2] - t[1]), (unsigned long long)(t[3] - t[2]));
	close(nsfd);
	close(dirfd);
	if (info) {
		ip_text(conf.subnet + 1, gw);
		*info =
		    json_pack("{s:s, s:s, s:o, s:I}", "addr", ip, "gateway", gw, "allow",
			      dsec_net_policy_json(&res), "bandwidth", (json_int_t)(res.rate * 8));
	}
	return 0;
fail:
	if (a) {
		teardown(p, a, 1, NULL);
		snprintf(path, sizeof(path), "%s/" ADDR_LINK, sb->dir);
		unlink(path);
	}
	if (nsfd >= 0)
		close(nsfd);
	if (dirfd >= 0)
		close(dirfd);
	if (lock >= 0)
		close(lock);
	return dsec_err_wrap(err, "%s: net nat", sb->id);
}

static int addr_parse(const char *s, uint32_t *a)
{
	struct in_addr in;

	if (inet_pton(AF_INET, s, &in) != 1)
		return -1;
	*a = ntohl(in.s_addr);
	return 0;
}

int dsec_net_detach(const struct dsec_paths *p, const struct dsec_sandbox *sb, struct dsec_err *err)
{
	char path[PATH_MAX + 32], ip[64];
	ssize_t n;
	uint32_t a;

	if (!sb->dir[0])
		return 0;
	snprintf(path, sizeof(path), "%s/" ADDR_LINK, sb->dir);
	n = readlink(path, ip, sizeof(ip) - 1);
	if (n < 0)
		return 0; /* no nat network */
	ip[n] = '\0';
	if (addr_parse(ip, &a) < 0)
		return dsec_err_set(err, EINVAL, "%s: bad '%s'", sb->id, path);
	if (node_open(p, err) < 0 || teardown(p, a, 0, err) < 0)
		return dsec_err_wrap(err, "%s: net teardown", sb->id);
	unlink(path);
	return 0;
}

json_t *dsec_net_info(const struct dsec_paths *p, const struct dsec_sandbox *sb)
{
	static struct dsec_net_policy pol;
	char path[PATH_MAX + 32], ip[64], gw[INET_ADDRSTRLEN], id[DSEC_ID_MAX];
	static struct net_conf c;
	static int c_loaded;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/" ADDR_LINK, sb->dir);
	n = readlink(path, ip, sizeof(ip) - 1);
	if (n < 0)
		return NULL;
	ip[n] = '\0';
	/* once per process: node.conf is read only for the bridge's address */
	if (!c_loaded && conf_load(p, &c, NULL) == 0)
		c_loaded = 1;
	if (!c_loaded || lease_read(p, ip, id, &pol) < 0)
		return NULL;
	ip_text(c.subnet + 1, gw);
	return json_pack("{s:s, s:s, s:o, s:I}", "addr", ip, "gateway", gw, "allow",
			 dsec_net_policy_json(&pol), "bandwidth", (json_int_t)(pol.rate * 8));
}

int dsec_net_orphans(const struct dsec_paths *p, struct dsec_err *err)
{
	char dir[PATH_MAX], sbdir[PATH_MAX + 64];
	struct dirent *e;
	int count = 0, rc = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/net/leases", p->run);
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : dsec_err_sys(err, "open '%s'", dir);
	while ((e = readdir(d))) {
		char *id = NULL;
		uint32_t a;

		if (addr_parse(e->d_name, &a) < 0)
			continue;
		if (dsec_read_file(dirfd(d), e->d_name, 64, &id, NULL) >= 0 &&
		    dsec_sandbox_id_ok(id)) {
			snprintf(sbdir, sizeof(sbdir), "%s/sandboxes/%s", p->run, id);
			if (access(sbdir, F_OK) == 0) {
				free(id);
				continue;
			}
		}
		free(id);
		if (node_open(p, err) < 0 || teardown(p, a, 1, err) < 0)
			rc = -1;
		else
			count++;
	}
	closedir(d);
	return rc < 0 ? -1 : count;
}
