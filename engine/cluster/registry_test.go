package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-aio/engine/cluster"
)

// The registry builds one value per kubeconfig: reconciles of releases
// that share a Secret share it, a rotated Secret gives a new one, an idle
// one is dropped, and a nil reference is the local cluster.
func TestRegistryOneClusterPerKubeconfig(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	kc, err := cp.Kubeconfig("remote-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kc", Namespace: ns}, Data: map[string][]byte{"value": kc}}
	if err := cp.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	builds, closed := 0, 0
	now := time.Now()
	reg, err := cluster.NewRegistry(cp.Client, cp.Client, cluster.RegistryOptions[*kubernetes.Clientset]{
		Local: func() (*kubernetes.Clientset, error) { return nil, nil },
		Build: func(cfg *rest.Config) (*kubernetes.Clientset, error) {
			mu.Lock()
			builds++
			mu.Unlock()
			return kubernetes.NewForConfig(cfg)
		},
		Close: func(*kubernetes.Clientset) {
			mu.Lock()
			closed++
			mu.Unlock()
		},
		IdleAfter: time.Minute,
		Now:       func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "kc"}}
	a, err := reg.Get(ctx, ns, ref)
	if err != nil {
		t.Fatal(err)
	}
	b, err := reg.Get(ctx, ns, ref)
	if err != nil || a != b || builds != 1 {
		t.Fatalf("two Gets of one Secret: same cluster %v, %d builds (%v)", a == b, builds, err)
	}
	if a.Source != "Secret "+ns+"/kc" {
		t.Fatalf("Source %q", a.Source)
	}
	// The client reaches the remote API server (here the same one).
	if _, err := a.Value.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("the remote cluster's client: %v", err)
	}

	// A rotated Secret: a new kubeconfig (another user's certificate).
	kc2, err := cp.Kubeconfig("remote-admin-2", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	secret.Data["value"] = kc2
	if err := cp.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	c, err := reg.Get(ctx, ns, ref)
	if err != nil || c == a || builds != 2 || reg.Len() != 2 {
		t.Fatalf("after the rotation: new cluster %v, %d builds, %d held (%v)", c != a, builds, reg.Len(), err)
	}

	// A cluster with a request in flight (a wait's watch) is in use,
	// however long no Get asked for it.
	w, err := c.Value.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if n := reg.Sweep(); n != 1 {
		t.Fatalf("%d clusters held with a watch open, want 1 (the watched one)", n)
	}
	if _, err := c.Value.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("the watched cluster's client after the sweep: %v", err)
	}
	w.Stop()

	// A background watch (a cache's) does not keep the cluster in use.
	bw, err := c.Value.CoreV1().ConfigMaps(ns).Watch(cluster.Background(ctx), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer bw.Stop()

	// Idle for IdleAfter: dropped, and each dropped value closed.
	now = now.Add(2 * time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for reg.Sweep() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d clusters held after their idle time", reg.Len())
		}
		time.Sleep(50 * time.Millisecond) // the stopped watch's body closes asynchronously
	}
	mu.Lock()
	if closed != 2 {
		t.Fatalf("%d values closed, want the 2 dropped", closed)
	}
	mu.Unlock()
	// Close drops a cluster in use too.
	if _, err := reg.Get(ctx, ns, ref); err != nil || reg.Len() != 1 {
		t.Fatalf("Get after the sweep: %d held (%v)", reg.Len(), err)
	}
	reg.Close()
	mu.Lock()
	if reg.Len() != 0 || closed != 3 {
		t.Fatalf("after Close: %d held, %d closed, want 0 and 3", reg.Len(), closed)
	}
	mu.Unlock()
	local, err := reg.Get(ctx, ns, nil)
	if err != nil || local.Source != "" {
		t.Fatalf("the local cluster: %+v %v", local, err)
	}
	if again, _ := reg.Get(ctx, ns, nil); again != local {
		t.Fatal("two Gets of the local cluster gave two Clusters")
	}
}
