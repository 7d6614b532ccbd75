# cozy-aio — see README.md. `make demo` runs the main job; `make test` runs
# every test against a real kube-apiserver and etcd built from Go modules.

SHELL := /usr/bin/env bash
GO ?= go
TESTBIN_DIR ?= $(HOME)/.cache/cozy-aio/testbin/v1.37.1
GO_TEST_FLAGS ?= -timeout 60m

.PHONY: test fmt-check vet testbin testbin-cluster demo bench build

## test: gofmt and go vet, build the test control plane if missing, run every test.
test: fmt-check vet testbin
	COZY_TESTBIN_DIR=$(TESTBIN_DIR) $(GO) test $(GO_TEST_FLAGS) ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	@echo "gofmt: clean"

vet:
	$(GO) vet ./...
	@echo "go vet: clean"

## testbin: build kube-apiserver and etcd from Go modules into $(TESTBIN_DIR).
testbin:
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) hack/testbin.sh envtest >/dev/null

## testbin-cluster: also kube-controller-manager, kube-scheduler and kwok.
testbin-cluster:
	@COZY_TESTBIN_DIR=$(TESTBIN_DIR) hack/testbin.sh cluster >/dev/null

## build: the cozy-aio binary into bin/.
build:
	$(GO) build -o bin/cozy-aio ./cmd/cozy-aio

## demo: the main job on the built-in local control plane.
demo:
	@echo "make demo: not built yet (issue #9 brings the simulated cluster and the demo)." >&2
	@exit 1

## bench: every Go benchmark (figures go to BENCHMARKS.md).
bench:
	COZY_TESTBIN_DIR=$(TESTBIN_DIR) $(GO) test -run '^$$' -bench . -benchmem -timeout 120m ./...
