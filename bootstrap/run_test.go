package bootstrap_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/bootstrap"
	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

func freshNodeObject(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
		}},
	}
}

func setNetwork(t *testing.T, ctx context.Context, name string, up bool) {
	t.Helper()
	var n corev1.Node
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	netStatus, ready := corev1.ConditionTrue, corev1.ConditionFalse
	if up {
		netStatus, ready = corev1.ConditionFalse, corev1.ConditionTrue
		n.Spec.Taints = nil
		if err := cp.Client.Update(ctx, &n); err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeNetworkUnavailable, Status: netStatus, Reason: "CNI", LastTransitionTime: now, LastHeartbeatTime: now},
		{Type: corev1.NodeReady, Status: ready, Reason: "KubeletReady", LastTransitionTime: now, LastHeartbeatTime: now},
	}
	if err := cp.Client.Status().Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
}

func unitYAML(ns, name, path string, network bool) string {
	labels := ""
	if network {
		labels = "\n  labels:\n    " + bootstrap.PhaseLabel + ": network"
	}
	return fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: %s
  namespace: %s%s
spec:
  interval: 1h
  path: %s
  prune: true
  sourceRef:
    kind: GitRepository
    name: platform
`, name, ns, labels, path)
}

func TestRunReconcilesTheNetworkFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := cp.Namespace(t)
	nodes := []string{"node-a-" + ns, "node-b-" + ns}
	for _, n := range nodes {
		if err := cp.Client.Create(ctx, freshNodeObject(n)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cp.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		})
		setNetwork(t, ctx, n, false)
	}
	srv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	repo, err := srv.Repo("platform.git")
	if err != nil {
		t.Fatal(err)
	}
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns + "}\n"
	}
	if _, err := repo.Commit("main", map[string]string{
		"network/cni.yaml":  cm("cni"),
		"tenant-a/app.yaml": cm("tenant-a"),
		"tenant-b/app.yaml": cm("tenant-b"),
	}, "platform"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "00-source.yaml", fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: platform, namespace: %s}
spec:
  interval: 1h
  url: %s
  ref: {branch: main}
`, ns, repo.URL()))
	writeFile(t, dir, "10-network.yaml", unitYAML(ns, "cni", "./network", true))
	writeFile(t, dir, "20-tenants.yaml", unitYAML(ns, "tenant-a", "./tenant-a", false)+"---\n"+unitYAML(ns, "tenant-b", "./tenant-b", false))

	registry := prometheus.NewRegistry()
	var started atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- bootstrap.Run(ctx, bootstrap.RunOptions{
			Config:       cp.Config,
			BootstrapDir: dir,
			Engine:       engine.Options{DataDir: t.TempDir(), ArtifactAddr: "127.0.0.1:0", Registry: registry},
			Started:      func() { started.Add(1) },
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	}()

	get := func(obj client.Object) bool {
		return cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj) == nil
	}
	network := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "cni", Namespace: ns}}
	eventually(t, "the network unit becomes Ready", func() bool { return get(network) && conditions.IsReady(network) })
	eventually(t, "Started is called once the caches have synced", func() bool { return started.Load() > 0 })
	tenants := []*kustomizev1.Kustomization{
		{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Namespace: ns}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b", Namespace: ns}},
	}
	for _, k := range tenants {
		eventually(t, k.Name+" waits for the network", func() bool {
			return get(k) && conditions.GetReason(k, meta.ReadyCondition) == engine.PhasePendingReason
		})
		if msg := conditions.GetMessage(k, meta.ReadyCondition); !strings.Contains(msg, "waiting for the network") {
			t.Fatalf("%s: message %q should say it waits for the network", k.Name, msg)
		}
		if get(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: ns}}) {
			t.Fatalf("%s applied before the network", k.Name)
		}
	}

	// The CNI comes up on one node, as a CNI agent would report it.
	time.Sleep(1100 * time.Millisecond) // creation timestamps have second resolution
	flip := time.Now().Truncate(time.Second)
	setNetwork(t, ctx, nodes[0], true)
	for _, k := range tenants {
		eventually(t, k.Name+" becomes Ready after the network", func() bool { return get(k) && conditions.IsReady(k) })
	}
	cni := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cni", Namespace: ns}}
	if !get(cni) || !cni.CreationTimestamp.Time.Before(flip) {
		t.Fatalf("the network unit's object was created at %v, want before the flip at %v", cni.CreationTimestamp, flip)
	}
	for _, k := range tenants {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: ns}}
		if !get(obj) || obj.CreationTimestamp.Time.Before(flip) {
			t.Fatalf("%s created at %v, want after the flip at %v", k.Name, obj.CreationTimestamp, flip)
		}
	}
	mfs, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var phaseAll float64
	for _, mf := range mfs {
		if mf.GetName() == "cozy_aio_bootstrap_phase" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == bootstrap.PhaseAll {
					phaseAll = m.GetGauge().GetValue()
				}
			}
		}
	}
	if phaseAll != 1 {
		t.Fatalf("cozy_aio_bootstrap_phase{phase=all} = %v, want 1", phaseAll)
	}
	if _, err := os.Stat(filepath.Join(dir, "00-source.yaml")); err != nil {
		t.Fatal(err)
	}
	if n := started.Load(); n != 1 {
		t.Fatalf("Started called %d times, want once", n)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
