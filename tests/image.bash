# Images for the sandbox tests, written by hand in the layer store layout of libcommon/store.h
# (so these tests do not depend on dsec-layer). The EROFS file is built once per suite run.
# shellcheck shell=bash

# make_busybox_image [NAME]: a one-layer image NAME (default busybox) in $DSEC_ROOT.
make_busybox_image() {
	local name=${1:-busybox} cache="$DSEC_TEST_CACHE/busybox.erofs" hex tmp
	if [ ! -s "$cache" ]; then
		mkdir -p "$DSEC_TEST_CACHE"
		tmp=$(mktemp "$DSEC_TEST_CACHE/erofs.XXXXXX")
		mkfs.erofs --quiet "$tmp" "$(busybox_tree)" >/dev/null || return 1
		mv "$tmp" "$cache"
	fi
	hex=$(sha256sum "$cache" | cut -c1-64)
	mkdir -p "$DSEC_ROOT/layers/$hex" "$DSEC_ROOT/images"
	cp "$cache" "$DSEC_ROOT/layers/$hex/layer.erofs"
	printf '{"layer":"sha256:%s","kind":"base","name":"busybox","bytes":%s,"files":0,"format":"erofs","created":0}\n' \
		"$hex" "$(stat -c %s "$cache")" >"$DSEC_ROOT/layers/$hex/meta.json"
	printf '{"image":"%s","layers":["sha256:%s"]}\n' "$name" "$hex" >"$DSEC_ROOT/images/$name.json"
}

# make_dir_layer_image NAME DIR: a two-layer image NAME: busybox below, DIR (format "dir") on top.
make_dir_layer_image() {
	local name=$1 dir=$2 base hex
	make_busybox_image base-for-"$name" || return 1
	base=$(jq -r '.layers[0]' "$DSEC_ROOT/images/base-for-$name.json")
	hex=$(printf '%s' "$name$dir" | sha256sum | cut -c1-64)
	mkdir -p "$DSEC_ROOT/layers/$hex"
	cp -a "$dir" "$DSEC_ROOT/layers/$hex/tree"
	printf '{"layer":"sha256:%s","kind":"application","format":"dir","created":0}\n' "$hex" \
		>"$DSEC_ROOT/layers/$hex/meta.json"
	printf '{"image":"%s","layers":["%s","sha256:%s"]}\n' "$name" "$base" "$hex" \
		>"$DSEC_ROOT/images/$name.json"
}

# sb_json ID: the state record of sandbox ID.
sb_json() {
	cat "$DSEC_RUN/sandboxes/$1/sandbox.json"
}

# sb_pid ID: host pid of the holder of sandbox ID.
sb_pid() {
	jq -r .holder.pid "$DSEC_RUN/sandboxes/$1/sandbox.json"
}

# sb_cgroups ID: the sandbox's cgroup dirs (one for v2, one per controller for v1).
sb_cgroups() {
	jq -r '.cgroup.path // empty, (.cgroup.paths // {} | .[])' "$DSEC_RUN/sandboxes/$1/sandbox.json"
}

# sb_cgroup_parents ID: the parent cgroup dirs of this run dir.
sb_cgroup_parents() {
	local d
	for d in $(sb_cgroups "$1"); do dirname "$d"; done
}

# sb_run ID CMD...: run CMD inside sandbox ID (all its namespaces and its cgroups), from the
# host, without dsec-exec: nsenter from util-linux, after moving itself into the cgroups.
# With SB_TIMEOUT set, CMD is killed after that many seconds (timeout(1), exit 124).
sb_run() {
	local id=$1 pid cgs
	shift
	pid=$(sb_pid "$id")
	cgs=$(sb_cgroups "$id" | tr '\n' ' ')
	# shellcheck disable=SC2016
	T=${SB_TIMEOUT:-} bash -c 'for c in $1; do echo $$ >"$c/cgroup.procs" || exit 125; done; shift 2
		if [ -n "$T" ]; then exec timeout -s KILL "$T" nsenter -t "$0" -a -- "$@"; fi
		exec nsenter -t "$0" -a -- "$@"' "$pid" "$cgs" x "$@"
}

# spawn_one [OPTIONS]: spawn one busybox sandbox, set ID and REC.
spawn_one() {
	REC=$(dsec-spawn --image busybox "$@") || return 1
	ID=$(printf '%s\n' "$REC" | jq -r .id)
	[ -n "$ID" ] && [ "$ID" != null ]
}

# Nothing of this run dir left: no state, no cgroup, no holder, no mount under the test dir.
assert_nothing_left() {
	local parents=("$@") p n
	n=$(find "$DSEC_RUN/sandboxes" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	[ "$n" -eq 0 ] || { echo "state left: $(ls "$DSEC_RUN/sandboxes")" >&2; return 1; }
	for p in "${parents[@]}"; do
		[ ! -e "$p" ] || { echo "cgroup left: $p: $(ls "$p")" >&2; return 1; }
	done
	if grep -q " ${TESTDIR}/" /proc/self/mountinfo; then
		echo "mount left: $(grep " ${TESTDIR}/" /proc/self/mountinfo)" >&2
		return 1
	fi
	if holders_of_run | grep -q .; then
		echo "holder left: $(holders_of_run)" >&2
		return 1
	fi
}

# Pids of dsec-holder processes in a cgroup of this run dir.
holders_of_run() {
	local p name
	name=$(run_cgroup_name)
	for p in $(pgrep -x dsec-holder); do
		grep -q "/$name/" "/proc/$p/cgroup" 2>/dev/null && echo "$p"
	done
	return 0
}

# The parent cgroup name dsec uses for $DSEC_RUN: dsec-<FNV-1a 32 of the path>.
run_cgroup_name() {
	local h=2166136261 i c s=$DSEC_RUN
	for ((i = 0; i < ${#s}; i++)); do
		printf -v c '%d' "'${s:i:1}"
		h=$(((h ^ c) * 16777619 & 0xffffffff))
	done
	printf 'dsec-%08x\n' "$h"
}
