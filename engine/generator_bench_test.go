package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// platformCharts is the number of chart directories of the synthetic
// packages/ tree.
const platformCharts = 100

// BenchmarkArtifactGenerators measures Cozystack's platform start: one
// OCIRepository holding the whole packages/ tree (platformTree: 4,100
// files, about 43 MB), then ArtifactGenerators with two outputs each
// created at once, every output a chart directory with the cozy-lib
// library chart and, on two outputs in three, a values file merged or
// overwritten onto its values.yaml. It reports the seconds from the
// creation of the generators to every ExternalArtifact Ready, the test
// process's CPU time then, its resident set when the generators are
// created (base-RSS) and at its largest until all are Ready (peak-RSS;
// engine, registry and clients together), and the source extractions the
// generators made: with the extracted trees shared (the engine's
// behaviour) and private to each reconcile (before the shared trees).
// The two give the same artifacts, digest for digest.
//
//	go test ./engine -run '^$' -bench BenchmarkArtifactGenerators -benchtime 1x
func BenchmarkArtifactGenerators(b *testing.B) {
	ctx := context.Background()
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.PushArtifact(ctx, "cozystack/platform", "v1", platformTree(platformCharts), nil); err != nil {
		b.Fatal(err)
	}
	variants := []struct {
		name string
		opts engine.Options
	}{
		{"shared", engine.Options{}},
		{"private", engine.WithPrivateExtraction(engine.Options{})},
	}
	for _, outputs := range []int{100, 200} {
		b.Run(fmt.Sprintf("outputs=%d", outputs), func(b *testing.B) {
			digests := map[string]map[string]string{}
			for _, v := range variants {
				b.Run(v.name, func(b *testing.B) {
					var ready, cpu time.Duration
					var base, peak, extractions int64
					for range b.N {
						r := runPlatform(b, reg, v.opts, outputs)
						ready += r.ready
						cpu += r.cpu
						base, peak = max(base, r.baseRSS), max(peak, r.peakRSS)
						extractions += r.extractions
						digests[v.name] = r.digests
					}
					b.ReportMetric(ready.Seconds()/float64(b.N), "s-to-ready")
					b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s")
					b.ReportMetric(float64(base)/(1<<20), "base-RSS-MB")
					b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MB")
					b.ReportMetric(float64(extractions)/float64(b.N), "extractions")
				})
			}
			if s, p := digests["shared"], digests["private"]; s != nil && p != nil {
				for name, d := range s {
					if p[name] != d {
						b.Errorf("ExternalArtifact %s: %s from shared trees, %s from private ones", name, d, p[name])
					}
				}
			}
		})
	}
}

type platformRun struct {
	// ready is the time from the creation of the generators to every
	// ExternalArtifact Ready; cpu the test process's CPU time then.
	ready, cpu time.Duration
	// baseRSS is the resident set when the generators are created, and
	// peakRSS its largest size until every ExternalArtifact is Ready.
	baseRSS, peakRSS int64
	extractions      int64
	digests          map[string]string // ExternalArtifact name → digest
}

// runPlatform starts an engine, waits for the platform OCIRepository, then
// creates outputs/2 generators and waits for all their ExternalArtifacts
// Ready, on the clock. It deletes what it created before it stops the
// engine, so that the next run's engine has nothing else to reconcile.
func runPlatform(b *testing.B, reg *testenv.Registry, opts engine.Options, outputs int) platformRun {
	b.StopTimer()
	ctx := context.Background()
	ns := cp.Namespace(b)
	e, stop := runEngine(b, opts)
	defer stop()
	repo := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "cozystack-platform", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + reg.Host() + "/cozystack/platform", Insecure: true,
			Interval:  &metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.OCIRepositoryRef{Tag: "v1"},
		},
	}
	if err := cp.Client.Create(ctx, repo); err != nil {
		b.Fatal(err)
	}
	pollUntil(b, 2*time.Minute, "the platform OCIRepository Ready", func() bool {
		return cp.Client.Get(ctx, client.ObjectKeyFromObject(repo), repo) == nil && repo.Status.Artifact != nil && conditions.IsReady(repo)
	})
	gens := platformGenerators(ns, outputs)
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS(b)
	base, cpu, start := peakRSS(b), cpuTime(), time.Now()
	b.StartTimer()
	testenv.Parallel(len(gens), 16, func(i int) {
		if err := cp.Client.Create(ctx, gens[i]); err != nil {
			b.Error(err)
		}
	})
	digests := map[string]string{}
	pollUntil(b, 5*time.Minute, fmt.Sprintf("%d ExternalArtifacts Ready", outputs), func() bool {
		var list sourcev1.ExternalArtifactList
		if err := cp.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false
		}
		clear(digests)
		for _, ea := range list.Items {
			if ea.Status.Artifact != nil && conditions.IsReady(&ea) {
				digests[ea.Name] = ea.Status.Artifact.Digest
			}
		}
		return len(digests) == outputs
	})
	b.StopTimer()
	run := platformRun{ready: time.Since(start), cpu: cpuTime() - cpu, baseRSS: base, peakRSS: peakRSS(b), extractions: e.Extractions(), digests: digests}
	for _, o := range []client.Object{&swv1beta1.ArtifactGenerator{}, &sourcev1.ExternalArtifact{}, &sourcev1.OCIRepository{}} {
		if err := cp.Client.DeleteAllOf(ctx, o, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
	}
	pollUntil(b, time.Minute, "the generators deleted", func() bool {
		var list swv1beta1.ArtifactGeneratorList
		return cp.Client.List(ctx, &list, client.InNamespace(ns)) == nil && len(list.Items) == 0
	})
	return run
}

// platformGenerators returns outputs/2 ArtifactGenerators over the
// platform OCIRepository, with two outputs each, as Cozystack's
// PackageSources make them.
func platformGenerators(ns string, outputs int) []*swv1beta1.ArtifactGenerator {
	var gens []*swv1beta1.ArtifactGenerator
	for g := range outputs / 2 {
		gen := &swv1beta1.ArtifactGenerator{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gen-%03d", g), Namespace: ns},
			Spec: swv1beta1.ArtifactGeneratorSpec{
				Sources: []swv1beta1.SourceReference{{Alias: "cozystack", Kind: sourcev1.OCIRepositoryKind, Name: "cozystack-platform"}},
			},
		}
		for o := 2 * g; o < 2*g+2; o++ {
			app := fmt.Sprintf("app-%03d", o%platformCharts)
			out := swv1beta1.OutputArtifact{
				Name: fmt.Sprintf("out-%03d", o),
				Copy: []swv1beta1.CopyOperation{
					{From: "@cozystack/packages/apps/" + app + "/**", To: "@artifact/" + app + "/"},
					{From: "@cozystack/packages/library/cozy-lib/**", To: "@artifact/" + app + "/charts/cozy-lib/"},
				},
			}
			if strategy := []string{swv1beta1.MergeStrategy, swv1beta1.OverwriteStrategy, ""}[o%3]; strategy != "" {
				out.Copy = append(out.Copy, swv1beta1.CopyOperation{
					From: "@cozystack/packages/apps/" + app + "/values-platform.yaml", To: "@artifact/" + app + "/values.yaml", Strategy: strategy,
				})
			}
			gen.Spec.OutputArtifacts = append(gen.Spec.OutputArtifacts, out)
		}
		gens = append(gens, gen)
	}
	return gens
}

// platformTree returns a packages/ tree shaped as Cozystack's, the same
// on every call: charts chart directories of 40 files (Chart.yaml,
// values.yaml, values-platform.yaml and 37 templates of 1.5 KB),
// packages/library/cozy-lib with 15 files, and 100 large files (CRDs,
// vendored manifests) of 360 KB, about 43 MB in all.
func platformTree(charts int) map[string]string {
	rng := rand.New(rand.NewPCG(34, 4))
	words := strings.Fields(`apiVersion kind metadata name namespace labels annotations spec replicas image
		repository tag resources limits requests cpu memory enabled true false {{ }} .Values .Release include
		toYaml nindent cozy-lib - if else end range port 8080 service selector matchLabels containers env value`)
	text := func(size int) string {
		var sb strings.Builder
		for sb.Len() < size {
			sb.WriteString(strings.Repeat("  ", rng.IntN(4)))
			for range 1 + rng.IntN(6) {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(' ')
			}
			sb.WriteString(strconv.Itoa(rng.IntN(1 << 20)))
			sb.WriteByte('\n')
		}
		return sb.String()
	}
	files := map[string]string{}
	for c := range charts {
		dir := fmt.Sprintf("packages/apps/app-%03d/", c)
		files[dir+"Chart.yaml"] = fmt.Sprintf("apiVersion: v2\nname: app-%03d\nversion: 0.1.0\n", c)
		files[dir+"values.yaml"] = fmt.Sprintf("replicas: 1\nimage:\n  repository: app-%03d\n  tag: v1\nresources: {}\n", c)
		files[dir+"values-platform.yaml"] = "image:\n  tag: v2\nplatform:\n  enabled: true\n"
		for t := range 37 {
			files[fmt.Sprintf("%stemplates/t%02d.yaml", dir, t)] = text(1536)
		}
	}
	files["packages/library/cozy-lib/Chart.yaml"] = "apiVersion: v2\nname: cozy-lib\ntype: library\nversion: 0.1.0\n"
	for t := range 14 {
		files[fmt.Sprintf("packages/library/cozy-lib/templates/_l%02d.tpl", t)] = text(2048)
	}
	for s := range 20 {
		for f := range 5 {
			files[fmt.Sprintf("packages/system/sys-%02d/crds/crd-%d.yaml", s, f)] = text(360 << 10)
		}
	}
	return files
}

func pollUntil(b *testing.B, timeout time.Duration, what string, done func() bool) {
	b.Helper()
	for deadline := time.Now().Add(timeout); !done(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%s never happened in %s", what, timeout)
		}
	}
}

// resetPeakRSS makes VmHWM start again from the current RSS (Linux's
// clear_refs 5).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("peak RSS not reset, it counts from the process start: %v", err)
	}
}

// peakRSS is VmHWM of /proc/self/status, in bytes.
func peakRSS(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}
