package generator

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/source"
)

// extractFixture is a store holding one artifact, and a cache over it
// whose extractions wait for gate (closed: they run at once). Temporary
// directories go to tmp, which must be empty when the test ends.
type extractFixture struct {
	c    *extractCache
	art  source.Artifact
	tmp  string
	gate chan struct{}
}

func newExtractFixture(t *testing.T, private bool) *extractFixture {
	t.Helper()
	tmp, src, storeDir := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for name, data := range map[string]string{"packages/apps/a/Chart.yaml": "name: a\n", "packages/library/lib/values.yaml": "x: 1\n"} {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store, err := source.NewStore(storeDir, source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	art, err := store.Archive(context.Background(), source.Object{Kind: "OCIRepository", Namespace: "ns", Name: "platform"}, src, "v1", source.ArchiveOptions{Verbatim: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &extractFixture{c: newExtractCache(store, private), art: art, tmp: tmp, gate: make(chan struct{})}
	extract := f.c.extract
	f.c.extract = func(ctx context.Context, art source.Artifact, dir string) error {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		return extract(ctx, art, dir)
	}
	t.Cleanup(func() {
		f.c.stop()
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("%d temporary directories left behind", len(left))
		}
	})
	return f
}

// users returns the number of callers holding or waiting for the tree of
// f.art.
func (f *extractFixture) users() int {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if t := f.c.trees[extractKey{f.art.Path, f.art.Digest}]; t != nil {
		return t.refs
	}
	return 0
}

// acquireAll asks for f.art from n goroutines at once, opens the gate once
// all of them wait for one tree, and returns what each got.
func (f *extractFixture) acquireAll(t *testing.T, n int) ([]fs.FS, []func(), []error) {
	t.Helper()
	fss, releases, errs := make([]fs.FS, n), make([]func(), n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fss[i], releases[i], errs[i] = f.c.acquire(context.Background(), f.art) })
	}
	// Without sharing, the callers never wait on one tree: the count of
	// extractions then says so.
	for deadline := time.Now().Add(2 * time.Second); f.users() < n && !f.c.private && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(f.gate)
	wg.Wait()
	return fss, releases, errs
}

// TestExtractCacheSharesOneExtraction: callers of one artifact at once
// wait for one extraction and read the same tree.
func TestExtractCacheSharesOneExtraction(t *testing.T) {
	f := newExtractFixture(t, false)
	const n = 20
	fss, releases, errs := f.acquireAll(t, n)
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if b, err := fs.ReadFile(fss[i], "packages/apps/a/Chart.yaml"); err != nil || string(b) != "name: a\n" {
			t.Fatalf("caller %d reads %q, %v", i, b, err)
		}
	}
	if got := f.c.extractions.Load(); got != 1 {
		t.Fatalf("%d extractions for %d callers of one artifact, want 1", got, n)
	}
	for _, release := range releases {
		release()
		release() // a second call is harmless
	}
	// A successive caller finds the tree, idle, without extracting again.
	_, release, err := f.c.acquire(context.Background(), f.art)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if got := f.c.extractions.Load(); got != 1 {
		t.Fatalf("%d extractions after a successive caller, want 1", got)
	}
}

// TestExtractCacheKeepsTreesInUse: neither idleness nor the engine's stop
// removes a tree a caller still reads; the last release after the stop
// does, and an idle tree goes after the idle time.
func TestExtractCacheKeepsTreesInUse(t *testing.T) {
	f := newExtractFixture(t, false)
	close(f.gate)
	fsys, release, err := f.c.acquire(context.Background(), f.art)
	if err != nil {
		t.Fatal(err)
	}
	dir := f.c.trees[extractKey{f.art.Path, f.art.Digest}].dir
	readable := func(when string) {
		t.Helper()
		if _, err := fs.ReadFile(fsys, "packages/library/lib/values.yaml"); err != nil {
			t.Fatalf("%s: the tree in use is gone: %v", when, err)
		}
	}
	f.c.sweep(time.Now().Add(time.Hour), false)
	readable("after an idle sweep")

	release()
	f.c.sweep(time.Now(), false)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("a tree idle for less than %s removed: %v", f.c.idle, err)
	}
	f.c.sweep(time.Now().Add(f.c.idle), false)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a tree idle for %s kept: %v", f.c.idle, err)
	}

	fsys, release, err = f.c.acquire(context.Background(), f.art)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.c.extractions.Load(); got != 2 {
		t.Fatalf("%d extractions after the idle tree went, want 2", got)
	}
	dir = f.c.trees[extractKey{f.art.Path, f.art.Digest}].dir
	f.c.stop()
	readable("after the stop")
	release()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("released after the stop, the tree is kept: %v", err)
	}
	if _, _, err := f.c.acquire(context.Background(), f.art); !errors.Is(err, errExtractCacheStopped) {
		t.Fatalf("acquire after the stop: %v", err)
	}
}

// TestExtractCacheFailureReachesEveryWaiter: a failed extraction is every
// waiter's error, and the next caller extracts again.
func TestExtractCacheFailureReachesEveryWaiter(t *testing.T) {
	f := newExtractFixture(t, false)
	stored := f.c.extract
	boom := errors.New("disk full")
	f.c.extract = func(ctx context.Context, art source.Artifact, dir string) error {
		if err := stored(ctx, art, dir); err != nil {
			return err
		}
		return boom
	}
	const n = 5
	_, _, errs := f.acquireAll(t, n)
	for i, err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("waiter %d: %v, want %v", i, err, boom)
		}
	}
	if got := f.c.extractions.Load(); got != 1 {
		t.Fatalf("%d extractions, want 1", got)
	}
	f.c.extract = stored
	if _, release, err := f.c.acquire(context.Background(), f.art); err != nil {
		t.Fatalf("after a failure: %v", err)
	} else {
		release()
	}
	if got := f.c.extractions.Load(); got != 2 {
		t.Fatalf("%d extractions, want a second one after the failure", got)
	}
}

// TestExtractCacheWaiterGivesUp: a caller whose context ends stops
// waiting; the extraction goes on for the others, and the engine's stop
// cancels it.
func TestExtractCacheWaiterGivesUp(t *testing.T) {
	f := newExtractFixture(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := f.c.acquire(ctx, f.art); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with an ended context: %v", err)
	}
	if f.c.extractions.Load() != 1 || len(f.c.trees) != 1 {
		t.Fatal("the extraction did not go on")
	}
	f.c.stop()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		f.c.mu.Lock()
		left := len(f.c.trees)
		f.c.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stop left an extraction in flight")
		}
	}
}

// TestExtractCachePrivate: the peer without sharing extracts for every
// caller and removes each tree when it is released.
func TestExtractCachePrivate(t *testing.T) {
	f := newExtractFixture(t, true)
	const n = 4
	_, releases, errs := f.acquireAll(t, n)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if got := f.c.extractions.Load(); got != n {
		t.Fatalf("%d extractions, want %d", got, n)
	}
	for _, release := range releases {
		release()
	}
	if left, _ := os.ReadDir(f.tmp); len(left) != 0 {
		t.Fatalf("%d trees left after their release", len(left))
	}
}
