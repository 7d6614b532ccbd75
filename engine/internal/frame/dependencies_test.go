package frame

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseDependsOn(t *testing.T) {
	got, err := ParseDependsOn(" HelmRelease/cozy-system/cilium, Kustomization/platform ,", "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	want := []Ref{{"HelmRelease", "cozy-system", "cilium"}, {"Kustomization", "tenant-a", "platform"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"HelmRelease", "Deployment/x", "HelmRelease/a/b/c", "HelmRelease//x"} {
		if _, err := ParseDependsOn(bad, "ns"); err == nil || !strings.Contains(err.Error(), DependsOnAnnotation) {
			t.Errorf("%q: want an error naming the annotation, got %v", bad, err)
		}
	}
}

func TestDepGraphCyclesAndDependents(t *testing.T) {
	a := Ref{"Kustomization", "ns", "a"}
	b := Ref{"HelmRelease", "ns", "b"}
	c := Ref{"Kustomization", "ns", "c"}
	d := Ref{"HelmRelease", "ns", "d"}
	self := Ref{"HelmRelease", "ns", "self"}
	g := NewGraph()
	g.Set(a, []Ref{b})
	g.Set(b, []Ref{c})
	g.Set(d, []Ref{a})
	if cyc := g.Cycle(a); cyc != nil {
		t.Fatalf("no cycle yet, got %v", cyc)
	}
	g.Set(c, []Ref{a}) // a → b → c → a, and d hangs off it
	want := []Ref{b, a, c}
	sortRefs(want)
	for _, r := range []Ref{a, b, c} {
		if got := g.Cycle(r); !reflect.DeepEqual(got, want) {
			t.Fatalf("Cycle(%v) = %v, want %v", r, got, want)
		}
	}
	if got := g.Cycle(d); got != nil {
		t.Fatalf("d depends on a cycle but is not on it: %v", got)
	}
	g.Set(self, []Ref{self})
	if got := g.Cycle(self); !reflect.DeepEqual(got, []Ref{self}) {
		t.Fatalf("self-loop: %v", got)
	}
	if got := g.Dependents(a); !reflect.DeepEqual(got, []Ref{d, c}) && !reflect.DeepEqual(got, []Ref{c, d}) {
		t.Fatalf("Dependents(a) = %v", got)
	}
	g.Set(c, nil) // the cycle is broken
	if got := g.Cycle(a); got != nil {
		t.Fatalf("cycle should be gone: %v", got)
	}
	if got := g.Dependents(a); !reflect.DeepEqual(got, []Ref{d}) {
		t.Fatalf("Dependents(a) after removal = %v", got)
	}
}
