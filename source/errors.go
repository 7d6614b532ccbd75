package source

import (
	"errors"
	"fmt"
)

// Errors shared by the fetchers (source/git, source/oci) and the store, so
// that a caller branches once whatever the source kind. Fetchers wrap them
// with the URL and the original cause.
var (
	// ErrUnreachable means the host could not be reached (DNS, connection
	// refused, TLS handshake, timeout).
	ErrUnreachable = errors.New("source host unreachable")
	// ErrAuth means the credentials were missing or rejected.
	ErrAuth = errors.New("authentication failed")
	// ErrRefNotFound means the branch, tag, commit or digest does not exist.
	ErrRefNotFound = errors.New("reference not found")
	// ErrNoSemverMatch means no tag satisfies the semver range.
	ErrNoSemverMatch = errors.New("no tag matches the semver range")
	// ErrDigestMismatch means content did not hash to its expected digest.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrInvalidObject means an Object has an empty or unsafe kind,
	// namespace or name.
	ErrInvalidObject = errors.New("invalid object")
	// ErrNotFound means the store has no such artifact.
	ErrNotFound = errors.New("artifact not found")
)

// Errors of unsafe archives. Extract returns them inside an ArchiveError
// that names the entry.
var (
	// ErrPathTraversal means an entry name climbs out of the root with "..".
	ErrPathTraversal = errors.New("path traversal")
	// ErrAbsolutePath means an entry name is absolute.
	ErrAbsolutePath = errors.New("absolute path")
	// ErrSymlinkEscape means a symlink resolves outside the root, or an
	// entry is written through a symlink.
	ErrSymlinkEscape = errors.New("symlink escapes the root")
	// ErrDeviceFile means an entry is a device, a FIFO or another special file.
	ErrDeviceFile = errors.New("device or special file")
	// ErrTooLarge means the archive's content exceeds the size limit.
	ErrTooLarge = errors.New("archive exceeds the size limit")
)

// ArchiveError is an unsafe or unreadable archive entry.
type ArchiveError struct {
	// Entry is the name of the entry in the archive.
	Entry string
	// Err is one of the archive errors above, or an I/O error.
	Err error
}

func (e *ArchiveError) Error() string { return fmt.Sprintf("archive entry %q: %v", e.Entry, e.Err) }

// Unwrap returns the cause.
func (e *ArchiveError) Unwrap() error { return e.Err }
