package generate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/generate"
)

const kib = 1 << 10

// sizedFS holds files of the given sizes, each of its own byte.
func sizedFS(sizes map[string]int) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, n := range sizes {
		fsys[name] = &fstest.MapFile{Data: bytes.Repeat([]byte(name[:1]), n), Mode: 0o644}
	}
	return fsys
}

// gateFS holds the first opening of the file gate until release is
// closed, after telling reached: a build waits there with what it holds.
type gateFS struct {
	fs.FS
	gate             string
	once             sync.Once
	reached, release chan struct{}
}

func (g *gateFS) Open(name string) (fs.File, error) {
	if name == g.gate {
		g.once.Do(func() { close(g.reached); <-g.release })
	}
	return g.FS.Open(name)
}

func newStore(t *testing.T) *source.Store {
	t.Helper()
	st, err := source.NewStore(t.TempDir(), source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func buildAll(t *testing.T, st *source.Store, name string, fsys fs.FS, opts generate.BuildOptions) (source.Artifact, error) {
	t.Helper()
	obj := source.Object{Kind: "ExternalArtifact", Namespace: "ns", Name: name}
	spec := generate.Spec{Copy: []generate.Copy{{From: "@src/**", To: "@artifact/"}}}
	a, _, err := generate.Build(context.Background(), st, obj, map[string]generate.Source{"src": {FS: fsys}}, spec, opts)
	return a, err
}

// TestBudgetSharedByConcurrentBuilds: two builds of 700 KiB each, below a
// 1 MiB budget alone but above it together. While the first holds 600 KiB,
// the second does not fit and composes on disk; both give the artifact an
// uncontended build gives, and the bytes held never exceed the budget.
func TestBudgetSharedByConcurrentBuilds(t *testing.T) {
	st := newStore(t)
	files := map[string]int{"1.yaml": 600 * kib, "2.yaml": 100 * kib}
	want, err := buildAll(t, st, "want", sizedFS(files), generate.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	budget := generate.NewBudget(1 << 20)
	gated := &gateFS{FS: sizedFS(files), gate: "2.yaml", reached: make(chan struct{}), release: make(chan struct{})}
	first := make(chan error, 1)
	var a source.Artifact
	go func() {
		var err error
		a, err = buildAll(t, st, "first", gated, generate.BuildOptions{Memory: budget})
		first <- err
	}()
	<-gated.reached
	if held := budget.InUse(); held != 600*kib {
		t.Fatalf("the first build holds %d bytes at its second file, want %d", held, 600*kib)
	}
	b, err := buildAll(t, st, "second", sizedFS(files), generate.BuildOptions{Memory: budget})
	close(gated.release)
	if err2 := <-first; err != nil || err2 != nil {
		t.Fatalf("builds: %v, %v", err2, err)
	}
	for _, got := range []source.Artifact{a, b} {
		if got.Digest != want.Digest {
			t.Fatalf("digest %s, want %s (uncontended)", got.Digest, want.Digest)
		}
	}
	t.Logf("budget %d, peak %d bytes held", budget.Limit(), budget.Peak())
	if peak := budget.Peak(); peak != 700*kib {
		t.Fatalf("peak %d bytes held, want the first build's %d (the second on disk)", peak, 700*kib)
	}
	if held := budget.InUse(); held != 0 {
		t.Fatalf("%d bytes still held after the builds", held)
	}
}

// TestBudgetManyBuilds: eight builds of 700 KiB at once in a 1 MiB budget
// all succeed with the uncontended artifact, within the budget.
func TestBudgetManyBuilds(t *testing.T) {
	st := newStore(t)
	fsys := sizedFS(map[string]int{"1.yaml": 300 * kib, "2.yaml": 300 * kib, "3.yaml": 100 * kib})
	want, err := buildAll(t, st, "want", fsys, generate.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	budget := generate.NewBudget(1 << 20)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			a, err := buildAll(t, st, fmt.Sprint("b", i), fsys, generate.BuildOptions{Memory: budget})
			if err == nil && a.Digest != want.Digest {
				err = fmt.Errorf("digest %s, want %s", a.Digest, want.Digest)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("budget %d, peak %d bytes held", budget.Limit(), budget.Peak())
	if budget.Peak() > budget.Limit() || budget.InUse() != 0 {
		t.Fatalf("peak %d, held %d after, budget %d", budget.Peak(), budget.InUse(), budget.Limit())
	}
}

// TestBuildOverBudgetAlone: an output larger than the whole budget (1.5
// MiB in 1 MiB) or built with no budget at all composes on disk, to the
// artifact an in-memory build gives.
func TestBuildOverBudgetAlone(t *testing.T) {
	st := newStore(t)
	fsys := sizedFS(map[string]int{"a.yaml": 512 * kib, "b.yaml": 512 * kib, "c.yaml": 512 * kib})
	want, err := buildAll(t, st, "want", fsys, generate.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{1 << 20, -1} {
		budget := generate.NewBudget(limit)
		got, err := buildAll(t, st, "big", fsys, generate.BuildOptions{Memory: budget})
		if err != nil {
			t.Fatalf("budget %d: %v", limit, err)
		}
		t.Logf("budget %d: output %d bytes, peak %d bytes held", budget.Limit(), 1536*kib, budget.Peak())
		if got.Digest != want.Digest || budget.Peak() > budget.Limit() || budget.InUse() != 0 {
			t.Fatalf("budget %d: digest %s (want %s), peak %d, held after %d", budget.Limit(), got.Digest, want.Digest, budget.Peak(), budget.InUse())
		}
	}
}

// TestBuildMaxBytes: an output over the cap fails, in memory or on disk
// (extracted tarballs included), naming the operation and the figures.
func TestBuildMaxBytes(t *testing.T) {
	st := newStore(t)
	big := sizedFS(map[string]int{"a.yaml": 400 * kib, "b.yaml": 400 * kib})
	for _, tc := range []struct {
		name   string
		fsys   fs.FS
		spec   generate.Spec
		budget int64
	}{
		{"in memory", big, generate.Spec{Copy: []generate.Copy{{From: "@src/**", To: "@artifact/"}}}, 0},
		{"on disk", big, generate.Spec{Copy: []generate.Copy{{From: "@src/**", To: "@artifact/"}}}, -1},
		{"copied twice", big, generate.Spec{Copy: []generate.Copy{
			{From: "@src/a.yaml", To: "@artifact/x/"}, {From: "@src/a.yaml", To: "@artifact/y/"},
		}}, 0},
		{"extracted", tarballFS(t, big), generate.Spec{Copy: []generate.Copy{
			{From: "@src/big.tgz", To: "@artifact/", Strategy: generate.Extract},
		}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			budget := generate.NewBudget(tc.budget)
			opts := generate.BuildOptions{Memory: budget, MaxBytes: 700 * kib}
			_, _, err := generate.Build(context.Background(), st, source.Object{Kind: "ExternalArtifact", Namespace: "ns", Name: "capped"},
				map[string]generate.Source{"src": {FS: tc.fsys}}, tc.spec, opts)
			var cerr *generate.CopyError
			if !errors.Is(err, source.ErrTooLarge) || !errors.As(err, &cerr) || !strings.Contains(err.Error(), "more than the 716800") {
				t.Fatalf("err = %v, want a *CopyError wrapping source.ErrTooLarge with the cap", err)
			}
			t.Log(err)
			if budget.InUse() != 0 {
				t.Fatalf("%d bytes still held", budget.InUse())
			}
		})
	}
}

// tarballFS holds big.tgz, the files of fsys as a tar.gz.
func tarballFS(t *testing.T, fsys fstest.MapFS) fs.FS {
	t.Helper()
	dir := t.TempDir()
	for name, f := range fsys {
		if err := os.WriteFile(filepath.Join(dir, name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var tgz bytes.Buffer
	if err := source.WriteArchive(context.Background(), &tgz, dir, source.ArchiveOptions{}); err != nil {
		t.Fatal(err)
	}
	return fstest.MapFS{"big.tgz": {Data: tgz.Bytes()}}
}

func TestNewBudget(t *testing.T) {
	for limit, want := range map[int64]int64{0: generate.DefaultMemoryBytes, -1: 0, 42: 42} {
		if got := generate.NewBudget(limit).Limit(); got != want {
			t.Errorf("NewBudget(%d).Limit() = %d, want %d", limit, got, want)
		}
	}
}
