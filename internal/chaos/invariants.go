package chaos

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// Flux's owner labels on the objects it applies.
const (
	kustomizeNameLabel      = "kustomize.toolkit.fluxcd.io/name"
	kustomizeNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"
	helmNameLabel           = "helm.toolkit.fluxcd.io/name"
	helmNamespaceLabel      = "helm.toolkit.fluxcd.io/namespace"
)

// Object is one object the campaign's units apply, as read back.
type Object struct {
	Kind, Namespace, Name string
	Labels                map[string]string
}

func (o Object) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// Snapshot is what Check reads: the units, their sources, every Helm
// release record and the applied objects of the campaign's namespaces,
// with what the campaign expects.
type Snapshot struct {
	HelmReleases    []helmv2.HelmRelease
	Kustomizations  []kustomizev1.Kustomization
	GitRepositories []sourcev1.GitRepository
	OCIRepositories []sourcev1.OCIRepository
	// Releases are every Helm release record (one per revision).
	Releases []*releasev1.Release
	// Objects are every object of the kinds the units apply in the
	// campaign's namespaces (ConfigMaps), whoever applied them.
	Objects []Object
	// Broken names the units ("Kind namespace/name") that must be
	// Ready=False, with a substring their message must hold.
	Broken map[string]string
	// Seen is the highest release version seen earlier for each release
	// ("namespace/name") of a HelmRelease that still exists: a lower one
	// now means the release was reinstalled or lost.
	Seen map[string]int
}

// Violation is one invariant that does not hold.
type Violation struct {
	// Invariant is one of the names of docs/reliability.md: pending,
	// history, revisions, orphan, lost, ready, lie.
	Invariant string
	// Object names the unit, release or object.
	Object string
	Detail string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Object + ": " + v.Detail }

// Check returns every invariant of s that does not hold, sorted.
func Check(s Snapshot) []Violation {
	var out []Violation
	add := func(inv, obj, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Object: obj, Detail: fmt.Sprintf(format, args...)})
	}
	byRelease := map[string][]*releasev1.Release{}
	for _, r := range s.Releases {
		key := r.Namespace + "/" + r.Name
		byRelease[key] = append(byRelease[key], r)
		if r.Info != nil && strings.HasPrefix(string(r.Info.Status), "pending-") {
			add("pending", fmt.Sprintf("release %s v%d", key, r.Version), "left %s", r.Info.Status)
		}
	}
	for _, rs := range byRelease {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Version < rs[j].Version })
	}
	checkHelmReleases(s, byRelease, add)
	checkKustomizations(s, add)
	checkReady(s, add)
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

type addFunc func(inv, obj, format string, args ...any)

// releaseKey is where a HelmRelease's release records live
// ("storageNamespace/releaseName").
func releaseKey(hr *helmv2.HelmRelease) string {
	if len(hr.Status.History) > 0 {
		ns := hr.Status.StorageNamespace
		if ns == "" {
			ns = hr.Namespace
		}
		return ns + "/" + hr.Status.History[0].Name
	}
	ns := hr.Spec.StorageNamespace
	if ns == "" {
		ns = hr.Namespace
	}
	return ns + "/" + hr.GetReleaseName()
}

func checkHelmReleases(s Snapshot, byRelease map[string][]*releasev1.Release, add addFunc) {
	owned := map[string]bool{}
	for i := range s.HelmReleases {
		hr := &s.HelmReleases[i]
		name := "HelmRelease " + hr.Namespace + "/" + hr.Name
		key := releaseKey(hr)
		owned[key] = true
		recs := byRelease[key]
		var latest *releasev1.Release
		if len(recs) > 0 {
			latest = recs[len(recs)-1]
		}
		// History matches the records.
		if h := hr.Status.History; len(h) > 0 {
			switch {
			case latest == nil:
				add("history", name, "status.history names v%d %s but release %s has no record", h[0].Version, h[0].Status, key)
			case latest.Version != h[0].Version:
				add("history", name, "status.history's latest is v%d but release %s's latest record is v%d %s", h[0].Version, key, latest.Version, statusOf(latest))
			}
			for _, snap := range h {
				for _, r := range recs {
					if r.Version == snap.Version && statusOf(r) != snap.Status {
						add("history", name, "status.history says v%d %s, the record says %s", snap.Version, snap.Status, statusOf(r))
					}
				}
			}
		} else if latest != nil && !hr.DeletionTimestamp.IsZero() {
			// Being uninstalled: records may remain a moment.
		} else if latest != nil && isReady(hr.Status.Conditions) {
			add("history", name, "Ready with no status.history, but release %s has v%d", key, latest.Version)
		}
		// Revisions: never lower than seen (no reinstall), no upgrade that
		// repeats the previous successful revision.
		if seen := s.Seen[key]; seen > 0 && (latest == nil || latest.Version < seen) {
			v := 0
			if latest != nil {
				v = latest.Version
			}
			add("revisions", name, "release %s was at v%d and is now at v%d: reinstalled or lost", key, seen, v)
		}
		for j := 1; j < len(recs); j++ {
			prev, cur := recs[j-1], recs[j]
			if !succeeded(prev) || isRollback(cur) || prev.Version+1 != cur.Version {
				continue
			}
			if sameChart(prev, cur) && sameValues(prev.Config, cur.Config) {
				add("revisions", name, "v%d repeats v%d (%s): the same chart %s and values, an upgrade no spec change explains",
					cur.Version, prev.Version, statusOf(prev), chartVersion(cur))
			}
		}
		// Conditions never lie: Ready says the latest record is deployed
		// with the spec's values and the source's chart.
		if isReady(hr.Status.Conditions) && latest != nil {
			if statusOf(latest) != "deployed" {
				add("lie", name, "Ready=True but release %s v%d is %s", key, latest.Version, statusOf(latest))
			}
			if want := specValues(hr); !sameValues(want, latest.Config) {
				add("lie", name, "Ready=True but release %s v%d has values %s, the spec says %s", key, latest.Version, jsonOf(latest.Config), jsonOf(want))
			}
			if src := ociArtifact(s, hr); src != "" && chartVersion(latest) != src {
				add("lie", name, "Ready=True at chart %s but the source's artifact is chart %s", chartVersion(latest), src)
			}
			if hr.Status.ObservedGeneration != hr.Generation {
				add("lie", name, "Ready=True for generation %d, the object is at %d", hr.Status.ObservedGeneration, hr.Generation)
			}
		}
	}
	// Release records of no HelmRelease: orphans.
	for key, recs := range byRelease {
		if !owned[key] {
			add("orphan", "release "+key, "%d records (latest v%d %s) and no HelmRelease", len(recs), recs[len(recs)-1].Version, statusOf(recs[len(recs)-1]))
		}
	}
	// Objects: each with Helm's owner labels is in its release's latest
	// manifest, and each object of that manifest exists.
	hrs := map[string]*helmv2.HelmRelease{}
	for i := range s.HelmReleases {
		hrs[s.HelmReleases[i].Namespace+"/"+s.HelmReleases[i].Name] = &s.HelmReleases[i]
	}
	exists := map[string]bool{}
	for _, o := range s.Objects {
		exists[o.String()] = true
	}
	// An object is the release's when the last deployed revision or the
	// latest one lists it: a failed install or upgrade that Helm did not
	// remedy (no retries left) keeps what it created, listed in its
	// record, as Helm and Flux leave it; the next successful action
	// adopts it, an uninstall removes it. Each object of the last
	// deployed revision must exist.
	manifests, claimed := map[string]map[string]bool{}, map[string]map[string]bool{}
	for key, recs := range byRelease {
		claimed[key] = map[string]bool{}
		if r := lastSucceeded(recs); r != nil {
			manifests[key] = manifestObjects(r)
			maps.Copy(claimed[key], manifests[key])
		}
		if len(recs) > 0 {
			maps.Copy(claimed[key], manifestObjects(recs[len(recs)-1]))
		}
	}
	for _, o := range s.Objects {
		ns, n := o.Labels[helmNamespaceLabel], o.Labels[helmNameLabel]
		if n == "" {
			continue
		}
		hr := hrs[ns+"/"+n]
		switch {
		case hr == nil:
			add("orphan", o.String(), "labelled for HelmRelease %s/%s, which does not exist", ns, n)
		case !claimed[releaseKey(hr)][o.String()]:
			add("orphan", o.String(), "labelled for HelmRelease %s/%s, whose release %s does not list it", ns, n, releaseKey(hr))
		}
	}
	for key, objs := range manifests {
		if !owned[key] {
			continue
		}
		for o := range objs {
			if !exists[o] {
				add("lost", o, "in release %s's manifest, not in the cluster", key)
			}
		}
	}
}

func checkKustomizations(s Snapshot, add addFunc) {
	exists := map[string]bool{}
	for _, o := range s.Objects {
		exists[o.String()] = true
	}
	ks := map[string]*kustomizev1.Kustomization{}
	for i := range s.Kustomizations {
		k := &s.Kustomizations[i]
		ks[k.Namespace+"/"+k.Name] = k
		name := "Kustomization " + k.Namespace + "/" + k.Name
		if k.Status.Inventory != nil {
			for _, e := range k.Status.Inventory.Entries {
				o, ok := inventoryObject(e.ID)
				if ok && o.Kind == "ConfigMap" && !exists[o.String()] {
					add("lost", o.String(), "in %s's inventory, not in the cluster", name)
				}
			}
		}
		if isReady(k.Status.Conditions) {
			if rev := gitArtifact(s, k); rev != "" && k.Status.LastAppliedRevision != rev {
				add("lie", name, "Ready=True at revision %s, the source's artifact is %s", k.Status.LastAppliedRevision, rev)
			}
			if k.Status.ObservedGeneration != k.Generation {
				add("lie", name, "Ready=True for generation %d, the object is at %d", k.Status.ObservedGeneration, k.Generation)
			}
		}
	}
	for _, o := range s.Objects {
		ns, n := o.Labels[kustomizeNamespaceLabel], o.Labels[kustomizeNameLabel]
		if n == "" {
			continue
		}
		k := ks[ns+"/"+n]
		if k == nil {
			add("orphan", o.String(), "labelled for Kustomization %s/%s, which does not exist", ns, n)
			continue
		}
		listed := false
		if k.Status.Inventory != nil {
			for _, e := range k.Status.Inventory.Entries {
				if io, ok := inventoryObject(e.ID); ok && io.String() == o.String() {
					listed = true
				}
			}
		}
		if !listed {
			add("orphan", o.String(), "labelled for Kustomization %s/%s, whose inventory does not list it", ns, n)
		}
	}
}

// checkReady: every unit is Ready, or Ready=False with the cause the
// campaign planted.
func checkReady(s Snapshot, add addFunc) {
	type unit struct {
		name  string
		conds []metav1.Condition
	}
	var units []unit
	for _, o := range s.HelmReleases {
		units = append(units, unit{"HelmRelease " + o.Namespace + "/" + o.Name, o.Status.Conditions})
	}
	for _, o := range s.Kustomizations {
		units = append(units, unit{"Kustomization " + o.Namespace + "/" + o.Name, o.Status.Conditions})
	}
	for _, o := range s.GitRepositories {
		units = append(units, unit{"GitRepository " + o.Namespace + "/" + o.Name, o.Status.Conditions})
	}
	for _, o := range s.OCIRepositories {
		units = append(units, unit{"OCIRepository " + o.Namespace + "/" + o.Name, o.Status.Conditions})
	}
	for _, u := range units {
		c := apimeta.FindStatusCondition(u.conds, meta.ReadyCondition)
		cause, broken := s.Broken[u.name]
		switch {
		case c == nil:
			add("ready", u.name, "no Ready condition")
		case broken && c.Status != metav1.ConditionFalse:
			add("ready", u.name, "Ready=%s, but it is broken on purpose (%q)", c.Status, cause)
		case broken && !strings.Contains(c.Message, cause):
			add("ready", u.name, "Ready=False (%s: %s) does not name the cause %q", c.Reason, c.Message, cause)
		case !broken && c.Status != metav1.ConditionTrue:
			add("ready", u.name, "Ready=%s (%s: %s) after every fault ended", c.Status, c.Reason, c.Message)
		}
	}
}

func isReady(conds []metav1.Condition) bool {
	return apimeta.IsStatusConditionTrue(conds, meta.ReadyCondition)
}

func statusOf(r *releasev1.Release) string {
	if r.Info == nil {
		return "unknown"
	}
	return string(r.Info.Status)
}

func succeeded(r *releasev1.Release) bool {
	s := statusOf(r)
	return s == "deployed" || s == "superseded"
}

func isRollback(r *releasev1.Release) bool {
	return r.Info != nil && strings.HasPrefix(r.Info.Description, "Rollback")
}

func lastSucceeded(recs []*releasev1.Release) *releasev1.Release {
	for i := len(recs) - 1; i >= 0; i-- {
		if statusOf(recs[i]) == "deployed" {
			return recs[i]
		}
	}
	return nil
}

func chartVersion(r *releasev1.Release) string {
	if r.Chart == nil || r.Chart.Metadata == nil {
		return ""
	}
	return r.Chart.Metadata.Version
}

func sameChart(a, b *releasev1.Release) bool {
	return chartVersion(a) == chartVersion(b) && a.Chart != nil && b.Chart != nil && a.Chart.Metadata.Name == b.Chart.Metadata.Name
}

// sameValues compares values as JSON, so that an empty map and none are
// the same and numbers compare by value.
func sameValues(a, b map[string]any) bool {
	return reflect.DeepEqual(normalize(a), normalize(b))
}

func normalize(v map[string]any) any {
	if len(v) == 0 {
		return nil
	}
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func jsonOf(v map[string]any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func specValues(hr *helmv2.HelmRelease) map[string]any {
	if hr.Spec.Values == nil || len(hr.Spec.Values.Raw) == 0 {
		return nil
	}
	var v map[string]any
	_ = json.Unmarshal(hr.Spec.Values.Raw, &v)
	return v
}

// ociArtifact is the chart version of the OCIRepository a HelmRelease's
// chartRef names ("1.1.0" of "1.1.0@sha256:..."), "" when unknown.
func ociArtifact(s Snapshot, hr *helmv2.HelmRelease) string {
	ref := hr.Spec.ChartRef
	if ref == nil || ref.Kind != sourcev1.OCIRepositoryKind {
		return ""
	}
	ns := ref.Namespace
	if ns == "" {
		ns = hr.Namespace
	}
	for _, o := range s.OCIRepositories {
		if o.Namespace == ns && o.Name == ref.Name && o.Status.Artifact != nil {
			// helm-controller's (and cozy-aio's) chart version: the
			// artifact's version with its digest as build metadata.
			rev, _, _ := strings.Cut(o.Status.Artifact.Revision, "@")
			v, _, err := helm.ChartVersionWithDigest(strings.ReplaceAll(rev, "_", "+"), o.Status.Artifact.Revision)
			if err != nil {
				return "unusable revision " + o.Status.Artifact.Revision
			}
			return v
		}
	}
	return ""
}

func gitArtifact(s Snapshot, k *kustomizev1.Kustomization) string {
	ns := k.Spec.SourceRef.Namespace
	if ns == "" {
		ns = k.Namespace
	}
	for _, g := range s.GitRepositories {
		if g.Namespace == ns && g.Name == k.Spec.SourceRef.Name && g.Status.Artifact != nil {
			return g.Status.Artifact.Revision
		}
	}
	return ""
}

// inventoryObject reads an inventory ID, "namespace_name_group_kind".
func inventoryObject(id string) (Object, bool) {
	f := strings.Split(id, "_")
	if len(f) != 4 {
		return Object{}, false
	}
	return Object{Namespace: f[0], Name: f[1], Kind: f[3]}, true
}

// manifestObjects names the objects of a release's manifest.
func manifestObjects(r *releasev1.Release) map[string]bool {
	out := map[string]bool{}
	for _, doc := range strings.Split(r.Manifest, "\n---") {
		var m struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if yaml.Unmarshal([]byte(doc), &m) != nil || m.Kind == "" {
			continue
		}
		ns := m.Metadata.Namespace
		if ns == "" {
			ns = r.Namespace
		}
		out[Object{Kind: m.Kind, Namespace: ns, Name: m.Metadata.Name}.String()] = true
	}
	return out
}
