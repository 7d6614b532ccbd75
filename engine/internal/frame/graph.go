package frame

import (
	"sort"
	"sync"
)

// nodeRef names an object of a kind the engine reconciles: a node of the
// dependsOn graph, and the key of the engine's waits, timers and
// materialisations for it. The kinds are the engine's own, so a kind alone,
// without group and version, names one.
type Ref struct {
	Kind, Namespace, Name string
}

func (r Ref) String() string { return r.Kind + "/" + r.Namespace + "/" + r.Name }

// depGraph holds every object's dependencies, across kinds, so that a
// dependency becoming ready wakes its dependents (nobody polls) and cycles
// are found on every member.
type Graph struct {
	mu   sync.RWMutex
	deps map[Ref][]Ref
	rev  map[Ref]map[Ref]bool
}

func NewGraph() *Graph {
	return &Graph{deps: map[Ref][]Ref{}, rev: map[Ref]map[Ref]bool{}}
}

// Set records ref's dependencies, replacing earlier ones.
func (g *Graph) Set(ref Ref, deps []Ref) {
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
func (g *Graph) Remove(ref Ref) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(ref)
}

func (g *Graph) removeLocked(ref Ref) {
	for _, d := range g.deps[ref] {
		delete(g.rev[d], ref)
		if len(g.rev[d]) == 0 {
			delete(g.rev, d)
		}
	}
	delete(g.deps, ref)
}

// Dependents returns the objects that depend on ref directly, sorted.
func (g *Graph) Dependents(ref Ref) []Ref {
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
func (g *Graph) Cycle(ref Ref) []Ref {
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

// SourceRefOf is the node of the source a unit names: its namespace
// defaults to the unit's.
func SourceRefOf(self Ref, kind, namespace, name string) Ref {
	if namespace == "" {
		namespace = self.Namespace
	}
	return Ref{Kind: kind, Namespace: namespace, Name: name}
}
