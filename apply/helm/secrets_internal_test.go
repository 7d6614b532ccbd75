package helm

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	ri "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recordBomb is the payload of a release record, base64(gzip(JSON)) as
// Helm stores it, whose manifest is size spaces (rounded up to MiB): it
// is written as a stream, and a gzip of spaces is some 1,000 times
// smaller than they are, so it costs little to build what inflates to
// hundreds of megabytes.
func recordBomb(name, namespace string, version int, size int64) []byte {
	var out bytes.Buffer
	b64 := base64.NewEncoder(base64.StdEncoding, &out)
	zw, _ := gzip.NewWriterLevel(b64, gzip.BestSpeed)
	fmt.Fprintf(zw, `{"name":%q,"namespace":%q,"version":%d,"info":{"status":"deployed"},"manifest":"`, name, namespace, version)
	chunk := bytes.Repeat([]byte{' '}, 1<<20)
	for n := int64(0); n < size; n += int64(len(chunk)) {
		_, _ = zw.Write(chunk)
	}
	_, _ = io.WriteString(zw, `"}`)
	_ = zw.Close()
	_ = b64.Close()
	return out.Bytes()
}

// payloads are a record's JSON stored plain (as Helm did before it
// compressed) and gzipped, and gzipped with a trailer that states a
// wrong size (ISIZE), which must change nothing but the buffer's growth.
func payloads(t *testing.T, plain []byte) map[string][]byte {
	t.Helper()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	understated := bytes.Clone(gz.Bytes())
	binary.LittleEndian.PutUint32(understated[len(understated)-4:], 10)
	b64 := func(b []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(b)) }
	return map[string][]byte{"plain": b64(plain), "gzip": b64(gz.Bytes()), "gzip stating 10 bytes": b64(understated)}
}

func TestDecodeReleaseAtAndPastTheLimit(t *testing.T) {
	rel := &releasev1.Release{Name: "app", Namespace: "ns", Version: 3, Manifest: strings.Repeat("kind: ConfigMap\n", 200),
		Info: &releasev1.Info{Status: rcommon.StatusDeployed}}
	data, err := encodeRelease(rel)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := decodePlain(data)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(plain))
	for name, payload := range payloads(t, plain) {
		r, err := decodeRelease(payload, size)
		if name == "gzip stating 10 bytes" {
			// Read to its end within the limit, it fails gzip's own check.
			if tooLarge := (*RecordTooLargeError)(nil); err == nil || errors.As(err, &tooLarge) {
				t.Fatalf("%s at the limit: %v, want gzip's checksum error", name, err)
			}
		} else if err != nil || r.Version != 3 || r.Manifest != rel.Manifest {
			t.Fatalf("%s at the limit (%d bytes): %v", name, size, err)
		}
		var tooLarge *RecordTooLargeError
		if _, err := decodeRelease(payload, size-1); !errors.As(err, &tooLarge) || tooLarge.Limit != size-1 {
			t.Fatalf("%s one byte past the limit: %v, want a *RecordTooLargeError of limit %d", name, err, size-1)
		}
	}
}

// decodePlain is the JSON inside a payload this package encoded.
func decodePlain(data []byte) ([]byte, error) {
	gz, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func TestRecordTooLargeNamesTheSecretAndTheOption(t *testing.T) {
	const limit = 1 << 20
	s := &releaseSecrets{maxRecord: limit}
	obj := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sh.helm.release.v1.app.v1"},
		Data:       map[string][]byte{"release": recordBomb("app", "ns", 1, 100<<20)},
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := s.decode(obj)
	runtime.ReadMemStats(&after)
	var tooLarge *RecordTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Secret != "ns/sh.helm.release.v1.app.v1" || tooLarge.Limit != limit {
		t.Fatalf("decoding 100 MiB with a limit of 1 MiB: %v", err)
	}
	want := "release record Secret ns/sh.helm.release.v1.app.v1 decompresses past 1048576 bytes (Options.MaxReleaseRecordBytes)"
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want it to start with %q", err, want)
	}
	// Inflating stops at the limit: what was allocated is the limit's
	// buffer, the payload (about 140 KB) and the gzip reader's state.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2*limit {
		t.Fatalf("decoding allocated %d bytes, want at most %d", alloc, 2*limit)
	}
	// With no limit set, the default applies.
	if _, err := (&releaseSecrets{}).decode(obj); !errors.As(err, &tooLarge) || tooLarge.Limit != DefaultMaxReleaseRecordBytes {
		t.Fatalf("decoding 100 MiB with the default limit: %v", err)
	}
}

// tooLargeDriver has one release whose record is too large to read.
type tooLargeDriver struct {
	driver.Driver
	queries int
}

func (d *tooLargeDriver) Query(map[string]string) ([]ri.Releaser, error) {
	d.queries++
	return nil, fmt.Errorf("query: %w", &RecordTooLargeError{Secret: "ns/sh.helm.release.v1.app.v1", Limit: 1})
}

// A record too large to read is read once per session, not inflated
// again on each of Helm's queries.
func TestMemoDriverRemembersATooLargeRecord(t *testing.T) {
	under := &tooLargeDriver{Driver: driver.NewMemory()}
	s := storage.Init(newMemoDriver(under))
	for range 3 {
		var tooLarge *RecordTooLargeError
		if _, err := s.History("app"); !errors.As(err, &tooLarge) {
			t.Fatalf("History = %v, want a *RecordTooLargeError", err)
		}
	}
	if under.queries != 1 {
		t.Fatalf("%d queries reached the driver, want 1", under.queries)
	}
}
