package shard

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The shape study of issue 21 behind docs/benchmarks/shard.md. It takes
// about a minute, so it only runs with -shapes:
//
//	go test ./shard -run TestShapeReport -v -args -shapes

var shapesFlag = flag.Bool("shapes", false, "run the weight-shape report (slow)")

// shapeAlgos are the rules the report compares.
var shapeAlgos = []algo{
	{"sticky (ours, with memory)", stickyNext},
	algos[0], // bounded: ours without memory
	algos[1], // greedy-sticky
	algos[3], // rendezvous
}

// scenario holds one algorithm's figures for one shape, seed and N.
type scenario struct {
	balance            float64 // worst max/lowerbound over the states below
	up, down           float64 // moved/optimal on N→N+1 and N+1→N
	downLast           float64 // moved/optimal on N+1→N removing shard N (Pool.Resize)
	downLastForced     float64 // lower bound of downLast for this before-state
	churn, giantChurn  float64 // moved % of the surviving weight
	upFill             float64 // load of the new shard after N→N+1, over the mean
	upForced           float64 // lower bound of up for this before-state
	downForced         float64 // lower bound of down for this before-state
	churnF, giantChurF float64 // lower bounds of churn and giantChurn, %
}

// runScenario measures al on one shape, seed and N. N+1→N is measured
// twice: removing the middle shard N/2 (Pool.RemoveShard), and the last
// shard N (Pool.Resize).
func runScenario(al algo, shape string, seed uint64, n int) scenario {
	ts := shapeWorkload(shape, seed)
	total, _ := totalWeight(ts)
	var sc scenario
	bal := func(a map[string]int, snap []Tenant, shards []int) {
		mx, _, lower := measure(a, snap, shards)
		sc.balance = max(sc.balance, float64(mx)/lower)
	}
	a := al.next(nil, ts, Range(n))
	bal(a, ts, Range(n))
	opt := float64(total) / float64(n+1)

	up := al.next(a, ts, Range(n+1))
	bal(up, ts, Range(n+1))
	sc.up = float64(movedWeight(a, up, ts)) / opt
	sc.upForced = float64(forcedMove(a, ts, Range(n+1))) / opt
	fill := 0
	for _, t := range ts {
		if up[t.ID] == n {
			fill += t.Weight
		}
	}
	sc.upFill = float64(fill) / (float64(total) / float64(n+1))

	big := al.next(nil, ts, Range(n+1))
	shrink := func(shards []int) (moved, forced float64) {
		down := al.next(big, ts, shards)
		bal(down, ts, shards)
		return float64(movedWeight(big, down, ts)) / opt, float64(forcedMove(big, ts, shards)) / opt
	}
	sc.down, sc.downForced = shrink(without(Range(n+1), n/2))
	sc.downLast, sc.downLastForced = shrink(Range(n))

	for _, giant := range []bool{false, true} {
		next := shapeChurn(shape, ts, seed, giant)
		c := al.next(a, next, Range(n))
		bal(c, next, Range(n))
		sw := float64(survivingWeight(ts, next))
		m, f := 100*float64(movedWeight(a, c, next))/sw, 100*float64(forcedMove(a, next, Range(n)))/sw
		if giant {
			sc.giantChurn, sc.giantChurF = m, f
		} else {
			sc.churn, sc.churnF = m, f
		}
	}
	return sc
}

// spread formats min / median / max.
func spread(v []float64, format string) string {
	s := slices.Sorted(slices.Values(v))
	f := func(x float64) string { return fmt.Sprintf(format, x) }
	return f(s[0]) + " / " + f(s[len(s)/2]) + " / " + f(s[len(s)-1])
}

func TestShapeReport(t *testing.T) {
	if !*shapesFlag {
		t.Skip("run with -args -shapes")
	}
	type metric struct {
		name, format string
		get, least   func(scenario) float64
	}
	metrics := []metric{
		{"max/lowerbound (worst state)", "%.4f", func(s scenario) float64 { return s.balance }, nil},
		{"N→N+1 moved/optimal", "%.3f", func(s scenario) float64 { return s.up }, func(s scenario) float64 { return s.upForced }},
		{"N→N+1 new shard load/mean", "%.2f", func(s scenario) float64 { return s.upFill }, nil},
		{"N+1→N (shard N/2 removed) moved/optimal", "%.3f", func(s scenario) float64 { return s.down }, func(s scenario) float64 { return s.downForced }},
		{"N+1→N (shard N removed) moved/optimal", "%.3f", func(s scenario) float64 { return s.downLast }, func(s scenario) float64 { return s.downLastForced }},
		{"churn 1%: moved % of surviving weight", "%.3f", func(s scenario) float64 { return s.churn }, func(s scenario) float64 { return s.churnF }},
		{"churn 1% with the heaviest leaving: moved %", "%.3f", func(s scenario) float64 { return s.giantChurn }, func(s scenario) float64 { return s.giantChurF }},
	}
	var out strings.Builder
	for _, shape := range shapes {
		fmt.Fprintf(&out, "\n#### %s\n\n| metric | N |", shape)
		for _, al := range shapeAlgos {
			fmt.Fprintf(&out, " %s |", al.name)
		}
		out.WriteString(" least possible (from the sticky before-state) |\n|---|---|")
		for range shapeAlgos {
			out.WriteString("---|")
		}
		out.WriteString("---|\n")
		for _, n := range []int{8, 16, 32, 64} {
			res := make([][]scenario, len(shapeAlgos))
			for i, al := range shapeAlgos {
				for _, seed := range shapeSeeds {
					res[i] = append(res[i], runScenario(al, shape, seed, n))
				}
			}
			for _, m := range metrics {
				fmt.Fprintf(&out, "| %s | %d |", m.name, n)
				for i := range shapeAlgos {
					var v []float64
					for _, sc := range res[i] {
						v = append(v, m.get(sc))
					}
					cell := spread(v, m.format)
					if i == 0 {
						cell = "**" + cell + "**"
					}
					fmt.Fprintf(&out, " %s |", cell)
				}
				bound := ""
				if m.least != nil {
					var v []float64
					for _, sc := range res[0] {
						v = append(v, m.least(sc))
					}
					bound = spread(v, m.format)
				}
				fmt.Fprintf(&out, " %s |\n", bound)
			}
		}
	}
	t.Log(out.String())
}
