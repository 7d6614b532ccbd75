package bootstrap

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// phaseGate is the bootstrap gate: during the network phase it admits only
// network units; once the nodes have a network it admits everything. It
// plugs into engine.Options.Gate.
type phaseGate struct {
	mu     sync.Mutex
	phase  string
	reason string
	gauge  *prometheus.GaugeVec
}

// newPhaseGate returns a gate in the network phase. When registry is not
// nil, the phase is exported as cozy_aio_bootstrap_phase{phase}.
func newPhaseGate(registry prometheus.Registerer) *phaseGate {
	p := &phaseGate{phase: PhaseNetwork, reason: "waiting for the network: not evaluated yet"}
	if registry != nil {
		p.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cozy_aio_bootstrap_phase",
			Help: "The bootstrap phase: 1 for the current phase (network, all), 0 otherwise.",
		}, []string{"phase"})
		if err := registry.Register(p.gauge); err != nil {
			p.gauge = nil
		}
	}
	p.export()
	return p
}

// Phase returns the current phase and, in the network phase, why.
func (p *phaseGate) Phase() (phase, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.phase, p.reason
}

// Gate admits network units always and other units once the network
// phase is over.
func (p *phaseGate) Gate(_ context.Context, obj client.Object) (bool, string) {
	if isNetworkUnit(obj) {
		return true, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.phase == phaseAll {
		return true, ""
	}
	return false, p.reason
}

// Observe records a network evaluation. The first ready one moves to
// phaseAll, for good: a node losing its network later does not hold the
// platform back again. It reports whether the phase changed.
func (p *phaseGate) Observe(ready bool, reason string) bool {
	p.mu.Lock()
	if p.phase == phaseAll {
		p.mu.Unlock()
		return false
	}
	if !ready {
		p.reason = reason
		p.mu.Unlock()
		return false
	}
	p.phase, p.reason = phaseAll, ""
	p.mu.Unlock()
	p.export()
	return true
}

// Readyz describes the phase for /readyz.
func (p *phaseGate) Readyz() string {
	phase, reason := p.Phase()
	if reason == "" {
		return "phase: " + phase
	}
	return "phase: " + phase + " (" + reason + ")"
}

func (p *phaseGate) export() {
	if p.gauge == nil {
		return
	}
	phase, _ := p.Phase()
	for _, ph := range []string{PhaseNetwork, phaseAll} {
		v := 0.0
		if ph == phase {
			v = 1
		}
		p.gauge.WithLabelValues(ph).Set(v)
	}
}
