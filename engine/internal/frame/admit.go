package frame

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/kinds"
)

// Reasons the engine adds to Flux's.
const (
	// DependencyCycleReason: the object is on a dependsOn cycle.
	DependencyCycleReason = "DependencyCycle"
	// PhasePendingReason: the bootstrap gate holds the object, for example
	// until the nodes have a network.
	PhasePendingReason = "PhasePending"
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

// dependable tells whether DependsOnAnnotation may name kind.
func dependable(kind string) bool {
	k, ok := kinds.Get(kind)
	return ok && k.Dependable
}

// parseDependsOn parses the value of DependsOnAnnotation.
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
		if !dependable(r.Kind) {
			return nil, fmt.Errorf("%s: kind %q in %q is not one the engine reconciles", DependsOnAnnotation, r.Kind, item)
		}
		if r.Name == "" || r.Namespace == "" {
			return nil, fmt.Errorf("%s: %q has an empty name or namespace", DependsOnAnnotation, item)
		}
		out = append(out, r)
	}
	return out, nil
}

// dependencies returns the object's dependencies: spec.dependsOn (same
// kind, namespace defaulting to the object's) and DependsOnAnnotation.
func Dependencies(kind string, obj client.Object, specDeps []meta.DependencyReference) ([]Ref, error) {
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

// ErrCrossNamespace means restricted mode refused a reference to another
// namespace.
var ErrCrossNamespace = errors.New("cross-namespace references are disabled (restricted mode)")

// DependencyRequeue is when a unit that waits on a dependency or on its
// source's first artifact looks again, as Flux's helm- and
// kustomize-controller do after --requeue-dependency (30 s by default). The
// readiness of what it waits on wakes it at once (Graph); this is the net
// under that wake.
const DependencyRequeue = 30 * time.Second

// Admission admits units whose gate is open and whose dependencies are
// Ready, over the dependsOn graph; a dependency that becomes ready wakes
// its dependents through the Graph.
type Admission struct {
	// Graph holds every unit's dependencies and source.
	Graph *Graph
	// Gate, when set, holds units until it allows them (Options.Gate).
	Gate func(ctx context.Context, obj client.Object) (allowed bool, reason string)
	// Reader reads dependencies, from the cache.
	Reader client.Reader
	// NewObject returns an empty object of a kind the engine reconciles.
	NewObject func(kind string) (client.Object, bool)
}

// Admit decides whether a unit may be reconciled now: the bootstrap gate
// is open, it is on no dependency cycle, and every dependency is Ready at
// its current generation. When not, it returns the outcome to report; the
// unit is woken when a dependency becomes ready or the gate opens, so it
// holds no worker while it waits.
//
// The source, when given, joins the graph too, so that a new artifact wakes
// the unit, but its readiness is checked by the caller.
func (a *Admission) Admit(ctx context.Context, self Ref, obj client.Object, deps []Ref, src *Ref, retry time.Duration) (Outcome, bool) {
	edges := deps
	if src != nil {
		edges = append(append([]Ref(nil), deps...), *src)
	}
	a.Graph.Set(self, edges)
	if a.Gate != nil {
		if ok, why := a.Gate(ctx, obj); !ok {
			return Waiting(PhasePendingReason, why, 0), false
		}
	}
	if cyc := a.Graph.Cycle(self); cyc != nil {
		names := make([]string, len(cyc))
		for i, r := range cyc {
			names[i] = r.String()
		}
		return Stalled(DependencyCycleReason, fmt.Errorf("%s is on a dependsOn cycle: %s", self, strings.Join(names, " → "))), false
	}
	for _, d := range deps {
		if ready, why := a.dependencyReadyFor(ctx, obj, d); !ready {
			return Waiting(meta.DependencyNotReadyReason, fmt.Sprintf("dependency '%s' is not ready: %s", d, why), retry), false
		}
	}
	return Outcome{}, true
}

func (a *Admission) dependencyReady(ctx context.Context, d Ref) (bool, string) {
	obj, ok := a.NewObject(d.Kind)
	if !ok {
		return false, "kind not reconciled by this engine"
	}
	if err := a.Reader.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Name}, obj); err != nil {
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
