package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/signtest"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// TestOCIRepositoryVerifiesCosignSignatures: with spec.verify, only an
// artifact signed by a key of the Secret becomes the artifact, with
// source-controller's SourceVerified condition and fingerprint; an
// unsigned one, one signed by another key and one carrying the signature
// of another digest are Ready=False, SourceVerified=False, and the
// Kustomization built from one applies nothing. A rotated key verifies the
// unchanged revision again.
func TestOCIRepositoryVerifiesCosignSignatures(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{Username: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	trusted, other := signtest.NewCosignKey(t), signtest.NewCosignKey(t)
	push := func(repo string) string {
		t.Helper()
		cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + repo + "\n  namespace: " + ns + "\n"
		desc, err := reg.PushArtifact(ctx, repo, "v1", map[string]string{"cm.yaml": cm}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return reg.Host() + "/" + repo + "@" + desc.Digest.String()
	}
	signed, bundled, unsigned, byOther, forged := push("signed"), push("bundled"), push("unsigned"), push("other"), push("forged")
	trusted.Sign(t, signed, false, "u", "p")
	trusted.Sign(t, bundled, true, "u", "p")
	other.Sign(t, byOther, false, "u", "p")
	// forged carries the signature made for signed: the v2 signature
	// manifest copied to forged's signature tag.
	copySignature(t, reg, signed, forged)

	for name, data := range map[string]map[string][]byte{
		"regcreds": {".dockerconfigjson": reg.DockerConfigJSON()},
		"cosign":   {"cosign.pub": trusted.Public},
	} {
		if err := cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	startEngine(t, engine.Options{})
	source := func(repo string) *sourcev1.OCIRepository {
		o := verifiedSource(t, ns, reg.Host(), repo, "cosign")
		ks := kustomization(ns, repo, repo, "./")
		ks.Spec.SourceRef.Kind = sourcev1.OCIRepositoryKind
		if err := cp.Client.Create(ctx, ks); err != nil {
			t.Fatal(err)
		}
		return o
	}
	fingerprint := digest.Canonical.FromString("provider:cosign\x00pub:" + string(trusted.Public) + "\x00").String()
	for _, ref := range []string{signed, bundled} {
		repo := strings.TrimPrefix(ref[:strings.Index(ref, "@")], reg.Host()+"/")
		o := source(repo)
		waitFor(t, o, readyIs(o, true), "Ready=True")
		revision := "v1@" + ref[strings.Index(ref, "@")+1:]
		c := conditions.Get(o, sourcev1.SourceVerifiedCondition)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != meta.SucceededReason || c.Message != "verified signature of revision "+revision {
			t.Fatalf("%s: SourceVerified = %+v", repo, c)
		}
		if o.Status.SourceVerificationFingerprint != fingerprint {
			t.Fatalf("%s: fingerprint %q, want %q", repo, o.Status.SourceVerificationFingerprint, fingerprint)
		}
		ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: repo, Namespace: ns}}
		waitFor(t, ks, readyIs(ks, true), "Ready=True")
	}

	refused := func(o *sourcev1.OCIRepository, ref string) {
		t.Helper()
		waitFor(t, o, readyIs(o, false), "Ready=False")
		want := "failed to verify the signature using provider 'cosign': no matching signatures were found for '" + ref + "'"
		c := conditions.Get(o, sourcev1.SourceVerifiedCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != sourcev1.VerificationError || c.Message != want {
			t.Fatalf("%s: SourceVerified = %+v, want False %s %q", o.Name, c, sourcev1.VerificationError, want)
		}
		if r, m := conditions.GetReason(o, meta.ReadyCondition), conditions.GetMessage(o, meta.ReadyCondition); r != sourcev1.VerificationError ||
			!strings.Contains(m, want) || !strings.Contains(m, "OCIRepository/"+ns+"/"+o.Name) {
			t.Fatalf("%s: Ready %s %q, want %s naming the object and %q", o.Name, r, m, sourcev1.VerificationError, want)
		}
	}
	for _, ref := range []string{unsigned, byOther, forged} {
		repo := strings.TrimPrefix(ref[:strings.Index(ref, "@")], reg.Host()+"/")
		o := source(repo)
		refused(o, ref)
		if o.Status.Artifact != nil {
			t.Fatalf("%s: an unverified artifact was stored: %+v", repo, o.Status.Artifact)
		}
		ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: repo, Namespace: ns}}
		waitFor(t, ks, readyIs(ks, false), "Ready=False")
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: repo}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: the ConfigMap of an unverified artifact was applied (%v)", repo, err)
		}
	}

	// A rotated key verifies the unchanged revision again, and refuses it.
	var keys corev1.Secret
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cosign"}, &keys); err != nil {
		t.Fatal(err)
	}
	keys.Data = map[string][]byte{"rotated.pub": other.Public}
	if err := cp.Client.Update(ctx, &keys); err != nil {
		t.Fatal(err)
	}
	o := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: "signed", Namespace: ns}}
	requestReconcile(t, o)
	refused(o, signed)
}

// copySignature replaces the v2 signature manifest of to's digest with
// from's: a signature made for another digest.
func copySignature(t *testing.T, reg *testenv.Registry, from, to string) {
	t.Helper()
	ctx := context.Background()
	repoOf := func(ref string) string { return strings.TrimPrefix(ref[:strings.Index(ref, "@")], reg.Host()+"/") }
	sigTag := func(ref string) string { return strings.Replace(ref[strings.Index(ref, "@")+1:], ":", "-", 1) + ".sig" }
	if err := reg.CopyManifest(ctx, repoOf(from), sigTag(from), repoOf(to), sigTag(to)); err != nil {
		t.Fatal(err)
	}
}

// TestHelmReleaseVerifiesChartSignatures: spec.chart.spec.verify reaches
// the generated HelmChart, which installs only a chart of an OCI
// HelmRepository signed by a key of the Secret (here a cosign v3 bundle),
// with source-controller's conditions; a chart signed by another key and
// an unsigned one are never installed.
func TestHelmReleaseVerifiesChartSignatures(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"), demoChart("2.0.0"), demoChart("3.0.0"))
	trusted, other := signtest.NewCosignKey(t), signtest.NewCosignKey(t)
	trusted.Sign(t, reg.Host()+"/charts/demo:1.0.0", true)
	other.Sign(t, reg.Host()+"/charts/demo:2.0.0", false)
	if err := cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign", Namespace: ns},
		Data: map[string][]byte{"cosign.pub": trusted.Public}}); err != nil {
		t.Fatal(err)
	}
	repo := helmRepository(ns, "charts", "oci://"+reg.Host()+"/charts")
	repo.Spec.Type, repo.Spec.Insecure = sourcev1.HelmRepositoryTypeOCI, true
	create(t, repo)
	startEngine(t, engine.Options{})
	release := func(name, version string) *sourcev1.HelmChart {
		hr := chartRelease(ns, name, "charts", version)
		hr.Spec.Chart.Spec.Verify = &sourcev1.OCIRepositoryVerification{Provider: "cosign", SecretRef: &meta.LocalObjectReference{Name: "cosign"}}
		create(t, hr)
		return &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name, Namespace: ns}}
	}
	good, byOther, unsigned := release("good", "1.0.0"), release("other", "2.0.0"), release("unsigned", "3.0.0")

	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: ns}}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	waitFor(t, good, readyIs(good, true), "Ready=True")
	if c := conditions.Get(good, sourcev1.SourceVerifiedCondition); c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != meta.SucceededReason || c.Message != "verified signature of version 1.0.0" {
		t.Fatalf("signed chart: SourceVerified = %+v", c)
	}
	for _, hc := range []*sourcev1.HelmChart{byOther, unsigned} {
		waitFor(t, hc, readyIs(hc, false), "Ready=False")
		want := "chart verification error: no matching signatures were found for '" + reg.Host() + "/charts/demo@sha256:"
		c := conditions.Get(hc, sourcev1.SourceVerifiedCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != sourcev1.VerificationError || !strings.HasPrefix(c.Message, want) {
			t.Fatalf("%s: SourceVerified = %+v, want False %s %q…", hc.Name, c, sourcev1.VerificationError, want)
		}
		if r, m := conditions.GetReason(hc, meta.ReadyCondition), conditions.GetMessage(hc, meta.ReadyCondition); r != "ChartVerificationError" ||
			!strings.Contains(m, want) || !strings.Contains(m, "HelmChart/"+ns+"/"+hc.Name) {
			t.Fatalf("%s: Ready %s %q", hc.Name, r, m)
		}
		if hc.Status.Artifact != nil {
			t.Fatalf("%s: an unverified chart was stored: %+v", hc.Name, hc.Status.Artifact)
		}
	}
	for _, name := range []string{"other", "unsigned"} {
		hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		waitFor(t, hr, readyIs(hr, false), "Ready=False")
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-settings"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: an unverified chart was installed (%v)", name, err)
		}
	}
}

// TestOCIRepositoryVerifiesNotationSignatures: provider notation takes the
// trust policy and the CA certificates of the Secret: an artifact signed
// under the trusted CA is verified, one signed under another CA is
// refused, and the fingerprint covers the policy and the certificates.
func TestOCIRepositoryVerifiesNotationSignatures(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	trusted, other := signtest.NewNotationCA(t, "trusted"), signtest.NewNotationCA(t, "other")
	for name, ca := range map[string]signtest.NotationCA{"signed": trusted, "other": other} {
		desc, err := reg.PushArtifact(ctx, name, "v1", map[string]string{"cm.yaml": "kind: ConfigMap\n"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		repo, err := reg.Repository(name)
		if err != nil {
			t.Fatal(err)
		}
		ca.Sign(t, repo, reg.Host()+"/"+name+"@"+desc.Digest.String())
	}
	policy := `{"version":"1.0","trustPolicies":[{"name":"all","registryScopes":["*"],` +
		`"signatureVerification":{"level":"strict"},"trustStores":["ca:flux"],"trustedIdentities":["*"]}]}`
	if err := cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "notation", Namespace: ns},
		Data: map[string][]byte{"trustpolicy.json": []byte(policy), "ca.crt": trusted.Root}}); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	source := func(name string) *sourcev1.OCIRepository {
		return verifiedSource(t, ns, reg.Host(), name, "notation")
	}
	signed, byOther := source("signed"), source("other")
	waitFor(t, signed, readyIs(signed, true), "Ready=True")
	c := conditions.Get(signed, sourcev1.SourceVerifiedCondition)
	if c == nil || c.Status != metav1.ConditionTrue || c.Message != "verified signature of revision "+signed.Status.Artifact.Revision {
		t.Fatalf("signed under the trusted CA: SourceVerified = %+v", c)
	}
	want := digest.Canonical.FromString("provider:notation\x00trustpolicy:" + policy + "\x00cert:" + string(trusted.Root) + "\x00").String()
	if signed.Status.SourceVerificationFingerprint != want {
		t.Fatalf("fingerprint %q, want %q", signed.Status.SourceVerificationFingerprint, want)
	}
	waitFor(t, byOther, readyIs(byOther, false), "Ready=False")
	if c := conditions.Get(byOther, sourcev1.SourceVerifiedCondition); c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != sourcev1.VerificationError || !strings.HasPrefix(c.Message, "failed to verify the signature using provider 'notation': ") {
		t.Fatalf("signed under another CA: SourceVerified = %+v", c)
	}
	if byOther.Status.Artifact != nil {
		t.Fatalf("an unverified artifact was stored: %+v", byOther.Status.Artifact)
	}
}

// verifiedSource creates the OCIRepository of tag v1 of repo on the
// plain-HTTP registry host, verified by provider with the keys of the
// Secret of the same name, and signed in to with the Secret regcreds when
// there is one.
func verifiedSource(t *testing.T, ns, host, repo, provider string) *sourcev1.OCIRepository {
	t.Helper()
	o := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: repo, Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + host + "/" + repo, Insecure: true, Interval: &metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.OCIRepositoryRef{Tag: "v1"},
			Verify:    &sourcev1.OCIRepositoryVerification{Provider: provider, SecretRef: &meta.LocalObjectReference{Name: provider}},
		},
	}
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "regcreds"}, &corev1.Secret{}); err == nil {
		o.Spec.SecretRef = &meta.LocalObjectReference{Name: "regcreds"}
	}
	create(t, o)
	return o
}
