package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

// SystemNamespace holds the campaign's sources.
const SystemNamespace = "chaos-system"

// brokenCause is the message of the release broken on purpose.
const brokenCause = "chaos: broken on purpose"

// chaosChart is the campaign's chart at a version: one ConfigMap carrying the
// values, a second one with an invalid name when .Values.bad is set (the
// API server refuses it, so the upgrade fails after Helm stored the
// revision and the release is rolled back), and a render failure when
// .Values.fail is set.
func chaosChart(version string) map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: chaos\nversion: " + version + "\n",
		"values.yaml": "round: 0\n",
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
data:
  round: {{ .Values.round | quote }}
  chart: {{ .Chart.Version | quote }}
`,
		"templates/bad.yaml": `{{- if .Values.bad }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}_Not_A_DNS_Name
data: {}
{{- end }}
{{- if .Values.fail }}{{ fail "` + brokenCause + `" }}{{ end }}
`,
	}
}

// Workload is the campaign's units and what they should be: HelmReleases
// spread over namespaces, Kustomizations of a Git repository, and the
// operations that change them at seeded random.
type Workload struct {
	env *Env
	rnd *rand.Rand
	// Namespaces are the tenant namespaces.
	Namespaces []string
	// releases are the HelmReleases ("namespace/name") and their values;
	// deleted are those uninstalled, bad those set to fail their upgrade.
	releases map[string]*releaseSpec
	// kustomizations ("namespace/name") and the Git tree they read.
	kustomizations []string
	tree           map[string]string
	commits        int
	lastCommit     string
	chartVersion   string
	// Ops counts the operations done by kind.
	Ops map[string]int
	// broken is the HelmRelease broken on purpose ("" for none).
	broken string
}

type releaseSpec struct {
	ns, name string
	round    int
	bad      bool
	deleted  bool
}

// NewWorkload lays out releases HelmReleases and kustomizations
// Kustomizations over namespaces of about ten units each.
func NewWorkload(env *Env, rnd *rand.Rand, releases, kustomizations int, broken bool) *Workload {
	nns := max(1, (releases+kustomizations+9)/10)
	w := &Workload{env: env, rnd: rnd, releases: map[string]*releaseSpec{}, tree: map[string]string{}, chartVersion: "1.0.0", Ops: map[string]int{}}
	for i := range nns {
		w.Namespaces = append(w.Namespaces, fmt.Sprintf("chaos-%d", i))
	}
	for i := range releases {
		ns := w.Namespaces[i%nns]
		name := fmt.Sprintf("app-%d", i)
		w.releases[ns+"/"+name] = &releaseSpec{ns: ns, name: name}
	}
	if broken {
		w.broken = w.Namespaces[0] + "/broken"
		w.releases[w.broken] = &releaseSpec{ns: w.Namespaces[0], name: "broken"}
	}
	for i := range kustomizations {
		ns := w.Namespaces[i%nns]
		key := fmt.Sprintf("%s/ks-%d", ns, i)
		w.kustomizations = append(w.kustomizations, key)
		for j := range 2 {
			w.tree[ksFile(ns, i, j)] = ksConfigMap(ns, i, j, 0)
		}
	}
	return w
}

func ksFile(ns string, i, j int) string { return fmt.Sprintf("ks/%s-%d/cm-%d.yaml", ns, i, j) }

func ksConfigMap(ns string, i, j, rev int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ks-%d-cm-%d\n  namespace: %s\ndata:\n  rev: %q\n", i, j, ns, fmt.Sprint(rev))
}

// badCause is what the message of a release whose upgrade fails names.
const badCause = "_Not_A_DNS_Name"

// Broken names the units that must be Ready=False and the cause their
// message must name: the release broken on purpose, and those set to
// fail their upgrade (rolled back, retries exhausted) and not repaired.
func (w *Workload) Broken() map[string]string {
	out := map[string]string{}
	if w.broken != "" {
		out["HelmRelease "+w.broken] = brokenCause
	}
	for k, r := range w.releases {
		if r.bad && !r.deleted {
			out["HelmRelease "+k] = badCause
		}
	}
	return out
}

// Create pushes the chart and the Git tree and creates every object.
func (w *Workload) Create(ctx context.Context) error {
	e := w.env
	if _, err := e.Reg.PushChart(ctx, "charts/chaos", chaosChart(w.chartVersion)); err != nil {
		return err
	}
	if err := w.commit("the platform"); err != nil {
		return err
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "registry-auth", Namespace: SystemNamespace},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: e.DockerConfigJSON()},
		},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-auth", Namespace: SystemNamespace}, StringData: e.GitAuth()},
		&sourcev1.OCIRepository{
			ObjectMeta: metav1.ObjectMeta{Name: "charts", Namespace: SystemNamespace},
			Spec: sourcev1.OCIRepositorySpec{
				URL: "oci://" + e.RegistryHost() + "/charts/chaos", Insecure: true,
				Interval:      &metav1.Duration{Duration: 10 * time.Second},
				Reference:     &sourcev1.OCIRepositoryRef{SemVer: ">=1.0.0"},
				LayerSelector: &sourcev1.OCILayerSelector{MediaType: testenv.HelmChartMediaType, Operation: sourcev1.OCILayerCopy},
				SecretRef:     &meta.LocalObjectReference{Name: "registry-auth"},
			},
		},
		&sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Name: "platform", Namespace: SystemNamespace},
			Spec: sourcev1.GitRepositorySpec{
				URL: e.GitURL(), Interval: metav1.Duration{Duration: 10 * time.Second},
				Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
				SecretRef: &meta.LocalObjectReference{Name: "git-auth"},
			},
		},
	}
	for _, ns := range w.Namespaces {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for i, key := range w.kustomizations {
		ns, name := splitKey(key)
		objs = append(objs, &kustomizev1.Kustomization{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: kustomizev1.KustomizationSpec{
				Interval: metav1.Duration{Duration: 10 * time.Minute}, Prune: true,
				Path:      fmt.Sprintf("./ks/%s-%d", ns, i),
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: "platform", Namespace: SystemNamespace},
			},
		})
	}
	for _, key := range w.releaseKeys() {
		objs = append(objs, w.helmRelease(w.releases[key]))
	}
	for _, o := range objs {
		if err := e.C.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	return nil
}

func (w *Workload) releaseKeys() []string {
	keys := make([]string, 0, len(w.releases))
	for k := range w.releases {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (w *Workload) helmRelease(r *releaseSpec) *helmv2.HelmRelease {
	hr := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: 10 * time.Minute},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "charts", Namespace: SystemNamespace},
			Upgrade:  &helmv2.Upgrade{Remediation: &helmv2.UpgradeRemediation{Retries: 1}},
		},
	}
	hr.Spec.Values = w.values(r)
	return hr
}

func (w *Workload) values(r *releaseSpec) *apiextensionsv1.JSON {
	v := map[string]any{"round": r.round}
	if r.bad {
		v["bad"] = true
	}
	if r.ns+"/"+r.name == w.broken {
		v["fail"] = true
	}
	b, _ := json.Marshal(v)
	return &apiextensionsv1.JSON{Raw: b}
}

func (w *Workload) commit(msg string) error {
	w.commits++
	sha, err := w.env.Repo.Commit("main", w.tree, fmt.Sprintf("%s (%d)", msg, w.commits))
	if err == nil {
		w.lastCommit = sha
	}
	return err
}

// Step does n operations at random: upgrades (values changes), failing
// upgrades that Helm rolls back, repairs of those, uninstalls,
// reinstalls, and Git commits that change, remove (prune) and restore
// Kustomizations' objects.
func (w *Workload) Step(ctx context.Context, n int) error {
	keys := w.releaseKeys()
	for range n {
		if len(keys) == 0 {
			break
		}
		r := w.releases[keys[w.rnd.IntN(len(keys))]]
		if r.ns+"/"+r.name == w.broken {
			continue
		}
		var err error
		switch p := w.rnd.IntN(100); {
		case r.deleted:
			r.deleted, r.round = false, r.round+1
			err = w.env.C.Create(ctx, w.helmRelease(r))
			if apierrors.IsAlreadyExists(err) {
				// The uninstall has not finished: later.
				r.deleted, r.round, err = true, r.round-1, nil
				continue
			}
			w.Ops["reinstall"]++
		case r.bad:
			r.bad, r.round = false, r.round+1
			err = w.update(ctx, r)
			w.Ops["repair"]++
		case p < 60:
			r.round++
			err = w.update(ctx, r)
			w.Ops["upgrade"]++
		case p < 80:
			r.bad = true
			err = w.update(ctx, r)
			w.Ops["failing upgrade (rollback)"]++
		default:
			r.deleted = true
			err = w.env.C.Delete(ctx, &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns}})
			if apierrors.IsNotFound(err) {
				err = nil
			}
			w.Ops["uninstall"]++
		}
		if err != nil {
			return fmt.Errorf("%s/%s: %w", r.ns, r.name, err)
		}
	}
	if len(w.kustomizations) > 0 && n > 0 {
		for range max(1, n/4) {
			i := w.rnd.IntN(len(w.kustomizations))
			ns, _ := splitKey(w.kustomizations[i])
			j := w.rnd.IntN(2)
			f := ksFile(ns, i, j)
			switch _, ok := w.tree[f]; {
			case !ok:
				w.tree[f] = ksConfigMap(ns, i, j, w.commits)
				w.Ops["kustomization object restored"]++
			case j == 1 && w.rnd.IntN(3) == 0:
				delete(w.tree, f)
				w.Ops["kustomization object removed (prune)"]++
			default:
				w.tree[f] = ksConfigMap(ns, i, j, w.commits)
				w.Ops["kustomization object changed"]++
			}
		}
		if err := w.commit("a change"); err != nil {
			return err
		}
	}
	return nil
}

// Settle repairs every release set to fail, so that the campaign can
// converge: every unit but the one broken on purpose should end Ready.
func (w *Workload) Settle(ctx context.Context) error {
	for _, k := range w.releaseKeys() {
		r := w.releases[k]
		if r.bad && !r.deleted {
			r.bad, r.round = false, r.round+1
			if err := w.update(ctx, r); err != nil {
				return err
			}
			w.Ops["repair"]++
		}
	}
	return nil
}

// PushChart pushes the next minor version of the chart: every release
// upgrades to it.
func (w *Workload) PushChart(ctx context.Context) error {
	var major, minor int
	fmt.Sscanf(w.chartVersion, "%d.%d", &major, &minor)
	w.chartVersion = fmt.Sprintf("%d.%d.0", major, minor+1)
	w.Ops["new chart version"]++
	_, err := w.env.Reg.PushChart(ctx, "charts/chaos", chaosChart(w.chartVersion))
	return err
}

func (w *Workload) update(ctx context.Context, r *releaseSpec) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var hr helmv2.HelmRelease
		if err := w.env.C.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.name}, &hr); err != nil {
			return err
		}
		hr.Spec.Values = w.values(r)
		return w.env.C.Update(ctx, &hr)
	})
}

func splitKey(key string) (string, string) {
	for i := range len(key) {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}
