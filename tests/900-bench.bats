#!/usr/bin/env bats
# scripts/bench --quick: CI's smoke run. It must print the machine line and the whole table
# and leave nothing behind; it asserts nothing about time.

load helpers
bats_require_minimum_version 1.5.0

BENCH="$TOP/scripts/bench"

setup() {
	dsec_setup
	mkdir -p "$TESTDIR/tmp"
	export TMPDIR="$TESTDIR/tmp"
	# dsec's sandboxes of this test get a cgroup parent of their own (cgroup.h), so that other
	# dsec users on the machine do not blur what this test sees
	export DSEC_CGROUP_PARENT="dsec-t900-$$"
}

teardown() {
	dsec_teardown
	# dsec leaves a parent the user named; it is empty by now
	rmdir /sys/fs/cgroup/*/"$DSEC_CGROUP_PARENT" /sys/fs/cgroup/"$DSEC_CGROUP_PARENT" 2>/dev/null || true
}

# cgroup dirs of the bench: crun's parent dsec-bench-<pid> and all in it, and dsec's sandboxes
# under $DSEC_CGROUP_PARENT
cgroups_of_ours() {
	find /sys/fs/cgroup -maxdepth 4 -type d \( -path '*/dsec-bench-*' -o -path "*/$DSEC_CGROUP_PARENT/*" \) \
		2>/dev/null | sort
}

@test "bench: --help documents every figure; bad usage exits 2" {
	run "$BENCH" --help
	[ "$status" -eq 0 ]
	for w in --quick --root --run --runs import life "exec latency" "spawn at" warm "journal replay" "--net nat" crun bubblewrap; do
		[[ "$output" == *"$w"* ]] || { echo "--help lacks '$w'" >&2; false; }
	done
	run "$BENCH" --bogus
	[ "$status" -eq 2 ]
	[[ "$output" == *"Try 'scripts/bench --help'"* ]]
	run "$BENCH" --runs 0
	[ "$status" -eq 2 ]
}

@test "bench --quick: prints the machine line and the table, leaves nothing behind" {
	local before
	before=$(cgroups_of_ours)
	run --separate-stderr timeout 600 "$BENCH" --quick
	echo "$output"
	echo "$stderr" >&2
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "machine: Linux "*" cores, "*"cgroup "*"bubblewrap "*"crun "* ]]
	[[ "${lines[1]}" =~ ^figure\ +dsec\ +bubblewrap\ +crun\ +ratio ]]
	# every row is there, with a figure or a reason
	local want r
	for want in "reference: host" "import " "life -j 2" "life -j 8" "exec latency" "exec latency, records piped" "spawn" \
		"exec at" "idle memory" "warm: dsec-warm" "warm: claims" "warm: life" \
		"warm: idle memory" "warm: of it, shrinker maps" "warm: exec median" "warm: one dsec-spawn" "warm: " "latency under be load" "resize" "journal replay" "journal on/off" \
		"commit of 10 MB" "reset, no pool" "reset from a warm pool" "fork of" "spawn --net nat vs none" "warm claim --net nat vs none"; do
		r=$(printf '%s\n' "${lines[@]}" | grep -F -- "$want" | head -n 1)
		[ -n "$r" ] || { echo "no row '$want'" >&2; false; }
		[[ "$r" =~ [0-9]|n/a\ \( ]] || { echo "row without a figure or reason: $r" >&2; false; }
	done
	# bubblewrap is installed here, so its column holds rates
	r=$(printf '%s\n' "${lines[@]}" | grep -F "life -j 8")
	[[ "$r" =~ \ [0-9]+/s ]]
	# nothing left: no work dir, mount, process or cgroup of the bench
	[ -z "$(ls -A "$TMPDIR")" ]
	! grep -q "$TMPDIR" /proc/self/mountinfo || false
	! grep -lsa "$TMPDIR/dsec-bench" /proc/[0-9]*/environ /proc/[0-9]*/cmdline || false
	# the network namespace of the net figure is gone too
	! ip netns list | grep -q "^dsec-bench-" || false
	[ "$(cgroups_of_ours)" = "$before" ] || {
		echo "cgroups before: $before" >&2
		echo "cgroups after: $(cgroups_of_ours)" >&2
		false
	}
}

@test "bench: the cgroup parent this file watches is the one dsec uses" {
	command -v dsec-spawn >/dev/null && command -v dsec-layer >/dev/null || skip "dsec-spawn not built"
	"$TOP/scripts/mkimage" -q busybox >/dev/null
	run --separate-stderr dsec-spawn --image busybox
	[ "$status" -eq 0 ]
	[ -n "$(cgroups_of_ours)" ]
	run --separate-stderr dsec-reap --all
	[ "$status" -eq 0 ]
	[ -z "$(cgroups_of_ours)" ]
}

@test "bench: shellcheck-clean, helper builds warning-free" {
	command -v shellcheck >/dev/null || skip "shellcheck not installed"
	run shellcheck -x "$BENCH"
	[ "$status" -eq 0 ]
	cc -O2 -std=gnu11 -Wall -Wextra -Werror -o "$TESTDIR/bench-run" "$TOP/scripts/bench-lib/bench-run.c"
	run "$TESTDIR/bench-run" -j 2 -n 4 -- /bin/false
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^[0-9]+\ 4$ ]]
	run "$TESTDIR/bench-run" -l -n 5 -- sh -c 'exit 0'
	[[ "$output" =~ ^[0-9]+\ [0-9]+\ [0-9]+\ 0$ ]]
}
