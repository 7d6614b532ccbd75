package shard

import (
	"context"
	"fmt"
	"time"
)

// Start runs the workers until ctx ends. It then lets running items finish
// for up to the grace period, cancels the context of those still running,
// and returns: nil if all finished, an error otherwise. Queued items are not
// started once ctx has ended.
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return ErrStarted
	}
	p.started = true
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	p.workCtx = workCtx
	for q, g := range p.groups {
		p.spawn(q, g)
	}
	p.mu.Unlock()

	delayDone := make(chan struct{})
	go p.delayLoop(ctx, delayDone)
	<-ctx.Done()

	p.mu.Lock()
	p.stopping = true
	for _, g := range p.groups {
		g.cond.Broadcast()
	}
	p.mu.Unlock()
	<-delayDone

	finished := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(finished)
	}()
	timer := time.NewTimer(p.s.o.GracePeriod)
	defer timer.Stop()
	select {
	case <-finished:
		return nil
	case <-timer.C:
		p.mu.Lock()
		n := 0
		for _, t := range p.s.tenants {
			n += t.running
		}
		p.mu.Unlock()
		return fmt.Errorf("shard: grace period %s expired with %d items running", p.s.o.GracePeriod, n)
	}
}

// work is one worker of a shard. It runs items only while the pool owns
// the shard, and leaves when the pool stops or its shard is removed, always
// after finishing the item in hand.
func (p *Pool) work(q *fairQueue, g *group) {
	defer p.wg.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.stopping && p.groups[q] == g {
		var it *item
		if p.owned(g.id) {
			it = p.s.next(p.now(), q)
		}
		if it == nil {
			g.cond.Wait()
			continue
		}
		fn := it.fn
		p.runningOn[g.id]++
		sr, ok := p.onShard[g.id]
		if !ok {
			ctx, cancel := context.WithCancelCause(context.WithValue(p.workCtx, shardKey{}, g.id))
			sr = shardRun{ctx: ctx, cancel: cancel}
			p.onShard[g.id] = sr
		}
		p.mu.Unlock()
		start := p.now()
		err := run(sr.ctx, fn)
		took := p.now().Sub(start)
		p.mu.Lock()
		p.finished(g.id)
		next := p.s.done(p.now(), it, err, took)
		if it.state == waiting {
			p.kickDelay()
		}
		if next != q {
			p.signal(next)
		}
	}
}

// finished records the end of an item that started on shard and releases
// the Drains waiting for the shard once none is left.
func (p *Pool) finished(shard int) {
	p.runningOn[shard]--
	if p.runningOn[shard] > 0 {
		return
	}
	delete(p.runningOn, shard)
	if sr, ok := p.onShard[shard]; ok {
		sr.cancel(nil)
		delete(p.onShard, shard)
	}
	if ch := p.drained[shard]; ch != nil {
		close(ch)
		delete(p.drained, shard)
	}
}

// Recheck wakes the workers of every shard to ask PoolOptions.Owned again,
// after its answer changed, so that the queued items of a shard that became
// owned start at once.
func (p *Pool) Recheck() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.groups {
		g.cond.Broadcast()
	}
}

// Drain blocks until no item that started on shard is running, counting an
// item on the shard it started on even if its tenant moved since, or until
// ctx ends, and then returns ctx.Err(). It starts nothing and stops nothing:
// to give a shard up, make PoolOptions.Owned return false for it first, so
// that no item starts there once Drain has returned, then call Drain.
// Workers ask Owned before every item, so giving a shard up needs no
// Recheck, though one does no harm.
func (p *Pool) Drain(ctx context.Context, shard int) error {
	p.mu.Lock()
	if p.runningOn[shard] == 0 {
		p.mu.Unlock()
		return nil
	}
	ch := p.drained[shard]
	if ch == nil {
		ch = make(chan struct{})
		p.drained[shard] = ch
	}
	p.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Cancel cancels, with cause, the context of every item running now that
// started on shard (counted as Drain counts them); items that start later
// get a context of their own. It is how an owner that gives a shard up, or
// lost it, stops the work still running there: the items end as their work
// honours ctx, and Drain tells when they have. A nil cause is
// context.Canceled.
func (p *Pool) Cancel(shard int, cause error) {
	p.mu.Lock()
	sr, ok := p.onShard[shard]
	delete(p.onShard, shard)
	p.mu.Unlock()
	if ok {
		sr.cancel(cause)
	}
}

// run calls fn and turns a panic into an error, so that one bad item cannot
// take the process down.
func run(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("shard: work item panicked: %v", r)
		}
	}()
	if fn == nil {
		return nil
	}
	return fn(ctx)
}

func (p *Pool) kickDelay() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// delayLoop makes items ready when their backoff ends.
func (p *Pool) delayLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		due := p.s.promote(p.now(), p.signal)
		p.mu.Unlock()
		wait := time.Hour
		if !due.IsZero() {
			wait = max(time.Until(due), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-timer.C:
		}
	}
}

type shardKey struct{}

// FromContext returns the shard an item runs on, from the context the pool
// passes to the item's work.
func FromContext(ctx context.Context) (int, bool) {
	id, ok := ctx.Value(shardKey{}).(int)
	return id, ok
}
