package demo

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// leaderStatusKinds are the resources whose status only the leader writes.
var leaderStatusKinds = map[string]bool{
	"gitrepositories": true, "ocirepositories": true, "buckets": true, "kustomizations": true,
	"artifactgenerators": true, "externalartifacts": true, "helmrepositories": true, "helmcharts": true,
}

// statusWrite is one successful status write of a leader kind, read from
// the API server's audit log.
type statusWrite struct {
	at      time.Time
	replica string
}

// statusAuditEvent is the part of an audit event this check reads.
type statusAuditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received time.Time `json:"requestReceivedTimestamp"`
}

// leaderStatusWrites reads the successful status writes of the leader's
// kinds from the audit log, with the replica that made each (its user
// agent ends in "replica/<id>"), in the order the API server received them.
func leaderStatusWrites(path string) ([]statusWrite, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []statusWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var ev statusAuditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.ObjectRef.Subresource != "status" || !leaderStatusKinds[ev.ObjectRef.Resource] ||
			(ev.Verb != "patch" && ev.Verb != "update") || ev.ResponseStatus.Code >= 300 {
			continue
		}
		i := strings.LastIndex(ev.UserAgent, "replica/")
		if i < 0 {
			continue
		}
		out = append(out, statusWrite{at: ev.Received, replica: strings.Fields(ev.UserAgent[i+len("replica/"):])[0]})
	}
	slices.SortStableFunc(out, func(a, b statusWrite) int { return a.at.Compare(b.at) })
	return out, sc.Err()
}

// writerTerms splits the writes into runs by one replica, in time order.
func writerTerms(writes []statusWrite) []string {
	var terms []string
	for _, w := range writes {
		if len(terms) == 0 || terms[len(terms)-1] != w.replica {
			terms = append(terms, w.replica)
		}
	}
	return terms
}

// verifyStatusWriters checks, from the audit log, that the status of the
// sources, generators and Kustomizations was written by one replica at a
// time: the writers, in time order, change only where the leadership did.
func (h *harness) verifyStatusWriters() {
	writes, err := leaderStatusWrites(filepath.Join(h.logs, "audit.log"))
	if err != nil {
		h.check("one status writer", false, "reading the audit log: %v", err)
		return
	}
	count := map[string]int{}
	for _, w := range writes {
		count[w.replica]++
	}
	terms := writerTerms(writes)
	h.check("one status writer", len(writes) > 0 && len(terms) <= 2,
		"%d status writes of sources, generators and Kustomizations in the audit log, by %v; writers in time order: %s (the leadership changed once)",
		len(writes), count, strings.Join(terms, " → "))
}

func (w statusWrite) String() string {
	return fmt.Sprintf("%s@%s", w.replica, w.at.Format(time.RFC3339Nano))
}
