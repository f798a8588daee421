#!/bin/sh
# Quick start 2: install what is missing, then run every test (make check).
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh all
make -j2 check
