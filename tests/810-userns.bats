#!/usr/bin/env bats
# Root inside a sandbox is not root on the host, and /proc and /sys hide the kernel. Each probe
# has a control run with the protection off: a run dir whose template was made with
# DSEC_USERNS=0, or the same probe against the host's own /proc and /sys.

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
	echo '{"default":"allow"}' >"$TESTDIR/allow.json"
	RUN0="$TESTDIR/run0"
}

teardown() {
	[ -d "${RUN0:-/nonexistent}" ] && timeout 60 dsec-reap -q --all --run "$RUN0" >/dev/null 2>&1
	dsec_teardown
}

# The host uid of a process.
host_uid() { awk '/^Uid:/ { print $2 }' "/proc/$1/status"; }

# dsec's range start, from /etc/subuid (made by the first spawn when missing).
range_start() { awk -F: '$1 == "dsec" { print $2; exit }' "${DSEC_SUBUID_FILE:-/etc/subuid}"; }

@test "userns: root inside is a host uid of its own, other ids dsec's range; DSEC_USERNS=0 is host root" {
	local root_a owners
	spawn_one
	base=$(range_start)
	[ -n "$base" ]
	[ "$base" -ge 100000 ]
	owners=$(awk -F: '$1 == "dsec-owner" { print $2; exit }' "${DSEC_SUBUID_FILE:-/etc/subuid}")
	[ -n "$owners" ]
	json_is "$(sb_json "$ID")" .userns.uid "$base"
	holder=$(sb_pid "$ID")
	root_a=$(sb_json "$ID" | jq -r .userns.root)
	# root is the holder's own uid from the owners' block, which also owns the namespace
	[ "$root_a" = "$((owners + holder))" ] || { echo "root $root_a, holder $holder"; return 1; }
	json_is "$(sb_json "$ID")" .userns.owner "$root_a"
	run sb_run "$ID" sh -c 'id -u; cat /proc/self/uid_map; cat /proc/self/gid_map'
	[ "$(echo $output)" = "0 0 $root_a 1 1 $((base + 1)) 65535 0 $base 65536" ] || { echo "$output"; return 1; }
	[ "$(host_uid "$holder")" = "$root_a" ]
	# a command started by dsec-exec: the host sees the sandbox's root uid, never 0; another
	# user inside is the range's
	dsec-exec "$ID" sh -c 'sleep 30 &'
	dsec-exec -u 1000 "$ID" sh -c 'sleep 31 &'
	pid=$(pgrep -P "$holder" -x sleep | head -1)
	[ -n "$pid" ]
	run sh -c "for p in \$(pgrep -P $holder -x sleep); do awk '/^Uid:/ { print \$2 }' /proc/\$p/status; done | sort -n"
	[ "$(echo $output)" = "$((base + 1000)) $root_a" ] || { echo "$output"; return 1; }
	# a second sandbox's root is another host uid; its other ids are the same range
	spawn_one
	[ "$(host_uid "$(sb_pid "$ID")")" != "$root_a" ]
	run sb_run "$ID" sh -c 'cat /proc/self/uid_map'
	[ "$(echo $output)" = "0 $((owners + $(sb_pid "$ID"))) 1 1 $((base + 1)) 65535" ] || { echo "$output"; return 1; }
	# control: without user namespaces root inside is uid 0 on the host
	ID0=$(DSEC_USERNS=0 dsec-spawn --run "$RUN0" --image busybox | jq -r .id)
	[ "$(host_uid "$(DSEC_RUN=$RUN0 sb_pid "$ID0")")" = 0 ]
	run dsec-exec --run "$RUN0" "$ID0" cat /proc/self/uid_map
	[ "$(echo $output)" = "0 0 4294967295" ]
}

@test "userns: layer files look owned by root inside; writes belong to the sandbox's root on the host" {
	spawn_one
	base=$(range_start)
	run sb_run "$ID" sh -c 'stat -c "%u:%g" /bin/busybox /etc/passwd /; mkdir /u && chown 1000:1000 /u && stat -c %u:%g /u; echo x >/etc/new && echo y >>/etc/passwd && stat -c "%u" /etc/new /etc/passwd'
	[ "$(echo $output)" = "0:0 0:0 0:0 1000:1000 0 0" ] || { echo "$output"; return 1; }
	holder=$(sb_pid "$ID")
	root=$(sb_json "$ID" | jq -r .userns.root)
	[ "$root" != "$base" ]
	[ "$(stat -c %u:%g "/proc/$holder/root/etc/new")" = "$root:$base" ]
	[ "$(stat -c %u "/proc/$holder/root/bin/busybox")" = "$root" ]
	[ "$(stat -c %u:%g "/proc/$holder/root/u")" = "$((base + 1000)):$((base + 1000))" ]
	# the shared layer is untouched: a second sandbox sees the image's /etc/passwd, owned by
	# its own root
	spawn_one
	run sb_run "$ID" grep -c . /etc/passwd
	[ "$output" = 1 ]
	[ "$(stat -c %u "/proc/$(sb_pid "$ID")/root/etc/passwd")" = "$(sb_json "$ID" | jq -r .userns.root)" ]
}

@test "userns: an escaped process holds no host privilege" {
	spawn_one
	holder=$(sb_pid "$ID")
	probe='cat /etc/shadow >/dev/null 2>&1 && echo read-shadow
		touch "$1/escaped" 2>/dev/null && echo wrote-host-file
		kill -0 1 2>/dev/null && echo signalled-init
		echo end'
	# a process of the sandbox's user namespace, as root there, with the host's files and
	# processes in view: what an escape from the mount and pid namespaces would leave
	run nsenter --user="/proc/$holder/ns/user" -S 0 -G 0 -- sh -c "$probe" x "$TESTDIR"
	[ "$output" = end ] || { echo "$output"; return 1; }
	[ ! -e "$TESTDIR/escaped" ]
	# control: the same process in the initial user namespace (what root inside a sandbox
	# without a user namespace is) does all three
	run sh -c "$probe" x "$TESTDIR"
	[ "$(echo $output)" = "read-shadow wrote-host-file signalled-init end" ]
}

@test "userns: full capabilities inside cannot unmount masks, mount, rename the host or touch its network" {
	spawn_one
	# sb_run: every namespace of the holder, root with every capability of the user namespace,
	# no seccomp filter
	run sb_run "$ID" sh -c 'umount /proc/keys 2>&1; mount -t tmpfs t /tmp || echo mount-failed; hostname evil 2>&1; ip link set lo down 2>&1; hostname'
	[[ "$output" == *"can't unmount /proc/keys: Operation not permitted"* ]] || { echo "$output"; return 1; }
	[[ "$output" == *"mount-failed"* ]]
	[[ "$output" == *"sethostname: Operation not permitted"* ]]
	[ "${lines[-1]}" = "$ID" ]
	run sb_run "$ID" ip -o link show lo
	[[ "$output" == *"UP"* ]]
	# control: without a user namespace, the same entry is host root and can unmount the mask
	ID0=$(DSEC_USERNS=0 dsec-spawn --run "$RUN0" --image busybox | jq -r .id)
	run env DSEC_RUN="$RUN0" bash -c 'source "$0"; sb_run "$1" sh -c "umount /proc/keys && echo unmounted"' \
		"$BATS_TEST_DIRNAME/image.bash" "$ID0"
	[ "$output" = unmounted ] || { echo "$output"; return 1; }
}

# Files of /proc that must read empty, when the kernel has them.
MASKED="kcore keys key-users timer_list sched_debug kpagecgroup kpageflags kpagecount kmsg kallsyms vmallocinfo pagetypeinfo cmdline config.gz"

@test "proc: kernel files read empty, kernel dirs are empty; the host's are not" {
	spawn_one
	n=0
	for f in $MASKED; do
		[ -e "/proc/$f" ] || continue
		run sb_run "$ID" sh -c "head -c 64 /proc/$f | wc -c"
		[ "$output" = 0 ] || { echo "/proc/$f: $output"; return 1; }
		n=$((n + 1))
	done
	[ "$n" -ge 5 ]
	# control: the host's unmasked copies have content, so the probe would see it
	[ "$(head -c 64 /proc/timer_list | wc -c)" -gt 0 ]
	[ "$(head -c 8 /proc/kpagecount | wc -c)" = 8 ]
	for d in /proc/acpi /proc/scsi /proc/asound /proc/driver /sys/firmware; do
		[ -e "$d" ] || continue
		run sb_run "$ID" ls -A "$d"
		[ "$status" -eq 0 ] && [ -z "$output" ] || { echo "$d: $output"; return 1; }
	done
	[ -n "$(ls -A /sys/firmware)" ]
	# what sysfs tells of the kernel itself, in both kinds of /sys (own network or the host's)
	[ "$(head -c 64 /proc/cmdline | wc -c)" -gt 0 ]
	for net in none host; do
		[ "$net" = none ] || ID=$(dsec-spawn --image busybox --net host | jq -r .id)
		for f in /sys/kernel/vmcoreinfo /sys/kernel/notes; do
			[ -e "$f" ] || continue
			[ "$(head -c 64 "$f" | wc -c)" -gt 0 ] # control: the host's has content
			run sb_run "$ID" sh -c "head -c 64 $f | wc -c"
			[ "$output" = 0 ] || { echo "$net: $f: $output"; return 1; }
		done
		for d in /sys/kernel/btf /sys/kernel/boot_params; do
			[ -e "$d" ] || continue
			run sb_run "$ID" ls -A "$d"
			[ "$status" -eq 0 ] && [ -z "$output" ] || { echo "$net: $d: $output"; return 1; }
		done
	done
}

@test "sys: a sandbox with its own network names none of the host's interfaces; --net host does" {
	# control: the host has interfaces, in the class dir and under their devices
	[ -n "$(ls -A /sys/class/net)" ]
	[ -n "$(find /sys/devices -path '*/net/*' -name address 2>/dev/null | head -n 1)" ]
	spawn_one
	run sb_run "$ID" sh -c 'ls -A /sys/class/net /sys/devices/virtual/net; find /sys/devices -path "*/net/*" -name address 2>/dev/null; cat /sys/class/net/*/address 2>/dev/null; echo end'
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | grep -v -e '^/sys/.*:$' -e '^$')" = end ] || { echo "$output"; return 1; }
	run dsec-spawn --image busybox --net host
	[ "$status" -eq 0 ]
	id=$(records | jq -r .id)
	run sb_run "$id" ls -A /sys/class/net
	[ "$status" -eq 0 ]
	[ "$(echo $output)" = "$(echo $(ls -A /sys/class/net))" ]
}

@test "proc and sys: /proc/sys, /proc/sysrq-trigger, /proc/irq, /proc/bus and /sys are read-only" {
	spawn_one
	holder=$(sb_pid "$ID")
	# host root with every capability, in the sandbox's mount, uts and net namespaces: only
	# the read-only mounts stop it (the files written are namespaced: harmless either way)
	run nsenter -t "$holder" -m -u -n -- sh -c '
		echo evil 2>&1 >/proc/sys/kernel/domainname
		echo "0 1" 2>&1 >/proc/sys/net/ipv4/ping_group_range
		cat /proc/sys/kernel/domainname'
	[[ "${lines[0]}" == *"Read-only file system"* ]] && [[ "${lines[1]}" == *"Read-only file system"* ]] &&
		[ "${lines[2]}" != evil ] || { echo "$output"; return 1; }
	run sb_run "$ID" sh -c 'grep -E " /(proc/(sys|irq|bus|fs|sysrq-trigger)|sys) " /proc/self/mounts'
	[ "${#lines[@]}" -ge 4 ] || { echo "$output"; return 1; }
	for l in "${lines[@]}"; do
		[[ "$l" == *" ro,"* ]] || { echo "writable: $l"; return 1; }
	done
}

@test "proc: grep -r over /proc and /sys ends, and the host and sandbox carry on" {
	spawn_one
	run timeout 150 dsec-exec --timeout 120s --max-output 64K -- sh -c \
		'grep -rs x /proc /sys >/dev/null; echo done' <<<"{\"id\":\"$ID\"}"
	json_is "$output" .exec.stdout done || { echo "${output: -300}"; return 1; }
	json_is "$output" .exec.exit 0
	run sb_run "$ID" echo alive
	[ "$output" = alive ]
}

@test "stdio: host files given as stdin/stdout/stderr reach the command as pipes, not as files it could reopen" {
	spawn_one
	echo secret-of-the-host >"$TESTDIR/log"
	seq 1 50000 >"$TESTDIR/in"
	dsec-exec "$ID" -- sh -c 'for f in 0 1 2; do readlink /proc/self/fd/$f; done; wc -l; echo to-stderr >&2; cat /proc/self/fd/1 </dev/null >/dev/null 2>&1 & sleep 0.2; kill $! 2>/dev/null; echo end' \
		<"$TESTDIR/in" >>"$TESTDIR/log" 2>&1
	run cat "$TESTDIR/log"
	[ "${lines[0]}" = secret-of-the-host ]
	[[ "${lines[1]}" == pipe:* ]] && [[ "${lines[2]}" == pipe:* ]] && [[ "${lines[3]}" == pipe:* ]] || { echo "$output"; return 1; }
	[ "${lines[4]}" = 50000 ]
	[ "${lines[5]}" = to-stderr ]
	[ "${lines[-1]}" = end ]
	# control: handed over as it is (nsenter, as a runtime that does not relay would), the
	# command sees the host file and reads what else it holds
	run sb_run "$ID" sh -c 'readlink /proc/self/fd/0; head -1 /proc/self/fd/0' <"$TESTDIR/log"
	[[ "${lines[0]}" != pipe:* ]]
	[ "${lines[1]}" = secret-of-the-host ]
	# a command that ignores its input, and a big output, end as they should
	run dsec-exec "$ID" true <"$TESTDIR/in"
	[ "$status" -eq 0 ]
	dsec-exec "$ID" -- sh -c 'yes | head -c 3000000' >"$TESTDIR/out"
	[ "$(wc -c <"$TESTDIR/out")" = 3000000 ]
}
