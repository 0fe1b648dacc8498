#!/usr/bin/env bash
# Formats the C++ sources with the project's .clang-format.
# --check: report files that differ, change nothing, exit 1 if any.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h')
[ ${#files[@]} -gt 0 ] || exit 0
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
      echo "needs formatting: $f"
      bad=1
    fi
  done
  exit $bad
fi
clang-format -i "${files[@]}"
