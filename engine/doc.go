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
//
// # Replicas
//
// Several engines can share one cluster (the static pod on each
// control-plane node): set Options.Replicas.Enabled and a distinct
// Options.HolderID on each. They coordinate only through
// coordination.k8s.io Leases:
//
//   - The leader, elected on the Lease ReplicaOptions.LeaderLease by the
//     manager's leader election, runs the source, ArtifactGenerator and
//     Kustomization reconcilers. Standbys keep the same informers synced,
//     so a takeover starts warm. A leader whose renewal fails stops writing
//     status at once (the Lease's local validity) and its manager exits,
//     as controller-runtime's do.
//   - Each replica holds its own Lease while it lives. Helm shard i runs
//     only on the holder of the shard's Lease; shard.Spread of the live
//     replicas says who should hold it. A replica hands a shard off once
//     its running Helm actions end, and at shutdown it hands off every
//     shard, so a rolling restart moves shards in about a second.
//   - A pending Helm revision is recovered only once its holder's replica
//     Lease has expired; release records are written with resourceVersion
//     preconditions and only while the shard's Lease is valid, so a
//     replica paused past its Lease cannot overwrite the new owner's work.
//
// New builds an engine with its own manager; Setup builds one on a manager
// the embedder owns, sharing its cache and its leader election.
package engine
