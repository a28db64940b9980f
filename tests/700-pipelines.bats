#!/usr/bin/env bats
# Whole pipelines: spawn | exec | reap over many sandboxes, a user key surviving to the end.

load helpers

setup() {
	dsec_setup
	for t in dsec-layer dsec-spawn dsec-exec dsec-reap dsec-ps; do
		[ -x "$TOP/build/$t" ] || skip "$t not built"
	done
	"$TOP/scripts/mkimage" busybox >/dev/null
}

@test "100 sandboxes: spawn | exec | reap, the task key survives, each sandbox is its own" {
	seq 100 | jq -c '{image: "busybox", task: .}' >"$TESTDIR/specs"
	run bash -c "dsec-spawn <'$TESTDIR/specs' | dsec-exec -j 8 -- sh -c 'hostname; echo \$\$ >/tmp/mine; ls /tmp' | tee '$TESTDIR/results' | dsec-reap"
	[ "$status" -eq 0 ] || { echo "$output" | tail -5; return 1; }
	[ "$(records | jq -s 'map(select(.reaped == true)) | length')" = 100 ]
	[ "$(records | jq -s 'map(.task) | unique | length')" = 100 ]
	r=$(cat "$TESTDIR/results")
	[ "$(jq -s 'map(select(.exec.exit == 0)) | length' <<<"$r")" = 100 ]
	# every sandbox had its own hostname and saw only its own file in /tmp
	[ "$(jq -s 'map(.exec.stdout | split("\n")[0]) | unique | length' <<<"$r")" = 100 ]
	[ "$(jq -s 'map(select(.exec.stdout | split("\n")[1] == "mine")) | length' <<<"$r")" = 100 ]
	run dsec-ps
	[ -z "$(records)" ] || { echo "left: $output"; return 1; }
}

@test "a failed spawn in the middle of a stream: error record, the rest goes on, reap passes it" {
	printf '%s\n' '{"image":"busybox","task":"a"}' '{"image":"no-such-image","task":"b"}' \
		'{"image":"busybox","task":"c"}' >"$TESTDIR/specs"
	# dsec-spawn says so in its status (1); the tools downstream pass the error record on
	run bash -c "set -o pipefail; dsec-spawn <'$TESTDIR/specs' 2>/dev/null | dsec-exec -- /bin/true 2>/dev/null | dsec-reap 2>/dev/null"
	[ "$status" -eq 1 ]
	[ "$(records | jq -r -s 'map(.task) | join(",")')" = "a,b,c" ]
	[ "$(records | jq -r -s 'map(select(.error)) | .[0].task')" = "b" ]
	[ "$(records | jq -r -s 'map(select(.error)) | .[0].error.tool')" = "dsec-spawn" ]
	[ "$(records | jq -s 'map(select(.reaped == true)) | length')" = 2 ]
}

@test "a tool started with stdin, stdout or stderr closed: records and messages go nowhere else" {
	# the run dir's lock (or any file) must not take fd 1 or 2: a spawn that cannot print its
	# record removes the sandbox and exits 3, saying so once on stderr
	run bash -c 'dsec-spawn --image busybox >&-'
	[ "$status" -eq 3 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" == "dsec-spawn: error: write to stdout"* ]]
	[ -z "$(ls "$DSEC_RUN/sandboxes")" ]
	run bash -c 'dsec-spawn --image busybox 2>&-'
	[ "$status" -eq 0 ]
	id=$(records | jq -r .id)
	[ -n "$(ls "$DSEC_RUN/sandboxes")" ]
	! grep -q . "$DSEC_RUN/lock"
	# reap with stdin closed reads no records (it reaps nothing); by id with stdout closed it
	# reaps and exits 3
	run bash -c 'dsec-reap <&-'
	[ "$status" -eq 0 ]
	[ -d "$DSEC_RUN/sandboxes/$id" ]
	run bash -c "dsec-reap $id >&-"
	[ "$status" -eq 3 ]
	[ ! -e "$DSEC_RUN/sandboxes/$id" ]
	# records mode: results that cannot be written are a failure, not lost with exit 0
	id=$(dsec-spawn --image busybox | jq -r .id)
	run bash -c "echo '{\"id\":\"$id\"}' | dsec-exec -- echo hi >&-"
	[ "$status" -eq 3 ]
	# foreground: the command finds stdout closed too
	run bash -c "dsec-exec $id -- sh -c 'echo hi || echo closed >&2' >&-"
	[ "$status" -eq 0 ]
	[[ "$output" == *closed ]]
	! grep -q . "$DSEC_RUN/lock"
	dsec-reap "$id" >/dev/null
}
