package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// The seeded workload generator shared by tests and benchmarks. Weights are
// HelmReleases per tenant; the distributions are heavy-tailed as in
// production: lognormal with σ=1.5 (about 5.2 releases per tenant on
// average), Zipf with s=2, and "noisy": lognormal plus one tenant that holds
// 5% of all releases.

const (
	benchTenants = 10000
	benchSeed    = 20260
)

var dists = []string{"lognormal", "zipf", "noisy"}

// noisyID is the ID of the noisy tenant in the "noisy" distribution.
const noisyID = "tenant-noisy"

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5eed)) }

// drawWeight draws one tenant weight from dist.
func drawWeight(r *rand.Rand, z *rand.Zipf, dist string) int {
	switch dist {
	case "zipf":
		return 1 + int(z.Uint64())
	default:
		return max(1, int(math.Round(math.Exp(0.5+1.5*r.NormFloat64()))))
	}
}

// workload returns n tenants in arrival order for dist, deterministically
// from seed.
func workload(dist string, n int, seed uint64) []Tenant {
	r := newRand(seed)
	z := rand.NewZipf(r, 2, 1, 2999)
	ts := make([]Tenant, 0, n)
	total := 0
	count := n
	if dist == "noisy" {
		count--
	}
	for i := range count {
		w := drawWeight(r, z, dist)
		ts = append(ts, Tenant{ID: fmt.Sprintf("tenant-%05d", i), Weight: w})
		total += w
	}
	if dist == "noisy" {
		// 5% of the final total: w = 0.05·(total+w).
		w := int(math.Round(float64(total) * 0.05 / 0.95))
		at := r.IntN(len(ts) + 1)
		ts = append(ts[:at], append([]Tenant{{ID: noisyID, Weight: w}}, ts[at:]...)...)
	}
	return ts
}

func totalWeight(ts []Tenant) (total, heaviest int) {
	for _, t := range ts {
		total += t.Weight
		heaviest = max(heaviest, t.Weight)
	}
	return total, heaviest
}
