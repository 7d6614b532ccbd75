package engine_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleEngine measures what an engine costs while nothing changes:
// one GitRepository and 199 Kustomizations (200 objects) all Ready, then
// COZY_IDLE_SECONDS (default 60) of idling. It reports the process's CPU
// seconds per minute (the API server runs in its own process) and the Go
// heap in use.
//
//	go test ./engine -run '^$' -bench BenchmarkIdleEngine -benchtime 1x
func BenchmarkIdleEngine(b *testing.B) {
	idle := 60 * time.Second
	if s, err := strconv.Atoi(os.Getenv("COZY_IDLE_SECONDS")); err == nil && s > 0 {
		idle = time.Duration(s) * time.Second
	}
	for i := 0; i < b.N; i++ {
		ctx := context.Background()
		ns := cp.Namespace(b)
		files := map[string]string{}
		const units = 199
		for u := 0; u < units; u++ {
			files[fmt.Sprintf("u%03d/cm.yaml", u)] = configMap(fmt.Sprintf("cm-%03d", u), ns)
		}
		gitSource(b, ns, "apps", files)
		startEngine(b, engine.Options{})
		var kss []*kustomizev1.Kustomization
		for u := 0; u < units; u++ {
			k := kustomization(ns, fmt.Sprintf("u%03d", u), "apps", fmt.Sprintf("./u%03d", u))
			if err := cp.Client.Create(ctx, k); err != nil {
				b.Fatal(err)
			}
			kss = append(kss, k)
		}
		deadline := time.Now().Add(5 * time.Minute)
		for _, k := range kss {
			for {
				if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(k), k); err == nil && conditions.IsReady(k) {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%s never became Ready", k.Name)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(5 * time.Second) // let the last status writes settle
		b.ResetTimer()
		before := cpuTime()
		time.Sleep(idle)
		used := cpuTime() - before
		b.StopTimer()
		b.ReportMetric(used.Seconds()/idle.Minutes(), "cpu-s/min")
		b.ReportMetric(float64(units+1), "objects")
	}
}
