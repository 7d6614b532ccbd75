package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// testedChart is demoChart with two test Pods, "<release>-smoke" and
// "<release>-extra" (excluded by the tests' filters).
func testedChart() map[string]string {
	c := demoChart("1.0.0")
	c["templates/tests.yaml"] = `{{- range $name := list "smoke" "extra" }}
---
apiVersion: v1
kind: Pod
metadata:
  name: {{ $.Release.Name }}-{{ $name }}
  annotations:
    helm.sh/hook: test
spec:
  restartPolicy: Never
  containers:
    - name: check
      image: registry.example/check:1
{{- end }}
`
	return c
}

// finishTestPods plays the kubelet: it waits for each test Pod, in
// whatever order the releases' shard runs them, and writes its phase
// through the status subresource.
func finishTestPods(t *testing.T, ns string, phases map[string]corev1.PodPhase) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := map[string]bool{}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for name, phase := range phases {
			if done[name] {
				continue
			}
			var pod corev1.Pod
			if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod); err != nil {
				if client.IgnoreNotFound(err) != nil {
					return false, err
				}
				continue
			}
			pod.Status.Phase = phase
			if err := cp.Client.Status().Update(ctx, &pod); err != nil {
				return false, err
			}
			done[name] = true
		}
		return len(done) == len(phases), nil
	})
	if err != nil {
		t.Fatalf("test Pods in %s: %v (done: %v)", ns, err, done)
	}
}

// TestHelmReleaseTests runs spec.test after the install of a real chart
// with test Pods, as helm-controller does: the runs in
// status.history[0].testHooks, the TestSuccess condition, the filters; a
// failed test fails the release unless test.ignoreFailures.
func TestHelmReleaseTests(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, testedChart())
	startEngine(t, engine.Options{})
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	filters := []helmv2.Filter{{Name: "pass-extra", Exclude: true}, {Name: "fail-extra", Exclude: true}, {Name: "lax-extra", Exclude: true}}
	pass, fail, lax := helmRelease(ns, "pass", "demo"), helmRelease(ns, "fail", "demo"), helmRelease(ns, "lax", "demo")
	for _, hr := range []*helmv2.HelmRelease{pass, fail, lax} {
		hr.Spec.Test = &helmv2.Test{Enable: true, Filters: &filters}
	}
	lax.Spec.Test.IgnoreFailures = true
	for _, o := range []client.Object{src, pass, fail, lax} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	finishTestPods(t, ns, map[string]corev1.PodPhase{
		"pass-smoke": corev1.PodSucceeded, "fail-smoke": corev1.PodFailed, "lax-smoke": corev1.PodFailed,
	})

	waitFor(t, pass, func() bool {
		return readyIs(pass, true)() && conditions.IsTrue(pass, helmv2.TestSuccessCondition)
	}, "Ready=True and TestSuccess=True")
	if r := conditions.GetReason(pass, helmv2.TestSuccessCondition); r != helmv2.TestSucceededReason {
		t.Fatalf("TestSuccess reason %q", r)
	}
	if msg := conditions.GetMessage(pass, helmv2.TestSuccessCondition); msg != "Helm test succeeded for release "+ns+"/pass.v1 with chart demo@"+
		sourceChartVersion(t, src, "1.0.0")+": 1 test hook completed successfully" {
		t.Fatalf("TestSuccess message %q", msg)
	}
	hooks := pass.Status.History[0].GetTestHooks()
	if len(hooks) != 2 || hooks["pass-smoke"] == nil || hooks["pass-smoke"].Phase != "Succeeded" ||
		hooks["pass-smoke"].LastStarted.IsZero() || hooks["pass-smoke"].LastCompleted.IsZero() ||
		hooks["pass-extra"] == nil || hooks["pass-extra"].Phase != "" {
		t.Fatalf("testHooks %+v", hooks)
	}
	var extra corev1.Pod
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pass-extra"}, &extra); err == nil {
		t.Fatal("the excluded test hook ran")
	}

	waitFor(t, fail, func() bool {
		return readyIs(fail, false)() && conditions.IsFalse(fail, helmv2.TestSuccessCondition)
	}, "Ready=False and TestSuccess=False")
	for _, msg := range []string{conditions.GetMessage(fail, meta.ReadyCondition), conditions.GetMessage(fail, helmv2.TestSuccessCondition)} {
		if !strings.Contains(msg, "fail-smoke") {
			t.Errorf("message %q does not name the failed test hook", msg)
		}
	}
	if fail.Status.InstallFailures != 1 || fail.Status.History[0].GetTestHooks()["fail-smoke"].Phase != "Failed" {
		t.Fatalf("installFailures %d history %+v", fail.Status.InstallFailures, fail.Status.History)
	}

	waitFor(t, lax, func() bool {
		return readyIs(lax, true)() && conditions.IsFalse(lax, helmv2.TestSuccessCondition)
	}, "Ready=True with TestSuccess=False (ignoreFailures)")
	if r := conditions.GetReason(lax, helmv2.TestSuccessCondition); r != helmv2.TestFailedReason || lax.Status.InstallFailures != 0 {
		t.Fatalf("TestSuccess reason %q installFailures %d", r, lax.Status.InstallFailures)
	}
}
