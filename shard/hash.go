package shard

import (
	"math/bits"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// The functions in this file are frozen by TestDeterministic and
// TestSpreadDeterministic: changing them moves tenants between shards, or
// shards between replicas, on upgrade, so the golden files must only be
// regenerated on purpose.

// tenantHash is the 64-bit identity of a tenant ID.
func tenantHash(id string) uint64 { return xxhash.Sum64String(id) }

// replicaHash is the 64-bit identity of a replica ID in Spread. It is the
// tenant hash: both are IDs hashed by xxhash64, and Spread scores a replica
// against a shard exactly as Assign scores a tenant.
func replicaHash(id string) uint64 { return xxhash.Sum64String(id) }

// shardSeed is the 64-bit identity of a shard ID. Shards are mixed through
// the same finalizer as scores so that neighbouring IDs are unrelated.
func shardSeed(id int) uint64 { return mix(uint64(id) + 0x9e3779b97f4a7c15) }

// score is the rendezvous weight of a tenant on a shard; a tenant prefers
// shards with a higher score.
func score(tenant, seed uint64) uint64 { return mix(tenant ^ seed) }

// rankKey is the key by which a tenant ranks shard index i, whose score is
// v: the higher key ranks first. The low b bits of the score, b =
// bits.Len(N-1), are replaced by mask-i, so that keys are distinct, a tie
// goes to the lower shard index, and the best shard is a plain max over
// keys, which compiles to a branch-free loop. Two scores that agree in all
// but their low b bits (probability below N²/2^(65-b)) rank by index.
func rankKey(v uint64, i int, mask uint64) uint64 { return v&^mask | (mask - uint64(i)) }

// keyIndex recovers the shard index from a rankKey.
func keyIndex(k, mask uint64) int32 { return int32(mask - k&mask) }

// mix is the splitmix64 finalizer: a bijection with full avalanche, cheap
// enough to evaluate N times per tenant.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// weightClass is the coarse weight by which tenants are placed, about
// log4(w+1): the classes are {0}, 1–6, 7–30, 31–126, 127–510 and so on.
// Placing by class rather than by exact weight keeps heavy tenants ahead of
// light ones, which the balance needs, while a change of weight by one
// release rarely changes a tenant's place in the order.
func weightClass(w int) int { return bits.Len(uint(w)+1) / 2 }

// compareEntries is the placement order: the heavier weight class first,
// then by hash, then by ID, so that the order never depends on input order.
func compareEntries(a, b entry) int {
	ca, cb := weightClass(a.w), weightClass(b.w)
	switch {
	case ca != cb:
		if ca > cb {
			return -1
		}
		return 1
	case a.h != b.h:
		if a.h < b.h {
			return -1
		}
		return 1
	}
	return strings.Compare(a.id, b.id)
}

// capacity is the per-shard bound: floor(c·W/N), but never below the
// average ceil(W/N) so that every tenant fits somewhere. It is computed in
// integer arithmetic, with c in units of 1/10000, so that it never depends on
// floating-point rounding.
//
// The design wrote ceil(c·W/N); floor is used because ceil lets the maximum
// exceed c times the lower bound by up to one release (841 against 1.02·823.6
// = 840.1 at N=64 for the benchmark workload), and c is the promise.
func capacity(total, n, factor int) int {
	if n == 0 {
		return 0
	}
	return max(factor*total/(10000*n), (total+n-1)/n)
}
