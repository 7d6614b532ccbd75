package helmrelease

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/plan"
)

// LastPlan returns the plan of a release's last new desired state.
// Plans are the last plans of the units of this kind.
func (r *Reconciler) Plans() *frame.Plans { return &r.plans }

// preview is the Preview of one reconcile of obj: it plans each install
// and upgrade, reports a new plan (an Event and a log line), keeps it,
// and holds it by the release's policy until its hash is approved.
func (r *Reconciler) preview(obj *helmv2.HelmRelease, self frame.Ref, h frame.Hold) *helm.Preview {
	if r.opts.DisablePlans {
		return nil
	}
	held := func(p *plan.Plan) error {
		return fmt.Errorf("%w: %s", helm.ErrHeld, frame.HeldMessage(h.Policy, p))
	}
	return &helm.Preview{
		Held: func(digest string) error {
			if last, ok := r.plans.StillHeld(self, digest, h); ok {
				return held(last.Plan)
			}
			return nil
		},
		Decide: func(digest string, p *plan.Plan) error {
			hold, isNew := r.plans.Decide(self, digest, p, h)
			if isNew {
				r.reportPlan(obj, self, p)
			}
			if hold {
				return held(p)
			}
			return nil
		},
	}
}

// reportPlan records the Event and the log line of a new plan.
func (r *Reconciler) reportPlan(obj *helmv2.HelmRelease, self frame.Ref, p *plan.Plan) {
	if !frame.Quiet(p) {
		typ, reason, note := frame.PlanEvent(p)
		r.deps.Recorder.Eventf(obj, nil, typ, reason, "HelmPlan", "%s", note)
	}
	kv := []any{"HelmRelease", self.String(), "hash", p.Hash, "summary", p.Summary()}
	if p.Risky() {
		kv = append(kv, "risks", frame.RiskList(p))
	}
	r.opts.Logger.Info("upgrade planned", kv...)
}

// markHeld sets the Held condition by the outcome of a reconcile, and
// returns the outcome of a held one.
func (r *Reconciler) markHeld(obj *helmv2.HelmRelease, self frame.Ref, h frame.Hold, res helm.Outcome) (frame.Outcome, bool) {
	last, ok := r.plans.Get(self)
	if res.Next.Kind != helm.NextHeld || !ok {
		conditions.Delete(obj, frame.HeldCondition)
		return frame.Outcome{}, false
	}
	return frame.MarkHeld(obj, h.Policy, last.Plan, obj.GetRequeueAfter()), true
}

// PlanOptions are the release and options a reconcile of obj plans its
// install or upgrade with, for a chart at chartPath (of the source
// revision chartRevision, as the chart version carries it; "" for none):
// what `cozy-aio plan --helmrelease` plans, so that it prints the plan
// the engine makes. The release is planned as the caller's identity, not
// obj's service account.
func PlanOptions(ctx context.Context, c client.Client, obj *helmv2.HelmRelease, chartPath, chartRevision string) (helm.Release, helm.ReconcileOptions, error) {
	self := frame.Ref{Kind: helmv2.HelmReleaseKind, Namespace: obj.Namespace, Name: obj.Name}
	if err := Unsupported(obj); err != nil {
		return helm.Release{}, helm.ReconcileOptions{}, err
	}
	r := &Reconciler{deps: Deps{Client: c}}
	values, err := r.values(ctx, obj, self)
	if err != nil {
		return helm.Release{}, helm.ReconcileOptions{}, err
	}
	o := reconcileOptions(obj, chartPath, values)
	kind, _, _, _ := chartSourceOf(obj)
	if chartRevision != "" {
		o.Chart.Revision = digestRevision(kind, chartRevision)
	}
	rel := helm.Release{Name: ReleaseName(obj), Namespace: obj.GetReleaseNamespace(), StorageNamespace: obj.GetStorageNamespace()}
	return rel, o, nil
}
