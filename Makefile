# cozy-aio — see README.md. `make demo` runs the main job; `make test` runs
# every test against a real kube-apiserver and etcd built from Go modules.

SHELL := /usr/bin/env bash
GO ?= go
TESTBIN_DIR ?= $(HOME)/.cache/cozy-aio/testbin/v1.37.1
GO_TEST_FLAGS ?= -timeout 60m

.PHONY: test fmt-check vet testbin testbin-cluster demo bench build fuzz

## test: gofmt and go vet, build the test control plane if missing, run every test.
test: fmt-check vet testbin
	COZY_TESTBIN_DIR=$(TESTBIN_DIR) $(GO) test $(GO_TEST_FLAGS) ./...
	$(GO) test -race -count=1 ./shard/

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

## fuzz: each fuzz target for FUZZTIME (default 60s), one after another.
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzExtract$$' -fuzztime $(FUZZTIME) ./source/
	$(GO) test -run '^$$' -fuzz '^FuzzCopyPaths$$' -fuzztime $(FUZZTIME) ./source/generate/
	$(GO) test -run '^$$' -fuzz '^FuzzExpand$$' -fuzztime $(FUZZTIME) ./apply/

## bench: every Go benchmark (figures go to BENCHMARKS.md).
bench:
	COZY_TESTBIN_DIR=$(TESTBIN_DIR) $(GO) test -run '^$$' -bench . -benchmem -timeout 120m ./...
