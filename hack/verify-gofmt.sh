#!/usr/bin/env bash
# Fails when a Go file is not gofmt-formatted.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(gofmt -l $(git ls-files '*.go'))
if [[ -n "$bad" ]]; then
  echo "not gofmt-formatted (run gofmt -w):" >&2
  echo "$bad" >&2
  exit 1
fi
