#!/usr/bin/env bash
# Fails when regenerating changes a tracked file or adds an untracked one.
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(git status --porcelain)
hack/update-generated.sh
after=$(git status --porcelain)
if [[ "$before" != "$after" ]]; then
  echo "generated files are stale; run 'make generate' and commit the result:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
