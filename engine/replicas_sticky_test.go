package engine_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/shard"
)

// startReplicaShards is startReplica with its own shard count.
func startReplicaShards(t *testing.T, ns, id string, lease time.Duration, shards int) *replica {
	t.Helper()
	e, err := engine.New(cp.Config, engine.Options{
		HolderID: id, DataDir: sharedDir(t), ArtifactAddr: "127.0.0.1:0", Registry: prometheus.NewRegistry(),
		Shards: shards, TenantLabel: "tenant", Logger: ctrllog.Log.WithName(id),
		Replicas: engine.ReplicaOptions{
			Enabled: true, Namespace: ns,
			LeaseDuration: lease, RenewDeadline: lease * 2 / 3, RetryPeriod: 500 * time.Millisecond,
			HandoffGrace: 20 * time.Second,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	stopped := false
	r := &replica{e: e, stop: func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("replica %s stopped with %v", id, err)
		}
	})
	return r
}

// settled is what a change of tenants or shards gives with the shared
// assignment: Assign with the assignment before as Previous, then
// published again until it stays (shard.Placement.Anchor).
func settled(t *testing.T, weights map[string]int, shards []int, before map[string]int) map[string]int {
	t.Helper()
	ts := make([]shard.Tenant, 0, len(weights))
	for id, w := range weights {
		ts = append(ts, shard.Tenant{ID: id, Weight: w})
	}
	prev := before
	for range 5 {
		a, err := shard.Assign(ts, shards, shard.Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		if maps.Equal(a.Tenants, prev) {
			break
		}
		prev = a.Tenants
	}
	return prev
}

// memoryless is the assignment without memory.
func memoryless(t *testing.T, weights map[string]int, shards []int) map[string]int {
	t.Helper()
	ts := make([]shard.Tenant, 0, len(weights))
	for id, w := range weights {
		ts = append(ts, shard.Tenant{ID: id, Weight: w})
	}
	a, err := shard.Assign(ts, shards, shard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a.Tenants
}

// movedWeight is the weight of the tenants present in both assignments
// that changed shard.
func movedWeight(weights, before, after map[string]int) int {
	n := 0
	for id, s := range after {
		if b, ok := before[id]; ok && b != s {
			n += weights[id]
		}
	}
	return n
}

// agreed waits until every running replica places the tenants of weights
// on shards as want, and returns that assignment.
func agreed(t *testing.T, what string, rs []*replica, weights map[string]int, shards []int, want map[string]int) map[string]int {
	t.Helper()
	var got map[string]int
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range rs {
				a := r.e.Assignment()
				t.Logf("%s: shards %v loads %v tenants %v", r.e.Replica().ID, a.Shards, a.Load, a.Tenants)
			}
			t.Logf("weights %v; want %v", weights, want)
		}
	})
	eventually(t, 60*time.Second, what, func() bool {
		for i, r := range rs {
			a := r.e.Assignment()
			sum := 0
			for _, l := range a.Load {
				sum += l
			}
			if !slices.Equal(a.Shards, shards) || len(a.Tenants) != len(weights) || sum != total(weights) {
				return false
			}
			if i == 0 {
				got = a.Tenants
			} else if !maps.Equal(a.Tenants, got) {
				return false
			}
		}
		if want == nil {
			// Published and settled: publishing it again moves nobody.
			// Every replica has read the publication back: before it,
			// the last tenants to arrive are placed locally and may move
			// when the leader's publication reaches the others.
			for _, r := range rs {
				if !maps.Equal(r.e.PublishedTenants(), got) {
					return false
				}
			}
			return maps.Equal(settled(t, weights, shards, got), got)
		}
		return maps.Equal(got, want)
	})
	return got
}

// TestReplicasShareStickyAssignment runs three replicas with the shared
// placement memory: they agree on every tenant's shard although the leader
// alone was configured with another shard count; a tenant removed and one
// added move only what Assign with the assignment before as Previous moves,
// and so does the shard count change when the leader stops and a replica
// with the other count leads; a replica started late places as the others
// before it owns a shard. Releases that install are installed once: one
// Helm revision each, whichever replica owned them.
func TestReplicasShareStickyAssignment(t *testing.T) {
	ctx := context.Background()
	// Every replica weighs every HelmRelease of the cluster: those the
	// package's earlier tests left behind would be tenants here too.
	clearHelmReleases(t)
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	const lease = 90 * time.Second
	a := startReplicaShards(t, ns, "replica-a", lease, 5)
	eventually(t, 30*time.Second, "replica-a leading", func() bool { return a.e.Replica().Leader })
	b := startReplicaShards(t, ns, "replica-b", lease, 4)

	if err := cp.Client.Create(ctx, chartSource(ns, "demo", reg.Host(), "1.0.0")); err != nil {
		t.Fatal(err)
	}
	// 40 tenants: one of 6 releases, the rest of 1. Six of them install a
	// real chart; the others name a chart source that does not exist, which
	// weighs them in the placement without any Helm work.
	weights := map[string]int{}
	var installed []*helmv2.HelmRelease
	create := func(tenant string, i int, real bool) *helmv2.HelmRelease {
		src := "missing"
		if real {
			src = "demo"
		}
		hr := helmRelease(ns, fmt.Sprintf("%s-%d", tenant, i), src)
		hr.Labels = map[string]string{"tenant": tenant}
		if err := cp.Client.Create(ctx, hr); err != nil {
			t.Fatal(err)
		}
		weights[tenant]++
		if real {
			installed = append(installed, hr)
		}
		return hr
	}
	for i := range 6 {
		create("tenant-00", i, false)
	}
	for i := 1; i < 40; i++ {
		create(fmt.Sprintf("tenant-%02d", i), 0, i%7 == 0)
	}
	five := shard.Range(5)
	// What they agree on depends on when the leader published while the
	// releases came in; agreed checks that it is settled.
	before := agreed(t, "replicas a and b agreeing on 5 shards", []*replica{a, b}, weights, five, nil)

	// A replica started now, configured with 4 shards, is anchored to the
	// published 5 before it owns any shard (its HelmReleases may still be
	// on their way), and then places every tenant as the others.
	c := startReplicaShards(t, ns, "replica-c", lease, 4)
	eventually(t, 30*time.Second, "replica-c owning a shard", func() bool { return len(c.e.Replica().Shards) > 0 })
	if got := c.e.Assignment(); !slices.Equal(got.Shards, five) {
		t.Fatalf("replica-c owns shards %v on shards %v; want the published 0-4", c.e.Replica().Shards, got.Shards)
	}
	all := []*replica{a, b, c}
	agreed(t, "replica-c placing as the others", all, weights, five, before)

	// Churn: one tenant goes, then one comes.
	gone := "tenant-03"
	hr := helmRelease(ns, gone+"-0", "missing")
	if err := cp.Client.Delete(ctx, hr); err != nil {
		t.Fatal(err)
	}
	delete(weights, gone)
	after := agreed(t, "the replicas agreeing without "+gone, all, weights, five, settled(t, weights, five, before))
	t.Logf("tenant removed: moved weight %d (sticky %d, without memory %d) of %d",
		movedWeight(weights, before, after), movedWeight(weights, before, settled(t, weights, five, before)),
		movedWeight(weights, memoryless(t, withTenant(weights, gone, 1), five), memoryless(t, weights, five)), total(weights))
	before = after
	create("tenant-40", 0, true)
	after = agreed(t, "the replicas agreeing with tenant-40", all, weights, five, settled(t, weights, five, before))
	t.Logf("tenant added: moved weight %d (without memory %d) of %d",
		movedWeight(weights, before, after),
		movedWeight(weights, memoryless(t, withoutTenant(weights, "tenant-40"), five), memoryless(t, weights, five)), total(weights))
	before = after

	// The leader, alone with 5 shards, stops: b or c leads and publishes
	// 4 shards; every replica resizes from the same assignment.
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	four := shard.Range(4)
	want := settled(t, weights, four, before)
	after = agreed(t, "replicas b and c agreeing on 4 shards", all[1:], weights, four, want)
	t.Logf("5→4 shards: moved weight %d (sticky %d, without memory %d, optimum ≥ %d) of %d",
		movedWeight(weights, before, after), movedWeight(weights, before, want),
		movedWeight(weights, memoryless(t, weights, five), memoryless(t, weights, four)), loadOn(weights, before, 4), total(weights))

	for _, hr := range installed {
		waitFor(t, hr, readyIs(hr, true), "Ready=True")
	}
	// Every move has been handed off; no release ran twice.
	time.Sleep(2 * time.Second)
	for _, hr := range installed {
		revs := releaseSecrets(t, ns, hr.Name)
		if len(revs) != 1 || revs[0].Labels["status"] != "deployed" {
			t.Errorf("release %s: want exactly one deployed revision, got %v", hr.Name, labelsOf(revs))
		}
	}
}

func withTenant(w map[string]int, id string, weight int) map[string]int {
	out := maps.Clone(w)
	out[id] = weight
	return out
}

func withoutTenant(w map[string]int, id string) map[string]int {
	out := maps.Clone(w)
	delete(out, id)
	return out
}

func total(w map[string]int) int {
	n := 0
	for _, v := range w {
		n += v
	}
	return n
}

// loadOn is the weight a assigns to shard s: what must move when s goes.
func loadOn(w, a map[string]int, s int) int {
	n := 0
	for id, at := range a {
		if at == s {
			n += w[id]
		}
	}
	return n
}

// clearHelmReleases deletes every HelmRelease of the shared control plane,
// finalizers first (the engines that set them are gone). The package's
// tests do not run in parallel.
func clearHelmReleases(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var list helmv2.HelmReleaseList
	if err := cp.Client.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		hr := &list.Items[i]
		if len(hr.Finalizers) > 0 {
			patch := client.MergeFrom(hr.DeepCopy())
			hr.Finalizers = nil
			if err := cp.Client.Patch(ctx, hr, patch); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
		if err := cp.Client.Delete(ctx, hr); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "no HelmRelease left", func() bool {
		var l helmv2.HelmReleaseList
		return cp.Client.List(ctx, &l) == nil && len(l.Items) == 0
	})
}
