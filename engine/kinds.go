package engine

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/controllers"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/kinds"
	"github.com/cozystack/cozy-aio/source"
)

// registrations is what the families do for the kinds of the table:
// their reconcilers and rebuilds, by kind.
func (e *Engine) registrations() map[string]frame.Registration {
	out := map[string]frame.Registration{}
	for _, f := range []interface{ Kinds() []frame.Registration }{e.sources, e.kustomization, e.helmrelease, e.generator} {
		for _, r := range f.Kinds() {
			out[r.Kind] = r
		}
	}
	return out
}

// kinds lists the reconcilers the engine runs: every reconciled kind of
// the table (engine/internal/kinds), with the reconciler its family
// registers.
func (e *Engine) kinds() ([]controllers.Kind, error) {
	var out []controllers.Kind
	for _, k := range kinds.All() {
		if !k.Reconciled {
			continue
		}
		r := e.registered[k.Name].Reconciler
		if r == nil {
			return nil, fmt.Errorf("no family registers a reconciler of %s", k.Name)
		}
		out = append(out, controllers.Kind{Kind: k, Reconciler: r})
	}
	return out, nil
}

// reconciledKinds are the names of the kinds the engine reconciles.
func reconciledKinds() []string { return kinds.Names(func(k kinds.Kind) bool { return k.Reconciled }) }

// newObjectOf returns an empty object of a kind the engine reconciles.
func (e *Engine) newObjectOf(kind string) (client.Object, bool) {
	k, ok := kinds.Get(kind)
	if !ok || !k.Reconciled {
		return nil, false
	}
	return k.New(), true
}

// rebuild builds an artifact again as its kind's family does (the
// Registration's Rebuild): an ArtifactGenerator's output by the generator
// room, the other sources by the sources room.
func (e *Engine) rebuild(ctx context.Context, staging *source.Store, sobj source.Object, obj client.Object, revision string) (source.Artifact, error) {
	if k, ok := kinds.Of(obj); ok {
		if r := e.registered[k.Name].Rebuild; r != nil {
			return r(ctx, staging, sobj, obj, revision)
		}
	}
	return source.Artifact{}, fmt.Errorf("%T cannot be rebuilt", obj)
}

// The selectors of Options.WatchConfigsSelector.
const (
	// DefaultWatchConfigsSelector selects the ConfigMaps and Secrets whose
	// changes reconcile their users, as Flux 2.5+'s default
	// --watch-configs-label-selector.
	DefaultWatchConfigsSelector = controllers.DefaultWatchConfigsSelector
	// WatchAllConfigs watches every ConfigMap and Secret (Flux's empty
	// --watch-configs-label-selector).
	WatchAllConfigs = controllers.WatchAllConfigs
	// WatchNoConfigs watches none (Flux's DisableConfigWatchers gate).
	WatchNoConfigs = controllers.WatchNoConfigs
)

// Wake re-enqueues every object of every kind, for example when the
// bootstrap gate opens.
func (e *Engine) Wake(ctx context.Context) error {
	return e.controllers.WakeKinds(ctx, func(string) bool { return true })
}
