package helmrelease

import (
	"context"
	"fmt"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
)

// QueuedReason is the Ready and Reconciling reason of a HelmRelease that
// waits in its shard's queue.
const QueuedReason = "Queued"

// progress writes what a HelmRelease is doing while it does it, as Flux
// does, without doubling the writes of the fast path: a Helm action that
// runs, or a release that waits in its shard's queue, for longer than
// Options.ProgressAfter gets one status write saying so (Reconciling=True
// and Ready=Unknown); one that is done sooner gets none. Queue reports are
// rewritten at most once per queuedEvery per release and at most
// queuedPerSecond across the engine, never once per queue movement.
type progress struct {
	// writing is held while a queue report is written, and taken by a
	// release's work before it starts, so that a report never lands after
	// the outcome it would hide.
	writing sync.Mutex

	mu sync.Mutex
	// queued holds the releases dispatched to a shard and not started,
	// with when they were dispatched.
	queued map[frame.Ref]time.Time
	// reported holds when a queue report was last written per release.
	reported map[frame.Ref]time.Time
	// dirty holds the releases with an in-progress status on the server
	// that their next finish must overwrite.
	dirty map[frame.Ref]bool
}

const (
	queuedEvery     = 15 * time.Second
	queuedPerSecond = 5
	queuedScan      = time.Second
)

func (p *progress) dispatched(ref frame.Ref, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.queued == nil {
		p.queued = map[frame.Ref]time.Time{}
	}
	if _, ok := p.queued[ref]; !ok {
		p.queued[ref] = now
	}
}

func (p *progress) started(ref frame.Ref) {
	p.writing.Lock()
	p.writing.Unlock() //nolint:staticcheck // waits for a report in flight
	p.forget(ref)
}

func (p *progress) forget(ref frame.Ref) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.queued, ref)
	delete(p.reported, ref)
}

func (p *progress) markDirty(ref frame.Ref) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty == nil {
		p.dirty = map[frame.Ref]bool{}
	}
	p.dirty[ref] = true
}

// takeDirty reports whether ref has an in-progress status on the server,
// and forgets it.
func (p *progress) takeDirty(ref frame.Ref) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.dirty[ref]
	delete(p.dirty, ref)
	return d
}

// due returns the queued releases to report now, longest waiting first
// (map order is fine: the rate bound is per scan).
func (p *progress) due(now time.Time, after time.Duration) []frame.Ref {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []frame.Ref
	for ref, at := range p.queued {
		if now.Sub(at) < after || now.Sub(p.reported[ref]) < queuedEvery {
			continue
		}
		out = append(out, ref)
		if len(out) == queuedPerSecond*int(queuedScan/time.Second) {
			break
		}
	}
	return out
}

func (p *progress) wrote(ref frame.Ref, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reported == nil {
		p.reported = map[frame.Ref]time.Time{}
	}
	p.reported[ref] = now
}

// ReportQueues writes the queue position of releases that have waited
// longer than ProgressAfter, until ctx ends.
func (r *Reconciler) ReportQueues(ctx context.Context) error {
	if r.opts.ProgressAfter < 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(queuedScan)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, ref := range r.progress.due(time.Now(), r.opts.ProgressAfter) {
			r.progress.writing.Lock()
			r.reportQueued(ctx, ref)
			r.progress.writing.Unlock()
		}
	}
}

func (r *Reconciler) reportQueued(ctx context.Context, ref frame.Ref) {
	obj := &helmv2.HelmRelease{}
	if err := r.deps.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj); err != nil {
		r.progress.forget(ref)
		return
	}
	tenant := r.TenantOf(obj)
	place, ok := r.deps.Pool.Queued(tenant, ref.String())
	if !ok {
		// Running, or backing off after a failure its status tells: look
		// again no sooner than a report would be rewritten.
		r.progress.wrote(ref, time.Now())
		return
	}
	// A release that is Ready for its spec keeps Ready while a periodic
	// check waits its turn: the check most often changes nothing.
	if c := conditions.Get(obj, meta.ReadyCondition); c != nil && c.Status == metav1.ConditionTrue &&
		c.ObservedGeneration == obj.Generation && frame.HandledRequest(obj) == obj.Status.LastHandledReconcileAt {
		r.progress.wrote(ref, time.Now())
		return
	}
	msg := fmt.Sprintf("Queued on %s: %s", place, place.Reason(tenant))
	if r.writeInProgress(ctx, obj, ref, QueuedReason, msg) {
		r.progress.wrote(ref, time.Now())
	}
}

// writeInProgress writes Reconciling=True and Ready=Unknown with reason and
// msg, in one status patch, unless they are already there.
func (r *Reconciler) writeInProgress(ctx context.Context, obj *helmv2.HelmRelease, ref frame.Ref, reason, msg string) bool {
	if c := conditions.Get(obj, meta.ReadyCondition); c != nil && c.Status == metav1.ConditionUnknown &&
		c.Reason == reason && c.Message == msg {
		return true
	}
	orig := obj.DeepCopy()
	conditions.MarkReconciling(obj, reason, "%s", msg)
	conditions.MarkUnknown(obj, meta.ReadyCondition, reason, "%s", msg)
	conditions.Delete(obj, meta.StalledCondition)
	if !r.deps.MayWrite(ctx, helmv2.HelmReleaseKind, obj) {
		return false
	}
	r.progress.markDirty(ref)
	if err := r.deps.Client.Status().Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		r.deps.Logger().V(1).Info("writing in-progress status", "name", ref.Name, "namespace", ref.Namespace, "error", err.Error())
		return false
	}
	return true
}

// actionProgress returns a ReconcileOptions.Starting for obj that writes
// Flux's "Running '<action>' action with timeout of <t>" once the action
// has run for ProgressAfter, and a stop func that cancels that write, or
// waits for it to end, before the caller writes the outcome.
func (r *Reconciler) actionProgress(ctx context.Context, obj *helmv2.HelmRelease, ref frame.Ref) (func(helm.Action, time.Duration), func()) {
	var (
		mu      sync.Mutex
		timer   *time.Timer
		stopped bool // the outcome is being written: no report may follow
	)
	cur := obj.DeepCopy()
	starting := func(a helm.Action, timeout time.Duration) {
		r.deps.Logger().Info("Helm action started", "controller", "helmrelease", "controllerKind", helmv2.HelmReleaseKind,
			"name", ref.Name, "namespace", ref.Namespace, "action", string(a),
			"release", obj.GetReleaseNamespace()+"/"+ReleaseName(obj), "timeout", timeout.String())
		if r.opts.ProgressAfter < 0 {
			return
		}
		msg := fmt.Sprintf("Running '%s' action with timeout of %s", a, timeout)
		mu.Lock()
		defer mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
		if stopped {
			return
		}
		timer = time.AfterFunc(r.opts.ProgressAfter, func() {
			mu.Lock()
			defer mu.Unlock()
			// A timer that fired just before stop took the lock must not
			// write after the outcome (found at 10,000 releases: a release
			// left Ready=Unknown "Running 'install' action" after it was
			// installed).
			if stopped {
				return
			}
			if ctx.Err() == nil && r.writeInProgress(ctx, cur, ref, meta.ProgressingReason, msg) {
				cur = cur.DeepCopy()
			}
		})
	}
	stop := func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
	}
	return starting, stop
}

// StatusRewritten tells whether a HelmRelease's in-progress status was
// written since the reconcile read it (Finisher.Rewritten).
func (r *Reconciler) StatusRewritten(ref frame.Ref) bool {
	return ref.Kind == helmv2.HelmReleaseKind && r.progress.takeDirty(ref)
}
