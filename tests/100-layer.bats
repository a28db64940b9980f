#!/usr/bin/env bats
# dsec-layer: the image store. Hostile archives are made here with python3's tarfile.

load helpers

# mktar OUT: run the python on stdin with `t` an open tarfile writing OUT (plain tar) and
# helpers reg(name, data, **attrs), add(TarInfo, data).
mktar() {
	local out=$1
	python3 - "$out" 3<&0 <<'PY'
import io, os, sys, tarfile
out = sys.argv[1]
t = tarfile.open(out, "w", format=tarfile.PAX_FORMAT)
def add(ti, data=b""):
    ti.size = len(data) if ti.type in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
    t.addfile(ti, io.BytesIO(data) if data else None)
def reg(name, data=b"", **kw):
    ti = tarfile.TarInfo(name)
    ti.mtime = 1700000000
    for k, v in kw.items():
        setattr(ti, k, v)
    add(ti, data)
def typ(name, kind, **kw):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mtime = 1700000000
    for k, v in kw.items():
        setattr(ti, k, v)
    add(ti)
exec(os.fdopen(3).read())
t.close()
PY
}

# in_layer ID CMD...: run CMD with the layer's EROFS image mounted on $M, in a private mount
# namespace (nothing shows in the host's mount table).
in_layer() {
	local id=$1
	shift
	local img="$DSEC_ROOT/layers/${id#sha256:}/layer.erofs"
	[ -f "$img" ] || { echo "no $img" >&2; return 1; }
	unshare -m sh -c 'mount -t erofs -o ro "$1" "$2" && shift 2 && M=$0 "$@"' \
		"$TESTDIR/mnt" "$img" "$TESTDIR/mnt" "$@"
}

setup() {
	dsec_setup
	mkdir -p "$TESTDIR/mnt"
	cd "$TESTDIR"
}

layer_of() { # the "layer" of the first record in $output
	records | head -1 | jq -r .layer
}

no_partial_layer() {
	[ -z "$(ls -A "$DSEC_ROOT/layers" 2>/dev/null)" ] || { ls "$DSEC_ROOT/layers"; return 1; }
	[ -z "$(ls -A "$DSEC_ROOT/tmp" 2>/dev/null)" ] || { ls -la "$DSEC_ROOT/tmp"; return 1; }
}

# A failed import: exit 1, one error line on stderr, an error record on stdout, nothing left.
import_fails() {
	must_fail dsec-layer import "$@"
	[ "$status" -eq 1 ]
	local rec
	rec=$(records)
	json_has "$rec" '.error.msg | length > 0'
	[ "$(printf '%s\n' "$output" | grep -c 'dsec-layer: error: ')" -eq 1 ]
	no_partial_layer
}

@test "import a tar: record, id is the sha256 of the tar, EROFS runtime form" {
	mktar a.tar <<'PY'
reg("etc/hello", b"hello\n", mode=0o644, uid=1000, gid=100)
PY
	run dsec-layer import --kind base --name hello a.tar
	[ "$status" -eq 0 ]
	local rec id
	rec=$(records)
	id="sha256:$(sha256sum <a.tar | cut -d' ' -f1)"
	json_is "$rec" .layer "$id"
	json_is "$rec" .kind base
	json_is "$rec" .name hello
	json_is "$rec" .files 1
	json_is "$rec" .bytes 6
	json_is "$rec" .format erofs
	json_has "$rec" '.node | length > 0'
	run in_layer "$id" sh -c 'cat $M/etc/hello; stat -c "%u:%g %a %Y" $M/etc/hello'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = hello ]
	[ "${lines[1]}" = "1000:100 644 1700000000" ]
	[ -z "$(ls -A "$DSEC_ROOT/tmp")" ]
}

@test "gzip, xz, zstd and stdin give the same layer; a second import is the same layer" {
	mktar a.tar <<'PY'
reg("f", b"x" * 10000)
PY
	gzip -k a.tar && xz -k a.tar && zstd -q a.tar
	cp a.tar.gz a.weird-name
	local id
	run dsec-layer import a.tar
	id=$(layer_of)
	for f in a.tar.gz a.tar.xz a.tar.zst a.weird-name a.tar; do
		run dsec-layer import "$f"
		[ "$status" -eq 0 ]
		[ "$(layer_of)" = "$id" ] || { echo "$f: $(layer_of) != $id"; return 1; }
	done
	run sh -c 'dsec-layer import - < a.tar.zst'
	[ "$(layer_of)" = "$id" ]
	[ "$(ls "$DSEC_ROOT/layers" | wc -l)" -eq 1 ]
}

@test "a directory imports deterministically and export round-trips the id" {
	mkdir -p d/sub d/empty
	echo one >d/sub/a
	ln d/sub/a d/hard
	ln -s sub/a d/link
	setfattr -n user.note -v kept d/sub/a
	run dsec-layer import d
	[ "$status" -eq 0 ]
	local id
	id=$(layer_of)
	run dsec-layer import d
	[ "$(layer_of)" = "$id" ]
	dsec-layer export "$id" >e.tar.zst
	[ "sha256:$(zstd -dc e.tar.zst | sha256sum | cut -d' ' -f1)" = "$id" ]
	rm -rf "$DSEC_ROOT/layers"
	run dsec-layer import e.tar.zst
	[ "$(layer_of)" = "$id" ]
	run in_layer "$id" sh -c 'getfattr --absolute-names --only-values -n user.note $M/sub/a; echo;
		readlink $M/link; stat -c %h $M/hard; [ -d $M/empty ] && echo empty'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = kept ]
	[ "${lines[1]}" = sub/a ]
	[ "${lines[2]}" = 2 ]
	[ "${lines[3]}" = empty ]
}

@test "a directory: a socket in it is skipped; a tree it cannot read to the end publishes nothing" {
	mkdir -p d/run
	echo one >d/a
	python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("d/run/sock")'
	run dsec-layer import d
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[[ "$output" == *"'run/sock': socket skipped"* ]]
	json_is "$(records)" .files 3
	rm -rf "$DSEC_ROOT/layers" d
	# a path past PATH_MAX stops the walk after some entries were sent: no layer, one error
	python3 -c '
import os
os.mkdir("d"); os.chdir("d"); open("first", "w").write("x")
for i in range(25):
    os.mkdir("x" * 200); os.chdir("x" * 200)
open("f", "w").write("y")'
	import_fails d
	[ "$(records | wc -l)" -eq 1 ]
	# the walker's reason is the one error line, and the record's
	[[ "$(records | jq -r .error.msg)" == *"reading the directory failed: "*"path over 4096 bytes"* ]]
	json_is "$(records)" .error.errno 36
	rm -rf d
}

@test "a directory: nothing below another mount, a bind mount of the same file system included" {
	mkdir -p d/bind d/tmpfs other/deep
	echo secret >other/secret
	echo deeper >other/deep/x
	echo mine >d/file
	echo under >d/over
	# mounted in a namespace of the test's own: nothing shows outside it, or outlives it
	run unshare -m --propagation private sh -c 'mount --bind other d/bind &&
		mount -t tmpfs -o mode=0755 t d/tmpfs && echo tmp >d/tmpfs/t &&
		mount --bind other/secret d/over && dsec-layer import d'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	json_is "$(records)" .files 4
	[[ "$output" == *"'over': a mount point, left out"* ]]
	run in_layer "$(layer_of)" sh -c 'cd $M && find . | sort; cat file'
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf '%s\n' . ./bind ./file ./tmpfs mine)" ]
}

# swap_shim OUT: an LD_PRELOAD library whose openat of a name equal to $SWAP first replaces
# that file by a fifo: the walker's race between its stat and its open, made to happen.
swap_shim() {
	cat >"$1.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static void swap(int dfd, const char *name)
{
	const char *s = getenv("SWAP");
	if (s && !strcmp(name, s) && unlinkat(dfd, name, 0) == 0)
		mkfifoat(dfd, name, 0644);
}
int openat(int dfd, const char *name, int flags, ...)
{
	static int (*real)(int, const char *, int, ...);
	va_list ap;
	mode_t mode;
	va_start(ap, flags);
	mode = va_arg(ap, mode_t);
	va_end(ap);
	if (!real)
		real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
	swap(dfd, name);
	return real(dfd, name, flags, mode);
}
int openat64(int dfd, const char *name, int flags, ...) __attribute__((alias("openat")));
int __openat_2(int dfd, const char *name, int flags)
{
	return openat(dfd, name, flags, 0);
}
C
	cc -shared -fPIC -o "$1" "$1.c" -ldl
}

@test "a directory: a fifo in it is skipped; a file that becomes a fifo while read fails the import, without hanging" {
	mkdir d
	echo one >d/a
	mkfifo d/fifo
	run timeout 30 dsec-layer import d
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[[ "$output" == *"'fifo': device node, fifo or socket skipped"* ]]
	json_is "$(records)" .skipped 1
	rm -rf "$DSEC_ROOT/layers" d
	mkdir d
	echo one >d/a
	echo two >d/victim
	swap_shim swap.so
	SWAP=victim LD_PRELOAD=$PWD/swap.so run timeout 30 dsec-layer import d
	[ "$status" -eq 1 ] || { echo "$output"; false; }
	[ -p d/victim ]
	[ "$(printf '%s\n' "$output" | grep -c 'dsec-layer: error: ')" -eq 1 ]
	[[ "$(records | jq -r .error.msg)" == *"reading the directory failed: 'victim': changed while the tree was read: no longer a regular file"* ]]
	no_partial_layer
}

@test "export of a gzip-imported layer is zstd and hashes to the id" {
	mktar a.tar <<'PY'
reg("f", b"data")
PY
	gzip a.tar
	run dsec-layer import a.tar.gz
	local id
	id=$(layer_of)
	dsec-layer export "${id:7:12}" >x.zst
	[ "$(head -c4 x.zst | od -An -tx1 | tr -d ' ')" = 28b52ffd ]
	[ "sha256:$(zstd -dc x.zst | sha256sum | cut -d' ' -f1)" = "$id" ]
}

@test "OCI whiteouts become char devices 0:0, opaque dirs get both opaque xattrs" {
	mktar w.tar <<'PY'
reg("etc/.wh.gone")
typ("opt", tarfile.DIRTYPE, mode=0o755)
reg("opt/.wh..wh..opq")
reg("opt/new", b"n")
reg("x/.wh..wh.plnk")
PY
	run dsec-layer import w.tar
	[ "$status" -eq 0 ]
	run in_layer "$(layer_of)" sh -c 'stat -c "%F %t:%T" $M/etc/gone;
		getfattr --absolute-names --only-values -n trusted.overlay.opaque $M/opt; echo;
		getfattr --absolute-names --only-values -n user.overlay.opaque $M/opt; echo;
		ls -A $M/x 2>/dev/null | wc -l; ls $M/etc'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "character special file 0:0" ]
	[ "${lines[1]}" = y ]
	[ "${lines[2]}" = y ]
	[ "${lines[3]}" = 0 ]
	[ "${lines[4]}" = gone ]
}

@test "directories an archive implies but never lists are 0755, an opaque marker's too, whatever the umask" {
	mktar w.tar <<'PY'
reg("a/b/f", b"f")
reg("opq/.wh..wh..opq")
reg("deep/er/.wh..wh..opq")
typ("listed", tarfile.DIRTYPE, mode=0o750)
reg("listed/.wh..wh..opq")
reg("later/.wh..wh..opq")
typ("later", tarfile.DIRTYPE, mode=0o711)
PY
	run sh -c 'umask 077 && dsec-layer import w.tar'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	run in_layer "$(layer_of)" sh -c 'cd $M && stat -c "%n %a" a a/b opq deep deep/er listed later;
		getfattr --absolute-names --only-values -n user.overlay.opaque opq'
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf '%s\n' 'a 755' 'a/b 755' 'opq 755' 'deep 755' 'deep/er 755' \
		'listed 750' 'later 711' y)" ]
}

@test "hostile: '../' traversal is refused" {
	mktar t.tar <<'PY'
reg("ok", b"1")
reg("../escaped", b"evil")
PY
	import_fails t.tar
	[[ "$output" == *"'..' leads out of the layer"* ]]
	[ ! -e "$DSEC_ROOT/escaped" ]
	[ ! -e "$DSEC_ROOT/tmp/escaped" ]
}

@test "hostile: absolute paths are imported below the layer root" {
	mktar t.tar <<'PY'
reg("/etc/abs", b"inside")
PY
	run dsec-layer import t.tar
	[ "$status" -eq 0 ]
	[[ "$output" == *"leading '/' removed"* ]]
	run in_layer "$(layer_of)" sh -c 'cat $M/etc/abs'
	echo "$output"
	[ "$output" = inside ]
}

@test "hostile: a write through a symlink from the archive is refused" {
	mkdir -p outside
	mktar t.tar <<PY
typ("lnk", tarfile.SYMTYPE, linkname="$TESTDIR/outside")
reg("lnk/pwned", b"evil")
PY
	import_fails t.tar
	[[ "$output" == *"goes through a symlink"* ]]
	[ -z "$(ls -A outside)" ]
	mktar t2.tar <<PY
typ("d", tarfile.SYMTYPE, linkname="/")
typ("d/tmp/x", tarfile.SYMTYPE, linkname="y")
PY
	import_fails t2.tar
}

@test "hostile: hard links out of the layer are refused" {
	mktar t.tar <<'PY'
typ("h", tarfile.LNKTYPE, linkname="../../../../etc/passwd")
PY
	import_fails t.tar
	mktar t2.tar <<'PY'
typ("h", tarfile.LNKTYPE, linkname="/etc/passwd")
PY
	import_fails t2.tar
	[[ "$output" == *"not in the layer"* ]]
	mktar t3.tar <<PY
typ("s", tarfile.SYMTYPE, linkname="/etc")
typ("h", tarfile.LNKTYPE, linkname="s/passwd")
PY
	import_fails t3.tar
}

@test "hostile: a hard link named only by a pax linkpath is a link or a clear error, never a skipped device" {
	mktar h.tar <<'PY'
reg("target", b"abc")
ti = tarfile.TarInfo("link"); ti.type = tarfile.LNKTYPE; ti.linkname = "target"
ti.pax_headers = {"linkpath": "target"}
add(ti)
PY
	# empty the ustar link name of the link's header, so only the pax record names the target
	python3 - h.tar <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
for off in range(0, len(b), 512):
    h = b[off:off + 512]
    if h[:5] == b"link\0" and h[156:157] == b"1":
        h[157:257] = bytes(100)
        h[148:156] = b" " * 8
        h[148:156] = b"%06o\0 " % sum(h)
        b[off:off + 512] = h
open(sys.argv[1], "wb").write(b)
PY
	[ "$(tar -tvf h.tar | grep -c 'link to target')" -eq 1 ]
	run dsec-layer import h.tar
	[[ "$output" != *"device node, fifo or socket skipped"* ]]
	if [ "$status" -eq 0 ]; then # a libarchive that reads the linkpath
		run in_layer "$(layer_of)" sh -c 'stat -c %h $M/link; cat $M/link'
		[ "$output" = "$(printf '2\nabc')" ]
	else
		import_fails h.tar
		[[ "$output" == *"'link': hard link whose target cannot be read"* ]]
	fi
}

@test "hostile: device nodes and fifos are dropped, char 0:0 stays a whiteout" {
	mktar t.tar <<'PY'
typ("dev/sda", tarfile.BLKTYPE, devmajor=8, devminor=0)
typ("dev/mem", tarfile.CHRTYPE, devmajor=1, devminor=1)
typ("fifo", tarfile.FIFOTYPE)
typ("wh", tarfile.CHRTYPE, devmajor=0, devminor=0)
reg("keep", b"k")
PY
	run dsec-layer import t.tar
	[ "$status" -eq 0 ]
	json_is "$(records)" .skipped 3
	run in_layer "$(layer_of)" sh -c 'ls -A $M $M/dev; stat -c "%F %t:%T" $M/wh'
	[ "$status" -eq 0 ]
	[[ "$output" != *sda* && "$output" != *mem* && "$output" != *fifo* ]]
	[[ "$output" == *"character special file 0:0"* ]]
}

@test "hostile: setuid/setgid bits and capabilities are stripped unless --allow-setuid" {
	mktar t.tar <<'PY'
ti = tarfile.TarInfo("su"); ti.mode = 0o6755; ti.pax_headers = {"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}
add(ti, b"#!/bin/sh\n")
ti = tarfile.TarInfo("d"); ti.type = tarfile.DIRTYPE; ti.mode = 0o2775
ti.pax_headers = {"SCHILY.xattr.trusted.overlay.redirect": "/etc", "SCHILY.xattr.user.overlay.opaque": "y", "SCHILY.xattr.user.ok": "1"}
add(ti)
PY
	run dsec-layer import t.tar
	[ "$status" -eq 0 ]
	run in_layer "$(layer_of)" sh -c 'stat -c %a $M/su $M/d; getfattr --absolute-names -d -m - $M/su $M/d'
	[ "${lines[0]}" = 755 ]
	[ "${lines[1]}" = 2775 ]
	[[ "$output" != *capability* && "$output" != *overlay* ]]
	[[ "$output" == *user.ok* ]]
	rm -rf "$DSEC_ROOT/layers"
	run dsec-layer import --allow-setuid t.tar
	run in_layer "$(layer_of)" sh -c 'stat -c %a $M/su; getfattr --absolute-names -d -m - $M/su $M/d'
	[ "${lines[0]}" = 6755 ]
	[[ "$output" == *security.capability* ]]
	[[ "$output" != *overlay* ]]
}

@test "--allow-setuid is part of the layer's identity: each build of a stream is its own layer" {
	mktar t.tar <<'PY'
ti = tarfile.TarInfo("su"); ti.mode = 0o4755
add(ti, b"#!/bin/sh\n")
PY
	mktar c.tar <<'PY'
ti = tarfile.TarInfo("cap"); ti.mode = 0o755; ti.pax_headers = {"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}
add(ti, b"#!/bin/sh\n")
PY
	mktar plain.tar <<'PY'
reg("f", b"x", mode=0o755)
PY
	local diff kept stripped
	diff="sha256:$(sha256sum <t.tar | cut -c1-64)"
	kept="sha256:$(printf 'allow-setuid:%s' "$diff" | sha256sum | cut -c1-64)"
	run dsec-layer import --allow-setuid t.tar
	[ "$status" -eq 0 ]
	json_is "$(records)" .layer "$kept"
	json_is "$(records)" .diff_id "$diff"
	json_is "$(records)" .setuid true
	run in_layer "$kept" sh -c 'stat -c %a $M/su'
	[ "$output" = 4755 ]
	# the same stream without the option: the stripped layer, not the one in the store
	run dsec-layer import t.tar
	[ "$status" -eq 0 ]
	stripped=$(layer_of)
	[ "$stripped" = "$diff" ]
	json_is "$(records)" .setuid false
	run in_layer "$stripped" sh -c 'stat -c %a $M/su'
	[ "$output" = 755 ]
	# and the other way round: both stay what they were built as
	run dsec-layer import --allow-setuid t.tar
	[ "$(layer_of)" = "$kept" ]
	run in_layer "$kept" sh -c 'stat -c %a $M/su'
	[ "$output" = 4755 ]
	[ "$(ls "$DSEC_ROOT/layers" | wc -l)" -eq 2 ]
	# export gives the stream: imported with the option again, the same id
	dsec-layer export "$kept" | zstd -dc >back.tar
	cmp back.tar t.tar
	run dsec-layer import --allow-setuid back.tar
	[ "$(layer_of)" = "$kept" ]
	# a file capability alone counts the same, with the option first this time
	run dsec-layer import --allow-setuid c.tar
	[ "$(layer_of)" != "sha256:$(sha256sum <c.tar | cut -c1-64)" ]
	run dsec-layer import c.tar
	[ "$(layer_of)" = "sha256:$(sha256sum <c.tar | cut -c1-64)" ]
	run in_layer "$(layer_of)" sh -c 'getfattr --absolute-names -d -m - $M/cap'
	[[ "$output" != *capability* ]]
	# nothing setuid in the stream: the option changes nothing, one layer
	run dsec-layer import plain.tar
	[ "$(layer_of)" = "sha256:$(sha256sum <plain.tar | cut -c1-64)" ]
	run dsec-layer import --allow-setuid plain.tar
	[ "$(layer_of)" = "sha256:$(sha256sum <plain.tar | cut -c1-64)" ]
	json_is "$(records)" .setuid false
	# an image's config names diff ids: a kept layer still matches its own
	mkdir -p dk/l1 && cp t.tar dk/l1/layer.tar
	printf '{"rootfs":{"type":"layers","diff_ids":["%s"]}}' "$diff" >dk/cfg.json
	echo '[{"Config":"cfg.json","RepoTags":["su:1"],"Layers":["l1/layer.tar"]}]' >dk/manifest.json
	run dsec-layer import --allow-setuid dk
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	json_is "$(records | tail -1)" '.layers[0]' "$kept"
	run dsec-layer import dk
	[ "$status" -eq 0 ]
	json_is "$(records | tail -1)" '.layers[0]' "$diff"
}

@test "hostile: a decompression bomb stops at --max-bytes, too many files at --max-files" {
	head -c 50M /dev/zero >zero
	tar -cf - zero | zstd -q -19 >bomb.tar.zst
	import_fails --max-bytes 10M bomb.tar.zst
	[[ "$output" == *max-bytes* ]]
	mktar many.tar <<'PY'
for i in range(50):
    reg("f%d" % i, b"")
PY
	import_fails --max-files 20 many.tar
	[[ "$output" == *max-files* ]]
	# a sparse file declaring a huge size counts with its declared size
	truncate -s 20G sparse
	tar -S -cf sparse.tar sparse
	import_fails --max-bytes 1G sparse.tar
}

@test "hostile: a sparse or zero bomb costs no disk; a bomb of data stops short of filling the store" {
	truncate -s 6G holes
	tar --sparse -cf sparse.tar holes
	rm holes
	head -c 1G /dev/zero | zstd -q -c >zeros.zst
	python3 -c 'import io, sys, tarfile
t = tarfile.open(sys.argv[1], "w"); ti = tarfile.TarInfo("zeros"); ti.size = 1 << 30
t.addfile(ti, open("/dev/zero", "rb")); t.close()' zeros.tar
	zstd -q --rm zeros.tar
	for a in sparse.tar zeros.tar.zst; do
		run dsec-layer import "$a"
		[ "$status" -eq 0 ] || { echo "$output"; false; }
	done
	[ "$(du -sm "$DSEC_ROOT" | cut -f1)" -lt 20 ]
	id=$(jq -r .layer <<<"${lines[0]}")
	run in_layer "$id" sh -c 'stat -c %s $M/zeros; dd if=$M/zeros bs=1M skip=700 count=1 2>/dev/null | tr -d "\\0" | wc -c'
	[ "${lines[0]}" = 1073741824 ]
	[ "${lines[1]}" = 0 ]
	# uncompressed, the same file's zeros are holes in the kept copy of the stream too
	zstd -q -d --rm zeros.tar.zst
	run dsec-layer import zeros.tar
	[ "$status" -eq 0 ]
	[ "$(du -sm "$DSEC_ROOT" | cut -f1)" -lt 20 ]
	rm zeros.tar
	# an endless stream of zeros is an empty tar followed by zeros: it fails soon, and
	# leaves nothing
	run timeout 20 dsec-layer import /dev/zero
	[ "$status" -eq 1 ]
	[[ "$output" == *"'/dev/zero': bad archive: more than 16 MiB after its end"* ]]
	[ -z "$(ls -A "$DSEC_ROOT/tmp")" ]
	# 400 MiB of data (no zeros) into a store on a 256 MiB file system: refused, nothing left
	mkdir small
	mount -t tmpfs -o size=256m tmpfs small
	python3 -c 'import sys, tarfile
class R:
    def __init__(s): s.b = bytes(range(1, 256)) * 4112
    def read(s, n): return (s.b * (n // len(s.b) + 1))[:n]
t = tarfile.open(fileobj=sys.stdout.buffer, mode="w|"); ti = tarfile.TarInfo("data")
ti.size = 400 << 20; t.addfile(ti, R()); t.close()' | zstd -q -c >data.tar.zst
	DSEC_ROOT=$TESTDIR/small/root run dsec-layer import - <data.tar.zst
	umount small
	[ "$status" -eq 1 ]
	[[ "$output" == *"'data': the store's file system is down to "*" MiB free (an import leaves 12 MiB)"* ]]
	json_is "$(records)" .error.errno 28
}

@test "hostile: a damaged header, a sparse map past the size, implied dirs, a 64 KiB xattr" {
	# a header with a bad checksum ends the import: libarchive would look for the next
	# header inside the damaged entry's data, where other readers see file contents
	python3 - <<'PY'
import io, tarfile
inner = io.BytesIO()
t = tarfile.open(fileobj=inner, mode="w")
ti = tarfile.TarInfo("hidden"); d = b"surprise"; ti.size = len(d); t.addfile(ti, io.BytesIO(d))
t.close()
payload = inner.getvalue()[:1024]
out = io.BytesIO()
t = tarfile.open(fileobj=out, mode="w")
ti = tarfile.TarInfo("first"); ti.size = 1; t.addfile(ti, io.BytesIO(b"1"))
ti = tarfile.TarInfo("innocent"); ti.size = len(payload); t.addfile(ti, io.BytesIO(payload))
t.close()
b = bytearray(out.getvalue())
b[1024 + 148:1024 + 156] = b"0000001\0"
open("resync.tar", "wb").write(bytes(b))
# a sparse map putting one byte at 3 GiB of a file declared 4 KiB long
m = ("1\n%d\n1\n" % (3 << 30)).encode().ljust(512, b"\0") + b"Z"
ti = tarfile.TarInfo("GNUSparseFile.0/sp"); ti.size = len(m)
ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                  "GNU.sparse.name": "sp", "GNU.sparse.realsize": "4096"}
t = tarfile.open("sparse.tar", "w", format=tarfile.PAX_FORMAT); t.addfile(ti, io.BytesIO(m)); t.close()
# 5 entries whose names imply 2,000 directories
t = tarfile.open("deep.tar", "w", format=tarfile.PAX_FORMAT)
for k in range(5):
    t.addfile(tarfile.TarInfo("%d/" % k + "/".join(["d"] * 400) + "/f"), io.BytesIO(b""))
t.close()
# an xattr value of 65536 bytes: EROFS stores its length in 16 bits
ti = tarfile.TarInfo("victim"); ti.type = tarfile.DIRTYPE
ti.pax_headers = {"SCHILY.xattr.user.big": "P" * 65536}
t = tarfile.open("xattr.tar", "w", format=tarfile.PAX_FORMAT); t.addfile(ti); t.close()
ti = tarfile.TarInfo("victim"); ti.type = tarfile.DIRTYPE
ti.pax_headers = {"SCHILY.xattr.user.big": "P" * 65535}
t = tarfile.open("xattr-ok.tar", "w", format=tarfile.PAX_FORMAT); t.addfile(ti); t.close()
PY
	import_fails resync.tar
	[[ "$output" == *"bad archive"* ]]
	import_fails --max-bytes 1M sparse.tar
	[[ "$output" == *"beyond the entry's size"* ]]
	import_fails --max-files 1000 deep.tar
	[[ "$output" == *max-files* ]]
	import_fails xattr.tar
	[[ "$output" == *"at most 65535"* ]]
	run dsec-layer import xattr-ok.tar
	[ "$status" -eq 0 ]
	run in_layer "$(layer_of)" sh -c 'getfattr --absolute-names --only-values -n user.big $M/victim | wc -c'
	[ "$output" -eq 65535 ]
	# the layers are root's alone (a tree keeps its archive's modes, a 1777 /tmp among them)
	[ "$(stat -c %a "$DSEC_ROOT/layers")" = 700 ]
	chmod 755 "$DSEC_ROOT/layers"
	run dsec-layer import --name again deep.tar
	[ "$status" -eq 0 ]
	[ "$(stat -c %a "$DSEC_ROOT/layers")" = 700 ]
	# the limit says its number
	run dsec-layer import --max-bytes 1M /dev/zero
	[[ "$output" == *"--max-bytes 1048576"* ]]
}

@test "hostile: duplicate entries: the later one wins, a file never replaces a directory" {
	mktar t.tar <<'PY'
reg("f", b"first")
reg("f", b"second")
typ("l", tarfile.SYMTYPE, linkname="a")
reg("l", b"now a file")
PY
	run dsec-layer import t.tar
	[ "$status" -eq 0 ]
	run in_layer "$(layer_of)" sh -c 'cat $M/f; echo; cat $M/l'
	[ "${lines[0]}" = second ]
	[ "${lines[1]}" = "now a file" ]
	rm -rf "$DSEC_ROOT/layers"/*
	mktar t2.tar <<'PY'
typ("d", tarfile.DIRTYPE)
reg("d/x", b"x")
reg("d", b"file over dir")
PY
	import_fails t2.tar
	[[ "$output" == *"would replace a directory"* ]]
}

@test "hostile: truncated and corrupt archives fail cleanly" {
	mktar a.tar <<'PY'
reg("big", os.urandom(100000))
PY
	head -c 50000 a.tar >trunc.tar
	import_fails trunc.tar
	zstd -q a.tar -o a.tar.zst
	head -c 30000 a.tar.zst >trunc.tar.zst
	import_fails trunc.tar.zst
	head -c 100000 /dev/urandom >random.bin
	import_fails random.bin
	: >empty
	import_fails empty
	import_fails /nonexistent/file
	# gzip: libarchive reads a member's CRC and length without checking them, so a flipped
	# bit in data stored as it is would import as wrong contents; each member is checked
	gzip -c a.tar >a.tar.gz
	flip() { python3 -c 'import sys
d = bytearray(open(sys.argv[1], "rb").read()); d[int(sys.argv[2])] ^= 1
open(sys.argv[3], "wb").write(d)' "$@"; }
	flip a.tar.gz 60000 data.tar.gz
	import_fails data.tar.gz
	[[ "$output" == *"gzip member 1: incorrect data check"* ]]
	flip a.tar.gz $(($(stat -c %s a.tar.gz) - 8)) crc.tar.gz
	import_fails crc.tar.gz
	[[ "$output" == *"gzip member 1: incorrect data check"* ]]
	head -c $(($(stat -c %s a.tar.gz) - 3)) a.tar.gz >cut.tar.gz
	import_fails cut.tar.gz
	[[ "$output" != *"(null)"* ]]
	# two members, the second one's trailer wrong; then both right, and padding after them
	{ head -c 40000 a.tar | gzip -c; tail -c +40001 a.tar | gzip -c; } >two.tar.gz
	flip two.tar.gz $(($(stat -c %s two.tar.gz) - 8)) two-bad.tar.gz
	import_fails two-bad.tar.gz
	[[ "$output" == *"gzip member 2: incorrect data check"* ]]
	{ cat two.tar.gz; head -c 512 /dev/zero; } >padded.tar.gz
	run dsec-layer import padded.tar.gz
	[ "$status" -eq 0 ]
	json_is "$(records)" .bytes 100000
	# a member whose last input bytes make megabytes (zeros): checked to its trailer
	mkdir z && head -c 20M /dev/zero >z/zeros && tar -C z -czf zeros.tar.gz zeros && rm -r z
	run dsec-layer import zeros.tar.gz
	[ "$status" -eq 0 ]
	json_is "$(records)" .bytes 20971520
	[ -z "$(ls -A "$DSEC_ROOT/tmp")" ]
}

@test "hostile: whiteouts naming '..' or '.' are refused" {
	mktar t.tar <<'PY'
reg("etc/.wh...")
PY
	import_fails t.tar
	[[ "$output" == *"whiteout names '..'"* ]]
	mktar t2.tar <<'PY'
reg("../.wh.passwd")
PY
	import_fails t2.tar
	mktar t3.tar <<'PY'
reg(".wh.")
PY
	import_fails t3.tar
}

@test "hostile: invalid UTF-8 and names over PATH_MAX are refused" {
	mktar t.tar <<'PY'
t.encoding = "utf-8"; t.errors = "surrogateescape"
reg("bad-\udcff-name", b"x")
PY
	import_fails t.tar
	[[ "$output" == *"not valid UTF-8"* ]]
	mktar t2.tar <<'PY'
reg("/".join(["d" * 200] * 25), b"x")
PY
	import_fails t2.tar
	[[ "$output" == *PATH_MAX* ]]
	mktar t3.tar <<'PY'
reg("x" * 300, b"x")
PY
	import_fails t3.tar
}

@test "a killed import leaves no partial layer; the next import cleans its staging dir" {
	mktar a.tar <<'PY'
reg("f", b"x" * 1000)
PY
	mkfifo slow
	dsec-layer import - <slow >/dev/null 2>&1 &
	local pid=$!
	exec 7>slow
	head -c 5000 a.tar >&7
	local i
	for i in $(seq 50); do
		ls "$DSEC_ROOT/tmp" 2>/dev/null | grep -q '^import-' && break
		sleep 0.1
	done
	ls "$DSEC_ROOT/tmp" | grep -q "^import-$pid-"
	kill -9 "$pid"
	wait "$pid" || true
	exec 7>&-
	[ -z "$(ls -A "$DSEC_ROOT/layers")" ]
	run dsec-layer import a.tar
	[ "$status" -eq 0 ]
	[ -z "$(ls -A "$DSEC_ROOT/tmp")" ]
}

@test "two concurrent imports of the same content: both succeed, one layer" {
	mktar a.tar <<'PY'
for i in range(300):
    reg("d/f%d" % i, b"x" * 5000)
PY
	local i pids=()
	for i in 1 2 3; do
		dsec-layer import a.tar >"out$i" 2>"err$i" &
		pids+=($!)
	done
	for i in 0 1 2; do wait "${pids[$i]}"; done
	[ "$(cat out1 out2 out3 | jq -r .layer | sort -u | wc -l)" -eq 1 ]
	[ "$(ls "$DSEC_ROOT/layers" | wc -l)" -eq 1 ]
	[ -z "$(ls -A "$DSEC_ROOT/tmp")" ]
}

@test "compose, ls, inspect, rm and gc" {
	mktar a.tar <<'PY'
reg("a", b"a")
PY
	mktar b.tar <<'PY'
reg("b", b"b")
PY
	mktar c.tar <<'PY'
reg("c", b"c")
PY
	local a b c
	a=$(dsec-layer import --kind base --name base-a a.tar | jq -r .layer)
	b=$(dsec-layer import --kind application b.tar | jq -r .layer)
	c=$(dsec-layer import c.tar | jq -r .layer)
	run dsec-layer compose --name img:1 base-a "${b:7:10}"
	[ "$status" -eq 0 ]
	json_is "$output" '.layers | join(",")' "$a,$b"
	json_is "$(cat "$DSEC_ROOT/images/img:1.json")" .image img:1
	run dsec-layer ls
	[ "$(records | jq -r 'select(.layer) | .layer' | wc -l)" -eq 3 ]
	[ "$(records | jq -r 'select(.image) | .image')" = img:1 ]
	run dsec-layer inspect img:1 "$a"
	json_is "${lines[0]}" .image img:1
	json_is "${lines[1]}" .name base-a
	# unknown layer, bad name: error records, exit 1
	must_fail dsec-layer compose --name x nosuch
	[ "$status" -eq 1 ]
	json_has "$(records)" '.error'
	[[ "$output" == *"'nosuch': no such layer"* ]]
	# rm and inspect take an image or a layer, and say so
	for v in rm inspect; do
		must_fail dsec-layer "$v" nosuch
		[ "$status" -eq 1 ]
		[[ "$output" == *"'nosuch': no such image or layer"* ]]
	done
	run dsec-layer compose --name 'bad/name' "$a"
	[ "$status" -eq 2 ]
	# rm refuses a layer an image uses, and one a sandbox uses
	must_fail dsec-layer rm "$a"
	[[ "$output" == *"used by image 'img:1'"* ]]
	mkdir -p "$DSEC_RUN/sandboxes/sb-1"
	echo "{\"id\":\"sb-1\",\"layers\":[\"$c\"]}" >"$DSEC_RUN/sandboxes/sb-1/sandbox.json"
	must_fail dsec-layer rm "$c"
	[[ "$output" == *"used by sandbox 'sb-1'"* ]]
	# gc keeps what images and sandboxes use
	run dsec-layer gc
	[ "$status" -eq 0 ]
	[ -z "$(records)" ]
	[ -d "$DSEC_ROOT/layers/${a:7}" ]
	[ -d "$DSEC_ROOT/layers/${b:7}" ]
	[ -d "$DSEC_ROOT/layers/${c:7}" ]
	rm -r "$DSEC_RUN/sandboxes/sb-1"
	run dsec-layer gc
	json_is "$(records)" .layer "$c"
	[ ! -e "$DSEC_ROOT/layers/${c:7}" ]
	run dsec-layer rm img:1
	[ "$status" -eq 0 ]
	run dsec-layer rm --force "$a"
	[ "$status" -eq 0 ]
	[ ! -e "$DSEC_ROOT/layers/${a:7}" ]
}

@test "the image resolves through the store contract (layer.erofs paths)" {
	mktar a.tar <<'PY'
reg("a", b"a")
PY
	local a
	a=$(dsec-layer import a.tar | jq -r .layer)
	dsec-layer compose --name one "$a" >/dev/null
	[ -f "$DSEC_ROOT/layers/${a:7}/layer.erofs" ]
	json_is "$(cat "$DSEC_ROOT/layers/${a:7}/meta.json")" .format erofs
}

@test "--format dir keeps an unpacked tree" {
	mktar a.tar <<'PY'
reg("etc/x", b"x", uid=5, gid=6)
PY
	run dsec-layer import --format dir a.tar
	[ "$status" -eq 0 ]
	local id
	id=$(layer_of)
	json_is "$(records)" .format dir
	[ "$(stat -c %u:%g "$DSEC_ROOT/layers/${id:7}/tree/etc/x")" = 5:6 ]
	[ ! -e "$DSEC_ROOT/layers/${id:7}/layer.erofs" ]
}

# OCI image layout and docker-save archives, built here from layer tars.
mkoci() { # mkoci DIR: two layers, one tag
	python3 - "$1" <<'PY'
import hashlib, io, json, os, sys, tarfile
d = sys.argv[1]
os.makedirs(d + "/blobs/sha256")
def blob(data):
    h = hashlib.sha256(data).hexdigest()
    open(d + "/blobs/sha256/" + h, "wb").write(data)
    return {"digest": "sha256:" + h, "size": len(data)}
def layer(files):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as t:
        for n, c in files.items():
            ti = tarfile.TarInfo(n); ti.size = len(c); t.addfile(ti, io.BytesIO(c))
    return b.getvalue()
L1 = layer({"etc/os": b"base\n"}); L2 = layer({"app/run": b"app\n", "etc/.wh.os": b""})
l1 = blob(L1); l1["mediaType"] = "application/vnd.oci.image.layer.v1.tar"
l2 = blob(L2)
ids = ["sha256:" + hashlib.sha256(x).hexdigest() for x in (L1, L2)]
cfgtext = json.dumps({"rootfs": {"type": "layers", "diff_ids": ids},
                      "config": {"Env": ["A=1"], "WorkingDir": "/app", "Cmd": ["run"]}}).encode()
cfg = blob(cfgtext)
man = blob(json.dumps({"schemaVersion": 2, "config": cfg, "layers": [l1, l2]}).encode())
man["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
man["annotations"] = {"org.opencontainers.image.ref.name": "docker.io/library/demo:1.0"}
open(d + "/index.json", "w").write(json.dumps({"schemaVersion": 2, "manifests": [man]}))
open(d + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
# the same layers as a docker-save archive
os.makedirs(d + ".docker/l1"); os.makedirs(d + ".docker/l2")
open(d + ".docker/l1/layer.tar", "wb").write(layer({"etc/os": b"base\n"}))
open(d + ".docker/l2/layer.tar", "wb").write(layer({"app/run": b"app\n", "etc/.wh.os": b""}))
open(d + ".docker/cfg.json", "wb").write(cfgtext)
open(d + ".docker/manifest.json", "w").write(json.dumps([{"Config": "cfg.json",
    "RepoTags": ["demo:latest"], "Layers": ["l1/layer.tar", "l2/layer.tar"]}]))
PY
}

@test "an OCI image layout (dir and tar) imports its layers and an image" {
	mkoci oci
	run dsec-layer import oci
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	json_is "${lines[0]}" .kind base
	json_is "${lines[1]}" .kind application
	json_is "${lines[2]}" .image docker.io-library-demo:1.0
	json_is "${lines[2]}" '.layers | length' 2
	json_is "${lines[2]}" '.layers[0]' "$(jq -r .layer <<<"${lines[0]}")"
	# the config's environment and working dir are kept for the image's commands
	json_is "${lines[2]}" '.config | tojson' '{"env":["A=1"],"workdir":"/app"}'
	json_is "$(dsec-layer inspect docker.io-library-demo:1.0)" '.config.workdir' /app
	# the same again is silent; over an image of that name made of other layers, a warning
	run dsec-layer import oci
	[[ "$output" != *replaced* ]]
	dsec-layer compose --name docker.io-library-demo:1.0 "$(jq -r .layer <<<"${lines[0]}")" >/dev/null
	run dsec-layer import oci
	[ "$status" -eq 0 ]
	[[ "$output" == *"image 'docker.io-library-demo:1.0' replaced"* ]]
	tar -C oci -cf oci.tar .
	run dsec-layer import --name mine oci.tar
	[ "$status" -eq 0 ]
	json_is "${lines[2]}" .image mine
	run in_layer "$(jq -r .layer <<<"${lines[1]}")" sh -c 'cat $M/app/run; stat -c %F $M/etc/os'
	[ "${lines[0]}" = app ]
	[ "${lines[1]}" = "character special file" ]
}

# mkoci_nested DIR [DEPTH]: a multi-platform layout as `skopeo copy --all` or buildx type=oci
# write it: index.json lists an index (DEPTH of them nested, default 1) listing an arm64 and an
# amd64 manifest; the arm64 one names a layer blob that is not there.
mkoci_nested() {
	python3 - "$1" "${2:-1}" <<'PY'
import hashlib, io, json, os, sys, tarfile
d, depth = sys.argv[1], int(sys.argv[2])
os.makedirs(d + "/blobs/sha256")
def blob(data, mt):
    h = hashlib.sha256(data).hexdigest()
    open(d + "/blobs/sha256/" + h, "wb").write(data)
    return {"mediaType": mt, "digest": "sha256:" + h, "size": len(data)}
b = io.BytesIO()
with tarfile.open(fileobj=b, mode="w") as t:
    ti = tarfile.TarInfo("etc/arch"); ti.size = 6; t.addfile(ti, io.BytesIO(b"amd64\n"))
L = b.getvalue()
lay = blob(L, "application/vnd.oci.image.layer.v1.tar")
cfg = blob(json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers",
    "diff_ids": ["sha256:" + hashlib.sha256(L).hexdigest()]}}).encode(),
    "application/vnd.oci.image.config.v1+json")
MT = "application/vnd.oci.image.manifest.v1+json"
amd = blob(json.dumps({"schemaVersion": 2, "mediaType": MT, "config": cfg, "layers": [lay]}).encode(), MT)
amd["platform"] = {"architecture": "amd64", "os": "linux"}
arm = blob(json.dumps({"schemaVersion": 2, "mediaType": MT, "config": cfg,
    "layers": [dict(lay, digest="sha256:" + "0" * 64)]}).encode(), MT)
arm["platform"] = {"architecture": "arm64", "os": "linux"}
IT = "application/vnd.oci.image.index.v1+json"
desc = blob(json.dumps({"schemaVersion": 2, "mediaType": IT, "manifests": [arm, amd]}).encode(), IT)
for _ in range(depth - 1):
    desc = blob(json.dumps({"schemaVersion": 2, "mediaType": IT, "manifests": [desc]}).encode(), IT)
desc["annotations"] = {"org.opencontainers.image.ref.name": "multi:1"}
open(d + "/index.json", "w").write(json.dumps({"schemaVersion": 2, "mediaType": IT, "manifests": [desc]}))
open(d + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
PY
}

@test "an OCI layout whose index lists an index (multi-platform) imports its amd64 image" {
	mkoci_nested oci
	run dsec-layer import oci
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(records | wc -l)" -eq 2 ]
	json_is "$(records | tail -1)" .image multi:1
	run in_layer "$(layer_of)" sh -c 'cat $M/etc/arch'
	[ "$output" = amd64 ]
	# the same layout as a tar
	rm -rf "$DSEC_ROOT/layers" "$DSEC_ROOT/images"
	tar -C oci -cf oci.tar .
	run dsec-layer import --name from-tar oci.tar
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	json_is "$(records | tail -1)" .image from-tar
	json_is "$(records | tail -1)" '.layers | length' 1
	# four indexes deep still imports; six is refused, leaving nothing
	rm -rf "$DSEC_ROOT/layers" "$DSEC_ROOT/images"
	mkoci_nested deep 4
	run dsec-layer import deep
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	rm -rf "$DSEC_ROOT/layers" "$DSEC_ROOT/images"
	mkoci_nested deeper 6
	import_fails deeper
	[[ "$output" == *"nested too deep"* ]]
}

@test "a docker-save archive imports its layers and an image named after its tag" {
	mkoci oci
	tar -C oci.docker -czf docker.tar.gz .
	run dsec-layer import docker.tar.gz
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	json_is "${lines[2]}" .image demo:latest
	run dsec-layer import oci.docker
	json_is "${lines[2]}" .image demo:latest
	[ "$(ls "$DSEC_ROOT/layers" | wc -l)" -eq 2 ]
	# a layer that is not the one the config names: no image
	echo '{"rootfs":{"diff_ids":["sha256:0000000000000000000000000000000000000000000000000000000000000000","x"]}}' \
		>oci.docker/cfg.json
	must_fail dsec-layer import --name tampered oci.docker
	[[ "$output" == *"the config says"* ]]
	[ ! -e "$DSEC_ROOT/images/tampered.json" ]
	# a manifest listing more layers than the config's diff ids (here one layer many times)
	# fails before any is taken
	jq -c '.[0].Layers = [range(8) as $i | .[0].Layers[0]] | .[0].RepoTags = ["many:1"]' \
		oci.docker/manifest.json >m.json && cp m.json oci.docker/manifest.json
	echo '{"rootfs":{"diff_ids":["sha256:0000000000000000000000000000000000000000000000000000000000000000"]}}' \
		>oci.docker/cfg.json
	local before
	before=$(ls "$DSEC_ROOT/layers" | wc -l)
	must_fail dsec-layer import oci.docker
	[[ "$output" == *"config lists 1 diff ids for 8 layers"* ]]
	[ "$(ls "$DSEC_ROOT/layers" | wc -l)" -eq "$before" ]
	# one layer listed three times, as the config says: unpacked once
	local d
	d=sha256:$(sha256sum oci.docker/l1/layer.tar | cut -d' ' -f1)
	jq -c '.[0].Layers = [range(3) as $i | "l1/layer.tar"] | .[0].RepoTags = ["thrice:1"]' \
		oci.docker/manifest.json >m.json && cp m.json oci.docker/manifest.json
	echo "{\"rootfs\":{\"diff_ids\":[\"$d\",\"$d\",\"$d\"]}}" >oci.docker/cfg.json
	run dsec-layer -v import oci.docker
	[ "$status" -eq 0 ]
	[ "$(grep -c ': extracted ' <<<"$output")" -eq 1 ]
	[ "$(jq -r '.layers | length' "$DSEC_ROOT/images/thrice:1.json")" -eq 3 ]
	# a manifest that is a link is not followed, nor the dir taken for a rootfs
	mv oci.docker/manifest.json oci.docker/real.json
	ln -s real.json oci.docker/manifest.json
	must_fail dsec-layer import --name linked oci.docker
	[[ "$output" == *"manifest.json or index.json is a symbolic link"* ]]
	[ ! -e "$DSEC_ROOT/images/linked.json" ]
	rm oci.docker/manifest.json
	mv oci.docker/real.json oci.docker/manifest.json
	# a fifo named as the config or a layer is refused at once, not waited on
	rm oci.docker/cfg.json
	mkfifo oci.docker/cfg.json
	run timeout 10 dsec-layer import --name fifo oci.docker
	[ "$status" -eq 1 ]
	[[ "$output" == *"'cfg.json': not a regular file"* ]]
	[ ! -e "$DSEC_ROOT/images/fifo.json" ]
}

@test "hostile: OCI blobs, manifests and configs must match their digests; a failed image leaves no layer" {
	mkoci oci
	cp -a oci good
	# the second layer's blob replaced: the first layer was added, then taken back
	l2=$(jq -r '.manifests[0].digest[7:]' oci/index.json)
	l2=$(jq -r '.layers[1].digest[7:]' "oci/blobs/sha256/$l2")
	python3 -c 'import io, sys, tarfile
b = io.BytesIO(); t = tarfile.open(fileobj=b, mode="w")
ti = tarfile.TarInfo("app/run"); ti.size = 4; t.addfile(ti, io.BytesIO(b"evil")); t.close()
open(sys.argv[1], "wb").write(b.getvalue())' "oci/blobs/sha256/$l2"
	must_fail dsec-layer import oci
	[ "$status" -eq 1 ]
	[ "$(records | wc -l)" -eq 1 ]
	[[ "$(records | jq -r .error.msg)" == *"its digest says sha256:$(cut -c1-12 <<<"$l2")"* ]]
	no_partial_layer
	[ -z "$(ls -A "$DSEC_ROOT/images" 2>/dev/null)" ]
	# a manifest with a byte more than its digest covers
	rm -rf oci && cp -a good oci
	m=$(jq -r '.manifests[0].digest[7:]' oci/index.json)
	echo >>"oci/blobs/sha256/$m"
	must_fail dsec-layer import oci
	[[ "$output" == *"does not match its digest"* ]]
	no_partial_layer
	# the config altered (its diff ids still right): refused before any image is made
	rm -rf oci && cp -a good oci
	c=$(jq -r '.config.digest[7:]' "oci/blobs/sha256/$m")
	jq -c '.config.User = "0"' "oci/blobs/sha256/$c" >cfg && mv cfg "oci/blobs/sha256/$c"
	must_fail dsec-layer import oci
	[[ "$output" == *"does not match its digest"* ]]
	[ -z "$(ls -A "$DSEC_ROOT/images" 2>/dev/null)" ]
	no_partial_layer
	# the untouched layout still imports, with its records in order
	run dsec-layer import good
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	json_is "${lines[2]}" '.layers | length' 2
}

@test "hostile: a config that is missing or named by a bad digest fails the import" {
	mkoci oci
	local m
	m=$(jq -r '.manifests[0].digest' oci/index.json)
	# a manifest naming its config by a traversal, or a config blob that is not there
	for dg in 'sha256:../../etc/passwd' "sha256:$(printf '%064d' 0)"; do
		rm -rf bad && cp -a oci bad
		jq -c --arg d "$dg" '.config.digest = $d' "oci/blobs/sha256/${m:7}" >man.json
		local h
		h=$(sha256sum <man.json | cut -c1-64)
		cp man.json "bad/blobs/sha256/$h"
		jq -c --arg d "sha256:$h" '.manifests[0].digest = $d' oci/index.json >bad/index.json
		import_fails bad
		[[ "$output" == *config* ]]
		[[ "$output" != *"not verified"* ]]
		[ -z "$(ls -A "$DSEC_ROOT/images" 2>/dev/null)" ]
	done
	[[ "$output" == *"image config: 'blobs/sha256/0000"* ]]
	# a docker archive whose Config is not there, or not named
	cp -a oci.docker dk
	rm dk/cfg.json
	import_fails dk
	[[ "$output" == *"image config: 'cfg.json'"* ]]
	jq -c '.[0] |= del(.Config)' oci.docker/manifest.json >dk/manifest.json
	import_fails dk
	[[ "$output" == *"no Config"* ]]
}

@test "--help and the man page name the same long options; bad options exit 2" {
	local h m
	h=$(dsec-layer --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u)
	m=$(MANWIDTH=200 mandoc -Tutf8 "$TOP/man/dsec-layer.1" | col -b |
		grep -oE -- '--[a-z][a-z0-9-]+' | sort -u)
	[ "$h" = "$m" ]
	run mandoc -Tlint -Wwarning "$TOP/man/dsec-layer.1"
	[ "$status" -eq 0 ]
	run dsec-layer import --kind nope x
	[ "$status" -eq 2 ]
	run dsec-layer import --max-bytes lots x
	[ "$status" -eq 2 ]
	run dsec-layer frobnicate
	[ "$status" -eq 2 ]
	run dsec-layer import
	[ "$status" -eq 2 ]
}

@test "layers stack in an overlay: whiteouts hide, opaque dirs replace" {
	mktar base.tar <<'PY'
reg("etc/os", b"base")
reg("etc/keep", b"k")
reg("opt/old", b"o")
PY
	mktar top.tar <<'PY'
reg("etc/.wh.os")
typ("opt", tarfile.DIRTYPE, mode=0o755)
reg("opt/.wh..wh..opq")
reg("opt/new", b"n")
PY
	local b t
	b=$(dsec-layer import base.tar | jq -r .layer)
	t=$(dsec-layer import top.tar | jq -r .layer)
	mkdir -p lb lt ov
	run unshare -m sh -c '
		mount -t erofs -o ro "$1" lb && mount -t erofs -o ro "$2" lt &&
		mount -t overlay -o ro,lowerdir=lt:lb overlay ov && ls ov/etc && ls ov/opt' sh \
		"$DSEC_ROOT/layers/${b:7}/layer.erofs" "$DSEC_ROOT/layers/${t:7}/layer.erofs"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | tr '\n' ' ')" = "keep new " ]
}

@test "without a way to build EROFS the layer is kept as an unpacked tree" {
	mktar a.tar <<'PY'
reg("x", b"x")
PY
	run env DSEC_LAYER_MKFS=mkfs.erofs PATH="$TOP/build" dsec-layer -v import a.tar
	[ "$status" -eq 0 ]
	json_is "$(records)" .format dir
	[[ "$output" == *"cannot be built"* ]]
	[ -f "$DSEC_ROOT/layers/$(layer_of | cut -c8-)/tree/x" ]
}

@test "our EROFS writer and mkfs.erofs give the same tree" {
	mktar a.tar <<'PY'
for d in [".", "etc", "big"] + ["d%d" % i for i in range(7)]:
    typ(d, tarfile.DIRTYPE, mode=0o755)
for i in range(200):
    reg("d%d/f%d" % (i % 7, i), os.urandom(i * 97), mode=0o640 + (i % 3), uid=i, gid=i * 2,
        mtime=1600000000 + i)
typ("d1/link", tarfile.SYMTYPE, linkname="../d2/f2")
typ("d1/hard", tarfile.LNKTYPE, linkname="d0/f0")
reg("etc/.wh.gone")
typ("opt", tarfile.DIRTYPE, mode=0o755)
reg("opt/.wh..wh..opq")
ti = tarfile.TarInfo("x"); ti.pax_headers = {"SCHILY.xattr.user.a": "1", "SCHILY.xattr.security.selinux": "s0"}
add(ti, b"xattrs")
for i in range(400):
    typ("big/" + ("n%03d" % i) * 20, tarfile.DIRTYPE, mode=0o700)
PY
	local a b
	a=$(dsec-layer import a.tar | jq -r .layer)
	mv "$DSEC_ROOT/layers/${a:7}/layer.erofs" mine.erofs
	rm -rf "$DSEC_ROOT/layers/${a:7}"
	b=$(DSEC_LAYER_MKFS=mkfs.erofs dsec-layer import a.tar | jq -r .layer)
	[ "$a" = "$b" ]
	fsck.erofs mine.erofs
	mkdir -p m1 m2
	run unshare -m sh -c '
		mount -t erofs -o ro mine.erofs m1 && mount -t erofs -o ro "$1" m2 || exit 1
		for m in m1 m2; do
			(cd $m && find . | sort | xargs -d "\n" stat -c "%n %f %u %g %h %s %Y %y %t:%T" &&
			find . -type f | sort | xargs -d "\n" md5sum &&
			getfattr --absolute-names -R -d -m - . | sort) >$m.txt
		done
		diff m1.txt m2.txt && wc -l <m1.txt' sh "$DSEC_ROOT/layers/${a:7}/layer.erofs"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" -gt 600 ]
}

@test "the busybox tree imports as a directory" {
	local d
	d=$(busybox_tree)
	run dsec-layer import --kind base --name busybox "$d"
	[ "$status" -eq 0 ]
	json_has "$(records)" '.files > 100'
	run in_layer "$(layer_of)" sh -c '[ -x $M/bin/busybox ] && readlink $M/bin/sh'
	[ "$output" = busybox ]
}

@test "hostile: a 2000-level deep tree imports (tar and directory) without a crash, or fails cleanly under few descriptors" {
	mktar deep.tar <<'PY'
reg("d/" * 2000 + "f", b"x")
PY
	run dsec-layer import deep.tar
	[ "$status" -eq 0 ]
	json_is "$(records)" .bytes 1
	python3 -c '
import os
os.mkdir("tree"); os.chdir("tree")
for i in range(2000):
    os.mkdir("d"); os.chdir("d")
open("f", "w").write("y")'
	run dsec-layer import tree
	[ "$status" -eq 0 ]
	json_is "$(records)" .files 2002
	# under 256 descriptors: the tar still imports; the tree fails with one line that says
	# why (the name cut in the middle), and neither leaves its staging dir behind
	run bash -c 'ulimit -n 256; dsec-layer import deep.tar'
	[ "$status" -eq 0 ]
	run bash -c 'ulimit -n 256; dsec-layer import tree 2>&1 >/dev/null'
	[ "$status" -eq 1 ]
	[ "${#lines[@]}" -le 2 ] # a warning about the EROFS writer, then the error
	[[ "${lines[-1]}" == *"...d/d/d"*": Too many open files" ]]
	[ -z "$(ls -A "$DSEC_ROOT/tmp")" ]
	rm -rf tree
}

@test "a staging tmpfs that fills up: the import starts again on disk" {
	mktar a.tar <<'PY'
for i in range(4):
    reg("f%d" % i, os.urandom(1 << 20))
PY
	run env DSEC_LAYER_TMPFS_SIZE=1m dsec-layer -v import a.tar
	[ "$status" -eq 0 ]
	[[ "$output" == *"importing again on disk"* ]]
	json_is "$(records)" .bytes $((4 << 20))
	json_is "$(records)" .format erofs
	[ -z "$(ls -A "$DSEC_ROOT/tmp")" ]
}
