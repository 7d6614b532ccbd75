package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/plan"
)

// TestPlanChartAsTheEngine: the rebuilt SeaweedFS rename (apply/helm's
// testdata), held by an engine under --upgrade-hold risky; `cozy-aio plan
// --chart` of the same packaged chart prints the plan the engine holds
// (the same hash) and exits 2; `cozy-aio plan approve` lets it through.
func TestPlanChartAsTheEngine(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	kubeconfig := adminKubeconfig(t)
	if err := engine.InstallMissingCRDs(ctx, cp.Config, "cozy-aio-test"); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{Scheme: engine.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	files, err := testenv.ReadTree("../../apply/helm/testdata/seaweedfs")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	archives, revisions := map[string]string{}, map[string]string{}
	for _, v := range []string{"4.0.405", "4.31.0"} {
		files["Chart.yaml"] = regexp.MustCompile(`(?m)^version: .*$`).ReplaceAllString(files["Chart.yaml"], "version: "+v)
		desc, err := reg.PushChart(ctx, "charts/seaweedfs", files)
		if err != nil {
			t.Fatal(err)
		}
		revisions[v] = v + "@" + desc.Digest.String()
		tgz, err := testenv.TarGz(files, "seaweedfs/")
		if err != nil {
			t.Fatal(err)
		}
		archives[v] = filepath.Join(t.TempDir(), "seaweedfs-"+v+".tgz")
		if err := os.WriteFile(archives[v], tgz, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	e, err := engine.New(cp.Config, engine.Options{DataDir: t.TempDir(), ArtifactAddr: "127.0.0.1:0",
		Registry: prometheus.NewRegistry(), UpgradeHold: "risky"})
	if err != nil {
		t.Fatal(err)
	}
	ectx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Start(ectx) }()
	t.Cleanup(func() { cancel(); <-done })

	src := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "seaweedfs", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + reg.Host() + "/charts/seaweedfs", Insecure: true,
			Interval:      &metav1.Duration{Duration: time.Hour},
			Reference:     &sourcev1.OCIRepositoryRef{Tag: "4.0.405"},
			LayerSelector: &sourcev1.OCILayerSelector{MediaType: testenv.HelmChartMediaType, Operation: "copy"},
		},
	}
	hr := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "rel", Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "seaweedfs"},
			Install:  &helmv2.Install{DisableWait: true},
			Upgrade:  &helmv2.Upgrade{DisableWait: true},
		},
	}
	for _, o := range []client.Object{src, hr} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	heldHashOf := func() string {
		if err := c.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
			t.Fatal(err)
		}
		c := apimeta.FindStatusCondition(hr.Status.Conditions, engine.HeldCondition)
		if c == nil || c.Status != metav1.ConditionTrue {
			return ""
		}
		if m := heldHash.FindStringSubmatch(c.Message); m != nil {
			return m[1]
		}
		return ""
	}
	poll(t, "the install", func() bool {
		_ = c.Get(ctx, client.ObjectKeyFromObject(hr), hr)
		return apimeta.IsStatusConditionTrue(hr.Status.Conditions, "Ready")
	})

	// Before the engine sees 4.31.0, the CLI plans it: the rename is risky.
	var out, errb bytes.Buffer
	code := run([]string{"plan", "--kubeconfig", kubeconfig, "--chart", archives["4.31.0"], "--release", ns + "/rel", "-o", "json"}, &out, &errb)
	if code != 2 {
		t.Fatalf("plan --chart 4.31.0: exit %d, want 2\n%s%s", code, out.String(), errb.String())
	}
	var p plan.Plan
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "DuplicateWorkload") {
		t.Fatalf("plan names no DuplicateWorkload:\n%s", out.String())
	}
	// As the HelmRelease's upgrade: its settings (helm-controller's
	// origin labels) and the source revision in the chart version.
	out.Reset()
	code = run([]string{"plan", "--kubeconfig", kubeconfig, "--helmrelease", ns + "/rel", "--chart", archives["4.31.0"],
		"--chart-revision", revisions["4.31.0"], "-o", "json"}, &out, &errb)
	if code != 2 {
		t.Fatalf("plan --helmrelease --chart 4.31.0: exit %d, want 2\n%s%s", code, out.String(), errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	// The chart as installed: nothing to do.
	out.Reset()
	if code := run([]string{"plan", "--kubeconfig", kubeconfig, "--helmrelease", ns + "/rel", "--chart", archives["4.0.405"]}, &out, &errb); code != 0 {
		t.Fatalf("plan --helmrelease --chart 4.0.405: exit %d, want 0\n%s%s", code, out.String(), errb.String())
	}

	if err := c.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
		t.Fatal(err)
	}
	src.Spec.Reference.Tag = "4.31.0"
	if err := c.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	var held string
	poll(t, "the held upgrade", func() bool { held = heldHashOf(); return held != "" })
	if held != p.Hash {
		t.Fatalf("the engine holds plan %s, the CLI planned %s", held, p.Hash)
	}

	out.Reset()
	if code := run([]string{"plan", "approve", "--kubeconfig", kubeconfig, ns + "/rel"}, &out, &errb); code != 0 || !strings.Contains(out.String(), held) {
		t.Fatalf("plan approve: exit %d\n%s%s", code, out.String(), errb.String())
	}
	poll(t, "the approved upgrade", func() bool {
		return heldHashOf() == "" && hr.Status.History.Latest() != nil && hr.Status.History.Latest().Version == 2
	})
	// The HelmRelease in the cluster, with its source's artifact: up to date.
	out.Reset()
	if code := run([]string{"plan", "--kubeconfig", kubeconfig, "--helmrelease", ns + "/rel"}, &out, &errb); code != 0 {
		t.Fatalf("plan --helmrelease after the upgrade: exit %d, want 0\n%s%s", code, out.String(), errb.String())
	}
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
