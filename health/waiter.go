package health

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// WaiterOptions configures a Waiter. The zero value works.
type WaiterOptions struct {
	// Mapper maps kinds to resources. Default: a discovery-backed mapper
	// of the rest.Config.
	Mapper meta.RESTMapper
	// Unreachable ends a wait with ErrUnreachable once every attempt to
	// list or watch has failed for this long with nothing heard from the
	// API server in between, instead of waiting out the wait's timeout:
	// for a remote cluster, whose death must not hold a release (and its
	// worker) for the release's timeout. Default: 0, a wait outlasts any
	// outage until its timeout, as it should for the local API server.
	Unreachable time.Duration
}

// Waiter waits for objects to become ready. It watches them (one watch per
// resource and namespace, or per object when it is alone in its namespace)
// and recomputes an object's status only when the API server reports a
// change, instead of polling each object. It never writes objects and is
// safe for concurrent use: one Waiter, with its HTTP client, dynamic client
// and REST mapper, serves every wait of a process, each wait with its own
// Checker.
type Waiter struct {
	dyn         dynamic.Interface
	mapper      meta.RESTMapper
	unreachable time.Duration
	// probe asks the API server for its version (set with unreachable):
	// a watch whose server died retries in silence, so a wait that must
	// notice asks.
	probe func(context.Context) error
}

// NewWaiter returns a Waiter on the API server of cfg.
func NewWaiter(cfg *rest.Config, opts WaiterOptions) (*Waiter, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS < 100 {
		cfg.QPS, cfg.Burst = 100, 200
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the HTTP client: %w", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	mapper := opts.Mapper
	if mapper == nil {
		if mapper, err = apiutil.NewDynamicRESTMapper(cfg, hc); err != nil {
			return nil, fmt.Errorf("creating the REST mapper: %w", err)
		}
	}
	w := &Waiter{dyn: dyn, mapper: mapper, unreachable: opts.Unreachable}
	if opts.Unreachable > 0 {
		dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
		if err != nil {
			return nil, fmt.Errorf("creating the discovery client: %w", err)
		}
		rc := dc.RESTClient()
		w.probe = func(ctx context.Context) error { return rc.Get().AbsPath("/version").Do(ctx).Error() }
	}
	return w, nil
}

// WaitOptions configures one wait. The zero value works.
type WaitOptions struct {
	// Timeout bounds the wait. Default: 5 minutes.
	Timeout time.Duration
	// Checker decides each object's status. Default: nil, kstatus only.
	Checker *Checker
	// FailFast ends the wait as soon as one object is Failed. Default:
	// false, a Failed object may still recover until the timeout.
	FailFast bool
	// OnChange, when set, is called with an object's status each time it
	// changes. It runs on a watch goroutine and must not block.
	OnChange func(ObjectStatus)
	// OnDone, when set, is called once when the wait ends, with the same
	// report and error as Wait returns. It runs on its own goroutine.
	OnDone func(Report, error)
}

// Wait blocks until every object in refs is Current, the timeout passes, an
// object fails (with FailFast) or ctx ends. It returns the report of every
// object; the error is nil when all are ready, and a *NotReadyError
// otherwise.
func (w *Waiter) Wait(ctx context.Context, refs []ObjectRef, opts WaitOptions) (Report, error) {
	h := w.Start(ctx, refs, opts)
	<-h.Done()
	return h.Result()
}

// Start begins a wait and returns at once: the caller is notified through
// Handle.Done or WaitOptions.OnDone, and may cancel the wait, for example
// when a new revision arrives. No goroutine of the caller is held.
func (w *Waiter) Start(ctx context.Context, refs []ObjectRef, opts WaitOptions) *Handle {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, opts.Timeout, ErrTimeout)
	ctx, cancelCause := context.WithCancelCause(ctx)
	h := &Handle{
		cancel: func() {
			cancelCause(context.Canceled)
			cancelTimeout()
		},
		giveUp:      cancelCause,
		unreachable: w.unreachable,
		done:        make(chan struct{}),
		statuses:    make(map[objectKey]*ObjectStatus, len(refs)),
		opts:        opts,
		checker:     opts.Checker,
		allDone:     make(chan struct{}),
	}
	for _, r := range refs {
		h.statuses[keyOf(r)] = &ObjectStatus{Object: r, Status: Unknown, Message: "not observed yet"}
	}
	h.pending = len(h.statuses)
	go h.run(ctx, w)
	return h
}

// Handle is a running wait.
type Handle struct {
	cancel context.CancelFunc
	// giveUp ends the wait with a cause; unreachable is the Waiter's
	// Unreachable, and failingSince when the watches started failing with
	// nothing heard since (zero: not failing).
	giveUp       context.CancelCauseFunc
	unreachable  time.Duration
	failingSince time.Time
	done         chan struct{}
	opts         WaitOptions
	checker      *Checker

	mu       sync.Mutex
	statuses map[objectKey]*ObjectStatus
	pending  int // objects not Current
	failed   bool
	allDone  chan struct{}
	closed   bool
	report   Report
	err      error
}

// Done is closed when the wait has ended.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Cancel ends the wait early; Result then returns a *NotReadyError that
// wraps context.Canceled, unless everything was already ready.
func (h *Handle) Cancel() { h.cancel() }

// Result returns the final report and error once Done is closed, and the
// current report with a nil error before.
func (h *Handle) Result() (Report, error) {
	select {
	case <-h.done:
		return h.report, h.err
	default:
		return h.Report(), nil
	}
}

// Report returns a snapshot of every object's status.
func (h *Handle) Report() Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snapshotLocked()
}

func (h *Handle) snapshotLocked() Report {
	out := make([]ObjectStatus, 0, len(h.statuses))
	for _, s := range h.statuses {
		out = append(out, *s)
	}
	sortStatuses(out)
	return Report{Objects: out}
}

type objectKey struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

func keyOf(r ObjectRef) objectKey {
	return objectKey{gk: r.groupKind(), namespace: r.Namespace, name: r.Name}
}

// run starts the watches, waits for the end and publishes the result.
func (h *Handle) run(ctx context.Context, w *Waiter) {
	defer h.cancel()
	if h.pending > 0 {
		if w.probe != nil {
			go h.probe(ctx, w.probe)
		}
		h.startWatches(ctx, w)
		select {
		case <-ctx.Done():
		case <-h.allDone:
		}
	}
	h.mu.Lock()
	h.closed = true
	h.report = h.snapshotLocked()
	switch {
	case h.pending == 0:
	case h.failed && h.opts.FailFast:
		h.err = &NotReadyError{Report: h.report, Err: ErrFailed}
	default:
		h.err = &NotReadyError{Report: h.report, Err: context.Cause(ctx)}
	}
	h.mu.Unlock()
	close(h.done)
	if h.opts.OnDone != nil {
		h.opts.OnDone(h.report, h.err)
	}
}

// watchTarget is one watch: a resource in a namespace, optionally narrowed
// to one name.
type watchTarget struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string // "" watches the whole namespace
}

func (h *Handle) startWatches(ctx context.Context, w *Waiter) {
	groups := map[watchTarget][]objectKey{}
	for k, s := range h.statuses {
		m, err := w.mapper.RESTMapping(k.gk, s.Object.Version)
		if err != nil {
			msg := "mapping the kind: " + err.Error()
			if meta.IsNoMatchError(err) {
				msg = fmt.Sprintf("kind %s is not served by the API server: its CustomResourceDefinition is missing", k.gk)
			}
			h.set(k, Result{Status: NotFound, Message: msg})
			continue
		}
		ns := k.namespace
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			ns = ""
		}
		t := watchTarget{gvr: m.Resource, namespace: ns}
		groups[t] = append(groups[t], k)
	}
	for t, keys := range groups {
		if len(keys) == 1 {
			t.name = keys[0].name
		}
		h.watch(ctx, w, t, keys)
	}
}

func (h *Handle) watch(ctx context.Context, w *Waiter, t watchTarget, keys []objectKey) {
	tweak := func(o *metav1.ListOptions) {
		if t.name != "" {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", t.name).String()
		}
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(w.dyn, t.gvr, t.namespace, 0, cache.Indexers{}, tweak).Informer()
	_ = inf.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			u.SetManagedFields(nil)
		}
		return obj, nil
	})
	gk := keys[0].gk
	wanted := make(map[objectKey]bool, len(keys))
	for _, k := range keys {
		wanted[k] = true
	}
	observe := func(obj any) {
		h.heard()
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		k := objectKey{gk: gk, namespace: u.GetNamespace(), name: u.GetName()}
		if !wanted[k] {
			return
		}
		r, _ := h.checker.Compute(u)
		h.set(k, r)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				k := objectKey{gk: gk, namespace: u.GetNamespace(), name: u.GetName()}
				if wanted[k] {
					h.set(k, Result{Status: NotFound, Message: "deleted"})
				}
			}
		},
	})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		for k := range wanted {
			h.noteWatchError(k, err)
		}
	})
	go inf.RunWithContext(ctx)
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return
		}
		h.heard()
		// Whatever the initial list did not hold does not exist.
		for k := range wanted {
			h.markMissing(k)
		}
	}()
}

// set records the status of k and ends the wait when all are Current.
func (h *Handle) set(k objectKey, r Result) {
	h.mu.Lock()
	s := h.statuses[k]
	if h.closed || s == nil || (s.Status == r.Status && s.Message == r.Message) {
		h.mu.Unlock()
		return
	}
	if s.Status == Current {
		h.pending++
	}
	if r.Status == Current {
		h.pending--
	}
	s.Status, s.Message = r.Status, r.Message
	if r.Status == Failed {
		h.failed = true
	}
	end := h.pending == 0 || (r.Status == Failed && h.opts.FailFast)
	changed := *s
	h.mu.Unlock()
	if h.opts.OnChange != nil {
		h.opts.OnChange(changed)
	}
	if end {
		h.signalEnd()
	}
}

func (h *Handle) signalEnd() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.allDone:
	default:
		close(h.allDone)
	}
}

func (h *Handle) markMissing(k objectKey) {
	h.mu.Lock()
	s := h.statuses[k]
	missing := s != nil && s.Status == Unknown && s.Message == "not observed yet"
	h.mu.Unlock()
	if missing {
		h.set(k, Result{Status: NotFound, Message: "the object does not exist"})
	}
}

// heard notes that the API server answered: an event or a synced list.
func (h *Handle) heard() {
	h.mu.Lock()
	h.failingSince = time.Time{}
	h.mu.Unlock()
}

// probe asks the API server for its version every third of Unreachable
// (at least every second) until the wait ends, and gives up on it once
// nothing has been heard for Unreachable.
func (h *Handle) probe(ctx context.Context, probe func(context.Context) error) {
	every := max(time.Second, h.unreachable/3)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := probe(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			h.heard()
		default:
			h.failing(err)
		}
	}
}

// failing notes a failed request, and ends the wait with ErrUnreachable
// once nothing has been heard for Unreachable.
func (h *Handle) failing(err error) {
	if h.unreachable <= 0 {
		return
	}
	h.mu.Lock()
	now := time.Now()
	if h.failingSince.IsZero() {
		h.failingSince = now
	}
	giveUp := now.Sub(h.failingSince) >= h.unreachable
	h.mu.Unlock()
	if giveUp {
		h.giveUp(fmt.Errorf("%w: nothing heard from it for %s: %w", ErrUnreachable, h.unreachable, err))
	}
}

func (h *Handle) noteWatchError(k objectKey, err error) {
	h.failing(err)
	h.mu.Lock()
	s := h.statuses[k]
	unseen := s != nil && s.Status == Unknown
	h.mu.Unlock()
	if unseen {
		h.set(k, Result{Status: Unknown, Message: "watch failed: " + err.Error()})
	}
}
