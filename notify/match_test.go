package notify

import (
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func ev(kind, ns, name, severity, msg string) *Event {
	return &Event{InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name}, Severity: severity, Message: msg}
}

func TestAlertMatches(t *testing.T) {
	res := func(s ...string) []*regexp.Regexp {
		out, err := CompileAlertRegexps("list", s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ks := []Source{{Kind: "Kustomization", Name: "*"}}
	cases := []struct {
		name   string
		alert  Alert
		ev     *Event
		labels map[string]string
		want   bool
	}{
		{"wildcard in own namespace", Alert{Sources: ks}, ev("Kustomization", "apps", "a", "info", "m"), nil, true},
		{"other namespace", Alert{Sources: ks}, ev("Kustomization", "other", "a", "info", "m"), nil, false},
		{"explicit namespace", Alert{Sources: []Source{{Kind: "Kustomization", Name: "*", Namespace: "other"}}}, ev("Kustomization", "other", "a", "info", "m"), nil, true},
		{"other kind", Alert{Sources: ks}, ev("HelmRelease", "apps", "a", "info", "m"), nil, false},
		{"name", Alert{Sources: []Source{{Kind: "Kustomization", Name: "a"}}}, ev("Kustomization", "apps", "a", "info", "m"), nil, true},
		{"other name", Alert{Sources: []Source{{Kind: "Kustomization", Name: "b"}}}, ev("Kustomization", "apps", "a", "info", "m"), nil, false},
		{"labels match", Alert{Sources: []Source{{Kind: "Kustomization", Name: "*", MatchLabels: map[string]string{"team": "x"}}}}, ev("Kustomization", "apps", "a", "info", "m"), map[string]string{"team": "x", "o": "p"}, true},
		{"labels differ", Alert{Sources: []Source{{Kind: "Kustomization", Name: "*", MatchLabels: map[string]string{"team": "x"}}}}, ev("Kustomization", "apps", "a", "info", "m"), map[string]string{"team": "y"}, false},
		{"labels absent", Alert{Sources: []Source{{Kind: "Kustomization", Name: "*", MatchLabels: map[string]string{"team": "x"}}}}, ev("Kustomization", "apps", "a", "info", "m"), nil, false},
		{"error only drops info", Alert{Severity: "error", Sources: ks}, ev("Kustomization", "apps", "a", "info", "m"), nil, false},
		{"error only sends error", Alert{Severity: "error", Sources: ks}, ev("Kustomization", "apps", "a", "error", "m"), nil, true},
		{"info sends error", Alert{Severity: "info", Sources: ks}, ev("Kustomization", "apps", "a", "error", "m"), nil, true},
		{"exclusion", Alert{Sources: ks, Exclusion: res("^no.*")}, ev("Kustomization", "apps", "a", "info", "nothing"), nil, false},
		{"inclusion miss", Alert{Sources: ks, Inclusion: res("fail")}, ev("Kustomization", "apps", "a", "info", "ok"), nil, false},
		{"inclusion hit", Alert{Sources: ks, Inclusion: res("fail")}, ev("Kustomization", "apps", "a", "info", "failed"), nil, true},
		{"exclusion beats inclusion", Alert{Sources: ks, Inclusion: res("fail"), Exclusion: res("timeout")}, ev("Kustomization", "apps", "a", "info", "failed: timeout"), nil, false},
		{"suspended", Alert{Sources: ks, Suspend: true}, ev("Kustomization", "apps", "a", "info", "m"), nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.alert.Matches("apps", c.ev, c.labels); got != c.want {
				t.Errorf("Matches = %v, want %v", got, c.want)
			}
		})
	}
}

func TestCompileAlertRegexpsNamesTheExpression(t *testing.T) {
	_, err := CompileAlertRegexps("exclusionList", []string{"ok", "(bad"})
	if err == nil || err.Error()[:len(`exclusionList[1] "(bad"`)] != `exclusionList[1] "(bad"` {
		t.Fatalf("err = %v", err)
	}
}

func TestNotificationAddsMetadataAndSummary(t *testing.T) {
	a := Alert{Metadata: map[string]string{"env": "prod", "revision": "override?"}, Summary: "cluster one"}
	e := ev("Kustomization", "apps", "a", "info", "m")
	e.Metadata = map[string]string{"revision": "main@sha1:abc"}
	n := a.notification(e)
	if n.Metadata["env"] != "prod" || n.Metadata["summary"] != "cluster one" || n.Metadata["revision"] != "main@sha1:abc" {
		t.Fatalf("metadata = %v", n.Metadata)
	}
	if _, ok := e.Metadata["env"]; ok {
		t.Fatal("the recorded event was changed")
	}
}

func TestLimiterOncePerInterval(t *testing.T) {
	l := newLimiter(5*60e9, 3)
	now := l.now()
	l.now = func() time.Time { return now }
	if !l.allow("a") || l.allow("a") {
		t.Fatal("the same key must pass once")
	}
	if !l.allow("b") || !l.allow("c") || !l.allow("d") {
		t.Fatal("distinct keys must pass")
	}
	if len(l.seen) > 3 {
		t.Fatalf("limiter holds %d keys, max 3", len(l.seen))
	}
	now = now.Add(6 * time.Minute)
	if !l.allow("a") {
		t.Fatal("the key must pass again after the interval")
	}
}
