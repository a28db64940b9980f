#!/usr/bin/env bats
# Containment probes run inside a real sandbox by tests/probe.c. Each protection is also shown
# absent (a control run with it turned off), so these tests can fail.

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
	ID=$(dsec-spawn --image busybox | jq -r .id)
	[ -n "$ID" ]
	[ "$ID" != null ]
	run dsec-exec cp "$PROBE" "$ID:/bin/probe"
	[ "$status" -eq 0 ] || { echo "cp probe: $output"; return 1; }
	echo '{"default":"allow"}' >"$TESTDIR/allow.json"
}

teardown() { dsec_teardown; }

# Calls harmless for the host even where nothing filters them.
CONTROLLED="keyctl add_key bpf perf_event_open unshare-user clone-parent uevent"

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

@test "seccomp: Linux AIO answers ENOSYS (fs.aio-max-nr is one count for the whole host, root's too)" {
	run dsec-exec "$ID" probe syscall io_setup
	[ "$status" -eq 0 ] && [ "$output" = ENOSYS ] || { echo "filtered: $output ($status)"; return 1; }
	run dsec-exec --seccomp "$TESTDIR/allow.json" "$ID" probe syscall io_setup
	[ "$status" -eq 0 ] && [ "$output" = ok ] || { echo "unfiltered: $output ($status)"; return 1; }
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

# ---- escape suite (issue 5): every probe runs inside a real sandbox, every protection is also
# shown absent (a control that can fail) ----

# spawn_probe [OPTIONS]: one more busybox sandbox with the probe in it; prints its id.
spawn_probe() {
	local id
	id=$(dsec-spawn --image busybox "$@" | jq -r .id) || return 1
	[ -n "$id" ] && [ "$id" != null ] || return 1
	dsec-exec cp "$PROBE" "$id:/bin/probe" >&2 || return 1
	echo "$id"
}

# rec ID JSON-MEMBERS: one input record for dsec-exec.
rec() {
	printf '{"id":"%s"%s}\n' "$1" "${2:+,$2}"
}

@test "fds: no host descriptor survives in foreground, record and tty mode" {
	exec 7<"$TESTDIR" 8>"$TESTDIR/w" 9</etc/passwd
	run dsec-exec "$ID" probe fds
	local fg=$output
	run bash -c "$(declare -f rec); rec $ID '\"cmd\":[\"probe\",\"fds\"]' | dsec-exec"
	local rc=$output
	run script -qec "dsec-exec -t $ID probe fds" /dev/null </dev/null
	local tty=${output//$'\r'/}
	exec 7<&- 8>&- 9<&-
	[ "$fg" = "0 1 2" ] || { echo "foreground: $fg"; return 1; }
	json_is "$rc" .exec.stdout '0 1 2'
	[[ "$tty" == *"0 1 2"* ]] && [[ "$tty" != *"0 1 2 "* ]] || { echo "tty: $tty"; return 1; }
	# control: a process entering the same namespaces without dsec-exec keeps them
	exec 7<"$TESTDIR"
	run sb_run "$ID" /bin/probe fds
	exec 7<&-
	[[ " $output " == *" 7 "* ]] || { echo "control: $output"; return 1; }
}

@test "fds: of the memory devices only null, zero, full, random and urandom reach a command as they are" {
	# /dev/kmsg (like mem, kmem, port) as stdin is relayed through a pipe, in the front and
	# in the full dsec-exec (-e takes the full one)
	for a in "" "-e A=1"; do
		# shellcheck disable=SC2086
		run dsec-exec $a "$ID" readlink /proc/self/fd/0 </dev/kmsg
		[[ "$output" == pipe:* ]] || { echo "kmsg ($a): $output"; return 1; }
		# shellcheck disable=SC2086
		run dsec-exec $a "$ID" readlink /proc/self/fd/0 </dev/zero
		[ "$output" = /dev/zero ] || { echo "control zero ($a): $output"; return 1; }
	done
}

@test "cwd: -w and a record's cwd through /proc/self/fd, /proc/PID/cwd or a planted link stay inside (CVE-2024-21626)" {
	mkdir "$TESTDIR/hostdir"
	echo hostsecret >"$TESTDIR/hostdir/victim"
	dsec-exec "$ID" sh -c 'ln -s /proc/self/fd/7 /tmp/l7; ln -s /proc/1/cwd /tmp/lcwd; ln -s /bin /tmp/lbin'
	exec 7<"$TESTDIR/hostdir"
	local w
	for w in /proc/self/fd/7 /proc/self/fd/7/.. /tmp/l7 /proc/1/cwd /tmp/lcwd; do
		run dsec-exec -w "$w" "$ID" probe ls .
		[ "$status" -ne 0 ] && [[ "$output" != *victim* ]] || {
			echo "-w $w: $output ($status)"
			exec 7<&-
			return 1
		}
	done
	run bash -c "$(declare -f rec); rec $ID '\"cwd\":\"/proc/self/fd/7\",\"cmd\":[\"probe\",\"ls\",\".\"]' | dsec-exec"
	exec 7<&-
	json_has "$(records)" '.error or (.exec.exit != 0)'
	[[ "$output" != *victim* ]]
	# a host directory as stdin is refused, not handed over
	run dsec-exec "$ID" probe ls /proc/self/fd/0 <"$TESTDIR/hostdir"
	[ "$status" -eq 125 ] && [[ "$output" != *victim* ]] || { echo "stdin dir: $output"; return 1; }
	# an ordinary link inside is followed inside
	run dsec-exec -w /tmp/lbin "$ID" probe cwd
	[ "$output" = /bin ]
	# control: holding the host's descriptor while entering, /proc/self/fd/7 is the host's dir
	exec 7<"$TESTDIR/hostdir"
	run sb_run "$ID" /bin/probe chdir /proc/self/fd/7 ls .
	exec 7<&-
	[ "$output" = victim ] || { echo "control: $output"; return 1; }
}

@test "exe: /proc/self/exe, /proc/1/exe and every visible process's exe and root give no dsec binary or host file (CVE-2019-5736)" {
	dsec-exec "$ID" sh -c 'sleep 30 >/dev/null 2>&1 &'
	run dsec-exec "$ID" probe procscan
	echo "$output"
	local holder
	holder=$(grep '^1 dsec-holder' <<<"$output")
	[[ "$holder" == *"exe_r=EACCES"* ]] || { echo "holder: $holder"; return 1; }
	if grep -qE 'exe_(w|reopen_w)=ok|root=other|cwd=other|^1 .*root_w=ok' <<<"$output"; then
		return 1
	fi
	# the process dsec-exec starts is the sandbox's binary, busy while it runs
	run dsec-exec "$ID" probe reopen /proc/self/exe w
	[ "$output" = ETXTBSY ] || { echo "self exe: $output"; return 1; }
	run dsec-exec "$ID" probe open /proc/1/exe path
	[ "$output" = EACCES ]
	# no dsec binary anywhere in its tree
	run dsec-exec "$ID" sh -c 'find / -xdev -name "dsec-*" | head -5'
	[ -z "$output" ] || { echo "found: $output"; return 1; }
	# control: in the same mount and pid namespaces, without the user namespace and the policy
	# (host root), the holder's exe is the host's dsec-holder, readable
	local pid
	pid=$(sb_pid "$ID")
	run nsenter -t "$pid" -m -p -- /bin/probe procscan
	[[ "$(grep '^1 dsec-holder' <<<"$output")" == *"exe_r=ok"* ]] || { echo "control: $output"; return 1; }
	run nsenter -t "$pid" -m -p -- readlink /proc/1/exe
	[[ "$output" == */dsec-holder ]]
}

@test "race: dsec's own processes in the sandbox (exec before its exec, cp's copier) leak no cwd, root, exe or fd" {
	mkdir -p "$TESTDIR/tree/sub"
	echo hostsecret >"$TESTDIR/tree/sub/f"
	# the watcher enters with nsenter, not dsec-exec: no Landlock domain of a command's
	# (which alone would keep it from looking), all the sandbox root's capabilities
	sb_run "$ID" sh -c '/bin/probe watch 5 >/tmp/watch 2>&1 &'
	sleep 0.3
	# a copier that lives 2 s, and many execs; stdio pipes or /dev/null, never a host file
	(sleep 2; tar -C "$TESTDIR/tree" -cf - sub) | dsec-exec cp - "$ID:/tmp" 2>&1 | cat
	local _
	for _ in $(seq 40); do dsec-exec "$ID" true </dev/null 2>&1 | cat; done
	sleep 4
	run dsec-exec "$ID" cat /tmp/watch
	echo "$output"
	[[ "$output" =~ seen=([0-9]+)\ leaked=([0-9]+)\ exe_w=([0-9]+) ]]
	[ "${BASH_REMATCH[1]}" -gt 0 ]
	[ "${BASH_REMATCH[2]}" -eq 0 ]
	[ "${BASH_REMATCH[3]}" -eq 0 ]
	# control: a dsec-named process holding a host directory, without the protections
	exec 5<"$TESTDIR/tree"
	sb_run "$ID" sh -c '/bin/probe decoy >/dev/null 2>&1 &'
	exec 5<&-
	run sb_run "$ID" /bin/probe watch 1
	[[ "$output" =~ leaked=([1-9][0-9]*) ]] || { echo "control: $output"; return 1; }
}

# nswatch_result FILE: the watcher's line in the sandbox, once it has finished
nswatch_result() {
	local _
	for _ in $(seq 100); do
		run dsec-exec "$ID" cat "$1"
		[ -n "$output" ] && break
		sleep 0.1
	done
	echo "$output"
}

@test "race: dsec's processes are born in the sandbox's mount and network namespaces (no host mountinfo or net/dev to catch)" {
	sb_run "$ID" sh -c '/bin/probe nswatch 3 >/tmp/nsw 2>&1 &'
	sleep 0.3
	local _
	for _ in $(seq 15); do dsec-exec "$ID" true </dev/null; done
	for _ in $(seq 10); do DSEC_EXEC_FAST=0 dsec-exec "$ID" true </dev/null; done
	for _ in $(seq 10); do echo "{\"id\":\"$ID\",\"sh\":\"true\"}"; done | dsec-exec -j 2 >/dev/null
	dsec-exec cp "$PROBE" "$ID:/tmp/copied"
	echo x | dsec-exec -t "$ID" cat >/dev/null 2>&1
	nswatch_result /tmp/nsw
	[[ "$output" =~ seen=([0-9]+)\ leaked=([0-9]+) ]]
	[ "${BASH_REMATCH[1]}" -gt 0 ]
	[ "${BASH_REMATCH[2]}" -eq 0 ]
	# control: processes born in the sandbox's pid namespace but the host's mount namespace
	sb_run "$ID" sh -c '/bin/probe nswatch 2 >/tmp/nsw2 2>&1 &'
	sleep 0.3
	local pid
	pid=$(sb_pid "$ID")
	for _ in $(seq 10); do nsenter -t "$pid" -p -- true; done
	nswatch_result /tmp/nsw2
	[[ "$output" =~ leaked=([1-9][0-9]*) ]] || { echo "control: $output"; return 1; }
}

@test "cp into a sandbox: a link planted at the destination or in a parent never reaches the host" {
	echo hostsecret >"$TESTDIR/victim"
	mkdir "$TESTDIR/vdir"
	echo keep >"$TESTDIR/vdir/victim"
	echo payload >"$TESTDIR/payload"
	local plant="ln -sf $TESTDIR/victim /tmp/dst; mkdir -p /tmp/p; ln -sfn $TESTDIR/vdir /tmp/p/link;
		ln -sf /proc/1/root$TESTDIR/victim /tmp/dst2; ln -sfn /proc/self/root$TESTDIR/vdir /tmp/p/link2"
	dsec-exec "$ID" sh -c "$plant"
	dsec-exec cp "$TESTDIR/payload" "$ID:/tmp/dst"
	dsec-exec cp "$TESTDIR/payload" "$ID:/tmp/dst2" || true
	run dsec-exec cp "$TESTDIR/payload" "$ID:/tmp/p/link/victim"
	run dsec-exec cp "$TESTDIR/payload" "$ID:/tmp/p/link2/victim"
	run dsec-exec cp "$TESTDIR/payload" "$ID:/tmp/p/link/"
	run bash -c "tar -C '$TESTDIR' -cf - payload | dsec-exec cp - '$ID:/tmp/p/link'"
	[ "$(cat "$TESTDIR/victim")" = hostsecret ]
	[ "$(cat "$TESTDIR/vdir/victim")" = keep ]
	[ "$(ls "$TESTDIR/vdir")" = victim ]
	run dsec-exec "$ID" cat /tmp/dst
	[ "$output" = payload ]
	# control: the same links, followed by a naive host-side path through /proc/PID/root
	dsec-exec "$ID" sh -c "$plant"
	local root
	root=/proc/$(sb_pid "$ID")/root
	[ "$(cat "$root/tmp/p/link/victim")" = keep ]
	cp "$TESTDIR/payload" "$root/tmp/dst"
	[ "$(cat "$TESTDIR/victim")" = payload ] || { echo "control: not followed"; return 1; }
}

@test "cp out of a sandbox: links come out as links, a link in the source path is resolved inside" {
	echo hostsecret >"$TESTDIR/victim"
	dsec-exec "$ID" sh -c "mkdir -p /tmp/out; echo data >/tmp/out/file
		ln -s $TESTDIR/victim /tmp/out/link; ln -s $TESTDIR /tmp/out/dirlink"
	dsec-exec cp "$ID:/tmp/out" "$TESTDIR/got"
	[ -L "$TESTDIR/got/link" ]
	[ "$(readlink "$TESTDIR/got/link")" = "$TESTDIR/victim" ]
	[ -L "$TESTDIR/got/dirlink" ]
	[ "$(cat "$TESTDIR/got/file")" = data ]
	must_fail dsec-exec cp "$ID:/tmp/out/dirlink/victim" "$TESTDIR/got3"
	[ ! -e "$TESTDIR/got3" ]
	# copying onto the link that came out replaces the link, not what it points at
	dsec-exec cp "$ID:/tmp/out/file" "$TESTDIR/got/link"
	[ ! -L "$TESTDIR/got/link" ]
	[ "$(cat "$TESTDIR/got/link")" = data ]
	[ "$(cat "$TESTDIR/victim")" = hostsecret ]
	# control: the naive host path through /proc/PID/root reads the host file
	[ "$(cat "/proc/$(sb_pid "$ID")/root/tmp/out/dirlink/victim")" = hostsecret ]
}

@test "cp out: a file's hard links cost its data once; a stream in runs no decompressor program" {
	dsec-exec "$ID" sh -c 'mkdir /tmp/hl; head -c 4194304 /dev/zero >/tmp/hl/f0
		for i in 1 2 3 4 5 6 7; do ln /tmp/hl/f0 /tmp/hl/f$i; done'
	dsec-exec cp "$ID:/tmp/hl" "$TESTDIR/hl"
	# one copy of the data, not eight
	[ "$(du -sk "$TESTDIR/hl" | cut -f1)" -lt 6000 ]
	[ "$(find "$TESTDIR/hl" -type f | wc -l)" -eq 1 ]
	[ "$(dsec-exec cp "$ID:/tmp/hl" - | wc -c)" -lt 5000000 ]
	[ "$(dsec-exec cp "$ID:/tmp/hl" - | tar -tvf - | grep -c ' link to ')" -eq 7 ]
	# an lrzip stream would make libarchive run "lrzip" from the sandbox's PATH
	dsec-exec "$ID" sh -c 'printf "#!/bin/sh\ntouch /tmp/ran\n" >/bin/lrzip; chmod 755 /bin/lrzip'
	{ printf 'LRZI\0\6'; head -c 100 /dev/zero; } >"$TESTDIR/x.lrz"
	must_fail dsec-exec cp - "$ID:/tmp" <"$TESTDIR/x.lrz"
	run dsec-exec "$ID" test -e /tmp/ran
	[ "$status" -ne 0 ]
	# control: a gzip stream, built in, unpacks
	mkdir "$TESTDIR/g" && echo hi >"$TESTDIR/g/f"
	tar -C "$TESTDIR/g" -czf - f | dsec-exec cp - "$ID:/tmp"
	[ "$(dsec-exec "$ID" cat /tmp/f)" = hi ]
}

@test "reap and ps on a sandbox full of links to host paths touch nothing of the host" {
	echo hostsecret >"$TESTDIR/victim"
	mkdir "$TESTDIR/big"
	head -c 8M /dev/zero >"$TESTDIR/big/blob"
	dsec-exec "$ID" sh -c "cd /tmp; ln -s $TESTDIR/victim v; ln -s $TESTDIR/big big; ln -s / loop
		ln -s /proc/1/root$TESTDIR hostroot; ln -s /proc/self/cwd cwd; mkfifo fifo
		for i in \$(seq 200); do ln -s $TESTDIR/big l\$i; done; mkdir -p d/e; ln -s ../../.. d/e/up"
	local root
	root=/proc/$(sb_pid "$ID")/root
	run timeout 20 dsec-ps "$ID"
	[ "$status" -eq 0 ]
	local disk
	disk=$(jq -r .disk <<<"$output")
	[ "$disk" -lt 4000000 ] || { echo "ps disk $disk"; return 1; }
	run timeout 30 dsec-reap "$ID"
	[ "$status" -eq 0 ]
	json_is "$output" .reaped true
	[ "$(cat "$TESTDIR/victim")" = hostsecret ]
	[ "$(stat -c %s "$TESTDIR/big/blob")" -eq 8388608 ]
	# control: a naive walk through the same links counts (and would remove) the host's files
	local C
	C=$(spawn_probe)
	dsec-exec "$C" sh -c "ln -s $TESTDIR/big /tmp/big; ln -s $TESTDIR/victim /tmp/v"
	root=/proc/$(sb_pid "$C")/root
	[ "$(cat "$root/tmp/v")" = hostsecret ]
	[ "$(du -sLk "$root/tmp/big" | cut -f1)" -ge 8192 ]
}

@test "sandboxes do not reach each other: abstract sockets, loopback TCP, SysV IPC, POSIX shm" {
	local B H1 H2 port hport key=$((0x5e000000 + RANDOM)) name="dsec-probe-$RANDOM$RANDOM"
	B=$(spawn_probe)
	dsec-exec "$ID" sh -c "probe serve-tcp 0 20 >/tmp/port 2>&1 & probe serve-unix $name 20 >/dev/null 2>&1 &
		probe ipc $key create >/dev/null; probe shm /$name create >/dev/null; sleep 0.5"
	port=$(dsec-exec "$ID" cat /tmp/port)
	[ "$port" -gt 0 ]
	# the probes work: A reaches its own
	[ "$(dsec-exec "$ID" probe connect-tcp "$port")" = ok ]
	[ "$(dsec-exec "$ID" probe connect-unix "$name")" = ok ]
	[ "$(dsec-exec "$ID" probe ipc "$key" find)" = "shm=ok sem=ok msg=ok" ]
	[ "$(dsec-exec "$ID" probe shm "/$name" find)" = ok ]
	# B does not, nor does the host
	[ "$(dsec-exec "$B" probe connect-tcp "$port")" = ECONNREFUSED ]
	[ "$(dsec-exec "$B" probe connect-unix "$name")" = ECONNREFUSED ]
	[ "$(dsec-exec "$B" probe ipc "$key" find)" = "shm=ENOENT sem=ENOENT msg=ENOENT" ]
	[ "$(dsec-exec "$B" probe shm "/$name" find)" = ENOENT ]
	[ "$("$PROBE" connect-unix "$name")" != ok ]
	[ "$("$PROBE" connect-tcp "$port")" != ok ]
	[ "$("$PROBE" ipc "$key" find)" = "shm=ENOENT sem=ENOENT msg=ENOENT" ]
	[ ! -e "/dev/shm/$name" ]
	# control: two sandboxes sharing the host's network (--net host) do reach each other
	H1=$(spawn_probe --net host)
	H2=$(spawn_probe --net host)
	dsec-exec "$H1" sh -c "probe serve-tcp 0 20 >/tmp/port 2>&1 & probe serve-unix $name-h 20 >/dev/null 2>&1 & sleep 0.5"
	hport=$(dsec-exec "$H1" cat /tmp/port)
	[ "$(dsec-exec "$H2" probe connect-tcp "$hport")" = ok ]
	[ "$(dsec-exec "$H2" probe connect-unix "$name-h")" = ok ]
	[ "$("$PROBE" connect-tcp "$hport")" = ok ]
}

@test "per-user kernel counts are each sandbox's own: one using up its inotify instances leaves others theirs" {
	local B owner_a owner_b base n
	B=$(spawn_probe)
	# each sandbox's user namespace has an owner of its own, from the dsec-owner block
	base=$(awk -F: '$1 == "dsec-owner" { print $2; exit }' "${DSEC_SUBUID_FILE:-/etc/subuid}")
	[ -n "$base" ]
	owner_a=$(sb_json "$ID" | jq -r .userns.owner)
	owner_b=$(sb_json "$B" | jq -r .userns.owner)
	[ "$owner_a" -gt "$base" ]
	[ "$owner_b" -gt "$base" ]
	[ "$owner_a" != "$owner_b" ]
	[ "$("$PROBE" nsowner "/proc/$(sb_pid "$ID")/ns/user")" = "$owner_a" ]
	# A takes every inotify instance it may and holds them while B and the host open theirs
	# (the kernel limits them per user: fs.inotify.max_user_instances)
	n=$(cat /proc/sys/fs/inotify/max_user_instances)
	dsec-exec "$ID" probe inotify 6 >"$TESTDIR/a" &
	for _ in $(seq 50); do [ -s "$TESTDIR/a" ] && break; sleep 0.1; done
	[ "$(cat "$TESTDIR/a")" = "$n EMFILE" ] || { echo "A: $(cat "$TESTDIR/a")"; return 1; }
	run dsec-exec "$B" probe inotify 0
	[ "$output" = "$n EMFILE" ] || { echo "B: $output"; return 1; }
	run "$PROBE" inotify 0
	[[ "$output" != "0 "* ]] || { echo "host root: $output"; return 1; }
	wait
	# control: two user namespaces with one owner share that owner's instances (the host's
	# root owned every sandbox's before); the owner is an id of dsec's block no holder has
	mkdir -m 0755 "$TESTDIR/ctl"
	cp "$PROBE" "$TESTDIR/ctl/probe"
	chmod 0711 "$TESTDIR"
	local u=$((base + 4194303))
	setpriv --reuid="$u" --regid="$u" --clear-groups unshare --user "$TESTDIR/ctl/probe" inotify 6 >"$TESTDIR/c" &
	for _ in $(seq 50); do [ -s "$TESTDIR/c" ] && break; sleep 0.1; done
	[ "$(cat "$TESTDIR/c")" = "$n EMFILE" ] || { echo "control A: $(cat "$TESTDIR/c")"; return 1; }
	run setpriv --reuid="$u" --regid="$u" --clear-groups unshare --user "$TESTDIR/ctl/probe" inotify 0
	[ "$output" = "0 EMFILE" ] || { echo "control B: $output"; return 1; }
	wait
}

@test "ptys: a process one command leaves running cannot open a later -t command's terminal by its name" {
	# the leftover looks while the terminal command runs
	dsec-exec "$ID" sh -c '(sleep 1; /bin/probe ptsopen >/tmp/pts.out 2>&1) </dev/null >/dev/null 2>&1 &'
	run script -qec "dsec-exec -t $ID sh -c 'tty; sleep 2'" /dev/null
	[[ "$output" == *"/dev/pts/"* ]] # ttyname still finds it
	local i
	for i in $(seq 50); do
		run dsec-exec "$ID" cat /tmp/pts.out
		[ -n "$output" ] && break
		sleep 0.1
	done
	echo "$output"
	[[ "$output" == *":EACCES"* ]]
	[[ "$output" != *":ok"* ]]
	# control: a pty a process of the sandbox makes itself is open to the others by its name
	run dsec-exec "$ID" probe ptsopen mine
	[[ "$output" == *":ok"* ]] || { echo "control: $output"; return 1; }
}

@test "ptys: a sandbox has at most its own 64 (the kernel counts them for the whole node); another still gets a terminal" {
	local B
	B=$(spawn_probe)
	run dsec-exec "$ID" grep -c ' /dev/pts .* devpts .*max=64' /proc/self/mountinfo
	[ "$output" = 1 ]
	# A holds all it may while B opens its own and dsec-exec -t still gives B a terminal
	dsec-exec "$ID" probe ptys 5 >"$TESTDIR/a" &
	for _ in $(seq 50); do [ -s "$TESTDIR/a" ] && break; sleep 0.1; done
	[ "$(cat "$TESTDIR/a")" = "64 ENOSPC" ] || { echo "A: $(cat "$TESTDIR/a")"; return 1; }
	run dsec-exec "$B" probe ptys 0
	[ "$output" = "64 ENOSPC" ] || { echo "B: $output"; return 1; }
	run timeout 20 dsec-exec -t "$B" sh -c 'tty'
	[ "$status" -eq 0 ]
	[[ "$output" == /dev/pts/* ]]
	wait
	dsec-reap "$B" >/dev/null
}

@test "descriptors in flight: one sandbox holding all it may leaves dsec-exec -t working in another" {
	local B out
	B=$(spawn_probe)
	# the kernel counts them per host uid, which every sandbox's root shares
	dsec-exec "$ID" probe inflight 8 >"$TESTDIR/a" &
	for _ in $(seq 50); do [ -s "$TESTDIR/a" ] && break; sleep 0.1; done
	[[ "$(cat "$TESTDIR/a")" == *" ETOOMANYREFS" ]] || { echo "A: $(cat "$TESTDIR/a")"; return 1; }
	out=$(script -qec "dsec-exec -t $B sh -c 'tty; echo status \$?'" /dev/null </dev/null)
	[[ "$out" == *"/dev/pts/"*"status 0"* ]] || { echo "-t in B: $out"; return 1; }
	# the pty stays the host root's (nobody inside) and only its owner's: the command's alone
	out=$(script -qec "dsec-exec -t $B sh -c 'stat -c %u:%g:%a \$(tty)'" /dev/null </dev/null)
	[[ "$out" == *"65534:65534:600"* ]] || { echo "owner: $out"; return 1; }
	wait
}

@test "descriptors in flight are counted per sandbox: one holding all it may leaves another all of its own" {
	local B
	B=$(spawn_probe)
	# the kernel counts them per host uid (at most RLIMIT_NOFILE, 1024, then ETOOMANYREFS):
	# each sandbox's root is a uid of its own
	dsec-exec "$ID" probe inflight 8 >"$TESTDIR/a" &
	for _ in $(seq 50); do [ -s "$TESTDIR/a" ] && break; sleep 0.1; done
	[ "$(cat "$TESTDIR/a")" = "1250 ETOOMANYREFS" ] || { echo "A: $(cat "$TESTDIR/a")"; return 1; }
	run dsec-exec "$B" probe inflight 0
	[ "$output" = "1250 ETOOMANYREFS" ] || { echo "B: $output"; return 1; }
	# control: a second process of A's root shares A's count, so it gets none
	run dsec-exec "$ID" probe inflight 0
	[ "$output" = "0 ETOOMANYREFS" ] || { echo "A again: $output"; return 1; }
	wait
}

@test "outgrow: memory, pids, disk bytes and inodes stop at the limits; the host and another sandbox carry on" {
	local S B
	S=$(spawn_probe --memory 32M --pids 32 --disk 16M)
	B=$(spawn_probe)
	run dsec-exec "$S" probe alloc 128
	[ "$status" -eq 137 ] || { echo "alloc: $output ($status)"; return 1; }
	# records say the OOM killer did it: the command itself, or a child its shell outlived
	run bash -c "$(declare -f rec); rec $S | dsec-exec -- probe alloc 128"
	json_is "$output" .exec.signal SIGKILL
	json_is "$output" .exec.oom_kills 1
	run bash -c "$(declare -f rec); rec $S | dsec-exec -- sh -c 'probe alloc 128; echo \$?'"
	json_is "$output" .exec.stdout 137
	json_is "$output" .exec.oom_kills 1
	run bash -c "$(declare -f rec); rec $S | dsec-exec -- probe alloc 4"
	json_is "$output" .exec.oom_kills 0
	run dsec-exec "$S" probe forks 200
	[[ "$output" =~ forked=([0-9]+)\ err=EAGAIN ]]
	[ "${BASH_REMATCH[1]}" -lt 32 ]
	run dsec-exec "$S" probe fill /tmp/f 64
	[[ "$output" =~ mb=([0-9]+)\ err=ENOSPC ]]
	[ "${BASH_REMATCH[1]}" -lt 16 ]
	dsec-exec "$S" rm /tmp/f
	run dsec-exec "$S" probe files /tmp 100000
	[[ "$output" =~ files=([0-9]+)\ err=ENOSPC ]]
	[ "${BASH_REMATCH[1]}" -le 16384 ]
	# the sandbox is still usable, the other one and the host too
	run dsec-exec "$S" sh -c 'rm -rf /tmp/*; probe alloc 4'
	[ "$output" = "ok 4" ]
	[ "$(dsec-exec "$B" probe pid)" -gt 1 ]
	df /tmp >/dev/null
	# control: the same probes in a sandbox with the default limits go through
	[ "$(dsec-exec "$B" probe alloc 128)" = "ok 128" ]
	[ "$(dsec-exec "$B" probe forks 200)" = "forked=200 err=none" ]
	[ "$(dsec-exec "$B" probe fill /tmp/f 64)" = "mb=64 err=none" ]
	dsec-exec "$B" sh -c 'rm /tmp/f; mkdir /tmp/d'
	[ "$(dsec-exec "$B" probe files /tmp/d 20000)" = "files=20000 err=none" ]
}

@test "outgrow: output is capped by --max-output, time by --timeout (a setsid tree ignoring SIGTERM)" {
	run bash -c "$(declare -f rec); rec $ID | dsec-exec --max-output 64K --timeout 3 -- yes"
	json_is "$output" '.exec.stdout | length' 65536
	json_is "$output" .exec.truncated true
	run bash -c "$(declare -f rec); rec $ID | dsec-exec --max-output 1M -- sh -c 'yes | head -c 100000'"
	json_is "$output" '.exec.stdout | length' 100000
	json_is "$output" .exec.truncated false
	local t0=$SECONDS
	run dsec-exec --timeout 2 "$ID" probe sleepers 3
	[ "$status" -eq 124 ]
	[ $((SECONDS - t0)) -le 6 ]
	run dsec-exec "$ID" sh -c 'ps -o comm | grep -c "^probe"'
	[ "$output" = 0 ] || { echo "left: $output"; return 1; }
	run bash -c "$(declare -f rec); rec $ID | dsec-exec --timeout 2 -- probe sleepers 3"
	json_is "$output" .exec.timed_out true
	run dsec-exec "$ID" sh -c 'ps -o comm | grep -c "^probe"'
	[ "$output" = 0 ] || { echo "left: $output"; return 1; }
	# control: killing dsec-exec, or SIGTERM to the tree, leaves the tree running
	run timeout -s KILL 2 dsec-exec "$ID" probe sleepers 3
	run dsec-exec "$ID" sh -c 'kill -TERM $(pidof probe); sleep 0.3; ps -o comm | grep -c "^probe"'
	[ "$output" -ge 6 ] || { echo "control: $output"; return 1; }
}

@test "grep -r / inside a sandbox ends without harm and finds nothing of the host, dsec or another sandbox" {
	local S B mark="dsecmark$RANDOM$RANDOM" pool warm pat
	echo "$mark" >"$TESTDIR/marker"
	S=$(spawn_probe --memory 256M)
	B=$(spawn_probe)
	# a warm pool after them (so neither is claimed from it): its name and its sandbox's id
	dsec-warm --image busybox --count 1 >/dev/null
	pool=$(find "$DSEC_RUN/pools" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -1)
	warm=$(find "$DSEC_RUN/pools/$pool/ready" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -1)
	[ -n "$pool" ]
	[ -n "$warm" ]
	dsec-exec "$B" sh -c "echo $mark >/tmp/b-marker"
	dsec-exec "$S" sh -c "echo ${mark}own >/tmp/own-marker"
	# a pattern that does not match itself in /proc/*/cmdline
	pat="${mark:0:1}[${mark:1:1}]${mark:2}|${ID:0:1}[${ID:1:1}]${ID:2}|${B:0:1}[${B:1:1}]${B:2}"
	pat="$pat|${pool:0:1}[${pool:1:1}]${pool:2}|${warm:0:1}[${warm:1:1}]${warm:2}"
	local t0=$SECONDS
	# each top directory on its own (grep blocks for good on /dev/pts/ptmx), /bin's 400 links to
	# busybox skipped
	rec "$S" | dsec-exec --timeout 60 --max-output 1M -- sh -c "
		for d in /*; do [ \$d = /bin ] && continue; timeout -s KILL 5 grep -rlE '$pat' \$d; done
		grep -r x / >/dev/null 2>&1 & sleep 3; kill -9 \$!; echo end" >"$TESTDIR/grep.out" 2>&1 &
	local bg=$!
	# while it runs: the other sandbox and the host answer
	sleep 2
	[ "$(dsec-exec "$B" probe pid)" -gt 1 ]
	[ "$(dsec-exec "$S" probe pid)" -gt 1 ]
	wait "$bg"
	local r
	r=$(grep '^{' "$TESTDIR/grep.out")
	[ $((SECONDS - t0)) -le 70 ]
	json_is "$r" .exec.timed_out false
	json_is "$r" .exec.stdout $'/tmp/own-marker\nend'
	# the host, the other sandbox and the sandbox itself carry on
	[ "$(dsec-exec "$B" cat /tmp/b-marker)" = "$mark" ]
	[ "$(dsec-exec "$S" probe pid)" -gt 1 ]
	[ "$(cat "$TESTDIR/marker")" = "$mark" ]
	# control: the same pattern finds the marker where it is
	run dsec-exec "$B" grep -rlE "$pat" /tmp
	[ "$output" = /tmp/b-marker ]
	grep -rqE "$pat" "$TESTDIR/marker"
}

@test "ioctl: TIOCSTI and TIOCLINUX fail with EPERM on the sandbox's pty and on a host terminal; new user namespaces fail" {
	local mode i out
	# -t: the sandbox's own pty; without -t under script(1): stdin is a terminal of the host
	for mode in -t ""; do
		for i in tiocsti tioclinux; do
			out=$(script -qec "dsec-exec $mode $ID probe ioctl $i" /dev/null </dev/null | tr -d '\r\0^@')
			[[ "$out" == *EPERM* ]] || { echo "$mode $i: $out"; return 1; }
		done
	done
	run dsec-exec "$ID" probe syscall unshare-user
	[ "$output" = EPERM ]
	# control: without the filter TIOCSTI pushes input into the sandbox's pty, and TIOCLINUX
	# reaches the tty driver; the host's terminal is out of reach all the same (relayed, the
	# command's stdin is a pipe)
	out=$(script -qec "dsec-exec -t --seccomp $TESTDIR/allow.json $ID probe ioctl tiocsti" /dev/null </dev/null | tr -d '\r\0^@')
	[[ "$out" == *ok* ]] || { echo "control tiocsti: $out"; return 1; }
	out=$(script -qec "dsec-exec --seccomp $TESTDIR/allow.json $ID probe ioctl tiocsti" /dev/null </dev/null | tr -d '\r\0^@')
	[[ "$out" == *ENOTTY* ]] || { echo "host terminal, no filter: $out"; return 1; }
	out=$(script -qec "dsec-exec -t --seccomp $TESTDIR/allow.json $ID probe ioctl tioclinux" /dev/null </dev/null | tr -d '\r\0^@')
	[[ "$out" != *EPERM* ]] && [[ "$out" == *E* ]] || { echo "control tioclinux: $out"; return 1; }
	run dsec-exec --seccomp "$TESTDIR/allow.json" "$ID" probe syscall unshare-user
	[ "$output" != EPERM ] || { echo "control unshare-user: $output"; return 1; }
}

@test "signals: kill 0 in a command reaches no other command, nor dsec-exec or its caller; a signal to dsec-exec reaches the command's tree" {
	[ -x "$TOP/build/libexec/dsec-exec" ] || skip "no front on this architecture"
	local fast out
	for fast in 1 0; do
		# a caller in a process group of its own running two commands: one signals its
		# process group (kill 0), and so would have all of them, were it ours
		out=$(timeout 30 setsid -w bash -c "
			DSEC_EXEC_FAST=$fast dsec-exec $ID -- sh -c 'sleep 1.5; echo B' </dev/null &
			b=\$!
			DSEC_EXEC_FAST=$fast dsec-exec $ID -- sh -c 'sleep 0.3; kill -TERM 0; echo A' </dev/null
			echo \"A \$?\"; wait \$b; echo \"B \$?\"; echo caller" 2>&1)
		[ "$out" = $'A 143\nB\nB 0\ncaller' ] || { echo "fast=$fast: '$out'"; return 1; }
		# and a signal sent to dsec-exec goes to the command's whole process group
		DSEC_EXEC_FAST=$fast dsec-exec "$ID" -- sh -c 'sleep 30 & sleep 30 & wait' </dev/null &
		local pid=$! st=0
		sleep 0.5
		kill -TERM "$pid"
		wait "$pid" || st=$?
		[ "$st" -eq 143 ] || { echo "fast=$fast: status $st"; return 1; }
		run dsec-exec "$ID" sh -c 'ps -o comm | grep -c "^sleep"'
		[ "$output" = 0 ] || { echo "fast=$fast: sleeps left: $output"; return 1; }
	done
	# record streams: one record's kill 0 leaves the other record running beside it
	out=$(printf '{"id":"%s","sh":"sleep 0.3; kill -TERM 0"}\n{"id":"%s","sh":"sleep 1.5; echo B"}\n' \
		"$ID" "$ID" | timeout 30 dsec-exec -j 2)
	[ "$(jq -s -r '.[] | select(.sh | contains("echo B")) | .exec.stdout' <<<"$out")" = B ]
	echo "$out"
	[ "$(jq -s -r '.[] | select(.sh | contains("kill")) | .exec.signal' <<<"$out")" = SIGTERM ]
	# control: the same kill 0 outside a sandbox takes its whole group
	out=$(timeout 30 setsid -w bash -c "sh -c 'sleep 1.5; echo B' & sh -c 'sleep 0.3; kill -TERM 0'; echo caller" 2>&1) || true
	[ -z "$out" ] || { echo "control: '$out'"; return 1; }
}

@test "leftovers: a process one command leaves running can neither read nor write a later one (the grader); its own children it can" {
	abi=$(dsec-exec "$ID" probe landlock-abi)
	[ "$abi" -ge 2 ] || skip "the kernel has no Landlock ABI 2 or later ($abi)"
	# a thief left running: it copies every other process's environment into /tmp/stolen
	dsec-exec "$ID" -- sh -c 'setsid sh -c "while :; do for p in /proc/[0-9]*; do
		tr \"\\0\" \"\\n\" <\$p/environ 2>/dev/null | grep TOKEN >>/tmp/stolen; done; sleep 0.05; done" \
		</dev/null >/dev/null 2>&1 & echo $! >/tmp/thief'
	for fast in 1 0; do
		DSEC_EXEC_FAST=$fast dsec-exec -e TOKEN=secret$fast "$ID" -- sleep 1
	done
	rec "$ID" '"env":{"TOKEN":"secret-rec"},"cmd":["sleep","1"]' | dsec-exec >/dev/null
	run dsec-exec "$ID" -- sh -c 'cat /tmp/stolen 2>/dev/null; echo end'
	[ "$output" = end ] || { echo "stolen: $output"; return 1; }
	# nor does a later command reach the thief (/proc/PID/environ, mem: ptrace_may_access)
	run dsec-exec "$ID" -- sh -c 'cat /proc/$(cat /tmp/thief)/environ >/dev/null && echo read'
	[ "$status" -ne 0 ] && [[ "$output" == *"Permission denied"* ]] || { echo "reached: $output"; return 1; }
	# control: within one command, the same read of a child works
	run dsec-exec -e TOKEN=mine "$ID" -- sh -c 'sleep 2 & sleep 0.2; tr "\0" "\n" </proc/$!/environ | grep TOKEN'
	[ "$output" = TOKEN=mine ] || { echo "control: $output"; return 1; }
}

@test "leftovers: what a command leaves running holds neither the caller's \$(...), a pipe nor its terminal, and writes nothing there after the exit" {
	[ -x "$TOP/build/libexec/dsec-exec" ] || skip "no front on this architecture"
	local fast out t0 t1
	for fast in 1 0; do
		t0=$(date +%s%N)
		out=$(DSEC_EXEC_FAST=$fast timeout 20 dsec-exec "$ID" -- sh -c '(sleep 2; echo late; echo late >&2) & echo now')
		t1=$(date +%s%N)
		[ "$out" = now ] || { echo "fast=$fast \$(): '$out'"; return 1; }
		[ $(((t1 - t0) / 1000000)) -lt 1500 ] || { echo "fast=$fast \$(): $(((t1 - t0) / 1000000)) ms"; return 1; }
		t0=$(date +%s%N)
		out=$(DSEC_EXEC_FAST=$fast timeout 20 dsec-exec "$ID" -- sh -c '(sleep 2; echo late; echo late >&2) & echo now >&2' 2>&1 | cat)
		t1=$(date +%s%N)
		[ "$out" = now ] || { echo "fast=$fast pipe: '$out'"; return 1; }
		[ $(((t1 - t0) / 1000000)) -lt 1500 ] || { echo "fast=$fast pipe: $(((t1 - t0) / 1000000)) ms"; return 1; }
		# a terminal: script(1) ends when the last holder of its pty lets go
		t0=$(date +%s%N)
		out=$(timeout 20 script -qec "env DSEC_EXEC_FAST=$fast dsec-exec $ID -- sh -c '(sleep 2; echo late) & echo now'; sleep 2.5" /dev/null </dev/null | tr -d '\r')
		t1=$(date +%s%N)
		[ "$out" = now ] || { echo "fast=$fast tty: '$out'"; return 1; }
	done
	# control: a host pipe handed over as it is (sh without dsec-exec) holds $(...)
	t0=$(date +%s%N)
	out=$(sh -c '(sleep 1; echo late) & echo now')
	t1=$(date +%s%N)
	[ "$out" = $'now\nlate' ] && [ $(((t1 - t0) / 1000000)) -ge 900 ]
}

@test "a command a sandbox process keeps stopped fails in bounded time, before its start as after, and the stream goes on" {
	[ -x "$TOP/build/libexec/dsec-exec" ] || skip "no front on this architecture"
	# a spinner that stops every process of the sandbox it can, over and over: the command,
	# visible from its birth, is stopped before its execve (dsec gives up after 5 s) or after
	# (its --timeout ends it)
	# (it starts once the sh that launched it is gone: stopped, that sh would hold this dsec-exec)
	dsec-exec "$ID" -- sh -c '(sleep 0.3; while :; do kill -STOP -1; done) >/dev/null 2>&1 </dev/null &'
	sleep 0.5
	local fast t0
	for fast in 1 0; do
		t0=$SECONDS
		run env DSEC_EXEC_FAST=$fast timeout 40 dsec-exec --timeout 8 "$ID" -- echo hi
		# (or it ran between two rounds of the spinner)
		case "$status:$output" in
		"125:"*"stopped or killed before it could start"* | "124:"*"timed out"* | "0:hi") ;;
		*) echo "fast=$fast: status $status: $output"; return 1 ;;
		esac
		[ $((SECONDS - t0)) -le 15 ]
	done
	# records: an error or a time-out for it, then the next record, in another sandbox, runs
	local S
	S=$(dsec-spawn --image busybox | jq -r .id)
	run timeout 60 bash -c "printf '{\"id\":\"%s\",\"cmd\":[\"echo\",\"hi\"],\"timeout\":\"8s\"}\n{\"id\":\"%s\",\"cmd\":[\"echo\",\"there\"]}\n' $ID $S | dsec-exec 2>/dev/null"
	echo "$output"
	[ "$(jq -s -r '.[0] | has("error") or .exec.timed_out or .exec.stdout == "hi\n"' <<<"$output")" = true ]
	[ "$(jq -s -r '.[1].exec.stdout' <<<"$output")" = there ]
	# control: without dsec's guards a process stopped by another waits forever
	run timeout 3 sh -c 'sh -c "kill -STOP \$\$; echo resumed" & wait'
	[ "$status" -eq 124 ]
	dsec-reap "$ID" "$S" >/dev/null
}
