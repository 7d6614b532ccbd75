package notify

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
)

// objectTitle is how the chat providers name an event's object, as Flux:
// "kustomization/apps.flux-system".
func objectTitle(ev *Event) string {
	o := ev.InvolvedObject
	return fmt.Sprintf("%s/%s.%s", strings.ToLower(o.Kind), o.Name, o.Namespace)
}

// sortedMetadata returns the metadata keys in order, for stable messages.
func sortedMetadata(ev *Event) []string {
	keys := make([]string, 0, len(ev.Metadata))
	for k := range ev.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// slack posts a Slack message with one attachment (green for info, red for
// error), the metadata as fields. With a token it uses the Web API
// (chat.postMessage) with a bearer token; else the address is an incoming
// webhook.
type slack struct {
	c                 *httpClient
	url               string
	channel, username string
	token             string
}

type slackPayload struct {
	Channel     string            `json:"channel,omitempty"`
	Username    string            `json:"username,omitempty"`
	IconURL     string            `json:"icon_url,omitempty"`
	Text        string            `json:"text,omitempty"`
	Attachments []slackAttachment `json:"attachments,omitempty"`
}

type slackAttachment struct {
	Color      string       `json:"color"`
	AuthorName string       `json:"author_name"`
	Text       string       `json:"text"`
	MrkdwnIn   []string     `json:"mrkdwn_in"`
	Fields     []slackField `json:"fields,omitempty"`
}

type slackField struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

const fluxIcon = "https://raw.githubusercontent.com/fluxcd/flux2/main/docs/_files/flux-icon@2x.png"

func newSlackPayload(ev *Event, channel, username string) slackPayload {
	color := "good"
	if ev.Severity == SeverityError {
		color = "danger"
	}
	a := slackAttachment{Color: color, AuthorName: objectTitle(ev), Text: ev.Message, MrkdwnIn: []string{"text"}}
	for _, k := range sortedMetadata(ev) {
		a.Fields = append(a.Fields, slackField{Title: k, Value: ev.Metadata[k]})
	}
	if username == "" {
		username = ev.ReportingController
	}
	return slackPayload{Channel: channel, Username: username, IconURL: fluxIcon, Attachments: []slackAttachment{a}}
}

func (s *slack) post(ctx context.Context, ev *Event) error {
	return s.c.postJSON(ctx, s.url, newSlackPayload(ev, s.channel, s.username), func(r *http.Request, _ []byte) {
		if s.token != "" {
			r.Header.Set("Authorization", "Bearer "+s.token)
		}
	})
}

// discord posts Slack's payload to the webhook's Slack-compatible
// endpoint (<address>/slack), as Flux does.
type discord struct {
	c        *httpClient
	url      string
	username string
}

func newDiscord(c *httpClient, u *url.URL, username string) (*discord, error) {
	v := *u
	if !strings.HasSuffix(v.Path, "/slack") {
		v.Path = path.Join(v.Path, "slack")
	}
	return &discord{c: c, url: v.String(), username: username}, nil
}

func (d *discord) post(ctx context.Context, ev *Event) error {
	return d.c.postJSON(ctx, d.url, newSlackPayload(ev, "", d.username), nil)
}

// msteams posts an Adaptive Card, what Teams workflows (Power Automate)
// webhooks take.
type msteams struct {
	c   *httpClient
	url string
}

func (m *msteams) post(ctx context.Context, ev *Event) error {
	facts := []map[string]string{}
	for _, k := range sortedMetadata(ev) {
		facts = append(facts, map[string]string{"title": k, "value": ev.Metadata[k]})
	}
	color := "Good"
	if ev.Severity == SeverityError {
		color = "Attention"
	}
	card := map[string]any{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
		"type":    "AdaptiveCard",
		"version": "1.4",
		"body": []map[string]any{
			{"type": "TextBlock", "text": objectTitle(ev), "weight": "bolder", "size": "medium", "color": color, "wrap": true},
			{"type": "TextBlock", "text": ev.Message, "wrap": true},
			{"type": "FactSet", "facts": facts},
		},
	}
	payload := map[string]any{
		"type": "message",
		"attachments": []map[string]any{
			{"contentType": "application/vnd.microsoft.card.adaptive", "content": card},
		},
	}
	return m.c.postJSON(ctx, m.url, payload, nil)
}
