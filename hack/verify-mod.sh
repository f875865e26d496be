#!/usr/bin/env bash
# Fails when go.mod or go.sum (of the module or of hack/tools) is not tidy.
set -euo pipefail
cd "$(dirname "$0")/.."
for dir in . hack/tools; do
  (cd "$dir" && go mod tidy -diff) || { echo "go.mod in $dir is not tidy; run go mod tidy there" >&2; exit 1; }
done
