package demo_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

// TestClusterRestoresPodReadiness plays the race the node lifecycle
// controller creates: it marks a pod NotReady when the pod lands on a node
// that its health view, refreshed every 5 s, still holds NotReady. A
// kubelet writes the pod's status back; the simulator must too, or the
// pod's Deployment never becomes Available. It lives here, beside the
// simulator's user, because testenv's own tests hold the machine's
// control-plane lock for their whole run.
func TestClusterRestoresPodReadiness(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := testenv.StartCluster(ctx, testenv.ClusterOptions{Nodes: 1, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	node := c.Nodes[0]
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
			Spec: corev1.PodSpec{
				NodeName:    node,
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "c", Image: "registry.local/c:1"}},
			},
		}
	}
	ready := func(name string) error {
		return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady {
					return p.Status.Phase == corev1.PodRunning && cond.Status == corev1.ConditionTrue, nil
				}
			}
			return false, nil
		})
	}
	// The network agent gives the node its network.
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod("agent", testenv.DefaultNetworkPodLabels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, ok := c.NetworkReadyAt()[node]
		return ok, nil
	}); err != nil {
		t.Fatalf("the network agent's pod did not give %s its network: %v", node, err)
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod("app", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ready("app"); err != nil {
		t.Fatalf("the pod did not become Running and Ready: %v", err)
	}
	// Mark it NotReady the way the node lifecycle controller does.
	p, err := cs.CoreV1().Pods("default").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			p.Status.Conditions[i].Status = corev1.ConditionFalse
			p.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ready("app"); err != nil {
		t.Fatalf("a pod marked NotReady on a healthy node must become Ready again, as a kubelet's next sync makes it: %v", err)
	}
}
