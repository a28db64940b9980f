#!/usr/bin/env bats
# dsec-layer commit and dsec-spawn --from: a sandbox's changes become a layer and an image.

load helpers
load image

setup() {
	dsec_setup
	make_busybox_image
}

teardown() { dsec_teardown; }

# Everything of the tree but the kernel's mounts: type, mode, owner, size, content, link target.
tree_of() {
	dsec-exec "$1" -- sh -c 'cd / && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev \) -prune -o -print | sort | while read -r f; do
		if [ -L "$f" ]; then echo "$f -> $(readlink "$f")";
		elif [ "$f" = ./etc/hosts ]; then echo "$f $(stat -c "%a %u:%g" "$f") $(grep -v "^127\.0\.1\.1	$(hostname)\$" "$f" | md5sum | cut -c1-8)";
		elif [ -f "$f" ]; then echo "$f $(stat -c "%a %u:%g %s" "$f") $(md5sum <"$f" | cut -c1-8)";
		else echo "$f $(stat -c "%F %a %u:%g" "$f")"; fi; done'
}

@test "commit: deletions, renames, replaced dirs and owners; a fork sees exactly that tree" {
	spawn_one
	src=$ID
	dsec-exec "$src" -- sh -c 'set -e
		echo new >/etc/new; rm /bin/vi; mv /etc/passwd /etc/passwd.moved
		rm -rf /root; mkdir /root; echo only >/root/only
		mkdir -p /work/a/b; echo deep >/work/a/b/c; chown -R 1000:1001 /work; chmod 0640 /work/a/b/c
		ln -s /etc/new /work/link; mkfifo /work/fifo; echo >>/etc/group'
	run dsec-layer commit --name snap "$src"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	json_is "$output" .image snap
	json_is "$output" .from busybox
	json_has "$output" '.layers | length == 2'
	json_is "$output" '.layers[1]' "$(jq -r .layer <<<"$output")"
	# the line dsec gave /etc/hosts for the source's name is not in the layer, nor overlay's
	# own bookkeeping of the upper dir (origin, impure, uuid xattrs)
	layer=$(jq -r .layer <<<"$output")
	run bash -c "dsec-layer export '$layer' | zstd -dc | tar -xOf - etc/hosts"
	[[ "$output" == *localhost* ]] && [[ "$output" != *127.0.1.1* ]] || { echo "$output"; return 1; }
	[ "$(dsec-layer export "$layer" | zstd -dc | grep -ac 'trusted\.overlay')" = 0 ]
	# (/etc/hostname names each sandbox: the fork's its own)
	before=$(tree_of "$src" | grep -v -e '^./work/fifo' -e '^./etc/hostname ')
	# the source goes on running, not paused
	json_is "$(dsec-ps "$src")" .state running
	spawn_one --image snap
	after=$(tree_of "$ID" | grep -v '^./etc/hostname ')
	[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after"); return 1; }
	[ "$(dsec-exec "$ID" cat /etc/hostname)" = "$ID" ]
	[[ "$after" == *"./work/a/b/c 640 1000:1001 5"* ]]
	[[ "$after" != *"./bin/vi"* ]]
	[[ "$after" != *"./etc/passwd "* ]]
	# control: the image without the layer still has what was deleted
	spawn_one --image busybox
	run dsec-exec "$ID" ls /bin/vi /etc/passwd
	[ "$status" -eq 0 ]
}

@test "commit: planted links and special files never lead the host out of the sandbox" {
	echo host-secret >"$TESTDIR/secret"
	spawn_one
	src=$ID
	dsec-exec "$src" -- sh -c "ln -s '$TESTDIR/secret' /leak; ln -s / /rootlink; ln -s /proc/1/root /p1; mkfifo /fifo; mkdir -p /d; ln -s '$TESTDIR' /d/up"
	run timeout 60 dsec-layer commit --name snap "$src"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	layer=$(jq -r .layer <<<"$output")
	run bash -c "dsec-layer export '$layer' | zstd -dc | tar -tvf -"
	[[ "$output" == *"leak -> $TESTDIR/secret"* ]] || { echo "$output"; return 1; }
	[[ "$output" != *"fifo"* ]]
	run bash -c "dsec-layer export '$layer' | zstd -dc | grep -c host-secret"
	[ "$output" = 0 ]
	# control: host-side code that follows the link from the sandbox's root (as a naive
	# copy would) reads the host's file
	holder=$(sb_pid "$src")
	[ "$(cat "/proc/$holder/root/leak")" = host-secret ]
	spawn_one --image snap
	run dsec-exec "$ID" cat /leak
	[ "$status" -ne 0 ]
}

@test "fork: dsec-spawn --from gives N sandboxes with the source's files, each its own" {
	spawn_one
	src=$ID
	dsec-exec "$src" -- sh -c 'echo gen1 >/state'
	run dsec-spawn --from "$src" -n 5
	[ "$status" -eq 0 ]
	[ "$(records | jq -r .id | sort -u | wc -l)" = 5 ]
	for id in $(records | jq -r .id); do
		[ "$id" != "$src" ]
		[ "$(dsec-exec "$id" cat /state)" = gen1 ]
		dsec-exec "$id" -- sh -c "echo $id >/state"
	done
	# each writes its own; the source is untouched
	[ "$(dsec-exec "$src" cat /state)" = gen1 ]
	id=$(records | jq -r .id | head -1)
	[ "$(dsec-exec "$id" cat /state)" = "$id" ]
	# a fork of a fork sees the newer state
	id2=$(dsec-spawn --from "$id" | jq -r .id)
	[ "$(dsec-exec "$id2" cat /state)" = "$id" ]
}

@test "commit: what dsec wrote into /etc is not the sandbox's work; what the sandbox wrote is" {
	spawn_one --net host
	run dsec-layer commit --name hostnet "$ID"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	run bash -c "dsec-layer export '$(jq -r .layer <<<"$output")' | zstd -dc | tar -tf -"
	[[ "$output" != *resolv.conf* ]] || { echo "$output"; return 1; }
	# a resolver and a hosts line of the sandbox's own are kept
	dsec-exec "$ID" -- sh -c 'echo "nameserver 192.0.2.53" >/etc/resolv.conf; echo "192.0.2.7 db" >>/etc/hosts'
	run dsec-layer commit --name hostnet2 "$ID"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	layer=$(jq -r .layer <<<"$output")
	[ "$(dsec-layer export "$layer" | zstd -dc | tar -xOf - etc/resolv.conf)" = "nameserver 192.0.2.53" ]
	run bash -c "dsec-layer export '$layer' | zstd -dc | tar -xOf - etc/hosts"
	[[ "$output" == *"192.0.2.7 db"* ]] && [[ "$output" != *127.0.1.1* ]] || { echo "$output"; return 1; }
}

# commit_killed NAME: start committing $ID as NAME, kill -9 the commit once the sandbox shows
# paused (or after 5 s)
commit_killed() {
	local pid i
	dsec-layer commit --name "$1" "$ID" >/dev/null 2>&1 &
	pid=$!
	for i in $(seq 100); do
		[ "$(dsec-ps "$ID" | jq -r .state)" = paused ] && break
		sleep 0.05
	done
	kill -9 "$pid"
	wait "$pid" || true
}

@test "commit: kill -9 while the sandbox is paused for it; --orphans resumes it, not a pause of the user's" {
	spawn_one
	dsec-exec "$ID" -- sh -c 'yes 0123456789abcdef | head -c 209715200 >/data'
	commit_killed killed
	[ "$(dsec-ps "$ID" | jq -r .state)" = paused ] || skip "the commit finished before the kill"
	run dsec-reap --orphans
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	json_is "$(dsec-ps "$ID")" .state running
	# the next commit (and the one after) pauses and resumes as usual
	run dsec-layer commit --name again "$ID"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	json_is "$(dsec-ps "$ID")" .state running
	# a commit killed again, then paused by the user: that pause stays
	commit_killed killed2
	dsec-reap --resume "$ID" >/dev/null
	dsec-reap --pause "$ID" >/dev/null
	dsec-reap --orphans >/dev/null
	json_is "$(dsec-ps "$ID")" .state paused
	dsec-reap --resume "$ID" >/dev/null
}

@test "commit: a paused sandbox stays paused; bad input is a clear error" {
	spawn_one
	dsec-reap --pause "$ID" >/dev/null
	run dsec-layer commit "$ID"
	[ "$status" -eq 0 ]
	json_is "$output" .image "$ID"
	json_is "$(dsec-ps "$ID")" .state paused
	run dsec-layer commit sb-000000000000
	[ "$status" -eq 1 ]
	json_has "$(records)" '.error.msg | contains("sb-000000000000")'
	must_fail dsec-layer commit --name 'bad/name' "$ID"
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --from "$ID" --image busybox
	[ "$status" -eq 2 ]
	must_fail dsec-spawn --from ../x
	[ "$status" -eq 2 ]
	# an unknown sandbox: an error record naming it, status 1
	run dsec-spawn --from sb-000000000000
	[ "$status" -eq 1 ]
	json_is "$(records)" .from sb-000000000000
	json_is "$(records)" .error.errno 2
	[[ "$(records | jq -r .error.msg)" == "--from sb-000000000000: no such sandbox" ]]
}

@test "commit: a sparse file of 8 GiB and written zeros cost the store no disk and come back whole" {
	spawn_one
	src=$ID
	# holes but for a byte in the middle and one at the end, and 256 MiB of zeros written out
	dsec-exec "$src" -- sh -c 'dd if=/dev/zero of=/sp bs=1 count=1 seek=8G 2>/dev/null
		printf mid | dd of=/sp bs=1 seek=4G conv=notrunc 2>/dev/null
		dd if=/dev/zero of=/zeros bs=1M count=256 2>/dev/null'
	before=$(du -sk "$DSEC_ROOT" | cut -f1)
	# only data goes into the stream: no 8 GiB of zeros to hash and keep as the source copy
	run timeout 60 dsec-layer commit --name sparse "$src"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	json_has "$output" '.commit_us < 10000000'
	grown=$(($(du -sk "$DSEC_ROOT" | cut -f1) - before))
	[ "$grown" -lt 65536 ] || { echo "the store grew by $grown KiB"; return 1; }
	spawn_one --image sparse
	run dsec-exec "$ID" -- sh -c 'stat -c %s /sp /zeros
		dd if=/sp bs=1 skip=4294967296 count=3 2>/dev/null; echo
		dd if=/sp bs=1M skip=4095 count=2 2>/dev/null | tr -d "\0" | wc -c
		dd if=/sp bs=1M skip=8191 2>/dev/null | wc -c
		tr -d "\0" </zeros | wc -c'
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ "${lines[*]}" = "8589934593 268435456 mid 3 1048577 0" ] || { echo "$output"; return 1; }
}

@test "commit: its writes keep the store's reserve: a change too big for it stops with ENOSPC" {
	# on disk, as a store is (EROFS is not mounted from a file on tmpfs)
	truncate -s 256M "$TESTDIR/small.img"
	mkfs.ext4 -q -m 0 "$TESTDIR/small.img"
	mkdir "$TESTDIR/small"
	mount -o loop "$TESTDIR/small.img" "$TESTDIR/small"
	export DSEC_ROOT=$TESTDIR/small/root
	mkdir "$DSEC_ROOT"
	make_busybox_image
	spawn_one
	# 400 MiB of data, no zeros, for a store on a file system of 256 MiB
	dsec-exec "$ID" -- sh -c 'yes 0123456789abcdef | head -c 419430400 >/data'
	run dsec-layer commit --name big "$ID"
	[ "$status" -eq 1 ] || { echo "$output"; return 1; }
	[[ "$output" == *"the store's file system is down to "*" MiB free (an import leaves 1"?" MiB)"* ]] || { echo "$output"; return 1; }
	json_is "$(records)" .error.errno 28
	# it stopped at the reserve, and what it had written is gone again
	[ "$(du -sm "$DSEC_ROOT" | cut -f1)" -lt 8 ]
	[ ! -e "$DSEC_ROOT/images/big.json" ]
	# the sandbox goes on, not left paused
	json_is "$(dsec-ps "$ID")" .state running
}
