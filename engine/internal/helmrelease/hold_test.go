package helmrelease

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/plan"
)

func TestHoldOf(t *testing.T) {
	hash := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		annotations map[string]string
		def         HoldPolicy
		pol         HoldPolicy
		approved    string
		err         string
	}{
		{def: HoldNever, pol: HoldNever},
		{def: HoldRisky, pol: HoldRisky},
		{annotations: map[string]string{HoldAnnotation: "always"}, def: HoldNever, pol: HoldAlways},
		{annotations: map[string]string{HoldAnnotation: "never"}, def: HoldRisky, pol: HoldNever},
		{annotations: map[string]string{HoldAnnotation: "riksy"}, err: `"riksy" is not one of risky, always, never`},
		{annotations: map[string]string{HoldAnnotation: "risky", ApproveAnnotation: hash}, pol: HoldRisky, approved: hash},
		{annotations: map[string]string{ApproveAnnotation: "yes"}, err: `"yes" is not a plan's hash`},
	} {
		obj := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Annotations: c.annotations}}
		pol, approved, err := holdOf(obj, c.def)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.annotations, err, c.err)
			}
			continue
		}
		if err != nil || pol != c.pol || approved != c.approved {
			t.Errorf("%v: %q %q %v, want %q %q", c.annotations, pol, approved, err, c.pol, c.approved)
		}
	}
}

func TestHoldPolicies(t *testing.T) {
	risky := &plan.Plan{Risks: []plan.Risk{{Code: plan.DataLoss}}}
	hooks := &plan.Plan{Risks: []plan.Risk{{Code: plan.Hooks}}}
	for _, c := range []struct {
		pol   HoldPolicy
		p     *plan.Plan
		holds bool
	}{
		{HoldNever, risky, false}, {HoldRisky, risky, true}, {HoldRisky, hooks, false},
		{HoldAlways, hooks, true}, {"", risky, false},
	} {
		if got := c.pol.holds(c.p); got != c.holds {
			t.Errorf("%q holds %v: %v, want %v", c.pol, c.p.Risks, got, c.holds)
		}
	}
}

func TestClipFitsAnEventNote(t *testing.T) {
	long := strings.Repeat("é risk; ", 400)
	got := clip(long, maxNote)
	if len(got) > maxNote || !utf8.ValidString(got) || !strings.HasSuffix(got, "cozy-aio plan list all)") {
		t.Fatalf("clip: %d bytes, valid %v: …%s", len(got), utf8.ValidString(got), got[len(got)-60:])
	}
	if clip("short", maxNote) != "short" {
		t.Fatal("a short note changed")
	}
}

func TestPlansAreBounded(t *testing.T) {
	var ps plans
	for i := range maxPlans + 10 {
		ps.put(frameRef(i), LastPlan{Plan: &plan.Plan{}})
	}
	if len(ps.m) != maxPlans {
		t.Fatalf("%d plans kept, want %d", len(ps.m), maxPlans)
	}
}

func frameRef(i int) frame.Ref {
	return frame.Ref{Kind: helmv2.HelmReleaseKind, Namespace: "ns", Name: fmt.Sprint(i)}
}
