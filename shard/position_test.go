package shard

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestQueuedSaysWhereAndWhy(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 1, Workers: 4, TenantLimit: 1})
	release := make(chan struct{})
	started := make(chan struct{})
	p.Add("noisy", "hr-0", func(context.Context) error {
		close(started)
		<-release
		return nil
	})
	startPool(t, p)
	<-started
	for i := 1; i <= 3; i++ {
		p.Add("noisy", fmt.Sprintf("hr-%d", i), func(context.Context) error { return nil })
	}
	if _, ok := p.Queued("noisy", "hr-0"); ok {
		t.Fatal("Queued(hr-0) = true for a running item")
	}
	if _, ok := p.Queued("noisy", "unknown"); ok {
		t.Fatal("Queued(unknown) = true")
	}
	for i := 1; i <= 3; i++ {
		pl, ok := p.Queued("noisy", fmt.Sprintf("hr-%d", i))
		if !ok {
			t.Fatalf("Queued(hr-%d) = false for a queued item", i)
		}
		if pl.Position != i || pl.TenantQueued != 3 || pl.ShardQueued != 3 || pl.TenantRunning != 1 || pl.ShardRunning != 1 {
			t.Errorf("Queued(hr-%d) = %+v", i, pl)
		}
		if got, want := pl.Reason("noisy"), "tenant noisy is at its concurrency cap of 1"; got != want {
			t.Errorf("Reason = %q, want %q", got, want)
		}
		if !strings.Contains(pl.String(), "shard 0, position") {
			t.Errorf("String = %q", pl.String())
		}
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := p.Queued("noisy", "hr-3"); !ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("hr-3 still queued after the cap was released")
}

func TestQueuedOnAShardAnotherReplicaOwns(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 1, Owned: func(int) bool { return false }})
	p.Add("a", "hr", func(context.Context) error { return nil })
	startPool(t, p)
	pl, ok := p.Queued("a", "hr")
	if !ok || pl.Owned {
		t.Fatalf("Queued = %+v, %v", pl, ok)
	}
	if got, want := pl.Reason("a"), "shard 0 is owned by another replica"; got != want {
		t.Errorf("Reason = %q, want %q", got, want)
	}
}

// Item tells a running item, a queued one, and one backing off after a
// failure with its due time.
func TestItemSaysRunningQueuedOrWaiting(t *testing.T) {
	p := NewPool(PoolOptions{Shards: 1, Workers: 4, TenantLimit: 1})
	release := make(chan struct{})
	started := make(chan struct{})
	p.Add("t", "running", func(context.Context) error {
		close(started)
		<-release
		return nil
	})
	failed := make(chan struct{}, 1)
	startPool(t, p)
	<-started
	p.Add("t", "queued", func(context.Context) error { return nil })
	p.Add("u", "failing", func(context.Context) error {
		failed <- struct{}{}
		return fmt.Errorf("boom")
	})
	<-failed
	if it, ok := p.Item("t", "running"); !ok || it.State != "running" {
		t.Errorf("running: %+v %v", it, ok)
	}
	if it, ok := p.Item("t", "queued"); !ok || it.State != "queued" {
		t.Errorf("queued: %+v %v", it, ok)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		it, ok := p.Item("u", "failing")
		if ok && it.State == "waiting" {
			if it.Failures < 1 || !it.Due.After(time.Now().Add(-time.Second)) {
				t.Errorf("waiting: %+v", it)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed item never waited: %+v %v", it, ok)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := p.Item("t", "unknown"); ok {
		t.Error("an unknown item is known")
	}
	if st := p.Stats(); len(st.Shards) != 1 || st.Shards[0].Workers != 4 {
		t.Errorf("shard stats %+v, want one shard of 4 workers", st.Shards)
	}
	close(release)
}
