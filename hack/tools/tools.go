//go:build tools

// Package tools pins the Flux API modules whose CRDs controller-gen renders.
package tools

import (
	_ "github.com/fluxcd/helm-controller/api/v2"
	_ "github.com/fluxcd/kustomize-controller/api/v1"
	_ "github.com/fluxcd/notification-controller/api/v1"
	_ "github.com/fluxcd/notification-controller/api/v1beta3"
	_ "github.com/fluxcd/source-controller/api/v1"
	_ "github.com/fluxcd/source-watcher/api/v2/v1beta1"
)
