// Package controllers runs the engine's controllers: one per reconciled
// kind of the table (engine/internal/kinds) with its family's reconciler,
// the "dependencies" controller that wakes an object's dependents when it
// becomes ready, and the config watches that reconcile the users of a
// changed ConfigMap or Secret. It owns the work queues and the wake-ups
// (Enqueue, WakeKinds).
//
// It imports the shared rooms only; the facade hands it the reconcilers.
package controllers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/predicates"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	ctrlsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/kinds"
)

// wakeBuffer bounds the wake-up channel of each kind; a full channel is
// fed from a goroutine, so no wake-up is lost.
const wakeBuffer = 1024

var skipNameValidation = true

// Options are the engine's options the controllers follow.
type Options struct {
	// Concurrency is each controller's MaxConcurrentReconciles.
	Concurrency int
	// Kinds limits the reconciled kinds (empty: all).
	Kinds []string
	// WatchConfigsSelector selects the watched ConfigMaps and Secrets
	// (WatchAllConfigs, WatchNoConfigs or a label selector).
	WatchConfigsSelector string
}

// Deps is what the controllers use of the engine.
type Deps struct {
	// Manager runs the controllers.
	Manager manager.Manager
	// Graph holds the units' dependencies, whose dependents a readiness
	// change wakes.
	Graph *frame.Graph
	// Metrics forgets a deleted object's series.
	Metrics *frame.Metrics
	// Leading tells whether this replica leads (Setup's ownElection).
	Leading func() bool
}

// Kind is one reconciled kind with its family's reconciler.
type Kind struct {
	kinds.Kind
	Reconciler reconcile.Reconciler
}

// Controllers are the engine's controllers and their queues.
type Controllers struct {
	deps Deps
	opts Options
	// configs indexes the ConfigMaps and Secrets each HelmRelease and
	// Kustomization reads (ReadsConfigs).
	configs *frame.Graph
	// wake is each reconciled kind's wake-up channel, which its controller
	// reads when it starts.
	wake map[string]chan event.GenericEvent
	// queues are the work queues of the kinds' controllers, each set when
	// its controller starts.
	queues sync.Map // kind -> workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// New returns the controllers; Setup registers them with the manager.
// Enqueue works from the start: a wake-up before a controller runs waits
// in its channel.
func New(d Deps, o Options) *Controllers {
	c := &Controllers{deps: d, opts: o, configs: frame.NewGraph(), wake: map[string]chan event.GenericEvent{}}
	for _, k := range kinds.All() {
		// Not for a kind Options.Kinds leaves out: nothing would read its
		// channel.
		if k.Reconciled && c.Reconciles(k.Name) {
			c.wake[k.Name] = make(chan event.GenericEvent, wakeBuffer)
		}
	}
	return c
}

// Setup registers a controller per kind, the "dependencies" controller
// and the config watches. With ownElection (the engine elects its leader
// itself, not the manager), the leader's controllers run on every replica
// and reconcile only while Deps.Leading says this one leads.
func (c *Controllers) Setup(ks []Kind, ownElection bool) error {
	if err := c.setupControllers(ks, ownElection); err != nil {
		return err
	}
	return c.setupConfigWatches(ks)
}

// setupControllers registers a controller per kind. Each reacts to spec
// changes and reconcile requests (not to its own status writes), and to
// wake-ups sent by the engine when a dependency becomes ready or the gate
// opens. One more controller, "dependencies", watches every kind a unit
// can wait on and wakes the dependents of an object whose readiness
// changed, whatever their kind: one informer handler per kind, not one per
// kind and controller (each handler is a ring buffer and two goroutines,
// and sees every event of its kind).
func (c *Controllers) setupControllers(ks []Kind, ownElection bool) error {
	for _, k := range ks {
		kind := k.Name
		ch := c.wake[kind]
		if !c.Reconciles(kind) {
			continue
		}
		b := ctrl.NewControllerManagedBy(c.deps.Manager).
			Named(strings.ToLower(kind)). // Flux's controller names, in logs and metrics
			For(k.New(), builder.WithPredicates(predicate.Or(
				predicate.GenerationChangedPredicate{},
				predicates.ReconcileRequestedPredicate{},
				predicate.LabelChangedPredicate{},
				predicate.AnnotationChangedPredicate{},
			))).
			WatchesRawSource(ctrlsource.Channel(ch, &handler.EnqueueRequestForObject{})).
			// The queue, for wake-ups once the controller runs.
			WatchesRawSource(ctrlsource.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
				c.queues.Store(kind, q)
				return nil
			}))
		// The HelmRelease reconciler runs on every replica (each admits only
		// the releases of the shards it owns); the others on the leader.
		// With the engine's own election they run everywhere and do
		// nothing unless this replica leads; with an embedder's manager,
		// its election starts them. Either way standbys keep the informers
		// synced, so that a takeover starts warm.
		onLeader := !k.Sharded
		reconciler := k.Reconciler
		if onLeader && ownElection {
			onLeader, reconciler = false, leaderOnly{leading: c.deps.Leading, r: k.Reconciler}
		}
		err := b.
			WithOptions(controller.Options{
				MaxConcurrentReconciles: c.opts.Concurrency,
				// Several engines may share a process (tests, embedders).
				SkipNameValidation: &skipNameValidation,
				NeedLeaderElection: &onLeader,
				EnableWarmup:       &onLeader,
				RateLimiter:        rateLimiter(k.Kind),
			}).
			Complete(reconciler)
		if err != nil {
			return err
		}
	}
	return c.setupDependencies()
}

// Reconciles reports whether the engine runs kind's reconciler
// (Options.Kinds).
func (c *Controllers) Reconciles(kind string) bool {
	if len(c.opts.Kinds) == 0 {
		return true
	}
	return slices.Contains(c.opts.Kinds, kind)
}

// CheckKinds refuses a name in Options.Kinds that is no reconciled kind.
func CheckKinds(names, known []string) error {
	for _, n := range names {
		if !slices.Contains(known, n) {
			return fmt.Errorf("kind %q is not one the engine reconciles (%s)", n, strings.Join(known, ", "))
		}
	}
	return nil
}

// setupDependencies registers the "dependencies" controller: dependencies
// and sources wake their dependents through the shared cache (the event
// comes from the informer, so the woken reconcile reads the state that
// woke it), and an object's metrics go with it. It runs on every replica,
// as the HelmRelease reconciler does; its own queue stays empty.
func (c *Controllers) setupDependencies() error {
	every := false
	b := ctrl.NewControllerManagedBy(c.deps.Manager).Named("dependencies")
	// Every kind a unit can wait on: every reconciled kind, and
	// ExternalArtifact, which the ArtifactGenerator writes.
	for _, dep := range kinds.All() {
		kind, reconciled := dep.Name, dep.Reconciled && c.Reconciles(dep.Name)
		wake := func(o client.Object) {
			c.wakeDependents(frame.Ref{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()})
		}
		b = b.Watches(dep.New(), handler.Funcs{
			CreateFunc: func(_ context.Context, ev event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				wake(ev.Object)
			},
			UpdateFunc: func(_ context.Context, ev event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				wake(ev.ObjectNew)
			},
			GenericFunc: func(_ context.Context, ev event.GenericEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				wake(ev.Object)
			},
			DeleteFunc: func(_ context.Context, ev event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if reconciled {
					c.deps.Metrics.Forget(kind, ev.Object.GetNamespace(), ev.Object.GetName())
				}
				wake(ev.Object)
			},
		}, builder.WithPredicates(readinessChanged{}))
	}
	return b.WithOptions(controller.Options{SkipNameValidation: &skipNameValidation, NeedLeaderElection: &every}).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }))
}

// wakeDependents enqueues every object that depends on ref, in the
// controllers that run: one that has not started (a standby's, under an
// embedder's election) reconciles every object when it starts.
func (c *Controllers) wakeDependents(ref frame.Ref) {
	for _, d := range c.deps.Graph.Dependents(ref) {
		c.addToQueue(d)
	}
}

// addToQueue adds ref to the work queue of its kind's controller, and
// reports false when that controller does not run yet.
func (c *Controllers) addToQueue(ref frame.Ref) bool {
	q, ok := c.queues.Load(ref.Kind)
	if !ok {
		return false
	}
	q.(workqueue.TypedRateLimitingInterface[reconcile.Request]).Add(
		reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}})
	return true
}

// rateLimiter returns the workqueue rate limiter of kind's controller:
// Flux's exponential backoff for the kinds whose Flux controllers retry so
// (kinds.Kind.Backoff), else controller-runtime's default (nil).
func rateLimiter(k kinds.Kind) workqueue.TypedRateLimiter[reconcile.Request] {
	if k.Backoff {
		return runtimectrl.GetDefaultRateLimiter()
	}
	return nil
}

// Enqueue wakes the reconciler of ref's kind for ref: through its queue
// once its controller runs, else through its wake-up channel, which the
// controller reads when it starts.
func (c *Controllers) Enqueue(ref frame.Ref) {
	if c.addToQueue(ref) {
		return
	}
	ch, ok := c.wake[ref.Kind]
	if !ok {
		return
	}
	k, _ := kinds.Get(ref.Kind)
	obj := k.New()
	obj.SetNamespace(ref.Namespace)
	obj.SetName(ref.Name)
	ev := event.GenericEvent{Object: obj}
	select {
	case ch <- ev:
	default:
		go func() { ch <- ev }()
	}
}

// readinessChanged passes updates that can unblock a dependent: the Ready
// condition or the artifact changed.
type readinessChanged struct{ predicate.Funcs }

func (readinessChanged) Update(ev event.UpdateEvent) bool {
	return readiness(ev.ObjectOld) != readiness(ev.ObjectNew)
}

func readiness(o client.Object) string {
	var s string
	if g, ok := o.(conditions.Getter); ok {
		if c := conditions.Get(g, meta.ReadyCondition); c != nil {
			s = string(c.Status) + "/" + strconv.FormatInt(c.ObservedGeneration, 10)
		}
	}
	if a, ok := o.(interface{ GetArtifact() *meta.Artifact }); ok && a.GetArtifact() != nil {
		s += "/" + a.GetArtifact().Digest
	}
	return s
}

// leaderOnly skips a reconcile while this replica does not lead; the
// replica reconciles every object of the kind when it starts to lead.
type leaderOnly struct {
	leading func() bool
	r       reconcile.Reconciler
}

func (l leaderOnly) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !l.leading() {
		return reconcile.Result{}, nil
	}
	return l.r.Reconcile(ctx, req)
}

// WakeKinds re-enqueues every object of the reconciled kinds that match.
func (c *Controllers) WakeKinds(ctx context.Context, match func(kind string) bool) error {
	for kind := range c.wake {
		if !match(kind) {
			continue
		}
		list, err := c.listKind(ctx, kind)
		if err != nil {
			return err
		}
		for _, nn := range list {
			c.Enqueue(frame.Ref{Kind: kind, Namespace: nn.Namespace, Name: nn.Name})
		}
	}
	return nil
}

func (c *Controllers) listKind(ctx context.Context, kind string) ([]types.NamespacedName, error) {
	k, _ := kinds.Get(kind)
	list := k.NewList()
	if err := c.deps.Manager.GetClient().List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing %s: %w", kind, err)
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]types.NamespacedName, 0, len(items))
	for _, it := range items {
		if o, ok := it.(client.Object); ok {
			out = append(out, client.ObjectKeyFromObject(o))
		}
	}
	return out, nil
}
