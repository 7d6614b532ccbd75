package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startPool runs p.Start in the background and returns a stop func that
// cancels it and returns Start's error.
func startPool(t *testing.T, p *Pool) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Start(ctx) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			err = <-errc
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func TestPoolRunsEveryItemOnce(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 3, Workers: 2})
	var mu sync.Mutex
	ran := map[string]int{}
	var wg sync.WaitGroup
	for i := range 200 {
		key := fmt.Sprintf("hr-%d", i)
		wg.Add(1)
		p.Add(fmt.Sprintf("tenant-%d", i%20), key, func(context.Context) error {
			mu.Lock()
			ran[key]++
			mu.Unlock()
			wg.Done()
			return nil
		})
	}
	stop := startPool(t, p)
	wg.Wait()
	if err := stop(); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	if len(ran) != 200 {
		t.Fatalf("ran %d keys, want 200", len(ran))
	}
	for k, n := range ran {
		if n != 1 {
			t.Errorf("%s ran %d times", k, n)
		}
	}
	st := p.Stats()
	if len(st.Shards) != 3 || len(st.Tenants) != 20 {
		t.Fatalf("Stats() = %d shards, %d tenants; want 3, 20", len(st.Shards), len(st.Tenants))
	}
	load := 0
	for _, s := range st.Shards {
		load += s.Load
		if s.Queued+s.Running+s.Waiting != 0 {
			t.Errorf("shard %d still has work: %+v", s.ID, s)
		}
	}
	for _, ts := range st.Tenants {
		if ts.Succeeded != 10 || ts.Waits != 10 || ts.Weight != 1 {
			t.Errorf("tenant %+v: want 10 runs and weight 1", ts)
		}
	}
	if load != 20 {
		t.Errorf("total load = %d, want 20 (unknown tenants weigh 1)", load)
	}
}

// TestPoolExclusive hammers the pool with re-adds and resizes and checks that
// a key never runs twice at once and a tenant never exceeds its cap.
func TestPoolExclusive(t *testing.T) {
	const limit = 2
	p := NewPool(PoolOptions{Shards: 2, Workers: 3, TenantLimit: limit, BackoffBase: time.Millisecond, BackoffMax: 4 * time.Millisecond})
	var (
		mu       sync.Mutex
		byKey    = map[string]int{}
		byTenant = map[string]int{}
		bad      atomic.Value
		runs     atomic.Int64
	)
	work := func(tenant, key string, fail bool) func(context.Context) error {
		var failed atomic.Bool // fail the first run only, so that the pool drains
		return func(context.Context) error {
			mu.Lock()
			byKey[key]++
			byTenant[tenant]++
			if byKey[key] > 1 {
				bad.Store("key " + key + " ran twice at once")
			}
			if byTenant[tenant] > limit {
				bad.Store("tenant " + tenant + " over its cap")
			}
			mu.Unlock()
			time.Sleep(50 * time.Microsecond)
			mu.Lock()
			byKey[key]--
			byTenant[tenant]--
			mu.Unlock()
			runs.Add(1)
			if fail && !failed.Swap(true) {
				return errors.New("boom")
			}
			return nil
		}
	}
	stop := startPool(t, p)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newRand(uint64(g))
			for i := range 1500 {
				tenant := fmt.Sprintf("t%d", r.IntN(6))
				key := fmt.Sprintf("k%d", r.IntN(5))
				p.Add(tenant, tenant+"/"+key, work(tenant, tenant+"/"+key, r.IntN(4) == 0))
				if g == 0 && i%100 == 0 {
					if err := p.Resize(1 + r.IntN(5)); err != nil {
						t.Error(err)
					}
				}
				if g == 1 && i%50 == 0 {
					_ = p.SetTenant(Tenant{ID: tenant, Weight: r.IntN(10)})
				}
			}
		}()
	}
	wg.Wait()
	waitIdle(t, p)
	if err := stop(); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	if runs.Load() == 0 {
		t.Fatal("nothing ran")
	}
}

func TestPoolBackoffDoesNotBlock(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 1, Workers: 1, BackoffBase: time.Millisecond, BackoffMax: 8 * time.Millisecond})
	var attempts atomic.Int32
	flaky := make(chan struct{})
	p.Add("noisy", "flaky", func(context.Context) error {
		if attempts.Add(1) < 4 {
			return errors.New("not yet")
		}
		close(flaky)
		return nil
	})
	healthy := make(chan struct{}, 10)
	for i := range 10 {
		p.Add("quiet", fmt.Sprint(i), func(context.Context) error { healthy <- struct{}{}; return nil })
	}
	stop := startPool(t, p)
	<-flaky
	for range 10 {
		<-healthy
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := attempts.Load(); got != 4 {
		t.Fatalf("flaky item ran %d times, want 4", got)
	}
}

func TestPoolGracePeriod(t *testing.T) {
	t.Run("in-flight work completes", func(t *testing.T) {
		p := NewPool(PoolOptions{Shards: 1, GracePeriod: time.Minute})
		started, release := make(chan struct{}), make(chan struct{})
		var finished atomic.Bool
		p.Add("a", "slow", func(context.Context) error {
			close(started)
			<-release
			finished.Store(true)
			return nil
		})
		stop := startPool(t, p)
		<-started
		go func() { time.Sleep(10 * time.Millisecond); close(release) }()
		if err := stop(); err != nil {
			t.Fatalf("Start() = %v, want nil", err)
		}
		if !finished.Load() {
			t.Fatal("Start returned before the in-flight item finished")
		}
	})
	t.Run("grace expires", func(t *testing.T) {
		p := NewPool(PoolOptions{Shards: 1, GracePeriod: 20 * time.Millisecond})
		started := make(chan struct{})
		canceled := make(chan struct{})
		p.Add("a", "stuck", func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			close(canceled)
			return ctx.Err()
		})
		stop := startPool(t, p)
		<-started
		if err := stop(); err == nil {
			t.Fatal("Start() = nil, want a grace period error")
		}
		<-canceled // the item's context is cancelled when the grace ends
	})
	t.Run("start twice", func(t *testing.T) {
		p := NewPool(PoolOptions{})
		running := make(chan struct{})
		p.Add("a", "probe", func(context.Context) error { close(running); return nil })
		stop := startPool(t, p)
		<-running // the first Start is under way
		if err := p.Start(context.Background()); !errors.Is(err, ErrStarted) {
			t.Fatalf("second Start() = %v, want ErrStarted", err)
		}
		_ = stop()
	})
}

func TestPoolPanicIsFailure(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 1, BackoffBase: time.Hour})
	done := make(chan struct{})
	p.Add("a", "bad", func(context.Context) error { defer close(done); panic("oops") })
	stop := startPool(t, p)
	<-done
	_ = stop() // Start returns after the worker has recorded the run
	st := p.Stats()
	if len(st.Tenants) != 1 || st.Tenants[0].Failed != 1 || st.Tenants[0].Waiting != 1 {
		t.Fatalf("Stats().Tenants = %+v, want one failure backing off", st.Tenants)
	}
}

func TestPoolAutoCount(t *testing.T) {
	p := NewPool(PoolOptions{})
	for i := range 50 {
		if err := p.SetTenant(Tenant{ID: fmt.Sprint(i), Weight: 20}); err != nil {
			t.Fatal(err)
		}
	}
	// 1000 releases at 100 per shard.
	if n := len(p.Stats().Shards); n != 10 {
		t.Fatalf("auto shard count = %d, want 10", n)
	}
	for i := range 45 {
		p.RemoveTenant(fmt.Sprint(i))
	}
	// 100 releases: hysteresis keeps 2 shards while the total is above 90.
	if n := len(p.Stats().Shards); n != 2 {
		t.Fatalf("auto shard count after removals = %d, want 2", n)
	}
	for i := 45; i < 50; i++ {
		_ = p.SetTenant(Tenant{ID: fmt.Sprint(i), Weight: 10})
	}
	if n := len(p.Stats().Shards); n != 1 {
		t.Fatalf("auto shard count at 50 releases = %d, want 1", n)
	}
	if err := p.Resize(0); err == nil {
		t.Fatal("Resize(0): want error")
	}
	if err := p.SetTenant(Tenant{ID: "x", Weight: -1}); err == nil {
		t.Fatal("SetTenant(negative): want error")
	}
}

// waitIdle waits until the pool has nothing queued, running or backing off.
func waitIdle(t *testing.T, p *Pool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		busy := 0
		for _, s := range p.Stats().Shards {
			busy += s.Queued + s.Running + s.Waiting
		}
		if busy == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("pool did not drain within a minute")
}

func TestPoolAddAfter(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 1})
	ran := make(chan struct{})
	p.AddAfter("a", "later", 5*time.Millisecond, func(context.Context) error { close(ran); return nil })
	if st := p.Stats(); st.Shards[0].Waiting != 1 {
		t.Fatalf("Stats().Shards[0] = %+v, want one waiting item", st.Shards[0])
	}
	stop := startPool(t, p)
	<-ran
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
