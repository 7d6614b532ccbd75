package generate

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
)

// Strategy says how a copy treats its files.
type Strategy string

const (
	// Overwrite replaces existing files. It is the default.
	Overwrite Strategy = "Overwrite"
	// Merge deep-merges YAML maps into an existing file; lists and scalars
	// from the copied file replace those in place.
	Merge Strategy = "Merge"
	// Extract unpacks tarballs (.tgz, .tar.gz). With a glob, other files
	// are skipped; a single file must be a tarball.
	Extract Strategy = "Extract"
)

// Source is one input of a composition.
type Source struct {
	// FS is the extracted tree of the source's artifact. Use an os.Root's
	// FS so that symlinks cannot lead outside it.
	FS fs.FS
	// Revision is the source artifact's revision, used when the spec takes
	// its revision from this alias.
	Revision string
	// OriginRevision is the source's origin revision (for example the Git
	// commit an OCI artifact was built from), if any.
	OriginRevision string
}

// Spec describes one output artifact, as an OutputArtifact of an
// ArtifactGenerator.
type Spec struct {
	// Revision is "@<alias>" to take that source's revision. Default:
	// "latest@sha256:<digest of the output>".
	Revision string
	// OriginRevision is "@<alias>" to report that source's origin
	// revision. Default: none.
	OriginRevision string
	// Copy holds the operations, run in order; later ones overwrite
	// earlier ones.
	Copy []Copy
}

// Copy is one copy operation.
type Copy struct {
	// From is "@<alias>/<glob>".
	From string
	// To is "@artifact/<path>"; a trailing "/" makes it a directory.
	To string
	// Exclude holds glob patterns of files and directories to skip.
	Exclude []string
	// Strategy defaults to Overwrite.
	Strategy Strategy
	// Optional skips the operation when From matches no file (or every
	// match is excluded) instead of failing with ErrNoMatch.
	Optional bool
}

// Errors of a composition, wrapped in a *CopyError when an operation is at
// fault.
var (
	// ErrUnknownAlias means a From, Revision or OriginRevision names an
	// alias that is not among the sources.
	ErrUnknownAlias = errors.New("unknown source alias")
	// ErrNoMatch means a From matched no file.
	ErrNoMatch = errors.New("no file matches")
	// ErrInvalidPath means a From or To is malformed or climbs out of its
	// root.
	ErrInvalidPath = errors.New("invalid path")
	// ErrNotArchive means an Extract source file is not a tarball.
	ErrNotArchive = errors.New("not a tarball")
	// ErrMerge means a Merge could not parse or merge YAML.
	ErrMerge = errors.New("cannot merge YAML")
)

// CopyError is a failed copy operation.
type CopyError struct {
	// Index is the position of the operation in Spec.Copy.
	Index    int
	From, To string
	Err      error
}

func (e *CopyError) Error() string {
	return fmt.Sprintf("copy[%d] %s -> %s: %v", e.Index, e.From, e.To, e.Err)
}

// Unwrap returns the cause.
func (e *CopyError) Unwrap() error { return e.Err }

var aliasRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$`)

// ParseFrom splits "@alias/pattern" into its alias and its pattern. The
// pattern is cleaned of "." segments and duplicate slashes; a trailing "/"
// is kept, since it means "the directory". An empty pattern is the source
// root.
func ParseFrom(s string) (alias, pattern string, err error) {
	alias, rest, ok := strings.Cut(strings.TrimPrefix(s, "@"), "/")
	if !strings.HasPrefix(s, "@") || !ok || !aliasRE.MatchString(alias) {
		return "", "", fmt.Errorf("%w: %q is not @<alias>/<pattern>", ErrInvalidPath, s)
	}
	pattern, err = cleanRel(rest)
	if err != nil {
		return "", "", fmt.Errorf("%w: %q: %w", ErrInvalidPath, s, err)
	}
	return alias, pattern, nil
}

// ParseTo reads "@artifact/path" into a path relative to the artifact
// root ("" is the root) and whether it names a directory.
func ParseTo(s string) (p string, dir bool, err error) {
	rest, ok := strings.CutPrefix(s, "@artifact/")
	if !ok {
		return "", false, fmt.Errorf("%w: %q is not @artifact/<path>", ErrInvalidPath, s)
	}
	if strings.ContainsAny(rest, "*?[") {
		return "", false, fmt.Errorf("%w: %q: globs are not allowed in a destination", ErrInvalidPath, s)
	}
	p, err = cleanRel(rest)
	if err != nil {
		return "", false, fmt.Errorf("%w: %q: %w", ErrInvalidPath, s, err)
	}
	dir = p == "" || strings.HasSuffix(p, "/")
	return strings.TrimSuffix(p, "/"), dir, nil
}

// cleanRel cleans a relative slash path, refusing ".." segments, absolute
// paths, backslashes and NULs, and keeping a trailing slash.
func cleanRel(s string) (string, error) {
	if strings.ContainsAny(s, "\\\x00") {
		return "", errors.New("backslash or NUL in path")
	}
	trailing := strings.HasSuffix(s, "/")
	var segs []string
	for _, seg := range strings.Split(s, "/") {
		switch seg {
		case "", ".":
		case "..":
			return "", errors.New(`".." in path`)
		default:
			segs = append(segs, seg)
		}
	}
	p := path.Join(segs...)
	if trailing && p != "" {
		p += "/"
	}
	return p, nil
}

func parseAliasRef(s string) (string, error) {
	alias, ok := strings.CutPrefix(s, "@")
	if !ok || !aliasRE.MatchString(alias) {
		return "", fmt.Errorf("%w: %q is not @<alias>", ErrInvalidPath, s)
	}
	return alias, nil
}
