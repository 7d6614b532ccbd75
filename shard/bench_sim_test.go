package shard

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// BenchmarkAutoN ramps the releases from 0 to 50,000 and back with noise,
// choosing the shard count at every step: Count for bounded; for the
// baselines the reference rule K = clamp(ceil(W/100), 1, min(64, T)),
// which has no hysteresis and no w_max cap (the reference caps at 16; 64
// here so that all run over the same range).
func BenchmarkAutoN(b *testing.B) {
	base := workload("lognormal", benchTenants, benchSeed)
	for _, al := range algos {
		b.Run(benchName(al.name, "lognormal", "auto"), func(b *testing.B) {
			var res rampResult
			for b.Loop() {
				res = ramp(al, base)
			}
			b.ReportMetric(float64(res.resizes), "resizes")
			b.ReportMetric(100*float64(res.moved)/float64(res.peak), "moved-%")
			b.ReportMetric(res.imbalance, "max/mean-avg")
			b.ReportMetric(float64(res.maxN), "max-N")
		})
	}
}

type rampResult struct {
	resizes, moved, peak, maxN int
	imbalance                  float64 // max/mean averaged over steps
}

// ramp runs 100 steps up and 100 down. Each tenant's weight follows the
// ramp with random rounding and occasional ±1 noise; tenants at 0 are gone.
func ramp(al algo, base []Tenant) rampResult {
	const steps, peak = 100, 50000
	total0, _ := totalWeight(base)
	r := newRand(benchSeed + 4)
	var res rampResult
	var prev map[string]int
	n, imbSteps := 0, 0
	for k := 0; k <= 2*steps; k++ {
		f := float64(min(k, 2*steps-k)) / steps * peak / float64(total0)
		ts := make([]Tenant, 0, len(base))
		for _, t := range base {
			w := int(f*float64(t.Weight) + r.Float64())
			if w > 0 && r.IntN(10) == 0 {
				w += r.IntN(3) - 1
			}
			if w > 0 {
				ts = append(ts, Tenant{ID: t.ID, Weight: w})
			}
		}
		total, heaviest := totalWeight(ts)
		res.peak = max(res.peak, total)
		next := n
		if al.name == "bounded" || al.name == "sticky" {
			next = Count(n, total, heaviest, CountOptions{})
		} else {
			next = min(max(1, (total+99)/100), min(64, max(1, len(ts))))
		}
		if n > 0 && next != n {
			res.resizes++
		}
		n = next
		res.maxN = max(res.maxN, n)
		cur := al.next(prev, ts, Range(n))
		res.moved += movedWeight(prev, cur, ts)
		if total > 0 {
			mx, mean, _ := measure(cur, ts, Range(n))
			res.imbalance += float64(mx) / mean
			imbSteps++
		}
		prev = cur
	}
	res.imbalance /= float64(max(imbSteps, 1))
	return res
}

// BenchmarkFairness simulates, with a virtual clock, the shard that holds
// the noisy tenant of dist=noisy at N=16: 4 workers; every healthy release
// reconciles once per 30 minutes at a random phase and takes 1s on average
// (exponential); the noisy tenant's releases (5% of all) are all queued at
// the start and always fail. It reports the p99 completion delay of the
// healthy releases over one simulated hour, with the noisy tenant and
// without it, and their ratio.
//
// bounded runs the pool's scheduler (deficit round-robin, tenant limit 2,
// backoff 1s doubling to 5m). The baselines run their placement with a FIFO
// queue and the same per-item backoff, as a controller-runtime workqueue
// does. Two crossed variants separate what the placement and the queue each
// contribute: bounded-fifo is our placement with the FIFO queue, and
// rendezvous-drr is plain rendezvous (a crowded noisy shard) with our queue.
func BenchmarkFairness(b *testing.B) {
	ts := workload("noisy", benchTenants, benchSeed)
	variants := append(slices.Clone(algos[:4]), algo{"bounded-fifo", algos[0].next}, algo{"rendezvous-drr", algos[3].next})
	for _, al := range variants {
		b.Run(benchName(al.name, "noisy", 16), func(b *testing.B) {
			a := al.next(nil, ts, Range(16))
			var healthy []Tenant
			for _, t := range ts {
				if t.ID != noisyID && a[t.ID] == a[noisyID] {
					healthy = append(healthy, t)
				}
			}
			noisy := ts[slices.IndexFunc(ts, func(t Tenant) bool { return t.ID == noisyID })]
			fifo := al.name != "bounded" && al.name != "rendezvous-drr"
			var with, without simResult
			for b.Loop() {
				with = simulate(healthy, &noisy, fifo)
				without = simulate(healthy, nil, fifo)
			}
			b.ReportMetric(with.p99.Seconds(), "p99-with-s")
			b.ReportMetric(without.p99.Seconds(), "p99-without-s")
			b.ReportMetric(with.p99.Seconds()/without.p99.Seconds(), "p99-ratio")
			b.ReportMetric(float64(len(healthy)), "healthy-tenants")
			b.ReportMetric(float64(with.noisyRuns), "noisy-runs")
		})
	}
}

type simResult struct {
	p99       time.Duration
	noisyRuns int
}

type simEvent struct {
	at   time.Time
	it   *item
	took time.Duration
}

type simHeap []simEvent

func (h simHeap) Len() int           { return len(h) }
func (h simHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h simHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *simHeap) Push(x any)        { *h = append(*h, x.(simEvent)) }
func (h *simHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// simulate runs one shard for an hour of virtual time and returns the p99
// delay from a healthy release's due time to the end of its run.
func simulate(healthy []Tenant, noisy *Tenant, fifo bool) simResult {
	const (
		workers = 4
		period  = 30 * time.Minute
		horizon = time.Hour
	)
	s := newSched(PoolOptions{Shards: 1, Workers: workers})
	if fifo {
		s.o.TenantLimit = workers
	}
	q := s.queues[0]
	tenantOf := func(t string) string {
		if fifo {
			return "fifo"
		}
		return t
	}
	type arrival struct {
		at  time.Time
		key string
		t   string
	}
	var arrivals []arrival
	for _, t := range healthy {
		for j := range t.Weight {
			key := fmt.Sprintf("%s/%d", t.ID, j)
			phase := time.Duration(float64(period) * unit(tenantHash(key)))
			for at := phase; at < horizon; at += period {
				arrivals = append(arrivals, arrival{t0.Add(at), key, t.ID})
			}
		}
	}
	slices.SortFunc(arrivals, func(a, b arrival) int { return a.at.Compare(b.at) })
	noisyKeys := map[string]bool{}
	if noisy != nil {
		for j := range noisy.Weight {
			key := fmt.Sprintf("%s/%d", noisy.ID, j)
			noisyKeys[key] = true
			s.add(t0, tenantOf(noisy.ID), key, nil)
		}
	}
	pending := map[string]time.Time{}
	runs := map[string]uint64{}
	var delays []time.Duration
	var res simResult
	var running simHeap
	free := workers
	now, end := t0, t0.Add(horizon)
	for now.Before(end) {
		for len(running) > 0 && !running[0].at.After(now) {
			ev := heap.Pop(&running).(simEvent)
			free++
			var err error
			if noisyKeys[ev.it.k.key] {
				err = errFail
			} else if due, ok := pending[ev.it.k.key]; ok {
				delays = append(delays, now.Sub(due))
				delete(pending, ev.it.k.key)
			}
			s.done(now, ev.it, err, ev.took)
		}
		for len(arrivals) > 0 && !arrivals[0].at.After(now) {
			a := arrivals[0]
			arrivals = arrivals[1:]
			if _, ok := pending[a.key]; !ok {
				pending[a.key] = a.at
			}
			s.add(now, tenantOf(a.t), a.key, nil)
		}
		due := s.promote(now, nil)
		for free > 0 {
			it := s.next(now, q)
			if it == nil {
				break
			}
			if noisyKeys[it.k.key] {
				res.noisyRuns++
			}
			runs[it.k.key]++
			took := time.Duration(-math.Log(1-unit(tenantHash(it.k.key)^mix(runs[it.k.key]))) * float64(time.Second))
			heap.Push(&running, simEvent{now.Add(took), it, took})
			free--
		}
		next := end
		if len(running) > 0 && running[0].at.Before(next) {
			next = running[0].at
		}
		if len(arrivals) > 0 && arrivals[0].at.Before(next) {
			next = arrivals[0].at
		}
		if !due.IsZero() && due.Before(next) {
			next = due
		}
		now = next
	}
	// Releases still waiting at the end count with the delay so far, so
	// that starvation is not hidden.
	for _, due := range pending {
		delays = append(delays, end.Sub(due))
	}
	slices.Sort(delays)
	if len(delays) > 0 {
		res.p99 = delays[(len(delays)*99)/100]
	}
	return res
}

var errFail = fmt.Errorf("noisy tenant: always fails")

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(mix(h)>>11) / (1 << 53) }
