package generate

import (
	"fmt"
	"path"
	"strings"
)

func hasMeta(p string) bool { return strings.ContainsAny(p, "*?[") }

// match reports whether name matches pattern, both slash-separated: "**"
// spans any number of segments (none included), other segments follow
// path.Match.
func match(pattern, name string) bool {
	var ps, ns []string
	if pattern != "" {
		ps = strings.Split(pattern, "/")
	}
	if name != "" && name != "." {
		ns = strings.Split(name, "/")
	}
	return matchSegs(ps, ns)
}

func matchSegs(ps, ns []string) bool {
	for len(ps) > 0 {
		if ps[0] == "**" {
			for len(ps) > 1 && ps[1] == "**" {
				ps = ps[1:]
			}
			if len(ps) == 1 {
				return true
			}
			for i := 0; i <= len(ns); i++ {
				if matchSegs(ps[1:], ns[i:]) {
					return true
				}
			}
			return false
		}
		if len(ns) == 0 {
			return false
		}
		if ok, err := path.Match(ps[0], ns[0]); err != nil || !ok {
			return false
		}
		ps, ns = ps[1:], ns[1:]
	}
	return len(ns) == 0
}

// globPrefix returns the leading segments of pattern that hold no glob
// meta characters: the directory a glob walk starts from ("" is the root).
func globPrefix(pattern string) string {
	segs := strings.Split(pattern, "/")
	i := 0
	for i < len(segs) && !hasMeta(segs[i]) {
		i++
	}
	return path.Join(segs[:i]...)
}

// excluder applies Exclude patterns.
type excluder []string

// excluded reports whether the file at rel (from the source root), whose
// path below the glob prefix is sub, or any directory above it, matches a
// pattern. Patterns without "/" match a name at any depth.
func (x excluder) excluded(rel, sub string) bool {
	for _, p := range x {
		p = strings.Trim(p, "/")
		if p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			for _, seg := range strings.Split(rel, "/") {
				if ok, _ := path.Match(p, seg); ok {
					return true
				}
			}
			continue
		}
		for _, cand := range []string{rel, sub} {
			for c := cand; c != "." && c != ""; c = path.Dir(c) {
				if match(p, c) {
					return true
				}
			}
		}
	}
	return false
}

// validPatterns checks the syntax of the From pattern and the excludes.
func validPatterns(from string, excludes []string) error {
	for _, p := range append([]string{from}, excludes...) {
		for _, seg := range strings.Split(p, "/") {
			if _, err := path.Match(seg, ""); err != nil {
				return fmt.Errorf("%w: pattern %q: %w", ErrInvalidPath, p, err)
			}
		}
	}
	return nil
}
