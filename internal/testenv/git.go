package testenv

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/fluxcd/pkg/gittestserver"
	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// GitOptions configures StartGitServer. The zero value serves without auth.
type GitOptions struct {
	// Username and Password switch HTTP basic auth on when Username is set.
	Username, Password string
}

// GitServer is a real Git server (git http-backend behind gitkit) serving
// bare repositories over HTTP on 127.0.0.1.
type GitServer struct {
	srv        *gittestserver.GitServer
	user, pass string
}

// StartGitServer starts a Git server with a fresh, empty docroot.
// Repositories are created on first push.
func StartGitServer(opts GitOptions) (*GitServer, error) {
	srv, err := gittestserver.NewTempGitServer()
	if err != nil {
		return nil, err
	}
	srv.AutoCreate()
	if opts.Username != "" {
		srv.Auth(opts.Username, opts.Password)
	}
	if err := srv.StartHTTP(); err != nil {
		os.RemoveAll(srv.Root())
		return nil, fmt.Errorf("starting the git server: %w", err)
	}
	return &GitServer{srv: srv, user: opts.Username, pass: opts.Password}, nil
}

// Close stops the server and removes its repositories.
func (s *GitServer) Close() {
	s.srv.StopHTTP()
	os.RemoveAll(s.srv.Root())
}

// URL returns the HTTP URL of a repository, without credentials.
func (s *GitServer) URL(repo string) string {
	return s.srv.HTTPAddress() + "/" + repo
}

// Root returns the directory of the bare repositories.
func (s *GitServer) Root() string { return s.srv.Root() }

// Repo returns a handle that commits, branches and tags in the named
// repository, pushing each change to the server over HTTP.
func (s *GitServer) Repo(name string) (*GitRepo, error) {
	r, err := gogit.Init(memory.NewStorage(), memfs.New())
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(s.URL(name))
	if err != nil {
		return nil, err
	}
	if s.user != "" {
		u.User = url.UserPassword(s.user, s.pass)
	}
	if _, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{u.String()}}); err != nil {
		return nil, err
	}
	return &GitRepo{name: name, url: s.URL(name), repo: r}, nil
}

// GitRepo is a working copy in memory whose changes are pushed to the server.
type GitRepo struct {
	name string
	url  string

	mu      sync.Mutex
	repo    *gogit.Repository
	signing GitSigning
}

// GitSigning says how a GitRepo signs what it creates. The zero value
// signs nothing.
type GitSigning struct {
	// PGP signs commits and annotated tags with an OpenPGP key.
	PGP *openpgp.Entity
	// SSH signs commits with an SSH key, as git's gpg.format=ssh
	// (namespace "git", SHA-512); it wins over PGP for commits.
	SSH ssh.Signer
}

// Sign makes the commits and tags created from now on signed with s.
func (r *GitRepo) Sign(s GitSigning) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signing = s
}

// sshSigner signs Git objects as git does with gpg.format=ssh.
type sshSigner struct{ ssh.Signer }

func (s sshSigner) Sign(message io.Reader) ([]byte, error) {
	sig, err := sshsig.Sign(message, s.Signer, sshsig.HashSHA512, "git")
	if err != nil {
		return nil, err
	}
	return sshsig.Armor(sig), nil
}

// URL returns the repository's HTTP URL, without credentials.
func (r *GitRepo) URL() string { return r.url }

var signature = object.Signature{Name: "cozy-aio tests", Email: "tests@cozy-aio.invalid"}

// Commit replaces the tree of branch with files (path → content), commits
// and pushes. A new branch starts from the current HEAD, or as the first
// commit of an empty repository. It returns the commit SHA-1.
func (r *GitRepo) Commit(branch string, files map[string]string, msg string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, err := r.repo.Worktree()
	if err != nil {
		return "", err
	}
	if err := r.checkout(w, branch); err != nil {
		return "", fmt.Errorf("checking out %s: %w", branch, err)
	}
	if err := replaceTree(w.Filesystem, files); err != nil {
		return "", err
	}
	if err := w.AddWithOptions(&gogit.AddOptions{All: true}); err != nil {
		return "", err
	}
	sig := signature
	sig.When = time.Now()
	co := &gogit.CommitOptions{Author: &sig, AllowEmptyCommits: true, SignKey: r.signing.PGP}
	if r.signing.SSH != nil {
		co.Signer = sshSigner{r.signing.SSH}
	}
	h, err := w.Commit(msg, co)
	if err != nil {
		return "", err
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if err := r.push(config.RefSpec("+" + ref + ":" + ref)); err != nil {
		return "", err
	}
	return h.String(), nil
}

// CommitDir is Commit with the files of a directory tree.
func (r *GitRepo) CommitDir(branch, dir, msg string) (string, error) {
	files, err := ReadTree(dir)
	if err != nil {
		return "", err
	}
	return r.Commit(branch, files, msg)
}

// Tag creates an annotated tag on commit and pushes it, signed with the
// PGP key of Sign if one is set.
func (r *GitRepo) Tag(name, commit string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sig := signature
	sig.When = time.Now()
	if _, err := r.repo.CreateTag(name, plumbing.NewHash(commit), &gogit.CreateTagOptions{
		Tagger: &sig, Message: name, SignKey: r.signing.PGP,
	}); err != nil {
		return err
	}
	ref := plumbing.NewTagReferenceName(name)
	return r.push(config.RefSpec("+" + ref + ":" + ref))
}

func (r *GitRepo) push(spec config.RefSpec) error {
	err := r.repo.Push(&gogit.PushOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{spec}})
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return fmt.Errorf("pushing %s to %s: %w", spec, r.url, err)
	}
	return nil
}

func (r *GitRepo) checkout(w *gogit.Worktree, branch string) error {
	ref := plumbing.NewBranchReferenceName(branch)
	if _, err := r.repo.Reference(ref, false); err == nil {
		return w.Checkout(&gogit.CheckoutOptions{Branch: ref, Force: true})
	}
	head, err := r.repo.Head()
	if err != nil {
		// Empty repository: the first commit creates the branch.
		return r.repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, ref))
	}
	return w.Checkout(&gogit.CheckoutOptions{Branch: ref, Hash: head.Hash(), Create: true, Force: true})
}

func replaceTree(fs billy.Filesystem, files map[string]string) error {
	entries, err := fs.ReadDir("/")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := util.RemoveAll(fs, e.Name()); err != nil {
			return err
		}
	}
	for _, p := range sortedKeys(files) {
		if err := util.WriteFile(fs, p, []byte(files[p]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ReadTree reads the regular files below dir into a map of slash-separated
// relative path → content.
func ReadTree(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return files, err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Forge points branch at a copy of commit with msg for its message and
// commit's signature, made for the original: a signature over other
// content. It pushes the branch and returns the copy's SHA-1.
func (r *GitRepo) Forge(branch, commit, msg string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return "", err
	}
	forged := *c
	forged.Message = msg
	o := r.repo.Storer.NewEncodedObject()
	if err := forged.Encode(o); err != nil {
		return "", err
	}
	h, err := r.repo.Storer.SetEncodedObject(o)
	if err != nil {
		return "", err
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if err := r.repo.Storer.SetReference(plumbing.NewHashReference(ref, h)); err != nil {
		return "", err
	}
	return h.String(), r.push(config.RefSpec("+" + ref + ":" + ref))
}

// TagHash returns the SHA-1 of the annotated tag object name.
func (r *GitRepo) TagHash(name string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, err := r.repo.Tag(name)
	if err != nil {
		return "", err
	}
	return ref.Hash().String(), nil
}
