package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// commitStatus sets a commit status on the revision an event names, on
// GitHub, GitLab or Gitea, as Flux's Git providers do. The address is the
// repository's URL; the API is found from it: api.github.com for
// github.com, <host>/api/v3 for GitHub Enterprise, <host>/api/v4 for
// GitLab and <host>/api/v1 for Gitea. Events without a Git commit in their
// revision are not sent.
type commitStatus struct {
	c     *httpClient
	typ   string
	api   string // API base, no trailing slash
	repo  string // owner/repo
	token string
	uid   string
}

func newCommitStatus(c *httpClient, p Provider, u *url.URL) (*commitStatus, error) {
	repo := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	if strings.Count(repo, "/") < 1 {
		return nil, fmt.Errorf("address %s: want the repository's URL, https://<host>/<owner>/<repo>", u.Redacted())
	}
	if p.Token == "" {
		return nil, fmt.Errorf("%s needs the key 'token' in spec.secretRef", p.Type)
	}
	base := u.Scheme + "://" + u.Host
	var api string
	switch p.Type {
	case TypeGitHub:
		api = base + "/api/v3"
		if u.Host == "github.com" {
			api = "https://api.github.com"
		}
	case TypeGitLab:
		api = base + "/api/v4"
	case TypeGitea:
		api = base + "/api/v1"
	}
	return &commitStatus{c: c, typ: p.Type, api: api, repo: repo, token: p.Token, uid: p.UID}, nil
}

// commitSHA returns the Git commit of an event's revision
// ("main@sha1:<sha>", "sha1:<sha>" or a bare SHA), if it has one.
func commitSHA(ev *Event) (string, bool) {
	rev, ok := ev.GetRevision()
	if !ok {
		return "", false
	}
	if i := strings.LastIndex(rev, "sha1:"); i >= 0 {
		rev = rev[i+len("sha1:"):]
	} else if i := strings.LastIndex(rev, "@"); i >= 0 {
		rev = rev[i+1:]
	}
	if len(rev) != 40 && len(rev) != 64 {
		return "", false
	}
	if _, err := hex.DecodeString(rev); err != nil {
		return "", false
	}
	return rev, true
}

// statusContext names the status, as Flux: kind/name/<provider UID hash>,
// so that two clusters reporting on one commit do not overwrite each other.
func (s *commitStatus) statusContext(ev *Event) string {
	h := sha256.Sum256([]byte(s.uid))
	return fmt.Sprintf("%s/%s/%s", strings.ToLower(ev.InvolvedObject.Kind), ev.InvolvedObject.Name, hex.EncodeToString(h[:4]))
}

func (s *commitStatus) post(ctx context.Context, ev *Event) error {
	sha, ok := commitSHA(ev)
	if !ok || ev.Reason == "Progressing" {
		// A reconcile in progress (a change set, a wait) is no result to
		// report on the commit, as Flux's git providers skip it.
		return nil
	}
	desc := ev.Message
	if len(desc) > 140 {
		desc = desc[:137] + "..."
	}
	ok = ev.Severity != SeverityError
	name := s.statusContext(ev)
	switch s.typ {
	case TypeGitHub:
		body := map[string]string{"state": pick(ok, "success", "failure"), "context": name, "description": desc}
		return s.c.postJSON(ctx, fmt.Sprintf("%s/repos/%s/statuses/%s", s.api, s.repo, sha), body, func(r *http.Request, _ []byte) {
			r.Header.Set("Authorization", "Bearer "+s.token)
			r.Header.Set("Accept", "application/vnd.github+json")
		})
	case TypeGitLab:
		body := map[string]string{"state": pick(ok, "success", "failed"), "name": name, "description": desc}
		return s.c.postJSON(ctx, fmt.Sprintf("%s/projects/%s/statuses/%s", s.api, url.PathEscape(s.repo), sha), body, func(r *http.Request, _ []byte) {
			r.Header.Set("PRIVATE-TOKEN", s.token)
		})
	default:
		body := map[string]string{"state": pick(ok, "success", "failure"), "context": name, "description": desc}
		return s.c.postJSON(ctx, fmt.Sprintf("%s/repos/%s/statuses/%s", s.api, s.repo, sha), body, func(r *http.Request, _ []byte) {
			r.Header.Set("Authorization", "token "+s.token)
		})
	}
}

func pick(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}
