#!/usr/bin/env bats
# Requests, limits, classes, node admission, live resize and accounting (issue 6).

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
}

# cg_file ID CONTROLLER FILE: a cgroup file of sandbox ID (v1: that controller's dir; v2: the one)
cg_file() {
	local dir
	dir=$(jq -r --arg c "$2" '.cgroup.path // .cgroup.paths[$c]' "$DSEC_RUN/sandboxes/$1/sandbox.json")
	cat "$dir/$3"
}

v1() { [ "$(jq -r .cgroup.version "$DSEC_RUN/sandboxes/$1/sandbox.json")" = 1 ]; }

@test "resources: requests and class in the record, the state and the cgroup" {
	spawn_one --cpus 2 --cpu-request 0.5 --memory 256M --memory-request 64M
	json_is "$REC" .requests.cpus 0.5
	json_is "$REC" .requests.memory 67108864
	json_is "$REC" .class ls
	json_is "$(sb_json "$ID")" .requests.cpus 0.5
	if v1 "$ID"; then
		[ "$(cg_file "$ID" cpu cpu.shares)" = 512 ]
		[ "$(cg_file "$ID" memory memory.soft_limit_in_bytes)" = 67108864 ]
		[ "$(cg_file "$ID" cpu cpu.cfs_quota_us)" = 200000 ]
	else
		[ "$(cg_file "$ID" cpu memory.low)" = 67108864 ]
	fi
	must_fail dsec-spawn --image busybox --cpus 0.5 --cpu-request 1
	[[ "$output" == *"above the cpus limit"* ]]
	must_fail dsec-spawn --image busybox --class nice
	[ "$status" -eq 2 ]
}

@test "resources: best-effort: idle cgroup, SCHED_IDLE holder and commands, high OOM score" {
	spawn_one --class be
	json_is "$REC" .class be
	[ "$(cg_file "$ID" cpu cpu.idle)" = 1 ]
	v1 "$ID" && [ "$(cg_file "$ID" memory memory.soft_limit_in_bytes)" = 0 ]
	chrt -p "$(sb_pid "$ID")" | grep -q SCHED_IDLE
	run dsec-exec "$ID" -- sh -c 'grep policy /proc/self/sched; cat /proc/self/oom_score_adj'
	[ "$status" -eq 0 ]
	[[ "$output" =~ policy\ +:\ +5 ]] # SCHED_IDLE
	[[ "$output" == *500* ]]
	# a latency-sensitive one is left alone
	spawn_one
	run dsec-exec "$ID" -- sh -c 'grep policy /proc/self/sched; cat /proc/self/oom_score_adj'
	[[ "$output" =~ policy\ +:\ +0 ]]
}

@test "resources: best-effort: the command cannot lower its OOM score again (needs CAP_SYS_RESOURCE)" {
	local eff
	eff=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
	# the kernel pins the floor only for a writer holding it; some VMs' root does not
	[ $((0x$eff >> 24 & 1)) -eq 1 ] || skip "no CAP_SYS_RESOURCE here (CapEff $eff)"
	spawn_one --class be
	for mode in 1 0; do
		run env DSEC_EXEC_FAST=$mode dsec-exec "$ID" -- sh -c 'echo 0 >/proc/self/oom_score_adj; cat /proc/self/oom_score_adj'
		[[ "$output" == *500 ]] || { echo "fast=$mode: $output"; return 1; }
	done
}

@test "resources: every process starts with 1024 descriptors, soft and hard, whatever the caller's" {
	local mode out
	spawn_one
	# the holder (the sandbox's pid 1), started by a caller with many more
	[ "$(dsec-exec "$ID" sh -c "grep '^Max open files' /proc/1/limits" | awk '{print $4, $5}')" = "1024 1024" ]
	for mode in 1 0; do
		# a caller with more (both limits lowered), and one with a lower soft limit (raised)
		out=$(DSEC_EXEC_FAST=$mode prlimit --nofile=4096:8192 dsec-exec "$ID" sh -c 'ulimit -Sn; ulimit -Hn')
		[ "$out" = "1024
1024" ] || { echo "fast=$mode, caller 4096:8192: $out"; return 1; }
		out=$(DSEC_EXEC_FAST=$mode prlimit --nofile=256:2048 dsec-exec "$ID" sh -c 'ulimit -Sn; ulimit -Hn')
		[ "$out" = "1024
1024" ] || { echo "fast=$mode, caller 256:2048: $out"; return 1; }
		# root inside cannot raise it: the limit binds the whole sandbox
		run env DSEC_EXEC_FAST=$mode dsec-exec "$ID" sh -c 'ulimit -n 4096'
		[ "$status" -ne 0 ] || { echo "fast=$mode: raised to 4096"; return 1; }
	done
	# records too
	out=$(printf '{"id":"%s"}\n' "$ID" | prlimit --nofile=4096:8192 dsec-exec -- sh -c 'ulimit -Hn' | jq -r .exec.stdout)
	[ "$out" = 1024 ] || { echo "record: $out"; return 1; }
}

@test "resources: --nofile N sets another descriptor limit: record, holder, both exec paths, spec records, claims" {
	local mode id
	spawn_one --nofile 4096
	json_is "$REC" .limits.nofile 4096
	[ "$(dsec-exec "$ID" sh -c "grep '^Max open files' /proc/1/limits" | awk '{print $4, $5}')" = "4096 4096" ]
	for mode in 1 0; do
		[ "$(DSEC_EXEC_FAST=$mode dsec-exec "$ID" sh -c 'ulimit -Sn; ulimit -Hn' | tr '\n' ' ')" = "4096 4096 " ]
	done
	# the default shows in the record too
	spawn_one
	json_is "$REC" .limits.nofile 1024
	# a spec record's key; out of range is a usage error, and --resize does not take it
	run sh -c 'echo "{\"image\":\"busybox\",\"nofile\":100}" | dsec-spawn'
	[ "$status" -eq 0 ]
	id=$(records | jq -r .id)
	[ "$(dsec-exec "$id" sh -c 'ulimit -Hn')" = 100 ]
	must_fail dsec-spawn --image busybox --nofile 10
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox --nofile 2000000
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --resize "$ID" --nofile 2048
	[ "$status" -eq 2 ]
	# a claim from a warm pool (whose profile has none) takes the request's
	dsec-warm --image busybox --count 1 >/dev/null
	run dsec-spawn --image busybox --nofile 2000
	[ "$status" -eq 0 ]
	json_is "$output" .warm true
	id=$(records | jq -r .id)
	for mode in 1 0; do
		[ "$(DSEC_EXEC_FAST=$mode dsec-exec "$id" sh -c 'ulimit -Hn')" = 2000 ] || { echo "claim, fast=$mode"; return 1; }
	done
}

@test "resources: socket buffers count against the memory limit (v1: a TCP limit of the same size, within a share of the node's)" {
	spawn_one --memory 64M
	v1 "$ID" || skip "cgroup v2 charges socket buffers to memory.max itself"
	[ "$(cg_file "$ID" memory memory.kmem.tcp.limit_in_bytes)" = 67108864 ]
	dsec-exec cp "$PROBE" "$ID:/bin/probe"
	# unread data on 64 loopback connections: about 240 MiB where nothing charges it
	run dsec-exec "$ID" probe tcp-fill 0
	[ "$status" -eq 0 ] && [ "$output" -le 72 ] || { echo "queued: $output MiB ($status)"; return 1; }
	# a resize moves it with the memory limit, but never past a sixteenth of the node's TCP
	# memory before pressure (tcp_mem[0]), which counts every sandbox's buffers and the
	# host's own: a few sandboxes of 2G would reach it
	local low cap
	read -r low _ </proc/sys/net/ipv4/tcp_mem
	cap=$((low * $(getconf PAGESIZE) / 16 / $(getconf PAGESIZE) * $(getconf PAGESIZE)))
	[ "$cap" -ge $((16 << 20)) ] || cap=$((16 << 20))
	dsec-spawn --resize "$ID" --memory 32M >/dev/null
	[ "$(cg_file "$ID" memory memory.kmem.tcp.limit_in_bytes)" = $((cap < 33554432 ? cap : 33554432)) ]
	[ "$cap" -lt $((2 << 30)) ] || skip "tcp_mem[0] / 16 is 2G or more here"
	dsec-spawn --resize "$ID" --memory 2G >/dev/null
	[ "$(cg_file "$ID" memory memory.kmem.tcp.limit_in_bytes)" = "$cap" ]
	run dsec-exec "$ID" probe tcp-fill 0
	[ "$status" -eq 0 ] && [ "$output" -le $(((cap >> 20) + 8)) ] || {
		echo "queued: $output MiB, cap $((cap >> 20)) MiB ($status)"
		return 1
	}
	local S
	S=$(dsec-spawn --image busybox --memory 3G | jq -r .id)
	[ "$(cg_file "$S" memory memory.kmem.tcp.limit_in_bytes)" = "$cap" ]
	dsec-reap "$S" >/dev/null
}

@test "node pids: a run's sandboxes together stay under node.conf's pids, else pid_max less the host's share" {
	local parent max
	spawn_one
	parent=$(dirname "$(jq -r '.cgroup.path // .cgroup.paths.pids' "$DSEC_RUN/sandboxes/$ID/sandbox.json")")
	read -r max </proc/sys/kernel/pid_max
	[ "$(cat "$parent/pids.max")" = $((max - (max / 8 > 1024 ? max / 8 : 1024))) ]
	printf 'pids = 40\n' >"$DSEC_ROOT/node.conf"
	spawn_one --pids 100
	local A=$ID
	spawn_one --pids 100
	local B=$ID
	[ "$(cat "$parent/pids.max")" = 40 ]
	dsec-exec cp "$PROBE" "$A:/bin/probe"
	dsec-exec cp "$PROBE" "$B:/bin/probe"
	# 21 tasks left running in A (10 sleepers, each with a child, and the probe)
	dsec-exec "$A" sh -c '/bin/probe sleepers 10 >/dev/null 2>&1 &'
	local i
	for i in $(seq 50); do
		[ "$(cg_file "$A" pids pids.current)" -ge 22 ] && break
		sleep 0.1
	done
	# B's own limit is 100, but the run has 40 in all: A's tasks and the holders count
	run dsec-exec "$B" probe forks 30
	[[ "$output" =~ forked=([0-9]+)\ err=EAGAIN ]] || { echo "B: $output"; return 1; }
	[ "${BASH_REMATCH[1]}" -lt 20 ]
	# control: with A gone, the same forks all succeed
	dsec-reap "$A" >/dev/null
	run dsec-exec "$B" probe forks 30
	[ "$output" = "forked=30 err=none" ]
	rm "$DSEC_ROOT/node.conf"
}

@test "admission: a full node refuses with an error record, room comes back when one goes" {
	printf 'cpu = 1\ncpu_ratio = 1.5   # 1.5 CPUs of requests\n' >"$DSEC_ROOT/node.conf"
	spawn_one --cpu-request 1
	first=$ID
	must_fail dsec-spawn --image busybox --cpu-request 1
	[ "$status" -eq 1 ]
	json_is "$(records)" .error.errno 28
	[[ "$(records)" == *"node full: cpu requests 1 + 1 would pass capacity 1 x ratio 1.5"* ]]
	# a sandbox without requests costs nothing
	spawn_one
	run dsec-ps --node
	json_is "$(records)" .cpu.requested 1
	json_is "$(records)" .cpu.allowed 1.5
	dsec-reap "$first" >/dev/null
	spawn_one --cpu-request 1
	# a holder killed behind dsec's back frees its requests too
	kill -9 "$(sb_pid "$ID")"
	sleep 0.2
	spawn_one --cpu-request 1
}

@test "admission: 16 concurrent dsec-spawns never pass capacity x ratio" {
	printf 'cpu = 2\ncpu_ratio = 1\n' >"$DSEC_ROOT/node.conf"
	for i in $(seq 16); do
		dsec-spawn --image busybox --cpus 0.25 --cpu-request 0.25 >"$TESTDIR/out.$i" 2>/dev/null &
	done
	wait
	ok=$(cat "$TESTDIR"/out.* | jq -s '[.[] | select(.id and (.error | not))] | length')
	full=$(cat "$TESTDIR"/out.* | jq -s '[.[] | select(.error.errno == 28)] | length')
	echo "admitted $ok, refused $full" >&2
	[ "$ok" -eq 8 ]
	[ "$full" -eq 8 ]
	[ "$(ls "$DSEC_RUN/sandboxes" | wc -l)" -eq 8 ]
	run dsec-ps --node
	json_is "$(records)" .cpu.requested 2
}

@test "admission: --wait queues until there is room, --wait=D gives up after D" {
	printf 'cpu = 1\ncpu_ratio = 1\n' >"$DSEC_ROOT/node.conf"
	spawn_one --cpu-request 1
	run dsec-spawn --image busybox --cpu-request 0.5 --wait=300ms
	[ "$status" -eq 1 ]
	json_is "$(records)" .error.errno 28
	dsec-spawn --image busybox --cpu-request 0.5 --wait >"$TESTDIR/waited" &
	sleep 0.3
	[ ! -s "$TESTDIR/waited" ]
	dsec-reap "$ID" >/dev/null
	wait $!
	json_is "$(cat "$TESTDIR/waited")" .requests.cpus 0.5
}

@test "admission: warm pools count, a bad node.conf is a clear error" {
	printf 'memory = 1G\nmemory_ratio = 1\n' >"$DSEC_ROOT/node.conf"
	run dsec-warm --image busybox --count 3 --memory-request 400M -j 1
	[ "$status" -eq 1 ]
	[ "$(records | wc -l)" -eq 2 ]
	[[ "$output" == *"node full: memory requests"* ]]
	# 800M of 1G requested by the ready ones: no room for a cold 300M (another --disk)
	must_fail dsec-spawn --image busybox --disk 32M --memory-request 300M
	json_is "$(records)" .error.errno 28
	# a claim that asks for less than the pool's requests gives the rest back
	claimed=$(dsec-spawn --image busybox --memory-request 100M --class be)
	json_is "$claimed" .warm true
	json_is "$claimed" .class be
	json_is "$(dsec-ps "$(jq -r .id <<<"$claimed")")" .requests.memory 104857600
	spawn_one --disk 32M --memory-request 300M
	printf 'cpu_ratio = lots\n' >"$DSEC_ROOT/node.conf"
	must_fail dsec-spawn --image busybox --cpu-request 0.1
	[[ "$output" == *"node.conf:1: cpu_ratio 'lots'"* ]]
}

@test "resize: a new memory limit is enforced at once on a live sandbox, in under 10 ms" {
	spawn_one --memory 256M
	run dsec-exec "$ID" -- dd if=/dev/zero of=/dev/null bs=64M count=1
	[ "$status" -eq 0 ]
	run dsec-spawn --resize "$ID" --memory 32M
	[ "$status" -eq 0 ]
	json_is "$(records)" .limits.memory 33554432
	json_has "$(records)" '.resize_us < 10000'
	run dsec-exec "$ID" -- dd if=/dev/zero of=/dev/null bs=64M count=1
	[ "$status" -eq 137 ]
	json_is "$(sb_json "$ID")" .limits.memory 33554432
	# and back up, the same holder all along
	pid=$(sb_pid "$ID")
	dsec-spawn --resize "$ID" --memory 256M >/dev/null
	run dsec-exec "$ID" -- dd if=/dev/zero of=/dev/null bs=64M count=1
	[ "$status" -eq 0 ]
	[ "$(sb_pid "$ID")" = "$pid" ]
}

@test "resize: disk, cpus, class and requests from records; admission and bad input" {
	printf 'cpu = 1\ncpu_ratio = 1\n' >"$DSEC_ROOT/node.conf"
	spawn_one --disk 16M
	run sh -c "printf '%s\n' '$REC' | dsec-spawn --resize --disk 64M --class be --cpus 0.5 --cpu-request 0.5"
	[ "$status" -eq 0 ]
	rec=$(records)
	json_is "$rec" .id "$ID"
	json_is "$rec" .limits.disk 67108864
	json_is "$rec" .class be
	[ "$(dsec-exec "$ID" -- df -k / | awk 'NR == 2 { print $2 }')" = 65536 ]
	chrt -p "$(sb_pid "$ID")" | grep -q SCHED_IDLE
	v1 "$ID" && [ "$(cg_file "$ID" cpu cpu.cfs_quota_us)" = 50000 ]
	# a record's own keys, and the options over them
	run sh -c "echo '{\"id\":\"$ID\",\"cpu_request\":0.25,\"class\":\"ls\"}' | dsec-spawn --resize --cpus 0.75"
	json_is "$(records)" .requests.cpus 0.25
	json_is "$(records)" .class ls
	json_is "$(records)" .limits.cpus 0.75
	spawn_one --cpu-request 0.5
	must_fail dsec-spawn --resize "$ID" --cpu-request 1 --cpus 1
	json_is "$(records)" .error.errno 28
	json_is "$(sb_json "$ID")" .requests.cpus 0.5
	# a tmpfs does not shrink below what is written in it
	dsec-exec "$ID" -- dd if=/dev/zero of=/tmp/f bs=1M count=4 2>/dev/null
	must_fail dsec-spawn --resize "$ID" --disk 2M --memory 64M
	[[ "$output" == *"resize tmpfs"* ]]
	json_is "$(sb_json "$ID")" .limits.disk 1073741824
	must_fail dsec-spawn --resize sb-000000000000 --memory 64M
	json_has "$(records)" '.error.errno == 2'
	must_fail dsec-spawn --resize "$ID"
	[[ "$output" == *"nothing to change"* ]]
	run dsec-spawn --resize "$ID" --ttl 5m
	[ "$status" -eq 2 ]
	[[ "$output" == *"--resize changes resources only, not --ttl"* ]]
}

@test "accounting: usage in dsec-ps and in every dsec-exec result" {
	spawn_one
	run sh -c "echo '{\"id\":\"$ID\"}' | dsec-exec -- sh -c 'i=0; while [ \$i -lt 20000 ]; do i=\$((i+1)); done; dd if=/dev/zero of=/dev/null bs=8M count=1 2>/dev/null'"
	[ "$status" -eq 0 ]
	rec=$(records)
	json_has "$rec" '.exec.usage.cpu_us > 0 and .exec.usage.memory_peak >= 8388608'
	json_has "$rec" '.exec.usage | has("io_read_bytes") and has("io_write_bytes") and has("pids")'
	# --net none: loopback is not counted, nothing else exists
	json_has "$rec" '.exec.usage.net_rx_bytes == 0 and .exec.usage.net_tx_bytes == 0'
	run dsec-ps "$ID"
	json_has "$(records)" '.usage.cpu_us > 0 and .usage.memory_peak >= 8388608'
	json_is "$(records)" .class ls
	json_has "$(records)" '.requests.cpus == 0 and .limits.cpus == 1'
}

@test "resources: io limits on the store's disk, a blkio cgroup only then (v1), removed by reap" {
	spawn_one --io-bps 1M --io-iops 100
	json_is "$REC" .limits.io_bps 1048576
	dev=$(jq -r .limits.io_device <<<"$REC")
	[[ "$dev" =~ ^[0-9]+:[0-9]+$ ]]
	if v1 "$ID"; then
		[ "$(cg_file "$ID" blkio blkio.throttle.read_bps_device)" = "$dev 1048576" ]
		[ "$(cg_file "$ID" blkio blkio.throttle.write_iops_device)" = "$dev 100" ]
		blk=$(jq -r .cgroup.paths.blkio "$DSEC_RUN/sandboxes/$ID/sandbox.json")
		[ -d "$blk" ]
		run dsec-ps "$ID"
		json_has "$(records)" '.usage.io_read_bytes >= 0'
		dsec-reap "$ID" >/dev/null
		[ ! -d "$blk" ]
		# without io settings: no blkio cgroup, io usage unknown
		spawn_one
		json_is "$(sb_json "$ID")" .cgroup.paths.blkio null
		run dsec-ps "$ID"
		json_is "$(records)" .usage.io_read_bytes null
	else
		grep -q "^$dev rbps=1048576 wbps=1048576 riops=100 wiops=100" \
			"$(jq -r .cgroup.path "$DSEC_RUN/sandboxes/$ID/sandbox.json")/io.max"
	fi
	printf 'io_device = none\n' >"$DSEC_ROOT/node.conf"
	must_fail dsec-spawn --image busybox --io-bps 1M
	[[ "$output" == *"no block device known"* ]]
}
