package apply

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// BuildOptions configures Build. The zero value works.
type BuildOptions struct {
	// AllowRemoteBases lets a kustomization reference remote bases and
	// resources (Git repositories or HTTP URLs). Default: false, and such a
	// reference is an error naming the kustomization file.
	AllowRemoteBases bool
	// MaxBytes bounds the total size of the files read from the directory.
	// Default: 64 MiB.
	MaxBytes int64
	// Root is the directory the build may read, which holds dir: a
	// kustomization may refer to bases and components anywhere below Root
	// (the artifact's root, as in Flux), never outside it. Default: dir.
	Root string
	// Decrypt, when set, is called on each rendered object before
	// substitution, in kustomize-controller's order; it changes the object
	// in place and reports whether it did (apply/decrypt's
	// Decryptor.Object). Its errors are returned as they are. Default:
	// nil, no decryption.
	Decrypt func(obj *unstructured.Unstructured) (bool, error)
	// Substitute, when set, replaces post-build variables in every rendered
	// object, on the objects as kustomize renders them (so a quoted
	// "${port}" stays a string), as kustomize-controller does. Default:
	// nil, no substitution.
	Substitute *SubstituteOptions
}

// Build runs kustomize (krusty) on dir and returns the objects it renders.
//
// When dir has no kustomization file, Build generates one over every
// manifest below dir, as Flux does: each subdirectory that has its own
// kustomization file is one resource, and so is each .yaml or .yml file that
// holds Kubernetes objects; files that hold none are ignored.
//
// Build reads the directory into memory first, so a kustomization can never
// load a file outside dir, and dir is never written.
func Build(ctx context.Context, dir string, opts BuildOptions) ([]*unstructured.Unstructured, error) {
	mem, at, err := load(ctx, dir, &opts)
	if err != nil {
		return nil, err
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(mem, at)
	if err != nil {
		return nil, fmt.Errorf("kustomize build of %s: %w", dir, err)
	}
	out := make([]*unstructured.Unstructured, 0, resMap.Size())
	for _, res := range resMap.Resources() {
		if opts.Decrypt != nil {
			if err := decryptResource(res, opts.Decrypt); err != nil {
				return nil, err
			}
		}
		if opts.Substitute != nil {
			u, err := substituteResource(res, *opts.Substitute)
			if err != nil {
				return nil, err
			}
			out = append(out, u)
			continue
		}
		m, err := res.Map()
		if err != nil {
			return nil, fmt.Errorf("kustomize build of %s: %s: %w", dir, res.CurId(), err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// load reads opts.Root into memory (opts' defaults filled in) and returns
// it with dir's path in it, a kustomization generated there when dir has
// none, and remote bases refused unless allowed.
func load(ctx context.Context, dir string, opts *BuildOptions) (filesys.FileSystem, string, error) {
	if opts.MaxBytes == 0 {
		opts.MaxBytes = 64 << 20
	}
	if opts.Root == "" {
		opts.Root = dir
	}
	rel, err := filepath.Rel(opts.Root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, "", fmt.Errorf("building %s: the directory is not below %s", dir, opts.Root)
	}
	at := path.Join("/", filepath.ToSlash(rel))
	mem, err := loadDir(ctx, opts.Root, opts.MaxBytes)
	if err != nil {
		return nil, "", err
	}
	if !hasKustomization(mem, at) {
		if err := generateKustomization(mem, at); err != nil {
			return nil, "", fmt.Errorf("generating a kustomization for %s: %w", dir, err)
		}
	}
	if !opts.AllowRemoteBases {
		if err := checkNoRemote(mem, at, map[string]bool{}); err != nil {
			return nil, "", fmt.Errorf("building %s: %w", dir, err)
		}
	}
	return mem, at, ctx.Err()
}

// decryptResource runs the decrypt hook on res and writes its result
// back, so that substitution sees the cleartext.
func decryptResource(res *resource.Resource, decrypt func(*unstructured.Unstructured) (bool, error)) error {
	m, err := res.Map()
	if err != nil {
		return fmt.Errorf("%s: %w", res.CurId(), err)
	}
	obj := &unstructured.Unstructured{Object: m}
	changed, err := decrypt(obj)
	if err != nil || !changed {
		return err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("%s: %w", res.CurId(), err)
	}
	return res.UnmarshalJSON(data)
}

// loadDir copies the regular files below dir into an in-memory file system
// rooted at "/". Symlinks and .git are skipped.
func loadDir(ctx context.Context, dir string, maxBytes int64) (filesys.FileSystem, error) {
	mem := filesys.MakeFsInMemory()
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		target := path.Join("/", filepath.ToSlash(rel))
		switch {
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.IsDir():
			return mem.MkdirAll(target)
		case !d.Type().IsRegular():
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if total += int64(len(data)); total > maxBytes {
			return fmt.Errorf("%s: the directory holds more than %d bytes", dir, maxBytes)
		}
		return mem.WriteFile(target, data)
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	return mem, nil
}

func kustomizationFile(fsys filesys.FileSystem, dir string) string {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if p := path.Join(dir, name); fsys.Exists(p) && !fsys.IsDir(p) {
			return p
		}
	}
	return ""
}

func hasKustomization(fsys filesys.FileSystem, dir string) bool {
	return kustomizationFile(fsys, dir) != ""
}

// generateKustomization writes dir/kustomization.yaml listing every
// manifest below dir.
func generateKustomization(fsys filesys.FileSystem, dir string) error {
	var resources []string
	var walk func(d string) error
	walk = func(d string) error {
		entries, err := fsys.ReadDir(d)
		if err != nil {
			return err
		}
		slices.Sort(entries)
		for _, name := range entries {
			p := path.Join(d, name)
			rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
			switch {
			case fsys.IsDir(p) && hasKustomization(fsys, p):
				resources = append(resources, rel)
			case fsys.IsDir(p):
				if err := walk(p); err != nil {
					return err
				}
			case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"):
				ok, err := holdsObjects(fsys, p)
				if err != nil {
					return err
				}
				if ok {
					resources = append(resources, rel)
				}
			}
		}
		return nil
	}
	if err := walk(dir); err != nil {
		return err
	}
	k := kusttypes.Kustomization{
		TypeMeta:  kusttypes.TypeMeta{APIVersion: kusttypes.KustomizationVersion, Kind: kusttypes.KustomizationKind},
		Resources: resources,
	}
	data, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	return fsys.WriteFile(path.Join(dir, konfig.DefaultKustomizationFileName()), data)
}

// holdsObjects reports whether the YAML file p holds at least one
// Kubernetes object. YAML that does not parse is an error naming the file.
func holdsObjects(fsys filesys.FileSystem, p string) (bool, error) {
	data, err := fsys.ReadFile(p)
	if err != nil {
		return false, err
	}
	objs, err := decodeObjects(bytes.NewReader(data))
	if err != nil {
		return false, fmt.Errorf("%s: %w", strings.TrimPrefix(p, "/"), err)
	}
	return len(objs) > 0, nil
}

// ReadObjects decodes a stream of YAML or JSON documents into objects.
// Documents without apiVersion and kind are ignored, and a List is
// flattened. Source names the stream in errors (a file name, for example).
func ReadObjects(r io.Reader, source string) ([]*unstructured.Unstructured, error) {
	objs, err := decodeObjects(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return objs, nil
}

func decodeObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		data, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("document %d: invalid YAML: %w", doc, err)
		}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(js, &tm); err != nil || tm.APIVersion == "" || tm.Kind == "" {
			continue // null, a scalar, or not a Kubernetes object
		}
		obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, js)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			out = append(out, o)
		case *unstructured.UnstructuredList:
			for i := range o.Items {
				out = append(out, &o.Items[i])
			}
		}
	}
}
