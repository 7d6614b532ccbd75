package engine_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/opencontainers/go-digest"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// pgpKey makes an OpenPGP key and its armored public key, as a user
// exports it for a GitRepository's verification Secret.
func pgpKey(t *testing.T, name string) (*openpgp.Entity, string) {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", name+"@cozy-aio.invalid", nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return e, b.String()
}

// TestGitRepositoryVerifiesSignatures: spec.verify accepts only commits
// and tags signed by a key of its Secret, with source-controller's
// SourceVerified condition, reasons and fingerprint; an unverified commit
// never becomes the artifact, and a rotated key verifies the same
// revision again.
func TestGitRepositoryVerifiesSignatures(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	srv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	repo, err := srv.Repo("signed.git")
	if err != nil {
		t.Fatal(err)
	}
	trusted, trustedPub := pgpKey(t, "trusted")
	other, otherPub := pgpKey(t, "other")
	_, sshPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshSigner, err := ssh.NewSignerFromKey(sshPriv)
	if err != nil {
		t.Fatal(err)
	}
	sshPub := string(ssh.MarshalAuthorizedKey(sshSigner.PublicKey()))

	files := map[string]string{"cm.yaml": "kind: ConfigMap\n"}
	commit := func(branch string, s testenv.GitSigning) string {
		t.Helper()
		repo.Sign(s)
		sha, err := repo.Commit(branch, files, branch)
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	signed := commit("main", testenv.GitSigning{PGP: trusted})
	repo.Sign(testenv.GitSigning{PGP: trusted})
	if err := repo.Tag("v1.0.0", signed); err != nil {
		t.Fatal(err)
	}
	byOther := commit("other", testenv.GitSigning{PGP: other})
	unsigned := commit("unsigned", testenv.GitSigning{})
	viaSSH := commit("ssh", testenv.GitSigning{SSH: sshSigner})
	forged, err := repo.Forge("forged", signed, "not what was signed")
	if err != nil {
		t.Fatal(err)
	}

	if err := cp.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: ns},
		StringData: map[string]string{"trusted.asc": trustedPub, "author.sshpub": sshPub},
	}); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})

	gitRepo := func(name string, ref sourcev1.GitRepositoryRef, mode sourcev1.GitVerificationMode) *sourcev1.GitRepository {
		o := &sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: sourcev1.GitRepositorySpec{
				URL: repo.URL(), Interval: metav1.Duration{Duration: time.Hour}, Reference: &ref,
				Verification: &sourcev1.GitRepositoryVerification{Mode: mode, SecretRef: meta.LocalObjectReference{Name: "keys"}},
			},
		}
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	head := gitRepo("head", sourcev1.GitRepositoryRef{Branch: "main"}, sourcev1.ModeGitHEAD)
	tag := gitRepo("tag", sourcev1.GitRepositoryRef{Tag: "v1.0.0"}, sourcev1.ModeGitTagAndHEAD)
	sshRepo := gitRepo("ssh", sourcev1.GitRepositoryRef{Branch: "ssh"}, sourcev1.ModeGitHEAD)
	refused := map[*sourcev1.GitRepository]string{
		gitRepo("other", sourcev1.GitRepositoryRef{Branch: "other"}, sourcev1.ModeGitHEAD):       "commit '" + byOther + "' failed: unable to verify Git commit: unable to verify payload with any of the given key rings",
		gitRepo("unsigned", sourcev1.GitRepositoryRef{Branch: "unsigned"}, sourcev1.ModeGitHEAD): "commit '" + unsigned + "' failed: unsupported signature type: empty",
		gitRepo("forged", sourcev1.GitRepositoryRef{Branch: "forged"}, sourcev1.ModeGitHEAD):     "commit '" + forged + "' failed: unable to verify Git commit: unable to verify payload with any of the given key rings",
	}
	noTag := gitRepo("no-tag", sourcev1.GitRepositoryRef{Branch: "main"}, sourcev1.ModeGitTag)

	fingerprint := digest.Canonical.FromString("pgp:" + trustedPub + "\x00ssh:" + sshPub + "\x00").String()
	verified := func(o *sourcev1.GitRepository, revision string, objects ...string) {
		t.Helper()
		waitFor(t, o, readyIs(o, true), "Ready=True")
		if a := o.Status.Artifact; a == nil || a.Revision != revision {
			t.Fatalf("%s: artifact %+v, want revision %s", o.Name, a, revision)
		}
		c := conditions.Get(o, sourcev1.SourceVerifiedCondition)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != meta.SucceededReason {
			t.Fatalf("%s: SourceVerified = %+v", o.Name, c)
		}
		if want := "verified signature of\n\t- " + strings.Join(objects, "\n\t- "); c.Message != want {
			t.Fatalf("%s: SourceVerified message %q, want %q", o.Name, c.Message, want)
		}
		if o.Status.SourceVerificationFingerprint != fingerprint || o.Status.SourceVerificationMode == nil ||
			*o.Status.SourceVerificationMode != o.Spec.Verification.Mode {
			t.Fatalf("%s: fingerprint %q mode %v, want %q and %s", o.Name, o.Status.SourceVerificationFingerprint,
				o.Status.SourceVerificationMode, fingerprint, o.Spec.Verification.Mode)
		}
	}
	keyID := trusted.PrimaryKey.KeyIdString()
	verified(head, "main@sha1:"+signed, "commit '"+signed+"' with key '"+keyID+"'")
	tagObj, err := repo.TagHash("v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	verified(tag, "v1.0.0@sha1:"+signed, "tag 'v1.0.0@"+tagObj+"' with key '"+keyID+"'", "commit '"+signed+"' with key '"+keyID+"'")
	verified(sshRepo, "ssh@sha1:"+viaSSH, "commit '"+viaSSH+"' with key '"+ssh.FingerprintSHA256(sshSigner.PublicKey())+"'")

	notVerified := func(o *sourcev1.GitRepository, reason, msg string) {
		t.Helper()
		waitFor(t, o, readyIs(o, false), "Ready=False")
		c := conditions.Get(o, sourcev1.SourceVerifiedCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, msg) {
			t.Fatalf("%s: SourceVerified = %+v, want False %s %q", o.Name, c, reason, msg)
		}
		if r, m := conditions.GetReason(o, meta.ReadyCondition), conditions.GetMessage(o, meta.ReadyCondition); r != reason ||
			!strings.Contains(m, msg) || !strings.Contains(m, "GitRepository/"+ns+"/"+o.Name) {
			t.Fatalf("%s: Ready %s %q, want %s naming the object and %q", o.Name, r, m, reason, msg)
		}
	}
	for o, msg := range refused {
		notVerified(o, "InvalidCommitSignature", msg)
		if o.Status.Artifact != nil {
			t.Fatalf("%s: an unverified commit became the artifact %+v", o.Name, o.Status.Artifact)
		}
	}
	notVerified(noTag, "InvalidVerificationMode", "cannot verify tag object's signature if a tag reference is not specified")
	if !conditions.IsStalled(noTag) {
		t.Fatal("Tag verification of a branch stalls, as in source-controller")
	}

	// A rotated key verifies the unchanged revision again, and refuses it;
	// the artifact verified before stays (as source-controller keeps it).
	var keys corev1.Secret
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keys"}, &keys); err != nil {
		t.Fatal(err)
	}
	keys.Data = map[string][]byte{"rotated.asc": []byte(otherPub)}
	if err := cp.Client.Update(ctx, &keys); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, head)
	notVerified(head, "InvalidCommitSignature", "commit '"+signed+"' failed")
	if a := head.Status.Artifact; a == nil || a.Revision != "main@sha1:"+signed {
		t.Fatalf("the artifact verified before is kept: %+v", a)
	}
}
