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
	run bash -c "dsec-spawn <'$TESTDIR/specs' 2>/dev/null | dsec-exec -- /bin/true 2>/dev/null | dsec-reap 2>/dev/null"
	[ "$status" -eq 1 ]
	[ "$(records | jq -r -s 'map(.task) | join(",")')" = "a,b,c" ]
	[ "$(records | jq -r -s 'map(select(.error)) | .[0].task')" = "b" ]
	[ "$(records | jq -r -s 'map(select(.error)) | .[0].error.tool')" = "dsec-spawn" ]
	[ "$(records | jq -s 'map(select(.reaped == true)) | length')" = 2 ]
}
