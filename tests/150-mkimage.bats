#!/usr/bin/env bats
# scripts/mkimage: the built-in images, made from Debian packages only.

load helpers
bats_require_minimum_version 1.5.0

MKIMAGE="$TOP/scripts/mkimage"

need_layer() {
	command -v dsec-layer >/dev/null || skip "dsec-layer not built"
}

# Nothing of mkimage's may stay in its temp dir or mounted, whatever happened.
no_leftovers() {
	local left
	left=$(ls -A "$TESTDIR/tmp")
	[ -z "$left" ] || { echo "left in TMPDIR: $left" >&2; return 1; }
	! grep -q "$TESTDIR/tmp" /proc/self/mountinfo || { echo "mount left under $TESTDIR/tmp" >&2; return 1; }
}

setup() {
	dsec_setup
	mkdir -p "$TESTDIR/tmp"
	export TMPDIR="$TESTDIR/tmp"
}

@test "mkimage: usage errors exit 2, --help exits 0" {
	run "$MKIMAGE" --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"busybox|debian"* ]]
	run "$MKIMAGE"
	[ "$status" -eq 2 ]
	run "$MKIMAGE" alpine
	[ "$status" -eq 2 ]
	[[ "$output" == *"unknown argument 'alpine'"* ]]
	run "$MKIMAGE" debian --tree "$TESTDIR/x"
	[ "$status" -eq 2 ]
	run "$MKIMAGE" busybox --name
	[ "$status" -eq 2 ]
	[ ! -e "$TESTDIR/x" ]
}

@test "mkimage: busybox rootfs tree has what a sandbox needs" {
	local t="$TESTDIR/tree"
	run "$MKIMAGE" busybox --tree "$t"
	[ "$status" -eq 0 ]
	[ -x "$t/bin/busybox" ]
	cmp /bin/busybox "$t/bin/busybox"
	[ "$(readlink "$t/bin/sh")" = /bin/busybox ]
	[ -L "$t/usr/bin/env" ]
	[ "$(stat -c %a "$t/tmp")" = 1777 ]
	[ "$(stat -c %a "$t/root")" = 700 ]
	for d in proc dev sys; do
		[ -d "$t/$d" ]
		[ -z "$(ls -A "$t/$d")" ]
	done
	grep -qx 'root:x:0:0:root:/root:/bin/sh' "$t/etc/passwd"
	grep -q '^root:x:0:' "$t/etc/group"
	[ ! -e "$t/linuxrc" ]
	# it runs: the applets resolve inside the new root
	run chroot "$t" /bin/sh -c 'id -un; ls /bin/sh; echo ok'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = root ]
	[ "${lines[2]}" = ok ]
	no_leftovers
}

@test "mkimage: --tree refuses a non-empty dir" {
	mkdir -p "$TESTDIR/full"
	touch "$TESTDIR/full/x"
	must_fail "$MKIMAGE" busybox --tree "$TESTDIR/full"
	[[ "$output" == *"not empty"* ]]
	[ "$(ls -A "$TESTDIR/full")" = x ]
	no_leftovers
}

@test "mkimage busybox: a base layer record and the image record" {
	need_layer
	run --separate-stderr "$MKIMAGE" busybox
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 2 ]
	json_has "${lines[0]}" '.layer | test("^sha256:[0-9a-f]{64}$")'
	json_is "${lines[0]}" .kind base
	json_is "${lines[0]}" .name busybox
	json_has "${lines[0]}" '.files > 100'
	local layer
	layer=$(printf '%s\n' "${lines[0]}" | jq -r .layer)
	json_is "${lines[1]}" .image busybox
	json_is "${lines[1]}" '.layers | join(",")' "$layer"
	# the store knows it
	[ -f "$DSEC_ROOT/images/busybox.json" ]
	[ -d "$DSEC_ROOT/layers/${layer#sha256:}" ]
	no_leftovers
}

@test "mkimage busybox: idempotent, same layer id every run; --name and --root" {
	need_layer
	run --separate-stderr "$MKIMAGE" busybox
	[ "$status" -eq 0 ]
	local first=${lines[0]}
	run --separate-stderr "$MKIMAGE" busybox
	[ "$status" -eq 0 ]
	json_is "${lines[0]}" .layer "$(printf '%s\n' "$first" | jq -r .layer)"
	# another store, another name: still the same content, so the same id
	run --separate-stderr "$MKIMAGE" busybox --root "$TESTDIR/other" --name bb2
	[ "$status" -eq 0 ]
	json_is "${lines[0]}" .layer "$(printf '%s\n' "$first" | jq -r .layer)"
	json_is "${lines[1]}" .image bb2
	[ -f "$TESTDIR/other/images/bb2.json" ]
	[ ! -e "$DSEC_ROOT/images/bb2.json" ]
	[ "$(ls "$DSEC_ROOT/layers" | wc -l)" -eq 1 ]
	no_leftovers
}

@test "mkimage busybox: the image runs in a sandbox" {
	need_layer
	command -v dsec-spawn >/dev/null && command -v dsec-exec >/dev/null || skip "dsec-spawn/dsec-exec not built"
	"$MKIMAGE" -q busybox >/dev/null
	run --separate-stderr bash -c 'dsec-spawn --image busybox | dsec-exec -- sh -c "cat /etc/passwd; stat -c %a /tmp" | dsec-reap'
	[ "$status" -eq 0 ]
	json_is "${lines[0]}" .exec.exit 0
	json_has "${lines[0]}" '.exec.stdout | test("root:x:0:0")'
	json_has "${lines[0]}" '.exec.stdout | test("1777")'
}

@test "mkimage debian: base + python3 layers, images debian and py (DSEC_TEST_DEBIAN=1)" {
	[ "${DSEC_TEST_DEBIAN:-}" = 1 ] ||
		skip "downloads about 90 MB and takes 2-4 minutes the first time (cached after): set DSEC_TEST_DEBIAN=1"
	need_layer
	run --separate-stderr "$MKIMAGE" debian
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 4 ]
	json_is "${lines[0]}" .kind base
	json_is "${lines[1]}" .kind intermediate
	local base py
	base=$(printf '%s\n' "${lines[0]}" | jq -r .layer)
	py=$(printf '%s\n' "${lines[1]}" | jq -r .layer)
	json_is "${lines[2]}" .image debian
	json_is "${lines[2]}" '.layers | join(",")' "$base"
	json_is "${lines[3]}" .image py
	json_is "${lines[3]}" '.layers | join(",")' "$base,$py"
	# the python3 layer carries OCI whiteouts, never overlay char-device ones
	local cache=${DSEC_CACHE:-/var/cache/dsec}
	run bash -c "zstd -dc '$cache/debian-bookworm-python3.tar.zst' | tar -tvf -"
	[ "$status" -eq 0 ]
	[[ "$output" == *"usr/bin/python3"* ]]
	[[ "$output" == *"/.wh."* ]]
	! printf '%s\n' "$output" | grep -q '^c' || false
	# the second run takes everything from the cache: same ids, nothing downloaded
	run --separate-stderr "$MKIMAGE" debian
	[ "$status" -eq 0 ]
	json_is "${lines[0]}" .layer "$base"
	json_is "${lines[1]}" .layer "$py"
	[[ "$stderr" == *"cached"* ]]
	[[ "$stderr" != *"debootstrap --variant"* ]]
	if command -v dsec-spawn >/dev/null && command -v dsec-exec >/dev/null; then
		run --separate-stderr bash -c 'dsec-spawn --image py | dsec-exec -- python3 -c "print(6 * 7)" | dsec-reap'
		[ "$status" -eq 0 ]
		json_is "${lines[0]}" .exec.stdout 42
		# what a Python task expects: pytest, a venv with pip, git
		local sh='cd /tmp && printf "def test_a():\n    assert 1 + 1 == 2\n" >test_a.py &&
			python3 -m pytest -q test_a.py | tail -n 1 && python3 -m venv v && v/bin/pip --version &&
			git init -q r && git -C r rev-parse --is-inside-work-tree'
		run --separate-stderr bash -c "dsec-spawn --image py | dsec-exec -- sh -c '$sh' | dsec-reap"
		[ "$status" -eq 0 ]
		json_is "${lines[0]}" .exec.exit 0
		json_has "${lines[0]}" '.exec.stdout | test("1 passed")'
		json_has "${lines[0]}" '.exec.stdout | test("pip [0-9]")'
		json_has "${lines[0]}" '.exec.stdout | test("true")'
	fi
	no_leftovers
}

@test "mkimage: shellcheck-clean" {
	command -v shellcheck >/dev/null || skip "shellcheck not installed"
	run shellcheck -x "$MKIMAGE"
	[ "$status" -eq 0 ]
}
