#!/usr/bin/env bats
# dsec-warm and claims from warm pools by dsec-spawn.

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
}

# ready_count: the "ready" of the one pool of the run dir (0 when there is none).
ready_count() {
	local n
	n=$(dsec-warm --list | jq -s 'map(.ready) | add // 0')
	echo "$n"
}

# ready_ids: the ids in the pool's ready dir, sorted.
ready_ids() {
	ls "$DSEC_RUN"/pools/*/ready 2>/dev/null | grep '^sb-' | sort || true
}

# sb_state ID: the sandbox's state as dsec_sandbox_load sees it (claim.json over sandbox.json).
sb_state() {
	local d="$DSEC_RUN/sandboxes/$1"
	if [ -f "$d/claim.json" ]; then
		jq -cs '.[0] * .[1]' "$d/sandbox.json" "$d/claim.json"
	else
		jq -c . "$d/sandbox.json"
	fi
}

# cg_read ID CTRL FILE: a file of the sandbox's cgroup (v1: CTRL's dir; v2: the one dir).
cg_read() {
	local j="$DSEC_RUN/sandboxes/$1/sandbox.json" dir
	if [ "$(jq -r .cgroup.version "$j")" = 2 ]; then
		dir=$(jq -r .cgroup.path "$j")
	else
		dir=$(jq -r ".cgroup.paths.$2" "$j")
	fi
	cat "$dir/$3"
}

@test "warm: prints a record per sandbox made and fills the pool" {
	run dsec-warm --image busybox --count 4
	[ "$status" -eq 0 ]
	[ "$(records | wc -l)" -eq 4 ]
	rec=$(records | head -1)
	json_has "$rec" '.id | test("^sb-[0-9a-f]{12}$")'
	json_is "$rec" .image busybox
	json_is "$rec" .warm true
	json_has "$rec" '.pool | test("^p-[0-9a-f]{16}$")'
	json_is "$rec" .limits.memory 1073741824
	[ "$(records | jq -r .id | sort -u | wc -l)" -eq 4 ]
	[ "$(ready_count)" -eq 4 ]
	[ "$(records | jq -r .id | sort | tr '\n' ' ')" = "$(ready_ids | tr '\n' ' ')" ]
	# each is a live sandbox with its holder, not pending, and no TTL while it waits
	for id in $(records | jq -r .id); do
		kill -0 "$(jq -r .holder.pid "$DSEC_RUN/sandboxes/$id/sandbox.json")"
		[ "$(stat -c %a "$DSEC_RUN/sandboxes/$id/sandbox.json")" = 600 ] # committed
		json_is "$(cat "$DSEC_RUN/sandboxes/$id/sandbox.json")" .ttl_us 0
	done
	# quiet unless -v
	run dsec-warm --image busybox --count 4 -v
	[[ "$output" == *"4 ready"* ]]
}

@test "warm: idempotent, a second run makes nothing" {
	dsec-warm --image busybox --count 3 >/dev/null
	run dsec-warm --image busybox --count 3
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[ "$(ready_count)" -eq 3 ]
	# a larger count tops up by the difference only
	run dsec-warm --image busybox --count 5
	[ "$(records | wc -l)" -eq 2 ]
	[ "$(ready_count)" -eq 5 ]
}

@test "warm: concurrent runs on one pool do not overfill it" {
	for i in 1 2 3 4; do
		dsec-warm --image busybox --count 6 -j 2 >"$TESTDIR/out.$i" &
	done
	wait
	# a busy pool makes the others exit 0 at once; --wait ones then find it full
	dsec-warm --image busybox --count 6 --wait >"$TESTDIR/out.5"
	[ "$(ready_count)" -eq 6 ]
	[ "$(cat "$TESTDIR"/out.* | wc -l)" -eq 6 ]
	[ "$(ls "$DSEC_RUN/sandboxes" | wc -l)" -eq 6 ]
}

@test "warm: --wait waits for the run holding the pool's lock" {
	dsec-warm --image busybox --count 1 >/dev/null
	lockf=$(echo "$DSEC_RUN"/pools/*/lock)
	# hold the lock for a second; without --wait the run exits 0 at once and makes nothing
	flock "$lockf" sleep 1 &
	sleep 0.2
	run dsec-warm --image busybox --count 2
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	t0=$(date +%s%N)
	run dsec-warm --image busybox --count 2 --wait
	[ "$status" -eq 0 ]
	[ "$(records | wc -l)" -eq 1 ]
	[ $(($(date +%s%N) - t0)) -gt 500000000 ]
	wait
}

@test "warm: --wait=D bounds the wait for the pool's lock, naming its holder; --drain waits for the run at work" {
	local holder t0
	dsec-warm --image busybox --count 2 >/dev/null
	lockf=$(echo "$DSEC_RUN"/pools/*/lock)
	flock "$lockf" sleep 4 &
	holder=$!
	sleep 0.2
	# bounded: gives up after D, exit 0 as for a run that does not wait, and says who holds it
	t0=$(date +%s%N)
	run dsec-warm --image busybox --count 3 --wait=1.5s
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ $(($(date +%s%N) - t0)) -lt 3500000000 ] || { echo "waited too long"; return 1; }
	[[ "$output" == *"waiting for pool "*"held by pid $holder (flock)"* ]] || { echo "$output"; return 1; }
	[[ "$output" == *"gave up waiting"* ]] || { echo "$output"; return 1; }
	[ "$(records | wc -l)" -eq 0 ]
	# a drain bounded too short fails and leaves the pool as it is
	run dsec-warm --image busybox --drain --wait=0.3s
	[ "$status" -eq 1 ] || { echo "drain --wait: $output ($status)"; return 1; }
	[[ "$output" == *"is busy, held by pid $holder"* ]] || { echo "$output"; return 1; }
	[ "$(ready_count)" -eq 2 ]
	# without --wait it waits for the run at work, then drains
	run dsec-warm --image busybox --drain
	[ "$status" -eq 0 ] || { echo "drain: $output ($status)"; return 1; }
	[ "$(records | jq -r 'select(.reaped) | .id' | wc -l)" -eq 2 ]
	[ "$(ready_count)" -eq 0 ]
	wait
}

@test "warm: --drain reaps the ready sandboxes and removes the pool" {
	run dsec-warm --image busybox --count 3
	ids=$(records | jq -r .id | sort)
	pids=$(for id in $ids; do jq -r .holder.pid "$DSEC_RUN/sandboxes/$id/sandbox.json"; done)
	run dsec-warm --image busybox --drain
	[ "$status" -eq 0 ]
	[ "$(records | jq -r 'select(.reaped) | .id' | sort)" = "$ids" ]
	[ "$(ready_count)" -eq 0 ]
	[ ! -e "$DSEC_RUN/pools/$(records | jq -r .pool | head -1)" ]
	for id in $ids; do [ ! -e "$DSEC_RUN/sandboxes/$id" ]; done
	for p in $pids; do gone "$p"; done
}

@test "warm: --max-age recycles ready sandboxes older than D" {
	run dsec-warm --image busybox --count 2
	old=$(records | jq -r .id | sort)
	sleep 1.2
	# young enough: kept
	run dsec-warm --image busybox --count 2 --max-age 1h
	[ -z "$output" ]
	run dsec-warm --image busybox --count 2 --max-age 1s
	[ "$status" -eq 0 ]
	[ "$(records | wc -l)" -eq 2 ]
	new=$(ready_ids)
	[ "$new" = "$(records | jq -r .id | sort)" ]
	for id in $old; do
		[ ! -e "$DSEC_RUN/sandboxes/$id" ]
		! grep -qx "$id" <<<"$new" || false
	done
}

@test "warm: --max-total and --min-free refuse to grow, with one clear message" {
	dsec-spawn --image busybox >/dev/null # a claimed-elsewhere sandbox counts too
	run dsec-warm --image busybox --count 4 --max-total 3
	[ "$status" -eq 1 ]
	[ "$(records | wc -l)" -eq 2 ]
	[ "$(grep -c 'error:' <<<"$output")" -eq 1 ]
	[[ "$output" == *"--max-total 3 reached"* ]]
	[ "$(ready_count)" -eq 2 ]
	run dsec-warm --image busybox --count 4 --min-free 900T
	[ "$status" -eq 1 ]
	[ "$(records | wc -l)" -eq 0 ]
	[[ "$output" == *"MemAvailable"*"--min-free 900T"* ]]
	[ "$(ready_count)" -eq 2 ]
}

@test "warm: an unknown image is one error and one error record, and leaves no pool" {
	run dsec-warm --image nosuch --count 50 -j 4
	[ "$status" -eq 1 ]
	[ "$(grep -c 'error:' <<<"$output")" -eq 1 ]
	[[ "$output" == *"image 'nosuch': no such image"* ]]
	[ "$(records | wc -l)" -eq 1 ]
	json_is "$(records)" .image nosuch
	json_is "$(records)" .error.errno 2
	[ -z "$(ls -A "$DSEC_RUN/pools" 2>/dev/null)" ]
	[ "$(dsec-warm --list | wc -l)" -eq 0 ]
	# a run that could make nothing (the node full) leaves no empty pool either
	run dsec-warm --image busybox --count 2 --min-free 900T
	[ "$status" -eq 1 ]
	[ "$(dsec-warm --list | wc -l)" -eq 0 ]
}

@test "claim: dsec-spawn takes warm sandboxes first, cold when the pool is empty" {
	run dsec-warm --image busybox --count 2
	pool=$(records | jq -r .id | sort)
	run dsec-spawn --image busybox -n 3
	[ "$status" -eq 0 ]
	[ "$(records | jq -r 'select(.warm) | .id' | sort)" = "$pool" ]
	[ "$(records | jq -r 'select(.warm | not) | .id' | wc -l)" -eq 1 ]
	[ "$(ready_count)" -eq 0 ]
	id=$(records | head -1 | jq -r .id)
	json_is "$(sb_state "$id")" .warm true
	json_is "$(sb_state "$id")" .ttl_us 3600000000
	[ "$(stat -c %a "$DSEC_RUN/sandboxes/$id/sandbox.json")" = 600 ] # committed, not pending
	# a claimed sandbox is a sandbox like any other: the reaper takes it
	run dsec-reap "$id"
	[ "$status" -eq 0 ]
	[ ! -e "$DSEC_RUN/sandboxes/$id" ]
}

@test "claim: a different disk or net, or a hostname, does not match the pool" {
	dsec-warm --image busybox --count 1 >/dev/null
	run dsec-spawn --image busybox --disk 64M
	json_is "$(records)" .warm false
	run dsec-spawn --image busybox --net host
	json_is "$(records)" .warm false
	run dsec-spawn --image busybox --hostname box1
	json_is "$(records)" .warm false
	[ "$(ready_count)" -eq 1 ]
}

@test "claim: limits that differ from the pool's are applied at claim time" {
	dsec-warm --image busybox --count 1 >/dev/null
	run dsec-spawn --image busybox --memory 256M --pids 100 --cpus 0.5 --ttl 10m
	[ "$status" -eq 0 ]
	rec=$(records)
	json_is "$rec" .warm true
	json_is "$rec" .limits.memory 268435456
	json_is "$rec" .limits.pids 100
	json_is "$rec" .ttl 600
	id=$(jq -r .id <<<"$rec")
	if [ "$(jq -r .cgroup.version "$DSEC_RUN/sandboxes/$id/sandbox.json")" = 2 ]; then
		[ "$(cg_read "$id" memory memory.max)" = 268435456 ]
		[ "$(cg_read "$id" cpu cpu.max)" = "50000 100000" ]
	else
		[ "$(cg_read "$id" memory memory.limit_in_bytes)" = 268435456 ]
		[ "$(cg_read "$id" cpu cpu.cfs_quota_us)" = 50000 ]
	fi
	[ "$(cg_read "$id" pids pids.max)" = 100 ]
	json_is "$(sb_state "$id")" .limits.memory 268435456
}

@test "claim: --warm-only with an empty pool gives an error record" {
	run dsec-spawn --image busybox --warm-only
	[ "$status" -eq 1 ]
	rec=$(records)
	json_is "$rec" .error.tool dsec-spawn
	json_has "$rec" '.error.msg | test("warm-only")'
	json_has "$rec" '.id == null'
	[ ! -d "$DSEC_RUN/sandboxes" ] || [ -z "$(ls "$DSEC_RUN/sandboxes")" ]
	dsec-warm --image busybox --count 1 >/dev/null
	run dsec-spawn --image busybox --warm-only -n 2
	[ "$status" -eq 1 ]
	[ "$(records | jq -r 'select(.warm) | .id' | wc -l)" -eq 1 ]
	[ "$(records | jq -r 'select(.error) | .error.tool' | wc -l)" -eq 1 ]
}

@test "claim: a request above its limit is refused before a claim, and costs the pool nothing" {
	dsec-warm --image busybox --count 1 >/dev/null
	[ "$(ready_count)" -eq 1 ]
	for bad in "--cpu-request 2 --cpus 1" "--memory-request 2G --memory 1G" "--pids-request 100 --pids 50"; do
		# shellcheck disable=SC2086
		run dsec-spawn --image busybox $bad
		[ "$status" -eq 1 ] || { echo "$bad: $status $output"; return 1; }
		json_has "$(records)" '.error.msg | test("is above the")'
		[ "$(ready_count)" -eq 1 ] || { echo "$bad: the pool lost its sandbox"; return 1; }
	done
}

@test "claim: 8 concurrent dsec-spawn on one pool get every sandbox exactly once" {
	# the issue's figure is 8 x 125 on 1,000; 8 x 25 on 200 keeps this file fast on 2 cores
	per=${DSEC_TEST_CLAIM_PER:-25}
	total=$((per * 8))
	dsec-warm --image busybox --count "$total" -j 8 >"$TESTDIR/pool.jsonl"
	[ "$(wc -l <"$TESTDIR/pool.jsonl")" -eq "$total" ]
	for i in 1 2 3 4 5 6 7 8; do
		dsec-spawn --image busybox -n "$per" --warm-only >"$TESTDIR/claim.$i" &
	done
	wait
	cat "$TESTDIR"/claim.* >"$TESTDIR/claims.jsonl"
	[ "$(wc -l <"$TESTDIR/claims.jsonl")" -eq "$total" ]
	[ "$(jq -r 'select(.error)' "$TESTDIR/claims.jsonl" | wc -l)" -eq 0 ]
	[ "$(jq -r 'select(.warm) | .id' "$TESTDIR/claims.jsonl" | sort -u | wc -l)" -eq "$total" ]
	# the union of claimed ids is exactly the pool's ids, and nothing is left ready
	diff <(jq -r .id "$TESTDIR/pool.jsonl" | sort) <(jq -r .id "$TESTDIR/claims.jsonl" | sort)
	[ "$(ready_count)" -eq 0 ]
	[ "$(ls "$DSEC_RUN/sandboxes" | wc -l)" -eq "$total" ]
}

@test "warm: a kill -9 of dsec-warm stops its workers; the lock is free, --orphans takes the rest" {
	dsec-warm --image busybox --count 400 -j 4 >/dev/null 2>&1 &
	local w=$! i
	for ((i = 0; i < 200; i++)); do
		[ "$(ls "$DSEC_RUN"/pools/*/ready 2>/dev/null | grep -c '^sb-')" -ge 8 ] && break
		sleep 0.05
	done
	kill -9 "$w"
	wait "$w" || true
	sleep 0.5
	local n1 n2
	n1=$(ready_ids | wc -l)
	sleep 1.5
	n2=$(ready_ids | wc -l)
	# no worker went on filling the pool after its parent died
	[ "$n1" -eq "$n2" ] || { echo "pool grew $n1 -> $n2 after the kill"; return 1; }
	[ "$n1" -lt 400 ]
	# and none holds the pool's lock: a run that does not wait gets it
	run timeout 30 dsec-warm --image busybox --count "$((n1 + 1))"
	[ "$status" -eq 0 ]
	run dsec-reap --orphans
	[ "$status" -eq 0 ]
	run dsec-reap --all
	[ "$status" -eq 0 ]
	[ ! -d "$DSEC_RUN/sandboxes" ] || [ -z "$(ls "$DSEC_RUN/sandboxes")" ]
}

@test "reap --all removes pool sandboxes and the pools; nothing left behind" {
	run dsec-warm --image busybox --count 3
	pids=$(for id in $(records | jq -r .id); do
		jq -r .holder.pid "$DSEC_RUN/sandboxes/$id/sandbox.json"
	done)
	run dsec-reap --all
	[ "$status" -eq 0 ]
	[ "$(records | jq -r 'select(.reaped) | .id' | wc -l)" -eq 3 ]
	[ ! -e "$DSEC_RUN/pools" ]
	[ ! -d "$DSEC_RUN/sandboxes" ] || [ -z "$(ls "$DSEC_RUN/sandboxes")" ]
	for p in $pids; do gone "$p"; done
	! grep -q "$TESTDIR" /proc/self/mountinfo || false
	run dsec-warm --list
	[ -z "$output" ]
}

@test "progress: dsec-warm, dsec-spawn -n and dsec-reap --all show a line on a terminal while their records go elsewhere" {
	# shows LINE CMD: CMD, on a terminal with its records to $TESTDIR/out, succeeds and shows
	# a progress line matching LINE
	shows() {
		run script -qec "$2 >$TESTDIR/out" /dev/null
		[ "$status" -eq 0 ] || return 1
		[[ "$output" == *$1* ]] || { echo "$output" | tail -c 300; return 1; }
	}
	# a line shows once a run has taken a second: 1,200 sandboxes each, one at a time
	shows "dsec-warm: *of 1200 sandboxes made" "dsec-warm --image busybox --count 1200 -j 1"
	[ "$(wc -l <"$TESTDIR/out")" -eq 1200 ]
	shows "dsec-spawn: *of 1200 sandboxes" "dsec-spawn --image busybox --disk 512M -n 1200 -j 1"
	[ "$(jq -c 'select(.warm == false)' "$TESTDIR/out" | wc -l)" -eq 1200 ]
	shows "dsec-reap: * sandboxes reaped" "dsec-reap --all"
	[ "$(wc -l <"$TESTDIR/out")" -eq 2400 ]
	# records on the terminal are their own progress; no terminal, no line
	run script -qec "dsec-warm --image busybox --count 1200 -j 1" /dev/null
	[ "$status" -eq 0 ]
	[[ "$output" != *"sandboxes made"* ]]
	[ "$(grep -c '"warm":true' <<<"$output")" -eq 1200 ]
	dsec-reap --all >/dev/null 2>"$TESTDIR/err"
	[ ! -s "$TESTDIR/err" ]
}

@test "warm: bad options are usage errors" {
	must_fail dsec-warm --count 2
	[ "$status" -eq 2 ]
	must_fail dsec-warm --image busybox
	[ "$status" -eq 2 ]
	must_fail dsec-warm --image busybox --count -1
	[ "$status" -eq 2 ]
	must_fail dsec-warm --image busybox --count 2 --drain
	[ "$status" -eq 2 ]
	must_fail dsec-warm --image busybox --count 2 --max-age soon
	[ "$status" -eq 2 ]
	must_fail dsec-warm --image busybox --count 2 --net bridge
	[ "$status" -eq 2 ]
}

@test "ps: --pools lists each pool with its ready count; a ready sandbox names its pool, a claimed one shows warm" {
	dsec-warm --image busybox --count 2 >/dev/null
	dsec-warm --image busybox --count 1 --memory 256M >/dev/null
	run dsec-ps --pools
	[ "$status" -eq 0 ]
	[ "$(records | wc -l)" -eq 2 ]
	json_is "$(records | jq -c 'select(.limits.memory == 1073741824)')" .ready 2
	json_is "$(records | jq -c 'select(.limits.memory == 268435456)')" .ready 1
	json_is "$(records | head -1)" .image busybox
	# the exact profile's pool first
	run dsec-spawn --image busybox --memory 256M
	id=$(records | jq -r .id)
	json_is "$(dsec-ps --pools | jq -c 'select(.limits.memory == 268435456)')" .ready 0
	run dsec-ps "$id"
	json_is "$(records)" .warm true
	json_is "$(records)" .state running
	json_has "$(records)" '.pool == null'
	# the ones still ready name their pool, in a listing and by id
	key=$(dsec-ps --pools | jq -r 'select(.limits.memory == 1073741824) | .pool')
	run dsec-ps
	[ "$(records | jq -r --arg k "$key" 'select(.pool == $k) | .id' | sort | tr '\n' ' ')" = "$(ls "$DSEC_RUN/pools/$key/ready" | sort | tr '\n' ' ')" ]
	[ "$(records | jq -c 'select(.pool != null)' | wc -l)" -eq 2 ]
	run dsec-ps "$(ls "$DSEC_RUN/pools/$key/ready" | head -n 1)"
	json_is "$(records)" .pool "$key"
	json_is "$(records)" .warm false
}

@test "ps --pools: a ready sandbox reaped by id no longer counts as ready" {
	dsec-warm --image busybox --count 2 >"$TESTDIR/made"
	[ "$(ready_count)" -eq 2 ]
	dsec-reap "$(head -n 1 "$TESTDIR/made" | jq -r .id)" >/dev/null
	[ "$(ready_count)" -eq 1 ]
	[ "$(dsec-ps --pools | jq -r .ready)" -eq 1 ]
}
