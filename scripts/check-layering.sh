#!/usr/bin/env bash
# Checks the module dependency rules of ARCHITECTURE.md: a module may include
# only the internal headers of the modules below it, and apps/cli only those
# of the modules its row of the table names. `src/` is on every module's
# include path, so the compiler cannot check this for us.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [base]="base"
  [protocol]="base protocol"
  [env]="base env"
  [permissions]="base protocol permissions"
  [core]="base protocol core"
  [providers]="base protocol providers"
  [tools]="base protocol env tools"
  [todo]="base protocol todo"
  [learning]="base protocol env learning todo"
  [store]="base protocol store"
  [mcp]="base protocol env tools providers mcp"
  [config]="base protocol config"
  [engine]="base protocol env permissions core providers tools mcp todo learning store config engine"
  [server]="base protocol env permissions core providers tools mcp todo learning store config engine server"
  [acp]="base protocol permissions engine acp"
)
# apps/cli: the server, the engine and the public API, plus the internals
# ARCHITECTURE.md lists for it, each with its reason ("What apps/cli uses").
allowed_cli="base protocol config permissions learning tools todo mcp engine server acp"
status=0
for mod in "${!allowed[@]}"; do
  [ -d "src/$mod" ] || continue
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(echo "$line" | sed -E 's/.*#include "([a-z_]+)\/.*/\1/')
    [ "$inc" = "agentloop" ] && continue
    case " ${allowed[$mod]} " in
      *" $inc "*) ;;
      *)
        # Tests may use the core's test doubles and test support.
        if [[ "$file" == *_test.cc && ( "$inc" == "core" || "$inc" == "providers" || "$inc" == "engine" ) ]]; then continue; fi
        echo "layering: $file includes \"$inc/...\" but src/$mod may use only: ${allowed[$mod]}"
        status=1
        ;;
    esac
  done < <(grep -rHn '#include "[a-z_]*/' "src/$mod" || true)
done
while IFS= read -r line; do
  file=${line%%:*}
  inc=$(echo "$line" | sed -E 's/.*#include "([a-z_]+)\/.*/\1/')
  [ "$inc" = "agentloop" ] && continue
  case " $allowed_cli " in
    *" $inc "*) ;;
    *)
      echo "layering: $file includes \"$inc/...\" but apps/cli may use only: $allowed_cli"
      status=1
      ;;
  esac
done < <(grep -rHn '#include "[a-z_]*/' apps || true)
[ $status -eq 0 ] && echo "layering: ok"
exit $status
