package plan

import (
	"fmt"
	"io"
	"strings"
)

// Exit codes of a plan on the command line, as helm-diff's
// --detailed-exitcode and terraform plan's: 0 nothing changes, 1 changes,
// 2 risky changes. A plan that cannot be computed exits above 2.
const (
	ExitUnchanged = 0
	ExitChanges   = 1
	ExitRisky     = 2
)

// ExitCode is the plan's exit code.
func (p *Plan) ExitCode() int {
	switch {
	case p.Risky():
		return ExitRisky
	case p.Changed():
		return ExitChanges
	}
	return ExitUnchanged
}

// marks are the first column of an object's line in the text form.
var marks = map[Action]string{Create: "+", Update: "~", Delete: "-", Orphan: "!", Unchanged: "="}

// WriteText writes the plan for a reader: one line per object that
// changes (unchanged objects only with all), its changed fields indented
// below, then each risk and the hash.
func (p *Plan) WriteText(w io.Writer, all bool) error {
	var b strings.Builder
	for _, o := range p.Objects {
		if o.Action == Unchanged && !all {
			continue
		}
		fmt.Fprintf(&b, "%s %s %s\n", marks[o.Action], o.Action, o.Ref)
		for _, c := range o.Changes {
			old := c.Old
			if old == "" {
				old = "(unset)"
			}
			new := c.New
			if new == "" {
				new = "(removed)"
			}
			fmt.Fprintf(&b, "    %s: %s -> %s\n", c.Path, old, new)
		}
	}
	if !p.Changed() {
		b.WriteString("no changes\n")
	}
	for _, r := range p.Risks {
		fmt.Fprintf(&b, "risk %s %s: %s\n", r.Code, r.Object, r.Message)
	}
	fmt.Fprintf(&b, "plan %s\n", p.Hash)
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is the plan in one line, for an Event or a log line: the counts
// of each action, then the risks by code and object.
func (p *Plan) Summary() string {
	counts := map[Action]int{}
	for _, o := range p.Objects {
		counts[o.Action]++
	}
	var parts []string
	for _, a := range []Action{Create, Update, Delete, Orphan, Unchanged} {
		if counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
		}
	}
	s := "plan " + short(p.Hash) + ": " + strings.Join(parts, ", ")
	if len(parts) == 0 {
		s += "no objects"
	}
	var risks []string
	for _, r := range p.Risks {
		if r.Code != Hooks {
			risks = append(risks, string(r.Code)+" "+r.Object.String())
		}
	}
	if len(risks) > 0 {
		s += "; risks: " + strings.Join(risks, ", ")
	}
	return s
}

// short is a hash's first 12 hex digits, as the Summary shows it.
func short(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
