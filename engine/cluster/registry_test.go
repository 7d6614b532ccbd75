package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-aio/engine/cluster"
	"github.com/cozystack/cozy-aio/internal/egress"
)

// loopbackAllowed lets remote clusters on loopback through, as the test
// API server is; the engine's default refuses them.
var loopbackAllowed = egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}

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
		// The test API server listens on loopback, which the default
		// destination policy refuses for remote clusters.
		Load: cluster.LoadOptions{Destinations: loopbackAllowed},
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
	// The edit replaces the entry: the old one had nothing in flight, so
	// it is dropped at once.
	c, err := reg.Get(ctx, ns, ref)
	if err != nil || c == a || builds != 2 || reg.Len() != 1 || closed != 1 {
		t.Fatalf("after the rotation: new cluster %v, %d builds, %d held, %d closed (%v)", c != a, builds, reg.Len(), closed, err)
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

// TestRegistryEditsReplaceTheirEntry edits one kubeconfig Secret a
// thousand times, asking for its cluster after each edit: every edit
// replaces the entry, so one entry is held at the end, not a thousand
// until they idle out.
func TestRegistryEditsReplaceTheirEntry(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	kc, err := cp.Kubeconfig("edited", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kc", Namespace: ns}, Data: map[string][]byte{"value": kc}}
	if err := cp.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	var builds, closed int
	reg, err := cluster.NewRegistry(cp.Client, cp.Client, cluster.RegistryOptions[*rest.Config]{
		Local: func() (*rest.Config, error) { return nil, nil },
		Build: func(cfg *rest.Config) (*rest.Config, error) { builds++; return cfg, nil },
		Close: func(*rest.Config) { closed++ },
		Load:  cluster.LoadOptions{Destinations: loopbackAllowed},
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "kc"}}
	const edits = 1000
	for i := range edits {
		secret.Data["value"] = fmt.Appendf(append([]byte{}, kc...), "\n# edit %d\n", i)
		if err := cp.Client.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Get(ctx, ns, ref); err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
		if n := reg.Len(); n != 1 {
			t.Fatalf("after edit %d the registry holds %d entries, want 1", i, n)
		}
	}
	if builds != edits || closed != edits-1 {
		t.Fatalf("%d builds and %d closed, want %d and %d", builds, closed, edits, edits-1)
	}
	t.Logf("%d edits of one kubeconfig Secret: %d entry held, %d built, %d closed", edits, reg.Len(), builds, closed)
}

// TestRegistryRefusesDestinations: by default a kubeconfig whose server is
// the node's loopback or the cloud metadata address is refused before any
// connection, naming the Secret, the server and the policy.
func TestRegistryRefusesDestinations(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	kc, err := cp.Kubeconfig("refused", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	metadata := regexp.MustCompile(`server: .*`).ReplaceAllString(string(kc), "server: https://169.254.169.254")
	for name, data := range map[string]string{"loopback": string(kc), "metadata": metadata} {
		if err := cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: map[string][]byte{"value": []byte(data)}}); err != nil {
			t.Fatal(err)
		}
	}
	builds := 0
	reg, err := cluster.NewRegistry(cp.Client, cp.Client, cluster.RegistryOptions[*rest.Config]{
		Local: func() (*rest.Config, error) { return nil, nil },
		Build: func(cfg *rest.Config) (*rest.Config, error) { builds++; return cfg, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"loopback": "loopback", "metadata": "169.254.169.254"} {
		_, err := reg.Get(ctx, ns, &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: name}})
		var refused *egress.RefusedError
		if !errors.As(err, &refused) {
			t.Fatalf("%s: %v, want the destination policy's refusal", name, err)
		}
		for _, s := range []string{"Secret " + ns + "/" + name, "server https://", "destination policy", want} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", name, err, s)
			}
		}
	}
	if builds != 0 || reg.Len() != 0 {
		t.Fatalf("refused clusters were built (%d) or held (%d)", builds, reg.Len())
	}
}

// TestRegistryCapsClusters: past MaxClusters the least recently used
// cluster is dropped, not one in use.
func TestRegistryCapsClusters(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	kc, err := cp.Kubeconfig("capped", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	closed := map[string]bool{}
	now := time.Now()
	reg, err := cluster.NewRegistry(cp.Client, cp.Client, cluster.RegistryOptions[*rest.Config]{
		Local:       func() (*rest.Config, error) { return nil, nil },
		Build:       func(cfg *rest.Config) (*rest.Config, error) { return rest.CopyConfig(cfg), nil },
		Close:       func(c *rest.Config) { closed[c.UserAgent] = true },
		Load:        cluster.LoadOptions{Destinations: loopbackAllowed},
		MaxClusters: 3,
		Now:         func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) *cluster.Cluster[*rest.Config] {
		t.Helper()
		c, err := reg.Get(ctx, ns, &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: name}})
		if err != nil {
			t.Fatal(err)
		}
		c.Value.UserAgent = name // marks the value for Close
		return c
	}
	for i := range 5 {
		name := fmt.Sprintf("kc-%d", i)
		if err := cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: map[string][]byte{"value": kc}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		get(fmt.Sprintf("kc-%d", i))
		now = now.Add(time.Second)
	}
	get("kc-0") // used again: kc-1 is now the least recently used
	now = now.Add(time.Second)
	get("kc-3")
	if reg.Len() != 3 || !closed["kc-1"] || closed["kc-0"] || closed["kc-2"] {
		t.Fatalf("after a fourth cluster: %d held, closed %v; want 3 held and kc-1 closed", reg.Len(), closed)
	}
	get("kc-4")
	if reg.Len() != 3 || !closed["kc-2"] {
		t.Fatalf("after a fifth cluster: %d held, closed %v; want kc-2 closed too", reg.Len(), closed)
	}
}
