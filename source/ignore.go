package source

import (
	"bufio"
	"bytes"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// IgnoreFile is the name of the file whose patterns exclude paths from an
// archive, with .gitignore syntax, scoped to the directory that holds it.
const IgnoreFile = ".sourceignore"

// vcsPatterns are always excluded, as Flux does for every source.
const vcsPatterns = ".git/\n.gitignore\n.gitmodules\n.gitattributes\n"

// parsePatterns reads .gitignore-syntax patterns, one a line, scoped to
// the directory domain (path segments from the root).
func parsePatterns(text []byte, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps
}

// Ignored reports whether a slash-separated path relative to the archive
// root is excluded by patterns (.gitignore syntax) and the VCS defaults.
// It is the matcher Archive uses, exposed for callers that filter trees
// themselves. It does not read .sourceignore files.
func Ignored(path string, isDir bool, patterns ...string) bool {
	ps := parsePatterns([]byte(vcsPatterns+strings.Join(patterns, "\n")), nil)
	return gitignore.NewMatcher(ps).Match(strings.Split(path, "/"), isDir)
}
