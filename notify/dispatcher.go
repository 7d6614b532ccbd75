package notify

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// ErrProviderNotFound is reported for an Alert whose Provider the
// Dispatcher does not know.
var ErrProviderNotFound = errors.New("provider not found")

// DispatcherOptions configure a Dispatcher. The zero value works.
type DispatcherOptions struct {
	// RateLimit is how long the same event for the same object is not sent
	// again (Flux's --rate-limit-interval). Default: 5m; negative: off.
	RateLimit time.Duration
	// RateLimitKeys bounds the events the rate limit remembers.
	// Default: 100000.
	RateLimitKeys int
	// QueueSize is the number of events each Provider's queue holds; an
	// event that finds the queue full is dropped and counted. Default: 100.
	QueueSize int
	// Retries is the number of retries of a failed send. Default: 3.
	Retries int
	// Backoff is the wait before the first retry, doubled for each next
	// one up to MaxBackoff. Defaults: 1s and 30s.
	Backoff, MaxBackoff time.Duration
	// Registerer receives the metrics. Default: none.
	Registerer prometheus.Registerer
	// Report, when set, is called after each send ends (sent, or failed
	// after the retries), and when an Alert's event cannot be queued (its
	// Provider is unknown or unusable, or its queue is full: once until
	// the queue drains). It runs on the sender's goroutine or in Record:
	// it must not block.
	Report func(Delivery)
	// Dial opens every connection the Providers' senders make: to a
	// Provider's address or, when spec.proxy is set, to the proxy. A
	// refusal fails the send with the hook's error. The engine passes its
	// destination policy here. Default: (&net.Dialer{Timeout: 30 *
	// time.Second}).DialContext.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (o DispatcherOptions) withDefaults() DispatcherOptions {
	if o.RateLimit == 0 {
		o.RateLimit = 5 * time.Minute
	}
	if o.RateLimitKeys <= 0 {
		o.RateLimitKeys = 100000
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 100
	}
	if o.Retries == 0 {
		o.Retries = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	return o
}

// Delivery is the outcome of sending one event for one Alert.
type Delivery struct {
	Alert, Provider types.NamespacedName
	Event           *Event
	// Attempts is the number of sends tried (0: never queued).
	Attempts int
	// Err is nil when the event was sent.
	Err error
	// Dropped is set when the Provider's queue was full.
	Dropped bool
}

// Dispatcher sends events to the Providers of the Alerts that match them.
// It is safe for concurrent use. Nothing is sent until Start.
type Dispatcher struct {
	opts    DispatcherOptions
	limiter *limiter
	m       *metrics

	mu      sync.RWMutex
	alerts  map[types.NamespacedName]*Alert
	queues  map[types.NamespacedName]*queue
	ctx     context.Context // set by Start
	workers sync.WaitGroup
}

// NewDispatcher returns a Dispatcher; Start runs its senders.
func NewDispatcher(opts DispatcherOptions) *Dispatcher {
	opts = opts.withDefaults()
	return &Dispatcher{
		opts:    opts,
		limiter: newLimiter(opts.RateLimit, opts.RateLimitKeys),
		m:       newMetrics(opts.Registerer),
		alerts:  map[types.NamespacedName]*Alert{},
		queues:  map[types.NamespacedName]*queue{},
	}
}

// Start runs a sender per Provider until ctx ends.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	d.ctx = ctx
	for _, q := range d.queues {
		d.startWorker(q)
	}
	d.mu.Unlock()
	<-ctx.Done()
	d.workers.Wait()
	return nil
}

// SetAlert adds or replaces the Alert ref.
func (d *Dispatcher) SetAlert(ref types.NamespacedName, a Alert) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.alerts[ref] = &a
}

// DeleteAlert forgets the Alert ref.
func (d *Dispatcher) DeleteAlert(ref types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.alerts, ref)
}

// SetProvider adds or replaces the Provider ref. An invalid Provider is
// still recorded, so that its Alerts report the error; the error is
// returned.
func (d *Dispatcher) SetProvider(ref types.NamespacedName, p Provider) error {
	st := &providerState{suspend: p.Suspend}
	st.sender, st.err = newSender(p, d.opts.Dial)
	d.SetProviderError(ref, st.err)
	if st.err == nil {
		d.mu.RLock()
		if q, ok := d.queues[ref]; ok {
			q.state.Store(st)
		}
		d.mu.RUnlock()
	}
	return st.err
}

// SetProviderError records that the Provider ref cannot be used (its
// Secret is missing, say): its Alerts report err instead of sending.
func (d *Dispatcher) SetProviderError(ref types.NamespacedName, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	q, ok := d.queues[ref]
	if !ok {
		q = &queue{ref: ref, ch: make(chan item, d.opts.QueueSize)}
		q.state.Store(&providerState{err: ErrProviderNotFound})
		d.queues[ref] = q
		if d.ctx != nil {
			d.startWorker(q)
		}
	}
	if err != nil {
		q.state.Store(&providerState{err: err})
	}
}

// DeleteProvider forgets the Provider ref and drops its queue.
func (d *Dispatcher) DeleteProvider(ref types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if q, ok := d.queues[ref]; ok {
		if q.cancel != nil {
			q.cancel()
		}
		delete(d.queues, ref)
		d.m.queued.DeleteLabelValues(ref.String())
	}
}

// Record sends ev to every Alert that matches it, without blocking.
// labels are the labels of ev's object. ev must not be changed afterwards.
func (d *Dispatcher) Record(ev *Event, labels map[string]string) {
	type match struct {
		ref   types.NamespacedName
		alert *Alert
		q     *queue
	}
	var matches []match
	d.mu.RLock()
	for ref, a := range d.alerts {
		if a.Matches(ref.Namespace, ev, labels) {
			matches = append(matches, match{ref: ref, alert: a, q: d.queues[a.Provider]})
		}
	}
	d.mu.RUnlock()
	if len(matches) == 0 {
		return
	}
	// An event none of whose Alerts has its Provider yet (an Alert
	// reconciled before its Provider) is reported, not sent, and must not
	// take the rate limit's slot: the same event a moment later is sent.
	deliverable := slices.ContainsFunc(matches, func(m match) bool { return m.q != nil })
	if deliverable && !d.limiter.allow(rateKey(ev)) {
		d.m.rateLimited.Inc()
		return
	}
	for _, mt := range matches {
		dl := Delivery{Alert: mt.ref, Provider: mt.alert.Provider, Event: ev}
		if mt.q == nil {
			dl.Err = ErrProviderNotFound
			d.m.result(mt.alert.Provider, "failed")
			d.report(dl)
			continue
		}
		st := mt.q.state.Load()
		switch {
		case st.suspend:
			continue
		case st.err != nil:
			dl.Err = st.err
			d.m.result(mt.alert.Provider, "failed")
			d.report(dl)
			continue
		}
		select {
		case mt.q.ch <- item{alert: mt.ref, ev: mt.alert.notification(ev)}:
			d.m.queued.WithLabelValues(mt.q.ref.String()).Inc()
		default:
			d.m.result(mt.alert.Provider, "dropped")
			if mt.q.full.CompareAndSwap(false, true) {
				dl.Dropped, dl.Err = true, errors.New("the provider's queue is full: events are dropped until it drains")
				d.report(dl)
			}
		}
	}
}

func (d *Dispatcher) report(dl Delivery) {
	if d.opts.Report != nil {
		d.opts.Report(dl)
	}
}

// providerState is what a queue's sender uses, replaced whole when the
// Provider changes.
type providerState struct {
	sender  sender
	suspend bool
	err     error
}

type item struct {
	alert types.NamespacedName
	ev    *Event
}

// queue holds a Provider's events; one goroutine sends them in order.
type queue struct {
	ref    types.NamespacedName
	ch     chan item
	state  atomic.Pointer[providerState]
	full   atomic.Bool
	cancel context.CancelFunc
}

// startWorker runs q's sender; d.mu is held.
func (d *Dispatcher) startWorker(q *queue) {
	ctx, cancel := context.WithCancel(d.ctx)
	q.cancel = cancel
	d.workers.Add(1)
	go func() {
		defer d.workers.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case it := <-q.ch:
				d.m.queued.WithLabelValues(q.ref.String()).Dec()
				d.deliver(ctx, q, it)
			}
		}
	}()
}

// deliver sends one event, retrying temporary failures with backoff.
func (d *Dispatcher) deliver(ctx context.Context, q *queue, it item) {
	dl := Delivery{Alert: it.alert, Provider: q.ref, Event: it.ev}
	wait := d.opts.Backoff
	for {
		st := q.state.Load()
		if st.suspend {
			return
		}
		if st.err != nil {
			dl.Err = st.err
			break
		}
		dl.Attempts++
		dl.Err = st.sender.post(ctx, it.ev)
		if dl.Err == nil || !temporary(dl.Err) || dl.Attempts > d.opts.Retries || ctx.Err() != nil {
			break
		}
		d.m.result(q.ref, "retried")
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, d.opts.MaxBackoff)
	}
	if dl.Err == nil {
		d.m.result(q.ref, "sent")
		q.full.Store(false)
	} else {
		d.m.result(q.ref, "failed")
	}
	d.report(dl)
}

// temporary tells whether a send error may pass on retry: transport errors
// and 429/5xx answers.
func temporary(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Temporary()
	}
	return true
}
