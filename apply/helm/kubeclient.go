package helm

import (
	"context"
	"fmt"

	"helm.sh/helm/v4/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/health"
)

// kubeClient is Helm's kube client with a reachability check that shares
// the cached server version, and waits that skip objects kstatus reports
// Current as soon as they exist.
type kubeClient struct {
	*kube.Client
	discovery *sharedDiscovery
	// ctx and health, when set, serve Wait with cozy-aio's event-driven
	// kstatus waiter: it computes each object's status from the object
	// alone, where kstatus's Deployment reader also lists the ReplicaSets
	// and Pods on every event (nine requests per release in the demo).
	ctx    context.Context
	health *health.Waiter
	// checker, when set, decides statuses with CEL expressions.
	checker *health.Checker
	// stopped, when set, is the refusal that stopped the session's writes
	// of release records (see recordFence).
	stopped func() error
}

var _ kube.InterfaceWaitOptions = kubeClient{}

// Delete refuses to delete the release's objects once a write of its
// records was refused: Helm's uninstall only logs a failed write of the
// uninstalling record and goes on deleting, and a failed upgrade or
// rollback deletes what it created (CleanupOnFail), which may by then be
// the new holder's.
func (k kubeClient) Delete(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	if k.stopped != nil {
		if err := k.stopped(); err != nil {
			return &kube.Result{}, []error{fmt.Errorf("not deleting the release's objects: %w", err)}
		}
	}
	return k.Client.Delete(resources, policy)
}

func (k kubeClient) IsReachable() error {
	if _, err := k.discovery.ServerVersion(); err != nil {
		return fmt.Errorf("kubernetes cluster unreachable: %w", err)
	}
	return nil
}

func (k kubeClient) GetWaiter(ws kube.WaitStrategy) (kube.Waiter, error) {
	w, err := k.Client.GetWaiter(ws)
	if err != nil {
		return nil, err
	}
	return k.wrap(ws, w), nil
}

func (k kubeClient) GetWaiterWithOptions(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	w, err := k.Client.GetWaiterWithOptions(ws, opts...)
	if err != nil {
		return nil, err
	}
	return k.wrap(ws, w), nil
}

func (k kubeClient) wrap(ws kube.WaitStrategy, w kube.Waiter) kube.Waiter {
	r := readyWhenApplied{Waiter: w}
	if ws == kube.StatusWatcherStrategy && k.health != nil {
		r.ctx, r.health, r.checker = k.ctx, k.health, k.checker
	}
	return r
}

// useChecker makes the session's waits decide statuses with c.
func (s *session) useChecker(c *health.Checker) {
	if kc, ok := s.cfg.KubeClient.(kubeClient); ok && c != nil {
		kc.checker = c
		s.cfg.KubeClient = kc
	}
}
