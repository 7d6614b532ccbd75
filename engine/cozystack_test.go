package engine_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// This file builds a platform shaped as Cozystack delivers itself, with
// small charts of its own, and checks that every release installs once,
// as helm-controller and source-watcher would install it. The shapes come
// from cozystack/cozystack:
//
//   - cmd/cozystack-operator/main.go: the OCIRepository cozystack-platform
//     (interval 5m) and the PackageSource cozystack.cozystack-platform
//     (skip-cozystack-values) whose chart, core/platform, renders the
//     OCIRepository cozystack-packages from a lookup of cozystack-platform
//     (packages/core/platform/templates/repository.yaml);
//   - internal/operator/packagesource_reconciler.go: one ArtifactGenerator
//     per PackageSource, the source alias its sourceRef name, per
//     component an output copying @<alias>/<path>/** to
//     @artifact/<last path element>/, its libraries to charts/<library>/,
//     and its valuesFiles onto values.yaml (the first Overwrite, the
//     others Merge); the artifact named <source>-<variant>-<component>,
//     dots made dashes (the packages tree is pushed with --path=packages
//     and sourceRef.path "/", so there is no packages/ prefix);
//   - internal/operator/package_reconciler.go: per installed component a
//     HelmRelease with chartRef ExternalArtifact in cozy-system, interval
//     5m, maxHistory 5, install/upgrade timeouts 10m and RetryOnFailure
//     (retryInterval 30s), upgrade.crds from upgradeCRDs, valuesFrom the
//     Secret cozystack-values, and dependsOn its variant's components and
//     every installed component of the variants it depends on;
//   - pkg/registry/apps/application/rest.go: the HelmReleases of the
//     tenants' applications, the same spec with the application as values;
//   - packages/apps/kubernetes/templates/helmreleases: the HelmReleases a
//     Kubernetes application renders for its cluster's addons (without
//     their kubeConfig: the test's "tenant cluster" is a namespace).
//
// envtest runs no controllers and no kubelet, so the charts hold only
// objects that are Current as soon as they exist.

// platformGroup is the suffix of the API groups of every CRD the
// platform's charts ship; the test deletes them when it ends.
const platformGroup = "platform.cozy-aio.io"

// The cozystack-operator defaults (its --helmrelease-* flags).
const (
	cozyInterval      = 5 * time.Minute
	cozyRetryInterval = 30 * time.Second
	cozyTimeout       = 10 * time.Minute
	cozyMaxHistory    = 5
)

// cozyNamespaces are the namespaces the platform installs into;
// "tenant-root-cluster" stands for the tenant Kubernetes cluster the
// kubernetes application's addons go to.
var cozyNamespaces = []string{
	"cozy-system", "cozy-gateway-api", "cozy-cilium", "cozy-kilo", "cozy-cert-manager",
	"cozy-kubeovn", "cozy-etcd-operator", "cozy-victoria-metrics-operator",
	"cozy-grafana-operator", "cozy-monitoring", "tenant-root", "tenant-root-cluster",
}

// packageSource is the part of a Cozystack PackageSource, with the one
// variant its Package selects, that cozystack-operator turns into an
// ArtifactGenerator and HelmReleases.
type packageSource struct {
	name, variant string
	dependsOn     []string          // PackageSources
	libraries     map[string]string // library name → path
	skipValues    bool              // operator.cozystack.io/skip-cozystack-values
	components    []cozyComponent
}

type cozyComponent struct {
	name, path  string
	libraries   []string
	valuesFiles []string
	install     *cozyInstall // nil: an artifact only
}

type cozyInstall struct {
	namespace, releaseName string
	dependsOn              []string // components of the same variant
	upgradeCRDs            helmv2.CRDsPolicy
}

var cozyLib = map[string]string{"cozy-lib": "library/cozy-lib"}

func installIn(ns, release string, dependsOn ...string) *cozyInstall {
	return &cozyInstall{namespace: ns, releaseName: release, dependsOn: dependsOn}
}

func withCRDUpgrades(i *cozyInstall) *cozyInstall {
	i.upgradeCRDs = helmv2.CreateReplace
	return i
}

// cozyPlatformSource is the PackageSource cozystack-operator creates for
// the platform chart itself (installPlatformPackageSource).
var cozyPlatformSource = packageSource{
	name: "cozystack.cozystack-platform", variant: "isp-full", skipValues: true,
	components: []cozyComponent{{name: "platform", path: "core/platform",
		valuesFiles: []string{"values.yaml", "values-isp-full.yaml"},
		install:     installIn("cozy-system", "cozystack-platform")}},
}

// cozyPackageSources are the PackageSources the platform chart renders,
// cut down from packages/core/platform/sources.
func cozyPackageSources() []packageSource {
	return []packageSource{
		{name: "cozystack.gateway-api-crds", variant: "default", components: []cozyComponent{
			{name: "gateway-api-crds", path: "system/gateway-api-crds", install: installIn("cozy-gateway-api", "gateway-api-crds")}}},
		{name: "cozystack.networking", variant: "cilium-kilo", dependsOn: []string{"cozystack.gateway-api-crds"}, components: []cozyComponent{
			{name: "cilium", path: "system/cilium", valuesFiles: []string{"values.yaml", "values-talos.yaml", "values-kilo.yaml"},
				install: installIn("cozy-cilium", "cilium")},
			{name: "kilo", path: "system/kilo", valuesFiles: []string{"values.yaml", "values-cilium.yaml"},
				install: installIn("cozy-kilo", "kilo")}}},
		{name: "cozystack.cert-manager", variant: "default", dependsOn: []string{"cozystack.networking", "cozystack.gateway-api-crds"}, components: []cozyComponent{
			{name: "cert-manager-crds", path: "system/cert-manager-crds", install: installIn("cozy-cert-manager", "cert-manager-crds")},
			{name: "cert-manager", path: "system/cert-manager", install: installIn("cozy-cert-manager", "cert-manager", "cert-manager-crds")},
			{name: "cert-manager-issuers", path: "system/cert-manager-issuers", install: installIn("cozy-cert-manager", "cert-manager-issuers", "cert-manager")}}},
		{name: "cozystack.kubeovn-webhook", variant: "default", dependsOn: []string{"cozystack.cert-manager"}, components: []cozyComponent{
			{name: "kubeovn-webhook", path: "system/kubeovn-webhook", install: installIn("cozy-kubeovn", "kubeovn-webhook")}}},
		{name: "cozystack.cozystack-engine", variant: "default", dependsOn: []string{"cozystack.networking"}, components: []cozyComponent{
			{name: "cozystack-engine", path: "system/cozystack-engine", install: withCRDUpgrades(installIn("cozy-system", "cozystack-engine"))}}},
		{name: "cozystack.cozystack-basics", variant: "default", dependsOn: []string{"cozystack.cozystack-engine", "cozystack.gateway-api-crds"}, components: []cozyComponent{
			{name: "cozystack-basics", path: "system/cozystack-basics", install: installIn("cozy-system", "cozystack-basics")}}},
		{name: "cozystack.etcd-operator", variant: "default", dependsOn: []string{"cozystack.networking", "cozystack.cert-manager"}, components: []cozyComponent{
			{name: "etcd-operator-crds", path: "system/etcd-operator-crds", install: withCRDUpgrades(installIn("cozy-etcd-operator", "etcd-operator-crds"))},
			{name: "etcd-operator", path: "system/etcd-operator", install: installIn("cozy-etcd-operator", "etcd-operator", "etcd-operator-crds")}}},
		{name: "cozystack.victoria-metrics-operator", variant: "default", dependsOn: []string{"cozystack.networking", "cozystack.cert-manager"}, components: []cozyComponent{
			{name: "victoria-metrics-operator", path: "system/victoria-metrics-operator", valuesFiles: []string{"values.yaml", "values-cozy.yaml"},
				install: withCRDUpgrades(installIn("cozy-victoria-metrics-operator", "victoria-metrics-operator"))}}},
		{name: "cozystack.grafana-operator", variant: "default", dependsOn: []string{"cozystack.networking"}, components: []cozyComponent{
			{name: "grafana-operator", path: "system/grafana-operator", install: withCRDUpgrades(installIn("cozy-grafana-operator", "grafana-operator"))}}},
		{name: "cozystack.monitoring", variant: "default", skipValues: true, libraries: cozyLib,
			dependsOn: []string{"cozystack.networking", "cozystack.grafana-operator", "cozystack.victoria-metrics-operator"}, components: []cozyComponent{
				{name: "monitoring", path: "system/monitoring", libraries: []string{"cozy-lib"}, install: installIn("cozy-monitoring", "monitoring")},
				{name: "victoria-metrics-operator", path: "system/victoria-metrics-operator"}}},
		{name: "cozystack.monitoring-application", variant: "default", libraries: cozyLib,
			dependsOn: []string{"cozystack.networking", "cozystack.grafana-operator", "cozystack.victoria-metrics-operator", "cozystack.cozystack-engine"}, components: []cozyComponent{
				{name: "monitoring", path: "extra/monitoring", libraries: []string{"cozy-lib"}},
				{name: "monitoring-rd", path: "system/monitoring-rd", install: installIn("cozy-system", "monitoring-rd")}}},
		{name: "cozystack.etcd-application", variant: "default", libraries: cozyLib,
			dependsOn: []string{"cozystack.etcd-operator", "cozystack.cozystack-engine"}, components: []cozyComponent{
				{name: "etcd", path: "apps/etcd", libraries: []string{"cozy-lib"}},
				{name: "etcd-rd", path: "system/etcd-rd", install: installIn("cozy-system", "etcd-rd")}}},
		{name: "cozystack.ingress-application", variant: "default", libraries: cozyLib,
			dependsOn: []string{"cozystack.networking", "cozystack.kubeovn-webhook", "cozystack.cozystack-engine"}, components: []cozyComponent{
				{name: "ingress", path: "apps/ingress", libraries: []string{"cozy-lib"}},
				{name: "ingress-rd", path: "system/ingress-rd", install: installIn("cozy-system", "ingress-rd")}}},
		{name: "cozystack.kubernetes-application", variant: "kubevirt", libraries: cozyLib,
			dependsOn: []string{"cozystack.networking", "cozystack.cert-manager", "cozystack.cozystack-engine"}, components: []cozyComponent{
				{name: "kubernetes-cert-manager-crds", path: "system/cert-manager-crds"},
				{name: "kubernetes-cert-manager", path: "system/cert-manager"},
				{name: "kubernetes-coredns", path: "system/coredns"},
				{name: "kubernetes-ingress-nginx", path: "system/ingress-nginx"},
				{name: "kubernetes-metrics-server", path: "system/metrics-server"},
				{name: "kubernetes-vertical-pod-autoscaler-crds", path: "system/vertical-pod-autoscaler-crds"},
				{name: "kubernetes", path: "apps/kubernetes", libraries: []string{"cozy-lib"}},
				{name: "kubernetes-rd", path: "system/kubernetes-rd", install: installIn("cozy-system", "kubernetes-rd")}}},
		{name: "cozystack.tenant-application", variant: "default", libraries: cozyLib,
			dependsOn: []string{"cozystack.networking", "cozystack.monitoring-application", "cozystack.etcd-application",
				"cozystack.ingress-application", "cozystack.cozystack-engine"}, components: []cozyComponent{
				{name: "tenant", path: "apps/tenant", libraries: []string{"cozy-lib"}},
				{name: "tenant-rd", path: "system/tenant-rd", install: installIn("cozy-system", "tenant-rd")}}},
	}
}

// artifactName is the operator's name of a component's ExternalArtifact.
func (ps *packageSource) artifactName(c cozyComponent) string {
	dash := func(s string) string { return strings.ReplaceAll(s, ".", "-") }
	return dash(ps.name) + "-" + dash(ps.variant) + "-" + dash(c.name)
}

// artifactGenerator is what reconcileArtifactGenerators makes of ps, its
// source the OCIRepository source in cozy-system (sys).
func (ps *packageSource) artifactGenerator(sys, source string) *swv1beta1.ArtifactGenerator {
	var outputs []swv1beta1.OutputArtifact
	for _, c := range ps.components {
		dir := c.path[strings.LastIndex(c.path, "/")+1:]
		copies := []swv1beta1.CopyOperation{{From: "@" + source + "/" + c.path + "/**", To: "@artifact/" + dir + "/"}}
		for _, lib := range c.libraries {
			copies = append(copies, swv1beta1.CopyOperation{
				From: "@" + source + "/" + ps.libraries[lib] + "/**", To: "@artifact/" + dir + "/charts/" + lib + "/"})
		}
		for i, f := range c.valuesFiles {
			strategy := "Merge"
			if i == 0 {
				strategy = "Overwrite"
			}
			copies = append(copies, swv1beta1.CopyOperation{
				From: "@" + source + "/" + c.path + "/" + f, To: "@artifact/" + dir + "/values.yaml", Strategy: strategy})
		}
		outputs = append(outputs, swv1beta1.OutputArtifact{Name: ps.artifactName(c), Copy: copies})
	}
	return &swv1beta1.ArtifactGenerator{
		ObjectMeta: metav1.ObjectMeta{Name: ps.name, Namespace: sys,
			Labels: map[string]string{"cozystack.io/packagesource": ps.name}},
		Spec: swv1beta1.ArtifactGeneratorSpec{
			Sources: []swv1beta1.SourceReference{{Alias: source, Kind: sourcev1.OCIRepositoryKind,
				Name: source, Namespace: sys}},
			OutputArtifacts: outputs,
		},
	}
}

// cozyReleaseSpec is buildHelmReleaseSpec's spec of a release of the
// ExternalArtifact artifact in cozy-system (sys).
func cozyReleaseSpec(sys, artifact string, crds helmv2.CRDsPolicy) helmv2.HelmReleaseSpec {
	maxHistory := cozyMaxHistory
	return helmv2.HelmReleaseSpec{
		Interval:   metav1.Duration{Duration: cozyInterval},
		MaxHistory: &maxHistory,
		ChartRef:   &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.ExternalArtifactKind, Name: artifact, Namespace: sys},
		Install: &helmv2.Install{
			Timeout: &metav1.Duration{Duration: cozyTimeout},
			Strategy: &helmv2.InstallStrategy{Name: string(helmv2.ActionStrategyRetryOnFailure),
				RetryInterval: &metav1.Duration{Duration: cozyRetryInterval}},
		},
		Upgrade: &helmv2.Upgrade{
			Timeout: &metav1.Duration{Duration: cozyTimeout},
			Strategy: &helmv2.UpgradeStrategy{Name: string(helmv2.ActionStrategyRetryOnFailure),
				RetryInterval: &metav1.Duration{Duration: cozyRetryInterval}},
			CRDs: crds,
		},
		ValuesFrom: []helmv2.ValuesReference{{Kind: "Secret", Name: "cozystack-values"}},
	}
}

// helmReleases is what the Package reconciler makes of ps; sources are
// all PackageSources by name, for the variants ps depends on, and ns maps
// a Cozystack namespace to the test's.
func (ps *packageSource) helmReleases(sources map[string]*packageSource, ns map[string]string) []*helmv2.HelmRelease {
	var out []*helmv2.HelmRelease
	for _, c := range ps.components {
		if c.install == nil {
			continue
		}
		hr := &helmv2.HelmRelease{
			ObjectMeta: metav1.ObjectMeta{Name: c.install.releaseName, Namespace: ns[c.install.namespace],
				Labels: map[string]string{"cozystack.io/package": ps.name}},
			Spec: cozyReleaseSpec(ns["cozy-system"], ps.artifactName(c), c.install.upgradeCRDs),
		}
		if ps.skipValues {
			hr.Spec.ValuesFrom = nil
		}
		hr.Spec.DependsOn = ps.dependsOnOf(c, sources, ns)
		if len(c.valuesFiles) > 0 {
			hr.Annotations = map[string]string{"cozyhr.cozystack.io/values-files": strings.Join(c.valuesFiles, ",")}
		}
		out = append(out, hr)
	}
	return out
}

// dependsOnOf is buildDependsOn: the components of c's variant it names,
// then every installed component of the variants ps depends on.
func (ps *packageSource) dependsOnOf(c cozyComponent, sources map[string]*packageSource, ns map[string]string) []helmv2.DependencyReference {
	var deps []helmv2.DependencyReference
	for _, name := range c.install.dependsOn {
		for _, d := range ps.components {
			if d.name == name && d.install != nil {
				deps = append(deps, helmv2.DependencyReference{Name: d.install.releaseName, Namespace: ns[d.install.namespace]})
			}
		}
	}
	for _, name := range ps.dependsOn {
		for _, d := range sources[name].components {
			if d.install != nil {
				deps = append(deps, helmv2.DependencyReference{Name: d.install.releaseName, Namespace: ns[d.install.namespace]})
			}
		}
	}
	return deps
}

// applicationRelease is convertApplicationToHelmRelease's HelmRelease of
// an application of the tenant in ns, its chart the artifact its
// ApplicationDefinition names; disableWait is the
// release.cozystack.io/helm-install-disable-wait of the kubernetes kind.
func applicationRelease(ns, sys, name, artifact, values string, disableWait bool) *helmv2.HelmRelease {
	hr := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       cozyReleaseSpec(sys, artifact, ""),
	}
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(values)}
	if disableWait {
		hr.Spec.Install.DisableWait = true
		hr.Spec.Upgrade.DisableWait = true
	}
	return hr
}

// cozyChart is the Chart.yaml of a chart at version 0.0.0, the placeholder
// Cozystack's charts carry.
func cozyChart(name string) string {
	return "apiVersion: v2\nname: " + name + "\nversion: 0.0.0\n"
}

// cozyCRD is crdYAML in the platform's groups: group.platformGroup.
func cozyCRD(group, kind, plural string) string {
	return crdYAML(group+"."+platformGroup, kind, plural)
}

// cozyCR is a custom resource of a platform CRD; labels are lines under
// metadata and spec lines under spec, each indented as written.
func cozyCR(group, kind, name, labels, spec string) string {
	return "apiVersion: " + group + "." + platformGroup + "/v1\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n" +
		labels + "spec:\n" + spec
}

// cozyBasics are the objects of an operator chart: a ServiceAccount, a
// ClusterRole and its binding (named after the release namespace, so
// that two releases of the chart do not collide), and a ClusterIP
// Service.
func cozyBasics(name string) string {
	return `apiVersion: v1
kind: ServiceAccount
metadata:
  name: ` + name + `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Release.Namespace }}-` + name + `
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .Release.Namespace }}-` + name + `
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .Release.Namespace }}-` + name + `
subjects:
  - kind: ServiceAccount
    name: ` + name + `
    namespace: {{ .Release.Namespace }}
---
apiVersion: v1
kind: Service
metadata:
  name: ` + name + `
spec:
  type: ClusterIP
  selector:
    app: ` + name + `
  ports:
    - port: 443
      targetPort: 8443
`
}

// webhookLabels put an object under the kube-ovn webhook, which fails
// open.
const webhookLabels = "  labels:\n    cozystack.io/webhook: kube-ovn\n"

// cozyLibLabels is metadata.labels from cozy-lib's named template: the
// chart renders only if cozy-lib was copied into its charts/.
const cozyLibLabels = "  labels:\n    {{- include \"cozy-lib.labels\" . | nindent 4 }}\n"

// cozyTree is the packages tree, as the cozystack-packages artifact holds
// it (flux push artifact --path=packages).
func cozyTree() map[string]string {
	tree := map[string]string{}
	add := func(dir string, files map[string]string) {
		for p, c := range files {
			tree[dir+"/"+p] = c
		}
	}
	add("library/cozy-lib", cozyLibChart())
	add("core/platform", cozyPlatformChart())
	for dir, files := range cozySystemCharts() {
		add(dir, files)
	}
	for dir, files := range cozyAppCharts() {
		add(dir, files)
	}
	for kind, artifact := range map[string]string{
		"tenant": "cozystack-tenant-application-default-tenant", "etcd": "cozystack-etcd-application-default-etcd",
		"ingress": "cozystack-ingress-application-default-ingress", "monitoring": "cozystack-monitoring-application-default-monitoring",
		"kubernetes": "cozystack-kubernetes-application-kubevirt-kubernetes",
	} {
		add("system/"+kind+"-rd", map[string]string{
			"Chart.yaml": cozyChart(kind + "-rd"),
			"templates/cozyrd.yaml": cozyCR("cozystack", "ApplicationDefinition", kind, "", `  application:
    kind: `+kind+`
  release:
    prefix: ""
    chartRef:
      kind: ExternalArtifact
      name: `+artifact+`
      namespace: {{ .Release.Namespace }}
`),
		})
	}
	return tree
}

func cozyLibChart() map[string]string {
	return map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: cozy-lib\ndescription: Common Cozystack templates\ntype: library\nversion: 0.0.0\n",
		"templates/_cozyconfig.tpl": `{{- define "cozy-lib.root-host" -}}
{{- (index (.Values._cluster | default dict) "root-host") | default "" }}
{{- end }}
{{- define "cozy-lib.bundle-name" -}}
{{- (index (.Values._cluster | default dict) "bundle-name") | default "" }}
{{- end }}
`,
		"templates/_labels.tpl": `{{- define "cozy-lib.labels" -}}
app.kubernetes.io/part-of: cozystack
app.kubernetes.io/instance: {{ .Release.Name }}
cozystack.io/bundle: {{ include "cozy-lib.bundle-name" . | default "none" | quote }}
{{- end }}
`,
	}
}

// cozyPlatformChart renders the OCIRepository cozystack-packages as a copy
// of the one cozystack-operator made (lookup), and a ConfigMap of its
// values, which values-isp-full.yaml is merged into.
func cozyPlatformChart() map[string]string {
	return map[string]string{
		"Chart.yaml":           cozyChart("cozy-platform"),
		"values.yaml":          "sourceRef:\n  kind: OCIRepository\n  name: cozystack-platform\nbundles:\n  system: paas\n  iaas: disabled\n",
		"values-isp-full.yaml": "bundles:\n  iaas: enabled\n",
		"templates/repository.yaml": `{{- $sourceRef := .Values.sourceRef }}
{{- $namespace := $sourceRef.namespace | default .Release.Namespace }}
{{- $sourceRepo := lookup "source.toolkit.fluxcd.io/v1" $sourceRef.kind $namespace $sourceRef.name }}
{{- if not $sourceRepo }}
{{- fail (printf "Source repository %s/%s of kind %s not found" $namespace $sourceRef.name $sourceRef.kind) }}
{{- end }}
apiVersion: source.toolkit.fluxcd.io/v1
kind: {{ $sourceRef.kind }}
metadata:
  name: cozystack-packages
  labels:
    platform.cozystack.io/no-delete: "true"
spec:
{{- $sourceRepo.spec | toYaml | nindent 2 }}
`,
		"templates/bundle.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: cozystack-bundle
data:
  system: {{ .Values.bundles.system | quote }}
  iaas: {{ .Values.bundles.iaas | quote }}
`,
	}
}

// cozySystemCharts are the charts of the platform's system releases, by
// their path in the tree.
func cozySystemCharts() map[string]map[string]string {
	certificate := func(name string) string {
		return cozyCR("cert-manager", "Certificate", name, "", "  secretName: "+name+"-tls\n  issuerRef:\n    name: selfsigned\n")
	}
	return map[string]map[string]string{
		"system/gateway-api-crds": {
			"Chart.yaml":          cozyChart("gateway-api-crds"),
			"crds/gateways.yaml":  cozyCRD("gateway", "Gateway", "gateways"),
			"crds/httproute.yaml": cozyCRD("gateway", "HTTPRoute", "httproutes"),
		},
		// Three values files: values.yaml overwritten onto itself, then
		// values-talos.yaml and values-kilo.yaml merged in that order.
		"system/cilium": {
			"Chart.yaml":            cozyChart("cilium"),
			"values.yaml":           "cilium:\n  routingMode: tunnel\n  tunnelProtocol: vxlan\n  k8sServiceHost: auto\n  kubeProxyReplacement: \"false\"\n",
			"values-talos.yaml":     "cilium:\n  k8sServiceHost: localhost\n  kubeProxyReplacement: \"true\"\n  routingMode: tunnel\n",
			"values-kilo.yaml":      "cilium:\n  routingMode: native\n",
			"templates/basics.yaml": cozyBasics("cilium"),
			"templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: cilium-config
data:
  routing-mode: {{ .Values.cilium.routingMode | quote }}
  tunnel-protocol: {{ .Values.cilium.tunnelProtocol | quote }}
  k8s-service-host: {{ .Values.cilium.k8sServiceHost | quote }}
  kube-proxy-replacement: {{ .Values.cilium.kubeProxyReplacement | quote }}
`,
		},
		"system/kilo": {
			"Chart.yaml":         cozyChart("kilo"),
			"values.yaml":        "kilo:\n  mesh: full\n  cni: true\n",
			"values-cilium.yaml": "kilo:\n  cni: false\n  compatibility: cilium\n",
			"templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: kilo
data:
  mesh: {{ .Values.kilo.mesh | quote }}
  cni: {{ .Values.kilo.cni | quote }}
  compatibility: {{ .Values.kilo.compatibility | default "none" | quote }}
`,
		},
		"system/cert-manager-crds": {
			"Chart.yaml":              cozyChart("cert-manager-crds"),
			"crds/certificates.yaml":  cozyCRD("cert-manager", "Certificate", "certificates"),
			"crds/issuers.yaml":       cozyCRD("cert-manager", "Issuer", "issuers"),
			"templates/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cert-manager-crds\ndata:\n  version: v1\n",
		},
		"system/cert-manager": {
			"Chart.yaml":            cozyChart("cert-manager"),
			"templates/basics.yaml": cozyBasics("cert-manager"),
		},
		"system/cert-manager-issuers": {
			"Chart.yaml":            cozyChart("cert-manager-issuers"),
			"templates/issuer.yaml": cozyCR("cert-manager", "Issuer", "selfsigned", "", "  selfSigned: {}\n"),
			"templates/ca.yaml":     certificate("cozystack-ca"),
		},
		"system/kubeovn-webhook": {
			"Chart.yaml":                 cozyChart("kubeovn-webhook"),
			"templates/certificate.yaml": certificate("kube-ovn-webhook"),
			"templates/webhook.yaml":     cozyWebhook,
		},
		"system/cozystack-engine": {
			"Chart.yaml":                       cozyChart("cozystack-engine"),
			"crds/applicationdefinitions.yaml": cozyCRD("cozystack", "ApplicationDefinition", "applicationdefinitions"),
			"templates/basics.yaml":            cozyBasics("cozystack-api"),
		},
		"system/cozystack-basics": {
			"Chart.yaml": cozyChart("cozystack-basics"),
			"templates/basics.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: cozystack-basics
data:
  root-host: {{ index .Values._cluster "root-host" | quote }}
---
` + cozyCR("gateway", "Gateway", "cozystack", "", "  listeners:\n    - hostname: {{ printf \"*.%s\" (index .Values._cluster \"root-host\") | quote }}\n"),
		},
		"system/etcd-operator-crds": {
			"Chart.yaml":              cozyChart("etcd-operator-crds"),
			"crds/etcdclusters.yaml":  cozyCRD("etcd", "EtcdCluster", "etcdclusters"),
			"templates/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: etcd-operator-crds\ndata:\n  version: v1\n",
		},
		"system/etcd-operator": {
			"Chart.yaml":                 cozyChart("etcd-operator"),
			"templates/basics.yaml":      cozyBasics("etcd-operator"),
			"templates/certificate.yaml": certificate("etcd-operator-webhook"),
		},
		"system/grafana-operator": {
			"Chart.yaml":                  cozyChart("grafana-operator"),
			"crds/grafanadashboards.yaml": cozyCRD("grafana", "GrafanaDashboard", "grafanadashboards"),
			"templates/basics.yaml":       cozyBasics("grafana-operator"),
		},
		"system/victoria-metrics-operator": cozyUmbrellaChart(),
		"system/monitoring": {
			"Chart.yaml": cozyChart("monitoring"),
			"templates/monitoring.yaml": cozyCR("monitoring", "VMAgent", "vmagent", cozyLibLabels, "  scrapeInterval: 30s\n") + "---\n" +
				cozyCR("monitoring", "VMRule", "alerts", cozyLibLabels, "  groups: []\n") + "---\n" +
				cozyCR("grafana", "GrafanaDashboard", "cluster", cozyLibLabels, "  json: \"{}\"\n"),
		},
		"system/coredns": {
			"Chart.yaml":            cozyChart("coredns"),
			"templates/basics.yaml": cozyBasics("coredns"),
			"templates/corefile.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\ndata:\n  Corefile: |\n" +
				"    .:53 {\n        forward . /etc/resolv.conf\n    }\n",
		},
		"system/ingress-nginx": {
			"Chart.yaml":            cozyChart("ingress-nginx"),
			"templates/basics.yaml": cozyBasics("ingress-nginx"),
			"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ingress-nginx-controller\n" +
				webhookLabels + "data:\n  use-forwarded-headers: \"true\"\n",
		},
		"system/metrics-server": {
			"Chart.yaml":            cozyChart("metrics-server"),
			"templates/basics.yaml": cozyBasics("metrics-server"),
		},
		"system/vertical-pod-autoscaler-crds": {
			"Chart.yaml":                       cozyChart("vertical-pod-autoscaler-crds"),
			"crds/verticalpodautoscalers.yaml": cozyCRD("autoscaling", "VerticalPodAutoscaler", "verticalpodautoscalers"),
		},
	}
}

// cozyWebhook is a ValidatingWebhookConfiguration that fails open, its
// Service without endpoints, over the objects labelled webhookLabels.
const cozyWebhook = `apiVersion: v1
kind: Service
metadata:
  name: kube-ovn-webhook
spec:
  type: ClusterIP
  selector:
    app: kube-ovn-webhook
  ports:
    - port: 443
      targetPort: 8443
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {{ .Release.Namespace }}-kube-ovn-webhook
webhooks:
  - name: {{ .Release.Namespace }}.kube-ovn.platform.cozy-aio.io
    failurePolicy: Ignore
    sideEffects: None
    admissionReviewVersions: [v1]
    timeoutSeconds: 2
    clientConfig:
      service:
        name: kube-ovn-webhook
        namespace: {{ .Release.Namespace }}
        path: /validating
        port: 443
    objectSelector:
      matchLabels:
        cozystack.io/webhook: kube-ovn
    rules:
      - apiGroups: [""]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [configmaps]
      - apiGroups: [monitoring.platform.cozy-aio.io]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [vmrules]
`

// cozyUmbrellaChart is shaped as victoria-metrics-operator: CRDs in the
// crds/ of subcharts behind conditions. values-cozy.yaml, merged by the
// generator, turns the prometheus-crds subchart off and changes the
// operator's mode.
func cozyUmbrellaChart() map[string]string {
	return map[string]string{
		"Chart.yaml": cozyChart("victoria-metrics-operator") + `dependencies:
  - name: vm-crds
    version: 0.0.0
    condition: crds.enabled
  - name: prometheus-crds
    version: 0.0.0
    condition: prometheusCrds.enabled
`,
		"values.yaml":      "crds:\n  enabled: true\nprometheusCrds:\n  enabled: true\noperator:\n  mode: standalone\n  logLevel: info\n",
		"values-cozy.yaml": "prometheusCrds:\n  enabled: false\noperator:\n  mode: cozystack\n",
		"templates/operator.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: victoria-metrics-operator
data:
  mode: {{ .Values.operator.mode | quote }}
  log-level: {{ .Values.operator.logLevel | quote }}
`,
		"charts/vm-crds/Chart.yaml":                    cozyChart("vm-crds"),
		"charts/vm-crds/crds/vmrules.yaml":             cozyCRD("monitoring", "VMRule", "vmrules"),
		"charts/vm-crds/crds/vmagents.yaml":            cozyCRD("monitoring", "VMAgent", "vmagents"),
		"charts/vm-crds/templates/marker.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: vm-crds\n",
		"charts/prometheus-crds/Chart.yaml":            cozyChart("prometheus-crds"),
		"charts/prometheus-crds/crds/rules.yaml":       cozyCRD("prometheus", "PrometheusRule", "prometheusrules"),
		"charts/prometheus-crds/templates/marker.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: prometheus-crds\n",
	}
}

// cozyAppCharts are the charts of the tenants' applications, which read
// the cozystack-values Secret (_cluster, _namespace) through cozy-lib.
func cozyAppCharts() map[string]map[string]string {
	hostConfig := func(name, labels, key, value string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" + labels +
			"data:\n  " + key + ": " + value + "\n"
	}
	return map[string]map[string]string{
		"extra/monitoring": {
			"Chart.yaml": cozyChart("monitoring"),
			"templates/monitoring.yaml": cozyCR("monitoring", "VMRule", "{{ .Release.Name }}-alerts", webhookLabels, "  groups: []\n") + "---\n" +
				cozyCR("grafana", "GrafanaDashboard", "{{ .Release.Name }}-overview", cozyLibLabels, "  json: \"{}\"\n") + "---\n" +
				hostConfig("{{ .Release.Name }}-endpoints", cozyLibLabels, "grafana", `{{ printf "grafana.%s" (include "cozy-lib.root-host" .) | quote }}`),
		},
		"apps/etcd": {
			"Chart.yaml": cozyChart("etcd"),
			"templates/etcd.yaml": cozyCR("etcd", "EtcdCluster", "{{ .Release.Name }}", cozyLibLabels, "  replicas: 3\n") + "---\n" +
				cozyCR("cert-manager", "Certificate", "{{ .Release.Name }}-peer", "", "  secretName: etcd-peer-tls\n  issuerRef:\n    name: selfsigned\n") + "---\n" +
				hostConfig("{{ .Release.Name }}-endpoints", webhookLabels, "host", `{{ include "cozy-lib.root-host" . | quote }}`),
		},
		"apps/tenant": {
			"Chart.yaml": cozyChart("tenant"),
			"templates/tenant.yaml": `apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Release.Name }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .Release.Name }}-admin
rules:
  - apiGroups: [""]
    resources: [configmaps, secrets]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .Release.Name }}-admin
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .Release.Name }}-admin
subjects:
  - kind: ServiceAccount
    name: {{ .Release.Name }}
---
` + hostConfig("{{ .Release.Name }}-info", cozyLibLabels, "host", `{{ include "cozy-lib.root-host" . | quote }}`),
		},
		"apps/ingress": {
			"Chart.yaml":            cozyChart("ingress"),
			"templates/basics.yaml": cozyBasics("{{ .Release.Name }}-controller"),
			"templates/ingress.yaml": hostConfig("{{ .Release.Name }}-controller", webhookLabels, "host", `{{ include "cozy-lib.root-host" . | quote }}`) + "---\n" +
				cozyCR("gateway", "HTTPRoute", "{{ .Release.Name }}-dashboard", cozyLibLabels,
					"  hostnames:\n    - {{ printf \"dashboard.%s\" (include \"cozy-lib.root-host\" .) | quote }}\n"),
		},
		"apps/kubernetes": cozyKubernetesChart(),
	}
}

// cozyKubernetesChart is shaped as apps/kubernetes: HelmReleases of its
// cluster's addons, from the platform's artifacts, with remediation
// retries -1 and dependsOn in the tenant's namespace. Their values do not
// depend on the cozystack-values Secret, only whether they exist does.
func cozyKubernetesChart() map[string]string {
	addon := func(name, condition, dependsOn string) string {
		s := `{{- if ` + condition + ` }}
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: {{ .Release.Name }}-` + name + `
  labels:
    cozystack.io/repository: system
    cozystack.io/target-cluster-name: {{ .Release.Name }}
    sharding.fluxcd.io/key: tenants
spec:
  releaseName: ` + name + `
  chartRef:
    kind: ExternalArtifact
    name: cozystack-kubernetes-application-kubevirt-kubernetes-` + name + `
    namespace: {{ .Values.platformNamespace }}
  targetNamespace: {{ .Values.clusterNamespace }}
  storageNamespace: {{ .Values.clusterNamespace }}
  interval: 5m
  timeout: 10m
  install:
    createNamespace: true
    remediation:
      retries: -1
  upgrade:
    remediation:
      retries: -1
`
		if dependsOn != "" {
			s += "  dependsOn:\n    - name: {{ .Release.Name }}-" + dependsOn + "\n      namespace: {{ .Release.Namespace }}\n"
		}
		return s + "{{- end }}\n"
	}
	certManager := "and .Values.addons.certManager.enabled .Values._namespace.etcd"
	return map[string]string{
		"Chart.yaml":  cozyChart("kubernetes"),
		"values.yaml": "addons:\n  certManager:\n    enabled: false\n  ingressNginx:\n    enabled: false\nplatformNamespace: cozy-system\nclusterNamespace: \"\"\n",
		"templates/cluster.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cluster\n" + cozyLibLabels +
			"data:\n  api: {{ printf \"api.%s.%s\" .Release.Name (include \"cozy-lib.root-host\" .) | quote }}\n",
		"templates/helmreleases/cert-manager-crds.yaml":            addon("cert-manager-crds", certManager, ""),
		"templates/helmreleases/cert-manager.yaml":                 addon("cert-manager", certManager, "cert-manager-crds"),
		"templates/helmreleases/coredns.yaml":                      addon("coredns", ".Values._namespace.etcd", ""),
		"templates/helmreleases/ingress-nginx.yaml":                addon("ingress-nginx", ".Values.addons.ingressNginx.enabled", "cert-manager"),
		"templates/helmreleases/metrics-server.yaml":               addon("metrics-server", ".Values._namespace.etcd", "coredns"),
		"templates/helmreleases/vertical-pod-autoscaler-crds.yaml": addon("vertical-pod-autoscaler-crds", ".Values._namespace.etcd", ""),
	}
}

// cozyAddons are the HelmReleases apps/kubernetes renders.
var cozyAddons = []string{"cert-manager-crds", "cert-manager", "coredns", "ingress-nginx", "metrics-server", "vertical-pod-autoscaler-crds"}

// cozyPlatform is one run's platform: its namespaces and registry.
type cozyPlatform struct {
	ns      map[string]string // Cozystack namespace → the test's
	reg     *testenv.Registry
	sources []packageSource
}

// cozyValues is the cozystack-values Secret's values.yaml.
func cozyValues(rootHost string) string {
	return "_cluster:\n  root-host: " + rootHost + "\n  bundle-name: paas-full\n" +
		"_namespace:\n  host: " + rootHost + "\n  etcd: tenant-root\n  ingress: tenant-root\n  monitoring: tenant-root\n"
}

func newCozyPlatform(t *testing.T) *cozyPlatform {
	ctx := context.Background()
	p := &cozyPlatform{ns: map[string]string{}, sources: cozyPackageSources()}
	for _, n := range cozyNamespaces {
		p.ns[n] = cp.Namespace(t)
	}
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	p.reg = reg
	if _, err := reg.PushArtifact(ctx, "cozystack-packages", "v1.0.0", cozyTree(), map[string]string{
		"org.opencontainers.image.source":   "https://github.com/cozystack/cozystack",
		"org.opencontainers.image.revision": "v1.0.0@sha1:3c780acd4b1f7e9a0c2d5e8f6a4b3c2d1e0f9a8b",
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.deleteClusterObjects)
	// The platform copies the Secret into each namespace whose releases
	// read it; the tenant cluster's addons read none.
	for _, n := range cozyNamespaces {
		if n == "tenant-root-cluster" {
			continue
		}
		create(t, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "cozystack-values", Namespace: p.ns[n],
				Labels: map[string]string{meta.LabelKeyWatch: meta.LabelValueWatchEnabled}},
			StringData: map[string]string{"values.yaml": cozyValues("example.org")},
		})
	}
	return p
}

// deleteClusterObjects deletes what the releases left outside their
// namespaces: the CRDs of the platform's groups, and the cluster-scoped
// objects of its releases.
func (p *cozyPlatform) deleteClusterObjects() {
	ctx := context.Background()
	// The CRDs go first, and are waited for: a CRD still terminating
	// would meet the next run's install of it.
	platformCRDs := func() []apiextensionsv1.CustomResourceDefinition {
		var list apiextensionsv1.CustomResourceDefinitionList
		if err := cp.Client.List(ctx, &list); err != nil {
			return nil
		}
		var out []apiextensionsv1.CustomResourceDefinition
		for _, crd := range list.Items {
			if strings.HasSuffix(crd.Spec.Group, "."+platformGroup) {
				out = append(out, crd)
			}
		}
		return out
	}
	for _, crd := range platformCRDs() {
		_ = cp.Client.Delete(ctx, &crd)
	}
	for deadline := time.Now().Add(30 * time.Second); len(platformCRDs()) > 0 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	mine := map[string]bool{}
	for _, n := range p.ns {
		mine[n] = true
	}
	for _, list := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{},
		&admissionv1.ValidatingWebhookConfigurationList{}} {
		if err := cp.Client.List(ctx, list); err != nil {
			continue
		}
		items, _ := apimeta.ExtractList(list)
		for _, o := range items {
			if obj := o.(client.Object); mine[obj.GetAnnotations()["meta.helm.sh/release-namespace"]] {
				_ = cp.Client.Delete(ctx, obj)
			}
		}
	}
}

// cozyName is the Cozystack name of the test's namespace ns.
func (p *cozyPlatform) cozyName(ns string) string {
	for k, v := range p.ns {
		if v == ns {
			return k
		}
	}
	return ns
}

// TestCozystackShapedPlatform installs a platform shaped as Cozystack:
// the platform release from the OCIRepository cozystack-platform, which
// renders the OCIRepository cozystack-packages; from it, an
// ArtifactGenerator per PackageSource and the operator's HelmReleases of
// their components, with dependsOn across namespaces; then a tenant's
// applications, one of which renders HelmReleases of its own. Every
// release must install exactly once, as with helm-controller, leave no
// Warning Event, render what its merged values and cozy-lib say; then a
// change of the watched cozystack-values Secret of the tenant upgrades
// the releases that read it, and only those.
func TestCozystackShapedPlatform(t *testing.T) {
	p := newCozyPlatform(t)
	startEngine(t, engine.Options{})
	platform := p.installPlatform(t)
	system := p.installSystem(t)
	// The tenant's applications, once their ApplicationDefinitions exist.
	apps, addons := p.applications(), p.addons()
	for _, hr := range apps {
		create(t, hr)
	}
	p.waitReleases(t, append(append([]*helmv2.HelmRelease{}, apps...), addons...), 1, "the tenant's releases installed")

	var all []*helmv2.HelmRelease
	for _, set := range [][]*helmv2.HelmRelease{platform, system, apps, addons} {
		all = append(all, set...)
	}
	t.Logf("%d HelmReleases installed in %d namespaces, %d ArtifactGenerators", len(all), len(p.ns), len(p.sources)+1)
	p.checkArtifacts(t, append([]packageSource{cozyPlatformSource}, p.sources...))
	p.checkRevisions(t, all, nil)
	p.checkRendered(t)
	p.checkEvents(t, true)

	// A new root host in the tenant's cozystack-values upgrades the
	// tenant's applications, which read it, and nothing else: not the
	// addons the kubernetes application renders unchanged, not the
	// releases of other namespaces.
	p.setRootHost(t, "tenant-root", "example.net")
	p.waitReleases(t, apps, 2, "the tenant's applications upgraded on the watched Secret")
	p.waitReleases(t, all, 0, "every release settled")
	upgraded := map[*helmv2.HelmRelease]bool{}
	for _, hr := range apps {
		upgraded[hr] = true
	}
	p.checkRevisions(t, all, upgraded)
	info := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tenant-root-info", Namespace: p.ns["tenant-root"]}}
	if !exists(t, info) || info.Data["host"] != "example.net" {
		t.Errorf("after the upgrade the tenant's info says host %q, want example.net", info.Data["host"])
	}
	for _, hr := range addons {
		if got := p.get(t, hr); got.Generation != 1 {
			t.Errorf("addon %s has generation %d: the kubernetes application's upgrade changed it", hr.Name, got.Generation)
		}
	}
	p.checkEvents(t, false)
}

// installPlatform does what cozystack-operator does at start: the
// OCIRepository cozystack-platform, then its PackageSource's generator
// and the platform's HelmRelease, which renders the OCIRepository
// cozystack-packages. It returns the platform's HelmRelease once Ready.
func (p *cozyPlatform) installPlatform(t *testing.T) []*helmv2.HelmRelease {
	t.Helper()
	sys := p.ns["cozy-system"]
	create(t, &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "cozystack-platform", Namespace: sys},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + p.reg.Host() + "/cozystack-packages", Insecure: true,
			Interval:  &metav1.Duration{Duration: cozyInterval},
			Reference: &sourcev1.OCIRepositoryRef{Tag: "v1.0.0"},
		},
	})
	create(t, cozyPlatformSource.artifactGenerator(sys, "cozystack-platform"))
	releases := cozyPlatformSource.helmReleases(nil, p.ns)
	for _, hr := range releases {
		create(t, hr)
	}
	p.waitReleases(t, releases, 1, "the platform release installed")
	packages := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: "cozystack-packages", Namespace: sys}}
	waitFor(t, packages, readyIs(packages, true), "the platform release's OCIRepository Ready")
	return releases
}

// installSystem does the operator's work for each PackageSource the
// platform renders, all at once, and returns their HelmReleases once
// Ready.
func (p *cozyPlatform) installSystem(t *testing.T) []*helmv2.HelmRelease {
	t.Helper()
	byName := map[string]*packageSource{}
	for i := range p.sources {
		byName[p.sources[i].name] = &p.sources[i]
	}
	var releases []*helmv2.HelmRelease
	for i := range p.sources {
		create(t, p.sources[i].artifactGenerator(p.ns["cozy-system"], "cozystack-packages"))
		releases = append(releases, p.sources[i].helmReleases(byName, p.ns)...)
	}
	for _, hr := range releases {
		create(t, hr)
	}
	p.waitReleases(t, releases, 1, "the system releases installed")
	return releases
}

// setRootHost changes the root host in the cozystack-values Secret of
// the Cozystack namespace ns.
func (p *cozyPlatform) setRootHost(t *testing.T, ns, host string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cozystack-values", Namespace: p.ns[ns]}}
	if !exists(t, secret) {
		t.Fatalf("the cozystack-values Secret of %s is gone", ns)
	}
	secret.Data["values.yaml"] = []byte(cozyValues(host))
	if err := cp.Client.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
}

// applications are the HelmReleases cozystack-api makes of the tenant's
// applications.
func (p *cozyPlatform) applications() []*helmv2.HelmRelease {
	ns, sys := p.ns["tenant-root"], p.ns["cozy-system"]
	kubernetes := fmt.Sprintf(`{"addons":{"certManager":{"enabled":true},"ingressNginx":{"enabled":true}},`+
		`"platformNamespace":%q,"clusterNamespace":%q}`, sys, p.ns["tenant-root-cluster"])
	return []*helmv2.HelmRelease{
		applicationRelease(ns, sys, "tenant-root", "cozystack-tenant-application-default-tenant", `{"etcd":true,"monitoring":true,"ingress":true}`, false),
		applicationRelease(ns, sys, "etcd", "cozystack-etcd-application-default-etcd", `{"replicas":3,"size":"4Gi"}`, false),
		applicationRelease(ns, sys, "monitoring", "cozystack-monitoring-application-default-monitoring", `{"metricsStorages":[]}`, false),
		applicationRelease(ns, sys, "ingress", "cozystack-ingress-application-default-ingress", `{"replicas":2}`, false),
		applicationRelease(ns, sys, "kubernetes-demo", "cozystack-kubernetes-application-kubevirt-kubernetes", kubernetes, true),
	}
}

// addons are the HelmReleases the kubernetes application renders.
func (p *cozyPlatform) addons() []*helmv2.HelmRelease {
	var out []*helmv2.HelmRelease
	for _, a := range cozyAddons {
		out = append(out, &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes-demo-" + a, Namespace: p.ns["tenant-root"]}})
	}
	return out
}

func (p *cozyPlatform) get(t *testing.T, hr *helmv2.HelmRelease) *helmv2.HelmRelease {
	t.Helper()
	got := &helmv2.HelmRelease{}
	if err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(hr), got); err != nil {
		t.Fatalf("HelmRelease %s/%s: %v", p.cozyName(hr.Namespace), hr.Name, err)
	}
	return got
}

// waitReleases waits until every release is Ready for its generation, its
// latest release at version (any, when 0), and fails naming those that
// are not. A platform on a shared two-core machine takes minutes, hence
// the deadline.
func (p *cozyPlatform) waitReleases(t *testing.T, releases []*helmv2.HelmRelease, version int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var pending []string
		for _, want := range releases {
			hr := &helmv2.HelmRelease{}
			if err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(want), hr); err != nil {
				pending = append(pending, fmt.Sprintf("%s/%s: %v", p.cozyName(want.Namespace), want.Name, err))
				continue
			}
			latest := hr.Status.History.Latest()
			if conditions.IsReady(hr) && hr.Status.ObservedGeneration == hr.Generation &&
				latest != nil && (version == 0 || latest.Version == version) {
				continue
			}
			msg := "no Ready condition"
			if c := conditions.Get(hr, meta.ReadyCondition); c != nil {
				msg = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
			}
			if latest != nil {
				msg += fmt.Sprintf(" (release version %d)", latest.Version)
			}
			pending = append(pending, fmt.Sprintf("%s/%s: %s", p.cozyName(want.Namespace), want.Name, msg))
		}
		if len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d HelmReleases never did:\n%s", what, len(pending), len(releases), strings.Join(pending, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkArtifacts checks that every generator is Ready and made one Ready
// ExternalArtifact per component.
func (p *cozyPlatform) checkArtifacts(t *testing.T, sources []packageSource) {
	t.Helper()
	ctx, sys := context.Background(), p.ns["cozy-system"]
	want := map[string]bool{}
	for i := range sources {
		ag := &swv1beta1.ArtifactGenerator{}
		if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: sys, Name: sources[i].name}, ag); err != nil {
			t.Fatal(err)
		}
		if !conditions.IsReady(ag) {
			t.Errorf("ArtifactGenerator %s is not Ready: %+v", ag.Name, conditions.Get(ag, meta.ReadyCondition))
		}
		for _, c := range sources[i].components {
			want[sources[i].artifactName(c)] = true
		}
	}
	var list sourcev1.ExternalArtifactList
	if err := cp.Client.List(ctx, &list, client.InNamespace(sys)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		ea := &list.Items[i]
		if !want[ea.Name] {
			t.Errorf("ExternalArtifact %s was not asked for", ea.Name)
		}
		delete(want, ea.Name)
		if !conditions.IsReady(ea) || ea.Status.Artifact == nil {
			t.Errorf("ExternalArtifact %s is not Ready with an artifact: %+v", ea.Name, conditions.Get(ea, meta.ReadyCondition))
		}
	}
	for name := range want {
		t.Errorf("ExternalArtifact %s is missing", name)
	}
}

// checkRevisions checks that every release has as many revisions as
// helm-controller makes: one, or two for those upgraded, in its history
// and in its storage.
func (p *cozyPlatform) checkRevisions(t *testing.T, releases []*helmv2.HelmRelease, upgraded map[*helmv2.HelmRelease]bool) {
	t.Helper()
	for _, want := range releases {
		hr := p.get(t, want)
		revisions := 1
		if upgraded[want] {
			revisions = 2
		}
		latest := hr.Status.History.Latest()
		if len(hr.Status.History) != revisions || latest == nil || latest.Version != revisions {
			var versions []string
			for _, s := range hr.Status.History {
				versions = append(versions, fmt.Sprintf("v%d %s", s.Version, s.Status))
			}
			t.Errorf("%s/%s: history %v, want %d revision(s)", p.cozyName(hr.Namespace), hr.Name, versions, revisions)
			continue
		}
		var secrets corev1.SecretList
		if err := cp.Client.List(context.Background(), &secrets, client.InNamespace(hr.Status.StorageNamespace),
			client.MatchingLabels{"owner": "helm", "name": latest.Name}); err != nil {
			t.Fatal(err)
		}
		if len(secrets.Items) != revisions {
			t.Errorf("%s/%s: %d release Secrets of %s in %s, want %d", p.cozyName(hr.Namespace), hr.Name,
				len(secrets.Items), latest.Name, p.cozyName(hr.Status.StorageNamespace), revisions)
		}
	}
}

// checkEvents checks that no Warning Event was recorded on a
// HelmRelease, as helm-controller records none here: nothing fails, and
// it records the waits for dependencies as Normal DependencyNotReady
// Events, which, with dependencyWaits, must be there.
func (p *cozyPlatform) checkEvents(t *testing.T, dependencyWaits bool) {
	t.Helper()
	var warnings []string
	waits := 0
	for _, ns := range p.ns {
		var list corev1.EventList
		if err := cp.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind != helmv2.HelmReleaseKind {
				continue
			}
			switch {
			case e.Type == corev1.EventTypeWarning:
				warnings = append(warnings, fmt.Sprintf("%s/%s %s (x%d): %s", p.cozyName(ns), e.InvolvedObject.Name, e.Reason, e.Count, e.Message))
			case e.Reason == meta.DependencyNotReadyReason:
				waits++
			}
		}
	}
	sort.Strings(warnings)
	if len(warnings) > 0 {
		t.Errorf("Warning Events on HelmReleases:\n%s", strings.Join(warnings, "\n"))
	}
	if dependencyWaits && waits == 0 {
		t.Error("no HelmRelease recorded a Normal DependencyNotReady Event: did none wait for its dependencies?")
	}
}

// checkRendered checks what the charts rendered: the generator's merges
// of values files, cozy-lib's templates with the cozystack-values Secret,
// the umbrella's CRDs of its enabled subchart only, the custom resources
// of other releases' CRDs, and the objects under the failing webhook.
func (p *cozyPlatform) checkRendered(t *testing.T) {
	t.Helper()
	data := func(ns, name string) map[string]string {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns[ns]}}
		if !exists(t, cm) {
			t.Errorf("ConfigMap %s/%s was not rendered", ns, name)
		}
		return cm.Data
	}
	for _, c := range []struct {
		ns, name string
		want     map[string]string
	}{
		{"cozy-system", "cozystack-bundle", map[string]string{"system": "paas", "iaas": "enabled"}},
		{"cozy-cilium", "cilium-config", map[string]string{"routing-mode": "native", "tunnel-protocol": "vxlan",
			"k8s-service-host": "localhost", "kube-proxy-replacement": "true"}},
		{"cozy-kilo", "kilo", map[string]string{"mesh": "full", "cni": "false", "compatibility": "cilium"}},
		{"cozy-victoria-metrics-operator", "victoria-metrics-operator", map[string]string{"mode": "cozystack", "log-level": "info"}},
		{"cozy-system", "cozystack-basics", map[string]string{"root-host": "example.org"}},
		{"tenant-root", "tenant-root-info", map[string]string{"host": "example.org"}},
		{"tenant-root", "monitoring-endpoints", map[string]string{"grafana": "grafana.example.org"}},
		{"tenant-root", "kubernetes-demo-cluster", map[string]string{"api": "api.kubernetes-demo.example.org"}},
	} {
		if got := data(c.ns, c.name); !hasData(got, c.want) {
			t.Errorf("ConfigMap %s/%s = %v, want %v", c.ns, c.name, got, c.want)
		}
	}
	p.checkCozyLib(t)
	p.checkCRDs(t)
	p.checkWebhook(t)
}

// hasData says whether got holds every key of want with its value.
func hasData(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// checkCozyLib checks the labels of cozy-lib's named template, with the
// bundle name from the cozystack-values Secret, or its default in a
// release of a skip-cozystack-values PackageSource.
func (p *cozyPlatform) checkCozyLib(t *testing.T) {
	t.Helper()
	info := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tenant-root-info", Namespace: p.ns["tenant-root"]}}
	if exists(t, info) && (info.Labels["app.kubernetes.io/part-of"] != "cozystack" || info.Labels["cozystack.io/bundle"] != "paas-full") {
		t.Errorf("tenant-root-info labels = %v, want cozy-lib's with bundle paas-full", info.Labels)
	}
	agent := cozyObject("monitoring", "VMAgent", p.ns["cozy-monitoring"], "vmagent")
	if exists(t, agent) && agent.GetLabels()["cozystack.io/bundle"] != "none" {
		t.Errorf("the monitoring release (no cozystack-values) labelled its VMAgent %v, want cozy-lib's default bundle none",
			agent.GetLabels())
	}
}

// cozyObject is a custom resource of a platform CRD to Get.
func cozyObject(group, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(group + "." + platformGroup + "/v1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// checkCRDs checks the umbrella chart's CRDs (its prometheus-crds
// subchart is off in the merged values) and the custom resources other
// releases made of the CRDs.
func (p *cozyPlatform) checkCRDs(t *testing.T) {
	t.Helper()
	crd := func(plural, group string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group + "." + platformGroup}}
	}
	if !exists(t, crd("vmrules", "monitoring")) || !exists(t, crd("vmagents", "monitoring")) {
		t.Error("the CRDs of the enabled vm-crds subchart were not installed")
	}
	if exists(t, crd("prometheusrules", "prometheus")) {
		t.Error("the CRD of the prometheus-crds subchart, disabled by the merged values, was installed")
	}
	vm := p.ns["cozy-victoria-metrics-operator"]
	if !exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vm-crds", Namespace: vm}}) {
		t.Error("the enabled subchart's template was not rendered")
	}
	if exists(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-crds", Namespace: vm}}) {
		t.Error("the disabled subchart's template was rendered")
	}
	for _, o := range []*unstructured.Unstructured{
		cozyObject("cert-manager", "Certificate", p.ns["cozy-etcd-operator"], "etcd-operator-webhook"),
		cozyObject("cert-manager", "Certificate", p.ns["cozy-kubeovn"], "kube-ovn-webhook"),
		cozyObject("gateway", "Gateway", p.ns["cozy-system"], "cozystack"),
		cozyObject("cozystack", "ApplicationDefinition", p.ns["cozy-system"], "kubernetes"),
		cozyObject("etcd", "EtcdCluster", p.ns["tenant-root"], "etcd"),
		cozyObject("grafana", "GrafanaDashboard", p.ns["tenant-root"], "monitoring-overview"),
		cozyObject("gateway", "HTTPRoute", p.ns["tenant-root"], "ingress-dashboard"),
	} {
		if !exists(t, o) {
			t.Errorf("%s %s/%s was not created", o.GetKind(), p.cozyName(o.GetNamespace()), o.GetName())
		}
	}
}

// checkWebhook checks that the objects under the kube-ovn webhook were
// created through it: the API server called it, failed, and let them in
// (failurePolicy Ignore).
func (p *cozyPlatform) checkWebhook(t *testing.T) {
	t.Helper()
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "etcd-endpoints", Namespace: p.ns["tenant-root"]}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ingress-controller", Namespace: p.ns["tenant-root"]}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx-controller", Namespace: p.ns["tenant-root-cluster"]}},
		cozyObject("monitoring", "VMRule", p.ns["tenant-root"], "monitoring-alerts"),
	} {
		if !exists(t, o) {
			t.Errorf("%s/%s under the webhook was not created", p.cozyName(o.GetNamespace()), o.GetName())
		}
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	name := `name="` + p.ns["cozy-kubeovn"] + `.kube-ovn.platform.cozy-aio.io"`
	var failedOpen float64
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "apiserver_admission_webhook_fail_open_count{") && strings.Contains(line, name) {
			n, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			failedOpen += n
		}
	}
	if failedOpen == 0 {
		t.Error("the API server never failed open on the kube-ovn webhook: the objects did not go through it")
	}
	t.Logf("the kube-ovn webhook failed open %v times", failedOpen)
}
