package engine

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
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

// The field indexes of the HelmReleases and Kustomizations by the
// ConfigMaps and Secrets they read, "<namespace>/<name>" (the keys of
// helm- and kustomize-controller's indexes of the same names).
const (
	indexConfigMap = ".metadata.configMap"
	indexSecret    = ".metadata.secret"
)

// configRefs returns the ConfigMaps and the Secrets, "<namespace>/<name>",
// that a HelmRelease or a Kustomization reads: what helm- and
// kustomize-controller index for their config watches (valuesFrom,
// postBuild.substituteFrom, decryption.secretRef, kubeConfig).
func configRefs(o client.Object) (configMaps, secrets []string) {
	key := func(name string) string { return o.GetNamespace() + "/" + name }
	add := func(kind, name string) {
		switch kind {
		case "ConfigMap":
			configMaps = append(configMaps, key(name))
		case "Secret":
			secrets = append(secrets, key(name))
		}
	}
	var kc *meta.KubeConfigReference
	switch obj := o.(type) {
	case *helmv2.HelmRelease:
		kc = obj.Spec.KubeConfig
		for _, ref := range obj.Spec.ValuesFrom {
			add(ref.Kind, ref.Name)
		}
	case *kustomizev1.Kustomization:
		kc = obj.Spec.KubeConfig
		if pb := obj.Spec.PostBuild; pb != nil {
			for _, ref := range pb.SubstituteFrom {
				add(ref.Kind, ref.Name)
			}
		}
		if d := obj.Spec.Decryption; d != nil && d.SecretRef != nil {
			add("Secret", d.SecretRef.Name)
		}
	}
	if kc != nil {
		if kc.ConfigMapRef != nil {
			add("ConfigMap", kc.ConfigMapRef.Name)
		}
		if kc.SecretRef != nil {
			add("Secret", kc.SecretRef.Name)
		}
	}
	return configMaps, secrets
}

// configUsers are the kinds whose objects a watched ConfigMap or Secret
// reconciles.
var configUsers = []struct {
	kind    string
	newList func() client.ObjectList
	items   func(client.ObjectList) []client.Object
	newObj  func() client.Object
}{
	{helmv2.HelmReleaseKind, func() client.ObjectList { return &helmv2.HelmReleaseList{} },
		func(l client.ObjectList) []client.Object {
			items := l.(*helmv2.HelmReleaseList).Items
			out := make([]client.Object, len(items))
			for i := range items {
				out[i] = &items[i]
			}
			return out
		}, func() client.Object { return &helmv2.HelmRelease{} }},
	{kustomizev1.KustomizationKind, func() client.ObjectList { return &kustomizev1.KustomizationList{} },
		func(l client.ObjectList) []client.Object {
			items := l.(*kustomizev1.KustomizationList).Items
			out := make([]client.Object, len(items))
			for i := range items {
				out[i] = &items[i]
			}
			return out
		}, func() client.Object { return &kustomizev1.Kustomization{} }},
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
// unlabelled object cost nothing. The users are found through field
// indexes of the shared cache, as Flux's.
func (e *Engine) setupConfigWatches(ctx context.Context, kinds []kindController) error {
	sel := e.opts.WatchConfigsSelector
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
	run := map[string]bool{}
	for _, k := range kinds {
		run[k.kind] = true
	}
	var users []int
	for i, u := range configUsers {
		if !run[u.kind] {
			continue
		}
		users = append(users, i)
		for _, idx := range []struct {
			name string
			keys func(client.Object) []string
		}{
			{indexConfigMap, func(o client.Object) []string { cm, _ := configRefs(o); return cm }},
			{indexSecret, func(o client.Object) []string { _, s := configRefs(o); return s }},
		} {
			if err := e.mgr.GetFieldIndexer().IndexField(ctx, u.newObj(), idx.name, idx.keys); err != nil {
				return fmt.Errorf("indexing %s by %s: %w", u.kind, idx.name, err)
			}
		}
	}
	if len(users) == 0 {
		return nil
	}
	configs, err := cache.New(e.cfg, cache.Options{
		Scheme:               e.mgr.GetScheme(),
		Mapper:               e.mgr.GetRESTMapper(),
		HTTPClient:           e.mgr.GetHTTPClient(),
		DefaultLabelSelector: selector,
		DefaultTransform:     cache.TransformStripManagedFields(),
	})
	if err != nil {
		return err
	}
	if err := e.mgr.Add(configs); err != nil {
		return err
	}
	every := false
	b := ctrl.NewControllerManagedBy(e.mgr).Named("configs")
	for _, kind := range []string{"ConfigMap", "Secret"} {
		index := indexConfigMap
		if kind == "Secret" {
			index = indexSecret
		}
		changed := func(o client.Object) { e.reconcileUsers(users, index, o) }
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

// reconcileUsers enqueues the objects of the user kinds that index names
// as reading o.
func (e *Engine) reconcileUsers(users []int, index string, o client.Object) {
	key := o.GetNamespace() + "/" + o.GetName()
	for _, i := range users {
		u := configUsers[i]
		list := u.newList()
		if err := e.mgr.GetCache().List(context.Background(), list, client.MatchingFields{index: key}, client.UnsafeDisableDeepCopy); err != nil {
			e.opts.Logger.Error(err, "listing the users of a watched config", "kind", u.kind, "config", key)
			continue
		}
		for _, obj := range u.items(list) {
			e.enqueue(nodeRef{Kind: u.kind, Namespace: obj.GetNamespace(), Name: obj.GetName()})
		}
	}
}
