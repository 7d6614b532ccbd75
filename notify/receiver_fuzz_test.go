package notify

import (
	"net/http"
	"testing"
)

// FuzzReceiverVerify feeds arbitrary signatures, tokens and bodies to every
// receiver type: Verify must never panic, and must never accept a signed
// type without the right signature.
func FuzzReceiverVerify(f *testing.F) {
	f.Add("sha256=00", "tok", []byte(`{"a":1}`), "push")
	f.Add("sha1=zz", "", []byte(`not json`), "ping")
	f.Add("=", "t", []byte{}, "")
	f.Fuzz(func(t *testing.T, sig, token string, body []byte, event string) {
		h := http.Header{}
		h.Set("X-Signature", sig)
		h.Set("X-Hub-Signature-256", sig)
		h.Set("X-Gitlab-Token", sig)
		h.Set("Authorization", sig)
		h.Set("X-GitHub-Event", event)
		h.Set("X-Gitlab-Event", event)
		for _, typ := range ReceiverTypes {
			err := Receiver{Type: typ, Token: token, Events: []string{"push"}}.Verify(h, body)
			if err != nil || token == "" {
				continue
			}
			switch typ {
			case ReceiverGenericHMAC, ReceiverGitHub:
				if verifyHMAC(sig, body, token) != nil {
					t.Fatalf("%s accepted a bad signature %q", typ, sig)
				}
			case ReceiverGitLab, ReceiverHarbor:
				if sig != token {
					t.Fatalf("%s accepted token %q", typ, sig)
				}
			}
		}
	})
}
