package sources

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
)

// sourceObject is what the Git and OCI source kinds share.
type sourceObject interface {
	frame.Object
	GetRequeueAfter() time.Duration
}

// reconcileSource is the frame shared by the source reconcilers: read the
// object (a deleted one loses its artifacts), skip it when suspended, run
// the kind's fetch, and write status once. setStatus records the
// generation and the handled request in the kind's status. A success
// requeues after spec.interval; a failure that is not stalled retries
// with the controller's exponential backoff, as in Flux.
func (s *Sources) reconcileSource(ctx context.Context, req ctrl.Request, kind string, obj sourceObject,
	fetch func(source.Object) frame.Outcome, suspended func() bool, setStatus func(generation int64, handled string)) (ctrl.Result, error) {
	sobj := source.Object{Kind: kind, Namespace: req.Namespace, Name: req.Name}
	if err := s.deps.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, s.deps.Store.Remove(ctx, sobj)
		}
		return ctrl.Result{}, err
	}
	if suspended() || !obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	start := time.Now()
	orig := obj.DeepCopyObject().(frame.Object)
	out := fetch(sobj)
	setStatus(obj.GetGeneration(), frame.HandledRequest(obj))
	return s.deps.Finisher.Finish(ctx, kind, obj, orig, start, out, frame.Timing{Interval: obj.GetRequeueAfter(), Backoff: true})
}
