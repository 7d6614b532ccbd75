package kinds

import (
	"sync"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// interner hands out one shared copy of each string it is given, so that
// the cached HelmReleases (and HelmCharts) do not each hold their own copy of the strings
// most of them share: their namespace and labels, the chart's name,
// version and digests, the condition types and reasons. Decoding a watch
// event allocates every string afresh; at 10,000 releases those copies
// are a tenth of the cache. It keeps at most maxInterned strings and
// starts over when full: strings already shared stay shared, and a
// release whose values are its own (a unique config digest) costs one
// entry, not a leak.
type interner struct {
	mu      sync.Mutex
	strings map[string]string
}

const (
	maxInterned    = 1 << 16
	maxInternedLen = 256
)

func (in *interner) intern(s string) string {
	if s == "" || len(s) > maxInternedLen {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.strings[s]; ok {
		return v
	}
	if in.strings == nil || len(in.strings) >= maxInterned {
		in.strings = make(map[string]string, 1024)
	}
	in.strings[s] = s
	return s
}

// CacheTransform is the engine's cache transform: it strips managedFields
// from every object and interns the strings the cached objects of a kind
// share (the kind's entry says which: HelmReleases and HelmCharts).
func CacheTransform() toolscache.TransformFunc { return cacheTransform(&interner{}) }

func cacheTransform(in *interner) toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return obj, err
		}
		if o, ok := obj.(client.Object); ok {
			if k, ok := Of(o); ok && k.intern != nil {
				k.intern(in, o)
			}
		}
		return obj, nil
	}
}

// str interns *s in place, whatever its string type.
func str[S ~string](in *interner, s *S) {
	*s = S(in.intern(string(*s)))
}

// helmRelease interns the strings of a HelmRelease that releases share:
// not its name, UID, resourceVersion or messages, which are its own.
func (in *interner) helmRelease(hr *helmv2.HelmRelease) {
	in.objectMeta(&hr.ObjectMeta)
	s := &hr.Spec
	if r := s.ChartRef; r != nil {
		str(in, &r.APIVersion)
		str(in, &r.Kind)
		str(in, &r.Name)
		str(in, &r.Namespace)
	}
	if c := s.Chart; c != nil {
		str(in, &c.Kind)
		str(in, &c.Spec.Chart)
		str(in, &c.Spec.Version)
		str(in, &c.Spec.ReconcileStrategy)
		str(in, &c.Spec.URL)
		// A template of kind OCIRepository (Flux 2.10) has no sourceRef.
		if r := c.Spec.SourceRef; r != nil {
			str(in, &r.APIVersion)
			str(in, &r.Kind)
			str(in, &r.Name)
			str(in, &r.Namespace)
		}
	}
	str(in, &s.TargetNamespace)
	str(in, &s.StorageNamespace)
	str(in, &s.ServiceAccountName)
	for i := range s.ValuesFrom {
		str(in, &s.ValuesFrom[i].Kind)
		str(in, &s.ValuesFrom[i].Name)
		str(in, &s.ValuesFrom[i].ValuesKey)
	}
	st := &hr.Status
	in.conditions(st.Conditions)
	for _, h := range st.History {
		if h == nil {
			continue
		}
		str(in, &h.APIVersion)
		str(in, &h.Namespace)
		str(in, &h.Status)
		str(in, &h.Action)
		str(in, &h.ChartName)
		str(in, &h.ChartVersion)
		str(in, &h.AppVersion)
		str(in, &h.ConfigDigest)
		str(in, &h.OCIDigest)
	}
	str(in, &st.HelmChart)
	str(in, &st.StorageNamespace)
	str(in, &st.LastAttemptedRevision)
	str(in, &st.LastAttemptedRevisionDigest)
	str(in, &st.LastAttemptedValuesChecksum)
	str(in, &st.LastAttemptedConfigDigest)
	str(in, &st.LastAttemptedReleaseAction)
}

// helmChart interns the strings of a HelmChart that charts share.
func (in *interner) helmChart(c *sourcev1.HelmChart) {
	in.objectMeta(&c.ObjectMeta)
	s := &c.Spec
	str(in, &s.Chart)
	str(in, &s.Version)
	str(in, &s.ReconcileStrategy)
	str(in, &s.SourceRef.APIVersion)
	str(in, &s.SourceRef.Kind)
	str(in, &s.SourceRef.Name)
	for i := range s.ValuesFiles {
		str(in, &s.ValuesFiles[i])
	}
	st := &c.Status
	in.conditions(st.Conditions)
	str(in, &st.ObservedSourceArtifactRevision)
	str(in, &st.ObservedChartName)
	if a := st.Artifact; a != nil {
		str(in, &a.Revision)
		str(in, &a.Digest)
	}
}

func (in *interner) objectMeta(m *metav1.ObjectMeta) {
	str(in, &m.Namespace)
	if len(m.Labels) > 0 {
		labels := make(map[string]string, len(m.Labels))
		for k, v := range m.Labels {
			labels[in.intern(k)] = in.intern(v)
		}
		m.Labels = labels
	}
	for i := range m.Finalizers {
		str(in, &m.Finalizers[i])
	}
	for i := range m.OwnerReferences {
		str(in, &m.OwnerReferences[i].APIVersion)
		str(in, &m.OwnerReferences[i].Kind)
	}
}

func (in *interner) conditions(cs []metav1.Condition) {
	for i := range cs {
		str(in, &cs[i].Type)
		str(in, &cs[i].Status)
		str(in, &cs[i].Reason)
	}
}
