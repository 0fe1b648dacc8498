#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test: the `ci` preset
# (warnings as errors) and the `asan` preset (AddressSanitizer +
# UndefinedBehaviorSanitizer), plus the format and layering checks.
# Usage: scripts/test.sh [--quick]   (--quick: ci preset only, no asan)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/check-layering.sh
./scripts/format.sh --check || echo "format: differences found (see above); run scripts/format.sh"
cmake --workflow --preset ci
if [ "${1:-}" != "--quick" ]; then
  cmake --workflow --preset asan
fi
echo "all tests passed"
