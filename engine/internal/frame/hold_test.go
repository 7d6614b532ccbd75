package frame

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/plan"
)

func TestHoldOf(t *testing.T) {
	hash := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		annotations map[string]string
		def         HoldPolicy
		want        Hold
		err         string
	}{
		{def: "", want: Hold{Policy: HoldNever}},
		{def: HoldRisky, want: Hold{Policy: HoldRisky}},
		{annotations: map[string]string{HoldAnnotation: "always"}, def: HoldNever, want: Hold{Policy: HoldAlways}},
		{annotations: map[string]string{HoldAnnotation: "never"}, def: HoldRisky, want: Hold{Policy: HoldNever}},
		{annotations: map[string]string{HoldAnnotation: "riksy"}, err: `"riksy" is not one of risky, always, never`},
		{annotations: map[string]string{HoldAnnotation: "risky", ApproveAnnotation: hash}, want: Hold{Policy: HoldRisky, Approved: hash}},
		{annotations: map[string]string{ApproveAnnotation: "yes"}, err: `"yes" is not a plan's hash`},
	} {
		obj := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Annotations: c.annotations}}
		got, err := HoldOf(obj, c.def)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.annotations, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: %+v %v, want %+v", c.annotations, got, err, c.want)
		}
	}
}

func TestHoldPolicies(t *testing.T) {
	risky := &plan.Plan{Risks: []plan.Risk{{Code: plan.DataLoss}}, Hash: "h1"}
	hooks := &plan.Plan{Risks: []plan.Risk{{Code: plan.Hooks}}, Hash: "h2"}
	for _, c := range []struct {
		h     Hold
		p     *plan.Plan
		holds bool
	}{
		{Hold{Policy: HoldNever}, risky, false}, {Hold{Policy: HoldRisky}, risky, true}, {Hold{Policy: HoldRisky}, hooks, false},
		{Hold{Policy: HoldAlways}, hooks, true}, {Hold{Policy: ""}, risky, false},
		{Hold{Policy: HoldRisky, Approved: "h1"}, risky, false}, {Hold{Policy: HoldRisky, Approved: "h2"}, risky, true},
	} {
		if got := c.h.holds(c.p); got != c.holds {
			t.Errorf("%+v holds %v: %v, want %v", c.h, c.p.Risks, got, c.holds)
		}
	}
}

// A held plan is held again without a new plan, until it is approved or
// the desired state changes; a new hash is reported once.
func TestPlansDecide(t *testing.T) {
	var ps Plans
	ref := Ref{Kind: "HelmRelease", Namespace: "ns", Name: "a"}
	risky := &plan.Plan{Risks: []plan.Risk{{Code: plan.DataLoss}}, Hash: "h1"}
	h := Hold{Policy: HoldRisky}
	if held, isNew := ps.Decide(ref, "d1", risky, h); !held || !isNew {
		t.Fatalf("first plan: held %v new %v", held, isNew)
	}
	if _, ok := ps.StillHeld(ref, "d1", h); !ok {
		t.Fatal("the same state is not held still")
	}
	if _, ok := ps.StillHeld(ref, "d2", h); ok {
		t.Fatal("a new state is held without a plan")
	}
	if _, ok := ps.StillHeld(ref, "d1", Hold{Policy: HoldRisky, Approved: "h1"}); ok {
		t.Fatal("an approved plan is held still")
	}
	if _, isNew := ps.Decide(ref, "d1", risky, h); isNew {
		t.Fatal("the same plan reported twice")
	}
}

func TestClipFitsAnEventNote(t *testing.T) {
	long := strings.Repeat("é risk; ", 400)
	got := Clip(long, MaxNote)
	if len(got) > MaxNote || !utf8.ValidString(got) || !strings.HasSuffix(got, "cozy-aio plan list all)") {
		t.Fatalf("clip: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if Clip("short", MaxNote) != "short" {
		t.Fatal("a short note changed")
	}
}

func TestPlansAreBounded(t *testing.T) {
	var ps Plans
	for i := range maxPlans + 10 {
		ps.put(Ref{Kind: "HelmRelease", Namespace: "ns", Name: fmt.Sprint(i)}, LastPlan{Plan: &plan.Plan{}})
	}
	if len(ps.m) != maxPlans {
		t.Fatalf("%d plans kept, want %d", len(ps.m), maxPlans)
	}
}
