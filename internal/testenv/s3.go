package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Options configures StartS3. The zero value works.
type S3Options struct {
	// AccessKey and SecretKey are the one identity the server accepts,
	// with every right. Default: "cozy-test" and "cozy-test-secret".
	AccessKey, SecretKey string
	// StartTimeout bounds the start. Default: 60s.
	StartTimeout time.Duration
	// LogDir, when set, receives weed.log. Default: the server's
	// directory, removed by Close.
	LogDir string
}

// S3 is a real S3-compatible server: SeaweedFS (`weed server -s3`, its
// master, volume server, filer and S3 gateway in one process) built by
// hack/testbin.sh, on loopback ports. Clients reach it through a proxy in
// the test process, over plain HTTP (Endpoint) or HTTPS with a test CA
// (TLSEndpoint), that records the requests it forwards.
type S3 struct {
	cmd        *exec.Cmd
	dir        string
	exited     chan struct{}
	plain, tls *httptest.Server
	access     string
	secret     string
	client     *minio.Client

	mu       sync.Mutex
	requests []S3Request
}

// S3Request is one request the proxy forwarded.
type S3Request struct {
	// Method is the HTTP method.
	Method string
	// Path is the URL path: /<bucket>/<key> (path-style requests).
	Path string
	// Query is the raw query, e.g. "list-type=2&prefix=...".
	Query string
}

// ErrWeedMissing means the SeaweedFS binary has not been built.
var ErrWeedMissing = errors.New("the SeaweedFS binary (weed) is missing: run hack/testbin.sh s3 (make testbin-s3)")

// StartS3 starts SeaweedFS on free loopback ports and waits until its S3
// gateway answers. Stop it with Close.
func StartS3(opts S3Options) (*S3, error) {
	bin := filepath.Join(BinDir(), "weed")
	if err := checkBinaries(BinDir(), "weed"); err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrWeedMissing, err)
	}
	if opts.AccessKey == "" {
		opts.AccessKey, opts.SecretKey = "cozy-test", "cozy-test-secret"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	dir, err := os.MkdirTemp("", "cozy-s3-")
	if err != nil {
		return nil, err
	}
	s := &S3{dir: dir, access: opts.AccessKey, secret: opts.SecretKey, exited: make(chan struct{})}
	if err := s.start(bin, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *S3) start(bin string, opts S3Options) error {
	cfg, err := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "cozy-test",
		"credentials": []any{map[string]string{"accessKey": opts.AccessKey, "secretKey": opts.SecretKey}},
		"actions":     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}})
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(s.dir, "s3.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return err
	}
	ports, err := freePorts(8)
	if err != nil {
		return err
	}
	data := filepath.Join(s.dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return err
	}
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	args := []string{"server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		"-master.port=" + p(0), "-master.port.grpc=" + p(1), "-master.volumeSizeLimitMB=32", "-master.telemetry=false",
		"-volume.port=" + p(2), "-volume.port.grpc=" + p(3), "-volume.max=0",
		"-filer", "-filer.port=" + p(4), "-filer.port.grpc=" + p(5),
		"-s3", "-s3.port=" + p(6), "-s3.port.grpc=" + p(7), "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-s3.config=" + cfgPath,
	}
	logDir := opts.LogDir
	if logDir == "" {
		logDir = s.dir
	}
	logf, err := os.Create(filepath.Join(logDir, "weed.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, args...)
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// The server dies with the test binary, however that ends.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	backend := &url.URL{Scheme: "http", Host: "127.0.0.1:" + p(6)}
	s.plain = httptest.NewServer(s.proxy(backend))
	s.tls = httptest.NewTLSServer(s.proxy(backend))
	s.client, err = minio.New(s.Endpoint(), &minio.Options{Creds: credentials.NewStaticV4(s.access, s.secret, ""), Region: "us-east-1"})
	if err != nil {
		return err
	}
	return s.waitReady(opts.StartTimeout, logf.Name())
}

// waitReady waits until the gateway can create and fill a bucket, which
// needs the master, a volume server and the filer.
func (s *S3) waitReady(timeout time.Duration, logPath string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		if last = s.probe(ctx); last == nil {
			s.ResetRequests()
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("weed exited during start (see %s): %v", logPath, last)
		case <-ctx.Done():
			return fmt.Errorf("weed did not become ready within %s (see %s): %v", timeout, logPath, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *S3) probe(ctx context.Context) error {
	const b = "cozy-probe"
	if err := s.MakeBucket(ctx, b); err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
		return err
	}
	if err := s.Put(ctx, b, "probe", "ok"); err != nil {
		return err
	}
	if err := s.Remove(ctx, b, "probe"); err != nil {
		return err
	}
	return s.client.RemoveBucket(ctx, b)
}

// proxy forwards to the gateway, keeping the Host header that requests
// were signed with, and records each request.
func (s *S3) proxy(backend *url.URL) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(backend)
			r.Out.Host = r.In.Host
		},
		// Refused connections while the gateway starts are expected.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, S3Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery})
		s.mu.Unlock()
		rp.ServeHTTP(w, r)
	})
}

// Close stops the server and removes its data.
func (s *S3) Close() {
	for _, srv := range []*httptest.Server{s.plain, s.tls} {
		if srv != nil {
			srv.Close()
		}
	}
	if s.cmd != nil && s.cmd.Process != nil {
		// Its data is thrown away: no need for a graceful stop, which
		// takes seconds.
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	os.RemoveAll(s.dir)
}

// Endpoint returns host:port of the plain HTTP endpoint (Flux's
// spec.insecure: true).
func (s *S3) Endpoint() string { return strings.TrimPrefix(s.plain.URL, "http://") }

// TLSEndpoint returns host:port of the HTTPS endpoint, whose certificate
// CACert signs.
func (s *S3) TLSEndpoint() string { return strings.TrimPrefix(s.tls.URL, "https://") }

// CACert returns the PEM certificate that the HTTPS endpoint's chain ends
// in, as a Secret's ca.crt holds it.
func (s *S3) CACert() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.tls.Certificate().Raw})
}

// AccessKey returns the access key the server accepts.
func (s *S3) AccessKey() string { return s.access }

// SecretKey returns the secret key the server accepts.
func (s *S3) SecretKey() string { return s.secret }

// MakeBucket creates a bucket.
func (s *S3) MakeBucket(ctx context.Context, bucket string) error {
	return s.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
}

// Put writes an object.
func (s *S3) Put(ctx context.Context, bucket, key, content string) error {
	_, err := s.client.PutObject(ctx, bucket, key, bytes.NewReader([]byte(content)), int64(len(content)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
	return err
}

// Remove deletes an object.
func (s *S3) Remove(ctx context.Context, bucket, key string) error {
	return s.client.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{})
}

// Requests returns the requests forwarded since the start or the last
// ResetRequests.
func (s *S3) Requests() []S3Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]S3Request(nil), s.requests...)
}

// ResetRequests forgets the requests recorded so far.
func (s *S3) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. Another
// process may take one before the server binds it; the start then fails
// with a clear message rather than hanging.
func freePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
