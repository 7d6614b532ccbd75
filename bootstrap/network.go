package bootstrap

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PhaseLabel marks a unit (a Kustomization, a HelmRelease, a source) as
// part of a bootstrap phase. Units labelled PhaseLabel=network reconcile
// first; every other unit waits until the nodes have a network. The
// annotation of the same name is honoured too.
const PhaseLabel = "cozy-aio.cozystack.io/phase"

// Phases: the values of PhaseLabel that matter, and the gate's states.
const (
	// PhaseNetwork reconciles only the network units (the CNI).
	PhaseNetwork = "network"
	// phaseAll reconciles everything.
	phaseAll = "all"
)

// isNetworkUnit reports whether obj belongs to the network phase.
func isNetworkUnit(obj metav1.Object) bool {
	return obj.GetLabels()[PhaseLabel] == PhaseNetwork || obj.GetAnnotations()[PhaseLabel] == PhaseNetwork
}

// networkTaints are the taints that say a node's network is not there yet.
var networkTaints = []string{
	"node.kubernetes.io/not-ready",
	"node.kubernetes.io/network-unavailable",
	"node.cilium.io/agent-not-ready",
}

// NodeNetworkReady reports whether a node has its network: the
// NetworkUnavailable condition is False or absent, Ready is True, and none
// of the not-ready taints remain. When not, it says why.
func NodeNetworkReady(n *corev1.Node) (bool, string) {
	var ready bool
	for _, c := range n.Status.Conditions {
		switch c.Type {
		case corev1.NodeNetworkUnavailable:
			if c.Status == corev1.ConditionTrue {
				return false, fmt.Sprintf("node %s: NetworkUnavailable=True (%s)", n.Name, c.Reason)
			}
		case corev1.NodeReady:
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return false, fmt.Sprintf("node %s: not Ready", n.Name)
	}
	for _, t := range n.Spec.Taints {
		for _, k := range networkTaints {
			if t.Key == k {
				return false, fmt.Sprintf("node %s: taint %s", n.Name, k)
			}
		}
	}
	return true, ""
}

// NetworkOptions configures networkReady. The zero value needs one node.
type NetworkOptions struct {
	// MinNodes is how many nodes must have the network. Default: 1.
	MinNodes int
}

// networkReady decides whether the network phase is over: at least
// MinNodes nodes have their network. When not, it says which nodes wait
// and why.
func networkReady(nodes []corev1.Node, opts NetworkOptions) (bool, string) {
	min := opts.MinNodes
	if min <= 0 {
		min = 1
	}
	var readyCount int
	var waiting []string
	for i := range nodes {
		if ok, why := NodeNetworkReady(&nodes[i]); ok {
			readyCount++
		} else {
			waiting = append(waiting, why)
		}
	}
	if readyCount >= min {
		return true, ""
	}
	sort.Strings(waiting)
	if len(nodes) == 0 {
		waiting = []string{"no nodes registered"}
	}
	return false, fmt.Sprintf("waiting for the network: %d of %d required nodes ready; %s",
		readyCount, min, strings.Join(waiting, "; "))
}
