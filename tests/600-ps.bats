#!/usr/bin/env bats
# dsec-ps: one record per sandbox with its use.

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
}

@test "ps: nothing to list is no error" {
	run dsec-ps
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "ps: a record per sandbox with state, pid, age, ttl_left, use and labels" {
	spawn_one --ttl 10m --label team=rl --memory 128M --disk 16M
	run dsec-ps
	[ "$status" -eq 0 ]
	rec=$(records)
	json_is "$rec" .id "$ID"
	json_is "$rec" .image busybox
	json_is "$rec" .state running
	json_is "$rec" .pid "$(sb_pid "$ID")"
	json_has "$rec" '.age >= 0 and .age < 60'
	json_has "$rec" '.ttl_left > 500 and .ttl_left <= 600'
	json_has "$rec" '.memory > 0'
	json_has "$rec" '.cpu_us >= 0'
	json_is "$rec" .pids 1
	# a fresh sandbox holds two pages: the /etc/hosts line and the /etc/hostname dsec-spawn
	# writes (dsec-spawn(1))
	json_is "$rec" .disk 8192
	json_is "$rec" .disk_limit 16777216
	json_is "$rec" .labels.team rl
}

@test "ps: disk counts what the sandbox wrote, memory and pids what runs in it" {
	spawn_one
	sb_run "$ID" dd if=/dev/zero of=/tmp/f bs=1M count=5 2>/dev/null
	sb_run "$ID" sh -c 'sleep 100 >/dev/null 2>&1 &'
	run dsec-ps "$ID"
	[ "$status" -eq 0 ]
	json_has "$(records)" '.disk >= 5242880 and .disk < 6291456'
	json_has "$(records)" '.memory >= 5242880'
	json_is "$(records)" .pids 2
}

@test "ps: a planted symlink does not lead dsec-ps out of the sandbox" {
	spawn_one
	# whatever the sandbox puts at its paths, disk use is that of its own tmpfs
	sb_run "$ID" sh -c 'rm -rf /tmp && ln -s / /tmp && ln -s /proc/1/root /host'
	run dsec-ps "$ID"
	[ "$status" -eq 0 ]
	json_has "$(records)" '.disk < 1048576'
}

@test "ps: a sandbox whose holder died is dead, unknown ids are errors" {
	spawn_one
	kill -9 "$(sb_pid "$ID")"
	sleep 0.2
	run dsec-ps "$ID" sb-000000000000
	[ "$status" -eq 1 ]
	json_is "$(records | sed -n 1p)" .state dead
	json_is "$(records | sed -n 1p)" .pid null
	json_has "$(records | sed -n 2p)" '.error.msg | contains("no such sandbox")'
}

@test "ps: --table, a line per sandbox for people, from the same figures" {
	spawn_one --ttl 3h --memory 128M
	local live=$ID
	sb_run "$ID" dd if=/dev/zero of=/tmp/f bs=1M count=5 2>/dev/null
	spawn_one
	local dead=$ID
	kill -9 "$(sb_pid "$dead")"
	sleep 0.2
	run dsec-ps -t "$live" "$dead" sb-000000000000
	[ "$status" -eq 1 ]
	# the header, one line per sandbox found, the unknown id's error on stderr only
	[[ "${lines[0]}" =~ ^ID\ +IMAGE\ +STATE\ +PID\ +AGE\ +TTL\ +IDLE\ +MEM\ +CPU\ +DISK\ +NET\ +POOL$ ]]
	[[ "$output" == *"sb-000000000000: no such sandbox"* ]]
	local row
	row=$(printf '%s\n' "${lines[@]}" | grep "^$live ")
	read -r -a f <<<"$row"
	[ "${f[1]}" = busybox ] && [ "${f[2]}" = running ] && [ "${f[3]}" = "$(sb_pid "$live")" ]
	[ "${f[5]}" = 2.9h ] # 3 h less the seconds since the spawn, rounded down
	[[ "${f[9]}" =~ ^5\.[0-9]M$ ]] || { echo "disk: ${f[9]}"; return 1; }
	[ "${f[10]}" = none ] && [ "${f[11]}" = - ]
	row=$(printf '%s\n' "${lines[@]}" | grep "^$dead ")
	read -r -a f <<<"$row"
	[ "${f[2]}" = dead ] && [ "${f[3]}" = - ] && [ "${f[6]}" = - ]
	[ "$(printf '%s\n' "${lines[@]}" | grep -c '^sb-')" -eq 2 ]
	# a ready sandbox names its pool; --table lists sandboxes only
	dsec-warm --image busybox --count 1 >/dev/null
	run dsec-ps --table
	[ "$status" -eq 0 ]
	row=$(printf '%s\n' "${lines[@]}" | grep '^sb-' | grep -v "^$live \|^$dead ")
	[ "${row##* }" = "$(dsec-warm --list | jq -r .pool)" ] || { echo "$output"; return 1; }
	run dsec-ps -t --pools
	[ "$status" -eq 2 ]
	dsec-warm --image busybox --drain >/dev/null
}

@test "ps: a sandbox a reset is replacing shows once, as its successor" {
	spawn_one
	# mid-reset (dsec_sandbox_reset): the replaced sandbox's state, still naming the id, sits
	# in the dir of the pool sandbox that takes the id over
	cp -a "$DSEC_RUN/sandboxes/$ID" "$DSEC_RUN/sandboxes/sb-0123456789ab"
	run dsec-ps
	rm -rf "$DSEC_RUN/sandboxes/sb-0123456789ab"
	[ "$status" -eq 0 ]
	[ "$(records | jq -r .id)" = "$ID" ]
}

@test "ps: many sandboxes, one line each" {
	run dsec-spawn --image busybox -n 6
	[ "$status" -eq 0 ]
	run dsec-ps
	[ "$status" -eq 0 ]
	[ "$(records | jq -r 'select(.state == "running") | .id' | sort -u | wc -l)" -eq 6 ]
}

@test "ps: --help and the man page list the same long options" {
	help=$(dsec-ps --help | grep -oE '^ +(-[a-zA-Z], )?--[a-z-]+' | grep -oE -- '--[a-z-]+' | sort -u)
	man=$(grep '^\.It' "$TOP/man/dsec-ps.1" | grep -oE 'Fl \\-[a-z-]+' | sed 's/Fl \\-/--/' | sort -u)
	[ "$help" = "$man" ] || { diff <(echo "$help") <(echo "$man"); false; }
}
