// Package helm runs Helm v4 releases in-process: install, upgrade,
// rollback, uninstall and test, with server-side apply (force-conflicts),
// kstatus waits through Helm's event-driven watcher, per-call timeouts,
// remediation as plain state, and recovery of releases left pending by a
// dead process. It shares the process's rest.Config: no kubeconfig file and
// no helm binary.
//
// # Usage
//
//	m, err := helm.New(restConfig, helm.Options{Holder: helm.Holder{ID: podName}})
//	rel := helm.Release{Name: "redis", Namespace: "tenant-a", ServiceAccount: "tenant-a"}
//	out, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{
//		Spec: helm.Spec{
//			Chart:   helm.Chart{Ref: "oci://registry.example/charts/redis", Version: "1.2.3"},
//			Values:  []map[string]any{valuesFromConfigMap, inlineValues}, // later layers win
//			Timeout: 5 * time.Minute,
//		},
//		Upgrade: helm.Remediation{Retries: 2}, // then roll back and stall
//		Drift:   helm.DriftCorrect,
//	}, persistedState)
//	// Persist out.State (in HelmRelease status); requeue per out.Next.
//
// Reconcile is the engine's entry point: one call recovers, installs or
// upgrades, remediates a failure and corrects drift, and returns what it
// did (Outcome.Steps), the remediation State to persist and what to do
// next. The verbs Install, Upgrade, Rollback, Uninstall, Test and Drift do
// one thing each.
//
// # Charts and values
//
// A Chart is a .tgz path (an artifact of the source store) or an OCI
// reference pulled by source/oci, the process's one OCI client, with the
// credentials, plain HTTP, TLS and proxy of Chart.Registry; the reference
// is resolved on every call and a chart is pulled once per manifest
// digest. Values are layers deep-merged by MergeValues, later
// layers winning, and Helm merges them over the chart's defaults. A digest
// of the chart archive and the merged values is recorded on each revision
// (LabelDigest): a deployed revision with the desired digest is up to date
// and is not upgraded again. A release last written by another tool (Flux's
// helm-controller, the helm CLI) has no digest, so the first Reconcile
// upgrades it once, which adopts it, unless ReconcileOptions.Adopt shows
// helm-controller would leave it alone.
//
// The way back works the same: with Chart.Revision the chart is installed
// as helm-controller installs it (ChartVersionWithDigest), and
// Outcome.Records are the records each action wrote, as stored, from which
// the caller keeps helm-controller's snapshots (SnapshotOf); the digest
// label does not depend on the version, so a revision installed before
// stays up to date.
//
// # Release storage
//
// Releases are stored by Helm's Secret driver in Release.StorageNamespace
// (default: the release namespace), keeping DefaultMaxHistory revisions.
// With Release.ServiceAccount every request, storage included, impersonates
// that ServiceAccount. A record is inflated up to
// Options.MaxReleaseRecordBytes and no further: a larger one (anyone who
// can write a Secret there can write one) fails every action on its
// release with a *RecordTooLargeError and stops no other release.
//
// # API requests
//
// An action makes only the API requests it needs. Measured on 1,000 small
// releases, Helm's defaults cost 23 requests per release: six lists of the
// release's Secrets, discovery (/api, /apis and /version, twice) because
// every action invalidates the discovery cache, and a watch per kind to
// wait for objects that are ready the moment they exist. Each saving keeps
// Helm's semantics: the releases of one identity share a discovery cache
// that an action invalidates at most once per few seconds, an action reads
// the release's revisions once and answers Helm's repeated history queries
// from memory, and a wait skips the objects kstatus reports Current as
// soon as they exist and watches the others with package health's Waiter.
//
// # Concurrency
//
// A Manager serves any number of goroutines. There is no process-wide lock:
// actions on different releases run in parallel, and each release has its
// own lock (keyed by storageNamespace/name) so that one release never runs
// two actions at once. The lock is released when Helm returns, also on
// failure, panic (recovered, ErrPanic) or timeout. When ctx ends first the
// call returns at once and the action finishes in the background (its
// waits follow ctx, so it does so promptly) before the lock is released.
//
// # Crash recovery: how a dead holder is recognised
//
// Helm marks a revision pending-install, pending-upgrade or
// pending-rollback while it acts and refuses to act on a pending release.
// A process that dies mid-action leaves the release pending forever ("another
// operation is in progress"). To tell a leftover from an action in flight,
// every revision this package writes carries its writer (Options.Holder) in
// the Secret's labels: LabelHolder (the caller-chosen process ID, such as
// the Pod name), LabelHolderStart (the process start time) and, with
// Options.Claim, LabelHolderClaim (what gave it the right to write). Before each
// action, under the release's lock, a pending latest revision is judged by
// HolderDead:
//
//   - No action of this process is in flight on the release, because we
//     hold its in-process lock. So a revision recorded by this process's ID
//     with this or an earlier start time is a leftover of this process or of
//     an earlier incarnation of it (the process restarted).
//   - A revision without a holder was written by another tool (the helm
//     CLI, Flux's helm-controller) that this engine replaces: a leftover.
//   - A revision of another ID is a leftover unless Options.HolderAlive says
//     that process is alive. By default every other holder counts as dead,
//     which is right when a single active engine owns the releases (leader
//     election and sharding guarantee that).
//   - A revision of this ID with a later start time belongs to a newer
//     incarnation: this process is the stale one and returns *HeldError.
//
// A leftover is marked failed (ActionRecover) and remediated: rolled back
// to the newest deployed or superseded revision, or uninstalled when there
// is none. Then the action proceeds. Another tool's leftover is only
// marked failed, with helm-controller's description ("Release unlocked
// from stale 'pending-install' state"), as helm-controller unlocks a
// release: the action then proceeds from the failed revision (an upgrade
// when a deployed revision remains), so that a release Flux left pending
// is taken over as Flux itself would take it up again. No lock timeout and no person is
// involved. A release with no deployed revision at all ("has no deployed
// releases") is installed again over its failed history.
//
// # Replicas: HolderAlive, Fence and resourceVersion preconditions
//
// Several processes (replicas) may share a cluster, each acting on the
// releases of the shards whose Lease it holds. Ownership moves: a replica
// paused past its Lease (SIGSTOP, a long GC, a frozen VM) is replaced by
// another and may then resume in the middle of an action. Three parts keep
// the two from corrupting a release's records:
//
//   - The new owner recovers: Options.HolderAlive says the old owner's
//     holder is dead (its Lease expired), so HolderDead lets the new owner
//     mark the old owner's pending revision failed and remediate it, as
//     after a crash. A holder that lives on but has lost the right its
//     action wrote under counts as dead too: Options.Claim records that
//     right on every revision (LabelHolderClaim; the engine records the
//     shard and the term of its Lease), and HolderAlive receives it. The
//     engine cancels an action whose shard it gives up or loses, and its
//     fence refuses the action's writes from then on, so such a revision
//     would otherwise stay pending for as long as its holder lives.
//   - The old owner checks before it writes: Options.Fence is called with
//     the action's ctx right before every create, update or delete of a
//     release Secret, and the engine answers there whether this replica
//     still holds the shard's Lease (a local, time-based check). A refusal
//     fails the action with an error wrapping the Fence's.
//   - The API server decides what the check cannot: a pause between the
//     Fence and the write escapes the Fence. So every update and delete of
//     a release Secret carries, as a precondition, the resourceVersion
//     this action last read or wrote of it (Helm reads a release's history
//     before writing it; a revision never read is read first). When the new
//     owner has written the record since, the write fails with
//     ErrRecordConflict, naming the release and revision. A create of a
//     revision that appeared since fails the same way.
//
// After a refused write the action writes no further record of the
// release: Helm's failure path, which marks the revision failed, and its
// superseding of the previous revision are refused too (Helm only logs
// those errors; the action's error reports the refusal), Reconcile neither
// counts the failure nor remediates it, and the release's objects are not
// deleted (Helm's uninstall and CleanupOnFail would go on deleting). The
// records stay as the new owner wrote them. The resourceVersions are
// remembered for one action (one locked call on one release), so the
// preconditions cost no request.
//
// # Remediation
//
// Remediation (per install and per upgrade) follows Flux's semantics:
// RemediateOnFailure retries Retries times, remediating after each failure
// (install: uninstall; upgrade: rollback, or uninstall), remediates the last
// failure when RemediateLastFailure says so, then stalls until the chart
// or values change; RetryOnFailure keeps the failed release and retries
// every RetryInterval. The decisions are pure functions, Admit and
// AfterFailure, over State, which the caller persists.
//
// # Tests
//
// With ReconcileOptions.Test, Reconcile runs the chart's test hooks with
// Helm's ReleaseTesting after a successful install or upgrade, and on an
// up-to-date deployed revision whose selected hooks have not run. Helm
// waits for each test Pod's phase (Succeeded or Failed) in weight order;
// the runs are in Result.Tests. A failed test (a *TestError naming the
// hooks) is a failure of the action that made the revision, counted and
// remedied by its Remediation, unless TestOptions.IgnoreFailures (or the
// action's Remediation.IgnoreTestFailures) says to ignore it.
//
// # Errors
//
// Every error is an *Error naming the action, the release
// (storageNamespace/name) and the cause: a template that does not render
// (Helm names the template file, line and column), values that break the
// chart's schema, a missing chart or version (ErrChartNotFound), a failing
// hook, a wait that timed out.
package helm
