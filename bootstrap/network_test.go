package bootstrap_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/bootstrap"
)

func node(t *testing.T, doc string) corev1.Node {
	t.Helper()
	var n corev1.Node
	if err := yaml.UnmarshalStrict([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

const (
	freshNode = `
metadata: {name: fresh}
spec:
  taints:
  - {key: node.kubernetes.io/not-ready, effect: NoSchedule}
status:
  conditions:
  - {type: NetworkUnavailable, status: "True", reason: NoRouteCreated}
  - {type: Ready, status: "False"}
`
	readyNode = `
metadata: {name: ready}
status:
  conditions:
  - {type: NetworkUnavailable, status: "False"}
  - {type: Ready, status: "True"}
`
	readyNoNetCondition = `
metadata: {name: plain}
status:
  conditions:
  - {type: Ready, status: "True"}
`
	ciliumTainted = `
metadata: {name: cilium}
spec:
  taints:
  - {key: node.cilium.io/agent-not-ready, effect: NoSchedule}
status:
  conditions:
  - {type: Ready, status: "True"}
`
)

func TestNetworkReady(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   []string
		min     int
		want    bool
		wantWhy string
	}{
		{name: "no nodes", want: false, wantWhy: "no nodes registered"},
		{name: "fresh node", nodes: []string{freshNode}, want: false, wantWhy: "node fresh: NetworkUnavailable=True (NoRouteCreated)"},
		{name: "ready node", nodes: []string{readyNode}, want: true},
		{name: "absent NetworkUnavailable counts as available", nodes: []string{readyNoNetCondition}, want: true},
		{name: "cilium agent taint", nodes: []string{ciliumTainted}, want: false, wantWhy: "taint node.cilium.io/agent-not-ready"},
		{name: "one of two is enough by default", nodes: []string{freshNode, readyNode}, want: true},
		{name: "min nodes 2", nodes: []string{freshNode, readyNode}, min: 2, want: false, wantWhy: "1 of 2 required nodes ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []corev1.Node
			for _, d := range tc.nodes {
				nodes = append(nodes, node(t, d))
			}
			got, why := bootstrap.NetworkReady(nodes, bootstrap.NetworkOptions{MinNodes: tc.min})
			if got != tc.want {
				t.Fatalf("ready = %v (%s), want %v", got, why, tc.want)
			}
			if !strings.Contains(why, tc.wantWhy) {
				t.Fatalf("reason %q does not contain %q", why, tc.wantWhy)
			}
		})
	}
}

func TestIsNetworkUnit(t *testing.T) {
	byLabel := &metav1.ObjectMeta{Labels: map[string]string{bootstrap.PhaseLabel: "network"}}
	byAnnotation := &metav1.ObjectMeta{Annotations: map[string]string{bootstrap.PhaseLabel: "network"}}
	other := &metav1.ObjectMeta{Labels: map[string]string{bootstrap.PhaseLabel: "apps"}}
	if !bootstrap.IsNetworkUnit(byLabel) || !bootstrap.IsNetworkUnit(byAnnotation) || bootstrap.IsNetworkUnit(other) {
		t.Fatal("IsNetworkUnit misclassifies")
	}
}
