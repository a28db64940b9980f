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
