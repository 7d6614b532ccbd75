package main

import (
	"context"
	"os"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{Scheme: engine.NewScheme()}))
}

// The embedding program installs the CRDs itself and reconciles a
// GitRepository and a Kustomization into a ConfigMap.
func TestEmbeddedEngineAppliesFromGit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	repo, err := srv.Repo("app.git")
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	if _, err := repo.Commit("main", map[string]string{
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: embedded, namespace: " + ns + "}\n",
	}, "app"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, cp.Config, t.TempDir()) }()

	objs := []client.Object{
		&sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
			Spec: sourcev1.GitRepositorySpec{URL: repo.URL(), Interval: metav1.Duration{Duration: time.Hour},
				Reference: &sourcev1.GitRepositoryRef{Branch: "main"}},
		},
		&kustomizev1.Kustomization{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
			Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: "./", Prune: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: "app"}},
		},
	}
	// The CRDs arrive with the engine: retry creation until they exist.
	deadline := time.Now().Add(60 * time.Second)
	for _, o := range objs {
		for {
			err := cp.Client.Create(ctx, o)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("creating %s: %v", o.GetName(), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for {
		var cm corev1.ConfigMap
		if cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "embedded"}, &cm) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the embedded engine never applied the ConfigMap")
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("engine stopped with %v", err)
	}
}
