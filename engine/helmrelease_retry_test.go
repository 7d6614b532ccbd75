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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// TestHelmReleaseRetryBacksOff checks Flux's retry of a failed
// HelmRelease: helm-controller returns the failure to its workqueue, which
// retries with an exponential backoff from 750 ms. A release with an
// interval of an hour whose values ConfigMap is missing installs within
// seconds of the ConfigMap appearing (nothing watches it: without the
// backoff it would wait the hour).
func TestHelmReleaseRetryBacksOff(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	hr := helmRelease(ns, "app", "demo")
	hr.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "later"}}
	for _, o := range []client.Object{chartSource(ns, "demo", reg.Host(), "1.0.0"), hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, func() bool {
		return conditions.IsFalse(hr, meta.ReadyCondition) && strings.Contains(conditions.GetMessage(hr, meta.ReadyCondition), "later")
	}, "Ready=False naming the missing ConfigMap")
	if conditions.IsStalled(hr) {
		t.Fatalf("a missing values ConfigMap is not a stalled release: %+v", hr.Status.Conditions)
	}
	if err := cp.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: ns},
		Data:       map[string]string{"values.yaml": "color: blue\n"},
	}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, hr, readyIs(hr, true), "Ready=True after the ConfigMap appeared")
	t.Logf("Ready %.1fs after the ConfigMap appeared", time.Since(start).Seconds())
	if hr.Status.LastAttemptedConfigDigest == "" || len(hr.Status.History) != 1 {
		t.Fatalf("one install expected: history %d, lastAttemptedConfigDigest %q", len(hr.Status.History), hr.Status.LastAttemptedConfigDigest)
	}
}
