package shard

import (
	"cmp"
	"slices"
)

// Spread places shards on replicas, for replicas of one process that share a
// cluster and each run the shards they own. It is a pure function: the
// result depends only on the set of shard IDs and the set of replica IDs,
// never on their order, and a duplicate counts once.
//
// Every shard goes to exactly one replica, and no replica gets more than
// ceil(S/R) of the S shards and R replicas. With no replicas the map is
// empty; with one replica it owns every shard.
//
// Placement is bounded-load rendezvous hashing in rounds: each shard ranks
// the replicas by score(xxhash64(replica), shard), the score Assign uses. In
// round k every shard not yet placed asks for its k-th choice, the shards
// asking with the higher score first, and a replica takes them while it is
// below the bound. So a shard leaves its first choice only for shards that
// rank that replica first too and score higher there. When a replica
// joins or leaves, a shard it takes or frees can free room for a shard that
// spilled, so a few more shards move than must: over S in 1..64 and R in
// 1..7, a join moves about 1.2 times floor(S/R') shards and a leave about
// 1.2 times the leaver's shards (TestSpreadProperties, BenchmarkSpread).
// Taking the shards in rounds of choices moved about 3 % fewer than one
// pass over the shards in hash order, and slightly fewer than one pass over
// all (shard, replica) pairs by score or than a placement maximizing the
// total score.
func Spread(shards []int, replicas []string) map[int]string {
	owner := make(map[int]string, len(shards))
	rs := slices.Compact(slices.Sorted(slices.Values(replicas)))
	if len(rs) == 0 {
		return owner
	}
	ids := slices.Compact(slices.Sorted(slices.Values(shards)))
	prefs := rankReplicas(ids, rs)
	bound := (len(ids) + len(rs) - 1) / len(rs)
	load := make([]int, len(rs))
	left := Range(len(ids)) // indices into ids of the shards not yet placed
	// A shard that no replica takes in its round has found all it asked
	// full; after R rounds all R replicas would be full, holding R·bound ≥ S
	// shards, so every shard is placed within R rounds.
	for round := 0; len(left) > 0; round++ {
		slices.SortFunc(left, func(a, b int) int {
			if c := cmp.Compare(prefs[b][round].score, prefs[a][round].score); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		kept := left[:0]
		for _, i := range left {
			r := prefs[i][round].replica
			if load[r] < bound {
				load[r]++
				owner[ids[i]] = rs[r]
				continue
			}
			kept = append(kept, i)
		}
		left = kept
	}
	return owner
}

// choice is a replica in a shard's ranking.
type choice struct {
	replica int // index into the sorted replica IDs
	score   uint64
}

// rankReplicas returns, for each shard, the replicas by descending score,
// equal scores by replica ID.
func rankReplicas(ids []int, rs []string) [][]choice {
	hs := make([]uint64, len(rs))
	for i, r := range rs {
		hs[i] = replicaHash(r)
	}
	all := make([]choice, len(ids)*len(rs))
	prefs := make([][]choice, len(ids))
	for i, id := range ids {
		seed := shardSeed(id)
		p := all[i*len(rs) : (i+1)*len(rs)]
		for r, h := range hs {
			p[r] = choice{replica: r, score: score(h, seed)}
		}
		slices.SortFunc(p, func(a, b choice) int {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			return cmp.Compare(a.replica, b.replica)
		})
		prefs[i] = p
	}
	return prefs
}
