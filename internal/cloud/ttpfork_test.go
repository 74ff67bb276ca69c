package cloud_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/cloud"
	"github.com/pkie/pkie/internal/pecwire"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/provers"
	revprover "github.com/pkie/pkie/internal/provers/revocation"
	rev "github.com/pkie/pkie/internal/revocation"
	"github.com/pkie/pkie/internal/testbed"
)

// forkWorld is a CT log and a revocation authority on loopback, the
// authority behind a handler the test can swap for a forked one under the
// same key, and a leaf that is logged and revoked.
type forkWorld struct {
	ttp     *testbed.TTPs
	raDir   string
	ra      *rev.Authority
	raURL   string
	raKey   string
	handler atomic.Pointer[http.Handler]
	root    *testbed.CA
	leaf    *testbed.Leaf
	kid     []byte
}

func newForkWorld(t *testing.T) *forkWorld {
	t.Helper()
	ctx := context.Background()
	w := &forkWorld{raDir: filepath.Join(t.TempDir(), "ra")}
	var err error
	w.root, _ = testbed.NewRootCA("Fork Root", testbed.ECDSAP256)
	if w.ttp, err = testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{w.root}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.ttp.Close() })
	if w.leaf, err = w.root.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ttp.LogChain(ctx, w.leaf.Chain); err != nil {
		t.Fatal(err)
	}
	if err := w.ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if w.raKey, err = rev.Init(w.raDir, "pkie.test/fork-authority"); err != nil {
		t.Fatal(err)
	}
	if w.ra, err = rev.Open(w.raDir, rev.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.ra.Close() })
	w.kid, _ = revocation.IssuerKeyID(w.root.Cert)
	if _, err := w.ra.AddSerials(ctx, w.kid, []*big.Int{w.leaf.Cert.SerialNumber, big.NewInt(5), big.NewInt(6)}, "t"); err != nil {
		t.Fatal(err)
	}
	h := w.ra.Handler()
	w.handler.Store(&h)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { (*w.handler.Load()).ServeHTTP(rw, r) }))
	t.Cleanup(srv.Close)
	w.raURL = srv.URL
	return w
}

// fork has the authority lose its database and start over under the same
// key, deliberately, with more revocations than before and not the leaf's:
// a longer tree in which the revoked leaf is absent.
func (w *forkWorld) fork(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	w.ra.Close()
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(w.raDir, rev.DBFile+s))
	}
	var err error
	if w.ra, err = rev.Open(w.raDir, rev.Options{AcceptFork: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ra.AddSerials(ctx, w.kid, []*big.Int{big.NewInt(7), big.NewInt(8), big.NewInt(9), big.NewInt(10)}, "t"); err != nil {
		t.Fatal(err)
	}
	h := w.ra.Handler()
	w.handler.Store(&h)
}

func (w *forkWorld) pkies() []cloud.PKIEConfig {
	return []cloud.PKIEConfig{
		{Name: "ct", Config: w.ttp.CTProverConfig().JSON()},
		{Name: "revocation", Config: revprover.ProverConfig{AuthorityURL: w.raURL, AuthorityKey: w.raKey}.JSON()},
	}
}

// replica is one running cloud built from a data directory as `pkie cloud
// serve` builds it.
type replica struct {
	c        *cloud.Cloud
	tcp      string
	httpURL  string
	pin      [32]byte
	logs     *syncBuffer
	stop     func()
	provers  []pkie.Prover
	stopOnce sync.Once
}

func startReplica(t *testing.T, d *cloud.DataDir, o cloud.ProverOptions) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{logs: &syncBuffer{}, pin: pecwire.SPKIHash(d.Leaf)}
	o.Log = slog.New(slog.NewTextHandler(r.logs, nil))
	reg := provers.Registry()
	provers, err := d.BuildProvers(ctx, reg, d.Config.PKIEs, o)
	if err != nil {
		cancel()
		t.Fatalf("building the provers: %v\nlog:\n%s", err, r.logs)
	}
	r.provers = provers
	if r.c, err = cloud.New(cloud.Config{Certificate: d.Certificate, Provers: provers, Registry: reg, Logger: o.Log}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.tcp = ln.Addr().String()
	hs := httptest.NewServer(r.c.Handler())
	r.httpURL = hs.URL
	var wg sync.WaitGroup
	wg.Go(func() { r.c.Run(ctx) })
	wg.Go(func() { r.c.ServeTCP(ctx, ln) })
	r.stop = func() {
		r.stopOnce.Do(func() {
			cancel()
			hs.Close()
			wg.Wait()
			r.c.Wait()
			for _, p := range provers {
				if c, ok := p.(io.Closer); ok {
					c.Close()
				}
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

// prove submits the world's leaf for CT and revocation and returns each
// outcome.
func (r *replica) prove(t *testing.T, w *forkWorld) map[pkie.ID]*pecwire.Proof {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pecwire.DialTCP(ctx, r.tcp, pecwire.ClientTLS(r.pin))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	must(t, conn.Send(&pecwire.Register{Version: pecwire.Version}, time.Now().Add(10*time.Second)))
	id := recv(t, conn).(*pecwire.Registered).ClientID
	sub := subject(w.leaf)
	must(t, conn.Send(&pecwire.Submit{ClientID: id, Nonce: pecwire.Nonce{1}, Budget: 15 * time.Second, ServerName: sub.ServerName, Port: 443,
		Chain: w.leaf.Chain, Requests: []pkie.Request{{ID: pkie.CT}, {ID: pkie.Revocation}}}, time.Now().Add(10*time.Second)))
	out := map[pkie.ID]*pecwire.Proof{}
	for range 2 {
		p := recv(t, conn).(*pecwire.Proof)
		out[p.ID] = p
	}
	return out
}

// verify is what a client that pinned the TTPs' keys concludes from p.
func (w *forkWorld) verify(t *testing.T, p *pecwire.Proof) pkie.Assertion {
	t.Helper()
	var v pkie.Verifier
	var err error
	switch p.ID {
	case pkie.CT:
		v, err = ct.NewVerifierFrom(w.ttp.CTVerifierConfig())
	case pkie.Revocation:
		v, err = revocation.NewVerifierFrom(revocation.VerifierConfig{Key: w.raKey})
	}
	if err != nil {
		t.Fatal(err)
	}
	return v.Verify(context.Background(), &pkie.VerifyRequest{Subject: subject(w.leaf), Proof: p.Proof, Now: time.Now(),
		VerifiedChains: verified(t, w.leaf, w.root)})
}

// health fetches /healthz.
func (r *replica) health(t *testing.T) (int, cloud.Health) {
	t.Helper()
	resp, err := http.Get(r.httpURL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h cloud.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, h
}

// metric returns the exposition line of name{pkie="which"}.
func (r *replica) metric(t *testing.T, name, which string) string {
	t.Helper()
	resp, err := http.Get(r.httpURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+`{pkie="`+which+`"}`) {
			return l
		}
	}
	return ""
}

// wantRevocationRefused checks a replica that must not serve the forked
// tree: it answers revocation as unavailable (never a proof) and reports it
// unhealthy with why in /healthz and the metric; it serves CT when ctOK.
func wantRevocationRefused(t *testing.T, w *forkWorld, r *replica, why string, ctOK bool) {
	t.Helper()
	out := r.prove(t, w)
	if p := out[pkie.CT]; !ctOK {
		if p.Status != pecwire.ProofFailed || !strings.Contains(p.Text, "unavailable") {
			t.Errorf("ct: %v %q, want failed: unavailable", p.Status, p.Text)
		}
	} else if p.Status != pecwire.ProofOK {
		t.Errorf("ct: %v %q, want a proof", p.Status, p.Text)
	} else if a := w.verify(t, p); a.Status != pkie.Pass {
		t.Errorf("ct proof: %s (%s)", a.Status, a.Reason)
	}
	if p := out[pkie.Revocation]; p.Status != pecwire.ProofFailed || !strings.Contains(p.Text, "unavailable") {
		t.Errorf("revocation: %v %q, want failed: unavailable", p.Status, p.Text)
		if p.Proof != nil {
			a := w.verify(t, p)
			t.Errorf("revocation proof on the fork: a client concludes %s (%s)", a.Status, a.Reason)
		}
	}
	code, h := r.health(t)
	if code != http.StatusServiceUnavailable || h.Status != "degraded" || (h.PKIEs["ct"] == "ok") != ctOK || !strings.Contains(h.PKIEs["revocation"], why) {
		t.Errorf("/healthz %d %+v, want 503 naming revocation: %s", code, h, why)
	}
	if l := r.metric(t, "pkie_cloud_pkie_healthy", "revocation"); !strings.HasSuffix(l, " 0") {
		t.Errorf("revocation health metric %q, want 0", l)
	}
	if l, want := r.metric(t, "pkie_cloud_pkie_healthy", "ct"), map[bool]string{true: " 1", false: " 0"}[ctOK]; !strings.HasSuffix(l, want) {
		t.Errorf("ct health metric %q, want%s", l, want)
	}
}

// TestRestartAfterTTPFork: a replica serves a revoked
// leaf's revocation proof; the authority forks (a longer tree without the
// leaf, same key); the replica, restarted on its data directory, starts all
// the same, proves CT, answers revocation as unavailable and reports it
// unhealthy, instead of exiting and taking CT down with it.
func TestRestartAfterTTPFork(t *testing.T) {
	w := newForkWorld(t)
	d, err := cloud.Init(filepath.Join(t.TempDir(), "cloud"), cloud.FileConfig{Name: "pec.test", PKIEs: w.pkies()})
	if err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, d, cloud.ProverOptions{TrustFirstHead: true})
	out := r.prove(t, w)
	if a := w.verify(t, out[pkie.Revocation]); a.Status != pkie.Fail || !strings.Contains(a.Reason, "revoked") {
		t.Fatalf("before the fork: revocation %s (%s), want revoked", a.Status, a.Reason)
	}
	r.stop()

	w.fork(t)
	r = startReplica(t, d, cloud.ProverOptions{})
	wantRevocationRefused(t, w, r, "REFUSED", true)
}

// TestFreshReplicaRefusesFork: a replica without state
// of its own (a copy of the data directory made before the first serve)
// starts after the authority forked. Told its peer, it learns from it the
// head the authority published before and refuses the fork; without a peer
// it serves no revocation proof at all, since it cannot know; only an
// operator's --trust-first-head makes it take the fork, and with it the
// revoked leaf becomes "not revoked": the hole the default closes.
func TestFreshReplicaRefusesFork(t *testing.T) {
	w := newForkWorld(t)
	base := filepath.Join(t.TempDir(), "cloud")
	d, err := cloud.Init(base, cloud.FileConfig{Name: "pec.test", PKIEs: w.pkies()})
	if err != nil {
		t.Fatal(err)
	}
	// Copies made before the first serve, as docs/operations/cloud.md
	// says to make them.
	fresh := func() *cloud.DataDir {
		dst := filepath.Join(t.TempDir(), "cloud")
		if err := os.CopyFS(dst, os.DirFS(base)); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dst, cloud.FileKey), 0o600)
		fd, err := cloud.Load(dst)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	d2, d3, d4 := fresh(), fresh(), fresh()
	first := startReplica(t, d, cloud.ProverOptions{TrustFirstHead: true})
	if a := w.verify(t, first.prove(t, w)[pkie.Revocation]); a.Status != pkie.Fail {
		t.Fatalf("before the fork: revocation %s (%s), want revoked", a.Status, a.Reason)
	}

	w.fork(t)
	// The first replica keeps its last good tree; fresh ones start.
	t.Run("peer", func(t *testing.T) {
		r := startReplica(t, d2, cloud.ProverOptions{Peers: []string{first.httpURL}})
		wantRevocationRefused(t, w, r, "REFUSED", true)
		// It serves what it learned to replicas after it.
		resp, err := http.Get(r.httpURL + "/v1/heads/revocation")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want, _ := http.Get(first.httpURL + "/v1/heads/revocation")
		wb, _ := io.ReadAll(want.Body)
		want.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, wb) || len(b) == 0 {
			t.Errorf("/v1/heads/revocation: %s %q, want the first replica's %q", resp.Status, b, wb)
		}
	})
	t.Run("no peer", func(t *testing.T) {
		r := startReplica(t, d3, cloud.ProverOptions{})
		// CT still proves: its mirror rebuilds the log's tree from
		// entries it checks against checkpoints the pinned log key signed,
		// and signs its own heads; it asks no peer for a floor.
		wantRevocationRefused(t, w, r, "no record of what the TTP signed before", true)
	})
	t.Run("trust first head", func(t *testing.T) {
		r := startReplica(t, d4, cloud.ProverOptions{TrustFirstHead: true})
		if a := w.verify(t, r.prove(t, w)[pkie.Revocation]); a.Status != pkie.Pass {
			t.Fatalf("trusting the forked head: revocation %s (%s); the test no longer shows the hole", a.Status, a.Reason)
		}
	})
}

// TestProverLogNamesPKIEOnce: the host names each prover's
// enhancement in its logger; the prover's lines carry the attribute once,
// not "pkie=ct pkie=ct".
func TestProverLogNamesPKIEOnce(t *testing.T) {
	w := newForkWorld(t)
	d, err := cloud.Init(filepath.Join(t.TempDir(), "cloud"), cloud.FileConfig{Name: "pec.test", PKIEs: w.pkies()})
	if err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, d, cloud.ProverOptions{TrustFirstHead: true})
	r.stop()
	n := 0
	for _, l := range strings.Split(r.logs.String(), "\n") {
		for _, name := range []string{"ct", "revocation"} {
			if c := strings.Count(l, " pkie="+name); c > 0 {
				n++
				if c != 1 || strings.Count(l, " pkie=") != 1 {
					t.Errorf("line names the enhancement %d times: %s", strings.Count(l, " pkie="), l)
				}
			}
		}
	}
	if n < 2 {
		t.Fatalf("no prover lines to check:\n%s", r.logs)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
