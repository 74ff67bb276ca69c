package ctbench

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/testbed"
)

// AddChainResult is one log's add-chain throughput.
type AddChainResult struct {
	Log         string  `json:"log"`
	Chains      int     `json:"chains"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"per_second"`
	// LatencyMsP50 and LatencyMsP99 are one submission's time, which
	// includes waiting for the entry to be in a published checkpoint.
	LatencyMsP50 float64 `json:"latency_ms_p50"`
	LatencyMsP99 float64 `json:"latency_ms_p99"`
}

// chainSet is the chains both logs are given: distinct ECDSA P-256 leaves
// under one intermediate, submitted leaf, intermediate, root.
type chainSet struct {
	rootPEM []byte
	bodies  [][]byte // add-chain request bodies
}

func newChains(n int) (*chainSet, error) {
	if n < 2 {
		return nil, fmt.Errorf("ctbench: %d chains: at least 2 (one submitted alone first)", n)
	}
	root, err := testbed.NewRootCA("pkie bench CT Root", testbed.ECDSAP256)
	if err != nil {
		return nil, err
	}
	ica, err := root.NewIntermediate("pkie bench CT Issuing CA", testbed.ECDSAP256)
	if err != nil {
		return nil, err
	}
	cs := &chainSet{rootPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Cert.Raw})}
	for i := range n {
		leaf, err := ica.Issue(testbed.LeafOptions{DNSNames: []string{"site-" + strconv.Itoa(i) + ".bench.example"}})
		if err != nil {
			return nil, err
		}
		chain := [][]byte{leaf.Cert.Raw, ica.Cert.Raw, root.Cert.Raw}
		b64 := make([]string, len(chain))
		for j, c := range chain {
			b64[j] = base64.StdEncoding.EncodeToString(c)
		}
		body, _ := json.Marshal(map[string][]string{"chain": b64})
		cs.bodies = append(cs.bodies, body)
	}
	return cs, nil
}

// submit posts the first chain alone (untimed: it stores the shared
// intermediate and root, which TesseraCT v0.1.1 has been seen to fail with
// a 500 when several cold requests store them at once), then every other
// chain to url+"/ct/v1/add-chain" from concurrency workers, and times
// those. Every submission must succeed.
func (cs *chainSet) submit(ctx context.Context, name, url string, concurrency int) (*AddChainResult, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	if err := post(ctx, client, url+"/ct/v1/add-chain", cs.bodies[0]); err != nil {
		return nil, fmt.Errorf("%s: the first chain: %w", name, err)
	}
	bodies := cs.bodies[1:]
	lat := make([]time.Duration, len(bodies))
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(bodies) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := post(ctx, client, url+"/ct/v1/add-chain", bodies[i])
				lat[i] = time.Since(t0)
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("%s: chain %d: %w", name, i, err); cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	s := time.Since(start).Seconds()
	ms := durationsMs(lat)
	return &AddChainResult{Log: name, Chains: len(bodies), Concurrency: concurrency, Seconds: s,
		PerSecond: float64(len(bodies)) / s, LatencyMsP50: quantile(ms, 0.5), LatencyMsP99: quantile(ms, 0.99)}, nil
}

func post(ctx context.Context, c *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %.1000s", resp.Status, b)
	}
	var sct struct {
		Signature []byte `json:"signature"`
	}
	if err := json.Unmarshal(b, &sct); err != nil || len(sct.Signature) == 0 {
		return fmt.Errorf("answer is not an SCT: %.200s", b)
	}
	return nil
}

// logTiming is what both logs are configured with, so that add-chain,
// which answers once the entry is in a published checkpoint, waits the
// same in both.
type logTiming struct {
	BatchMaxSize       int
	BatchMaxAge        time.Duration
	CheckpointInterval time.Duration
}

var defaultTiming = logTiming{BatchMaxSize: 256, BatchMaxAge: 100 * time.Millisecond, CheckpointInterval: 200 * time.Millisecond}

// runPkieLog starts pkie's log (internal/ctlog, POSIX storage) on a
// loopback port in this process and returns its submission URL.
func runPkieLog(ctx context.Context, dir string, roots []byte, t logTiming, concurrency int) (url string, stop func(), err error) {
	if _, err := ctlog.Init(ctx, dir, "bench.pkie.example/log", ctlog.InitOptions{Roots: roots}); err != nil {
		return "", nil, err
	}
	l, err := ctlog.Open(ctx, dir, ctlog.Options{BatchMaxSize: t.BatchMaxSize, BatchMaxAge: t.BatchMaxAge, CheckpointInterval: t.CheckpointInterval})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		l.Close()
		return "", nil, err
	}
	// The bench is one client: its share is the whole submission pool.
	srv := ctlog.NewHTTPServer(l.Handler(ctlog.HandlerOptions{MaxAddChain: concurrency, MaxPerClient: concurrency}))
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close(); l.Close() }, nil
}

// runTesseraCT starts TesseraCT's POSIX binary on a loopback port with the
// same roots and timing, and returns its submission URL.
func runTesseraCT(ctx context.Context, bin, dir string, roots []byte, t logTiming) (url string, stop func(), err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", nil, err
	}
	sec1, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	keyPath, rootsPath := filepath.Join(dir, "log.key"), filepath.Join(dir, "roots.pem")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), 0o600); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(rootsPath, roots, 0o644); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(dir, "tesseract.log"))
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin,
		"--origin=bench.tesseract.example/log",
		"--storage_dir="+filepath.Join(dir, "storage"),
		"--roots_pem_file="+rootsPath,
		"--private_key="+keyPath,
		"--http_endpoint="+addr,
		"--checkpoint_interval="+t.CheckpointInterval.String(),
		"--batch_max_age="+t.BatchMaxAge.String(),
		"--batch_max_size="+strconv.Itoa(t.BatchMaxSize),
		"--logtostderr")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", nil, fmt.Errorf("starting TesseraCT %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
	}
	url = "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/ct/v1/get-roots")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, stop, nil
			}
		}
		select {
		case <-done:
			out, _ := os.ReadFile(logf.Name())
			return "", nil, fmt.Errorf("TesseraCT exited: %.500s", out)
		case <-ctx.Done():
			stop()
			return "", nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("TesseraCT did not answer get-roots within 30s")
		}
	}
}

// TesseraCTBinary finds TesseraCT's POSIX binary as internal/tesseracttest
// does: $PKIE_TESSERACT, tesseract-posix on PATH, or
// $(go env GOPATH)/opt/tesseract-v0.1.1/posix. It returns "" if none is
// there.
func TesseraCTBinary() string {
	if p := os.Getenv("PKIE_TESSERACT"); p != "" {
		return p
	}
	if p, err := exec.LookPath("tesseract-posix"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "opt", "tesseract-v0.1.1", "posix")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}
