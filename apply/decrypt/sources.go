package decrypt

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/getsops/sops/v3/cmd/sops/formats"
	"sigs.k8s.io/kustomize/api/konfig"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// Sources decrypts in place the SOPS-encrypted files that kustomize reads
// as data, before the build, as kustomize-controller does: the files and
// envs of each secretGenerator, and the files of patches, in the
// kustomization at dir (relative to root) and in the kustomizations of
// the resources and components it refers to, recursively. A file that is
// not encrypted is left as it is. Files keep their format (an env file is
// decrypted as dotenv, a file as the format of its key's extension).
//
// Every path is resolved inside root: references that leave it, remote
// references, symlinks and files larger than Options.MaxFileSize are not
// decrypted (kustomize itself refuses to read outside root). Errors name
// files relative to root.
func (d *Decryptor) Sources(root, dir string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	w := sourceWalk{d: d, root: r, seen: map[string]bool{}, done: map[string]bool{}}
	return w.kustomization(path.Clean(dir))
}

type sourceWalk struct {
	d    *Decryptor
	root *os.Root
	// seen holds the directories visited, done the files decrypted.
	seen, done map[string]bool
}

// kustomization visits the kustomization in dir, then its resources and
// components that are directories.
func (w *sourceWalk) kustomization(dir string) error {
	if w.seen[dir] {
		return nil
	}
	w.seen[dir] = true
	k, err := w.load(dir)
	if k == nil || err != nil {
		return err
	}
	for _, g := range k.SecretGenerator {
		for _, src := range g.FileSources {
			key, file, found := strings.Cut(src, "=")
			if !found {
				file = key
			}
			if err := w.file(dir, file, formatForPath(key)); err != nil {
				return err
			}
		}
		for _, env := range g.EnvSources {
			f := formatForPath(env)
			if f == formats.Binary {
				f = formats.Dotenv
			}
			if err := w.file(dir, env, f); err != nil {
				return err
			}
		}
	}
	for _, p := range k.Patches {
		if p.Path == "" || remote(p.Path) {
			continue
		}
		if err := w.file(dir, p.Path, formatForPath(p.Path)); err != nil {
			return err
		}
	}
	for _, res := range append(append([]string{}, k.Resources...), k.Components...) {
		if remote(res) {
			continue
		}
		sub, ok := inside(dir, res)
		if !ok {
			continue
		}
		if fi, err := w.root.Lstat(sub); err != nil || !fi.IsDir() {
			continue // a file, or missing: kustomize reports it
		}
		if err := w.kustomization(sub); err != nil {
			return err
		}
	}
	return nil
}

// load reads the kustomization file of dir, or returns nil when there is
// none.
func (w *sourceWalk) load(dir string) (*kusttypes.Kustomization, error) {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		p := path.Join(dir, name)
		fi, err := w.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", p)
		}
		data, err := w.root.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		var k kusttypes.Kustomization
		if err := yaml.Unmarshal(data, &k); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return &k, nil
	}
	return nil, nil
}

// file decrypts dir/ref in place when it is an encrypted document of
// format f.
func (w *sourceWalk) file(dir, ref string, f formats.Format) error {
	p, ok := inside(dir, ref)
	if !ok || w.done[p] {
		return nil
	}
	fi, err := w.root.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return nil // missing or a symlink: kustomize reports it
	}
	if fi.Size() > w.d.opts.MaxFileSize {
		return fmt.Errorf("%s: %d bytes, more than the %d a file to decrypt may hold", p, fi.Size(), w.d.opts.MaxFileSize)
	}
	data, err := w.root.ReadFile(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if !bytes.Contains(data, marker(f)) {
		return nil
	}
	plain, err := w.d.decryptData(p, data, f, f)
	if err != nil {
		return err
	}
	if err := w.root.WriteFile(p, plain, 0o600); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	w.done[p] = true
	return nil
}

// marker is the substring that an encrypted document of format f holds.
func marker(f formats.Format) []byte {
	if f == formats.Binary {
		f = formats.Json // a JSON envelope
	}
	for _, m := range markers {
		if m.format == f {
			return m.marker
		}
	}
	return nil
}

// inside joins ref onto dir and reports whether the result stays inside
// the root; an absolute ref is taken from the root, as kustomize-controller
// takes it.
func inside(dir, ref string) (string, bool) {
	p := path.Join(dir, ref)
	if path.IsAbs(ref) {
		p = path.Clean(strings.TrimPrefix(ref, "/"))
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", false
	}
	return p, true
}

func remote(ref string) bool {
	u, err := url.Parse(ref)
	return err == nil && u.Scheme != "" && u.Host != ""
}
