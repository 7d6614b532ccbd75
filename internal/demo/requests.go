package demo

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// CozyUser is the user the harness's kubeconfig gives cozy-aio: the audit
// log names it on every request cozy-aio makes.
const CozyUser = "cozy-aio"

// Requests counts API requests by "verb resource" as the API server's
// audit log records them: verb is the API server's (get, list, watch,
// create, update, patch, delete), resource the object's resource with its
// subresource ("helmreleases/status"), or the path of a non-resource
// request ("/version"). Unlike client-go's rest_client_requests_total,
// which has the HTTP method alone, it tells a status patch from an apply.
type Requests map[string]int

// Total is the number of requests counted.
func (r Requests) Total() int {
	n := 0
	for _, c := range r {
		n += c
	}
	return n
}

// Writes counts the writes (create, update, patch, delete) of resource,
// subresources excluded.
func (r Requests) Writes(resource string) int {
	n := 0
	for k, c := range r {
		verb, res, _ := strings.Cut(k, " ")
		if res == resource && (verb == "create" || verb == "update" || verb == "patch" || verb == "delete") {
			n += c
		}
	}
	return n
}

// Lines are the counts, largest first, each with its share per release
// when releases is positive: "patch configmaps 3000 (3.00 per release)".
func (r Requests) Lines(releases int) []string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if r[keys[i]] != r[keys[j]] {
			return r[keys[i]] > r[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if releases > 0 {
			out = append(out, fmt.Sprintf("%-40s %7d  %6.2f per release", k, r[k], float64(r[k])/float64(releases)))
		} else {
			out = append(out, fmt.Sprintf("%-40s %7d", k, r[k]))
		}
	}
	return out
}

// requestAuditEvent is the part of an audit event the count reads.
type requestAuditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
}

// key names the request as Requests counts it.
func (ev requestAuditEvent) key() string {
	if ev.ObjectRef == nil || ev.ObjectRef.Resource == "" {
		path, _, _ := strings.Cut(ev.RequestURI, "?")
		return ev.Verb + " " + path
	}
	res := ev.ObjectRef.Resource
	if res == "configmaps" && strings.HasSuffix(ev.ObjectRef.Name, "shard-assignment") {
		// The leader's published shard assignment is no release's object.
		res = "configmaps(shard-assignment)"
	}
	if ev.ObjectRef.Subresource != "" {
		res += "/" + ev.ObjectRef.Subresource
	}
	return ev.Verb + " " + res
}

// countRequests counts user's requests in an audit log from byte offset
// on, and returns the offset it read to. A long-running request (a watch)
// has a ResponseStarted event and, when it ends, a ResponseComplete one:
// it is counted once, when it started. A partly written last line is left
// for the next count.
func countRequests(path string, offset int64, user string) (Requests, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, err
	}
	out := Requests{}
	rd := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			// EOF, possibly in a line the API server is writing.
			if err == io.EOF {
				return out, offset, nil
			}
			return out, offset, err
		}
		offset += int64(len(line))
		var ev requestAuditEvent
		if json.Unmarshal(line, &ev) != nil || ev.User.Username != user {
			continue
		}
		switch {
		case ev.Stage == "ResponseStarted":
		case ev.Stage == "ResponseComplete" && ev.Verb != "watch":
		default:
			continue
		}
		out[ev.key()]++
	}
}

// auditSize is the audit log's size now: the offset from which a later
// countRequests counts what happened since.
func auditSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
