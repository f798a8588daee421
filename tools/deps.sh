#!/bin/sh
# deps.sh - install the Debian packages wpack builds and tests with, when missing.
# Usage: tools/deps.sh [build|test|all]   (default all)
set -e
need="gcc make libc6-dev pkg-config binutils libxxhash-dev libzstd-dev libarchive-dev libjansson-dev libdeflate-dev zlib1g-dev libcurl4-openssl-dev"
case "${1:-all}" in
build) ;;
test | all) need="$need python3 python3-numpy python3-torch python3-pip python3-setuptools mlir-19-tools clang libfuzzer-14-dev libopenblas-dev zstd time nginx strace aria2 fuse3 python3-fusepy" ;;
esac
missing=""
for p in $need; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "installing:$missing" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# Tests only: s3rver (npm), the S3-compatible server that checks SigV4 in
# tests/cli/test_remote_s3rver.sh, pinned by tools/s3rver/package-lock.json
# into tools/s3rver/node_modules (not in git). Reinstalled when the lock is
# newer than the install. A failure is reported here and does not stop the
# build: that test then fails, saying s3rver is not installed.
case "${1:-all}" in
test | all)
    s3=$(dirname "$0")/s3rver
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        echo "tools/deps.sh: node and npm not found: s3rver not installed;" \
            "tests/cli/test_remote_s3rver.sh will FAIL" >&2
    elif [ ! "$s3/node_modules/.package-lock.json" -nt "$s3/package-lock.json" ]; then
        echo "installing: s3rver (npm ci in $s3)" >&2
        if ! (cd "$s3" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
            rm -rf "$s3/node_modules"
            echo "tools/deps.sh: npm ci in $s3 FAILED: s3rver not installed;" \
                "tests/cli/test_remote_s3rver.sh will FAIL" >&2
        fi
    fi
    ;;
esac
