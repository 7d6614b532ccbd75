package git_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/gitkit"
	"github.com/fluxcd/pkg/gittestserver"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/git"
)

func newSSHKey(t *testing.T) ([]byte, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPub, _ := ssh.NewPublicKey(pub)
	return pem.EncodeToMemory(block), sshPub
}

// writeHostKey writes the SSH host key gitkit serves with into keyDir,
// where gitkit would otherwise make one, and returns its public half.
// gitkit reads the key at gitkit.rsa with ssh.ParsePrivateKey, which takes
// any key type: an ed25519 key made here needs neither ssh-keygen nor
// an RSA key's generation time.
func writeHostKey(t *testing.T, keyDir string) ssh.PublicKey {
	t.Helper()
	priv, pub := newSSHKey(t)
	if err := os.WriteFile(filepath.Join(keyDir, "gitkit.rsa"), priv, 0o600); err != nil {
		t.Fatal(err)
	}
	return pub
}

// sshRepo serves f's repositories over SSH (gitkit) with public-key auth
// and returns the URL of app.git, a client key the server accepts and a
// known_hosts that holds the server's key. It fails the test when the SSH
// server does not start, unless COZY_SKIP_SSH is set.
func sshRepo(t *testing.T, f *fixture) (repoURL string, clientKey, knownHosts []byte) {
	t.Helper()
	clientKey, clientPub := newSSHKey(t)
	authorized := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(clientPub)))

	keyDir := t.TempDir()
	hostPub := writeHostKey(t, keyDir)
	srv := gittestserver.NewGitServer(f.srv.Root()).KeyDir(keyDir).Auth("unused", "unused")
	srv.PublicKeyLookupFunc(func(content string) (*gitkit.PublicKey, error) {
		if content != authorized {
			return nil, errors.New("unknown key")
		}
		return &gitkit.PublicKey{Id: "flux"}, nil
	})
	if err := srv.ListenSSH(); err != nil {
		if os.Getenv("COZY_SKIP_SSH") != "" {
			t.Skipf("skipped because COZY_SKIP_SSH is set: gittestserver SSH mode does not start here: %v", err)
		}
		t.Fatalf("gittestserver SSH mode does not start (set COZY_SKIP_SSH=1 to skip this test): %v", err)
	}
	go srv.StartSSH()
	t.Cleanup(func() { srv.StopSSH() })

	u, _ := url.Parse(srv.SSHAddress())
	knownHosts = []byte(knownhosts.Line([]string{knownhosts.Normalize(u.Host)}, hostPub) + "\n")
	return srv.SSHAddress() + "/app.git", clientKey, knownHosts
}

// TestFetchSSH fetches over SSH with public-key auth, and checks host key
// verification both ways.
func TestFetchSSH(t *testing.T) {
	f := setup(t)
	repoURL, clientKey, knownHosts := sshRepo(t, f)
	otherKey, _ := newSSHKey(t)
	u, _ := url.Parse(repoURL)
	_, wrongHostPub := newSSHKey(t)
	wrongKnownHosts := []byte(knownhosts.Line([]string{knownhosts.Normalize(u.Host)}, wrongHostPub) + "\n")

	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "ssh"}
	res, err := git.Fetch(context.Background(), st, obj, repoURL, git.Options{
		Ref: git.Ref{Branch: "main"}, Auth: git.Auth{SSHPrivateKey: clientKey, KnownHosts: knownHosts},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision.String != "main@sha1:"+f.third {
		t.Fatalf("revision %q", res.Revision.String)
	}
	for name, a := range map[string]git.Auth{
		"unknown client key": {SSHPrivateKey: otherKey, KnownHosts: knownHosts},
		"wrong host key":     {SSHPrivateKey: clientKey, KnownHosts: wrongKnownHosts},
		"no known_hosts":     {SSHPrivateKey: clientKey},
	} {
		_, err := git.Fetch(context.Background(), st, obj, repoURL, git.Options{Ref: git.Ref{Branch: "main"}, Auth: a})
		if !errors.Is(err, source.ErrAuth) {
			t.Errorf("%s: got %v, want ErrAuth", name, err)
		}
	}
}
