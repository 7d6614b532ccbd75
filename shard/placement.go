package shard

import (
	"fmt"
	"maps"
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// Move records a tenant whose shard changed. From and To are shard IDs; From
// is -1 for a tenant that was added and To is -1 for one that was removed.
type Move struct {
	Tenant   string
	Weight   int
	From, To int
}

// entry is a tenant in placement order.
type entry struct {
	id  string
	h   uint64
	w   int
	at  int32 // index into Placement.ids, -1 while unplaced
	top int32 // index of the best-ranked shard
	// prev is, in an anchored placement, the index of the tenant's shard
	// in the anchor, -1 if the anchor does not name it or its shard is gone.
	prev int32
}

// slot is what Lookup needs about a tenant.
type slot struct {
	w  int
	at int32
}

// Placement is an assignment kept up to date under changes. After any
// sequence of Set, Remove and Resize it equals Assign over the same snapshot,
// but an update reuses the ranking of every tenant and stops replaying
// placement as soon as, past the changed tenant, the shard loads agree again
// with the previous run. A Placement is not safe for concurrent use.
type Placement struct {
	factor  int
	ids     []int
	seeds   []uint64
	mask    uint64 // rankKey mask for len(ids) shards
	entries []entry
	tenants map[string]slot
	prefs   map[string][]int32 // ranking heads of tenants that spilled
	load    []int
	total   int
	cap     int
	sticky  bool // place with memory: see settle
	// anchored places after every change as Assign with Previous = anchor
	// does (see Anchor); it takes precedence over sticky.
	anchored bool
	anchor   map[string]int
	// anchorFresh marks by index the shards the anchor names no tenant on.
	anchorFresh []bool

	from []int   // scratch for settle: each entry's shard ID before it, -1 if none
	home []int32 // scratch for settle: the shard index that shed each entry, -1 if none
	shed []int32 // scratch for settle: entries of shards over the limit

	newLoad []int
	oldLoad []int
	rem     []int   // first-choice weight not yet placed, per shard, during a replay
	open    []int32 // scratch for replayAll
}

// NewPlacement places tenants on shards as Assign does and keeps the result
// for incremental updates.
func NewPlacement(tenants []Tenant, shards []int, opts Options) (*Placement, error) {
	return newPlacement(tenants, shards, opts, true, nil)
}

// newPlacement builds a placement; without an index it cannot be updated
// or looked up and is only read through its entries, which is what Assign
// needs, and it does not check for duplicate tenant IDs.
//
// scratch, if not nil, provides the buffers; the placement then must not
// outlive the caller's use of scratch.
func newPlacement(tenants []Tenant, shards []int, opts Options, index bool, scratch *sortScratch) (*Placement, error) {
	ids, err := sortedShards(shards)
	if err != nil {
		return nil, err
	}
	p := &Placement{factor: opts.factor(), sticky: opts.Sticky}
	if index {
		p.tenants = make(map[string]slot, len(tenants))
		p.prefs = map[string][]int32{}
	}
	for _, t := range tenants {
		if t.Weight < 0 {
			return nil, fmt.Errorf("tenant %q: negative weight %d", t.ID, t.Weight)
		}
		if index {
			if _, dup := p.tenants[t.ID]; dup {
				return nil, fmt.Errorf("tenant %q: duplicate tenant ID", t.ID)
			}
			p.tenants[t.ID] = slot{w: t.Weight, at: -1}
		}
		p.total += t.Weight
	}
	p.entries = sortedEntries(tenants, scratch)
	if err := p.setShards(ids); err != nil {
		return nil, err
	}
	if len(opts.Previous) == 0 {
		p.replayAll(nil, nil)
		return p, nil
	}
	for i := range p.entries {
		e := &p.entries[i]
		if s, ok := opts.Previous[e.id]; ok {
			if j, found := slices.BinarySearch(p.ids, s); found {
				e.at = int32(j)
			}
		}
	}
	p.settle(nil, p.fresh(maps.Values(opts.Previous)), nil)
	return p, nil
}

// rank records e's best-ranked shard, where almost every tenant lands. The
// rest of the ranking is only computed for the few that spill. This loop is
// most of the cost of a full recompute: N scores per tenant.
func (p *Placement) rank(e *entry) {
	m, h := p.mask, e.h
	var best uint64
	for i, seed := range p.seeds {
		best = max(best, rankKey(score(h, seed), i, m))
	}
	e.top = keyIndex(best, m)
}

func (p *Placement) setShards(ids []int) error {
	if len(ids) == 0 && len(p.entries) > 0 {
		return ErrNoShards
	}
	p.ids = ids
	p.seeds = make([]uint64, len(ids))
	p.mask = 0
	if len(ids) > 1 {
		p.mask = 1<<bits.Len(uint(len(ids)-1)) - 1
	}
	for i, id := range ids {
		p.seeds[i] = shardSeed(id)
	}
	n := len(ids)
	loads := make([]int, 4*n) // one allocation for the four
	p.load, p.newLoad, p.oldLoad, p.rem = loads[:n:n], loads[n:2*n:2*n], loads[2*n:3*n:3*n], loads[3*n:]
	p.open = make([]int32, 0, n)
	p.cap = capacity(p.total, len(ids), p.factor)
	if p.prefs != nil {
		clear(p.prefs)
	}
	p.rankAll()
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

// heaviest returns the largest weight. Tenants are in placement order, so it
// is in the leading weight class.
func (p *Placement) heaviest() int { return p.Heaviest().Weight }

// Heaviest returns the heaviest tenant, the first in placement order among
// those of the largest weight, or the zero Tenant if there are none. With
// Total it gives Count its inputs.
func (p *Placement) Heaviest() Tenant {
	var h Tenant
	for i, e := range p.entries {
		if weightClass(e.w) != weightClass(p.entries[0].w) {
			break
		}
		if i == 0 || e.w > h.Weight {
			h = Tenant{ID: e.id, Weight: e.w}
		}
	}
	return h
}

// Total returns the total weight of the tenants.
func (p *Placement) Total() int { return p.total }

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
	if len(ids) == 0 && len(p.entries) > 0 {
		return nil, ErrNoShards
	}
	var moves []Move
	if p.anchored {
		from := p.fromIDs()
		if err := p.setShards(ids); err != nil {
			p.ids = oldIDs
			return nil, err
		}
		p.indexAnchor()
		p.reanchor(from, true, &moves)
		return moves, nil
	}
	if p.sticky {
		// Keep each tenant on its shard ID if that stays; settle records
		// the moves against the IDs before.
		from := p.fromIDs()
		if err := p.setShards(ids); err != nil {
			p.ids = oldIDs
			return nil, err
		}
		for i := range p.entries {
			e := &p.entries[i]
			e.at = -1
			if j, found := slices.BinarySearch(ids, from[i]); found {
				e.at = int32(j)
			}
		}
		p.settle(from, p.fresh(slices.Values(from)), &moves)
		if p.tenants != nil {
			for _, e := range p.entries {
				p.tenants[e.id] = slot{w: e.w, at: e.at}
			}
		}
		return moves, nil
	}
	if err := p.setShards(ids); err != nil {
		p.ids = oldIDs
		return nil, err
	}
	p.replayAll(oldIDs, &moves)
	return moves, nil
}

// place returns the shard index for a tenant given the loads so far and
// rem, the weight of the tenants not yet placed whose first choice each
// shard is (e's own excluded):
//
//  1. its first choice, if it has room;
//  2. else the first shard in its ranking with room for e on top of rem: room
//     that no later tenant will claim as its first choice;
//  3. else the first shard in its ranking with room;
//  4. else the least loaded, ties going to the better-ranked shard.
//
// Rule 2 keeps a tenant that spills from filling a shard whose own tenants
// would then spill in turn: without it, a change on one shard cascades
// through the many full ones.
//
// open, if not nil, holds every shard index that may still have room for
// e; the others are not scored.
func (p *Placement) place(e *entry, load, rem []int, open []int32) int32 {
	w := e.w
	if load[e.top]+w <= p.cap {
		return e.top
	}
	if p.prefs != nil {
		// An updatable placement replays the same spilled tenants again and
		// again, so it keeps the head of their ranking.
		pref := p.prefs[e.id]
		if pref == nil {
			pref = p.ranking(e.h)
			p.prefs[e.id] = pref
		}
		for _, i := range pref[1:] {
			if load[i]+rem[i]+w <= p.cap {
				return i
			}
		}
	}
	// The first shard in ranking order that meets a rule is the one with the
	// highest key among those that do, so one pass finds it without sorting
	// and serves rules 2 and 3 at once. Late in placement most shards are
	// full, so only those with room are scored.
	m := p.mask
	var free, fit uint64
	frees, fits := false, false
	try := func(i int) {
		if load[i]+w > p.cap {
			return
		}
		k := rankKey(score(e.h, p.seeds[i]), i, m)
		if !fits || k > fit {
			fit, fits = k, true
		}
		if load[i]+rem[i]+w <= p.cap && (!frees || k > free) {
			free, frees = k, true
		}
	}
	if open != nil {
		for _, i := range open {
			try(int(i))
		}
	} else {
		for i := range p.seeds {
			try(i)
		}
	}
	switch {
	case frees:
		return keyIndex(free, m)
	case fits:
		return keyIndex(fit, m)
	}
	// No room anywhere (a tenant heavier than the room left): the least
	// loaded shard, ties going to the better-ranked one.
	least := 0
	var leastKey uint64
	for i, seed := range p.seeds {
		if load[i] > load[least] {
			continue
		}
		if k := rankKey(score(e.h, seed), i, m); load[i] < load[least] || k > leastKey {
			least, leastKey = i, k
		}
	}
	return int32(least)
}

// rankAll ranks every entry. Scoring every shard for every tenant is the
// largest part of a full recompute, and each tenant is independent of the
// others, so large inputs are split across goroutines; the result does not
// depend on how many.
func (p *Placement) rankAll() {
	const minWork = 1 << 16 // tenant·shard scores below which one goroutine is faster
	workers := min(runtime.GOMAXPROCS(0), 8, len(p.entries)*len(p.seeds)/minWork)
	if workers <= 1 {
		for i := range p.entries {
			p.rank(&p.entries[i])
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (len(p.entries) + workers - 1) / workers
	for lo := 0; lo < len(p.entries); lo += chunk {
		part := p.entries[lo:min(lo+chunk, len(p.entries))]
		wg.Go(func() {
			for i := range part {
				p.rank(&part[i])
			}
		})
	}
	wg.Wait()
}

// prefLen is how much of a spilled tenant's ranking a Placement keeps.
const prefLen = 16

// ranking returns the indexes of the prefLen best-ranked shards for hash h,
// best first.
func (p *Placement) ranking(h uint64) []int32 {
	keys := make([]uint64, len(p.seeds))
	for i, seed := range p.seeds {
		keys[i] = rankKey(score(h, seed), i, p.mask)
	}
	slices.Sort(keys)
	n := min(prefLen, len(keys))
	idx := make([]int32, n)
	for j := range idx {
		idx[j] = keyIndex(keys[len(keys)-1-j], p.mask)
	}
	return idx
}

// sortKey is a tenant's placement order key, ascending, in its low keyBits
// bits: the complement of the weight class in the top classBits of them, so
// that the heavier class sorts first, then the top bits of the hash. Tenants
// whose keys are equal (one chance in 5,000 for 10,000 tenants) are ordered by
// the full hash and ID afterwards.
type sortKey struct {
	k   uint64
	idx int32
}

const (
	// classBits holds any weightClass: at most bits.Len(MaxUint64)/2 = 32.
	classBits = 6
	// keyBits is four radix passes.
	keyBits = 4 * radixBits
)

// sortScratch holds the buffers of one sort, reused across calls to Assign
// to spare the garbage collector about a megabyte per call.
type sortScratch struct {
	keys, buf []sortKey
	entries   []entry
	hashes    []uint64
}

var scratchPool = sync.Pool{New: func() any { return new(sortScratch) }}

// grow returns s resized to n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// radixBits is the digit size of the radix sort.
const radixBits = 11

// sortedEntries returns the tenants as entries in placement order, that of
// compareEntries. It radix sorts one key per tenant, the weight class in the
// top bits and the top of the hash in the rest, then orders the rare equal
// keys by full hash and ID. For 10,000 tenants this is several times faster
// than a comparison sort, which was a large part of a full recompute. With a
// scratch, the result lives in scratch.entries.
func sortedEntries(tenants []Tenant, scratch *sortScratch) []entry {
	sc := scratch
	if sc == nil {
		sc = &sortScratch{}
	}
	var es []entry
	if scratch != nil {
		es = grow(scratch.entries, len(tenants))
		scratch.entries = es
	} else {
		es = make([]entry, len(tenants))
	}
	const top = 1<<classBits - 1
	keys := grow(sc.keys, len(tenants))
	buf := grow(sc.buf, len(tenants))
	hashes := grow(sc.hashes, len(tenants))
	sc.hashes = hashes
	for i, t := range tenants {
		h := tenantHash(t.ID)
		hashes[i] = h
		keys[i] = sortKey{uint64(top-weightClass(t.Weight))<<(keyBits-classBits) | h>>(64-keyBits+classBits), int32(i)}
	}
	var count [1 << radixBits]int32
	for shift := uint(0); shift < keyBits; shift += radixBits {
		clear(count[:])
		for i := range keys {
			count[keys[i].k>>shift&(1<<radixBits-1)]++
		}
		if len(keys) == 0 || int(count[keys[0].k>>shift&(1<<radixBits-1)]) == len(keys) {
			continue // every key has the same digit: the pass changes nothing
		}
		var sum int32
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for i := range keys {
			d := keys[i].k >> shift & (1<<radixBits - 1)
			buf[count[d]] = keys[i]
			count[d]++
		}
		keys, buf = buf, keys
	}
	sc.keys, sc.buf = keys, buf
	for i, k := range keys {
		t := tenants[k.idx]
		es[i] = entry{id: t.ID, h: hashes[k.idx], w: t.Weight, at: -1}
	}
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && compareEntries(es[j], es[j-1]) < 0; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	return es
}
