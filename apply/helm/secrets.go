package helm

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	ri "helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kblabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// releaseSecrets stores releases in Secrets exactly as Helm's Secret
// driver does (same names, labels, type and base64(gzip(JSON)) payload),
// so that the helm CLI and Flux read what it writes and the other way
// round. It differs in cost: Helm allocates a new best-compression gzip
// writer (about 1.2 MB) for every revision it writes, which was two thirds
// of everything cozy-aio allocated while installing a thousand releases;
// here writers and readers are pooled. And it fences its writes (see
// recordFence): an update or delete carries the resourceVersion this
// driver last read or wrote, so that it never overwrites a record another
// holder wrote since. A driver lives for one session.
type releaseSecrets struct {
	impl typedcorev1.SecretInterface
	recordFence

	// maxRecord bounds a decoded record (Options.MaxReleaseRecordBytes;
	// zero: the default).
	maxRecord int64

	// pendingAfter, when positive, holds back the create of a pending
	// revision for that long (Options.PendingAfter): an action that ends
	// sooner creates its revision once, in its final state.
	pendingAfter time.Duration
	deferMu      sync.Mutex
	deferred     *deferredRecord
}

// deferredRecord is a pending revision not written yet, encoded when Helm
// created it.
type deferredRecord struct {
	key   string
	obj   *corev1.Secret
	timer *time.Timer
}

var _ driver.Driver = (*releaseSecrets)(nil)

// systemLabels are the labels the driver manages; Get hides them, as
// Helm's driver does.
var systemLabels = map[string]bool{"name": true, "owner": true, "status": true, "version": true, "createdAt": true, "modifiedAt": true}

func (s *releaseSecrets) Name() string { return driver.SecretsDriverName }

func (s *releaseSecrets) Get(key string) (ri.Releaser, error) {
	obj, r, err := s.get(key)
	if err != nil {
		return nil, err
	}
	s.remember(key, obj.ResourceVersion)
	return r, nil
}

// get reads a revision without remembering its resourceVersion.
func (s *releaseSecrets) get(key string) (*corev1.Secret, *releasev1.Release, error) {
	obj, err := s.impl.Get(context.Background(), key, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, driver.ErrReleaseNotFound
		}
		return nil, nil, fmt.Errorf("get: failed to get %q: %w", key, err)
	}
	r, err := s.decode(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("get: failed to decode data %q: %w", key, err)
	}
	r.Labels = map[string]string{}
	for k, v := range obj.Labels {
		if !systemLabels[k] {
			r.Labels[k] = v
		}
	}
	return obj, r, nil
}

// decode reads a release Secret's record, naming the Secret when it is
// too large.
func (s *releaseSecrets) decode(obj *corev1.Secret) (*releasev1.Release, error) {
	r, err := decodeRelease(obj.Data["release"], s.maxRecord)
	if tooLarge := (*RecordTooLargeError)(nil); errors.As(err, &tooLarge) {
		tooLarge.Secret = obj.Namespace + "/" + obj.Name
	}
	return r, err
}

func (s *releaseSecrets) List(filter func(ri.Releaser) bool) ([]ri.Releaser, error) {
	list, err := s.list(map[string]string{"owner": "helm"})
	if err != nil {
		return nil, fmt.Errorf("list: failed to list: %w", err)
	}
	var out []ri.Releaser
	for _, r := range list {
		if filter(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *releaseSecrets) Query(labels map[string]string) ([]ri.Releaser, error) {
	for _, v := range labels {
		if errs := validation.IsValidLabelValue(v); len(errs) != 0 {
			return nil, fmt.Errorf("invalid label value: %q: %s", v, strings.Join(errs, "; "))
		}
	}
	list, err := s.list(labels)
	if err != nil {
		return nil, fmt.Errorf("query: failed to query with labels: %w", err)
	}
	if len(list) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return list, nil
}

// list decodes the Secrets matching labels; one that does not decode is
// skipped, as Helm's driver skips it, except a record too large to read
// in a query of one release's records: skipped, it would hide a revision
// that exists, and Helm would then write over it (which this driver
// refuses as ErrRecordConflict, a misleading word for it). Across
// releases (List), it is skipped so that it stops only its own release.
func (s *releaseSecrets) list(labels map[string]string) ([]ri.Releaser, error) {
	items, err := s.impl.List(context.Background(), metav1.ListOptions{LabelSelector: kblabels.Set(labels).AsSelector().String()})
	if err != nil {
		return nil, err
	}
	_, oneRelease := labels["name"]
	var out []ri.Releaser
	for _, item := range items.Items {
		s.remember(item.Name, item.ResourceVersion)
		r, err := s.decode(&item)
		if tooLarge := (*RecordTooLargeError)(nil); oneRelease && errors.As(err, &tooLarge) {
			return nil, err
		}
		if err != nil {
			continue
		}
		r.Labels = item.Labels
		out = append(out, r)
	}
	return out, nil
}

func (s *releaseSecrets) Create(key string, rls ri.Releaser) error {
	obj, err := secretFor(key, rls, "createdAt")
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := s.beforeWrite(key); err != nil {
		return err
	}
	if r, ok := rls.(*releasev1.Release); ok && s.pendingAfter > 0 && r.Info != nil && r.Info.Status.IsPending() && len(r.Hooks) == 0 {
		// Fenced above like a write, so nothing is applied by a holder
		// that may not write the release. Only a revision without hooks
		// is held back: applying its objects twice is harmless, so two
		// holders that both run it in a hand-off window converge, the
		// second failing on the record. A revision with hooks is recorded
		// pending before anything runs, as Helm does, so that its create
		// stops a second holder before a hook runs twice.
		s.deferMu.Lock()
		defer s.deferMu.Unlock()
		s.deferred = &deferredRecord{key: key, obj: obj}
		s.deferred.timer = time.AfterFunc(s.pendingAfter, func() { _ = s.flush() })
		return nil
	}
	return s.create(key, obj)
}

func (s *releaseSecrets) create(key string, obj *corev1.Secret) error {
	created, err := s.impl.Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			// This session's history did not have it: another holder
			// created the revision since.
			return fmt.Errorf("%w: %w", driver.ErrReleaseExists, s.conflict(key))
		}
		return fmt.Errorf("create: failed to create: %w", err)
	}
	s.remember(key, created.ResourceVersion)
	return nil
}

// flush writes the deferred pending revision, if any: when its time has
// come, before another record is written (so records change in Helm's
// order), and when the session's action ends with it still pending.
func (s *releaseSecrets) flush() error {
	s.deferMu.Lock()
	defer s.deferMu.Unlock()
	d := s.deferred
	if d == nil {
		return nil
	}
	s.deferred = nil
	d.timer.Stop()
	if err := s.beforeWrite(d.key); err != nil {
		return err
	}
	return s.create(d.key, d.obj)
}

// takeDeferred returns the deferred revision of key, no longer deferred.
func (s *releaseSecrets) takeDeferred(key string) (*deferredRecord, bool) {
	s.deferMu.Lock()
	defer s.deferMu.Unlock()
	d := s.deferred
	if d == nil || d.key != key {
		return nil, false
	}
	s.deferred = nil
	d.timer.Stop()
	return d, true
}

func (s *releaseSecrets) Update(key string, rls ri.Releaser) error {
	if _, ok := s.takeDeferred(key); ok {
		// The pending revision was never written: create it as it is now.
		obj, err := secretFor(key, rls, "createdAt")
		if err != nil {
			return fmt.Errorf("update: %w", err)
		}
		if err := s.beforeWrite(key); err != nil {
			return err
		}
		return s.create(key, obj)
	}
	if err := s.flush(); err != nil {
		return err
	}
	obj, err := secretFor(key, rls, "modifiedAt")
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	rv, ok := s.version(key)
	if !ok {
		// Not read in this session (Helm reads the history before it
		// writes, so this is rare): read it now rather than write blind.
		got, err := s.impl.Get(context.Background(), key, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("update: failed to update %q: %w", key, err)
		}
		rv = got.ResourceVersion
	}
	if err := s.beforeWrite(key); err != nil {
		return err
	}
	obj.ResourceVersion = rv
	updated, err := s.impl.Update(context.Background(), obj, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return s.conflict(key)
		}
		return fmt.Errorf("update: failed to update: %w", err)
	}
	s.remember(key, updated.ResourceVersion)
	return nil
}

// Delete reads the revision, as Helm's driver does, to return it, and
// deletes it on the condition that it is still the version this session
// knew (or, for one it never read, the version just read).
func (s *releaseSecrets) Delete(key string) (ri.Releaser, error) {
	if err := s.flush(); err != nil {
		return nil, err
	}
	rv, known := s.version(key)
	obj, r, err := s.get(key)
	if err != nil {
		if known && errors.Is(err, driver.ErrReleaseNotFound) {
			return nil, s.conflict(key)
		}
		return nil, err
	}
	if !known {
		rv = obj.ResourceVersion
	}
	if err := s.beforeWrite(key); err != nil {
		return nil, err
	}
	pre := &metav1.Preconditions{ResourceVersion: &rv}
	if err := s.impl.Delete(context.Background(), key, metav1.DeleteOptions{Preconditions: pre}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil, s.conflict(key)
		}
		return nil, err
	}
	s.forget(key)
	return r, nil
}

// secretFor is the Secret of one revision; stamp is the label that
// records when (createdAt or modifiedAt).
func secretFor(key string, rls ri.Releaser, stamp string) (*corev1.Secret, error) {
	r, ok := rls.(*releasev1.Release)
	if !ok || r == nil || r.Info == nil {
		return nil, fmt.Errorf("unsupported release type %T", rls)
	}
	data, err := encodeRelease(r)
	if err != nil {
		return nil, fmt.Errorf("failed to encode release %q: %w", r.Name, err)
	}
	labels := maps.Clone(r.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[stamp] = strconv.FormatInt(time.Now().Unix(), 10)
	labels["name"] = r.Name
	labels["owner"] = "helm"
	labels["status"] = r.Info.Status.String()
	labels["version"] = strconv.Itoa(r.Version)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: labels},
		Type:       "helm.sh/release.v1",
		Data:       map[string][]byte{"release": data},
	}, nil
}

var (
	gzipWriters = sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestCompression)
		return w
	}}
	gzipReaders sync.Pool
	gzipMagic   = []byte{0x1f, 0x8b, 0x08}
)

// encodeRelease is base64(gzip(JSON)), Helm's storage format.
func encodeRelease(r *releasev1.Release) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(buf.Len()))
	base64.StdEncoding.Encode(out, buf.Bytes())
	return out, nil
}

// decodeRelease reads Helm's storage format; a payload without the gzip
// header is plain JSON, as Helm wrote before it compressed. Neither the
// payload nor what it inflates to may pass limit bytes (zero or less:
// DefaultMaxReleaseRecordBytes): anyone who can write a Secret in the
// storage namespace writes records, and a few hundred kilobytes of gzip
// inflate to gigabytes. Past it, the error is a *RecordTooLargeError
// without the Secret, which the caller names.
func decodeRelease(data []byte, limit int64) (*releasev1.Release, error) {
	if limit <= 0 {
		limit = DefaultMaxReleaseRecordBytes
	}
	// Padding makes DecodedLen up to 2 more than the bytes decoded.
	if int64(base64.StdEncoding.DecodedLen(len(data))) > limit+2 {
		return nil, &RecordTooLargeError{Limit: limit}
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(data)))
	n, err := base64.StdEncoding.Decode(b, data)
	if err != nil {
		return nil, err
	}
	b = b[:n]
	if bytes.HasPrefix(b, gzipMagic) {
		if b, err = inflate(b, limit); err != nil {
			return nil, err
		}
	}
	if int64(len(b)) > limit {
		return nil, &RecordTooLargeError{Limit: limit}
	}
	var r releasev1.Release
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// inflate gunzips gz, whose output must hold at most limit bytes. It
// inflates twice: first into nothing, counting, at most limit+1 bytes (one
// more than limit tells that it is too large); then into a buffer of the
// size counted. A record's trailer states its size, but anyone who writes
// the Secret writes the trailer too: trusting it, or growing a buffer as
// the output comes, held up to limit bytes for each record that inflates
// past it, and a tenant can write many. Counting first costs one more
// inflation of a record, a fraction of a millisecond for Helm's sizes.
func inflate(gz []byte, limit int64) ([]byte, error) {
	zr, err := gzipReader(gz)
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(io.Discard, io.LimitReader(zr, limit+1))
	gzipReaders.Put(zr)
	switch {
	case n > limit: // whatever else the stream holds
		return nil, &RecordTooLargeError{Limit: limit}
	case err != nil:
		return nil, err
	}
	if zr, err = gzipReader(gz); err != nil {
		return nil, err
	}
	defer gzipReaders.Put(zr)
	buf := make([]byte, n)
	if _, err := io.ReadFull(zr, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// gzipReader returns a pooled reader of gz.
func gzipReader(gz []byte) (*gzip.Reader, error) {
	if v := gzipReaders.Get(); v != nil {
		zr := v.(*gzip.Reader)
		return zr, zr.Reset(bytes.NewReader(gz))
	}
	return gzip.NewReader(bytes.NewReader(gz))
}
