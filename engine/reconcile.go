package engine

import (
	"context"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// object is what every Flux kind the engine reconciles offers.
type object interface {
	client.Object
	conditions.Setter
}

// outcome is the result of one kind-specific reconcile, as data: the
// framework turns it into conditions, one status patch, an event, metrics
// and a requeue.
type outcome struct {
	// ready is true when the object reached its desired state.
	ready bool
	// reason and message describe the Ready condition.
	reason, message string
	// stalled means retrying cannot help until the spec changes.
	stalled bool
	// stalledReason and stalledMessage, when set, describe the Stalled
	// condition where it says something other than Ready (a HelmRelease
	// out of retries: Ready says what failed, Stalled that it is not tried
	// again, as helm-controller writes them).
	stalledReason, stalledMessage string
	// waiting means the object waits on something else (a dependency, the
	// network phase) that wakes it; Ready is False and not a failure.
	waiting bool
	// requeueAfter overrides the interval when set.
	requeueAfter time.Duration
	// quiet records no Event for the Ready condition it sets, where Flux's
	// controllers record none (a source that does not exist yet).
	quiet bool
	// action is the stage of the reconcile the Event names (Flux 2.10's
	// actions, for example HelmInstall); empty, eventAction derives it.
	action string
}

func succeeded(msg string, args ...any) outcome {
	return outcome{ready: true, reason: meta.ReconciliationSucceededReason, message: fmt.Sprintf(msg, args...)}
}

// at names the stage of the reconcile the outcome's Event reports, when
// one is given.
func (o outcome) at(action string) outcome {
	if action != "" {
		o.action = action
	}
	return o
}

func failed(reason string, err error) outcome {
	return outcome{reason: reason, message: err.Error()}
}

func stalled(reason string, err error) outcome {
	return outcome{reason: reason, message: err.Error(), stalled: true}
}

func waiting(reason, msg string, after time.Duration) outcome {
	return outcome{reason: reason, message: msg, waiting: true, requeueAfter: after}
}

// timing carries the object's interval and retry interval.
type timing struct {
	// interval is the requeue after a success.
	interval time.Duration
	// retry is the fixed requeue after a failure (a Kustomization's
	// spec.retryInterval) unless backoff is set.
	retry time.Duration
	// backoff hands a failure's retry to the controller's rate limiter,
	// an exponential backoff that a success resets. Flux's
	// source-controller returns a failure to controller-runtime, so a
	// source that failed on a network blip recovers within seconds rather
	// than after spec.interval. A waiting object still requeues after
	// interval: what it waits on wakes it.
	backoff bool
}

// finish writes the outcome: the Ready, Reconciling and Stalled conditions
// and everything else the kind put in status, in one patch of the status
// subresource; then an event when Ready changes, and metrics.
func (e *Engine) finish(ctx context.Context, kind string, obj, orig object, start time.Time, out outcome, t timing) (ctrl.Result, error) {
	conditions.Delete(obj, meta.ReconcilingCondition)
	conditions.Delete(obj, meta.StalledCondition)
	switch {
	case out.ready:
		conditions.MarkTrue(obj, meta.ReadyCondition, out.reason, "%s", out.message)
	case out.stalled:
		conditions.MarkFalse(obj, meta.ReadyCondition, out.reason, "%s", out.message)
		if out.stalledReason != "" {
			conditions.MarkStalled(obj, out.stalledReason, "%s", out.stalledMessage)
		} else {
			conditions.MarkStalled(obj, out.reason, "%s", out.message)
		}
	case out.waiting:
		conditions.MarkFalse(obj, meta.ReadyCondition, out.reason, "%s", out.message)
		conditions.MarkReconciling(obj, meta.ProgressingReason, "%s", out.message)
	default:
		conditions.MarkFalse(obj, meta.ReadyCondition, out.reason, "%s", out.message)
	}
	if !e.mayWriteStatus(ctx, kind, obj) {
		// Leadership or the shard moved on: the new holder writes.
		return ctrl.Result{}, nil
	}
	base := orig
	if kind == helmv2.HelmReleaseKind && e.progress.takeDirty(nodeRef{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}) {
		// An in-progress status was written since orig was read: send the
		// conditions whole, even where they equal orig's.
		base = orig.DeepCopyObject().(object)
		base.SetConditions(nil)
	}
	// A reconcile that changes nothing (every release in sync after a
	// restart, a periodic check) sends no patch: an empty merge patch
	// would still cost the API server a read, a decode and an admission
	// of the whole object.
	patch, err := client.MergeFrom(base).Data(obj)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("patching status of %s/%s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	if string(patch) != "{}" {
		if err := e.mgr.GetClient().Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("patching status of %s/%s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	e.emit(kind, obj, orig, out)
	e.logOutcome(ctx, kind, obj, orig, start, out)
	var ready metav1.ConditionStatus
	if c := conditions.Get(obj, meta.ReadyCondition); c != nil {
		ready = c.Status
	}
	e.metrics.record(kind, obj.GetNamespace(), obj.GetName(), start, ready)
	// A result with RequeueAfter, or none, makes the workqueue forget the
	// object's failures: the next failure backs off from the start again.
	switch {
	case out.requeueAfter > 0:
		return ctrl.Result{RequeueAfter: out.requeueAfter}, nil
	case out.ready:
		return ctrl.Result{RequeueAfter: t.interval}, nil
	case out.stalled:
		return ctrl.Result{}, nil
	case !t.backoff:
		return ctrl.Result{RequeueAfter: t.retry}, nil
	case out.waiting:
		return ctrl.Result{RequeueAfter: t.interval}, nil
	default:
		// The rate-limited requeue a returned error would get, without
		// controller-runtime logging the failure logOutcome logged.
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // Requeue is the only error-free way to the rate limiter
	}
}

// emit records a Kubernetes Event when the Ready condition changes.
func (e *Engine) emit(kind string, obj, orig object, out outcome) {
	before := conditions.Get(orig, meta.ReadyCondition)
	after := conditions.Get(obj, meta.ReadyCondition)
	if out.quiet || after == nil || (before != nil && before.Status == after.Status && before.Message == after.Message) {
		return
	}
	typ := corev1.EventTypeNormal
	if after.Status != metav1.ConditionTrue && !out.waiting {
		typ = corev1.EventTypeWarning
	}
	e.recorder.Eventf(obj, nil, typ, after.Reason, eventAction(kind, out), "%s", after.Message)
}

// handledRequest returns the value of reconcile.fluxcd.io/requestedAt, to
// record as status.lastHandledReconcileAt.
func handledRequest(obj client.Object) string {
	v, _ := meta.ReconcileAnnotationValue(obj.GetAnnotations())
	return v
}

// durationOr returns d, or def when d is zero.
func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}
