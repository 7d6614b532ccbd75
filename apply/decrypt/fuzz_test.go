package decrypt_test

import (
	"encoding/base64"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/apply/decrypt"
	"github.com/cozystack/cozy-aio/internal/sopstest"
)

// FuzzObject feeds arbitrary documents to Object, as a whole object with
// sops metadata and as a Secret data value: it may fail, never panic, and
// its errors never quote the input's values.
func FuzzObject(f *testing.F) {
	id := sopstest.NewIdentity(f)
	f.Add(string(encYAML(f, secretYAML, id.Recipient)))
	f.Add("sops:\n  mac: ENC[x]\n  age: [{recipient: age1, enc: x}]\n")
	f.Add("mac: ENC[AES256_GCM,data:x]\nsops_mac=ENC[")
	d, err := decrypt.New(map[string][]byte{"age.agekey": []byte(id.Secret)}, decrypt.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		obj := &unstructured.Unstructured{}
		if yaml.Unmarshal([]byte(doc), &obj.Object) == nil && obj.Object != nil {
			_, _ = d.Object(obj)
		}
		secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "s"}, "data": map[string]any{"f.yaml": base64.StdEncoding.EncodeToString([]byte(doc))}}}
		_, _ = d.Object(secret)
	})
}
