package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"time"

	ri "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// Labels this package records on release Secrets.
const (
	// LabelHolder is the ID of the holder that wrote the revision.
	LabelHolder = "helm.cozystack.io/holder"
	// LabelHolderStart is the holder's start time, in Unix nanoseconds.
	LabelHolderStart = "helm.cozystack.io/holder-start"
	// LabelHolderClaim is what gave the holder the right to write the
	// revision (Options.Claim); absent when nothing was claimed.
	LabelHolderClaim = "helm.cozystack.io/holder-claim"
	// LabelDigest is a digest of the chart and values of the revision.
	LabelDigest = "helm.cozystack.io/digest"
)

// stampDriver records the holder on every revision Helm creates or
// updates, whatever the action (Helm's rollback has no label option).
type stampDriver struct {
	driver.Driver
	holder Holder
}

func (d *stampDriver) Create(key string, rls ri.Releaser) error {
	d.stamp(rls)
	return d.Driver.Create(key, rls)
}

func (d *stampDriver) Update(key string, rls ri.Releaser) error {
	d.stamp(rls)
	return d.Driver.Update(key, rls)
}

func (d *stampDriver) stamp(rls ri.Releaser) {
	r, ok := rls.(*releasev1.Release)
	if !ok {
		return
	}
	l := maps.Clone(r.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelHolder] = labelValue(d.holder.ID)
	l[LabelHolderStart] = strconv.FormatInt(d.holder.Start.UnixNano(), 10)
	if d.holder.Claim != "" {
		l[LabelHolderClaim] = d.holder.Claim
	} else {
		delete(l, LabelHolderClaim)
	}
	r.Labels = l
}

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// labelValue makes s a valid label value; a value that had to change gets
// a hash suffix so that distinct IDs stay distinct.
func labelValue(s string) string {
	v := labelUnsafe.ReplaceAllString(s, "_")
	if v == s && len(v) <= 63 && (v == "" || isAlnum(v[0]) && isAlnum(v[len(v)-1])) {
		return v
	}
	sum := sha256.Sum256([]byte(s))
	suffix := hex.EncodeToString(sum[:5])
	if len(v) > 52 {
		v = v[:52]
	}
	return "x" + v + "-" + suffix
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// holderOf reads the holder recorded on a revision.
func holderOf(r *releasev1.Release) Holder {
	h := Holder{ID: r.Labels[LabelHolder], Claim: r.Labels[LabelHolderClaim]}
	if ns, err := strconv.ParseInt(r.Labels[LabelHolderStart], 10, 64); err == nil {
		h.Start = time.Unix(0, ns)
	}
	return h
}

// history is a release's revisions, newest first.
type history []*releasev1.Release

func (s *session) history() (history, error) {
	hs, err := s.cfg.Releases.History(s.rel.Name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, err
	}
	out := make(history, 0, len(hs))
	for _, h := range hs {
		if r, ok := h.(*releasev1.Release); ok {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version > out[j].Version })
	return out, nil
}

func (h history) latest() *releasev1.Release {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

func (h history) deployed() *releasev1.Release {
	for _, r := range h {
		if r.Info != nil && r.Info.Status == rcommon.StatusDeployed {
			return r
		}
	}
	return nil
}

// failure is Helm's description of the newest failed revision, "" when
// none failed.
func (h history) failure() string {
	for _, r := range h {
		if statusOf(r) == rcommon.StatusFailed {
			return r.Info.Description
		}
	}
	return ""
}

func statusOf(r *releasev1.Release) rcommon.Status {
	if r == nil || r.Info == nil {
		return ""
	}
	return r.Info.Status
}

// RecordedID is the form in which a holder's ID is recorded on release
// revisions (Holder.ID of a revision read back), for comparing an ID from
// elsewhere, such as a replica's Lease, with a recorded holder.
func RecordedID(id string) string { return labelValue(id) }
