package verify

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
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

// FuzzTamperedSignature signs fuzzed content with a key made once, as
// cosign signs an artifact: a v2 simple-signing payload naming the
// content's digest, and a v3 bundle whose DSSE envelope holds an in-toto
// statement about it. Each signature verifies; each stops verifying when
// one byte (at a fuzzed index, changed by a fuzzed mask) of the signed
// payload, of the signature or of the content changes; and a bundle
// whose served JSON has one byte changed verifies only if it still
// decodes to the envelope that was signed. note lands inside the signed
// JSON, so that a change there leaves it valid and only the signature
// check can catch it.
func FuzzTamperedSignature(f *testing.F) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	sv, err := signature.LoadECDSASignerVerifier(key, crypto.SHA256)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []struct{ content, note string }{
		{`{"schemaVersion":2}`, "app"},
		{"", "release v1.2.3"},
		{"x", `"quoted" \ note`},
	} {
		d := digest.FromString(s.content)
		// One seed changes the first byte of the note in the v2 payload,
		// one in the statement: both stay valid JSON.
		quoted, err := json.Marshal(s.note)
		if err != nil {
			f.Fatal(err)
		}
		for _, signed := range [][]byte{simpleSigningPayload(f, d, s.note), inTotoStatement(f, d, s.note)} {
			f.Add([]byte(s.content), s.note, uint(bytes.Index(signed, quoted)+1), byte(1))
		}
		f.Add([]byte(s.content), s.note, uint(0), byte(0x80))
	}
	f.Fuzz(func(t *testing.T, content []byte, note string, at uint, mask byte) {
		if mask == 0 {
			mask = 1
		}
		d := digest.FromBytes(content)
		other := digest.FromBytes(flip(content, at, mask))
		if len(content) == 0 {
			other = digest.FromBytes([]byte{mask})
		}

		p := simpleSigningPayload(t, d, note)
		sig := sign(t, sv, p)
		if err := verifySimpleSigning(simpleSigning{payload: p, signature: sig}, sv, d); err != nil {
			t.Fatalf("a v2 signature made with the key does not verify: %v", err)
		}
		for what, s := range map[string]simpleSigning{
			"payload":   {payload: flip(p, at, mask), signature: sig},
			"signature": {payload: p, signature: flip(sig, at, mask)},
		} {
			if verifySimpleSigning(s, sv, d) == nil {
				t.Fatalf("a v2 signature verified with a byte of its %s changed", what)
			}
		}
		if verifySimpleSigning(simpleSigning{payload: p, signature: sig}, sv, other) == nil {
			t.Fatalf("the v2 signature of %s verified for %s", d, other)
		}

		served := signedBundle(t, sv, inTotoStatement(t, d, note))
		b := decodeBundle(t, served)
		if err := verifyBundle(b, sv, d); err != nil {
			t.Fatalf("a bundle signed with the key does not verify: %v", err)
		}
		tampered := decodeBundle(t, served)
		tampered.DSSEEnvelope.Payload = flip(tampered.DSSEEnvelope.Payload, at, mask)
		if verifyBundle(tampered, sv, d) == nil {
			t.Fatal("a bundle verified with a byte of its statement changed")
		}
		tampered = decodeBundle(t, served)
		tampered.DSSEEnvelope.Signatures[0].Sig = flip(tampered.DSSEEnvelope.Signatures[0].Sig, at, mask)
		if verifyBundle(tampered, sv, d) == nil {
			t.Fatal("a bundle verified with a byte of its signature changed")
		}
		if verifyBundle(b, sv, other) == nil {
			t.Fatalf("the bundle of %s verified for %s", d, other)
		}
		var changed sigstoreBundle
		if json.Unmarshal(flip(served, at, mask), &changed) == nil && verifyBundle(changed, sv, d) == nil && !sameEnvelope(b, changed) {
			t.Fatalf("a bundle with byte %d changed verified, and it says something else: %s", int(at%uint(len(served))), flip(served, at, mask))
		}
	})
}

// flip returns a copy of b with the byte at at (modulo its length) XORed
// with mask; an empty b stays empty.
func flip(b []byte, at uint, mask byte) []byte {
	out := slices.Clone(b)
	if len(out) > 0 {
		out[at%uint(len(out))] ^= mask
	}
	return out
}

func sign(t testing.TB, s signature.Signer, message []byte) []byte {
	t.Helper()
	sig, err := s.SignMessage(bytes.NewReader(message))
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// simpleSigningPayload is what cosign v2 signs for an image of digest d.
func simpleSigningPayload(t testing.TB, d digest.Digest, note string) []byte {
	t.Helper()
	raw, err := json.Marshal(payload.SimpleContainerImage{
		Critical: payload.Critical{
			Identity: payload.Identity{DockerReference: "registry.example/app"},
			Image:    payload.Image{DockerManifestDigest: d.String()},
			Type:     payload.CosignSignatureType,
		},
		Optional: map[string]any{"note": note},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// inTotoStatement is what cosign v3 signs for an image of digest d.
func inTotoStatement(t testing.TB, d digest.Digest, note string) []byte {
	t.Helper()
	raw, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": note, "digest": map[string]string{d.Algorithm().String(): d.Encoded()}}},
		"predicateType": "https://sigstore.dev/cosign/sign/v1",
		"predicate":     map[string]any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// signedBundle is the JSON of a v0.3 bundle whose DSSE envelope s signed
// over statement's pre-authentication encoding, as cosign v3 attaches it.
func signedBundle(t testing.TB, s signature.Signer, statement []byte) []byte {
	t.Helper()
	const payloadType = "application/vnd.in-toto+json"
	pae := fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(payloadType), payloadType, len(statement), statement)
	raw, err := json.Marshal(map[string]any{
		"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
		"dsseEnvelope": map[string]any{
			"payload": statement, "payloadType": payloadType,
			"signatures": []any{map[string]any{"sig": sign(t, s, pae)}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func decodeBundle(t testing.TB, raw []byte) sigstoreBundle {
	t.Helper()
	var b sigstoreBundle
	if err := json.Unmarshal(raw, &b); err != nil || b.DSSEEnvelope == nil || len(b.DSSEEnvelope.Signatures) != 1 {
		t.Fatalf("decoding the bundle: %v: %s", err, raw)
	}
	return b
}

// sameEnvelope reports whether a and b hold the same signed envelope.
func sameEnvelope(a, b sigstoreBundle) bool {
	if b.DSSEEnvelope == nil || a.DSSEEnvelope.PayloadType != b.DSSEEnvelope.PayloadType ||
		!bytes.Equal(a.DSSEEnvelope.Payload, b.DSSEEnvelope.Payload) {
		return false
	}
	for _, s := range b.DSSEEnvelope.Signatures {
		if !bytes.Equal(s.Sig, a.DSSEEnvelope.Signatures[0].Sig) {
			return false
		}
	}
	return true
}
