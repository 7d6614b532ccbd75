package redact

import (
	"fmt"
	"net/url"
	"strings"
)

// Error returns err with its message redacted: the URL of each *url.Error
// in the chain is dropped, then String and Values(secrets) apply. errors.Is
// and errors.As still see err's chain; a caller that reads a field of an
// error found that way redacts what it reads. Error(nil) is nil.
//
// A *url.Error names the whole URL a request went to, and a webhook URL may
// carry its token anywhere in the path, in a shape no rule knows. The
// caller names what it sent to, redacted, in its own words.
func Error(err error, secrets ...[]byte) error {
	if err == nil {
		return nil
	}
	return &redacted{err: err, msg: Values(String(dropURLs(err)), secrets...)}
}

type redacted struct {
	err error
	msg string
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// dropURLs returns err's message without the `Op "URL": ` that each
// *url.Error of the chain puts before its cause.
func dropURLs(err error) string {
	msg := err.Error()
	walk(err, func(e error) {
		if ue, ok := e.(*url.Error); ok {
			msg = strings.ReplaceAll(msg, fmt.Sprintf("%s %q: ", ue.Op, ue.URL), "")
		}
	})
	return msg
}

// walk calls f for err and every error in its tree.
func walk(err error, f func(error)) {
	if err == nil {
		return
	}
	f(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, f)
		}
	}
}
