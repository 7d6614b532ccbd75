package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

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

	// The v3 bundle of one digest, attached as a referrer of another.
	forgedBundle := push("forged-bundle")
	moveReferrer(t, reg, v3, forgedBundle)

	r := oci.Registry{PlainHTTP: true}
	keys := [][]byte{other.Public, trusted.Public}
	for _, ref := range []string{v2, v3} {
		if err := verify.Cosign(ctx, ref, keys, r); err != nil {
			t.Errorf("%s, signed with a trusted key: %v", ref, err)
		}
	}
	for what, ref := range map[string]string{"unsigned": unsigned, "signed by another key": byOther, "signature of another digest": forged, "bundle of another digest": forgedBundle} {
		err := verify.Cosign(ctx, ref, [][]byte{trusted.Public}, r)
		if !errors.Is(err, verify.ErrNoMatchingSignature) || !strings.Contains(err.Error(), "'"+ref+"'") {
			t.Errorf("%s: %v, want %v naming %s", what, err, verify.ErrNoMatchingSignature, ref)
		}
	}
	if err := verify.Cosign(ctx, v2, [][]byte{[]byte("not a key")}, r); err == nil || errors.Is(err, verify.ErrNoMatchingSignature) {
		t.Errorf("a Secret value that is no public key: %v, want an error of its own", err)
	}
}

// moveReferrer attaches a copy of from's referrer (its cosign bundle) to
// to: a bundle whose statement is about another digest.
func moveReferrer(t *testing.T, reg *testenv.Registry, from, to string) {
	t.Helper()
	ctx := context.Background()
	repo, err := reg.Repository("app")
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(ref string) ocispec.Descriptor {
		d, err := repo.Resolve(ctx, ref[strings.Index(ref, "@")+1:])
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var refs []ocispec.Descriptor
	if err := repo.Referrers(ctx, resolve(from), "", func(r []ocispec.Descriptor) error { refs = append(refs, r...); return nil }); err != nil || len(refs) != 1 {
		t.Fatalf("referrers of %s: %v %v", from, refs, err)
	}
	raw, err := content.FetchAll(ctx, repo, refs[0])
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	subject := resolve(to)
	m.Subject = &subject
	raw, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Push(ctx, content.NewDescriptorFromBytes(m.MediaType, raw), bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
}
