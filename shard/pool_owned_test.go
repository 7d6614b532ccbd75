package shard

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// quiet is how long a test watches for an item that must not start.
const quiet = 50 * time.Millisecond

// tenantsOn returns one tenant of p per shard 0..n-1, all set in p.
func tenantsOn(t *testing.T, p *Pool, n int) []string {
	t.Helper()
	for i := range 10 * n {
		if err := p.SetTenant(Tenant{ID: fmt.Sprintf("tenant-%d", i), Weight: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ids := make([]string, n)
	for i := range 10 * n {
		id := fmt.Sprintf("tenant-%d", i)
		if s, ok := p.Lookup(id); ok && ids[s] == "" {
			ids[s] = id
		}
	}
	for s, id := range ids {
		if id == "" {
			t.Fatalf("no tenant on shard %d", s)
		}
	}
	return ids
}

// expectNone fails if a key arrives on ran within quiet.
func expectNone(t *testing.T, ran <-chan string) {
	t.Helper()
	select {
	case k := <-ran:
		t.Fatalf("%s ran on a shard that is not owned", k)
	case <-time.After(quiet):
	}
}

func TestPoolOwned(t *testing.T) {
	var own [2]atomic.Bool
	own[0].Store(true)
	p := NewPool(PoolOptions{Shards: 2, Workers: 2, Owned: func(s int) bool { return own[s].Load() }})
	tn := tenantsOn(t, p, 2)
	ran := make(chan string, 10)
	job := func(key string) func(context.Context) error {
		return func(context.Context) error { ran <- key; return nil }
	}
	p.Add(tn[0], "now-0", job("now-0"))
	p.Add(tn[1], "now-1", job("now-1"))
	p.AddAfter(tn[1], "later-1", time.Millisecond, job("later-1"))
	startPool(t, p)

	if k := <-ran; k != "now-0" {
		t.Fatalf("%s ran first, want now-0", k)
	}
	expectNone(t, ran)
	st := p.Stats()
	if s := st.Shards[1]; s.Owned || s.Queued != 2 || s.Waiting != 0 {
		t.Fatalf("Stats().Shards[1] = %+v, want not owned, 2 queued (the AddAfter item ready)", s)
	}
	if !st.Shards[0].Owned {
		t.Fatalf("Stats().Shards[0] = %+v, want owned", st.Shards[0])
	}

	own[1].Store(true)
	p.Recheck()
	got := map[string]bool{<-ran: true, <-ran: true}
	if !got["now-1"] || !got["later-1"] {
		t.Fatalf("after Recheck ran %v, want now-1 and later-1", got)
	}

	// Give shard 1 up as the engine does before it releases the Lease.
	own[1].Store(false)
	p.Recheck()
	if err := p.Drain(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	p.Add(tn[1], "after", job("after"))
	expectNone(t, ran)
	if s := p.Stats().Shards[1]; s.Queued != 1 {
		t.Fatalf("Stats().Shards[1] = %+v, want the item queued, not dropped", s)
	}
}

// TestPoolOwnedBackoff checks that an item whose backoff ends while its
// shard is not owned stays queued.
func TestPoolOwnedBackoff(t *testing.T) {
	var own atomic.Bool
	own.Store(true)
	p := NewPool(PoolOptions{Shards: 1, BackoffBase: time.Millisecond, Owned: func(int) bool { return own.Load() }})
	var attempts atomic.Int32
	ran := make(chan string, 10)
	p.Add("a", "flaky", func(context.Context) error {
		ran <- "flaky"
		if attempts.Add(1) == 1 {
			own.Store(false) // the Lease is lost while the item runs
			return errors.New("first attempt fails")
		}
		return nil
	})
	startPool(t, p)
	<-ran
	expectNone(t, ran)
	if s := p.Stats().Shards[0]; s.Queued != 1 || s.Running != 0 {
		t.Fatalf("Stats().Shards[0] = %+v, want the retry queued", s)
	}
	own.Store(true)
	p.Recheck()
	<-ran
	if n := attempts.Load(); n != 2 {
		t.Fatalf("flaky ran %d times, want 2", n)
	}
}

// movingTenant returns a tenant that Assign puts on different shards of
// Range(2) and Range(3).
func movingTenant(t *testing.T) string {
	t.Helper()
	for i := range 100 {
		id := fmt.Sprintf("tenant-%d", i)
		a2, _ := Assign([]Tenant{{ID: id, Weight: 1}}, Range(2), Options{})
		a3, _ := Assign([]Tenant{{ID: id, Weight: 1}}, Range(3), Options{})
		if a2.Tenants[id] != a3.Tenants[id] {
			return id
		}
	}
	t.Fatal("no tenant moves from 2 to 3 shards")
	return ""
}

func TestPoolDrain(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 2})
	tn := movingTenant(t)
	started, release := make(chan struct{}), make(chan struct{})
	p.Add(tn, "slow", func(context.Context) error {
		close(started)
		<-release
		return nil
	})
	startPool(t, p)
	<-started
	from, _ := p.Lookup(tn)
	if err := p.Resize(3); err != nil {
		t.Fatal(err)
	}
	to, _ := p.Lookup(tn)
	if to == from {
		t.Fatalf("tenant stayed on shard %d", from)
	}
	// The item counts on the shard it started on, not on its tenant's.
	if err := p.Drain(context.Background(), to); err != nil {
		t.Fatalf("Drain(%d) = %v", to, err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Drain(context.Background(), from) }()
	select {
	case err := <-done:
		t.Fatalf("Drain(%d) = %v while its item runs", from, err)
	case <-time.After(quiet):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Drain(%d) = %v", from, err)
	}
}

func TestPoolDrainContext(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 1})
	started, release := make(chan struct{}), make(chan struct{})
	p.Add("a", "stuck", func(context.Context) error {
		close(started)
		<-release
		return nil
	})
	startPool(t, p)
	defer close(release)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := p.Drain(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain() = %v, want context.DeadlineExceeded", err)
	}
}

func TestFromContext(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Start(ctx)
	got := make(chan int, 1)
	p.Add("tenant-a", "k", func(ctx context.Context) error {
		id, ok := FromContext(ctx)
		if !ok {
			id = -1
		}
		got <- id
		return nil
	})
	want, _ := p.Lookup("tenant-a")
	select {
	case id := <-got:
		if id != want {
			t.Fatalf("FromContext = %d, want the tenant's shard %d", id, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("item did not run")
	}
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("FromContext found a shard in a plain context")
	}
}

// TestPoolReportsMoves: Moved hears of every tenant placed and of every
// tenant a resize moves, with the shards it moved between.
func TestPoolReportsMoves(t *testing.T) {
	var moves []Move
	p := NewPool(PoolOptions{Shards: 2, Moved: func(m Move) { moves = append(moves, m) }})
	for i := range 20 {
		if err := p.SetTenant(Tenant{ID: fmt.Sprintf("t%02d", i), Weight: 1 + i%3}); err != nil {
			t.Fatal(err)
		}
	}
	placed := map[string]int{}
	for _, m := range moves {
		placed[m.Tenant] = m.To
	}
	if len(placed) != 20 {
		t.Fatalf("Moved heard of %d tenants, want 20", len(placed))
	}
	moves = nil
	if err := p.Resize(3); err != nil {
		t.Fatal(err)
	}
	if len(moves) == 0 {
		t.Fatal("a resize from 2 to 3 shards moved nobody")
	}
	for _, m := range moves {
		if m.From != placed[m.Tenant] {
			t.Errorf("move of %s from %d, but it was on %d", m.Tenant, m.From, placed[m.Tenant])
		}
		if got, _ := p.Lookup(m.Tenant); got != m.To {
			t.Errorf("move of %s to %d, but Lookup says %d", m.Tenant, m.To, got)
		}
	}
}

func TestPoolCancel(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 2, Workers: 2})
	ids := tenantsOn(t, p, 2)
	errLost := errors.New("shard lost")
	type ended struct {
		shard int
		cause error
	}
	started, done := make(chan int, 3), make(chan ended, 3)
	block := func(ctx context.Context) error {
		s, _ := FromContext(ctx)
		started <- s
		<-ctx.Done()
		done <- ended{s, context.Cause(ctx)}
		return ctx.Err()
	}
	p.Add(ids[0], "a", block)
	p.Add(ids[1], "b", block)
	startPool(t, p)
	<-started
	<-started
	p.Cancel(0, errLost)
	if e := <-done; e.shard != 0 || !errors.Is(e.cause, errLost) {
		t.Fatalf("an item ended on shard %d with cause %v; want shard 0 with %v", e.shard, e.cause, errLost)
	}
	if err := p.Drain(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	// The item on shard 1 runs on, and an item that starts on shard 0
	// after the Cancel gets a live context.
	p.Add(ids[0], "c", block)
	if s := <-started; s != 0 {
		t.Fatalf("item c started on shard %d", s)
	}
	select {
	case e := <-done:
		t.Fatalf("an item on shard %d ended (%v) without a Cancel of its shard", e.shard, e.cause)
	case <-time.After(quiet):
	}
	p.Cancel(1, nil)
	p.Cancel(0, nil)
	for range 2 {
		if e := <-done; !errors.Is(e.cause, context.Canceled) {
			t.Fatalf("an item on shard %d ended with cause %v, want context.Canceled", e.shard, e.cause)
		}
	}
}
