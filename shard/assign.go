package shard

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// DefaultLoadFactor is the load bound c used when Options.LoadFactor is zero.
const DefaultLoadFactor = 1.02

// ErrNoShards is returned when tenants must be placed on an empty shard set.
var ErrNoShards = errors.New("shard: no shards")

// Tenant is one unit of placement: every item of a tenant goes to the same
// shard. Weight is the tenant's cost, for HelmReleases the number of releases.
type Tenant struct {
	ID     string
	Weight int
}

// Options tune the assignment. The zero value is the documented default.
type Options struct {
	// LoadFactor is c in the shard capacity floor(c·W/N), where W is the total
	// weight and N the number of shards. Zero means DefaultLoadFactor (1.02);
	// values below 1 are raised to 1. It is used with four decimal digits.
	LoadFactor float64

	// Previous, when not nil, is the assignment to stay close to, tenant ID
	// to shard ID, usually the Tenants of the Assignment before a change.
	// Assign then places with memory (see Assign); tenants it does not name,
	// and those whose shard ID is no longer in the set, are placed as new.
	// Nil means no memory: the result depends only on the snapshot.
	Previous map[string]int

	// Sticky makes a Placement, and a Pool, place with memory: each update
	// keeps tenants where they are as Assign with Previous does, with the
	// assignment before the update as Previous. Assign ignores it. A
	// sticky placement depends on its history, so replicas that must agree
	// on placement without sharing it must not use it; they share a
	// Previous instead (Placement.Anchor, Pool.Anchor).
	Sticky bool
}

// factor returns c in units of 1/10000.
func (o Options) factor() int {
	c := o.LoadFactor
	if c == 0 {
		c = DefaultLoadFactor
	}
	c = max(c, 1)
	return int(math.Round(c * 10000))
}

// Assignment is the result of placing tenants on shards.
type Assignment struct {
	// Shards are the shard IDs in ascending order.
	Shards []int
	// Load holds the total weight on Shards[i] at index i.
	Load []int
	// Capacity is the bound max(floor(c·W/N), ceil(W/N)) that placement
	// respects; only a tenant that fits nowhere can exceed it. With memory
	// (Options.Previous) a shard keeps its tenants up to the balance target
	// floor(c·max(w_max, ceil(W/N))), which can be higher.
	Capacity int
	// Tenants maps each tenant ID to its shard ID.
	Tenants map[string]int
}

// Lookup returns the shard ID of tenant id and whether the tenant is known.
// It does not allocate.
func (a Assignment) Lookup(id string) (int, bool) {
	s, ok := a.Tenants[id]
	return s, ok
}

// Assign places tenants on the shards with bounded-load rendezvous hashing
// over weights:
//
//   - each tenant ranks the shards by score(xxhash64(tenant), shard);
//   - tenants are placed by weight class (about log4(w+1)) heaviest first,
//     then by hash and then ID;
//   - each takes its first choice if load+weight stays within the capacity
//     max(floor(c·W/N), ceil(W/N)); else the first shard in its ranking with
//     room for it beyond the weight of the tenants still to come that rank
//     that shard first; else the first shard with room; else the least
//     loaded.
//
// With Options.Previous, Assign places with memory: a tenant whose previous
// shard is still in the set stays there, unless that shard is over the
// balance target floor(c·max(w_max, ceil(W/N))), which then sheds its
// lightest tenants until it is within it (a tenant alone on its shard
// stays). The tenants without a shard, new or shed, are placed heaviest
// class first: back where they were if there is room, else on a shard that
// no previous tenant was on (just added) within the mean load, else by the
// rule above. Such a fresh shard still below half the mean then takes the
// tenants whose first choice it is. So a resize moves about what the bound
// requires, and a churn that leaves every shard within the target moves
// nobody. With a Previous that names none of the tenants this is the
// placement without memory. The result depends on Previous: replicas that
// each compute the placement must share it or not use it.
//
// The result depends only on the set of tenants, the set of shard IDs and
// the options (Previous included), never on input order. Tenant IDs and
// shard IDs must be unique and weights must not be negative.
func Assign(tenants []Tenant, shards []int, opts Options) (Assignment, error) {
	scratch := scratchPool.Get().(*sortScratch)
	defer scratchPool.Put(scratch)
	p, err := newPlacement(tenants, shards, opts, false, scratch)
	if err != nil {
		return Assignment{}, err
	}
	a := p.Assignment()
	clear(scratch.entries) // drop the tenant ID strings for the collector
	if len(a.Tenants) != len(tenants) {
		// Duplicate IDs collapse in the map; find one to name it.
		seen := make(map[string]bool, len(tenants))
		for _, t := range tenants {
			if seen[t.ID] {
				return Assignment{}, fmt.Errorf("tenant %q: duplicate tenant ID", t.ID)
			}
			seen[t.ID] = true
		}
	}
	return a, nil
}

// Range returns the shard IDs 0..n-1.
func Range(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	return ids
}

// sortedShards validates shard IDs and returns them in ascending order.
func sortedShards(shards []int) ([]int, error) {
	ids := slices.Clone(shards)
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			return nil, fmt.Errorf("shard %d: duplicate shard ID", ids[i])
		}
	}
	return ids, nil
}
