#!/usr/bin/env bash
# The `agentloop serve` scale benchmark (docs/BENCHMARKS.md, "Server at
# scale"). Runs three processes on 127.0.0.1: bench_fake_model (the model,
# event-driven, one thread), `agentloop serve`, and load_client.py; prints the
# load client's JSON figures for each run.
#
#   bench/serve/serve_scale.sh BUILD_DIR [RUN...]
# RUN is one of
#   turns:N:SSE[:DELTAS:MS]   N sessions, N concurrent turns, SSE attached
#                             clients; each model answer streams DELTAS text
#                             deltas over MS ms (default 20 over 20000) and
#                             calls `read`, then answers
#   idle:N                    N sessions and N/5 attached clients, no turns
#   decisions:M:RATE          M sessions paused on a `write` approval, then
#                             M decisions at RATE per second
# Default: turns:100:20 turns:1000:200 turns:10000:2000 decisions:5000:1000.
# Each run gets a fresh server and store (under a temporary directory).
# STORE_SYNC=normal runs the server with store.sync = normal (no fsync per
# commit); the default is the product's default, full. PERF_OUT=FILE records
# a CPU profile of the server per run (FILE.<run>; PERF_CALLGRAPH=dwarf|fp adds
# call graphs). SERVE_WRAP="valgrind --tool=massif --massif-out-file=F" runs the
# server under that command (a heap profile). STORE=postgres puts the sessions
# in a throwaway PostgreSQL cluster with durability on (pg_cluster_up.py; a
# new schema per run; STORE_SYNC does not apply) and adds the database's CPU
# time (its postmaster and backends) to the figures; PG_STATEMENTS=N also
# prints the N statements that took the most database time in each run
# (pg_stat_statements).
set -euo pipefail

build=${1:?usage: serve_scale.sh BUILD_DIR [RUN...]}
shift
runs=("$@")
if [ ${#runs[@]} -eq 0 ]; then
  runs=(turns:100:20 turns:1000:200 turns:10000:2000 decisions:5000:1000)
fi
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/apps/cli/agentloop
[ -x "$bin" ] || bin=$(find "$build" -name agentloop -type f -perm -u+x | head -1)
model_bin=$build/bench/bench_fake_model
[ -x "$bin" ] && [ -x "$model_bin" ] || { echo "build agentloop and bench_fake_model in $build" >&2; exit 2; }

# Every connection is a descriptor: raise the soft limit to the hard one.
ulimit -n "$(ulimit -Hn)"
echo "# nofile $(ulimit -n), cores $(nproc), $(uname -r)"

work=$(mktemp -d /tmp/serve_scale.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

"$model_bin" >"$work/model.out" 2>"$work/model.err" &
model_pid=$!
pids+=("$model_pid")
for _ in $(seq 100); do grep -q '^PORT ' "$work/model.out" 2>/dev/null && break; sleep 0.05; done
model_port=$(awk '/^PORT /{print $2}' "$work/model.out")

pg_url="" pg_pid="" pg_psql="" pg_runs=0
if [ "${STORE:-sqlite}" = postgres ]; then
  # The cluster lives until its helper's standard input closes (cleanup).
  mkfifo "$work/pg.in"
  python3 "$here/pg_cluster_up.py" ${PG_STATEMENTS:+--stat-statements} <"$work/pg.in" >"$work/pg.out" 2>"$work/pg.err" &
  pids+=("$!")
  exec 9>"$work/pg.in"
  for _ in $(seq 600); do grep -q '^PSQL ' "$work/pg.out" 2>/dev/null && break; sleep 0.1; done
  pg_url=$(awk '/^URL /{print $2}' "$work/pg.out")
  pg_pid=$(awk '/^PID /{print $2}' "$work/pg.out")
  pg_psql=$(awk '/^PSQL /{print $2}' "$work/pg.out")
  [ -n "$pg_psql" ] || { cat "$work/pg.err" >&2; exit 2; }
fi

run_one() {
  local spec=$1 kind n sse deltas ms rate
  IFS=: read -r kind n sse deltas ms <<<"$spec"
  deltas=${deltas:-20}
  ms=${ms:-20000}
  local d=$work/run
  rm -rf "$d"
  mkdir -p "$d/config/agents/reader" "$d/config/agents/writer" "$d/ws/out" "$d/home"
  printf 'a line of the file the model reads\n%.0s' $(seq 40) >"$d/ws/data.txt"
  : >"$d/config/config.toml"
  local fast=4 fast_ms=200
  for agent in reader writer; do
    local tool=read model_deltas=$deltas model_ms=$ms
    if [ $agent = writer ]; then tool=write model_deltas=$fast model_ms=$fast_ms; fi
    cat >"$d/config/agents/$agent/agent.toml" <<EOF
[agent]
description = "serve scale benchmark: $tool"
workspace = "$d/ws"

[provider]
kind = "openai"
base_url = "http://127.0.0.1:$model_port/v1"
model = "bench-$tool-$model_deltas-$model_ms"

[permissions]
allow = ["read"]
EOF
  done
  local store_env=()
  if [ -n "$pg_url" ]; then
    pg_runs=$((pg_runs + 1))
    "$pg_psql" "$pg_url" -X -q -c "CREATE SCHEMA run_$pg_runs" >/dev/null
    store_env=(AGENTLOOP_STORE_URL="$pg_url?options=-csearch_path%3Drun_$pg_runs")
    if [ -n "${PG_STATEMENTS:-}" ]; then
      "$pg_psql" "$pg_url" -X -q -c "SELECT pg_stat_statements_reset(), pg_stat_reset()" >/dev/null
    fi
  fi
  env -i PATH="$PATH" HOME="$d/home" AGENTLOOP_HOME="$d/home/data" OPENAI_API_KEY=bench \
    AGENTLOOP_STORE_SYNC="${STORE_SYNC:-full}" "${store_env[@]}" \
    ${SERVE_WRAP:-} "$bin" serve --config "$d/config/config.toml" --listen 127.0.0.1:0 --no-auth \
    >"$d/serve.out" 2>"$d/serve.err" &
  local serve_pid=$!
  pids+=("$serve_pid")
  local url=""
  for _ in $(seq 200); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$d/serve.err" 2>/dev/null | head -1 || true)
    [ -n "$url" ] && break
    sleep 0.05
  done
  [ -n "$url" ] || { cat "$d/serve.err" >&2; return 1; }
  local perf_pid=""
  if [ -n "${PERF_OUT:-}" ]; then
    # A CPU profile of the server for this run (perf record, user space).
    perf record -q -F 499 ${PERF_CALLGRAPH:+--call-graph "$PERF_CALLGRAPH"} -p "$serve_pid" \
      -o "$PERF_OUT.${spec//:/_}" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  local model_cpu0
  model_cpu0=$(awk '{print $14+$15}' "/proc/$model_pid/stat")
  if [ -n "$pg_url" ]; then
    echo "## $spec (store PostgreSQL, durable)"
  else
    echo "## $spec (store.sync ${STORE_SYNC:-full})"
  fi
  case $kind in
    turns)
      python3 "$here/load_client.py" --url "$url" --server-pid "$serve_pid" \
        --sessions "$n" --sse "$sse" ;;
    idle)
      python3 "$here/load_client.py" --url "$url" --server-pid "$serve_pid" \
        --sessions "$n" --sse "$((n / 5))" --idle ;;
    decisions)
      rate=$sse
      python3 "$here/load_client.py" --url "$url" --server-pid "$serve_pid" \
        --decisions "$n" --decision-rate "$rate" ${pg_pid:+--db-pid "$pg_pid"} ;;
    *) echo "unknown run $spec" >&2; return 2 ;;
  esac
  echo "# fake model CPU: $(awk -v c0="$model_cpu0" -v hz="$(getconf CLK_TCK)" '{printf "%.2f s", ($14+$15-c0)/hz}' "/proc/$model_pid/stat")"
  echo "# server peak RSS: $(awk '/VmHWM/{print $2, $3}' "/proc/$serve_pid/status")"
  if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
  if [ -n "$pg_url" ] && [ -n "${PG_STATEMENTS:-}" ]; then
    echo "# database time by statement (calls, total ms, mean ms, statement):"
    "$pg_psql" "$pg_url" -X -q -A -t -F ' | ' -c "SELECT calls, round(total_exec_time::numeric, 1),
        round(mean_exec_time::numeric, 3), left(regexp_replace(query, '\s+', ' ', 'g'), 110)
        FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT $PG_STATEMENTS" | sed 's/^/#   /'
    echo "# database: $("$pg_psql" "$pg_url" -X -q -A -t -c "SELECT 'connections ' || sessions ||
        ', commits ' || xact_commit || ', rollbacks ' || xact_rollback FROM pg_stat_database
        WHERE datname = current_database()")"
  fi
  kill -TERM "$serve_pid"
  wait "$serve_pid" || true
  if [ -s "$d/serve.err" ]; then
    echo "# serve stderr (last lines):"
    tail -5 "$d/serve.err" | sed 's/^/#   /'
  fi
}

for r in "${runs[@]}"; do run_one "$r"; done
if [ -n "$pg_url" ]; then exec 9>&-; fi
kill -TERM "$model_pid"
wait "$model_pid" || true
cat "$work/model.err"
