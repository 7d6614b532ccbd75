package shard

import (
	"maps"
	"slices"
)

// This file is placement anchored to a shared previous assignment
// (Placement.Anchor, Pool.Anchor). A sticky placement remembers its own
// history, which differs between replicas that saw the changes in another
// order or at other times; an anchored one remembers only the assignment it
// was given, so replicas given the same one place alike.

// Anchor places the tenants on shards as Assign with Options.Previous =
// previous does, and keeps doing so after every later Set, Remove and
// Resize until the next Anchor: the placement is then a function of its
// tenants, its shard IDs and previous only, never of the order or the
// history of the changes, so that replicas that share previous (published
// by one of them) agree wherever they see the same tenants. A nil or empty
// previous is placement without memory. It returns the tenants that
// changed shard. The placement keeps its own copy of previous.
//
// Assign with the result as Previous gives the result again when nothing
// else changed (TestAnchorFixedPoint, on every weight shape), so publishing
// an anchored placement's assignment as the new anchor moves no tenant.
// The exception is a shard that the change left empty: under the new
// anchor it is fresh and takes tenants (step 4 of settle), so a publisher
// repeats until the assignment stays, which takes a round or two.
func (p *Placement) Anchor(shards []int, previous map[string]int) ([]Move, error) {
	ids, err := sortedShards(shards)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 && len(p.entries) > 0 {
		return nil, ErrNoShards
	}
	p.anchored = true
	p.anchor = maps.Clone(previous)
	return p.Resize(ids)
}

// Anchored tells whether the placement follows an anchor (see Anchor).
func (p *Placement) Anchored() bool { return p.anchored }

// indexAnchor records in every entry its shard index in the anchor, and
// which shards the anchor names no tenant on, for the current shard IDs.
func (p *Placement) indexAnchor() {
	for i := range p.entries {
		p.entries[i].prev = p.anchorIndex(p.entries[i].id)
	}
	p.anchorFresh = p.fresh(maps.Values(p.anchor))
}

// anchorIndex returns the index of tenant id's shard in the anchor, -1 if
// the anchor does not name it or its shard is not in the set.
func (p *Placement) anchorIndex(id string) int32 {
	if s, ok := p.anchor[id]; ok {
		if j, found := slices.BinarySearch(p.ids, s); found {
			return int32(j)
		}
	}
	return -1
}

// reanchor places every tenant from the anchor, as newPlacement does with
// Options.Previous. from holds each entry's shard ID before the change,
// for the move records. It updates p.tenants for the tenants whose shard
// changed, and for all of them when resized (the indexes changed).
func (p *Placement) reanchor(from []int, resized bool, moves *[]Move) {
	p.cap = capacity(p.total, len(p.ids), p.factor)
	for i := range p.entries {
		p.entries[i].at = p.entries[i].prev
	}
	if len(p.anchor) == 0 {
		p.replayAll(nil, nil) // as Assign without Previous
	} else {
		p.settle(from, p.anchorFresh, nil)
	}
	for i, e := range p.entries {
		to := p.ids[e.at]
		if p.tenants != nil && (resized || from[i] != to) {
			p.tenants[e.id] = slot{w: e.w, at: e.at}
		}
		if moves != nil && from[i] != to {
			*moves = append(*moves, Move{Tenant: e.id, Weight: e.w, From: from[i], To: to})
		}
	}
}
