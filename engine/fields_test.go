package engine

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"

	"github.com/cozystack/cozy-aio/engine/internal/helmrelease"
	"github.com/cozystack/cozy-aio/engine/internal/kustomization"
	"github.com/cozystack/cozy-aio/engine/internal/sources"
)

// specFields lists, per kind the engine serves, how each field of the
// upstream spec type is treated: honoured (a path, or a prefix ending
// the path of a whole subtree), or rejected by check, the kind's
// unsupported() over an object whose spec has only that field set.
//
// A kind added to the engine adds its entry here, or from its own test
// file with an init function.
var specFields = map[string]specFieldPolicy{
	kustomizev1.KustomizationKind: {
		spec: reflect.TypeFor[kustomizev1.KustomizationSpec](),
		honoured: []string{
			"sourceRef", "path", "interval", "retryInterval", "timeout", "prune", "wait", "healthChecks",
			"healthCheckExprs", "postBuild", "targetNamespace", "serviceAccountName", "force", "suspend",
			"dependsOn", "deletionPolicy", "patches", "images", "components", "ignoreMissingComponents",
			"namePrefix", "nameSuffix", "commonMetadata", "buildMetadata", "ignore",
			// age keys only; documents that only other key types open
			// stall with UnsupportedField at build time.
			"decryption.provider", "decryption.secretRef", "kubeConfig",
		},
		check: func(spec reflect.Value) error {
			return kustomization.Unsupported(&kustomizev1.Kustomization{Spec: spec.Interface().(kustomizev1.KustomizationSpec)})
		},
	},
	helmv2.HelmReleaseKind: {
		spec: reflect.TypeFor[helmv2.HelmReleaseSpec](),
		honoured: []string{
			"chart.metadata", "chart.spec.chart", "chart.spec.version", "chart.spec.sourceRef", "chart.spec.interval",
			"chart.spec.reconcileStrategy", "chart.spec.valuesFiles", "chart.spec.ignoreMissingValuesFiles", "chart.spec.verify.provider", "chart.spec.verify.secretRef",
			"chartRef", "interval", "releaseName", "targetNamespace", "storageNamespace", "serviceAccountName",
			"dependsOn", "suspend", "timeout", "maxHistory", "values", "valuesFrom", "persistentClient", "postRenderers", "commonMetadata", "healthCheckExprs",
			"install.timeout", "install.remediation", "install.strategy", "install.disableWait",
			"install.disableWaitForJobs", "install.disableHooks", "install.disableSchemaValidation",
			"install.disableOpenAPIValidation", "install.crds", "install.skipCRDs", "install.createNamespace",
			"install.serverSideApply", "install.disableTakeOwnership",
			"upgrade.timeout", "upgrade.remediation", "upgrade.strategy", "upgrade.force", "upgrade.cleanupOnFail",
			"upgrade.crds", "upgrade.disableWait", "upgrade.disableWaitForJobs", "upgrade.disableHooks",
			"upgrade.disableSchemaValidation", "upgrade.disableOpenAPIValidation", "upgrade.serverSideApply",
			"upgrade.disableTakeOwnership", "upgrade.preserveValues", "install.replace",
			"rollback.timeout", "rollback.disableWait", "rollback.disableWaitForJobs", "rollback.disableHooks",
			"rollback.force", "rollback.cleanupOnFail", "rollback.serverSideApply",
			"uninstall", "driftDetection", "waitStrategy", "test", "kubeConfig",
		},
		check: func(spec reflect.Value) error {
			return helmrelease.Unsupported(&helmv2.HelmRelease{Spec: spec.Interface().(helmv2.HelmReleaseSpec)})
		},
	},
	sourcev1.GitRepositoryKind: {
		spec: reflect.TypeFor[sourcev1.GitRepositorySpec](),
		honoured: []string{
			"url", "interval", "timeout", "ref", "secretRef", "proxySecretRef", "ignore", "sparseCheckout", "suspend", "provider",
			"include", "verify",
		},
		check: func(spec reflect.Value) error {
			return sources.GitRepositoryUnsupported(&sourcev1.GitRepository{Spec: spec.Interface().(sourcev1.GitRepositorySpec)})
		},
	},
	sourcev1.OCIRepositoryKind: {
		spec: reflect.TypeFor[sourcev1.OCIRepositorySpec](),
		honoured: []string{
			"url", "interval", "timeout", "ref.tag", "ref.semver", "ref.semverFilter", "ref.digest", "layerSelector", "secretRef",
			"certSecretRef", "proxySecretRef", "insecure", "ignore", "suspend", "provider", "verify.provider", "verify.secretRef",
		},
		check: func(spec reflect.Value) error {
			return sources.OCIRepositoryUnsupported(&sourcev1.OCIRepository{Spec: spec.Interface().(sourcev1.OCIRepositorySpec)})
		},
	},
	swv1beta1.ArtifactGeneratorKind: {
		spec: reflect.TypeFor[swv1beta1.ArtifactGeneratorSpec](),
		// Every field is honoured: nothing to reject.
		honoured: []string{"sources", "commonMetadata", "serviceAccountName", "pathPattern", "managedNamespaces",
			"artifacts.name", "artifacts.namespace", "artifacts.inputsFrom", "artifacts.revision", "artifacts.originRevision",
			"artifacts.copy.from", "artifacts.copy.to", "artifacts.copy.exclude", "artifacts.copy.strategy", "artifacts.copy.optional"},
	},
	sourcev1.HelmRepositoryKind: {
		spec: reflect.TypeFor[sourcev1.HelmRepositorySpec](),
		honoured: []string{
			"url", "secretRef", "certSecretRef", "passCredentials", "interval", "insecure", "timeout", "suspend", "type", "provider",
		},
		check: func(spec reflect.Value) error {
			return sources.HelmRepositoryUnsupported(&sourcev1.HelmRepository{Spec: spec.Interface().(sourcev1.HelmRepositorySpec)})
		},
	},
	sourcev1.HelmChartKind: {
		spec: reflect.TypeFor[sourcev1.HelmChartSpec](),
		honoured: []string{
			"chart", "version", "sourceRef", "interval", "reconcileStrategy", "valuesFiles", "ignoreMissingValuesFiles", "suspend", "verify.provider", "verify.secretRef",
		},
		check: func(spec reflect.Value) error {
			return sources.HelmChartUnsupported(&sourcev1.HelmChart{Spec: spec.Interface().(sourcev1.HelmChartSpec)})
		},
	},
	sourcev1.BucketKind: {
		spec: reflect.TypeFor[sourcev1.BucketSpec](),
		honoured: []string{
			"provider", "bucketName", "endpoint", "insecure", "region", "prefix", "secretRef", "certSecretRef", "proxySecretRef",
			"interval", "timeout", "ignore", "suspend",
		},
		check: func(spec reflect.Value) error {
			return sources.BucketUnsupported(&sourcev1.Bucket{Spec: spec.Interface().(sourcev1.BucketSpec)})
		},
	},
	// The engine writes ExternalArtifacts (the outputs of generators) and
	// reads only their status; their one spec field is set by the engine.
	sourcev1.ExternalArtifactKind: {
		spec:     reflect.TypeFor[sourcev1.ExternalArtifactSpec](),
		honoured: []string{"sourceRef"},
	},
}

type specFieldPolicy struct {
	spec     reflect.Type
	honoured []string
	// check runs the kind's unsupported() over a spec; nil when every
	// field must be honoured.
	check func(spec reflect.Value) error
}

// TestNoSpecFieldIsSilentlyIgnored walks every field of the upstream
// spec types and fails for a field that is neither honoured nor rejected
// with UnsupportedField: a new field in a Flux API bump, or a field whose
// check was dropped, cannot pass unnoticed.
func TestNoSpecFieldIsSilentlyIgnored(t *testing.T) {
	kinds := make([]string, 0, len(specFields))
	for k := range specFields {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		p := specFields[kind]
		t.Run(kind, func(t *testing.T) {
			for _, path := range leafPaths(p.spec, "", nil) {
				if honouredPath(p.honoured, path) {
					continue
				}
				if p.check == nil {
					t.Errorf("%s: spec.%s is neither honoured nor rejected", kind, path)
					continue
				}
				spec := reflect.New(p.spec).Elem()
				setPath(spec, strings.Split(path, "."))
				err := p.check(spec)
				if err == nil {
					t.Errorf("%s: spec.%s is neither honoured nor rejected by unsupported()", kind, path)
					continue
				}
				top := strings.SplitN(path, ".", 2)[0]
				if !strings.Contains(err.Error(), "spec."+top) {
					t.Errorf("%s: spec.%s is rejected with a message that does not name it: %v", kind, path, err)
				}
			}
			for _, h := range p.honoured {
				if !honouredPathExists(p.spec, h) {
					t.Errorf("%s: honoured field %q is not in the upstream type", kind, h)
				}
			}
		})
	}
}

func honouredPath(honoured []string, path string) bool {
	for _, h := range honoured {
		if path == h || strings.HasPrefix(path, h+".") {
			return true
		}
	}
	return false
}

func honouredPathExists(t reflect.Type, h string) bool {
	for _, p := range leafPaths(t, "", nil) {
		if p == h || strings.HasPrefix(p, h+".") {
			return true
		}
	}
	return false
}

// walkable reports whether a struct type is walked into: Flux's API
// structs are; others (metav1.Duration, apiextensionsv1.JSON) are leaves.
func walkable(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && strings.HasPrefix(t.PkgPath(), "github.com/fluxcd/")
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t
}

// leafPaths lists the JSON paths of the leaves of struct type t; a slice
// of structs contributes the paths of its element.
func leafPaths(t reflect.Type, prefix string, seen map[reflect.Type]bool) []string {
	if seen == nil {
		seen = map[reflect.Type]bool{}
	}
	if seen[t] {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, inline := jsonName(f)
		if name == "-" || !f.IsExported() {
			continue
		}
		path := prefix
		if !inline {
			path = join(prefix, name)
		}
		if et := deref(f.Type); walkable(et) {
			out = append(out, leafPaths(et, path, seen)...)
			continue
		}
		out = append(out, path)
	}
	return out
}

func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	name, opts, _ := strings.Cut(tag, ",")
	if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
		return "", true
	}
	if name == "" {
		name = f.Name
	}
	return name, false
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// setPath sets the leaf at path in v to a non-zero value, allocating what
// leads to it.
func setPath(v reflect.Value, path []string) {
	for {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
			continue
		case reflect.Slice:
			if v.Len() == 0 {
				v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
			}
			v = v.Index(0)
			continue
		}
		break
	}
	if len(path) == 0 || !walkable(v.Type()) {
		nonZero(v)
		return
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, inline := jsonName(f)
		if inline {
			if et := deref(f.Type); walkable(et) && hasPath(et, path[0]) {
				setPath(v.Field(i), path)
				return
			}
			continue
		}
		if name == path[0] {
			setPath(v.Field(i), path[1:])
			return
		}
	}
	panic("no field " + path[0] + " in " + v.Type().String())
}

func hasPath(t reflect.Type, name string) bool {
	for _, p := range leafPaths(t, "", nil) {
		if p == name || strings.HasPrefix(p, name+".") {
			return true
		}
	}
	return false
}

// nonZero sets v to a value that is not its zero value.
func nonZero(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		nonZero(v.Elem())
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		nonZero(e)
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		nonZero(k)
		nonZero(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				nonZero(v.Field(i))
				return
			}
		}
	}
}
