package replicas

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/artifacts"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
)

const (
	// mirrorWorkers bounds the artifacts a replica's mirror fetches at
	// once: the mirror follows status changes, it is not in a hurry.
	mirrorWorkers = 2
	// mirrorBackoff is the first retry of a failed mirror, doubling up to
	// mirrorMaxBackoff: upstream or the leader may be down for a while.
	mirrorBackoff    = 5 * time.Second
	mirrorMaxBackoff = 5 * time.Minute
)

// mirror keeps, on a replica that does not lead, the current artifact of
// each source in the store, so that the replica's artifact server can
// answer for any artifact a status names: with --artifact-base-url the
// replicas share one address, and a request reaches any of them. It
// follows the sources' informers, never requests, so that no request
// starts a fetch (serveMissing). One artifact is fetched once, however
// many requests wait for it: the queue holds a source once, and
// materialize joins a rebuild already in flight.
//
// It runs only where it is needed and cheap:
//   - not on the leader, whose reconcilers store each artifact before
//     writing its status and fetch again one the store lacks; a second
//     writer there would race them and their retention;
//   - only with a shared address (Options.ArtifactBaseURL): with each
//     replica on its own loopback address, nobody else asks a standby for
//     an artifact, and every mirror would be a rebuild from upstream;
//   - only for artifacts under that address: another server's (Flux's
//     source-controller's) are asked of that server.
type mirror struct {
	keeper ArtifactKeeper
	reader client.Reader
	cache  cache.Informers
	store  *source.Store
	queue  workqueue.TypedRateLimitingInterface[frame.Ref]

	mu sync.Mutex
	// landed is closed, and replaced, each time the mirror stores an
	// artifact: requests waiting for one look again.
	landed chan struct{}
}

// ArtifactKeeper is what the mirror uses of the engine.
type ArtifactKeeper struct {
	// Leading tells whether this replica leads (then it mirrors nothing).
	Leading func() bool
	// Stored tells whether the store holds an artifact; Foreign whether
	// another engine's server wrote it.
	Stored  func(a source.Artifact) bool
	Foreign func(a source.Artifact) bool
	// Materialize stores an artifact the store lacks.
	Materialize func(ctx context.Context, self, src frame.Ref, obj client.Object, want source.Artifact) (source.Artifact, error)
}

func newMirror(keeper ArtifactKeeper, reader client.Reader, informers cache.Informers, store *source.Store) *mirror {
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[frame.Ref](mirrorBackoff, mirrorMaxBackoff)
	return &mirror{
		keeper: keeper, reader: reader, cache: informers, store: store,
		queue: workqueue.NewTypedRateLimitingQueue(limiter),
	}
}

// Start follows the source kinds' informers and mirrors with
// mirrorWorkers workers until ctx ends.
func (m *mirror) Start(ctx context.Context) error {
	defer m.queue.ShutDown()
	for _, kind := range artifacts.Kinds {
		obj, _ := artifacts.NewObject(kind)
		inf, err := m.cache.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		reg, err := inf.AddEventHandler(m.handler(kind))
		if err != nil {
			return err
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
	}
	var wg sync.WaitGroup
	for range mirrorWorkers {
		wg.Go(func() { m.work(ctx) })
	}
	<-ctx.Done()
	m.queue.ShutDown()
	wg.Wait()
	return nil
}

// handler queues a source of kind whose artifact the store lacks, and a
// deleted one, whose artifacts the mirror removes. The informer's resync
// brings every source again, which catches a file removed behind its back.
func (m *mirror) handler(kind string) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.observe(kind, o, false) },
		UpdateFunc: func(_, o any) { m.observe(kind, o, false) },
		DeleteFunc: func(o any) { m.observe(kind, o, true) },
	}
}

func (m *mirror) observe(kind string, o any, deleted bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	obj, ok := o.(artifacts.Object)
	if !ok || m.keeper.Leading() {
		return
	}
	if a := obj.GetArtifact(); deleted || a != nil && m.lacks(frame.StoreArtifact(a)) {
		m.queue.Add(frame.Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()})
	}
}

// lacks tells whether a is this engine's to serve and not in the store.
func (m *mirror) lacks(a source.Artifact) bool {
	return !m.keeper.Foreign(a) && !m.keeper.Stored(a)
}

func (m *mirror) work(ctx context.Context) {
	for {
		ref, shutdown := m.queue.Get()
		if shutdown {
			return
		}
		if err := m.sync(ctx, ref); err != nil && ctx.Err() == nil {
			m.queue.AddRateLimited(ref)
		} else {
			m.queue.Forget(ref)
		}
		m.queue.Done(ref)
	}
}

// sync brings the store in line with ref's status: its current artifact
// stored, or its artifacts removed once it is deleted. The leader's
// reconcilers do that there, so the mirror leaves its store alone.
func (m *mirror) sync(ctx context.Context, ref frame.Ref) error {
	if m.keeper.Leading() {
		return nil
	}
	obj, _ := artifacts.NewObject(ref.Kind)
	err := m.reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj)
	if apierrors.IsNotFound(err) {
		return m.store.Remove(ctx, source.Object{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name})
	}
	if err != nil || obj.GetArtifact() == nil {
		return err
	}
	want := frame.StoreArtifact(obj.GetArtifact())
	if !m.lacks(want) {
		return nil
	}
	// materialize stops waiting after a while, the rebuild going on; the
	// worker waits for it to end, so that it fetches nothing twice.
	for {
		_, err = m.keeper.Materialize(ctx, frame.Ref{}, ref, obj, want)
		if !errors.Is(err, artifacts.ErrMaterializing) || ctx.Err() != nil {
			break
		}
	}
	if err == nil {
		m.ring()
	}
	return err
}

// landing returns a channel closed when the mirror next stores an
// artifact, or nil when it does not run here now (this replica leads).
func (m *mirror) Landing() <-chan struct{} {
	if m.keeper.Leading() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.landed == nil {
		m.landed = make(chan struct{})
	}
	return m.landed
}

func (m *mirror) ring() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.landed != nil {
		close(m.landed)
		m.landed = nil
	}
}
