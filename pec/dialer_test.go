package pec

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
	"github.com/pkie/pkie/internal/pecwire"
)

// gateSetup is a cloud hosting a gate prover, a session with it, a
// recording TLS server and a Dialer that requires the gate's proof.
type gateSetup struct {
	prover *gateProver
	srv    *recordingServer
	pki    *testPKI
	d      *Dialer
}

func newGateSetup(t *testing.T, transport string, maxVersion uint16) *gateSetup {
	t.Helper()
	key := newEd25519(t)
	gp := newGateProver(key)
	gp.started = make(chan struct{}, 16)
	reg := testRegistry(t)
	b := startCloud(t, reg, gp)
	cl := dialCloud(t, b, transport)
	pki := newTestPKI(t)
	srv := startRecordingServer(t, pki.leaf, maxVersion)
	d := &Dialer{
		Cloud:        cl,
		Verifiers:    []pkie.Verifier{gateVerifier{pub: key.Public().(ed25519.PublicKey)}},
		Registry:     reg,
		TLSConfig:    &tls.Config{RootCAs: pki.root.Pool(), ServerName: "site.test"},
		ProofTimeout: 20 * time.Second,
	}
	return &gateSetup{prover: gp, srv: srv, pki: pki, d: d}
}

type dialResult struct {
	c   *Conn
	err error
}

// TestDialerHoldsBackApplicationData checks, at the byte level on the server,
// that no application byte leaves the client before the proof is delivered
// and verified: the server completes its handshake, the cloud's prover holds
// the proof back, the server receives nothing; only after the proof is
// released does the first byte arrive.
func TestDialerHoldsBackApplicationData(t *testing.T) {
	for _, transport := range []string{pecwire.QUIC, pecwire.TCP} {
		for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			t.Run(transport+"/"+versionName(version), func(t *testing.T) {
				s := newGateSetup(t, transport, version)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				res := make(chan dialResult, 1)
				go func() {
					c, err := s.d.Dial(ctx, "tcp", s.srv.addr)
					if err == nil {
						// The application writes the moment it has the
						// connection.
						c.Write([]byte("ping\n"))
					}
					res <- dialResult{c, err}
				}()
				sc := s.srv.next(t)
				<-sc.handshook
				if sc.handshakeAt.IsZero() {
					t.Fatal("server handshake did not complete")
				}
				// The chain reached the prover through the cloud: the
				// dialer submitted it.
				select {
				case <-s.prover.started:
				case <-time.After(20 * time.Second):
					t.Fatal("the cloud's prover was never asked")
				}
				// Give a dialer that would not hold back ample time to
				// return and write.
				select {
				case r := <-res:
					t.Fatalf("Dial returned before the proof was delivered (err %v)", r.err)
				case <-time.After(300 * time.Millisecond):
				}
				if got := sc.received(); len(got) != 0 {
					t.Fatalf("the server received %d application bytes before the proof was released", len(got))
				}
				released := time.Now()
				s.prover.open()
				var r dialResult
				select {
				case r = <-res:
				case <-time.After(20 * time.Second):
					t.Fatal("Dial did not return after the proof was released")
				}
				if r.err != nil {
					t.Fatal(r.err)
				}
				defer r.c.Close()
				got := make([]byte, 5)
				r.c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := r.c.Read(got); err != nil {
					t.Fatal(err)
				}
				bs := sc.received()
				if len(bs) != 5 || string([]byte{bs[0].b, bs[1].b, bs[2].b, bs[3].b, bs[4].b}) != "ping\n" {
					t.Fatalf("server received %v", bs)
				}
				for _, b := range bs {
					if !b.at.After(released) {
						t.Fatalf("application byte %q arrived at %s, before the proof was released at %s", b.b, b.at, released)
					}
				}
				if v := r.c.Verdict(); v.Result != check.Trusted {
					t.Fatalf("verdict %s: %s", v.Result, v.Headline)
				}
				if a, ok := r.c.Verdict().Source("gate"); !ok || a.Status != check.Pass || !a.Required {
					t.Fatalf("gate assertion %+v", a)
				}
				tm := r.c.Timings()
				// The chain was submitted inside the handshake, before it
				// completed, and the proof arrived after it.
				if tm.Certificate <= 0 || tm.Certificate >= tm.Handshake {
					t.Errorf("certificate submitted at %s, handshake done at %s: want inside the handshake", tm.Certificate, tm.Handshake)
				}
				if tm.FirstProof < tm.Handshake || tm.LastProof < tm.FirstProof || tm.Total < tm.LastProof || tm.Verification <= 0 {
					t.Errorf("timings out of order: %+v", tm)
				}
				if ev := r.c.Evidence(); !ev.Submitted || ev.Resumed || len(ev.Missing) != 0 {
					t.Errorf("evidence %+v", ev)
				}
			})
		}
	}
}

// TestDialerFailsClosed covers a cloud that withholds the proof, one that
// relays a proof under another key, and a chain no CA vouches for: the
// connection is closed without a byte of application data, and the error
// carries the verdict. Warn accepts only the inconclusive case.
func TestDialerFailsClosed(t *testing.T) {
	for _, tt := range []struct {
		name      string
		open      bool // the prover answers
		busy      bool // … that it is busy
		otherLeaf bool // … with a proof about another certificate
		otherKey  bool // the client pins another TTP key
		otherRoot bool // the client trusts another root
		agility   bool
		warn      bool
		want      check.Result
		accepted  bool
		missing   []string
		failed    string // source that must fail
		detail    string // what the gate assertion must say
	}{
		{name: "withheld", want: check.Inconclusive, missing: []string{"gate"}},
		{name: "withheld/warn", warn: true, want: check.Inconclusive, accepted: true, missing: []string{"gate"}},
		{name: "busy", open: true, busy: true, want: check.Inconclusive, detail: "busy"},
		{name: "busy/warn", open: true, busy: true, warn: true, want: check.Inconclusive, accepted: true, detail: "busy"},
		{name: "other-certificate", open: true, otherLeaf: true, want: check.Untrusted, failed: "gate"},
		{name: "other-key", open: true, otherKey: true, want: check.Untrusted, failed: "gate"},
		{name: "other-key/warn", open: true, otherKey: true, warn: true, want: check.Untrusted, failed: "gate"},
		{name: "untrusted-root", open: true, otherRoot: true, want: check.Untrusted, failed: "ca"},
		{name: "untrusted-root/agility", open: true, otherRoot: true, agility: true, want: check.Trusted, accepted: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newGateSetup(t, pecwire.TCP, 0)
			s.d.ProofTimeout = 700 * time.Millisecond
			s.d.Warn, s.d.TrustAgility = tt.warn, tt.agility
			if tt.open {
				s.prover.open()
			}
			s.prover.busy = tt.busy
			if tt.otherLeaf {
				s.prover.otherLeaf = newTestPKI(t).leaf.Chain[0]
			}
			if tt.otherKey {
				s.d.Verifiers = []pkie.Verifier{gateVerifier{pub: newEd25519(t).Public().(ed25519.PublicKey)}}
			}
			if tt.otherRoot {
				s.d.TLSConfig.RootCAs = newTestPKI(t).root.Pool()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := s.d.Dial(ctx, "tcp", s.srv.addr)
			sc := s.srv.next(t)
			var v *check.Verdict
			var missing []string
			if tt.accepted {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				v, missing = c.Verdict(), c.Evidence().Missing
				pingPong(t, c)
				c.Close()
			} else {
				var ve *VerdictError
				if !errors.As(err, &ve) {
					t.Fatalf("Dial returned %v, %v; want a *VerdictError", c, err)
				}
				v, missing = ve.Verdict, ve.Missing
				for _, m := range tt.missing {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not name the missing %s", err, m)
					}
				}
				// The server saw the handshake and then the connection end,
				// with no application byte at all.
				waitClosed(t, sc)
				if got := sc.received(); len(got) != 0 {
					t.Fatalf("the server received %d application bytes from a refused connection", len(got))
				}
				if sc.handshakeAt.IsZero() {
					t.Error("the server did not complete the handshake")
				}
				// Closed with close_notify: the server read a clean end.
				sc.mu.Lock()
				end := sc.err
				sc.mu.Unlock()
				if !errors.Is(end, io.EOF) {
					t.Errorf("the server's connection ended with %v, want EOF", end)
				}
			}
			if v.Result != tt.want {
				t.Fatalf("verdict %s (%s), want %s", v.Result, v.Headline, tt.want)
			}
			if !slices.Equal(missing, tt.missing) {
				t.Errorf("missing %v, want %v", missing, tt.missing)
			}
			if tt.failed != "" {
				if a, _ := v.Source(tt.failed); a.Status != check.Fail {
					t.Errorf("%s assertion %+v, want fail", tt.failed, a)
				}
			}
			if a, _ := v.Source("gate"); !strings.Contains(a.Detail, tt.detail) {
				t.Errorf("gate assertion %q does not say %q", a.Detail, tt.detail)
			}
		})
	}
}

// TestDialerResumption: a resumed connection (DidResume) under "reuse" is
// trusted on the proofs of the full handshake and makes no submission;
// under "fresh", or once the stored evidence is older than ReuseMaxAge, it
// submits the session's chain and waits for new proofs.
func TestDialerResumption(t *testing.T) {
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		for _, tt := range []struct {
			name        string
			policy      string
			age         time.Duration // how far the clock moves between the dials
			proofMaxAge time.Duration // the gate verifier's freshness limit
			submit      bool
		}{
			{name: "reuse", policy: "", submit: false},
			{name: "fresh", policy: ResumeFresh, submit: true},
			{name: "reuse/too-old", policy: ResumeReuse, age: DefaultReuseMaxAge + time.Minute, submit: true},
			// The session's evidence is young enough, but its proof no
			// longer passes the verifier's own freshness limit: asked
			// afresh.
			{name: "reuse/stale-proof", policy: ResumeReuse, age: 5 * time.Minute, proofMaxAge: 2 * time.Minute, submit: true},
		} {
			t.Run(versionName(version)+"/"+tt.name, func(t *testing.T) {
				s := newGateSetup(t, pecwire.TCP, version)
				s.prover.open()
				var mu sync.Mutex
				now := time.Now()
				s.d.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
				s.prover.now = s.d.Now
				s.d.Verifiers[0] = gateVerifier{pub: s.prover.key.Public().(ed25519.PublicKey), maxAge: tt.proofMaxAge}
				s.d.Resumption = tt.policy
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()

				c1, err := s.d.Dial(ctx, "tcp", s.srv.addr)
				if err != nil {
					t.Fatal(err)
				}
				pingPong(t, c1)
				c1.Close()
				if c1.ConnectionState().DidResume {
					t.Fatal("the first connection resumed")
				}
				before := s.prover.calls.Load()
				if before != 1 {
					t.Fatalf("%d submissions for the full handshake, want 1", before)
				}
				mu.Lock()
				now = now.Add(tt.age)
				mu.Unlock()

				c2, err := s.d.Dial(ctx, "tcp", s.srv.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c2.Close()
				pingPong(t, c2)
				if !c2.ConnectionState().DidResume {
					t.Fatal("the second connection did not resume")
				}
				if sc := <-s.srv.conns; false {
					_ = sc
				}
				submitted := s.prover.calls.Load() - before
				ev := c2.Evidence()
				if tt.submit {
					if submitted != 1 || !ev.Submitted || ev.Reused {
						t.Fatalf("%d submissions, evidence %+v; want a fresh proof", submitted, ev)
					}
				} else {
					if submitted != 0 || ev.Submitted || !ev.Reused {
						t.Fatalf("%d submissions, evidence %+v; want the session's proofs reused", submitted, ev)
					}
					if !ev.VerifiedAt.Equal(c1.Evidence().VerifiedAt) {
						t.Errorf("reused evidence verified at %s, the full handshake at %s", ev.VerifiedAt, c1.Evidence().VerifiedAt)
					}
				}
				if !ev.Resumed || c2.Verdict().Result != check.Trusted {
					t.Fatalf("evidence %+v, verdict %s", ev, c2.Verdict().Result)
				}
				if a, _ := c2.Verdict().Source("gate"); a.Status != check.Pass {
					t.Fatalf("gate %+v", a)
				}
			})
		}
	}
}

// TestDialerRefusedSessionNotStored: the session of a connection the policy
// refused is never resumable, even in TLS 1.2, where crypto/tls stores the
// session inside the handshake, before the proofs arrive.
func TestDialerRefusedSessionNotStored(t *testing.T) {
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(versionName(version), func(t *testing.T) {
			s := newGateSetup(t, pecwire.TCP, version)
			s.d.ProofTimeout = 500 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := s.d.Dial(ctx, "tcp", s.srv.addr); err == nil {
				t.Fatal("a withholding cloud's connection was accepted")
			}
			s.prover.open()
			c, err := s.d.Dial(ctx, "tcp", s.srv.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.ConnectionState().DidResume || c.Evidence().Resumed {
				t.Fatal("resumed the session of a refused connection")
			}
		})
	}
}

// A session whose stored evidence is about another leaf is not trusted on
// it, even if the cache hands it over.
func TestSessionEvidenceBoundToLeaf(t *testing.T) {
	pki := newTestPKI(t)
	other := newTestPKI(t)
	now := time.Now()
	ev := newSessionEvidence(now, pki.leaf.Chain[0], map[pkie.ID]check.ProofResult{
		gateID: {Proof: &pkie.Proof{ID: gateID, Version: 1, Body: []byte("sig")}, From: "cloud x"},
	})
	b, err := ev.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := decodeEvidence(b)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, tt := range []struct {
		chain [][]byte
		at    time.Time
		want  bool
	}{
		{pki.leaf.Chain, now, true},
		{pki.leaf.Chain, now.Add(DefaultReuseMaxAge + time.Second), false},
		{pki.leaf.Chain, now.Add(-2 * time.Minute), false},
		{other.leaf.Chain, now, false},
		{nil, now, false},
	} {
		if u := got.usable(tt.at, tt.chain, DefaultReuseMaxAge); u != tt.want {
			t.Errorf("usable at %s for %d certs = %v, want %v", tt.at.Sub(now), len(tt.chain), u, tt.want)
		}
	}
	r := got.results()[gateID]
	if r.Proof == nil || string(r.Proof.Body) != "sig" || !strings.Contains(r.From, "cloud x") {
		t.Fatalf("stored proof came back as %+v", r)
	}
	if _, ok, _ := decodeEvidence([]byte("someone else's extra")); ok {
		t.Fatal("claimed an entry that is not the dialer's")
	}
}

func FuzzDecodeEvidence(f *testing.F) {
	pki := newTestPKI(f)
	ev := newSessionEvidence(time.Unix(1700000000, 0), pki.leaf.Chain[0], map[pkie.ID]check.ProofResult{
		gateID:     {Proof: &pkie.Proof{ID: gateID, Version: 1, Body: []byte("sig")}},
		pkie.CT:    {Err: errors.New("busy")},
		pkie.ID(7): {Proof: &pkie.Proof{ID: 7}},
	})
	b, err := ev.encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(evidenceMagic + `{"leaf":"AAAA","proofs":[]}`))
	f.Add([]byte(evidenceMagic + `{"proofs":[{"id":1,"proof":"AAEAAAAA"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, ok, err := decodeEvidence(b)
		if err != nil || !ok {
			return
		}
		for id, r := range ev.results() {
			if r.Proof == nil && r.Err == nil {
				t.Fatalf("result for %s has neither a proof nor an error", id)
			}
		}
		ev.usable(time.Now(), [][]byte{b}, time.Hour)
	})
}

// TestDialerConcurrent: one Dialer, many dials at once over one cloud
// session, each proved by its own submission and each trusted.
func TestDialerConcurrent(t *testing.T) {
	s := newGateSetup(t, pecwire.QUIC, 0)
	s.prover.open()
	s.d.TLSConfig.SessionTicketsDisabled = true // every dial a full handshake
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 16
	errs := make(chan error, n)
	for range n {
		go func() {
			c, err := s.d.Dial(ctx, "tcp", s.srv.addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			if v := c.Verdict(); v.Result != check.Trusted || !c.Evidence().Submitted {
				errs <- errors.New(v.Headline)
				return
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := s.prover.calls.Load(); got != n {
		t.Fatalf("%d submissions proved for %d dials", got, n)
	}
}
