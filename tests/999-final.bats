#!/usr/bin/env bats
# Runs last: nothing of ours survives the suite: no sandbox, mount, cgroup, process or state file.

load helpers

setup() { :; }
teardown() { :; }

@test "no mount of ours is left on the host" {
	run awk '$5 ~ /dsec/ || $4 ~ /dsec/ { print $5 }' /proc/self/mountinfo
	[ -z "$output" ] || { echo "left mounted: $output"; return 1; }
}

@test "no test state dir is left" {
	run bash -c 'ls -d /tmp/dsec-t.* /tmp/dsec-bench.* 2>/dev/null'
	[ -z "$output" ] || { echo "left: $output"; return 1; }
}

@test "the default state dirs were not used by the tests" {
	run bash -c 'ls -A /run/dsec/sandboxes 2>/dev/null'
	[ -z "$output" ] || { echo "left in /run/dsec: $output"; return 1; }
}

@test "no cgroup of ours is left, on v1 or v2" {
	run bash -c 'find /sys/fs/cgroup -mindepth 2 -maxdepth 4 -type d -name "dsec*" 2>/dev/null'
	[ -z "$output" ] || {
		echo "left: $output"
		local d
		for d in $(basename -a $output | sort -u); do
			grep "^$d " "$DSEC_TEST_CACHE/parents.log" 2>/dev/null | sed 's/^/  the run dir of /'
			find /sys/fs/cgroup/*/"$d" -mindepth 1 -maxdepth 1 -type d -printf '  holding %p\n' 2>/dev/null | head -5
		done
		return 1
	}
}

@test "no process of ours is left" {
	local left="" p exe
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		case "$exe" in
		"$TOP"/build/*) left="$left ${p#/proc/}:$exe" ;;
		esac
		case "$(cat "$p/comm" 2>/dev/null)" in
		dsec-*) left="$left ${p#/proc/}:$(cat "$p/comm")" ;;
		esac
	done
	[ -z "$left" ] || { echo "left running:$left"; return 1; }
}
