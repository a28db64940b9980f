/* --net nat: a sandbox's own veth behind a dsec bridge, NAT out of the node, an egress
 * allow-list and a bandwidth cap.
 *
 * The node side (bridge, forwarding, nftables) lives in the "node network namespace": the
 * host's own (where dsec-spawn runs) unless $DSEC_NET_NS or the key net_ns of
 * $DSEC_ROOT/node.conf names a namespace file (e.g. /run/netns/NAME), which is how tests and
 * experiments keep away from the host's network configuration. Made once per node, under
 * $DSEC_RUN/net/lock, by the first nat sandbox:
 *
 *   bridge dsec0 (net_bridge), up, address <subnet>.1 (net_subnet, default 10.88.0.0/16);
 *   net.ipv4.ip_forward=1 (in the node namespace only);
 *   nftables (the only libnftables use, text): table inet dsec with a set "allow" of
 *   saddr . daddr . l4proto . dport intervals, a forward chain accepting replies and what the
 *   set allows from the bridge and dropping everything else from or to it (the rest of the
 *   node's traffic passes: policy accept), an input chain dropping everything from the
 *   bridge (sandboxes reach none of the node's own services, DNS included), a postrouting
 *   chain masquerading the subnet; table bridge dsec with a set "src" of port . address,
 *   dropping IPv4 and ARP from a dsv* port with any other source address.
 *
 * Per sandbox (dsec_net_attach, right after its holder starts), no process forked:
 *   an address from the subnet: a lease file $DSEC_RUN/net/leases/<a.b.c.d> holding the
 *   sandbox id, its rate and resolved allow-list, allocated under the lock (reused after
 *   reap); a symlink $DSEC_RUN/sandboxes/<id>/net-addr -> <a.b.c.d> for the teardown;
 *   one rtnetlink batch on the node: a veth pair, dsv<8 hex of the address> on the bridge,
 *   no IPv6 link-local, bridge port "isolated" (no frames between sandboxes), up, its peer
 *   created straight inside the holder's network namespace (/proc/<pid>/ns/net) as eth0;
 *   one batch inside: eth0 without IPv6 link-local, up, address/prefix, default route via
 *   the bridge address, a tbf qdisc (uploads) with --bandwidth;
 *   one nfnetlink batch each for the "src" and "allow" elements; a tbf qdisc on the host
 *   end (downloads) with --bandwidth.
 *
 * Teardown (dsec_net_detach, from dsec_sandbox_destroy): set elements and lease; the veth goes
 * with the sandbox's namespace. What a kill -9 left (a lease whose sandbox state is gone) is
 * found by dsec_net_orphans, which deletes the veth too. One run dir per node network
 * namespace (the leases are the run dir's). */
#ifndef DSEC_NET_H
#define DSEC_NET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "sandbox.h"
#include "state.h"

#define DSEC_NET_ALLOW_MAX 64
#define DSEC_NET_NAME_MAX 253

/* One allow-list entry: an IPv4 prefix (name empty) or a host name resolved at spawn, and a
 * TCP/UDP port (0: every port and protocol). */
struct dsec_net_allow {
	char name[DSEC_NET_NAME_MAX + 1];
	uint32_t addr; /* host byte order */
	uint8_t prefix;
	uint16_t port;
};

struct dsec_net_policy {
	unsigned n;
	struct dsec_net_allow allow[DSEC_NET_ALLOW_MAX];
	uint64_t rate; /* bytes a second each way, 0 = no cap */
};

/* Add "ADDR[/PREFIX][:PORT]", "NAME[:PORT]" or a preset ("pypi") to pol. 0 or -1. */
int dsec_net_allow_parse(const char *s, struct dsec_net_policy *pol, struct dsec_err *err);

/* One entry as text: "a.b.c.d/p[:port]" or "name[:port]" (snprintf-style). */
int dsec_net_allow_text(const struct dsec_net_allow *a, char *buf, size_t n);

/* A bandwidth "N[k|m|g][bit]" (bits a second, ×1000) to bytes a second, 8kbit..100gbit. */
int dsec_net_rate_parse(const char *s, uint64_t *bytes, struct dsec_err *err);

/* pol as text, entries in the order given: "allow=a.b.c.d/p:port,name:port;rate=B" (for pool
 * profiles). Returns the length (snprintf-style). */
int dsec_net_policy_canon(const struct dsec_net_policy *pol, char *buf, size_t n);

/* The reverse of dsec_net_policy_canon (names stay unresolved). 0 or -1. */
int dsec_net_policy_parse(const char *canon, struct dsec_net_policy *pol, struct dsec_err *err);

/* Resolve the names of in into out (IPv4 addresses, each a /32 with the entry's port). With
 * hosts (may be NULL), also an /etc/hosts line "ADDR NAME" per name and address, into hosts
 * (n bytes, NUL-terminated; lines that do not fit are left out). 0 or -1 (a name that does
 * not resolve, too many entries). */
int dsec_net_resolve(const struct dsec_net_policy *in, struct dsec_net_policy *out, char *hosts,
		     size_t n, struct dsec_err *err);

/* The allow-list as JSON strings "a.b.c.d/p[:port]" (new reference). */
json_t *dsec_net_policy_json(const struct dsec_net_policy *pol);

/* The address allocator: a free address in subnet/prefix (host order; network, bridge (.1)
 * and broadcast excluded), claimed by creating dir/<a.b.c.d> holding text (the sandbox id, a
 * newline, its allow-list one entry a line). Scans from the cursor
 * kept in the 4 first bytes of lockfd's file (a file the caller holds locked). 0 or -1
 * (ENOSPC: subnet full). */
int dsec_net_lease(int dirfd, int lockfd, uint32_t subnet, int prefix, const char *text,
		   uint32_t *addr, struct dsec_err *err);

/* Give sandbox sb (holder running, own network namespace) its nat network, policy pol
 * (names unresolved). *info (may be NULL) gets {"addr":…,"gateway":…,"allow":[…],
 * "bandwidth":…} (new reference). On failure what was made is removed. 0 or -1. */
int dsec_net_attach(const struct dsec_paths *p, const struct dsec_sandbox *sb,
		    const struct dsec_net_policy *pol, json_t **info, struct dsec_err *err);

/* Remove sb's network (rules, veth, lease); nothing when it has none. 0 or -1. */
int dsec_net_detach(const struct dsec_paths *p, const struct dsec_sandbox *sb,
		    struct dsec_err *err);

/* What dsec_net_attach's info said, read back from the run dir (a claimed warm sandbox): new
 * reference, or NULL when sb has no nat network. */
json_t *dsec_net_info(const struct dsec_paths *p, const struct dsec_sandbox *sb);

/* Remove the network of every lease whose sandbox has no state dir. Count or -1. */
int dsec_net_orphans(const struct dsec_paths *p, struct dsec_err *err);

/* With no sandbox left in the run dir: remove the node side of --net nat (the bridge and the
 * inet and bridge "dsec" nftables tables) when this run dir made it and neither a lease of it
 * nor a port on the bridge (another run dir's sandbox) is left. The next nat spawn makes it
 * again. net.ipv4.ip_forward stays as it is. 0 or -1. */
int dsec_net_node_cleanup(const struct dsec_paths *p, struct dsec_err *err);

#endif
