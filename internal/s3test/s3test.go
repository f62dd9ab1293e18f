// Package s3test runs a real S3 server for tests: versitygw (Apache-2.0)
// serving a temporary POSIX directory on 127.0.0.1, with test credentials.
//
// The binary comes from $KVSTORE_S3_BIN (scripts/install-versitygw.sh
// builds it and prints its path); without it the test skips, or fails when
// KVSTORE_REQUIRE names s3 (see internal/testenv).
//
//	srv := s3test.Start(t)            // stopped in t.Cleanup
//	srv.CreateBucket(t, "packets")
//	... srv.Endpoint, srv.AccessKey, srv.SecretKey, srv.Region
//
// Each server has its own port and directory, so tests may run several at
// once (a test that needs two servers, or a server it stops, starts its own).
//
// StartSeaweed (seaweed.go) runs a SeaweedFS cluster instead, for the
// tier's long form: a master with replication 001, two volume servers a
// test can SIGKILL and restart, and a filer with the S3 gateway; its binary
// comes from $KVSTORE_SEAWEED_BIN (scripts/install-seaweedfs.sh).
package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kvstore/kvstore/internal/testenv"
)

// Test credentials: the server's root user. They guard nothing: the server
// listens on 127.0.0.1 only and lives as long as one test.
const (
	AccessKey = "kvstoretestkey"
	SecretKey = "kvstoretestsecret0123456789"
	Region    = "us-east-1"
)

// readyTimeout bounds the wait for a started server to answer; versitygw
// starts in tens of milliseconds, but a loaded 2-core machine is slow.
const readyTimeout = 20 * time.Second

// Server is one running versitygw.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	Addr      string // 127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Region    string
	Dir       string // the POSIX directory it serves (one folder per bucket)

	cmd     *exec.Cmd
	out     *lockedBuffer
	stopped chan struct{}
	once    sync.Once
}

// Start starts versitygw on a free port over a fresh temporary directory,
// waits until it answers HTTP, and stops it in t.Cleanup. It skips (or
// fails, when s3 is required) without $KVSTORE_S3_BIN.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := testenv.Env(t, testenv.S3, "KVSTORE_S3_BIN")
	var last error
	for range 3 { // the free port may be taken between picking and binding
		s, err := start(bin, t.TempDir())
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		last = err
	}
	t.Fatalf("s3test: start versitygw: %v", last)
	return nil
}

func start(bin, dir string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "http://" + addr, Addr: addr, AccessKey: AccessKey, SecretKey: SecretKey,
		Region: Region, Dir: data, out: &lockedBuffer{}, stopped: make(chan struct{})}
	s.cmd = exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region,
		"--port", addr, "--health", "/health", "--quiet", "posix", data)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.Env = append(os.Environ(), "VGW_QUIET=true")
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.cmd.Wait(); close(s.stopped) }()
	if err := s.waitReady(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w (output: %s)", err, s.out.String())
	}
	return s, nil
}

// waitReady polls the health endpoint until it answers 200.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	c := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-s.stopped:
			return errors.New("versitygw exited before it was ready")
		default:
		}
		resp, err := c.Get(s.Endpoint + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("versitygw on %s not ready after %v", s.Addr, readyTimeout)
}

// Stop kills the server and waits for it to exit; it is safe to call twice.
// A test that simulates the tier going down calls it early.
func (s *Server) Stop() {
	s.once.Do(func() {
		if s.cmd.Process != nil {
			s.cmd.Process.Kill()
		}
		<-s.stopped
	})
}

// Output is what the server printed, for failure messages.
func (s *Server) Output() string { return s.out.String() }

// Client returns a plain S3 client for the server, with path-style
// addressing and the SDK's default retries: the baseline that benchmarks
// compare with, and a way for tests to look at objects directly.
func (s *Server) Client() *s3.Client { return client(s.Endpoint, s.Region, s.AccessKey, s.SecretKey) }

// client is a plain path-style S3 client of endpoint with static keys.
func client(endpoint, region, accessKey, secretKey string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
	})
}

// CreateBucket creates bucket name, failing t on error.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: create bucket %q: %v (server output: %s)", name, err, strings.TrimSpace(s.Output()))
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // keep the first MiB
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
