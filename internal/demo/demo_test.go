package demo_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/cozy-aio/internal/demo"
)

// The in-process Git server logs each request through the standard logger.
func init() {
	log.SetOutput(io.Discard)
	ctrllog.SetLogger(logr.Discard())
}

// TestEndToEnd is `make demo` made smaller: 3 tenants with 2 releases
// each on the simulated cluster, with the demo's own checks (phase order
// from timestamps, every Deployment Available, every release Ready only
// after its Deployment), then the same with one tenant's chart broken,
// then with two replicas whose leader is killed mid-install
// (`DEMO_REPLICAS=2 make demo` made smaller).
func TestEndToEnd(t *testing.T) {
	bin := demo.BuildCozy(t)

	t.Run("healthy", func(t *testing.T) {
		var out bytes.Buffer
		work := t.TempDir()
		// Progress every 100 ms, and a CNI that takes 3 s to configure a
		// node, as real ones take seconds: with an instant one cozy-aio
		// may leave the network phase before its /metrics first answers
		// (seen once under make test's load), and no progress line could
		// show the phase.
		res, err := demo.Run(context.Background(), demo.Options{
			Tenants: 3, Releases: 2, Binary: bin, WorkDir: work, Out: &out, Timeout: 5 * time.Minute,
			Every: 100 * time.Millisecond, NetworkDelay: 3 * time.Second,
		})
		t.Log("\n" + out.String())
		if err != nil {
			t.Fatalf("demo failed: %v", err)
		}
		if len(res.Checks) != 4 || res.Checks[3].Name != "status page" {
			t.Fatalf("want 4 checks, the status page's last, got %+v", res.Checks)
		}
		// The page was live: its stream pushed the changes as units
		// became Ready, and the summary says how many.
		if res.Page == nil || res.Page.Updates == 0 || !strings.Contains(out.String(), "updates pushed to the demo's live client") {
			t.Fatalf("the status page: %+v", res.Page)
		}
		var releases int
		for _, u := range res.Units {
			if u.Kind == "HelmRelease" {
				releases++
			}
			if !u.Ready {
				t.Errorf("%s is not Ready: %s", u, u.Message)
			}
		}
		if releases != 3*2+1 {
			t.Fatalf("%d HelmReleases, want 7", releases)
		}
		if !res.FirstInstall.After(res.CozyStarted.Add(-time.Second)) || res.NetworkPodsRunning.After(res.FirstInstall) {
			t.Fatalf("timeline: cozy-aio %s, network pods %s, first install %s", res.CozyStarted, res.NetworkPodsRunning, res.FirstInstall)
		}
		if !strings.Contains(out.String(), "phase=network") || !strings.Contains(out.String(), "shard-load") {
			t.Fatalf("progress shows no phase or shard load:\n%s", out.String())
		}
		noProcessLeft(t, work)
	})

	t.Run("broken tenant", func(t *testing.T) {
		var out bytes.Buffer
		work := t.TempDir()
		res, err := demo.Run(context.Background(), demo.Options{
			Tenants: 3, Releases: 2, Break: true, Binary: bin, WorkDir: work, Out: &out, Timeout: 5 * time.Minute,
		})
		t.Log("\n" + out.String())
		if err == nil {
			t.Fatal("the demo passed with a broken chart")
		}
		if !strings.Contains(err.Error(), "tenant-002") {
			t.Fatalf("the error does not name the broken tenant: %v", err)
		}
		for _, c := range res.Checks {
			if !c.OK {
				t.Errorf("check %s failed for the healthy tenants: %s", c.Name, c.Detail)
			}
		}
		if len(res.Failed) != 2 {
			t.Fatalf("want the broken tenant's 2 releases failed, got %v", res.Failed)
		}
		for _, u := range res.Failed {
			if u.Namespace != "tenant-002" || !strings.Contains(u.Message, "broken on purpose") {
				t.Errorf("failed unit %s: %s", u, u.Message)
			}
		}
		for _, u := range res.Units {
			if u.Namespace != "tenant-002" && !u.Ready {
				t.Errorf("%s is not Ready: %s", u, u.Message)
			}
		}
		noProcessLeft(t, work)
	})

	t.Run("two replicas with the leader killed", func(t *testing.T) { testReplicas(t, bin) })
	t.Run("two tenant clusters with one stopped", func(t *testing.T) { testClusters(t, bin) })
}

// `DEMO_CLUSTERS=2 make demo` made smaller: two tenant clusters with ten
// addon HelmReleases each through spec.kubeConfig; the second one's API
// server is stopped once its first addon is Ready.
func testClusters(t *testing.T, bin string) {
	var out bytes.Buffer
	work := t.TempDir()
	res, err := demo.Run(context.Background(), demo.Options{
		Tenants: 2, Releases: 1, Clusters: 2, Binary: bin, WorkDir: work, Out: &out, Timeout: 5 * time.Minute,
		Every: 500 * time.Millisecond,
	})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("demo failed: %v", err)
	}
	checks := map[string]bool{}
	for _, c := range res.Checks {
		checks[c.Name] = c.OK
	}
	for _, name := range []string{"tenant clusters", "stopped cluster", "phase order", "deployments available"} {
		if !checks[name] {
			t.Errorf("check %q missing or failed: %+v", name, res.Checks)
		}
	}
	if len(res.Clusters) != 2 {
		t.Fatalf("cluster reports %+v", res.Clusters)
	}
	up, down := res.Clusters[0], res.Clusters[1]
	if up.Ready != 10 || up.Records != 10 || up.Pending != 0 || up.ReadyAt.IsZero() || !up.Stopped.IsZero() {
		t.Errorf("the up cluster: %+v", up)
	}
	if down.Stopped.IsZero() || down.Ready != 0 || len(res.Expected) != 10 {
		t.Errorf("the stopped cluster: %+v, %d units Ready=False as expected", down, len(res.Expected))
	}
	for _, u := range res.Expected {
		if u.Namespace != "k8s-02" || u.Ready {
			t.Errorf("expected failure %s: %s", u, u.Message)
		}
	}
	named := 0
	for _, u := range res.Expected {
		if strings.Contains(u.Message, "Secret k8s-02/k8s-02-admin-kubeconfig") {
			named++
		}
	}
	if named == 0 {
		t.Errorf("no addon of the stopped cluster names its Secret: %+v", res.Expected)
	}
	for _, u := range res.Units {
		if u.Namespace != "k8s-02" && !u.Ready {
			t.Errorf("%s is not Ready: %s", u, u.Message)
		}
	}
	if !strings.Contains(out.String(), "TENANT CLUSTER") || !strings.Contains(out.String(), "k8s-02 stopped") {
		t.Fatalf("progress or summary shows no tenant clusters:\n%s", out.String())
	}
	noProcessLeft(t, work)
}

// TestEndToEnd's replicas subtest lives beside it: the same scenario with
// two cozy-aio replicas, the leader killed with SIGKILL mid-install, and a
// tenant cluster whose addons install through spec.kubeConfig meanwhile.
func testReplicas(t *testing.T, bin string) {
	var out bytes.Buffer
	work := t.TempDir()
	res, err := demo.Run(context.Background(), demo.Options{
		Tenants: 3, Releases: 2, Replicas: 2, Binary: bin, WorkDir: work, Out: &out, Timeout: 5 * time.Minute,
		Every: 500 * time.Millisecond, Clusters: 1, ClusterDown: demo.ClusterDownNone,
	})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("demo failed: %v", err)
	}
	f := res.Failover
	if f == nil || f.Killed == "" || f.NewLeader == "" || f.NewLeader == f.Killed {
		t.Fatalf("failover: %+v", f)
	}
	if f.LeaderTakeover() <= 0 || f.ShardTakeover() < 0 || f.Restarted.Before(f.LeaderAt) || f.Restarted.Before(f.ShardsAt) {
		t.Fatalf("takeover times: killed %s, new leader %s, shards %s, restarted %s", f.At, f.LeaderAt, f.ShardsAt, f.Restarted)
	}
	checks := map[string]bool{}
	for _, c := range res.Checks {
		checks[c.Name] = c.OK
	}
	// "tenant clusters": the tenant cluster's ten addons, installed while
	// the leader is killed too, each have one record there, none pending.
	for _, name := range []string{"phase order", "deployments available", "ready after available", "takeover", "shards placed", "one revision each", "nothing pending", "tenant clusters"} {
		if !checks[name] {
			t.Errorf("check %q missing or failed: %+v", name, res.Checks)
		}
	}
	written := 0
	for _, r := range res.Replicas {
		written += r.Releases
		if !r.End.Up || len(r.End.Shards) == 0 {
			t.Errorf("replica %s at the end: %s, want it up with shards", r.ID, r.End)
		}
	}
	if len(res.Replicas) != 2 || written != 3*2+1 {
		t.Fatalf("replicas %+v: want 2, whose holder labels cover the 7 releases", res.Replicas)
	}
	for _, u := range res.Units {
		if !u.Ready {
			t.Errorf("%s is not Ready: %s", u, u.Message)
		}
	}
	if !strings.Contains(out.String(), "replicas node-1[") || !strings.Contains(out.String(), "REPLICA") {
		t.Fatalf("progress or summary shows no replicas:\n%s", out.String())
	}
	noProcessLeft(t, work)
}

// noProcessLeft fails when a process started for the run (every part of
// the cluster and cozy-aio name the work directory in their arguments)
// still runs.
func noProcessLeft(t *testing.T, work string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(work)) {
			continue
		}
		if strings.HasPrefix(p, "/proc/self/") {
			continue
		}
		t.Errorf("process left behind: %s", strings.ReplaceAll(string(b), "\x00", " "))
	}
}
