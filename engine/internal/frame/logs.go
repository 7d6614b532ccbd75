package frame

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/cozystack/cozy-aio/engine/internal/kinds"
)

// reconcileLog returns the logger of one reconcile with Flux's keys:
// controller, controllerKind, name, namespace and reconcileID. A
// controller's reconcile carries them in ctx already; Helm work on a shard
// worker gets them here.
func (f *Finisher) reconcileLog(ctx context.Context, kind string, obj Object) logr.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l
	}
	return f.Logger().WithValues("controller", strings.ToLower(kind), "controllerKind", kind,
		"name", obj.GetName(), "namespace", obj.GetNamespace(), "reconcileID", string(uuid.NewUUID()))
}

// logOutcome writes one line per reconcile outcome: info when the object
// became ready or changed, error with the cause on failure, and nothing at
// info for a reconcile that changed nothing.
func (f *Finisher) logOutcome(ctx context.Context, kind string, obj, orig Object, start time.Time, out Outcome) {
	l := f.reconcileLog(ctx, kind, obj).WithValues("revision", RevisionOf(obj), "duration", time.Since(start).Round(time.Millisecond).String())
	before, after := conditions.Get(orig, meta.ReadyCondition), conditions.Get(obj, meta.ReadyCondition)
	changed := before == nil || after == nil || before.Status != after.Status || before.Reason != after.Reason ||
		before.Message != after.Message || RevisionOf(orig) != RevisionOf(obj)
	switch {
	case out.KeepReady:
		// Held: the plan's report logged its line when it was new.
		l.V(1).Info(out.Message, "reason", out.Reason)
	case out.Ready && changed:
		l.Info(out.Message, "reason", out.Reason)
	case out.Ready:
		l.V(1).Info(out.Message, "reason", out.Reason)
	case out.Waiting && changed:
		l.Info(out.Message, "reason", out.Reason)
	case out.Waiting:
		l.V(1).Info(out.Message, "reason", out.Reason)
	default:
		l.Error(errors.New(out.Message), "Reconciliation failed", "reason", out.Reason, "stalled", out.Stalled)
	}
}

// RevisionOf returns the revision an object last acted on: a source's
// artifact, a Kustomization's or HelmRelease's last attempted revision
// (kinds.Revision).
func RevisionOf(obj Object) string { return kinds.Revision(obj) }
