package engine_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// replica is one engine of a set of replicas, stoppable on its own.
type replica struct {
	e    *engine.Engine
	stop func() error
}

// startReplica runs an engine with replicas enabled, its Leases in ns.
func startReplica(t *testing.T, ns, id string, lease time.Duration) *replica {
	t.Helper()
	return startReplicaWith(t, ns, id, engine.ReplicaOptions{
		LeaseDuration: lease, RenewDeadline: lease * 2 / 3, HandoffGrace: 20 * time.Second,
	})
}

// startReplicaWith runs an engine with replicas enabled, its Leases in ns,
// with ro's timings (a retry period of 500 ms unless set).
func startReplicaWith(t *testing.T, ns, id string, ro engine.ReplicaOptions) *replica {
	t.Helper()
	ro.Enabled, ro.Namespace = true, ns
	if ro.RetryPeriod == 0 {
		ro.RetryPeriod = 500 * time.Millisecond
	}
	e, err := engine.New(cp.Config, engine.Options{
		HolderID: id, DataDir: sharedDir(t), ArtifactAddr: "127.0.0.1:0", Registry: prometheus.NewRegistry(),
		Shards: 4, TenantLabel: "tenant", Logger: ctrllog.Log.WithName(id),
		Replicas: ro,
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

// eventually polls cond every 100 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatalf("%s never happened within %s", what, timeout)
	}
}

// TestReplicasShareHelmShards runs two replicas: one leads, each owns
// half of the Helm shards, every release is installed exactly once and
// Helm work runs on both; when one stops, it hands its shards to the other
// at once, without waiting for its Leases to expire.
func TestReplicasShareHelmShards(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	// Leases far longer than the test waits: a hand-off that happens
	// proves the Leases were released, not that they expired.
	const lease = 90 * time.Second
	a := startReplica(t, ns, "replica-a", lease)
	b := startReplica(t, ns, "replica-b", lease)
	eventually(t, 30*time.Second, "one leader and two shards each", func() bool {
		ra, rb := a.e.Replica(), b.e.Replica()
		t.Logf("%s; %s", ra, rb)
		all := slices.Sorted(slices.Values(append(append([]int(nil), ra.Shards...), rb.Shards...)))
		return ra.Leader != rb.Leader && len(ra.Shards) == 2 && len(rb.Shards) == 2 && slices.Equal(all, []int{0, 1, 2, 3})
	})
	t.Logf("%s; %s", a.e.Replica(), b.e.Replica())
	// The metrics say the same as Replica.
	for _, r := range []*replica{a, b} {
		want := r.e.Replica()
		leader, owned := replicaMetrics(t, r.e)
		if leader != want.Leader || !slices.Equal(owned, want.Shards) {
			t.Fatalf("metrics of %s: leader %v, owned %v; want %s", want.ID, leader, owned, want)
		}
	}

	if err := cp.Client.Create(ctx, chartSource(ns, "demo", reg.Host(), "1.0.0")); err != nil {
		t.Fatal(err)
	}
	var hrs []*helmv2.HelmRelease
	for i := range 12 {
		hr := helmRelease(ns, fmt.Sprintf("app-%02d", i), "demo")
		hr.Labels = map[string]string{"tenant": fmt.Sprintf("tenant-%02d", i)}
		if err := cp.Client.Create(ctx, hr); err != nil {
			t.Fatal(err)
		}
		hrs = append(hrs, hr)
	}
	holders := map[string]int{}
	for _, hr := range hrs {
		waitFor(t, hr, readyIs(hr, true), "Ready=True")
		revs := releaseSecrets(t, ns, hr.Name)
		if len(revs) != 1 || revs[0].Labels["status"] != "deployed" || revs[0].Labels["version"] != "1" {
			t.Fatalf("release %s: want exactly revision 1 deployed, got %d revisions %v", hr.Name, len(revs), labelsOf(revs))
		}
		holders[revs[0].Labels[helm.LabelHolder]]++
	}
	if holders["replica-a"] == 0 || holders["replica-b"] == 0 {
		t.Fatalf("Helm work ran on %v, want both replicas", holders)
	}
	t.Logf("releases installed per replica: %v", holders)

	// A graceful stop hands b's shards to a.
	stopAt := time.Now()
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "replica-a owning every shard", func() bool {
		r := a.e.Replica()
		return r.Leader && slices.Equal(r.Shards, []int{0, 1, 2, 3})
	})
	t.Logf("hand-off: replica-a owned every shard %s after replica-b was told to stop", time.Since(stopAt).Round(time.Millisecond))

	// The shards work on a: a new release of every tenant installs there.
	hr := helmRelease(ns, "app-late", "demo")
	hr.Labels = map[string]string{"tenant": "tenant-late"}
	if err := cp.Client.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	if revs := releaseSecrets(t, ns, hr.Name); len(revs) != 1 || revs[0].Labels[helm.LabelHolder] != "replica-a" {
		t.Fatalf("late release: %v, want one revision by replica-a", labelsOf(revs))
	}
	// The Leases say the same: b's Lease is released, a holds the shards.
	var leases coordinationv1.LeaseList
	if err := cp.Client.List(ctx, &leases, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if holder == "replica-b" {
			t.Errorf("Lease %s is still held by the stopped replica-b", l.Name)
		}
	}
}

func releaseSecrets(t *testing.T, ns, name string) []corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	if err := cp.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func labelsOf(secrets []corev1.Secret) []map[string]string {
	var out []map[string]string
	for _, s := range secrets {
		out = append(out, s.Labels)
	}
	return out
}

// TestSingleEngineOwnsEverything: with replicas off, the engine leads and
// owns every shard without any Lease.
func TestSingleEngineOwnsEverything(t *testing.T) {
	e := startEngine(t, engine.Options{Shards: 3})
	r := e.Replica()
	if !r.Leader || !slices.Equal(r.Shards, []int{0, 1, 2}) {
		t.Fatalf("single engine: %s, want leader owning shards 0-2", r)
	}
	var leases coordinationv1.LeaseList
	if err := cp.Client.List(context.Background(), &leases, client.InNamespace("kube-system")); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, "cozy-aio-") {
			t.Fatalf("single engine wrote Lease %s", l.Name)
		}
	}
}

var tmpShared string

func sharedDir(t *testing.T) string {
	if tmpShared == "" {
		tmpShared = t.TempDir()
	}
	return tmpShared
}

// TestSetupOnEmbeddersManager runs the engine on a manager the test owns,
// as an operator embedding cozy-aio would: the engine shares its cache and
// reconciles a HelmRelease; Start is refused, as the manager is started by
// its owner.
func TestSetupOnEmbeddersManager(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	scheme := runtime.NewScheme()
	if err := engine.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Setup(mgr, engine.Options{DataDir: t.TempDir(), ArtifactAddr: "127.0.0.1:0", Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err == nil {
		t.Fatal("Start of an engine built by Setup: want an error")
	}
	if e.Cache() != mgr.GetCache() {
		t.Fatal("the engine does not share the manager's cache")
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with %v", err)
		}
	})
	hr := helmRelease(ns, "embedded", "demo")
	for _, o := range []client.Object{chartSource(ns, "demo", reg.Host(), "1.0.0"), hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
}

// replicaMetrics reads cozy_aio_leader and cozy_aio_shard_owned.
func replicaMetrics(t *testing.T, e *engine.Engine) (leader bool, owned []int) {
	t.Helper()
	families, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "cozy_aio_leader":
				leader = m.GetGauge().GetValue() == 1
			case "cozy_aio_shard_owned":
				if m.GetGauge().GetValue() == 1 {
					n, _ := strconv.Atoi(m.GetLabel()[0].GetValue())
					owned = append(owned, n)
				}
			}
		}
	}
	slices.Sort(owned)
	return leader, owned
}

// TestHandOffCancelsActionsPastItsGrace: a replica hands shards off while
// Helm installs run on them that will not end within the hand-off's grace
// (their Deployments never become Available). It cancels them, writes no
// record of them any more and releases the shards; the new owner then
// recovers their pending revisions at once, although their holder still
// runs, because the shard term they were written under has ended.
// Without the cancel the old holder's revisions stayed pending under a
// live holder that could no longer write them, and the new owner waited
// for them for ever.
func TestHandOffCancelsActionsPastItsGrace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, slowChart("1.0.0"))
	// Leases far longer than the test waits: shards move by hand-off.
	ro := engine.ReplicaOptions{LeaseDuration: 90 * time.Second, RenewDeadline: 60 * time.Second, HandoffGrace: 2 * time.Second}
	a := startReplicaWith(t, ns, "replica-a", ro)
	eventually(t, 30*time.Second, "replica-a owning every shard", func() bool {
		return slices.Equal(a.e.Replica().Shards, []int{0, 1, 2, 3})
	})
	if err := cp.Client.Create(ctx, chartSource(ns, "demo", reg.Host(), "1.0.0")); err != nil {
		t.Fatal(err)
	}
	var hrs []*helmv2.HelmRelease
	for i := range 8 {
		hr := helmRelease(ns, fmt.Sprintf("slow-%d", i), "demo")
		hr.Labels = map[string]string{"tenant": fmt.Sprintf("tenant-%d", i)}
		hr.Spec.Timeout = &metav1.Duration{Duration: 5 * time.Minute}
		if err := cp.Client.Create(ctx, hr); err != nil {
			t.Fatal(err)
		}
		hrs = append(hrs, hr)
	}
	eventually(t, time.Minute, "every release pending-install by replica-a", func() bool {
		for _, hr := range hrs {
			revs := releaseSecrets(t, ns, hr.Name)
			if len(revs) != 1 || revs[0].Labels["status"] != "pending-install" || revs[0].Labels[helm.LabelHolder] != "replica-a" {
				return false
			}
		}
		return true
	})
	started := time.Now()
	b := startReplicaWith(t, ns, "replica-b", ro)
	eventually(t, time.Minute, "two shards each", func() bool {
		return len(a.e.Replica().Shards) == 2 && len(b.e.Replica().Shards) == 2
	})
	t.Logf("shards moved %s after replica-b started: %s; %s", time.Since(started).Round(time.Millisecond), a.e.Replica(), b.e.Replica())
	go testenv.MakeDeploymentsAvailable(ctx, cp.Client, ns)
	holders := map[string]int{}
	for _, hr := range hrs {
		waitFor(t, hr, readyIs(hr, true), "Ready=True")
		revs := releaseSecrets(t, ns, hr.Name)
		if len(revs) != 1 || revs[0].Labels["status"] != "deployed" {
			t.Fatalf("release %s: want one deployed revision, got %v", hr.Name, labelsOf(revs))
		}
		holders[revs[0].Labels[helm.LabelHolder]]++
	}
	t.Logf("every release Ready %s after replica-b started; deployed by %v", time.Since(started).Round(time.Millisecond), holders)
	if holders["replica-b"] == 0 {
		t.Fatalf("no release moved to replica-b (%v): the test proves nothing", holders)
	}
}

// TestPendingRevisionHolderJudgedByItsClaim: a replica judges the holder
// of a pending revision alive only while the holder's replica Lease is
// live with the same start and, when the revision records a claim, the
// claimed shard's Lease still names the holder in that term.
func TestPendingRevisionHolderJudgedByItsClaim(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	const lease = 90 * time.Second
	a := startReplica(t, ns, "replica-a", lease)
	b := startReplica(t, ns, "replica-b", lease)
	eventually(t, 30*time.Second, "two shards each", func() bool {
		return len(a.e.Replica().Shards) == 2 && len(b.e.Replica().Shards) == 2
	})
	get := func(name string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	start, err := strconv.ParseInt(get("cozy-aio-replica-replica-a").Labels[engine.LabelReplicaStart], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := a.e.Replica().Shards[0], b.e.Replica().Shards[0]
	term := get("cozy-aio-shard-" + strconv.Itoa(mine)).Labels[engine.LabelShardTerm]
	if term == "" {
		t.Fatalf("shard %d's Lease has no %s", mine, engine.LabelShardTerm)
	}
	holder := func(claim string) helm.Holder {
		return helm.Holder{ID: "replica-a", Start: time.Unix(0, start), Claim: claim}
	}
	for _, c := range []struct {
		what string
		h    helm.Holder
		want bool
	}{
		{"no claim, replica live", holder(""), true},
		{"the shard and term it holds", holder(fmt.Sprintf("%d.%s", mine, term)), true},
		{"an earlier term of its shard", holder(fmt.Sprintf("%d.%s0", mine, term)), false},
		{"a shard another replica holds", holder(fmt.Sprintf("%d.%s", theirs, term)), false},
		{"a shard without a Lease", holder("99." + term), false},
		{"an earlier incarnation", helm.Holder{ID: "replica-a", Start: time.Unix(0, start-1)}, false},
		{"a replica that never ran", helm.Holder{ID: "replica-c", Start: time.Unix(0, start)}, false},
	} {
		if got := b.e.HolderAlive(c.h); got != c.want {
			t.Errorf("%s (%+v): alive = %v, want %v", c.what, c.h, got, c.want)
		}
	}
}
