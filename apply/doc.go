// Package apply builds manifests with kustomize, substitutes post-build
// variables, and server-side applies the result with force-conflicts in
// stages. It keeps an inventory of applied objects, prunes what leaves it,
// detects and corrects drift, and handles immutable-field changes with a
// per-kind policy. It does not decide readiness: that is package health.
//
// It takes plain options structs and never imports the Flux API types, so
// it can be used without any CRD.
//
// # Build and substitute
//
// Build runs krusty on a directory, generating a kustomization over every
// manifest when the directory has none (as Flux does). Remote bases are
// refused unless BuildOptions.AllowRemoteBases is set. BuildOptions.Substitute
// replaces post-build variables with Flux's own code (fluxcd/pkg/kustomize
// and fluxcd/pkg/envsubst): every bash operator, the $${var} escape, and the
// kustomize.toolkit.fluxcd.io/substitute: disabled opt-out; Strict turns a
// variable without a value into a *SubstituteError naming the object.
//
//	objs, err := apply.Build(ctx, dir, apply.BuildOptions{
//		Substitute: &apply.SubstituteOptions{Vars: vars, Strict: true},
//	})
//
// # Apply
//
// An Applier wraps one identity (optionally an impersonated ServiceAccount,
// Options.Impersonate) and one field manager. Apply writes in three stages
// (CRDs and Namespaces, then waits for the CRDs to be established; class-like
// objects; everything else), concurrently inside a stage, and returns a
// ChangeSet with one Change per object: created, configured, unchanged,
// deleted or skipped.
//
//	a, err := apply.New(cfg, apply.Options{FieldManager: "cozy-aio", Cache: cache})
//	cs, err := a.Apply(ctx, objs, apply.ApplyOptions{Owner: owner})
//
// Flux's per-object annotations are honoured with kustomize-controller's
// meanings: SSAAnnotation IfNotPresent (never written once it exists) and
// Ignore, ReconcileAnnotation disabled, ForceAnnotation Enabled. A skipped
// object leaves ChangeSet.Inventory, and ChangeSet.Stale keeps it from
// being pruned. ApplyOptions.Ignore keeps the live values of JSON pointers
// (Flux's spec.ignore).
//
// Errors name the object as Kind/namespace/name. A kind the API server does
// not serve is an *UnknownKindError ("its CustomResourceDefinition is
// missing"); an RBAC denial keeps the API server's Forbidden error
// (apierrors.IsForbidden) and names the impersonated account.
//
// # Immutable fields
//
// When the API server rejects an update because it changes an immutable
// field, the policy decides: ImmutableFail (the default) returns an
// *ImmutableError naming the object and the field; ImmutableRecreate
// deletes and re-creates the object; ImmutableOrphanRecreate deletes it
// with orphan propagation (a StatefulSet's Pods and PVCs survive and the
// new object takes them over) and re-creates it. The policy comes from, in
// order: the object's annotation apply.cozystack.io/immutable-policy
// (Flux's kustomize.toolkit.fluxcd.io/force: enabled means Recreate),
// ApplyOptions.KindPolicies, ApplyOptions.ImmutablePolicy.
//
// # Inventory and prune
//
// ChangeSet.Inventory is the set of applied objects (group, version, kind,
// namespace, name, as health.ObjectRef: the same reference a health.Waiter
// waits for; its ID is Flux's inventory ID). Inventory.Stale
// gives what to prune, and Prune deletes it with a propagation policy,
// last the CRDs and Namespaces. Prune skips objects annotated
// kustomize.toolkit.fluxcd.io/prune: disabled, and, when PruneOptions.Owner
// is set, every object that does not carry that owner's labels
// (<prefix>/name and <prefix>/namespace, with Flux's prefix
// kustomize.toolkit.fluxcd.io by default, or Owner.Labels as they are;
// Apply sets them from ApplyOptions.Owner): an object another inventory
// owns is never pruned. An Inventory marshals to JSON in the layout of a
// Kustomization's status.inventory, for an owner that keeps it elsewhere.
//
// # Drift
//
// Diff compares the desired objects with the live ones by a server-side
// dry-run apply and returns, per drifted object, the fields that differ.
// Apply corrects them: force-conflicts takes the fields back.
//
// # Skipping writes that change nothing
//
// With a started Cache, Apply remembers a hash of what it last applied per
// object and the resourceVersion the API server answered, and watches the
// live objects' metadata. An object whose hash and resourceVersion are both
// unchanged is not sent at all; anything else is, so an edit by someone
// else is still corrected. A re-apply of 5,000 unchanged objects then costs
// no request (see docs/benchmarks/apply.md).
package apply
