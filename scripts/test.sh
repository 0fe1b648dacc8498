#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test with the `ci` preset:
# warnings as errors, AddressSanitizer + UndefinedBehaviorSanitizer, all unit,
# integration and end-to-end tests; plus the format and layering checks. Then
# the README's first command (scripts/demo.sh): the release build, linked
# statically against Debian's archives (AL_STATIC_DEPS), must build and run.
# Before the build, scripts/cross-arm64.sh compiles the tools module (and what
# it builds on) for arm64 with the cross compiler: seconds, not a second build.
# (One sanitized build instead of two keeps CI well inside its time limit on
# two cores; `cmake --workflow --preset dev|asan|release` are for developers.)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/check-layering.sh
./scripts/cross-arm64.sh
./scripts/format.sh --check || echo "format: differences found (see above); run scripts/format.sh"
cmake --workflow --preset ci
./scripts/demo.sh
echo "all tests passed"
