package engine_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
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

func TestOCIRepositoryStoresArtifact(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{Username: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	manifest, err := reg.PushArtifact(ctx, "manifests/app", "v1", map[string]string{"cm.yaml": "kind: ConfigMap\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	if err := cp.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcreds", Namespace: ns},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{".dockerconfigjson": reg.DockerConfigJSON()},
	}); err != nil {
		t.Fatal(err)
	}
	good := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + reg.Host() + "/manifests/app", Insecure: true,
			Interval:  &metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.OCIRepositoryRef{Tag: "v1"},
			SecretRef: &meta.LocalObjectReference{Name: "regcreds"},
		},
	}
	anon := good.DeepCopy()
	anon.Name = "anonymous"
	anon.Spec.SecretRef = nil
	for _, o := range []*sourcev1.OCIRepository{good, anon} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, good, readyIs(good, true), "Ready=True")
	if want := "v1@" + manifest.Digest.String(); good.Status.Artifact == nil || good.Status.Artifact.Revision != want {
		t.Fatalf("artifact %+v, want revision %s", good.Status.Artifact, want)
	}
	// Outside consumers fetch the artifact from the URL in status.
	resp, err := http.Get(good.Status.Artifact.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || fmt.Sprintf("sha256:%x", sha256.Sum256(body)) != good.Status.Artifact.Digest {
		t.Fatalf("GET %s: %s, digest of body does not match %s", good.Status.Artifact.URL, resp.Status, good.Status.Artifact.Digest)
	}
	waitFor(t, anon, readyIs(anon, false), "Ready=False")
	if msg := conditions.GetMessage(anon, meta.ReadyCondition); !strings.Contains(msg, "OCIRepository/"+ns+"/anonymous") {
		t.Fatalf("message %q should name the object", msg)
	}
}
