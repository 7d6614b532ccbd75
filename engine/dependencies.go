package engine

import (
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/helmrelease"
)

// Reasons the engine adds to Flux's.
const (
	// DependencyCycleReason: the object is on a dependsOn cycle.
	DependencyCycleReason = frame.DependencyCycleReason
	// PhasePendingReason: the bootstrap gate holds the object, for example
	// until the nodes have a network.
	PhasePendingReason = frame.PhasePendingReason
)

// DependsOnAnnotation lists dependencies across kinds, which Flux's
// spec.dependsOn (same kind only) cannot express. The value is a
// comma-separated list of Kind/namespace/name or Kind/name (the object's own
// namespace), for example:
//
//	cozy-aio.cozystack.io/depends-on: HelmRelease/cozy-system/cilium, Kustomization/platform
//
// Dependencies from spec.dependsOn and from the annotation form one graph.
const DependsOnAnnotation = frame.DependsOnAnnotation

// Finalizer is set on objects whose deletion must clean up: a pruning
// Kustomization deletes its inventory, as in Flux.
const Finalizer = frame.Finalizer

// UnusedImageReason is the reason of the Warning Event about an image
// override (a Kustomization's spec.images) that matches no image of the
// rendered objects.
const UnusedImageReason = frame.UnusedImageReason

// UnmatchedPatchReason is the reason of the Warning Event about a patch
// (a Kustomization's spec.patches, a HelmRelease post-renderer's patches)
// whose target selects no object.
const UnmatchedPatchReason = frame.UnmatchedPatchReason

// QueuedReason is the Ready and Reconciling reason of a HelmRelease that
// waits in its shard's queue.
const QueuedReason = helmrelease.QueuedReason

// ChartMutateErrorReason is helm-controller's Ready reason for a chart
// whose version cannot take its source's digest.
const ChartMutateErrorReason = helmrelease.ChartMutateErrorReason
