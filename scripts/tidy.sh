#!/usr/bin/env bash
# Runs clang-tidy with the project's .clang-tidy over src/ (needs a configured
# build directory for compile_commands.json; default build/dev).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/dev}
[ -f "$build/compile_commands.json" ] || cmake --preset dev >/dev/null
git ls-files 'src/*.cc' | grep -v _test.cc | xargs -P2 -n4 clang-tidy -p "$build" --quiet
