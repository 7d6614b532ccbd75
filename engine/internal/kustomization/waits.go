package kustomization

import (
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/targets"
	"github.com/cozystack/cozy-aio/health"
)

// waitKey identifies what a health wait is about: one generation of one
// object at one source revision. A new generation or revision makes an
// older wait moot.
type waitKey struct {
	ref        frame.Ref
	generation int64
	revision   string
}

type waitEntry struct {
	key    waitKey
	handle *health.Handle
	done   bool
	out    frame.Outcome
}

// waits tracks the health waits in flight. A wait runs on watches, not on
// a worker: the reconciler starts it and returns, and the wait's end
// enqueues the object again, whose next reconcile reads the result here.
type waits struct {
	mu sync.Mutex
	m  map[frame.Ref]*waitEntry
}

// outcome reports on the wait for key. pending is false when there is no
// wait for this key (none started, or one for an older key, which is
// cancelled): the caller applies and may start one. A finished wait is
// reported once and forgotten, so the next interval checks afresh.
func (w *waits) outcome(key waitKey) (out frame.Outcome, pending bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[key.ref]
	if !ok {
		return frame.Outcome{}, false
	}
	if e.key != key {
		e.handle.Cancel()
		delete(w.m, key.ref)
		return frame.Outcome{}, false
	}
	if !e.done {
		rep := e.handle.Report()
		return frame.Waiting(meta.ProgressingReason, fmt.Sprintf("Applied revision %s; waiting for %d of %d objects: %s",
			key.revision, len(rep.NotReady()), len(rep.Objects), summary(rep)), 0), true
	}
	delete(w.m, key.ref)
	return e.out, true
}

func (w *waits) forget(ref frame.Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.m[ref]; ok {
		e.handle.Cancel()
		delete(w.m, ref)
	}
}

func summary(rep health.Report) string {
	nr := rep.NotReady()
	if len(nr) == 0 {
		return "none"
	}
	s := nr[0].String()
	if len(nr) > 1 {
		s += fmt.Sprintf(" and %d more", len(nr)-1)
	}
	return s
}

// startWait starts an event-driven wait for refs in the target cluster
// and returns at once.
func (r *Reconciler) startWait(target *targets.Clients, key waitKey, exprs []kustomize.CustomHealthCheck, refs []health.ObjectRef, timeout time.Duration) error {
	var checker *health.Checker
	if len(exprs) > 0 {
		hx := make([]health.Expr, len(exprs))
		for i, x := range exprs {
			hx[i] = health.Expr{APIVersion: x.APIVersion, Kind: x.Kind, Current: x.Current, InProgress: x.InProgress, Failed: x.Failed}
		}
		var err error
		if checker, err = health.NewChecker(hx); err != nil {
			return err
		}
	}
	waiter, err := target.Waiter()
	if err != nil {
		return err
	}
	entry := &waitEntry{key: key}
	r.waits.mu.Lock()
	if old, ok := r.waits.m[key.ref]; ok {
		old.handle.Cancel()
	}
	if r.waits.m == nil {
		r.waits.m = map[frame.Ref]*waitEntry{}
	}
	r.waits.m[key.ref] = entry
	entry.handle = waiter.Start(r.deps.RunContext(), refs, health.WaitOptions{
		Timeout: timeout,
		Checker: checker,
		OnDone: func(rep health.Report, err error) {
			r.waits.mu.Lock()
			entry.done = true
			if err == nil && rep.Ready() {
				entry.out = frame.Succeeded("Applied revision: %s", key.revision)
			} else {
				if err == nil {
					err = fmt.Errorf("not ready: %s", summary(rep))
				}
				entry.out = frame.Failed(meta.HealthCheckFailedReason, fmt.Errorf("%s: health check failed: %w", key.ref, err))
			}
			r.waits.mu.Unlock()
			r.deps.Enqueue(key.ref)
		},
	})
	r.waits.mu.Unlock()
	return nil
}
