package generator

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cozystack/cozy-aio/source"
)

// defaultExtractIdle is how long an extracted source tree no generator
// uses stays on disk.
const defaultExtractIdle = time.Minute

// errExtractCacheStopped answers an extraction asked for once the engine
// stopped.
var errExtractCacheStopped = errors.New("engine stopped: no more source extractions")

// extractCache shares the extracted trees of source artifacts among the
// ArtifactGenerator reconciles that read them. Cozystack runs about a
// hundred generators over one OCIRepository that holds its whole packages/
// tree (4,000 files, 43 MB): extracting that artifact once per reconcile
// was most of their cost.
//
// A tree is keyed by the artifact's path and digest, so it is what
// Store.Extract gives for that artifact, and users only read it (through
// an os.Root). Concurrent callers of one key wait for one extraction; a
// failed extraction is returned to each of them and forgotten. A tree
// counts its users: it is removed once none is left, idle later or at
// once when the engine has stopped (Start).
type extractCache struct {
	// extract unpacks art into dir, an empty directory:
	// Store.Extract, or a stand-in in tests.
	extract func(ctx context.Context, art source.Artifact, dir string) error
	// idle is how long an unused tree is kept.
	idle time.Duration
	// private gives every caller a tree of its own, removed when it is
	// released: the behaviour before the cache, which the benchmark runs
	// as its peer.
	private bool
	// ctx bounds extractions: it ends when the engine stops, not when one
	// of the callers waiting for the extraction gives up.
	ctx    context.Context
	cancel context.CancelFunc
	// extractions counts the extractions started.
	extractions atomic.Int64

	mu      sync.Mutex
	trees   map[extractKey]*extractedTree
	stopped bool
}

type extractKey struct{ path, digest string }

// extractedTree is one extraction. dir, root and err are set, under
// extractCache.mu with done, before ready is closed.
type extractedTree struct {
	ready chan struct{}
	dir   string
	root  *os.Root
	err   error
	// Under extractCache.mu.
	done      bool
	refs      int
	idleSince time.Time
}

func newExtractCache(store *source.Store, private bool) *extractCache {
	ctx, cancel := context.WithCancel(context.Background())
	return &extractCache{
		extract: func(ctx context.Context, art source.Artifact, dir string) error {
			return store.Extract(ctx, art, dir, source.ExtractOptions{})
		},
		idle: defaultExtractIdle, private: private,
		ctx: ctx, cancel: cancel, trees: map[extractKey]*extractedTree{},
	}
}

// acquire returns the extracted tree of art and the function that
// releases it, which must be called once the tree is no longer read. It
// waits for an extraction of art in flight rather than starting another.
func (c *extractCache) acquire(ctx context.Context, art source.Artifact) (fs.FS, func(), error) {
	key := extractKey{art.Path, art.Digest}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, nil, errExtractCacheStopped
	}
	t := c.trees[key]
	if t == nil || c.private {
		t = &extractedTree{ready: make(chan struct{})}
		if !c.private {
			c.trees[key] = t
		}
		c.extractions.Add(1)
		go c.run(key, t, art)
	}
	t.refs++
	c.mu.Unlock()
	select {
	case <-t.ready:
	case <-ctx.Done():
		c.release(key, t)
		return nil, nil, ctx.Err()
	}
	if t.err != nil {
		c.release(key, t)
		return nil, nil, t.err
	}
	return t.root.FS(), sync.OnceFunc(func() { c.release(key, t) }), nil
}

// run extracts art for t, outside the lock, and publishes the result.
func (c *extractCache) run(key extractKey, t *extractedTree, art source.Artifact) {
	dir, err := os.MkdirTemp("", "cozy-extract-")
	var root *os.Root
	if err == nil {
		err = c.extract(c.ctx, art, dir)
		if err == nil {
			root, err = os.OpenRoot(dir)
		}
		if err != nil {
			os.RemoveAll(dir)
		}
	}
	c.mu.Lock()
	t.dir, t.root, t.err, t.done, t.idleSince = dir, root, err, true, time.Now()
	if err != nil && c.trees[key] == t {
		delete(c.trees, key) // the next caller tries again
	}
	// Every waiter gave up before the end, on an engine that stopped.
	drop := err == nil && t.refs == 0 && (c.private || c.stopped)
	if drop {
		c.forget(key, t)
	}
	c.mu.Unlock()
	close(t.ready)
	if drop {
		t.remove()
	}
}

// release drops one user of t; the last one removes it when the cache
// keeps nothing (private, or stopped).
func (c *extractCache) release(key extractKey, t *extractedTree) {
	c.mu.Lock()
	t.refs--
	drop := t.refs == 0 && t.done && t.err == nil && (c.private || c.stopped)
	if t.refs == 0 {
		t.idleSince = time.Now()
	}
	if drop {
		c.forget(key, t)
	}
	c.mu.Unlock()
	if drop {
		t.remove()
	}
}

// forget takes t out of the map, under c.mu.
func (c *extractCache) forget(key extractKey, t *extractedTree) {
	if c.trees[key] == t {
		delete(c.trees, key)
	}
}

// sweep removes the trees unused since before now minus idle, or every
// unused tree when all is set.
func (c *extractCache) sweep(now time.Time, all bool) {
	var gone []*extractedTree
	c.mu.Lock()
	for k, t := range c.trees {
		if t.done && t.refs == 0 && (all || now.Sub(t.idleSince) >= c.idle) {
			delete(c.trees, k)
			gone = append(gone, t)
		}
	}
	c.mu.Unlock()
	for _, t := range gone {
		t.remove()
	}
}

// Start sweeps idle trees until ctx ends, then cancels the extractions
// in flight and removes every tree, those in use when their last user
// releases them.
func (c *extractCache) Start(ctx context.Context) error {
	tick := time.NewTicker(max(c.idle/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.stop()
			return nil
		case now := <-tick.C:
			c.sweep(now, false)
		}
	}
}

func (c *extractCache) stop() {
	c.cancel()
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.sweep(time.Time{}, true)
}

func (t *extractedTree) remove() {
	t.root.Close()
	os.RemoveAll(t.dir)
}
