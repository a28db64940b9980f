#!/usr/bin/env bats
# dsec-exec --journal: a preempted pipeline started again runs no step twice; torn, unfinished and
# changed steps; --rebuild of a sandbox that is gone; one journal shared by -j and by two runs.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	dsec_setup
	for t in dsec-layer dsec-spawn dsec-exec dsec-reap; do
		[ -x "$TOP/build/$t" ] || skip "$t not built"
	done
	"$TOP/scripts/mkimage" busybox >/dev/null
	J="$TESTDIR/journal"
	BGPIDS=()
}

teardown() {
	local p
	# only what this test started, by pid
	for p in "${BGPIDS[@]}"; do
		kill -9 "$p" 2>/dev/null || true
	done
	dsec_teardown
}

# spawn N sandboxes, their ids on stdout
spawn() {
	dsec-spawn --image busybox -n "$1" | jq -r .id
}

# records: for each sandbox id (args), STEPS steps of trajectory traj-<n>; each step appends its
# name to /tmp/log in the sandbox (the side effect, outside the journal) and prints it with the
# time in ns, so a step run twice is seen in the log and in its output
make_records() {
	local steps=$1 n=0 id
	shift
	for id in "$@"; do
		jq -nc --arg id "$id" --argjson n "$n" --argjson steps "$steps" \
			'range($steps) as $s | {id: $id, traj: "traj-\($n)", step: $s,
			 sh: "echo traj-\($n)/\($s) >>/tmp/log; echo traj-\($n)/\($s) $(date +%s%N)"}'
		n=$((n + 1))
	done
}

done_count() {
	local n
	n=$(grep -c '"t":"done"' "$J" 2>/dev/null) || true
	echo "${n:-0}"
}

@test "journal: 200 steps killed with kill -9 half-way and started again run once each" {
	mapfile -t ids < <(spawn 4)
	[ "${#ids[@]}" -eq 4 ]
	# interleaved, so -j 4 keeps the four sandboxes busy
	make_records 50 "${ids[@]}" | jq -sc 'sort_by(.step) | .[]' >"$TESTDIR/recs"
	[ "$(wc -l <"$TESTDIR/recs")" -eq 200 ]

	# the pipeline: a feeder, dsec-exec, a consumer; each notes its pid
	{ (echo "$BASHPID" >"$TESTDIR/p1" && exec cat "$TESTDIR/recs") |
		(echo "$BASHPID" >"$TESTDIR/p2" && exec dsec-exec --journal "$J" -j 4 2>"$TESTDIR/err1") |
		(echo "$BASHPID" >"$TESTDIR/p3" && exec tee "$TESTDIR/out1" >/dev/null); } &
	last=$!
	for _ in $(seq 100); do
		[ -s "$TESTDIR/p1" ] && [ -s "$TESTDIR/p2" ] && [ -s "$TESTDIR/p3" ] && break
		sleep 0.05
	done
	pids=("$(cat "$TESTDIR/p1")" "$(cat "$TESTDIR/p2")" "$(cat "$TESTDIR/p3")")
	BGPIDS+=("${pids[@]}")
	for _ in $(seq 600); do
		[ "$(done_count)" -ge 100 ] && break
		kill -0 "${pids[1]}" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "${pids[@]}"
	wait "$last" || true
	# dsec-exec is gone (its pid may not be waited for by this shell: poll)
	for _ in $(seq 100); do
		kill -0 "${pids[1]}" 2>/dev/null || break
		sleep 0.05
	done
	n1=$(done_count)
	[ "$n1" -ge 100 ] && [ "$n1" -lt 200 ] || { echo "killed at $n1 done steps"; return 1; }

	run dsec-exec --journal "$J" -j 4 <"$TESTDIR/recs"
	records >"$TESTDIR/out2"
	[ "$(wc -l <"$TESTDIR/out2")" -eq 200 ]
	# the steps in flight at the kill (at most 4) are reported, not run again
	unfinished=$(jq -c 'select(.error.errno == 115) | [.traj, .step]' "$TESTDIR/out2")
	nu=$(printf '%s' "$unfinished" | grep -c . || true)
	[ "$nu" -ge 0 ] && [ "$nu" -le 4 ] || { echo "unfinished: $unfinished"; return 1; }
	[ "$(jq -c 'select(.error and .error.errno != 115)' "$TESTDIR/out2")" = "" ]
	[ "$(jq -c 'select(.exec.replayed)' "$TESTDIR/out2" | wc -l)" -eq "$n1" ]
	[ "$status" -eq $((nu > 0 ? 1 : 0)) ]

	# each step ran at most once; each but the unfinished exactly once
	for id in "${ids[@]}"; do dsec-exec "$id" -- cat /tmp/log; done | sort >"$TESTDIR/log"
	[ "$(uniq -d "$TESTDIR/log")" = "" ] || { echo "ran twice: $(uniq -d "$TESTDIR/log")"; return 1; }
	ran=$(wc -l <"$TESTDIR/log")
	[ "$ran" -ge $((200 - nu)) ] && [ "$ran" -le 200 ] || { echo "ran $ran, $nu unfinished"; return 1; }
	jq -r 'select(.error.errno != 115) | "\(.traj)/\(.step)"' "$TESTDIR/out2" | sort >"$TESTDIR/want"
	[ "$(comm -13 "$TESTDIR/log" "$TESTDIR/want")" = "" ]

	# the records the first run printed come back identical, only marked replayed
	# (a last line the kill cut short is no record)
	jq -R -c 'fromjson? // empty' "$TESTDIR/out1" | sort >"$TESTDIR/first"
	[ "$(wc -l <"$TESTDIR/first")" -ge 90 ]
	jq -c 'select(.exec.replayed) | del(.exec.replayed)' "$TESTDIR/out2" | sort >"$TESTDIR/again"
	[ "$(comm -23 "$TESTDIR/first" "$TESTDIR/again")" = "" ]

	# a third run answers everything that completed from the journal and runs nothing
	run dsec-exec --journal "$J" -j 4 <"$TESTDIR/recs"
	for id in "${ids[@]}"; do dsec-exec "$id" -- cat /tmp/log; done | sort >"$TESTDIR/log3"
	cmp "$TESTDIR/log" "$TESTDIR/log3"
	# every entry of the journal is one whole line
	jq -c . "$J" >/dev/null
}

@test "journal: a torn last line is cut with one warning, its step reported unfinished" {
	id=$(spawn 1)
	make_records 3 "$id" >"$TESTDIR/recs"
	run dsec-exec --journal "$J" <"$TESTDIR/recs"
	[ "$status" -eq 0 ]
	# tear the last entry (the third step's done) in the middle
	size=$(stat -c %s "$J")
	last=$(tail -n 1 "$J" | wc -c)
	truncate -s $((size - last / 2)) "$J"
	run --separate-stderr dsec-exec --journal "$J" <"$TESTDIR/recs"
	[ "$status" -eq 1 ]
	[ "$(grep -c 'torn last entry' <<<"$stderr")" -eq 1 ]
	[ "$(jq -s 'map(select(.exec.replayed)) | length' <<<"$output")" -eq 2 ]
	[ "$(jq -r 'select(.error) | .step' <<<"$output")" = 2 ]
	[[ "$(jq -r 'select(.error) | .error.msg' <<<"$output")" == *"never finished"* ]]
	# cut once: no warning the next time, and the step ran once
	run --separate-stderr dsec-exec --journal "$J" <"$TESTDIR/recs"
	[[ "$stderr" != *torn* ]]
	[ "$(dsec-exec "$id" -- cat /tmp/log | wc -l)" -eq 3 ]
}

@test "journal: an unfinished step is an error record; --rerun-unfinished runs it again" {
	id=$(spawn 1)
	make_records 3 "$id" >"$TESTDIR/recs"
	run dsec-exec --journal "$J" <"$TESTDIR/recs"
	[ "$status" -eq 0 ]
	# a crash after the step's start and before its done: drop the done of step 1
	grep -v '"t":"done","traj":"traj-0","step":1,' "$J" >"$TESTDIR/j2"
	mv "$TESTDIR/j2" "$J"
	run dsec-exec --journal "$J" <"$TESTDIR/recs"
	[ "$status" -eq 1 ]
	r=$(records | jq -c 'select(.step == 1)')
	json_is "$r" .error.errno 115
	json_is "$r" .error.tool dsec-exec
	json_has "$r" '.exec == null'
	[ "$(records | jq -s 'map(select(.exec.replayed)) | length')" -eq 2 ]
	[ "$(dsec-exec "$id" -- cat /tmp/log | wc -l)" -eq 3 ]
	run dsec-exec --journal "$J" --rerun-unfinished <"$TESTDIR/recs"
	[ "$status" -eq 0 ]
	r=$(records | jq -c 'select(.step == 1)')
	json_is "$r" .exec.exit 0
	json_has "$r" '.exec.replayed == null'
	# the user asked for it: the step ran a second time
	[ "$(dsec-exec "$id" -- grep -c traj-0/1 /tmp/log)" -eq 2 ]
	run dsec-exec --journal "$J" <"$TESTDIR/recs"
	[ "$status" -eq 0 ]
	[ "$(records | jq -s 'map(select(.exec.replayed)) | length')" -eq 3 ]
}

@test "journal: the same step with another command is an error record; keys by order without traj/step" {
	id=$(spawn 1)
	printf '{"id":"%s","sh":"echo a >>/tmp/log"}\n{"id":"%s","sh":"echo b >>/tmp/log"}\n' "$id" "$id" >"$TESTDIR/recs"
	run dsec-exec --journal "$J" <"$TESTDIR/recs"
	[ "$status" -eq 0 ]
	[ "$(jq -s --arg id "$id" 'map(select(.t == "start" and .step == 1 and .traj == $id)) | length' "$J")" -eq 1 ]
	printf '{"id":"%s","sh":"echo a >>/tmp/log"}\n{"id":"%s","sh":"echo CHANGED >>/tmp/log"}\n{"id":"%s","sh":"echo c >>/tmp/log"}\n' \
		"$id" "$id" "$id" >"$TESTDIR/recs2"
	run dsec-exec --journal "$J" <"$TESTDIR/recs2"
	[ "$status" -eq 1 ]
	mapfile -t out < <(records)
	json_is "${out[0]}" .exec.replayed true
	json_is "${out[1]}" .error.errno 17
	[[ "$(jq -r .error.msg <<<"${out[1]}")" == *"recorded with another command"*"echo b"* ]]
	json_is "${out[2]}" .exec.exit 0
	[ "$(dsec-exec "$id" -- cat /tmp/log | tr '\n' ,)" = "a,b,c," ]
	# bad keys are error records too
	run dsec-exec --journal "$J" <<<"{\"id\":\"$id\",\"traj\":{},\"sh\":\"true\"}"
	[ "$status" -eq 1 ]
	json_is "$(records)" .error.errno 22
}

@test "journal: --rebuild spawns a new sandbox from the image, replays the steps, reports differences" {
	id=$(spawn 1)
	jq -nc --arg id "$id" '
		{id: $id, traj: "t", sh: "mkdir -p /work && echo hello >/work/a && chown 1234 /work/a"},
		{id: $id, traj: "t", run_as: 1234, sh: "echo world >>/work/a; cat /work/a; id -u"},
		{id: $id, traj: "t", sh: "cat /proc/sys/kernel/random/uuid"},
		{id: $id, traj: "t", sh: "hostname"}' >"$TESTDIR/recs"
	run dsec-exec --journal "$J" <"$TESTDIR/recs"
	[ "$status" -eq 0 ]
	host=$(records | jq -r 'select(.sh == "hostname") | .exec.stdout')
	dsec-reap "$id" >/dev/null
	jq -nc --arg id "$id" '{id: $id, traj: "t", sh: "cat /work/a; hostname"}, {id: $id, traj: "t", sh: "echo again >>/work/a"}' \
		>>"$TESTDIR/recs"

	# without --rebuild: the gone sandbox is an error, as without a journal
	run dsec-exec --journal "$J" <"$TESTDIR/recs"
	[ "$status" -eq 1 ]
	[ "$(records | jq -s 'map(select(.exec.replayed)) | length')" -eq 4 ]
	[ "$(records | jq -s 'map(select(.error.errno == 2)) | length')" -eq 2 ]

	run --separate-stderr dsec-exec --journal "$J" --rebuild <"$TESTDIR/recs"
	[ "$status" -eq 0 ]
	mapfile -t out < <(records)
	[ "${#out[@]}" -eq 6 ]
	r=${out[4]}
	new=$(jq -r .id <<<"$r")
	[ "$new" != "$id" ]
	json_is "$r" .rebuilt_from "$id"
	json_is "$r" .rebuild.from "$id"
	json_is "$r" .rebuild.image busybox
	json_is "$r" .rebuild.steps 4
	# the time differs, nothing else (the hostname is kept)
	json_is "$r" '.rebuild.differ | map("\(.step):\(.fields | join(","))") | join(" ")' "2:stdout"
	[[ "$stderr" == *"step 2"*"differ"* ]]
	json_is "$r" .exec.stdout "$(printf 'hello\nworld\n%s' "$host")"
	json_is "${out[5]}" .id "$new"
	json_has "${out[5]}" '.rebuild == null'
	json_is "${out[5]}" .exec.exit 0
	[ "$(dsec-exec "$new" -- cat /work/a | tr '\n' ,)" = "hello,world,again," ]
	grep -q '"t":"rebuild","from":"'"$id"'","id":"'"$new"'"' "$J"
	grep -q '"t":"sandbox","id":"'"$new"'","root":"'"$id"'","image":"busybox"' "$J"
	# the step run as another user was run again as that user (else step 1 would differ)
	grep -q '"user":"1234"' "$J"

	# started again: everything replayed, the records name the new sandbox
	run dsec-exec --journal "$J" --rebuild <"$TESTDIR/recs"
	[ "$status" -eq 0 ]
	[ "$(records | jq -s 'map(select(.exec.replayed and .id == "'"$new"'" and .rebuilt_from == "'"$id"'")) | length')" -eq 6 ]
	[ "$(dsec-exec "$new" -- cat /work/a | tr '\n' ,)" = "hello,world,again," ]
}

@test "journal: two dsec-exec on one journal take turns; -j 8 entries never interleave" {
	mapfile -t ids < <(spawn 2)
	make_records 40 "${ids[@]}" >"$TESTDIR/recs"
	dsec-exec --journal "$J" -j 8 <"$TESTDIR/recs" >"$TESTDIR/out1" 2>"$TESTDIR/err1" &
	p1=$!
	BGPIDS+=("$p1")
	for _ in $(seq 200); do
		[ -s "$J" ] && break
		sleep 0.02
	done
	run --separate-stderr dsec-exec --journal "$J" -j 8 <"$TESTDIR/recs"
	wait "$p1"
	[ "$status" -eq 0 ]
	# the second waited for the first (or came after it) and ran nothing
	[ "$(records | jq -s 'map(select(.exec.replayed)) | length')" -eq 80 ]
	[ "$(wc -l <"$TESTDIR/out1")" -eq 80 ]
	for id in "${ids[@]}"; do dsec-exec "$id" -- cat /tmp/log; done | sort | uniq -d >"$TESTDIR/dup"
	[ ! -s "$TESTDIR/dup" ]
	[ "$(jq -s 'map(select(.t == "done")) | length' "$J")" -eq 80 ]
	[ "$(jq -s 'map(select(.t == "start")) | length' "$J")" -eq 80 ]
}

@test "journal: options need records and --journal; a file that is not a journal is refused" {
	id=$(spawn 1)
	run dsec-exec --rebuild </dev/null
	[ "$status" -eq 2 ]
	run dsec-exec --rerun-unfinished </dev/null
	[ "$status" -eq 2 ]
	run dsec-exec --journal "$J" "$id" -- true
	[ "$status" -eq 2 ]
	echo '{"id":"x"}' >"$TESTDIR/results.jsonl"
	run dsec-exec --journal "$TESTDIR/results.jsonl" <<<"{\"id\":\"$id\",\"sh\":\"true\"}"
	[ "$status" -eq 3 ]
	[[ "$output" == *"not a dsec journal"* ]]
	[ "$(cat "$TESTDIR/results.jsonl")" = '{"id":"x"}' ]
	run dsec-exec --journal "$TESTDIR" <<<"{\"id\":\"$id\",\"sh\":\"true\"}"
	[ "$status" -eq 3 ]
}

@test "journal: output with NUL bytes is kept, replayed, and read by the next tool" {
	id=$(spawn 1)
	jq -nc --arg id "$id" '{id: $id, traj: "t", step: 0, sh: "printf \u0027a\\000b\u0027"}' >"$TESTDIR/in"
	run dsec-exec --journal "$J" <"$TESTDIR/in"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ "$(records | jq -r '.exec.stdout | explode | map(tostring) | join(",")')" = "97,0,98" ]
	[ "$(grep -c '"t":"done"' "$J")" -eq 1 ]
	# started again: answered from the journal, not run again, the same bytes
	run dsec-exec --journal "$J" <"$TESTDIR/in"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ "$(records | jq -r '.exec.stdout | explode | map(tostring) | join(",")')" = "97,0,98" ]
	[ "$(grep -c '"t":"done"' "$J")" -eq 1 ]
	# the next tool of the pipeline takes the record: the sandbox is reaped
	run bash -c "dsec-exec --journal '$J' <'$TESTDIR/in' | dsec-reap"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	json_is "$(records)" .reaped true
	[ ! -e "$DSEC_RUN/sandboxes/$id" ]
	# anywhere but in "exec", a NUL would be cut short: refused
	run bash -c "jq -nc --arg id '$id' '{id: (\$id + \"\\u0000x\")}' | dsec-reap"
	[ "$status" -eq 1 ]
	[[ "$output" == *'"id": \u0000 is allowed only in "exec" and "stdin"'* ]]
	# binary input: "stdin" with NUL bytes reaches the command whole
	id=$(spawn 1)
	run bash -c "jq -nc --arg id '$id' '{id: \$id, stdin: \"a\\u0000b\", cmd: [\"wc\", \"-c\"]}' | dsec-exec"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ "$(records | jq -r '.exec.stdout | tonumber')" -eq 3 ]
}
