package frame

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// object is what every Flux kind the engine reconciles offers.
type Object interface {
	client.Object
	conditions.Setter
}

// outcome is the result of one kind-specific reconcile, as data: the
// framework turns it into conditions, one status patch, an event, metrics
// and a requeue.
type Outcome struct {
	// ready is true when the object reached its desired state.
	Ready bool
	// reason and message describe the Ready condition.
	Reason, Message string
	// stalled means retrying cannot help until the spec changes.
	Stalled bool
	// stalledReason and stalledMessage, when set, describe the Stalled
	// condition where it says something other than Ready (a HelmRelease
	// out of retries: Ready says what failed, Stalled that it is not tried
	// again, as helm-controller writes them).
	StalledReason, StalledMessage string
	// waiting means the object waits on something else (a dependency, the
	// network phase) that wakes it; Ready is False and not a failure.
	Waiting bool
	// requeueAfter overrides the interval when set.
	RequeueAfter time.Duration
	// quiet records no Event for the Ready condition it sets, where Flux's
	// controllers record none (a source that does not exist yet).
	Quiet bool
	// action is the stage of the reconcile the Event names (Flux 2.10's
	// actions, for example HelmInstall); empty, eventAction derives it.
	Action string
	// KeepReady leaves the Ready condition as it was (an upgrade held for
	// an approval: the release is what it was).
	KeepReady bool
}

func Succeeded(msg string, args ...any) Outcome {
	return Outcome{Ready: true, Reason: meta.ReconciliationSucceededReason, Message: fmt.Sprintf(msg, args...)}
}

// at names the stage of the reconcile the outcome's Event reports, when
// one is given.
func (o Outcome) At(action string) Outcome {
	if action != "" {
		o.Action = action
	}
	return o
}

func Failed(reason string, err error) Outcome {
	return Outcome{Reason: reason, Message: err.Error()}
}

func Stalled(reason string, err error) Outcome {
	return Outcome{Reason: reason, Message: err.Error(), Stalled: true}
}

func Waiting(reason, msg string, after time.Duration) Outcome {
	return Outcome{Reason: reason, Message: msg, Waiting: true, RequeueAfter: after}
}

// timing carries the object's interval and retry interval.
type Timing struct {
	// interval is the requeue after a success.
	Interval time.Duration
	// retry is the fixed requeue after a failure (a Kustomization's
	// spec.retryInterval) unless backoff is set.
	Retry time.Duration
	// backoff hands a failure's retry to the controller's rate limiter,
	// an exponential backoff that a success resets. Flux's
	// source-controller returns a failure to controller-runtime, so a
	// source that failed on a network blip recovers within seconds rather
	// than after spec.interval. A waiting object still requeues after
	// interval: what it waits on wakes it.
	Backoff bool
}

// Finisher writes what a reconcile came to (Finish).
type Finisher struct {
	// Client writes the status subresource.
	Client client.Client
	// Recorder records the Events.
	Recorder recorder.EventRecorder
	// Logger returns the logger of a reconcile that has none in its context.
	Logger func() logr.Logger
	// Metrics counts the reconciles.
	Metrics *Metrics
	// MayWrite, when set, tells whether this engine may write the object's
	// status now (leadership or the shard may have moved on).
	MayWrite func(ctx context.Context, kind string, obj client.Object) bool
	// Rewritten, when set, tells whether the object's status was written
	// since it was read (an in-progress status): the conditions are then
	// sent whole.
	Rewritten func(ref Ref) bool
}

// Finish writes the outcome: the Ready, Reconciling and Stalled conditions
// and everything else the kind put in status, in one patch of the status
// subresource; then an event when Ready changes, and metrics.
func (f *Finisher) Finish(ctx context.Context, kind string, obj, orig Object, start time.Time, out Outcome, t Timing) (ctrl.Result, error) {
	conditions.Delete(obj, meta.ReconcilingCondition)
	conditions.Delete(obj, meta.StalledCondition)
	switch {
	case out.KeepReady:
	case out.Ready:
		conditions.MarkTrue(obj, meta.ReadyCondition, out.Reason, "%s", out.Message)
	case out.Stalled:
		conditions.MarkFalse(obj, meta.ReadyCondition, out.Reason, "%s", out.Message)
		if out.StalledReason != "" {
			conditions.MarkStalled(obj, out.StalledReason, "%s", out.StalledMessage)
		} else {
			conditions.MarkStalled(obj, out.Reason, "%s", out.Message)
		}
	case out.Waiting:
		conditions.MarkFalse(obj, meta.ReadyCondition, out.Reason, "%s", out.Message)
		conditions.MarkReconciling(obj, meta.ProgressingReason, "%s", out.Message)
	default:
		conditions.MarkFalse(obj, meta.ReadyCondition, out.Reason, "%s", out.Message)
	}
	if f.MayWrite != nil && !f.MayWrite(ctx, kind, obj) {
		// Leadership or the shard moved on: the new holder writes.
		return ctrl.Result{}, nil
	}
	base := orig
	if f.Rewritten != nil && f.Rewritten(Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}) {
		// An in-progress status was written since orig was read: send the
		// conditions whole, even where they equal orig's.
		base = orig.DeepCopyObject().(Object)
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
		if err := f.Client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("patching status of %s/%s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	f.emit(kind, obj, orig, out)
	f.logOutcome(ctx, kind, obj, orig, start, out)
	var ready metav1.ConditionStatus
	if c := conditions.Get(obj, meta.ReadyCondition); c != nil {
		ready = c.Status
	}
	f.Metrics.Record(kind, obj.GetNamespace(), obj.GetName(), start, ready)
	// A result with RequeueAfter, or none, makes the workqueue forget the
	// object's failures: the next failure backs off from the start again.
	switch {
	case out.RequeueAfter > 0:
		return ctrl.Result{RequeueAfter: out.RequeueAfter}, nil
	case out.Ready:
		return ctrl.Result{RequeueAfter: t.Interval}, nil
	case out.Stalled:
		return ctrl.Result{}, nil
	case !t.Backoff:
		return ctrl.Result{RequeueAfter: t.Retry}, nil
	case out.Waiting:
		return ctrl.Result{RequeueAfter: t.Interval}, nil
	default:
		// The rate-limited requeue a returned error would get, without
		// controller-runtime logging the failure logOutcome logged.
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // Requeue is the only error-free way to the rate limiter
	}
}

// emit records a Kubernetes Event when the Ready condition changes.
func (f *Finisher) emit(kind string, obj, orig Object, out Outcome) {
	before := conditions.Get(orig, meta.ReadyCondition)
	after := conditions.Get(obj, meta.ReadyCondition)
	if out.Quiet || after == nil || (before != nil && before.Status == after.Status && before.Message == after.Message) {
		return
	}
	typ := corev1.EventTypeNormal
	if after.Status != metav1.ConditionTrue && !out.Waiting {
		typ = corev1.EventTypeWarning
	}
	f.Recorder.Eventf(obj, nil, typ, after.Reason, EventAction(kind, out), "%s", after.Message)
}

// handledRequest returns the value of reconcile.fluxcd.io/requestedAt, to
// record as status.lastHandledReconcileAt.
func HandledRequest(obj client.Object) string {
	v, _ := meta.ReconcileAnnotationValue(obj.GetAnnotations())
	return v
}

// durationOr returns d, or def when d is zero.
func DurationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}
