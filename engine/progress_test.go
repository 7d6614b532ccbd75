package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cozystack/cozy-aio/engine"
)

// slowChart renders a Deployment that never becomes ready on a control
// plane without a controller-manager, so every install runs until its
// timeout.
func slowChart(version string) map[string]string {
	return map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: demo\nversion: " + version + "\n",
		"templates/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec: {containers: [{name: app, image: registry.invalid/app:1}]}
`,
	}
}

// TestHelmReleaseShowsProgressAndQueue checks what an operator sees while
// releases install: the running action with its timeout, as Flux writes
// it, and for a release waiting behind its tenant's concurrency cap, its
// shard, position and why; then the outcome replaces both.
func TestHelmReleaseShowsProgressAndQueue(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, slowChart("1.0.0"))
	startEngine(t, engine.Options{Shards: 1, ProgressAfter: 500 * time.Millisecond})
	if err := cp.Client.Create(ctx, chartSource(ns, "demo", reg.Host(), "1.0.0")); err != nil {
		t.Fatal(err)
	}
	var hrs []*helmv2.HelmRelease
	for _, name := range []string{"a", "b", "c"} {
		hr := helmRelease(ns, name, "demo")
		hr.Spec.Timeout = &metav1.Duration{Duration: 12 * time.Second}
		if err := cp.Client.Create(ctx, hr); err != nil {
			t.Fatal(err)
		}
		hrs = append(hrs, hr)
	}
	running := func(hr *helmv2.HelmRelease) func() bool {
		return func() bool {
			c := conditions.Get(hr, meta.ReadyCondition)
			return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == meta.ProgressingReason &&
				c.Message == "Running 'install' action with timeout of 12s" &&
				conditions.IsReconciling(hr)
		}
	}
	queued := func(hr *helmv2.HelmRelease) func() bool {
		return func() bool {
			c := conditions.Get(hr, meta.ReadyCondition)
			return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == engine.QueuedReason &&
				strings.Contains(c.Message, "shard 0, position 1") &&
				strings.Contains(c.Message, "tenant "+ns+" is at its concurrency cap of 2") &&
				conditions.GetReason(hr, meta.ReconcilingCondition) == engine.QueuedReason
		}
	}
	// Two run (the tenant's cap is 2), the third waits its turn.
	var first, second, third *helmv2.HelmRelease
	deadline := time.Now().Add(60 * time.Second)
	for first == nil || third == nil {
		if time.Now().After(deadline) {
			t.Fatalf("never saw two releases running and one queued: %+v / %+v / %+v",
				hrs[0].Status.Conditions, hrs[1].Status.Conditions, hrs[2].Status.Conditions)
		}
		first, second, third = nil, nil, nil
		for _, hr := range hrs {
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
				t.Fatal(err)
			}
			switch {
			case running(hr)() && first == nil:
				first = hr
			case running(hr)():
				second = hr
			case queued(hr)():
				third = hr
			}
		}
		if second == nil {
			first = nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The outcome of the action replaces the in-progress status.
	failedInstall := func(hr *helmv2.HelmRelease) func() bool {
		return func() bool {
			return readyIs(hr, false)() && conditions.GetReason(hr, meta.ReadyCondition) != meta.ProgressingReason &&
				conditions.GetReason(hr, meta.ReadyCondition) != engine.QueuedReason &&
				strings.Contains(conditions.GetMessage(hr, meta.ReadyCondition), "install")
		}
	}
	waitFor(t, first, failedInstall(first), "Ready=False after the install timed out")
	if conditions.IsReconciling(first) && conditions.GetReason(first, meta.ReconcilingCondition) == meta.ProgressingReason {
		t.Fatalf("Reconciling still says %q after the action ended", conditions.GetMessage(first, meta.ReconcilingCondition))
	}
	// The queued release runs next and says so.
	waitFor(t, third, running(third), "the queued release running its install")
	waitFor(t, third, failedInstall(third), "Ready=False after its install timed out")
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		m := map[string]any{}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Text())
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		// A line the scanner cannot hold would hide every later one.
		t.Fatalf("reading the log after %d lines: %v", len(out), err)
	}
	return out
}

// TestReconcileLogs reads the log of a real run: one line per outcome with
// Flux's keys, Helm actions' start and end, an error line with the cause,
// and no info line for a reconcile that changed nothing.
func TestReconcileLogs(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	var buf syncBuffer
	// Development mode without its console encoder and debug level: the
	// production logger samples (after 100 lines of one message in a
	// second, one in 100), and "Reconciliation failed" is one message for
	// every object that fails.
	startEngine(t, engine.Options{Logger: zap.New(zap.WriteTo(&buf), zap.UseDevMode(true), zap.JSONEncoder(), zap.Level(zapcore.InfoLevel))})
	good := helmRelease(ns, "good", "demo")
	bad := helmRelease(ns, "bad", "demo")
	bad.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "nowhere"}}
	for _, o := range []client.Object{chartSource(ns, "demo", reg.Host(), "1.0.0"), good, bad} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, good, readyIs(good, true), "Ready=True")
	waitFor(t, bad, func() bool {
		return readyIs(bad, false)() && strings.Contains(conditions.GetMessage(bad, meta.ReadyCondition), "nowhere")
	}, "Ready=False naming the missing ConfigMap")

	of := func(name, msg string) []map[string]any {
		var out []map[string]any
		for _, l := range buf.lines(t) {
			if l["name"] == name && l["namespace"] == ns && (msg == "" || strings.Contains(l["msg"].(string), msg)) {
				out = append(out, l)
			}
		}
		return out
	}
	outcome := of("good", "Helm install succeeded")
	if len(outcome) != 1 {
		t.Fatalf("want one outcome line for the install, got %v", outcome)
	}
	l := outcome[0]
	for _, k := range []string{"controller", "controllerKind", "reconcileID", "revision", "duration"} {
		if l[k] == nil || l[k] == "" {
			t.Errorf("outcome line lacks %q: %v", k, l)
		}
	}
	if l["level"] != "info" || l["controller"] != "helmrelease" || l["controllerKind"] != "HelmRelease" ||
		// status.lastAttemptedRevision: the chart version as installed,
		// with the OCI artifact's digest, as helm-controller records it.
		!regexp.MustCompile(`^1\.0\.0\+[0-9a-f]{12}$`).MatchString(l["revision"].(string)) {
		t.Errorf("outcome line = %v", l)
	}
	if len(of("good", "Helm action started")) != 1 || len(of("good", "Helm action finished")) != 1 {
		t.Errorf("want the install's start and end logged once each: %v", of("good", "Helm action"))
	}
	// The outcome is logged right after the status is written: wait for it.
	var failure map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for failure == nil && time.Now().Before(deadline) {
		for _, l := range of("bad", "") {
			if e, _ := l["error"].(string); l["level"] == "error" && strings.Contains(e, "ConfigMap "+ns+"/nowhere") {
				failure = l
			}
		}
		if failure == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if failure == nil || failure["reconcileID"] == nil {
		t.Fatalf("no error line naming the cause for the failing release: %v", of("bad", ""))
	}
	// The source's outcome is logged by its own controller's reconcile.
	if src := of("demo", "stored artifact"); len(src) == 0 || src[0]["controller"] != "ocirepository" || src[0]["reconcileID"] == nil {
		t.Errorf("source outcome lines = %v", of("demo", ""))
	}

	// A reconcile that changes nothing logs nothing at info.
	before := len(of("good", ""))
	requestReconcile(t, good)
	token := good.Annotations[meta.ReconcileRequestAnnotation]
	waitFor(t, good, func() bool { return good.Status.LastHandledReconcileAt == token }, "lastHandledReconcileAt = requestedAt")
	time.Sleep(200 * time.Millisecond)
	if after := of("good", ""); len(after) != before {
		t.Errorf("a no-op reconcile logged at info: %v", after[before:])
	}
}
