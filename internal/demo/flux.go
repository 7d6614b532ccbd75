package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FluxControllers are the binaries of Flux's source-controller and
// helm-controller, built from their module source (the module proxy
// serves them; BENCHMARKS.md gives the commands), run by the scale shape
// in place of cozy-aio so that the same releases, on the same machine, in
// the same run, give Flux's figures beside cozy-aio's. The demo neither
// builds nor ships them.
type FluxControllers struct {
	SourceController, HelmController string
	// Concurrency is helm-controller's --concurrent. Default: 16 (the
	// comparison of issue #9; Flux's own default is 4).
	Concurrency int
}

// startFlux runs source-controller and helm-controller against the
// management cluster, as flux-aio runs them: no leader election, every
// namespace, the artifacts served on loopback. Their peak RSS and CPU are
// summed (fluxUsage).
func (h *harness) startFlux(kubeconfig string) error {
	f := h.opts.Flux
	conc := f.Concurrency
	if conc <= 0 {
		conc = 16
	}
	ports, err := freePorts(5)
	if err != nil {
		return err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	storage := filepath.Join(h.opts.WorkDir, "data", "source-controller")
	if err := os.MkdirAll(storage, 0o700); err != nil {
		return err
	}
	h.exits = make(chan replicaExit, 4)
	for _, r := range []*replica{
		{id: "source-controller", binary: f.SourceController, health: addr(0), args: []string{
			"--metrics-addr=" + addr(0), "--health-addr=" + addr(1), "--enable-leader-election=false",
			"--storage-path=" + storage, "--storage-addr=" + addr(2), "--storage-adv-addr=" + addr(2),
			"--log-encoding=json", "--concurrent=4",
		}},
		{id: "helm-controller", binary: f.HelmController, health: addr(3), args: []string{
			"--metrics-addr=" + addr(3), "--health-addr=" + addr(4), "--enable-leader-election=false",
			"--log-encoding=json", "--concurrent=" + strconv.Itoa(conc),
		}},
	} {
		r.env, r.display = []string{"KUBECONFIG=" + kubeconfig}, "Flux's "+r.id
		r.log = filepath.Join(h.logs, r.id+".log")
		h.reps = append(h.reps, r)
		h.say("starting Flux's %s: %s %s", r.id, r.binary, strings.Join(r.args, " "))
		if err := r.start(h.exits); err != nil {
			return fmt.Errorf("%s: %w", r.id, err)
		}
	}
	h.res.CozyStarted = time.Now()
	h.apiCPU, h.etcdCPU = h.controlPlaneCPU()
	return nil
}

// fluxUsage reads the Flux controllers' resource use when every unit has
// settled: peak RSS and CPU summed over the two processes (each one's own
// peak, so the sum may exceed what was resident at any one moment), the
// API requests from the audit logs, as for cozy-aio.
func (h *harness) fluxUsage() {
	h.res.PeakRSS, h.res.CPU = 0, 0
	for _, r := range h.reps {
		rss, cpu := r.usage()
		h.res.PeakRSS += rss
		h.res.CPU += cpu
	}
	h.res.RemoteBreakdown = h.remoteBreakdown()
	h.res.RemoteRequests = h.res.RemoteBreakdown.Total()
	api, etcd := h.controlPlaneCPU()
	h.res.APIServerCPU, h.res.EtcdCPU = api-h.apiCPU, etcd-h.etcdCPU
	h.res.Breakdown, _, _ = countRequests(filepath.Join(h.logs, "audit.log"), 0, CozyUser)
}
