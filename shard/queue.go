package shard

import (
	"context"
	"math"
	"time"
)

// itemKey identifies a work item across the pool.
type itemKey struct{ tenant, key string }

// item is one work item and its scheduling state.
type item struct {
	k        itemKey
	fn       func(context.Context) error
	state    itemState
	dirty    bool // added again while running: run again once done
	failures int
	readyAt  time.Time // when it became ready, for the wait time
	due      time.Time // when it becomes ready while waiting
	after    time.Time // requested by addAfter while running, zero if none
	heapIdx  int
}

type itemState uint8

const (
	idle itemState = iota
	queued
	running
	waiting
)

// tenantQ is a tenant's queue inside its shard plus its fair-share state.
type tenantQ struct {
	id      string
	shard   int // shard ID the tenant is placed on
	ready   []*item
	running int
	deficit int64 // DRR credit in nanoseconds of work
	est     int64 // moving average of run time, charged at dispatch
	inRing  bool
	items   int // items of this tenant known to the pool

	// statistics
	waitSum   time.Duration
	waitMax   time.Duration
	waits     uint64
	succeeded uint64
	failed    uint64
}

// fairQueue is a shard's run queue: deficit round-robin across tenants,
// measured in run time, with a cap on each tenant's running items.
//
// A tenant earns a quantum of run time each time its turn comes and pays
// the estimated cost of each item it starts; the estimate is corrected with
// the real cost when the item ends. A tenant whose items run long or keep
// failing therefore gets fewer turns, not more workers.
type fairQueue struct {
	ring []*tenantQ
}

// push makes t eligible for turns if it has ready items.
func (q *fairQueue) push(t *tenantQ) {
	if !t.inRing && len(t.ready) > 0 {
		t.inRing = true
		q.ring = append(q.ring, t)
	}
}

// remove takes t out of the ring, for a tenant that moves to another shard.
func (q *fairQueue) remove(t *tenantQ) {
	if !t.inRing {
		return
	}
	for i, x := range q.ring {
		if x == t {
			q.ring = append(q.ring[:i], q.ring[i+1:]...)
			break
		}
	}
	t.inRing = false
}

func (q *fairQueue) rotate() {
	t := q.ring[0]
	copy(q.ring, q.ring[1:])
	q.ring[len(q.ring)-1] = t
}

// compact drops tenants without ready items. An idle tenant keeps no credit,
// as in DRR, but keeps its debt.
func (q *fairQueue) compact() {
	kept := q.ring[:0]
	for _, t := range q.ring {
		if len(t.ready) > 0 {
			kept = append(kept, t)
			continue
		}
		t.inRing = false
		t.deficit = min(t.deficit, 0)
	}
	clear(q.ring[len(kept):])
	q.ring = kept
}

// pop returns the next item to run, or nil if every tenant with ready items
// is at its concurrency cap.
func (q *fairQueue) pop(limit int, quantum int64) *item {
	for {
		q.compact()
		need := int64(math.MaxInt64)
		for range len(q.ring) {
			t := q.ring[0]
			if t.running < limit {
				if t.deficit > 0 {
					// The tenant keeps the head while it has credit.
					it := t.ready[0]
					t.ready[0] = nil
					t.ready = t.ready[1:]
					t.deficit -= t.est
					t.running++
					return it
				}
				t.deficit += quantum
				if t.deficit > 0 {
					need = 0
				} else {
					need = min(need, -t.deficit/quantum+1)
				}
			}
			q.rotate()
		}
		if need == math.MaxInt64 {
			return nil
		}
		// Skip the rounds in which nobody could start anything.
		if need > 0 {
			for _, t := range q.ring {
				if t.running < limit {
					t.deficit += need * quantum
				}
			}
		}
	}
}
