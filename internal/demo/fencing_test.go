package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// slowChart installs a Deployment: on a plain API server no controller
// makes it Available, so an install waits for it until its timeout.
var slowChart = map[string]string{
	"Chart.yaml": "apiVersion: v2\nname: slow\nversion: 1.0.0\n",
	"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      containers: [{name: app, image: example/app:1}]
`,
}

// installTimeout bounds each install: the slow chart's waits that long
// unless Deployments are made Available.
const installTimeout = 20 * time.Second

// auditSecrets is an audit policy recording every request on Secrets.
const auditSecrets = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: ["secrets"]}]
- level: None
`

// fencing is the scene of TestFencingAfterSIGSTOP: two cozy-aio replicas
// on a plain API server sharing releases of the slow chart.
type fencing struct {
	t  *testing.T
	c  client.Client
	ns string
	// registry serves the chart; audit is the API server's audit log.
	registry, audit string
	reps            []*replica
	exits           chan replicaExit
}

// TestFencingAfterSIGSTOP pauses, with SIGSTOP, the replica that is in the
// middle of installing a release, past its Leases (3s/2s/500ms). The other
// replica takes the release's shard over and recovers the release (its
// pending-install marked failed and remediated: uninstalled, installed
// again). Then the paused replica resumes in the middle of its action: it
// must write nothing more to the release's Secrets, neither through its
// fence (it no longer holds the shard's Lease) nor past it (the Secrets'
// resourceVersions changed since it read them). A replica that exits on
// resuming because it lost the leader Lease (as controller-runtime's leader
// election did before the engine elected its leader itself) is accepted.
func TestFencingAfterSIGSTOP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := startFencing(ctx, t)
	f.create(ctx, 4)

	// A replica in the middle of an install: its Deployment never becomes
	// Available yet.
	victim, survivor, release := f.installing(ctx)
	metrics := victim.scrape()
	before := stateOf(metrics)
	if metrics.running == 0 {
		t.Fatalf("%s reports no Helm action running while it installs %s", victim.id, release)
	}
	t.Logf("%s is installing %s; it reports %s, %s reports %s", victim.id, release, before, survivor.id, stateOf(survivor.scrape()))
	if err := syscall.Kill(victim.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	defer func() { _ = syscall.Kill(victim.cmd.Process.Pid, syscall.SIGCONT) }()
	// From now on Deployments become Available, so that the survivor's
	// install of the release succeeds.
	go testenv.MakeDeploymentsAvailable(ctx, f.c, f.ns)

	f.eventually(ctx, time.Minute, survivor.id+" owning "+victim.id+"'s shards", func() bool {
		s := stateOf(survivor.scrape())
		return !slices.ContainsFunc(before.Shards, func(id int) bool { return !slices.Contains(s.Shards, id) })
	})
	t.Logf("%s owns %s's shards %.1fs after SIGSTOP", survivor.id, victim.id, time.Since(stopped).Seconds())
	f.eventually(ctx, 2*time.Minute, survivor.id+" recovering "+release, func() bool {
		recs := f.recordsOf(ctx, release)
		return len(recs) == 1 && recs[0].Status == "deployed" && recs[0].Holder == helm.RecordedID(survivor.id)
	})
	taken := f.versions(ctx)
	t.Logf("%s recovered %s %.1fs after SIGSTOP: %v", survivor.id, release, time.Since(stopped).Seconds(), f.recordsOf(ctx, release))

	if err := syscall.Kill(victim.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	f.resumed(victim, resumed)
	f.assertUntouched(ctx, taken, release, victim)
	f.assertRefused(victim, resumed)
}

// resumed waits until the resumed victim's interrupted action has ended
// (no Helm item runs on it any more) or the victim exited, for at most the
// install timeout, then a few seconds more for anything it might still
// write.
func (f *fencing) resumed(victim *replica, at time.Time) {
	deadline := time.After(installTimeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case ex := <-f.exits:
			f.t.Logf("%s exited %.1fs after SIGCONT (%v), having lost a Lease: accepted", ex.r.id, time.Since(at).Seconds(), ex.err)
			return
		case <-deadline:
			f.t.Logf("%s's interrupted action still runs %s after SIGCONT; it reports %s", victim.id, installTimeout, stateOf(victim.scrape()))
			done = true
		case <-tick.C:
			if s := victim.scrape(); s.up && s.running == 0 {
				f.t.Logf("%s's interrupted action ended %.1fs after SIGCONT; it reports %s", victim.id, time.Since(at).Seconds(), stateOf(s))
				done = true
			}
		}
	}
	time.Sleep(3 * time.Second)
}

// installing finds a replica with a release pending-install.
func (f *fencing) installing(ctx context.Context) (victim, survivor *replica, release string) {
	f.eventually(ctx, time.Minute, "a release pending-install", func() bool {
		for _, r := range f.records(ctx) {
			i := slices.IndexFunc(f.reps, func(p *replica) bool { return helm.RecordedID(p.id) == r.Holder })
			if r.Status == "pending-install" && i >= 0 {
				victim, survivor, release = f.reps[i], f.reps[1-i], r.Name
				return true
			}
		}
		return false
	})
	return victim, survivor, release
}

func startFencing(ctx context.Context, t *testing.T) *fencing {
	bin := buildCozy(t)
	work := t.TempDir()
	logs := filepath.Join(work, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	// The audit log records every request on Secrets, by user.
	policy := filepath.Join(work, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditSecrets), 0o644); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(logs, "audit.log")
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{
		Scheme: engine.NewScheme(), LogDir: logs, StartTimeout: 2 * time.Minute,
		APIServerArgs: map[string]string{"audit-policy-file": policy, "audit-log-path": audit},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	if _, err := reg.PushChart(ctx, "charts/slow", slowChart); err != nil {
		t.Fatal(err)
	}
	f := &fencing{t: t, c: cp.Client, ns: "fencing", registry: reg.Host(), audit: audit, exits: make(chan replicaExit, 4)}
	ports, err := freePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"node-a", "node-b"} {
		// Each replica is its own API user, for the audit log.
		kc, err := cp.Kubeconfig(id, "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig := filepath.Join(work, id+".kubeconfig")
		if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := newReplica(replicaOptions{
			binary: bin, workDir: work, logs: logs, id: id, server: cp.Config.Host, kubeconfig: kubeconfig,
			shards: 2, workers: 2, extra: []string{"--network-phase=false", "--tenant-label=tenant"},
			health: ports[2*i], artifacts: ports[2*i+1],
			lease: 3 * time.Second, renew: 2 * time.Second, retry: 500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.start(f.exits); err != nil {
			t.Fatal(err)
		}
		f.reps = append(f.reps, r)
		t.Cleanup(func() { r.stop(20 * time.Second) })
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs in %s", logs)
			for _, r := range f.reps {
				b, _ := os.ReadFile(r.log)
				t.Logf("%s:\n%s", r.log, tail(string(b), 60))
			}
		}
	})
	f.eventually(ctx, 2*time.Minute, "one leader and a shard on each replica", func() bool {
		a, b := stateOf(f.reps[0].scrape()), stateOf(f.reps[1].scrape())
		return a.Leader != b.Leader && len(a.Shards) == 1 && len(b.Shards) == 1
	})
	return f
}

// create makes the chart's source and n releases of it, one per tenant.
func (f *fencing) create(ctx context.Context, n int) {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}},
		&sourcev1.OCIRepository{
			ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: f.ns},
			Spec: sourcev1.OCIRepositorySpec{
				URL: "oci://" + f.registry + "/charts/slow", Insecure: true,
				Interval:      &metav1.Duration{Duration: time.Hour},
				Reference:     &sourcev1.OCIRepositoryRef{Tag: "1.0.0"},
				LayerSelector: &sourcev1.OCILayerSelector{MediaType: testenv.HelmChartMediaType, Operation: sourcev1.OCILayerCopy},
			},
		},
	}
	for i := 1; i <= n; i++ {
		objs = append(objs, &helmv2.HelmRelease{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i), Namespace: f.ns, Labels: map[string]string{"tenant": fmt.Sprintf("tenant-%d", i)}},
			Spec: helmv2.HelmReleaseSpec{
				Interval: metav1.Duration{Duration: time.Hour},
				ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "slow"},
				Install:  &helmv2.Install{Timeout: &metav1.Duration{Duration: installTimeout}},
			},
		})
	}
	for _, o := range objs {
		if err := createRetry(ctx, f.c, o); err != nil {
			f.t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

// records are the release Secrets of the scene's namespace.
func (f *fencing) records(ctx context.Context) []releaseRecord {
	var list corev1.SecretList
	if err := f.c.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		f.t.Logf("listing release Secrets: %v", err)
		return nil
	}
	return recordsOf(list.Items)
}

func (f *fencing) recordsOf(ctx context.Context, release string) []releaseRecord {
	var out []releaseRecord
	for _, r := range f.records(ctx) {
		if r.Name == release {
			out = append(out, r)
		}
	}
	return out
}

// versions are the release Secrets' resourceVersions, by name.
func (f *fencing) versions(ctx context.Context) map[string]string {
	var list corev1.SecretList
	if err := f.c.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		out[s.Name] = s.ResourceVersion + " " + s.Labels["status"] + " by " + s.Labels[helm.LabelHolder]
	}
	return out
}

// assertUntouched fails when a Secret of release changed since taken, or
// when any release Secret written since taken names victim as its writer.
func (f *fencing) assertUntouched(ctx context.Context, taken map[string]string, release string, victim *replica) {
	now := f.versions(ctx)
	for name, v := range taken {
		if strings.Contains(name, "."+release+".") && now[name] != v {
			f.t.Errorf("Secret %s changed after the takeover: %s, now %q", name, v, now[name])
		}
	}
	for name, v := range now {
		if _, ok := taken[name]; !ok && strings.Contains(name, "."+release+".") {
			f.t.Errorf("Secret %s written after the takeover: %s", name, v)
		}
		// A record the victim wrote before it was stopped (another
		// release it was installing, not yet recovered by the survivor)
		// is as it was at the takeover: only a change since then, or a new
		// record, was written by the resumed victim.
		if strings.HasSuffix(v, " by "+helm.RecordedID(victim.id)) && taken[name] != v {
			f.t.Errorf("Secret %s was written by the resumed %s: %s", name, victim.id, v)
		}
	}
	f.t.Logf("release Secrets after the resume: %v", now)
}

// auditEvent is what the test reads of an API server audit event.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource, Namespace, Name string
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
}

// assertRefused reads the API server's audit log (each replica has its own
// user) for writes of release Secrets the victim sent after it resumed
// (received after since): none may have succeeded. It says which guard
// stopped it: its fence (no write sent) or the API server (a write
// refused for its resourceVersion). A request received while the victim
// was stopped was sent before the pause.
func (f *fencing) assertRefused(victim *replica, since time.Time) {
	file, err := os.Open(f.audit)
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var refused, before int
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || e.User.Username != victim.id ||
			e.ObjectRef.Resource != "secrets" || e.ObjectRef.Namespace != f.ns {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch", "delete":
		default:
			continue
		}
		if e.RequestReceivedTimestamp.Time.Before(since) {
			before++
			continue
		}
		if e.ResponseStatus.Code < 300 {
			f.t.Errorf("%s's %s of Secret %s, received at %s after it resumed, succeeded (HTTP %d)", victim.id, e.Verb, e.ObjectRef.Name, e.RequestReceivedTimestamp.Format(time.StampMicro), e.ResponseStatus.Code)
			continue
		}
		refused++
		f.t.Logf("the API server refused %s's %s of Secret %s: HTTP %d", victim.id, e.Verb, e.ObjectRef.Name, e.ResponseStatus.Code)
	}
	if before == 0 {
		f.t.Fatalf("the audit log %s shows no write of %s at all, not even the pending install", f.audit, victim.id)
	}
	if refused == 0 {
		f.t.Logf("%s sent no write of a release Secret after it resumed: its interrupted action ended without reaching the API server", victim.id)
	}
}

func (f *fencing) eventually(ctx context.Context, timeout time.Duration, what string, cond func() bool) {
	f.t.Helper()
	if err := kwait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		f.t.Fatalf("%s: not within %s", what, timeout)
	}
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], "\n")
}
