#!/usr/bin/env bash
# Regenerates the generated files of the repository (go generate directives).
set -euo pipefail
cd "$(dirname "$0")/.."
go generate ./...
