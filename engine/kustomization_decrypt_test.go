package engine_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/getsops/sops/v3/cmd/sops/formats"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/sopstest"
)

const (
	// cleartexts that must reach the cluster's Secrets and nothing else.
	sopsPassword = "pw-cleartext-4711"
	sopsEnvValue = "env-cleartext-0815"
)

// sopsFiles returns a source whose app/ the identity id opens and whose
// other/ only another key opens, and pgp/ only a PGP key.
func sopsFiles(t *testing.T, ns string, id, other sopstest.Identity) map[string]string {
	secret := func(name, password string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
			"\nstringData:\n  password: " + password + "\n  greeting: ${greeting}\n"
	}
	enc := func(plain string, f formats.Format, to sopstest.Identity) string {
		return string(sopstest.Encrypt(t, []byte(plain), sopstest.Options{Format: f, Recipients: []string{to.Recipient},
			EncryptedRegex: "^(data|stringData)$"}))
	}
	return map[string]string{
		"app/kustomization.yaml": "namespace: " + ns + "\nresources: [secret.yaml, settings.json]\nsecretGenerator:\n  - name: env\n    envs: [creds.env]\n" +
			"generatorOptions: {disableNameSuffixHash: true}\n",
		"app/secret.yaml": enc(secret("creds", sopsPassword), formats.Yaml, id),
		// Flux decrypts any kind with sops metadata, in JSON too.
		"app/settings.json": enc(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "`+ns+
			`"}, "data": {"level": "debug"}}`, formats.Json, id),
		"app/creds.env":     enc("TOKEN="+sopsEnvValue+"\n", formats.Dotenv, id),
		"other/secret.yaml": enc(secret("other", sopsPassword), formats.Yaml, other),
		"pgp/secret.yaml": `apiVersion: v1
kind: Secret
metadata: {name: pgp, namespace: ` + ns + `}
stringData:
  password: ENC[AES256_GCM,data:c2VjcmV0,iv:aXY=,tag:dGFn,type:str]
sops:
  pgp:
    - created_at: "2024-01-01T00:00:00Z"
      enc: opaque
      fp: 0123456789ABCDEF
  lastmodified: "2024-01-01T00:00:00Z"
  mac: ENC[AES256_GCM,data:bWFj,iv:aXY=,tag:dGFn,type:str]
  encrypted_regex: ^(data|stringData)$
  version: 3.9.0
`,
	}
}

// TestKustomizationDecryptsSOPSWithAge applies SOPS-encrypted manifests
// and a secretGenerator env file with the age key of the decryption
// Secret, substitutes after decrypting (Flux's order), and checks that a
// document for another key, or only for PGP, fails with a message naming
// the file and never holding a cleartext or ciphertext, in the status or
// in any Event, and that no cleartext reaches the engine's data dir.
func TestKustomizationDecryptsSOPSWithAge(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	id, other := sopstest.NewIdentity(t), sopstest.NewIdentity(t)
	gitSource(t, ns, "sops", sopsFiles(t, ns, id, other))
	dataDir := t.TempDir()
	startEngine(t, engine.Options{DataDir: dataDir})
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sops-age", Namespace: ns},
		Data: map[string][]byte{"age.agekey": []byte(id.Secret)}}
	if err := cp.Client.Create(ctx, keys); err != nil {
		t.Fatal(err)
	}
	dec := &kustomizev1.Decryption{Provider: "sops", SecretRef: &meta.LocalObjectReference{Name: "sops-age"}}
	app := kustomization(ns, "app", "sops", "./app")
	app.Spec.Decryption = dec
	app.Spec.PostBuild = &kustomizev1.PostBuild{Substitute: map[string]string{"greeting": "hello"}}
	wrong := kustomization(ns, "wrong-key", "sops", "./other")
	wrong.Spec.Decryption = dec
	pgp := kustomization(ns, "pgp", "sops", "./pgp")
	pgp.Spec.Decryption = dec
	for _, k := range []*kustomizev1.Kustomization{app, wrong, pgp} {
		if err := cp.Client.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, app, readyIs(app, true), "Ready=True")
	creds := &corev1.Secret{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "creds"}, creds); err != nil {
		t.Fatal(err)
	}
	if string(creds.Data["password"]) != sopsPassword || string(creds.Data["greeting"]) != "hello" {
		t.Errorf("creds = %q, want the decrypted password and the substituted greeting", creds.Data)
	}
	env := &corev1.Secret{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "env"}, env); err != nil {
		t.Fatal(err)
	}
	if string(env.Data["TOKEN"]) != sopsEnvValue {
		t.Errorf("env = %q, want the decrypted env file", env.Data)
	}
	cm := &corev1.ConfigMap{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["level"] != "debug" {
		t.Errorf("settings = %q, want the decrypted JSON ConfigMap", cm.Data)
	}

	waitFor(t, wrong, func() bool {
		return readyIs(wrong, false)() && conditions.GetReason(wrong, meta.ReadyCondition) == meta.BuildFailedReason
	}, "Ready=False BuildFailed")
	msg := conditions.GetMessage(wrong, meta.ReadyCondition)
	for _, want := range []string{"Kustomization/" + ns + "/wrong-key", "other/secret.yaml", "no age key", other.Recipient} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message %q does not say %q", msg, want)
		}
	}
	waitFor(t, pgp, func() bool {
		return conditions.GetReason(pgp, meta.ReadyCondition) == engine.UnsupportedFieldReason
	}, "Ready=False UnsupportedField")
	if msg := conditions.GetMessage(pgp, meta.ReadyCondition); !strings.Contains(msg, "pgp") || !strings.Contains(msg, "pgp/secret.yaml") ||
		!conditions.IsStalled(pgp) {
		t.Errorf("pgp: %q, stalled %v: want UnsupportedField naming the key type and the file", msg, conditions.IsStalled(pgp))
	}
	if exists(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}) {
		t.Error("the Secret for another key was applied")
	}

	// No cleartext, ciphertext or private key in any status or Event.
	leaks := []string{sopsPassword, sopsEnvValue, "ENC[", id.Secret}
	var events eventsv1.EventList
	if err := cp.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Fatal("no Events recorded")
	}
	texts := []string{conditions.GetMessage(app, meta.ReadyCondition), msg, conditions.GetMessage(pgp, meta.ReadyCondition)}
	for _, e := range events.Items {
		texts = append(texts, e.Note)
	}
	for _, text := range texts {
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%q leaks %q", text, leak)
			}
		}
	}
	// Nor in the engine's data dir (the artifact store).
	_ = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, leak := range []string{sopsPassword, sopsEnvValue} {
			if bytes.Contains(data, []byte(leak)) {
				t.Errorf("%s holds a cleartext", p)
			}
		}
		return nil
	})
}
