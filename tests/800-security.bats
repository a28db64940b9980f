#!/usr/bin/env bats
# Containment probes run inside a real sandbox by tests/probe.c. Each protection is also shown
# absent (a control run with it turned off), so these tests can fail.

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
	ID=$(dsec-spawn --image busybox | jq -r .id)
	[ -n "$ID" ] && [ "$ID" != null ]
	run dsec-exec cp "$PROBE" "$ID:/bin/probe"
	[ "$status" -eq 0 ] || { echo "cp probe: $output"; return 1; }
	echo '{"default":"allow"}' >"$TESTDIR/allow.json"
}

teardown() { dsec_teardown; }

# Calls harmless for the host even where nothing filters them.
CONTROLLED="keyctl add_key bpf perf_event_open unshare-user"

@test "seccomp: calls no sandbox needs fail with EPERM; without the filter they do not" {
	for c in $CONTROLLED userfaultfd mount setns kexec_load init_module reboot swapon ptrace; do
		run dsec-exec "$ID" probe syscall "$c"
		[ "$status" -eq 0 ] && [ "$output" = EPERM ] || { echo "$c: $output ($status)"; return 1; }
	done
	for c in $CONTROLLED; do
		run dsec-exec --seccomp "$TESTDIR/allow.json" "$ID" probe syscall "$c"
		[ "$status" -eq 0 ] && [ "$output" != EPERM ] || {
			echo "$c without the filter: $output"
			return 1
		}
	done
	run dsec-exec "$ID" probe syscall getpid
	[ "$output" = ok ]
}

@test "seccomp: a profile that does not parse is a usage error naming the file" {
	echo '{"default":"allow","rules":[{"names":["no_such_call"],"action":"errno"}]}' >"$TESTDIR/bad.json"
	must_fail dsec-exec --seccomp "$TESTDIR/bad.json" "$ID" -- true
	[ "$status" -eq 2 ]
	[[ "$output" == *"bad.json"*"no_such_call"* ]]
}

@test "capabilities: no CAP_SYS_ADMIN, CAP_MKNOD, CAP_SYS_CHROOT; no_new_privs is set" {
	run dsec-exec --seccomp "$TESTDIR/allow.json" "$ID" probe syscall mknod
	[ "$output" = EPERM ]
	run dsec-exec --seccomp "$TESTDIR/allow.json" "$ID" probe syscall chroot
	[ "$output" = EPERM ]
	run dsec-exec --seccomp "$TESTDIR/allow.json" "$ID" probe syscall mount
	[ "$output" = EPERM ]
	run dsec-exec "$ID" probe nnp
	[ "$output" = 1 ]
	run dsec-exec "$ID" sh -c 'grep CapBnd /proc/self/status'
	bnd=$(awk '{print $2}' <<<"$output")
	# nothing outside Docker's default set (0xa80425fb)
	[ $((0x$bnd & ~0xa80425fb)) -eq 0 ] || { echo "bounding set $bnd"; return 1; }
}

@test "no host descriptor survives into the sandbox" {
	exec 7</etc/passwd
	run dsec-exec "$ID" probe fds
	exec 7<&-
	[ "$output" = "0 1 2" ] || { echo "fds: $output"; return 1; }
}

@test "the sandbox sees neither host processes nor host mounts nor dsec's state" {
	run dsec-exec "$ID" sh -c 'ls /proc | grep -c "^[0-9]"'
	# the holder (pid 1), sh, ls and grep
	[ "$output" -le 4 ] || { echo "sees $output processes"; return 1; }
	run dsec-exec "$ID" sh -c 'cat /proc/self/mountinfo'
	[[ "$output" != *"$TESTDIR"* ]] || { echo "$output"; return 1; }
	[[ "$output" != *"/work"* ]]
	run dsec-exec "$ID" sh -c "ls '$DSEC_RUN' '$DSEC_ROOT' 2>&1"
	[[ "$output" == *"No such file"* ]]
}

@test "another sandbox's files and processes are out of reach" {
	ID2=$(dsec-spawn --image busybox | jq -r .id)
	dsec-exec "$ID2" sh -c 'echo secret >/tmp/s; sleep 30 &'
	run dsec-exec "$ID" sh -c 'cat /tmp/s 2>&1; ps -o comm | grep -c sleep'
	[[ "$output" == *"No such file"* ]]
	[ "${lines[-1]}" = 0 ]
}
