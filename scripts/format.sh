#!/usr/bin/env bash
# Formats the C++ sources with the project's .clang-format.
# --check: change nothing; list the files that differ and exit 1 if any
# (all tracked files: a few CPU-seconds, two clang-format processes at once).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h')
[ ${#files[@]} -gt 0 ] || exit 0
if [ "${1:-}" = "--check" ]; then
  if out=$(printf '%s\0' "${files[@]}" | xargs -0 -P 2 -n 25 clang-format --dry-run --Werror 2>&1); then
    echo "format: ${#files[@]} files formatted"
    exit 0
  fi
  bad=$(printf '%s\n' "$out" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*clang-format.*/\1/p' | sort -u)
  if [ -z "$bad" ]; then
    printf '%s\n' "$out" >&2
    echo "format: clang-format failed" >&2
    exit 1
  fi
  printf 'needs formatting: %s\n' $bad >&2
  echo "format: run scripts/format.sh" >&2
  exit 1
fi
clang-format -i "${files[@]}"
