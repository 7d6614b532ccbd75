package engine

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseDependsOn(t *testing.T) {
	got, err := parseDependsOn(" HelmRelease/cozy-system/cilium, Kustomization/platform ,", "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	want := []nodeRef{{"HelmRelease", "cozy-system", "cilium"}, {"Kustomization", "tenant-a", "platform"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"HelmRelease", "Deployment/x", "HelmRelease/a/b/c", "HelmRelease//x"} {
		if _, err := parseDependsOn(bad, "ns"); err == nil || !strings.Contains(err.Error(), DependsOnAnnotation) {
			t.Errorf("%q: want an error naming the annotation, got %v", bad, err)
		}
	}
}

func TestDepGraphCyclesAndDependents(t *testing.T) {
	a := nodeRef{"Kustomization", "ns", "a"}
	b := nodeRef{"HelmRelease", "ns", "b"}
	c := nodeRef{"Kustomization", "ns", "c"}
	d := nodeRef{"HelmRelease", "ns", "d"}
	self := nodeRef{"HelmRelease", "ns", "self"}
	g := newDepGraph()
	g.Set(a, []nodeRef{b})
	g.Set(b, []nodeRef{c})
	g.Set(d, []nodeRef{a})
	if cyc := g.Cycle(a); cyc != nil {
		t.Fatalf("no cycle yet, got %v", cyc)
	}
	g.Set(c, []nodeRef{a}) // a → b → c → a, and d hangs off it
	want := []nodeRef{b, a, c}
	sortRefs(want)
	for _, r := range []nodeRef{a, b, c} {
		if got := g.Cycle(r); !reflect.DeepEqual(got, want) {
			t.Fatalf("Cycle(%v) = %v, want %v", r, got, want)
		}
	}
	if got := g.Cycle(d); got != nil {
		t.Fatalf("d depends on a cycle but is not on it: %v", got)
	}
	g.Set(self, []nodeRef{self})
	if got := g.Cycle(self); !reflect.DeepEqual(got, []nodeRef{self}) {
		t.Fatalf("self-loop: %v", got)
	}
	if got := g.Dependents(a); !reflect.DeepEqual(got, []nodeRef{d, c}) && !reflect.DeepEqual(got, []nodeRef{c, d}) {
		t.Fatalf("Dependents(a) = %v", got)
	}
	g.Set(c, nil) // the cycle is broken
	if got := g.Cycle(a); got != nil {
		t.Fatalf("cycle should be gone: %v", got)
	}
	if got := g.Dependents(a); !reflect.DeepEqual(got, []nodeRef{d}) {
		t.Fatalf("Dependents(a) after removal = %v", got)
	}
}
