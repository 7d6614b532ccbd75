package notify

import (
	"fmt"
	"regexp"
	"strings"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Event is Flux's event payload: what the generic providers post, byte for
// byte as Flux's controllers post it.
type Event = eventv1.Event

// Severities of an event; Kubernetes Warning events have SeverityError.
const (
	SeverityInfo  = eventv1.EventSeverityInfo
	SeverityError = eventv1.EventSeverityError
)

// Source selects the objects whose events an Alert sends (Flux's
// eventSources entry).
type Source struct {
	// Kind of the object, required.
	Kind string
	// Name of the object, or "*" for every object of Kind.
	Name string
	// Namespace of the object. Default: the Alert's.
	Namespace string
	// MatchLabels narrows Name "*" to the objects with these labels.
	MatchLabels map[string]string
}

// Alert says which events go to which Provider (Flux's Alert spec).
type Alert struct {
	// Provider names the Provider, in the Alert's namespace.
	Provider types.NamespacedName
	// Severity is "error" for errors only; "info" or "" for every event.
	Severity string
	// Sources select the objects.
	Sources []Source
	// Inclusion, when set, sends only messages matching one of them;
	// Exclusion drops messages matching any of them.
	Inclusion, Exclusion []*regexp.Regexp
	// Metadata is added to each event's metadata, without overriding the
	// event's own keys.
	Metadata map[string]string
	// Summary is sent as the "summary" metadata.
	Summary string
	// Suspend stops the Alert from sending anything.
	Suspend bool
}

// CompileAlertRegexps compiles an Alert's inclusion or exclusion list; the
// error names the field and the expression.
func CompileAlertRegexps(field string, exprs []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(exprs))
	for i, e := range exprs {
		r, err := regexp.Compile(e)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %w", field, i, e, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Matches tells whether the Alert, in namespace ns, sends ev. labels are
// the labels of the event's object (for MatchLabels). It is a pure
// function of its arguments.
func (a *Alert) Matches(ns string, ev *Event, labels map[string]string) bool {
	if a.Suspend {
		return false
	}
	if a.Severity == SeverityError && ev.Severity != SeverityError {
		return false
	}
	if len(a.Inclusion) > 0 && !anyMatch(a.Inclusion, ev.Message) {
		return false
	}
	if anyMatch(a.Exclusion, ev.Message) {
		return false
	}
	for _, s := range a.Sources {
		if s.matches(ns, ev, labels) {
			return true
		}
	}
	return false
}

func (s Source) matches(alertNS string, ev *Event, labels map[string]string) bool {
	ns := s.Namespace
	if ns == "" {
		ns = alertNS
	}
	obj := ev.InvolvedObject
	if obj.Namespace != ns || obj.Kind != s.Kind {
		return false
	}
	if s.Name != "*" {
		return obj.Name == s.Name
	}
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func anyMatch(rs []*regexp.Regexp, s string) bool {
	for _, r := range rs {
		if r.MatchString(s) {
			return true
		}
	}
	return false
}

// notification is ev as the Alert sends it: its metadata with the Alert's
// eventMetadata (never overriding the event's keys) and summary.
func (a *Alert) notification(ev *Event) *Event {
	n := ev.DeepCopy()
	if len(a.Metadata) > 0 || a.Summary != "" {
		if n.Metadata == nil {
			n.Metadata = map[string]string{}
		}
	}
	for k, v := range a.Metadata {
		if _, ok := n.Metadata[k]; !ok {
			n.Metadata[k] = v
		}
	}
	if a.Summary != "" {
		n.Metadata["summary"] = a.Summary
	}
	return n
}

// rateKey identifies "the same event for the same object", as Flux's
// event server does: object, message, revision and token.
func rateKey(ev *Event) string {
	var b strings.Builder
	o := ev.InvolvedObject
	b.WriteString("event/name=" + o.Name + "/namespace=" + o.Namespace + "/kind=" + o.Kind + "/message=" + ev.Message)
	if r, ok := ev.Metadata[eventv1.MetaRevisionKey]; ok {
		b.WriteString("/revision=" + r)
	}
	if t, ok := ev.Metadata[eventv1.MetaTokenKey]; ok {
		b.WriteString("/token=" + t)
	}
	return b.String()
}
