package kustomization

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/plan"
)

// LastPlan returns the plan of a Kustomization's last new desired state.
// Plans are the last plans of the units of this kind.
func (r *Reconciler) Plans() *frame.Plans { return &r.plans }

// desiredDigest is the digest of the objects a Kustomization built (and
// of its revision): the desired state a plan is of.
func desiredDigest(objs []*unstructured.Unstructured, revision string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", revision)
	enc := json.NewEncoder(h)
	for _, u := range objs {
		if err := enc.Encode(u.Object); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// preview plans a Kustomization's new desired state before it is
// applied, reports a new plan and holds it by the unit's policy: it
// returns the outcome of a held reconcile, or ok to apply. It plans only
// when the built objects or the revision changed since the last plan (or
// a held plan's approval may let it through): a periodic reconcile of the
// same state costs a digest of the objects.
func (r *Reconciler) preview(ctx context.Context, obj *kustomizev1.Kustomization, self frame.Ref, applier *apply.Applier,
	objs []*unstructured.Unstructured, owner apply.Owner, policy apply.ImmutablePolicy, revision string) (frame.Outcome, bool) {
	if r.opts.DisablePlans {
		return frame.Outcome{}, true
	}
	hold, err := frame.HoldOf(obj, r.opts.UpgradeHold)
	if err != nil {
		return frame.Stalled(frame.InvalidHoldReason, fmt.Errorf("%s: %w", self, err)), false
	}
	digest, err := desiredDigest(objs, revision)
	if err != nil {
		return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: %w", self, err)), false
	}
	if last, held := r.plans.StillHeld(self, digest, hold); held {
		return frame.MarkHeld(obj, hold.Policy, last.Plan, obj.GetRequeueAfter()), false
	}
	if r.passed.is(self, digest) || r.passed.fromStatus(obj, self, digest, revision) {
		conditions.Delete(obj, frame.HeldCondition)
		return frame.Outcome{}, true // planned and let through already, or applied before this process
	}
	p, err := planOf(ctx, applier, obj, objs, owner, policy, revision, r.deps.Managers.Name)
	if err != nil {
		// Reading the cluster failed: the apply, which reads it too,
		// would have failed alike.
		return frame.Failed(meta.ReconciliationFailedReason, fmt.Errorf("%s: planning: %w", self, err)), false
	}
	held, isNew := r.plans.Decide(self, digest, p, hold)
	if isNew {
		if !frame.Quiet(p) {
			typ, reason, note := frame.PlanEvent(p)
			r.deps.Recorder.Eventf(obj, nil, typ, reason, "Plan", "%s", note)
		}
		kv := []any{"Kustomization", self.String(), "hash", p.Hash, "summary", p.Summary()}
		if p.Risky() {
			kv = append(kv, "risks", frame.RiskList(p))
		}
		r.deps.Logger().Info("change planned", kv...)
	}
	if held {
		return frame.MarkHeld(obj, hold.Policy, p, obj.GetRequeueAfter()), false
	}
	r.passed.set(self, digest)
	conditions.Delete(obj, frame.HeldCondition)
	return frame.Outcome{}, true
}

// passed are the desired states (digests) each Kustomization last let
// through to its apply: a reconcile of the same state plans nothing.
type passed struct {
	mu sync.Mutex
	m  map[frame.Ref]string
}

func (p *passed) is(r frame.Ref, digest string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[r] == digest
}

func (p *passed) set(r frame.Ref, digest string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[frame.Ref]string{}
	}
	p.m[r] = digest
}

func (p *passed) forget(r frame.Ref) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, r)
}

// fromStatus lets through, once per process, the state a Kustomization's
// status says is applied already (its revision at its generation, Ready):
// a restart plans nothing anew, and reports no plan of what runs already.
func (p *passed) fromStatus(obj *kustomizev1.Kustomization, r frame.Ref, digest, revision string) bool {
	p.mu.Lock()
	_, known := p.m[r]
	p.mu.Unlock()
	if known || obj.Status.LastAppliedRevision != revision || obj.Status.ObservedGeneration != obj.Generation ||
		!conditions.IsReady(obj) || conditions.Has(obj, frame.HeldCondition) {
		return false
	}
	p.set(r, digest)
	return true
}

// planOf plans applying objs as the Kustomization's owner: each object is
// read from the cluster (one GET) and compared on the fields it sets, as
// server-side apply changes them; the inventory's objects the new state
// drops are deletions (or orphans without spec.prune, or with the prune
// annotation on the live object), read to know what they hold.
func planOf(ctx context.Context, a *apply.Applier, obj *kustomizev1.Kustomization, objs []*unstructured.Unstructured,
	owner apply.Owner, policy apply.ImmutablePolicy, revision, fieldManager string) (*plan.Plan, error) {
	c, mapper := a.Client(), a.RESTMapper()
	labels := map[string]string{owner.LabelPrefix + "/name": owner.Name, owner.LabelPrefix + "/namespace": owner.Namespace}
	live := map[plan.Ref]*unstructured.Unstructured{}
	read := func(u *unstructured.Unstructured) error {
		gvk := u.GroupVersionKind()
		if m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil && m.Scope.Name() != apimeta.RESTScopeNameNamespace {
			u.SetNamespace("")
		} else if apimeta.IsNoMatchError(err) {
			return nil // a kind the same apply defines: nothing of it exists yet
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(gvk)
		err := c.Get(ctx, client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}, got)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("reading %s: %w", plan.RefOf(u), err)
		}
		live[plan.RefOf(u)] = got
		return nil
	}
	in := plan.Input{Owner: plan.Owner{Inventory: obj.Namespace + "/" + obj.Name, FieldManager: fieldManager}, Revision: revision}
	for _, b := range objs {
		// A copy through JSON: a built object may hold Go ints (kustomize's
		// output), which DeepCopy refuses and which would never equal the
		// server's int64s.
		o, err := jsonCopy(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", plan.RefOf(b), err)
		}
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		o.SetLabels(l)
		if err := read(o); err != nil {
			return nil, err
		}
		in.Desired = append(in.Desired, o)
	}
	desired := map[plan.Ref]bool{}
	for _, o := range in.Desired {
		desired[plan.RefOf(o)] = true
	}
	if obj.Status.Inventory != nil {
		for _, e := range inventoryOf(obj.Status.Inventory).Entries {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind})
			u.SetNamespace(e.Namespace)
			u.SetName(e.Name)
			r := plan.RefOf(u)
			if desired[r] {
				continue
			}
			if err := read(u); err != nil {
				return nil, err
			}
			if l := live[r]; l != nil {
				u = l
			} else {
				continue // gone already: nothing to delete
			}
			in.Current = append(in.Current, u)
		}
	}
	in.Live = func(r plan.Ref) *unstructured.Unstructured { return live[r] }
	in.Kept = func(u *unstructured.Unstructured) bool {
		return !obj.Spec.Prune || u.GetAnnotations()[apply.PruneAnnotation] == "disabled"
	}
	in.ImmutablePolicy = func(*unstructured.Unstructured) string { return string(policy) }
	return plan.Compute(in)
}

// jsonCopy copies u through its JSON form, as the API server would read
// it: numbers become int64 or float64.
func jsonCopy(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return out, nil
}
