/* Netlink requests without a library: a message builder and a send-and-ack loop for
 * rtnetlink (links, addresses, routes, qdiscs) and nfnetlink batches (nftables set elements),
 * as net.c needs them per sandbox. No allocation: a request lives in one struct dsec_nl. */
#ifndef DSEC_NETLINK_H
#define DSEC_NETLINK_H

#include <linux/netlink.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct dsec_nl {
	char b[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	size_t len, msg; /* total; offset of the message being built */
	unsigned n;
	uint32_t seq0;
};

/* Start a batch of requests in nb (a fresh sequence range). */
void dsec_nl_init(struct dsec_nl *nb);

/* Append a request of type with flags (NLM_F_REQUEST | NLM_F_ACK added) and its fixed header
 * (ifinfomsg, ifaddrmsg, rtmsg, tcmsg, nfgenmsg). Attributes then go into it. */
void dsec_nl_msg(struct dsec_nl *nb, int type, int flags, const void *hdr, size_t hlen);

/* nfnetlink NFNL_MSG_BATCH_BEGIN/END for the nftables subsystem (no ack asked). */
void dsec_nl_batch(struct dsec_nl *nb, int type);

/* Raw bytes into the current request (4-byte aligned), and attributes. */
void dsec_nl_put(struct dsec_nl *nb, const void *data, size_t len);
void dsec_nl_attr(struct dsec_nl *nb, int type, const void *data, size_t len);
void dsec_nl_str(struct dsec_nl *nb, int type, const char *s);
void dsec_nl_u32(struct dsec_nl *nb, int type, uint32_t v);
/* A nested attribute (NLA_F_NESTED): returns its offset for dsec_nl_nest_end. */
size_t dsec_nl_nest(struct dsec_nl *nb, int type);
void dsec_nl_nest_end(struct dsec_nl *nb, size_t at);

/* RTM_NEWADDR: addr/prefix (host order) on ifindex. */
void dsec_nl_addr(struct dsec_nl *nb, int ifindex, uint32_t addr, int prefix);
/* RTM_NEWQDISC: a root tbf on ifindex, rate bytes a second, a 50 ms burst (at least 32 KiB),
 * 100 ms of queue. */
void dsec_nl_tbf(struct dsec_nl *nb, int ifindex, uint64_t rate);
/* IFLA_AF_SPEC: no IPv6 link-local address on the link (into an RTM_NEWLINK on a link that is
 * not up yet). */
void dsec_nl_no_ipv6_ll(struct dsec_nl *nb);

/* Send every request of nb on fd and read one ack per request. An error equal to ok_errno is
 * no failure (ENODEV deleting what may be gone). 0, or -1 with the first error, naming what
 * and the request's place in the batch. */
int dsec_nl_talk(int fd, struct dsec_nl *nb, const char *what, int ok_errno, struct dsec_err *err);

/* The ifindex of link name on fd's namespace, 0 when there is none, -1 on error. */
int dsec_nl_ifindex(int fd, const char *name, struct dsec_err *err);

/* How many links have master as their master (the ports of a bridge), leaving out those
 * skip(name, ctx) says to (skip may be NULL); -1 on error. */
int dsec_nl_ports(int fd, int master, int (*skip)(const char *name, void *ctx), void *ctx,
		  struct dsec_err *err);

/* A socket (O_CLOEXEC) made in network namespace nsfd (-1: the current one); selfns is the
 * namespace to return to. Aborts when it cannot return (it would go on in the wrong one). */
int dsec_nl_socket_in(int nsfd, int selfns, int domain, int type, int proto, struct dsec_err *err);

#endif
