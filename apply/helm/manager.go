package helm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/storage"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-aio/health"
)

// Holder identifies a process that acts on releases. It is recorded on
// every release revision this package writes (see the package doc).
type Holder struct {
	// ID names the process, for example the Pod name. Two incarnations of
	// one process share the ID and differ by Start.
	ID string
	// Start is when the process started.
	Start time.Time
	// Claim is what gave the process the right to write the revision, as
	// Options.Claim named it when the action started, for example the
	// term of a shard's Lease; empty without Options.Claim. HolderAlive
	// can tell from it that the holder has lost that right while it
	// still runs.
	Claim string
}

func (h Holder) String() string {
	if h.ID == "" {
		return "(none)"
	}
	return h.ID + "@" + h.Start.UTC().Format(time.RFC3339Nano)
}

// Event reports the start or the end of an action on a release, for
// instrumentation and tests.
type Event struct {
	// Release is storageNamespace/name.
	Release string
	// Action is the action.
	Action Action
	// Done is false when the action starts and true when it ends.
	Done bool
	// Err is the action's error when Done.
	Err error
}

// Options configures a Manager. The zero value works.
type Options struct {
	// Holder is recorded on the releases this Manager writes.
	// Default: ID is the host name, Start is the time New was called.
	Holder Holder
	// HolderAlive tells whether a holder other than this Manager's (and
	// other than an older incarnation of it) still runs. Default: nil,
	// which treats every other holder as dead, as is right when a single
	// active engine (leader election, sharding) owns the releases. With
	// replicas, it says whether the holder still holds its Lease (see the
	// package doc).
	HolderAlive func(Holder) bool
	// Claim, when set, names what gives this process the right to write
	// the records of an action, from the action's ctx (the engine: the
	// shard and the term of the shard's Lease). It is recorded on the
	// revisions the action writes (LabelHolderClaim), so that HolderAlive
	// can tell a live holder's pending revision from one it can no longer
	// finish. It must be a valid label value. Default: nil, nothing
	// recorded.
	Claim func(ctx context.Context) string
	// Fence, when set, is called with the action's ctx right before every
	// write of a release record (the create, update or delete of a release
	// Secret). An error refuses the write: the action fails with an error
	// that wraps it and writes no further record of the release. The
	// engine checks there that this replica still holds the Lease of the
	// release's shard (see the package doc). Default: nil, no check.
	Fence func(ctx context.Context, rel Release) error
	// Observe, when set, is called synchronously at the start and the end
	// of every action. Default: nil.
	Observe func(Event)
	// Logger receives Helm's logs. Default: discarded.
	Logger *slog.Logger
	// Waiter serves the kstatus waits of releases (Spec.Wait), so that an
	// engine runs one Waiter for its releases and its other waits. It must
	// reach the API server as the rest.Config given to New does.
	// Default: a Waiter of that rest.Config.
	Waiter *health.Waiter
	// Cache, when set, answers from watches whether a release has any
	// record and whether an object Helm is about to create exists, for
	// releases applied as the Manager's own identity (see Cache). The
	// caller runs it. Default: nil, Helm asks the API server.
	Cache *Cache
	// PendingAfter is how long an install, upgrade or rollback may run
	// before its pending release record is written. An action done sooner
	// writes its revision once, already deployed or failed; one that takes
	// longer shows as pending (helm status, helm list --pending) as with
	// Helm. Either way the revision is fenced before anything is applied.
	// A revision whose chart has hooks is always written pending first,
	// as Helm does. Default: 0, written at once as Helm does.
	PendingAfter time.Duration
	// Now returns the current time, which Reconcile records on failures
	// and measures retry intervals by (State.LastFailure, Next.After).
	// Default: time.Now.
	Now func() time.Time
	// MaxReleaseRecordBytes bounds a release record once decompressed:
	// anyone who can write a Secret in a storage namespace writes records
	// there, and a few hundred kilobytes of gzip inflate to gigabytes. A
	// larger record is not inflated further than this, and every action
	// on its release fails with a *RecordTooLargeError. Zero or negative:
	// DefaultMaxReleaseRecordBytes.
	MaxReleaseRecordBytes int64
}

// DefaultMaxReleaseRecordBytes is the default of
// Options.MaxReleaseRecordBytes, 64 MiB. A Secret holds at most 1 MiB,
// and Helm's records (JSON of YAML and of the chart's files) compress 5
// to 20 times, so the largest record a chart can have inflates to some
// 20 MiB; what inflates past 64 MiB is a compression bomb, not a chart.
const DefaultMaxReleaseRecordBytes = 64 << 20

// Manager runs Helm actions in-process. It is safe for concurrent use:
// actions on different releases run in parallel, and actions on one
// release run one at a time.
type Manager struct {
	cfg   *rest.Config
	opts  Options
	log   *slog.Logger
	locks keyedMutex

	mu      sync.Mutex
	clients map[string]*clients // by impersonated user
	charts  boundedCache[[]byte]
	parsed  boundedCache[*chartv2.Chart]
	health  *health.Waiter
}

type clients struct {
	getter *restGetter
	cs     kubernetes.Interface
	// dyn reads the objects a plan needs (Preview).
	dyn dynamic.Interface
}

// New returns a Manager that talks to the API server of cfg.
func New(cfg *rest.Config, opts Options) (*Manager, error) {
	if cfg == nil {
		return nil, errors.New("helm: nil rest.Config")
	}
	if opts.Holder.ID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "pid-" + strconv.Itoa(os.Getpid())
		}
		opts.Holder.ID = h
	}
	if opts.Holder.Start.IsZero() {
		opts.Holder.Start = time.Now()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hw := opts.Waiter
	if hw == nil {
		var err error
		if hw, err = health.NewWaiter(cfg, health.WaiterOptions{}); err != nil {
			return nil, err
		}
	}
	return &Manager{
		cfg:     rest.CopyConfig(cfg),
		opts:    opts,
		log:     log,
		clients: map[string]*clients{},
		charts:  boundedCache[[]byte]{max: 64},
		parsed:  boundedCache[*chartv2.Chart]{max: 32},
		health:  hw,
	}, nil
}

// Holder returns the identity this Manager records on releases.
func (m *Manager) Holder() Holder { return m.opts.Holder }

func (m *Manager) clientsFor(rel Release) (*clients, error) {
	user := rel.impersonate()
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.clients[user]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(m.cfg)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	getterCfg := cfg
	if user == "" && m.opts.Cache != nil {
		getterCfg = rest.CopyConfig(cfg)
		getterCfg.Wrap(m.opts.Cache.transport)
	}
	g, err := newRESTGetter(getterCfg)
	if err != nil {
		return nil, err
	}
	// Release Secrets travel as protobuf: cheaper to encode and decode on
	// both ends than JSON, for the largest objects a release writes.
	csCfg := rest.CopyConfig(cfg)
	csCfg.ContentType = "application/vnd.kubernetes.protobuf"
	csCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(csCfg)
	if err != nil {
		return nil, err
	}
	// Through the Cache's transport, as Helm's own reads: an object the
	// Cache knows absent costs no request.
	dyn, err := dynamic.NewForConfig(getterCfg)
	if err != nil {
		return nil, err
	}
	c := &clients{getter: g, cs: cs, dyn: dyn}
	m.clients[user] = c
	return c, nil
}

// session is the Helm configuration of one locked call on one release.
type session struct {
	m   *Manager
	rel Release
	ctx context.Context
	cfg *action.Configuration
	kc  *kube.Client
	c   *clients
	// records is the session's storage driver, whose fence stops its
	// writes after the first refusal.
	records *releaseSecrets
	// written logs the records the session's actions wrote.
	written *writeLog
	// planning, when set, plans the install or upgrade the session runs
	// from its own render (Preview).
	planning *planStep
}

func (m *Manager) newSession(ctx context.Context, rel Release, maxHistory int) (*session, error) {
	c, err := m.clientsFor(rel)
	if err != nil {
		return nil, err
	}
	h := m.log.Handler()
	kc := kube.New(c.getter)
	kc.Namespace = rel.namespace()
	kc.SetLogger(h)
	d := &releaseSecrets{impl: c.cs.CoreV1().Secrets(rel.storageNamespace()), pendingAfter: m.opts.PendingAfter,
		maxRecord: m.opts.MaxReleaseRecordBytes}
	if fence := m.opts.Fence; fence != nil {
		d.fence = func() error { return fence(ctx, rel) }
	}
	holder := m.opts.Holder
	if m.opts.Claim != nil {
		holder.Claim = m.opts.Claim(ctx)
	}
	written := &writeLog{}
	memo := newMemoDriver(&stampDriver{Driver: d, holder: holder, written: written})
	if rel.impersonate() == "" && m.opts.Cache != nil {
		ns, c := rel.storageNamespace(), m.opts.Cache
		memo.none = func(name string) bool { return c.noRecords(ns, name) }
		memo.wrote = func(name string, version int) { c.wroteRecord(ns, name, version) }
	}
	store := storage.Init(memo)
	store.MaxHistory = maxHistory
	store.SetLogger(h)
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(h))
	cfg.RESTClientGetter = c.getter
	cfg.KubeClient = kubeClient{Client: kc, discovery: c.getter.discovery, ctx: ctx, health: m.health, stopped: d.stopped}
	cfg.Releases = store
	cfg.HookOutputFunc = func(_, _, _ string) io.Writer { return io.Discard }
	return &session{m: m, rel: rel, ctx: ctx, cfg: cfg, kc: kc, c: c, records: d, written: written}, nil
}

// locked runs fn holding the release's lock. fn runs in its own goroutine
// and keeps the lock until it returns, even when ctx ends first and locked
// returns the zero T with ctx's error: Helm finishes or fails its step (its
// waits follow ctx) before another action may start on the release.
func locked[T any](ctx context.Context, m *Manager, rel Release, a Action, fn func() (T, error)) (T, error) {
	var zero T
	if rel.Name == "" {
		return zero, wrap(rel, a, errors.New("release name is empty"))
	}
	key := rel.String()
	if err := m.locks.lock(ctx, key); err != nil {
		return zero, wrap(rel, a, err)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer m.locks.unlock(key)
		var r result
		r.err = safely(func() error {
			var err error
			r.v, err = fn()
			return err
		})
		done <- r
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, wrap(rel, a, fmt.Errorf("%w (the action finishes in the background and then releases its lock)", ctx.Err()))
	}
}

// step runs one Helm action with panic recovery and instrumentation.
// A refused write of a release record fails the step even where Helm
// only logs it (its failure path and the superseding of the previous
// revision ignore storage errors).
func (s *session) step(a Action, fn func() error) error {
	if obs := s.m.opts.Observe; obs != nil {
		obs(Event{Release: s.rel.String(), Action: a})
	}
	s.written.action = a
	err := safely(fn)
	// A revision Helm left pending (its action ended without finishing
	// it) is written now, as Helm would have.
	if ferr := s.records.flush(); ferr != nil && err == nil {
		err = ferr
	}
	if stop := s.records.stopped(); stop != nil && !errors.Is(err, stop) {
		if err == nil {
			err = stop
		} else {
			err = fmt.Errorf("%w (and the action failed: %w)", stop, err)
		}
	}
	err = wrap(s.rel, a, err)
	if obs := s.m.opts.Observe; obs != nil {
		obs(Event{Release: s.rel.String(), Action: a, Done: true, Err: err})
	}
	return err
}

func safely(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanic, r, debug.Stack())
		}
	}()
	return fn()
}

// keyedMutex is a set of mutexes by key whose lock honours a context.
// Entries live only while locked or awaited, so it does not grow with the
// number of releases ever seen.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyEntry
}

type keyEntry struct {
	ch   chan struct{}
	refs int
}

func (k *keyedMutex) lock(ctx context.Context, key string) error {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyEntry{}
	}
	e, ok := k.m[key]
	if !ok {
		e = &keyEntry{ch: make(chan struct{}, 1)}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	select {
	case e.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		k.release(key, e)
		return ctx.Err()
	}
}

func (k *keyedMutex) unlock(key string) {
	k.mu.Lock()
	e := k.m[key]
	k.mu.Unlock()
	<-e.ch
	k.release(key, e)
}

func (k *keyedMutex) release(key string, e *keyEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e.refs--
	if e.refs == 0 {
		delete(k.m, key)
	}
}

// held reports whether an action holds key's lock.
func (k *keyedMutex) held(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.m[key]
	return ok && len(e.ch) > 0
}
