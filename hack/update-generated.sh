#!/usr/bin/env bash
# Regenerates everything generated from apis/: deepcopy functions and CRD
# manifests (controller-gen), typed clientset, listers and informers
# (k8s.io/code-generator). Tool versions are pinned in hack/tools/go.mod.
set -euo pipefail
cd "$(dirname "$0")/.."

tool() { go tool -modfile=hack/tools/go.mod "$@"; }
module=github.com/aisched/aisched
header=hack/boilerplate.go.txt
# Kinds whose plural is the kind itself (the CRD plural is nodemetrics).
plurals=Endpoints:Endpoints,NodeMetrics:NodeMetrics,Queue:AischedQueues,Topology:AischedTopologies

tool controller-gen object:headerFile="$header" paths=./apis/...
rm -f charts/aisched/crds/*_*.yaml
tool controller-gen crd paths=./apis/... output:crd:dir=charts/aisched/crds

rm -rf pkg/generated
groups=()
for dir in apis/*/v[0-9]*/; do
  dir=${dir%/}
  groups+=(--input "${dir#apis/}")
done
tool client-gen --go-header-file "$header" --plural-exceptions "$plurals" --input-base "$module/apis" "${groups[@]}" \
  --clientset-name versioned --output-dir pkg/generated/clientset --output-pkg "$module/pkg/generated/clientset"
pkgs=()
for dir in apis/*/v[0-9]*/; do
  dir=${dir%/}
  pkgs+=("$module/$dir")
done
tool lister-gen --go-header-file "$header" --plural-exceptions "$plurals" --output-dir pkg/generated/listers \
  --output-pkg "$module/pkg/generated/listers" "${pkgs[@]}"
tool informer-gen --go-header-file "$header" --plural-exceptions "$plurals" --output-dir pkg/generated/informers \
  --output-pkg "$module/pkg/generated/informers" \
  --versioned-clientset-package "$module/pkg/generated/clientset/versioned" \
  --listers-package "$module/pkg/generated/listers" "${pkgs[@]}"
