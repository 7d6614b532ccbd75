package helm_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source/oci"
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

var (
	cp  *testenv.ControlPlane
	reg *testenv.Registry
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	var err error
	reg, err = testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer reg.Close()
	ctx := context.Background()
	for _, name := range []string{"demo", "broken", "schema", "hook", "crds", "seaweedfs", "lookup", "risks"} {
		if _, err := reg.PushChart(ctx, "charts/"+name, chartFiles(name, nil)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	// SeaweedFS 4.31.0 names its workloads after the release.
	if _, err := reg.PushChart(ctx, "charts/seaweedfs", seaweedV2()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return testenv.Run(m, &cp, testenv.ControlPlaneOptions{})
}

// chartFiles reads testdata/<name> as path → content, with edits applied.
func chartFiles(name string, edit map[string]string) map[string]string {
	dir := filepath.Join("testdata", name)
	files := map[string]string{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	for k, v := range edit {
		files[k] = v
	}
	return files
}

// chartTgz writes testdata/<name> as a chart archive and returns its path.
func chartTgz(t testing.TB, name string) string {
	t.Helper()
	b, err := testenv.TarGz(chartFiles(name, nil), name+"/")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name+".tgz")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func ociChart(name string) helm.Chart {
	return helm.Chart{Ref: "oci://" + reg.Host() + "/charts/" + name, Version: "0.1.0", Registry: oci.Registry{PlainHTTP: true}}
}

func newManager(t testing.TB, opts helm.Options) *helm.Manager {
	t.Helper()
	m, err := helm.New(cp.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func configMapMessage(t testing.TB, ns, name string) (string, bool) {
	t.Helper()
	var cm corev1.ConfigMap
	err := cp.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &cm)
	if err != nil {
		if client.IgnoreNotFound(err) == nil {
			return "", false
		}
		t.Fatal(err)
	}
	return cm.Data["message"], true
}

// releaseSecrets returns the Helm release Secrets of name by revision.
func releaseSecrets(t testing.TB, ns, name string) map[string]corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	if err := cp.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Secret{}
	for _, s := range list.Items {
		out[s.Labels["version"]] = s
	}
	return out
}

func values(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func mustContain(t testing.TB, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got nil", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not contain %q", err, s)
		}
	}
}

type appsDeployment struct{ appsv1.Deployment }

type appsCondition = appsv1.DeploymentCondition
