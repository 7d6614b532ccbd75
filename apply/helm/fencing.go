package helm

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// recordFence keeps one session's writes of release records from
// overwriting those of another holder that has taken the release over
// (a replica paused past its Lease resumes in the middle of an action).
// Two guards, because neither suffices alone:
//
//   - fence (Options.Fence) is asked before every write. It is a local
//     check (does this replica still hold its Lease?), so a pause between
//     the check and the write escapes it;
//   - every update and delete carries the resourceVersion this session last
//     read or wrote of the record, so the API server refuses it when anyone
//     wrote the record since, however long the pause.
//
// The first refused write stops the session's writes for good: Helm's
// failure path (marking the revision failed, superseding the previous one)
// then writes nothing either, and nothing is retried over a newer record.
type recordFence struct {
	// fence, when set, is asked before every write.
	fence func() error

	mu       sync.Mutex
	versions map[string]string // by Secret name, as last read or written
	stop     error             // the first refusal
}

func (f *recordFence) remember(key, resourceVersion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.versions == nil {
		f.versions = map[string]string{}
	}
	f.versions[key] = resourceVersion
}

func (f *recordFence) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.versions, key)
}

func (f *recordFence) version(key string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rv, ok := f.versions[key]
	return rv, ok
}

// beforeWrite refuses a write after an earlier refusal, or when the fence
// says so.
func (f *recordFence) beforeWrite(key string) error {
	if err := f.stopped(); err != nil {
		return fmt.Errorf("not writing %s: %w", key, err)
	}
	if f.fence == nil {
		return nil
	}
	if err := f.fence(); err != nil {
		return f.refuse(fmt.Errorf("fence refused writing %s: %w", key, err))
	}
	return nil
}

// conflict refuses the session's writes after the API server refused one
// because the record changed since the session read it.
func (f *recordFence) conflict(key string) error {
	name, rev := splitKey(key)
	return f.refuse(fmt.Errorf("revision %d of release %s: %w", rev, name, ErrRecordConflict))
}

func (f *recordFence) refuse(err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop == nil {
		f.stop = err
	}
	return err
}

// stopped is the refusal that stopped the session's writes, if any.
func (f *recordFence) stopped() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stop
}

// splitKey is the release name and revision of a release Secret's name
// (sh.helm.release.v1.<name>.v<revision>).
func splitKey(key string) (string, int) {
	rest := strings.TrimPrefix(key, "sh.helm.release.v1.")
	i := strings.LastIndex(rest, ".v")
	if i < 0 {
		return rest, 0
	}
	n, _ := strconv.Atoi(rest[i+2:])
	return rest[:i], n
}
