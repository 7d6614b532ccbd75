package health

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

// BenchmarkWait compares the event-driven Waiter with a 2-second polling
// loop on 1,000 Deployments that become ready over about 5 seconds, against
// the envtest API server. It reports the CPU time of this process and of
// kube-apiserver during the wait, and how long after the last object became
// ready the wait noticed. hold=20s first keeps every object not ready for
// 20 seconds, as a slow rollout would. The "writer-only" case runs the same status
// writes with nobody waiting: subtract it from the others.
// COZY_BENCH_WAIT_N (default 1000) sets the number of Deployments.
func BenchmarkWait(b *testing.B) {
	n := 1000
	if s := os.Getenv("COZY_BENCH_WAIT_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	for _, hold := range []time.Duration{0, 20 * time.Second} {
		prefix := fmt.Sprintf("n=%d/hold=%s", n, hold)
		b.Run(prefix+"/writer-only", func(b *testing.B) { benchWait(b, n, hold, nil) })
		b.Run(prefix+"/waiter-watch", func(b *testing.B) { benchWait(b, n, hold, waitWithWaiter) })
		b.Run(prefix+"/poll-2s", func(b *testing.B) { benchWait(b, n, hold, waitByPolling) })
	}
}

type waitFunc func(ctx context.Context, ns string, refs []ObjectRef) error

func waitWithWaiter(ctx context.Context, _ string, refs []ObjectRef) error {
	w, err := NewWaiter(cp.Config, WaiterOptions{})
	if err != nil {
		return err
	}
	_, err = w.Wait(ctx, refs, WaitOptions{Timeout: 5 * time.Minute})
	return err
}

// waitByPolling is the strongest simple polling loop: every 2 seconds it
// lists the namespace's Deployments once (not one GET per object) and
// computes each one's status with kstatus.
func waitByPolling(ctx context.Context, ns string, refs []ObjectRef) error {
	want := map[string]bool{}
	for _, r := range refs {
		want[r.Name] = true
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("apps/v1")
		list.SetKind("DeploymentList")
		if err := cp.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		ready := 0
		for i := range list.Items {
			if !want[list.Items[i].GetName()] {
				continue
			}
			if r, _ := Compute(&list.Items[i]); r.Status == Current {
				ready++
			}
		}
		if ready == len(refs) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// benchWait creates n Deployments, starts wait, lets hold pass with
// nothing becoming ready (a slow rollout), then marks them ready in 10
// batches 500 ms apart.
func benchWait(b *testing.B, n int, hold time.Duration, wait waitFunc) {
	for range b.N {
		b.StopTimer()
		ctx := context.Background()
		ns := cp.Namespace(b)
		deps := make([]*appsv1.Deployment, n)
		refs := make([]ObjectRef, n)
		testenv.Parallel(n, 32, func(i int) {
			deps[i] = deployment(ns, fmt.Sprintf("d-%04d", i))
			if err := cp.Client.Create(ctx, deps[i]); err != nil {
				b.Error(err)
			}
			refs[i] = refOfDeployment(deps[i])
		})
		if b.Failed() {
			b.FailNow()
		}
		apiPID := apiserverPID(b)
		cpu0, api0 := selfCPU(), procCPU(apiPID)
		b.StartTimer()

		var lastWrite time.Time
		var waitErr error
		done := make(chan time.Time, 1)
		if wait != nil {
			go func() { waitErr = wait(ctx, ns, refs); done <- time.Now() }()
		}
		time.Sleep(hold)
		// 10 batches of n/10, one every 500 ms.
		for batch := range 10 {
			lo, hi := batch*n/10, (batch+1)*n/10
			testenv.Parallel(hi-lo, 16, func(i int) {
				if err := markReady(ctx, deps[lo+i]); err != nil {
					b.Error(err)
				}
			})
			lastWrite = time.Now()
			if batch < 9 {
				time.Sleep(500 * time.Millisecond)
			}
		}
		end := lastWrite
		if wait != nil {
			end = <-done
			if waitErr != nil {
				b.Fatal(waitErr)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64((selfCPU() - cpu0).Milliseconds()), "client-cpu-ms")
		b.ReportMetric(float64((procCPU(apiPID) - api0).Milliseconds()), "apiserver-cpu-ms")
		b.ReportMetric(float64(end.Sub(lastWrite).Milliseconds()), "ms-after-last-ready")
	}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// apiserverPID finds the kube-apiserver of cp by its secure port.
func apiserverPID(b *testing.B) int {
	u, err := url.Parse(cp.Config.Host)
	if err != nil {
		b.Fatal(err)
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := string(data)
		if strings.Contains(cmd, "kube-apiserver") && strings.Contains(cmd, "--secure-port="+u.Port()) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// procCPU returns the user+system CPU time of pid, or 0 when unknown.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}
