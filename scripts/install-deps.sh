#!/usr/bin/env bash
# Installs every Debian 12 package the build, the tests and the benchmarks use.
# Idempotent: packages already installed are skipped; safe to run as root on a
# fresh machine (uses sudo when not root and sudo exists).
set -euo pipefail
# Two groups, so that the test command can compile while the second installs:
#  build: what configuring and compiling need (`cmake --preset release` and
#         `ci`'s compile; the `ci` preset compiles with Clang);
#  test:  what only the tests run (browsers, servers, Node.js, packaging tools).
# The `ci` preset's configure looks for node and npm, so the test group must be
# installed before it runs. Usage: install-deps.sh [build|test|all] (all).
BUILD_PKGS=(
  build-essential g++ cmake ninja-build ccache pkg-config git
  clang-14 libclang-rt-14-dev lld  # the `ci` preset's compiler, its sanitizer runtimes, its linker
  nlohmann-json3-dev libboost-dev libsqlite3-dev libssl-dev
  libre2-dev libedit-dev libtomlplusplus-dev
  libbsd-dev libmd-dev libncurses-dev  # static archives for the release build (AL_STATIC_DEPS)
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang-format clang-tidy python3
  g++-aarch64-linux-gnu  # scripts/cross-arm64.sh: the tools module must build on arm64
  # The PostgreSQL store's client headers (libpq, opened with dlopen at run time).
  libpq-dev
)
TEST_PKGS=(
  ripgrep bubblewrap procps time hyperfine
  chromium chromium-driver python3-selenium  # the web console's browser tests (same Chromium version)
  # The PostgreSQL server the tests start as a throwaway cluster (initdb +
  # pg_ctl from /usr/lib/postgresql/15/bin).
  postgresql-15
  # Email notifications: libcurl (opened with dlopen by a server with an
  # email channel), and the real SMTP server the tests send to.
  libcurl4 python3-aiosmtpd
  curl jq  # README's `agentloop serve` example, which tests/e2e/test_docs_examples.py runs
  # The web console's JavaScript unit tests (node:test) and tests/mcp: the MCP
  # reference servers run on Node.js and npm installs them.
  nodejs
  # scripts/package.sh and its tests (tests/package): lintian checks the .deb,
  # debootstrap makes the bare Debian root it is installed in, systemd-analyze
  # rates the service's hardening and python3-seccomp applies its system-call
  # filter to the tools.
  lintian debootstrap systemd python3-seccomp
  # The fault-injection suite (tests/chaos): libfiu's POSIX preload fails fsync
  # in a running server, faketime jumps its clock.
  fiu-utils faketime
)
# A Node.js that brings its own npm needs no npm package.
command -v npm >/dev/null 2>&1 || TEST_PKGS+=(npm)
case "${1:-all}" in
  build) PKGS=("${BUILD_PKGS[@]}") ;;
  test) PKGS=("${TEST_PKGS[@]}") ;;
  all) PKGS=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}") ;;
  *) echo "usage: install-deps.sh [build|test|all]" >&2; exit 2 ;;
esac
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
