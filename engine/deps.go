package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reasons the engine adds to Flux's.
const (
	// DependencyCycleReason: the object is on a dependsOn cycle.
	DependencyCycleReason = "DependencyCycle"
	// PhasePendingReason: the bootstrap gate holds the object, for example
	// until the nodes have a network.
	PhasePendingReason = "PhasePending"
)

// dependencies returns the object's dependencies: spec.dependsOn (same
// kind, namespace defaulting to the object's) and DependsOnAnnotation.
func dependencies(kind string, obj client.Object, specDeps []meta.DependencyReference) ([]Ref, error) {
	var out []Ref
	for _, d := range specDeps {
		ns := d.Namespace
		if ns == "" {
			ns = obj.GetNamespace()
		}
		out = append(out, Ref{Kind: kind, Namespace: ns, Name: d.Name})
	}
	if v, ok := obj.GetAnnotations()[DependsOnAnnotation]; ok {
		extra, err := ParseDependsOn(v, obj.GetNamespace())
		if err != nil {
			return nil, fmt.Errorf("%s/%s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
		}
		out = append(out, extra...)
	}
	return out, nil
}

// admit decides whether a unit may be reconciled now: the bootstrap gate
// is open, it is on no dependency cycle, and every dependency is Ready at
// its current generation. When not, it returns the outcome to report; the
// unit is woken when a dependency becomes ready or the gate opens, so it
// holds no worker while it waits.
//
// The source, when given, joins the graph too, so that a new artifact wakes
// the unit, but its readiness is checked by the caller.
func (e *Engine) admit(ctx context.Context, self Ref, obj client.Object, deps []Ref, src *Ref, retry time.Duration) (outcome, bool) {
	edges := deps
	if src != nil {
		edges = append(append([]Ref(nil), deps...), *src)
	}
	e.graph.Set(self, edges)
	if e.opts.Gate != nil {
		if ok, why := e.opts.Gate(ctx, obj); !ok {
			return waiting(PhasePendingReason, why, 0), false
		}
	}
	if cyc := e.graph.Cycle(self); cyc != nil {
		names := make([]string, len(cyc))
		for i, r := range cyc {
			names[i] = r.String()
		}
		return stalled(DependencyCycleReason, fmt.Errorf("%s is on a dependsOn cycle: %s", self, strings.Join(names, " → "))), false
	}
	for _, d := range deps {
		if ready, why := e.dependencyReady(ctx, d); !ready {
			return waiting(meta.DependencyNotReadyReason, fmt.Sprintf("dependency '%s' is not ready: %s", d, why), retry), false
		}
	}
	return outcome{}, true
}

func (e *Engine) dependencyReady(ctx context.Context, d Ref) (bool, string) {
	newObj, ok := e.newObject[d.Kind]
	if !ok {
		return false, "kind not reconciled by this engine"
	}
	obj := newObj()
	if err := e.mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Name}, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return false, "not found"
		}
		return false, err.Error()
	}
	getter, ok := obj.(conditions.Getter)
	if !ok {
		return false, "kind has no conditions"
	}
	c := conditions.Get(getter, meta.ReadyCondition)
	switch {
	case c == nil:
		return false, "not reconciled yet"
	case c.Status != "True":
		return false, c.Message
	case c.ObservedGeneration != obj.GetGeneration():
		return false, "its latest generation is not reconciled yet"
	}
	return true, ""
}
