#!/usr/bin/env bats
# dsec-reap: by id, from records, --all, --expired, --idle, --orphans, and crash recovery.

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
}

@test "reap: by id kills every process and removes cgroup and state" {
	spawn_one
	pid=$(sb_pid "$ID")
	mapfile -t cgs < <(sb_cgroups "$ID")
	# a process started inside, in its own session, must die too
	sb_run "$ID" sh -c 'setsid sleep 1000 </dev/null >/dev/null 2>&1 &'
	inner=$(pgrep -f 'sleep 1000' | while read -r p; do
		[ "$(readlink /proc/$p/ns/pid)" = "$(readlink /proc/$pid/ns/pid)" ] && echo "$p"; done)
	[ -n "$inner" ]
	run dsec-reap "$ID"
	[ "$status" -eq 0 ]
	json_is "$(records)" .id "$ID"
	json_is "$(records)" .reaped true
	gone "$pid"
	gone "$inner"
	[ ! -e "$DSEC_RUN/sandboxes/$ID" ]
	for c in "${cgs[@]}"; do [ ! -e "$c" ]; done
}

# The run dir's cgroup dir in one v1 hierarchy, and its spares (cgspare.c).
cg_parent_of() { echo "/sys/fs/cgroup/$1/$(run_cgroup_name)"; }
spares() { ls "$DSEC_RUN/cgspare" 2>/dev/null | grep -c '^spare-.*\.json$' || true; }

@test "reap: a sandbox's cgroups become a spare the next spawn takes: renamed, counters reset, its own limits" {
	[ -d /sys/fs/cgroup/memory/ ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ] ||
		skip "spares are for cgroup v1 (v2 cannot rename a cgroup)"
	spawn_one --memory 256M --cpus 0.5 --class be
	a=$ID
	dsec-exec "$a" sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; head -c 20000000 /dev/zero >/dev/shm/x'
	[ "$(cat "$(cg_parent_of cpuacct)/$a/cpuacct.usage")" -gt 10000000 ]
	run dsec-reap "$a"
	[ "$status" -eq 0 ]
	# gone under its name, kept as a spare with its marker
	[ ! -e "$(cg_parent_of memory)/$a" ]
	[ "$(spares)" = 1 ]
	[ "$(dsec-ps --node | jq .spare_cgroups)" = 1 ]
	ls "$(cg_parent_of memory)" | grep -q '^spare-'
	spawn_one
	b=$ID
	[ "$(spares)" = 0 ]
	! ls "$(cg_parent_of memory)" | grep -q '^spare-' || false
	# the new sandbox's own name, limits and class; what counts starts again
	m=$(cg_parent_of memory)/$b c=$(cg_parent_of cpu)/$b
	[ "$(cat "$m/memory.limit_in_bytes")" = $((1 << 30)) ]
	[ "$(cat "$m/memory.max_usage_in_bytes")" -lt 20000000 ]
	[ "$(cat "$c/cpu.cfs_quota_us")" = 100000 ]
	[ "$(cat "$c/cpu.shares")" = 1024 ]
	[ "$(cat "$(cg_parent_of cpuacct)/$b/cpuacct.usage")" -lt 10000000 ]
	[ "$(cat "$m/memory.swappiness")" = "$(cat /proc/sys/vm/swappiness)" ]
	run dsec-exec "$b" cat /proc/self/cgroup
	[ "$status" -eq 0 ]
	# and the limit is the new one's: 64M of the old 256M would now be killed
	dsec-spawn --resize "$b" --memory 32M >/dev/null
	run dsec-exec "$b" sh -c 'head -c 67108864 /dev/zero | tail >/dev/null'
	[ "$status" -ne 0 ]
	# control: with no spares kept, a reap leaves no dir and no marker
	run env DSEC_SPARE_CGROUPS=0 dsec-reap "$b"
	[ "$status" -eq 0 ]
	[ "$(spares)" = 0 ]
	! ls "$(cg_parent_of memory)" | grep -q '^spare-' || false
	[ ! -e "$m" ]
}

@test "reap: concurrent spawns never share a spare: each sandbox alone in cgroups named after it" {
	[ -d /sys/fs/cgroup/memory/ ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ] ||
		skip "spares are for cgroup v1"
	run dsec-spawn --image busybox -n 40
	[ "$status" -eq 0 ]
	records | dsec-reap >/dev/null
	[ "$(spares)" = 40 ]
	for i in 1 2 3 4 5 6 7 8; do
		dsec-spawn --image busybox -n 6 >"$TESTDIR/s$i" 2>"$TESTDIR/e$i" &
	done
	wait
	cat "$TESTDIR"/s? >"$TESTDIR/all"
	[ "$(jq -r .id "$TESTDIR/all" | sort -u | wc -l)" -eq 48 ]
	local id holder
	for id in $(jq -r .id "$TESTDIR/all"); do
		holder=$(sb_pid "$id")
		for c in $(sb_cgroups "$id"); do
			[ "$(basename "$c")" = "$id" ] || { echo "$id in $c"; return 1; }
			[ "$(cat "$c/cgroup.procs")" = "$holder" ] || { echo "$c: $(cat "$c/cgroup.procs")"; return 1; }
		done
	done
	[ "$(spares)" = 0 ]
}

@test "reap: --orphans removes a spare left without its marker, and a marker left without its spare; --all every spare" {
	[ -d /sys/fs/cgroup/memory/ ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ] ||
		skip "spares are for cgroup v1"
	# one sandbox stays: with none left, --orphans tears the whole run dir down
	spawn_one
	run dsec-spawn --image busybox -n 3
	[ "$status" -eq 0 ]
	records >"$TESTDIR/recs"
	id=$(head -n 1 "$TESTDIR/recs" | jq -r .id)
	mapfile -t parents < <(sb_cgroup_parents "$id")
	run dsec-reap <"$TESTDIR/recs"
	[ "$status" -eq 0 ]
	[ "$(spares)" = 3 ]
	# a crash between the renames and the marker, and a marker whose dirs were removed
	first=$(ls "$DSEC_RUN/cgspare" | head -n 1)
	second=$(ls "$DSEC_RUN/cgspare" | sed -n 2p)
	rm "$DSEC_RUN/cgspare/$first"
	for h in memory cpu cpuacct pids freezer; do
		[ -d "$(cg_parent_of $h)" ] && rmdir "$(cg_parent_of $h)/${second%.json}"
	done
	run dsec-reap --orphans
	[ "$status" -eq 0 ]
	[ ! -e "$(cg_parent_of memory)/${first%.json}" ]
	[ ! -e "$DSEC_RUN/cgspare/$second" ]
	[ "$(spares)" = 1 ]
	# a spawn with only a broken marker left makes its cgroups anew
	spawn_one
	[ -d "$(cg_parent_of memory)/$ID" ]
	run dsec-reap -q --all
	[ "$status" -eq 0 ]
	[ ! -e "$DSEC_RUN/cgspare" ]
	assert_nothing_left "${parents[@]}"
}

@test "reap: records pass through, an error record still gets its sandbox reaped" {
	spawn_one
	a=$ID
	spawn_one
	b=$ID
	run dsec-reap <<EOF
{"id":"$a","task":"keep me"}
{"id":"$b","error":{"tool":"dsec-exec","errno":5,"msg":"boom"}}
{"task":"spawn failed","error":{"tool":"dsec-spawn","errno":2,"msg":"no image"}}
EOF
	[ "$status" -eq 0 ]
	json_is "$(records | sed -n 1p)" '[.id, .task, .reaped] | join(" ")' "$a keep me true"
	json_is "$(records | sed -n 2p)" '.reaped' true
	json_is "$(records | sed -n 2p)" '.error.tool' dsec-exec
	json_is "$(records | sed -n 3p)" '.task' "spawn failed"
	json_has "$(records | sed -n 3p)" 'has("reaped") | not'
	[ "$(ls "$DSEC_RUN/sandboxes" | wc -l)" -eq 0 ]
}

@test "reap: an unknown id is an error record and exit 1, the others go on" {
	spawn_one
	run dsec-reap sb-000000000000 "$ID" 'sb-../../x'
	[ "$status" -eq 1 ]
	[ "$(records | wc -l)" -eq 3 ]
	json_has "$(records | sed -n 1p)" '.error.msg | contains("no such sandbox")'
	json_is "$(records | sed -n 2p)" .reaped true
	json_has "$(records | sed -n 3p)" '.error.msg | contains("not a sandbox id")'
	[[ "$output" == *"dsec-reap: error: sb-000000000000"* ]]
}

@test "reap: malformed input lines are reported with their line number" {
	spawn_one
	run dsec-reap <<EOF
{"id":"$ID"}
{"id":
[1,2]
{"noid":1}
EOF
	[ "$status" -eq 1 ]
	[ "$(records | wc -l)" -eq 4 ]
	json_is "$(records | sed -n 1p)" .reaped true
	json_has "$(records | sed -n 2p)" '.error.msg | contains(":2")'
	json_has "$(records | sed -n 4p)" '.error.msg | contains("id")'
}

@test "reap: --all leaves nothing of the run dir: state, cgroups, template, holders" {
	run dsec-spawn --image busybox -n 3
	[ "$status" -eq 0 ]
	id=$(records | head -1 | jq -r .id)
	mapfile -t parents < <(sb_cgroup_parents "$id")
	[ -e "$DSEC_RUN/template/mnt" ]
	grep -q " $DSEC_RUN/template/mnt " /proc/self/mountinfo
	run dsec-reap --all
	[ "$status" -eq 0 ]
	[ "$(records | jq -r 'select(.reaped) | .id' | wc -l)" -eq 3 ]
	assert_nothing_left "${parents[@]}"
	[ ! -e "$DSEC_RUN/template" ]
	# and the next spawn makes it all again
	spawn_one
	run dsec-reap -q --all
	[ "$status" -eq 0 ]
	assert_nothing_left "${parents[@]}"
}

@test "reap: --expired takes only sandboxes past their TTL" {
	spawn_one --ttl 1s
	short=$ID
	spawn_one --ttl 1h
	long=$ID
	spawn_one --ttl 0
	never=$ID
	sleep 1.2
	run dsec-reap --expired
	[ "$status" -eq 0 ]
	[ "$(records | jq -r .id)" = "$short" ]
	[ ! -e "$DSEC_RUN/sandboxes/$short" ]
	[ -e "$DSEC_RUN/sandboxes/$long" ]
	[ -e "$DSEC_RUN/sandboxes/$never" ]
}

@test "reap: --idle takes the sandboxes nothing ran in for D; a command's start and end, in every path, count" {
	ids() { records | jq -r .id | sort | tr '\n' ' '; }
	spawn_one; idle=$ID
	spawn_one; busy=$ID
	spawn_one; paused=$ID
	spawn_one; long=$ID
	spawn_one; longfg=$ID
	spawn_one; fg=$ID
	spawn_one; full=$ID
	spawn_one; rec=$ID
	spawn_one; cpd=$ID
	spawn_one --ttl 1s; exp=$ID
	dsec-warm --image busybox --count 1 >/dev/null
	ready=$(ls "$DSEC_RUN"/pools/*/ready)
	[ -n "$ready" ]
	# a process left running counts as busy however old; a paused sandbox is kept
	dsec-exec "$busy" sh -c 'sleep 100 </dev/null >/dev/null 2>&1 &'
	dsec-reap --pause "$paused" >/dev/null
	# commands that ran the whole time and just ended (the front, records): their end counts,
	# not their start
	dsec-exec "$longfg" sleep 2.6 &
	lp=$!
	echo "{\"id\":\"$long\"}" | dsec-exec -- sleep 2.6 >/dev/null &
	lr=$!
	sleep 2.7
	wait "$lp"
	wait "$lr"
	# the front, the full dsec-exec, records and cp each mark their sandbox used
	dsec-exec "$fg" true
	DSEC_EXEC_FAST=0 dsec-exec -e A=1 "$full" true
	echo "{\"id\":\"$rec\"}" | dsec-exec -- true >/dev/null
	echo x >"$TESTDIR/f"
	dsec-exec cp "$TESTDIR/f" "$cpd:/tmp/f"
	dsec-exec "$exp" true
	# dsec-ps shows what --idle goes by
	run dsec-ps
	[ "$status" -eq 0 ]
	[ "$(records | jq -r --arg i "$idle" 'select(.id == $i) | .idle')" -ge 2 ]
	[ "$(records | jq -r --arg i "$busy" 'select(.id == $i) | .idle')" = null ]
	[ "$(records | jq -r --arg i "$paused" 'select(.id == $i) | .idle')" = null ]
	[ "$(records | jq -r --arg i "$fg" 'select(.id == $i) | .idle')" -le 1 ]
	run dsec-reap --idle 2s
	[ "$status" -eq 0 ]
	[ "$(ids)" = "$idle " ] || { echo "reaped: $(ids), idle: $idle"; false; }
	[ "$(records | jq .idle)" -ge 2 ]
	json_is "$(records)" .reaped true
	[ ! -e "$DSEC_RUN/sandboxes/$idle" ]
	for i in "$busy" "$paused" "$long" "$longfg" "$fg" "$full" "$rec" "$cpd" "$exp" $ready; do
		[ -e "$DSEC_RUN/sandboxes/$i" ] || { echo "$i reaped"; false; }
	done
	# --expired with --idle: both kinds; the rest again untouched
	run dsec-reap --expired --idle 1h
	[ "$status" -eq 0 ]
	[ "$(ids)" = "$exp " ]
	sleep 2.1
	run dsec-reap --idle 2s
	[ "$(ids)" = "$(printf '%s\n' "$long" "$longfg" "$fg" "$full" "$rec" "$cpd" | sort | tr '\n' ' ')" ]
	[ -e "$DSEC_RUN/sandboxes/$busy" ]
	[ -e "$DSEC_RUN/sandboxes/$paused" ]
	[ -e "$DSEC_RUN/sandboxes/$ready" ]
	# usage errors
	must_fail dsec-reap --idle soon
	[ "$status" -eq 2 ]
	must_fail dsec-reap --idle 1s --all
	[ "$status" -eq 2 ]
	must_fail dsec-reap --idle 1s "$busy"
	[ "$status" -eq 2 ]
	must_fail dsec-reap --idle 1s --pause
	[ "$status" -eq 2 ]
}

@test "reap: --orphans waiting for the run dir's lock says who holds it, a stopped tool included" {
	local holder
	spawn_one
	mkdir -p "$DSEC_RUN"
	# -o: the lock is flock's own, and goes when it is killed
	flock -o -s "$DSEC_RUN/lock" sleep 20 &
	holder=$!
	sleep 0.2
	kill -STOP "$holder"
	run timeout 3 dsec-reap --orphans
	[ "$status" -eq 124 ] || { echo "$output ($status)"; kill -CONT "$holder"; return 1; }
	[[ "$output" == *"waiting for the run dir's lock, held by pid $holder (flock, stopped)"* ]] || {
		echo "$output"
		kill -CONT "$holder"
		return 1
	}
	kill -CONT "$holder"
	kill $(pgrep -P "$holder") "$holder"
	wait "$holder" || true
	# free again: no word of waiting
	run dsec-reap --orphans
	[ "$status" -eq 0 ]
	[[ "$output" != *waiting* ]]
	# -q keeps it quiet
	flock -s "$DSEC_RUN/lock" sleep 1.5 &
	holder=$!
	sleep 0.2
	run dsec-reap -q --orphans
	[ "$status" -eq 0 ]
	[[ "$output" != *waiting* ]] || { echo "$output"; return 1; }
	wait "$holder"
}

@test "reap: --orphans removes dead holders, stray cgroups and half-made state" {
	spawn_one
	dead=$ID
	spawn_one
	live=$ID
	mapfile -t parents < <(sb_cgroup_parents "$live")
	kill -9 "$(sb_pid "$dead")"
	# a cgroup without state, with a process in it
	stray=sb-0123456789ab
	for p in "${parents[@]}"; do mkdir "$p/$stray"; done
	sleep 1000 &
	sp=$!
	for p in "${parents[@]}"; do echo "$sp" >"$p/$stray/cgroup.procs"; done
	# a state dir without a state file
	mkdir "$DSEC_RUN/sandboxes/sb-aaaaaaaaaaaa"
	run dsec-reap --orphans
	[ "$status" -eq 0 ]
	ids=$(records | jq -r 'select(.orphan) | .id' | sort -u | tr '\n' ' ')
	[ "$ids" = "$(printf '%s\n' "$dead" "$stray" sb-aaaaaaaaaaaa | sort | tr '\n' ' ')" ]
	gone "$sp"
	for p in "${parents[@]}"; do [ ! -e "$p/$stray" ]; [ ! -e "$p/$dead" ]; [ -e "$p/$live" ]; done
	[ -e "$DSEC_RUN/sandboxes/$live" ]
	kill -0 "$(sb_pid "$live")"
}

@test "reap: kill -9 of dsec-spawn at any moment, then --orphans leaves nothing" {
	spawn_one
	mapfile -t parents < <(sb_cgroup_parents "$ID")
	dsec-reap -q "$ID" >/dev/null
	for delay in 0.01 0.03 0.06 0.1 0.15 0.2 0.3; do
		dsec-spawn --image busybox -n 1000 >/dev/null 2>&1 &
		sp=$!
		sleep "$delay"
		kill -9 "$sp" 2>/dev/null || true
		wait "$sp" || true
		run dsec-reap --orphans
		[ "$status" -eq 0 ]
		# whatever was handed out before the kill is still a live, complete sandbox
		for d in "$DSEC_RUN"/sandboxes/*; do
			[ -e "$d" ] || continue
			[ -f "$d/sandbox.json" ]
			[ ! -e "$d/pending" ]
		done
		dsec-reap -q --all >/dev/null
		assert_nothing_left "${parents[@]}"
	done
}

@test "reap: kill -9 of dsec-reap mid-way, then --orphans leaves nothing" {
	run dsec-spawn --image busybox -n 20
	[ "$status" -eq 0 ]
	id=$(records | head -1 | jq -r .id)
	mapfile -t parents < <(sb_cgroup_parents "$id")
	dsec-reap --all >/dev/null 2>&1 &
	rp=$!
	sleep 0.02
	kill -9 "$rp" 2>/dev/null || true # it may have been quicker
	wait "$rp" || true
	# dead holders and half-removed state are orphans; the live rest goes with --all
	run dsec-reap --orphans
	[ "$status" -eq 0 ]
	run dsec-reap --all
	[ "$status" -eq 0 ]
	assert_nothing_left "${parents[@]}"
}

@test "reap: two reapers of the same sandboxes do not trip over each other" {
	run dsec-spawn --image busybox -n 10
	[ "$status" -eq 0 ]
	id=$(records | head -1 | jq -r .id)
	mapfile -t parents < <(sb_cgroup_parents "$id")
	records >"$TESTDIR/recs"
	dsec-reap <"$TESTDIR/recs" >"$TESTDIR/out1" 2>/dev/null &
	dsec-reap <"$TESTDIR/recs" >"$TESTDIR/out2" 2>/dev/null || true
	wait || true
	# each sandbox reaped at least once, none failed for another reason than being gone
	n=$(cat "$TESTDIR/out1" "$TESTDIR/out2" | jq -r 'select(.reaped) | .id' | sort -u | wc -l)
	[ "$n" -eq 10 ]
	dsec-reap -q --all >/dev/null
	assert_nothing_left "${parents[@]}"
}

@test "reap: usage errors" {
	must_fail dsec-reap --all --orphans
	[ "$status" -eq 2 ]
	must_fail dsec-reap --all sb-000000000000
	[ "$status" -eq 2 ]
	must_fail dsec-reap --bogus
	[ "$status" -eq 2 ]
}

@test "reap: --help and the man page list the same long options" {
	help=$(dsec-reap --help | grep -oE '^ +(-[a-zA-Z], )?--[a-z-]+' | grep -oE -- '--[a-z-]+' | sort -u)
	man=$(grep '^\.It' "$TOP/man/dsec-reap.1" | grep -oE 'Fl \\-[a-z-]+' | sed 's/Fl \\-/--/' | sort -u)
	[ "$help" = "$man" ] || { diff <(echo "$help") <(echo "$man"); false; }
}

@test "reap --all on a run dir that does not exist creates nothing" {
	run env DSEC_RUN="$TESTDIR/no-such-run" dsec-reap --all
	[ "$status" -eq 0 ]
	[ ! -e "$TESTDIR/no-such-run" ]
}

@test "reap removes the per-exec cgroup a killed dsec-exec left behind" {
	id=$(dsec-spawn --image busybox | jq -r .id)
	dsec-exec --timeout 60 "$id" -- sleep 100 &
	pid=$!
	sleep 1
	cg=$(jq -r '.cgroup | if .version == 2 then .path else (.paths.freezer // .paths.pids) end' "$DSEC_RUN/sandboxes/$id/sandbox.json")
	ls -d "$cg"/exec-* >/dev/null || { echo "no per-exec cgroup under $cg"; kill -9 "$pid"; return 1; }
	kill -9 "$pid"
	wait "$pid" || true
	run dsec-reap "$id"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ ! -e "$cg" ] || { echo "left: $(ls -R "$cg")"; return 1; }
}

# Is a process whose command line is exactly "$2" running in sandbox $1? (its own ps)
sb_runs() {
	dsec-exec "$1" -- ps -o args | grep -qx "$2"
}

# Wait up to 5 s for "sb_runs $1 $2" to become false.
sb_stops() {
	local i
	for i in $(seq 50); do
		sb_runs "$1" "$2" || return 0
		sleep 0.1
	done
	return 1
}

@test "reap: kill -9 of dsec-exec: its command dies with it; --orphans ends what a timed one started, not a live one's" {
	id=$(dsec-spawn --image busybox | jq -r .id)
	cg=$(jq -r '.cgroup | if .version == 2 then .path else (.paths.freezer // .paths.pids) end' "$DSEC_RUN/sandboxes/$id/sandbox.json")
	# no timeout (the front's path), a timed one (the full one's), a timed record: each killed
	dsec-exec "$id" -- sh -c 'exec sleep 1001' &
	p1=$!
	dsec-exec --timeout 60 "$id" -- sh -c 'sleep 1002 & exec sleep 1003' &
	p2=$!
	echo "{\"id\":\"$id\"}" | dsec-exec --timeout 60 -- sh -c 'sleep 1004 & exec sleep 1005' >/dev/null &
	p3=$!
	for a in "sleep 1001" "sleep 1003" "sleep 1005"; do
		for i in $(seq 50); do sb_runs "$id" "$a" && break; sleep 0.1; done
		sb_runs "$id" "$a"
	done
	[ "$(find "$cg" -maxdepth 1 -name 'exec-*' | wc -l)" -eq 2 ]
	kill -9 "$p1" "$p2" "$p3"
	wait "$p1" "$p2" "$p3" || true
	for a in "sleep 1001" "sleep 1003" "sleep 1005"; do sb_stops "$id" "$a"; done
	# what the timed ones started in the background outlives them, in their cgroups
	sb_runs "$id" "sleep 1002"
	sb_runs "$id" "sleep 1004"
	# a live dsec-exec's timed command, and a stray exec cgroup whose pid is no process
	dsec-exec --timeout 4 "$id" -- sleep 1006 &
	p4=$!
	for i in $(seq 50); do sb_runs "$id" "sleep 1006" && break; sleep 0.1; done
	stray="$cg/exec-99999999-1"
	mkdir "$stray"
	sleep 1000 &
	sp=$!
	echo "$sp" >"$stray/cgroup.procs"
	run dsec-reap --orphans
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ -z "$output" ] # the sandbox is no orphan
	sb_stops "$id" "sleep 1002"
	sb_stops "$id" "sleep 1004"
	for i in $(seq 50); do gone "$sp" && break; sleep 0.1; done
	gone "$sp"
	[ ! -e "$stray" ]
	sb_runs "$id" "sleep 1006"
	[ "$(find "$cg" -maxdepth 1 -name 'exec-*' | wc -l)" -eq 1 ]
	st=0
	wait "$p4" || st=$?
	[ "$st" -eq 124 ] || { echo "timed exec: $st"; false; }
	[ "$(find "$cg" -maxdepth 1 -name 'exec-*' | wc -l)" -eq 0 ]
	dsec-exec "$id" -- true
}
