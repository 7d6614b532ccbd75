package statuspage_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/engine/crds"
	"github.com/cozystack/cozy-aio/internal/status"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	all, err := crds.All()
	if err != nil {
		panic(err)
	}
	os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{CRDs: all, Scheme: engine.NewScheme()}))
}

// Chromium finds the browser the tests drive: $CHROMIUM, else Debian's
// chromium on the PATH (make test installs it: hack/chromium.sh). In CI
// a missing browser fails the test; elsewhere it skips, naming the fix.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium for the browser tests: run hack/chromium.sh (apt-get install chromium), or set CHROMIUM"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser starts a headless Chromium of its own (its own profile, so its
// own cookies) and returns a tab.
func browser(t testing.TB) context.Context {
	t.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(Chromium(t)),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser, on a context without a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// run runs steps in the tab, a minute at most.
func run(t testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval returns a JavaScript expression's value in the tab.
func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitJS polls a JavaScript expression in the page until it is true.
func waitJS(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		var text string
		text, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: %v\npage:\n%s", what, err, text)
	}
}

func gitSource(t *testing.T, ns, name string, files map[string]string) *testenv.GitRepo {
	t.Helper()
	srv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	repo, err := srv.Repo(name + ".git")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit("main", files, "initial"); err != nil {
		t.Fatal(err)
	}
	gr := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: sourcev1.GitRepositorySpec{URL: repo.URL(), Interval: metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"}}}
	if err := cp.Client.Create(context.Background(), gr); err != nil {
		t.Fatal(err)
	}
	return repo
}

func ks(ns, name, path string, deps ...string) *kustomizev1.Kustomization {
	k := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: path, Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: "apps"}}}
	for _, d := range deps {
		k.Spec.DependsOn = append(k.Spec.DependsOn, meta.DependencyReference{Name: d})
	}
	return k
}

func configMap(name, ns string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\ndata:\n  key: value\n"
}

// fluxRules grants verbs on every Flux kind.
func fluxRules(verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{"source.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io",
		"helm.toolkit.fluxcd.io", "source.extensions.fluxcd.io"}, Resources: []string{"*"}, Verbs: verbs}
}

// The page in a real browser, off the loopback: without a token it asks
// for one; signed in as a cluster-wide reader it shows the counts the API
// server holds, and follows an object from Ready to failed and back
// without a reload; signed in as a user who reads one namespace, it shows
// nothing of another. It takes the screenshots under docs/status-page
// when COZY_SCREENSHOTS=1 (make screenshots), and fails when the page's
// assets changed since they were taken.
func TestStatusPageInBrowser(t *testing.T) {
	ctx := context.Background()
	checkScreenshotsCurrent(t)
	mine, other := cp.Namespace(t), cp.Namespace(t)
	gitSource(t, mine, "apps", map[string]string{"deploy/a.yaml": configMap("a", mine), "web/w.yaml": configMap("w", mine)})
	gitSource(t, other, "apps", map[string]string{"deploy/a.yaml": configMap("a", other)})
	web := ks(mine, "web", "./web")
	for _, o := range []client.Object{ks(mine, "platform", "./deploy"), web, ks(mine, "broken", "./missing"),
		ks(mine, "tenant-a", "./deploy", "broken"), ks(mine, "tenant-b", "./deploy", "tenant-a"), ks(other, "secret-team", "./deploy")} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	admin := cp.ServiceAccountToken(t, mine, "admin", true, fluxRules("get", "list", "watch", "patch"))
	viewer := cp.ServiceAccountToken(t, mine, "viewer", false, fluxRules("get", "list", "watch"))

	e, err := engine.New(cp.Config, engine.Options{DataDir: t.TempDir(), ArtifactAddr: "127.0.0.1:0",
		Registry: prometheus.NewRegistry(), StatusPage: engine.StatusPageOptions{Addr: "0.0.0.0:0", Prefix: "/ops/cozy"}})
	if err != nil {
		t.Fatal(err)
	}
	ectx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Start(ectx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("engine: %v", err)
		}
	})
	var url string
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		url = e.StatusPageURL()
		return url != "", nil
	})
	url = strings.Replace(strings.Replace(url, "0.0.0.0", "127.0.0.1", 1), "[::]", "127.0.0.1", 1)
	if url == "" {
		t.Fatal("the status page never listened")
	}

	// No token: the sign-in form; a bad token: the API server's answer.
	b := browser(t)
	run(t, b, "open the page", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	run(t, b, "a bad token", chromedp.SetValue(chromedp.CSS("#token"), "not-a-token"), chromedp.Click(chromedp.CSS("#login-form button")))
	waitJS(t, b, "the bad token's error", `document.getElementById("login-error").textContent.includes("not accepted")`)
	signIn := func(ctx context.Context, tok string) {
		run(t, ctx, "sign in", chromedp.SetValue(chromedp.CSS("#token"), tok), chromedp.Click(chromedp.CSS("#login-form button")),
			chromedp.WaitVisible(chromedp.CSS("#counts")))
	}
	signIn(b, admin)

	// The counts the API server holds (they settle as the engine works).
	broken := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: mine}}
	waitObj(t, broken, func() bool {
		return conditions.IsFalse(broken, meta.ReadyCondition) && !conditions.IsReconciling(broken)
	})
	waitObj(t, web, func() bool { return conditions.IsReady(web) })
	var shown map[string]int
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		units, err := status.ListUnits(ctx, cp.Client)
		if err != nil {
			return false, err
		}
		shown = pageCounts(t, b)
		for _, c := range status.CountUnits(units) {
			if shown[c.Kind+"/total"] != c.Total || shown[c.Kind+"/ready"] != c.Ready {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the page's counts never matched the API server's: %v", shown)
	}
	waitJS(t, b, "the failure listed with its message", `!!document.querySelector('[data-failure="Kustomization/`+mine+`/broken"]')`)
	shoot(t, b, "overview", url+"#/", "#failures")

	// One object from Ready to failed and back, without a reload.
	run(t, b, "open web", chromedp.Navigate(url+"#/object/Kustomization/"+mine+"/web"))
	waitJS(t, b, "web Ready", `document.querySelector("h1 .state")?.dataset.state === "ready"`)
	eval[string](t, b, `window.__sameDocument = true; String(document.body.dataset.updates || "0")`)
	setPath(t, web, "./missing")
	waitJS(t, b, "web failed on the page", `document.querySelector("h1 .state")?.dataset.state === "failed"`)
	setPath(t, web, "./web")
	waitJS(t, b, "web Ready again on the page", `document.querySelector("h1 .state")?.dataset.state === "ready"`)
	if !eval[bool](t, b, `window.__sameDocument === true && Number(document.body.dataset.updates) > 0`) {
		t.Fatal("the page reloaded, or no update came through the live stream")
	}
	shoot(t, b, "object", url+"#/object/Kustomization/"+mine+"/tenant-b", "#conditions")
	shoot(t, b, "objects", url+"#/objects", "#objects")
	shoot(t, b, "shards", url+"#/shards", "#shards")
	shoot(t, b, "timeline", url+"#/timeline", "#timeline-bars")

	// A user who reads one namespace: nothing of another, in any view.
	v := browser(t)
	run(t, v, "open the page", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	signIn(v, viewer)
	waitJS(t, v, "the viewer's counts", `document.querySelector('[data-count="Kustomization/total"]').textContent === "5"`)
	for _, view := range []string{"#/", "#/objects?limit=500", "#/timeline", "#/shards", "#/clusters"} {
		run(t, v, "open "+view, chromedp.Navigate(url+view), chromedp.WaitVisible(chromedp.CSS("main h1")))
		time.Sleep(300 * time.Millisecond)
		text := eval[string](t, v, `document.body.innerText`)
		if strings.Contains(text, other) || strings.Contains(text, "secret-team") {
			t.Fatalf("the viewer sees another namespace on %s:\n%s", view, text)
		}
	}
	run(t, v, "open the objects", chromedp.Navigate(url+"#/objects?limit=500"), chromedp.WaitVisible(chromedp.CSS("#objects")))
	waitJS(t, v, "the viewer's 6 objects", `document.querySelectorAll("#objects tbody tr").length === 6`)
	run(t, v, "open another namespace's object", chromedp.Navigate(url+"#/object/Kustomization/"+other+"/secret-team"))
	waitJS(t, v, "not found", `(document.getElementById("error")?.textContent || "").includes("not found")`)
}

func waitObj(t *testing.T, obj interface {
	client.Object
	conditions.Getter
}, check func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return check(), nil
	})
	if err != nil {
		t.Fatalf("%s/%s never got there: %+v", obj.GetNamespace(), obj.GetName(), obj.GetConditions())
	}
}

func setPath(t *testing.T, k *kustomizev1.Kustomization, path string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"path":%q}}`, path)
	if err := cp.Client.Patch(context.Background(), k, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// pageCounts reads every count cell of the overview.
func pageCounts(t *testing.T, ctx context.Context) map[string]int {
	t.Helper()
	return eval[map[string]int](t, ctx,
		`Object.fromEntries([...document.querySelectorAll("[data-count]")].map(e => [e.dataset.count, Number(e.textContent)]))`)
}

// screenshotDir holds the README's screenshots; assetsSum the digest of
// the page's assets they were taken of.
const (
	screenshotDir = "../../docs/status-page"
	assetsSum     = screenshotDir + "/assets.sha256"
)

func assetsDigest(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	names, err := filepath.Glob("assets/*")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(n), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func updatingScreenshots() bool { return os.Getenv("COZY_SCREENSHOTS") == "1" }

// checkScreenshotsCurrent fails when the assets changed since the
// screenshots were taken: the README would show an old page.
func checkScreenshotsCurrent(t *testing.T) {
	t.Helper()
	if updatingScreenshots() {
		return
	}
	b, err := os.ReadFile(assetsSum)
	if err != nil || strings.TrimSpace(string(b)) != assetsDigest(t) {
		t.Fatalf("the screenshots in docs/status-page are not of the current page (%v): run make screenshots", err)
	}
}

// shoot opens view, waits for sel, and takes a screenshot: into
// docs/status-page when updating them, else into a temporary directory.
func shoot(t *testing.T, ctx context.Context, name, url, sel string) {
	t.Helper()
	run(t, ctx, "open "+name, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Sleep(300*time.Millisecond))
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := t.TempDir()
	if updatingScreenshots() {
		dir = screenshotDir
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(assetsSum, []byte(assetsDigest(t)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
