#!/usr/bin/env bats
# dsec-spawn: records, isolation, limits. Looks into sandboxes from the host (nsenter), so it
# does not depend on dsec-exec.

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
}

@test "spawn: one record with the documented fields and defaults" {
	run dsec-spawn --image busybox
	[ "$status" -eq 0 ]
	rec=$(records)
	[ "$(printf '%s\n' "$rec" | wc -l)" -eq 1 ]
	json_has "$rec" '.id | test("^sb-[0-9a-f]{12}$")'
	json_is "$rec" .image busybox
	json_is "$rec" .warm false
	json_is "$rec" .node "$(hostname)"
	json_has "$rec" '.spawn_us > 0'
	json_is "$rec" '.limits | [.cpus, .memory, .pids, .disk] | map(tostring) | join(" ")' \
		"1 1073741824 512 1073741824"
	json_is "$rec" .ttl 3600
	json_is "$rec" .net none
	id=$(jq -r .id <<<"$rec")
	[ -f "$DSEC_RUN/sandboxes/$id/sandbox.json" ]
	[ ! -e "$DSEC_RUN/sandboxes/$id/pending" ]
	json_is "$(sb_json "$id")" .image busybox
	kill -0 "$(sb_pid "$id")"
}

@test "spawn: -n 5 gives 5 distinct sandboxes, each its own holder" {
	run dsec-spawn --image busybox -n 5
	[ "$status" -eq 0 ]
	[ "$(records | jq -r .id | sort -u | wc -l)" -eq 5 ]
	[ "$(records | jq -r .pid | sort -u | wc -l)" -eq 5 ]
}

@test "spawn: a SIGKILL to the caller's process group spares the sandboxes it was handed" {
	f=$TESTDIR/recs
	setsid bash -c 'dsec-spawn --image busybox -n 2 >"$1"; exec sleep 60' x "$f" &
	leader=$!
	for _ in $(seq 100); do [ "$(wc -l <"$f" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
	# the whole group, as timeout -s KILL or kill -9 -PGID does
	kill -KILL -- "-$leader"
	wait "$leader" || true
	[ "$(wc -l <"$f")" -eq 2 ]
	for id in $(jq -r .id "$f"); do
		pid=$(sb_pid "$id")
		[ "$(ps -o sid= -p "$pid")" -eq "$pid" ]
		[ "$(sb_run "$id" cat /proc/1/comm)" = dsec-holder ]
	done
}

@test "spawn: inside, pid 1 is the holder and no host process is visible" {
	spawn_one
	run sb_run "$ID" sh -c 'cat /proc/1/comm; ls -d /proc/[0-9]* | wc -l'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = dsec-holder ]
	# the holder, sh, ls (and maybe wc): nothing of the host
	[ "${lines[1]}" -le 4 ]
	# and the holder's own view of pid 1 is itself
	[ "$(readlink "/proc/$(sb_pid "$ID")/ns/pid")" != "$(readlink /proc/self/ns/pid)" ]
}

@test "spawn: the holder reaps orphans reparented to it, and stays small" {
	spawn_one
	pid=$(sb_pid "$ID")
	sb_run "$ID" sh -c 'for i in 1 2 3; do sleep 0.2 & done; exit 0'
	sleep 1
	# the sandbox's own /proc lists its processes: none may be a zombie
	run sb_run "$ID" sh -c 'cat /proc/[0-9]*/stat'
	[ "$status" -eq 0 ]
	zombies=$(printf '%s\n' "$output" | awk '$3 == "Z"' | wc -l)
	[ "$zombies" -eq 0 ]
	kill -0 "$pid"
	# an idle sandbox costs little: the holder's own memory (the budget is 200 KiB in all)
	rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
	pte=$(awk '/^VmPTE/ { print $2 }' "/proc/$pid/status")
	echo "holder rss $rss KiB, page tables $pte KiB" >&2
	[ $((rss + pte)) -le 100 ]
}

@test "spawn: hostname is the id by default, --hostname sets it" {
	spawn_one
	run sb_run "$ID" hostname
	[ "$output" = "$ID" ]
	spawn_one --hostname box-1
	run sb_run "$ID" hostname
	[ "$output" = box-1 ]
	[ "$(hostname)" != box-1 ]
	# /etc/hostname says so too (made here: the image has none), root's inside
	[ "$(sb_run "$ID" cat /etc/hostname)" = box-1 ]
	[ "$(sb_run "$ID" stat -c '%u:%g %a' /etc/hostname)" = "0:0 644" ]
	# an image's own is replaced in the sandbox, its layer untouched; a link there stays
	mkdir -p "$TESTDIR/app/etc"
	echo buildhost >"$TESTDIR/app/etc/hostname"
	make_dir_layer_image withname "$TESTDIR/app"
	spawn_one --image withname --hostname box-2
	[ "$(sb_run "$ID" cat /etc/hostname)" = box-2 ]
	[ "$(cat "$DSEC_ROOT"/layers/*/tree/etc/hostname)" = buildhost ]
	rm "$TESTDIR/app/etc/hostname"
	ln -s /elsewhere "$TESTDIR/app/etc/hostname"
	make_dir_layer_image linkname "$TESTDIR/app"
	spawn_one --image linkname --hostname box-3
	[ "$(sb_run "$ID" readlink /etc/hostname)" = /elsewhere ]
}

@test "spawn: the host name resolves inside; --net host gets the node's resolver" {
	# an image without /etc/hosts gets one, root's inside
	spawn_one --hostname box-1
	run sb_run "$ID" cat /etc/hosts
	[ "$output" = "$(printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tbox-1')" ]
	run sb_run "$ID" stat -c '%u:%g %a' /etc/hosts
	[ "$output" = "0:0 644" ]
	# resolved by libc (busybox's ping then wants CAP_NET_RAW, which no sandbox has)
	run sb_run "$ID" sh -c 'ping -c 1 -W 1 box-1 2>&1 | head -n 1'
	[[ "$output" == "PING box-1 (127.0.1.1)"* ]]
	# --net none keeps the image's resolv.conf (this one has none); --net host gets the node's
	run sb_run "$ID" cat /etc/resolv.conf
	[ "$status" -ne 0 ]
	spawn_one --net host
	[ "$(sb_run "$ID" cat /etc/resolv.conf)" = "$(cat /etc/resolv.conf)" ]
	# the image's own hosts file gets the line, its layer is untouched; a name it already
	# has is left as it is
	mkdir -p "$TESTDIR/app/etc"
	printf '127.0.0.1 localhost\n10.1.1.1 box-3 # mine' >"$TESTDIR/app/etc/hosts"
	make_dir_layer_image withhosts "$TESTDIR/app"
	spawn_one --image withhosts --hostname box-2
	run sb_run "$ID" cat /etc/hosts
	[ "$output" = "$(printf '127.0.0.1 localhost\n10.1.1.1 box-3 # mine\n127.0.1.1\tbox-2')" ]
	spawn_one --image withhosts --hostname box-3
	run sb_run "$ID" cat /etc/hosts
	[ "$output" = "$(cat "$TESTDIR/app/etc/hosts")" ]
	[ "$(grep -c 127.0.1.1 "$DSEC_ROOT"/layers/*/tree/etc/hosts)" = 0 ]
	# a hosts file longer than what is read of it (8 KiB, ending in a newline), without a last
	# newline of its own
	{
		printf '#%.0s' $(seq 8191)
		echo
		for i in $(seq 800); do printf '10.2.%d.%d host-%d\n' $((i / 250)) $((i % 250)) "$i"; done
	} | head -c -1 >"$TESTDIR/app/etc/hosts"
	make_dir_layer_image bighosts "$TESTDIR/app"
	spawn_one --image bighosts --hostname box-4
	run sb_run "$ID" tail -n 2 /etc/hosts
	[ "${lines[0]}" = "10.2.3.50 host-800" ] && [ "${lines[1]}" = "127.0.1.1	box-4" ] ||
		{ echo "$output"; return 1; }
	# a link at /etc/hosts is the image's choice and stays; one at resolv.conf would lead to
	# the image's resolver and is replaced
	rm "$TESTDIR/app/etc/hosts"
	ln -s hosts.real "$TESTDIR/app/etc/hosts"
	echo "10.9.9.9 elsewhere" >"$TESTDIR/app/etc/hosts.real"
	ln -s ../run/resolv.conf "$TESTDIR/app/etc/resolv.conf"
	make_dir_layer_image linked "$TESTDIR/app"
	spawn_one --image linked --net host
	run sb_run "$ID" sh -c 'readlink /etc/hosts; cat /etc/hosts.real; [ -L /etc/resolv.conf ] || cat /etc/resolv.conf'
	[ "${lines[0]}" = hosts.real ]
	[ "${lines[1]}" = "10.9.9.9 elsewhere" ]
	[ "${lines[2]}" = "$(head -n 1 /etc/resolv.conf)" ]
	# fifos there (a dir-format layer keeps them) hang nothing and stay the image's
	rm "$TESTDIR/app/etc/hosts" "$TESTDIR/app/etc/resolv.conf"
	mkfifo "$TESTDIR/app/etc/hosts" "$TESTDIR/app/etc/resolv.conf"
	make_dir_layer_image fifos "$TESTDIR/app"
	run timeout 20 dsec-spawn --image fifos --net host
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	ID=$(jq -r .id <<<"$output")
	run sb_run "$ID" sh -c '[ -p /etc/hosts ] && [ -p /etc/resolv.conf ] && echo fifos'
	[ "$output" = fifos ]
}

@test "spawn: the sandbox sees its own cgroups, read-only, at /sys/fs/cgroup" {
	spawn_one --memory 96M --cpus 0.5 --pids 100
	other=$ID
	spawn_one --memory 80M --cpus 0.25 --pids 64
	if [ "$(jq -r .cgroup.version "$DSEC_RUN/sandboxes/$ID/sandbox.json")" = 2 ]; then
		run sb_run "$ID" cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max /sys/fs/cgroup/pids.max
		[ "$(echo $output)" = "83886080 25000 100000 64" ]
		f=/sys/fs/cgroup/memory.max
	else
		run sb_run "$ID" cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/pids/pids.max
		[ "$(echo $output)" = "83886080 25000 64" ]
		f=/sys/fs/cgroup/memory/memory.limit_in_bytes
		# dsec makes no cpuset cgroup: the one it runs in is the sandbox's (the JVM trusts
		# no v1 limit without a cpuset mount)
		local cs
		cs=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") break }
			$(i + 1) == "cgroup" && $4 == "/" && $NF ~ /(^|,)cpuset(,|$)/ { print $5 }' /proc/self/mountinfo | head -n 1)
		if [ -n "$cs" ]; then
			[ "$(sb_run "$ID" cat /sys/fs/cgroup/cpuset/cpuset.cpus)" = "$(cat "$cs$(awk -F: '$2 ~ /(^|,)cpuset(,|$)/ { print $3 }' /proc/self/cgroup)/cpuset.cpus")" ]
		fi
	fi
	# what a runtime matches to find its limits: the mounts' roots and its own cgroup are "/"
	run sb_run "$ID" sh -c 'grep " /sys/fs/cgroup/\?[a-z]* .* - cgroup" /proc/self/mountinfo | cut -d" " -f4 | sort -u; cut -d: -f3 /proc/self/cgroup | sort -u'
	[ "$(echo $output)" = "/ /" ] || { echo "$output"; return 1; }
	# read-only, even for root inside, and nothing above its own dirs
	run sb_run "$ID" sh -c "echo 1000000000 >$f"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Read-only"* ]]
	run sb_run "$ID" sh -c "mkdir ${f%/*}/sub"
	[ "$status" -ne 0 ]
	run sb_run "$ID" sh -c "cat ${f%/*}/../memory.limit_in_bytes ${f%/*}/../memory.max 2>&1; ls ${f%/*}/.."
	[[ "$output" != *100663296* ]] && [[ "$output" != *"$other"* ]] || { echo "$output"; return 1; }
	json_is "$(dsec-ps "$ID")" .limits.memory 83886080
}

@test "spawn: /dev is minimal, /proc is the sandbox's, no host mount inside" {
	spawn_one
	run sb_run "$ID" ls /dev
	[ "$status" -eq 0 ]
	[ "$(echo $output)" = "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero" ]
	run sb_run "$ID" sh -c 'echo x >/dev/null && head -c 4 /dev/urandom | wc -c && head -c 3 /dev/zero | wc -c'
	[ "$(echo $output)" = "4 3" ]
	run sb_run "$ID" cat /proc/self/mountinfo
	[ "$status" -eq 0 ]
	# /, /proc, /dev, /dev/pts, /sys and masks below /proc and /sys, nothing else
	for mp in $(awk '{print $5}' <<<"$output"); do
		[[ "$mp" =~ ^/(dev(/pts)?|proc(/.*)?|sys(/.*)?)?$ ]] || { echo "mount $mp"; return 1; }
	done
	[[ "$output" != *"$TESTDIR"* ]]
	[[ "$output" != *" /l/"* ]]
	run sb_run "$ID" test -e "$TESTDIR"
	[ "$status" -ne 0 ]
	# the host's mount table did not grow with the sandbox
	[ "$(grep -c " $TESTDIR/" /proc/self/mountinfo)" -eq 1 ]
}

@test "spawn: writes go to the sandbox's tmpfs, not to the layer, not to another sandbox" {
	layer=$(ls "$DSEC_ROOT"/layers/*/layer.erofs)
	sum=$(sha256sum <"$layer")
	spawn_one
	a=$ID
	spawn_one
	b=$ID
	sb_run "$a" sh -c 'echo secret >/etc/mine && rm /bin/vi && mkdir /newdir'
	run sb_run "$a" cat /etc/mine
	[ "$output" = secret ]
	run sb_run "$b" sh -c 'test -e /etc/mine || echo absent; test -e /bin/vi && echo vi'
	[ "$(echo $output)" = "absent vi" ]
	[ "$(sha256sum <"$layer")" = "$sum" ]
	# / is the overlay, its upper a tmpfs of the sandbox's own mount namespace
	run sb_run "$a" sh -c 'grep "^[0-9]* [0-9]* [0-9:]* / / " /proc/self/mountinfo'
	[[ "$output" == *" / / "*" - overlay overlay "*"upperdir=/sb/u"* ]]
}

@test "spawn: --net none has only loopback (up), --net host shares the host's" {
	spawn_one
	run sb_run "$ID" sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
	[ "$output" = lo ]
	run sb_run "$ID" ip -o link show lo
	[[ "$output" == *"<LOOPBACK,UP,LOWER_UP>"* ]]
	# ICMP datagram sockets (what ping uses without CAP_NET_RAW) for the sandbox's own gids
	run sb_run "$ID" cat /proc/sys/net/ipv4/ping_group_range
	[ "$(echo $output)" = "0 65535" ]
	spawn_one --net host
	json_is "$REC" .net host
	[ "$(readlink "/proc/$(sb_pid "$ID")/ns/net")" = "$(readlink /proc/self/ns/net)" ]
}

@test "spawn: limits are written to the sandbox's cgroups" {
	spawn_one --memory 64M --pids 37 --cpus 0.5
	json_is "$REC" '.limits.memory' 67108864
	json_is "$REC" '.limits.pids' 37
	json_is "$REC" '.limits.cpus' 0.5
	if [ "$(sb_json "$ID" | jq .cgroup.version)" = 2 ]; then
		d=$(sb_cgroups "$ID")
		[ "$(cat "$d/memory.max")" = 67108864 ]
		[ "$(cat "$d/pids.max")" = 37 ]
		[ "$(cat "$d/cpu.max")" = "50000 100000" ]
		grep -qx "$(sb_pid "$ID")" "$d/cgroup.procs"
	else
		m=$(sb_json "$ID" | jq -r .cgroup.paths.memory)
		p=$(sb_json "$ID" | jq -r .cgroup.paths.pids)
		c=$(sb_json "$ID" | jq -r .cgroup.paths.cpu)
		[ "$(cat "$m/memory.limit_in_bytes")" = 67108864 ]
		[ "$(cat "$p/pids.max")" = 37 ]
		[ "$(cat "$c/cpu.cfs_quota_us")" = 50000 ]
		grep -qx "$(sb_pid "$ID")" "$m/cgroup.procs"
		grep -qx "$(sb_pid "$ID")" "$p/cgroup.procs"
	fi
	# the holder is shielded from the OOM killer where we may (CAP_SYS_RESOURCE)
	if capsh --has-p=cap_sys_resource 2>/dev/null; then
		[ "$(cat "/proc/$(sb_pid "$ID")/oom_score_adj")" = -1000 ]
	fi
}

@test "spawn: a memory hog is OOM-killed inside, the sandbox and host live on" {
	spawn_one --memory 32M
	# dd's 64 MiB buffer, filled from /dev/zero, cannot fit in 32 MiB
	run sb_run "$ID" dd if=/dev/zero of=/dev/null bs=64M count=1
	[ "$status" -eq 137 ]
	kill -0 "$(sb_pid "$ID")"
	run sb_run "$ID" echo alive
	[ "$output" = alive ]
}

@test "spawn: a fork bomb stops at the pids limit" {
	spawn_one --pids 16
	if [ "$(sb_json "$ID" | jq .cgroup.version)" = 2 ]; then
		p=$(sb_cgroups "$ID")
	else
		p=$(sb_json "$ID" | jq -r .cgroup.paths.pids)
	fi
	# the subshell dies when it cannot fork; its parent counts with builtins only
	run sb_run "$ID" sh -c '(i=0; while [ $i -lt 40 ]; do sleep 60 >/dev/null 2>&1 & i=$((i+1)); done)
		set -- /proc/[0-9]*; echo $#'
	n=$(printf '%s\n' "$output" | tail -1)
	[ "$n" -le 16 ]
	[ "$n" -ge 10 ]
	[ "$(cat "$p/pids.current")" -le 16 ]
	grep -q '^max [1-9]' "$p/pids.events"
	# a real bomb, bounded by the limit and by timeout; the host goes on
	before=$(awk '$1 == "max" { print $2 }' "$p/pids.events")
	SB_TIMEOUT=10 run sb_run "$ID" sh -c 'b() { b | b & }; b; sleep 1'
	# it ran into the limit (more refused forks), and stayed under it
	[ "$(awk '$1 == "max" { print $2 }' "$p/pids.events")" -gt "$before" ]
	[ "$(cat "$p/pids.current")" -le 16 ]
	kill -0 "$(sb_pid "$ID")"
	run dsec-reap "$ID"
	[ "$status" -eq 0 ]
	[ ! -e "$p" ]
	run echo host fine
	[ "$output" = "host fine" ]
}

@test "spawn: filling the disk stops at --disk" {
	spawn_one --disk 8M
	run sb_run "$ID" dd if=/dev/zero of=/tmp/fill bs=1M count=64
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left"* ]]
	run sb_run "$ID" stat -c %s /tmp/fill
	[ "$output" -le $((8 << 20)) ]
	# /dev/shm is bounded too
	run sb_run "$ID" dd if=/dev/zero of=/dev/shm/fill bs=1M count=64
	[ "$status" -ne 0 ]
}

@test "spawn: spec records on stdin, unknown members pass through, bad ones fail alone" {
	run dsec-spawn <<'EOF'
{"image":"busybox","task":"t1","memory":"64M"}
{"image":"nosuch","task":"t2"}
not json
{"image":"busybox","task":"t3","pids":"many"}
{"image":"busybox","task":"t4","labels":{"k":"v"},"env":{"A":"1"}}
EOF
	[ "$status" -eq 1 ]
	[ "$(records | wc -l)" -eq 5 ]
	r1=$(records | sed -n 1p)
	json_is "$r1" .task t1
	json_is "$r1" .limits.memory 67108864
	json_has "$r1" '.id | startswith("sb-")'
	r2=$(records | sed -n 2p)
	json_is "$r2" .task t2
	json_has "$r2" '.error.msg | contains("nosuch")'
	json_is "$r2" .error.tool dsec-spawn
	json_has "$(records | sed -n 3p)" '.error.msg | contains(":3:")'
	json_has "$(records | sed -n 4p)" '.error.msg | contains("pids")'
	r5=$(records | sed -n 5p)
	id=$(jq -r .id <<<"$r5")
	json_is "$(sb_json "$id")" '.labels.k' v
	json_is "$(sb_json "$id")" '.env[0]' A=1
	# the failed ones left nothing
	[ "$(ls "$DSEC_RUN/sandboxes" | wc -l)" -eq 2 ]
}

@test "spawn: an error record from upstream passes through untouched" {
	in='{"task":"x","error":{"tool":"up","errno":5,"msg":"boom"}}'
	run dsec-spawn <<<"$in"
	[ "$status" -eq 0 ]
	[ "$(records)" = "$in" ]
	[ ! -d "$DSEC_RUN/sandboxes" ] || [ "$(ls "$DSEC_RUN/sandboxes" | wc -l)" -eq 0 ]
}

@test "spawn: bad options are usage errors" {
	must_fail dsec-spawn --image busybox --memory lots
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox --net bridge
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox --cpus 0
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox -n 0
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox --hostname 'a b'
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image ../etc
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --image busybox --env NOEQUALS
	[ "$status" -eq 2 ]
}

@test "spawn: an unknown image is an error record, exit 1, nothing left" {
	run dsec-spawn --image nosuch
	[ "$status" -eq 1 ]
	json_has "$(records)" '.error.msg | contains("nosuch")'
	[[ "$output" == *"dsec-spawn: error: "* ]]
	[ "$(ls "$DSEC_RUN/sandboxes" 2>/dev/null | wc -l)" -eq 0 ]
}

@test "spawn: a closed stdout takes the sandbox back" {
	run bash -c 'dsec-spawn --image busybox -n 3 | head -c 0'
	[ "$status" -eq 0 ]
	dsec-reap --orphans >/dev/null
	[ "$(ls "$DSEC_RUN/sandboxes" 2>/dev/null | wc -l)" -eq 0 ]
}

@test "spawn: a dir-format layer stacks above an EROFS layer" {
	mkdir -p "$TESTDIR/app/etc" "$TESTDIR/app/opt"
	echo from-app >"$TESTDIR/app/opt/hello"
	echo 'app:x:0:0::/:/bin/sh' >"$TESTDIR/app/etc/passwd"
	make_dir_layer_image app "$TESTDIR/app"
	spawn_one
	run dsec-spawn --image app
	[ "$status" -eq 0 ]
	id=$(records | jq -r .id)
	run sb_run "$id" sh -c 'cat /opt/hello; head -1 /etc/passwd; test -x /bin/busybox && echo bb'
	[ "$(echo $output)" = "from-app app:x:0:0::/:/bin/sh bb" ]
}

@test "spawn: --help and the man page list the same long options" {
	help=$(dsec-spawn --help | grep -oE '^ +(-[a-zA-Z], )?--[a-z-]+' | grep -oE -- '--[a-z-]+' | sort -u)
	man=$(grep '^\.It' "$TOP/man/dsec-spawn.1" | grep -oE 'Fl \\-[a-z-]+' | sed 's/Fl \\-/--/' | sort -u)
	[ "$help" = "$man" ] || { diff <(echo "$help") <(echo "$man"); false; }
}

# Pids of dsec-spawn processes working for this test's run dir.
spawners_of_run() {
	local e p
	for e in /proc/[0-9]*/environ; do
		p=${e#/proc/}
		p=${p%/environ}
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = dsec-spawn ] || continue
		tr '\0' '\n' <"$e" 2>/dev/null | grep -qx "DSEC_RUN=$DSEC_RUN" && echo "$p"
	done
	return 0
}

@test "spawn: -j makes N in worker processes; a kill -9 of dsec-spawn stops its workers too" {
	run dsec-spawn --image busybox -n 8 -j 4
	[ "$status" -eq 0 ]
	[ "$(records | jq -r .id | sort -u | wc -l)" -eq 8 ]
	[ "$(ls "$DSEC_RUN/sandboxes" | wc -l)" -eq 8 ]
	dsec-reap -q --all >/dev/null
	# many more than it can make before the kill, which comes once the first are out
	dsec-spawn --image busybox -n 2000 -j 4 >"$TESTDIR/out" 2>/dev/null &
	pid=$!
	for _ in $(seq 200); do [ -s "$TESTDIR/out" ] && break; sleep 0.05; done
	[ -s "$TESTDIR/out" ]
	kill -9 "$pid"
	wait "$pid" || true
	for _ in $(seq 50); do [ -z "$(spawners_of_run)" ] && break; sleep 0.1; done
	[ -z "$(spawners_of_run)" ]
	# what was handed out stays, the rest is --orphans' to take
	dsec-reap --orphans >/dev/null
	for d in "$DSEC_RUN"/sandboxes/*/; do
		[ -d "$d" ] || continue
		grep -q "\"$(basename "$d")\"" "$TESTDIR/out" || { echo "not handed out: $d"; return 1; }
	done
	[ "$(ls "$DSEC_RUN/sandboxes" | wc -l)" -lt 2000 ]
}

@test "spawn: SIGINT, SIGTERM or SIGHUP mid-way: the sandboxes being made are finished or undone, every one left was handed out, status 128+N" {
	local sig n
	for sig in INT TERM HUP; do
		# python3 sends it: a background job of a script has SIGINT ignored, which we keep
		run python3 -c '
import signal, subprocess, sys, time
sig = getattr(signal, "SIG" + sys.argv[1])
p = subprocess.Popen(["dsec-spawn", "--image", "busybox", "-n", "2000", "-j", "2"],
                     stdout=open(sys.argv[2], "w"), stderr=subprocess.DEVNULL,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
for _ in range(400):
    if open(sys.argv[2]).read().count("\n") >= 20: break
    time.sleep(0.02)
p.send_signal(sig)
print(-p.wait())' "$sig" "$TESTDIR/out"
		[ "$output" = "$(kill -l "$sig")" ] || { echo "$sig: ended by $output"; return 1; }
		n=$(grep -c . "$TESTDIR/out")
		[ "$n" -ge 20 ] && [ "$n" -lt 2000 ] || { echo "$sig: $n records"; return 1; }
		# no record lost, no sandbox half made, no cgroup without its sandbox
		[ "$(ls "$DSEC_RUN/sandboxes" | wc -l)" -eq "$n" ] || { echo "$sig: $(ls "$DSEC_RUN/sandboxes" | wc -l) state dirs for $n records"; return 1; }
		[ -z "$(find "$DSEC_RUN/sandboxes" -name pending)" ]
		for p in $(sb_cgroup_parents "$(head -n 1 "$TESTDIR/out" | jq -r .id)"); do
			[ "$(find "$p" -mindepth 1 -maxdepth 1 -name 'sb-*' | wc -l)" -eq "$n" ] || { echo "$sig: $p: $(ls "$p" | grep -c sb-) cgroups for $n records"; return 1; }
		done
		dsec-reap -q --all >/dev/null
	done
}
