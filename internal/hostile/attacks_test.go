package hostile

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

const ns = "hostile"

// attack is one hostile object and what it must end as: Ready=False on
// obj with a message holding every one of want.
type attack struct {
	name string
	obj  client.Object
	want []string
}

// attackCount is how many attacks plantAttacks plants (for the log).
var attackCount = 0

// kubeconfig is a kubeconfig for server with a token the tenant wrote.
func kubeconfig(server string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: KC-TOKEN-S3CR3T}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, server)
}

func remote(name, secret string) *helmv2.HelmRelease {
	hr := release(ns, name)
	hr.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: secret}}
	return hr
}

func secret(name string, data map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
}

// plantAttacks creates the hostile tenant's objects and returns the checks
// to run once the well-behaved tenant is Ready.
func plantAttacks(ctx context.Context, t *testing.T, r *run, bomb []byte) func() {
	t.Helper()
	c := r.c
	kubelet := listen(t, "127.0.0.1:0")     // the node's loopback: the kubelet, etcd
	tokenSink := listen(t, "127.0.0.1:0")   // where a generic provider would send a token
	unspecified := listen(t, "127.0.0.1:0") // reached as 0.0.0.0:port, were it allowed
	redirect := httptest.NewServer(http.RedirectHandler(fmt.Sprintf("http://0.0.0.0:%d/index.yaml", unspecified.port()), http.StatusFound))
	t.Cleanup(redirect.Close)
	git, err := testenv.StartGitServer(testenv.GitOptions{Username: "tenant", Password: "right-password"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(git.Close)
	gitURL := strings.Replace(git.URL("platform"), "http://", "http://hostile:S3CR3T-IN-URL@", 1)

	create(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, chartSource(ns, registryHost))
	bombHR := release(ns, "bomb")
	bombHR.Spec.ReleaseName = "bomb"
	generic := release(ns, "generic")
	generic.Spec.KubeConfig = &meta.KubeConfigReference{ConfigMapRef: &meta.LocalObjectReference{Name: "generic"}}
	attacks := []attack{
		{"kubeconfig to the metadata address", remote("to-metadata", "metadata-kc"),
			[]string{"HelmRelease/hostile/to-metadata", "Secret hostile/metadata-kc", "server https://169.254.169.254", "destination policy"}},
		{"kubeconfig to the node's loopback", remote("to-kubelet", "kubelet-kc"),
			[]string{"HelmRelease/hostile/to-kubelet", "Secret hostile/kubelet-kc", "server https://127.0.0.1", "destination policy"}},
		{"generic provider without the opt-in", generic,
			[]string{"HelmRelease/hostile/generic", "ConfigMap hostile/generic", "ObjectLevelWorkloadIdentity"}},
		{"a release record inflating to 500 MiB", bombHR,
			[]string{"Secret hostile/sh.helm.release.v1.bomb.v1", "decompresses past"}},
		{"a credential in a source URL", &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "cred-url", Namespace: ns},
			Spec: sourcev1.GitRepositorySpec{URL: gitURL, Interval: metav1.Duration{Duration: time.Hour}}},
			[]string{"GitRepository"}},
		{"a credential in a source Secret", &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "cred-secret", Namespace: ns},
			Spec: sourcev1.GitRepositorySpec{URL: git.URL("platform"), Interval: metav1.Duration{Duration: time.Hour},
				SecretRef: &meta.LocalObjectReference{Name: "git-auth"}}},
			[]string{"GitRepository"}},
		{"a source redirecting to a refused address", &sourcev1.HelmRepository{ObjectMeta: metav1.ObjectMeta{Name: "redirect", Namespace: ns},
			Spec: sourcev1.HelmRepositorySpec{URL: redirect.URL, Interval: metav1.Duration{Duration: time.Hour}}},
			[]string{"destination policy"}},
	}
	attackCount = len(attacks) + 2 // and the Provider, the edited Secret
	create(ctx, t, c,
		secret("metadata-kc", map[string]string{"value": kubeconfig("https://169.254.169.254")}),
		secret("kubelet-kc", map[string]string{"value": kubeconfig(fmt.Sprintf("https://127.0.0.1:%d", kubelet.port()))}),
		secret("git-auth", map[string]string{"username": "tenant", "password": "S3CR3T-IN-SECRET"}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "generic", Namespace: ns}, Data: map[string]string{
			"provider": "generic", "address": fmt.Sprintf("https://127.0.0.1:%d", tokenSink.port()),
			"serviceAccountName": "default", "audiences": "sts.example.com"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.bomb.v1", Namespace: ns,
			Labels: map[string]string{"owner": "helm", "name": "bomb", "status": "deployed", "version": "1"}},
			Type: "helm.sh/release.v1", Data: map[string][]byte{"release": bomb}},
		&notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "metadata-hook", Namespace: ns},
			Spec: notifyv1beta3.ProviderSpec{Type: "generic", Address: "http://169.254.169.254/hook"}},
		&notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "to-metadata", Namespace: ns},
			Spec: notifyv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "metadata-hook"},
				EventSources: []notifyv1.CrossNamespaceObjectReference{{Kind: "HelmRelease", Name: "*"}}}},
	)
	for _, a := range attacks {
		create(ctx, t, c, a.obj)
	}
	edited := editKubeconfigSecret(ctx, t, c)
	return func() {
		checkAttacks(ctx, t, c, attacks)
		checkProvider(ctx, t, c)
		checkEdited(ctx, t, r, edited)
		for name, l := range map[string]*counter{"the node's loopback": kubelet, "the generic provider's address": tokenSink,
			"a redirect's unspecified address": unspecified} {
			if n := l.n.Load(); n != 0 {
				t.Errorf("%d connections reached %s", n, name)
			}
		}
		checkNoCredential(ctx, t, r)
	}
}

func checkAttacks(ctx context.Context, t *testing.T, c client.Client, attacks []attack) {
	t.Helper()
	for _, a := range attacks {
		var msg string
		ok := eventually(ctx, 60*time.Second, func() bool {
			m, ok := readyFalse(ctx, c, a.obj)
			msg = m
			if !ok {
				return false
			}
			for _, w := range a.want {
				if !strings.Contains(m, w) {
					return false
				}
			}
			return true
		})
		if !ok {
			t.Errorf("%s: Ready=False naming %q never came; last message: %q", a.name, a.want, msg)
			continue
		}
		t.Logf("%-45s Ready=False: %s", a.name, msg)
	}
}

// checkProvider: a Provider's refused address gets a Warning Event naming
// the field and the policy.
func checkProvider(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	var note string
	ok := eventually(ctx, 60*time.Second, func() bool {
		var events corev1.EventList
		if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return false
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Provider" && e.InvolvedObject.Name == "metadata-hook" &&
				strings.Contains(e.Message, "spec.address") && strings.Contains(e.Message, "destination policy") {
				note = e.Message
				return true
			}
		}
		return false
	})
	if !ok {
		t.Error("a Provider at the metadata address: no Warning naming spec.address and the destination policy")
		return
	}
	t.Logf("%-45s Warning: %s", "a Provider at the metadata address", note)
}

// editKubeconfigSecret edits one watched kubeconfig Secret of a release a
// thousand times, as fast as the API server takes it.
func editKubeconfigSecret(ctx context.Context, t *testing.T, c client.Client) int {
	t.Helper()
	const edits = 1000
	s := secret("edited-kc", map[string]string{"value": kubeconfig("https://" + remoteAddr + ":1")})
	s.Labels = map[string]string{"reconcile.fluxcd.io/watch": "Enabled"}
	create(ctx, t, c, s, remote("edited", "edited-kc"))
	for i := range edits {
		s.StringData = map[string]string{"value": kubeconfig("https://"+remoteAddr+":1") + fmt.Sprintf("# edit %d\n", i)}
		if err := c.Update(ctx, s); err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
	}
	return edits
}

// checkEdited: the edits left at most one remote cluster held.
func checkEdited(ctx context.Context, t *testing.T, r *run, edits int) {
	t.Helper()
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "edited", Namespace: ns}}
	if _, ok := readyFalse(ctx, r.c, hr); !ok && !eventually(ctx, 30*time.Second, func() bool { _, ok := readyFalse(ctx, r.c, hr); return ok }) {
		t.Error("the release of the edited Secret never ended Ready=False (its cluster does not answer)")
	}
	n, err := metric(r.proc.HealthAddr(), "cozy_aio_remote_clusters")
	if err != nil {
		t.Fatal(err)
	}
	if n > 1 {
		t.Errorf("%d edits of one kubeconfig Secret: %v remote clusters held, want at most 1", edits, n)
	}
	t.Logf("%-45s %v remote cluster held after %d edits", "a kubeconfig Secret edited 1,000 times", n, edits)
}

// checkNoCredential: no planted credential, nor its base64, in anything
// the tenant reads, nor in cozy-aio's log.
func checkNoCredential(ctx context.Context, t *testing.T, r *run) {
	t.Helper()
	seen := readable(ctx, t, r.c, ns)
	logText, _ := os.ReadFile(r.proc.Log())
	metrics := scrape(t, r.proc.HealthAddr())
	for _, s := range secrets {
		for where, text := range map[string]string{"status or Events": seen, "cozy-aio's log": string(logText), "/metrics": metrics} {
			if strings.Contains(text, s) {
				t.Errorf("%q appears in %s", s, where)
			}
		}
	}
	// No metric label carries an address the tenant wrote.
	for _, host := range []string{"169.254.169.254", remoteAddr, "0.0.0.0"} {
		if strings.Contains(metrics, host) {
			t.Errorf("/metrics carries the tenant-chosen address %s", host)
		}
	}
	if !strings.Contains(metrics, `cluster="Secret hostile/edited-kc"`) {
		t.Error("/metrics does not show the edited Secret's remote cluster: the label scan would pass vacuously")
	}
	if !strings.Contains(seen, "authentication") || len(logText) == 0 {
		t.Fatal("nothing to scan: the scan would pass vacuously")
	}
}
