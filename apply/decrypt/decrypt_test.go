package decrypt_test

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getsops/sops/v3/cmd/sops/formats"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/apply/decrypt"
	"github.com/cozystack/cozy-aio/internal/sopstest"
)

const secretYAML = `apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: apps
stringData:
  password: hunter2-cleartext
`

func encYAML(t testing.TB, plain string, recipients ...string) []byte {
	t.Helper()
	return sopstest.Encrypt(t, []byte(plain), sopstest.Options{Format: formats.Yaml, Recipients: recipients,
		EncryptedRegex: "^(data|stringData)$"})
}

func object(t *testing.T, data []byte) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func newDecryptor(t *testing.T, data map[string][]byte) *decrypt.Decryptor {
	t.Helper()
	d, err := decrypt.New(data, decrypt.Options{Secret: "Secret/ns/sops-age"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestObjectDecryptsAnyKindWithSOPSMetadata(t *testing.T) {
	id := sopstest.NewIdentity(t)
	d := newDecryptor(t, map[string][]byte{"age.agekey": []byte(id.Secret), "other": []byte("ignored")})
	for _, tc := range []struct{ name, plain, path, want string }{
		{"Secret", secretYAML, "stringData.password", "hunter2-cleartext"},
		{"ConfigMap", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata:\n  port: \"8080\"\n", "data.port", "8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := encYAML(t, tc.plain, id.Recipient)
			if strings.Contains(string(enc), tc.want) {
				t.Fatal("the fixture is not encrypted")
			}
			obj := object(t, enc)
			if !decrypt.Encrypted(obj) {
				t.Fatal("Encrypted = false for a SOPS document")
			}
			changed, err := d.Object(obj)
			if err != nil || !changed {
				t.Fatalf("Object = %v, %v", changed, err)
			}
			got, _, _ := unstructured.NestedString(obj.Object, strings.Split(tc.path, ".")...)
			if got != tc.want {
				t.Errorf("%s = %q, want %q", tc.path, got, tc.want)
			}
			if _, found := obj.Object["sops"]; found {
				t.Error("the sops metadata is still there")
			}
			if obj.GetName() == "" || obj.GetKind() != tc.name {
				t.Errorf("metadata lost: %v", obj.Object)
			}
		})
	}
}

func TestObjectDecryptsSecretDataValues(t *testing.T) {
	id := sopstest.NewIdentity(t)
	d := newDecryptor(t, map[string][]byte{"keys.agekey": []byte("# a comment\n" + id.Secret + "\n")})
	env := sopstest.Encrypt(t, []byte("USER=admin\nPASS=s3cret\n"), sopstest.Options{Format: formats.Dotenv, Recipients: []string{id.Recipient}})
	bin := sopstest.Encrypt(t, []byte("raw bytes\n"), sopstest.Options{Format: formats.Binary, Recipients: []string{id.Recipient}})
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "gen"},
		"data": map[string]any{
			"app.env":  base64.StdEncoding.EncodeToString(env),
			"file.txt": base64.StdEncoding.EncodeToString(bin),
			"plain":    base64.StdEncoding.EncodeToString([]byte("as is")),
		},
	}}
	changed, err := d.Object(obj)
	if err != nil || !changed {
		t.Fatalf("Object = %v, %v", changed, err)
	}
	data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
	for key, want := range map[string]string{"app.env": "USER=admin\nPASS=s3cret\n", "file.txt": "raw bytes\n", "plain": "as is"} {
		got, _ := base64.StdEncoding.DecodeString(data[key])
		if string(got) != want {
			t.Errorf("data[%s] = %q, want %q", key, got, want)
		}
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"},
		"data": map[string]any{"a": base64.StdEncoding.EncodeToString(env)}}}
	if changed, err := d.Object(cm); changed || err != nil {
		t.Errorf("a ConfigMap without sops metadata: Object = %v, %v", changed, err)
	}
}

// TestObjectForAnotherKey checks the error of a document no identity
// opens: it says no key matched, names the object and the recipient, and
// holds neither ciphertext nor cleartext.
func TestObjectForAnotherKey(t *testing.T) {
	mine, theirs := sopstest.NewIdentity(t), sopstest.NewIdentity(t)
	for _, tc := range []struct {
		name string
		data map[string][]byte
		says string
	}{
		{"other key", map[string][]byte{"age.agekey": []byte(mine.Secret)}, theirs.Recipient},
		{"no age entry", map[string][]byte{"identity.asc": []byte("-----BEGIN PGP PRIVATE KEY BLOCK-----")}, `"identity.asc" (pgp)`},
		{"no secret", nil, "holds no .agekey entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecryptor(t, tc.data)
			enc := encYAML(t, secretYAML, theirs.Recipient)
			_, err := d.Object(object(t, enc))
			if !errors.Is(err, decrypt.ErrNoKeyMatched) {
				t.Fatalf("err = %v, want ErrNoKeyMatched", err)
			}
			msg := err.Error()
			for _, want := range []string{"Secret/apps/creds", "no age key", tc.says} {
				if !strings.Contains(msg, want) {
					t.Errorf("%q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, "ENC[") || strings.Contains(msg, "hunter2") || strings.Contains(msg, "AGE-SECRET-KEY") {
				t.Errorf("the error leaks: %s", msg)
			}
		})
	}
}

// TestUnsupportedKeyTypes checks that a document only PGP or cloud KMS keys
// open is an UnsupportedKeyError naming the key types.
func TestUnsupportedKeyTypes(t *testing.T) {
	id := sopstest.NewIdentity(t)
	d := newDecryptor(t, map[string][]byte{"age.agekey": []byte(id.Secret)})
	doc := `apiVersion: v1
kind: Secret
metadata: {name: pgp-only}
stringData:
  password: ENC[AES256_GCM,data:c2VjcmV0,iv:aXY=,tag:dGFn,type:str]
sops:
  pgp:
    - created_at: "2024-01-01T00:00:00Z"
      enc: opaque
      fp: 0123456789ABCDEF
  kms:
    - arn: arn:aws:kms:eu-west-1:1:key/x
      created_at: "2024-01-01T00:00:00Z"
      enc: opaque
  lastmodified: "2024-01-01T00:00:00Z"
  mac: ENC[AES256_GCM,data:bWFj,iv:aXY=,tag:dGFn,type:str]
  encrypted_regex: ^(data|stringData)$
  version: 3.9.0
`
	_, err := d.Object(object(t, []byte(doc)))
	var uk *decrypt.UnsupportedKeyError
	if !errors.As(err, &uk) {
		t.Fatalf("err = %v, want *UnsupportedKeyError", err)
	}
	if strings.Join(uk.Types, ",") != "kms,pgp" || !strings.Contains(err.Error(), "Secret/pgp-only") {
		t.Errorf("err = %v (types %v)", err, uk.Types)
	}
}

// TestSourcesThenBuild decrypts the secretGenerator files and envs and a
// patch file of a kustomization and of a base it refers to, then builds
// it, as kustomize-controller orders the two.
func TestSourcesThenBuild(t *testing.T) {
	id := sopstest.NewIdentity(t)
	d := newDecryptor(t, map[string][]byte{"age.agekey": []byte(id.Secret)})
	root := t.TempDir()
	enc := func(f formats.Format, plain string) string {
		return string(sopstest.Encrypt(t, []byte(plain), sopstest.Options{Format: f, Recipients: []string{id.Recipient}}))
	}
	files := map[string]string{
		"app/kustomization.yaml": `resources: [../base]
secretGenerator:
  - name: gen
    envs: [app.env]
    files: [settings.yaml, conf=token.txt]
patches:
  - path: patch.yaml
`,
		"app/app.env":       enc(formats.Dotenv, "USER=admin\n"),
		"app/token.txt":     enc(formats.Binary, "t0ken"),
		"app/settings.yaml": enc(formats.Yaml, "level: debug\n"),
		"app/patch.yaml": enc(formats.Yaml, `apiVersion: v1
kind: ConfigMap
metadata: {name: base}
data: {patched: "yes"}
`),
		"base/kustomization.yaml": "resources: [cm.yaml]\nsecretGenerator:\n  - name: base-gen\n    envs: [base.env]\n",
		"base/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base}\ndata: {a: b}\n",
		"base/base.env":           enc(formats.Dotenv, "FROM=base\n"),
	}
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Sources(root, "app"); err != nil {
		t.Fatal(err)
	}
	objs, err := apply.Build(context.Background(), filepath.Join(root, "app"), apply.BuildOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, o := range objs {
		data, _, _ := unstructured.NestedMap(o.Object, "data")
		name := o.GetName()
		if o.GetKind() == "Secret" { // drop the generator's hash suffix
			name = name[:strings.LastIndex(name, "-")]
		}
		got[o.GetKind()+"/"+name] = data
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	want := map[string]map[string]any{
		"Secret/gen":      {"USER": b64("admin"), "conf": b64("t0ken"), "settings.yaml": b64("level: debug\n")},
		"Secret/base-gen": {"FROM": b64("base")},
		"ConfigMap/base":  {"a": "b", "patched": "yes"},
	}
	for k, w := range want {
		for field, v := range w {
			if got[k][field] != v {
				t.Errorf("%s data[%s] = %v, want %v (all: %v)", k, field, got[k][field], v, got)
			}
		}
	}
}

func TestSourcesForAnotherKeyNamesTheFile(t *testing.T) {
	mine, theirs := sopstest.NewIdentity(t), sopstest.NewIdentity(t)
	d := newDecryptor(t, map[string][]byte{"age.agekey": []byte(mine.Secret)})
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := sopstest.Encrypt(t, []byte("PASS=cleartext\n"), sopstest.Options{Format: formats.Dotenv, Recipients: []string{theirs.Recipient}})
	for p, c := range map[string]string{
		"app/kustomization.yaml": "secretGenerator:\n  - name: gen\n    envs: [creds.env]\n",
		"app/creds.env":          string(env),
	} {
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := d.Sources(root, "./app")
	if !errors.Is(err, decrypt.ErrNoKeyMatched) || !strings.Contains(err.Error(), "app/creds.env") {
		t.Fatalf("err = %v, want ErrNoKeyMatched naming app/creds.env", err)
	}
	if strings.Contains(err.Error(), "ENC[") || strings.Contains(err.Error(), "cleartext") {
		t.Errorf("the error leaks: %v", err)
	}
}
