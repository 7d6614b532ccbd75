package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/status"
	"github.com/cozystack/cozy-aio/internal/statuspage"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// TestStatusAndMetricsReference runs the real binary with one HelmRelease
// that becomes Ready and one whose source does not exist, then checks
// `cozy-aio status` (text and JSON) against them, that every metric the
// Grafana dashboard queries is in the real /metrics, and that
// docs/metrics.md describes every metric family served.
func TestStatusAndMetricsReference(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, bin, kubeconfig, host, c := slowChartEnv(t)
	ns := cp.Namespace(t)
	health, page := freePort(t), freePort(t)
	cmd := exec.Command(bin, "run", "--status-addr", page, "--kubeconfig", kubeconfig, "--kubeprism-address", freePort(t),
		"--data-dir", filepath.Join(dir, "data"), "--artifact-addr", freePort(t), "--health-addr", health,
		"--holder-id", "node-1", "--log-format", "text", "--network-phase=false",
		// The "remote" cluster below is this API server, on loopback,
		// which the destination policy refuses for remote clusters.
		"--destination-allow=127.0.0.0/8")
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()

	hr, objs := slowRelease(ns, host)
	broken := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: hr.Spec.Interval.Duration},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "missing"},
		},
	}
	objs = append(objs, broken)
	// A release on a "remote" cluster (this API server again, through a
	// kubeconfig Secret of its own namespace), so that /metrics serves the
	// remote cluster families the dashboard queries.
	remoteNS := cp.Namespace(t)
	kc, err := cp.Kubeconfig("remote-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant-kubeconfig", Namespace: remoteNS}, Data: map[string][]byte{"value": kc}},
		&helmv2.HelmRelease{
			ObjectMeta: metav1.ObjectMeta{Name: "remote", Namespace: remoteNS},
			Spec: helmv2.HelmReleaseSpec{
				Interval:   metav1.Duration{Duration: hr.Spec.Interval.Duration},
				ChartRef:   &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "slow", Namespace: ns},
				KubeConfig: &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "tenant-kubeconfig"}},
			},
		})
	eventually(t, "the CRDs are installed and the objects created", func() bool {
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil && client.IgnoreAlreadyExists(err) != nil {
				return false
			}
		}
		return true
	}, &logs)
	go testenv.MakeDeploymentsAvailable(ctx, c, ns)
	eventually(t, "one release Ready and the broken one Ready=False", func() bool {
		if c.Get(ctx, client.ObjectKeyFromObject(hr), hr) != nil || !conditions.IsReady(hr) {
			return false
		}
		return c.Get(ctx, client.ObjectKeyFromObject(broken), broken) == nil && conditions.IsFalse(broken, "Ready")
	}, &logs)

	checkStatusJSON(t, kubeconfig, health, page, ns)
	checkStatusText(t, kubeconfig, health, page, ns)

	var scrape []byte
	eventually(t, "/metrics serves the remote cluster's families", func() bool {
		resp, err := http.Get("http://" + health + "/metrics")
		if err != nil {
			return false
		}
		scrape, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return bytes.Contains(scrape, []byte("cozy_aio_remote_cluster_last_contact_timestamp_seconds{"))
	}, &logs)
	if dump := os.Getenv("COZY_METRICS_DUMP"); dump != "" {
		_ = os.WriteFile(dump, scrape, 0o644)
	}
	checkDashboard(t, string(scrape))
	checkMetricsDoc(t, string(scrape))
}

func runStatus(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append([]string{"status"}, args...), &out, &errb); code != 0 {
		t.Fatalf("cozy-aio status %v: %s", args, errb.String())
	}
	return out.String()
}

func checkStatusJSON(t *testing.T, kubeconfig, health, page, ns string) {
	t.Helper()
	var s status.Summary
	out := runStatus(t, "--kubeconfig", kubeconfig, "--metrics-addr", health, "--page-addr", page, "-o", "json", "--max-not-ready", "-1")
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	// The status page's overview comes along: its critical path ends at
	// the broken release's missing source (or a longer chain of another
	// test's).
	var ov statuspage.Overview
	if err := json.Unmarshal(s.Page, &ov); err != nil || s.PageError != "" || len(ov.Bootstrap.CriticalPath) < 2 {
		t.Errorf("status -o json: the page's overview %v %q: %s", err, s.PageError, s.Page)
	}
	if s.Phase != "all" || !s.Leader || s.MetricsError != "" {
		t.Errorf("phase %q leader %t metrics error %q, want all, true, none", s.Phase, s.Leader, s.MetricsError)
	}
	// Other tests' namespaces share the API server: count this one's.
	var mine []status.Unit
	for _, u := range s.NotReady {
		if u.Namespace == ns {
			mine = append(mine, u)
		}
	}
	if len(mine) != 1 || mine[0].Name != "broken" || !strings.Contains(mine[0].Message, "missing") {
		t.Errorf("not Ready in %s: %+v, want only HelmRelease broken naming its missing source", ns, mine)
	}
	var hrs status.Count
	for _, k := range s.Kinds {
		if k.Kind == helmv2.HelmReleaseKind {
			hrs = k
		}
	}
	if hrs.Total < 2 || hrs.Ready < 1 || hrs.Ready == hrs.Total {
		t.Errorf("HelmRelease count %+v, want at least 1 Ready of at least 2", hrs)
	}
	load := 0
	for _, sh := range s.Shards {
		load += sh.Load
		if !sh.Owned {
			t.Errorf("shard %d not owned by the only replica", sh.ID)
		}
	}
	if len(s.Shards) == 0 || load < 1 {
		t.Errorf("shards %+v: want the release's tenant placed", s.Shards)
	}
}

func checkStatusText(t *testing.T, kubeconfig, health, page, ns string) {
	t.Helper()
	out := runStatus(t, "--kubeconfig", kubeconfig, "--metrics-addr", health, "--page-addr", page, "--max-not-ready", "-1")
	for _, want := range []string{"phase: all", "HelmRelease ", "SHARD", ns, "broken", "critical path (the root cause first):"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// Without /metrics the summary still counts the units and says why.
	out = runStatus(t, "--kubeconfig", kubeconfig, "--metrics-addr", freePort(t), "--page-addr", "")
	if !strings.Contains(out, "phase: unknown") || !strings.Contains(out, "metrics: ") || !strings.Contains(out, "HelmRelease ") {
		t.Errorf("status without /metrics:\n%s", out)
	}
}

// metricName matches the metric names in PromQL expressions.
var metricName = regexp.MustCompile(`\b(?:gotk|cozy_aio|controller_runtime|workqueue|rest_client|leader_election|certwatcher|process|go)_[a-z0-9_]+\b`)

func checkDashboard(t *testing.T, scrape string) {
	t.Helper()
	b, err := os.ReadFile("../../docs/dashboards/cozy-aio.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	served := samples(scrape)
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		} else if m, ok := v.Query.(map[string]any); ok {
			if q, ok := m["query"].(string); ok {
				exprs = append(exprs, q)
			}
		}
	}
	queried := 0
	for _, e := range exprs {
		for _, name := range metricName.FindAllString(e, -1) {
			queried++
			if !served[name] {
				t.Errorf("the dashboard queries %s, which /metrics does not serve (in %q)", name, e)
			}
		}
	}
	if queried < 10 {
		t.Fatalf("the dashboard queries %d metrics; the parser missed its expressions", queried)
	}
}

// samples returns the names of the samples in an exposition, with the
// histograms' _bucket, _sum and _count.
func samples(scrape string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(scrape, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}

// checkMetricsDoc checks that docs/metrics.md names every family served;
// the Go runtime's and the process's are described as groups.
func checkMetricsDoc(t *testing.T, scrape string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, line := range strings.Split(scrape, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 || fields[0] != "#" || fields[1] != "TYPE" {
			continue
		}
		name := fields[2]
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		if !strings.Contains(string(doc), "`"+name+"`") {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/metrics.md does not describe %d served families: %s", len(missing), strings.Join(missing, ", "))
	}
}
