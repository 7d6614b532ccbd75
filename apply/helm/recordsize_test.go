package helm_test

import (
	"errors"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// TestReleaseRecordTooLargeToRead writes a release record that inflates
// to 500 MiB (a 650 KB Secret, as in issue #46, where the engine grew to
// 2 GB and then reported "another holder has taken over"): reconciling
// its release fails with an error naming the Secret and the limit, reads
// no more than the limit, writes nothing, and leaves the Manager serving
// other releases.
func TestReleaseRecordTooLargeToRead(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	key := "sh.helm.release.v1.big.v1"
	bomb := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key,
			Labels: map[string]string{"owner": "helm", "name": "big", "status": "deployed", "version": "1"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": helm.RecordBomb("big", ns, 1, 500<<20)},
	}
	if err := cp.Client.Create(ctx, bomb); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, helm.Options{})
	o := helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo")}}
	for range 2 { // and again: the answer stays the same
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, err := m.Reconcile(ctx, helm.Release{Name: "big", Namespace: ns}, o, helm.State{})
		runtime.ReadMemStats(&after)
		var tooLarge *helm.RecordTooLargeError
		if !errors.As(err, &tooLarge) || errors.Is(err, helm.ErrRecordConflict) {
			t.Fatalf("reconciling a release whose record inflates to 500 MiB: %v, want a *RecordTooLargeError", err)
		}
		mustContain(t, err, "helm reconcile "+ns+"/big", "release record Secret "+ns+"/"+key,
			"decompresses past 67108864 bytes", "MaxReleaseRecordBytes")
		if len(out.Steps) != 0 || out.Release.Revision != 0 || out.Next.Kind != helm.NextRetry {
			t.Fatalf("outcome %+v", out)
		}
		// The record is inflated once per call, into one buffer of the
		// limit's size.
		alloc := after.TotalAlloc - before.TotalAlloc
		if alloc > 2*helm.DefaultMaxReleaseRecordBytes {
			t.Fatalf("the reconcile allocated %d MiB, want at most twice the limit (%d MiB)", alloc>>20, 2*helm.DefaultMaxReleaseRecordBytes>>20)
		}
		t.Logf("allocated %d MiB: %v", alloc>>20, err)
	}
	recs := releaseSecrets(t, ns, "big")
	if len(recs) != 1 || recs["1"].ResourceVersion == "" || recs["1"].Labels["status"] != "deployed" {
		t.Fatalf("records of big after the reconciles: %v", recs)
	}
	if got := recs["1"]; got.ResourceVersion != bomb.ResourceVersion {
		t.Fatalf("the record was written: resourceVersion %s, was %s", got.ResourceVersion, bomb.ResourceVersion)
	}
	// Nothing else stalled: another release of the namespace installs.
	out, err := m.Reconcile(ctx, helm.Release{Name: "small", Namespace: ns}, o, helm.State{})
	if err != nil || out.Release.Status != "deployed" {
		t.Fatalf("another release after the too-large one: %+v %v", out.Release, err)
	}
}
