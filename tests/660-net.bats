#!/usr/bin/env bats
# --net nat: veth, bridge, NAT, allow-list, bandwidth cap, isolation, teardown.
#
# Never touches the host's network configuration: each test makes a node network namespace
# (DSEC_NET_NS) holding dsec's bridge and rules, an upstream veth from it to an "external"
# namespace with servers on 192.0.2.10 and 192.0.2.11 (TEST-NET-1, inside these namespaces
# only), and removes both in teardown.

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
	NODE=dsec-t-node-$$-$BATS_TEST_NUMBER
	EXT=dsec-t-ext-$$-$BATS_TEST_NUMBER
	HOST_FWD=$(cat /proc/sys/net/ipv4/ip_forward)
	ip netns add "$NODE"
	ip netns add "$EXT"
	ip link add dsup0 netns "$NODE" type veth peer name dsup1 netns "$EXT"
	ip -n "$NODE" addr add 192.0.2.1/24 dev dsup0
	ip -n "$NODE" link set dsup0 up
	ip -n "$NODE" link set lo up
	ip -n "$EXT" addr add 192.0.2.10/24 dev dsup1
	ip -n "$EXT" addr add 192.0.2.11/24 dev dsup1
	ip -n "$EXT" link set dsup1 up
	ip -n "$EXT" link set lo up
	# no route back to the sandboxes' subnet: replies reach them only through the NAT
	export DSEC_NET_NS=/run/netns/$NODE
	WWW=$TESTDIR/www
	mkdir -p "$WWW"
	echo hello >"$WWW/index.html"
	head -c 1500000 /dev/zero >"$WWW/big"
	SERVERS=()
}

serve() { # serve NETNS ADDR:PORT
	ip netns exec "$1" busybox httpd -f -p "$2" -h "$WWW" &
	SERVERS+=($!)
}

teardown() {
	if [ -d "$TESTDIR/run2" ]; then DSEC_RUN=$TESTDIR/run2 dsec-reap --all >/dev/null 2>&1 || true; fi
	dsec_teardown
	local p
	for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null || true; done
	ip netns del "$NODE" 2>/dev/null || true
	ip netns del "$EXT" 2>/dev/null || true
}

# fetch ID HOST PORT [PATH]: bytes of an HTTP GET from inside sandbox ID (0 when dropped).
fetch() {
	dsec-exec "$1" -- sh -c "printf 'GET /${4:-} HTTP/1.0\r\n\r\n' | nc -w 2 $2 $3 2>/dev/null | wc -c"
}

nat_spawn() { # nat_spawn [OPTION]...: ID and ADDR of a new nat sandbox
	run dsec-spawn --image busybox --net nat "$@"
	[ "$status" -eq 0 ]
	ID=$(records | jq -r .id)
	ADDR=$(records | jq -r .nat.addr)
}

host_untouched() {
	[ "$(cat /proc/sys/net/ipv4/ip_forward)" = "$HOST_FWD" ]
	! ip link show dsec0 >/dev/null 2>&1 || false
	! nft list table inet dsec >/dev/null 2>&1 || false
}

@test "net nat: record, eth0 inside, bridge and forwarding in the node namespace only" {
	nat_spawn --allow 192.0.2.10:80
	rec=$(records)
	json_is "$rec" .net nat
	json_has "$rec" '.nat.addr | test("^10\\.88\\.")'
	json_is "$rec" .nat.gateway 10.88.0.1
	json_is "$rec" '.nat.allow | join(",")' "192.0.2.10/32:80"
	json_is "$(sb_json "$ID")" .net nat
	pid=$(sb_pid "$ID")
	nsenter -t "$pid" -n ip -4 addr show eth0 | grep -q "inet $ADDR/16"
	nsenter -t "$pid" -n ip route | grep -q "default via 10.88.0.1 dev eth0"
	ip -n "$NODE" -d link show master dsec0 | grep -q "isolated on"
	[ "$(ip netns exec "$NODE" cat /proc/sys/net/ipv4/ip_forward)" = 1 ]
	ip netns exec "$NODE" nft list table inet dsec | grep -q "masquerade"
	host_untouched
}

@test "net nat: allow-listed address and port reachable through NAT, the rest dropped" {
	serve "$EXT" 192.0.2.10:80
	serve "$EXT" 192.0.2.10:8081
	serve "$EXT" 192.0.2.11:80
	nat_spawn --allow 192.0.2.10:80
	A=$ID
	nat_spawn --allow 192.0.2.11
	B=$ID
	[ "$(fetch "$A" 192.0.2.10 80)" -gt 100 ]
	[ "$(fetch "$A" 192.0.2.10 8081)" -eq 0 ]
	[ "$(fetch "$A" 192.0.2.11 80)" -eq 0 ]
	# an address without a port: every port of it
	[ "$(fetch "$B" 192.0.2.11 80)" -gt 100 ]
	[ "$(fetch "$B" 192.0.2.10 80)" -eq 0 ]
	host_untouched
}

@test "net nat: sandboxes reach neither one another nor the node's own services" {
	serve "$NODE" 8080
	nat_spawn --allow 10.88.0.0/16 --allow 192.0.2.1
	A=$ID
	nat_spawn
	B=$ID
	B_ADDR=$ADDR
	dsec-exec "$B" -- sh -c 'while :; do nc -l -p 9000 -e echo hi; done' </dev/null >/dev/null 2>&1 &
	SERVERS+=($!)
	sleep 0.5
	# the listener works (from inside B) and the node's server works (from the node)
	[ "$(dsec-exec "$B" -- sh -c "nc -w 2 $B_ADDR 9000 </dev/null | wc -c")" -gt 0 ]
	[ "$(printf 'GET / HTTP/1.0\r\n\r\n' | ip netns exec "$NODE" busybox nc -w 2 10.88.0.1 8080 | wc -c)" -gt 100 ]
	# A allows the whole subnet and the node's address, and still gets nowhere
	[ "$(dsec-exec "$A" -- sh -c "nc -w 2 $B_ADDR 9000 </dev/null 2>/dev/null | wc -c")" -eq 0 ]
	[ "$(fetch "$A" 10.88.0.1 8080)" -eq 0 ]
	[ "$(fetch "$A" 192.0.2.1 8080)" -eq 0 ]
}

@test "net nat: --bandwidth caps a download, roughly" {
	serve "$EXT" 192.0.2.10:80
	nat_spawn --allow 192.0.2.10:80 --bandwidth 4mbit
	json_is "$(records)" .nat.bandwidth 4000000
	capped=$ID
	nat_spawn --allow 192.0.2.10:80
	free=$ID
	t0=$EPOCHREALTIME
	[ "$(fetch "$free" 192.0.2.10 80 big)" -gt 1500000 ]
	t1=$EPOCHREALTIME
	[ "$(fetch "$capped" 192.0.2.10 80 big)" -gt 1500000 ]
	t2=$EPOCHREALTIME
	# 1.5 MB at 500 kB/s: about 3 s (less the burst); uncapped well under that
	awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { exit !(c - b >= 1.5 && c - b < 30 && b - a < c - b) }'
	# accounting: the download shows in the sandbox's network bytes
	json_has "$(dsec-ps "$capped")" '.usage.net_rx_bytes > 1500000 and .usage.net_tx_bytes > 0'
}

@test "net nat: names resolve at spawn, in options and spec records; unknown names fail" {
	nat_spawn --allow localhost:80
	json_is "$(records)" '.nat.allow | join(",")' "127.0.0.1/32:80"
	run dsec-spawn --net nat <<<'{"image":"busybox","allow":["localhost:443","192.0.2.0/24"],"bandwidth":"1mbit","task":7}'
	[ "$status" -eq 0 ]
	json_is "$(records)" '.nat.allow | join(",")' "127.0.0.1/32:443,192.0.2.0/24"
	json_is "$(records)" .task 7
	json_is "$(records)" .nat.bandwidth 1000000
	run dsec-spawn --image busybox --net nat --allow no-such-host.invalid:80
	[ "$status" -eq 1 ]
	json_has "$(records)" '.error.msg | test("no-such-host")'
	# nothing of the failed one is left
	[ "$(ls "$DSEC_RUN/net/leases" | wc -l)" -eq 2 ]
}

@test "net nat: names of the allow-list resolve inside, from the sandbox's /etc/hosts" {
	nat_spawn --allow localhost:80 --allow 192.0.2.10:80
	run dsec-exec "$ID" -- sh -c 'cat /etc/hosts; stat -c %u /etc/hosts; echo "10.1.2.3 mine" >>/etc/hosts && tail -n 1 /etc/hosts'
	[ "$status" -eq 0 ]
	# localhost first (the image's lines, or ours where it has no hosts file); one line per
	# allowed name and address; still root's inside
	[[ "${lines[0]}" =~ ^127\.0\.0\.1[[:space:]]+localhost$ ]]
	[ "$(printf '%s\n' "${lines[@]}" | grep -c '^127.0.0.1 localhost$')" -eq 1 ]
	[ "$(printf '%s\n' "${lines[@]}" | grep -cx "127.0.1.1	$ID")" -eq 1 ]
	[ "$(printf '%s\n' "${lines[@]}" | grep -c '192.0.2.10')" -eq 0 ]
	[ "${lines[-2]}" = 0 ]
	[ "${lines[-1]}" = "10.1.2.3 mine" ]
	# the image's layer is untouched
	id2=$(dsec-spawn --image busybox | jq -r .id)
	[ "$(dsec-exec "$id2" -- sh -c 'cat /etc/hosts 2>/dev/null' | grep -c '^127.0.0.1 localhost$\|mine')" -eq 0 ]
}

@test "net nat: resolvers the allow-list names are the sandbox's; commit leaves them out" {
	# without an ADDR:53 entry the image's file stays (busybox has none)
	nat_spawn --allow 192.0.2.10:80
	run dsec-exec "$ID" cat /etc/resolv.conf
	[ "$status" -ne 0 ]
	nat_spawn --allow 192.0.2.10:80 --allow 192.0.2.53:53 --allow 192.0.2.54:53
	run dsec-exec "$ID" sh -c 'cat /etc/resolv.conf; stat -c %u /etc/resolv.conf'
	[ "${lines[1]}" = "nameserver 192.0.2.53" ]
	[ "${lines[2]}" = "nameserver 192.0.2.54" ]
	[ "${#lines[@]}" -eq 4 ]
	[ "${lines[3]}" = 0 ]
	# what dsec wrote is not the sandbox's work; a resolver of its own is
	run dsec-layer commit --name natsnap "$ID"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	run bash -c "dsec-layer export '$(jq -r .layer <<<"$output")' | zstd -dc | tar -tf -"
	[[ "$output" != *resolv.conf* ]] || { echo "$output"; return 1; }
	dsec-exec "$ID" sh -c 'echo "nameserver 192.0.2.99" >/etc/resolv.conf'
	run dsec-layer commit --name natsnap2 "$ID"
	[ "$status" -eq 0 ]
	[ "$(dsec-layer export "$(jq -r .layer <<<"$output")" | zstd -dc | tar -xOf - etc/resolv.conf)" = "nameserver 192.0.2.99" ]
}

@test "net nat: reap removes the sandbox's rules, veth and address; addresses are reused" {
	export DSEC_NET_SUBNET=10.88.0.0/29 # .2 to .6
	for _ in 1 2 3 4 5; do nat_spawn --allow 192.0.2.10:80 --bandwidth 10mbit; done
	run dsec-spawn --image busybox --net nat
	[ "$status" -eq 1 ]
	json_has "$(records)" '.error.msg | test("no free address")'
	victim=$(ls "$DSEC_RUN/sandboxes" | head -1)
	vaddr=$(readlink "$DSEC_RUN/sandboxes/$victim/net-addr")
	# shellcheck disable=SC2086
	hex=$(printf '%02x' ${vaddr//./ })
	ip netns exec "$NODE" nft list set inet dsec allow | grep -q "$vaddr \. 192.0.2.10 \. tcp \. 80"
	tc -n "$NODE" qdisc show dev "dsv$hex" | grep -q "tbf.*rate 10Mbit"
	run dsec-reap "$victim"
	[ "$status" -eq 0 ]
	! ip netns exec "$NODE" nft list set inet dsec allow | grep -q "$vaddr " || false
	[ ! -e "$DSEC_RUN/net/leases/$vaddr" ]
	for _ in $(seq 50); do ip -n "$NODE" link show "dsv$hex" >/dev/null 2>&1 || break; sleep 0.1; done
	! ip -n "$NODE" link show "dsv$hex" >/dev/null 2>&1 || false
	nat_spawn
	[ "$ADDR" = "$vaddr" ]
	run dsec-reap --all
	[ "$status" -eq 0 ]
	[ "$(ls "$DSEC_RUN/net/leases" | wc -l)" -eq 0 ]
	! ip netns exec "$NODE" nft list set inet dsec allow | grep -q "10\.88\." || false
	for _ in $(seq 50); do ip -n "$NODE" link | grep -q dsv || break; sleep 0.1; done
	! ip -n "$NODE" link | grep -q dsv || false
	# the last sandbox gone, the node side goes too: bridge and both tables
	! ip -n "$NODE" link show dsec0 >/dev/null 2>&1 || false
	! ip netns exec "$NODE" nft list table inet dsec >/dev/null 2>&1 || false
	! ip netns exec "$NODE" nft list table bridge dsec >/dev/null 2>&1 || false
	host_untouched
	# and the next nat sandbox makes it again, and reaches out
	serve "$EXT" 192.0.2.10:80
	nat_spawn --allow 192.0.2.10:80
	ip -n "$NODE" link show dsec0 >/dev/null
	for _ in $(seq 30); do [ "$(fetch "$ID" 192.0.2.10 80)" -gt 0 ] && break; sleep 0.1; done
	[ "$(fetch "$ID" 192.0.2.10 80)" -gt 0 ]
	# a port on the bridge keeps it: a sandbox of another run dir (a subnet of its own)
	DSEC_RUN=$TESTDIR/run2 DSEC_NET_SUBNET=10.89.0.0/16 nat_spawn
	other=$ID
	run dsec-reap --all
	[ "$status" -eq 0 ]
	ip -n "$NODE" link show dsec0 >/dev/null
	DSEC_RUN=$TESTDIR/run2 DSEC_NET_SUBNET=10.89.0.0/16 dsec-reap --all >/dev/null
	! ip -n "$NODE" link show dsec0 >/dev/null 2>&1 || false
	[ -n "$other" ]
}

@test "net nat: --reset is refused with an error record; the sandbox and its address stay" {
	nat_spawn
	pid=$(jq -r .holder.pid "$DSEC_RUN/sandboxes/$ID/sandbox.json")
	run dsec-reap --reset "$ID"
	[ "$status" -eq 1 ]
	json_has "$(records)" '.error.msg | test("reset of a --net nat sandbox is not supported")'
	[[ "$output" == *"dsec-reap: error: $ID: reset of a --net nat sandbox"* ]]
	[ "$(jq -r .holder.pid "$DSEC_RUN/sandboxes/$ID/sandbox.json")" = "$pid" ]
	run dsec-exec "$ID" -- ip -4 -o addr show dev eth0
	[ "$status" -eq 0 ]
	[[ "$output" == *"inet $ADDR/"* ]]
}

@test "net nat: after kill -9, dsec-reap --orphans removes rules and leases" {
	nat_spawn --allow 192.0.2.10:80
	dead=$ID
	nat_spawn --allow 192.0.2.11
	lost=$ID
	nat_spawn --allow 192.0.2.12:443 --allow 198.51.100.0/24 --allow 203.0.113.7:8443
	live=$ID
	live_addr=$ADDR
	ip netns exec "$NODE" nft list set inet dsec allow | grep -q "192.0.2.10 \. tcp \. 80"
	kill -9 "$(sb_pid "$dead")"
	# a crash that lost the state dir of a sandbox: only its lease is left to go by
	kill -9 "$(sb_pid "$lost")"
	rm -rf "${DSEC_RUN:?}/sandboxes/$lost"
	run dsec-reap --orphans
	[ "$status" -eq 0 ]
	# the live one keeps its network
	[ "$(ls "$DSEC_RUN/net/leases")" = "$live_addr" ]
	[ "$(ip netns exec "$NODE" nft list set inet dsec allow | grep -c "10\.88\.")" -eq 5 ]
	run dsec-reap "$live"
	[ "$status" -eq 0 ]
	[ "$(ls "$DSEC_RUN/net/leases" | wc -l)" -eq 0 ]
	! ip netns exec "$NODE" nft list set inet dsec allow | grep -q "10\.88\." || false
	for _ in $(seq 50); do ip -n "$NODE" link | grep -q dsv || break; sleep 0.1; done
	! ip -n "$NODE" link | grep -q dsv || false
}

@test "net nat: bad --net, --allow and --bandwidth are usage errors" {
	must_fail dsec-spawn --image busybox --net bridge
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox --net nat --allow 1.2.3.4/33
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox --net nat --allow 'a b:80'
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox --net nat --allow 1.2.3.4:0
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox --net nat --bandwidth 1bit
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox --allow 1.2.3.4
	[ "$status" -eq 2 ]
	[ ! -d "$DSEC_RUN/sandboxes" ] || [ -z "$(ls "$DSEC_RUN/sandboxes")" ]
}

@test "net nat: a warm pool holds nat sandboxes; a claim with the same policy adds nothing" {
	serve "$EXT" 192.0.2.10:80
	run dsec-warm --image busybox -n 2 --net nat --allow 192.0.2.10:80 --bandwidth 10mbit
	[ "$status" -eq 0 ]
	[ "$(records | jq -r .net | sort -u)" = nat ]
	[ "$(ls "$DSEC_RUN/net/leases" | wc -l)" -eq 2 ]
	json_is "$(dsec-warm --list)" .net nat
	# another allow-list: no match, made cold
	nat_spawn --allow 192.0.2.10:81
	json_is "$(records)" .warm false
	# the pool's: claimed, its network already there, nothing more made
	nat_spawn --allow 192.0.2.10:80 --bandwidth 10mbit
	json_is "$(records)" .warm true
	json_is "$(records)" '.nat.allow | join(",")' "192.0.2.10/32:80"
	json_is "$(records)" .nat.bandwidth 10000000
	[ "$(ls "$DSEC_RUN/net/leases" | wc -l)" -eq 3 ]
	[ "$(fetch "$ID" 192.0.2.10 80)" -gt 100 ]
	json_is "$(dsec-ps "$ID")" .net nat
	run dsec-warm --image busybox --net nat --allow 192.0.2.10:80 --bandwidth 10mbit --drain
	[ "$status" -eq 0 ]
	[ "$(ls "$DSEC_RUN/net/leases" | wc -l)" -eq 2 ]
}

@test "net nat: a port speaks only with its own address (ARP and IPv4 spoofing dropped)" {
	nat_spawn
	A=$ID
	A_ADDR=$ADDR
	nat_spawn
	B_ADDR=$ADDR
	pid=$(sb_pid "$A")
	# raw sockets need CAP_NET_RAW, which sandboxes lack: ask from the host, in A's namespace
	nsenter -t "$pid" -n busybox arping -q -I eth0 -s "$A_ADDR" -c 1 -w 2 10.88.0.1
	! nsenter -t "$pid" -n busybox arping -q -I eth0 -s "$B_ADDR" -c 1 -w 2 10.88.0.1 || false
	! nsenter -t "$pid" -n busybox arping -q -I eth0 -s 10.88.0.99 -c 1 -w 2 10.88.0.1 || false
}

@test "net nat: spec records: allow without net nat is an error record, others go on" {
	run dsec-spawn <<'EOF2'
{"image":"busybox","allow":["192.0.2.10:80"],"n":1}
{"image":"busybox","net":"nat","allow":["192.0.2.10:80"],"n":2}
{"image":"busybox","net":"nat","allow":["bad rule"],"n":3}
EOF2
	[ "$status" -eq 1 ]
	[ "$(records | wc -l)" -eq 3 ]
	json_has "$(records | sed -n 1p)" '.error.msg | test("needs net nat")'
	json_is "$(records | sed -n 2p)" .net nat
	json_is "$(records | sed -n 2p)" .n 2
	json_has "$(records | sed -n 3p)" '.error.msg | test("bad rule")'
}
