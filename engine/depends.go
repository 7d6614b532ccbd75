package engine

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// DependsOnAnnotation lists dependencies across kinds, which Flux's
// spec.dependsOn (same kind only) cannot express. The value is a
// comma-separated list of Kind/namespace/name or Kind/name (the object's own
// namespace), for example:
//
//	cozy-aio.cozystack.io/depends-on: HelmRelease/cozy-system/cilium, Kustomization/platform
//
// Dependencies from spec.dependsOn and from the annotation form one graph.
const DependsOnAnnotation = "cozy-aio.cozystack.io/depends-on"

// Ref names an object of a kind the engine reconciles.
type Ref struct {
	Kind, Namespace, Name string
}

func (r Ref) String() string { return r.Kind + "/" + r.Namespace + "/" + r.Name }

var dependableKinds = map[string]bool{
	"Kustomization": true, "HelmRelease": true,
	"GitRepository": true, "OCIRepository": true, "ArtifactGenerator": true, "ExternalArtifact": true,
}

// ParseDependsOn parses the value of DependsOnAnnotation.
func ParseDependsOn(value, namespace string) ([]Ref, error) {
	var out []Ref
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, "/")
		var r Ref
		switch len(parts) {
		case 2:
			r = Ref{Kind: parts[0], Namespace: namespace, Name: parts[1]}
		case 3:
			r = Ref{Kind: parts[0], Namespace: parts[1], Name: parts[2]}
		default:
			return nil, fmt.Errorf("%s: %q is not Kind/name or Kind/namespace/name", DependsOnAnnotation, item)
		}
		if !dependableKinds[r.Kind] {
			return nil, fmt.Errorf("%s: kind %q in %q is not one the engine reconciles", DependsOnAnnotation, r.Kind, item)
		}
		if r.Name == "" || r.Namespace == "" {
			return nil, fmt.Errorf("%s: %q has an empty name or namespace", DependsOnAnnotation, item)
		}
		out = append(out, r)
	}
	return out, nil
}

// depGraph holds every object's dependencies, across kinds, so that a
// dependency becoming ready wakes its dependents (nobody polls) and cycles
// are found on every member.
type depGraph struct {
	mu   sync.RWMutex
	deps map[Ref][]Ref
	rev  map[Ref]map[Ref]bool
}

func newDepGraph() *depGraph {
	return &depGraph{deps: map[Ref][]Ref{}, rev: map[Ref]map[Ref]bool{}}
}

// Set records ref's dependencies, replacing earlier ones.
func (g *depGraph) Set(ref Ref, deps []Ref) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(ref)
	if len(deps) == 0 {
		return
	}
	g.deps[ref] = append([]Ref(nil), deps...)
	for _, d := range deps {
		if g.rev[d] == nil {
			g.rev[d] = map[Ref]bool{}
		}
		g.rev[d][ref] = true
	}
}

// Remove forgets ref's own dependencies.
func (g *depGraph) Remove(ref Ref) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(ref)
}

func (g *depGraph) removeLocked(ref Ref) {
	for _, d := range g.deps[ref] {
		delete(g.rev[d], ref)
		if len(g.rev[d]) == 0 {
			delete(g.rev, d)
		}
	}
	delete(g.deps, ref)
}

// Dependents returns the objects that depend on ref directly, sorted.
func (g *depGraph) Dependents(ref Ref) []Ref {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]Ref, 0, len(g.rev[ref]))
	for r := range g.rev[ref] {
		out = append(out, r)
	}
	sortRefs(out)
	return out
}

// Cycle returns the members of the dependency cycle through ref, sorted,
// or nil when ref is on no cycle.
func (g *depGraph) Cycle(ref Ref) []Ref {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return cycleThrough(ref, g.deps, g.rev)
}

// cycleThrough returns the strongly connected component of start when it
// is a cycle: the objects reachable from start that also reach it.
func cycleThrough(start Ref, deps map[Ref][]Ref, rev map[Ref]map[Ref]bool) []Ref {
	forward := reach(start, func(r Ref) []Ref { return deps[r] })
	if !forward[start] {
		return nil
	}
	backward := reach(start, func(r Ref) []Ref {
		out := make([]Ref, 0, len(rev[r]))
		for x := range rev[r] {
			out = append(out, x)
		}
		return out
	})
	var out []Ref
	for r := range forward {
		if backward[r] {
			out = append(out, r)
		}
	}
	sortRefs(out)
	return out
}

// reach returns the objects reachable from start in one or more steps.
func reach(start Ref, next func(Ref) []Ref) map[Ref]bool {
	seen := map[Ref]bool{}
	stack := append([]Ref(nil), next(start)...)
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[r] {
			continue
		}
		seen[r] = true
		stack = append(stack, next(r)...)
	}
	return seen
}

func sortRefs(rs []Ref) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].String() < rs[j].String() })
}
