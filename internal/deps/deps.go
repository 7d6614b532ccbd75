//go:build tools

// Package deps pins the chosen libraries in go.mod and go.sum while the
// packages that use them are being written. Remove an import once real code
// uses it.
package deps

import (
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	_ "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	_ "github.com/fluxcd/cli-utils/pkg/kstatus/watcher"
	_ "github.com/fluxcd/helm-controller/api/v2"
	_ "github.com/fluxcd/kustomize-controller/api/v1"
	_ "github.com/fluxcd/pkg/gittestserver"
	_ "github.com/fluxcd/pkg/runtime/conditions"
	_ "github.com/fluxcd/pkg/runtime/patch"
	_ "github.com/fluxcd/pkg/ssa"
	_ "github.com/fluxcd/source-controller/api/v1"
	_ "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	_ "github.com/go-git/go-git/v5"
	_ "helm.sh/helm/v4/pkg/action"
	_ "oras.land/oras-go/v2"
	_ "oras.land/oras-go/v2/registry/remote"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/kustomize/api/krusty"
)
