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
}

// tenantCluster is a running (or stopped) tenant cluster.
type tenantCluster struct {
	name string
	cp   *testenv.ControlPlane
	// down is set for the cluster Options.ClusterDown stops.
	down     bool
	stopped  time.Time
	requests bool
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
// of its addons in the management cluster. With ClusterDownStart the last
// one is stopped at once.
func (h *harness) startClusters(ctx context.Context) error {
	n := h.opts.Clusters
	if n == 0 {
		return nil
	}
	h.say("starting %d tenant clusters (a kube-apiserver and etcd each), their admin kubeconfigs in Secrets", n)
	h.clusters = make([]*tenantCluster, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for i := range n {
		c := &tenantCluster{name: clusterName(i + 1), down: i == n-1 && h.opts.ClusterDown != ClusterDownNone}
		h.clusters[i] = c
		g.Go(func() error {
			logs := filepath.Join(h.logs, c.name)
			if err := os.MkdirAll(logs, 0o755); err != nil {
				return err
			}
			var err error
			if c.cp, err = testenv.StartControlPlane(testenv.ControlPlaneOptions{LogDir: logs, StartTimeout: 2 * time.Minute}); err != nil {
				return fmt.Errorf("tenant cluster %s: %w", c.name, err)
			}
			kc, err := c.cp.Kubeconfig("cluster-admin", "system:masters")
			if err != nil {
				return err
			}
			for _, o := range []client.Object{
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.name}},
				&corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: c.secretName(), Namespace: c.name},
					Data:       map[string][]byte{"super-admin.svc": kc},
				},
			} {
				if err := h.c.Create(gctx, o); err != nil {
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
		h.stopCluster(ctx, h.clusters[n-1], nil)
	}
	return nil
}

// stopCluster stops a tenant cluster's API server and etcd, and asks for a
// reconcile of its Ready addons, as `flux reconcile helmrelease` would:
// without it they stay Ready until their next interval, which is what Flux
// does too.
func (h *harness) stopCluster(ctx context.Context, c *tenantCluster, units []Unit) {
	_ = c.cp.Stop()
	c.stopped = time.Now()
	var ready []string
	for _, u := range units {
		if u.Kind == "HelmRelease" && u.Namespace == c.name && u.Ready {
			ready = append(ready, u.Name)
		}
	}
	h.say("tenant cluster %s stopped (its API server and etcd); asking for a reconcile of its %d Ready addons", c.name, len(ready))
	at := time.Now().Format(time.RFC3339Nano)
	for _, name := range ready {
		obj := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: c.name, Name: name}}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, at)
		if err := h.c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			h.say("requesting a reconcile of %s/%s: %v", c.name, name, err)
		}
	}
}

// clusterStep stops the ClusterDownMidway cluster once its first addon is
// Ready.
func (h *harness) clusterStep(ctx context.Context, units []Unit) {
	if h.opts.ClusterDown != ClusterDownMidway || len(h.clusters) == 0 {
		return
	}
	c := h.clusters[len(h.clusters)-1]
	if !c.stopped.IsZero() {
		return
	}
	for _, u := range units {
		if u.Kind == "HelmRelease" && u.Namespace == c.name && u.Ready {
			h.stopCluster(ctx, c, units)
			return
		}
	}
}

// stoppedCluster returns the stopped tenant cluster a unit deploys to, or
// nil.
func (h *harness) stoppedCluster(u Unit) *tenantCluster {
	for _, c := range h.clusters {
		if !c.stopped.IsZero() && u.Kind == "HelmRelease" && u.Namespace == c.name {
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
		return strings.Contains(u.Message, c.name+"/"+c.secretName())
	}
}

// clusterReleases is the number of addon HelmReleases of the run.
func (h *harness) clusterReleases() int { return len(h.clusters) * len(addons) }

// verifyClusters reports each tenant cluster and checks that every addon
// of an up cluster is installed there once, with its record in its
// storage namespace, nothing pending and nothing of it in the management
// cluster; and that the stopped cluster's addons ended Ready=False naming
// its Secret.
func (h *harness) verifyClusters(ctx context.Context) {
	if len(h.clusters) == 0 {
		return
	}
	var bad, down []string
	upReleases := 0
	for _, c := range h.clusters {
		rep := ClusterReport{Name: c.name, Secret: "Secret " + c.name + "/" + c.secretName(), Stopped: c.stopped}
		var last time.Time
		for _, u := range h.res.Units {
			if u.Kind != "HelmRelease" || u.Namespace != c.name {
				continue
			}
			rep.Releases++
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
			if rep.Ready != len(addons) {
				bad = append(bad, fmt.Sprintf("%s: %d of %d addons Ready", c.name, rep.Ready, len(addons)))
			}
			var secrets corev1.SecretList
			if err := c.cp.Client.List(ctx, &secrets, client.MatchingLabels{"owner": "helm"}); err != nil {
				bad = append(bad, fmt.Sprintf("%s: listing its release records: %v", c.name, err))
			} else {
				records := recordsOf(secrets.Items)
				var want []string
				for _, a := range addons {
					want = append(want, "cozy-"+a.name+"/"+a.name)
				}
				once, pending := checkRecords(records, want)
				rep.Records, rep.Pending = len(records), len(pending)
				bad = append(bad, prefixAll(c.name+": ", append(once, pending...))...)
			}
		} else if rep.Ready > 0 {
			down = append(down, fmt.Sprintf("%s: %d addons still Ready after its API server stopped", c.name, rep.Ready))
		}
		h.res.Clusters = append(h.res.Clusters, rep)
	}
	// Nothing of the addons in the management cluster.
	var secrets corev1.SecretList
	if err := h.c.List(ctx, &secrets, client.MatchingLabels{"owner": "helm"}); err == nil {
		for _, s := range secrets.Items {
			if strings.HasPrefix(s.Namespace, "cozy-") && s.Namespace != SystemNamespace {
				bad = append(bad, "a release record in the management cluster: "+s.Namespace+"/"+s.Name)
			}
		}
	}
	h.check("tenant clusters", len(bad) == 0,
		"%d addon HelmReleases on %d up tenant clusters: each Ready, installed once in its cluster (record v1 deployed in its storage namespace, nothing pending), nothing in the management cluster%s",
		upReleases, h.upClusters(), joinBad(bad))
	for _, c := range h.clusters {
		if c.stopped.IsZero() {
			continue
		}
		h.check("stopped cluster", len(down) == 0,
			"tenant cluster %s stopped %.1fs after the start: each of its %d addons Ready=False naming Secret %s/%s (or waiting on one that does)%s",
			c.name, c.stopped.Sub(h.res.Started).Seconds(), len(addons), c.name, c.secretName(), joinBad(down))
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
	fmt.Fprintln(tw, "TENANT CLUSTER\tADDONS READY\tALL READY (FROM COZY-AIO'S START)\tRELEASE RECORDS THERE\tSTATE")
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
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%s\n", c.Name, c.Ready, c.Releases, ready, records, state)
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
