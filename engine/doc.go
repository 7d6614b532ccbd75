// Package engine wires cozy-aio into one controller-runtime manager: one
// client, one informer cache and one metrics registry. It reconciles the Flux
// API kinds (GitRepository, OCIRepository, ArtifactGenerator, ExternalArtifact,
// Kustomization and HelmRelease) with Flux-compatible status conditions,
// events and metrics, orders work across kinds with dependsOn, and hands the
// business logic to the packages below it: source, apply, apply/helm, health
// and shard.
package engine
