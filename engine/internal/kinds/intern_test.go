package kinds

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"
)

// benchHelmRelease is a HelmRelease as make bench-scale leaves it: Ready,
// one revision deployed, tenant i/5.
func benchHelmRelease(i int) []byte {
	ns := fmt.Sprintf("tenant-%d", i/5)
	name := fmt.Sprintf("app-%d", i%5)
	now := metav1.NewTime(time.Date(2026, 12, 4, 12, 0, i%60, 0, time.UTC))
	digest := "sha256:1ed03ee1ffef7403fc61f038201f0bbaea3fb7bedfbfed84d13bd8d5b525d234"
	config := "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	hr := &helmv2.HelmRelease{
		TypeMeta: metav1.TypeMeta{APIVersion: helmv2.GroupVersion.String(), Kind: helmv2.HelmReleaseKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID(fmt.Sprintf("8c1d5a3e-0000-4000-8000-%012d", i)),
			ResourceVersion: fmt.Sprint(100000 + i), Generation: 1, CreationTimestamp: now,
			Labels:     map[string]string{"tenant": ns},
			Finalizers: []string{"finalizers.fluxcd.io"},
		},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "demo", Namespace: "charts"},
		},
		Status: helmv2.HelmReleaseStatus{
			ObservedGeneration: 1,
			Conditions: []metav1.Condition{
				{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: now, Reason: helmv2.InstallSucceededReason,
					Message: fmt.Sprintf("Helm install succeeded for release %s/%s.v1 with chart demo@1.0.0", ns, name)},
				{Type: helmv2.ReleasedCondition, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: now, Reason: helmv2.InstallSucceededReason,
					Message: fmt.Sprintf("Helm install succeeded for release %s/%s.v1 with chart demo@1.0.0", ns, name)},
			},
			History: helmv2.Snapshots{{
				Name: name, Namespace: ns, Version: 1, Status: "deployed", ChartName: "demo", ChartVersion: "1.0.0",
				ConfigDigest: config, Digest: config, FirstDeployed: now, LastDeployed: now,
			}},
			LastAttemptedGeneration: 1, LastAttemptedRevision: "1.0.0@" + digest, LastAttemptedRevisionDigest: digest,
			LastAttemptedConfigDigest: config, LastAttemptedReleaseAction: helmv2.ReleaseActionInstall,
			StorageNamespace: ns, LastReleaseRevision: 1,
		},
	}
	b, err := json.Marshal(hr)
	if err != nil {
		panic(err)
	}
	return b
}

// benchHelmChart is the HelmChart of benchHelmRelease(i) had it named its
// chart by spec.chart from a HelmRepository, as the engine leaves it Ready.
func benchHelmChart(i int) []byte {
	ns := fmt.Sprintf("tenant-%d", i/5)
	name := fmt.Sprintf("%s-app-%d", ns, i%5)
	now := metav1.NewTime(time.Date(2026, 12, 4, 12, 0, i%60, 0, time.UTC))
	c := &sourcev1.HelmChart{
		TypeMeta: metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.HelmChartKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "flux-system", UID: types.UID(fmt.Sprintf("9c1d5a3e-0000-4000-8000-%012d", i)),
			ResourceVersion: fmt.Sprint(200000 + i), Generation: 1, CreationTimestamp: now,
			Finalizers: []string{"finalizers.fluxcd.io"},
		},
		Spec: sourcev1.HelmChartSpec{
			Chart: "demo", Version: "*", ReconcileStrategy: sourcev1.ReconcileStrategyChartVersion,
			SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"},
			Interval:  metav1.Duration{Duration: time.Hour},
		},
		Status: sourcev1.HelmChartStatus{
			ObservedGeneration: 1, ObservedChartName: "demo", ObservedSourceArtifactRevision: "sha256:5e1b3c4f0a4d6f8b2c9e7a1d3f5b7c9e1a3d5f7b9c1e3a5d7f9b1c3e5a7d9f1b",
			Conditions: []metav1.Condition{
				{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: now, Reason: meta.SucceededReason,
					Message: "pulled 'demo' chart with version '1.0.0'"},
				{Type: sourcev1.ArtifactInStorageCondition, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: now, Reason: meta.SucceededReason,
					Message: "pulled 'demo' chart with version '1.0.0'"},
			},
			URL: fmt.Sprintf("http://127.0.0.1:9090/helmchart/flux-system/%s/latest.tar.gz", name),
			Artifact: &meta.Artifact{
				Path: fmt.Sprintf("helmchart/flux-system/%s/demo-1.0.0.tgz", name), URL: fmt.Sprintf("http://127.0.0.1:9090/helmchart/flux-system/%s/demo-1.0.0.tgz", name),
				Revision: "1.0.0", Digest: "sha256:1ed03ee1ffef7403fc61f038201f0bbaea3fb7bedfbfed84d13bd8d5b525d234", LastUpdateTime: now,
			},
		},
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return b
}

// TestInternedCacheHeap measures what the cache holds for 10,000
// HelmReleases as make bench-scale leaves them, and for as many HelmCharts,
// decoded as client-go decodes a watch event, with and without interning.
// It asserts only that interning keeps every field's value and holds less.
func TestInternedCacheHeap(t *testing.T) {
	const n = 10000
	for _, kind := range []struct {
		name   string
		raw    func(int) []byte
		newObj func() any
	}{
		{"HelmRelease", benchHelmRelease, func() any { return &helmv2.HelmRelease{} }},
		{"HelmChart", benchHelmChart, func() any { return &sourcev1.HelmChart{} }},
	} {
		// Decoded as client-go decodes, then, when interning, through the
		// cache's own transform.
		decode := func(b []byte, in *interner) (any, error) {
			o := kind.newObj()
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, o); err != nil || in == nil {
				return o, err
			}
			return cacheTransform(in)(o)
		}
		raw := make([][]byte, n)
		for i := range raw {
			raw[i] = kind.raw(i)
		}
		// Each variant is measured from the same state: the objects of
		// the one before are dropped first.
		measure := func(in *interner) float64 {
			internSink = nil
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			internSink = make([]any, n)
			for i, b := range raw {
				o, err := decode(b, in)
				if err != nil {
					t.Fatal(err)
				}
				internSink[i] = o
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			return float64(after.HeapAlloc-before.HeapAlloc) / n
		}
		measure(nil) // the decoder's own caches, once
		plain := measure(nil)
		wantJSON := make([]string, n)
		for i, o := range internSink {
			b, _ := json.Marshal(o)
			wantJSON[i] = string(b)
		}
		interned := measure(&interner{})
		for i, o := range internSink {
			if b, _ := json.Marshal(o); string(b) != wantJSON[i] {
				t.Fatalf("%s %d changed by interning:\n%s\n%s", kind.name, i, wantJSON[i], b)
			}
		}
		internSink = nil
		runtime.KeepAlive(raw) // alive while every variant is measured
		t.Logf("heap per cached %s: %.0f B decoded, %.0f B interned (%.0f B less)", kind.name, plain, interned, plain-interned)
		if interned >= plain {
			t.Fatalf("%s: interning holds %.0f B per object, decoding alone %.0f B", kind.name, interned, plain)
		}
	}
}

// internSink keeps the measured objects alive.
var internSink []any

// TestCacheTransform: the engine's cache transform strips managedFields
// from every object and makes two HelmReleases, or two HelmCharts, share
// their common strings.
func TestCacheTransform(t *testing.T) {
	tr := cacheTransform(&interner{})
	var objs []*helmv2.HelmRelease
	for _, i := range []int{0, 1, 5} { // 0 and 1 share a namespace, 0 and 5 a name
		hr := &helmv2.HelmRelease{}
		if err := json.Unmarshal(benchHelmRelease(i), hr); err != nil {
			t.Fatal(err)
		}
		hr.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "cozy-aio"}}
		// Go 1.27's encoding/json may already share equal short strings it
		// decodes; start from distinct names so that only the transform
		// could make them one.
		hr.Name = strings.Clone(hr.Name)
		out, err := tr(hr)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, out.(*helmv2.HelmRelease))
	}
	a, b, c := objs[0], objs[1], objs[2]
	if a.ManagedFields != nil || b.ManagedFields != nil {
		t.Fatal("managedFields kept")
	}
	if a.Namespace != b.Namespace || unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Fatalf("namespaces %q and %q are not one string", a.Namespace, b.Namespace)
	}
	if x, y := a.Status.LastAttemptedRevision, b.Status.LastAttemptedRevision; unsafe.StringData(x) != unsafe.StringData(y) {
		t.Fatal("the chart revision is not shared")
	}
	var charts []*sourcev1.HelmChart
	for i := range 2 {
		hc := &sourcev1.HelmChart{}
		if err := json.Unmarshal(benchHelmChart(i), hc); err != nil {
			t.Fatal(err)
		}
		out, err := tr(hc)
		if err != nil {
			t.Fatal(err)
		}
		charts = append(charts, out.(*sourcev1.HelmChart))
	}
	if x, y := charts[0].Status.Artifact.Digest, charts[1].Status.Artifact.Digest; unsafe.StringData(x) != unsafe.StringData(y) {
		t.Fatal("the HelmCharts' artifact digest is not shared")
	}
	if a.Name != c.Name || unsafe.StringData(a.Name) == unsafe.StringData(c.Name) {
		t.Fatalf("names %q and %q are one string: names are interned, though most are a release's own", a.Name, c.Name)
	}
}

// TestCacheTransformTakesEveryChartTemplate: the transform runs in the
// informers, where a panic ends the process, on every HelmRelease the API
// server holds: a chart template of kind OCIRepository (Flux 2.10) has no
// sourceRef (it crashed the engine before).
func TestCacheTransformTakesEveryChartTemplate(t *testing.T) {
	tr := cacheTransform(&interner{})
	for _, tpl := range []*helmv2.HelmChartTemplate{
		{Kind: sourcev1.OCIRepositoryKind, Spec: helmv2.HelmChartTemplateSpec{OCIRepositorySpec: sourcev1.OCIRepositorySpec{URL: "oci://registry.example.org/charts/demo"}}},
		{},
	} {
		hr := &helmv2.HelmRelease{Spec: helmv2.HelmReleaseSpec{Chart: tpl}}
		out, err := tr(hr)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.(*helmv2.HelmRelease).Spec.Chart.Spec.URL; got != tpl.Spec.URL {
			t.Fatalf("url %q, want %q", got, tpl.Spec.URL)
		}
	}
}

// FuzzCacheTransform: whatever a HelmRelease, HelmChart or Kustomization
// decodes to, the transform neither panics nor fails.
func FuzzCacheTransform(f *testing.F) {
	f.Add([]byte(`{"spec":{"chart":{"kind":"OCIRepository","spec":{"url":"oci://x/y"}}}}`))
	f.Add(benchHelmRelease(0))
	f.Add(benchHelmChart(0))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr := cacheTransform(&interner{})
		for _, o := range []client.Object{&helmv2.HelmRelease{}, &sourcev1.HelmChart{}, &kustomizev1.Kustomization{}} {
			if json.Unmarshal(b, o) != nil {
				continue
			}
			if _, err := tr(o); err != nil {
				t.Fatal(err)
			}
		}
	})
}
