/* --net nat: veth, bridge, NAT, allow-list, bandwidth cap. See net.h for the layout. */
#include "net.h"
#include "netlink.h"
#include "ns.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ADDR_LINK "net-addr" /* in the sandbox's state dir: -> "a.b.c.d" */

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
		/* it goes into the nftables text: a plain name only */
		if (!*e || strlen(e) >= 12 ||
		    strspn(e, "abcdefghijklmnopqrstuvwxyz"
			      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != strlen(e))
			return dsec_err_set(
			    err, EINVAL, "net_bridge '%s': want 1 to 11 letters, digits, '_', '-'",
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
	    dsec_parse_count(slash + 1, 8, 29, &n, "prefix", NULL) < 0) {
		if (slash)
			*slash = '/';
		return dsec_err_set(err, EINVAL, "net_subnet '%s': want A.B.C.D/8..29", v);
	}
	c->prefix = (int)n;
	c->subnet = ntohl(in.s_addr) & (~0U << (32 - n));
	return 0;
}

/* ---- namespaces ---- */

static int self_ns = -1, node_ns = -1, node_sock = -1, node_ready;
static struct net_conf conf;
static struct nft_ctx *nft;

/* libnftables, loaded on first use (only the node's one-time ruleset needs it): the tools that
 * never make a node side, dsec-exec above all, do not map it at every start. */
static struct {
	struct nft_ctx *(*ctx_new)(uint32_t);
	int (*buffer_error)(struct nft_ctx *);
	int (*buffer_output)(struct nft_ctx *);
	int (*run_cmd)(struct nft_ctx *, const char *);
	const char *(*error_buffer)(struct nft_ctx *);
} nftl;

static int nft_load(struct dsec_err *err)
{
	void *h;

	if (nftl.ctx_new)
		return 0;
	h = dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen("libnftables.so", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return dsec_err_set(err, ENOENT, "load libnftables: %s", dlerror());
	*(void **)&nftl.buffer_error = dlsym(h, "nft_ctx_buffer_error");
	*(void **)&nftl.buffer_output = dlsym(h, "nft_ctx_buffer_output");
	*(void **)&nftl.run_cmd = dlsym(h, "nft_run_cmd_from_buffer");
	*(void **)&nftl.error_buffer = dlsym(h, "nft_ctx_get_error_buffer");
	*(void **)&nftl.ctx_new = dlsym(h, "nft_ctx_new");
	if (!nftl.buffer_error || !nftl.buffer_output || !nftl.run_cmd || !nftl.error_buffer ||
	    !nftl.ctx_new) {
		nftl.ctx_new = NULL;
		return dsec_err_set(err, ENOENT, "libnftables lacks nft_ctx_new and friends");
	}
	return 0;
}

/* Run nft commands in the node namespace. 0 or -1 with nft's message. */
static int nft_run(const char *cmds, struct dsec_err *err)
{
	int rc;

	if (nft_load(err) < 0)
		return -1;

	if (node_ns >= 0 && setns(node_ns, CLONE_NEWNET) < 0)
		return dsec_err_sys(err, "enter node network namespace");
	/* its netlink socket is made by nft_ctx_new: in the node namespace */
	if (!nft && (nft = nftl.ctx_new(NFT_CTX_DEFAULT))) {
		nftl.buffer_error(nft);
		nftl.buffer_output(nft);
	}
	rc = nft ? nftl.run_cmd(nft, cmds) : -1;
	if (node_ns >= 0 && setns(self_ns, CLONE_NEWNET) < 0)
		abort();
	if (!nft)
		return dsec_err_set(err, ENOMEM, "nft_ctx_new");
	if (rc) {
		const char *m = nftl.error_buffer(nft);
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
	char cmds[4096], net[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN];
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_flags = IFF_UP, .ifi_change = IFF_UP};
	struct dsec_nl nb;
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
		 "  iifname \"%s\" ct state established,related accept\n"
		 "  iifname \"%s\" ip saddr . ip daddr . meta l4proto . th dport @allow accept\n"
		 "  iifname \"%s\" drop\n"
		 "  oifname \"%s\" ct state established,related accept\n"
		 "  oifname \"%s\" drop\n"
		 " }\n"
		 " chain input {\n"
		 "  type filter hook input priority filter; policy accept;\n"
		 "  iifname \"%s\" drop\n"
		 " }\n"
		 " chain post {\n"
		 "  type nat hook postrouting priority srcnat; policy accept;\n"
		 "  ip saddr %s/%d oifname != \"%s\" masquerade\n"
		 " }\n"
		 "}\n"
		 /* each sandbox port speaks only with its own address (nft_src) */
		 "add table bridge dsec\n"
		 "delete table bridge dsec\n"
		 "table bridge dsec {\n"
		 " set src { type ifname . ipv4_addr; }\n"
		 " chain pre {\n"
		 "  type filter hook prerouting priority filter; policy accept;\n"
		 "  iifname \"dsv*\" ether type ip iifname . ip saddr != @src drop\n"
		 "  iifname \"dsv*\" ether type arp iifname . arp saddr ip != @src drop\n"
		 " }\n"
		 "}\n",
		 conf.bridge, conf.bridge, conf.bridge, conf.bridge, conf.bridge, conf.bridge, net,
		 conf.prefix, conf.bridge);
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
	dsec_nl_init(&nb);
	dsec_nl_msg(&nb, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof(ifi));
	dsec_nl_str(&nb, IFLA_IFNAME, conf.bridge);
	li = dsec_nl_nest(&nb, IFLA_LINKINFO);
	dsec_nl_str(&nb, IFLA_INFO_KIND, "bridge");
	dsec_nl_nest_end(&nb, li);
	if (dsec_nl_talk(node_sock, &nb, "create bridge", EEXIST, err) < 0)
		return -1;
	if ((idx = dsec_nl_ifindex(node_sock, conf.bridge, err)) <= 0)
		return idx < 0 ? -1 : dsec_err_set(err, ENODEV, "bridge '%s' gone", conf.bridge);
	dsec_nl_init(&nb);
	dsec_nl_addr(&nb, idx, conf.subnet + 1, conf.prefix);
	return dsec_nl_talk(node_sock, &nb, "bridge address", 0, err);
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
	node_sock = dsec_nl_socket_in(node_ns, self_ns, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, err);
	return node_sock < 0 ? -1 : 0;
}

static int lock_fd = -1, leases_fd = -1;

/* Take $DSEC_RUN/net/lock exclusive; opened once per process with the leases dir. Returns the
 * lock's fd (release with net_unlock) or -1. */
static int net_lock(const struct dsec_paths *p, struct dsec_err *err)
{
	char path[PATH_MAX];

	if (lock_fd < 0) {
		snprintf(path, sizeof(path), "%s/net/leases", p->run);
		if (dsec_mkdir_p(path, 0700, err) < 0)
			return -1;
		if ((leases_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			return dsec_err_sys(err, "open '%s'", path);
		snprintf(path, sizeof(path), "%s/net/lock", p->run);
		lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (lock_fd < 0)
			return dsec_err_sys(err, "open '%s'", path);
	}
	while (flock(lock_fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return dsec_err_sys(err, "lock %s/net/lock", p->run);
	return lock_fd;
}

static void net_unlock(void)
{
	flock(lock_fd, LOCK_UN);
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
	struct dsec_nl nb;

	ifname_for(a, name);
	dsec_nl_init(&nb);
	dsec_nl_msg(&nb, RTM_DELLINK, 0, &ifi, sizeof(ifi));
	dsec_nl_str(&nb, IFLA_IFNAME, name);
	return dsec_nl_talk(node_sock, &nb, "delete veth", ENODEV, err);
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
	static struct dsec_nl nb;
	size_t list;

	if (!n)
		return 0;
	if (nf_sock < 0 && (nf_sock = dsec_nl_socket_in(node_ns, self_ns, AF_NETLINK, SOCK_RAW,
							NETLINK_NETFILTER, err)) < 0)
		return -1;
	dsec_nl_init(&nb);
	dsec_nl_batch(&nb, NFNL_MSG_BATCH_BEGIN);
	dsec_nl_msg(&nb, (NFNL_SUBSYS_NFTABLES << 8) | type,
		    type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0, &g, sizeof(g));
	dsec_nl_str(&nb, NFTA_SET_ELEM_LIST_TABLE, "dsec");
	dsec_nl_str(&nb, NFTA_SET_ELEM_LIST_SET, "allow");
	list = dsec_nl_nest(&nb, NFTA_SET_ELEM_LIST_ELEMENTS);
	for (unsigned i = 0; i < n; i++) {
		size_t el = dsec_nl_nest(&nb, NFTA_LIST_ELEM), k;

		k = dsec_nl_nest(&nb, NFTA_SET_ELEM_KEY);
		dsec_nl_attr(&nb, NFTA_DATA_VALUE, e[i].key, 16);
		dsec_nl_nest_end(&nb, k);
		k = dsec_nl_nest(&nb, NFTA_SET_ELEM_KEY_END);
		dsec_nl_attr(&nb, NFTA_DATA_VALUE, e[i].end, 16);
		dsec_nl_nest_end(&nb, k);
		dsec_nl_nest_end(&nb, el);
	}
	dsec_nl_nest_end(&nb, list);
	dsec_nl_batch(&nb, NFNL_MSG_BATCH_END);
	return dsec_nl_talk(nf_sock, &nb,
			    type == NFT_MSG_NEWSETELEM ? "add allow-list" : "remove allow-list",
			    ok_errno, err);
}

/* Add (or delete) "dsv<hex> . a" in the bridge table's set src: frames from that port must
 * carry a as their IPv4 or ARP source address, so that a sandbox given CAP_NET_RAW cannot
 * speak with another's address (and so with its allow-list). */
static int nft_src(int type, uint32_t a, int ok_errno, struct dsec_err *err)
{
	struct nfgenmsg g = {.nfgen_family = NFPROTO_BRIDGE, .version = NFNETLINK_V0};
	uint8_t key[IFNAMSIZ + 4] = {0};
	uint32_t be = htonl(a);
	struct dsec_nl nb;
	size_t list, el, k;

	if (nf_sock < 0 && (nf_sock = dsec_nl_socket_in(node_ns, self_ns, AF_NETLINK, SOCK_RAW,
							NETLINK_NETFILTER, err)) < 0)
		return -1;
	ifname_for(a, (char *)key);
	memcpy(key + IFNAMSIZ, &be, 4);
	dsec_nl_init(&nb);
	dsec_nl_batch(&nb, NFNL_MSG_BATCH_BEGIN);
	dsec_nl_msg(&nb, (NFNL_SUBSYS_NFTABLES << 8) | type,
		    type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0, &g, sizeof(g));
	dsec_nl_str(&nb, NFTA_SET_ELEM_LIST_TABLE, "dsec");
	dsec_nl_str(&nb, NFTA_SET_ELEM_LIST_SET, "src");
	list = dsec_nl_nest(&nb, NFTA_SET_ELEM_LIST_ELEMENTS);
	el = dsec_nl_nest(&nb, NFTA_LIST_ELEM);
	k = dsec_nl_nest(&nb, NFTA_SET_ELEM_KEY);
	dsec_nl_attr(&nb, NFTA_DATA_VALUE, key, sizeof(key));
	dsec_nl_nest_end(&nb, k);
	dsec_nl_nest_end(&nb, el);
	dsec_nl_nest_end(&nb, list);
	dsec_nl_batch(&nb, NFNL_MSG_BATCH_END);
	return dsec_nl_talk(nf_sock, &nb, "source address check", ok_errno, err);
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
		nft_src(NFT_MSG_DELSETELEM, a, ENOENT, NULL);
	}
	if (link && del_link(a, err) < 0)
		rc = -1;
	snprintf(lease, sizeof(lease), "%s/net/leases/%s", p->run, ip);
	if (unlink(lease) < 0 && errno != ENOENT && rc == 0)
		rc = dsec_err_sys(err, "remove lease '%s'", lease);
	return rc;
}

/* The sandbox's allow-list elements, and its download cap on the host end. */
static int sandbox_rules(uint32_t a, const struct dsec_net_policy *pol, struct dsec_err *err)
{
	static struct elem el[2 * DSEC_NET_ALLOW_MAX];
	char name[IFNAMSIZ];
	struct dsec_nl nb;
	int idx;

	if (nft_src(NFT_MSG_NEWSETELEM, a, 0, err) < 0 ||
	    nft_elems(NFT_MSG_NEWSETELEM, el, elems_order(el, policy_elems(a, pol, el)), 0, err) <
		0)
		return -1;
	if (!pol->rate)
		return 0;
	ifname_for(a, name);
	if ((idx = dsec_nl_ifindex(node_sock, name, err)) <= 0)
		return idx < 0 ? -1 : dsec_err_set(err, ENODEV, "veth '%s' gone", name);
	dsec_nl_init(&nb);
	dsec_nl_tbf(&nb, idx, pol->rate);
	return dsec_nl_talk(node_sock, &nb, "bandwidth (tbf)", 0, err);
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
	struct dsec_nl nb;
	size_t li, data, pe;
	uint8_t one = 1;

	ifname_for(a, name);
	dsec_nl_init(&nb);
	dsec_nl_msg(&nb, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof(ifi));
	dsec_nl_str(&nb, IFLA_IFNAME, name);
	dsec_nl_u32(&nb, IFLA_MASTER, (uint32_t)brindex);
	li = dsec_nl_nest(&nb, IFLA_LINKINFO);
	dsec_nl_str(&nb, IFLA_INFO_KIND, "veth");
	data = dsec_nl_nest(&nb, IFLA_INFO_DATA);
	pe = dsec_nl_nest(&nb, VETH_INFO_PEER);
	((struct rtattr *)(nb.b + pe))->rta_type =
	    VETH_INFO_PEER; /* not NLA_F_NESTED: it starts with an ifinfomsg */
	dsec_nl_put(&nb, &peer, sizeof(peer));
	dsec_nl_str(&nb, IFLA_IFNAME, "eth0");
	dsec_nl_u32(&nb, IFLA_NET_NS_FD, (uint32_t)nsfd);
	dsec_nl_nest_end(&nb, pe);
	dsec_nl_nest_end(&nb, data);
	dsec_nl_nest_end(&nb, li);
	/* addrconf acts when the link comes up: its mode first */
	dsec_nl_msg(&nb, RTM_NEWLINK, 0, &set, sizeof(set));
	dsec_nl_str(&nb, IFLA_IFNAME, name);
	dsec_nl_no_ipv6_ll(&nb);
	/* no frames between two isolated bridge ports: sandboxes do not see one another */
	dsec_nl_msg(&nb, RTM_NEWLINK, 0, &up, sizeof(up));
	dsec_nl_str(&nb, IFLA_IFNAME, name);
	li = dsec_nl_nest(&nb, IFLA_LINKINFO);
	dsec_nl_str(&nb, IFLA_INFO_SLAVE_KIND, "bridge");
	data = dsec_nl_nest(&nb, IFLA_INFO_SLAVE_DATA);
	dsec_nl_attr(&nb, IFLA_BRPORT_ISOLATED, &one, sizeof(one));
	dsec_nl_nest_end(&nb, data);
	dsec_nl_nest_end(&nb, li);
	return dsec_nl_talk(node_sock, &nb, "create veth", 0, err);
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
	struct dsec_nl nb;
	int s, rc, idx;

	if ((s = dsec_nl_socket_in(nsfd, self_ns, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, err)) < 0)
		return -1;
	if ((idx = dsec_nl_ifindex(s, "eth0", err)) <= 0) {
		close(s);
		return idx < 0 ? -1 : dsec_err_set(err, ENODEV, "no eth0 inside");
	}
	up.ifi_index = idx;
	dsec_nl_init(&nb);
	dsec_nl_msg(&nb, RTM_NEWLINK, 0, &set, sizeof(set));
	((struct ifinfomsg *)NLMSG_DATA(nb.b + nb.msg))->ifi_index = idx;
	dsec_nl_no_ipv6_ll(&nb);
	dsec_nl_msg(&nb, RTM_NEWLINK, 0, &up, sizeof(up));
	dsec_nl_addr(&nb, idx, a, conf.prefix);
	dsec_nl_msg(&nb, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rt, sizeof(rt));
	dsec_nl_u32(&nb, RTA_GATEWAY, htonl(conf.subnet + 1));
	dsec_nl_u32(&nb, RTA_OIF, (uint32_t)idx);
	if (rate) /* uploads: eth0's egress, out of reach without CAP_NET_ADMIN inside */
		dsec_nl_tbf(&nb, idx, rate);
	rc = dsec_nl_talk(s, &nb, "configure eth0 inside", 0, err);
	close(s);
	return rc;
}

/* CPU time of this thread, µs: the kernel's netlink work runs in it, so this is the cost of
 * attaching whatever else the machine does (wall time is not, on a busy node). */
static uint64_t thread_cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
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
		len += (size_t)dsec_net_allow_text(&pol->allow[i], t + len, cap - len);
		t[len++] = '\n';
		t[len] = '\0';
	}
	return t;
}

/* Append the allow-list's names to the sandbox's /etc/hosts, so that what is allowed by name
 * resolves by name inside (its DNS is not allowed unless listed). Opened from the sandbox's
 * root with every link resolved inside it; a hosts file made here is root's inside. */
static int write_hosts(const struct dsec_sandbox *sb, const char *lines, struct dsec_err *err)
{
	static const char head[] = "127.0.0.1 localhost\n::1 localhost\n";
	size_t n = strlen(lines);
	struct stat st;
	int fd, rc = 0;

	if (!n)
		return 0;
	fd = dsec_rootfs_open(sb->holder_pid, "etc/hosts",
			      O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK, 0644);
	if (fd < 0)
		return dsec_err_sys(err, "open /etc/hosts in the sandbox");
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = dsec_err_set(err, EINVAL, "/etc/hosts in the sandbox: not a regular file");
	} else if (st.st_size == 0 && st.st_uid == 0 && sb->userns &&
		   fchown(fd, sb->root_uid, sb->gid_base) < 0) {
		rc = dsec_err_sys(err, "chown /etc/hosts in the sandbox");
	} else if ((st.st_size == 0 && write(fd, head, sizeof(head) - 1) != sizeof(head) - 1) ||
		   write(fd, lines, n) != (ssize_t)n) {
		rc = dsec_err_sys(err, "write /etc/hosts in the sandbox");
	}
	close(fd);
	return rc;
}

/* The resolvers the allow-list names (its ADDR:53 entries, names resolved) become the
 * sandbox's /etc/resolv.conf, so that with a resolver allowed, names resolve inside with no
 * image of one's own; without one the image's file stays. Made as write_hosts makes its file;
 * a link the image put there is replaced (it would lead to the image's resolver). */
static int write_resolv(const struct dsec_sandbox *sb, const struct dsec_net_policy *res,
			struct dsec_err *err)
{
	char text[256], ip[INET_ADDRSTRLEN];
	size_t len = (size_t)snprintf(text, sizeof(text), "%s", DSEC_RESOLV_NAT_MARK);
	int etc, fd, rc = 0, servers = 0;
	struct stat st;

	for (unsigned i = 0; i < res->n && servers < 3; i++) {
		const struct dsec_net_allow *a = &res->allow[i];

		if (a->port != 53 || a->prefix != 32)
			continue;
		ip_text(a->addr, ip);
		len += (size_t)snprintf(text + len, sizeof(text) - len, "nameserver %s\n", ip);
		servers++;
	}
	if (!servers)
		return 0;
	etc = dsec_rootfs_open(sb->holder_pid, "etc", O_PATH | O_DIRECTORY, 0);
	if (etc < 0)
		return errno == ENOENT ? 0 : dsec_err_sys(err, "open /etc in the sandbox");
	if (fstatat(etc, "resolv.conf", &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode)) {
			unlinkat(etc, "resolv.conf", 0);
		} else if (!S_ISREG(st.st_mode)) { /* a dir, a fifo: the image's business */
			close(etc);
			return 0;
		}
	}
	/* non-blocking: a fifo the image put there fails the open instead of hanging it */
	fd = openat(etc, "resolv.conf",
		    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	close(etc);
	if (fd < 0)
		return dsec_err_sys(err, "open /etc/resolv.conf in the sandbox");
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		rc = dsec_err_set(err, EINVAL,
				  "/etc/resolv.conf in the sandbox: not a regular file");
	else if (st.st_uid == 0 && sb->userns && fchown(fd, sb->root_uid, sb->gid_base) < 0)
		rc = dsec_err_sys(err, "chown /etc/resolv.conf in the sandbox");
	else if (dsec_write_all(fd, text, len) < 0)
		rc = dsec_err_sys(err, "write /etc/resolv.conf in the sandbox");
	close(fd);
	return rc;
}

int dsec_net_attach(const struct dsec_paths *p, const struct dsec_sandbox *sb,
		    const struct dsec_net_policy *pol, json_t **info, struct dsec_err *err)
{
	static struct dsec_net_policy res;
	static char hosts[8192];
	char path[PATH_MAX + 32], ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN];
	int lock = -1, nsfd = -1, brindex;
	uint32_t a = 0;
	uint64_t t0 = dsec_now_us(), t[4], c0 = thread_cpu_us();
	char *text;

	if (node_open(p, err) < 0 || dsec_net_resolve(pol, &res, hosts, sizeof(hosts), err) < 0 ||
	    (lock = net_lock(p, err)) < 0)
		return dsec_err_wrap(err, "%s: net nat", sb->id);
	if (!node_ready) {
		if ((brindex = dsec_nl_ifindex(node_sock, conf.bridge, err)) < 0)
			goto fail;
		if (brindex == 0 && (node_make(err) < 0 ||
				     (brindex = dsec_nl_ifindex(node_sock, conf.bridge, err)) <= 0))
			goto fail;
		node_ready = brindex;
	}
	brindex = node_ready;
	text = lease_text(sb->id, &res);
	if (!text || dsec_net_lease(leases_fd, lock, conf.subnet, conf.prefix, text, &a, err) < 0) {
		if (!text)
			dsec_err_set(err, ENOMEM, "lease");
		free(text);
		goto fail;
	}
	free(text);
	net_unlock();
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
	if (sandbox_rules(a, &res, err) < 0 || write_hosts(sb, hosts, err) < 0 ||
	    write_resolv(sb, &res, err) < 0)
		goto fail;
	t[3] = dsec_now_us();
	if (dsec_verbose > 1)
		dsec_infox("%s: net µs: lease %llu, veth %llu, inside %llu, nft %llu; cpu %llu",
			   sb->id, (unsigned long long)(t[0] - t0),
			   (unsigned long long)(t[1] - t[0]), (unsigned long long)(t[2] - t[1]),
			   (unsigned long long)(t[3] - t[2]),
			   (unsigned long long)(thread_cpu_us() - c0));
	close(nsfd);
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
	if (lock >= 0)
		net_unlock();
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

/* Is the configured node namespace gone (its file removed)? Then every interface and rule of
 * it went with it, and only the leases are left to remove. */
static int node_gone(const struct dsec_paths *p)
{
	struct net_conf c;

	if (node_sock >= 0 || conf_load(p, &c, NULL) < 0 || !c.ns[0])
		return 0;
	return access(c.ns, F_OK) < 0 && errno == ENOENT;
}

static int release(const struct dsec_paths *p, uint32_t a)
{
	char ip[INET_ADDRSTRLEN], lease[PATH_MAX];

	ip_text(a, ip);
	snprintf(lease, sizeof(lease), "%s/net/leases/%s", p->run, ip);
	return unlink(lease) < 0 && errno != ENOENT ? -1 : 0;
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
	if (node_gone(p) ? release(p, a) < 0 : node_open(p, err) < 0 || teardown(p, a, 0, err) < 0)
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
		char id[DSEC_ID_MAX + 2] = "";
		uint32_t a;
		ssize_t n = -1;
		int fd;

		if (addr_parse(e->d_name, &a) < 0)
			continue;
		/* the first line names the sandbox */
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0) {
			n = read(fd, id, sizeof(id) - 1);
			close(fd);
		}
		id[n > 0 ? n : 0] = '\0';
		id[strcspn(id, "\n")] = '\0';
		if (dsec_sandbox_id_ok(id)) {
			snprintf(sbdir, sizeof(sbdir), "%s/sandboxes/%s", p->run, id);
			if (access(sbdir, F_OK) == 0)
				continue;
		}
		if (node_gone(p) ? release(p, a) < 0
				 : node_open(p, err) < 0 || teardown(p, a, 1, err) < 0)
			rc = -1;
		else
			count++;
	}
	closedir(d);
	return rc < 0 ? -1 : count;
}

/* A port of a sandbox of this run dir on its way out: "dsv<hex>" of an address of our subnet
 * that holds no lease (its veth goes with its network namespace, which the kernel frees a
 * while after the sandbox's last process). */
static int port_leaving(const char *name, void *ctx)
{
	const struct dsec_paths *p = ctx;
	char path[PATH_MAX], ip[INET_ADDRSTRLEN], *end;
	unsigned long a;

	if (strncmp(name, "dsv", 3) || strlen(name) != 11)
		return 0;
	a = strtoul(name + 3, &end, 16);
	if (*end || ((uint32_t)a & (~0U << (32 - conf.prefix))) != conf.subnet)
		return 0;
	ip_text((uint32_t)a, ip);
	snprintf(path, sizeof(path), "%s/net/leases/%s", p->run, ip);
	return access(path, F_OK) < 0;
}

int dsec_net_node_cleanup(const struct dsec_paths *p, struct dsec_err *err)
{
	char dir[PATH_MAX];
	struct dirent *e;
	int lock, idx, busy = 0, rc = -1;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/net", p->run);
	if (access(dir, F_OK) < 0)
		return 0; /* no nat sandbox was ever made here: nothing of ours out there */
	if (node_gone(p))
		return dsec_rmtree(dir, err);
	if (node_open(p, err) < 0 || (lock = net_lock(p, err)) < 0)
		return dsec_err_wrap(err, "net node cleanup");
	snprintf(dir, sizeof(dir), "%s/net/leases", p->run);
	if ((d = opendir(dir))) {
		while (!busy && (e = readdir(d)))
			busy = e->d_name[0] != '.';
		closedir(d);
	}
	/* a lease left, or a port on the bridge other than those of our sandboxes on their way
	 * out (a nat sandbox of another run dir): it stays */
	idx = 0;
	if (!busy && (idx = dsec_nl_ifindex(node_sock, conf.bridge, err)) < 0)
		goto out;
	if (!busy && idx > 0 &&
	    (busy = dsec_nl_ports(node_sock, idx, port_leaving, (void *)p, err)) < 0)
		goto out;
	if (busy) {
		rc = 0;
		goto out;
	}
	/* the bridge first: a bridge means the rest is there (node_make) */
	if (idx > 0) {
		struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = idx};
		struct dsec_nl nb;

		dsec_nl_init(&nb);
		dsec_nl_msg(&nb, RTM_DELLINK, 0, &ifi, sizeof(ifi));
		if (dsec_nl_talk(node_sock, &nb, "remove bridge", ENODEV, err) < 0)
			goto out;
	}
	if (nft_run("add table inet dsec\ndelete table inet dsec\n"
		    "add table bridge dsec\ndelete table bridge dsec\n",
		    err) < 0)
		goto out;
	node_ready = 0;
	rc = 0;
out:
	net_unlock();
	return rc < 0 ? dsec_err_wrap(err, "net node cleanup") : 0;
}
