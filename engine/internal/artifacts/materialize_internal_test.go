package artifacts

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/source"
)

// TestMaterializerOneFlightPerKey joins one rebuild from many dependents
// at once: it starts once, every dependent gets its result, and nothing is
// left in memory afterwards.
func TestMaterializerOneFlightPerKey(t *testing.T) {
	var m materializer
	var starts, joined atomic.Int32
	release := make(chan struct{})
	const n = 50
	var wg sync.WaitGroup
	got := make([]source.Artifact, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := m.join("GitRepository/ns/app@sha256:1", func(f *flight) {
				starts.Add(1)
				go func() {
					<-release
					m.land("GitRepository/ns/app@sha256:1", f, source.Artifact{Digest: "sha256:1"}, nil)
				}()
			})
			if err != nil {
				t.Error(err)
				return
			}
			joined.Add(1)
			<-f.done
			got[i] = f.art
		}()
	}
	for joined.Load() < n {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if starts.Load() != 1 {
		t.Fatalf("%d rebuilds started, want 1", starts.Load())
	}
	for i, a := range got {
		if a.Digest != "sha256:1" {
			t.Fatalf("dependent %d got %+v", i, a)
		}
	}
	if len(m.flights) != 0 || len(m.failures) != 0 {
		t.Fatalf("left in memory: %d flights, %d failures", len(m.flights), len(m.failures))
	}
}

// TestMaterializerRemembersFailuresBriefly answers a rebuild that just
// failed from memory, and rebuilds again once the failure expires.
func TestMaterializerRemembersFailuresBriefly(t *testing.T) {
	var m materializer
	boom := errors.New("upstream unreachable")
	key := "OCIRepository/ns/app@sha256:2"
	starts := 0
	start := func(f *flight) { starts++ }
	f, err := m.join(key, start)
	if err != nil {
		t.Fatal(err)
	}
	self := frame.Ref{Kind: "HelmRelease", Namespace: "ns", Name: "app"}
	if m.giveUp(f, self) {
		t.Fatal("a flight in the air reported finished")
	}
	if woken := m.land(key, f, source.Artifact{}, boom); len(woken) != 1 || woken[0] != self {
		t.Fatalf("woken %v, want %v", woken, self)
	}
	if !m.giveUp(f, self) {
		t.Fatal("a landed flight reported in the air")
	}
	if _, err := m.join(key, start); !errors.Is(err, boom) || starts != 1 {
		t.Fatalf("join after a failure: %v, %d starts", err, starts)
	}
	m.failures[key] = recentFailure{err: boom, until: time.Now().Add(-time.Second)}
	if _, err := m.join(key, start); err != nil || starts != 2 {
		t.Fatalf("join after the failure expired: %v, %d starts", err, starts)
	}
	if _, ok := m.failures[key]; ok {
		t.Fatal("expired failure kept")
	}
	// A rebuild cancelled with the engine is not remembered.
	m.land(key, m.flights[key], source.Artifact{}, context.Canceled)
	if _, err := m.join(key, start); err != nil || starts != 3 {
		t.Fatalf("join after a cancelled rebuild: %v, %d starts", err, starts)
	}
}

func TestMaterializerBoundsBuilds(t *testing.T) {
	var m materializer
	var releases []func()
	for range materializeBuilds {
		r, err := m.slot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.slot(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slot beyond the bound: %v", err)
	}
	releases[0]()
	if _, err := m.slot(context.Background()); err != nil {
		t.Fatal(err)
	}
}
