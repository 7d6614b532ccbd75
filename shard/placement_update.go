package shard

import (
	"fmt"
	"slices"
)

// Set adds tenant t or changes its weight, and returns the tenants that
// changed shard as a result (t itself included when it is new or moved).
func (p *Placement) Set(t Tenant) ([]Move, error) {
	if t.Weight < 0 {
		return nil, fmt.Errorf("tenant %q: negative weight %d", t.ID, t.Weight)
	}
	old, present := p.tenants[t.ID]
	if present && old.w == t.Weight {
		return nil, nil
	}
	if len(p.ids) == 0 {
		return nil, ErrNoShards
	}
	h := tenantHash(t.ID)
	c := change{oldW: 0, oldAt: -1}
	a := -1
	prev := int32(-1)
	if present {
		a = p.index(entry{id: t.ID, h: h, w: old.w})
		prev = p.entries[a].prev
		p.entries = slices.Delete(p.entries, a, a+1)
		c.oldW, c.oldAt = old.w, old.at
		p.total -= old.w
	}
	e := entry{id: t.ID, h: h, w: t.Weight, at: old.at, prev: prev}
	if !present {
		e.at = -1
		if p.anchored {
			e.prev = p.anchorIndex(t.ID)
		}
	}
	p.rank(&e)
	b, _ := slices.BinarySearchFunc(p.entries, e, compareEntries)
	p.entries = slices.Insert(p.entries, b, e)
	p.total += t.Weight
	p.tenants[t.ID] = slot{w: t.Weight, at: e.at}
	var moves []Move
	if p.anchored {
		p.reanchor(p.fromIDs(), false, &moves)
		return moves, nil
	}
	if p.sticky {
		p.cap = capacity(p.total, len(p.ids), p.factor)
		from := p.fromIDs()
		p.settle(from, p.fresh(slices.Values(from)), &moves)
		p.tenants[t.ID] = slot{w: t.Weight, at: p.entries[b].at}
		return moves, nil
	}
	c.idx, c.hi = b, b
	if present {
		c.hi = max(a, b)
	}
	p.update(c, &moves)
	return moves, nil
}

// Remove removes tenant id and returns the tenants that changed shard as a
// result, the removed tenant first. Removing an unknown tenant is a no-op.
func (p *Placement) Remove(id string) []Move {
	old, present := p.tenants[id]
	if !present {
		return nil
	}
	a := p.index(entry{id: id, h: tenantHash(id), w: old.w})
	p.entries = slices.Delete(p.entries, a, a+1)
	delete(p.tenants, id)
	delete(p.prefs, id)
	p.total -= old.w
	moves := []Move{{Tenant: id, Weight: old.w, From: p.ids[old.at], To: -1}}
	if p.anchored {
		p.reanchor(p.fromIDs(), false, &moves)
		return moves
	}
	if p.sticky {
		p.cap = capacity(p.total, len(p.ids), p.factor)
		from := p.fromIDs()
		named := func(yield func(int) bool) {
			for _, s := range from {
				if !yield(s) {
					return
				}
			}
			yield(moves[0].From) // the removed tenant was on its shard too
		}
		p.settle(from, p.fresh(named), &moves)
		return moves
	}
	p.update(change{hi: a - 1, idx: -1, oldW: old.w, oldAt: old.at}, &moves)
	return moves
}

// index returns the position of a tenant known to be in p.entries.
func (p *Placement) index(e entry) int {
	i, found := slices.BinarySearchFunc(p.entries, e, compareEntries)
	if !found {
		panic("shard: placement index out of sync for tenant " + e.id)
	}
	return i
}

// change describes one edit of p.entries for update. Entries [0, hi] of the
// new order hold the same tenants as entries [0, hi] of the old order except
// for the changed one, and the entries after hi are the same sequence in
// both orders.
type change struct {
	hi    int
	idx   int   // index of the changed tenant in the new order, -1 if removed
	oldW  int   // its weight before the change, 0 if new
	oldAt int32 // its shard index before the change, -1 if new
}

// update replays placement after a change. Placement is a left-to-right scan
// in which each decision depends on the loads so far and on the first-choice
// weight still to come, which the change alters for every earlier tenant, so
// the replay starts at the first tenant. Once it is past the changed entries
// and the loads of the new run equal the loads the old run had at the same
// tenant, the rest of the old run is reused: from there both runs see the
// same tenants, loads and weight to come.
func (p *Placement) update(c change, moves *[]Move) {
	if cp := capacity(p.total, len(p.ids), p.factor); cp != p.cap {
		// A new bound changes every decision: replay all, with no early stop.
		p.cap = cp
		p.replayAll(p.ids, moves)
		return
	}
	nl, ol := p.newLoad, p.oldLoad
	clear(nl)
	clear(ol)
	rem := p.firstChoiceWeight()
	for i := 0; i <= c.hi; i++ {
		if i != c.idx {
			ol[p.entries[i].at] += p.entries[i].w
		}
	}
	if c.oldAt >= 0 {
		ol[c.oldAt] += c.oldW
	}
	for i := 0; i <= c.hi; i++ {
		e := &p.entries[i]
		rem[e.top] -= e.w
		nl[p.replace(i, nl, rem, moves)] += e.w
	}
	diff := 0
	for i := range nl {
		if nl[i] != ol[i] {
			diff++
		}
	}
	for i := c.hi + 1; i < len(p.entries) && diff > 0; i++ {
		e := &p.entries[i]
		rem[e.top] -= e.w
		diff += add(ol, nl, int(e.at), e.w)
		diff += add(nl, ol, int(p.replace(i, nl, rem, moves)), e.w)
	}
	for i := range p.load {
		p.load[i] += nl[i] - ol[i]
	}
}

// firstChoiceWeight fills p.rem with the total weight of the tenants whose
// first choice each shard is, and returns it.
func (p *Placement) firstChoiceWeight() []int {
	rem := p.rem
	clear(rem)
	for i := range p.entries {
		rem[p.entries[i].top] += p.entries[i].w
	}
	return rem
}

// add adds w to v[i] and returns the change in the number of indexes where
// v and other differ.
func add(v, other []int, i, w int) int {
	was := v[i] == other[i]
	v[i] += w
	switch is := v[i] == other[i]; {
	case was && !is:
		return 1
	case !was && is:
		return -1
	}
	return 0
}

// replace places entry i against load, records a move if its shard changed,
// and returns the new shard index. The caller adds the weight to load.
func (p *Placement) replace(i int, load, rem []int, moves *[]Move) int32 {
	e := &p.entries[i]
	at := p.place(e, load, rem, nil)
	if at == e.at {
		return at
	}
	from := -1
	if e.at >= 0 {
		from = p.ids[e.at]
	}
	if moves != nil {
		*moves = append(*moves, Move{Tenant: e.id, Weight: e.w, From: from, To: p.ids[at]})
	}
	e.at = at
	if p.tenants != nil {
		p.tenants[e.id] = slot{w: e.w, at: at}
	}
	return at
}

// replayAll places every tenant from scratch. oldIDs maps the stored shard
// indexes to IDs for move records; nil skips the records.
//
// Loads only grow during the replay, so a shard without room for the
// lightest tenant stays full: it leaves the list of open shards that place
// scores for the tenants that spill.
func (p *Placement) replayAll(oldIDs []int, moves *[]Move) {
	clear(p.load)
	open := p.open[:0]
	for i := range p.ids {
		open = append(open, int32(i))
	}
	rem := p.firstChoiceWeight()
	lightest := 0
	for i := range p.entries {
		if w := p.entries[i].w; i == 0 || w < lightest {
			lightest = w
		}
	}
	for i := range p.entries {
		e := &p.entries[i]
		rem[e.top] -= e.w
		at := p.place(e, p.load, rem, open)
		p.load[at] += e.w
		if p.load[at]+lightest > p.cap {
			if j := slices.Index(open, at); j >= 0 {
				open = slices.Delete(open, j, j+1)
			}
		}
		from := -1
		if e.at >= 0 && oldIDs != nil {
			from = oldIDs[e.at]
		}
		if moves != nil && from != p.ids[at] {
			*moves = append(*moves, Move{Tenant: e.id, Weight: e.w, From: from, To: p.ids[at]})
		}
		if e.at != at {
			e.at = at
			if p.tenants != nil {
				p.tenants[e.id] = slot{w: e.w, at: at}
			}
		}
	}
	p.open = open[:0]
}
