package main

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

var (
	helmRepoGVR  = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmrepositories"}
	generatorGVR = schema.GroupVersionResource{Group: "source.extensions.fluxcd.io", Version: "v1beta1", Resource: "artifactgenerators"}
)

// releasesPrefix names the namespaces of -helmreleases; releasesPerNS
// HelmReleases go to each.
const (
	releasesPrefix = "acceptance-hr-"
	releasesPerNS  = 20
)

// acceptanceChart is a small chart of two ConfigMaps whose data is the
// release's values.
func acceptanceChart() map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: acceptance\nversion: 1.0.0\ndescription: Two ConfigMaps.\n",
		"values.yaml": "index: 0\n",
		"templates/configmaps.yaml": `{{- range $k := list "a" "b" }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $.Release.Name }}-{{ $k }}
  labels:
    app.kubernetes.io/managed-by: {{ $.Release.Service }}
    app.kubernetes.io/instance: {{ $.Release.Name }}
data:
  index: {{ $.Values.index | quote }}
  part: {{ $k }}
{{- end }}
`,
	}
}

// createHelmReleases pushes acceptanceChart as an OCI chart and as a Flux
// artifact, and creates n HelmReleases over namespaces of releasesPerNS,
// each namespace with the three kinds of sources Flux users mix: eight in
// ten releases take the chart from an OCIRepository (chartRef), one from
// a HelmRepository of type oci (spec.chart, so a HelmChart is generated),
// one from an ExternalArtifact an ArtifactGenerator makes of the artifact
// (the chart in a directory of its own, as Cozystack's generators put it:
// helm-controller refuses a chart at the archive's top).
func createHelmReleases(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, reg *testenv.Registry, n int) error {
	chart := acceptanceChart()
	if _, err := reg.PushChart(ctx, "acceptance-charts/acceptance", chart); err != nil {
		return err
	}
	src := map[string]string{}
	for p, c := range chart {
		src["acceptance/"+p] = c
	}
	if _, err := reg.PushArtifact(ctx, "acceptance-src", "v1", src, nil); err != nil {
		return err
	}
	create := func(gvr schema.GroupVersionResource, ns string, obj map[string]any) error {
		u := &unstructured.Unstructured{Object: obj}
		_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s/%s: %w", u.GetKind(), ns, u.GetName(), err)
		}
		return nil
	}
	for first := 0; first < n; first += releasesPerNS {
		ns := fmt.Sprintf("%s%02d", releasesPrefix, first/releasesPerNS)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		meta := func(kind, apiVersion, name string) map[string]any {
			return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name, "namespace": ns}}
		}
		with := func(o map[string]any, spec map[string]any) map[string]any { o["spec"] = spec; return o }
		for _, o := range []struct {
			gvr schema.GroupVersionResource
			obj map[string]any
		}{
			{ociGVR, with(meta("OCIRepository", "source.toolkit.fluxcd.io/v1", "acceptance"), map[string]any{
				"url": "oci://" + reg.Host() + "/acceptance-charts/acceptance", "interval": "10m",
				"ref":           map[string]any{"tag": "1.0.0"},
				"layerSelector": map[string]any{"mediaType": testenv.HelmChartMediaType, "operation": "copy"},
			})},
			{helmRepoGVR, with(meta("HelmRepository", "source.toolkit.fluxcd.io/v1", "acceptance"), map[string]any{
				"type": "oci", "url": "oci://" + reg.Host() + "/acceptance-charts", "interval": "10m",
			})},
			{ociGVR, with(meta("OCIRepository", "source.toolkit.fluxcd.io/v1", "acceptance-src"), map[string]any{
				"url": "oci://" + reg.Host() + "/acceptance-src", "interval": "10m", "ref": map[string]any{"tag": "v1"},
			})},
			{generatorGVR, with(meta("ArtifactGenerator", "source.extensions.fluxcd.io/v1beta1", "acceptance"), map[string]any{
				"sources": []any{map[string]any{"alias": "src", "kind": "OCIRepository", "name": "acceptance-src"}},
				"artifacts": []any{map[string]any{"name": "acceptance-chart",
					"copy": []any{map[string]any{"from": "@src/acceptance/**", "to": "@artifact/acceptance/"}}}},
			})},
		} {
			if err := create(o.gvr, ns, o.obj); err != nil {
				return err
			}
		}
		for i := first; i < min(n, first+releasesPerNS); i++ {
			spec := map[string]any{"interval": "10m", "values": map[string]any{"index": i}}
			switch i % 10 {
			case 8:
				spec["chart"] = map[string]any{"spec": map[string]any{
					"chart": "acceptance", "version": "1.0.0", "interval": "10m",
					"sourceRef": map[string]any{"kind": "HelmRepository", "name": "acceptance"},
				}}
			case 9:
				spec["chartRef"] = map[string]any{"kind": "ExternalArtifact", "name": "acceptance-chart"}
			default:
				spec["chartRef"] = map[string]any{"kind": "OCIRepository", "name": "acceptance"}
			}
			if err := create(hrGVR, ns, with(meta("HelmRelease", "helm.toolkit.fluxcd.io/v2", fmt.Sprintf("app-%d", i)), spec)); err != nil {
				return err
			}
		}
	}
	return nil
}

// acceptanceRelease tells whether a HelmRelease is one of -helmreleases,
// which report() sums up instead of listing.
func acceptanceRelease(u *unstructured.Unstructured) bool {
	return strings.HasPrefix(u.GetNamespace(), releasesPrefix)
}
