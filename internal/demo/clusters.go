package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/status"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// Tenant clusters (Options.Clusters) are Cozystack's managed Kubernetes:
// each is its own kube-apiserver and etcd, its admin kubeconfig is a
// Secret in the management cluster, and about ten addon HelmReleases in
// the management cluster deploy into it through spec.kubeConfig.

// ClusterLabel names the tenant cluster of an addon HelmRelease.
const ClusterLabel = "demo.cozy-aio.cozystack.io/cluster"

// ClusterDown says what happens to one tenant cluster (the last) during a
// run with tenant clusters.
type ClusterDown string

const (
	// ClusterDownMidway stops the last tenant cluster's API server once its
	// first addon is Ready, and asks for a reconcile of its Ready addons
	// (as `flux reconcile helmrelease` would); its addons must end
	// Ready=False naming its kubeconfig Secret. The default.
	ClusterDownMidway ClusterDown = "midway"
	// ClusterDownStart stops it before cozy-aio starts: it is down for the
	// whole run.
	ClusterDownStart ClusterDown = "start"
	// ClusterDownNone keeps every tenant cluster up.
	ClusterDownNone ClusterDown = "none"
)

// addon is one HelmRelease of a tenant cluster: the chart it takes, what
// it depends on, and the custom resources it creates (whose CRDs another
// addon installs).
type addon struct {
	name, chart string
	dependsOn   []string
	// crd is the kind and plural of the CRD a CRD addon installs; uses the
	// kinds of which an addon creates one object.
	crd  [2]string
	uses []string
}

// addons are each tenant cluster's HelmReleases, shaped as Cozystack's
// (names after its addons; every chart renders ConfigMaps, Services, CRDs
// and custom resources, nothing that needs a node).
var addons = []addon{
	{name: "gateway-api-crds", chart: "addon-crds", crd: [2]string{"Gateway", "gateways"}},
	{name: "cert-manager-crds", chart: "addon-crds", crd: [2]string{"Certificate", "certificates"}},
	{name: "cilium", chart: "addon", dependsOn: []string{"gateway-api-crds"}, uses: []string{"Gateway"}},
	{name: "coredns", chart: "addon", dependsOn: []string{"cilium"}},
	{name: "cert-manager", chart: "addon", dependsOn: []string{"cert-manager-crds", "cilium"}, uses: []string{"Certificate"}},
	{name: "metrics-server", chart: "addon", dependsOn: []string{"cilium"}},
	{name: "ingress-nginx", chart: "addon", dependsOn: []string{"cert-manager"}, uses: []string{"Certificate", "Gateway"}},
	{name: "csi", chart: "addon", dependsOn: []string{"cilium"}},
	{name: "velero", chart: "addon", dependsOn: []string{"csi"}},
	{name: "monitoring-agents", chart: "addon", dependsOn: []string{"metrics-server", "cert-manager"}, uses: []string{"Certificate"}},
}

// ClusterReport is one tenant cluster at the end of a run.
type ClusterReport struct {
	// Name is the cluster's name and the namespace of its HelmReleases in
	// the management cluster; Secret names its kubeconfig Secret as the
	// engine does ("Secret ns/name").
	Name, Secret string
	// Ready of Releases addon HelmReleases were Ready at the end;
	// ReadyAt is when the last of them became Ready (zero unless all).
	Ready, Releases int
	ReadyAt         time.Time
	// Stopped is when its API server was stopped (zero: up all along).
	Stopped time.Time
	// Records are the Helm release records in the tenant cluster at the
	// end (up clusters only), and Pending those pending-*.
	Records, Pending int
	// Requests are the requests cozy-aio sent to the cluster's API server
	// until every unit settled (cozy_aio_remote_cluster_requests_total).
	Requests int
}

// tenantCluster is a running (or stopped) tenant cluster.
type tenantCluster struct {
	// name is the cluster's; namespace holds its kubeconfig Secret and the
	// HelmReleases deploying to it in the management cluster (the demo
	// shape: the name; the scale shape: a tenant's namespace).
	name, namespace string
	cp              *testenv.ControlPlane
	// down is set for the cluster Options.ClusterDown stops.
	down    bool
	stopped time.Time
	// asked are its HelmReleases whose reconcile the harness requested
	// after the stop, because they were Ready.
	asked map[string]bool
	// requests are cozy-aio's requests to it when every unit settled.
	requests int
}

func (c *tenantCluster) secretName() string { return c.name + "-admin-kubeconfig" }

// clusterName is the name of the i-th tenant cluster, from 1.
func clusterName(i int) string { return fmt.Sprintf("k8s-%02d", i) }

// addonsArtifacts are the generator's artifacts of the addon charts.
const addonsArtifacts = `  - name: addon-crds
    revision: "@charts"
    copy:
    - from: "@charts/addon-crds/**"
      to: "@artifact/"
  - name: addon
    revision: "@charts"
    copy:
    - from: "@charts/addon/**"
      to: "@artifact/"
`

// addonCRDsChart installs one CustomResourceDefinition named by its
// values, as gateway-api's and cert-manager's CRD charts do.
func addonCRDsChart() map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: addon-crds\nversion: 1.0.0\ndescription: One CustomResourceDefinition.\n",
		"values.yaml": "kind: Example\nplural: examples\n",
		"templates/crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {{ .Values.plural }}.addons.demo.cozy-aio.io
spec:
  group: addons.demo.cozy-aio.io
  scope: Namespaced
  names:
    kind: {{ .Values.kind }}
    listKind: {{ .Values.kind }}List
    plural: {{ .Values.plural }}
    singular: {{ lower .Values.kind }}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`,
	}
}

// addonChart is every other addon: a ConfigMap, a Service, and one custom
// resource of each kind in .Values.uses.
func addonChart() map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: addon\nversion: 1.0.0\ndescription: A tenant cluster addon.\n",
		"values.yaml": "component: none\nuses: []\n",
		"templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  component: {{ .Values.component | quote }}
`,
		"templates/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
spec:
  ports:
  - port: 443
    targetPort: 8443
`,
		"templates/uses.yaml": `{{- range .Values.uses }}
---
apiVersion: addons.demo.cozy-aio.io/v1
kind: {{ . }}
metadata:
  name: {{ $.Release.Name }}
spec:
  owner: {{ $.Release.Name | quote }}
{{- end }}
`,
	}
}

// clusterReleases is the platform repository's file of one tenant
// cluster's addon HelmReleases, shaped as Cozystack writes them.
func clusterReleases(name, secret string) string {
	var b strings.Builder
	for i, a := range addons {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: %[1]s
  namespace: %[2]s
  labels:
    %[3]s: %[2]s
spec:
  interval: 30m
  timeout: 5m
  releaseName: %[1]s
  chartRef:
    kind: ExternalArtifact
    name: %[4]s
    namespace: %[5]s
  kubeConfig:
    secretRef:
      name: %[6]s
      key: super-admin.svc
  targetNamespace: cozy-%[1]s
  storageNamespace: cozy-%[1]s
  install:
    createNamespace: true
    remediation:
      retries: -1
  upgrade:
    remediation:
      retries: -1
`, a.name, name, ClusterLabel, a.chart, SystemNamespace, secret)
		if len(a.dependsOn) > 0 {
			b.WriteString("  dependsOn:\n")
			for _, d := range a.dependsOn {
				fmt.Fprintf(&b, "  - name: %s\n", d)
			}
		}
		switch {
		case a.crd[0] != "":
			fmt.Fprintf(&b, "  values:\n    kind: %s\n    plural: %s\n", a.crd[0], a.crd[1])
		default:
			fmt.Fprintf(&b, "  values:\n    component: %s\n    uses: [%s]\n", a.name, strings.Join(a.uses, ", "))
		}
	}
	return b.String()
}

// startClusters starts Options.Clusters tenant control planes, two at a
// time, and puts each one's admin kubeconfig in a Secret of the namespace
// of its HelmReleases in the management cluster: namespaces[i] for the
// i-th (the demo shape: the cluster's name). With ClusterDownStart the
// last one is stopped at once.
func (h *harness) startClusters(ctx context.Context, namespaces []string) error {
	n := h.opts.Clusters
	if n == 0 {
		return nil
	}
	h.say("starting %d tenant clusters (a kube-apiserver and etcd each), their admin kubeconfigs in Secrets", n)
	h.clusters = make([]*tenantCluster, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for i := range n {
		c := &tenantCluster{name: clusterName(i + 1), namespace: clusterName(i + 1), down: i == n-1 && h.opts.ClusterDown != ClusterDownNone}
		if i < len(namespaces) {
			c.namespace = namespaces[i]
		}
		h.clusters[i] = c
		g.Go(func() error {
			logs := filepath.Join(h.logs, c.name)
			if err := os.MkdirAll(logs, 0o755); err != nil {
				return err
			}
			var err error
			// With the audit log on, each tenant API server writes its own,
			// to break cozy-aio's requests to it down (RemoteBreakdown).
			var args map[string]string
			if a := h.auditArgs(); a != nil {
				a["audit-log-path"] = filepath.Join(logs, "audit.log")
				args = a
			}
			if c.cp, err = testenv.StartControlPlane(testenv.ControlPlaneOptions{LogDir: logs, StartTimeout: 2 * time.Minute, APIServerArgs: args}); err != nil {
				return fmt.Errorf("tenant cluster %s: %w", c.name, err)
			}
			kc, err := c.cp.Kubeconfig(clusterUser, "system:masters")
			if err != nil {
				return err
			}
			for _, o := range []client.Object{
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}},
				&corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: c.secretName(), Namespace: c.namespace},
					Data:       map[string][]byte{"super-admin.svc": kc},
				},
			} {
				if err := h.c.Create(gctx, o); client.IgnoreAlreadyExists(err) != nil {
					return fmt.Errorf("tenant cluster %s: %w", c.name, err)
				}
			}
			if c.namespace != c.name {
				// The scale shape's releases install into their own
				// namespace, which exists in the tenant cluster as it does
				// in the management cluster for the local ones.
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}
				if err := c.cp.Client.Create(gctx, ns); err != nil {
					return fmt.Errorf("tenant cluster %s: %w", c.name, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if h.opts.ClusterDown == ClusterDownStart {
		h.stopCluster(ctx, h.clusters[n-1])
	}
	return nil
}

// stopCluster stops a tenant cluster's API server and etcd, and asks for a
// reconcile of its Ready addons, as `flux reconcile helmrelease` would:
// without it they stay Ready until their next interval, which is what Flux
// does too.
func (h *harness) stopCluster(ctx context.Context, c *tenantCluster) {
	_ = c.cp.Stop()
	c.stopped = time.Now()
	h.say("tenant cluster %s stopped (its API server and etcd)", c.name)
}

// askStoppedReady requests a reconcile of each HelmRelease of a stopped
// cluster that is Ready, once: the stop takes up to half a minute (the API
// server's graceful shutdown), and an install may complete in that time,
// after the last look before the stop.
func (h *harness) askStoppedReady(ctx context.Context, c *tenantCluster, units []Unit) {
	at := time.Now().Format(time.RFC3339Nano)
	for _, u := range units {
		if u.Kind != "HelmRelease" || u.Namespace != c.namespace || !u.Ready || c.asked[u.Name] {
			continue
		}
		if c.asked == nil {
			c.asked = map[string]bool{}
		}
		c.asked[u.Name] = true
		h.say("asking for a reconcile of %s/%s, Ready on the stopped cluster %s", c.namespace, u.Name, c.name)
		obj := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: u.Name}}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, at)
		if err := h.c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			h.say("requesting a reconcile of %s/%s: %v", c.namespace, u.Name, err)
		}
	}
}

// clusterStep stops the ClusterDownMidway cluster once its first addon is
// Ready, then asks for a reconcile of its releases that are Ready.
func (h *harness) clusterStep(ctx context.Context, units []Unit) {
	if h.opts.ClusterDown != ClusterDownMidway || len(h.clusters) == 0 {
		return
	}
	c := h.clusters[len(h.clusters)-1]
	if !c.stopped.IsZero() {
		h.askStoppedReady(ctx, c, units)
		return
	}
	for _, u := range units {
		if u.Kind == "HelmRelease" && u.Namespace == c.namespace && u.Ready {
			h.stopCluster(ctx, c)
			return
		}
	}
}

// stoppedCluster returns the stopped tenant cluster a unit deploys to, or
// nil.
func (h *harness) stoppedCluster(u Unit) *tenantCluster {
	for _, c := range h.clusters {
		if !c.stopped.IsZero() && u.Kind == "HelmRelease" && u.Namespace == c.namespace {
			return c
		}
	}
	return nil
}

// downAsExpected is true when a unit of a stopped cluster has ended as it
// should: not Ready, and either failing naming the cluster's Secret (it
// keeps retrying with backoff, so it may still say Reconciling) or
// waiting on an addon that does.
func downAsExpected(u Unit, c *tenantCluster) bool {
	switch {
	case u.Ready:
		return false
	case u.Reason == "DependencyNotReady":
		return true
	default:
		return strings.Contains(u.Message, c.namespace+"/"+c.secretName())
	}
}

// clusterReleases is the number of addon HelmReleases of the run (the
// demo shape; the scale shape's remote releases are tenants' releases).
func (h *harness) clusterReleases() int {
	if h.opts.Scale {
		return 0
	}
	return len(h.clusters) * len(addons)
}

// verifyClusters reports each tenant cluster and checks that every addon
// of an up cluster is installed there once, with its record in its
// storage namespace, nothing pending and nothing of it in the management
// cluster; and that the stopped cluster's addons ended Ready=False naming
// its Secret.
func (h *harness) verifyClusters(ctx context.Context) {
	if len(h.clusters) == 0 || h.opts.ClustersUnused {
		return
	}
	var bad, down []string
	upReleases := 0
	for _, c := range h.clusters {
		rep := ClusterReport{Name: c.name, Secret: "Secret " + c.namespace + "/" + c.secretName(), Stopped: c.stopped, Requests: c.requests}
		var last time.Time
		var want []string
		for _, u := range h.res.Units {
			if u.Kind != "HelmRelease" || u.Namespace != c.namespace {
				continue
			}
			rep.Releases++
			want = append(want, h.storedAs(u))
			if u.Cluster != rep.Secret {
				bad = append(bad, fmt.Sprintf("%s reports cluster %q, want %q", u, u.Cluster, rep.Secret))
			}
			switch {
			case u.Ready:
				rep.Ready++
				if u.ReadySince.After(last) {
					last = u.ReadySince
				}
			case !c.stopped.IsZero() && !downAsExpected(u, c):
				down = append(down, fmt.Sprintf("%s (%s: %s)", u, u.Reason, u.Message))
			}
		}
		if rep.Ready == rep.Releases && rep.Releases > 0 {
			rep.ReadyAt = last
		}
		if c.stopped.IsZero() {
			upReleases += rep.Releases
			if rep.Ready != rep.Releases || rep.Releases == 0 {
				bad = append(bad, fmt.Sprintf("%s: %d of %d HelmReleases Ready", c.name, rep.Ready, rep.Releases))
			}
			var secrets corev1.SecretList
			if err := c.cp.Client.List(ctx, &secrets, client.MatchingLabels{"owner": "helm"}); err != nil {
				bad = append(bad, fmt.Sprintf("%s: listing its release records: %v", c.name, err))
			} else {
				records := recordsOf(secrets.Items)
				once, pending := checkRecords(records, want)
				rep.Records, rep.Pending = len(records), len(pending)
				bad = append(bad, prefixAll(c.name+": ", append(once, pending...))...)
			}
		} else if rep.Ready > 0 {
			down = append(down, fmt.Sprintf("%s: %d HelmReleases still Ready after its API server stopped", c.name, rep.Ready))
		}
		h.res.Clusters = append(h.res.Clusters, rep)
	}
	// Nothing of the remote releases in the management cluster.
	remote := map[string]bool{}
	for _, c := range h.clusters {
		for _, u := range h.res.Units {
			if u.Kind == "HelmRelease" && u.Namespace == c.namespace {
				remote[h.storedAs(u)] = true
			}
		}
	}
	var secrets corev1.SecretList
	if err := h.c.List(ctx, &secrets, client.MatchingLabels{"owner": "helm"}); err == nil {
		for _, r := range recordsOf(secrets.Items) {
			if remote[r.Namespace+"/"+r.Name] {
				bad = append(bad, "a release record in the management cluster: "+r.String())
			}
		}
	}
	h.check("tenant clusters", len(bad) == 0,
		"%d HelmReleases on %d up tenant clusters: each Ready, installed once in its cluster (record v1 deployed in its storage namespace, nothing pending), nothing in the management cluster%s",
		upReleases, h.upClusters(), joinBad(bad))
	for _, c := range h.clusters {
		if c.stopped.IsZero() {
			continue
		}
		h.check("stopped cluster", len(down) == 0,
			"tenant cluster %s stopped %.1fs after the start: each of its HelmReleases Ready=False naming Secret %s/%s (or waiting on one that does)%s",
			c.name, c.stopped.Sub(h.res.Started).Seconds(), c.namespace, c.secretName(), joinBad(down))
	}
}

func (h *harness) upClusters() int {
	n := 0
	for _, c := range h.clusters {
		if c.stopped.IsZero() {
			n++
		}
	}
	return n
}

func prefixAll(prefix string, in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = prefix + s
	}
	return out
}

// clusterSummary prints the tenant clusters' table.
func (h *harness) clusterSummary() {
	r, out := h.res, h.opts.Out
	if len(r.Clusters) == 0 {
		return
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT CLUSTER\tRELEASES READY\tALL READY (FROM COZY-AIO'S START)\tRELEASE RECORDS THERE\tREQUESTS TO IT\tSTATE")
	clusters := append([]ClusterReport(nil), r.Clusters...)
	sort.Slice(clusters, func(i, j int) bool { return clusters[i].Name < clusters[j].Name })
	for _, c := range clusters {
		ready, state, records := "-", "up", "-"
		if !c.ReadyAt.IsZero() {
			ready = fmt.Sprintf("%.1fs", c.ReadyAt.Sub(r.CozyStarted).Seconds())
		}
		if !c.Stopped.IsZero() {
			state = fmt.Sprintf("stopped at %.1fs: addons Ready=False naming %s", c.Stopped.Sub(r.Started).Seconds(), c.Secret)
		} else {
			records = fmt.Sprintf("%d (%d pending)", c.Records, c.Pending)
		}
		requests := "-" // not scraped with several replicas
		if c.Requests > 0 {
			requests = fmt.Sprint(c.Requests)
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%s\t%s\n", c.Name, c.Ready, c.Releases, ready, records, requests, state)
	}
	tw.Flush()
}

// stopClusters stops every tenant cluster still running.
func (h *harness) stopClusters() {
	for _, c := range h.clusters {
		if c.cp != nil && c.stopped.IsZero() {
			_ = c.cp.Stop()
		}
	}
}

// storedAs is where a HelmRelease's Helm records are, as
// "storage-namespace/release-name": the demo's addons name both; the scale
// shape's releases take Flux's defaults (their own namespace and name).
func (h *harness) storedAs(u Unit) string {
	if h.opts.Scale {
		return u.Namespace + "/" + u.Name
	}
	return "cozy-" + u.Name + "/" + u.Name
}

// remoteBreakdown sums cozy-aio's requests to the tenant clusters by verb
// and resource from their audit logs (Options.Audit).
func (h *harness) remoteBreakdown() Requests {
	if !h.opts.Audit || h.opts.ClustersUnused {
		return nil
	}
	out := Requests{}
	for _, c := range h.clusters {
		reqs, _, err := countRequests(filepath.Join(h.logs, c.name, "audit.log"), 0, clusterUser)
		if err != nil {
			continue
		}
		for k, n := range reqs {
			out[k] += n
		}
	}
	return out
}

// clusterUser is the user of the tenant clusters' admin kubeconfigs.
const clusterUser = "cluster-admin"

// remoteRequests records each tenant cluster's requests from cozy-aio's
// metrics, and returns their sum.
func (h *harness) remoteRequests(remote map[string]*status.RemoteMetrics) int {
	total := 0
	for _, c := range h.clusters {
		if r := remote["Secret "+c.namespace+"/"+c.secretName()]; r != nil {
			c.requests = r.Requests
			total += r.Requests
		}
	}
	return total
}
