#!/bin/sh
# deps.sh - install the Debian packages wpack builds and tests with, when missing.
# Usage: tools/deps.sh [build|test|all]   (default all)
set -e
need="gcc make libc6-dev pkg-config binutils libxxhash-dev libzstd-dev libarchive-dev libjansson-dev libdeflate-dev libcurl4-openssl-dev"
case "${1:-all}" in
build) ;;
test | all) need="$need python3 python3-numpy python3-torch python3-pip python3-setuptools mlir-19-tools clang libfuzzer-14-dev libopenblas-dev zstd time nginx strace" ;;
esac
missing=""
for p in $need; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
