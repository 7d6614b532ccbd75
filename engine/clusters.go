package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/cluster"
	"github.com/cozystack/cozy-aio/health"
)

// restClientErrorReason is the Ready reason of a HelmRelease whose
// cluster has no client: its kubeConfig cannot be read or is refused
// (helm-controller's reason for the same).
const restClientErrorReason = "RESTClientError"

// newClusterRegistry returns the registry of the clusters HelmReleases
// install to: the local cluster's entry is the engine's Helm manager, a
// remote cluster's is a Helm manager of its own, with its own waiter.
func newClusterRegistry(e *Engine) (*cluster.Registry[*helm.Manager], error) {
	ro := e.opts.RemoteClusters
	return cluster.NewRegistry(e.mgr.GetAPIReader(), e.mgr.GetClient(), cluster.RegistryOptions[*helm.Manager]{
		Local: e.helmManager,
		Build: e.remoteHelmManager,
		Load: cluster.LoadOptions{AllowExec: ro.AllowExec, AllowInsecureTLS: ro.AllowInsecureTLS,
			UserAgent: "cozy-aio"},
		IdleAfter: ro.IdleAfter,
	})
}

// remoteHelmManager builds the Helm manager of a remote cluster. It has
// the local manager's holder and fencing (the shard Leases live in the
// management cluster), its own waiter, and no watch cache: the release
// records and objects of a remote cluster are read from its API server.
func (e *Engine) remoteHelmManager(cfg *rest.Config) (*helm.Manager, error) {
	// Waits watch what they wait on; a request timeout would end the
	// watch, so the waiter's config has none (its dials still time out).
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = 0
	waiter, err := health.NewWaiter(wcfg, health.WaiterOptions{})
	if err != nil {
		return nil, err
	}
	return helm.New(cfg, e.helmOptions(waiter, nil))
}

// sweepClusters closes the remote clusters no release used for their idle
// time, also while no release asks for any cluster.
func (e *Engine) sweepClusters(ctx context.Context) error {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			e.clusters.Sweep()
		}
	}
}

// helmManagerOf returns the Helm manager of the cluster obj installs to,
// or the outcome that says why it has none.
func (e *Engine) helmManagerOf(ctx context.Context, obj *helmv2.HelmRelease, self nodeRef) (*helm.Manager, outcome, bool) {
	c, err := e.clusters.Get(ctx, obj.Namespace, obj.Spec.KubeConfig)
	if err == nil {
		return c.Value, outcome{}, true
	}
	err = fmt.Errorf("%s: spec.kubeConfig: %w", self, err)
	var fe *cluster.FieldError
	var pe *cluster.UnsupportedProviderError
	if errors.As(err, &fe) || errors.As(err, &pe) {
		// No retry makes a refused kubeconfig acceptable; a change to the
		// Secret or ConfigMap does, and so does a spec change.
		return nil, stalled(restClientErrorReason, err), false
	}
	return nil, failed(restClientErrorReason, err), false
}

// kubeConfigGone tells whether err says the kubeConfig Secret or ConfigMap
// of a release no longer exists.
func kubeConfigGone(obj *helmv2.HelmRelease, err error) bool {
	return obj.Spec.KubeConfig != nil && apierrors.IsNotFound(err)
}

// kubeConfigName names what a spec.kubeConfig points at.
func kubeConfigName(ref *meta.KubeConfigReference) string {
	switch {
	case ref == nil:
		return ""
	case ref.SecretRef != nil:
		return "Secret/" + ref.SecretRef.Name
	case ref.ConfigMapRef != nil:
		return "ConfigMap/" + ref.ConfigMapRef.Name
	}
	return "?"
}
