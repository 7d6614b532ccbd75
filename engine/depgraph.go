package engine

import (
	"sort"
	"sync"
)

// nodeRef names an object of a kind the engine reconciles: a node of the
// dependsOn graph, and the key of the engine's waits, timers and
// materialisations for it. The kinds are the engine's own, so a kind alone,
// without group and version, names one.
type nodeRef struct {
	Kind, Namespace, Name string
}

func (r nodeRef) String() string { return r.Kind + "/" + r.Namespace + "/" + r.Name }

// depGraph holds every object's dependencies, across kinds, so that a
// dependency becoming ready wakes its dependents (nobody polls) and cycles
// are found on every member.
type depGraph struct {
	mu   sync.RWMutex
	deps map[nodeRef][]nodeRef
	rev  map[nodeRef]map[nodeRef]bool
}

func newDepGraph() *depGraph {
	return &depGraph{deps: map[nodeRef][]nodeRef{}, rev: map[nodeRef]map[nodeRef]bool{}}
}

// Set records ref's dependencies, replacing earlier ones.
func (g *depGraph) Set(ref nodeRef, deps []nodeRef) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(ref)
	if len(deps) == 0 {
		return
	}
	g.deps[ref] = append([]nodeRef(nil), deps...)
	for _, d := range deps {
		if g.rev[d] == nil {
			g.rev[d] = map[nodeRef]bool{}
		}
		g.rev[d][ref] = true
	}
}

// Remove forgets ref's own dependencies.
func (g *depGraph) Remove(ref nodeRef) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(ref)
}

func (g *depGraph) removeLocked(ref nodeRef) {
	for _, d := range g.deps[ref] {
		delete(g.rev[d], ref)
		if len(g.rev[d]) == 0 {
			delete(g.rev, d)
		}
	}
	delete(g.deps, ref)
}

// Dependents returns the objects that depend on ref directly, sorted.
func (g *depGraph) Dependents(ref nodeRef) []nodeRef {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]nodeRef, 0, len(g.rev[ref]))
	for r := range g.rev[ref] {
		out = append(out, r)
	}
	sortRefs(out)
	return out
}

// Cycle returns the members of the dependency cycle through ref, sorted,
// or nil when ref is on no cycle.
func (g *depGraph) Cycle(ref nodeRef) []nodeRef {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return cycleThrough(ref, g.deps, g.rev)
}

// cycleThrough returns the strongly connected component of start when it
// is a cycle: the objects reachable from start that also reach it.
func cycleThrough(start nodeRef, deps map[nodeRef][]nodeRef, rev map[nodeRef]map[nodeRef]bool) []nodeRef {
	forward := reach(start, func(r nodeRef) []nodeRef { return deps[r] })
	if !forward[start] {
		return nil
	}
	backward := reach(start, func(r nodeRef) []nodeRef {
		out := make([]nodeRef, 0, len(rev[r]))
		for x := range rev[r] {
			out = append(out, x)
		}
		return out
	})
	var out []nodeRef
	for r := range forward {
		if backward[r] {
			out = append(out, r)
		}
	}
	sortRefs(out)
	return out
}

// reach returns the objects reachable from start in one or more steps.
func reach(start nodeRef, next func(nodeRef) []nodeRef) map[nodeRef]bool {
	seen := map[nodeRef]bool{}
	stack := append([]nodeRef(nil), next(start)...)
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

func sortRefs(rs []nodeRef) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].String() < rs[j].String() })
}
