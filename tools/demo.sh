#!/bin/sh
# Quick start 1: install what is missing, build, run the demo on the bundled example.
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh all
make -j2 all
make demo
