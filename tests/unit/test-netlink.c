/* netlink.c: the request builder (layout checked with the kernel's own macros) and a round
 * trip to the kernel on a socket of this process's namespace that changes nothing. */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <linux/if_link.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netlink.h"
#include "tap.h"

static struct dsec_nl nb;

int main(void)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
	struct dsec_err err = {0};
	struct nlmsghdr *h;
	struct rtattr *a, *in;
	size_t nest;
	int len, fd, seen = 0;

	dsec_nl_init(&nb);
	dsec_nl_msg(&nb, RTM_NEWLINK, NLM_F_CREATE, &ifi, sizeof(ifi));
	dsec_nl_str(&nb, IFLA_IFNAME, "abc");
	nest = dsec_nl_nest(&nb, IFLA_LINKINFO);
	dsec_nl_str(&nb, IFLA_INFO_KIND, "veth");
	dsec_nl_nest_end(&nb, nest);
	dsec_nl_u32(&nb, IFLA_MTU, 1400);
	h = (struct nlmsghdr *)nb.b;
	ok(nb.n == 1 && h->nlmsg_len == nb.len && h->nlmsg_type == RTM_NEWLINK &&
	       (h->nlmsg_flags & (NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE)) ==
		   (NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE),
	   "one request, its length and flags");
	ok(nb.len % NLMSG_ALIGNTO == 0, "aligned");
	a = IFLA_RTA(NLMSG_DATA(h));
	len = (int)IFLA_PAYLOAD(h);
	for (; RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == IFLA_IFNAME && !strcmp(RTA_DATA(a), "abc"))
			seen |= 1;
		if (a->rta_type == (IFLA_LINKINFO | NLA_F_NESTED)) {
			in = RTA_DATA(a);
			if (RTA_OK(in, (int)RTA_PAYLOAD(a)) && in->rta_type == IFLA_INFO_KIND &&
			    !strcmp(RTA_DATA(in), "veth") &&
			    a->rta_len == RTA_LENGTH(RTA_ALIGN(RTA_LENGTH(5))))
				seen |= 2;
		}
		if (a->rta_type == IFLA_MTU && *(uint32_t *)RTA_DATA(a) == 1400)
			seen |= 4;
	}
	ok(seen == 7 && len == 0, "attributes walk back: name, nested kind, mtu (%d)", seen);

	/* a second request in the same batch, and an nfnetlink batch frame */
	dsec_nl_msg(&nb, RTM_GETLINK, 0, &ifi, sizeof(ifi));
	h = (struct nlmsghdr *)(nb.b + nb.msg);
	ok(nb.n == 2 && h->nlmsg_seq == nb.seq0 + 1 && nb.msg + h->nlmsg_len == nb.len,
	   "second request follows, next sequence number");
	dsec_nl_init(&nb);
	dsec_nl_batch(&nb, NFNL_MSG_BATCH_BEGIN);
	h = (struct nlmsghdr *)nb.b;
	ok(nb.n == 0 && h->nlmsg_type == NFNL_MSG_BATCH_BEGIN && !(h->nlmsg_flags & NLM_F_ACK) &&
	       ((struct nfgenmsg *)NLMSG_DATA(h))->res_id == htons(NFNL_SUBSYS_NFTABLES),
	   "batch frame: no ack, nftables subsystem");

	/* the kernel, in a network namespace of this test's own (never the host's): lo exists, a
	 * made-up name does not; a failing request names its step (deleting a link that is not
	 * there, with ENODEV not tolerated) */
	ok(unshare(CLONE_NEWNET) == 0, "own network namespace");
	fd = dsec_nl_socket_in(-1, -1, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, &err);
	ok(fd >= 0, "rtnetlink socket");
	ok(dsec_nl_ifindex(fd, "lo", &err) == 1, "lo is ifindex 1");
	ok(dsec_nl_ifindex(fd, "dsec-no-such", &err) == 0, "a missing link is 0");
	dsec_nl_init(&nb);
	dsec_nl_msg(&nb, RTM_DELLINK, 0, &ifi, sizeof(ifi));
	dsec_nl_str(&nb, IFLA_IFNAME, "dsec-no-such");
	ok(dsec_nl_talk(fd, &nb, "delete", 0, &err) < 0 && err.errnum == ENODEV &&
	       strstr(err.msg, "delete (step 1)"),
	   "an error names the request: %s", err.msg);
	dsec_nl_init(&nb);
	dsec_nl_msg(&nb, RTM_DELLINK, 0, &ifi, sizeof(ifi));
	dsec_nl_str(&nb, IFLA_IFNAME, "dsec-no-such");
	ok(dsec_nl_talk(fd, &nb, "delete", ENODEV, &err) == 0, "a tolerated error is success");
	close(fd);
	return tap_done();
}
