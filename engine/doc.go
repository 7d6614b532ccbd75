// Package engine wires cozy-aio into one controller-runtime manager: one
// client, one informer cache and one metrics registry. It reconciles the
// Flux kinds (GitRepository, OCIRepository, ArtifactGenerator with its
// ExternalArtifacts, Kustomization and HelmRelease) with Flux-compatible
// status conditions, events and metrics, orders work across kinds with
// dependsOn, and hands the business logic to the packages below it:
// source, apply, apply/helm, health and shard.
//
// Embedding it takes three lines:
//
//	e, err := engine.New(restConfig, engine.Options{DataDir: "/var/lib/cozy-aio", InstallCRDs: true})
//	if err != nil { … }
//	err = e.Start(ctx) // blocks until ctx ends
//
// How the engine behaves, in short:
//
//   - Sources are fetched into the artifact store; units read artifacts
//     from the store directly, and the loopback HTTP server serves the URLs
//     written in status for outside consumers.
//   - Every reconcile ends with one status patch that carries the
//     conditions and the artifact, inventory or history together.
//   - A unit that waits (for a dependency, a source, the bootstrap gate or a
//     health check) holds no worker: it is woken through the shared cache
//     when what it waits for changes.
//   - HelmReleases go to the shard of their tenant (the namespace, or
//     Options.TenantLabel), where Helm work is queued fairly across tenants.
//   - A spec field the engine does not honour yet stalls the object with
//     reason UnsupportedField; docs/support.md lists the fields per kind.
package engine
