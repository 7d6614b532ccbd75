package engine_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// TestHelmReleaseLongNameIsShortenedAsHelmController: a release name
// longer than Helm's 53 characters (here <targetNamespace>-<name>) is
// installed under the name helm-controller gives it, its first 40
// characters, a dash and 12 hex digits of its SHA-256, so both engines
// find the same release; Helm would refuse the long one.
func TestHelmReleaseLongNameIsShortenedAsHelmController(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	hr := helmRelease(ns, "a-release-whose-name-is-long-enough-to-be-shortened", "demo")
	hr.Spec.TargetNamespace = ns
	long := ns + "-" + hr.Name
	short := fmt.Sprintf("%s-%x", long[:40], sha256.Sum256([]byte(long)))[:53]
	createObjects(t, chartSource(ns, "demo", reg.Host(), "1.0.0"), hr)
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	if len(hr.Status.History) != 1 || hr.Status.History[0].Name != short {
		t.Fatalf("history %+v, want the release %s", hr.Status.History, short)
	}
	var secrets corev1.SecretList
	if err := cp.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": short}); err != nil || len(secrets.Items) != 1 {
		t.Fatalf("release Secrets of %s: %d (%v)", short, len(secrets.Items), err)
	}
	if !exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: short + "-settings", Namespace: ns}}) {
		t.Fatalf("the chart did not render with the release name %s", short)
	}
}
