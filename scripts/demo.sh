#!/usr/bin/env bash
# Installs what is needed, builds agentloop (release), and runs it offline on
# a copy of the bundled example workspace through the scripted provider: the
# model reads a buggy file, fixes it, runs the check and reports.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# Only the command itself (the release preset also builds the benchmarks).
cmake --preset release >/dev/null
cmake --build --preset release --target agentloop >/dev/null
work=$(mktemp -d /tmp/agentloop-demo.XXXXXX)
cp -r examples/demo/. "$work/"
export AGENTLOOP_HOME="$work/.agentloop-home"
echo "== workspace: $work"
./build/release/apps/cli/agentloop run --provider script --script examples/demo/script.json \
  -C "$work" --allow '*' "Fix the failing check in this project."
status=$?
echo "== exit status: $status"
exit $status
