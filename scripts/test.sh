#!/usr/bin/env bash
# The README's test command, what CI runs (.ci/run). Installs what is needed,
# checks layering and formatting, compiles the tools module for arm64
# (scripts/cross-arm64.sh), then builds twice, once per flavour:
#  - `release` (optimised, static; scripts/demo.sh's build): the `agentloop`
#    and fake model server that the end-to-end tests run (the `ci` preset's
#    AL_E2E_BUILD_DIR points at it), with precompiled headers (AL_PCH);
#  - `ci` (warnings as errors, AddressSanitizer + UndefinedBehaviorSanitizer,
#    line tables only, precompiled headers, no benchmarks): the unit and
#    integration tests, one CTest test per case.
# Tests run in two groups: every label but e2e on as many jobs as cores (the
# `package` label among them: scripts/package.sh on the release binary, then
# the tarball, the .deb in a bare Debian root and the npm packages), then
# the e2e label, whose tests mostly wait on the processes they start, on
# AL_E2E_JOBS (default three per core). Then the README's first command
# (scripts/demo.sh) on the release build already made.
#
# At the end it lists the tests that skipped, with their reasons; with
# AL_TEST_NO_SKIP=1 (.ci/run sets it: CI installs every dependency) a skip
# fails the run. It prints the time of each stage and each label.
set -euo pipefail
cd "$(dirname "$0")/.."

cores=$(nproc)
e2e_jobs=${AL_E2E_JOBS:-$((3 * cores))}
logs=build/ci/Testing/logs
stage_names=()
stage_secs=()
failed=()
t_all=$SECONDS

breakdown() {
  echo
  echo "== time (s), $cores cores, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  local i
  for i in "${!stage_names[@]}"; do
    printf '  %-28s %6d\n' "${stage_names[$i]}" "${stage_secs[$i]}"
  done
  printf '  %-28s %6d\n' "total" $((SECONDS - t_all))
  if [ -d "$logs" ]; then
    local f
    for f in "$logs"/*.summary; do
      [ -e "$f" ] || continue
      echo "== ctest $(basename "$f" .summary): sum of test times per label (s)"
      sed -n '/^Label Time Summary:/,/^Total Test time/p' "$f" | sed '1d;s/^/  /'
    done
  fi
}
trap breakdown EXIT

# stage NAME COMMAND...: runs COMMAND, records its time; a failure ends the run.
stage() {
  local name=$1 t=$SECONDS
  shift
  echo "== $name"
  "$@"
  stage_names+=("$name")
  stage_secs+=($((SECONDS - t)))
}

# tests NAME CTEST-ARGS...: one ctest run; its log is kept for the skip report.
# A failure is recorded and the other groups still run.
tests() {
  local name=$1 t=$SECONDS rc=0
  shift
  echo "== tests: $name"
  ctest --preset ci --no-tests=error "$@" 2>&1 | tee "$logs/$name.summary" || rc=$?
  cp build/ci/Testing/Temporary/LastTest.log "$logs/$name.log" 2>/dev/null || true
  stage_names+=("tests: $name")
  stage_secs+=($((SECONDS - t)))
  [ $rc -eq 0 ] || failed+=("$name")
}

stage "install: build" ./scripts/install-deps.sh build
stage "layering" ./scripts/check-layering.sh
stage "format" ./scripts/format.sh --check
# Downloads, not compiles, run beside the first builds: the packages only the
# tests use, then the package tests' bare Debian root (debootstrap, from the
# test group). The `ci` configure looks for node and npm, so it waits for the
# packages; the tests wait for the root.
mkdir -p build/ci/package/cache
./scripts/install-deps.sh test >build/install-test.log 2>&1 &
install_pid=$!
(wait_for_install() { while kill -0 "$install_pid" 2>/dev/null; do sleep 1; done; }
 wait_for_install
 cd tests/package && AGENTLOOP_PACKAGE_CACHE="$PWD/../../build/ci/package/cache" \
  python3 -B -c 'import test_deb; test_deb.debian_root_tarball()') >build/debian-root.log 2>&1 &
root_pid=$!
stage "cross-arm64" ./scripts/cross-arm64.sh
stage "build: release" sh -c 'cmake --preset release -DAL_PCH=ON >/dev/null &&
  cmake --build --preset release --target agentloop agentloop-fake-server'
wait_install() {
  wait "$install_pid" || { echo "install-deps.sh test failed:"; tail -30 build/install-test.log; return 1; }
  tail -1 build/install-test.log
}
stage "install: test (beside builds)" wait_install
stage "configure: ci" sh -c 'cmake --preset ci >/dev/null'
# The chaos runs (label `chaos`: minutes of workload and faults each, on the
# release binary already built) run beside the ci build and are waited for
# before the other tests: one ctest at a time per build tree (each writes its
# Testing/ log).
rm -rf "$logs"
mkdir -p "$logs"
t_chaos=$SECONDS
ctest --preset ci --no-tests=error -L '^chaos$' -j 2 >"$logs/chaos.summary" 2>&1 &
chaos_pid=$!
stage "build: ci" cmake --build --preset ci
wait_chaos() {
  local rc=0
  wait "$chaos_pid" || rc=$?
  cp build/ci/Testing/Temporary/LastTest.log "$logs/chaos.log" 2>/dev/null || true
  tail -n 25 "$logs/chaos.summary"
  echo "(chaos: $((SECONDS - t_chaos)) s since it started beside the ci build)"
  [ $rc -eq 0 ] || failed+=("chaos")
}
stage "tests: chaos (beside ci build)" wait_chaos
# A failed download is reported here and tried again by the test that needs it.
wait_root() {
  wait "$root_pid" || { echo "debian root: not made (the package test tries again):"; tail -20 build/debian-root.log; }
}
stage "debian root (beside builds)" wait_root
tests "unit" -LE '^(e2e|chaos)$' -j "$cores"
tests "e2e" -L e2e -j "$e2e_jobs"
stage "demo" ./scripts/demo.sh

skip_args=()
[ "${AL_TEST_NO_SKIP:-}" = "1" ] && skip_args+=(--fail)
skips_ok=1
python3 scripts/test-skips.py "${skip_args[@]}" "$logs"/*.log || skips_ok=0

if [ ${#failed[@]} -gt 0 ]; then
  echo "tests failed in: ${failed[*]}"
  exit 1
fi
[ $skips_ok -eq 1 ] || exit 1
echo "all tests passed"
