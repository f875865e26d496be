#!/usr/bin/env bash
# Fails when go.mod or go.sum (of the module, hack/tools or hack/node-e2e) is not tidy.
set -euo pipefail
cd "$(dirname "$0")/.."
for dir in . hack/tools hack/node-e2e; do
  (cd "$dir" && go mod tidy -diff) || { echo "go.mod in $dir is not tidy; run go mod tidy there" >&2; exit 1; }
done
