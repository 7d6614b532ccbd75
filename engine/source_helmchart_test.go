package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	helmindex "helm.sh/helm/v4/pkg/repo/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// helmRepo starts a chart repository for one test with the given charts.
func helmRepo(t *testing.T, opts testenv.HelmRepoOptions, charts ...map[string]string) *testenv.HelmRepo {
	t.Helper()
	r, err := testenv.StartHelmRepo(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	for _, c := range charts {
		if _, err := r.AddChart(c, ""); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func helmRepository(ns, name, url string) *sourcev1.HelmRepository {
	return &sourcev1.HelmRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       sourcev1.HelmRepositorySpec{URL: url, Interval: metav1.Duration{Duration: time.Hour}},
	}
}

// chartRelease is a HelmRelease with spec.chart from a HelmRepository.
func chartRelease(ns, name, repo, version string) *helmv2.HelmRelease {
	return &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart: "demo", Version: version,
				SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: repo},
			}},
		},
	}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := cp.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHelmReleaseChartFromHTTPRepositoryUpgradesOnNewVersion(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	repo := helmRepo(t, testenv.HelmRepoOptions{Username: "u", Password: "p"}, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	hrepo := helmRepository(ns, "charts", repo.URL())
	hrepo.Spec.SecretRef = &meta.LocalObjectReference{Name: "repo-auth"}
	hr := chartRelease(ns, "app", "charts", "1.x")
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "repo-auth", Namespace: ns},
		Data:       map[string][]byte{"username": []byte("u"), "password": []byte("p")},
	}, hrepo, hr)

	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: ns}}
	if !exists(t, cm) || cm.Data["chart"] != "1.0.0" {
		t.Fatalf("installed ConfigMap = %v, want chart 1.0.0", cm.Data)
	}
	if want := ns + "/" + ns + "-app"; hr.Status.HelmChart != want {
		t.Fatalf("status.helmChart = %q, want %q", hr.Status.HelmChart, want)
	}
	hc := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: ns + "-app", Namespace: ns}}
	waitFor(t, hc, readyIs(hc, true), "Ready=True")
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hrepo), hrepo); err != nil {
		t.Fatal(err)
	}
	if hc.Status.Artifact == nil || hc.Status.Artifact.Revision != "1.0.0" || hc.Status.ObservedChartName != "demo" ||
		hrepo.Status.Artifact == nil || hc.Status.ObservedSourceArtifactRevision != hrepo.Status.Artifact.Revision ||
		hc.Labels["helm.toolkit.fluxcd.io/name"] != "app" || hc.Spec.Version != "1.x" {
		t.Fatalf("HelmChart status %+v labels %v; HelmRepository artifact %+v", hc.Status, hc.Labels, hrepo.Status.Artifact)
	}
	if c := conditions.Get(hc, meta.ReadyCondition); c.Reason != sourcev1.ChartPullSucceededReason ||
		c.Message != "pulled 'demo' chart with version '1.0.0'" {
		t.Fatalf("HelmChart Ready = %s %q", c.Reason, c.Message)
	}

	// A new version in the index is picked up on request and upgrades the
	// release.
	if _, err := repo.AddChart(demoChart("1.1.0"), ""); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, hrepo)
	waitFor(t, hr, func() bool {
		return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].ChartVersion == "1.1.0"
	}, "upgrade to chart 1.1.0")
	if !exists(t, cm) || cm.Data["chart"] != "1.1.0" {
		t.Fatalf("after upgrade the ConfigMap says chart %q, want 1.1.0", cm.Data["chart"])
	}

	// Deleting the HelmRelease deletes its HelmChart.
	if err := cp.Client.Delete(ctx, hr); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "HelmChart and release gone after the HelmRelease", func() bool { return !exists(t, hc) && !exists(t, cm) })
}

// TestHelmReleaseChartSourcesGiveTheSameRelease installs one HelmRelease
// three ways: spec.chart from an HTTP repository, spec.chart from an OCI
// repository, and chartRef to an OCIRepository. The releases and the
// objects they apply are the same.
func TestHelmReleaseChartSourcesGiveTheSameRelease(t *testing.T) {
	ctx := context.Background()
	repo := helmRepo(t, testenv.HelmRepoOptions{}, demoChart("1.0.0"))
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	values := &apiextensionsv1.JSON{Raw: []byte(`{"color":"red"}`)}

	nsHTTP, nsOCI, nsRef := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	viaHTTP := chartRelease(nsHTTP, "app", "charts", "1.0.0")
	viaOCI := chartRelease(nsOCI, "app", "charts", "1.0.0")
	viaRef := helmRelease(nsRef, "app", "demo")
	ociRepo := helmRepository(nsOCI, "charts", "oci://"+reg.Host()+"/charts")
	ociRepo.Spec.Type, ociRepo.Spec.Insecure = sourcev1.HelmRepositoryTypeOCI, true
	for _, hr := range []*helmv2.HelmRelease{viaHTTP, viaOCI, viaRef} {
		hr.Spec.Values = values
	}
	refSource := chartSource(nsRef, "demo", reg.Host(), "1.0.0")
	create(t, helmRepository(nsHTTP, "charts", repo.URL()), ociRepo, refSource, viaHTTP, viaOCI, viaRef)

	var data []map[string]string
	for _, hr := range []*helmv2.HelmRelease{viaHTTP, viaOCI, viaRef} {
		waitFor(t, hr, readyIs(hr, true), "Ready=True")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: hr.Namespace}}
		if !exists(t, cm) {
			t.Fatalf("%s: no ConfigMap", hr.Namespace)
		}
		labels := maps.Clone(cm.Labels)
		if labels["helm.toolkit.fluxcd.io/namespace"] == hr.Namespace {
			labels["helm.toolkit.fluxcd.io/namespace"] = "<release namespace>" // the one expected difference
		}
		// As helm-controller, a chart from an OCIRepository is installed
		// with the artifact's digest in its version; from a HelmChart, as
		// it is.
		version := "1.0.0"
		if hr == viaRef {
			version = sourceChartVersion(t, refSource, "1.0.0")
		}
		cmData := maps.Clone(cm.Data)
		if cmData["chart"] == version {
			cmData["chart"] = "<chart version>"
		}
		data = append(data, cmData, labels)
		// The digests differ: they cover the chart archive, which `helm
		// package` and `helm push` pack differently.
		h := hr.Status.History[0]
		if h.ChartName != "demo" || h.ChartVersion != version || h.Version != 1 || h.Status != "deployed" {
			t.Fatalf("%s: release %+v differs from %+v", hr.Namespace, h, viaHTTP.Status.History[0])
		}
	}
	for i := range data {
		if !maps.Equal(data[i], data[i%2]) || data[0]["color"] != "red" {
			t.Fatalf("ConfigMaps differ: %v", data)
		}
	}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(ociRepo), ociRepo); err != nil {
		t.Fatal(err)
	}
	if !conditions.IsReady(ociRepo) || ociRepo.Status.Artifact != nil {
		t.Fatalf("OCI HelmRepository: Ready %v, artifact %+v (want Ready and none, as Flux)", conditions.IsReady(ociRepo), ociRepo.Status.Artifact)
	}
}

// TestHelmRepositoryUnchangedIndexWritesNothing polls an index that does
// not change: the server answers 304 once it can, no chart is downloaded
// again, and no object is written.
func TestHelmRepositoryUnchangedIndexWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	repo := helmRepo(t, testenv.HelmRepoOptions{}, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	hrepo := helmRepository(ns, "charts", repo.URL())
	hrepo.Spec.Interval = metav1.Duration{Duration: time.Second}
	hr := chartRelease(ns, "app", "charts", "")
	// A chart with values files, reconciled every second too.
	hrValues := chartRelease(ns, "with-values", "charts", "")
	hrValues.Spec.Chart.Spec.ValuesFiles = []string{"values.yaml"}
	hrValues.Spec.Chart.Spec.Interval = &metav1.Duration{Duration: time.Second}
	create(t, hrepo, hr, hrValues)
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	waitFor(t, hrValues, readyIs(hrValues, true), "Ready=True")
	hc := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: ns + "-app", Namespace: ns}}
	hcValues := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: ns + "-with-values", Namespace: ns}}
	if !exists(t, hc) || !exists(t, hrepo) || !exists(t, hcValues) {
		t.Fatal("HelmChart or HelmRepository missing")
	}
	rvs := []string{hrepo.ResourceVersion, hc.ResourceVersion, hr.ResourceVersion, hcValues.ResourceVersion, hrValues.ResourceVersion}
	charts := repo.Downloads("/demo-1.0.0.tgz")
	// HTTP dates have a one-second resolution: the first fetches of an
	// index written a moment ago download it and compare digests.
	waitIndexRequests := func(n int) {
		before, _ := repo.Requests("/index.yaml")
		eventually(t, 30*time.Second, "index requests", func() bool {
			now, _ := repo.Requests("/index.yaml")
			return now >= before+n
		})
	}
	waitIndexRequests(4)
	downloads := repo.Downloads("/index.yaml")
	waitIndexRequests(3)
	if got := repo.Downloads("/index.yaml"); got != downloads {
		t.Errorf("an unchanged index was downloaded %d more times; want 304s", got-downloads)
	}
	if got := repo.Downloads("/demo-1.0.0.tgz"); got != charts || charts != 1 {
		t.Errorf("chart downloaded %d times, want once", got)
	}
	for _, o := range []client.Object{hrepo, hc, hr, hcValues, hrValues} {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
	}
	if now := []string{hrepo.ResourceVersion, hc.ResourceVersion, hr.ResourceVersion, hcValues.ResourceVersion, hrValues.ResourceVersion}; !slices.Equal(now, rvs) {
		t.Errorf("resourceVersions of HelmRepository, HelmChart, HelmRelease (twice) went from %v to %v: an unchanged index wrote", rvs, now)
	}
}

// TestHelmReleasesShareOneChartDownload installs 100 HelmReleases of one
// chart version from one repository: the chart is downloaded once.
func TestHelmReleasesShareOneChartDownload(t *testing.T) {
	ns := cp.Namespace(t)
	repo := helmRepo(t, testenv.HelmRepoOptions{Username: "u", Password: "p"}, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	hrepo := helmRepository(ns, "charts", repo.URL())
	hrepo.Spec.SecretRef = &meta.LocalObjectReference{Name: "repo-auth"}
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "repo-auth", Namespace: ns},
		Data:       map[string][]byte{"username": []byte("u"), "password": []byte("p")},
	}, hrepo)
	const n = 100
	hrs := make([]*helmv2.HelmRelease, n)
	for i := range hrs {
		hrs[i] = chartRelease(ns, fmt.Sprintf("app-%03d", i), "charts", "1.0.0")
		create(t, hrs[i])
	}
	for _, hr := range hrs {
		waitFor(t, hr, readyIs(hr, true), "Ready=True")
	}
	if got := repo.Downloads("/demo-1.0.0.tgz"); got != 1 {
		t.Fatalf("%d HelmReleases downloaded the chart %d times, want once", n, got)
	}
	if idx := repo.Downloads("/index.yaml"); idx != 1 {
		t.Fatalf("index downloaded %d times, want once", idx)
	}
}

// prefixed returns files with every path under dir.
func prefixed(dir string, files map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[dir+k] = v
	}
	return out
}

// TestHelmChartFromGitRepository packages a chart from a Git path: with
// the ChartVersion strategy a commit that keeps the version keeps the
// artifact (as Flux does); with Revision the version carries the commit
// and the release upgrades.
func TestHelmChartFromGitRepository(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	git, gr := gitSource(t, ns, "charts", prefixed("charts/demo/", demoChart("1.0.0")))
	startEngine(t, engine.Options{})
	byVersion := chartRelease(ns, "by-version", gr.Name, "")
	byVersion.Spec.Chart.Spec.Chart = "./charts/demo"
	byVersion.Spec.Chart.Spec.SourceRef.Kind = sourcev1.GitRepositoryKind
	byRevision := byVersion.DeepCopy()
	byRevision.Name = "by-revision"
	byRevision.Spec.Chart.Spec.ReconcileStrategy = sourcev1.ReconcileStrategyRevision
	create(t, byVersion, byRevision)
	for _, hr := range []*helmv2.HelmRelease{byVersion, byRevision} {
		waitFor(t, hr, readyIs(hr, true), "Ready=True")
	}
	hc := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: ns + "-by-version", Namespace: ns}}
	waitFor(t, hc, readyIs(hc, true), "Ready=True")
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(gr), gr); err != nil {
		t.Fatal(err)
	}
	if hc.Status.Artifact.Revision != "1.0.0" || hc.Status.ObservedChartName != "demo" ||
		hc.Status.ObservedSourceArtifactRevision != gr.Status.Artifact.Revision ||
		conditions.GetReason(hc, meta.ReadyCondition) != sourcev1.ChartPackageSucceededReason {
		t.Fatalf("HelmChart status %+v, Ready reason %s", hc.Status, conditions.GetReason(hc, meta.ReadyCondition))
	}
	first := hc.Status.Artifact.Digest

	changed := demoChart("1.0.0")
	changed["values.yaml"] = "color: orange\n"
	commit, err := git.Commit("main", prefixed("charts/demo/", changed), "orange")
	if err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, gr)
	waitFor(t, byRevision, func() bool {
		return conditions.IsReady(byRevision) && len(byRevision.Status.History) > 0 &&
			byRevision.Status.History[0].ChartVersion == "1.0.0+"+commit[:12]
	}, "upgrade to the chart of the new commit")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-revision-settings", Namespace: ns}}
	if !exists(t, cm) || cm.Data["color"] != "orange" {
		t.Fatalf("ConfigMap after the new commit: %v", cm.Data)
	}
	waitFor(t, hc, func() bool { return hc.Status.ObservedSourceArtifactRevision == "main@sha1:"+commit }, "HelmChart saw the commit")
	if hc.Status.Artifact.Digest != first || hc.Status.Artifact.Revision != "1.0.0" {
		t.Fatalf("ChartVersion strategy: same version must keep the artifact, got %+v", hc.Status.Artifact)
	}
}

// TestHelmChartValuesFilesAndDependencies packages a Git chart whose
// dependency comes from a chart repository that a HelmRepository names
// (with its credentials), with values files merged over the defaults;
// and merges values files into a chart pulled from that repository,
// skipping a missing one with ignoreMissingValuesFiles.
func TestHelmChartValuesFilesAndDependencies(t *testing.T) {
	ns := cp.Namespace(t)
	prod := demoChart("1.0.0")
	prod["values-prod.yaml"] = "color: black\n"
	repo := helmRepo(t, testenv.HelmRepoOptions{Username: "u", Password: "p"}, prod)
	umbrella := map[string]string{
		"Chart.yaml":       "apiVersion: v2\nname: umbrella\nversion: 2.0.0\ndependencies:\n- name: demo\n  version: 1.x\n  repository: " + repo.URL() + "\n",
		"values.yaml":      "demo:\n  color: white\n",
		"values-prod.yaml": "demo:\n  color: purple\n",
	}
	_, gr := gitSource(t, ns, "platform", prefixed("charts/umbrella/", umbrella))
	startEngine(t, engine.Options{})
	hrepo := helmRepository(ns, "charts", repo.URL())
	hrepo.Spec.SecretRef = &meta.LocalObjectReference{Name: "repo-auth"}
	fromGit := chartRelease(ns, "umbrella", gr.Name, "")
	fromGit.Spec.Chart.Spec.Chart = "charts/umbrella"
	fromGit.Spec.Chart.Spec.SourceRef.Kind = sourcev1.GitRepositoryKind
	fromGit.Spec.Chart.Spec.ValuesFiles = []string{"charts/umbrella/values.yaml", "charts/umbrella/values-prod.yaml"}
	fromRepo := chartRelease(ns, "pulled", "charts", "1.0.0")
	fromRepo.Spec.Chart.Spec.ValuesFiles = []string{"values.yaml", "values-prod.yaml", "values-missing.yaml"}
	fromRepo.Spec.Chart.Spec.IgnoreMissingValuesFiles = true
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "repo-auth", Namespace: ns},
		Data:       map[string][]byte{"username": []byte("u"), "password": []byte("p")},
	}, hrepo, fromGit, fromRepo)
	for _, tc := range []struct {
		hr    *helmv2.HelmRelease
		color string
		files []string
	}{
		{fromGit, "purple", fromGit.Spec.Chart.Spec.ValuesFiles},
		{fromRepo, "black", []string{"values.yaml", "values-prod.yaml"}},
	} {
		waitFor(t, tc.hr, readyIs(tc.hr, true), "Ready=True")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tc.hr.Name + "-settings", Namespace: ns}}
		if !exists(t, cm) || cm.Data["color"] != tc.color {
			t.Errorf("%s: ConfigMap %v, want color %s", tc.hr.Name, cm.Data, tc.color)
		}
		hc := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + tc.hr.Name, Namespace: ns}}
		if !exists(t, hc) || !slices.Equal(hc.Status.ObservedValuesFiles, tc.files) ||
			conditions.GetReason(hc, meta.ReadyCondition) != sourcev1.ChartPackageSucceededReason {
			t.Errorf("%s: observedValuesFiles %v (want %v), Ready reason %s", hc.Name, hc.Status.ObservedValuesFiles, tc.files,
				conditions.GetReason(hc, meta.ReadyCondition))
		}
	}
}

// TestHelmChartWakesWhenDependencyRepositoryIsReady packages umbrella
// charts from Git before the HelmRepository of their dependency can serve
// it: one whose repository exists but has no artifact yet (suspended), one
// whose repository does not exist yet. Each fails naming the cause; once
// the repository stores its index, the chart is packaged at once, not at
// its interval (an hour here): the repository wakes the charts that wait
// on it.
func TestHelmChartWakesWhenDependencyRepositoryIsReady(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	first := helmRepo(t, testenv.HelmRepoOptions{}, demoChart("1.0.0"))
	second := helmRepo(t, testenv.HelmRepoOptions{}, demoChart("1.0.0"))
	umbrella := func(name, url string) map[string]string {
		return prefixed("charts/"+name+"/", map[string]string{
			"Chart.yaml":  "apiVersion: v2\nname: " + name + "\nversion: 2.0.0\ndependencies:\n- name: demo\n  version: 1.x\n  repository: " + url + "\n",
			"values.yaml": "demo:\n  color: white\n",
		})
	}
	files := umbrella("no-artifact", first.URL())
	maps.Copy(files, umbrella("no-repository", second.URL()))
	_, gr := gitSource(t, ns, "platform", files)
	startEngine(t, engine.Options{})

	charts := helmRepository(ns, "charts", first.URL())
	charts.Spec.Suspend = true
	noArtifact := helmChart(ns, "no-artifact", gr.Name, "charts/no-artifact", "")
	noRepo := helmChart(ns, "no-repository", gr.Name, "charts/no-repository", "")
	for _, hc := range []*sourcev1.HelmChart{noArtifact, noRepo} {
		hc.Spec.SourceRef.Kind = sourcev1.GitRepositoryKind
	}
	create(t, charts, noArtifact, noRepo)
	for _, tc := range []struct {
		hc   *sourcev1.HelmChart
		want string
	}{
		{noArtifact, fmt.Sprintf("source HelmRepository/%s/charts has no artifact yet", ns)},
		{noRepo, fmt.Sprintf("no HelmRepository in namespace %s has the URL %s", ns, second.URL())},
	} {
		waitFor(t, tc.hc, func() bool {
			c := conditions.Get(tc.hc, meta.ReadyCondition)
			return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, tc.want)
		}, "Ready=False with "+tc.want)
	}

	// The repository gets its artifact; the other one appears.
	patch := client.MergeFrom(charts.DeepCopy())
	charts.Spec.Suspend = false
	if err := cp.Client.Patch(ctx, charts, patch); err != nil {
		t.Fatal(err)
	}
	create(t, helmRepository(ns, "more", second.URL()))
	for _, hc := range []*sourcev1.HelmChart{noArtifact, noRepo} {
		waitFor(t, hc, readyIs(hc, true), "Ready=True")
		if hc.Status.Artifact == nil || hc.Status.Artifact.Revision != "2.0.0" ||
			conditions.GetReason(hc, meta.ReadyCondition) != sourcev1.ChartPackageSucceededReason {
			t.Errorf("%s: artifact %+v, Ready reason %s", hc.Name, hc.Status.Artifact, conditions.GetReason(hc, meta.ReadyCondition))
		}
	}
}

func helmChart(ns, name, repo, chart, version string) *sourcev1.HelmChart {
	return &sourcev1.HelmChart{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: sourcev1.HelmChartSpec{
			Chart: chart, Version: version, Interval: metav1.Duration{Duration: time.Hour},
			SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: repo},
		},
	}
}

// indexYAML writes an index with Helm's repo package: one entry per
// chart file, without digests.
func indexYAML(t *testing.T, entries map[string]*chartv2.Metadata) []byte {
	t.Helper()
	idx := helmindex.NewIndexFile()
	for file, md := range entries {
		if err := idx.MustAdd(md, file, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	b, err := yaml.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHelmSourcesBadInputs: each bad repository or chart gets Ready=False
// naming the object and the cause, and the good ones beside them are
// Ready.
func TestHelmSourcesBadInputs(t *testing.T) {
	ns := cp.Namespace(t)
	const maxIndex = 64 << 10
	startEngine(t, engine.Options{HelmIndexMaxSize: maxIndex})

	good := helmRepo(t, testenv.HelmRepoOptions{}, demoChart("1.0.0"))
	notYAML := helmRepo(t, testenv.HelmRepoOptions{})
	notYAML.Serve("/index.yaml", []byte("<html>this is not an index</html>\n\tkey: [\n"))
	huge := helmRepo(t, testenv.HelmRepoOptions{})
	huge.Serve("/index.yaml", append([]byte("apiVersion: v1\nentries: {}\n# "), bytes.Repeat([]byte("x"), maxIndex)...))
	private := helmRepo(t, testenv.HelmRepoOptions{Username: "u", Password: "p"}, demoChart("1.0.0"))
	tlsRepo := helmRepo(t, testenv.HelmRepoOptions{TLS: true}, demoChart("1.0.0"))
	// The chart lives on another host, which also wants credentials.
	elsewhere := helmRepo(t, testenv.HelmRepoOptions{Username: "u", Password: "p"}, demoChart("1.0.0"))
	pointer := helmRepo(t, testenv.HelmRepoOptions{Username: "u", Password: "p"})
	if _, err := pointer.AddChart(demoChart("1.0.0"), elsewhere.URL()); err != nil {
		t.Fatal(err)
	}
	// An entry whose archive is no chart, and one whose Chart.yaml names
	// another chart.
	liar := helmRepo(t, testenv.HelmRepoOptions{})
	other := demoChart("2.0.0")
	other["Chart.yaml"] = "apiVersion: v2\nname: impostor\nversion: 2.0.0\n"
	otherFile, err := liar.AddChart(other, "")
	if err != nil {
		t.Fatal(err)
	}
	liar.Serve("/index.yaml", indexYAML(t, map[string]*chartv2.Metadata{
		"junk.tgz": {APIVersion: "v2", Name: "demo", Version: "1.0.0"},
		otherFile:  {APIVersion: "v2", Name: "demo", Version: "2.0.0"},
	}))
	liar.Serve("/junk.tgz", []byte("this is not a gzip archive"))

	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
		return s
	}
	withSecret := func(r *sourcev1.HelmRepository, name string) *sourcev1.HelmRepository {
		r.Spec.SecretRef = &meta.LocalObjectReference{Name: name}
		return r
	}
	trusted := helmRepository(ns, "tls-trusted", tlsRepo.URL())
	trusted.Spec.CertSecretRef = &meta.LocalObjectReference{Name: "ca"}
	passing := withSecret(helmRepository(ns, "pointer-pass", pointer.URL()), "auth")
	passing.Spec.PassCredentials = true
	repos := map[string]*sourcev1.HelmRepository{
		"good":           helmRepository(ns, "good", good.URL()),
		"not-yaml":       helmRepository(ns, "not-yaml", notYAML.URL()),
		"huge":           helmRepository(ns, "huge", huge.URL()),
		"anonymous":      helmRepository(ns, "anonymous", private.URL()),
		"wrong-password": withSecret(helmRepository(ns, "wrong-password", private.URL()), "wrong"),
		"tls-unknown-ca": helmRepository(ns, "tls-unknown-ca", tlsRepo.URL()),
		"tls-trusted":    trusted,
		"unreachable":    helmRepository(ns, "unreachable", "http://127.0.0.1:1"),
		"pointer":        withSecret(helmRepository(ns, "pointer", pointer.URL()), "auth"),
		"pointer-pass":   passing,
		"liar":           helmRepository(ns, "liar", liar.URL()),
	}
	repos["unreachable"].Spec.Timeout = &metav1.Duration{Duration: 5 * time.Second}
	ociDown := helmRepository(ns, "oci-unreachable", "oci://127.0.0.1:1/charts")
	ociDown.Spec.Type, ociDown.Spec.Insecure, ociDown.Spec.Timeout = sourcev1.HelmRepositoryTypeOCI, true, &metav1.Duration{Duration: 5 * time.Second}
	repos["oci-unreachable"] = ociDown
	// A release whose chart cannot be found says so, naming the HelmChart.
	missing := chartRelease(ns, "missing-chart", "good", "9.x")
	charts := map[string]*sourcev1.HelmChart{
		"good":         helmChart(ns, "good", "good", "demo", "1.x"),
		"no-match":     helmChart(ns, "no-match", "good", "demo", ">=5.0.0"),
		"no-chart":     helmChart(ns, "no-chart", "good", "absent", ""),
		"other-host":   helmChart(ns, "other-host", "pointer", "demo", "1.0.0"),
		"passed-creds": helmChart(ns, "passed-creds", "pointer-pass", "demo", "1.0.0"),
		"not-a-chart":  helmChart(ns, "not-a-chart", "liar", "demo", "1.0.0"),
		"impostor":     helmChart(ns, "impostor", "liar", "demo", "2.0.0"),
		"tls":          helmChart(ns, "tls", "tls-trusted", "demo", "1.0.0"),
	}
	create(t, secret("auth", map[string]string{"username": "u", "password": "p"}),
		secret("wrong", map[string]string{"username": "u", "password": "nope"}),
		secret("ca", map[string]string{"ca.crt": string(tlsRepo.CACert())}))
	for _, r := range repos {
		create(t, r)
	}
	for _, c := range charts {
		create(t, c)
	}
	create(t, missing)

	for _, name := range []string{"good", "tls-trusted", "pointer", "pointer-pass", "liar"} {
		waitFor(t, repos[name], readyIs(repos[name], true), "Ready=True")
	}
	for _, name := range []string{"good", "passed-creds", "tls"} {
		waitFor(t, charts[name], readyIs(charts[name], true), "Ready=True")
	}
	for _, tc := range []struct {
		obj interface {
			client.Object
			conditions.Getter
		}
		says []string
	}{
		{repos["not-yaml"], []string{"HelmRepository/" + ns + "/not-yaml", "invalid Helm repository index"}},
		{repos["huge"], []string{"HelmRepository/" + ns + "/huge", "more than the limit of 65536 bytes"}},
		{repos["anonymous"], []string{"HelmRepository/" + ns + "/anonymous", "401 Unauthorized", "authentication failed"}},
		{repos["wrong-password"], []string{"HelmRepository/" + ns + "/wrong-password", "401 Unauthorized"}},
		{repos["tls-unknown-ca"], []string{"HelmRepository/" + ns + "/tls-unknown-ca", "certificate signed by unknown authority"}},
		{repos["unreachable"], []string{"HelmRepository/" + ns + "/unreachable", "connection refused"}},
		{repos["oci-unreachable"], []string{"HelmRepository/" + ns + "/oci-unreachable", "connection refused"}},
		{charts["no-match"], []string{"HelmChart/" + ns + "/no-match", `chart "demo": no version matches ">=5.0.0"`, "newest available: 1.0.0"}},
		{charts["no-chart"], []string{"HelmChart/" + ns + "/no-chart", `chart not found in the index: "absent"`}},
		{charts["other-host"], []string{"HelmChart/" + ns + "/other-host", "401 Unauthorized", "passCredentials"}},
		{charts["not-a-chart"], []string{"HelmChart/" + ns + "/not-a-chart", "invalid chart archive"}},
		{charts["impostor"], []string{"HelmChart/" + ns + "/impostor", `Chart.yaml names chart "impostor", want "demo"`}},
		{missing, []string{"HelmChart '" + ns + "/" + ns + "-missing-chart' is not ready", `no version matches "9.x" (newest available: 1.0.0)`}},
	} {
		waitFor(t, tc.obj, func() bool {
			return readyIs(tc.obj, false)() && containsAll(conditions.GetMessage(tc.obj, meta.ReadyCondition), tc.says)
		}, fmt.Sprintf("Ready=False saying %q", tc.says))
	}
	// The chart on another host got no credentials without
	// passCredentials, and got them with it.
	total, authed := elsewhere.Requests("/demo-1.0.0.tgz")
	if total < 2 || authed != 1 {
		t.Fatalf("chart on the other host: %d requests, %d with credentials; want the passCredentials one only", total, authed)
	}
	for _, c := range []*sourcev1.HelmChart{charts["good"], charts["passed-creds"], charts["tls"]} {
		if !conditions.IsReady(c) {
			t.Fatalf("%s should stay Ready beside the bad inputs", c.Name)
		}
	}
}

// TestMaterializeRebuildsHelmCharts lets an engine build HelmChart
// artifacts pulled over HTTP (with credentials), pulled from an OCI
// repository, and packaged from Git with values files; empties its
// store; then installs releases with chartRef to them. Each chart comes
// back byte for byte the one status names, as a standby rebuilds it, and
// no reconciler rewrote their status.
func TestMaterializeRebuildsHelmCharts(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	repo := helmRepo(t, testenv.HelmRepoOptions{Username: "u", Password: "p"}, demoChart("1.0.0"))
	reg := chartRegistry(t, demoChart("1.0.0"))
	chartFiles := prefixed("charts/demo/", demoChart("1.0.0"))
	chartFiles["env/prod.yaml"] = "color: teal\n"
	_, gr := gitSource(t, ns, "platform", chartFiles)
	e := startEngine(t, engine.Options{})
	httpRepo := withAuth(helmRepository(ns, "http", repo.URL()))
	ociRepo := helmRepository(ns, "oci", "oci://"+reg.Host()+"/charts")
	ociRepo.Spec.Type, ociRepo.Spec.Insecure = sourcev1.HelmRepositoryTypeOCI, true
	fromGit := helmChart(ns, "from-git", gr.Name, "charts/demo", "")
	fromGit.Spec.SourceRef.Kind = sourcev1.GitRepositoryKind
	fromGit.Spec.ValuesFiles = []string{"env/prod.yaml"}
	charts := []*sourcev1.HelmChart{helmChart(ns, "from-http", "http", "demo", "1.x"), helmChart(ns, "from-oci", "oci", "demo", "1.x"), fromGit}
	create(t, repoAuth(ns), httpRepo, ociRepo)
	for _, c := range charts {
		create(t, c)
	}
	built := map[string]meta.Artifact{}
	for _, c := range charts {
		waitFor(t, c, readyIs(c, true), "Ready=True")
		built[c.Name] = *c.Status.Artifact.DeepCopy()
	}
	wipeStore(t, e)
	var hrs []*helmv2.HelmRelease
	for _, c := range charts {
		hr := helmRelease(ns, "app-"+c.Name, c.Name)
		hr.Spec.ChartRef.Kind = sourcev1.HelmChartKind
		hrs = append(hrs, hr)
		create(t, hr)
	}
	for _, hr := range hrs {
		waitFor(t, hr, readyIs(hr, true), "Ready=True")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-from-git-settings", Namespace: ns}}
	if !exists(t, cm) || cm.Data["color"] != "teal" {
		t.Errorf("chart packaged from Git: ConfigMap %v, want color teal from the values file", cm.Data)
	}
	for _, c := range charts {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			t.Fatal(err)
		}
		want, got := built[c.Name], c.Status.Artifact
		if got.Digest != want.Digest || !got.LastUpdateTime.Equal(&want.LastUpdateTime) {
			t.Errorf("%s: status changed from %+v to %+v: a reconciler rebuilt it", c.Name, want, *got)
		}
		if d := fileDigest(e, got); d != want.Digest {
			t.Errorf("%s: the store holds %q at %s, want the status digest %s", c.Name, d, got.Path, want.Digest)
		}
	}
}

func repoAuth(ns string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "repo-auth", Namespace: ns},
		Data:       map[string][]byte{"username": []byte("u"), "password": []byte("p")},
	}
}

func withAuth(r *sourcev1.HelmRepository) *sourcev1.HelmRepository {
	r.Spec.SecretRef = &meta.LocalObjectReference{Name: "repo-auth"}
	return r
}
