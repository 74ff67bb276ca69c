// Package tesseracttest runs TesseraCT, transparency-dev's static-ct-api
// log (github.com/transparency-dev/tesseract v0.1.1, its POSIX binary), on
// loopback for a test: software nobody here wrote, against which pkie's
// log, follower and mirror are checked.
//
// TesseraCT's POSIX binary serves only the submission half of
// static-ct-api (/ct/v1/add-chain, add-pre-chain, get-roots); the
// monitoring half is the files it writes under its storage directory. A
// Log serves those (checkpoint, tile/..., issuer/...) with a file server on
// a second loopback port, as a deployment's web server would.
//
// The binary is found, in order, at $PKIE_TESSERACT, as tesseract-posix on
// PATH, and at $(go env GOPATH)/opt/tesseract-v0.1.1/posix, where
// scripts/deps.sh --tesseract installs it with
//
//	GOBIN=$(go env GOPATH)/opt/tesseract-v0.1.1 go install github.com/transparency-dev/tesseract/cmd/tesseract/posix@v0.1.1
//
// Where it is missing a test is skipped, except under CI (CI set in the
// environment), where its absence is a failure.
package tesseracttest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/proctest"
	"github.com/pkie/pkie/internal/testpki"
	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// Version is the TesseraCT release the harness is written for and
// scripts/deps.sh installs.
const Version = "v0.1.1"

// Options configure a TesseraCT log. The zero value is a log trusting a
// fresh testbed root.
type Options struct {
	// Origin is the log's checkpoint origin; default "tesseract.test/log".
	Origin string
	// Roots are the certificates the log accepts chains to; default the
	// root of a fresh testbed hierarchy (Log.CA).
	Roots []*x509.Certificate
	// CheckpointInterval is how often TesseraCT publishes a checkpoint
	// when the log grew; default 200 ms (Tessera's POSIX minimum is
	// 100 ms). add-chain answers only once its entry is in a published
	// checkpoint, so this bounds a submission's latency.
	CheckpointInterval time.Duration
	// Args are further command-line flags for TesseraCT.
	Args []string
}

// Log is a running TesseraCT log.
type Log struct {
	// SubmissionURL is the static-ct-api submission prefix, without a
	// trailing slash: SubmissionURL+"/ct/v1/add-chain" accepts chains
	// (what certificate-transparency-go's client.New takes).
	SubmissionURL string
	// MonitoringURL is the static-ct-api monitoring prefix, without a
	// trailing slash: MonitoringURL+"/checkpoint", "/tile/0/000",
	// "/tile/data/000", "/issuer/<hex sha256>".
	MonitoringURL string
	// Origin is the checkpoint origin line.
	Origin string
	// VerifierKey is the log's checkpoint verifier key in the C2SP
	// signed-note form transparency-dev/formats/note's
	// NewRFC6962Verifier parses (ECDSA P-256, RFC6962NoteSignature).
	VerifierKey string
	// PublicKey is the log's ECDSA P-256 key, which signs SCTs and
	// checkpoints.
	PublicKey crypto.PublicKey
	// LogID is SHA-256 of the key's SubjectPublicKeyInfo (RFC 6962 §3.2).
	LogID [32]byte
	// CA is the testbed CA whose root the log accepts, nil when
	// Options.Roots were given.
	CA *testpki.CA
	// Dir is TesseraCT's storage directory.
	Dir string
	// Reader reads MonitoringURL.
	Reader

	t       testing.TB
	logPath string
	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped chan struct{}
	files   *http.Server
}

// Binary returns the path of TesseraCT's POSIX binary, or an error saying
// where it looked.
func Binary() (string, error) {
	if p := os.Getenv("PKIE_TESSERACT"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("PKIE_TESSERACT=%s: %w", p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("tesseract-posix"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "env", "GOPATH").Output(); err == nil {
		gopath = strings.TrimSpace(string(out))
	}
	var tried []string
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "opt", "tesseract-"+Version, "posix")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("no TesseraCT %s binary: PKIE_TESSERACT unset, no tesseract-posix on PATH, none at %s (scripts/deps.sh --tesseract installs it)",
		Version, strings.Join(tried, ", "))
}

// Start runs TesseraCT in a temporary directory with a fresh ECDSA P-256
// key, waits until it answers and its first checkpoint is published, and
// stops it when the test ends.
func Start(t testing.TB, o Options) *Log {
	t.Helper()
	bin, err := Binary()
	proctest.Require(t, "tesseracttest", err, "it: scripts/deps.sh --tesseract")
	if o.Origin == "" {
		o.Origin = "tesseract.test/log"
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = 200 * time.Millisecond
	}
	l := &Log{t: t, Origin: o.Origin}
	if len(o.Roots) == 0 {
		if l.CA, err = testpki.NewRootCA("TesseraCT Test Root", testpki.ECDSAP256); err != nil {
			t.Fatal(err)
		}
		o.Roots = []*x509.Certificate{l.CA.Cert}
	}
	dir := t.TempDir()
	l.Dir = filepath.Join(dir, "storage")
	l.logPath = filepath.Join(dir, "tesseract.log")

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "log.key")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), 0o600); err != nil {
		t.Fatal(err)
	}
	var roots bytes.Buffer
	for _, c := range o.Roots {
		pem.Encode(&roots, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	rootsPath := filepath.Join(dir, "roots.pem")
	if err := os.WriteFile(rootsPath, roots.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	l.PublicKey = key.Public()
	spki, err := x509.MarshalPKIXPublicKey(l.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	l.LogID = sha256.Sum256(spki)
	if l.VerifierKey, err = fnote.RFC6962VerifierString(o.Origin, l.PublicKey); err != nil {
		t.Fatalf("tesseracttest: verifier key for origin %q: %v", o.Origin, err)
	}

	// The read path first, so that MonitoringURL is known; it serves
	// files only once TesseraCT has written them.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.MonitoringURL = "http://" + ln.Addr().String()
	l.Reader = Reader{URL: l.MonitoringURL}
	l.files = &http.Server{Handler: ReadPath(l.Dir), ReadHeaderTimeout: 5 * time.Second}
	go l.files.Serve(ln)
	t.Cleanup(func() { l.files.Close() })

	logf, err := os.Create(l.logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	t.Cleanup(l.Stop)
	// The port is picked free and then bound by TesseraCT, so another
	// process may take it in between; TesseraCT then logs the failure and
	// waits for a signal. Such a start is stopped and retried on another
	// port, on the same storage.
	for attempt := 1; ; attempt++ {
		port := pickPort(t)
		l.SubmissionURL = "http://127.0.0.1:" + strconv.Itoa(port)
		args := []string{
			"--origin=" + o.Origin,
			"--storage_dir=" + l.Dir,
			"--roots_pem_file=" + rootsPath,
			"--private_key=" + keyPath,
			"--http_endpoint=127.0.0.1:" + strconv.Itoa(port),
			"--checkpoint_interval=" + o.CheckpointInterval.String(),
			"--batch_max_age=50ms",
			// The test's chains come from one root and may be submitted
			// many times; duplicates are resolved, not rate-limited away.
			"--rate_limit_dedup=-1",
			"--logtostderr",
		}
		args = append(args, o.Args...)
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = proctest.DieWithParent(nil)
		if err := cmd.Start(); err != nil {
			t.Fatalf("tesseracttest: starting %s: %v", bin, err)
		}
		l.mu.Lock()
		l.cmd = cmd
		l.stopped = make(chan struct{})
		go func(stopped chan struct{}) { cmd.Wait(); close(stopped) }(l.stopped)
		l.mu.Unlock()
		err := l.waitReady()
		if err == nil {
			return l
		}
		if errors.Is(err, errPortTaken) && attempt < 3 {
			l.Stop()
			// The next attempt's log starts afresh, so that this
			// attempt's failure is not taken for the next one's.
			if err := logf.Truncate(0); err != nil {
				t.Fatal(err)
			}
			if _, err := logf.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Fatalf("tesseracttest: %v\n%s", err, l.Output())
	}
}

var errPortTaken = errors.New("TesseraCT's port was taken before it bound it")

// waitReady polls get-roots and the checkpoint file until both answer.
func (l *Log) waitReady() error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := l.ready()
		if err == nil {
			return nil
		}
		if strings.Contains(l.Output(), "address already in use") {
			return errPortTaken
		}
		select {
		case <-l.stopped:
			return errors.New("TesseraCT exited during start-up")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("TesseraCT not ready within 60 s: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (l *Log) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, u := range []string{l.SubmissionURL + "/ct/v1/get-roots", l.MonitoringURL + "/checkpoint"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", u, resp.Status)
		}
	}
	return nil
}

// Output returns what TesseraCT has logged so far.
func (l *Log) Output() string {
	b, _ := os.ReadFile(l.logPath)
	return string(b)
}

// Verifier returns the note verifier of the log's checkpoints.
func (l *Log) Verifier() note.Verifier {
	v, err := fnote.NewRFC6962Verifier(l.VerifierKey)
	if err != nil {
		panic(fmt.Sprintf("tesseracttest: own verifier key %q: %v", l.VerifierKey, err))
	}
	return v
}

// Checkpoint fetches the published checkpoint, verifies its signature and
// origin, and returns it parsed and as published.
func (l *Log) Checkpoint(ctx context.Context) (*log.Checkpoint, []byte, error) {
	raw, err := l.ReadCheckpoint(ctx)
	if err != nil {
		return nil, nil, err
	}
	cp, _, _, err := log.ParseCheckpoint(raw, l.Origin, l.Verifier())
	if err != nil {
		return nil, raw, fmt.Errorf("tesseracttest: checkpoint: %w", err)
	}
	return cp, raw, nil
}

// WaitSize polls the published checkpoint until it covers at least size
// entries and returns it (TesseraCT publishes every CheckpointInterval).
func (l *Log) WaitSize(ctx context.Context, size uint64) (*log.Checkpoint, []byte, error) {
	for {
		cp, raw, err := l.Checkpoint(ctx)
		if err == nil && cp.Size >= size {
			return cp, raw, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("checkpoint size %d", cp.Size)
			}
			return nil, nil, fmt.Errorf("tesseracttest: waiting for a checkpoint of size %d: %w (last: %v)", size, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Reader reads a static-ct-api monitoring prefix over HTTP (TesseraCT's,
// or any other log's), in the shapes of Tessera's client fetcher functions
// (client.CheckpointFetcherFunc, TileFetcherFunc, EntryBundleFetcherFunc)
// but with static-ct-api's layout: entry bundles are data tiles under
// tile/data/. A partial tile that has been replaced by its full tile is
// read from the full one. A missing file is an error wrapping
// os.ErrNotExist.
type Reader struct {
	URL  string       // the monitoring prefix, without a trailing slash
	HTTP *http.Client // nil means http.DefaultClient
}

// ReadCheckpoint fetches the checkpoint.
func (r Reader) ReadCheckpoint(ctx context.Context) ([]byte, error) {
	return r.get(ctx, "checkpoint")
}

// ReadTile fetches a hash tile.
func (r Reader) ReadTile(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
	return r.partialOrFull(ctx, fmt.Sprintf("tile/%d/%s", level, tileIndex(index)), p)
}

// ReadEntryBundle fetches a data tile.
func (r Reader) ReadEntryBundle(ctx context.Context, index uint64, p uint8) ([]byte, error) {
	return r.partialOrFull(ctx, "tile/data/"+tileIndex(index), p)
}

// ReadIssuer fetches an issuer certificate by its SHA-256 fingerprint
// (issuer/<hex>).
func (r Reader) ReadIssuer(ctx context.Context, fingerprint [32]byte) ([]byte, error) {
	return r.get(ctx, fmt.Sprintf("issuer/%x", fingerprint))
}

func (r Reader) partialOrFull(ctx context.Context, p string, width uint8) ([]byte, error) {
	if width > 0 {
		b, err := r.get(ctx, p+".p/"+strconv.Itoa(int(width)))
		if !errors.Is(err, os.ErrNotExist) {
			return b, err
		}
	}
	return r.get(ctx, p)
}

func (r Reader) get(ctx context.Context, p string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL+"/"+p, nil)
	if err != nil {
		return nil, err
	}
	hc := r.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<24))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return b, nil
	case http.StatusNotFound:
		return nil, fmt.Errorf("tesseracttest: GET %s/%s: %w", r.URL, p, os.ErrNotExist)
	}
	return nil, fmt.Errorf("tesseracttest: GET %s/%s: %s", r.URL, p, resp.Status)
}

// tileIndex formats a tile index as tlog-tiles paths do: groups of three
// digits, all but the last prefixed with "x".
func tileIndex(n uint64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// ReadPath serves the static-ct-api monitoring files TesseraCT's POSIX
// storage writes under dir: checkpoint, tile/... and issuer/..., and
// nothing else of the directory (its state and antispam databases).
func ReadPath(dir string) http.Handler {
	files := http.FileServer(http.Dir(dir))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := path.Clean("/" + r.URL.Path)
		switch {
		case p == "/checkpoint":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
		case strings.HasPrefix(p, "/tile/"):
			w.Header().Set("Content-Type", "application/octet-stream")
		case strings.HasPrefix(p, "/issuer/"):
			w.Header().Set("Content-Type", "application/pkix-cert")
		default:
			http.NotFound(w, r)
			return
		}
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil || fi.IsDir() {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = p
		files.ServeHTTP(w, r2)
	})
}

// Stop shuts TesseraCT down (SIGTERM, then SIGKILL after 10 s).
func (l *Log) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cmd == nil {
		return
	}
	l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.stopped:
	case <-time.After(10 * time.Second):
		l.cmd.Process.Kill()
		<-l.stopped
	}
	l.cmd = nil
}

// pickPort picks TesseraCT's port; the harness's own test replaces it to
// hand out a taken one.
var pickPort = freePort

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
