package shard

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestSpreadTable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shards   []int
		replicas []string
		want     map[int]string
	}{
		{"no replicas", Range(3), nil, map[int]string{}},
		{"no shards", nil, []string{"a", "b"}, map[int]string{}},
		{"nothing", nil, nil, map[int]string{}},
		{"one replica", Range(4), []string{"a"}, map[int]string{0: "a", 1: "a", 2: "a", 3: "a"}},
		{"one replica, sparse IDs", []int{-1, 7, 100}, []string{"cozy-aio-0"}, map[int]string{-1: "cozy-aio-0", 7: "cozy-aio-0", 100: "cozy-aio-0"}},
		{"duplicates count once", []int{2, 1, 2}, []string{"a", "a"}, map[int]string{1: "a", 2: "a"}},
		{"empty replica ID is an ID", Range(2), []string{""}, map[int]string{0: "", 1: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Spread(tc.shards, tc.replicas); !maps.Equal(got, tc.want) {
				t.Errorf("Spread(%v, %q) = %v, want %v", tc.shards, tc.replicas, got, tc.want)
			}
		})
	}
}

// TestSpreadDeterministic freezes the replica hash and the placement of a
// few inputs: a change here moves shards between replicas when replicas of
// two versions run side by side in a rolling upgrade. Regenerate with
// `go test ./shard -run TestSpreadDeterministic -update` only on purpose.
func TestSpreadDeterministic(t *testing.T) {
	var b strings.Builder
	for _, id := range []string{"", "a", "cozy-aio-0", "cozy-aio-7d9f8b6c5-x2k4p"} {
		fmt.Fprintf(&b, "hash %q %016x\n", id, replicaHash(id))
	}
	for _, c := range []struct {
		shards   []int
		replicas []string
	}{
		{Range(5), []string{"a", "b"}},
		{[]int{1, 2, 3, 5, 8, 13}, []string{"cozy-aio-0", "cozy-aio-1", "cozy-aio-2", "cozy-aio-3"}},
		{Range(16), []string{"cozy-aio-0", "cozy-aio-1", "cozy-aio-2"}},
		{Range(64), []string{
			"cozy-aio-7d9f8b6c5-x2k4p", "cozy-aio-7d9f8b6c5-9qzrt", "cozy-aio-7d9f8b6c5-lm3vw",
			"cozy-aio-7d9f8b6c5-b8hcd", "cozy-aio-7d9f8b6c5-tt6jn", "cozy-aio-7d9f8b6c5-4wfxs",
			"cozy-aio-7d9f8b6c5-ze2ka",
		}},
	} {
		m := Spread(c.shards, c.replicas)
		fmt.Fprintf(&b, "spread %v over %q\n", c.shards, c.replicas)
		for _, r := range c.replicas {
			var own []int
			for _, s := range c.shards {
				if m[s] == r {
					own = append(own, s)
				}
			}
			fmt.Fprintf(&b, "%s %v\n", r, own)
		}
	}
	golden(t, "spread.golden", b.String())
}

// replicaNames returns n replica IDs shaped like the pod names of one
// Deployment, a different set for each set number.
func replicaNames(set, n int) []string {
	rs := make([]string, n)
	for k := range rs {
		rs[k] = fmt.Sprintf("cozy-aio-%08x-%05x", mix(uint64(set)+1)>>32, mix(uint64(set)<<16|uint64(k)+1)>>44)
	}
	return rs
}

// checkSpread checks that m owns every shard once, on one of the replicas,
// within the bound ceil(S/R).
func checkSpread(t *testing.T, m map[int]string, shards []int, replicas []string) {
	t.Helper()
	if len(m) != len(shards) {
		t.Fatalf("Spread(%d shards, %q) placed %d shards", len(shards), replicas, len(m))
	}
	bound := (len(shards) + len(replicas) - 1) / len(replicas)
	load := map[string]int{}
	for _, s := range shards {
		r, ok := m[s]
		if !ok || !slices.Contains(replicas, r) {
			t.Fatalf("Spread(%d shards, %q): shard %d on %q", len(shards), replicas, s, r)
		}
		load[r]++
	}
	for r, n := range load {
		if n > bound {
			t.Fatalf("Spread(%d shards, %q): %s owns %d shards, bound %d", len(shards), replicas, r, n, bound)
		}
	}
}

func moved(before, after map[int]string) int {
	n := 0
	for s, r := range before {
		if after[s] != r {
			n++
		}
	}
	return n
}

func owned(m map[int]string, replica string) int {
	n := 0
	for _, r := range m {
		if r == replica {
			n++
		}
	}
	return n
}

// spreadChange is the movement of one join or leave against its minimum.
type spreadChange struct{ moved, min int }

// joinChange is the movement when replica rs[len(rs)-1] joins rs[:len(rs)-1]:
// the minimum brings the newcomer to floor(S/R') shards.
func joinChange(shards []int, rs []string) spreadChange {
	return spreadChange{moved(Spread(shards, rs[:len(rs)-1]), Spread(shards, rs)), len(shards) / len(rs)}
}

// leaveChange is the movement when rs[x] leaves rs: the minimum moves the
// leaver's shards only.
func leaveChange(shards []int, rs []string, x int) spreadChange {
	before := Spread(shards, rs)
	after := Spread(shards, slices.Delete(slices.Clone(rs), x, x+1))
	return spreadChange{moved(before, after), owned(before, rs[x])}
}

// TestSpreadProperties checks, for S in 1..64 and R in 1..7 on several sets
// of replica names, that the result ignores input order, places every shard
// once within the bound, and moves few shards when a replica joins or
// leaves.
func TestSpreadProperties(t *testing.T) {
	const sets = 8
	var join, leave spreadChange
	worstJoin, worstLeave := 0, 0 // the largest moved - 2·min
	for set := range sets {
		rnd := newRand(uint64(set))
		names := replicaNames(set, 8)
		for s := 1; s <= 64; s++ {
			shards := Range(s)
			for r := 1; r <= 7; r++ {
				rs := names[:r]
				m := Spread(shards, rs)
				checkSpread(t, m, shards, rs)
				ps, prs := slices.Clone(shards), slices.Clone(rs)
				rnd.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
				rnd.Shuffle(len(prs), func(i, j int) { prs[i], prs[j] = prs[j], prs[i] })
				if got := Spread(ps, prs); !maps.Equal(got, m) {
					t.Fatalf("S=%d R=%d: result depends on input order", s, r)
				}

				c := joinChange(shards, names[:r+1])
				join.moved += c.moved
				join.min += c.min
				worstJoin = max(worstJoin, c.moved-2*c.min)
				if c.moved > 2*c.min+joinSlack {
					t.Errorf("set %d S=%d R=%d→%d: moved %d, minimum %d", set, s, r, r+1, c.moved, c.min)
				}
				for x := range r {
					if r == 1 {
						break
					}
					c := leaveChange(shards, rs, x)
					if c.moved < c.min {
						t.Fatalf("set %d S=%d R=%d leaver %d: moved %d < its %d shards", set, s, r, x, c.moved, c.min)
					}
					leave.moved += c.moved
					leave.min += c.min
					worstLeave = max(worstLeave, c.moved-2*c.min)
					if c.moved > 2*c.min+leaveSlack {
						t.Errorf("set %d S=%d R=%d→%d (leaver %d): moved %d, minimum %d", set, s, r, r-1, x, c.moved, c.min)
					}
				}
			}
		}
	}
	jr, lr := float64(join.moved)/float64(join.min), float64(leave.moved)/float64(leave.min)
	t.Logf("join: moved %d / minimum %d = %.3f, worst moved-2·min %d", join.moved, join.min, jr, worstJoin)
	t.Logf("leave: moved %d / minimum %d = %.3f, worst moved-2·min %d", leave.moved, leave.min, lr, worstLeave)
	if jr > 1.25 || lr > 1.25 {
		t.Errorf("moved/minimum = %.3f on join, %.3f on leave, want ≤ 1.25", jr, lr)
	}
}

// joinSlack and leaveSlack bound moved - 2·minimum for one change. A bound
// has to allow some: a shard that a newcomer takes frees room on its old
// replica for a shard that spilled from it, whose own place then frees room
// for another, so a change of one shard can move a chain of them. On the
// sets of this test the worst is 3 on join and 2 on leave; over 200 other
// sets of names it was 5 and 4, which these bounds allow. The ratio of the
// sums, asserted below, is the sharper figure.
const joinSlack, leaveSlack = 5, 4

// BenchmarkSpread reports the shards moved when a replica joins or leaves,
// against the minimum, averaged over 100 sets of replica names (every
// replica leaving in turn for a leave): floor(S/R') on join, the leaver's
// shards on leave. worst-excess is the largest moved - minimum of one
// change. Run: go test -run '^$' -bench Spread -benchtime 3x ./shard
func BenchmarkSpread(b *testing.B) {
	const sets = 100
	for _, s := range []int{16, 64} {
		for _, c := range []struct{ from, to int }{{2, 3}, {3, 2}, {3, 4}} {
			b.Run(fmt.Sprintf("S=%d/R=%dto%d", s, c.from, c.to), func(b *testing.B) {
				shards := Range(s)
				var sum spreadChange
				worst, n := 0, 0
				for set := range sets {
					rs := replicaNames(set, max(c.from, c.to))
					var cs []spreadChange
					if c.to > c.from {
						cs = append(cs, joinChange(shards, rs))
					} else {
						for x := range rs {
							cs = append(cs, leaveChange(shards, rs, x))
						}
					}
					for _, ch := range cs {
						sum.moved += ch.moved
						sum.min += ch.min
						worst = max(worst, ch.moved-ch.min)
						n++
					}
				}
				rs := replicaNames(0, c.to)
				for b.Loop() {
					Spread(shards, rs)
				}
				b.ReportMetric(float64(sum.moved)/float64(n), "moved")
				b.ReportMetric(float64(sum.min)/float64(n), "minimum")
				b.ReportMetric(float64(sum.moved)/float64(sum.min), "moved/minimum")
				b.ReportMetric(float64(worst), "worst-excess")
			})
		}
	}
}
