package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// logSink collects everything the engine's loggers write.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logSink) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logSink) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// selfSignedPair returns a PEM certificate and its PEM private key.
func selfSignedPair(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// pemBody is the base64 text of a PEM block, the part of a key that would
// show if it leaked.
func pemBody(p []byte) string {
	var lines []string
	for _, l := range strings.Split(string(p), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "")
}

// leakNeedles returns what must never show: each secret, its base64, and
// the base64 of each user:password pair.
func leakNeedles(secrets map[string]string, pairs [][2]string) map[string]string {
	out := map[string]string{}
	for what, s := range secrets {
		out[what] = s
		out[what+" (base64)"] = base64.RawStdEncoding.EncodeToString([]byte(s))
	}
	for _, p := range pairs {
		out[p[0]+":password (base64 basic auth)"] = base64.RawStdEncoding.EncodeToString([]byte(p[0] + ":" + p[1]))
	}
	return out
}

// findLeaks reports every needle found in text, with some context.
func findLeaks(t *testing.T, where, text string, needles map[string]string) {
	t.Helper()
	for what, n := range needles {
		// The first 40 characters of a key body are enough to recognise it.
		if len(n) > 40 {
			n = n[:40]
		}
		if i := strings.Index(text, n); i >= 0 {
			lo, hi := max(0, i-200), min(len(text), i+len(n)+100)
			t.Errorf("%s holds %s: ...%s...", where, what, text[lo:hi])
		}
	}
}

// No credential, token or private key the engine is given shows in its
// logs, its Events, any object's status or /metrics: the engine runs with
// Git basic auth and bearer tokens, an SSH identity, OCI registry
// credentials, HelmRepository and Bucket credentials and client keys,
// notification Provider tokens and Receiver tokens, in working and in
// failing cases (wrong password, unreachable host, untrusted TLS).
func TestNoSecretsInLogsEventsStatusOrMetrics(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	logs := &logSink{}
	logger := zap.New(zap.WriteTo(logs), zap.Level(zapcore.Level(-10)))
	oldSlog := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug - 10})))
	klog.SetLogger(logger)
	t.Cleanup(func() { slog.SetDefault(oldSlog); klog.ClearLogger() })

	const (
		gitUser, gitPass, gitWrong = "git-user-a71c", "git-pass-7f3a9c20", "git-wrong-pass-5b8e11"
		gitBearer                  = "git-bearer-token-91ad44"
		ociUser, ociPass, ociWrong = "oci-user-0b3d", "oci-pass-3c2e55", "oci-wrong-pass-d41f66"
		helmUser, helmPass         = "helm-user-8e21", "helm-pass-6e0b77"
		helmWrong                  = "helm-wrong-pass-aa1288"
		bucketAccess, bucketSecret = "bucket-access-c9f0", "bucket-secret-key-0d7e99"
		hmacToken                  = "provider-hmac-token-52b1aa"
		headerToken                = "provider-header-token-e3c4bb"
		slackURLToken              = "slack-url-secret-77abcc"
		receiverToken              = "receiver-token-4f19dd"
		githubToken                = "receiver-github-token-8c2aee"
		substituted                = "substituted-secret-value-13ffee"
	)
	sshCert, sshKey := selfSignedPair(t, "ssh")
	_ = sshCert
	clientCert, clientKey := selfSignedPair(t, "client")
	otherCA, _ := selfSignedPair(t, "other-ca")
	needles := leakNeedles(map[string]string{
		"git password": gitPass, "wrong git password": gitWrong, "git bearer token": gitBearer,
		"oci password": ociPass, "wrong oci password": ociWrong, "helm password": helmPass, "wrong helm password": helmWrong,
		"bucket secret key": bucketSecret, "provider hmac token": hmacToken, "provider header token": headerToken,
		"slack webhook URL token": slackURLToken, "receiver token": receiverToken, "github receiver token": githubToken,
		"substituted secret value": substituted,
		"SSH private key":          pemBody(sshKey), "TLS client private key": pemBody(clientKey),
	}, [][2]string{{gitUser, gitPass}, {gitUser, gitWrong}, {ociUser, ociPass}, {ociUser, ociWrong}, {helmUser, helmPass}, {helmUser, helmWrong}})

	// Real servers: Git and a registry with basic auth, Helm repositories
	// over HTTP with basic auth and over HTTPS with a test CA.
	gitSrv, err := testenv.StartGitServer(testenv.GitOptions{Username: gitUser, Password: gitPass})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gitSrv.Close)
	repo, err := gitSrv.Repo("apps.git")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit("main", map[string]string{"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: subst\n  namespace: " + ns + "\ndata:\n  value: ${secret_value}\n"}, "initial"); err != nil {
		t.Fatal(err)
	}
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{Username: ociUser, Password: ociPass})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	if _, err := reg.PushArtifact(ctx, "manifests/app", "v1", map[string]string{"cm.yaml": "kind: ConfigMap\n"}, nil); err != nil {
		t.Fatal(err)
	}
	helm := helmRepo(t, testenv.HelmRepoOptions{Username: helmUser, Password: helmPass}, demoChart("1.0.0"))
	helmTLS := helmRepo(t, testenv.HelmRepoOptions{Username: helmUser, Password: helmPass, TLS: true}, demoChart("1.0.0"))
	hook := newHookServer(t, hmacToken, http.StatusInternalServerError)
	failing := newHookServer(t, "", http.StatusServiceUnavailable)
	unreachable := "127.0.0.1:1"

	health := webhookAddr(t)
	hooks := webhookAddr(t)
	startEngine(t, engine.Options{Destinations: loopbackDestinations, Logger: logger, HealthAddr: health, WebhookAddr: hooks})

	secret := func(name string, data map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
	}
	dockerConfig := func(user, pass string) []byte {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
		return []byte(fmt.Sprintf(`{"auths":{%q:{"username":%q,"password":%q,"auth":%q}}}`, reg.Host(), user, pass, auth))
	}
	ref := func(name string) *meta.LocalObjectReference { return &meta.LocalObjectReference{Name: name} }
	hour := metav1.Duration{Duration: time.Hour}
	gitRepo := func(name, url, secretName string) *sourcev1.GitRepository {
		return &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: sourcev1.GitRepositorySpec{URL: url, Interval: hour, Reference: &sourcev1.GitRepositoryRef{Branch: "main"}, SecretRef: ref(secretName)}}
	}
	ociRepo := func(name, secretName string) *sourcev1.OCIRepository {
		return &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: sourcev1.OCIRepositorySpec{URL: "oci://" + reg.Host() + "/manifests/app", Insecure: true, Interval: &hour,
				Reference: &sourcev1.OCIRepositoryRef{Tag: "v1"}, SecretRef: ref(secretName)}}
	}
	helmRepoObj := func(name, url, secretName, certSecret string) *sourcev1.HelmRepository {
		r := helmRepository(ns, name, url)
		r.Spec.SecretRef = ref(secretName)
		if certSecret != "" {
			r.Spec.CertSecretRef = ref(certSecret)
		}
		return r
	}
	bucket := func(name, endpoint string, insecure bool) *sourcev1.Bucket {
		return &sourcev1.Bucket{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: sourcev1.BucketSpec{BucketName: "b", Endpoint: endpoint, Insecure: insecure, Interval: hour, SecretRef: ref("bucket-creds")}}
	}
	tlsHost := strings.TrimPrefix(helmTLS.URL(), "https://")

	good := gitRepo("git-good", repo.URL(), "git-good")
	readySources := []interface {
		client.Object
		conditions.Getter
	}{good, ociRepo("oci-good", "oci-good"), helmRepoObj("helm-good", helm.URL(), "helm-good", "")}
	failingSources := []interface {
		client.Object
		conditions.Getter
	}{
		gitRepo("git-wrong", repo.URL(), "git-wrong"),
		gitRepo("git-bearer", repo.URL(), "git-bearer"),
		gitRepo("git-ssh", "ssh://git@"+unreachable+"/org/repo.git", "git-ssh"),
		gitRepo("git-unreachable", "http://"+unreachable+"/org/repo.git", "git-good"),
		ociRepo("oci-wrong", "oci-wrong"),
		helmRepoObj("helm-wrong", helm.URL(), "helm-wrong", ""),
		helmRepoObj("helm-untrusted", helmTLS.URL(), "helm-good", ""),
		helmRepoObj("helm-other-ca", helmTLS.URL(), "helm-good", "other-ca"),
		helmRepoObj("helm-unreachable", "https://"+unreachable+"/charts", "helm-good", "other-ca"),
		bucket("bucket-untrusted", tlsHost, false),
		bucket("bucket-unreachable", unreachable, true),
	}
	ks := kustomization(ns, "subst", "git-good", "./deploy")
	ks.Spec.PostBuild = &kustomizev1.PostBuild{SubstituteFrom: []kustomizev1.SubstituteReference{{Kind: "Secret", Name: "vars"}}}
	hr := chartRelease(ns, "app", "helm-good", "1.x")
	hrWrong := chartRelease(ns, "app-wrong", "helm-wrong", "1.x")
	rcv := &notifyv1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: "generic", Namespace: ns},
		Spec: notifyv1.ReceiverSpec{Type: "generic", SecretRef: &meta.LocalObjectReference{Name: "receiver-token"},
			Resources: []notifyv1.ReceiverResource{{CrossNamespaceObjectReference: notifyv1.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "git-good"}}}}}
	gh := &notifyv1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: ns},
		Spec: notifyv1.ReceiverSpec{Type: "github", Events: []string{"push"}, SecretRef: &meta.LocalObjectReference{Name: "github-token"},
			Resources: []notifyv1.ReceiverResource{{CrossNamespaceObjectReference: notifyv1.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "*"}}}}}
	provider := func(name, typ, secretName string) *notifyv1beta3.Provider {
		return &notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: notifyv1beta3.ProviderSpec{Type: typ, SecretRef: ref(secretName)}}
	}
	alert := func(name, providerName string) *notifyv1beta3.Alert {
		return &notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: notifyv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: providerName},
				EventSources: []notifyv1.CrossNamespaceObjectReference{
					{Kind: "GitRepository", Name: "*"}, {Kind: "OCIRepository", Name: "*"}, {Kind: "HelmRepository", Name: "*"},
					{Kind: "Bucket", Name: "*"}, {Kind: "Kustomization", Name: "*"}, {Kind: "HelmRelease", Name: "*"}, {Kind: "HelmChart", Name: "*"}}}}
	}
	objs := []client.Object{
		secret("git-good", map[string]string{"username": gitUser, "password": gitPass}),
		secret("git-wrong", map[string]string{"username": gitUser, "password": gitWrong}),
		secret("git-bearer", map[string]string{"bearerToken": gitBearer}),
		secret("git-ssh", map[string]string{"identity": string(sshKey), "known_hosts": "127.0.0.1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"}),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "oci-good", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{".dockerconfigjson": dockerConfig(ociUser, ociPass)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "oci-wrong", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{".dockerconfigjson": dockerConfig(ociUser, ociWrong)}},
		secret("helm-good", map[string]string{"username": helmUser, "password": helmPass}),
		secret("helm-wrong", map[string]string{"username": helmUser, "password": helmWrong}),
		secret("other-ca", map[string]string{"ca.crt": string(otherCA), "tls.crt": string(clientCert), "tls.key": string(clientKey)}),
		secret("bucket-creds", map[string]string{"accesskey": bucketAccess, "secretkey": bucketSecret}),
		secret("vars", map[string]string{"secret_value": substituted}),
		secret("receiver-token", map[string]string{"token": receiverToken}),
		secret("github-token", map[string]string{"token": githubToken}),
		secret("hmac", map[string]string{"address": hook.URL + "/flux", "token": hmacToken}),
		secret("headers", map[string]string{"address": failing.URL + "/flux", "headers": "Authorization: Bearer " + headerToken + "\n"}),
		secret("slack", map[string]string{"address": "http://" + unreachable + "/services/T000/B000/" + slackURLToken, "token": slackURLToken}),
		provider("hmac", "generic-hmac", "hmac"), provider("headers", "generic", "headers"), provider("slack", "slack", "slack"),
		alert("to-hmac", "hmac"), alert("to-headers", "headers"), alert("to-slack", "slack"),
		rcv, gh, ks, hr, hrWrong,
	}
	for _, o := range readySources {
		objs = append(objs, o)
	}
	for _, o := range failingSources {
		objs = append(objs, o)
	}
	createObjects(t, objs...)

	for _, o := range readySources {
		waitFor(t, o, readyIs(o, true), "Ready=True")
	}
	for _, o := range failingSources {
		waitFor(t, o, readyIs(o, false), "Ready=False")
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	waitFor(t, hrWrong, readyIs(hrWrong, false), "Ready=False")
	waitFor(t, rcv, readyIs(rcv, true), "Ready=True")
	waitFor(t, gh, readyIs(gh, true), "Ready=True")
	cm := &corev1.ConfigMap{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "subst"}, cm); err != nil || cm.Data["value"] != substituted {
		t.Fatalf("the substituted ConfigMap: %v %v (the test needs the secret value applied)", cm.Data, err)
	}

	// Webhook requests: a wrong token, a wrong signature, the right ones.
	post := func(path string, body []byte, header http.Header) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+hooks+path, bytes.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		findLeaks(t, "webhook answer to "+path, string(b), needles)
	}
	post("/hook/"+strings.Repeat("0", 64), []byte(receiverToken), nil)
	post(rcv.Status.WebhookPath, nil, http.Header{"Authorization": {"Bearer " + receiverToken}})
	post(gh.Status.WebhookPath, []byte(`{"ref":"refs/heads/main"}`), http.Header{"X-Github-Event": {"push"}, "X-Hub-Signature-256": {"sha256=" + strings.Repeat("ab", 32)}})
	if code := githubPush(t, "http://"+hooks+gh.Status.WebhookPath, githubToken, "d1"); code != http.StatusOK {
		t.Fatalf("a signed GitHub push: %d", code)
	}

	// The Alerts reached their providers, which failed.
	waitUntil(t, "the HMAC provider was called", func() bool { return hook.count() > 0 })
	waitUntil(t, "the header provider was called", func() bool { return failing.count() > 0 })

	// What the engine shows: its objects' status, Events, /metrics, logs.
	var shown strings.Builder
	lists := []client.ObjectList{
		&sourcev1.GitRepositoryList{}, &sourcev1.OCIRepositoryList{}, &sourcev1.HelmRepositoryList{}, &sourcev1.HelmChartList{},
		&sourcev1.BucketList{}, &kustomizev1.KustomizationList{}, &helmv2.HelmReleaseList{},
		&notifyv1.ReceiverList{}, &notifyv1beta3.ProviderList{}, &notifyv1beta3.AlertList{},
	}
	for _, l := range lists {
		if err := cp.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(l)
		findLeaks(t, fmt.Sprintf("%T", l), string(b), needles)
		shown.Write(b)
	}
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Fatal("no Events recorded: nothing to check")
	}
	b, _ := json.Marshal(events)
	findLeaks(t, "Events", string(b), needles)
	resp, err := http.Get("http://" + health + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), ns) {
		t.Fatal("/metrics shows nothing of the test's objects")
	}
	findLeaks(t, "/metrics", string(metrics), needles)
	text := logs.String()
	if p := os.Getenv("COZY_SECURITY_LOG"); p != "" {
		_ = os.WriteFile(p, []byte(text), 0o600)
	}
	if !strings.Contains(text, "git-wrong") {
		t.Fatalf("the captured logs do not show the failing objects (%d bytes): the capture misses the engine's logger", len(text))
	}
	findLeaks(t, "the logs", text, needles)
	// The scan is only as good as its coverage: each failure is in status.
	for _, want := range []string{"authentication", "x509", "connection refused"} {
		if !strings.Contains(strings.ToLower(shown.String()), want) {
			t.Errorf("no status mentions %q: the failing cases did not fail as planned", want)
		}
	}
	t.Logf("scanned %d bytes of status, %d Events, %d bytes of /metrics, %d bytes of logs",
		shown.Len(), len(events.Items), len(metrics), len(text))
}

// waitUntil polls cond for up to 90s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A Kustomization applied as a service account cannot grant more than the
// account holds: the API server's RBAC escalation check refuses a
// RoleBinding to a wider role and a Role with wider rules, and the
// Kustomization goes Ready=False naming the object and the cause, while
// the same account may bind its own permissions.
func TestServiceAccountCannotEscalate(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	sa := "deployer"
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
		// Every verb but escalate and bind, which "*" would include.
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	}
	createObjects(t,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: sa},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}},
	)
	// A ClusterRole wider than the account (the built-in admin role is
	// empty here: no controller manager aggregates it).
	secrets := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-secrets"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}
	createObjects(t, secrets)
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), secrets) })
	binding := func(name, kind, role string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
			"\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: " + kind + "\n  name: " + role +
			"\nsubjects:\n- kind: ServiceAccount\n  name: " + sa + "\n  namespace: " + ns + "\n"
	}
	gitSource(t, ns, "tenant", map[string]string{
		"within/rb.yaml":   binding("within", "Role", sa),
		"admin/rb.yaml":    binding("to-cluster-admin", "ClusterRole", "cluster-admin"),
		"wider/role.yaml":  "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: secrets-reader\n  namespace: " + ns + "\nrules:\n- apiGroups: ['']\n  resources: [secrets]\n  verbs: [get, list]\n",
		"selfbind/rb.yaml": binding("to-secrets", "ClusterRole", ns+"-secrets"),
	})
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	as := func(name, path string) *kustomizev1.Kustomization {
		k := kustomization(ns, name, "tenant", path)
		k.Spec.ServiceAccountName = sa
		return k
	}
	within, admin, wider, selfbind := as("within", "./within"), as("admin", "./admin"), as("wider", "./wider"), as("selfbind", "./selfbind")
	createObjects(t, within, admin, wider, selfbind)

	waitFor(t, within, readyIs(within, true), "Ready=True: the account may bind what it holds")
	user := "system:serviceaccount:" + ns + ":" + sa
	for _, tc := range []struct {
		k      *kustomizev1.Kustomization
		object string
		obj    client.Object
	}{
		{admin, "RoleBinding/" + ns + "/to-cluster-admin", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "to-cluster-admin", Namespace: ns}}},
		{wider, "Role/" + ns + "/secrets-reader", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secrets-reader", Namespace: ns}}},
		{selfbind, "RoleBinding/" + ns + "/to-secrets", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "to-secrets", Namespace: ns}}},
	} {
		k := tc.k
		waitFor(t, k, readyIs(k, false), "Ready=False")
		msg := conditions.GetMessage(k, meta.ReadyCondition)
		for _, want := range []string{tc.object, "forbidden", user, "not currently held"} {
			if !strings.Contains(msg, want) {
				t.Errorf("Kustomization %s: message %q does not name %q", k.Name, msg, want)
			}
		}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(tc.obj), tc.obj); err == nil {
			t.Errorf("%s exists: the account escalated", tc.object)
		}
	}
	// The engine's own identity may do all of it: the refusal is the
	// account's, not a lack of the engine's rights.
	rb := &rbacv1.RoleBinding{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "within"}, rb); err != nil {
		t.Fatalf("the binding within the account's rights was not applied: %v", err)
	}
}

// The health server (/healthz, /readyz, /metrics) answers 413 to a body
// over its bound, declared or chunked, without reading it, and 431 to
// oversized headers; ordinary requests are served.
func TestHealthEndpointsBoundRequests(t *testing.T) {
	addr := webhookAddr(t)
	startEngine(t, engine.Options{Destinations: loopbackDestinations, HealthAddr: addr})
	waitUntil(t, "/healthz answers", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		for _, chunked := range []bool{false, true} {
			code, sent := offerBody(t, addr, path, chunked)
			if code != http.StatusRequestEntityTooLarge {
				t.Errorf("POST %s (chunked %v) with a 256 MiB body: %d, want 413", path, chunked, code)
			}
			if sent > 64<<20 {
				t.Errorf("POST %s (chunked %v): %d bytes written before the answer: the body was read", path, chunked, sent)
			}
		}
		// A small body is no reason to refuse.
		resp, err := http.Post("http://"+addr+path, "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("POST %s with one byte: %d", path, resp.StatusCode)
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 256<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("256 KiB of headers: %d, want 431", resp.StatusCode)
	}
}

// offerBody posts up to 256 MiB to path, declared or chunked, and stops
// writing once the server answers; it returns the status and the bytes
// written by then.
func offerBody(t *testing.T, addr, path string, chunked bool) (int, int64) {
	t.Helper()
	const offer = 256 << 20
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := "POST " + path + " HTTP/1.1\r\nHost: x\r\n"
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n\r\n", offer)
	}
	if _, err := c.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	codes := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			codes <- 0
			return
		}
		resp.Body.Close()
		codes <- resp.StatusCode
	}()
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	var sent int64
	for sent < offer {
		select {
		case code := <-codes:
			return code, sent
		default:
		}
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		var err error
		if chunked {
			_, err = fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk)
		} else {
			_, err = c.Write(chunk)
		}
		if err != nil {
			break
		}
		sent += int64(len(chunk))
	}
	select {
	case code := <-codes:
		return code, sent
	case <-time.After(30 * time.Second):
		t.Fatalf("POST %s: no answer after %d bytes", path, sent)
		return 0, sent
	}
}
