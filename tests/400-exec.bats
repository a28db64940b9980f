#!/usr/bin/env bats
# dsec-exec: foreground, records, timeouts, output limits, isolation of the command, pty, cp.

load helpers
load image

bats_require_minimum_version 1.5.0

setup() {
	dsec_setup
	make_busybox_image
	ID=$(dsec-spawn --image busybox | jq -r .id)
	[ -n "$ID" ]
	[ "$ID" != null ]
	run dsec-exec cp "$PROBE" "$ID:/bin/probe"
	echo "cp probe: status $status: $output"
	[ "$status" -eq 0 ]
}

teardown() { dsec_teardown; }

# the sandbox's cgroup dir in one hierarchy (pids on v1, the v2 dir otherwise)
sb_cgroup() {
	jq -r '.cgroup | if .version == 2 then .path else .paths.pids end' \
		"$DSEC_RUN/sandboxes/$ID/sandbox.json"
}

@test "--help and the man page name the same long options" {
	local h m mo page
	h=$(dsec-exec --help | grep -o -- '--[a-z][a-z-]*' | sort -u)
	page=$(mandoc -Tascii "$TOP/man/dsec-exec.1" | col -b)
	m=$(grep -o -- '--[a-z][a-z-]*' <<<"$page" | sort -u)
	# the OPTIONS section (examples may show other tools' options)
	mo=$(sed -n '/^OPTIONS/,/^[A-Z]/p' <<<"$page" | grep -o -- '--[a-z][a-z-]*' | sort -u)
	[ -n "$mo" ]
	for o in $h; do grep -qx -- "$o" <<<"$m" || { echo "man lacks $o"; return 1; }; done
	for o in $mo; do grep -qx -- "$o" <<<"$h" || { echo "--help lacks $o"; return 1; }; done
	mandoc -Tlint -Wwarning "$TOP/man/dsec-exec.1"
}

@test "foreground: exit status, 128+signal, 126, 127, 125" {
	run dsec-exec "$ID" -- sh -c 'exit 7'
	[ "$status" -eq 7 ]
	run dsec-exec "$ID" -- sh -c 'kill -9 $$'
	[ "$status" -eq 137 ]
	run dsec-exec "$ID" probe kill 15
	[ "$status" -eq 143 ]
	run -127 dsec-exec "$ID" -- no-such-command
	[ "$status" -eq 127 ]
	[[ "$output" == *"$ID"*"No such file"* ]]
	run dsec-exec "$ID" -- /etc/passwd
	[ "$status" -eq 126 ]
	run dsec-exec sb-000000000000 -- true
	[ "$status" -eq 125 ]
	[[ "$output" == *"sb-000000000000: no such sandbox"* ]]
	run dsec-exec "$ID"
	[ "$status" -eq 2 ]
	# an environment setting without a name is a usage error, not a failed start
	for e in =x ''; do
		run dsec-exec -e "$e" "$ID" -- true
		[ "$status" -eq 2 ] || { echo "-e '$e': $status $output"; return 1; }
	done
}

@test "foreground: stdin, stdout and stderr pass straight through" {
	run bash -c "printf 'hello\nworld\n' | dsec-exec $ID -- sh -c 'cat; echo err >&2' 2>/dev/null"
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'hello\nworld')" ]
	run bash -c "dsec-exec $ID -- sh -c 'echo out; echo err >&2' 2>&1 >/dev/null"
	[ "$output" = err ]
}

@test "foreground: relayed stdio keeps its order with 2>&1, and a file as stdin is left where the command stopped reading" {
	[ -x "$TOP/build/libexec/dsec-exec" ] || skip "no front on this architecture"
	local fast out
	seq 1 8 >"$TESTDIR/list"
	for fast in 1 0; do
		out=$(DSEC_EXEC_FAST=$fast dsec-exec "$ID" -- sh -c 'for i in 1 2 3; do echo o$i; echo e$i >&2; done' 2>&1 | tr '\n' ' ')
		[ "$out" = "o1 e1 o2 e2 o3 e3 " ] || { echo "fast=$fast 2>&1 | cat: '$out'"; return 1; }
		DSEC_EXEC_FAST=$fast dsec-exec "$ID" -- sh -c 'for i in 1 2 3; do echo o$i; echo e$i >&2; done' >"$TESTDIR/both" 2>&1
		[ "$(tr '\n' ' ' <"$TESTDIR/both")" = "o1 e1 o2 e2 o3 e3 " ]
		# a `while read` loop over a file: each command takes one line, the loop the next
		out=$(while read -r n; do
			DSEC_EXEC_FAST=$fast dsec-exec "$ID" -- sh -c 'read x; echo "got $x"'
			echo "$n"
		done <"$TESTDIR/list" | tr '\n' ' ')
		[ "$out" = "got 2 1 got 4 3 got 6 5 got 8 7 " ] || { echo "fast=$fast read: '$out'"; return 1; }
		out=$(while read -r n; do DSEC_EXEC_FAST=$fast dsec-exec "$ID" -- true; echo "$n"; done \
			<"$TESTDIR/list" | tr '\n' ' ')
		[ "$out" = "1 2 3 4 5 6 7 8 " ] || { echo "fast=$fast true: '$out'"; return 1; }
		# stdin closed by the command: it ends all the same
		run env DSEC_EXEC_FAST=$fast timeout 20 dsec-exec "$ID" -- sh -c 'exec <&-; echo closed' <"$TESTDIR/list"
		[ "$status" -eq 0 ] && [ "$output" = closed ]
	done
}

@test "foreground: the libc-free front runs a plain exec itself and hands the rest to the full one" {
	# which program waits for the command: the front (build/dsec-exec) or the full one it
	# execs (build/libexec/dsec-exec), in the same process
	waiter() {
		local pid
		"$@" </dev/null >/dev/null 2>&1 &
		pid=$!
		sleep 0.5
		readlink "/proc/$pid/exe"
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null || true
	}
	[ -x "$TOP/build/libexec/dsec-exec" ] || skip "no front on this architecture"
	[ "$(waiter dsec-exec "$ID" -- sleep 5)" = "$TOP/build/dsec-exec" ]
	[ "$(waiter dsec-exec --run "$DSEC_RUN" "$ID" sleep 5)" = "$TOP/build/dsec-exec" ]
	[ "$(waiter env DSEC_EXEC_FAST=0 dsec-exec "$ID" -- sleep 5)" = "$TOP/build/libexec/dsec-exec" ]
	[ "$(waiter dsec-exec -w /tmp -e A=1 "$ID" -- sleep 5)" = "$TOP/build/dsec-exec" ]
	[ "$(waiter dsec-exec --workdir=/tmp --env=A=1 "$ID" -- sleep 5)" = "$TOP/build/dsec-exec" ]
	[ "$(waiter dsec-exec --timeout 9 "$ID" -- sleep 5)" = "$TOP/build/dsec-exec" ]
	[ "$(waiter dsec-exec --timeout=2m "$ID" -- sleep 5)" = "$TOP/build/dsec-exec" ]
	[ "$(waiter dsec-exec --timeout 1.5s "$ID" -- sleep 5)" = "$TOP/build/libexec/dsec-exec" ]
	[ "$(waiter dsec-exec -u 0 "$ID" -- sleep 5)" = "$TOP/build/dsec-exec" ]
	[ "$(waiter dsec-exec -t "$ID" -- sleep 5)" = "$TOP/build/libexec/dsec-exec" ]
	# -w and -e: the same directory, environment and failures from both
	local o
	for o in "-w /etc" "--workdir=etc" "-w /no/such" "-e A=1 -e B=2 -e A=3" "--env=HOSTNAME=h" \
		"-e =x" "-e NOT_IN_HOST" "-w /etc -e A=1"; do
		# shellcheck disable=SC2086
		a=$(dsec-exec $o "$ID" sh -c 'pwd; env | sort' </dev/null 2>&1; echo "status $?")
		# shellcheck disable=SC2086
		b=$(DSEC_EXEC_FAST=0 dsec-exec $o "$ID" sh -c 'pwd; env | sort' </dev/null 2>&1; echo "status $?")
		[ "$a" = "$b" ] || { echo "$o: front '$a', full '$b'"; return 1; }
	done
	[[ "$(dsec-exec -w /no/such "$ID" true 2>&1; echo "status $?")" == *"status 126" ]]
	# a sandbox's working dir is the front's too (missing: "/"), and so is a default user
	local W U
	W=$(dsec-spawn --image busybox --workdir /etc | jq -r .id)
	U=$(dsec-spawn --image busybox --user 0:0 | jq -r .id)
	[ "$(waiter dsec-exec "$W" -- sleep 5)" = "$TOP/build/dsec-exec" ]
	[ "$(dsec-exec "$W" pwd)" = /etc ]
	[ "$(DSEC_EXEC_FAST=0 dsec-exec "$W" pwd)" = /etc ]
	[ "$(waiter dsec-exec "$U" -- sleep 5)" = "$TOP/build/dsec-exec" ]
	dsec-reap "$W" "$U" >/dev/null
	W=$(dsec-spawn --image busybox --workdir /no/such/dir | jq -r .id)
	[ "$(dsec-exec "$W" pwd)" = / ]
	[ "$(DSEC_EXEC_FAST=0 dsec-exec "$W" pwd)" = / ]
	# through a link the sandbox planted: resolved inside its root, no magic link followed
	dsec-exec "$W" sh -c 'mkdir -p /no/such && ln -s /proc/self/root/etc /no/such/dir'
	run dsec-exec "$W" pwd
	[ "$status" -eq 126 ]
	run env DSEC_EXEC_FAST=0 dsec-exec "$W" pwd
	[ "$status" -eq 126 ]
	dsec-exec -w / "$W" sh -c 'rm /no/such/dir && ln -s /etc /no/such/dir'
	[ "$(dsec-exec "$W" pwd)" = /etc ]
	dsec-reap "$W" >/dev/null
	# a sandbox claimed from a warm pool: its claim (env, working dir) over its state, by the
	# front as by the full one
	dsec-warm --image busybox --count 1 >/dev/null
	W=$(dsec-spawn --image busybox --env CLAIM=2 --workdir /etc --warm-only | jq -r .id)
	[ -e "$DSEC_RUN/sandboxes/$W/claim.json" ]
	[ "$(waiter dsec-exec "$W" -- sleep 5)" = "$TOP/build/dsec-exec" ]
	a=$(dsec-exec "$W" sh -c 'echo "$CLAIM $(pwd)"')
	[ "$a" = "2 /etc" ] || { echo "front: $a"; return 1; }
	[ "$(DSEC_EXEC_FAST=0 dsec-exec "$W" sh -c 'echo "$CLAIM $(pwd)"')" = "$a" ]
	# a resize of the claimed sandbox lands in its claim: best-effort from now on
	dsec-spawn --resize "$W" --class be >/dev/null
	[ "$(dsec-exec "$W" cat /proc/self/oom_score_adj)" = 500 ]
	[ "$(DSEC_EXEC_FAST=0 dsec-exec "$W" cat /proc/self/oom_score_adj)" = 500 ]
	dsec-reap "$W" >/dev/null
	dsec-warm --image busybox --drain >/dev/null
	# host files as stdio: relayed through pipes by the front too; a directory: the full one
	# refuses it
	local pid
	seq 1 50000 >"$TESTDIR/in"
	dsec-exec "$ID" -- sh -c 'sleep 1; wc -l; for f in 0 1 2; do readlink /proc/self/fd/$f; done' \
		<"$TESTDIR/in" >"$TESTDIR/out" 2>&1 &
	pid=$!
	sleep 0.5
	[ "$(readlink "/proc/$pid/exe")" = "$TOP/build/dsec-exec" ]
	wait "$pid"
	[ "$(head -n 1 "$TESTDIR/out")" = 50000 ]
	[ "$(grep -c '^pipe:' "$TESTDIR/out")" = 3 ]
	run dsec-exec "$ID" -- true <"$TESTDIR"
	[ "$status" -eq 125 ]
	[[ "$output" == *"directory"* ]]
	# and both give the command the same world: ids, capabilities, no_new_privs, seccomp,
	# descriptors, cwd, cgroups, namespaces, environment, exit statuses
	local c a b
	for c in uid caps nnp seccomp fds cwd cgroup ns "env PATH" "env HOSTNAME" "exit 7" "kill 9" \
		"read /etc/passwd"; do
		# shellcheck disable=SC2086
		a=$(dsec-exec "$ID" probe $c </dev/null 2>&1; echo "status $?")
		# shellcheck disable=SC2086
		b=$(DSEC_EXEC_FAST=0 dsec-exec "$ID" probe $c </dev/null 2>&1; echo "status $?")
		[ "$a" = "$b" ] || { echo "probe $c: front '$a', full '$b'"; return 1; }
	done
	a=$(echo in | dsec-exec "$ID" -- sh -c 'cat; no-such-cmd; exit 3' 2>&1; echo "status $?")
	b=$(echo in | DSEC_EXEC_FAST=0 dsec-exec "$ID" -- sh -c 'cat; no-such-cmd; exit 3' 2>&1; echo "status $?")
	[ "$a" = "$b" ]
	a=$(dsec-exec "$ID" -- no-such-command 2>&1; echo "status $?")
	[[ "$a" == *"No such file"*"status 127" ]]
}

@test "foreground: --timeout kills the whole tree, in the front as in the full one" {
	[ -x "$TOP/build/libexec/dsec-exec" ] || skip "no front on this architecture"
	left() { # processes in the sandbox besides the holder and this ps
		dsec-exec "$ID" ps -o pid= | wc -l
	}
	cgs() { # per-exec cgroups left below the sandbox's
		find /sys/fs/cgroup -maxdepth 6 -type d -name 'exec-*' -path "*/$ID/*" 2>/dev/null | wc -l
	}
	local fast t0 t1 pid
	for fast in 1 0; do
		# a setsid child that ignores SIGTERM, and the command itself: both go at 1 s
		t0=$(date +%s%N)
		run env DSEC_EXEC_FAST=$fast dsec-exec --timeout 1s "$ID" -- \
			sh -c 'setsid sh -c "trap \"\" TERM; sleep 100" & sleep 100'
		t1=$(date +%s%N)
		[ "$status" -eq 124 ] || { echo "fast=$fast: status $status: $output"; return 1; }
		[ "$output" = "dsec-exec: error: $ID: timed out" ]
		[ $(((t1 - t0) / 1000000)) -lt 5000 ]
		[ "$(left)" -eq 2 ] || { echo "fast=$fast: left"; dsec-exec "$ID" ps; return 1; }
		[ "$(cgs)" -eq 0 ]
		# in time: its status, what it started in the background stays, its cgroup goes
		run env DSEC_EXEC_FAST=$fast dsec-exec --timeout=5 "$ID" -- \
			sh -c 'sleep 60 >/dev/null 2>&1 & echo bg; exit 3'
		[ "$status" -eq 3 ] && [ "$output" = bg ]
		[ "$(left)" -eq 3 ]
		[ "$(cgs)" -eq 0 ]
		dsec-exec "$ID" -- sh -c 'kill $(pidof sleep)'
		# a command killed by a signal before the deadline: 128+N, not a timeout
		run env DSEC_EXEC_FAST=$fast dsec-exec --timeout 30s "$ID" -- sh -c 'kill -9 $$'
		[ "$status" -eq 137 ]
	done
	# kill -9 of the front while it waits: dsec-reap takes the cgroup it made, and what runs
	local S dir
	S=$(dsec-spawn --image busybox | jq -r .id)
	dsec-exec --timeout 60s "$S" -- sleep 100 </dev/null >/dev/null 2>&1 &
	pid=$!
	sleep 0.5
	dir=$(find /sys/fs/cgroup -maxdepth 6 -type d -name 'exec-*' -path "*/$S/*")
	[ -n "$dir" ] && [ -d "$dir" ]
	kill -9 "$pid"
	wait "$pid" || true
	dsec-reap "$S" >/dev/null
	[ ! -e "$dir" ]
	# bad durations: the full one's usage error
	run dsec-exec --timeout 5x "$ID" -- true
	[ "$status" -eq 2 ]
	[[ "$output" == *"not a duration"* ]]
}

@test "foreground: signals sent to dsec-exec reach the command" {
	dsec-exec "$ID" -- sleep 30 &
	local pid=$!
	sleep 0.5
	kill -TERM "$pid"
	local st=0
	wait "$pid" || st=$?
	[ "$st" -eq 143 ]
}

@test "the command is in the sandbox: pid namespace, hostname, mounts" {
	run dsec-exec "$ID" probe pid
	[ "$status" -eq 0 ]
	[ "$output" -gt 1 ]
	[ "$output" -lt 100 ]
	run dsec-exec "$ID" probe hostname
	[ "$output" = "$ID" ]
	run dsec-exec "$ID" -- ps -o pid,comm
	[[ "$output" == *" 1 dsec-holder"* ]] || [[ "$output" == *"1 root"*"holder"* ]] ||
		[[ "$(echo "$output" | awk '$1 == 1')" != "" ]]
	run dsec-exec "$ID" probe mounts
	[[ "$output" != *"$TESTDIR"* ]]
}

@test "no host descriptor leaks into the sandbox" {
	exec 7>"$TESTDIR/leak" 8<"$TESTDIR/leak"
	run dsec-exec "$ID" probe fds
	exec 7>&- 8<&-
	[ "$status" -eq 0 ]
	[ "$output" = "0 1 2" ]
	run bash -c "exec 9</dev/null; echo '{\"id\":\"$ID\",\"cmd\":[\"probe\",\"fds\"]}' | dsec-exec"
	json_is "$(records)" .exec.stdout "0 1 2"
}

@test "capabilities dropped to the default set, no_new_privs set" {
	run dsec-exec "$ID" probe caps
	[ "$output" = "eff=00000000a00005fb prm=00000000a00005fb inh=0000000000000000 bnd=00000000a00005fb amb=0000000000000000" ]
	run dsec-exec "$ID" probe nnp
	[ "$output" = 1 ]
	run dsec-exec "$ID" probe syscall mount
	[ "$output" = EPERM ]
	run dsec-exec "$ID" probe syscall chroot
	[ "$output" = EPERM ]
	run dsec-exec "$ID" probe syscall mknod
	[ "$output" = EPERM ]
}

@test "cwd and environment" {
	run dsec-exec -w /tmp "$ID" probe cwd
	[ "$output" = /tmp ]
	run dsec-exec -w /nonexistent "$ID" probe cwd
	[ "$status" -eq 126 ]
	run dsec-exec "$ID" probe cwd
	[ "$output" = / ]
	run dsec-exec -e FOO=bar -e FOO=baz "$ID" probe env FOO
	[ "$output" = baz ]
	HOSTVAR=fromhost run dsec-exec -e HOSTVAR "$ID" probe env HOSTVAR
	[ "$output" = fromhost ]
	run dsec-exec "$ID" probe env PATH
	[[ "$output" == */usr/bin*/bin* ]]
	run dsec-exec "$ID" probe env HOME
	[ "$output" = /root ]
	run dsec-exec "$ID" probe env DSEC_ROOT
	[ "$output" = "(unset)" ]
}

@test "--user: a name or uid from the sandbox's own passwd and group, no capabilities, HOME" {
	dsec-exec "$ID" sh -c 'mkdir -p /home/ann && chown 1000:1000 /home/ann && chmod 700 /root &&
		echo "ann:x:1000:1000::/home/ann:/bin/sh" >>/etc/passwd &&
		printf "ann:x:1000:\nwheel:x:10:root,ann\nstaff:x:50:ann\n" >>/etc/group'
	run dsec-exec -u ann "$ID" probe uid
	[ "$output" = "1000:1000 1000:1000" ]
	run dsec-exec -u ann "$ID" id -G
	[ "$output" = "1000 10 50" ]
	run dsec-exec -u ann "$ID" probe caps
	[[ "$output" == "eff=0000000000000000 prm=0000000000000000 inh=0000000000000000 "* ]]
	run dsec-exec -u ann "$ID" probe nnp
	[ "$output" = 1 ]
	run dsec-exec -u ann "$ID" probe env HOME
	[ "$output" = /home/ann ]
	run dsec-exec -u ann -e HOME=/tmp "$ID" probe env HOME
	[ "$output" = /tmp ]
	# a HOME the sandbox's own environment sets (its image's, --env) stays
	local H
	H=$(dsec-spawn --image busybox --env HOME=/srv | jq -r .id)
	run dsec-exec -u 1000 "$H" sh -c 'echo $HOME'
	dsec-reap "$H" >/dev/null
	[ "$output" = /srv ]
	# the user's rights, not root's: root's dir is closed, its own is not
	run dsec-exec -u ann "$ID" sh -c 'touch /root/x; echo $?; touch ~/y && stat -c %u:%g ~/y'
	[ "$output" = $'touch: /root/x: Permission denied\n1\n1000:1000' ]
	run dsec-exec -u ann -w /root "$ID" probe cwd
	[ "$status" -eq 126 ]
	# numeric: need not be in passwd (group 0, home /), group by name or number
	run dsec-exec -u 4242 "$ID" sh -c 'probe uid; probe env HOME'
	[ "$output" = $'4242:0 4242:0\n/' ]
	run dsec-exec -u 4242:staff "$ID" probe uid
	[ "$output" = "4242:50 4242:50" ]
	run dsec-exec -u ann:7 "$ID" probe uid
	[ "$output" = "1000:7 1000:7" ]
	# root with another group keeps root's capabilities
	run dsec-exec -u 0:ann "$ID" probe uid
	[ "$output" = "0:1000 0:1000" ]
	# errors: one line, the status of a setup failure
	run --separate-stderr dsec-exec -u nobody-here "$ID" true
	[ "$status" -eq 125 ]
	[[ "$stderr" == *"user 'nobody-here': not in the sandbox's /etc/passwd"* ]]
	run --separate-stderr dsec-exec -u ann:nogroup-here "$ID" true
	[ "$status" -eq 125 ]
	[[ "$stderr" == *"group 'nogroup-here'"* ]]
	run --separate-stderr dsec-exec -u 99999999 "$ID" true
	[ "$status" -eq 125 ]
	[[ "$stderr" == *"is not mapped in the sandbox"* ]]
	run dsec-exec -u '' "$ID" true
	[ "$status" -eq 2 ]
	# a passwd that is a fifo or a link out of the sandbox is not read on the host
	dsec-exec "$ID" sh -c 'mv /etc/passwd /etc/passwd.real && mkfifo /etc/passwd'
	run --separate-stderr timeout 10 dsec-exec -u ann "$ID" true
	[ "$status" -eq 125 ]
	dsec-exec "$ID" sh -c 'rm /etc/passwd && ln -s /proc/1/root/etc/passwd.real /etc/passwd'
	run --separate-stderr timeout 10 dsec-exec -u ann "$ID" true
	[ "$status" -eq 125 ]
	# a file the sandbox's ids do not own (here one host root put there) is not read either:
	# dsec-exec reads as host root, and must not hand back what the sandbox could not read
	if [ "$(jq -r '.userns != null' "$DSEC_RUN/sandboxes/$ID/sandbox.json")" = true ]; then
		local hp
		hp=$(jq -r .holder.pid "$DSEC_RUN/sandboxes/$ID/sandbox.json")
		cp /dev/null "/proc/$hp/root/etc/hostowned"
		grep ann "/proc/$hp/root/etc/passwd.real" >"/proc/$hp/root/etc/hostowned"
		chown 0:0 "/proc/$hp/root/etc/hostowned"
		chmod 600 "/proc/$hp/root/etc/hostowned"
		dsec-exec "$ID" sh -c 'rm /etc/passwd && ln -s hostowned /etc/passwd'
		run --separate-stderr dsec-exec -u ann "$ID" true
		[ "$status" -eq 125 ]
		[[ "$stderr" == *"not in the sandbox's /etc/passwd"* ]]
	fi
	dsec-exec "$ID" sh -c 'rm /etc/passwd && mv /etc/passwd.real /etc/passwd'
	# the libc-free front resolves users as the full one does: the same ids, groups, HOME,
	# capabilities and errors for each form (and a passwd over its buffer goes to the full one)
	local u a b
	for u in ann 1000 ann:staff ann:7 4242 4242:staff 0:ann nobody-here ann:nogroup-here \
		99999999 ':x' root; do
		a=$(dsec-exec -u "$u" "$ID" sh -c 'probe uid; id -G; probe caps; echo "$HOME"; pwd' 2>&1; echo "status $?")
		b=$(DSEC_EXEC_FAST=0 dsec-exec -u "$u" "$ID" sh -c 'probe uid; id -G; probe caps; echo "$HOME"; pwd' 2>&1; echo "status $?")
		[ "$a" = "$b" ] || { echo "-u $u: front '$a', full '$b'"; return 1; }
	done
	dsec-exec "$ID" sh -c 'cp /etc/passwd /etc/passwd.real && head -c 70000 /dev/zero | tr "\0" "#" >>/etc/passwd && echo >>/etc/passwd'
	[ "$(dsec-exec -u ann "$ID" probe uid)" = "1000:1000 1000:1000" ]
	dsec-exec "$ID" sh -c 'mv /etc/passwd.real /etc/passwd'
	# records: "run_as" as a name or a uid, the option as default, bad values are error records
	run bash -c "printf '%s\n' '{\"id\":\"$ID\",\"run_as\":\"ann\",\"cmd\":[\"probe\",\"uid\"]}' \
		'{\"id\":\"$ID\",\"run_as\":77,\"cmd\":[\"probe\",\"uid\"]}' \
		'{\"id\":\"$ID\",\"run_as\":-1,\"cmd\":[\"probe\",\"uid\"]}' \
		'{\"id\":\"$ID\",\"run_as\":\"no-one\",\"cmd\":[\"probe\",\"uid\"]}' \
		'{\"id\":\"$ID\",\"cmd\":[\"probe\",\"uid\"]}' \
		'{\"id\":\"$ID\",\"user\":\"not ours\",\"cmd\":[\"probe\",\"uid\"]}' | dsec-exec -k -u 5:5"
	[ "$status" -eq 1 ]
	local r
	r=$(records)
	json_is "$(sed -n 1p <<<"$r")" .exec.stdout "1000:1000 1000:1000"
	json_is "$(sed -n 2p <<<"$r")" .exec.stdout "77:0 77:0"
	json_has "$(sed -n 3p <<<"$r")" '.error.msg | contains("\"run_as\" is not")'
	json_has "$(sed -n 4p <<<"$r")" '.error.msg | contains("no-one")'
	json_is "$(sed -n 5p <<<"$r")" .exec.stdout "5:5 5:5"
	# a pipeline's own "user" key is its own: passed on, not a user to run as
	json_is "$(sed -n 6p <<<"$r")" '.user + " " + .exec.stdout' "not ours 5:5 5:5"
}

@test "an image's config (docker save): its env, working dir and user are the commands' defaults" {
	local tree d=$BATS_TEST_TMPDIR/img S W C
	tree=$(busybox_tree)
	mkdir -p "$d/l1" "$d/l2" "$d/app/app" "$d/app/opt/bin"
	tar -C "$tree" -cf "$d/l1/layer.tar" .
	printf '#!/bin/sh\necho hello from opt\n' >"$d/app/opt/bin/hello"
	chmod 755 "$d/app/opt/bin/hello"
	chown 1000:1000 "$d/app/app"
	tar -C "$d/app" -cf "$d/l2/layer.tar" app opt
	jq -nc '{config: {Env: ["PATH=/opt/bin:/usr/bin:/bin", "GREETING=hi there", "bad"],
		WorkingDir: "/app", User: "1000:1000", Cmd: ["sh"]}}' >"$d/cfg.json"
	echo '[{"Config":"cfg.json","RepoTags":["cfgd:1"],"Layers":["l1/layer.tar","l2/layer.tar"]}]' \
		>"$d/manifest.json"
	run --separate-stderr dsec-layer import "$d"
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"1 environment entries left out"* ]]
	json_is "$(jq -c .config "$DSEC_ROOT/images/cfgd:1.json")" "tojson" \
		'{"env":["PATH=/opt/bin:/usr/bin:/bin","GREETING=hi there"],"workdir":"/app","user":"1000:1000"}'
	S=$(dsec-spawn --image cfgd:1 | jq -r .id)
	# foreground (the libc-free front hands these over) and records alike
	run dsec-exec "$S" sh -c 'hello; echo "$GREETING"; pwd; id -u; id -g'
	[ "$output" = $'hello from opt\nhi there\n/app\n1000\n1000' ]
	run bash -c "echo '{\"id\":\"$S\",\"sh\":\"hello; pwd; id -u\"}' | dsec-exec"
	json_is "$output" .exec.stdout $'hello from opt\n/app\n1000'
	# what the caller says wins
	run dsec-exec -w /tmp -u 0 -e GREETING=bye "$S" sh -c 'echo "$GREETING"; pwd; id -u'
	[ "$output" = $'bye\n/tmp\n0' ]
	run bash -c "echo '{\"id\":\"$S\",\"cwd\":\"/\",\"run_as\":\"0\",\"sh\":\"pwd; id -u\"}' | dsec-exec"
	json_is "$output" .exec.stdout $'/\n0'
	W=$(dsec-spawn --image cfgd:1 --env GREETING=yo --workdir /tmp --user 7 | jq -r .id)
	json_is "$(dsec-ps "$W")" '[.workdir, .run_as] | join(" ")' "/tmp 7"
	run dsec-exec "$W" sh -c 'echo "$GREETING"; pwd; id -u'
	[ "$output" = $'yo\n/tmp\n7' ]
	run bash -c "echo '{\"image\":\"cfgd:1\",\"workdir\":\"/opt\",\"run_as\":\"8:8\"}' | dsec-spawn | dsec-exec -- sh -c 'pwd; id -u'"
	json_is "$output" .exec.stdout $'/opt\n8'
	run bash -c "echo '{\"image\":\"cfgd:1\",\"run_as\":9}' | dsec-spawn | dsec-exec -- id -u"
	json_is "$output" .exec.stdout $'9'
	run bash -c "echo '{\"image\":\"cfgd:1\",\"run_as\":-9}' | dsec-spawn"
	[ "$status" -eq 1 ]
	json_has "$(records)" '.error.msg | contains("run_as")'
	must_fail dsec-spawn --image cfgd:1 --workdir rel
	must_fail dsec-spawn --image cfgd:1 --user 'a b'
	# a default user the sandbox lacks would fail every command: spawn says so and keeps nothing
	local before
	before=$(ls "$DSEC_RUN/sandboxes" | sort)
	run --separate-stderr dsec-spawn --image cfgd:1 --user no-such-user
	[ "$status" -eq 1 ]
	[ "$(wc -l <<<"$stderr")" -eq 1 ]
	[[ "$stderr" == *"user 'no-such-user': not in the sandbox's /etc/passwd"* ]]
	json_is "$output" '.error.tool + " " + (.id // "none")' "dsec-spawn none"
	run --separate-stderr dsec-spawn --image cfgd:1 --user 0:no-such-group
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"group 'no-such-group'"* ]]
	run --separate-stderr bash -c "printf '%s\n' '{\"image\":\"cfgd:1\",\"run_as\":\"nope\",\"task\":1}' '{\"image\":\"cfgd:1\",\"run_as\":\"root\",\"task\":2}' | dsec-spawn"
	[ "$status" -eq 1 ]
	json_is "$(sed -n 1p <<<"$output")" '[.task, (.error.msg | contains("nope"))] | map(tostring) | join(" ")' "1 true"
	json_is "$(sed -n 2p <<<"$output")" '[.task, .error == null] | map(tostring) | join(" ")' "2 true"
	dsec-reap "$(sed -n 2p <<<"$output" | jq -r .id)" >/dev/null
	[ "$(ls "$DSEC_RUN/sandboxes" | sort)" = "$before" ]
	# a working dir that is not there (removed, or never made) is "/"
	dsec-exec -u 0 "$S" rmdir /app
	[ "$(dsec-exec "$S" pwd)" = / ]
	# a claim from a warm pool gets them too
	dsec-warm --image cfgd:1 --count 1 >/dev/null
	run dsec-spawn --image cfgd:1
	json_is "$output" .warm true
	C=$(jq -r .id <<<"$output")
	run dsec-exec "$C" sh -c 'hello; pwd; id -u'
	[ "$output" = $'hello from opt\n/app\n1000' ]
	# and a claim for a user its sandbox lacks is refused and undone, not handed out
	dsec-warm --image cfgd:1 --count 1 >/dev/null
	run --separate-stderr dsec-spawn --image cfgd:1 --warm-only --user no-such-user
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"no-such-user"* ]]
	[ "$(ls "$DSEC_RUN/sandboxes" | sort)" = "$(printf "%s\n" $before "$C" | sort)" ]
	# a commit keeps the sandbox's
	dsec-layer commit --name cfgd-c "$W" >/dev/null
	json_is "$(jq -c .config "$DSEC_ROOT/images/cfgd-c.json")" "tojson" \
		'{"env":["PATH=/opt/bin:/usr/bin:/bin","GREETING=hi there","GREETING=yo"],"workdir":"/tmp","user":"7"}'
	dsec-reap "$S" "$W" "$C" >/dev/null
	dsec-warm --image cfgd:1 --drain >/dev/null
}

@test "records: result added, user key kept, record cmd/sh/stdin/env/cwd" {
	run bash -c "printf '%s\n' \
		'{\"id\":\"$ID\",\"task\":\"t1\",\"sh\":\"echo out; echo err >&2; exit 3\"}' \
		'{\"id\":\"$ID\",\"task\":\"t2\",\"cmd\":[\"cat\"],\"stdin\":\"fed\"}' \
		'{\"id\":\"$ID\",\"task\":\"t3\",\"cmd\":[\"probe\",\"env\",\"X\"],\"env\":{\"X\":\"y\"}}' \
		'{\"id\":\"$ID\",\"task\":\"t4\",\"cwd\":\"/etc\"}' | dsec-exec -k -- probe cwd"
	[ "$status" -eq 0 ]
	local r
	r=$(records)
	[ "$(echo "$r" | wc -l)" -eq 4 ]
	json_is "$(echo "$r" | sed -n 1p)" '[.task,.exec.exit,.exec.stdout,.exec.stderr,.exec.signal,.exec.timed_out] | @json' '["t1",3,"out\n","err\n",null,false]'
	json_is "$(echo "$r" | sed -n 1p)" '.exec.cmd | @json' '["/bin/sh","-c","echo out; echo err >&2; exit 3"]'
	json_has "$(echo "$r" | sed -n 1p)" '.exec.wall_us > 0 and .exec.cpu_us >= 0 and .exec.max_rss_kb > 0'
	json_is "$(echo "$r" | sed -n 2p)" '.task + " " + .exec.stdout' 't2 fed'
	json_is "$(echo "$r" | sed -n 3p)" .exec.stdout y
	json_is "$(echo "$r" | sed -n 4p)" '.task + " " + .exec.stdout' $'t4 /etc'
}

@test "records: a killed command reports its signal, a missing one 127 and an error" {
	run bash -c "printf '%s\n' '{\"id\":\"$ID\",\"sh\":\"kill -9 \$\$\"}' \
		'{\"id\":\"$ID\",\"cmd\":[\"nope\"]}' | dsec-exec -k"
	[ "$status" -eq 1 ]
	json_is "$(records | sed -n 1p)" '[.exec.exit,.exec.signal] | @json' '[null,"SIGKILL"]'
	json_is "$(records | sed -n 2p)" '[.exec.exit,.error.tool] | @json' '[127,"dsec-exec"]'
}

@test "records: unknown id, malformed line and upstream error; the rest go on" {
	run bash -c "printf '%s\n' '{\"id\":\"sb-0123456789ab\",\"task\":1}' 'not json' \
		'{\"id\":\"$ID\",\"task\":3,\"error\":{\"tool\":\"dsec-spawn\",\"errno\":5,\"msg\":\"x\"}}' \
		'{\"id\":\"$ID\",\"task\":4}' | dsec-exec -k -- echo ok"
	[ "$status" -eq 1 ]
	local r
	r=$(records)
	[ "$(echo "$r" | wc -l)" -eq 4 ]
	json_is "$(echo "$r" | sed -n 1p)" '[.task,.error.tool,(.error.msg|test("no such sandbox"))] | @json' '[1,"dsec-exec",true]'
	json_is "$(echo "$r" | sed -n 2p)" '.error.msg' '<stdin>:2: invalid JSON: '"$(echo "$r" | sed -n 2p | jq -r .error.msg | sed 's/^<stdin>:2: invalid JSON: //')"
	json_has "$(echo "$r" | sed -n 2p)" '.error.msg | startswith("<stdin>:2:")'
	json_is "$(echo "$r" | sed -n 3p)" '[.error.tool, has("exec")] | @json' '["dsec-spawn",false]'
	json_is "$(echo "$r" | sed -n 4p)" .exec.stdout ok
	[[ "$output" == *"no such sandbox"* ]]
}

@test "records: one dsec-exec for a loop, a record at a time; a reset, pause, resize or reap between them is seen" {
	local r ex
	coproc EX { exec dsec-exec 2>"$TESTDIR/err"; }
	ex=$EX_PID
	# ask SH: one record in, its result out (bounded: a command frozen in a paused sandbox
	# would never answer)
	ask() {
		printf '{"id":"%s","sh":"%s"}\n' "$ID" "$1" >&"${EX[1]}"
		read -t 20 -r r <&"${EX[0]}" || r=timeout
	}
	ask 'echo one >/tmp/f; cat /tmp/f'
	json_is "$r" .exec.stdout one
	dsec-reap --reset "$ID" >/dev/null
	ask 'cat /tmp/f 2>/dev/null || echo reset'
	json_is "$r" .exec.stdout reset
	dsec-reap --pause "$ID" >/dev/null
	ask 'echo resumed'
	json_is "$r" .exec.stdout resumed
	dsec-spawn --resize "$ID" --memory 256M >/dev/null
	ask 'echo resized'
	json_is "$r" .exec.stdout resized
	dsec-reap "$ID" >/dev/null
	ask 'echo gone'
	json_has "$r" '.error.msg | test("no such sandbox")'
	exec {EX[1]}>&-
	wait "$ex" || true
}

@test "records: -j runs commands in parallel" {
	local start end i
	start=$(date +%s%N)
	run bash -c "for i in 1 2 3 4 5 6 7 8; do echo '{\"id\":\"$ID\",\"n\":'\$i'}'; done |
		dsec-exec -j 8 -- sleep 0.5"
	end=$(date +%s%N)
	[ "$status" -eq 0 ]
	[ "$(records | wc -l)" -eq 8 ]
	echo "wall $(((end - start) / 1000000)) ms"
	# serial would take at least 4 s; loose bound for a loaded machine
	[ $(((end - start) / 1000000)) -lt 3500 ]
}

@test "timeout kills every process the command started (setsid, SIGTERM ignored)" {
	local cg
	cg=$(sb_cgroup)
	run bash -c "echo '{\"id\":\"$ID\",\"cmd\":[\"probe\",\"sleepers\",\"3\"]}' | dsec-exec --timeout 1s"
	[ "$status" -eq 0 ]
	json_is "$(records)" '[.exec.timed_out,.exec.signal,.exec.stdout] | @json' '[true,"SIGKILL","3\n"]'
	# only the holder is left in the sandbox's cgroup (and no exec cgroup below it)
	[ "$(sort -u "$cg/cgroup.procs" | wc -l)" -eq 1 ]
	[ -z "$(find "$cg" -mindepth 1 -type d)" ]
	run dsec-exec "$ID" -- ps -o pid
	[ "$(echo "$output" | wc -l)" -eq 3 ] # header, holder, ps
	# the foreground too, and a record's own timeout
	run dsec-exec --timeout 500ms "$ID" probe sleepers 2
	[ "$status" -eq 124 ]
	[ "$(sort -u "$cg/cgroup.procs" | wc -l)" -eq 1 ]
	run bash -c "echo '{\"id\":\"$ID\",\"sh\":\"sleep 5\",\"timeout\":0.3}' | dsec-exec"
	json_is "$(records)" .exec.timed_out true
}

@test "--max-output truncates, drains the rest and never blocks" {
	run bash -c "echo '{\"id\":\"$ID\",\"sh\":\"yes | head -c 20000000; echo e >&2\"}' |
		dsec-exec --max-output 1K --timeout 60s"
	[ "$status" -eq 0 ]
	json_is "$(records)" '[.exec.truncated,(.exec.stdout|length),.exec.stderr,.exec.exit,.exec.timed_out] | @json' '[true,1024,"e\n",0,false]'
}

@test "--max-output: output is cut further so the record stays a line the next tool reads" {
	# 300000 NUL bytes are 1.8 MB as JSON (\u0000 each): past a 100000-byte line limit
	export DSEC_MAX_LINE=100000
	jq -nc --arg id "$ID" --arg pad "$(head -c 20000 /dev/zero | tr '\0' x)" \
		'{id: $id, pad: $pad, sh: "head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2"}' >"$TESTDIR/in"
	dsec-exec --max-output 1M <"$TESTDIR/in" >"$TESTDIR/out"
	[ "$(wc -c <"$TESTDIR/out")" -le 100000 ]
	json_is "$(cat "$TESTDIR/out")" '.exec.truncated' true
	json_is "$(cat "$TESTDIR/out")" '.pad | length' 20000
	json_has "$(cat "$TESTDIR/out")" '(.exec.stdout | length) > 5000 and (.exec.stderr | length) > 5000'
	run dsec-reap <"$TESTDIR/out"
	[ "$status" -eq 0 ]
	json_is "$(records)" .reaped true
}

@test "output that is not UTF-8 becomes valid JSON with U+FFFD" {
	run bash -c "echo '{\"id\":\"$ID\",\"sh\":\"printf \\\"a\\\\377b\\\\342\\\\202c\\\"\"}' | dsec-exec"
	[ "$status" -eq 0 ]
	json_is "$(records)" .exec.stdout $'a\uFFFDb\uFFFDc'
}

@test "-t: a real pty with the window size, resized on SIGWINCH" {
	run python3 - "$ID" <<'EOF'
import fcntl, os, pty, select, struct, sys, termios, time
sid = sys.argv[1]
def winsz(fd, r, c):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", r, c, 0, 0))
pid, fd = pty.fork()
if pid == 0:
    winsz(0, 33, 101)
    os.execvp("dsec-exec", ["dsec-exec", "-t", sid, "sh"])
out = b""
def expect(what, t=10):
    global out
    end = time.time() + t
    while what not in out and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
    return what in out
time.sleep(0.3)
os.write(fd, b"probe tty; echo $((6*7))\r")
ok1 = expect(b"42")
winsz(fd, 50, 132)
time.sleep(0.3)
os.write(fd, b"probe tty; exit 5\r")
ok2 = expect(b"50 132")
_, st = os.waitpid(pid, 0)
print(out.decode(errors="replace"))
print("first", ok1, b"/dev/pts/0 33 101" in out, "resized", ok2, "status", os.waitstatus_to_exitcode(st))
EOF
	echo "$output"
	[[ "$output" == *"first True True resized True status 5"* ]]
}

@test "cp: in and out, files and trees, tar streams" {
	mkdir -p "$TESTDIR/src/sub"
	echo a >"$TESTDIR/src/a"
	echo b >"$TESTDIR/src/sub/b"
	run dsec-exec cp "$TESTDIR/src" "$ID:/tmp"
	[ "$status" -eq 0 ]
	run dsec-exec "$ID" -- cat /tmp/src/sub/b
	[ "$output" = b ]
	run dsec-exec cp "$TESTDIR/src/a" "$ID:/tmp/renamed"
	run dsec-exec "$ID" -- cat /tmp/renamed
	[ "$output" = a ]
	run dsec-exec cp "$ID:/tmp/src" "$TESTDIR/back"
	[ "$status" -eq 0 ]
	[ "$(cat "$TESTDIR/back/sub/b")" = b ]
	dsec-exec cp "$ID:/tmp/src" - | tar -t | grep -qx 'src/sub/b'
	tar -C "$TESTDIR/src" -c a | dsec-exec cp - "$ID:/root"
	run dsec-exec "$ID" -- cat /root/a
	[ "$output" = a ]
	must_fail dsec-exec cp "$TESTDIR/src/a" "$ID:/no/such/dir/x"
	must_fail dsec-exec cp "$TESTDIR/src/a" "$TESTDIR/b"
	# a copy that takes over a second shows its progress on a terminal, and only there
	head -c 3M /dev/zero >"$TESTDIR/src/big"
	tar -C "$TESTDIR/src" -cf "$TESTDIR/big.tar" big
	local slow="(sleep 1.3; cat $TESTDIR/big.tar) | dsec-exec"
	run script -qec "sh -c '$slow cp - $ID:/tmp'" /dev/null
	[ "$status" -eq 0 ]
	[[ "$output" == *"dsec-exec: cp: "*" MiB, "* ]]
	run script -qec "sh -c '$slow -q cp - $ID:/tmp; echo status \$?'" /dev/null
	[[ "$output" == *"status 0"* ]]
	[[ "$output" != *"MiB"* ]]
	run --separate-stderr sh -c "$slow cp - $ID:/tmp"
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	[ "$(dsec-exec "$ID" stat -c %s /tmp/big)" = 3145728 ]
}

@test "cp: hard links copied in stay hard links (a tree, a renamed tree, a tar stream); a link out of the stream's dir is refused" {
	mkdir -p "$TESTDIR/hl/sub"
	echo data >"$TESTDIR/hl/a"
	ln "$TESTDIR/hl/a" "$TESTDIR/hl/b"
	ln "$TESTDIR/hl/a" "$TESTDIR/hl/sub/c"
	local dst
	for dst in /tmp /tmp/renamed; do
		dsec-exec cp "$TESTDIR/hl" "$ID:$dst"
		local d=$dst
		[ "$dst" = /tmp ] && d=/tmp/hl
		run dsec-exec "$ID" sh -c "cat $d/a $d/b $d/sub/c; stat -c '%h %i' $d/a $d/b $d/sub/c | sort -u"
		[ "${lines[0]}${lines[1]}${lines[2]}" = datadatadata ]
		[ "${#lines[@]}" -eq 4 ] # one inode, three names
		[[ "${lines[3]}" == "3 "* ]]
	done
	dsec-exec "$ID" mkdir /tmp/s
	tar -C "$TESTDIR/hl" -cf - . | dsec-exec cp - "$ID:/tmp/s"
	run dsec-exec "$ID" stat -c %h /tmp/s/sub/c
	[ "$output" = 3 ]
	# a stream whose link leads out of the destination dir fails, and the file there stays
	python3 - "$TESTDIR/out.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    i = tarfile.TarInfo("x"); i.type = tarfile.LNKTYPE; i.linkname = "../passwd"; t.addfile(i)
PY
	dsec-exec "$ID" sh -c 'echo keep >/tmp/passwd'
	must_fail dsec-exec cp - "$ID:/tmp/s" <"$TESTDIR/out.tar"
	[ "$(dsec-exec "$ID" cat /tmp/passwd)" = keep ]
	run dsec-exec "$ID" test -e /tmp/s/x
	[ "$status" -ne 0 ]
}

@test "cp: names past ASCII (UTF-8 or not) copy both ways as the bytes they are" {
	mkdir -p "$TESTDIR/in"
	echo a >"$TESTDIR/in/é.txt"
	echo b >"$TESTDIR/in/中文"
	echo c >"$TESTDIR/in/bad-"$'\377'
	run dsec-exec cp "$TESTDIR/in" "$ID:/tmp/"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	run dsec-exec cp "$ID:/tmp/in" "$TESTDIR/out"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ "$(cat "$TESTDIR/out/é.txt" "$TESTDIR/out/中文" "$TESTDIR/out/bad-"$'\377')" = "$(printf 'a\nb\nc')" ]
	[ "$(ls "$TESTDIR/out" | wc -l)" -eq 3 ]
}

@test "cp: out of DIR/. or /, the destination dir there keeps its own mode; / is the sandbox's files, not its /proc, /sys or /dev" {
	local d=$BATS_TEST_TMPDIR
	dsec-exec "$ID" sh -c 'mkdir -p /evil/sub && echo x >/evil/sub/f && chmod 0777 /evil /evil/sub / && chmod 6755 /evil/sub/f'
	mkdir -m 0700 "$d/res" "$d/all"
	dsec-exec cp "$ID:/evil/." "$d/res"
	[ "$(stat -c %a "$d/res")" = 700 ]
	[ "$(stat -c %a "$d/res/sub")" = 777 ]
	[ "$(stat -c %a "$d/res/sub/f")" = 755 ]
	[ "$(cat "$d/res/sub/f")" = x ]
	# into a dir of the sandbox the same way
	mkdir -m 0750 "$d/src"
	echo y >"$d/src/g"
	dsec-exec "$ID" sh -c 'mkdir -m 0701 /in'
	dsec-exec cp "$d/src/." "$ID:/in"
	[ "$(dsec-exec "$ID" stat -c %a /in)" = 701 ]
	[ "$(dsec-exec "$ID" cat /in/g)" = y ]
	# the whole sandbox: its files, its mount points' dirs empty
	run dsec-exec cp "$ID:/" "$d/all"
	[ "$status" -eq 0 ]
	[ "$(stat -c %a "$d/all")" = 700 ]
	[ -f "$d/all/evil/sub/f" ] && [ -x "$d/all/bin/busybox" ]
	[ -d "$d/all/proc" ] && [ -z "$(ls -A "$d/all/proc")" ] && [ -z "$(ls -A "$d/all/sys")" ]
}

@test "cp: a symlink planted in the sandbox never reaches a host file" {
	mkdir -p "$TESTDIR/host"
	echo secret >"$TESTDIR/host/file"
	dsec-exec "$ID" -- sh -c "ln -s $TESTDIR/host/file /tmp/evil; ln -s $TESTDIR/host /tmp/evildir; mkdir /tmp/d; ln -s $TESTDIR/host /tmp/d/link"
	echo pwned >"$TESTDIR/payload"
	# into the sandbox through the links: the sandbox's own files or an error, never the host's
	dsec-exec cp "$TESTDIR/payload" "$ID:/tmp/evil" || true
	must_fail dsec-exec cp "$TESTDIR/payload" "$ID:/tmp/evildir/x"
	dsec-exec cp "$TESTDIR/payload" "$ID:/tmp/d/link/" || true
	[ "$(cat "$TESTDIR/host/file")" = secret ]
	[ "$(ls "$TESTDIR/host")" = file ]
	# out of the sandbox: the link comes out as a link, not as the host file's content
	dsec-exec "$ID" -- sh -c "rm /tmp/evil; ln -s $TESTDIR/host/file /tmp/evil"
	run dsec-exec cp "$ID:/tmp/evil" "$TESTDIR/out"
	[ -L "$TESTDIR/out" ] || [ ! -e "$TESTDIR/out" ]
	run dsec-exec cp "$ID:/tmp/d" "$TESTDIR/outd"
	[ ! -e "$TESTDIR/outd/link/file" ] || [ -L "$TESTDIR/outd/link" ]
	[ "$(cat "$TESTDIR/host/file")" = secret ]
}

@test "cp: out, a symbolic link to a directory as the destination is not followed unless it ends in '/'" {
	local w=$TESTDIR/w v=$TESTDIR/victim
	mkdir -p "$w" "$v"
	# a first copy out leaves a link the sandbox chose
	dsec-exec "$ID" -- ln -s "$v" /out
	dsec-exec cp "$ID:/out" "$w/res"
	[ -L "$w/res" ]
	dsec-exec "$ID" -- sh -c 'rm /out; mkdir /out; echo pwned >/out/authorized_keys'
	run dsec-exec cp "$ID:/out/." "$w/res"
	[ "$status" -eq 1 ]
	[ "$output" = "dsec-exec: error: $ID: cp: destination '$w/res' is a symbolic link: not followed (write '$w/res/' to copy into the directory it points to)" ]
	run dsec-exec cp "$ID:/out" "$w/res"
	[ "$status" -eq 1 ]
	[ -z "$(ls -A "$v")" ]
	# a link to anything else is replaced, not written through
	ln -s "$v/file" "$w/flink"
	dsec-exec cp "$ID:/out/authorized_keys" "$w/flink"
	[ ! -L "$w/flink" ]
	[ "$(cat "$w/flink")" = pwned ]
	[ -z "$(ls -A "$v")" ]
	# such a link inside the destination directory is replaced, not followed
	mkdir "$w/d"
	ln -s "$v" "$w/d/out"
	dsec-exec cp "$ID:/out" "$w/d"
	[ ! -L "$w/d/out" ]
	[ "$(cat "$w/d/out/authorized_keys")" = pwned ]
	[ -z "$(ls -A "$v")" ]
	# a trailing '/' asks for the directory the link resolves to
	dsec-exec cp "$ID:/out/." "$w/res/"
	[ "$(cat "$v/authorized_keys")" = pwned ]
}

@test "cp: a copy killed half-way leaves no truncated file under the name, a failed one nothing" {
	local pid w
	head -c 8M /dev/urandom >"$TESTDIR/f"
	tar -C "$TESTDIR" -cf "$TESTDIR/f.tar" f
	mkfifo "$TESTDIR/fifo"
	dsec-exec cp - "$ID:/tmp" <"$TESTDIR/fifo" &
	pid=$!
	exec {w}>"$TESTDIR/fifo"
	head -c 4M "$TESTDIR/f.tar" >&"$w"
	sleep 0.5
	kill -9 "$pid"
	wait "$pid" || true
	exec {w}>&-
	run dsec-exec "$ID" ls -A /tmp
	[[ "$output" != *f* || "$output" == *".dsec-cp-"*"-f"* ]] || { echo "left: $output"; return 1; }
	[[ "$(dsec-exec "$ID" sh -c 'ls -A /tmp | grep -x f')" == "" ]] || { echo "truncated f"; return 1; }
	# a stream that breaks off: an error, and nothing of it stays
	dsec-exec "$ID" mkdir /srv
	run sh -c "head -c 4M '$TESTDIR/f.tar' | dsec-exec cp - '$ID:/srv'"
	[ "$status" -eq 1 ] || { echo "broken stream: $output ($status)"; return 1; }
	[ -z "$(dsec-exec "$ID" ls -A /srv)" ] || { echo "left in /srv: $(dsec-exec "$ID" ls -A /srv)"; return 1; }
	# whole, it is there under its name, and only it
	dsec-exec cp - "$ID:/srv" <"$TESTDIR/f.tar"
	[ "$(dsec-exec "$ID" ls -A /srv)" = f ]
	[ "$(dsec-exec "$ID" md5sum /srv/f | cut -d' ' -f1)" = "$(md5sum <"$TESTDIR/f" | cut -d' ' -f1)" ]
}

@test "cp: a copier stopped from inside the sandbox fails the copy at the stall deadline" {
	local holder p i msg="no progress for 2 s: the sandbox side stopped"
	dsec-exec "$ID" -- sh -c 'mkdir -p /data/sub; echo a >/data/sub/a; dd if=/dev/zero of=/data/big bs=1M count=32 2>/dev/null'
	head -c 32M /dev/zero >"$TESTDIR/big"
	tar -C "$TESTDIR" -cf "$TESTDIR/big.tar" big
	# stop every dsec process the sandbox sees, over and over
	dsec-exec "$ID" -- sh -c 'while :; do for p in /proc/[0-9]*; do read -r c <$p/comm 2>/dev/null; case $c in dsec*) kill -STOP ${p#/proc/};; esac; done; done </dev/null >/dev/null 2>&1 &'
	export DSEC_CP_STALL_S=2
	SECONDS=0
	# a copy may end before the loop finds its copier: up to five tries
	mkdir "$TESTDIR/o2"
	for i in 1 2 3 4 5; do
		rm -rf "$TESTDIR/o2/data"
		run timeout 60 dsec-exec cp "$ID:/data" "$TESTDIR/o2/"
		echo "try $i: status $status: $output"
		[ "$status" -eq 0 ] || break
	done
	[ "$status" -eq 1 ]
	[ "$output" = "dsec-exec: error: $ID: cp: $msg" ]
	[ -z "$(ls -A "$TESTDIR/o2")" ] # what it made is removed
	for i in 1 2 3 4 5; do
		rm -rf "$TESTDIR/o3"
		run timeout 60 dsec-exec cp "$ID:/data" "$TESTDIR/o3"
		echo "try $i: status $status: $output"
		[ "$status" -eq 0 ] || break
	done
	[ "$status" -eq 1 ]
	[ ! -e "$TESTDIR/o3" ]
	for i in 1 2 3 4 5; do
		run timeout 60 sh -c "dsec-exec cp $ID:/data - >/dev/null"
		echo "try $i: status $status: $output"
		[ "$status" -eq 0 ] || break
	done
	[ "$status" -eq 1 ]
	[[ "$output" == *"$msg" ]]
	for i in 1 2 3 4 5; do
		run timeout 60 dsec-exec cp "$TESTDIR/big" "$ID:/tmp/"
		echo "try $i: status $status: $output"
		[ "$status" -eq 0 ] || break
	done
	[ "$status" -eq 1 ]
	[[ "$output" == *"$msg" ]]
	# a stream that pauses keeps its copier waiting long enough to be stopped
	run timeout 60 sh -c "{ head -c 1M $TESTDIR/big.tar; sleep 1; tail -c +1048577 $TESTDIR/big.tar; } | dsec-exec cp - $ID:/tmp"
	[ "$status" -eq 1 ]
	[[ "$output" == *"$msg" ]]
	[ "$SECONDS" -lt 60 ]
	# the loop stops any exec too: killed from the host, with all but the holder
	holder=$(jq -r .holder.pid "$DSEC_RUN/sandboxes/$ID/sandbox.json")
	for p in $(cat "$(sb_cgroup)/cgroup.procs"); do
		[ "$p" = "$holder" ] || kill -9 "$p" 2>/dev/null || true
	done
	unset DSEC_CP_STALL_S
	dsec-exec cp "$TESTDIR/big" "$ID:/tmp/"
	dsec-exec --timeout 60s cp "$ID:/data" "$TESTDIR/o2/"
	[ -e "$TESTDIR/o2/data/sub/a" ]
	# --timeout bounds the whole copy, a standard input that never ends included
	run timeout 30 sh -c "sleep 3 | dsec-exec --timeout 1s cp - $ID:/tmp"
	[ "$status" -eq 1 ]
	[ "$output" = "dsec-exec: error: $ID: cp: timed out after 1 s (--timeout)" ]
}

@test "the sandbox's own environment; a dead sandbox is an error record, the rest go on" {
	local id2 pid
	id2=$(dsec-spawn --image busybox --env SBVAR=fromspawn | jq -r .id)
	run dsec-exec "$id2" -- sh -c 'echo $SBVAR'
	[ "$output" = fromspawn ]
	run dsec-exec -e SBVAR=cli "$id2" -- sh -c 'echo $SBVAR'
	[ "$output" = cli ]
	pid=$(jq -r .holder.pid "$DSEC_RUN/sandboxes/$id2/sandbox.json")
	kill -9 "$pid"
	sleep 0.3
	run bash -c "printf '%s\n' '{\"id\":\"$id2\",\"n\":1}' '{\"id\":\"$ID\",\"n\":2}' | dsec-exec -k -- true"
	[ "$status" -eq 1 ]
	json_has "$(records | sed -n 1p)" '.n == 1 and (.error.msg | test("not running"))'
	json_has "$(records | sed -n 2p)" '.n == 2 and .exec.exit == 0'
	run dsec-exec "$id2" -- true
	[ "$status" -eq 125 ]
}

@test "root inside binds a port below 1024 (the sandbox's netns lets every port be bound)" {
	run dsec-exec "$ID" -- cat /proc/sys/net/ipv4/ip_unprivileged_port_start
	[ "$status" -eq 0 ]
	[ "$output" = 0 ]
	# listening is polled for (up to 5 s), not assumed after a fixed sleep
	run dsec-exec "$ID" -- sh -c 'nc -l -p 80 & p=$!; r=1
		for i in $(seq 50); do
			if netstat -ltn | grep -q ":80 "; then r=0; break; fi
			kill -0 $p 2>/dev/null || break; sleep 0.1
		done; kill $p 2>/dev/null; exit $r'
	[ "$status" -eq 0 ]
}
