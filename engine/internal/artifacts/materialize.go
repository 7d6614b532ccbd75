package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/internal/redact"
	"github.com/cozystack/cozy-aio/source"
)

// Only the leader runs the source and generator reconcilers, so only its
// store holds the artifacts their status names. Every other replica, and a
// leader whose data directory was wiped, materialises an artifact it lacks:
// it fetches exactly the revision in status upstream, builds it with the
// same deterministic archive code, and uses it only when the digest equals
// status.artifact.digest.
const (
	// materializeWait bounds how long a reconcile waits for a rebuild, so
	// that a long clone does not hold every worker; those that stop
	// waiting are woken when it ends.
	materializeWait = 20 * time.Second
	// materializeRetry is frame.MaterializeRetry.
	materializeRetry = frame.MaterializeRetry
	// materializeFailureTTL is how long a failed rebuild is answered from
	// memory, so that a thousand dependents of an unreachable source do
	// not each ask the upstream.
	materializeFailureTTL = 10 * time.Second
	// materializeBuilds bounds the rebuilds that run at once: a Git work
	// tree is held in memory while it is archived.
	materializeBuilds = 4
	// materializeTimeout bounds one rebuild, its inputs included.
	materializeTimeout = 10 * time.Minute
)

// frame.WaitingError means a rebuild waits for one of its inputs: another
// engine's artifact that this engine's reconciler of it is about to
// replace (see sourceArtifact). Its dependents wait too, with no failure.
// ErrMaterializing means a rebuild is still running.
var ErrMaterializing = errors.New("the artifact is still being rebuilt from upstream")

// Stored reports whether the artifact status names is in the store under
// its digest. The store names files by their content's digest, so a file
// whose name differs from status.artifact.digest is not that artifact.
func (ar *Artifacts) Stored(a source.Artifact) bool {
	return ar.deps.Store.Exists(a) && path.Base(a.Path) == strings.TrimPrefix(a.Digest, "sha256:")+".tar.gz"
}

// materializedOutcome turns a failed materialisation into the dependent's
// outcome: a digest mismatch is a failure that only a new status resolves
// (which wakes the dependent); anything else is retried soon.
func materializedOutcome(err error) frame.Outcome {
	out := frame.Failed(meta.ArtifactFailedReason, err)
	if !errors.Is(err, source.ErrDigestMismatch) {
		out.RequeueAfter = materializeRetry
	}
	return out
}

// chainKey carries, in the context of a rebuild, the artifacts being
// rebuilt around it: a generator output waits for its inputs without the
// materializeWait bound, and a cycle fails at once.
type chainKey struct{}

// Materialize returns the artifact want (status.artifact of obj, the source
// src) from the store, rebuilding it first when the store lacks it. One
// rebuild per artifact runs at a time; self is the dependent, woken when a
// rebuild it stopped waiting for ends.
func (ar *Artifacts) Materialize(ctx context.Context, self, src frame.Ref, obj client.Object, want source.Artifact) (source.Artifact, error) {
	key := src.String() + "@" + want.Digest
	chain, _ := ctx.Value(chainKey{}).([]string)
	if slices.Contains(chain, key) {
		return source.Artifact{}, fmt.Errorf("%s: rebuilding %s needs itself: %s", src, want.Revision, strings.Join(append(chain, key), " → "))
	}
	f, err := ar.materializer.join(key, func(f *flight) {
		go ar.rebuildFlight(f, key, append(slices.Clip(chain), key), src, obj, want)
	})
	if err != nil {
		return source.Artifact{}, err
	}
	var timeout <-chan time.Time
	if len(chain) == 0 {
		t := time.NewTimer(materializeWait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-f.done:
		return f.art, f.err
	case <-timeout:
	case <-ctx.Done():
	}
	if ar.materializer.giveUp(f, self) {
		return f.art, f.err
	}
	return source.Artifact{}, fmt.Errorf("%s: revision %s: %w", src, want.Revision, ErrMaterializing)
}

// rebuildFlight runs one rebuild on the engine's context, so that it
// outlives the reconcile that started it, then wakes the dependents that
// stopped waiting.
func (ar *Artifacts) rebuildFlight(f *flight, key string, chain []string, src frame.Ref, obj client.Object, want source.Artifact) {
	ctx, cancel := context.WithTimeout(context.WithValue(ar.deps.RunContext(), chainKey{}, chain), materializeTimeout)
	defer cancel()
	art, err := ar.rebuild(ctx, src, obj, want)
	for _, w := range ar.materializer.land(key, f, art, err) {
		ar.deps.Enqueue(w)
	}
}

// rebuild builds want into a staging store, compares its digest with
// status, and only then stores it. Nothing that fails the check reaches
// the store.
func (ar *Artifacts) rebuild(ctx context.Context, src frame.Ref, obj client.Object, want source.Artifact) (source.Artifact, error) {
	tmp, err := os.MkdirTemp("", "cozy-materialize-")
	if err != nil {
		return source.Artifact{}, err
	}
	defer os.RemoveAll(tmp)
	staging, err := source.NewStore(tmp, source.StoreOptions{})
	if err != nil {
		return source.Artifact{}, err
	}
	sobj := source.Object{Kind: src.Kind, Namespace: src.Namespace, Name: src.Name}
	// The artifact server that status names first, as Flux's consumers
	// fetch: the leader's (with a shared --artifact-base-url), or another
	// engine's, such as source-controller's before a switch-over or beside
	// cozy-aio as its source-watcher, whose archive of a revision is not
	// byte for byte ours, so that a rebuild could never match its digest.
	built, derr := ar.download(ctx, staging, sobj, want)
	if derr == nil {
		return ar.keep(ctx, staging, sobj, built, want)
	}
	built, err = ar.deps.Rebuild(ctx, staging, sobj, obj, want.Revision)
	fetched := ""
	if want.URL != "" {
		fetched = fmt.Sprintf(" (fetching it from %s: %v)", want.URL, derr)
	}
	if err != nil {
		return source.Artifact{}, fmt.Errorf("%s: rebuilding revision %s: %w%s", src, want.Revision, err, fetched)
	}
	if built.Digest != want.Digest {
		return source.Artifact{}, fmt.Errorf("%s: %w: revision %s rebuilt from upstream has digest %s, but status.artifact.digest is %s%s",
			src, source.ErrDigestMismatch, want.Revision, built.Digest, want.Digest, fetched)
	}
	return ar.keep(ctx, staging, sobj, built, want)
}

// download fetches want from status.artifact.url into staging and checks
// its digest. An unreachable server, a missing file or another digest is
// an error, and the caller rebuilds instead.
func (ar *Artifacts) download(ctx context.Context, staging *source.Store, sobj source.Object, want source.Artifact) (source.Artifact, error) {
	if want.URL == "" || !strings.HasSuffix(want.Path, ".tar.gz") {
		return source.Artifact{}, errors.New("no archive URL")
	}
	ctx, cancel := context.WithTimeout(ctx, materializeWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, want.URL, nil)
	if err != nil {
		return source.Artifact{}, err
	}
	// Another replica behind the same address answers from its store
	// only, and does not rebuild in turn.
	req.Header.Set(source.NoFetchHeader, "1")
	c, err := ar.artifactClient(ctx, want.URL)
	if err != nil {
		return source.Artifact{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return source.Artifact{}, redact.Error(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return source.Artifact{}, fmt.Errorf("GET %s: %s", redact.String(want.URL), resp.Status)
	}
	var body io.Reader = resp.Body
	if want.Size > 0 {
		body = io.LimitReader(resp.Body, want.Size+1)
	}
	art, err := staging.Put(ctx, sobj, want.Revision, body)
	if err != nil {
		return source.Artifact{}, err
	}
	if art.Digest != want.Digest {
		return source.Artifact{}, fmt.Errorf("%s: %w: %s has digest %s, but status.artifact.digest is %s", sobj, source.ErrDigestMismatch, want.URL, art.Digest, want.Digest)
	}
	return art, nil
}

// artifactClient returns the client that fetches an artifact from the URL
// a status names. The engine's own address (its advertised base URL, the
// operator's setting) is fetched as is, without redirects; any other URL
// is another producer's (Flux, an ExternalArtifact's writer) and so the
// writer's to choose: it passes the destination policy as an endpoint,
// checked before the request and at every connection. A refused URL is an
// error, and the caller rebuilds from upstream instead.
func (ar *Artifacts) artifactClient(ctx context.Context, url string) (*http.Client, error) {
	if strings.HasPrefix(url, ar.deps.Store.BaseURL()+"/") {
		return ownArtifactClient, nil
	}
	policy := ar.deps.Destinations
	if err := policy.CheckURL(ctx, egress.Endpoint, url); err != nil {
		return nil, fmt.Errorf("status.artifact.url: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = policy.Dialer(egress.Endpoint, &net.Dialer{Timeout: 10 * time.Second}).DialContext
	tr.Proxy = nil              // the policy judges the address dialled; a proxy would dial it instead
	tr.DisableKeepAlives = true // a client per download: nothing to keep
	return &http.Client{Transport: tr}, nil
}

// ownArtifactClient fetches from the engine's own advertised address; it
// follows no redirect, which no artifact server of the engine's sends.
var ownArtifactClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// keep copies a checked artifact from the staging store into the store,
// then applies retention with it as the current artifact, since no source
// reconciler does on a replica that is not the leader.
func (ar *Artifacts) keep(ctx context.Context, staging *source.Store, sobj source.Object, built, want source.Artifact) (source.Artifact, error) {
	f, err := staging.Open(built)
	if err != nil {
		return source.Artifact{}, err
	}
	defer f.Close()
	art, err := ar.deps.Store.Put(ctx, sobj, want.Revision, f)
	if err != nil {
		return source.Artifact{}, err
	}
	if art.Digest != want.Digest {
		return source.Artifact{}, fmt.Errorf("%s: %w: stored %s, want %s", sobj, source.ErrDigestMismatch, art.Digest, want.Digest)
	}
	art.Metadata = want.Metadata
	// Best effort: the artifact is in place, and the next rebuild or
	// reconcile of the object retries retention.
	_, _ = ar.deps.Store.GC(ctx, sobj, art)
	return art, nil
}

// materializer holds the rebuilds in flight, one per artifact, and the
// failures of the last few seconds. Its zero value is ready to use; it
// holds nothing once rebuilds end and their failures expire.
type materializer struct {
	mu       sync.Mutex
	flights  map[string]*flight
	failures map[string]recentFailure
	slots    chan struct{}
}

// flight is one rebuild. art and err are set before done is closed.
type flight struct {
	done     chan struct{}
	finished bool // under materializer.mu
	art      source.Artifact
	err      error
	waiters  map[frame.Ref]bool // dependents that stopped waiting
}

type recentFailure struct {
	err   error
	until time.Time
}

// join returns the flight of key, calling start with a new one when none
// is in the air, or the error of a rebuild of key that failed moments ago.
func (m *materializer) join(key string, start func(*flight)) (*flight, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for k, r := range m.failures {
		if now.After(r.until) {
			delete(m.failures, k)
		}
	}
	if r, ok := m.failures[key]; ok {
		return nil, r.err
	}
	if f, ok := m.flights[key]; ok {
		return f, nil
	}
	if m.flights == nil {
		m.flights, m.failures = map[string]*flight{}, map[string]recentFailure{}
	}
	f := &flight{done: make(chan struct{}), waiters: map[frame.Ref]bool{}}
	m.flights[key] = f
	start(f)
	return f, nil
}

// land records the end of a flight and returns the dependents to wake.
func (m *materializer) land(key string, f *flight, art source.Artifact, err error) []frame.Ref {
	m.mu.Lock()
	f.art, f.err, f.finished = art, err, true
	delete(m.flights, key)
	if err != nil && !errors.Is(err, context.Canceled) {
		m.failures[key] = recentFailure{err: err, until: time.Now().Add(materializeFailureTTL)}
	}
	waiters := make([]frame.Ref, 0, len(f.waiters))
	for w := range f.waiters {
		waiters = append(waiters, w)
	}
	m.mu.Unlock()
	close(f.done)
	return waiters
}

// giveUp registers self to be woken when the flight lands, or reports that
// it already has.
func (m *materializer) giveUp(f *flight, self frame.Ref) (finished bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.finished {
		return true
	}
	f.waiters[self] = true
	return false
}

// slot takes one of the materializeBuilds build slots.
func (m *materializer) slot(ctx context.Context) (release func(), err error) {
	m.mu.Lock()
	if m.slots == nil {
		m.slots = make(chan struct{}, materializeBuilds)
	}
	s := m.slots
	m.mu.Unlock()
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Slot bounds the rebuilds in flight: it waits for a free slot and
// returns its release.
func (ar *Artifacts) Slot(ctx context.Context) (func(), error) { return ar.materializer.slot(ctx) }
