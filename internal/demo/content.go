package demo

import (
	"fmt"
	"strings"
)

// Names shared by the content, the harness and the checks.
const (
	// SystemNamespace holds the sources, the generator and the platform.
	SystemNamespace = "cozy-system"
	// NetworkRelease is the HelmRelease of the network chart, in
	// SystemNamespace; it installs into kube-system.
	NetworkRelease = "cni"
	// NetworkDaemonSet is the DaemonSet the network chart installs.
	NetworkDaemonSet = "sim-cni"
	// PlatformKustomization applies the tenants.
	PlatformKustomization = "platform"
	// TenantLabel marks tenant namespaces.
	TenantLabel = "demo.cozy-aio.cozystack.io/tenant"
)

// Tenant is one tenant of the demo: a namespace with Releases
// HelmReleases of its own package.
type Tenant struct {
	Name     string
	Releases int
	// Broken tenants get a chart that does not render.
	Broken bool
}

// Tenants spreads tenants×releases HelmReleases over tenants of uneven
// sizes: tenants come in pairs whose sizes are releases±k (k cycling
// 0..releases-1), so the total is exactly tenants×releases and shards see
// uneven weights. When broken, the second tenant (or the only one) gets a
// broken chart.
func Tenants(tenants, releases int, broken bool) []Tenant {
	out := make([]Tenant, tenants)
	for i := range out {
		out[i] = Tenant{Name: fmt.Sprintf("tenant-%03d", i+1), Releases: releases}
	}
	for p := 0; p+1 < tenants; p += 2 {
		k := (p / 2) % releases
		out[p].Releases += k
		out[p+1].Releases -= k
	}
	if broken && tenants > 0 {
		out[min(1, tenants-1)].Broken = true
	}
	return out
}

// networkChart is a DaemonSet standing in for a CNI agent: host network,
// tolerating every taint, labelled so that the simulated network plugin
// recognises its pods.
func networkChart() map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: sim-cni\nversion: 1.0.0\ndescription: A DaemonSet standing in for a CNI agent.\n",
		"values.yaml": "image: registry.local/sim-cni/agent:1.0.0\n",
		"templates/daemonset.yaml": `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: ` + NetworkDaemonSet + `
  labels:
    app.kubernetes.io/name: sim-cni
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: sim-cni
  template:
    metadata:
      labels:
        app.kubernetes.io/name: sim-cni
    spec:
      hostNetwork: true
      priorityClassName: system-node-critical
      tolerations:
      - operator: Exists
      containers:
      - name: agent
        image: {{ .Values.image | quote }}
`,
	}
}

// appChart is each tenant's package: a Deployment and a Service.
func appChart() map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: tenant-app\nversion: 1.0.0\ndescription: A tenant application.\n",
		"values.yaml": "image: registry.local/demo/app:1.0.0\nreplicas: 1\ntenant: none\nsize: small\n",
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels:
    app.kubernetes.io/name: {{ .Release.Name }}
    demo.cozy-aio.cozystack.io/size: {{ .Values.size | quote }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ .Release.Name }}
    spec:
      containers:
      - name: app
        image: {{ .Values.image | quote }}
        ports:
        - containerPort: 8080
`,
		"templates/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
spec:
  selector:
    app.kubernetes.io/name: {{ .Release.Name }}
  ports:
  - port: 80
    targetPort: 8080
`,
	}
}

// brokenTemplate does not render: it is added to a broken tenant's chart.
const brokenTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-broken
data:
  value: {{ required "demo: this chart is broken on purpose (DEMO_BREAK=1)" .Values.brokenOnPurpose }}
`

// configMapsChart renders three ConfigMaps and nothing else: the shape of
// the scale benchmark.
func configMapsChart() map[string]string {
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: configmaps\nversion: 1.0.0\n",
		"values.yaml": "greeting: hello\n",
	}
	for i := 1; i <= 3; i++ {
		files[fmt.Sprintf("templates/cm-%d.yaml", i)] = fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-%d
data:
  greeting: {{ .Values.greeting | quote }}
`, i)
	}
	return files
}

// chartsArtifact is the OCI artifact of packages: one directory per chart,
// with the tenant clusters' addon charts when withAddons.
func chartsArtifact(withAddons bool) map[string]string {
	files := map[string]string{"broken/broken.yaml": brokenTemplate}
	charts := map[string]map[string]string{"network": networkChart(), "app": appChart()}
	if withAddons {
		charts["addon"], charts["addon-crds"] = addonChart(), addonCRDsChart()
	}
	for dir, chart := range charts {
		for p, c := range chart {
			files[dir+"/"+p] = c
		}
	}
	return files
}

// platformRepo is the Git repository of the platform: per-tenant values
// for the generator and the manifests of the platform Kustomization, with
// the addon HelmReleases of that many tenant clusters.
func platformRepo(tenants []Tenant, clusters int) map[string]string {
	files := map[string]string{}
	for i := 1; i <= clusters; i++ {
		name := clusterName(i)
		files["platform/"+name+".yaml"] = clusterReleases(name, name+"-admin-kubeconfig")
	}
	for i, t := range tenants {
		size := []string{"small", "medium", "large"}[i%3]
		files["tenants/"+t.Name+"/values.yaml"] = fmt.Sprintf("tenant: %s\nsize: %s\n", t.Name, size)
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    %s: %q\n", t.Name, TenantLabel, t.Name)
		for r := 1; r <= t.Releases; r++ {
			fmt.Fprintf(&b, `---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: app-%d
  namespace: %s
spec:
  interval: 30m
  timeout: 5m
  chartRef:
    kind: ExternalArtifact
    name: %s
    namespace: %s
  values:
    replicas: 1
`, r, t.Name, t.Name, SystemNamespace)
		}
		files["platform/"+t.Name+".yaml"] = b.String()
	}
	return files
}

// bootstrapObjects is what the node's bootstrap directory holds: the
// sources with their credentials, the generator of per-tenant packages,
// the network HelmRelease (network phase) and the platform Kustomization.
func bootstrapObjects(tenants []Tenant, withAddons bool, gitURL, gitUser, gitPass, ociURL string, dockerConfig []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: platform-git
  namespace: %[1]s
stringData:
  username: %[2]q
  password: %[3]q
---
apiVersion: v1
kind: Secret
metadata:
  name: packages-registry
  namespace: %[1]s
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: %[4]q
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: packages
  namespace: %[1]s
spec:
  url: %[5]s
  insecure: true
  interval: 30m
  ref:
    tag: v1
  secretRef:
    name: packages-registry
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: platform
  namespace: %[1]s
spec:
  url: %[6]s
  interval: 30m
  ref:
    branch: main
  secretRef:
    name: platform-git
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: %[7]s
  namespace: %[1]s
  labels:
    cozy-aio.cozystack.io/phase: network
spec:
  interval: 30m
  timeout: 5m
  releaseName: cni
  targetNamespace: kube-system
  chartRef:
    kind: ExternalArtifact
    name: network
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: %[8]s
  namespace: %[1]s
spec:
  interval: 30m
  prune: true
  path: ./platform
  sourceRef:
    kind: GitRepository
    name: platform
---
apiVersion: source.extensions.fluxcd.io/v1beta1
kind: ArtifactGenerator
metadata:
  name: packages
  namespace: %[1]s
spec:
  sources:
  - alias: charts
    kind: OCIRepository
    name: packages
  - alias: platform
    kind: GitRepository
    name: platform
  artifacts:
  - name: network
    revision: "@charts"
    copy:
    - from: "@charts/network/**"
      to: "@artifact/"
`, SystemNamespace, gitUser, gitPass, string(dockerConfig), ociURL, gitURL, NetworkRelease, PlatformKustomization)
	if withAddons {
		b.WriteString(addonsArtifacts)
	}
	for _, t := range tenants {
		fmt.Fprintf(&b, `  - name: %[1]s
    revision: "@charts"
    copy:
    - from: "@charts/app/**"
      to: "@artifact/"
    - from: "@platform/tenants/%[1]s/values.yaml"
      to: "@artifact/values.yaml"
      strategy: Merge
`, t.Name)
		if t.Broken {
			b.WriteString("    - from: \"@charts/broken/broken.yaml\"\n      to: \"@artifact/templates/broken.yaml\"\n")
		}
	}
	return b.String()
}
