package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/plan"
)

// exitPlanError is the exit code of a plan that cannot be computed.
const exitPlanError = 3

// planCmd prints what applying a local kustomization directory would do
// to the live cluster, for review before a change merges: package plan's
// actions, field diffs and risks, as text or JSON. Each object that
// exists is compared with the API server's server-side dry-run of the
// apply. With --inventory, the objects of that Kustomization's inventory
// that the directory drops are deletions. The exit code is the plan's: 0
// nothing changes, 1 changes, 2 risky changes, 3 no plan.
func planCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "approve" {
		if err := approveCmd(args[1:], stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "cozy-aio plan approve:", err)
			return 1
		}
		return 0
	}
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, else "+adminConf+")")
	dir := fs.String("kustomize", "", "a kustomization directory to plan")
	inventory := fs.String("inventory", "", "NAMESPACE/NAME of the Kustomization that applies the directory: its inventory's objects the directory drops are deleted, its owner labels applied")
	fieldManager := fs.String("field-manager", "kustomize-controller", "the field manager of the apply (--kustomize)")
	chart := fs.String("chart", "", "a chart to plan as an install or upgrade of --release: a chart directory or a packaged chart (.tgz)")
	release := fs.String("release", "", "NAMESPACE/NAME of the Helm release the chart installs or upgrades (--chart, with chart defaults)")
	helmRelease := fs.String("helmrelease", "", "NAMESPACE/NAME of a HelmRelease: plan its next install or upgrade as the engine does, with its settings and values; of --chart if given, else of its source's artifact")
	chartRevision := fs.String("chart-revision", "", "the source revision of --chart (an OCI chart's version@sha256:…), which the engine adds to the chart version, as helm-controller")
	var valueFiles multiFlag
	fs.Var(&valueFiles, "values", "a values file for --chart, merged over the chart's defaults; repeat it, later files win")
	output := fs.String("o", "text", "text or json")
	all := fs.Bool("all", false, "list unchanged objects too (text)")
	timeout := fs.Duration("timeout", time.Minute, "longest wait for the API server")
	if err := fs.Parse(args); err != nil {
		return exitPlanError
	}
	var p *plan.Plan
	err := checkOutput(*output)
	switch {
	case err != nil:
	case *helmRelease != "":
		p, err = planHelmRelease(*kubeconfig, *helmRelease, *chart, *chartRevision, *timeout)
	case (*dir == "") == (*chart == ""):
		err = errors.New("one of --kustomize, --chart and --helmrelease is required")
	case *chart != "":
		p, err = planChart(*kubeconfig, *chart, *release, valueFiles, *timeout)
	default:
		p, err = planKustomize(*kubeconfig, *dir, *inventory, *fieldManager, *timeout)
	}
	if err == nil {
		if *output == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			err = enc.Encode(p)
		} else {
			err = p.WriteText(stdout, *all)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "cozy-aio plan:", err)
		return exitPlanError
	}
	return p.ExitCode()
}

func checkOutput(output string) error {
	if output != "text" && output != "json" {
		return fmt.Errorf("-o %q: want text or json", output)
	}
	return nil
}

// multiFlag is a flag given more than once.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// planChart plans a local chart as the install or upgrade of a release,
// made as the engine makes a HelmRelease's plan (helm.Manager.Plan): the
// same chart and values give the same plan and hash.
func planChart(kubeconfig, chart, release string, valueFiles []string, timeout time.Duration) (*plan.Plan, error) {
	ns, name, ok := strings.Cut(release, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--release %q: want NAMESPACE/NAME", release)
	}
	cfg, err := statusConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	archive, cleanup, err := chartArchive(chart)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	spec := helm.Spec{Chart: helm.Chart{Path: archive}}
	for _, f := range valueFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		spec.Values = append(spec.Values, v)
	}
	m, err := helm.New(cfg, helm.Options{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p, err := m.Plan(ctx, helm.Release{Name: name, Namespace: ns}, helm.ReconcileOptions{Spec: spec})
	if err == nil && p == nil {
		p, err = plan.Compute(plan.Input{}) // up to date: nothing changes
	}
	return p, err
}

// planHelmRelease plans a HelmRelease's next install or upgrade as the
// engine does (engine.PlanHelmRelease): of a local chart, else of the
// artifact its chart source holds, read from the artifact server.
func planHelmRelease(kubeconfig, name, chart, revision string, timeout time.Duration) (*plan.Plan, error) {
	ns, n, ok := strings.Cut(name, "/")
	if !ok || ns == "" || n == "" {
		return nil, fmt.Errorf("--helmrelease %q: want NAMESPACE/NAME", name)
	}
	cfg, err := statusConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: engine.NewScheme()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	hr := &helmv2.HelmRelease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, hr); err != nil {
		return nil, err
	}
	cleanup := func() {}
	if chart == "" {
		chart, revision, cleanup, err = sourceChart(ctx, c, hr)
	} else {
		chart, cleanup, err = chartArchive(chart)
	}
	if err != nil {
		return nil, err
	}
	defer cleanup()
	p, err := engine.PlanHelmRelease(ctx, cfg, c, hr, chart, revision)
	if err == nil && p == nil {
		p, err = plan.Compute(plan.Input{}) // up to date: nothing changes
	}
	return p, err
}

// sourceChart downloads the chart artifact of hr's source (status.artifact
// of its OCIRepository, HelmChart or ExternalArtifact) into a temporary
// file, and returns it with the artifact's revision.
func sourceChart(ctx context.Context, c client.Client, hr *helmv2.HelmRelease) (string, string, func(), error) {
	u := &unstructured.Unstructured{}
	var kind, ns, name string
	switch {
	case hr.Spec.ChartRef != nil:
		kind, ns, name = hr.Spec.ChartRef.Kind, hr.Spec.ChartRef.Namespace, hr.Spec.ChartRef.Name
	case hr.Spec.Chart != nil:
		ref := hr.GetHelmChartTemplateReference()
		kind, ns, name = ref.Kind, ref.Namespace, ref.Name
	default:
		return "", "", nil, errors.New("the HelmRelease names no chart (spec.chartRef or spec.chart)")
	}
	if ns == "" {
		ns = hr.Namespace
	}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: kind})
	u.SetNamespace(ns)
	u.SetName(name)
	if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		return "", "", nil, fmt.Errorf("reading the chart source %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	url, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "url")
	rev, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "revision")
	if url == "" {
		return "", "", nil, fmt.Errorf("%s %s/%s has no artifact yet", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", "", nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", nil, fmt.Errorf("downloading the chart artifact (run this on a node, or where %s resolves): %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", nil, fmt.Errorf("downloading the chart artifact %s: %s", url, resp.Status)
	}
	f, err := os.CreateTemp("", "cozy-aio-plan-*.tgz")
	if err != nil {
		return "", "", nil, err
	}
	cleanup := func() { os.Remove(f.Name()) }
	if _, err := io.Copy(f, io.LimitReader(resp.Body, 512<<20)); err != nil {
		f.Close()
		cleanup()
		return "", "", nil, err
	}
	if err := f.Close(); err != nil {
		cleanup()
		return "", "", nil, err
	}
	return f.Name(), rev, cleanup, nil
}

// chartArchive returns a packaged chart for path: path itself when it is
// a file, else the directory packaged into a temporary one.
func chartArchive(path string) (string, func(), error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", nil, err
	}
	if !st.IsDir() {
		return path, func() {}, nil
	}
	ch, err := loader.LoadDir(path)
	if err != nil {
		return "", nil, fmt.Errorf("chart %s: %w", path, err)
	}
	tmp, err := os.MkdirTemp("", "cozy-aio-plan-")
	if err != nil {
		return "", nil, err
	}
	out, err := chartutil.Save(ch, tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("packaging chart %s: %w", path, err)
	}
	return out, func() { os.RemoveAll(tmp) }, nil
}

// approveCmd approves the plan a HelmRelease or Kustomization holds: it
// writes the plan's hash (the Held condition's, or --hash) to the
// approval annotation and asks for a reconcile, as `flux reconcile` does.
func approveCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan approve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, else "+adminConf+")")
	kind := fs.String("kind", "HelmRelease", "HelmRelease or Kustomization")
	hash := fs.String("hash", "", "the plan's hash to approve (default: the one the Held condition names)")
	timeout := fs.Duration("timeout", 30*time.Second, "longest wait for the API server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ns, name, ok := strings.Cut(fs.Arg(0), "/")
	if fs.NArg() != 1 || !ok || ns == "" || name == "" {
		return errors.New("usage: cozy-aio plan approve [--kind Kustomization] NAMESPACE/NAME [--hash sha256:…]")
	}
	var obj interface {
		client.Object
		GetConditions() []metav1.Condition
	}
	switch *kind {
	case "HelmRelease":
		obj = &helmv2.HelmRelease{}
	case "Kustomization":
		obj = &kustomizev1.Kustomization{}
	default:
		return fmt.Errorf("--kind %q: want HelmRelease or Kustomization", *kind)
	}
	cfg, err := statusConfig(*kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: engine.NewScheme()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		return err
	}
	h := *hash
	if h == "" {
		held := apimeta.FindStatusCondition(obj.GetConditions(), engine.HeldCondition)
		if held == nil || held.Status != metav1.ConditionTrue {
			return fmt.Errorf("%s %s/%s holds no plan", *kind, ns, name)
		}
		m := heldHash.FindStringSubmatch(held.Message)
		if m == nil {
			return fmt.Errorf("%s %s/%s: the Held condition names no plan: %s", *kind, ns, name, held.Message)
		}
		h = m[1]
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[engine.ApprovePlanAnnotation] = h
	a[meta.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
	obj.SetAnnotations(a)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "approved plan %s of %s %s/%s\n", h, *kind, ns, name)
	return nil
}

// heldHash finds the plan's hash in a Held condition's message.
var heldHash = regexp.MustCompile(`plan (sha256:[0-9a-f]{64}) held`)

func planKustomize(kubeconfig, dir, inventory, fieldManager string, timeout time.Duration) (*plan.Plan, error) {
	cfg, err := statusConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: engine.NewScheme()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	objs, err := apply.Build(ctx, dir, apply.BuildOptions{})
	if err != nil {
		return nil, err
	}
	dryRun := map[plan.Ref]bool{}
	in := plan.Input{DryRun: func(r plan.Ref) bool { return dryRun[r] }, Owner: plan.Owner{Inventory: inventory, FieldManager: fieldManager},
		Kept: func(u *unstructured.Unstructured) bool {
			return u.GetAnnotations()[apply.PruneAnnotation] == "disabled"
		}}
	live := map[plan.Ref]*unstructured.Unstructured{}
	var labels map[string]string
	if inventory != "" {
		ns, name, ok := strings.Cut(inventory, "/")
		if !ok {
			return nil, fmt.Errorf("--inventory %q: want NAMESPACE/NAME", inventory)
		}
		labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": name, "kustomize.toolkit.fluxcd.io/namespace": ns}
		if in.Current, err = inventoryObjects(ctx, c, ns, name); err != nil {
			return nil, err
		}
		for _, u := range in.Current {
			live[plan.RefOf(u)] = u
		}
	}
	for _, o := range objs {
		o = o.DeepCopy()
		if len(labels) > 0 {
			l := o.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			for k, v := range labels {
				l[k] = v
			}
			o.SetLabels(l)
		}
		have, err := get(ctx, c, o.GroupVersionKind(), o.GetNamespace(), o.GetName())
		if err != nil {
			return nil, err
		}
		if have == nil {
			in.Desired = append(in.Desired, o)
			continue
		}
		live[plan.RefOf(have)] = have
		dry := o.DeepCopy()
		err = c.Patch(ctx, dry, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner(fieldManager)) //nolint:staticcheck // an unstructured apply
		switch {
		case apierrors.IsInvalid(err):
			// Refused, an immutable field for one: compared as rendered,
			// the plan names the risk.
			in.Desired = append(in.Desired, o)
		case err != nil:
			return nil, fmt.Errorf("%s: server-side dry-run: %w", plan.RefOf(o), err)
		default:
			dryRun[plan.RefOf(dry)] = true
			in.Desired = append(in.Desired, dry)
		}
	}
	in.Live = func(r plan.Ref) *unstructured.Unstructured { return live[r] }
	return plan.Compute(in)
}

// get reads an object, nil when it does not exist.
func get(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, namespace, name, err)
	}
	return u, nil
}

// inventoryObjects reads the live objects of a Kustomization's inventory;
// those already gone are left out.
func inventoryObjects(ctx context.Context, c client.Reader, namespace, name string) ([]*unstructured.Unstructured, error) {
	var ks kustomizev1.Kustomization
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ks); err != nil {
		return nil, fmt.Errorf("reading Kustomization %s/%s: %w", namespace, name, err)
	}
	if ks.Status.Inventory == nil {
		return nil, nil
	}
	var out []*unstructured.Unstructured
	for _, e := range ks.Status.Inventory.Entries {
		// The ID is namespace_name_group_kind, as Flux writes it.
		parts := strings.Split(e.ID, "_")
		if len(parts) != 4 {
			return nil, fmt.Errorf("Kustomization %s/%s: inventory entry %q is not namespace_name_group_kind", namespace, name, e.ID)
		}
		gvk := schema.GroupVersionKind{Group: parts[2], Version: e.Version, Kind: parts[3]}
		u, err := get(ctx, c, gvk, parts[0], parts[1])
		if err != nil {
			return nil, err
		}
		if u != nil {
			out = append(out, u)
		}
	}
	return out, nil
}
