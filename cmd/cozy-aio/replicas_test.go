package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// TestSIGKILLOfShardOwnerMidInstall runs two replicas of the binary, kills
// the one installing a release (its Helm action waits for a Deployment)
// with SIGKILL, and checks that the other takes the shard once the Leases
// expire, recovers the pending revision and ends with the release
// deployed: nothing is left pending-install, and the survivor wrote the
// deployed revision.
func TestSIGKILLOfShardOwnerMidInstall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, bin, kubeconfig, host, c := slowChartEnv(t)
	ns := cp.Namespace(t)
	lease := [3]time.Duration{3 * time.Second, 2 * time.Second, 500 * time.Millisecond}
	procs := map[string]*proc{}
	for _, id := range []string{"node-1", "node-2"} {
		procs[id] = startReplicaProc(t, bin, kubeconfig, dir, ns, id, lease)
	}
	all := []*proc{procs["node-1"], procs["node-2"]}
	waitUntil(t, "both replicas owning shards", 2*time.Minute, func() bool {
		o, leader := owners(all...)
		return leader != "" && len(o) == 4 && len(uniq(mapValues(o))) == 2
	}, all...)

	hr, objs := slowRelease(ns, host)
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	revisions := func() []corev1.Secret {
		var secrets corev1.SecretList
		_ = c.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "slow"})
		return secrets.Items
	}
	var owner string
	waitUntil(t, "the install pending on one replica", 2*time.Minute, func() bool {
		for _, s := range revisions() {
			if s.Labels["status"] == "pending-install" {
				owner = s.Labels[helm.LabelHolder]
				return true
			}
		}
		return false
	}, all...)
	victim := procs[owner]
	if victim == nil {
		t.Fatalf("the pending revision names holder %q, not a replica", owner)
	}
	var survivor *proc
	for id, p := range procs {
		if id != owner {
			survivor = p
		}
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = victim.cmd.Process.Wait()
	killed := time.Now()

	available, stopAvailable := context.WithCancel(ctx)
	defer stopAvailable()
	go testenv.MakeDeploymentsAvailable(available, c, ns)
	waitUntil(t, "the HelmRelease Ready after the survivor took over", 2*time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(hr), hr) == nil && conditions.IsReady(hr)
	}, survivor)
	t.Logf("release Ready %s after the SIGKILL (Leases of %s)", time.Since(killed).Round(100*time.Millisecond), lease[0])
	var statuses []string
	deployedBy := ""
	for _, s := range revisions() {
		statuses = append(statuses, s.Labels["version"]+":"+s.Labels["status"])
		if strings.HasPrefix(s.Labels["status"], "pending") {
			t.Fatalf("a revision is still %s: %v", s.Labels["status"], statuses)
		}
		if s.Labels["status"] == "deployed" {
			deployedBy = s.Labels[helm.LabelHolder]
		}
	}
	if deployedBy != survivor.id {
		t.Fatalf("revisions %v: the deployed one was written by %q, want the survivor %s", statuses, deployedBy, survivor.id)
	}
	t.Logf("revisions after the takeover: %v", statuses)
	_ = survivor.cmd.Process.Signal(syscall.SIGTERM)
	_, _ = survivor.cmd.Process.Wait()
}

func uniq(s []string) map[string]bool {
	out := map[string]bool{}
	for _, v := range s {
		out[v] = true
	}
	return out
}
