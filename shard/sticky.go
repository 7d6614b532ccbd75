package shard

import (
	"cmp"
	"slices"
)

// This file is placement with memory (Options.Previous, Options.Sticky).
// Without memory a change of the snapshot replays the whole placement, and
// where a few tenants are very heavy a resize or a churn cascades through
// the full shards; with memory a tenant moves only when its shard is gone
// or over the balance target, or to fill a fresh shard.

// fromIDs returns, in p.from, the shard ID of each entry, -1 if unplaced.
func (p *Placement) fromIDs() []int {
	from := grow(p.from, len(p.entries))
	p.from = from
	for i := range p.entries {
		from[i] = -1
		if at := p.entries[i].at; at >= 0 {
			from[i] = p.ids[at]
		}
	}
	return from
}

// settle places with memory. On entry, an entry's at is the shard index it
// keeps if it can, -1 if it has none; from is each entry's shard ID before
// the change, for the move records (nil: the shard IDs of at, as on entry);
// fresh marks by index the shards of steps 3 and 4 (nil: none). It updates
// p.tenants for the tenants whose shard ID changed; after a resize, which
// changes shard indexes, the caller updates the rest.
//
//  1. Every tenant with a shard stays there.
//  2. A shard over the limit sheds its tenants lightest first (among equal
//     weights, last in placement order first), skipping weight 0, until it
//     is within the limit; a tenant alone on its shard stays. Then it takes
//     back, heaviest first, those it shed that fit within the limit again.
//     The limit is the balance target itself, floor(c·max(w_max, ceil(W/N))),
//     and at least the capacity: a shard that meets the target keeps its
//     tenants even when the capacity, which follows W/N, is lower.
//  3. The tenants without a shard are placed in placement order: back on the
//     shard that shed them if it has room under the capacity; else, if any
//     tenant kept its shard, on the first fresh shard in their ranking that
//     stays within the mean load ceil(W/N), so that what a resize sheds goes
//     to the new shards; else by place, against the capacity, with rem
//     counting only them. One that fits nowhere lands on the least loaded
//     shard, as without memory, and if that is over the limit it evicts from
//     it the tenants after it in placement order, last first, until it is
//     within; they are placed in their turn.
//  4. If any tenant kept its shard, a fresh shard, one that no tenant was on
//     before (just added, or left empty by the change before), still below
//     half the mean load W/(2N) takes the tenants whose first choice it is
//     from the other shards, last in placement order first, as long as the
//     giving shard stays at or above half the mean and the taking one within
//     the capacity. Without this a shard added where the heaviest tenant
//     sets the bound, N > W/w_max, would stay idle.
//  5. If a shard is still over the limit, which happens only when the
//     tenants are few and heavy against the slack, and placement without
//     memory gives a lower maximum load, that placement is used instead.
//
// Each tenant is evicted only by one before it in placement order, so the
// pass ends. With no tenant placed on entry it is replayAll.
func (p *Placement) settle(from []int, fresh []bool, moves *[]Move) {
	if from == nil {
		from = p.fromIDs()
	}
	limit := p.cap
	if n := len(p.ids); n > 0 {
		lower := max(p.Heaviest().Weight, (p.total+n-1)/n)
		limit = max(limit, p.factor*lower/10000)
	}
	load := p.load
	clear(load)
	for i := range p.entries {
		if e := &p.entries[i]; e.at >= 0 {
			load[e.at] += e.w
		}
	}
	// home is, for a tenant shed in step 2 or evicted in step 3, the shard
	// index it had, to go back to if room is left there; else -1.
	home := grow(p.home, len(p.entries))
	p.home = home
	shed := p.shed[:0]
	for i := range p.entries {
		home[i] = -1
		if e := &p.entries[i]; e.at >= 0 && e.w > 0 && load[e.at] > limit {
			shed = append(shed, int32(i))
		}
	}
	// Lightest first, so that a shard sheds little beyond its excess; among
	// equal weights, last in placement order first.
	slices.SortFunc(shed, func(a, b int32) int {
		if wa, wb := p.entries[a].w, p.entries[b].w; wa != wb {
			return cmp.Compare(wa, wb)
		}
		return cmp.Compare(b, a)
	})
	for _, i := range shed {
		e := &p.entries[i]
		if load[e.at] > limit && load[e.at] > e.w {
			load[e.at] -= e.w
			home[i] = e.at
			e.at = -1
		}
	}
	// Put back, heaviest first, what a shard shed beyond its need: one that
	// had to shed a heavy tenant after its light ones keeps the light ones.
	for j := len(shed) - 1; j >= 0; j-- {
		i := shed[j]
		if h := home[i]; h >= 0 && load[h]+p.entries[i].w <= limit {
			load[h] += p.entries[i].w
			p.entries[i].at = h
			home[i] = -1
		}
	}
	p.shed = shed[:0]
	kept := false
	for i := range p.entries {
		kept = kept || p.entries[i].at >= 0
	}
	rem := p.rem
	clear(rem)
	for i := range p.entries {
		if e := &p.entries[i]; e.at < 0 {
			rem[e.top] += e.w
		}
	}
	for i := range p.entries {
		e := &p.entries[i]
		if e.at >= 0 {
			continue
		}
		rem[e.top] -= e.w
		at := int32(-1)
		if h := home[i]; h >= 0 && load[h]+e.w <= p.cap {
			at = h
		}
		if at < 0 && kept && fresh != nil {
			at = p.pickFresh(e, load, fresh)
		}
		if at < 0 {
			at = p.place(e, load, rem, nil)
		}
		e.at = at
		load[at] += e.w
		for j := len(p.entries) - 1; j > i && load[at] > limit; j-- {
			if o := &p.entries[j]; o.at == at && o.w > 0 {
				load[at] -= o.w
				home[j] = at
				o.at = -1
				rem[o.top] += o.w
			}
		}
	}
	for u, f := range fresh {
		if f && kept {
			p.fill(u, load)
		}
	}
	if kept && slices.Max(load) > limit {
		p.fallBack()
	}
	for i := range p.entries {
		e := &p.entries[i]
		to := p.ids[e.at]
		if from[i] == to {
			continue
		}
		if p.tenants != nil {
			p.tenants[e.id] = slot{w: e.w, at: e.at}
		}
		if moves != nil {
			*moves = append(*moves, Move{Tenant: e.id, Weight: e.w, From: from[i], To: to})
		}
	}
}

// fresh returns, by shard index, whether no shard ID in named is that
// shard's.
func (p *Placement) fresh(named func(yield func(int) bool)) []bool {
	f := make([]bool, len(p.ids))
	for i := range f {
		f[i] = true
	}
	for s := range named {
		if j, ok := slices.BinarySearch(p.ids, s); ok {
			f[j] = false
		}
	}
	return f
}

// pickFresh returns the first fresh shard index in e's ranking where e
// stays within the mean load, or -1.
func (p *Placement) pickFresh(e *entry, load []int, fresh []bool) int32 {
	mean := (p.total + len(p.ids) - 1) / len(p.ids)
	var best uint64
	found := false
	for i, f := range fresh {
		if !f || load[i]+e.w > mean {
			continue
		}
		if k := rankKey(score(e.h, p.seeds[i]), i, p.mask); !found || k > best {
			best, found = k, true
		}
	}
	if !found {
		return -1
	}
	return keyIndex(best, p.mask)
}

// fill is step 4 of settle: shard index u, which no tenant was on, takes
// tenants whose first choice it is until it holds half the mean load.
func (p *Placement) fill(u int, load []int) {
	floor := p.total / (2 * len(p.ids))
	for j := len(p.entries) - 1; j >= 0 && load[u] < floor; j-- {
		e := &p.entries[j]
		if int(e.top) != u || int(e.at) == u || e.w == 0 {
			continue
		}
		if load[e.at]-e.w >= floor && load[u]+e.w <= p.cap {
			load[e.at] -= e.w
			load[u] += e.w
			e.at = int32(u)
		}
	}
}

// fallBack is step 5 of settle: it replaces the placement by the one
// without memory if that has a lower maximum load.
func (p *Placement) fallBack() {
	kept := make([]int32, len(p.entries))
	for i := range p.entries {
		kept[i] = p.entries[i].at
		p.entries[i].at = -1
	}
	keptLoad := slices.Clone(p.load)
	p.replayAll(nil, nil)
	if slices.Max(p.load) < slices.Max(keptLoad) {
		return
	}
	copy(p.load, keptLoad)
	for i := range p.entries {
		e := &p.entries[i]
		e.at = kept[i]
		if p.tenants != nil {
			p.tenants[e.id] = slot{w: e.w, at: e.at}
		}
	}
}
