// Package switchover is the workload that Flux's controllers and cozy-aio
// take over from each other (examples/cozystack's -helmreleases and
// -kustomizations, `make switch-over`), and the fixtures recorded from a
// Flux run of it that `make test` takes over without Flux
// (engine's TestTakeOverFromFluxFixtures).
//
// Everything it pushes is pushed with a fixed creation time, so that the
// same files give the same OCI digests, hence the same chart versions
// (<version>+<digest>) and revisions, in every run: a fixture recorded in
// one run describes the sources of another.
package switchover

import (
	"context"
	"fmt"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

// Names of the workload.
const (
	// AppsNamespace holds the Kustomizations and what they apply.
	AppsNamespace = "acceptance-apps"
	// ReleasesPrefix names the namespaces of the HelmReleases, each with
	// ReleasesPerNS of them.
	ReleasesPrefix = "acceptance-hr-"
	ReleasesPerNS  = 20
)

// Created is the manifest annotation every push carries.
var Created = map[string]string{ocispec.AnnotationCreated: "2026-01-01T00:00:00Z"}

// Chart is a small chart of two ConfigMaps whose data is the release's
// values.
func Chart() map[string]string {
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

// AppFiles are the manifests of n applications, one directory each, of
// the kinds a platform's Kustomizations apply: ConfigMaps, a
// ServiceAccount, a Role and its RoleBinding, a Service and a Deployment.
func AppFiles(n int) map[string]string {
	files := map[string]string{}
	ns := AppsNamespace
	for i := range n {
		app := fmt.Sprintf("app-%d", i)
		var b strings.Builder
		for j := range 3 {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s-config-%d, namespace: %s}\ndata: {index: %q, app: %s}\n", app, j, ns, fmt.Sprint(j), app)
		}
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: %s, namespace: %s}\n", app, ns)
		fmt.Fprintf(&b, "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: %s, namespace: %s}\nrules: [{apiGroups: [\"\"], resources: [configmaps], verbs: [get, list, watch]}]\n", app, ns)
		fmt.Fprintf(&b, "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: %s, namespace: %s}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %s}\nsubjects: [{kind: ServiceAccount, name: %s, namespace: %s}]\n", app, ns, app, app, ns)
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: %s}\nspec: {selector: {app: %s}, ports: [{port: 80, targetPort: 8080}]}\n", app, ns, app)
		fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s, namespace: %s}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: %s}}\n  template:\n    metadata: {labels: {app: %s}}\n    spec:\n      serviceAccountName: %s\n      containers: [{name: app, image: registry.example.org/%s:1.0.0, ports: [{containerPort: 8080}]}]\n", app, ns, app, app, app, app)
		files[app+"/manifests.yaml"] = b.String()
	}
	return files
}

// Push pushes the chart (as an OCI chart and inside a Flux artifact) and
// the manifests of apps applications, and returns the manifests' digest.
func Push(ctx context.Context, reg *testenv.Registry, apps int) (string, error) {
	chart := Chart()
	if _, err := reg.PushChartAnnotated(ctx, "acceptance-charts/acceptance", chart, Created); err != nil {
		return "", err
	}
	src := map[string]string{}
	for p, c := range chart {
		src["acceptance/"+p] = c
	}
	if _, err := reg.PushArtifact(ctx, "acceptance-src", "v1", src, Created); err != nil {
		return "", err
	}
	desc, err := reg.PushArtifact(ctx, "acceptance-apps", "v1", AppFiles(max(apps, 1)), Created)
	if err != nil {
		return "", err
	}
	return desc.Digest.String(), nil
}

// Options shape the sources for a registry.
type Options struct {
	// Host is the registry's host:port.
	Host string
	// Insecure reaches it over plain HTTP.
	Insecure bool
	// AppsDigest pins the manifests' artifact (Push's result).
	AppsDigest string
}

func object(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
}

func (o Options) source(spec map[string]any) map[string]any {
	if o.Insecure {
		spec["insecure"] = true
	}
	return spec
}

// Sources are the sources of one namespace of HelmReleases: an
// OCIRepository of the chart, a HelmRepository of type oci, and an
// ArtifactGenerator whose ExternalArtifact acceptance-chart holds the
// chart in a directory of its own, as Cozystack's generators put it
// (helm-controller refuses a chart at the archive's top).
func (o Options) Sources(ns string) []*unstructured.Unstructured {
	return []*unstructured.Unstructured{
		object("source.toolkit.fluxcd.io/v1", "OCIRepository", ns, "acceptance", o.source(map[string]any{
			"url": "oci://" + o.Host + "/acceptance-charts/acceptance", "interval": "10m",
			"ref":           map[string]any{"tag": "1.0.0"},
			"layerSelector": map[string]any{"mediaType": testenv.HelmChartMediaType, "operation": "copy"},
		})),
		object("source.toolkit.fluxcd.io/v1", "HelmRepository", ns, "acceptance", o.source(map[string]any{
			"type": "oci", "url": "oci://" + o.Host + "/acceptance-charts", "interval": "10m",
		})),
		object("source.toolkit.fluxcd.io/v1", "OCIRepository", ns, "acceptance-src", o.source(map[string]any{
			"url": "oci://" + o.Host + "/acceptance-src", "interval": "10m", "ref": map[string]any{"tag": "v1"},
		})),
		object("source.extensions.fluxcd.io/v1beta1", "ArtifactGenerator", ns, "acceptance", map[string]any{
			"sources": []any{map[string]any{"alias": "src", "kind": "OCIRepository", "name": "acceptance-src"}},
			"artifacts": []any{map[string]any{"name": "acceptance-chart",
				"copy": []any{map[string]any{"from": "@src/acceptance/**", "to": "@artifact/acceptance/"}}}},
		}),
	}
}

// HelmRelease is release i, in namespace ns: eight in ten take the chart
// from the OCIRepository (chartRef), one from the HelmRepository
// (spec.chart, so a HelmChart is generated), one from the ExternalArtifact.
func HelmRelease(ns string, i int) *unstructured.Unstructured {
	spec := map[string]any{"interval": "10m", "values": map[string]any{"index": int64(i)}}
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
	return object("helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, fmt.Sprintf("app-%d", i), spec)
}

// AppsSource is the OCIRepository of the manifests.
func (o Options) AppsSource() *unstructured.Unstructured {
	return object("source.toolkit.fluxcd.io/v1", "OCIRepository", AppsNamespace, "acceptance-apps", o.source(map[string]any{
		"url": "oci://" + o.Host + "/acceptance-apps", "interval": "10m", "ref": map[string]any{"digest": o.AppsDigest},
	}))
}

// Kustomization applies application i with prune.
func Kustomization(i int) *unstructured.Unstructured {
	return object("kustomize.toolkit.fluxcd.io/v1", "Kustomization", AppsNamespace, fmt.Sprintf("app-%d", i), map[string]any{
		"interval": "10m", "prune": true, "path": fmt.Sprintf("./app-%d", i), "timeout": "2m",
		"sourceRef": map[string]any{"kind": "OCIRepository", "name": "acceptance-apps"},
	})
}

// NamespaceOf is the namespace of HelmRelease i.
func NamespaceOf(i int) string {
	return fmt.Sprintf("%s%02d", ReleasesPrefix, i/ReleasesPerNS)
}

// Create creates the workload: releases HelmReleases over namespaces of
// ReleasesPerNS with their sources, and kustomizations Kustomizations with
// theirs. Objects that exist are left as they are.
func Create(ctx context.Context, c client.Client, o Options, releases, kustomizations int) error {
	var objs []*unstructured.Unstructured
	if kustomizations > 0 {
		objs = append(objs, o.AppsSource())
		for i := range kustomizations {
			objs = append(objs, Kustomization(i))
		}
	}
	for i := range releases {
		ns := NamespaceOf(i)
		if i%ReleasesPerNS == 0 {
			objs = append(objs, o.Sources(ns)...)
		}
		objs = append(objs, HelmRelease(ns, i))
	}
	namespaces := map[string]bool{}
	for _, u := range objs {
		if ns := u.GetNamespace(); !namespaces[ns] {
			namespaces[ns] = true
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}
