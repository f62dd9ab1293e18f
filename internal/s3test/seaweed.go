package s3test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kvstore/kvstore/internal/testenv"
)

// seaweedReady bounds each wait for the SeaweedFS cluster (a process
// answering, a volume server registering, the first write): its processes
// start in seconds, but a heavily loaded 2-core machine is slow.
const seaweedReady = 2 * time.Minute

// Seaweed is a SeaweedFS cluster on 127.0.0.1, for the tier's long form:
// one master whose default replication is 001 (every volume has a second
// copy on another server of the same rack), two volume servers, each with
// its own directory, and a filer serving the S3 gateway with the test
// credentials.
//
//	sw := s3test.StartSeaweed(t)  // stopped in t.Cleanup
//	sw.CreateBucket(t, "packets") // waits until the bucket takes writes
//	sw.Volumes[1].Kill()          // SIGKILL, as a crash would
//	sw.Volumes[1].Restart(t)      // same ports, same directory
//	sw.WaitVolumeServers(t, 2)
//
// The binary comes from $KVSTORE_SEAWEED_BIN (scripts/install-seaweedfs.sh
// builds it and prints its path); without it the test skips, or fails when
// KVSTORE_REQUIRE names seaweed.
type Seaweed struct {
	Endpoint  string // the S3 gateway, http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Region    string
	Master    *Proc
	Volumes   [2]*Proc
	Filer     *Proc // the filer and, in the same process, the S3 gateway

	masterHTTP string // http://127.0.0.1:PORT of the master
}

// Proc is one SeaweedFS process. Its output goes to <Dir>/<Name>.log.
type Proc struct {
	Name string
	Dir  string // its data directory
	bin  string
	args []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped chan struct{}
}

// StartSeaweed starts the cluster on free loopback ports under a fresh
// temporary directory, waits until the master sees both volume servers and
// the S3 gateway answers, and stops every process in t.Cleanup.
func StartSeaweed(t testing.TB) *Seaweed {
	t.Helper()
	bin := testenv.Env(t, testenv.Seaweed, "KVSTORE_SEAWEED_BIN")
	dir := t.TempDir()
	ports := make([]int, 10)
	for i := range ports {
		var p int
		var err error
		if i == 6 {
			p, err = freePortPlus10000()
		} else {
			p, err = freePort()
		}
		if err != nil {
			t.Fatalf("s3test: seaweed: pick a port: %v", err)
		}
		ports[i] = p
	}
	sw := &Seaweed{Endpoint: "http://127.0.0.1:" + strconv.Itoa(ports[8]), AccessKey: AccessKey, SecretKey: SecretKey,
		Region: Region, masterHTTP: "http://127.0.0.1:" + strconv.Itoa(ports[0])}
	// host:port.grpcPort names a server whose gRPC port is not port+10000.
	master := fmt.Sprintf("127.0.0.1:%d.%d", ports[0], ports[1])
	loop := []string{"-ip=127.0.0.1", "-ip.bind=127.0.0.1"}
	sw.Master = newProc(bin, dir, "master", append(loop, port(ports[0]), grpc(ports[1]), "-mdir=.", "-peers=none",
		"-defaultReplication=001", "-volumeSizeLimitMB=64", "-telemetry=false")...)
	for i := range sw.Volumes {
		sw.Volumes[i] = newProc(bin, dir, "volume"+strconv.Itoa(i), append(loop, port(ports[2+2*i]), grpc(ports[3+2*i]),
			"-dir=.", "-max=40", "-master="+master, "-preStopSeconds=0")...)
	}
	// The filer's gRPC port stays its HTTP port + 10000 (ports[7] unused):
	// the S3 gateway in its process dials the filer at that port whatever
	// -port.grpc says.
	sw.Filer = newProc(bin, dir, "filer", append(loop, port(ports[6]), "-master="+master,
		"-defaultStoreDir=.", "-localSocket=filer.sock", "-s3", "-s3.port="+strconv.Itoa(ports[8]),
		"-s3.port.grpc="+strconv.Itoa(ports[9]), "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-s3.localSocket=s3.sock", "-s3.config=../s3.json")...)
	if err := writeS3Config(filepath.Join(dir, "s3.json")); err != nil {
		t.Fatalf("s3test: seaweed: %v", err)
	}
	t.Cleanup(sw.Stop)
	if err := sw.Master.start(); err != nil {
		t.Fatalf("s3test: seaweed: %v", err)
	}
	sw.waitHTTP(t, sw.Master, sw.masterHTTP+"/dir/status")
	for _, v := range sw.Volumes {
		if err := v.start(); err != nil {
			t.Fatalf("s3test: seaweed: %v", err)
		}
	}
	sw.WaitVolumeServers(t, 2)
	if err := sw.Filer.start(); err != nil {
		t.Fatalf("s3test: seaweed: %v", err)
	}
	sw.waitHTTP(t, sw.Filer, sw.Endpoint+"/healthz")
	return sw
}

func port(p int) string { return "-port=" + strconv.Itoa(p) }
func grpc(p int) string { return "-port.grpc=" + strconv.Itoa(p) }

// writeS3Config writes the gateway's identities: the test key pair, allowed
// everything.
func writeS3Config(path string) error {
	cfg := map[string]any{"identities": []any{map[string]any{
		"name":        "kvstore-test",
		"credentials": []any{map[string]string{"accessKey": AccessKey, "secretKey": SecretKey}},
		"actions":     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func freePort() (int, error) {
	addr, err := freeAddr()
	if err != nil {
		return 0, err
	}
	_, p, _ := strings.Cut(addr, ":")
	return strconv.Atoi(p)
}

// freePortPlus10000 returns a free port p whose p+10000 is free too.
func freePortPlus10000() (int, error) {
	for range 100 {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free port p with p+10000 free")
}

func newProc(bin, root, name string, args ...string) *Proc {
	return &Proc{Name: name, Dir: filepath.Join(root, name), bin: bin, args: args}
}

// start runs the process in its directory, logging to stderr (its log file).
func (p *Proc) start() error {
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(p.Dir, p.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, append([]string{"-logtostderr=true", p.subcommand()}, p.args...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = p.Dir, log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	stopped := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(stopped) }()
	p.mu.Lock()
	p.cmd, p.stopped = cmd, stopped
	p.mu.Unlock()
	return nil
}

// subcommand is the weed verb for p: its name without the index.
func (p *Proc) subcommand() string { return strings.TrimRight(p.Name, "0123456789") }

// Kill sends SIGKILL, as a crash or the OOM killer would, and waits for the
// process to exit. It is safe to call on a process that is not running.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, stopped := p.cmd, p.stopped
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-stopped
}

// Restart starts a killed process again with the same ports and directory.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	p.Kill()
	if err := p.start(); err != nil {
		t.Fatalf("s3test: seaweed: %v", err)
	}
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.stopped:
		return false
	default:
		return true
	}
}

// Output is the last 4 KiB of the process's log, for failure messages.
func (p *Proc) Output() string {
	b, err := os.ReadFile(filepath.Join(p.Dir, p.Name+".log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	return string(b)
}

// DataBytes is the size of the volume files (*.dat) in p's directory: what
// a volume server holds.
func (p *Proc) DataBytes() int64 {
	var n int64
	matches, _ := filepath.Glob(filepath.Join(p.Dir, "*.dat"))
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil {
			n += st.Size()
		}
	}
	return n
}

// Stop kills every process of the cluster; it is safe to call twice.
func (sw *Seaweed) Stop() {
	sw.Filer.Kill()
	for _, v := range sw.Volumes {
		v.Kill()
	}
	sw.Master.Kill()
}

// waitHTTP polls url until it answers with a status below 500, failing t
// (with p's log) when p exits or seaweedReady passes.
func (sw *Seaweed) waitHTTP(t testing.TB, p *Proc, url string) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(seaweedReady)
	for time.Now().Before(deadline) {
		if !p.Running() {
			t.Fatalf("s3test: seaweed %s exited before it answered: %s", p.Name, p.Output())
		}
		if resp, err := c.Get(url); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("s3test: seaweed %s: %s did not answer within %v: %s", p.Name, url, seaweedReady, p.Output())
}

// VolumeServers returns the addresses of the volume servers the master
// counts as alive (its /dir/status topology).
func (sw *Seaweed) VolumeServers() ([]string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(sw.masterHTTP + "/dir/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st struct {
		Topology struct {
			DataCenters []struct {
				Racks []struct {
					DataNodes []struct{ Url string }
				}
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("master /dir/status: %w", err)
	}
	var urls []string
	for _, dc := range st.Topology.DataCenters {
		for _, r := range dc.Racks {
			for _, dn := range r.DataNodes {
				urls = append(urls, dn.Url)
			}
		}
	}
	return urls, nil
}

// WaitVolumeServers waits until the master counts n volume servers alive.
func (sw *Seaweed) WaitVolumeServers(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(seaweedReady)
	var urls []string
	var err error
	for time.Now().Before(deadline) {
		if urls, err = sw.VolumeServers(); err == nil && len(urls) == n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("s3test: seaweed master counts volume servers %v (%v), want %d within %v: %s",
		urls, err, n, seaweedReady, sw.Master.Output())
}

// Client returns a plain S3 client for the gateway, with path-style
// addressing and the SDK's default retries.
func (sw *Seaweed) Client() *s3.Client {
	return client(sw.Endpoint, sw.Region, sw.AccessKey, sw.SecretKey)
}

// CreateBucket creates bucket name, then writes and reads back a 64 KiB
// probe object (".probe", outside any tier prefix) until both succeed:
// the first write makes the master grow the bucket's volumes, which takes
// a while. It fails t when that does not happen within seaweedReady.
func (sw *Seaweed) CreateBucket(t testing.TB, name string) {
	t.Helper()
	probe := bytes.Repeat([]byte("kvstore seaweed probe\n"), 3000)[:64<<10]
	deadline := time.Now().Add(seaweedReady)
	var err error
	for time.Now().Before(deadline) {
		if err = sw.tryBucket(name, probe); err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("s3test: seaweed: create bucket %q and write to it: %v (filer log: %s)", name, err, sw.Filer.Output())
}

func (sw *Seaweed) tryBucket(name string, probe []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sw.Client()
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &name}); err != nil {
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
			return fmt.Errorf("create: %w", err)
		}
	}
	key := ".probe"
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &name, Key: &key, Body: bytes.NewReader(probe)}); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &name, Key: &key})
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	defer out.Body.Close()
	got, err := io.ReadAll(out.Body)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if !bytes.Equal(got, probe) {
		return errors.New("probe object read back differs")
	}
	return nil
}
