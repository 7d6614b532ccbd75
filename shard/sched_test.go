package shard

import (
	"context"
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func nop(context.Context) error { return nil }

func TestSchedRoundRobin(t *testing.T) {
	s := newSched(PoolOptions{Shards: 1, TenantLimit: 100})
	q := s.queues[0]
	for i := range 100 {
		s.add(t0, "big", string(rune('a'+i%26))+string(rune('a'+i/26)), nop)
	}
	for i := range 5 {
		s.add(t0, "small", string(rune('a'+i)), nop)
	}
	// Run one item at a time, each taking one quantum: the small tenant's
	// five items must not wait behind the big tenant's hundred.
	lastSmall := -1
	for i := range 105 {
		it := s.next(t0, q)
		if it == nil {
			t.Fatalf("dispatch %d: nothing to run", i)
		}
		if it.k.tenant == "small" {
			lastSmall = i
		}
		s.done(t0, it, nil, s.o.Quantum)
	}
	if lastSmall > 10 {
		t.Fatalf("last item of the small tenant ran at dispatch %d, want ≤ 10", lastSmall)
	}
	if it := s.next(t0, q); it != nil {
		t.Fatalf("queue not empty: %v", it.k)
	}
}

func TestSchedChargesRunTime(t *testing.T) {
	s := newSched(PoolOptions{Shards: 1, TenantLimit: 100})
	q := s.queues[0]
	for i := range 40 {
		s.add(t0, "slow", string(rune('a'+i)), nop)
		s.add(t0, "fast", string(rune('a'+i)), nop)
	}
	var slow, fast time.Duration
	for range 40 {
		it := s.next(t0, q)
		took := s.o.Quantum
		if it.k.tenant == "slow" {
			took *= 10
			slow += took
		} else {
			fast += took
		}
		s.done(t0, it, nil, took)
	}
	// Equal shares of run time within a few slow items.
	if slow > fast+30*s.o.Quantum {
		t.Fatalf("slow tenant got %v of run time against %v", slow, fast)
	}
}

func TestSchedTenantLimit(t *testing.T) {
	s := newSched(PoolOptions{Shards: 1, TenantLimit: 2})
	q := s.queues[0]
	for _, k := range []string{"1", "2", "3", "4"} {
		s.add(t0, "a", k, nop)
	}
	a, b := s.next(t0, q), s.next(t0, q)
	if a == nil || b == nil {
		t.Fatal("want two items running")
	}
	if it := s.next(t0, q); it != nil {
		t.Fatalf("third item %v started over the tenant limit", it.k)
	}
	s.add(t0, "b", "1", nop)
	if it := s.next(t0, q); it == nil || it.k.tenant != "b" {
		t.Fatal("another tenant must run while a is at its limit")
	}
	s.done(t0, a, nil, time.Millisecond)
	if it := s.next(t0, q); it == nil || it.k.tenant != "a" {
		t.Fatal("a must run again once below its limit")
	}
}

func TestSchedBackoff(t *testing.T) {
	s := newSched(PoolOptions{Shards: 1, BackoffBase: time.Second, BackoffMax: 5 * time.Second})
	q := s.queues[0]
	s.add(t0, "a", "x", nop)
	now := t0
	var delays []time.Duration
	for range 5 {
		it := s.next(now, q)
		if it == nil {
			t.Fatal("item not ready")
		}
		s.done(now, it, errors.New("fail"), time.Millisecond)
		s.add(now, "b", "other", nop) // other work is not blocked
		if o := s.next(now, q); o == nil || o.k.tenant != "b" {
			t.Fatal("backoff blocked the queue")
		} else {
			s.done(now, o, nil, time.Millisecond)
		}
		due := s.promote(now, nil)
		delays = append(delays, due.Sub(now))
		now = due
		s.promote(now, nil)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("backoff delays = %v, want %v", delays, want)
		}
	}
	// An Add during backoff makes the item ready at once.
	it := s.next(now, q)
	s.done(now, it, errors.New("fail"), time.Millisecond)
	s.add(now, "a", "x", nop)
	if it := s.next(now, q); it == nil || it.k.key != "x" {
		t.Fatal("Add during backoff did not make the item ready")
	}
}

// TestSchedResizeKeepsKeyExclusive moves a tenant while its item runs.
func TestSchedResizeKeepsKeyExclusive(t *testing.T) {
	s := newSched(PoolOptions{Shards: 1})
	s.add(t0, "a", "x", nop)
	it := s.next(t0, s.queues[0])
	if err := s.resize(8); err != nil {
		t.Fatal(err)
	}
	shard, _ := s.place.Lookup("a")
	s.add(t0, "a", "x", nop) // re-added while running on the old shard
	for id, q := range s.queues {
		if got := s.next(t0, q); got != nil {
			t.Fatalf("shard %d started %v while it runs elsewhere", id, got.k)
		}
	}
	if q := s.done(t0, it, nil, time.Millisecond); q != s.queues[shard] {
		t.Fatal("done did not point at the tenant's new shard")
	}
	if got := s.next(t0, s.queues[shard]); got == nil || got.k.key != "x" {
		t.Fatal("the re-added item did not run on the new shard")
	}
}

func TestSchedRemoveTenant(t *testing.T) {
	s := newSched(PoolOptions{Shards: 2})
	s.add(t0, "a", "run", nop)
	s.add(t0, "a", "queued", nop)
	running := s.next(t0, s.queues[s.tenants["a"].shard])
	if running.k.key != "run" {
		t.Fatalf("ran %v first", running.k)
	}
	s.removeTenant("a")
	if _, ok := s.place.Lookup("a"); ok {
		t.Fatal("tenant still placed")
	}
	s.done(t0, running, errors.New("fail"), time.Millisecond)
	if len(s.items) != 0 || len(s.tenants) != 0 || len(s.delayed) != 0 {
		t.Fatalf("leftovers after removal: %d items, %d tenants, %d backing off", len(s.items), len(s.tenants), len(s.delayed))
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		name                     string
		current, total, heaviest int
		opts                     CountOptions
		want                     int
	}{
		{"empty", 0, 0, 0, CountOptions{}, 1},
		{"first count", 0, 1050, 10, CountOptions{}, 11},
		{"within band above", 10, 1090, 10, CountOptions{}, 10},
		{"leaves band above", 10, 1110, 10, CountOptions{}, 12},
		{"within band below", 10, 820, 10, CountOptions{}, 10},
		{"leaves band below", 10, 800, 10, CountOptions{}, 8},
		{"no hysteresis", 10, 1001, 10, CountOptions{Hysteresis: -1}, 11},
		{"capped by heaviest", 0, 1000, 300, CountOptions{}, 3},
		{"heaviest cap overrides band", 10, 1000, 300, CountOptions{}, 3},
		{"capped by max", 0, 100000, 1, CountOptions{}, 64},
		{"custom max and target", 0, 1000, 1, CountOptions{Max: 4, Target: 50}, 4},
		{"custom target", 0, 1000, 1, CountOptions{Target: 250}, 4},
		{"one tenant", 5, 5000, 5000, CountOptions{}, 1},
		// Issue 21: one release more or less on the heaviest tenant used to
		// flip the count between 14 and 15.
		{"above the heaviest limit drops to it", 15, 56435, 3763, CountOptions{}, 14},
		{"below the heaviest limit rises only with margin", 14, 56435, 3762, CountOptions{}, 14},
		{"rises to the heaviest limit past the margin", 14, 56435, 3420, CountOptions{}, 15},
		{"heaviest limit without hysteresis", 14, 56435, 3762, CountOptions{Hysteresis: -1}, 15},
		{"first count takes the heaviest limit", 0, 56435, 3762, CountOptions{}, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Count(tt.current, tt.total, tt.heaviest, tt.opts); got != tt.want {
				t.Errorf("Count(%d, %d, %d) = %d, want %d", tt.current, tt.total, tt.heaviest, got, tt.want)
			}
		})
	}
}

func TestSchedAddAfter(t *testing.T) {
	s := newSched(PoolOptions{Shards: 1, BackoffBase: time.Minute})
	q := s.queues[0]
	s.addAfter(t0, "a", "x", 10*time.Second, nop)
	if it := s.next(t0, q); it != nil {
		t.Fatal("item ran before its delay")
	}
	s.addAfter(t0, "a", "x", 5*time.Second, nop) // the earlier due time wins
	s.addAfter(t0, "a", "x", 20*time.Second, nop)
	if due := s.promote(t0, nil); !due.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("due = %v, want t0+5s", due.Sub(t0))
	}
	now := t0.Add(5 * time.Second)
	s.promote(now, nil)
	it := s.next(now, q)
	if it == nil {
		t.Fatal("item not ready at its due time")
	}
	// Requested while running: waits after the run ends...
	s.addAfter(now, "a", "x", 30*time.Second, nop)
	s.done(now.Add(time.Second), it, nil, time.Second)
	if due := s.promote(now.Add(time.Second), nil); !due.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("due after success = %v, want +30s", due.Sub(now))
	}
	// ...and a failure waits for the shorter of the delay and the backoff.
	now = now.Add(30 * time.Second)
	s.promote(now, nil)
	it = s.next(now, q)
	s.addAfter(now, "a", "x", 10*time.Second, nop)
	s.done(now, it, errors.New("fail"), time.Second)
	if due := s.promote(now, nil); !due.Equal(now.Add(10 * time.Second)) {
		t.Fatalf("due after failure = %v, want +10s (shorter than the 1m backoff)", due.Sub(now))
	}
	// Add makes a waiting item ready at once.
	s.add(now, "a", "x", nop)
	if it := s.next(now, q); it == nil {
		t.Fatal("Add did not make the waiting item ready")
	}
}
