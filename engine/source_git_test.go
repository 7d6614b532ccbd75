package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

func TestGitRepositoryStoresArtifact(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	srv, err := testenv.StartGitServer(testenv.GitOptions{Username: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	repo, err := srv.Repo("platform.git")
	if err != nil {
		t.Fatal(err)
	}
	sha, err := repo.Commit("main", map[string]string{"cm.yaml": "kind: ConfigMap\n"}, "one")
	if err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})

	if err := cp.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
		StringData: map[string]string{"username": "u", "password": "p"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "wrong", Namespace: ns},
		StringData: map[string]string{"username": "u", "password": "nope"},
	}); err != nil {
		t.Fatal(err)
	}
	good := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: ns},
		Spec: sourcev1.GitRepositorySpec{
			URL: repo.URL(), Interval: metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
			SecretRef: &meta.LocalObjectReference{Name: "creds"},
		},
	}
	bad := good.DeepCopy()
	bad.Name = "bad"
	bad.Spec.SecretRef.Name = "wrong"
	unsupported := good.DeepCopy()
	unsupported.Name = "submodules"
	unsupported.Spec.RecurseSubmodules = true
	for _, o := range []*sourcev1.GitRepository{good, bad, unsupported} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	waitFor(t, good, readyIs(good, true), "Ready=True")
	if a := good.Status.Artifact; a == nil || a.Revision != "main@sha1:"+sha || !strings.HasPrefix(a.Digest, "sha256:") {
		t.Fatalf("artifact = %+v, want revision main@sha1:%s", a, sha)
	}
	if good.Status.ObservedGeneration != good.Generation {
		t.Fatalf("observedGeneration %d, generation %d", good.Status.ObservedGeneration, good.Generation)
	}

	waitFor(t, bad, readyIs(bad, false), "Ready=False")
	if msg := conditions.GetMessage(bad, meta.ReadyCondition); !strings.Contains(msg, "GitRepository/"+ns+"/bad") || !strings.Contains(strings.ToLower(msg), "auth") {
		t.Fatalf("wrong credentials: message %q should name the object and the auth failure", msg)
	}

	waitFor(t, unsupported, readyIs(unsupported, false), "Ready=False")
	if r := conditions.GetReason(unsupported, meta.ReadyCondition); r != engine.UnsupportedFieldReason ||
		!strings.Contains(conditions.GetMessage(unsupported, meta.ReadyCondition), "spec.recurseSubmodules") {
		t.Fatalf("unsupported field: reason %q message %q", r, conditions.GetMessage(unsupported, meta.ReadyCondition))
	}
	if !conditions.IsStalled(unsupported) {
		t.Fatal("an unsupported field stalls the object")
	}
}
