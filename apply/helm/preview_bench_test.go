package helm_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/plan"
)

// BenchmarkUpgradePlans upgrades the same releases (COZY_BENCH_RELEASES,
// default 1,000; a ConfigMap and a Deployment each) to a new chart
// version and new values, four rounds in one run, alternating plans on
// (ReconcileOptions.Preview, as the engine's default) and off, 16 at a
// time as the engine's shards run them, with Flux's origin labels as
// every HelmRelease has. It reports each mode's median
// round: seconds, the process's peak RSS during the round, and the
// allocations per release; and the ratios on/off.
func BenchmarkUpgradePlans(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("COZY_BENCH_RELEASES")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ns := cp.Namespace(b)
		m := newManager(b, helm.Options{})
		states := make([]helm.State, n)
		upgrade := func(round int, preview bool) (time.Duration, int64, uint64) {
			files := chartFiles("demo", nil)
			files["Chart.yaml"] = strings.Replace(files["Chart.yaml"], "version: 0.1.0", fmt.Sprintf("version: 0.1.%d", round), 1)
			tgz, err := testenv.TarGz(files, "demo/")
			if err != nil {
				b.Fatal(err)
			}
			path := filepath.Join(b.TempDir(), fmt.Sprintf("demo-%d.tgz", round))
			if err := os.WriteFile(path, tgz, 0o600); err != nil {
				b.Fatal(err)
			}
			// Flux's origin labels, as every HelmRelease of the engine has.
			origin := helm.PostRender{OriginLabels: map[string]string{"helm.toolkit.fluxcd.io/name": "bench", "helm.toolkit.fluxcd.io/namespace": ns}}
			o := helm.ReconcileOptions{Spec: helm.Spec{Chart: helm.Chart{Path: path}, Wait: helm.WaitNone, PostRender: origin,
				Values: []map[string]any{values("deployment", true, "message", fmt.Sprint(round), "image", fmt.Sprintf("registry.example/app:%d", round))}}}
			var planned atomic.Int64
			if preview {
				o.Preview = &helm.Preview{Decide: func(string, *plan.Plan) error { planned.Add(1); return nil }}
			}
			peak := sampleRSS()
			alloc := totalAlloc()
			start := time.Now()
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						k := next.Add(1) - 1
						if k >= int64(n) {
							return
						}
						out, err := m.Reconcile(ctx, helm.Release{Name: fmt.Sprintf("r%04d", k), Namespace: ns}, o, states[k])
						if err != nil {
							errs <- err
						}
						states[k] = out.State
					}
				}()
			}
			wg.Wait()
			took := time.Since(start)
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			if preview && round > 0 && planned.Load() != int64(n) {
				b.Fatalf("round %d: %d plans for %d upgrades", round, planned.Load(), n)
			}
			return took, peak(), totalAlloc() - alloc
		}
		upgrade(0, false) // the installs
		var on, off []result
		for round, preview := range []bool{true, false, false, true, true, false} {
			t, rss, alloc := upgrade(round+1, preview)
			r := result{t, rss, alloc}
			if preview {
				on = append(on, r)
			} else {
				off = append(off, r)
			}
		}
		mon, moff := median(on), median(off)
		b.ReportMetric(mon.took.Seconds(), "s-on")
		b.ReportMetric(moff.took.Seconds(), "s-off")
		b.ReportMetric(float64(mon.rss)/(1<<20), "peakRSS-MB-on")
		b.ReportMetric(float64(moff.rss)/(1<<20), "peakRSS-MB-off")
		b.ReportMetric(float64(mon.alloc)/float64(n), "alloc-B/release-on")
		b.ReportMetric(float64(moff.alloc)/float64(n), "alloc-B/release-off")
		b.ReportMetric(mon.took.Seconds()/moff.took.Seconds(), "time-on/off")
		b.ReportMetric(float64(mon.rss)/float64(moff.rss), "rss-on/off")
	}
}

type result struct {
	took  time.Duration
	rss   int64
	alloc uint64
}

// median is the middle round by time, with that round's figures.
func median(rs []result) result {
	slices.SortFunc(rs, func(a, b result) int { return int(a.took - b.took) })
	return rs[len(rs)/2]
}

// sampleRSS samples the process's resident memory every 20 ms until the
// returned function is called, which returns the peak.
func sampleRSS() func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if v := rss(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { close(stop); <-done; return peak.Load() }
}

// rss reads VmRSS from /proc/self/status, in bytes; 0 where there is none.
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkPlan500 plans the upgrade of one release of a 500-object chart
// (ConfigMaps, each changed by the new values) with Manager.Plan, as
// `cozy-aio plan --chart` does; beside it, the same upgrade run with
// plans off, the cost a plan is weighed against.
func BenchmarkPlan500(b *testing.B) {
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: big\nversion: 1.0.0\n",
		"templates/cms.yaml": `{{- range $i := until 500 }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $.Release.Name }}-{{ $i }}
  labels:
    app.kubernetes.io/name: big
data:
  index: "{{ $i }}"
  round: {{ $.Values.round | quote }}
{{- end }}
`,
	}
	tgz, err := testenv.TarGz(files, "big/")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "big.tgz")
	if err := os.WriteFile(path, tgz, 0o600); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ns := cp.Namespace(b)
	m := newManager(b, helm.Options{})
	rel := helm.Release{Name: "big", Namespace: ns}
	spec := func(round int) helm.ReconcileOptions {
		return helm.ReconcileOptions{Spec: helm.Spec{Chart: helm.Chart{Path: path}, Wait: helm.WaitNone,
			Values: []map[string]any{values("round", fmt.Sprint(round))}}}
	}
	out, err := m.Reconcile(ctx, rel, spec(0), helm.State{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("plan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p, err := m.Plan(ctx, rel, spec(1))
			if err != nil || p == nil || len(p.Objects) != 500 {
				b.Fatalf("plan: %v", err)
			}
		}
	})
	round := 1
	b.Run("upgrade", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			round++ // new values each time: an upgrade, never "up to date"
			if out, err = m.Reconcile(ctx, rel, spec(round), out.State); err != nil || out.Release.Revision != round {
				b.Fatalf("upgrade to revision %d: %d, %v", round, out.Release.Revision, err)
			}
		}
	})
}
