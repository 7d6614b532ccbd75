package artifacts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cozystack/cozy-aio/engine/internal/frame"

	"github.com/fluxcd/pkg/apis/meta"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/kinds"
	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/source"
)

// Deps is what the artifacts use of the engine.
type Deps struct {
	// Client reads sources from the cache; APIReader from the API server.
	Client    client.Client
	APIReader client.Reader
	// Store keeps the artifacts.
	Store *source.Store
	// Destinations is the egress policy foreign artifact URLs pass.
	Destinations egress.Policy
	// Restricted refuses cross-namespace source references.
	Restricted bool
	// Reconciles tells whether this engine runs a kind's reconciler;
	// Elected whether it leads.
	Reconciles func(kind string) bool
	Elected    func() bool
	// Landing, when set (replicas mirror artifacts), returns a channel
	// closed when the mirror next stores an artifact.
	Landing func() <-chan struct{}
	// RunContext is the context rebuilds live in; Enqueue wakes a unit
	// whose rebuild ended.
	RunContext func() context.Context
	Enqueue    func(frame.Ref)
	// Rebuild builds the artifact of revision again from upstream into
	// staging, as the object's kind does (sources.Rebuild,
	// generator.Rebuild); a *frame.WaitingError says it waits for an input.
	Rebuild func(ctx context.Context, staging *source.Store, sobj source.Object, obj client.Object, revision string) (source.Artifact, error)
}

// Artifacts resolves the artifacts units read, and materialises one the
// store lacks: rebuilt from upstream or fetched from the URL status names,
// and checked against status.artifact.digest.
type Artifacts struct {
	deps         Deps
	materializer materializer
}

// New returns the artifacts of the engine.
func New(d Deps) *Artifacts { return &Artifacts{deps: d} }

// Resolve resolves a unit's source reference (SourceArtifact in the
// families' Deps).
func (ar *Artifacts) Resolve(ctx context.Context, self frame.Ref, kind, namespace, name string) (source.Artifact, frame.Outcome, bool) {
	return ar.sourceArtifact(ctx, self, kind, namespace, name)
}

// sourceArtifact resolves a unit's source reference to the artifact in the
// store. The source is read from the shared cache and the artifact from the
// store directly: nothing goes over HTTP inside the process. An artifact
// that status names but the store lacks (on a replica that does not run
// the source reconcilers, or after the data directory was lost) is
// materialised: rebuilt from upstream and checked against status.
func (ar *Artifacts) sourceArtifact(ctx context.Context, self frame.Ref, kind, namespace, name string) (source.Artifact, frame.Outcome, bool) {
	if namespace == "" {
		namespace = self.Namespace
	}
	if ar.deps.Restricted && namespace != self.Namespace {
		return source.Artifact{}, frame.Stalled(meta.ArtifactFailedReason,
			fmt.Errorf("%s: source %s/%s/%s: %w", self, kind, namespace, name, frame.ErrCrossNamespace)), false
	}
	obj, ok := NewObject(kind)
	if !ok {
		return source.Artifact{}, frame.Stalled(meta.ArtifactFailedReason,
			fmt.Errorf("%s: source kind %q is not supported (GitRepository, OCIRepository, Bucket, ExternalArtifact, HelmChart)", self, kind)), false
	}
	srcRef := fmt.Sprintf("%s/%s/%s", kind, namespace, name)
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err := ar.deps.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		// Each kind has its own informer: an object that names a source
		// created just before it can reach this cache before the source
		// does. Ask the API server before calling the source missing.
		err = ar.deps.APIReader.Get(ctx, key, obj)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			// helm- and kustomize-controller mark Ready=False and retry,
			// recording no Event: a source created with or after its
			// users (Cozystack's operator creates an ArtifactGenerator
			// and the HelmReleases of its ExternalArtifacts together) is
			// not there yet, which they do not report. source-watcher
			// and source-controller's HelmChart record a Warning.
			out := frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("%s: source %s not found", self, srcRef))
			k, _ := kinds.Get(self.Kind)
			out.Quiet = k.QuietMissingSource
			return source.Artifact{}, out, false
		}
		return source.Artifact{}, frame.Failed(meta.ArtifactFailedReason, fmt.Errorf("%s: reading source %s: %w", self, srcRef, err)), false
	}
	a := obj.GetArtifact()
	if a == nil {
		return source.Artifact{}, frame.Waiting(meta.ArtifactFailedReason, fmt.Sprintf("source %s has no artifact yet", srcRef), frame.DependencyRequeue), false
	}
	art := frame.StoreArtifact(a)
	if ar.Stored(art) {
		return art, frame.Outcome{}, true
	}
	if local, ok := ar.deps.Store.Local(source.Object{Kind: kind, Namespace: namespace, Name: name}, art); ok {
		return local, frame.Outcome{}, true
	}
	want := art
	art, err = ar.Materialize(ctx, self, frame.Ref{Kind: kind, Namespace: namespace, Name: name}, obj, art)
	if err != nil {
		if ar.Foreign(want) && errors.Is(err, source.ErrDigestMismatch) && ar.deps.Reconciles(kind) && ar.deps.Elected() {
			// Another engine's artifact (source-controller's before a
			// switch) that its server no longer gives: this engine's own
			// reconciler of the source (it runs on the leader, which this
			// engine is) replaces it with its archive of the same
			// revision, whose new status wakes this dependent. A wait,
			// not a failure: nothing is wrong on switch day.
			return source.Artifact{}, frame.Waiting(meta.ArtifactFailedReason, fmt.Sprintf(
				"source %s: its artifact was made by another server (%s); waiting for the source to be reconciled here", srcRef, want.URL), materializeRetry), false
		}
		if aw := (*frame.WaitingError)(nil); errors.As(err, &aw) {
			// An input of the artifact's rebuild is awaited likewise.
			return source.Artifact{}, frame.Waiting(meta.ArtifactFailedReason, fmt.Sprintf("source %s: %s", srcRef, aw.Message), materializeRetry), false
		}
		return source.Artifact{}, materializedOutcome(fmt.Errorf("%s: %w", self, err)), false
	}
	return art, frame.Outcome{}, true
}

// Object is a source kind with an artifact.
type Object interface {
	client.Object
	GetArtifact() *meta.Artifact
}

// NewObject returns an empty object of a kind whose artifact consumers
// read (kinds.Kind.Artifact).
func NewObject(kind string) (Object, bool) {
	k, ok := kinds.Get(kind)
	if !ok || !k.Artifact {
		return nil, false
	}
	return k.New().(Object), true
}

// Kinds are the kinds whose artifact consumers read, and which the
// artifact server answers for.
var Kinds = kinds.Names(func(k kinds.Kind) bool { return k.Artifact })

// artifactWait bounds how long a request for an artifact the store lacks
// waits for the engine's own work to store it before the server answers
// 503: long enough for a download from another replica, short enough that
// requests do not pile up while upstream is slow.
const artifactWait = 5 * time.Second

// ServeMissing answers the artifact server for a file its store lacks
// (ServerOptions.Missing): true when a status names that path, after
// waiting at most artifactWait for work the engine does anyway (the
// replica's mirror, a consumer's materialisation) to store it; the server
// serves the file if it came, else answers 503 with Retry-After. It never
// starts a fetch or a rebuild: anyone who reaches the server could
// otherwise make the engine clone and pull at will.
func (ar *Artifacts) ServeMissing(ctx context.Context, p string) bool {
	src, art, ok := ar.namedArtifact(ctx, p)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, artifactWait)
	defer cancel()
	ar.awaitStored(ctx, src, art)
	return true
}

// namedArtifact returns the source and the artifact its status names at
// p (<kind>/<namespace>/<name>/<file>, as the artifact server is asked for
// it), read from the shared cache.
func (ar *Artifacts) namedArtifact(ctx context.Context, p string) (frame.Ref, source.Artifact, bool) {
	segs := strings.Split(p, "/")
	if len(segs) != 4 {
		return frame.Ref{}, source.Artifact{}, false
	}
	i := slices.IndexFunc(Kinds, func(k string) bool { return strings.ToLower(k) == segs[0] })
	if i < 0 {
		return frame.Ref{}, source.Artifact{}, false
	}
	obj, _ := NewObject(Kinds[i])
	if err := ar.deps.Client.Get(ctx, client.ObjectKey{Namespace: segs[1], Name: segs[2]}, obj); err != nil {
		return frame.Ref{}, source.Artifact{}, false
	}
	a := obj.GetArtifact()
	if a == nil || a.Path != p {
		return frame.Ref{}, source.Artifact{}, false
	}
	return frame.Ref{Kind: Kinds[i], Namespace: segs[1], Name: segs[2]}, frame.StoreArtifact(a), true
}

// awaitStored waits until the store holds art or ctx ends, while work that
// may store it is under way: the replica's mirror (for an artifact under
// this engine's address), or a rebuild of it in flight. With neither, it
// returns at once.
func (ar *Artifacts) awaitStored(ctx context.Context, src frame.Ref, art source.Artifact) {
	key := src.String() + "@" + art.Digest
	mirrored := ar.deps.Landing != nil && !ar.Foreign(art)
	for {
		// Taken before the store is looked at, so that a landing between
		// the two is not missed.
		var landed <-chan struct{}
		if mirrored {
			landed = ar.deps.Landing()
		}
		flight := ar.materializer.flying(key)
		if ar.Stored(art) || landed == nil && flight == nil {
			return
		}
		select {
		case <-landed:
		case <-flight:
		case <-ctx.Done():
			return
		}
	}
}

// flying returns the done channel of the rebuild of key in flight, or nil.
func (m *materializer) flying(key string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.flights[key]; ok {
		return f.done
	}
	return nil
}

// Foreign tells whether a's URL is not under this engine's artifact base
// URL: another engine (Flux's source-controller, another cozy-aio's
// server) wrote the status.
func (ar *Artifacts) Foreign(a source.Artifact) bool {
	return a.URL != "" && !strings.HasPrefix(a.URL, ar.deps.Store.BaseURL()+"/")
}
