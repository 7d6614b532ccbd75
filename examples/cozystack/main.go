// Command cozystack runs Cozystack's own operator and platform chart on a
// simulated cluster with cozy-aio as the only Flux, as issue #34's
// acceptance asks: the operator installs its CRDs and writes the platform's
// OCIRepository and PackageSource, a Package picks a variant of the
// platform, and from there the operator, the platform chart and cozy-aio
// do everything else. It reports the time from the Package to every
// HelmRelease Ready, each release's Helm revisions, and the Warning Events
// left standing.
//
// It builds nothing of Cozystack: -packages is the packages/ directory of
// a Cozystack checkout (v1.6.2: `git archive v1.6.2` of its repository)
// and -operator the cozystack-operator built from the same checkout
// (`go build ./cmd/cozystack-operator`). BENCHMARKS.md gives the commands.
//
//	go run ./examples/cozystack -packages /tmp/cozystack/packages \
//	  -operator /tmp/cozystack-operator -cozy-aio bin/cozy-aio
//
// Without -packages and -operator it runs only its own workload
// (-helmreleases, -kustomizations): `make switch-over` uses it so, with
// Flux's controllers built from their module source, to switch 1,000
// HelmReleases and 20 Kustomizations both ways.
//
// The simulation differs from a real cluster where it must: the packages
// are served by an in-process registry over HTTPS whose certificate the
// engines trust through SSL_CERT_FILE (the operator's OCIRepository names
// no CA), the hosted variant's CNI is a DaemonSet that only gives the
// simulated nodes their network (and Cilium's policy CRDs), kwok plays
// every pod, and since no pod serves the admission webhooks the charts
// install, their failurePolicy is set to Ignore.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/internal/demo"
	"github.com/cozystack/cozy-aio/internal/switchover"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

type options struct {
	packages, operator, binary, workDir, variant, values string
	// fluxDir holds Flux's source-controller and helm-controller binaries
	// and, in crds/, their CRDs: with it, they reconcile in cozy-aio's
	// place and cozy-aio runs as their source-watcher only.
	fluxDir string
	// switchOver stops the engine once the platform has settled and
	// starts the other: cozy-aio with every kind after Flux's controllers
	// (with fluxDir), Flux's controllers after cozy-aio (without it, but
	// with -switch-flux-dir), as a switch from Flux, or back, does.
	switchOver      bool
	switchFluxDir   string
	timeout, settle time.Duration
	keep            bool
	// kustomizations is how many Kustomizations (with prune, of eight
	// objects each) run beside the platform.
	kustomizations int
	// helmReleases is how many HelmReleases of a small chart run beside
	// the platform (internal/switchover).
	helmReleases int
	// record, with -flux-dir, writes the fixtures of what Flux left
	// (switchover.Record) to this file once it has settled.
	record string
	// replicas is how many cozy-aio replicas take over from Flux, or,
	// without fluxDir, run before Flux takes over.
	replicas int
	// troubled also runs the troubled releases (switchover.CreateTroubled):
	// one whose install failed, one whose upgrade failed, one left
	// pending-install by the switch.
	troubled bool
	// recordTroubled, with -troubled and -flux-dir, writes their fixtures
	// (switchover.RecordTroubled) to this file.
	recordTroubled string
	// fluxCLI is a flux binary: with -switch, `flux get helmreleases -A`
	// and `flux get kustomizations -A` are compared before and after.
	fluxCLI string
}

func main() {
	// The harness's controller-runtime clients log nothing.
	ctrllog.SetLogger(logr.Discard())
	var o options
	flag.StringVar(&o.packages, "packages", os.Getenv("COZYSTACK_PACKAGES"), "Cozystack's packages/ directory (COZYSTACK_PACKAGES)")
	flag.StringVar(&o.operator, "operator", os.Getenv("COZYSTACK_OPERATOR"), "the cozystack-operator binary built from the same checkout (COZYSTACK_OPERATOR)")
	flag.StringVar(&o.binary, "cozy-aio", "bin/cozy-aio", "the cozy-aio binary")
	flag.StringVar(&o.fluxDir, "flux-dir", "", "run Flux's controllers from this directory (source-controller, helm-controller, crds/) in cozy-aio's place; cozy-aio then reconciles ArtifactGenerators only, as source-watcher, whose module the proxy does not serve")
	flag.BoolVar(&o.switchOver, "switch", false, "once settled, stop the engine and start the other (with -flux-dir: Flux's controllers to cozy-aio; without: cozy-aio to Flux's controllers from -switch-flux-dir), and report what it changed")
	flag.StringVar(&o.switchFluxDir, "switch-flux-dir", "", "with -switch and without -flux-dir: Flux's controllers to switch to (as -flux-dir)")
	flag.StringVar(&o.workDir, "work-dir", "", "logs and data (default: a temporary directory, kept)")
	flag.StringVar(&o.variant, "variant", "isp-hosted", "the platform Package's variant")
	flag.StringVar(&o.values, "values", "bundles: {system: {enabled: true, variant: isp-hosted}, paas: {enabled: false}, naas: {enabled: false}}\npublishing: {host: example.org, apiServerEndpoint: https://api.example.org:6443}",
		"the platform component's values in the Package (YAML)")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "how long to wait for every HelmRelease to be Ready")
	flag.DurationVar(&o.settle, "settle", 2*time.Minute, "end the run once the set of Ready HelmReleases has not changed for this long")
	flag.IntVar(&o.kustomizations, "kustomizations", 0, "also run this many Kustomizations with prune (eight objects each, from an OCIRepository); Flux's kustomize-controller runs them when -flux-dir has it")
	flag.IntVar(&o.helmReleases, "helmreleases", 0, "also run this many HelmReleases of a two-ConfigMap chart, 20 per namespace, from an OCIRepository (8 in 10), a HelmRepository of type oci (1 in 10) and an ExternalArtifact (1 in 10)")
	flag.StringVar(&o.record, "record", "", "with -flux-dir, -helmreleases and -kustomizations: once Flux has settled, write the fixtures of the first 20 HelmReleases and 2 Kustomizations to this file (internal/switchover)")
	flag.IntVar(&o.replicas, "replicas", 1, "how many cozy-aio replicas (leader election, shared Helm shards) run: with -flux-dir -switch, the ones that take over from Flux; without -flux-dir, the ones Flux takes over from with -switch")
	flag.BoolVar(&o.troubled, "troubled", false, "also run four troubled HelmReleases in "+switchover.TroubledNamespace+": one whose install fails, one whose upgrade fails, one whose install waits 30 minutes (pending-install when the engine stops), one with spec.test.enable whose test passes")
	flag.StringVar(&o.recordTroubled, "record-troubled", "", "with -troubled and -flux-dir: once they are in their states, write the fixtures of the troubled HelmReleases to this file")
	flag.StringVar(&o.fluxCLI, "flux-cli", "", "with -switch: a flux CLI binary; `flux get helmreleases -A`, `flux get kustomizations -A` and `flux trace` of six ConfigMaps are compared before and after the switch")
	flag.BoolVar(&o.keep, "keep", false, "keep the cluster running at the end until interrupted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "cozystack:", err)
		os.Exit(1)
	}
}

var (
	hrGVR      = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
	ociGVR     = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}
	eaGVR      = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "externalartifacts"}
	crdGVR     = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	packageGVR = schema.GroupVersionResource{Group: "cozystack.io", Version: "v1alpha1", Resource: "packages"}
)

func run(ctx context.Context, o options) error {
	if (o.packages == "") != (o.operator == "") {
		return errors.New("-packages and -operator go together (see the package comment)")
	}
	if o.packages == "" && o.helmReleases == 0 && o.kustomizations == 0 {
		return errors.New("nothing to run: -packages and -operator (Cozystack's platform), -helmreleases or -kustomizations")
	}
	if o.switchOver && o.fluxDir == "" && o.switchFluxDir == "" {
		return errors.New("-switch needs -flux-dir (from Flux) or -switch-flux-dir (to Flux)")
	}
	for _, dir := range []string{o.fluxDir, o.switchFluxDir} {
		if _, err := os.Stat(filepath.Join(dir, "kustomize-controller")); dir != "" && o.kustomizations > 0 && err != nil {
			return fmt.Errorf("-kustomizations with Flux's controllers needs kustomize-controller in %s: %w", dir, err)
		}
	}
	if o.workDir == "" {
		d, err := os.MkdirTemp("", "cozystack-acceptance-")
		if err != nil {
			return err
		}
		o.workDir = d
	}
	logs := filepath.Join(o.workDir, "logs")
	say := func(format string, a ...any) {
		fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	say("logs in %s", logs)

	cluster, err := testenv.StartCluster(ctx, testenv.ClusterOptions{Nodes: 3, LogDir: logs})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}
	if err := hostedNetwork(ctx, cs, dyn); err != nil {
		return err
	}
	// What the installer chart does before the operator: helm's
	// --create-namespace and its labeller hook.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "cozy-system", Labels: map[string]string{
			"cozystack.io/system": "true", "platform.cozystack.io/no-delete": "true",
			"pod-security.kubernetes.io/enforce": "privileged",
		},
	}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	go webhooksFailOpen(ctx, dyn, say)

	reg, err := testenv.StartRegistry(testenv.RegistryOptions{TLS: true})
	if err != nil {
		return err
	}
	defer reg.Close()
	caFile := filepath.Join(o.workDir, "registry-ca.pem")
	if err := os.WriteFile(caFile, reg.CACert(), 0o644); err != nil {
		return err
	}
	trust := "SSL_CERT_FILE=" + caFile

	// The artifact server keeps its address across the switch, as a
	// Service gives it in a cluster: the other engine's consumers fetch
	// from the URLs in status. Replicas all advertise it
	// (replicaArtifacts).
	artifacts := fmt.Sprintf("--artifact-addr=127.0.0.1:%d", freePort())
	extra := []string{artifacts}
	if o.fluxDir != "" {
		// Flux's source-controller serves its artifacts on this machine's
		// loopback, which cozy-aio refuses for foreign artifacts by default
		// (the destination policy): here it stands for a Service.
		extra = append(extra, "--destination-allow=127.0.0.0/8")
	}
	if o.fluxDir != "" {
		extra = append(extra, "--kinds=ArtifactGenerator")
	}
	popts := demo.ProcessOptions{
		Binary: o.binary, WorkDir: o.workDir, Logs: logs, ID: "cozy-aio-0",
		Server: cluster.Config.Host, Kubeconfig: cluster.Kubeconfig, Health: freePort(), Extra: extra,
		Env: []string{trust},
	}
	if o.fluxDir == "" && o.replicas > 1 {
		popts.Replica = true
	}
	engine, start, err := startCozyAIO(popts)
	if err != nil {
		return err
	}
	defer engine.Stop(30 * time.Second)
	// -replicas without -flux-dir: the other replicas run from the start,
	// each with its own ID, data directory and addresses.
	var others []*demo.Process
	stopOthers := func() {
		for _, p := range others {
			p.Stop(30 * time.Second)
		}
		others = nil
	}
	defer stopOthers()
	for i := 1; o.fluxDir == "" && i < o.replicas; i++ {
		ro := popts
		ro.ID, ro.Health = fmt.Sprintf("cozy-aio-%d", i), freePort()
		ro.Extra = replicaArtifacts(artifacts)
		p, _, err := startCozyAIO(ro)
		if err != nil {
			return err
		}
		others = append(others, p)
	}
	say("cozy-aio started: %s %s", o.binary, strings.Join(engine.Args(), " "))
	var flux []*exec.Cmd
	if o.fluxDir != "" {
		if flux, err = startFlux(ctx, o, cluster.Kubeconfig, logs, trust, dyn, say); err != nil {
			return err
		}
		defer func() {
			for _, c := range flux {
				_ = c.Process.Signal(syscall.SIGTERM)
				_ = c.Wait()
			}
		}()
	}

	applied := time.Now()
	if o.packages != "" {
		stopPlatform, err := platform(ctx, o, cluster.Kubeconfig, logs, reg, dyn, say)
		if err != nil {
			return err
		}
		defer stopPlatform()
		applied = time.Now()
		say("Package cozystack.cozystack-platform (variant %s) created %.1f s after cozy-aio's start", o.variant, applied.Sub(start).Seconds())
	}
	if err := waitFor(ctx, 2*time.Minute, "the Flux CRDs", func() (bool, error) {
		for _, gvr := range []schema.GroupVersionResource{ociGVR, hrGVR, ksGVR, helmRepoGVR, generatorGVR} {
			if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	if o.kustomizations > 0 || o.helmReleases > 0 {
		if err := createWorkload(ctx, cluster.Config, reg, o.helmReleases, o.kustomizations); err != nil {
			return err
		}
		say("%d HelmReleases created in %s*, %d Kustomizations in %s", o.helmReleases, switchover.ReleasesPrefix, o.kustomizations, switchover.AppsNamespace)
	}
	if o.troubled {
		if err := createTroubled(ctx, cluster.Config, reg); err != nil {
			return err
		}
		say("4 troubled HelmReleases created in %s", switchover.TroubledNamespace)
	}

	// The run ends when every HelmRelease is Ready, or when the Ready
	// set has not changed for -settle: a release that fails the same way
	// under either engine (a chart the simulation cannot satisfy) must
	// not hide the time the others took.
	var lastChange time.Time
	last, lastReady, all := "", -1, false
	err = waitFor(ctx, o.timeout, "every HelmRelease Ready or settled", func() (bool, error) {
		if !engine.Running() {
			return false, errors.New("cozy-aio exited (see its log)")
		}
		list, err := dyn.Resource(hrGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		notReady := []string{}
		for _, hr := range list.Items {
			if s, _ := readyOf(&hr); s != "True" {
				notReady = append(notReady, hr.GetNamespace()+"/"+hr.GetName())
			}
		}
		line := fmt.Sprintf("%d HelmReleases, %d not Ready", len(list.Items), len(notReady))
		if len(notReady) > 0 && len(notReady) <= 6 {
			line += ": " + strings.Join(notReady, ", ")
		}
		if line != last {
			say("%s", line)
			last = line
		}
		if ready := len(list.Items) - len(notReady); ready != lastReady {
			lastReady, lastChange = ready, time.Now()
		}
		// The platform is whole once its release and the bundle's are
		// all Ready; the platform's alone is not enough.
		if len(list.Items) > 1 && len(notReady) == 0 {
			all = true
			return true, nil
		}
		return len(list.Items) > 1 && time.Since(lastChange) > o.settle, nil
	})
	report(ctx, cs, dyn, say)
	if err != nil {
		return err
	}
	if o.kustomizations > 0 {
		if err := waitKustomizations(ctx, dyn, 5*time.Minute, say); err != nil {
			return err
		}
		say("every Kustomization Ready")
	}
	what := "every HelmRelease Ready"
	if !all {
		what = fmt.Sprintf("%d HelmReleases Ready, the last", lastReady)
	}
	say("%s %.1f s after the Package (%.1f s after cozy-aio's start)",
		what, lastChange.Sub(applied).Seconds(), lastChange.Sub(start).Seconds())
	if o.troubled {
		if err := trouble(ctx, cluster.Config, o.recordTroubled, strings.Join(os.Args, " ")); err != nil {
			return err
		}
		say("troubled releases in their states%s", map[bool]string{true: ", fixtures written to " + o.recordTroubled}[o.recordTroubled != ""])
	}
	if o.record != "" {
		if err := record(ctx, cluster.Config, o.record, strings.Join(os.Args, " ")); err != nil {
			return fmt.Errorf("recording the fixtures: %w", err)
		}
		say("fixtures written to %s", o.record)
	}
	rss, cpu := engine.Usage()
	say("cozy-aio: peak RSS %d MB, CPU %.1f s", rss>>20, cpu.Seconds())
	for _, c := range flux {
		say("%s: peak RSS %d MB", filepath.Base(c.Path), peakRSS(c.Process.Pid)>>20)
	}
	if o.switchOver {
		// The other engine takes over: Flux's controllers stop and
		// cozy-aio starts with every kind, or cozy-aio stops and Flux's
		// controllers start with cozy-aio as their source-watcher.
		for _, c := range flux {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
		engine.Stop(30 * time.Second)
		stopOthers()
		toFlux := len(flux) == 0
		flux = nil
		popts.Extra, popts.Logs = []string{artifacts}, filepath.Join(logs, "switch")
		if toFlux {
			popts.Extra = append(popts.Extra, "--kinds=ArtifactGenerator")
		}
		if err := os.MkdirAll(popts.Logs, 0o755); err != nil {
			return err
		}
		takeOver := func() (func(), error) {
			var procs []*demo.Process
			stop := func() {
				for _, p := range procs {
					p.Stop(30 * time.Second)
				}
			}
			n := 1
			if !toFlux {
				n = max(o.replicas, 1)
			}
			for i := range n {
				ro := popts
				if n > 1 {
					// Replicas: each its own ID, data directory and
					// addresses; the first keeps the artifact address.
					ro.ID, ro.Replica, ro.Health = fmt.Sprintf("cozy-aio-%d", i), true, freePort()
					if i > 0 {
						ro.Extra = replicaArtifacts(artifacts)
					}
				}
				next, _, err := startCozyAIO(ro)
				if err != nil {
					stop()
					return nil, err
				}
				procs = append(procs, next)
			}
			if !toFlux {
				return stop, nil
			}
			fo := o
			fo.fluxDir = o.switchFluxDir
			cmds, err := startFlux(ctx, fo, cluster.Kubeconfig, popts.Logs, trust, dyn, say)
			return func() {
				for _, c := range cmds {
					_ = c.Process.Signal(syscall.SIGTERM)
					_ = c.Wait()
				}
				stop()
			}, err
		}
		to := "cozy-aio with every kind"
		if o.replicas > 1 {
			to = fmt.Sprintf("%d cozy-aio replicas with every kind", o.replicas)
		}
		if toFlux {
			to = "Flux's controllers (with cozy-aio as their source-watcher)"
		}
		var cli func() []string
		if o.fluxCLI != "" {
			traced := traceTargets(ctx, dyn)
			cli = func() []string {
				return append(fluxGet(ctx, o.fluxCLI, cluster.Kubeconfig, say), fluxTrace(ctx, o.fluxCLI, cluster.Kubeconfig, traced, say)...)
			}
		}
		if err := switchOver(ctx, cluster.Config, cs, dyn, to, takeOver, cli, say); err != nil {
			return err
		}
	}
	if o.keep {
		say("kept running: KUBECONFIG=%s; interrupt to stop", cluster.Kubeconfig)
		<-ctx.Done()
	}
	return nil
}

// watched are the kinds whose objects a switch-over must leave alone:
// their resourceVersion (generation for the workloads, whose status
// moves) before and after.
var watched = []struct {
	gvr        schema.GroupVersionResource
	generation bool
}{
	{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, false},
	{schema.GroupVersionResource{Version: "v1", Resource: "services"}, false},
	{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, false},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, false},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, false},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, false},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, false},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, true},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, true},
}

// appliers are the selectors of the objects a switch must leave alone:
// those the charts label app.kubernetes.io/managed-by=Helm, and those
// Kustomizations applied.
var appliers = []struct{ name, selector string }{
	{"Helm", "app.kubernetes.io/managed-by=Helm"},
	{"Kustomization", "kustomize.toolkit.fluxcd.io/name"},
}

// objectVersions maps each watched object of each of appliers to its
// resourceVersion or generation, by "<applier> <resource>/<ns>/<name>".
func objectVersions(ctx context.Context, dyn dynamic.Interface) map[string]string {
	out := map[string]string{}
	for _, a := range appliers {
		for _, w := range watched {
			list, err := dyn.Resource(w.gvr).List(ctx, metav1.ListOptions{LabelSelector: a.selector})
			if err != nil {
				continue
			}
			for _, it := range list.Items {
				v := it.GetResourceVersion()
				if w.generation {
					v = fmt.Sprint(it.GetGeneration())
				}
				out[a.name+" "+w.gvr.Resource+"/"+it.GetNamespace()+"/"+it.GetName()] = v
			}
		}
	}
	return out
}

// releaseRecords counts the Helm release Secrets of each release.
func releaseRecords(ctx context.Context, cs kubernetes.Interface) (map[string]int, error) {
	secrets, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, s := range secrets.Items {
		out[s.Namespace+"/"+s.Labels["name"]]++
	}
	return out, nil
}

// startCozyAIO starts a cozy-aio process, and says when.
func startCozyAIO(popts demo.ProcessOptions) (*demo.Process, time.Time, error) {
	p, err := demo.NewProcess(popts)
	if err != nil {
		return nil, time.Time{}, err
	}
	start := time.Now()
	return p, start, p.Start()
}

// switchOver stops nothing itself: the engine that ran is stopped, and
// takeOver starts the other one (to names it). It asks every HelmRelease
// for a reconcile and waits until each has answered it, then reports the
// new Helm revisions and the objects written, which a switch must leave
// at none.
func switchOver(ctx context.Context, restConfig *rest.Config, cs kubernetes.Interface, dyn dynamic.Interface, to string, takeOver func() (stop func(), err error), cli func() []string, say func(string, ...any)) error {
	before, err := releaseRecords(ctx, cs)
	if err != nil {
		return err
	}
	var rowsBefore []string
	if cli != nil {
		rowsBefore = cli()
	}
	objects := objectVersions(ctx, dyn)
	start := time.Now()
	stop, err := takeOver()
	if stop != nil {
		defer stop()
	}
	if err != nil {
		return err
	}
	say("switch: the engine that ran stopped, %s started", to)
	token := time.Now().Format(time.RFC3339Nano)
	units := []schema.GroupVersionResource{hrGVR, ksGVR}
	for _, gvr := range units {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, u := range list.Items {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, token)
			if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
		}
	}
	var pending []string
	err = waitFor(ctx, 5*time.Minute, "every HelmRelease and Kustomization to answer the reconcile request", func() (bool, error) {
		pending = pending[:0]
		for _, gvr := range units {
			list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, u := range list.Items {
				if u.GetNamespace() == switchover.TroubledNamespace && u.GetName() == switchover.PendingInstall {
					// Its action waits 30 minutes for a Deployment, under
					// either engine: it answers when that ends.
					continue
				}
				if h, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt"); h != token {
					pending = append(pending, u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName())
				}
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		say("switch: not answered: %s", strings.Join(pending, ", "))
		return err
	}
	say("switch: every HelmRelease and Kustomization answered the request %.1f s after the start of %s", time.Since(start).Seconds(), to)
	after, err := releaseRecords(ctx, cs)
	if err != nil {
		return err
	}
	revised := []string{}
	for r, n := range after {
		if n != before[r] {
			revised = append(revised, fmt.Sprintf("%s (%d → %d)", r, before[r], n))
		}
	}
	sort.Strings(revised)
	written, deleted, watchedBy := map[string]int{}, map[string]int{}, map[string]int{}
	var rewritten []string
	now := objectVersions(ctx, dyn)
	for k, v := range objects {
		kind := k[:strings.Index(k, "/")]
		watchedBy[kind[:strings.Index(kind, " ")]]++
		switch n, ok := now[k]; {
		case !ok:
			deleted[kind]++
		case n != v:
			written[kind]++
			rewritten = append(rewritten, k)
		}
	}
	if len(rewritten) > 0 && len(rewritten) <= 10 {
		sort.Strings(rewritten)
		say("switch: rewritten: %s", strings.Join(rewritten, ", "))
	}
	say("switch: %d of %d releases with new Helm revisions: %s", len(revised), len(after), strings.Join(revised, ", "))
	if cli != nil {
		// At the answer, and once the new engine's sources have replaced
		// the other's artifacts (a minute at most).
		at := time.Now()
		changed := compareRows(rowsBefore, cli(), say)
		for changed > 0 && time.Since(at) < time.Minute && ctx.Err() == nil {
			time.Sleep(2 * time.Second)
			if changed = compareRows(rowsBefore, cli(), nil); changed == 0 {
				say("switch: flux get: every row as before %.1f s after the answer", time.Since(at).Seconds())
			}
		}
		if changed > 0 {
			compareRows(rowsBefore, cli(), say)
		}
	}
	if c, err := client.New(restConfig, client.Options{}); err == nil {
		for _, name := range []string{switchover.InstallFailed, switchover.UpgradeFailed, switchover.PendingInstall, switchover.Tested} {
			if st, err := switchover.ReleaseStatuses(ctx, c, switchover.TroubledNamespace, name); err == nil && st != "" {
				say("switch: troubled %s: records %s", name, st)
			}
		}
	}
	say("switch: %d objects watched %v, rewritten by applier and kind: %v, deleted: %v", len(objects), watchedBy, written, deleted)
	report(ctx, cs, dyn, say)
	return nil
}

// fluxGet is the rows of `flux get helmreleases -A` and `flux get
// kustomizations -A`, each prefixed with its kind, spaces squeezed, but
// the troubled release left pending-install's.
func fluxGet(ctx context.Context, flux, kubeconfig string, say func(string, ...any)) []string {
	var rows []string
	for _, kind := range []string{"helmreleases", "kustomizations"} {
		out, err := exec.CommandContext(ctx, flux, "--kubeconfig="+kubeconfig, "get", kind, "-A", "--no-header").Output()
		if err != nil {
			say("flux get %s: %v", kind, err)
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 || (f[0] == switchover.TroubledNamespace && f[1] == switchover.PendingInstall) {
				// An action runs on it under either engine: its row moves.
				continue
			}
			rows = append(rows, kind+" "+strings.Join(f, " "))
		}
	}
	sort.Strings(rows)
	return rows
}

// traceTargets picks the objects `flux trace` follows across a switch:
// the first three ConfigMaps (by namespace and name) that Helm applied and
// the first three a Kustomization applied, the troubled releases' left out.
func traceTargets(ctx context.Context, dyn dynamic.Interface) []string {
	picked := map[string][]string{}
	var keys []string
	for k := range objectVersions(ctx, dyn) {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		applier, ref, _ := strings.Cut(k, " ")
		ref, ok := strings.CutPrefix(ref, "configmaps/")
		if !ok || strings.HasPrefix(ref, switchover.TroubledNamespace+"/") || len(picked[applier]) == 3 {
			continue
		}
		picked[applier] = append(picked[applier], ref)
	}
	var out []string
	for _, refs := range picked {
		out = append(out, refs...)
	}
	sort.Strings(out)
	return out
}

// fluxTrace is the lines of `flux trace` for each object ("<ns>/<name>"
// of a ConfigMap), prefixed with it, but the "Last reconciled at" times,
// which move whichever engine reconciles.
func fluxTrace(ctx context.Context, flux, kubeconfig string, objects []string, say func(string, ...any)) []string {
	var rows []string
	for _, o := range objects {
		ns, name, _ := strings.Cut(o, "/")
		out, err := exec.CommandContext(ctx, flux, "--kubeconfig="+kubeconfig, "trace", "-n", ns, "configmap", name).Output()
		if err != nil {
			say("flux trace %s: %v", o, err)
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || (len(f) > 2 && f[0] == "Status:" && f[1] == "Last" && f[2] == "reconciled") {
				continue
			}
			rows = append(rows, "trace "+o+" "+strings.Join(f, " "))
		}
	}
	return rows
}

// compareRows says how many of `flux get`'s rows the switch changed,
// with the first few before and after, and returns that number; with a
// nil say it only counts.
func compareRows(before, after []string, say func(string, ...any)) int {
	was := map[string]bool{}
	for _, r := range before {
		was[r] = true
	}
	var changed []string
	for _, r := range after {
		if !was[r] {
			changed = append(changed, r)
		}
	}
	if say == nil {
		return len(changed)
	}
	say("switch: flux get helmreleases/kustomizations -A, flux trace: %d rows before, %d after, %d after differ from every row before", len(before), len(after), len(changed))
	for i, r := range changed {
		if i == 5 {
			break
		}
		name := strings.Join(strings.Fields(r)[:3], " ")
		for _, b := range before {
			if strings.HasPrefix(b, name+" ") {
				say("switch:   before: %s", b)
			}
		}
		say("switch:   after:  %s", r)
	}
	return len(changed)
}

// startFlux applies Flux's CRDs over cozy-aio's (Flux 2.9's controllers
// expect their own defaults) and starts source-controller and
// helm-controller as Cozystack's flux-instance runs them: --concurrent=20,
// --requeue-dependency=5s, and helm-controller's ExternalArtifact gate,
// which the flux-operator opens when source-watcher is a component.
func startFlux(ctx context.Context, o options, kubeconfig, logs, trust string, dyn dynamic.Interface, say func(string, ...any)) ([]*exec.Cmd, error) {
	if err := waitFor(ctx, 2*time.Minute, "cozy-aio's CRDs", func() (bool, error) {
		_, err := dyn.Resource(ociGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig="+kubeconfig, "apply", "--server-side",
		"--force-conflicts", "--field-manager=flux", "-f", filepath.Join(o.fluxDir, "crds")).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("applying Flux's CRDs: %v: %s", err, out)
	}
	storage := filepath.Join(o.workDir, "data", "source-controller")
	if err := os.MkdirAll(storage, 0o700); err != nil {
		return nil, err
	}
	addr := func() string { return "127.0.0.1:" + fmt.Sprint(freePort()) }
	storageAddr := addr()
	var cmds []*exec.Cmd
	for _, c := range []struct {
		name string
		args []string
	}{
		{"source-controller", []string{"--metrics-addr=" + addr(), "--health-addr=" + addr(), "--enable-leader-election=false",
			"--storage-path=" + storage, "--storage-addr=" + storageAddr, "--storage-adv-addr=" + storageAddr,
			"--log-encoding=json", "--concurrent=20", "--requeue-dependency=5s"}},
		{"helm-controller", []string{"--metrics-addr=" + addr(), "--health-addr=" + addr(), "--enable-leader-election=false",
			"--log-encoding=json", "--concurrent=20", "--requeue-dependency=5s", "--feature-gates=ExternalArtifact=true"}},
		{"kustomize-controller", []string{"--metrics-addr=" + addr(), "--health-addr=" + addr(), "--enable-leader-election=false",
			"--log-encoding=json", "--concurrent=20", "--requeue-dependency=5s"}},
	} {
		if _, err := os.Stat(filepath.Join(o.fluxDir, c.name)); err != nil && c.name == "kustomize-controller" {
			continue // optional: without it, cozy-aio runs the Kustomizations
		}
		f, err := os.Create(filepath.Join(logs, c.name+".log"))
		if err != nil {
			return cmds, err
		}
		cmd := exec.Command(filepath.Join(o.fluxDir, c.name), c.args...)
		cmd.Stdout, cmd.Stderr = f, f
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE=cozy-system", trust)
		if err := cmd.Start(); err != nil {
			return cmds, fmt.Errorf("%s: %w", c.name, err)
		}
		cmds = append(cmds, cmd)
		say("Flux's %s started: %s %s", c.name, cmd.Path, strings.Join(c.args, " "))
	}
	return cmds, nil
}

// peakRSS is a running process's peak resident set (VmHWM).
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			var kb int64
			fmt.Sscan(f[1], &kb)
			return kb << 10
		}
	}
	return 0
}

// hostedNetwork stands for the CNI a hosted cluster already has (the
// isp-hosted variant installs none): a DaemonSet whose pods give the
// simulated nodes their network, and Cilium's policy CRDs.
func hostedNetwork(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	labels := testenv.DefaultNetworkPodLabels
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "hosted-cni", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork: true,
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{{Name: "cni", Image: "hosted-cni"}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return err
	}
	// A hosted cluster's Cilium: the charts write its network policies.
	for _, k := range []struct{ kind, plural, scope string }{
		{"CiliumNetworkPolicy", "ciliumnetworkpolicies", "Namespaced"},
		{"CiliumClusterwideNetworkPolicy", "ciliumclusterwidenetworkpolicies", "Cluster"},
	} {
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": k.plural + ".cilium.io"},
			"spec": map[string]any{
				"group": "cilium.io", "scope": k.scope,
				"names": map[string]any{"kind": k.kind, "plural": k.plural, "singular": strings.ToLower(k.kind), "listKind": k.kind + "List"},
				"versions": []any{map[string]any{"name": "v2", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
		if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// webhooksFailOpen sets failurePolicy Ignore on every admission webhook
// the charts install: kwok plays their pods, so nothing serves them, where
// on a real cluster the webhook's pod would answer. Both engines meet the
// same webhooks the same way.
func webhooksFailOpen(ctx context.Context, dyn dynamic.Interface, say func(string, ...any)) {
	done := map[string]string{}
	for ctx.Err() == nil {
		for _, res := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
			r := dyn.Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: res})
			list, err := r.List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range list.Items {
				c := &list.Items[i]
				key := res + "/" + c.GetName()
				if done[key] == c.GetResourceVersion() {
					continue
				}
				hooks, _, _ := unstructured.NestedSlice(c.Object, "webhooks")
				changed := false
				for _, h := range hooks {
					if m, ok := h.(map[string]any); ok && m["failurePolicy"] != "Ignore" {
						m["failurePolicy"], changed = "Ignore", true
					}
				}
				if changed {
					_ = unstructured.SetNestedSlice(c.Object, hooks, "webhooks")
					if u, err := r.Update(ctx, c, metav1.UpdateOptions{FieldManager: "cozystack-acceptance"}); err == nil {
						say("%s %s: failurePolicy Ignore (no pod serves it here)", res, c.GetName())
						c = u
					}
				}
				done[key] = c.GetResourceVersion()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// report prints each HelmRelease's state and Helm revisions, and the
// Warning Events still standing.
func report(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, say func(string, ...any)) {
	list, err := dyn.Resource(hrGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		say("listing HelmReleases: %v", err)
		return
	}
	secrets, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		say("listing release Secrets: %v", err)
		return
	}
	revisions := map[string]int{}
	for _, s := range secrets.Items {
		revisions[s.Namespace+"/"+s.Labels["name"]]++
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool {
		return items[i].GetNamespace()+"/"+items[i].GetName() < items[j].GetNamespace()+"/"+items[j].GetName()
	})
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "HELMRELEASE\tREADY\tREVISIONS\tMESSAGE")
	hist := map[int]int{}
	extra, extraReady := 0, 0
	for _, hr := range items {
		status, msg := readyOf(&hr)
		target, _, _ := unstructured.NestedString(hr.Object, "spec", "targetNamespace")
		release, _, _ := unstructured.NestedString(hr.Object, "spec", "releaseName")
		storage, _, _ := unstructured.NestedString(hr.Object, "spec", "storageNamespace")
		if storage == "" {
			storage = target
		}
		if storage == "" {
			storage = hr.GetNamespace()
		}
		if release == "" {
			release = hr.GetName()
			if target != "" {
				release = target + "-" + hr.GetName()
			}
		}
		n := revisions[storage+"/"+release]
		hist[n]++
		if acceptanceRelease(&hr) {
			extra++
			if status == "True" {
				extraReady++
			}
			continue
		}
		if len(msg) > 110 {
			msg = msg[:110] + "…"
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%d\t%s\n", hr.GetNamespace(), hr.GetName(), status, n, msg)
	}
	w.Flush()
	if extra > 0 {
		say("%d HelmReleases of -helmreleases, %d Ready", extra, extraReady)
	}
	counts := []string{}
	for n, c := range hist {
		counts = append(counts, fmt.Sprintf("%d with %d", c, n))
	}
	sort.Strings(counts)
	say("%d HelmReleases; release records: %s", len(items), strings.Join(counts, ", "))
	events, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		say("listing Events: %v", err)
		return
	}
	kinds := map[string]int{}
	for _, e := range events.Items {
		k := e.InvolvedObject.Kind
		kinds[k]++
		if strings.Contains(e.InvolvedObject.APIVersion, "fluxcd.io") {
			say("Warning Event %s/%s %s %s (x%d): %.160s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.InvolvedObject.Namespace, e.Count, e.Message)
		}
	}
	say("Warning Events by kind: %v", kinds)
	eas, err := dyn.Resource(eaGVR).List(ctx, metav1.ListOptions{})
	if err == nil {
		say("%d ExternalArtifacts", len(eas.Items))
	}
}

func readyOf(u *unstructured.Unstructured) (status, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			s, _ := m["status"].(string)
			msg, _ := m["message"].(string)
			return s, msg
		}
	}
	return "Unknown", ""
}

func waitFor(ctx context.Context, timeout time.Duration, what string, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := done()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %s", what, timeout)
		case <-time.After(time.Second):
		}
	}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 19440
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// platform pushes Cozystack's packages, runs its operator as a Deployment
// would (restarted when it exits) and creates the platform Package; stop
// ends the operator.
func platform(ctx context.Context, o options, kubeconfig, logs string, reg *testenv.Registry, dyn dynamic.Interface, say func(string, ...any)) (stop func(), err error) {
	stop = func() {}
	files, err := testenv.ReadTree(o.packages)
	if err != nil {
		return stop, err
	}
	desc, err := reg.PushArtifact(ctx, "cozystack-packages", "v1.6.2", files, nil)
	if err != nil {
		return stop, err
	}
	say("pushed %d files of %s to oci://%s/cozystack-packages@%s", len(files), o.packages, reg.Host(), desc.Digest)
	opLog, err := os.Create(filepath.Join(logs, "cozystack-operator.log"))
	if err != nil {
		return stop, err
	}
	// The operator runs as a Deployment does: restarted when it exits
	// (it does at first, until cozy-aio has installed the Flux CRDs).
	opArgs := []string{
		"--install-crds=true", "--install-flux=false", "--disable-telemetry",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--platform-source-name=cozystack-platform",
		"--platform-source-url=oci://" + reg.Host() + "/cozystack-packages",
		"--platform-source-ref=digest=" + desc.Digest.String(),
		"--kubeconfig=" + kubeconfig,
	}
	opCtx, opStop := context.WithCancel(ctx)
	opDone := make(chan struct{})
	stop = func() { opStop(); <-opDone; opLog.Close() }
	go func() {
		defer close(opDone)
		for restarts := 0; opCtx.Err() == nil; restarts++ {
			op := exec.Command(o.operator, opArgs...)
			op.Stdout, op.Stderr = opLog, opLog
			op.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "COZYSTACK_VERSION=v1.6.2")
			if err := op.Start(); err != nil {
				say("cozystack-operator: %v", err)
				return
			}
			exited := make(chan error, 1)
			go func() { exited <- op.Wait() }()
			select {
			case <-opCtx.Done():
				_ = op.Process.Signal(syscall.SIGTERM)
				<-exited
				return
			case err := <-exited:
				say("cozystack-operator exited (%v); restarting it in 5 s", err)
			}
			select {
			case <-opCtx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	say("cozystack-operator started: %s %s", o.operator, strings.Join(opArgs, " "))

	if err := waitFor(ctx, 5*time.Minute, "the Package CRD", func() (bool, error) {
		_, err := dyn.Resource(packageGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		return stop, err
	}

	var values map[string]any
	if err := yaml.Unmarshal([]byte(o.values), &values); err != nil {
		return stop, fmt.Errorf("-values: %w", err)
	}
	pkg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cozystack.io/v1alpha1", "kind": "Package",
		"metadata": map[string]any{"name": "cozystack.cozystack-platform"},
		"spec": map[string]any{
			"variant":    o.variant,
			"components": map[string]any{"platform": map[string]any{"values": values}},
		},
	}}
	if _, err := dyn.Resource(packageGVR).Create(ctx, pkg, metav1.CreateOptions{}); err != nil {
		return stop, fmt.Errorf("creating the platform Package: %w", err)
	}
	return stop, nil
}

// replicaArtifacts gives a replica beyond the first its own artifact
// server, advertising the first one's address, which stands for the
// Service in front of the replicas of a cluster: the URLs that whichever
// replica leads writes outlive that replica, and the server behind them
// answers for artifacts it does not hold (engine Options.ArtifactBaseURL).
func replicaArtifacts(first string) []string {
	return []string{
		fmt.Sprintf("--artifact-addr=127.0.0.1:%d", freePort()),
		"--artifact-base-url=http://" + strings.TrimPrefix(first, "--artifact-addr="),
	}
}
