#!/usr/bin/env bash
# Takes the example from an Operator to an inference result: applies the
# manifests of this directory, waits for the AIService, and sends the
# example request through the gateway with the example's API key. Exits 0
# only when the model's answer is right.
#
#   aisched up                      # in another terminal
#   examples/platform/try.sh
#
# KUBECONFIG defaults to aisched up's; kubectl is $KUBECTL, else `aisched
# kubectl` (aisched on PATH, or bin/aisched from make build: the
# apiserver's version), else a kubectl on PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export KUBECONFIG=${KUBECONFIG:-${XDG_DATA_HOME:-$HOME/.local/share}/aisched/kubeconfig}

if [ -n "${KUBECTL:-}" ]; then
  read -r -a kubectl <<<"$KUBECTL"
elif command -v aisched >/dev/null; then
  kubectl=(aisched kubectl)
elif [ -x "$here/../../bin/aisched" ]; then
  kubectl=("$here/../../bin/aisched" kubectl)
elif command -v kubectl >/dev/null; then
  kubectl=(kubectl)
else
  echo "try.sh: needs kubectl, or aisched on PATH (make build)" >&2
  exit 2
fi
command -v curl >/dev/null || { echo "try.sh: needs curl" >&2; exit 2; }
step() { echo "+ $*" >&2; "$@"; }

step "${kubectl[@]}" apply -f "$here"
step "${kubectl[@]}" -n ai-demo wait --for=condition=Ready aiservice/sum --timeout=120s
url=$("${kubectl[@]}" -n ai-demo get aiservice sum -o jsonpath='{.status.url}')
key=$("${kubectl[@]}" -n ai-demo get secret sum-keys -o jsonpath='{.data.demo-user}' | base64 --decode)

# The Open Inference Protocol v2 request: one tensor of four numbers.
request='{"inputs":[{"name":"x","shape":[4],"datatype":"FP64","data":[1,2,3,4]}]}'
echo "+ curl -H 'Authorization: Bearer ***' --data '$request' ${url}v2/models/sum/infer" >&2
answer=$(curl -sS --fail-with-body --max-time 30 -H "Authorization: Bearer $key" \
  -H 'Content-Type: application/json' --data "$request" "${url}v2/models/sum/infer")
echo "$answer"
# The model adds up its inputs: 1+2+3+4 = 10.
case "$answer" in
  *'"model_name":"sum"'*'"data":[10]'*) echo "try.sh: the model answered 10, correct" >&2 ;;
  *) echo "try.sh: wrong answer, want the sum 10" >&2; exit 1 ;;
esac
