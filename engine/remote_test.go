package engine_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// tenantCluster starts a second API server, a tenant cluster, for one
// test, and returns it with its admin kubeconfig.
func tenantCluster(t *testing.T) (*testenv.ControlPlane, []byte) {
	t.Helper()
	tenant, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tenant.Stop() })
	kc, err := tenant.Kubeconfig("tenant-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	return tenant, kc
}

func remoteRelease(ns, name, secret, key string) *helmv2.HelmRelease {
	hr := helmRelease(ns, name, "demo")
	hr.Spec.ReleaseName = name
	hr.Spec.TargetNamespace = "addons"
	hr.Spec.StorageNamespace = "addons"
	hr.Spec.Install = &helmv2.Install{CreateNamespace: true}
	hr.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: secret, Key: key}}
	return hr
}

// A HelmRelease with spec.kubeConfig installs, upgrades, corrects drift
// and uninstalls in the remote cluster; its status stays in the
// management cluster, and nothing of the release lands there.
func TestHelmReleaseInstallsIntoARemoteCluster(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	tenant, kc := tenantCluster(t)
	reg := chartRegistry(t, demoChart("1.0.0"), demoChart("1.1.0"))
	metrics := prometheus.NewRegistry()
	startEngine(t, engine.Options{Destinations: loopbackDestinations, Registry: metrics})
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	hr := remoteRelease(ns, "cilium", "tenant-admin-kubeconfig", "super-admin.svc")
	hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled}
	createObjects(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant-admin-kubeconfig", Namespace: ns},
			Data: map[string][]byte{"super-admin.svc": kc}},
		src, hr)
	waitFor(t, hr, readyIs(hr, true), "Ready=True")

	remoteCM := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: "addons", Name: "cilium-settings"}
	if err := tenant.Client.Get(ctx, key, remoteCM); err != nil || remoteCM.Data["chart"] != sourceChartVersion(t, src, "1.0.0") {
		t.Fatalf("the release's ConfigMap in the tenant cluster: %v %v", remoteCM.Data, err)
	}
	helmRecords := func(c client.Client) int {
		var list corev1.SecretList
		if err := c.List(ctx, &list, client.InNamespace("addons"), client.MatchingLabels{"owner": "helm", "name": "cilium"}); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	if n := helmRecords(tenant.Client); n != 1 {
		t.Fatalf("%d release records in the tenant cluster's storage namespace, want 1", n)
	}
	if err := cp.Client.Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the release's ConfigMap in the management cluster: %v", err)
	}
	if n := helmRecords(cp.Client); n != 0 {
		t.Fatalf("%d release records in the management cluster", n)
	}
	// The remote cluster's metrics name its Secret.
	families, err := metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var requests float64
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if f.GetName() == "cozy_aio_remote_cluster_requests_total" && l.GetName() == "cluster" &&
					l.GetValue() == "Secret "+ns+"/tenant-admin-kubeconfig" {
					requests = m.GetCounter().GetValue()
				}
			}
		}
	}
	if requests == 0 {
		t.Fatal("no cozy_aio_remote_cluster_requests_total for the tenant cluster's Secret")
	}

	// Drift in the tenant cluster is corrected there.
	version := remoteCM.Data["chart"]
	remoteCM.Data["chart"] = "edited"
	if err := tenant.Client.Update(ctx, remoteCM); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, hr)
	eventually(t, 60*time.Second, "the drifted ConfigMap put back in the tenant cluster", func() bool {
		return tenant.Client.Get(ctx, key, remoteCM) == nil && remoteCM.Data["chart"] == version
	})

	// A new chart upgrades the release in the tenant cluster.
	patch := client.MergeFrom(src.DeepCopy())
	src.Spec.Reference.Tag = "1.1.0"
	if err := cp.Client.Patch(ctx, src, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, func() bool {
		return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].Version == 2
	}, "upgrade to revision 2")
	if err := tenant.Client.Get(ctx, key, remoteCM); err != nil || remoteCM.Data["chart"] != sourceChartVersion(t, src, "1.1.0") {
		t.Fatalf("after the upgrade the tenant ConfigMap says %v (%v)", remoteCM.Data, err)
	}

	// Deleting the HelmRelease uninstalls in the tenant cluster.
	if err := cp.Client.Delete(ctx, hr); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the release uninstalled from the tenant cluster", func() bool {
		return apierrors.IsNotFound(tenant.Client.Get(ctx, key, &corev1.ConfigMap{})) && helmRecords(tenant.Client) == 0
	})
}

// A rotated kubeconfig is used from the next reconcile, without a
// restart: the release upgrades with the new credentials after the old
// ones lost their rights.
func TestRemoteClusterKubeconfigRotation(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	tenant, _ := tenantCluster(t)
	reg := chartRegistry(t, demoChart("1.0.0"), demoChart("1.1.0"))
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	admin := func(user string) (*rbacv1.ClusterRoleBinding, []byte) {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}
		if err := tenant.Client.Create(ctx, crb); err != nil {
			t.Fatal(err)
		}
		kc, err := tenant.Kubeconfig(user)
		if err != nil {
			t.Fatal(err)
		}
		return crb, kc
	}
	oldCRB, oldKC := admin("admin-old")
	_, newKC := admin("admin-new")

	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	hr := remoteRelease(ns, "cilium", "tenant", "")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
		Data: map[string][]byte{"value": oldKC}}
	createObjects(t, secret, src, hr)
	waitFor(t, hr, readyIs(hr, true), "Ready=True with admin-old's kubeconfig")

	// Rotate: the Secret gets admin-new's kubeconfig, and admin-old loses
	// its rights before the next reconcile.
	secret.Data["value"] = newKC
	if err := cp.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := tenant.Client.Delete(ctx, oldCRB); err != nil {
		t.Fatal(err)
	}
	oldCfg, err := clientcmd.RESTConfigFromKubeConfig(oldKC)
	if err != nil {
		t.Fatal(err)
	}
	oldClient, err := client.New(oldCfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "admin-old refused by the tenant cluster", func() bool {
		return apierrors.IsForbidden(oldClient.List(ctx, &corev1.SecretList{}, client.InNamespace("addons")))
	})

	patch := client.MergeFrom(src.DeepCopy())
	src.Spec.Reference.Tag = "1.1.0"
	if err := cp.Client.Patch(ctx, src, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, func() bool {
		return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].Version == 2
	}, "upgrade to revision 2 with admin-new's kubeconfig")
	cm := &corev1.ConfigMap{}
	if err := tenant.Client.Get(ctx, client.ObjectKey{Namespace: "addons", Name: "cilium-settings"}, cm); err != nil || cm.Data["chart"] != sourceChartVersion(t, src, "1.1.0") {
		t.Fatalf("after the upgrade the tenant ConfigMap says %v (%v)", cm.Data, err)
	}
}

// Bad kubeconfigs end Ready=False with a message naming the release, the
// Secret and the cause; the good release beside them is installed.
func TestHelmReleaseRemoteClusterBadInputs(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	tenant, kc := tenantCluster(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	secret := func(name string, data string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{"value": []byte(data)}}
	}
	server := "https://127.0.0.1:1"
	execConfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: ` + server + `}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	fileConfig := strings.Replace(execConfig, "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}}",
		"{client-certificate: /etc/kubernetes/pki/apiserver.crt, client-key: /etc/kubernetes/pki/apiserver.key}", 1)
	deadConfig := strings.Replace(execConfig, "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}}", "{token: abc}", 1)
	// The tenant's server with a CA that did not sign its certificate, and
	// with credentials it refuses (401) or lets in with no rights (403).
	otherCA := editKubeconfig(t, kc, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
		c.CertificateAuthorityData = selfSignedCA(t)
	})
	badToken := editKubeconfig(t, kc, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		*u = clientcmdapi.AuthInfo{Token: "not-a-real-token"}
	})
	nobody, err := tenant.Kubeconfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	createObjects(t, chartSource(ns, "demo", reg.Host(), "1.0.0"),
		secret("good", string(kc)), secret("exec", execConfig), secret("file", fileConfig),
		secret("dead", deadConfig), secret("garbage", "{not yaml"),
		secret("otherca", string(otherCA)), secret("badtoken", string(badToken)), secret("nobody", string(nobody)),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "nokey", Namespace: ns}, Data: map[string][]byte{"other": kc}})
	// retried: the cause may pass (the cluster comes up, its CA or the
	// user's rights are fixed), so the release is retried, not stalled.
	cases := []struct {
		name, secret, key string
		want              []string
		retried           bool
	}{
		{"missing-secret", "absent", "", []string{"Secret " + ns + "/absent", "not found"}, true},
		{"missing-key", "nokey", "", []string{ns + "/nokey", "'value'"}, false},
		{"not-yaml", "garbage", "", []string{"Secret " + ns + "/garbage", "kubeconfig"}, false},
		{"exec-plugin", "exec", "", []string{"Secret " + ns + "/exec", "users[u].exec"}, false},
		{"local-file", "file", "", []string{"Secret " + ns + "/file", "client-certificate"}, false},
		{"unreachable", "dead", "", []string{"Secret " + ns + "/dead", "127.0.0.1:1"}, true},
		{"wrong-ca", "otherca", "", []string{"Secret " + ns + "/otherca", "x509"}, true},
		{"unauthorized", "badtoken", "", []string{"Secret " + ns + "/badtoken", "Unauthorized"}, true},
		{"forbidden", "nobody", "", []string{"Secret " + ns + "/nobody", "forbidden"}, true},
	}
	good := remoteRelease(ns, "good", "good", "")
	createObjects(t, good)
	for _, c := range cases {
		createObjects(t, remoteRelease(ns, c.name, c.secret, c.key))
	}
	for _, c := range cases {
		hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: ns}}
		waitFor(t, hr, func() bool {
			r := conditions.Get(hr, meta.ReadyCondition)
			if r == nil || r.Status != metav1.ConditionFalse {
				return false
			}
			for _, w := range c.want {
				if !strings.Contains(r.Message, w) {
					return false
				}
			}
			if c.retried && conditions.IsStalled(hr) {
				t.Fatalf("%s: stalled, want retried: %s", c.name, r.Message)
			}
			return strings.Contains(r.Message, "HelmRelease/"+ns+"/"+c.name)
		}, "Ready=False naming "+strings.Join(c.want, ", "))
	}
	waitFor(t, good, readyIs(good, true), "Ready=True beside the bad ones")
	if err := tenant.Client.Get(ctx, client.ObjectKey{Namespace: "addons", Name: "good-settings"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the good release in the tenant cluster: %v", err)
	}

	// A release whose kubeconfig Secret is gone is deleted without an
	// uninstall, as helm-controller does. It never reached its cluster, so
	// its status records no release and no Event warns of leftovers.
	gone := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "missing-secret", Namespace: ns}}
	if err := cp.Client.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the release with no kubeconfig Secret deleted", func() bool {
		return apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKeyFromObject(gone), gone))
	})
}

// TestDeletingANeverInstalledRemoteRelease (issue #46 item 7): a release
// whose cluster never answered records no release in status (no storage
// namespace, no history), so its deletion needs no cluster: the finalizer
// goes at once, as helm-controller's, instead of waiting for a cluster
// that may never come.
func TestDeletingANeverInstalledRemoteRelease(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	// A stopped cluster: nothing listens on its address.
	stopped := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	hr := remoteRelease(ns, "never", "stopped", "")
	createObjects(t, chartSource(ns, "demo", reg.Host(), "1.0.0"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "stopped", Namespace: ns}, Data: map[string][]byte{"value": []byte(stopped)}}, hr)
	waitFor(t, hr, func() bool {
		r := conditions.Get(hr, meta.ReadyCondition)
		return r != nil && r.Status == metav1.ConditionFalse && strings.Contains(r.Message, "127.0.0.1:1") &&
			slices.Contains(hr.Finalizers, engine.Finalizer)
	}, "Ready=False naming the stopped cluster, with the finalizer")
	if hr.Status.StorageNamespace != "" || len(hr.Status.History) != 0 {
		t.Fatalf("status records a release the cluster never saw: storage namespace %q, %d history entries",
			hr.Status.StorageNamespace, len(hr.Status.History))
	}
	start := time.Now()
	if err := cp.Client.Delete(ctx, hr); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the never-installed release deleted", func() bool {
		return apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKeyFromObject(hr), &helmv2.HelmRelease{}))
	})
	t.Logf("a never-installed release of a stopped cluster was gone %.1f s after its deletion", time.Since(start).Seconds())
}

// editKubeconfig returns kc with edit applied to its current context's
// cluster and user.
func editKubeconfig(t *testing.T, kc []byte, edit func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		t.Fatal(err)
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	edit(cfg.Clusters[cur.Cluster], cfg.AuthInfos[cur.AuthInfo])
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// selfSignedCA returns the PEM certificate of a fresh CA that signed
// nothing.
func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "not-the-tenant-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// A Kustomization with spec.kubeConfig applies, health-checks and prunes
// in the remote cluster, and its deletion prunes there too.
func TestKustomizationAppliesToARemoteCluster(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	tenant, kc := tenantCluster(t)
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	repo, _ := gitSource(t, ns, "apps", map[string]string{
		"deploy/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: remote-apps\n",
		"deploy/a.yaml":  configMap("a", "remote-apps"),
		"deploy/b.yaml":  configMap("b", "remote-apps"),
	})
	ks := kustomization(ns, "apps", "apps", "./deploy")
	ks.Spec.Wait = true
	ks.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "tenant"}}
	createObjects(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}, Data: map[string][]byte{"value.yaml": kc}}, ks)
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	for _, name := range []string{"a", "b"} {
		if err := tenant.Client.Get(ctx, client.ObjectKey{Namespace: "remote-apps", Name: name}, &corev1.ConfigMap{}); err != nil {
			t.Fatalf("ConfigMap %s in the tenant cluster: %v", name, err)
		}
	}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: "remote-apps"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Namespace in the management cluster: %v", err)
	}
	if ks.Status.Inventory == nil || len(ks.Status.Inventory.Entries) != 3 {
		t.Fatalf("inventory %+v", ks.Status.Inventory)
	}

	// b leaves the source: pruned in the tenant cluster.
	if _, err := repo.Commit("main", map[string]string{
		"deploy/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: remote-apps\n",
		"deploy/a.yaml":  configMap("a", "remote-apps"),
	}, "drop b"); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns}})
	eventually(t, 60*time.Second, "b pruned from the tenant cluster", func() bool {
		return apierrors.IsNotFound(tenant.Client.Get(ctx, client.ObjectKey{Namespace: "remote-apps", Name: "b"}, &corev1.ConfigMap{}))
	})

	// Deleting the Kustomization prunes its objects in the tenant cluster.
	if err := cp.Client.Delete(ctx, ks); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "a pruned from the tenant cluster on deletion", func() bool {
		return apierrors.IsNotFound(tenant.Client.Get(ctx, client.ObjectKey{Namespace: "remote-apps", Name: "a"}, &corev1.ConfigMap{}))
	})
}

// coreEventMessage returns the message of a core/v1 Event about name in
// ns that contains want, or "".
func coreEventMessage(t *testing.T, ns, name, want string) string {
	t.Helper()
	var list corev1.EventList
	if err := cp.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && strings.Contains(e.Message, want) {
			return e.Message
		}
	}
	return ""
}

// With spec.serviceAccountName beside spec.kubeConfig, the release acts in
// the remote cluster as that ServiceAccount of the HelmRelease's namespace
// (impersonated through the kubeconfig's user), as helm-controller does:
// without rights there it fails naming the account, with them it installs.
func TestRemoteHelmReleaseImpersonatesItsServiceAccount(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	tenant, kc := tenantCluster(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: "apps"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"*"}}}},
	} {
		if err := tenant.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	hr := remoteRelease(ns, "imp", "tenant", "")
	hr.Spec.TargetNamespace, hr.Spec.StorageNamespace = "apps", "apps"
	hr.Spec.Install = &helmv2.Install{}
	hr.Spec.ServiceAccountName = "deployer"
	createObjects(t, chartSource(ns, "demo", reg.Host(), "1.0.0"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}, Data: map[string][]byte{"value": kc}}, hr)
	account := "system:serviceaccount:" + ns + ":deployer"
	waitFor(t, hr, func() bool {
		r := conditions.Get(hr, meta.ReadyCondition)
		return r != nil && r.Status == metav1.ConditionFalse && strings.Contains(r.Message, account) &&
			strings.Contains(r.Message, "forbidden")
	}, "Ready=False naming "+account+" and forbidden")

	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: "apps"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: ns}}}
	if err := tenant.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, hr)
	waitFor(t, hr, readyIs(hr, true), "Ready=True once the account may write in apps")
	cm := &corev1.ConfigMap{}
	if err := tenant.Client.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "imp-settings"}, cm); err != nil {
		t.Fatalf("the release's ConfigMap in the tenant cluster: %v", err)
	}
	var secrets corev1.SecretList
	if err := tenant.Client.List(ctx, &secrets, client.InNamespace("apps"), client.MatchingLabels{"owner": "helm", "name": "imp"}); err != nil || len(secrets.Items) != 1 {
		t.Fatalf("release records in apps: %d (%v)", len(secrets.Items), err)
	}
}
