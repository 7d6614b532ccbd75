package verify

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/sigstore/sigstore/pkg/signature"
)

// FuzzSignedContent feeds what a registry serves as signatures (a bundle,
// a v2 payload and signature) to the checks: none panics, and none
// accepts what the key did not sign.
func FuzzSignedContent(f *testing.F) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	v, err := signature.LoadVerifier(&key.PublicKey, crypto.SHA256)
	if err != nil {
		f.Fatal(err)
	}
	d := digest.FromString("artifact")
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","dsseEnvelope":{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"AA=="}]}}`),
		[]byte(`{"critical":{"image":{"docker-manifest-digest":"`+d.String()+`"},"type":"cosign container image signature"}}`), []byte{0})
	f.Fuzz(func(t *testing.T, bundleJSON, payload, sig []byte) {
		var b sigstoreBundle
		if json.Unmarshal(bundleJSON, &b) == nil {
			_ = bundleVersionAtLeast03(b.MediaType)
			if verifyBundle(b, v, d) == nil {
				t.Fatalf("a bundle the key never signed verified: %s", bundleJSON)
			}
		}
		if verifySimpleSigning(simpleSigning{payload: payload, signature: sig}, v, d) == nil {
			t.Fatalf("a payload the key never signed verified: %q", payload)
		}
	})
}
