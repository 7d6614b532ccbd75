package shard

import (
	"fmt"
	"slices"
)

// Move records a tenant whose shard changed. From is -1 for a tenant that
// was added and To is -1 for a tenant that was removed.
type Move struct {
	Tenant   string
	Weight   int
	From, To int
}

// entry is a tenant in placement order.
type entry struct {
	id string
	h  uint64
	w  int
	at int32 // index into Placement.ids, -1 while unplaced
}

// slot is what Lookup needs about a tenant.
type slot struct {
	w  int
	at int32
}

// Placement is an assignment kept up to date under changes. After any
// sequence of Set, Remove and Resize it equals Assign over the same snapshot,
// but an update only replays the tenants that follow the changed one in
// placement order, and stops as soon as the shard loads agree again with the
// previous run. A Placement is not safe for concurrent use.
type Placement struct {
	factor  int
	ids     []int
	seeds   []uint64
	entries []entry
	tenants map[string]slot
	load    []int
	total   int
	cap     int

	scores  []uint64
	newLoad []int
	oldLoad []int
}

// NewPlacement places tenants on shards as Assign does and keeps the result
// for incremental updates.
func NewPlacement(tenants []Tenant, shards []int, opts Options) (*Placement, error) {
	ids, err := sortedShards(shards)
	if err != nil {
		return nil, err
	}
	p := &Placement{
		factor:  opts.factor(),
		entries: make([]entry, 0, len(tenants)),
		tenants: make(map[string]slot, len(tenants)),
	}
	for _, t := range tenants {
		if t.Weight < 0 {
			return nil, fmt.Errorf("tenant %q: negative weight %d", t.ID, t.Weight)
		}
		if _, dup := p.tenants[t.ID]; dup {
			return nil, fmt.Errorf("tenant %q: duplicate tenant ID", t.ID)
		}
		p.tenants[t.ID] = slot{w: t.Weight, at: -1}
		p.entries = append(p.entries, entry{id: t.ID, h: tenantHash(t.ID), w: t.Weight, at: -1})
		p.total += t.Weight
	}
	slices.SortFunc(p.entries, compareEntries)
	if err := p.setShards(ids); err != nil {
		return nil, err
	}
	p.replayAll(nil, nil)
	return p, nil
}

func compareEntries(a, b entry) int {
	switch {
	case before(&a, &b):
		return -1
	case before(&b, &a):
		return 1
	}
	return 0
}

func (p *Placement) setShards(ids []int) error {
	if len(ids) == 0 && len(p.entries) > 0 {
		return ErrNoShards
	}
	p.ids = ids
	p.seeds = make([]uint64, len(ids))
	for i, id := range ids {
		p.seeds[i] = shardSeed(id)
	}
	p.scores = make([]uint64, len(ids))
	p.load = make([]int, len(ids))
	p.newLoad = make([]int, len(ids))
	p.oldLoad = make([]int, len(ids))
	p.cap = capacity(p.total, len(ids), p.factor)
	return nil
}

// Lookup returns the shard ID of tenant id and whether the tenant is known.
// It does not allocate.
func (p *Placement) Lookup(id string) (int, bool) {
	s, ok := p.tenants[id]
	if !ok || s.at < 0 {
		return -1, false
	}
	return p.ids[s.at], true
}

// Len returns the number of tenants.
func (p *Placement) Len() int { return len(p.entries) }

// Assignment returns a copy of the current assignment.
func (p *Placement) Assignment() Assignment {
	a := Assignment{
		Shards:   slices.Clone(p.ids),
		Load:     slices.Clone(p.load),
		Capacity: p.cap,
		Tenants:  make(map[string]int, len(p.entries)),
	}
	for _, e := range p.entries {
		a.Tenants[e.id] = p.ids[e.at]
	}
	return a
}

// Resize moves the placement onto a new set of shard IDs and returns the
// tenants that changed shard. Shard IDs that stay keep their tenants unless
// the bounded load moves them.
func (p *Placement) Resize(shards []int) ([]Move, error) {
	ids, err := sortedShards(shards)
	if err != nil {
		return nil, err
	}
	oldIDs := p.ids
	if err := p.setShards(ids); err != nil {
		p.ids = oldIDs
		return nil, err
	}
	var moves []Move
	p.replayAll(oldIDs, &moves)
	return moves, nil
}

// place returns the shard index for a tenant given the loads so far: the
// first shard in the tenant's ranking with room, else the least loaded,
// ties going to the better-ranked shard.
func (p *Placement) place(h uint64, w int, load []int) int32 {
	sc := p.scores
	best := 0
	for i, s := range p.seeds {
		sc[i] = score(h, s)
		if sc[i] > sc[best] {
			best = i
		}
	}
	if load[best]+w <= p.cap {
		return int32(best)
	}
	// Walk the rest of the ranking lazily: most tenants that spill find room
	// at their second or third choice, so sorting all N scores would waste time.
	least := best
	prev := best
	for range len(sc) - 1 {
		next := -1
		for i, v := range sc {
			if ranksBelow(v, i, sc[prev], prev) && (next < 0 || ranksBelow(sc[next], next, v, i)) {
				next = i
			}
		}
		if load[next]+w <= p.cap {
			return int32(next)
		}
		if load[next] < load[least] {
			least = next
		}
		prev = next
	}
	return int32(least)
}

// ranksBelow reports whether shard i with score v ranks after shard j with
// score u. Equal scores rank the lower shard ID first.
func ranksBelow(v uint64, i int, u uint64, j int) bool {
	return v < u || (v == u && i > j)
}
