package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ErrStarted is returned by Start when the pool was already started.
var ErrStarted = errors.New("shard: pool already started")

// PoolOptions configure a Pool. The zero value is the documented default.
type PoolOptions struct {
	// Shards is the number of shards. Zero means automatic: the count follows
	// the tenants' weights through Count with the Auto options.
	Shards int
	// Auto tunes the automatic shard count when Shards is zero.
	Auto CountOptions
	// Assign tunes the placement of tenants on shards. With Assign.Sticky
	// the pool places with memory: a tenant moves only when a resize or the
	// balance bound makes it (see Assign). That placement depends on the
	// pool's history, so replicas that must each derive the same placement
	// leave it off and share the memory through Anchor.
	Assign Options
	// Workers is the number of workers of each shard. Zero means 4.
	Workers int
	// TenantLimit is the most items of one tenant that run at once, across
	// all shards. Zero means 2.
	TenantLimit int
	// Quantum is the run time a tenant earns per turn in the deficit
	// round-robin of its shard. Zero means 100ms.
	Quantum time.Duration
	// BackoffBase is the delay after an item's first failure; it doubles with
	// each further failure. Zero means 1s.
	BackoffBase time.Duration
	// BackoffMax caps the backoff delay. Zero means 5m.
	BackoffMax time.Duration
	// GracePeriod is how long Start waits, once its context ends, for running
	// items to finish before it cancels their context and returns. Zero
	// means 30s.
	GracePeriod time.Duration
	// Owned reports whether this pool may run the items of a shard, for
	// replicas that share shards by holding a Lease per shard. The items of
	// a shard that is not owned stay queued, and their failure backoff and
	// AddAfter delays run out as usual, but none of them starts; their wait
	// time in Stats includes the time the shard was not owned. When the
	// answer changes to true, call Recheck so that the shard's workers look
	// again; before giving a shard up, make Owned return false for it and
	// call Drain. Nil means every shard is owned. Shard IDs are 0..N-1
	// unless set by SetShards, and an automatic count changes N, so
	// replicas that share shards want a fixed Shards.
	//
	// Owned is called with the pool's lock held, by the workers before each
	// item and by Add, AddAfter, Stats and the delay loop. It must be cheap,
	// must not block, and must not call the pool. It must read its answer
	// safely against the goroutine that changes it, preferably from an
	// atomic: a lock that Owned takes must never be held while calling the
	// pool, or a worker and the caller wait for each other.
	Owned func(shard int) bool
	// Moved, when set, is told of every tenant placed or moved to another
	// shard (From is -1 for a new tenant), for example to bring the
	// tenant's work to the replica that owns its new shard. Like Owned it
	// is called with the pool's mutex held: it must not block or call the
	// pool. Default nil.
	Moved func(Move)
}

func (o PoolOptions) normalize() PoolOptions {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	o.Shards = max(o.Shards, 0)
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.TenantLimit <= 0 {
		o.TenantLimit = 2
	}
	def(&o.Quantum, 100*time.Millisecond)
	def(&o.BackoffBase, time.Second)
	def(&o.BackoffMax, 5*time.Minute)
	def(&o.GracePeriod, 30*time.Second)
	return o
}

// Pool runs work items on sharded workers. Every item of a tenant runs on
// the tenant's shard; inside a shard, tenants share the workers by deficit
// round-robin, and each tenant has a concurrency cap. An item that fails is
// retried with exponential backoff while the queue goes on. An item key never
// runs on two workers at once, also while a resize moves its tenant.
//
// Pool implements Start(ctx) error, as a controller-runtime Runnable does.
// All methods are safe for concurrent use.
type Pool struct {
	mu       sync.Mutex
	s        *sched
	groups   map[*fairQueue]*group
	started  bool
	stopping bool
	workCtx  context.Context
	wg       sync.WaitGroup
	kick     chan struct{}
	now      func() time.Time

	// runningOn counts running items by the shard they started on, which
	// Drain waits on; drained holds a channel, closed when the count of a
	// shard falls to zero, for each shard that a Drain waits for.
	runningOn map[int]int
	drained   map[int]chan struct{}
	// onShard is the context of the items running on a shard, by the
	// shard they started on, which Cancel cancels; it ends when the last
	// of them finishes.
	onShard map[int]shardRun
}

// shardRun is the context shared by the items running on one shard.
type shardRun struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// NewPool returns a pool with no tenants. Items may be added before Start.
func NewPool(opts PoolOptions) *Pool {
	return &Pool{
		s:      newSched(opts),
		groups: map[*fairQueue]*group{},
		kick:   make(chan struct{}, 1),
		now:    time.Now,

		runningOn: map[int]int{},
		drained:   map[int]chan struct{}{},
		onShard:   map[int]shardRun{},
	}
}

// Add queues fn as the work of key for tenant. While the key is queued a
// second Add only replaces fn; while it runs, it runs once more afterwards;
// while it backs off after a failure, it becomes ready at once. A tenant
// not set with SetTenant is placed with weight 1.
func (p *Pool) Add(tenant, key string, fn func(ctx context.Context) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	before := len(p.s.queues)
	p.s.add(p.now(), tenant, key, fn)
	p.afterChange(before)
	p.signal(p.s.queues[p.s.tenants[tenant].shard])
}

// AddAfter queues fn as the work of key for tenant once d has passed, for
// periodic reconciliation. A key already queued stays queued (with fn); a key
// already waiting keeps the earlier due time; a key that is running waits d
// after its run ends, or its failure backoff if that is shorter. d ≤ 0 is Add.
func (p *Pool) AddAfter(tenant, key string, d time.Duration, fn func(ctx context.Context) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	before := len(p.s.queues)
	p.s.addAfter(p.now(), tenant, key, d, fn)
	p.afterChange(before)
	p.signal(p.s.queues[p.s.tenants[tenant].shard])
	p.kickDelay()
}

// SetTenant sets the weight of a tenant, placing it if it is new. With an
// automatic shard count this may resize the pool.
func (p *Pool) SetTenant(t Tenant) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	before := len(p.s.queues)
	if err := p.s.setTenant(t); err != nil {
		return fmt.Errorf("set tenant %q: %w", t.ID, err)
	}
	p.afterChange(before)
	return nil
}

// RemoveTenant removes a tenant with its queued items. Items already running
// finish but do not run again.
func (p *Pool) RemoveTenant(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	before := len(p.s.queues)
	p.s.removeTenant(id)
	p.afterChange(before)
}

// Resize sets a fixed number of shards, n ≥ 1, and turns off the automatic
// count. Tenants move to their new shards at once; an item that is running
// finishes on its old shard before its key can run again.
func (p *Pool) Resize(n int) error {
	if n < 1 {
		return fmt.Errorf("resize to %d shards: need at least 1", n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s.auto = false
	if err := p.s.resize(n); err != nil {
		return err
	}
	p.afterChange(-1)
	return nil
}

// SetShards sets a fixed set of shard IDs and turns off the automatic
// count, as Resize does, but the IDs need not be 0..n-1: SetShards of the
// current IDs without one drops that shard, wherever it is, and the
// tenants of the other shards stay where they are unless the balance moves
// them (with PoolOptions.Assign.Sticky, only then). IDs must be distinct,
// not negative, and at least one.
func (p *Pool) SetShards(ids []int) error {
	if len(ids) == 0 {
		return fmt.Errorf("set shards: need at least 1")
	}
	for _, id := range ids {
		if id < 0 {
			return fmt.Errorf("set shards: negative shard ID %d", id)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.setShards(ids); err != nil {
		return fmt.Errorf("set shards: %w", err)
	}
	return nil
}

func (p *Pool) setShards(ids []int) error {
	if err := p.s.setShards(ids); err != nil {
		return err
	}
	p.s.auto = false
	p.afterChange(-1)
	return nil
}

// RemoveShard drops shard id, whichever it is, and keeps the others; it
// turns off the automatic count. Removing the only shard, or one the pool
// does not have, is an error.
func (p *Pool) RemoveShard(id int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := slices.Clone(p.s.place.ids)
	i := slices.Index(ids, id)
	switch {
	case i < 0:
		return fmt.Errorf("remove shard %d: no such shard", id)
	case len(ids) == 1:
		return fmt.Errorf("remove shard %d: it is the only one", id)
	}
	if err := p.setShards(slices.Delete(ids, i, i+1)); err != nil {
		return fmt.Errorf("remove shard %d: %w", id, err)
	}
	return nil
}

// Anchor places the tenants on the shard IDs shards as Assign with
// Options.Previous = previous does, now and after every later change, until
// the next Anchor (see Placement.Anchor); it turns off the automatic count.
// Replicas that each run a pool give them the same previous, published by
// one of them, and so agree on the placement wherever they see the same
// tenants, while a tenant still moves only when the balance needs it. IDs
// must be distinct, not negative, and at least one.
func (p *Pool) Anchor(shards []int, previous map[string]int) error {
	if len(shards) == 0 {
		return fmt.Errorf("anchor: need at least 1 shard")
	}
	for _, id := range shards {
		if id < 0 {
			return fmt.Errorf("anchor: negative shard ID %d", id)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.s.anchor(shards, previous); err != nil {
		return fmt.Errorf("anchor: %w", err)
	}
	p.s.auto = false
	p.afterChange(-1)
	return nil
}

// Assignment returns a copy of the current assignment of the tenants.
func (p *Pool) Assignment() Assignment {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.place.Assignment()
}

// Weights returns the total weight of the tenants and the heaviest one,
// the inputs of Count.
func (p *Pool) Weights() (total int, heaviest Tenant) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.place.Total(), p.s.place.Heaviest()
}

// Shards returns the shard IDs in ascending order.
func (p *Pool) Shards() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.s.place.ids)
}

// Lookup returns the shard of a tenant.
func (p *Pool) Lookup(tenant string) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.place.Lookup(tenant)
}

// group is the set of workers of one shard.
type group struct {
	id   int
	cond *sync.Cond
}

// afterChange starts workers for new shards, tells workers of removed
// shards to leave, and wakes every shard when the shard set changed.
func (p *Pool) afterChange(shardsBefore int) {
	changed := shardsBefore != len(p.s.queues)
	for q, g := range p.groups {
		if p.s.queues[g.id] != q {
			delete(p.groups, q)
			g.cond.Broadcast()
			changed = true
		}
	}
	for id, q := range p.s.queues {
		g := p.groups[q]
		if g == nil {
			g = &group{id: id, cond: sync.NewCond(&p.mu)}
			p.groups[q] = g
			if p.started && !p.stopping {
				p.spawn(q, g)
			}
		}
		if changed {
			g.cond.Broadcast()
		}
	}
}

// signal wakes one worker of q's shard to take new work. A shard that is
// not owned is left asleep: its worker would find nothing to run.
func (p *Pool) signal(q *fairQueue) {
	if g := p.groups[q]; g != nil && p.owned(g.id) {
		g.cond.Signal()
	}
}

// owned reports PoolOptions.Owned for a shard.
func (p *Pool) owned(shard int) bool {
	return p.s.o.Owned == nil || p.s.o.Owned(shard)
}

func (p *Pool) spawn(q *fairQueue, g *group) {
	for range p.s.o.Workers {
		p.wg.Add(1)
		go p.work(q, g)
	}
}
