package shard

import (
	"math"
	"slices"
	"testing"
)

// TestRankMatchesScores checks that ranking by rankKey, which gives up the
// low bits of the score for the shard index, ranks as the full 64-bit score
// with ties to the lower index does, on the benchmark workload.
func TestRankMatchesScores(t *testing.T) {
	ts := workload("lognormal", benchTenants, benchSeed)
	for _, n := range []int{1, 2, 7, 64, 100} {
		p, err := NewPlacement(ts, Range(n), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.entries {
			want := make([]int32, n)
			for i := range want {
				want[i] = int32(i)
			}
			slices.SortStableFunc(want, func(a, b int32) int {
				sa, sb := score(e.h, p.seeds[a]), score(e.h, p.seeds[b])
				switch {
				case sa > sb:
					return -1
				case sa < sb:
					return 1
				}
				return 0
			})
			if e.top != want[0] {
				t.Fatalf("N=%d tenant %s: top %d, want %d", n, e.id, e.top, want[0])
			}
			if got := p.ranking(e.h); !slices.Equal(got, want[:len(got)]) {
				t.Fatalf("N=%d tenant %s: ranking %v, want %v", n, e.id, got, want[:len(got)])
			}
		}
	}
}

// TestSortedEntriesOrder checks the radix sort against compareEntries,
// including zero weights, equal weights and the largest weight classes.
func TestSortedEntriesOrder(t *testing.T) {
	inputs := [][]Tenant{
		nil,
		{{"a", 0}, {"b", 0}, {"c", 0}},
		workload("lognormal", 3000, 1),
		workload("zipf", 3000, 2),
		append(workload("lognormal", 500, 3), Tenant{"huge", 1 << 40}, Tenant{"big", 1 << 24}, Tenant{"max", math.MaxInt}),
		append(workload("lognormal", 500, 4), Tenant{"edge", 1<<24 - 1}),
	}
	for i, ts := range inputs {
		want := make([]entry, len(ts))
		for j, tn := range ts {
			want[j] = entry{id: tn.ID, h: tenantHash(tn.ID), w: tn.Weight, at: -1}
		}
		slices.SortFunc(want, compareEntries)
		for _, sc := range []*sortScratch{nil, new(sortScratch)} {
			if got := sortedEntries(ts, sc); !slices.Equal(got, want) {
				t.Fatalf("input %d (scratch %v): radix order differs from compareEntries", i, sc != nil)
			}
		}
	}
}
