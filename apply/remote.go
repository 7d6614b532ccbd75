package apply

import (
	"fmt"
	"path"
	"strings"

	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// checkNoRemote walks the kustomization in dir and the local bases it
// references, and fails on the first remote reference.
func checkNoRemote(fsys filesys.FileSystem, dir string, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	kf := kustomizationFile(fsys, dir)
	if kf == "" {
		return nil
	}
	data, err := fsys.ReadFile(kf)
	if err != nil {
		return err
	}
	var k kusttypes.Kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("%s: invalid kustomization: %w", strings.TrimPrefix(kf, "/"), err)
	}
	refs := append(append(append([]string{}, k.Resources...), k.Bases...), k.Components...) //nolint:staticcheck // Bases is deprecated but still honoured by kustomize.
	for _, ref := range refs {
		local := path.Join(dir, ref)
		if !path.IsAbs(ref) && fsys.Exists(local) {
			if fsys.IsDir(local) {
				if err := checkNoRemote(fsys, local, seen); err != nil {
					return err
				}
			}
			continue
		}
		if isRemote(ref) {
			return fmt.Errorf("%s: remote base %q is not allowed (BuildOptions.AllowRemoteBases is off)", strings.TrimPrefix(kf, "/"), ref)
		}
	}
	return nil
}

// isRemote recognises the forms kustomize fetches over the network: URLs,
// scp-like Git addresses and host/org/repo paths.
func isRemote(ref string) bool {
	switch {
	case strings.Contains(ref, "://"), strings.HasPrefix(ref, "git@"):
		return true
	case strings.Contains(ref, "?ref=") || strings.Contains(ref, ".git"):
		return true
	}
	first, _, _ := strings.Cut(ref, "/")
	return strings.Contains(first, ".") && first != "." && first != ".." && strings.Contains(ref, "/")
}
