#!/usr/bin/env bats
# dsec-reap --pause, --resume and --reset: freeze a sandbox, thaw it, reset it to its image.

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
}

teardown() { dsec_teardown; }

# A counter the sandbox's own background loop advances ten times a second.
start_counter() {
	dsec-exec "$1" -- sh -c '(i=0; while :; do i=$((i+1)); echo $i >/tmp/c; sleep 0.1; done) >/dev/null 2>&1 &'
	sleep 0.5
}
counter() { cat "/proc/$(sb_pid "$1")/root/tmp/c"; }

@test "pause freezes every process, ps shows it, resume and exec thaw" {
	spawn_one
	start_counter "$ID"
	# control: running, the counter moves
	a=$(counter "$ID")
	sleep 0.4
	[ "$(counter "$ID")" -gt "$a" ]
	run dsec-reap --pause "$ID"
	[ "$status" -eq 0 ]
	json_is "$output" .paused true
	json_is "$(dsec-ps "$ID")" .state paused
	a=$(counter "$ID")
	sleep 0.5
	[ "$(counter "$ID")" = "$a" ]
	# a process of the sandbox is frozen (D or S in state, and no CPU moves)
	run dsec-reap --resume "$ID"
	json_is "$output" .paused false
	json_is "$(dsec-ps "$ID")" .state running
	sleep 0.4
	[ "$(counter "$ID")" -gt "$a" ]
	# exec into a paused sandbox resumes it first
	dsec-reap --pause "$ID" >/dev/null
	run timeout 10 dsec-exec "$ID" echo inside
	[ "$status" -eq 0 ]
	[ "$output" = inside ]
	json_is "$(dsec-ps "$ID")" .state running
}

@test "pause holds under load: a CPU burner and a fork loop use no CPU while paused" {
	spawn_one --pids 64
	dsec-exec "$ID" -- sh -c '(while :; do :; done) >/dev/null 2>&1 & (while :; do sh -c true; done) >/dev/null 2>&1 &'
	sleep 0.3
	dsec-reap --pause "$ID" >/dev/null
	c1=$(dsec-ps "$ID" | jq .cpu_us)
	sleep 1
	c2=$(dsec-ps "$ID" | jq .cpu_us)
	# frozen: at most a few ms of CPU trickle in while the last tasks stop
	[ $((c2 - c1)) -lt 20000 ] || { echo "cpu went $c1 -> $c2 while paused"; return 1; }
	dsec-reap --resume "$ID" >/dev/null
	sleep 0.5
	c3=$(dsec-ps "$ID" | jq .cpu_us)
	[ $((c3 - c2)) -gt 100000 ] || { echo "cpu went $c2 -> $c3 after resume"; return 1; }
	# a paused sandbox reaps cleanly
	holder=$(sb_pid "$ID")
	cgs=$(sb_cgroups "$ID")
	dsec-reap --pause "$ID" >/dev/null
	run timeout 20 dsec-reap "$ID"
	[ "$status" -eq 0 ]
	gone "$holder"
	[ -z "$(dsec-ps)" ]
	for c in $cgs; do [ ! -e "$c" ] || { echo "cgroup $c left"; return 1; }; done
}

@test "reset: same id, limits and labels; writes and processes gone" {
	spawn_one --memory 96M --label task=t1 --hostname box --class be --cpu-request 0.1
	old=$(sb_pid "$ID")
	dsec-exec "$ID" -- sh -c 'echo x >/etc/written; rm /bin/vi; sleep 300 >/dev/null 2>&1 &'
	run dsec-reap --reset "$ID"
	[ "$status" -eq 0 ]
	json_is "$output" .reset true
	json_is "$output" .reset_warm false
	json_has "$output" '.reset_us > 0'
	[ ! -e "/proc/$old" ] || [ "$(sb_pid "$ID")" != "$old" ]
	run dsec-exec "$ID" sh -c 'ls /etc/written 2>&1; ls /bin/vi; hostname; ps -o comm | grep -c sleep'
	[[ "${lines[0]}" == *"No such file"* ]] && [ "${lines[1]}" = /bin/vi ] && [ "${lines[2]}" = box ] &&
		[ "${lines[3]}" = 0 ] || { echo "$output"; return 1; }
	json_is "$(sb_json "$ID")" .limits.memory 100663296
	json_is "$(sb_json "$ID")" .labels.task t1
	json_is "$(sb_json "$ID")" .class be
	json_is "$(sb_json "$ID")" .requests.cpus 0.1
	[ "$(dsec-ps | jq -s length)" = 1 ]
	# made anew under an id of its own and swapped in: the replaced one is gone when dsec-reap
	# returns (a zombie of this host's init for a moment at most), its cgroups with it, and
	# --orphans leaves the new one, whose cgroups may carry another name, alone
	gone "$old"
	[ "$(ls "$DSEC_RUN/sandboxes")" = "$ID" ]
	run dsec-reap --orphans
	[ "$status" -eq 0 ]
	[ -z "$output" ] || { echo "orphans: $output"; return 1; }
	run dsec-exec "$ID" hostname
	[ "$output" = box ]
}

@test "reset: when the sandbox cannot be made again, it is left as it was" {
	make_busybox_image gone-soon
	ID=$(dsec-spawn --image gone-soon | jq -r .id)
	dsec-exec "$ID" sh -c 'echo kept >/etc/written'
	pid=$(sb_pid "$ID")
	dsec-layer rm gone-soon >/dev/null
	run dsec-reap --reset "$ID"
	[ "$status" -eq 1 ]
	json_has "$(records)" '.error.msg | test("gone-soon")'
	[ "$(sb_pid "$ID")" = "$pid" ]
	[ "$(dsec-exec "$ID" cat /etc/written)" = kept ]
	[ "$(ls "$DSEC_RUN/sandboxes")" = "$ID" ]
	run dsec-reap --orphans
	[ -z "$output" ]
	[ "$(dsec-exec "$ID" cat /etc/written)" = kept ]
}

@test "reset from a warm pool: a ready sandbox takes the id; orphans, admission and cleanup agree" {
	printf 'cpu = 1\ncpu_ratio = 1\n' >"$DSEC_ROOT/node.conf"
	dsec-warm --image busybox --count 2 --memory 96M --cpu-request 0.25 >/dev/null
	spawn_one --memory 96M --cpu-request 0.25 --label task=t2
	json_is "$REC" .warm true
	parents=$(sb_cgroup_parents "$ID")
	old=$(sb_pid "$ID")
	dsec-exec "$ID" -- sh -c 'echo x >/etc/written; sleep 300 >/dev/null 2>&1 &'
	run dsec-reap --reset "$ID"
	[ "$status" -eq 0 ]
	json_is "$output" .reset_warm true
	json_has "$output" '.reset_us > 0'
	# the replaced sandbox is gone when dsec-reap returns, the pool is empty now
	# (a zombie for a moment at most: its parent, init, has yet to wait for it)
	[ ! -e "/proc/$old" ] || [ "$(awk '{ print $3 }' "/proc/$old/stat" 2>/dev/null)" != S ]
	[ -z "$(ls "$DSEC_RUN"/pools/*/ready/)" ]
	run dsec-exec "$ID" sh -c 'ls /etc/written 2>&1; hostname; ps -o comm | grep -c sleep'
	[[ "${lines[0]}" == *"No such file"* ]] && [ "${lines[1]}" = "$ID" ] && [ "${lines[2]}" = 0 ] ||
		{ echo "$output"; return 1; }
	# its /etc/hosts names the id, no longer the pool sandbox's own name
	run dsec-exec "$ID" grep -c '^127\.0\.1\.1' /etc/hosts
	[ "$output" = 1 ]
	run dsec-exec "$ID" grep -x "127.0.1.1	$ID" /etc/hosts
	[ "$status" -eq 0 ] || { dsec-exec "$ID" cat /etc/hosts; return 1; }
	[ "$(dsec-exec "$ID" cat /etc/hostname)" = "$ID" ]
	json_is "$(sb_json "$ID")" .limits.memory 100663296
	json_is "$(sb_json "$ID")" .labels.task t2
	[ "$(ls "$DSEC_RUN/sandboxes")" = "$ID" ]
	# its cgroup is named after the pool sandbox it was: --orphans must leave it alone
	[ "$(basename "$(sb_cgroups "$ID" | head -n 1)")" != "$ID" ]
	run dsec-reap --orphans
	[ "$status" -eq 0 ]
	run dsec-exec "$ID" true
	[ "$status" -eq 0 ]
	# admission counts the id's requests once: 0.25 of the node's 1
	json_is "$(dsec-ps --node | jq -c 'select(.cpu)')" .cpu.requested 0.25
	# a cold reset (the pool is empty) keeps that count
	run dsec-reap --reset "$ID"
	json_is "$output" .reset_warm false
	json_is "$(dsec-ps --node | jq -c 'select(.cpu)')" .cpu.requested 0.25
	cgs=$(sb_cgroups "$ID")
	dsec-reap "$ID" >/dev/null
	for c in $cgs; do [ ! -e "$c" ] || { echo "cgroup left: $c" >&2; return 1; }; done
	dsec-reap -q --all >/dev/null
	# shellcheck disable=SC2086 # one dir a word
	assert_nothing_left $parents
}

@test "reset under load: a fork bomb is gone after reset" {
	spawn_one --pids 48
	dsec-exec "$ID" -- sh -c 'b() { b | b & }; (b) >/dev/null 2>&1 &'
	sleep 0.5
	run timeout 30 dsec-reap --reset "$ID"
	[ "$status" -eq 0 ]
	run dsec-exec "$ID" sh -c 'ps -o pid | wc -l'
	# header, holder, sh, ps, wc
	[ "$output" -le 5 ] || { echo "$output processes"; return 1; }
}

@test "pause, resume, reset: unknown ids are error records; bad combinations are usage errors" {
	run dsec-reap --pause sb-000000000000
	[ "$status" -eq 1 ]
	json_has "$(records)" '.error.msg | contains("sb-000000000000")'
	run dsec-reap --reset sb-000000000000
	[ "$status" -eq 1 ]
	spawn_one
	run dsec-reap --reset sb-000000000000 "$ID"
	[ "$status" -eq 1 ]
	[ "$(records | jq -s 'map(select(.reset)) | length')" = 1 ]
	must_fail dsec-reap --pause --all
	[ "$status" -eq 2 ]
	must_fail dsec-reap --pause --reset "$ID"
	[ "$status" -eq 2 ]
	# records on stdin pass through with the outcome
	run dsec-reap --pause <<<"{\"id\":\"$ID\",\"task\":7}"
	json_is "$output" .task 7
	json_is "$output" .paused true
}
