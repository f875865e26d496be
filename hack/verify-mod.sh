#!/usr/bin/env bash
# Fails when go.mod or go.sum of any module of the repository is not tidy.
set -euo pipefail
cd "$(dirname "$0")/.."
for dir in $(git ls-files "go.mod" "*/go.mod" | xargs -n1 dirname); do
  (cd "$dir" && go mod tidy -diff) || { echo "go.mod in $dir is not tidy; run go mod tidy there" >&2; exit 1; }
done
