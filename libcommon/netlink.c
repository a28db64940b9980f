/* Netlink requests without a library (netlink.h). */
#include "netlink.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void dsec_nl_put(struct dsec_nl *nb, const void *data, size_t len)
{
	memcpy(nb->b + nb->len, data, len);
	memset(nb->b + nb->len + len, 0, NLMSG_ALIGN(len) - len);
	nb->len += NLMSG_ALIGN(len);
	((struct nlmsghdr *)(nb->b + nb->msg))->nlmsg_len = (uint32_t)(nb->len - nb->msg);
}

void dsec_nl_msg(struct dsec_nl *nb, int type, int flags, const void *hdr, size_t hlen)
{
	struct nlmsghdr h = {.nlmsg_type = (uint16_t)type,
			     .nlmsg_flags = (uint16_t)(NLM_F_REQUEST | NLM_F_ACK | flags),
			     .nlmsg_seq = nb->seq0 + nb->n++};

	nb->msg = nb->len;
	dsec_nl_put(nb, &h, sizeof(h));
	dsec_nl_put(nb, hdr, hlen);
}

/* nfnetlink batch begin/end: no ack asked, not counted (an error answers with seq0 + 60). */
void dsec_nl_batch(struct dsec_nl *nb, int type)
{
	struct nlmsghdr h = {
	    .nlmsg_type = (uint16_t)type, .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = nb->seq0 + 60};
	struct nfgenmsg g = {.nfgen_family = AF_UNSPEC,
			     .version = NFNETLINK_V0,
			     .res_id = htons(NFNL_SUBSYS_NFTABLES)};

	nb->msg = nb->len;
	dsec_nl_put(nb, &h, sizeof(h));
	dsec_nl_put(nb, &g, sizeof(g));
}

void dsec_nl_attr(struct dsec_nl *nb, int type, const void *data, size_t len)
{
	struct rtattr a = {.rta_len = (unsigned short)RTA_LENGTH(len),
			   .rta_type = (unsigned short)type};
	size_t at = nb->len;

	dsec_nl_put(nb, &a, sizeof(a));
	nb->len = at + RTA_LENGTH(0);
	dsec_nl_put(nb, data, len);
}

size_t dsec_nl_nest(struct dsec_nl *nb, int type)
{
	struct rtattr a = {.rta_len = RTA_LENGTH(0),
			   .rta_type = (unsigned short)(type | NLA_F_NESTED)};
	size_t at = nb->len;

	dsec_nl_put(nb, &a, sizeof(a));
	return at;
}

void dsec_nl_nest_end(struct dsec_nl *nb, size_t at)
{
	((struct rtattr *)(nb->b + at))->rta_len = (unsigned short)(nb->len - at);
}

void dsec_nl_str(struct dsec_nl *nb, int type, const char *s)
{
	dsec_nl_attr(nb, type, s, strlen(s) + 1);
}

void dsec_nl_u32(struct dsec_nl *nb, int type, uint32_t v)
{
	dsec_nl_attr(nb, type, &v, sizeof(v));
}

static uint32_t nl_seq;

void dsec_nl_init(struct dsec_nl *nb)
{
	nb->len = nb->msg = nb->n = 0;
	nb->seq0 = nl_seq += 64;
}

/* Send the batch and read one ack per message. With ok_errno, that error of a message is
 * no failure (ENODEV when deleting what may be gone). -1 with the first error. */
int dsec_nl_talk(int fd, struct dsec_nl *nb, const char *what, int ok_errno, struct dsec_err *err)
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

/* Send nb's one request with flags (a query: no ack asked) and hand each answer to it to
 * fn(h, ctx) until fn returns non-zero (that is the result) or the dump is done (0). -1 when
 * the kernel answers an error (*kerr gets it) or a send or recv fails (err says which). */
static int nl_query(int fd, struct dsec_nl *nb, int flags, int (*fn)(struct nlmsghdr *, void *),
		    void *ctx, int *kerr, struct dsec_err *err)
{
	char rb[16384] __attribute__((aligned(NLMSG_ALIGNTO)));

	((struct nlmsghdr *)nb->b)->nlmsg_flags = (uint16_t)flags;
	if (send(fd, nb->b, nb->len, 0) != (ssize_t)nb->len)
		return dsec_err_sys(err, "netlink send");
	for (;;) {
		ssize_t r = recv(fd, rb, sizeof(rb), 0);
		struct nlmsghdr *h;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return dsec_err_sys(err, "netlink recv");
		for (h = (struct nlmsghdr *)rb; NLMSG_OK(h, (size_t)r); h = NLMSG_NEXT(h, r)) {
			int v;

			if (h->nlmsg_seq != nb->seq0)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				*kerr = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
				return -1;
			}
			if ((v = fn(h, ctx)) != 0)
				return v;
		}
	}
}

static int link_index(struct nlmsghdr *h, void *ctx)
{
	return h->nlmsg_type == RTM_NEWLINK ? ((struct ifinfomsg *)NLMSG_DATA(h))->ifi_index : 0;
}

/* The ifindex of name, 0 when there is none, -1 on error. */
int dsec_nl_ifindex(int fd, const char *name, struct dsec_err *err)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
	struct dsec_nl nb;
	int r, kerr = 0;

	dsec_nl_init(&nb);
	dsec_nl_msg(&nb, RTM_GETLINK, 0, &ifi, sizeof(ifi));
	dsec_nl_str(&nb, IFLA_IFNAME, name);
	r = nl_query(fd, &nb, NLM_F_REQUEST, link_index, NULL, &kerr, err);
	if (r < 0 && kerr == ENODEV)
		return 0;
	if (r < 0 && kerr) {
		errno = kerr;
		return dsec_err_sys(err, "get link '%s'", name);
	}
	return r;
}

void dsec_nl_addr(struct dsec_nl *nb, int ifindex, uint32_t addr, int prefix)
{
	struct ifaddrmsg ifa = {.ifa_family = AF_INET,
				.ifa_prefixlen = (unsigned char)prefix,
				.ifa_index = (unsigned)ifindex};
	uint32_t a = htonl(addr);

	dsec_nl_msg(nb, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, &ifa, sizeof(ifa));
	dsec_nl_u32(nb, IFA_LOCAL, a);
	dsec_nl_u32(nb, IFA_ADDRESS, a);
}

/* A tbf qdisc on ifindex: rate bytes a second, a burst of 50 ms (at least 32 KiB), a queue of
 * 100 ms more. */
void dsec_nl_tbf(struct dsec_nl *nb, int ifindex, uint64_t rate)
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
	dsec_nl_msg(nb, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, &tc, sizeof(tc));
	dsec_nl_str(nb, TCA_KIND, "tbf");
	opt = dsec_nl_nest(nb, TCA_OPTIONS);
	dsec_nl_attr(nb, TCA_TBF_PARMS, &q, sizeof(q));
	dsec_nl_u32(nb, TCA_TBF_BURST, burst > 0xffffffffULL ? 0xffffffffU : (uint32_t)burst);
	if (rate >= 0xffffffffULL)
		dsec_nl_attr(nb, TCA_TBF_RATE64, &rate, sizeof(rate));
	dsec_nl_nest_end(nb, opt);
}

/* No IPv6 link-local address (nor its duplicate address detection) on a veth end: nat is
 * IPv4, and every IPv6 packet from the bridge is dropped anyway. */
void dsec_nl_no_ipv6_ll(struct dsec_nl *nb)
{
	uint8_t none = IN6_ADDR_GEN_MODE_NONE;
	size_t af = dsec_nl_nest(nb, IFLA_AF_SPEC), v6 = dsec_nl_nest(nb, AF_INET6);

	dsec_nl_attr(nb, IFLA_INET6_ADDR_GEN_MODE, &none, sizeof(none));
	dsec_nl_nest_end(nb, v6);
	dsec_nl_nest_end(nb, af);
}

/* A socket made in namespace nsfd (-1: ours). */
int dsec_nl_socket_in(int nsfd, int selfns, int domain, int type, int proto, struct dsec_err *err)
{
	int s, e;

	if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
		return dsec_err_sys(err, "enter network namespace");
	s = socket(domain, type | SOCK_CLOEXEC, proto);
	e = errno;
	if (nsfd >= 0 && setns(selfns, CLONE_NEWNET) < 0)
		abort(); /* we would go on in the wrong namespace */
	if (s < 0) {
		errno = e;
		return dsec_err_sys(err, "socket");
	}
	return s;
}

struct ports {
	int master, n;
	int (*skip)(const char *name, void *ctx);
	void *ctx;
};

static int count_port(struct nlmsghdr *h, void *arg)
{
	struct ports *pc = arg;
	char name[IFNAMSIZ + 1] = "";
	int len = (int)IFLA_PAYLOAD(h), port = 0;
	struct rtattr *a;

	if (h->nlmsg_type != RTM_NEWLINK)
		return 0;
	for (a = IFLA_RTA((struct ifinfomsg *)NLMSG_DATA(h)); RTA_OK(a, len);
	     a = RTA_NEXT(a, len)) {
		if (a->rta_type == IFLA_MASTER && *(uint32_t *)RTA_DATA(a) == (uint32_t)pc->master)
			port = 1;
		if (a->rta_type == IFLA_IFNAME)
			snprintf(name, sizeof(name), "%.*s", (int)RTA_PAYLOAD(a),
				 (const char *)RTA_DATA(a));
	}
	pc->n += port && !(pc->skip && pc->skip(name, pc->ctx));
	return 0;
}

int dsec_nl_ports(int fd, int master, int (*skip)(const char *name, void *ctx), void *ctx,
		  struct dsec_err *err)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
	struct ports pc = {master, 0, skip, ctx};
	struct dsec_nl nb;
	int kerr = 0;

	dsec_nl_init(&nb);
	dsec_nl_msg(&nb, RTM_GETLINK, 0, &ifi, sizeof(ifi));
	dsec_nl_u32(&nb, IFLA_MASTER, (uint32_t)master); /* the kernel's filter, checked too */
	if (nl_query(fd, &nb, NLM_F_REQUEST | NLM_F_DUMP, count_port, &pc, &kerr, err) < 0) {
		if (kerr) {
			errno = kerr;
			dsec_err_sys(err, "list links");
		}
		return -1;
	}
	return pc.n;
}
