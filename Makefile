# cozy-aio — see README.md. `make demo` runs the main job; `make test` runs
# every test against a real kube-apiserver and etcd built from Go modules.

SHELL := /usr/bin/env bash
# Go 1.27 comes as a toolchain module: machines start on Go 1.26 with
# GOTOOLCHAIN=local, so every recipe (and every go command a test starts)
# gets it from here; the go command fetches it once from the module proxy.
GOTOOLCHAIN ?= go1.27.3
export GOTOOLCHAIN
GO ?= go
TESTBIN_DIR ?= $(HOME)/.cache/cozy-aio/testbin/v1.37.1
GO_TEST_FLAGS ?= -timeout 60m

.PHONY: bench-page chromium screenshots test fmt-check tidy-check vet testbin testbin-cluster testbin-s3 demo bench bench-scale bench-curve bench-defaults bench-clusters build image fuzz fuzz-short chaos switch-over

## test: gofmt, go mod tidy and go vet, build the test control plane, the cluster
## simulator and the S3 server if missing, install Chromium if missing (as root),
## run every test, then fuzz-short.
test: fmt-check tidy-check vet testbin-cluster testbin-s3 chromium
	COZY_TESTBIN_DIR=$(TESTBIN_DIR) $(GO) test $(GO_TEST_FLAGS) ./...
	$(GO) test -race -count=1 ./shard/
	@$(MAKE) --no-print-directory fuzz-short

## chromium: Debian's chromium for the status page's browser tests (apt-get, as root).
chromium:
	@hack/chromium.sh

## screenshots: retake docs/status-page/*.png, the README's pictures of the status page,
## with the browser test that checks the page.
screenshots: testbin chromium
	COZY_SCREENSHOTS=1 COZY_TESTBIN_DIR=$(TESTBIN_DIR) $(GO) test -count=1 -run TestStatusPageInBrowser ./internal/statuspage/

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	@echo "gofmt: clean"

## tidy-check: go.mod and go.sum say exactly what the code imports.
tidy-check:
	@# go mod tidy -diff exits non-zero when a change is needed; its stderr
	@# also carries "go: downloading" lines on a fresh module cache.
	@if ! out=$$($(GO) mod tidy -diff 2>&1); then \
	echo "go mod tidy needed:"; echo "$$out" | grep -v '^go: downloading'; exit 1; fi
	@echo "go mod tidy: clean"

vet:
	$(GO) vet ./...
	@echo "go vet: clean"

## testbin: build kube-apiserver and etcd from Go modules into $(TESTBIN_DIR).
testbin:
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) hack/testbin.sh envtest >/dev/null

## testbin-cluster: also kube-controller-manager, kube-scheduler and kwok.
testbin-cluster:
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) hack/testbin.sh cluster >/dev/null

## testbin-s3: also weed (SeaweedFS), the S3-compatible server of the Bucket tests.
testbin-s3:
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) hack/testbin.sh s3 >/dev/null

# The shipped binary is static and leaves out kustomize's Go plugin loader:
# importing Go's plugin package makes the binary export every symbol for
# dynamic loading, which cost 17 MB of file and 30 MB of resident memory.
BUILD_TAGS ?= kustomize_disable_go_plugin_support

# VERSION is stamped into the binary (`cozy-aio version`, the static pod's
# default image tag) and the image's labels.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
# -s -w: no symbol table or DWARF (linux/amd64: 117.7 MB -> 82.3 MB, see
# BENCHMARKS.md "Binary and image"); panics keep their
# stack traces, which come from the runtime's own tables.
LDFLAGS ?= -s -w -X main.version=$(VERSION)

## build: the cozy-aio binary into bin/ (static, stripped, as shipped).
build:
	@echo "building bin/cozy-aio..."
	@CGO_ENABLED=0 $(GO) build -tags $(BUILD_TAGS) -trimpath -ldflags "$(LDFLAGS)" -o bin/cozy-aio ./cmd/cozy-aio

## image: the linux/amd64+arm64 OCI image of the static binary on an empty base, without
## Docker: pushed to IMAGE=registry/repo:tag (IMAGE_INSECURE=1 for plain HTTP), else written
## as an OCI layout to IMAGE_LAYOUT (default bin/image). The Dockerfile builds the same with Docker.
IMAGE ?=
IMAGE_LAYOUT ?= $(if $(IMAGE),,bin/image)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
image:
	@$(GO) run ./hack/image -version "$(VERSION)" -revision "$(REVISION)" -platforms "$(IMAGE_PLATFORMS)" \
		-bin-dir bin $(if $(IMAGE),-image "$(IMAGE)") $(if $(IMAGE_LAYOUT),-layout "$(IMAGE_LAYOUT)") \
		$(if $(IMAGE_INSECURE),-insecure)

## demo: the main job on a simulated fresh cluster (DEMO_TENANTS, DEMO_RELEASES, DEMO_BREAK=1,
## DEMO_REPLICAS=N: N cozy-aio replicas as on N control-plane nodes, the leader killed mid-install;
## DEMO_CLUSTERS=N: N tenant clusters with ten addon HelmReleases each through spec.kubeConfig, the
## last one stopped midway, DEMO_CLUSTER_DOWN=start|none).
DEMO_REPLICAS ?= 1
demo: testbin-cluster build
	@echo "building the demo harness..."
	@$(GO) build -o bin/cozy-aio-demo ./examples/demo
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) DEMO_REPLICAS=$(DEMO_REPLICAS) bin/cozy-aio-demo -cozy-aio bin/cozy-aio

## bench-scale: 200 tenants x 5 releases of a 3-ConfigMap chart on a plain API server; then
## cozy-aio restarted with everything Ready (its data directory kept, then emptied).
## DEMO_TENANTS up to 2000; DEMO_IDLE=60s adds the idle cost, DEMO_PROFILE=20s a CPU profile.
bench-scale: testbin build
	@$(GO) build -o bin/cozy-aio-demo ./examples/demo
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) DEMO_SCALE=1 DEMO_TENANTS=$${DEMO_TENANTS:-200} DEMO_RELEASES=$${DEMO_RELEASES:-5} DEMO_RESTART=$${DEMO_RESTART:-1} bin/cozy-aio-demo -cozy-aio bin/cozy-aio -timeout 40m

## bench-page: the status page's cost: bench-scale at 3,000 releases four times, page off, on with two
## headless Chromium browsers connected, on, off; first view and update latency in the browsers.
bench-page: testbin build chromium
	@$(GO) build -o bin/cozy-aio-demo ./examples/demo
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) bin/cozy-aio-demo -cozy-aio bin/cozy-aio -compare-page -tenants $${DEMO_TENANTS:-600} -releases 5 -idle 30s -timeout 40m

## bench-curve: bench-scale at 1,000, 3,000 and 10,000 releases (DEMO_CURVE), one run each;
## writes docs/benchmarks/scale-curve.svg.
bench-curve: testbin build
	@$(GO) build -o bin/cozy-aio-demo ./examples/demo
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) DEMO_RELEASES=5 DEMO_CURVE=$${DEMO_CURVE:-1000,3000,10000} bin/cozy-aio-demo -cozy-aio bin/cozy-aio -timeout 40m

## bench-defaults: bench-scale twice in a row, cozy-aio on its defaults, then --shards 4 --shard-workers 4.
bench-defaults: testbin build
	@$(GO) build -o bin/cozy-aio-demo ./examples/demo
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) DEMO_TENANTS=$${DEMO_TENANTS:-200} DEMO_RELEASES=5 DEMO_COMPARE_DEFAULTS=1 bin/cozy-aio-demo -cozy-aio bin/cozy-aio

## bench-clusters: remote releases (spec.kubeConfig): 20 tenants x 10 releases in the management cluster
## against each tenant's on a tenant cluster of its own (local, remote, remote, local); then 10 tenant
## clusters all up against one of them down from the start (up, down, down, up).
bench-clusters: testbin build
	@$(GO) build -o bin/cozy-aio-demo ./examples/demo
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) DEMO_TENANTS=$${DEMO_TENANTS:-20} DEMO_RELEASES=10 DEMO_COMPARE_REMOTE=1 bin/cozy-aio-demo -cozy-aio bin/cozy-aio -timeout 20m
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) DEMO_TENANTS=10 DEMO_RELEASES=10 DEMO_COMPARE_DOWN=1 bin/cozy-aio-demo -cozy-aio bin/cozy-aio -timeout 20m

## switch-over: Flux's controllers, built from their module source (hack/flux.sh), and cozy-aio take
## over from each other on a simulated cluster: SWITCH_RELEASES HelmReleases (default 1,000; OCIRepository,
## HelmRepository and ExternalArtifact sources) and 20 Kustomizations with prune, Flux → cozy-aio, then
## cozy-aio → Flux; each run reports new Helm revisions, objects rewritten and deleted, the time to answer,
## what became of three troubled releases (install failed, upgrade failed, pending-install) and how many rows
## of `flux get helmreleases/kustomizations -A` (the flux CLI v2.9.5, also built by hack/flux.sh) changed.
switch-over: testbin-cluster build
	@hack/flux.sh
	@$(GO) build -o bin/cozystack-acceptance ./examples/cozystack
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) bin/cozystack-acceptance -cozy-aio bin/cozy-aio -helmreleases $${SWITCH_RELEASES:-1000} -kustomizations 20 \
		-troubled -flux-cli $(HOME)/.cache/cozy-aio/flux/flux -flux-dir $(HOME)/.cache/cozy-aio/flux -switch -settle 60s -timeout 30m
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) bin/cozystack-acceptance -cozy-aio bin/cozy-aio -helmreleases $${SWITCH_RELEASES:-1000} -kustomizations 20 \
		-troubled -flux-cli $(HOME)/.cache/cozy-aio/flux/flux -switch -switch-flux-dir $(HOME)/.cache/cozy-aio/flux -settle 30s -timeout 30m

## fuzz: each fuzz target for FUZZTIME (default 60s), one after another.
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzExtract$$' -fuzztime $(FUZZTIME) ./source/
	$(GO) test -run '^$$' -fuzz '^FuzzCopyPaths$$' -fuzztime $(FUZZTIME) ./source/generate/
	$(GO) test -run '^$$' -fuzz '^FuzzExpand$$' -fuzztime $(FUZZTIME) ./apply/
	$(GO) test -run '^$$' -fuzz '^FuzzParseIndex$$' -fuzztime $(FUZZTIME) ./source/helmrepo/
	$(GO) test -run '^$$' -fuzz '^FuzzNewIndex$$' -fuzztime $(FUZZTIME) ./source/bucket/
	$(GO) test -run '^$$' -fuzz '^FuzzReceiverVerify$$' -fuzztime $(FUZZTIME) ./notify/
	$(GO) test -run '^$$' -fuzz '^FuzzChartArchive$$' -fuzztime $(FUZZTIME) ./source/helmrepo/
	$(GO) test -run '^$$' -fuzz '^FuzzBuild$$' -fuzztime $(FUZZTIME) ./apply/
	$(GO) test -run '^$$' -fuzz '^FuzzParseDependsOn$$' -fuzztime $(FUZZTIME) ./engine/internal/frame/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeAssignment$$' -fuzztime $(FUZZTIME) ./engine/internal/replicas/
	$(GO) test -run '^$$' -fuzz '^FuzzObject$$' -fuzztime $(FUZZTIME) ./apply/decrypt/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./engine/cluster/
	$(GO) test -run '^$$' -fuzz '^FuzzCacheTransform$$' -fuzztime $(FUZZTIME) ./engine/internal/kinds/
	$(GO) test -run '^$$' -fuzz '^FuzzSignedContent$$' -fuzztime $(FUZZTIME) ./source/verify/
	$(GO) test -run '^$$' -fuzz '^FuzzTamperedSignature$$' -fuzztime $(FUZZTIME) ./source/verify/

## fuzz-short: the fuzz targets whose oracles guard untrusted input (kubeconfigs, signatures,
## archives, generator paths) for FUZZTIME_SHORT each (default 10s); `make test` runs it. `make fuzz`
## runs them longer, with the others. A failing input lands in the package's testdata/fuzz/.
FUZZTIME_SHORT ?= 10s
fuzz-short:
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME_SHORT) ./engine/cluster/
	$(GO) test -run '^$$' -fuzz '^FuzzTamperedSignature$$' -fuzztime $(FUZZTIME_SHORT) ./source/verify/
	$(GO) test -run '^$$' -fuzz '^FuzzSignedContent$$' -fuzztime $(FUZZTIME_SHORT) ./source/verify/
	$(GO) test -run '^$$' -fuzz '^FuzzExtract$$' -fuzztime $(FUZZTIME_SHORT) ./source/
	$(GO) test -run '^$$' -fuzz '^FuzzCopyPaths$$' -fuzztime $(FUZZTIME_SHORT) ./source/generate/

## bench: every Go benchmark (figures go to BENCHMARKS.md).
bench:
	COZY_TESTBIN_DIR=$(TESTBIN_DIR) $(GO) test -run '^$$' -bench . -benchmem -timeout 120m ./...

## chaos: the reliability campaign at full size (docs/reliability.md), then the soak.
## Sized by CHAOS_SEED, CHAOS_RELEASES, CHAOS_KUSTOMIZATIONS, CHAOS_KILLS, CHAOS_WIPED,
## CHAOS_KILLS_PER_CHECK, CHAOS_API_RESTARTS, CHAOS_ETCD_PAUSES, CHAOS_ETCD_PAUSE,
## CHAOS_SOURCE_OUTAGES, CHAOS_SOURCE_OUTAGE, CHAOS_REGISTRY_FAULTS, CHAOS_OPS, CHAOS_SETTLE,
## CHAOS_SOAK_RELEASES, CHAOS_SOAK_ROUNDS; `make test` runs a small campaign and soak.
CHAOS_SEED ?= $(shell date +%s)
CHAOS_RELEASES ?= 200
CHAOS_KUSTOMIZATIONS ?= 50
CHAOS_KILLS ?= 100
CHAOS_WIPED ?= 10
CHAOS_KILLS_PER_CHECK ?= 5
CHAOS_API_RESTARTS ?= 10
CHAOS_ETCD_PAUSES ?= 1
CHAOS_ETCD_PAUSE ?= 30s
CHAOS_SOURCE_OUTAGES ?= 1
CHAOS_SOURCE_OUTAGE ?= 60s
CHAOS_REGISTRY_FAULTS ?= 2
CHAOS_SOAK_RELEASES ?= 1000
CHAOS_SOAK_ROUNDS ?= 10
CHAOS_ENV = CHAOS_SEED=$(CHAOS_SEED) CHAOS_RELEASES=$(CHAOS_RELEASES) CHAOS_KUSTOMIZATIONS=$(CHAOS_KUSTOMIZATIONS) \
	CHAOS_KILLS=$(CHAOS_KILLS) CHAOS_WIPED=$(CHAOS_WIPED) CHAOS_KILLS_PER_CHECK=$(CHAOS_KILLS_PER_CHECK) \
	CHAOS_API_RESTARTS=$(CHAOS_API_RESTARTS) CHAOS_ETCD_PAUSES=$(CHAOS_ETCD_PAUSES) CHAOS_ETCD_PAUSE=$(CHAOS_ETCD_PAUSE) \
	CHAOS_SOURCE_OUTAGES=$(CHAOS_SOURCE_OUTAGES) CHAOS_SOURCE_OUTAGE=$(CHAOS_SOURCE_OUTAGE) \
	CHAOS_REGISTRY_FAULTS=$(CHAOS_REGISTRY_FAULTS) CHAOS_SOAK_RELEASES=$(CHAOS_SOAK_RELEASES) CHAOS_SOAK_ROUNDS=$(CHAOS_SOAK_ROUNDS) \
	$(if $(CHAOS_OPS),CHAOS_OPS=$(CHAOS_OPS)) $(if $(CHAOS_SETTLE),CHAOS_SETTLE=$(CHAOS_SETTLE))
chaos: testbin build
	$(CHAOS_ENV) COZY_AIO_BINARY=$(CURDIR)/bin/cozy-aio COZY_TESTBIN_DIR=$(TESTBIN_DIR) \
		$(GO) test -count=1 -timeout 0 -v -run '^(TestCampaign|TestSoak)$$' ./internal/chaos/
