#!/bin/sh
# Install every build, test and run-time dependency of dsec from Debian's packages.
# Idempotent: does nothing (and needs no network) when everything is already there.
set -eu

pkgs="build-essential pkg-config libseccomp-dev libcap-dev libarchive-dev libzstd-dev
libjansson-dev libssl-dev zlib1g-dev erofs-utils zstd xz-utils bats jq busybox-static debootstrap mandoc shellcheck
cppcheck clang-format clang libclang-rt-14-dev bubblewrap crun uidmap iproute2 util-linux
libnftables-dev nftables
procps kmod attr python3"

missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps.sh: error: missing packages:$missing (run as root to install)" >&2
	exit 1
fi
echo "deps.sh: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
