package generate

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrPathPattern means an ArtifactGenerator's pathPattern, or a field
// rendered from its captures, is invalid: retrying cannot help until the
// spec (or, for captured values, the source) changes.
var ErrPathPattern = errors.New("invalid pathPattern")

// Match is one directory that a path pattern matched, with the values of
// its captures: Raw as found in the source (copy paths use them) and
// Normalized, lower-cased (names, namespaces and labels use them).
type Match struct {
	Dir        string
	Raw        map[string]string
	Normalized map[string]string
}

var captureName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// captures lists the "{name}" captures of a template in order, checking
// that braces pair and that names are valid and, when unique is set, not
// repeated.
func captures(tmpl string, unique bool) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for i := 0; i < len(tmpl); i++ {
		switch tmpl[i] {
		case '{':
			end := strings.IndexByte(tmpl[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%q: the capture at offset %d has no closing brace", tmpl, i)
			}
			name := tmpl[i+1 : i+1+end]
			if !captureName.MatchString(name) {
				return nil, fmt.Errorf("%q: capture %q is not a name matching [A-Za-z_][A-Za-z0-9_]*", tmpl, name)
			}
			if unique && seen[name] {
				return nil, fmt.Errorf("%q: capture %q appears twice", tmpl, name)
			}
			seen[name] = true
			names = append(names, name)
			i += end + 1
		case '}':
			return nil, fmt.Errorf("%q: the brace at offset %d closes no capture", tmpl, i)
		}
	}
	return names, nil
}

// Render replaces each "{name}" of tmpl with vars[name]; a name that vars
// lacks is an error, as is a brace that pairs with none.
func Render(tmpl string, vars map[string]string) (string, error) {
	if !strings.ContainsAny(tmpl, "{}") {
		return tmpl, nil
	}
	if _, err := captures(tmpl, false); err != nil {
		return "", fmt.Errorf("%w: %w", ErrPathPattern, err)
	}
	var b strings.Builder
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '{' {
			b.WriteByte(tmpl[i])
			continue
		}
		end := strings.IndexByte(tmpl[i+1:], '}')
		name := tmpl[i+1 : i+1+end]
		v, ok := vars[name]
		if !ok {
			return "", fmt.Errorf("%w: %q: capture %q is not defined by pathPattern", ErrPathPattern, tmpl, name)
		}
		b.WriteString(v)
		i += end + 1
	}
	return b.String(), nil
}

// Expand walks fsys for the directories whose path (relative to the
// root, slash-separated) matches pattern, in which each "{name}" stands
// for one path segment. Matches come in walk order (lexical). A capture
// name must be a valid label key and each normalized value a valid label
// value, since the generated artifacts carry them as labels.
func Expand(fsys fs.FS, pattern string) ([]Match, error) {
	names, err := captures(pattern, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPathPattern, err)
	}
	for _, n := range names {
		if errs := validation.IsQualifiedName(n); len(errs) > 0 {
			return nil, fmt.Errorf("%w: %q: capture %q is not a valid label key: %s", ErrPathPattern, pattern, n, strings.Join(errs, "; "))
		}
	}
	var expr strings.Builder
	expr.WriteString("^")
	rest := strings.Trim(pattern, "/")
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			expr.WriteString(regexp.QuoteMeta(rest))
			break
		}
		end := strings.IndexByte(rest[i:], '}') + i
		expr.WriteString(regexp.QuoteMeta(rest[:i]))
		expr.WriteString("(?P<" + rest[i+1:end] + ">[^/]+)")
		rest = rest[end+1:]
	}
	expr.WriteString("$")
	re, err := regexp.Compile(expr.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrPathPattern, pattern, err)
	}
	var out []Match
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || p == "." {
			return nil
		}
		m := re.FindStringSubmatch(p)
		if m == nil {
			return nil
		}
		match := Match{Dir: p, Raw: map[string]string{}, Normalized: map[string]string{}}
		for i, n := range re.SubexpNames() {
			if i == 0 || n == "" {
				continue
			}
			v := strings.ToLower(m[i])
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				return fmt.Errorf("%w: %q: the value %q captured as %q in %s is not a valid label value: %s", ErrPathPattern, pattern, v, n, p, strings.Join(errs, "; "))
			}
			match.Raw[n], match.Normalized[n] = m[i], v
		}
		out = append(out, match)
		return nil
	})
	return out, err
}
