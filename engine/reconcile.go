package engine

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
)

// finish writes a reconcile's outcome (frame.Finisher.Finish).
func (e *Engine) finish(ctx context.Context, kind string, obj, orig frame.Object, start time.Time, out frame.Outcome, t frame.Timing) (ctrl.Result, error) {
	return e.finisher.Finish(ctx, kind, obj, orig, start, out, t)
}
