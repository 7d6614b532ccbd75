package helm_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// inFlight counts actions in flight, per release and in all.
type inFlight struct {
	mu        sync.Mutex
	per       map[string]int
	all, peak int
	overlaps  []string
	started   map[string]int
}

func (f *inFlight) observe(e helm.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Done {
		f.per[e.Release]--
		f.all--
		return
	}
	f.per[e.Release]++
	f.started[e.Release]++
	f.all++
	f.peak = max(f.peak, f.all)
	if f.per[e.Release] > 1 {
		f.overlaps = append(f.overlaps, fmt.Sprintf("%s: %s while another action ran", e.Release, e.Action))
	}
}

func TestConcurrentReleases(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	f := &inFlight{per: map[string]int{}, started: map[string]int{}}
	m := newManager(t, helm.Options{Observe: f.observe})
	opts := helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo")}}

	const releases = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*releases)
	for i := range releases {
		rel := helm.Release{Name: fmt.Sprintf("c%02d", i), Namespace: ns}
		// Two callers race on every release: the second must wait for the
		// first, then find the release up to date.
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := m.Reconcile(ctx, rel, opts, helm.State{})
				if err == nil && out.Release.Status != "deployed" {
					err = fmt.Errorf("%s: %+v", rel, out.Release)
				}
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for _, o := range f.overlaps {
		t.Error(o)
	}
	for i := range releases {
		key := fmt.Sprintf("%s/c%02d", ns, i)
		if f.started[key] != 1 {
			t.Errorf("%s: %d actions, want exactly one install", key, f.started[key])
		}
		if msg, _ := configMapMessage(t, ns, fmt.Sprintf("c%02d", i)); msg != "hello" {
			t.Errorf("%s: message %q", key, msg)
		}
	}
	t.Logf("peak actions in flight: %d", f.peak)
}

func TestCancelledCallKeepsTheLockUntilHelmReturns(t *testing.T) {
	ns := cp.Namespace(t)
	f := &inFlight{per: map[string]int{}, started: map[string]int{}}
	m := newManager(t, helm.Options{Observe: f.observe})
	rel := helm.Release{Name: "cancel", Namespace: ns}
	// The Deployment never becomes ready in envtest: the wait runs until
	// ctx ends.
	spec := helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("deployment", true)}, Timeout: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: spec}, helm.State{})
	mustContain(t, err, ns+"/cancel", "context deadline exceeded")
	// The next call waits for the abandoned action, then proceeds.
	spec.Values = nil
	out, err := m.Reconcile(testContext(t), rel, helm.ReconcileOptions{Spec: spec}, helm.State{})
	if err != nil || out.Release.Status != "deployed" {
		t.Fatalf("after cancel: %+v %v", out, err)
	}
	for _, o := range f.overlaps {
		t.Error(o)
	}
}
