package frame

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/plan"
)

// The annotations, condition and reasons of the upgrade hold
// (docs/upgrade-preview.md).
const (
	// HoldAnnotation sets a unit's hold policy: risky, always or never
	// (the engine's default when absent).
	HoldAnnotation = "cozy-aio.cozystack.io/upgrade-hold"
	// ApproveAnnotation approves the held plan whose hash it carries.
	ApproveAnnotation = "cozy-aio.cozystack.io/approve-plan"
	// HeldCondition is True while a unit's new desired state waits for
	// an approval; its message names each risk and the plan's hash.
	HeldCondition = "Held"
	// UpgradeHeldReason is the Held condition's reason.
	UpgradeHeldReason = "UpgradeHeld"
	// PlannedReason and RiskyPlanReason are the reasons of the Events of
	// a new plan: Normal without risks, Warning with.
	PlannedReason   = "UpgradePlanned"
	RiskyPlanReason = "UpgradeRisky"
	// InvalidHoldReason stalls a unit whose hold or approval annotation
	// cannot be read.
	InvalidHoldReason = "InvalidUpgradeHold"
)

// HoldPolicy is when a new desired state waits for an approval.
type HoldPolicy string

// Hold policies.
const (
	// HoldNever: every change runs at once (Flux's behaviour); its plan
	// is still made and reported.
	HoldNever HoldPolicy = "never"
	// HoldRisky: a change whose plan names a risk waits.
	HoldRisky HoldPolicy = "risky"
	// HoldAlways: every change waits.
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

// Holds tells whether the policy holds a plan ("" is never).
func (p HoldPolicy) Holds(pl *plan.Plan) bool {
	return p == HoldAlways || p == HoldRisky && pl.Risky()
}

var planHash = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Hold is a unit's hold policy and the plan hash it approves.
type Hold struct {
	Policy   HoldPolicy
	Approved string
}

// HoldOf reads obj's hold (def when it names no policy).
func HoldOf(obj client.Object, def HoldPolicy) (Hold, error) {
	a := obj.GetAnnotations()
	h := Hold{Policy: def}
	if h.Policy == "" {
		h.Policy = HoldNever
	}
	if v, ok := a[HoldAnnotation]; ok {
		p, err := ParseHoldPolicy(v)
		if err != nil {
			return Hold{}, fmt.Errorf("annotation %s: %w", HoldAnnotation, err)
		}
		h.Policy = p
	}
	if v, ok := a[ApproveAnnotation]; ok {
		if !planHash.MatchString(v) {
			return Hold{}, fmt.Errorf("annotation %s: %q is not a plan's hash (sha256:<64 hex digits>)", ApproveAnnotation, v)
		}
		h.Approved = v
	}
	return h, nil
}

// holds tells whether h holds p.
func (h Hold) holds(p *plan.Plan) bool { return h.Policy.Holds(p) && h.Approved != p.Hash }

// LastPlan is the plan of a unit's last new desired state.
type LastPlan struct {
	// Digest is the digest of the desired state it plans.
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

// Plans are the last plan of each unit, in memory, bounded.
type Plans struct {
	mu sync.Mutex
	m  map[Ref]LastPlan
}

// Get returns a unit's last plan.
func (ps *Plans) Get(r Ref) (LastPlan, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.m[r]
	return p, ok
}

func (ps *Plans) put(r Ref, p LastPlan) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.m == nil {
		ps.m = map[Ref]LastPlan{}
	}
	if _, ok := ps.m[r]; !ok && len(ps.m) >= maxPlans {
		oldest, at := Ref{}, time.Time{}
		first := true
		for k, v := range ps.m {
			if first || v.At.Before(at) {
				oldest, at, first = k, v.At, false
			}
		}
		delete(ps.m, oldest)
	}
	ps.m[r] = p
}

// Forget drops a unit's plan (the unit is gone).
func (ps *Plans) Forget(r Ref) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.m, r)
}

// StillHeld returns the unit's last plan when it is of digest, held, and
// h still holds it: the new desired state need not be planned again.
func (ps *Plans) StillHeld(r Ref, digest string, h Hold) (LastPlan, bool) {
	last, ok := ps.Get(r)
	if !ok || last.Digest != digest || !last.Held || !h.holds(last.Plan) {
		return LastPlan{}, false
	}
	return last, true
}

// Decide keeps p, the plan of a unit's desired state of digest, and tells
// whether h holds it and whether it is new (its hash differs from the
// unit's last plan's: it is to be reported).
func (ps *Plans) Decide(r Ref, digest string, p *plan.Plan, h Hold) (held, isNew bool) {
	last, seen := ps.Get(r)
	held = h.holds(p)
	ps.put(r, LastPlan{Digest: digest, Plan: p, Held: held, At: time.Now()})
	return held, !seen || last.Plan.Hash != p.Hash
}

// Quiet tells whether a new plan goes without an Event (its log line
// stays): a plan that only creates objects, without a risk, the first
// install of a release or Kustomization, which its Ready Event reports
// already (one Event less per install: measured in BENCHMARKS.md).
func Quiet(p *plan.Plan) bool {
	return len(p.Risks) == 0 && !slices.ContainsFunc(p.Objects, func(o plan.Object) bool { return o.Action != plan.Create })
}

// PlanEvent is the Event of a new plan: its type, reason and note.
func PlanEvent(p *plan.Plan) (typ, reason, note string) {
	typ, reason = corev1.EventTypeNormal, PlannedReason
	note = "plan " + p.Hash + ": " + p.Summary()
	if p.Risky() {
		typ, reason = corev1.EventTypeWarning, RiskyPlanReason
		note += "; " + RiskList(p)
	}
	return typ, reason, Clip(note, MaxNote)
}

// MaxNote is the longest Event note the API server takes (events.k8s.io/v1).
const MaxNote = 1024

// Clip shortens s to at most n bytes, cut on a rune boundary, saying so.
func Clip(s string, n int) string {
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

// RiskList names each risk of p but Hooks, in one line.
func RiskList(p *plan.Plan) string {
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

// HeldMessage is the Held condition's message.
func HeldMessage(pol HoldPolicy, p *plan.Plan) string {
	why := "every change waits for an approval (upgrade-hold: always)"
	if p.Risky() {
		why = "risks: " + RiskList(p)
	}
	return fmt.Sprintf("plan %s held (upgrade-hold: %s): %s; approve it with the annotation %s: %s (cozy-aio plan approve)",
		p.Hash, pol, why, ApproveAnnotation, p.Hash)
}

// MarkHeld sets the Held condition of obj for its held plan, and returns
// the outcome of a held reconcile: Ready keeps its value.
func MarkHeld(obj conditions.Setter, pol HoldPolicy, p *plan.Plan, requeue time.Duration) Outcome {
	msg := HeldMessage(pol, p)
	conditions.MarkTrue(obj, HeldCondition, UpgradeHeldReason, "%s", msg)
	return Outcome{KeepReady: true, Reason: UpgradeHeldReason, Message: msg, RequeueAfter: requeue}
}

// PlanOf is a unit's last plan, for listings.
type PlanOf struct {
	Ref Ref
	LastPlan
}

// All returns every unit's last plan, sorted by unit.
func (ps *Plans) All() []PlanOf {
	ps.mu.Lock()
	out := make([]PlanOf, 0, len(ps.m))
	for r, p := range ps.m {
		out = append(out, PlanOf{Ref: r, LastPlan: p})
	}
	ps.mu.Unlock()
	slices.SortFunc(out, func(a, b PlanOf) int {
		return cmp.Or(strings.Compare(a.Ref.Kind, b.Ref.Kind), strings.Compare(a.Ref.Namespace, b.Ref.Namespace),
			strings.Compare(a.Ref.Name, b.Ref.Name))
	})
	return out
}

// Each calls f with every unit's last plan, in no order, until f returns
// false: no copy, for counting. f must not call back into ps.
func (ps *Plans) Each(f func(PlanOf) bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for r, p := range ps.m {
		if !f(PlanOf{Ref: r, LastPlan: p}) {
			return
		}
	}
}
