package status

import (
	"testing"
	"time"
)

// Units are grouped by their remote cluster, and a cluster whose requests
// fail and that has not answered for a minute is unreachable.
func TestRemoteClusters(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	units := []Unit{
		{Kind: "HelmRelease", Name: "local", Ready: true},
		{Kind: "HelmRelease", Name: "a1", Ready: true, Cluster: "Secret t/a"},
		{Kind: "HelmRelease", Name: "a2", Cluster: "Secret t/a"},
		{Kind: "Kustomization", Name: "b1", Cluster: "Secret t/b"},
		{Kind: "HelmRelease", Name: "c1", Ready: true, Cluster: "ConfigMap t/c"},
	}
	metrics := map[string]*RemoteMetrics{
		"Secret t/a":    {Requests: 10, Errors: 1, LastContact: now.Add(-5 * time.Second)},
		"Secret t/b":    {Requests: 4, Errors: 4},
		"ConfigMap t/c": {Requests: 3, Errors: 2, LastContact: now.Add(-2 * time.Minute)},
	}
	got := RemoteClusters(units, metrics, now)
	want := []struct {
		name         string
		ready, total int
		unreachable  bool
	}{
		{"ConfigMap t/c", 1, 1, true}, // answered, but not for two minutes, and errors since
		{"Secret t/a", 1, 2, false},   // an error, but it answered 5 s ago
		{"Secret t/b", 0, 1, true},    // never answered
	}
	if len(got) != len(want) {
		t.Fatalf("clusters %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Ready != w.ready || g.Total != w.total || g.Unreachable != w.unreachable {
			t.Errorf("cluster %d = %+v, want %+v", i, g, w)
		}
	}
}
