package helmrelease

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/plan"
)

// The annotations and condition of the upgrade hold (docs/upgrade-preview.md).
const (
	// HoldAnnotation sets a HelmRelease's hold policy: risky, always or
	// never (Options.UpgradeHold when absent).
	HoldAnnotation = "cozy-aio.cozystack.io/upgrade-hold"
	// ApproveAnnotation approves the held plan whose hash it carries.
	ApproveAnnotation = "cozy-aio.cozystack.io/approve-plan"
	// HeldCondition is True while an install or upgrade waits for an
	// approval; its message names each risk and the plan's hash.
	HeldCondition = "Held"
	// UpgradeHeldReason is the Held condition's reason.
	UpgradeHeldReason = "UpgradeHeld"
	// PlannedReason and RiskyPlanReason are the reasons of the Events of
	// a new plan: Normal without risks, Warning with.
	PlannedReason   = "UpgradePlanned"
	RiskyPlanReason = "UpgradeRisky"
	// InvalidHoldReason stalls a HelmRelease whose hold or approval
	// annotation cannot be read.
	InvalidHoldReason = "InvalidUpgradeHold"
)

// HoldPolicy is when an install or upgrade waits for an approval.
type HoldPolicy string

// Hold policies.
const (
	// HoldNever: every install and upgrade runs at once (Flux's
	// behaviour); its plan is still made and reported.
	HoldNever HoldPolicy = "never"
	// HoldRisky: an install or upgrade whose plan names a risk waits.
	HoldRisky HoldPolicy = "risky"
	// HoldAlways: every install and upgrade waits.
	HoldAlways HoldPolicy = "always"
)

// ParseHoldPolicy reads a hold policy; "" is never.
func ParseHoldPolicy(s string) (HoldPolicy, error) {
	switch p := HoldPolicy(s); p {
	case "":
		return HoldNever, nil
	case HoldNever, HoldRisky, HoldAlways:
		return p, nil
	}
	return "", fmt.Errorf("%q is not one of risky, always, never", s)
}

func (p HoldPolicy) holds(pl *plan.Plan) bool {
	// "" is never, as ParseHoldPolicy reads it.
	return p == HoldAlways || p == HoldRisky && pl.Risky()
}

var planHash = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// holdOf reads obj's hold policy (def when it names none) and the hash
// it approves ("" for none).
func holdOf(obj *helmv2.HelmRelease, def HoldPolicy) (HoldPolicy, string, error) {
	a := obj.GetAnnotations()
	pol := def
	if v, ok := a[HoldAnnotation]; ok {
		p, err := ParseHoldPolicy(v)
		if err != nil {
			return "", "", fmt.Errorf("annotation %s: %w", HoldAnnotation, err)
		}
		pol = p
	}
	approved, ok := a[ApproveAnnotation]
	if ok && !planHash.MatchString(approved) {
		return "", "", fmt.Errorf("annotation %s: %q is not a plan's hash (sha256:<64 hex digits>)", ApproveAnnotation, approved)
	}
	return pol, approved, nil
}

// LastPlan is the plan of a release's last new desired state.
type LastPlan struct {
	// Digest is the digest of the desired state it plans (the chart and
	// values).
	Digest string
	// Plan is the plan.
	Plan *plan.Plan
	// Held is true while the plan waits for an approval.
	Held bool
	// At is when the plan was made.
	At time.Time
}

// maxPlans bounds the plans kept: the oldest go first.
const maxPlans = 4096

// plans are the last plan of each release, in memory.
type plans struct {
	mu sync.Mutex
	m  map[frame.Ref]LastPlan
}

func (ps *plans) get(r frame.Ref) (LastPlan, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.m[r]
	return p, ok
}

func (ps *plans) put(r frame.Ref, p LastPlan) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.m == nil {
		ps.m = map[frame.Ref]LastPlan{}
	}
	if _, ok := ps.m[r]; !ok && len(ps.m) >= maxPlans {
		oldest, at := frame.Ref{}, time.Time{}
		for k, v := range ps.m {
			if at.IsZero() || v.At.Before(at) {
				oldest, at = k, v.At
			}
		}
		delete(ps.m, oldest)
	}
	ps.m[r] = p
}

func (ps *plans) forget(r frame.Ref) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.m, r)
}

// LastPlan returns the plan of a release's last new desired state.
func (r *Reconciler) LastPlan(ref frame.Ref) (LastPlan, bool) { return r.plans.get(ref) }

// preview is the Preview of one reconcile of obj: it plans each install
// and upgrade, reports a new plan (an Event and a log line), keeps it,
// and holds it by the release's policy until its hash is approved.
func (r *Reconciler) preview(obj *helmv2.HelmRelease, self frame.Ref, pol HoldPolicy, approved string) *helm.Preview {
	if r.opts.DisablePlans {
		return nil
	}
	held := func(p LastPlan) error {
		return fmt.Errorf("%w: %s", helm.ErrHeld, heldMessage(pol, p.Plan))
	}
	return &helm.Preview{
		Held: func(digest string) error {
			last, ok := r.plans.get(self)
			if !ok || last.Digest != digest || !last.Held || !pol.holds(last.Plan) || approved == last.Plan.Hash {
				return nil
			}
			return held(last)
		},
		Decide: func(digest string, p *plan.Plan) error {
			last, seen := r.plans.get(self)
			hold := pol.holds(p) && approved != p.Hash
			next := LastPlan{Digest: digest, Plan: p, Held: hold, At: time.Now()}
			r.plans.put(self, next)
			if !seen || last.Plan.Hash != p.Hash {
				r.reportPlan(obj, self, p)
			}
			if hold {
				return held(next)
			}
			return nil
		},
	}
}

// reportPlan records the Event and the log line of a new plan.
func (r *Reconciler) reportPlan(obj *helmv2.HelmRelease, self frame.Ref, p *plan.Plan) {
	typ, reason := corev1.EventTypeNormal, PlannedReason
	msg := "plan " + p.Hash + ": " + p.Summary()
	if p.Risky() {
		typ, reason = corev1.EventTypeWarning, RiskyPlanReason
		msg += "; " + riskList(p)
	}
	r.deps.Recorder.Eventf(obj, nil, typ, reason, "HelmPlan", "%s", clip(msg, maxNote))
	kv := []any{"HelmRelease", self.String(), "hash", p.Hash, "summary", p.Summary()}
	if p.Risky() {
		kv = append(kv, "risks", riskList(p))
	}
	r.opts.Logger.Info("upgrade planned", kv...)
}

// maxNote is the longest Event note the API server takes (events.k8s.io/v1).
const maxNote = 1024

// clip shortens s to at most n bytes, cut on a rune boundary, saying so.
func clip(s string, n int) string {
	const more = " … (the Held condition and cozy-aio plan list all)"
	if len(s) <= n {
		return s
	}
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// maxRisksShown bounds the risks a message lists.
const maxRisksShown = 10

// riskList names each risk of p but Hooks, in one line.
func riskList(p *plan.Plan) string {
	var parts []string
	n := 0
	for _, rk := range p.Risks {
		if rk.Code == plan.Hooks {
			continue
		}
		if n++; n <= maxRisksShown {
			parts = append(parts, string(rk.Code)+" "+rk.Object.String()+": "+rk.Message)
		}
	}
	if n > maxRisksShown {
		parts = append(parts, fmt.Sprintf("and %d more", n-maxRisksShown))
	}
	return strings.Join(parts, "; ")
}

// heldMessage is the Held condition's message.
func heldMessage(pol HoldPolicy, p *plan.Plan) string {
	why := "every upgrade waits for an approval (upgrade-hold: always)"
	if p.Risky() {
		why = "risks: " + riskList(p)
	}
	return fmt.Sprintf("plan %s held (upgrade-hold: %s): %s; approve it with the annotation %s: %s (cozy-aio plan approve)",
		p.Hash, pol, why, ApproveAnnotation, p.Hash)
}

// markHeld sets the Held condition by the outcome of a reconcile.
func (r *Reconciler) markHeld(obj *helmv2.HelmRelease, self frame.Ref, pol HoldPolicy, res helm.Outcome) bool {
	last, ok := r.plans.get(self)
	if res.Next.Kind != helm.NextHeld || !ok {
		conditions.Delete(obj, HeldCondition)
		return false
	}
	conditions.MarkTrue(obj, HeldCondition, UpgradeHeldReason, "%s", heldMessage(pol, last.Plan))
	return true
}

// PlanOptions are the release and options a reconcile of obj plans its
// install or upgrade with, for a chart at chartPath (of the source
// revision chartRevision, as the chart version carries it; "" for none):
// what `cozy-aio plan --chart --helmrelease` plans, so that it prints the
// plan the engine makes. The release is planned as the caller's identity,
// not obj's service account.
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
