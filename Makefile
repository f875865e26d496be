# aisched developer targets. `make help` lists them.

GO      ?= go
TOOLS   := $(GO) tool -modfile=hack/tools/go.mod
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
KUBE_VERSION := v1.37.0
# The embedded Kubernetes components report KUBE_VERSION (kubectl version,
# /version, scheduler --version) instead of v0.0.0-master.
KUBE_LDFLAGS := $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	  -X $(pkg).gitVersion=$(KUBE_VERSION) -X $(pkg).gitMajor=1 -X $(pkg).gitMinor=37 -X $(pkg).gitTreeState=clean)
LDFLAGS := -s -w -X github.com/aisched/aisched/pkg/version.gitVersion=$(VERSION) $(KUBE_LDFLAGS)
# Unit-test packages: everything but the integration tests, which link the
# whole control plane and run without the race detector (see test-integration).
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /test/integration)
# Of those, the ones that link the control plane (kube-apiserver: aisched up,
# the simulator's apiserver engine, the command) run without the race
# detector too: it would compile all of Kubernetes a second time,
# instrumented, which doubles a cold build on 2 cores, for code whose own
# concurrency is small and runs in the integration tests as well. Every other package (the scheduler's
# shared state and plugins, the job queue, the simulator's fast engine, whatif,
# the console, the gateway, the controller, the agent) runs with it.
PLANE_PKGS = $(shell $(GO) list -f '{{.ImportPath}}{{range .Deps}}{{if eq . "k8s.io/kubernetes/pkg/controlplane"}} plane{{end}}{{end}}' ./... | grep ' plane$$' | cut -d' ' -f1)
RACE_PKGS = $(filter-out $(PLANE_PKGS),$(UNIT_PKGS))
FUZZTIME ?= 30s

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_\/-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/aisched.
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/aisched ./cmd/aisched

IMAGE_REPO   ?= ghcr.io/aisched/aisched
IMAGE_ARCHES := amd64 arm64

.PHONY: image
image: ## Build the release image (linux/amd64, linux/arm64) as an OCI layout in bin/image, without a container daemon.
	$(call build-image)

.PHONY: image-push
image-push: ## Build the release image and push it to $(IMAGE_REPO):$(VERSION) (credentials of docker login); refuses a dirty tree.
	@case "$(VERSION)" in *-dirty) echo "image-push: the tree has uncommitted changes ($(VERSION)); commit first" >&2; exit 1;; esac
	$(call build-image,--push)

# build-image cross-builds bin/linux_<arch>/aisched for IMAGE_ARCHES, then
# hack/image assembles them (FROM scratch: the binary, CA roots, a nonroot
# user), checks that the host's binary prints $(VERSION) and writes the
# layout ($(1): extra flags, such as --push). Timestamps are the commit's.
define build-image
	for arch in $(IMAGE_ARCHES); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -buildvcs=false \
	    -ldflags '$(LDFLAGS)' -o bin/linux_$$arch/aisched ./cmd/aisched || exit 1; \
	done
	cd hack/image && $(GO) run . $(foreach a,$(IMAGE_ARCHES),--binary linux/$(a)=$(CURDIR)/bin/linux_$(a)/aisched) \
	  --version $(VERSION) --source-date-epoch $$(git log -1 --format=%ct) \
	  --revision $$(git rev-parse HEAD) --repository $(IMAGE_REPO) --out $(CURDIR)/bin/image $(1)
endef

.PHONY: up
up: ## Build bin/aisched (listing packages as they compile) and run a whole simulated cluster in the foreground until Ctrl-C (use a second terminal); ARGS='--fresh ...' adds flags.
	$(GO) build -v -ldflags '$(LDFLAGS)' -o bin/aisched ./cmd/aisched
	bin/aisched up $(ARGS)

# BENCH_ARGS adds flags to make bench, e.g. BENCH_ARGS='--rows 3,4 --rounds 5'.
BENCH_ARGS ?=
.PHONY: bench
bench: ## The throughput table (pkg/bench/throughput Suite): aisched against upstream on CPU, GPU, shared, busy-cluster, gang and DRA cases, 15,000 nodes with memory; markdown with the core count (an hour or more on 2 cores).
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/aisched ./cmd/aisched
	bin/aisched bench throughput --suite --format table $(BENCH_ARGS)

.PHONY: bench-gateway
bench-gateway: ## Measure the gateway's added latency under load (ARGS=... adds flags).
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/aisched bench gateway --format table $(ARGS)

.PHONY: test
test: test-unit test-integration ## Run every test: the command CI runs.

.PHONY: test-unit
test-unit: ## Unit tests, with the race detector where it does not instrument Kubernetes; the image builder's tests (hack/image).
	$(GO) test -race $(RACE_PKGS)
	$(GO) test $(filter-out $(RACE_PKGS),$(UNIT_PKGS))
	cd hack/image && $(GO) test ./...

# The integration tests start real control planes in-process; the race
# detector would instrument all of Kubernetes and triple their build and run
# time on a 2-core machine, so it stays on the unit tests, which cover the
# concurrent code of this repository.
# The embedded apiserver reports the stamped Kubernetes version, which the
# chart's kubeVersion requires (TestChart installs it with helm).
# The tests wait on real time far more than they compute (a whole run uses
# about 400 s of CPU in 13 minutes at go test's default of one test per
# core), so INTEGRATION_PARALLEL of them run at once.
.PHONY: test-integration
# RUN picks integration tests by name (go test -run), e.g. make test-integration RUN='^TestGang'.
RUN ?=
INTEGRATION_PARALLEL ?= 4
test-integration: bin/helm ## Tests against the embedded control plane (real apiserver and scheduler); RUN=regexp picks some.
	AISCHED_HELM=$(abspath bin/helm) $(GO) test -timeout 30m -parallel $(INTEGRATION_PARALLEL) -ldflags '$(KUBE_LDFLAGS)' $(if $(RUN),-count=1 -run '$(RUN)') ./test/integration/...

.PHONY: faults
faults: bin/helm ## The fault tests (docs/hardening.md): kill -9 of the scheduler and controller, a gang cut short, the queue's fence, corrupt data, etcd and apiserver access.
	AISCHED_HELM=$(abspath bin/helm) $(GO) test -timeout 30m -ldflags '$(KUBE_LDFLAGS)' -count=1 -v \
	  -run '^(TestSchedulerFailover|TestControllerFailover|TestGangSchedulerCrash|TestUpKilled|TestJobQueueFence|TestUpBadInput|TestLocalClusterAuth)$$' ./test/integration/
	$(GO) test -count=1 ./pkg/local/datadir/ ./pkg/platform/keys/

# SOAK is how long make soak churns the local cluster; its samples (every
# SOAK_INTERVAL) go to bin/soak.csv.
SOAK ?= 60m
SOAK_INTERVAL ?= 1m
# SOAK_EVENT_TTL sets the apiserver's --event-ttl for the soak (default 1h).
SOAK_EVENT_TTL ?=
.PHONY: soak
soak: ## The local cluster under steady pod, Job, gang and gateway churn for SOAK (60m): RSS, heap, goroutines, files, etcd size and binding latency every SOAK_INTERVAL into bin/soak.csv.
	@mkdir -p bin
	AISCHED_SOAK=$(SOAK) AISCHED_SOAK_INTERVAL=$(SOAK_INTERVAL) AISCHED_SOAK_EVENT_TTL=$(SOAK_EVENT_TTL) AISCHED_SOAK_OUT=$(abspath bin/soak.csv) \
	  $(GO) test -timeout 0 -ldflags '$(KUBE_LDFLAGS)' -run '^TestSoak$$' -v ./test/integration/

.PHONY: test-node
test-node: ## The device path on a real node (root, runc): containerd with NRI, a kubelet, aisched up, the agent's hook; a few minutes, not part of test.
	hack/node-e2e/run.sh

.PHONY: test-e2e
test-e2e: ## The chart on three real nodes on this machine (root, runc, iptables): aisched up's control plane, kubelets, containerd, kube-proxy, a CNI pod network, fake GPUs; helm install, the suite (test/e2e), upgrade, uninstall. Not part of test.
	hack/node-e2e/e2e.sh

.PHONY: console-screenshots
console-screenshots: bin/helm ## Screenshots of the console's pages into docs/images (needs Chromium), from TestConsole.
	@mkdir -p docs/images
	AISCHED_CONSOLE_SCREENSHOTS=$(abspath docs/images) AISCHED_HELM=$(abspath bin/helm) \
	  $(GO) test -count=1 -ldflags '$(KUBE_LDFLAGS)' -run '^TestConsole$$' ./test/integration/

.PHONY: gpu-check
gpu-check: ## On a node with NVIDIA GPUs and PyTorch: the agent's nvidia-smi reads under load, and MPS shares enforced on card 0 (docs/device-path.md).
	AISCHED_REAL_GPU=1 AISCHED_REAL_GPU_LOAD="$${AISCHED_REAL_GPU_LOAD:-python3 $(abspath hack/gpu-load.py)}" \
	  $(GO) test -count=1 -v -run '^TestReal' ./pkg/agent/nvidiasmi/ ./pkg/agent/deliver/

.PHONY: bench-sim
bench-sim: ## Time the simulator: a shipped scenario run (Go benchmark), every shipped scenario, and, with TRACE=DIR, one policy x one seed of the Alibaba default trace.
	$(GO) test -run '^$$' -bench ScenarioRun -benchtime 5x ./pkg/sim/
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/aisched sim run scenarios/ > /dev/null
	@if [ -n "$(TRACE)" ]; then for p in BestFit aisched; do \
	  $(GO) run -ldflags '$(LDFLAGS)' ./cmd/aisched sim trace --nodes $(TRACE)/openb_node_list_gpu_node.csv --pods $(TRACE)/openb_pod_list_default.csv --policy $$p --typical-pods-from-trace --seeds 42 > /dev/null; done; fi

.PHONY: test-engines
test-engines: ## Every shipped scenario, all seeds, on both simulator engines: their outcomes must agree.
	AISCHED_ENGINES_ALL=1 $(GO) test -timeout 60m -run '^TestEnginesAgree$$' -v ./test/integration/

.PHONY: fuzz
fuzz: ## Run every fuzz test for FUZZTIME (default 30s) each.
	@for pkg in $$($(GO) list ./...); do \
	  for fz in $$($(GO) test -list 'Fuzz.*' $$pkg | grep '^Fuzz'); do \
	    echo "$$pkg $$fz"; $(GO) test -run '^$$' -fuzz "^$$fz$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

bin/helm: hack/tools/helm/go.mod ## Build Helm (the version pinned in hack/tools/helm/go.mod) into bin/helm, for the chart (helm install, helm template).
	$(GO) build -modfile=hack/tools/helm/go.mod -o $@ helm.sh/helm/v4/cmd/helm

.PHONY: chart-lint
chart-lint: bin/helm ## Lint the Helm chart (charts/aisched).
	bin/helm lint --strict charts/aisched

.PHONY: lint
lint: ## Run golangci-lint (version pinned in hack/tools/go.mod).
	$(TOOLS) golangci-lint run ./...

.PHONY: generate
generate: ## Regenerate generated code and manifests.
	hack/update-generated.sh

.PHONY: verify
verify: ## Fail when formatting, go.mod or generated files are stale, or lint fails.
	hack/verify-gofmt.sh
	hack/verify-mod.sh
	hack/verify-generated.sh
	$(MAKE) lint

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf bin
