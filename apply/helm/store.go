package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
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
// updates, whatever the action (Helm's rollback has no label option), and
// logs what was written.
type stampDriver struct {
	driver.Driver
	holder  Holder
	written *writeLog
}

func (d *stampDriver) Create(key string, rls ri.Releaser) error {
	d.stamp(rls)
	err := d.Driver.Create(key, rls)
	if err == nil {
		d.written.add(rls, false)
	}
	return err
}

func (d *stampDriver) Update(key string, rls ri.Releaser) error {
	d.stamp(rls)
	err := d.Driver.Update(key, rls)
	if err == nil {
		d.written.add(rls, false)
	}
	return err
}

func (d *stampDriver) Delete(key string) (ri.Releaser, error) {
	rls, err := d.Driver.Delete(key)
	if err == nil {
		d.written.add(rls, true)
	}
	return rls, err
}

// Record is a release record an action wrote (Outcome.Records).
type Record struct {
	// Action is the action that wrote it.
	Action Action
	// Release is the record as stored, without the chart's templates,
	// files and values (its metadata stays): as Helm's storage decodes it.
	Release *releasev1.Release
	// Deleted says the action deleted the record (an uninstall that
	// keeps no history).
	Deleted bool
}

// writeLog keeps the records a session's actions wrote: per action and
// revision, the last write.
type writeLog struct {
	action  Action
	records []Record
}

func (l *writeLog) add(rls ri.Releaser, deleted bool) {
	r, ok := rls.(*releasev1.Release)
	if l == nil || !ok || r == nil {
		return
	}
	c := storedCopy(r)
	for i := len(l.records) - 1; i >= 0 && l.records[i].Action == l.action; i-- {
		if l.records[i].Release.Version == r.Version && l.records[i].Release.Name == r.Name {
			l.records[i] = Record{Action: l.action, Release: c, Deleted: deleted}
			return
		}
	}
	l.records = append(l.records, Record{Action: l.action, Release: c, Deleted: deleted})
}

// storedCopy is r as Helm's storage would give it back: encoded to JSON
// and decoded (Helm changes its objects after writing them), without the
// chart's content, which nothing here reads.
func storedCopy(r *releasev1.Release) *releasev1.Release {
	c := *r
	if r.Chart != nil {
		c.Chart = &chartv2.Chart{Metadata: r.Chart.Metadata}
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return &c
	}
	out := &releasev1.Release{}
	if err := json.Unmarshal(b, out); err != nil {
		return &c
	}
	out.Labels = maps.Clone(r.Labels)
	return out
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
