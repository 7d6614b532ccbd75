package demo

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// machineSpeed decodes and encodes a ConfigMap-sized JSON object on every
// CPU for d and returns the round trips per second. The scale benchmark
// prints it next to its figures: a shared VM's speed drifts by tens of
// percent from hour to hour, and the API server's work is mostly this kind
// of allocation-heavy JSON, so the figure tells a slow run of cozy-aio from
// a slow run of the machine.
func machineSpeed(d time.Duration) float64 {
	data := map[string]any{}
	for i := range 40 {
		data[fmt.Sprintf("key-%02d", i)] = fmt.Sprintf("value %d of a ConfigMap rendered by a chart", i)
	}
	doc, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "calibration", "namespace": "default", "labels": map[string]any{"app": "demo"}},
		"data":     data,
	})
	var done atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				var v map[string]any
				if json.Unmarshal(doc, &v) != nil {
					return
				}
				if _, err := json.Marshal(v); err != nil {
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds()
}
