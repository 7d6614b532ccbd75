package verify_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cozystack/cozy-aio/internal/signtest"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source/oci"
	"github.com/cozystack/cozy-aio/source/verify"
)

// TestCosignVerifiesKeyedSignatures: a v2 signature and a v3 bundle made
// with a trusted key verify; an unsigned artifact, one signed by another
// key and one carrying the signature of another digest do not.
func TestCosignVerifiesKeyedSignatures(t *testing.T) {
	ctx := context.Background()
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	push := func(tag string) string {
		t.Helper()
		desc, err := reg.PushArtifact(ctx, "app", tag, map[string]string{"cm.yaml": "kind: ConfigMap\nname: " + tag + "\n"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return reg.Host() + "/app@" + desc.Digest.String()
	}
	trusted, other := signtest.NewCosignKey(t), signtest.NewCosignKey(t)
	v2, v3, unsigned, byOther, forged := push("v2"), push("v3"), push("unsigned"), push("other"), push("forged")
	trusted.Sign(t, v2, false)
	trusted.Sign(t, v3, true)
	other.Sign(t, byOther, false)
	// The v2 signature of one digest, copied to the signature tag of another.
	sigOf := func(ref string) string {
		return reg.Host() + "/app:" + strings.Replace(ref[strings.Index(ref, "@")+1:], ":", "-", 1) + ".sig"
	}
	src, err := name.ParseReference(sigOf(v2), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(src)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := name.ParseReference(sigOf(forged), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(dst, img); err != nil {
		t.Fatal(err)
	}

	r := oci.Registry{PlainHTTP: true}
	keys := [][]byte{other.Public, trusted.Public}
	for _, ref := range []string{v2, v3} {
		if err := verify.Cosign(ctx, ref, keys, r); err != nil {
			t.Errorf("%s, signed with a trusted key: %v", ref, err)
		}
	}
	for what, ref := range map[string]string{"unsigned": unsigned, "signed by another key": byOther, "signature of another digest": forged} {
		err := verify.Cosign(ctx, ref, [][]byte{trusted.Public}, r)
		if !errors.Is(err, verify.ErrNoMatchingSignature) || !strings.Contains(err.Error(), "'"+ref+"'") {
			t.Errorf("%s: %v, want %v naming %s", what, err, verify.ErrNoMatchingSignature, ref)
		}
	}
	if err := verify.Cosign(ctx, v2, [][]byte{[]byte("not a key")}, r); err == nil || errors.Is(err, verify.ErrNoMatchingSignature) {
		t.Errorf("a Secret value that is no public key: %v, want an error of its own", err)
	}
}
