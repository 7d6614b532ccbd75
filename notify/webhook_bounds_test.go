package notify

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// offerHugeBody posts up to 256 MiB to path, declared in Content-Length or
// chunked, and stops writing once the server answers. It returns the
// status and how many body bytes were written by then: a server that reads
// the whole body before answering lets all of them through.
func offerHugeBody(t *testing.T, addr, path string, chunked bool) (int, int64) {
	t.Helper()
	const offer = 256 << 20
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n\r\n", offer)
	}
	if _, err := c.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	codes := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			codes <- 0
			return
		}
		resp.Body.Close()
		codes <- resp.StatusCode
	}()
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	var sent int64
	for sent < offer {
		select {
		case code := <-codes:
			return code, sent
		default:
		}
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		var err error
		if chunked {
			_, err = fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk)
		} else {
			_, err = c.Write(chunk)
		}
		if err != nil {
			break // the server closed the connection
		}
		sent += int64(len(chunk))
	}
	select {
	case code := <-codes:
		return code, sent
	case <-time.After(30 * time.Second):
		t.Fatalf("POST %s: no answer after %d bytes", path, sent)
		return 0, sent
	}
}

// An oversized body is answered 413 after at most MaxBodyBytes+1 bytes
// are read, whether its length is declared or chunked; a body to a path
// that serves no Receiver is not read at all.
func TestWebhookBoundsBodiesWithoutReadingThem(t *testing.T) {
	s, base, tr := startServer(t, ServerOptions{MaxBodyBytes: 1 << 20})
	p := WebhookPath("t", "g", "apps")
	s.SetReceiver(types.NamespacedName{Namespace: "apps", Name: "g"}, p, Receiver{Type: ReceiverGeneric, Token: "t"})
	addr := strings.TrimPrefix(base, "http://")
	for _, tc := range []struct {
		name    string
		path    string
		chunked bool
		code    int
	}{
		{"declared length", p, false, http.StatusRequestEntityTooLarge},
		{"chunked", p, true, http.StatusRequestEntityTooLarge},
		{"no receiver, declared", "/hook/none", false, http.StatusNotFound},
		{"no receiver, chunked", "/hook/none", true, http.StatusNotFound},
	} {
		code, sent := offerHugeBody(t, addr, tc.path, tc.chunked)
		if code != tc.code {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.code)
		}
		// Socket buffers take a few MiB before the answer is seen; a server
		// that read all 256 MiB would have let all of them through.
		if sent > 64<<20 {
			t.Errorf("%s: %d bytes written before the answer: the body was read", tc.name, sent)
		}
		t.Logf("%s: %d after %d KiB written", tc.name, code, sent>>10)
	}
	if tr.count() != 0 {
		t.Fatalf("%d reconciles requested by refused requests", tr.count())
	}
	// Headers are bounded too: 431 past 64 KiB.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", p, strings.Repeat("a", 256<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("256 KiB of headers: %d, want 431", resp.StatusCode)
	}
}
