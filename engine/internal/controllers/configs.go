package controllers

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	ctrlsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/kinds"
)

// DefaultWatchConfigsSelector selects the ConfigMaps and Secrets whose
// changes reconcile their users, as Flux 2.5+'s default
// --watch-configs-label-selector.
const DefaultWatchConfigsSelector = meta.LabelKeyWatch + "=" + meta.LabelValueWatchEnabled

// Selectors of Options.WatchConfigsSelector beside a label selector.
const (
	// WatchAllConfigs watches every ConfigMap and Secret (Flux's empty
	// --watch-configs-label-selector).
	WatchAllConfigs = "*"
	// WatchNoConfigs watches none (Flux's DisableConfigWatchers gate).
	WatchNoConfigs = "-"
)

// configRefs returns the ConfigMaps and Secrets obj reads, as its kind's
// entry says (kinds.Kind.Configs).
func configRefs(o client.Object) []frame.Ref {
	k, ok := kinds.Of(o)
	if !ok || k.Configs == nil {
		return nil
	}
	var out []frame.Ref
	for _, c := range k.Configs(o) {
		out = append(out, frame.Ref{Kind: c.Kind, Namespace: o.GetNamespace(), Name: c.Name})
	}
	return out
}

// ReadsConfigs records the ConfigMaps and Secrets obj reads (nil: none,
// as on deletion), so that a watched one's change reconciles it.
func (c *Controllers) ReadsConfigs(self frame.Ref, obj client.Object) {
	if obj == nil {
		c.configs.Remove(self)
		return
	}
	c.configs.Set(self, configRefs(obj))
}

// setupConfigWatches makes a change of a ConfigMap or Secret that
// Options.WatchConfigsSelector selects reconcile the HelmReleases and
// Kustomizations that read it, as Flux 2.5+ does for the ones labelled
// reconcile.fluxcd.io/watch: Enabled; without the label, a change waits
// for the next interval, as with Flux.
//
// Flux watches the metadata of every ConfigMap and Secret and filters on
// the label in the controller; the engine asks the API server for the
// selected ones only, in a cache of their metadata of its own, so that
// the Helm release records (Secrets, one per revision) and every other
// unlabelled object cost nothing. The users are found in an index that
// each reconcile of a HelmRelease or Kustomization updates (readsConfigs):
// field indexes of the shared cache, as Flux's, would need the CRDs when
// the engine is set up, before it installs them on a new cluster.
func (c *Controllers) setupConfigWatches(ks []Kind) error {
	sel := c.opts.WatchConfigsSelector
	if sel == WatchNoConfigs {
		return nil
	}
	selector := labels.Everything()
	if sel != WatchAllConfigs {
		var err error
		if selector, err = labels.Parse(sel); err != nil {
			return fmt.Errorf("watch configs label selector %q: %w", sel, err)
		}
	}
	users := false
	for _, k := range ks {
		users = users || k.Configs != nil
	}
	if !users {
		return nil
	}
	mgr := c.deps.Manager
	configs, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		HTTPClient:           mgr.GetHTTPClient(),
		DefaultLabelSelector: selector,
		DefaultTransform:     cache.TransformStripManagedFields(),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(configs); err != nil {
		return err
	}
	every := false
	b := ctrl.NewControllerManagedBy(mgr).Named("configs")
	for _, kind := range []string{"ConfigMap", "Secret"} {
		changed := func(o client.Object) {
			for _, u := range c.configs.Dependents(frame.Ref{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()}) {
				c.Enqueue(u)
			}
		}
		obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
		b = b.WatchesRawSource(ctrlsource.Kind[client.Object](configs, obj, handler.Funcs{
			CreateFunc: func(_ context.Context, ev event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				changed(ev.Object)
			},
			UpdateFunc: func(_ context.Context, ev event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				// As Flux's ResourceVersionChangedPredicate: a resync is
				// no change.
				if ev.ObjectOld.GetResourceVersion() != ev.ObjectNew.GetResourceVersion() {
					changed(ev.ObjectNew)
				}
			},
			DeleteFunc: func(_ context.Context, ev event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				changed(ev.Object)
			},
		}))
	}
	return b.WithOptions(controller.Options{SkipNameValidation: &skipNameValidation, NeedLeaderElection: &every}).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }))
}
