# Shared by every bats file: a private state dir per test, JSON assertions, must-fail.
# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # bats sets status/output; PROBE is for the suites

TOP=${DSEC_TEST_TOP:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
export PATH="$TOP/build:$PATH"
PROBE="$TOP/build/tests/probe"
# Images built once per run of the suite and shared read-only by the tests (see images_dir).
DSEC_TEST_CACHE=${DSEC_TEST_CACHE:-$TOP/build/test-cache}

# Each test gets its own root and run dir, so tests never see each other's state.
dsec_setup() {
	TESTDIR=$(mktemp -d /tmp/dsec-t.XXXXXX)
	export DSEC_ROOT="$TESTDIR/root" DSEC_RUN="$TESTDIR/run"
	mkdir -p "$DSEC_ROOT" "$DSEC_RUN"
	dsec_cgroup_dirs >"$TESTDIR/.cgroups-before"
	# which test owned which cgroup parent: 999-final names the test behind a leak
	mkdir -p "$DSEC_TEST_CACHE"
	printf '%s %s: %s\n' "$(cgroup_parent_of "$DSEC_RUN")" "${BATS_TEST_FILENAME##*/}" \
		"${BATS_TEST_DESCRIPTION:-?}" >>"$DSEC_TEST_CACHE/parents.log"
}

# Every cgroup dir of dsec's naming on the host, v1 and v2 (parents are dsec or dsec-*).
dsec_cgroup_dirs() {
	find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -type d -name 'dsec*' 2>/dev/null | sort
}

# Reap whatever the test left, then remove the dir. Runs also when the test failed.
dsec_teardown() {
	[ -n "${TESTDIR:-}" ] && [ -d "$TESTDIR" ] || return 0
	if command -v dsec-reap >/dev/null && [ -d "$DSEC_RUN" ]; then
		timeout 60 dsec-reap -q --all >/dev/null 2>&1 || true
	fi
	# the last reap removes the run dir's cgroup parent: a test that leaves it fails here
	local leak="" d
	if [ -z "${DSEC_CGROUP_PARENT:-}" ]; then
		for d in /sys/fs/cgroup/*/"$(cgroup_parent_of "$DSEC_RUN")" /sys/fs/cgroup/"$(cgroup_parent_of "$DSEC_RUN")"; do
			[ -d "$d" ] || continue
			leak="$leak $d"
			rmdir "$d" 2>/dev/null || true
		done
	fi
	# any other dsec cgroup that appeared during the test (another run dir it used, or a
	# process of it that outlived it) is a leak too; the bench's own parents it removes itself
	for d in $(comm -13 "$TESTDIR/.cgroups-before" <(dsec_cgroup_dirs)); do
		case "$d" in
		*/"${DSEC_CGROUP_PARENT:-/}" | */dsec-bench-*) continue ;;
		esac
		leak="$leak $d($(find "$d" -mindepth 1 -maxdepth 1 -type d -printf '%f ' 2>/dev/null | head -c 200))"
	done
	# unmount anything of ours still mounted under the test dir, deepest first
	local m
	while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done < <(awk -v d="$TESTDIR" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
	rm -rf "$TESTDIR"
	[ -z "$leak" ] || { echo "teardown: cgroup parent left behind:$leak" >&2; return 1; }
}

# The cgroup parent dsec uses for a run dir (cgroup.c: FNV-1a of the path).
cgroup_parent_of() {
	local s=$1 h=2166136261 i c
	for ((i = 0; i < ${#s}; i++)); do
		printf -v c '%d' "'${s:i:1}"
		h=$(((h ^ c) * 16777619 & 0xffffffff))
	done
	printf 'dsec-%08x\n' "$h"
}

setup() { dsec_setup; }
teardown() { dsec_teardown; }

# Run a command that must fail cleanly: non-zero, but not a crash (exit > 128 is a signal).
must_fail() {
	run "$@"
	if [ "$status" -eq 0 ]; then
		echo "expected failure, got success: $*" >&2
		echo "$output" >&2
		return 1
	fi
	if [ "$status" -gt 128 ]; then
		echo "crashed with status $status: $*" >&2
		echo "$output" >&2
		return 1
	fi
}

# json_is JSON FILTER EXPECTED: jq -r FILTER on JSON must print EXPECTED.
json_is() {
	local got
	got=$(printf '%s\n' "$1" | jq -r "$2") || {
		echo "not JSON or bad filter '$2': $1" >&2
		return 1
	}
	if [ "$got" != "$3" ]; then
		echo "jq '$2': expected '$3', got '$got'" >&2
		echo "in: $1" >&2
		return 1
	fi
}

# json_has JSON FILTER: jq -e FILTER on JSON must be true.
json_has() {
	printf '%s\n' "$1" | jq -e "$2" >/dev/null || {
		echo "jq -e '$2' is false on: $1" >&2
		return 1
	}
}

# Lines of output that are JSON records (stdout), regardless of what stderr added.
records() {
	printf '%s\n' "$output" | grep '^{' || true
}

# A busybox rootfs tree (static busybox + applet links) made once per suite run.
busybox_tree() {
	local d="$DSEC_TEST_CACHE/busybox-tree"
	if [ ! -x "$d/bin/busybox" ]; then
		mkdir -p "$DSEC_TEST_CACHE"
		local tmp
		tmp=$(mktemp -d "$DSEC_TEST_CACHE/tree.XXXXXX")
		mkdir -p "$tmp/bin" "$tmp/etc" "$tmp/tmp" "$tmp/root" "$tmp/proc" "$tmp/dev" "$tmp/sys"
		cp /bin/busybox "$tmp/bin/busybox"
		local a
		for a in $(/bin/busybox --list); do
			[ "$a" = busybox ] || ln -s busybox "$tmp/bin/$a"
		done
		echo 'root:x:0:0:root:/root:/bin/sh' >"$tmp/etc/passwd"
		echo 'root:x:0:' >"$tmp/etc/group"
		chmod 1777 "$tmp/tmp"
		rm -rf "$d"
		mv "$tmp" "$d" 2>/dev/null || rm -rf "$tmp"
	fi
	echo "$d"
}

# gone PID: the process has exited (a zombie waiting for init counts: init reaps an orphaned
# holder when it gets to it, which here can take seconds; so does a pid whose /proc entry
# vanished while we looked).
gone() {
	! kill -0 "$1" 2>/dev/null || grep -qs '^State:.*Z' "/proc/$1/status" || [ ! -e "/proc/$1" ]
}
