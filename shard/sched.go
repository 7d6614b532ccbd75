package shard

import (
	"container/heap"
	"context"
	"slices"
	"time"
)

// sched is the pool's decision core: placement, run queues, backoff and
// statistics, with time passed in. It does no locking and starts nothing, so
// the pool drives it with real time and the fairness benchmark with a
// simulated clock.
type sched struct {
	o       PoolOptions
	auto    bool
	place   *Placement
	queues  map[int]*fairQueue
	tenants map[string]*tenantQ
	items   map[itemKey]*item
	delayed delayHeap
}

func newSched(opts PoolOptions) *sched {
	o := opts.normalize()
	n := o.Shards
	if n == 0 {
		n = 1
	}
	place, _ := NewPlacement(nil, Range(n), o.Assign) // cannot fail: no tenants, distinct IDs
	s := &sched{
		o:       o,
		auto:    opts.Shards <= 0,
		place:   place,
		queues:  map[int]*fairQueue{},
		tenants: map[string]*tenantQ{},
		items:   map[itemKey]*item{},
	}
	for _, id := range place.ids {
		s.queues[id] = &fairQueue{}
	}
	return s
}

// tenant returns the state of tenant id, registering it with weight 1 in the
// placement if it is unknown.
func (s *sched) tenant(id string) *tenantQ {
	t := s.tenants[id]
	if t == nil {
		t = &tenantQ{id: id, shard: -1, est: int64(s.o.Quantum)}
		s.tenants[id] = t
	}
	if t.shard < 0 {
		s.setTenant(Tenant{ID: id, Weight: 1})
	}
	return t
}

// setTenant places or re-weights a tenant and applies any resulting moves,
// including an automatic resize.
func (s *sched) setTenant(tn Tenant) error {
	if s.tenants[tn.ID] == nil {
		s.tenants[tn.ID] = &tenantQ{id: tn.ID, shard: -1, est: int64(s.o.Quantum)}
	}
	moves, err := s.place.Set(tn)
	if err != nil {
		return err
	}
	s.apply(moves)
	s.autoResize()
	return nil
}

// removeTenant drops a tenant from the placement with its queued and
// backing-off items. Its running items finish and are not run again.
func (s *sched) removeTenant(id string) {
	t := s.tenants[id]
	if t == nil {
		return
	}
	s.apply(s.place.Remove(id))
	for _, it := range t.ready {
		it.state = idle
		s.forget(t, it)
	}
	t.ready = nil
	for k, it := range s.items {
		if k.tenant == id && it.state == waiting {
			heap.Remove(&s.delayed, it.heapIdx)
			s.forget(t, it)
		}
	}
	if t.items == 0 {
		delete(s.tenants, id)
	}
	s.autoResize()
}

func (s *sched) forget(t *tenantQ, it *item) {
	delete(s.items, it.k)
	t.items--
	if t.shard < 0 && t.items == 0 {
		delete(s.tenants, t.id)
	}
}

// resize places the tenants on shards 0..n-1.
func (s *sched) resize(n int) error { return s.setShards(Range(max(n, 1))) }

// setShards places the tenants on the shard IDs ids.
func (s *sched) setShards(ids []int) error {
	moves, err := s.place.Resize(ids)
	if err != nil {
		return err
	}
	s.syncQueues(moves)
	return nil
}

// syncQueues gives every shard of the placement a queue, applies moves and
// drops the queues of shards that are gone.
func (s *sched) syncQueues(moves []Move) {
	for _, id := range s.place.ids {
		if s.queues[id] == nil {
			s.queues[id] = &fairQueue{}
		}
	}
	s.apply(moves)
	for id := range s.queues {
		if !slices.Contains(s.place.ids, id) {
			delete(s.queues, id)
		}
	}
}

// anchor places the tenants on ids as Assign with Previous = previous does,
// and keeps them so (Placement.Anchor).
func (s *sched) anchor(ids []int, previous map[string]int) error {
	moves, err := s.place.Anchor(ids, previous)
	if err != nil {
		return err
	}
	s.syncQueues(moves)
	return nil
}

func (s *sched) autoResize() {
	if !s.auto {
		return
	}
	total, heaviest := s.place.total, s.place.heaviest()
	cur := len(s.place.ids)
	if n := Count(cur, total, heaviest, s.o.Auto); n != cur {
		s.resize(n) // cannot fail: n ≥ 1 distinct IDs
	}
}

// apply moves tenants' queues to their new shards.
func (s *sched) apply(moves []Move) {
	for _, m := range moves {
		t := s.tenants[m.Tenant]
		if t == nil {
			continue
		}
		if q := s.queues[t.shard]; q != nil {
			q.remove(t)
		}
		t.shard = m.To
		if q := s.queues[m.To]; q != nil {
			q.push(t)
		}
		if s.o.Moved != nil {
			s.o.Moved(m)
		}
	}
}

// add queues fn under (tenant, key). A key is never queued twice: adding a
// queued key replaces its func, adding a running key runs it once more
// afterwards, and adding a waiting key makes it ready now.
func (s *sched) add(now time.Time, tenant, key string, fn func(context.Context) error) {
	t, it := s.item(tenant, key, fn)
	switch it.state {
	case idle:
		s.enqueue(now, t, it)
	case running:
		it.dirty = true
	case waiting:
		heap.Remove(&s.delayed, it.heapIdx)
		s.enqueue(now, t, it)
	}
}

// item returns the item of (tenant, key), creating it, and sets its func.
func (s *sched) item(tenant, key string, fn func(context.Context) error) (*tenantQ, *item) {
	t := s.tenant(tenant)
	k := itemKey{tenant, key}
	it := s.items[k]
	if it == nil {
		it = &item{k: k, heapIdx: -1}
		s.items[k] = it
		t.items++
	}
	it.fn = fn
	return t, it
}

// addAfter queues fn under (tenant, key) once d has passed. A key that is
// already queued stays queued; a waiting key keeps the earlier of its due
// times; a running key waits d after its run ends, or its backoff if that
// ends sooner.
func (s *sched) addAfter(now time.Time, tenant, key string, d time.Duration, fn func(context.Context) error) {
	if d <= 0 {
		s.add(now, tenant, key, fn)
		return
	}
	_, it := s.item(tenant, key, fn)
	due := now.Add(d)
	switch it.state {
	case idle:
		s.wait(it, due)
	case running:
		if it.after.IsZero() || due.Before(it.after) {
			it.after = due
		}
	case waiting:
		if due.Before(it.due) {
			it.due = due
			heap.Fix(&s.delayed, it.heapIdx)
		}
	}
}

func (s *sched) wait(it *item, due time.Time) {
	it.state = waiting
	it.due = due
	heap.Push(&s.delayed, it)
}

func (s *sched) enqueue(now time.Time, t *tenantQ, it *item) {
	it.state = queued
	it.readyAt = now
	t.ready = append(t.ready, it)
	if q := s.queues[t.shard]; q != nil {
		q.push(t)
	}
}

// next returns the next item to run on shard queue q, or nil.
func (s *sched) next(now time.Time, q *fairQueue) *item {
	it := q.pop(s.o.TenantLimit, int64(s.o.Quantum))
	if it == nil {
		return nil
	}
	it.state = running
	t := s.tenants[it.k.tenant]
	wait := now.Sub(it.readyAt)
	t.waits++
	t.waitSum += wait
	t.waitMax = max(t.waitMax, wait)
	return it
}

// done records the end of a run and decides what happens to the item next.
// It returns the queue that may now have work.
func (s *sched) done(now time.Time, it *item, err error, took time.Duration) *fairQueue {
	t := s.tenants[it.k.tenant]
	t.running--
	cost := max(int64(took), 1)
	t.deficit += t.est - cost
	t.est = max(t.est+(cost-t.est)/4, 1)
	it.state = idle
	if err != nil {
		t.failed++
		it.failures++
	} else {
		t.succeeded++
		it.failures = 0
	}
	after := it.after
	it.after = time.Time{}
	switch {
	case t.shard < 0:
		s.forget(t, it)
	case it.dirty:
		it.dirty = false
		s.enqueue(now, t, it)
	case err != nil:
		due := now.Add(s.backoff(it.failures))
		if !after.IsZero() && after.Before(due) {
			due = after
		}
		s.wait(it, due)
	case !after.IsZero():
		if after.Before(now) {
			after = now
		}
		s.wait(it, after)
	default:
		s.forget(t, it)
	}
	return s.queues[t.shard]
}

// backoff is base·2^(failures-1), capped.
func (s *sched) backoff(failures int) time.Duration {
	d := s.o.BackoffBase
	for i := 1; i < failures && d < s.o.BackoffMax; i++ {
		d *= 2
	}
	return min(d, s.o.BackoffMax)
}

// promote makes items whose backoff has ended ready again. It returns the
// queues that got work and the next due time (zero if none).
func (s *sched) promote(now time.Time, woke func(*fairQueue)) time.Time {
	for len(s.delayed) > 0 {
		it := s.delayed[0]
		if it.due.After(now) {
			return it.due
		}
		heap.Pop(&s.delayed)
		t := s.tenants[it.k.tenant]
		s.enqueue(now, t, it)
		if q := s.queues[t.shard]; q != nil && woke != nil {
			woke(q)
		}
	}
	return time.Time{}
}

// delayHeap orders backing-off items by due time.
type delayHeap []*item

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h delayHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *delayHeap) Push(x any) {
	it := x.(*item)
	it.heapIdx = len(*h)
	*h = append(*h, it)
}
func (h *delayHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.heapIdx = -1
	return it
}
