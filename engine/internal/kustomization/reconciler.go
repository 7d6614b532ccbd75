package kustomization

import (
	"context"
	"fmt"
	"time"

	"github.com/cozystack/cozy-aio/source"
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/targets"
	"github.com/cozystack/cozy-aio/health"
)

// Options are the engine's options Kustomizations follow.
type Options struct {
	// Restricted refuses cross-namespace references.
	Restricted bool
	// AllowRemoteBases lets kustomize fetch remote bases.
	AllowRemoteBases bool
	// StrictSubstitutions fails a post-build substitution of an unset
	// variable without a default.
	StrictSubstitutions bool
	// UpgradeHold is the hold policy of a Kustomization without the
	// frame.HoldAnnotation. Default (""): never.
	UpgradeHold frame.HoldPolicy
	// DisablePlans plans no new desired state (and so holds none).
	DisablePlans bool
}

// Deps is what Kustomizations use of the engine.
type Deps struct {
	// Client reads and writes through the engine's cache.
	Client client.Client
	// Store keeps the artifacts the Kustomizations build.
	Store *source.Store
	// Finisher writes each reconcile's outcome; Admission admits a unit
	// over the Graph.
	Finisher  *frame.Finisher
	Admission *frame.Admission
	Graph     *frame.Graph
	// Recorder records the change-set Events.
	Recorder recorder.EventRecorder
	// Logger is the engine's logger.
	Logger func() logr.Logger
	// Targets are the clusters a Kustomization applies to.
	Targets *targets.Targets
	// SourceArtifact resolves the source's artifact.
	SourceArtifact func(ctx context.Context, self frame.Ref, kind, namespace, name string) (source.Artifact, frame.Outcome, bool)
	// ReadsConfigs records the ConfigMaps and Secrets a unit reads (nil
	// obj: none any more), whose changes reconcile it.
	ReadsConfigs func(self frame.Ref, obj client.Object)
	// Enqueue asks for a reconcile of a unit; RunContext is the context
	// health waits live in.
	Enqueue    func(frame.Ref)
	RunContext func() context.Context
	// Managers are the field managers Kustomizations apply with.
	Managers targets.FieldManagers
	// ServiceAccount returns the account a unit's objects are applied as.
	ServiceAccount func(name string) string
}

// Reconciler applies Kustomizations as kustomize-controller does: build,
// substitute, decrypt, server-side apply in stages, prune, wait.
type Reconciler struct {
	deps   Deps
	opts   Options
	waits  waits
	plans  frame.Plans
	passed passed
}

// New returns the Kustomization reconciler.
func New(d Deps, o Options) *Reconciler { return &Reconciler{deps: d, opts: o} }

// Kinds registers the reconciler of its kind.
func (r *Reconciler) Kinds() []frame.Registration {
	return []frame.Registration{{Kind: kustomizev1.KustomizationKind, Reconciler: r}}
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &kustomizev1.Kustomization{}
	if err := r.deps.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			gone := frame.Ref{Kind: kustomizev1.KustomizationKind, Namespace: req.Namespace, Name: req.Name}
			r.deps.ReadsConfigs(gone, nil)
			r.plans.Forget(gone)
			r.passed.forget(gone)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	self := frame.Ref{Kind: kustomizev1.KustomizationKind, Namespace: obj.Namespace, Name: obj.Name}
	if !obj.DeletionTimestamp.IsZero() {
		r.deps.ReadsConfigs(self, nil)
		return ctrl.Result{}, r.finalize(ctx, obj, self)
	}
	r.deps.ReadsConfigs(self, obj)
	if obj.Spec.Suspend {
		return ctrl.Result{}, nil
	}
	if err := r.ensureFinalizer(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}
	start := time.Now()
	orig := obj.DeepCopy()
	out := r.reconcile(ctx, obj, self)
	obj.Status.ObservedGeneration = obj.Generation
	obj.Status.LastHandledReconcileAt = frame.HandledRequest(obj)
	return r.deps.Finisher.Finish(ctx, kustomizev1.KustomizationKind, obj, orig, start, out,
		frame.Timing{Interval: obj.GetRequeueAfter(), Retry: obj.GetRetryInterval()})
}

func (r *Reconciler) reconcile(ctx context.Context, obj *kustomizev1.Kustomization, self frame.Ref) frame.Outcome {
	if err := Unsupported(obj); err != nil {
		return frame.Stalled(frame.UnsupportedFieldReason, err)
	}
	if err := frame.CheckExpressions(obj); err != nil {
		return frame.Stalled(meta.InvalidCELExpressionReason, fmt.Errorf("%s: %w", self, err))
	}
	deps, err := frame.Dependencies(kustomizev1.KustomizationKind, obj, obj.Spec.DependsOn)
	if err != nil {
		return frame.Stalled(meta.DependencyNotReadyReason, err)
	}
	src := frame.SourceRefOf(self, obj.Spec.SourceRef.Kind, obj.Spec.SourceRef.Namespace, obj.Spec.SourceRef.Name)
	if out, ok := r.deps.Admission.Admit(ctx, self, obj, deps, &src, frame.DependencyRequeue); !ok {
		return out
	}
	art, out, ok := r.deps.SourceArtifact(ctx, self, obj.Spec.SourceRef.Kind, obj.Spec.SourceRef.Namespace, obj.Spec.SourceRef.Name)
	if !ok {
		return out
	}
	attempted := obj.Status.LastAttemptedRevision
	obj.Status.LastAttemptedRevision = art.Revision
	key := waitKey{ref: self, generation: obj.Generation, revision: art.Revision}
	if out, pending := r.waits.outcome(key); pending {
		if out.Reason != "" {
			obj.Status.LastAppliedRevision = revisionIfReady(out, art.Revision, obj.Status.LastAppliedRevision)
		}
		return out
	}
	objs, out, ok := r.build(ctx, obj, self, art)
	if !ok {
		return out
	}
	target, out, ok := r.deps.Targets.ClusterOf(ctx, obj.Namespace, obj.Spec.KubeConfig, self)
	if !ok {
		return out
	}
	applier, err := target.Value.ApplierFor(r.deps.Managers, obj.Namespace, r.deps.ServiceAccount(obj.Spec.ServiceAccountName))
	if err != nil {
		return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, err))
	}
	owner := apply.Owner{LabelPrefix: "kustomize.toolkit.fluxcd.io", Name: obj.Name, Namespace: obj.Namespace}
	policy := apply.ImmutableFail
	if obj.Spec.Force {
		policy = apply.ImmutableRecreate
	}
	if out, ok := r.preview(ctx, obj, self, applier, objs, owner, policy, art.Revision); !ok {
		if out.KeepReady {
			obj.Status.LastAttemptedRevision = attempted // held: nothing was attempted
		}
		return out
	}
	cs, err := applier.Apply(ctx, objs, apply.ApplyOptions{Owner: owner, ImmutablePolicy: policy, WaitTimeout: obj.GetTimeout(),
		Ignore: ignoreRules(obj.Spec.Ignore)})
	if err != nil {
		return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, targets.RemoteError(target.Source, err)))
	}
	r.changeSetEvent(obj, kustomizev1.ActionApply, cs.Log(false))
	next := cs.Inventory()
	if obj.Spec.Prune && obj.Status.Inventory != nil {
		stale := cs.Stale(inventoryOf(obj.Status.Inventory))
		pruned, err := applier.Prune(ctx, stale, apply.PruneOptions{Owner: owner})
		r.changeSetEvent(obj, kustomizev1.ActionPrune, pruned.Log(true))
		if err != nil {
			obj.Status.Inventory = toFluxInventory(next)
			return frame.Failed(meta.PruneFailedReason, fmt.Errorf("%s: %w", self, targets.RemoteError(target.Source, err)))
		}
	}
	obj.Status.Inventory = toFluxInventory(next)
	checks := r.healthChecks(obj, next)
	if len(checks) == 0 {
		obj.Status.LastAppliedRevision = art.Revision
		return frame.Succeeded("Applied revision: %s", art.Revision)
	}
	if err := r.startWait(target.Value, key, obj.Spec.HealthCheckExprs, checks, obj.GetTimeout()); err != nil {
		return frame.Stalled(meta.InvalidCELExpressionReason, fmt.Errorf("%s: %w", self, err))
	}
	return frame.Waiting(meta.ProgressingReason, fmt.Sprintf("Applied revision %s; waiting for %d objects to become ready", art.Revision, len(checks)), 0)
}

// changeSetEvent records what an apply or a prune changed, as
// kustomize-controller's Apply and Prune events do: a Normal event with
// the reason Ready has while a reconcile is in progress (Progressing, which
// commit status providers skip), and one line per object. Nothing when
// nothing changed.
func (r *Reconciler) changeSetEvent(obj *kustomizev1.Kustomization, action kustomizev1.Action, log string) {
	if log != "" {
		r.deps.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, meta.ProgressingReason, string(action), "%s", log)
	}
}

func revisionIfReady(out frame.Outcome, rev, prev string) string {
	if out.Ready {
		return rev
	}
	return prev
}

func (r *Reconciler) ensureFinalizer(ctx context.Context, obj *kustomizev1.Kustomization) error {
	if !deletesOnFinalize(obj) || controllerutil.ContainsFinalizer(obj, frame.Finalizer) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopy())
	controllerutil.AddFinalizer(obj, frame.Finalizer)
	return r.deps.Client.Patch(ctx, obj, patch)
}

// finalize prunes a deleted Kustomization's inventory, then lets it go.
func (r *Reconciler) finalize(ctx context.Context, obj *kustomizev1.Kustomization, self frame.Ref) error {
	r.deps.Graph.Remove(self)
	r.waits.forget(self)
	if !controllerutil.ContainsFinalizer(obj, frame.Finalizer) {
		return nil
	}
	if deletesOnFinalize(obj) && !obj.Spec.Suspend && obj.Status.Inventory != nil {
		c, err := r.deps.Targets.Registry.Get(ctx, obj.Namespace, obj.Spec.KubeConfig)
		if targets.KubeConfigGone(obj.Spec.KubeConfig, err) {
			// Without its kubeconfig nothing can be pruned: the finalizer
			// goes, and the Event says what may be left behind.
			r.deps.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, meta.PruneFailedReason, "Finalize",
				"%s: skipped the garbage collection of %d objects: spec.kubeConfig %s is gone (%v); they may be left in the remote cluster",
				self, len(obj.Status.Inventory.Entries), targets.KubeConfigName(obj.Spec.KubeConfig), err)
			return r.removeFinalizer(ctx, obj)
		}
		if err != nil {
			return fmt.Errorf("%s: spec.kubeConfig: %w", self, err)
		}
		applier, err := c.Value.ApplierFor(r.deps.Managers, obj.Namespace, r.deps.ServiceAccount(obj.Spec.ServiceAccountName))
		if err != nil {
			return err
		}
		owner := apply.Owner{LabelPrefix: "kustomize.toolkit.fluxcd.io", Name: obj.Name, Namespace: obj.Namespace}
		opts := apply.PruneOptions{Owner: owner}
		if obj.GetDeletionPolicy() == kustomizev1.DeletionPolicyWaitForTermination {
			opts.WaitTimeout = obj.GetTimeout()
		}
		if _, err := applier.Prune(ctx, inventoryOf(obj.Status.Inventory).Entries, opts); err != nil {
			if opts.WaitTimeout == 0 {
				return fmt.Errorf("%s: pruning on deletion: %w", self, targets.RemoteError(c.Source, err))
			}
			// As Flux: a wait that times out is reported, and the
			// finalizer goes.
			r.deps.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, meta.PruneFailedReason, "Finalize", "%s: failed to wait for resources termination: %v", self, err)
		}
	}
	return r.removeFinalizer(ctx, obj)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, obj *kustomizev1.Kustomization) error {
	patch := client.MergeFrom(obj.DeepCopy())
	controllerutil.RemoveFinalizer(obj, frame.Finalizer)
	if err := r.deps.Client.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// healthChecks lists what to wait for: every applied object with
// spec.wait, else spec.healthChecks.
func (r *Reconciler) healthChecks(obj *kustomizev1.Kustomization, inv apply.Inventory) []health.ObjectRef {
	if obj.Spec.Wait {
		return inv.Entries
	}
	var out []health.ObjectRef
	for _, hc := range obj.Spec.HealthChecks {
		gv, _ := schema.ParseGroupVersion(hc.APIVersion)
		ns := hc.Namespace
		if ns == "" {
			ns = obj.Namespace
		}
		out = append(out, health.ObjectRef{Group: gv.Group, Version: gv.Version, Kind: hc.Kind, Namespace: ns, Name: hc.Name})
	}
	return out
}

// deletesOnFinalize reports whether deleting the Kustomization deletes
// its inventory: spec.deletionPolicy, where MirrorPrune (the default)
// follows spec.prune and Orphan never deletes.
func deletesOnFinalize(obj *kustomizev1.Kustomization) bool {
	switch obj.GetDeletionPolicy() {
	case kustomizev1.DeletionPolicyMirrorPrune:
		return obj.Spec.Prune
	case kustomizev1.DeletionPolicyDelete, kustomizev1.DeletionPolicyWaitForTermination:
		return true
	}
	return false
}

func Unsupported(obj *kustomizev1.Kustomization) error {
	return frame.Unsupported(kustomizev1.KustomizationKind,
		// Cloud KMS workload identity; the keys of the Secret are age.
		frame.FieldCheck{Path: "spec.decryption.serviceAccountName", Set: obj.Spec.Decryption != nil && obj.Spec.Decryption.ServiceAccountName != ""},
	)
}

// ignoreRules maps spec.ignore onto fluxcd/pkg/ssa's rules.
func ignoreRules(rules []kustomizev1.IgnoreRule) []jsondiff.IgnoreRule {
	var out []jsondiff.IgnoreRule
	for _, r := range rules {
		out = append(out, frame.IgnoreRule(r.Paths, r.Target))
	}
	return out
}
