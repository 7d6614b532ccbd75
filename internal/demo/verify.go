package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/bootstrap"
	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

func (h *harness) nodesWithNetwork(ctx context.Context) (ready, total int) {
	var nodes corev1.NodeList
	if err := h.c.List(ctx, &nodes); err != nil {
		return 0, 0
	}
	for i := range nodes.Items {
		if ok, _ := bootstrap.NodeNetworkReady(&nodes.Items[i]); ok {
			ready++
		}
	}
	return ready, len(nodes.Items)
}

func (h *harness) check(name string, ok bool, format string, args ...any) {
	h.res.Checks = append(h.res.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

// verify checks the run from the objects' own timestamps, and a run with
// several replicas from their reports and the release records.
func (h *harness) verify(ctx context.Context) {
	h.verifyRun(ctx)
	h.verifyPage(ctx)
	switch {
	case h.res.Failover != nil:
		h.verifyReplicas(ctx)
	case len(h.res.Replicas) > 1:
		h.countHolders(ctx)
	}
}

func (h *harness) verifyRun(ctx context.Context) {
	for _, u := range h.res.Units {
		switch c := h.stoppedCluster(u); {
		case u.Ready:
		case c != nil && downAsExpected(u, c):
			h.res.Expected = append(h.res.Expected, u)
		default:
			h.res.Failed = append(h.res.Failed, u)
		}
	}
	h.verifyClusters(ctx)
	if h.opts.Scale {
		h.verifyScale(ctx)
		return
	}
	// Phase order: the network agent's pods ran before any tenant release
	// was stored by Helm.
	var pods corev1.PodList
	if err := h.c.List(ctx, &pods, client.InNamespace("kube-system"), client.MatchingLabels(testenv.DefaultNetworkPodLabels)); err != nil || len(pods.Items) == 0 {
		h.check("phase order", false, "no network agent pods found (%v)", err)
	} else {
		for _, p := range pods.Items {
			if t := readyTime(p.Status.Conditions); t.After(h.res.NetworkPodsRunning) {
				h.res.NetworkPodsRunning = t
			}
		}
	}
	var nodes corev1.NodeList
	if err := h.c.List(ctx, &nodes); err == nil {
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionFalse && c.LastTransitionTime.After(h.res.NetworkReady) {
					h.res.NetworkReady = c.LastTransitionTime.Time
				}
			}
		}
	}
	tenantNS := map[string]bool{}
	for _, t := range h.res.Tenants {
		tenantNS[t.Name] = true
	}
	var secrets corev1.SecretList
	if err := h.c.List(ctx, &secrets, client.MatchingLabels{"owner": "helm"}); err == nil {
		for _, s := range secrets.Items {
			if tenantNS[s.Namespace] && (h.res.FirstInstall.IsZero() || s.CreationTimestamp.Time.Before(h.res.FirstInstall)) {
				h.res.FirstInstall = s.CreationTimestamp.Time
			}
		}
	}
	if !h.res.NetworkPodsRunning.IsZero() {
		switch {
		case h.res.FirstInstall.IsZero():
			h.check("phase order", false, "no tenant release was installed")
		default:
			gap := h.res.FirstInstall.Sub(h.res.NetworkPodsRunning)
			h.check("phase order", !h.res.FirstInstall.Before(h.res.NetworkPodsRunning),
				"network agent pods Running at %s, first tenant release stored at %s (%+.0fs later; timestamps have 1 s resolution)",
				h.res.NetworkPodsRunning.Format(time.TimeOnly), h.res.FirstInstall.Format(time.TimeOnly), gap.Seconds())
		}
	}
	// Each Ready tenant release became Ready only after its Deployment was
	// Available, and each Deployment really is Available.
	var hrs helmv2.HelmReleaseList
	if err := h.c.List(ctx, &hrs); err != nil {
		h.check("ready after available", false, "listing HelmReleases: %v", err)
		return
	}
	var checked, available int
	var bad, flipped []string
	for _, hr := range hrs.Items {
		if !tenantNS[hr.Namespace] {
			continue
		}
		hrReady := readyTime(hr.Status.Conditions)
		key := client.ObjectKey{Namespace: hr.Namespace, Name: hr.Name}
		depAvailable, depState := h.deploymentAvailable(ctx, key, !hrReady.IsZero())
		if !depAvailable.IsZero() {
			available++
			// Compared with the first time it was Available: the
			// simulator can take a pod's Ready away for a moment.
			first, lost := h.avail.firstAvailable(key)
			if !first.IsZero() && first.Before(depAvailable) {
				depAvailable = first
			}
			if lost > 0 {
				flipped = append(flipped, fmt.Sprintf("%s/%s (%d)", hr.Namespace, hr.Name, lost))
			}
		}
		if hrReady.IsZero() {
			continue // not Ready: listed with the failures
		}
		checked++
		switch {
		case depAvailable.IsZero():
			bad = append(bad, fmt.Sprintf("%s/%s is Ready (since %s) but its Deployment is not Available: %s",
				hr.Namespace, hr.Name, hrReady.Format(time.TimeOnly), depState))
		case hrReady.Before(depAvailable):
			bad = append(bad, fmt.Sprintf("%s/%s Ready at %s before its Deployment was Available at %s", hr.Namespace, hr.Name, hrReady.Format(time.TimeOnly), depAvailable.Format(time.TimeOnly)))
		}
	}
	apps := h.tenantReleases() - h.brokenReleases()
	h.check("deployments available", available == apps, "%d of %d tenant Deployments Available through the simulator", available, apps)
	lost := ""
	if len(flipped) > 0 {
		lost = fmt.Sprintf(" (first Available; Available again after a pod's Ready was taken away: %s)", strings.Join(flipped, ", "))
	}
	h.check("ready after available", checked > 0 && len(bad) == 0,
		"%d Ready tenant HelmReleases, each Ready no earlier than its Deployment became Available%s%s", checked, lost, joinBad(bad))
}

// deploymentAvailable returns when the Deployment's Available condition
// last became True, or zero and a description of the Deployment. The
// harness reads it within 100 ms of the last unit settling, which the
// simulator's controllers may not have written yet on a loaded machine;
// when wait is set it reads again for up to 10 s. The caller compares the
// transition time with the release's Ready time, so a release Ready before
// its Deployment still fails.
func (h *harness) deploymentAvailable(ctx context.Context, key client.ObjectKey, wait bool) (time.Time, string) {
	var available time.Time
	var dep appsv1.Deployment
	state, found := "not found", false
	read := func(ctx context.Context) (bool, error) {
		if err := h.c.Get(ctx, key, &dep); err != nil {
			state = err.Error()
			return !wait, nil
		}
		found = true
		for _, c := range dep.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				available = c.LastTransitionTime.Time
				return true, nil
			}
		}
		state = describeDeployment(&dep)
		return !wait, nil
	}
	_ = kwait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, read)
	if found && available.IsZero() {
		h.dumpApp(ctx, &dep)
	}
	return available, state
}

// dumpApp writes a tenant application's Deployment (as last read), its
// ReplicaSets and Pods to logs/<namespace>-<name>.json, to see where the
// simulator stopped.
func (h *harness) dumpApp(ctx context.Context, dep *appsv1.Deployment) {
	sel := client.MatchingLabels{"app.kubernetes.io/name": dep.Name}
	var rss appsv1.ReplicaSetList
	var pods corev1.PodList
	_ = h.c.List(ctx, &rss, client.InNamespace(dep.Namespace), sel)
	_ = h.c.List(ctx, &pods, client.InNamespace(dep.Namespace), sel)
	b, err := json.MarshalIndent(map[string]any{"deployment": dep, "replicaSets": rss.Items, "pods": pods.Items}, "", "  ")
	if err == nil {
		_ = os.WriteFile(filepath.Join(h.logs, dep.Namespace+"-"+dep.Name+".json"), b, 0o644)
	}
}

// describeDeployment names a Deployment's generations, replica counts and
// conditions, for a failed check.
func describeDeployment(d *appsv1.Deployment) string {
	var conds []string
	for _, c := range d.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s since %s", c.Type, c.Status, c.Reason, c.LastTransitionTime.Format(time.TimeOnly)))
	}
	spec := int32(1)
	if d.Spec.Replicas != nil {
		spec = *d.Spec.Replicas
	}
	return fmt.Sprintf("generation %d observed %d, replicas spec %d status %d updated %d ready %d available %d, conditions [%s]",
		d.Generation, d.Status.ObservedGeneration, spec, d.Status.Replicas, d.Status.UpdatedReplicas,
		d.Status.ReadyReplicas, d.Status.AvailableReplicas, strings.Join(conds, ", "))
}

func (h *harness) brokenReleases() int {
	n := 0
	for _, t := range h.res.Tenants {
		if t.Broken {
			n += t.Releases
		}
	}
	return n
}

func joinBad(bad []string) string {
	if len(bad) == 0 {
		return ""
	}
	if len(bad) > 5 {
		bad = append(bad[:5], fmt.Sprintf("and %d more", len(bad)-5))
	}
	return "; violations: " + strings.Join(bad, "; ")
}

func readyTime(conds any) time.Time {
	switch cs := conds.(type) {
	case []metav1.Condition:
		for _, c := range cs {
			if c.Type == "Ready" && c.Status == metav1.ConditionTrue {
				return c.LastTransitionTime.Time
			}
		}
	case []corev1.PodCondition:
		for _, c := range cs {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return c.LastTransitionTime.Time
			}
		}
	}
	return time.Time{}
}

// verdict is nil when every unit is Ready and every check holds;
// otherwise it names the failed units (and so their tenants) and checks.
func (h *harness) verdict() error {
	var parts []string
	for _, u := range h.res.Failed {
		parts = append(parts, fmt.Sprintf("%s is not Ready (%s: %s)", u, u.Reason, u.Message))
	}
	for _, c := range h.res.Checks {
		if !c.OK {
			parts = append(parts, fmt.Sprintf("check %q failed: %s", c.Name, c.Detail))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return errors.New(strings.Join(parts, "\n"))
}

// summary prints the table a user reads at the end.
func (h *harness) summary() {
	r, out := h.res, h.opts.Out
	shape := fmt.Sprintf("%d tenants, %d tenant HelmReleases", len(r.Tenants), h.expectedReleases())
	if !h.opts.Scale {
		shape = fmt.Sprintf("%d tenants, %d tenant HelmReleases + the network release, %d simulated nodes", len(r.Tenants), h.tenantReleases(), h.opts.Nodes)
	}
	switch {
	case len(h.clusters) > 0 && h.opts.ClustersUnused:
		shape += fmt.Sprintf("; %d tenant clusters running, unused (every release is local)", len(h.clusters))
	case len(h.clusters) > 0 && h.opts.Scale:
		shape += fmt.Sprintf("; the first %d tenants' releases on a tenant cluster each", len(h.clusters))
	case len(h.clusters) > 0:
		shape += fmt.Sprintf("; %d tenant clusters with %d addon HelmReleases each", len(h.clusters), len(addons))
	}
	fmt.Fprintf(out, "\n== cozy-aio demo summary: %s ==\n\n", shape)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tREADY\tTOTAL")
	for _, c := range countUnits(r.Units) {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", c.Kind, c.Ready, c.Total)
	}
	tw.Flush()
	if len(r.Shards) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SHARD\tLOAD (HelmReleases)\tTENANTS")
		for _, s := range r.Shards {
			fmt.Fprintf(tw, "%d\t%d\t%d\n", s.ID, s.Load, s.Tenants)
		}
		tw.Flush()
	}
	if len(r.Replicas) > 0 {
		h.replicaSummary()
	}
	h.clusterSummary()
	if r.Page != nil {
		fmt.Fprintf(out, "\n%s\n", r.Page)
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIMELINE\tSINCE START")
	at := func(name string, t time.Time) {
		if !t.IsZero() {
			fmt.Fprintf(tw, "%s\t%.1fs\n", name, t.Sub(r.Started).Seconds())
		}
	}
	at("cluster and sources up", r.ClusterUp)
	at("cozy-aio started", r.CozyStarted)
	at("network agent pods Running", r.NetworkPodsRunning)
	at("every node has a network", r.NetworkReady)
	at("first tenant release installed", r.FirstInstall)
	if f := r.Failover; f != nil {
		at("leader "+f.Killed+" killed", f.At)
		at("new leader "+f.NewLeader, f.LeaderAt)
		at(f.Killed+"'s shards owned by others", f.ShardsAt)
		at(f.Killed+" restarted", f.Restarted)
	}
	at("every unit settled", r.AllSettled)
	tw.Flush()
	fmt.Fprintln(out)
	if !r.AllSettled.IsZero() {
		fmt.Fprintf(out, "cozy-aio: %.1fs from its start to every unit settled", r.AllSettled.Sub(r.CozyStarted).Seconds())
		if !r.NetworkReady.IsZero() {
			fmt.Fprintf(out, ", %.1fs from the network being ready", r.AllSettled.Sub(r.NetworkReady).Seconds())
		}
		if len(r.Replicas) > 0 {
			fmt.Fprintf(out, "; peak RSS %.0f MB (largest replica); CPU %.1fs (every replica)\n", float64(r.PeakRSS)/(1<<20), r.CPU.Seconds())
		} else {
			fmt.Fprintf(out, "; peak RSS %.0f MB; CPU %.1fs\n", float64(r.PeakRSS)/(1<<20), r.CPU.Seconds())
		}
		if r.Memory != nil {
			fmt.Fprintln(out, r.Memory)
		}
		if r.MachineSpeed > 0 {
			fmt.Fprintf(out, "machine speed before the run: %.0f JSON round trips/s on %d CPUs (runs compare at equal speed)\n", r.MachineSpeed, runtime.NumCPU())
		}
		if len(r.Requests) > 0 {
			var total int
			var methods []string
			for m, n := range r.Requests {
				total += n
				methods = append(methods, fmt.Sprintf("%s %d", m, n))
			}
			sort.Strings(methods)
			fmt.Fprintf(out, "cozy-aio API requests: %d (%.1f per HelmRelease): %s\n", total, float64(total)/float64(h.expectedReleases()), strings.Join(methods, ", "))
		}
		if len(h.clusters) > 0 && !h.opts.ClustersUnused && r.RemoteRequests > 0 {
			remote := 0
			for _, u := range r.Units {
				for _, c := range h.clusters {
					if u.Kind == "HelmRelease" && u.Namespace == c.namespace {
						remote++
					}
				}
			}
			fmt.Fprintf(out, "of which to the %d tenant clusters' API servers: %d (%.1f per remote HelmRelease, %d of them)\n",
				len(h.clusters), r.RemoteRequests, float64(r.RemoteRequests)/float64(max(1, remote)), remote)
		}
		if r.APIServerCPU > 0 {
			fmt.Fprintf(out, "CPU from cozy-aio's start to every unit settled: kube-apiserver %.1fs, etcd %.1fs, cozy-aio %.1fs\n",
				r.APIServerCPU.Seconds(), r.EtcdCPU.Seconds(), r.CPU.Seconds())
		}
		h.requestsTable("cozy-aio API requests by verb and resource (API server audit log)", r.Breakdown)
		h.requestsTable("cozy-aio API requests to the tenant clusters by verb and resource (their audit logs)", r.RemoteBreakdown)
	}
	for _, rs := range r.Restarts {
		fmt.Fprintf(out, "\nrestart with every unit Ready, %s: every HelmRelease confirmed %.1fs after the start (%d Helm runs); %d new release revisions; %d ConfigMap writes; CPU %.1fs; peak RSS %.0f MB\n",
			rs.Name, rs.Confirmed.Seconds(), rs.Runs, rs.Revisions, rs.Requests.Writes("configmaps"), rs.CPU.Seconds(), float64(rs.PeakRSS)/(1<<20))
		h.requestsTable("its API requests by verb and resource", rs.Requests)
	}
	if c := r.Idle; c != nil {
		fmt.Fprintf(out, "\nidle for %s with nothing changing: cozy-aio %.2f CPU-s per minute, kube-apiserver %.2f, etcd %.2f; %d API requests (%.1f per minute)\n",
			c.Duration.Round(time.Second), c.PerMinute(c.CPU).Seconds(), c.PerMinute(c.APIServer).Seconds(), c.PerMinute(c.Etcd).Seconds(),
			c.Requests.Total(), float64(c.Requests.Total())*time.Minute.Seconds()/c.Duration.Seconds())
		for _, l := range c.Requests.Lines(0) {
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "[%s] %s: %s\n", mark, c.Name, c.Detail)
	}
	if len(r.Expected) > 0 {
		fmt.Fprintf(out, "\n%d addons of the stopped tenant cluster are Ready=False, as they should be; for example:\n", len(r.Expected))
		for _, u := range r.Expected[:min(3, len(r.Expected))] {
			fmt.Fprintf(out, "  %s: %s: %s\n", u, u.Reason, u.Message)
		}
	}
	if len(r.Failed) > 0 {
		fmt.Fprintf(out, "\n%d units are not Ready:\n", len(r.Failed))
		for _, u := range r.Failed {
			fmt.Fprintf(out, "  %s: %s: %s\n", u, u.Reason, u.Message)
		}
	}
	fmt.Fprintf(out, "\nlogs: %s\n", h.logs)
}

// requestsTable prints requests by verb and resource with their share per
// release, under a title with the total.
func (h *harness) requestsTable(title string, reqs Requests) {
	if len(reqs) == 0 {
		return
	}
	n := h.expectedReleases()
	fmt.Fprintf(h.opts.Out, "%s: %d (%.2f per HelmRelease)\n", title, reqs.Total(), float64(reqs.Total())/float64(n))
	for _, l := range reqs.Lines(n) {
		fmt.Fprintf(h.opts.Out, "  %s\n", l)
	}
}

// seedScale creates the scale shape: one OCIRepository with a chart of
// three ConfigMaps and every tenant's HelmReleases referring to it.
func (h *harness) seedScale(ctx context.Context) error {
	if _, err := h.reg.PushChart(ctx, "charts/configmaps", configMapsChart()); err != nil {
		return err
	}
	// The HelmReleases exist before cozy-aio starts, as in the reference
	// measurement; their CRDs are installed the way cozy-aio installs them.
	if err := engine.InstallCRDs(ctx, h.cp.Config, ""); err != nil {
		return err
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "packages-registry", Namespace: SystemNamespace},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: h.reg.DockerConfigJSON()},
		},
		&sourcev1.OCIRepository{
			ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: SystemNamespace},
			Spec: sourcev1.OCIRepositorySpec{
				URL: "oci://" + h.reg.Host() + "/charts/configmaps", Insecure: true,
				Interval:      &metav1.Duration{Duration: 30 * time.Minute},
				Reference:     &sourcev1.OCIRepositoryRef{Tag: "1.0.0"},
				LayerSelector: &sourcev1.OCILayerSelector{MediaType: testenv.HelmChartMediaType, Operation: sourcev1.OCILayerCopy},
				SecretRef:     &meta.LocalObjectReference{Name: "packages-registry"},
				// Flux 2.9's CRD defaulted it and its source-controller
				// relies on that (the -flux-dir runs); 2.10's CRD does not.
				Timeout: &metav1.Duration{Duration: time.Minute},
			},
		},
	}
	chartFrom, err := h.scaleChartSource(&objs)
	if err != nil {
		return err
	}
	// Each tenant's objects in order (its namespace first); the tenants
	// eight at a time, so that 2,000 tenants are created in seconds.
	tenants := make([][]client.Object, len(h.res.Tenants))
	n := len(objs)
	for i, t := range h.res.Tenants {
		tenants[i] = append(tenants[i], &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.Name, Labels: map[string]string{TenantLabel: t.Name}}})
		for r := 1; r <= t.Releases; r++ {
			hr := &helmv2.HelmRelease{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", r), Namespace: t.Name},
				Spec:       helmv2.HelmReleaseSpec{Interval: metav1.Duration{Duration: 30 * time.Minute}},
			}
			chartFrom(hr)
			if i < h.opts.Clusters && !h.opts.ClustersUnused {
				hr.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{
					Name: clusterName(i+1) + "-admin-kubeconfig", Key: "super-admin.svc"}}
			}
			tenants[i] = append(tenants[i], hr)
		}
		n += len(tenants[i])
	}
	h.say("creating %d objects: %d tenant namespaces, %d HelmReleases, the chart source", n, len(h.res.Tenants), h.expectedReleases())
	create := func(objs []client.Object) error {
		for _, o := range objs {
			if err := createRetry(ctx, h.c, o); err != nil {
				return fmt.Errorf("creating %s %s/%s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetName(), err)
			}
		}
		return nil
	}
	if err := create(objs); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, t := range tenants {
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err()
			}
			return create(t)
		})
	}
	return g.Wait()
}

// createRetry creates an object, retrying while its kind is not served yet
// (the CRDs are installed by cozy-aio or by the test).
func createRetry(ctx context.Context, c client.Client, o client.Object) error {
	var err error
	for i := 0; i < 100; i++ {
		if err = c.Create(ctx, o); err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "no matches for kind") {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

func (h *harness) verifyScale(ctx context.Context) {
	var cms corev1.ConfigMapList
	n, want := 0, 3*h.expectedReleases()
	for i, t := range h.res.Tenants {
		c := h.c
		if i < len(h.clusters) && !h.opts.ClustersUnused {
			if !h.clusters[i].stopped.IsZero() {
				want -= 3 * t.Releases
				continue
			}
			c = h.clusters[i].cp.Client
		}
		if err := c.List(ctx, &cms, client.InNamespace(t.Name)); err == nil {
			for _, cm := range cms.Items {
				if strings.HasPrefix(cm.Name, "app-") {
					n++
				}
			}
		}
	}
	h.check("configmaps", n == want, "%d of %d ConfigMaps rendered by the releases exist", n, want)
}

// scaleChartSource returns how each scale release names its chart: by
// chartRef to the OCIRepository, or with Options.ChartSource
// "helmrepository" by spec.chart from a HelmRepository served over HTTP
// with basic auth, whose objects it adds.
func (h *harness) scaleChartSource(objs *[]client.Object) (func(*helmv2.HelmRelease), error) {
	switch h.opts.ChartSource {
	case "":
		return func(hr *helmv2.HelmRelease) {
			hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "configmaps", Namespace: SystemNamespace}
		}, nil
	case "helmrepository":
	default:
		return nil, fmt.Errorf("chart source %q is not \"\" or \"helmrepository\"", h.opts.ChartSource)
	}
	var err error
	if h.helmRepo, err = testenv.StartHelmRepo(testenv.HelmRepoOptions{Username: "demo", Password: "demo"}); err != nil {
		return nil, err
	}
	if _, err := h.helmRepo.AddChart(configMapsChart(), ""); err != nil {
		return nil, err
	}
	*objs = append(*objs,
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "charts-auth", Namespace: SystemNamespace},
			StringData: map[string]string{"username": "demo", "password": "demo"},
		},
		&sourcev1.HelmRepository{
			ObjectMeta: metav1.ObjectMeta{Name: "charts", Namespace: SystemNamespace},
			Spec: sourcev1.HelmRepositorySpec{
				URL: h.helmRepo.URL(), Interval: metav1.Duration{Duration: 30 * time.Minute},
				SecretRef: &meta.LocalObjectReference{Name: "charts-auth"},
			},
		})
	return func(hr *helmv2.HelmRelease) {
		hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
			Chart: "configmaps", Version: "1.x",
			SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts", Namespace: SystemNamespace},
		}}
	}, nil
}
