#!/usr/bin/env bash
# Compiles the tools module, and the base, protocol and env modules it builds
# on, for arm64 (aarch64) with Debian's cross compiler, so that code which
# builds only on x86-64 (unguarded SSE/AVX intrinsics, say) fails CI.
# Compile only: the arm64 libraries are not installed, so nothing is linked.
# Header-only and architecture-independent dependencies (RE2, nlohmann-json)
# come from /usr/include, searched after the cross compiler's own headers.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX="${AL_CROSS_CXX:-aarch64-linux-gnu-g++}"
if ! command -v "$CXX" >/dev/null; then
  echo "cross-arm64: $CXX not found (scripts/install-deps.sh installs g++-aarch64-linux-gnu)" >&2
  exit 1
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
srcs=()
for f in src/base/*.cc src/protocol/*.cc src/env/*.cc src/tools/*.cc; do
  case "$f" in *_test.cc) continue ;; esac
  srcs+=("$f")
done
printf '%s\n' "${srcs[@]}" |
  xargs -P 2 -I{} sh -c '"$0" -std=c++20 -O0 -Wall -Wextra -Werror -D_GNU_SOURCE \
      -Iinclude -Isrc -idirafter /usr/include -c "$1" -o "$2/$(echo "$1" | tr / _).o"' \
      "$CXX" {} "$out"
echo "cross-arm64: ${#srcs[@]} sources of base, protocol, env and tools compile for aarch64"
