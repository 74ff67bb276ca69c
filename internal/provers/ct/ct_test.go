package ct_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	ctprover "github.com/pkie/pkie/internal/provers/ct"
	"github.com/pkie/pkie/internal/testbed"
)

type world struct {
	ttp     *testbed.TTPs
	prover  pkie.Prover
	dataDir string
	root    *testbed.CA
	logged  *testbed.Leaf // in the sorted tree
	pending *testbed.Leaf // logged after the prover's sync: not yet in its tree
	never   *testbed.Leaf // never logged
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	root, _ := testbed.NewRootCA("CT Root", testbed.ECDSAP256)
	ca, _ := root.NewIntermediate("CT CA", testbed.ECDSAP256)
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ttp.Close() })
	w := &world{ttp: ttp, root: root, dataDir: t.TempDir()}
	for _, l := range []**testbed.Leaf{&w.logged, &w.pending, &w.never} {
		if *l, err = ca.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ttp.LogChain(ctx, w.logged.Chain); err != nil {
		t.Fatal(err)
	}
	// The prover syncs once as it starts: pending, logged after, is
	// in the log but not yet in its tree.
	p, err := ctprover.NewProver(ctx, pkie.ProverEnv{DataDir: w.dataDir}, ttp.CTProverConfig().JSON())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.(interface{ Close() error }).Close() })
	w.prover = p
	if _, err := ttp.LogChain(ctx, w.pending.Chain); err != nil {
		t.Fatal(err)
	}
	return w
}

func prove(t *testing.T, p pkie.Prover, l *testbed.Leaf) *pkie.Proof {
	t.Helper()
	pr, err := p.Prove(context.Background(), &pkie.ProveRequest{Subject: subject(l)})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

func subject(l *testbed.Leaf) pkie.Subject {
	certs := make([]*x509.Certificate, len(l.Chain))
	for i, der := range l.Chain {
		certs[i], _ = x509.ParseCertificate(der)
	}
	return pkie.Subject{ServerName: "www.example.test", Port: 443, Chain: l.Chain, Certs: certs}
}

func verifier(t *testing.T, ttp *testbed.TTPs) pkie.Verifier {
	t.Helper()
	c := ttp.CTVerifierConfig()
	c.MaxAge = ct.Duration(time.Hour)
	v, err := ct.NewVerifier(c.JSON())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func flip(p *pkie.Proof, i int) *pkie.Proof {
	b := append([]byte(nil), p.Body...)
	b[i] ^= 0x01
	return &pkie.Proof{ID: p.ID, Version: p.Version, Body: b}
}

func TestVerify(t *testing.T) {
	w := newWorld(t)
	other, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Roots: []*testbed.CA{w.root}}) // same names, other keys
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	if _, err := other.LogChain(ctx, w.logged.Chain); err != nil {
		t.Fatal(err)
	}
	otherProver, err := ctprover.NewProver(ctx, pkie.ProverEnv{DataDir: t.TempDir()}, other.CTProverConfig().JSON())
	if err != nil {
		t.Fatal(err)
	}
	defer otherProver.(interface{ Close() error }).Close()

	v := verifier(t, w.ttp)
	good := prove(t, w.prover, w.logged)
	var v3 ct.Body
	if err := v3.UnmarshalBinary(good.Body); err != nil || v3.Tree == nil {
		t.Fatalf("a certificate with no SCT: tree %v, %v", v3.Tree != nil, err)
	}
	body := v3.Tree
	const treeAt = 4              // ct body v3: version, flags, the tree's length
	headAt := treeAt + 2 + 32 + 2 // the signed note's first byte
	proofAt := headAt + len(body.Head) + 2 + 4
	now := time.Now()
	for _, tc := range []struct {
		name   string
		leaf   *testbed.Leaf
		proof  *pkie.Proof
		now    time.Time
		status pkie.Status
		reason []string
	}{
		{"logged", w.logged, good, now, pkie.Pass, []string{"logged: in the sorted tree under pkie.test/mirror's head signed", "keys, root", "built from log pkie.test/log's checkpoint of 1 entries"}},
		{"logged after the tree was built", w.pending, prove(t, w.prover, w.pending), now, pkie.Fail, []string{"mirror pkie.test/mirror of log pkie.test/log", "absent from the log's sorted tree", "built from log pkie.test/log's checkpoint of 1 entries"}},
		{"never logged", w.never, prove(t, w.prover, w.never), now, pkie.Fail, []string{"log pkie.test/log", "absent from the log's sorted tree", "head signed"}},
		{"no proof", w.logged, nil, now, pkie.Unknown, []string{"no CT proof"}},
		{"forged head", w.logged, flip(good, headAt+len(body.Head)-10), now, pkie.Fail, []string{"log pkie.test/log", "head rejected"}},
		{"forged proof", w.logged, flip(good, proofAt), now, pkie.Fail, []string{"log pkie.test/log", "proof"}},
		{"forged key", w.logged, flip(good, treeAt+5), now, pkie.Fail, []string{"log pkie.test/log", "proves key"}},
		{"forged version", w.logged, flip(good, 0), now, pkie.Fail, []string{"does not decode", "version"}},
		{"stale", w.logged, good, now.Add(2 * time.Hour), pkie.Fail, []string{"log pkie.test/log", "older than the maximum age", "maximum 1h0m0s"}},
		{"other key", w.logged, prove(t, otherProver, w.logged), now, pkie.Fail, []string{"log pkie.test/log", "head rejected", "signature"}},
		{"wrong certificate", w.never, good, now, pkie.Fail, []string{"log pkie.test/log", "proves key"}},
		{"wrong enhancement", w.logged, &pkie.Proof{ID: pkie.Revocation, Version: ct.BodyVersion, Body: good.Body}, now, pkie.Fail, []string{"not 0x0001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subject(tc.leaf), Proof: tc.proof, Now: tc.now})
			if a.Status != tc.status {
				t.Fatalf("status %s, want %s: %s", a.Status, tc.status, a.Reason)
			}
			for _, s := range tc.reason {
				if !strings.Contains(a.Reason, s) {
					t.Errorf("reason %q lacks %q", a.Reason, s)
				}
			}
			if a.Status == pkie.Pass && (a.Time.IsZero() || now.Sub(a.Time) > time.Minute) {
				t.Errorf("assertion time %v, want the head's", a.Time)
			}
		})
	}
}

// TestProverState: the mirror keeps what it verified of the log in the
// host's data directory, readable by its owner only, and Health reports a
// synced prover.
func TestProverState(t *testing.T) {
	w := newWorld(t)
	for _, d := range []string{filepath.Join(w.dataDir, "follow"), filepath.Join(w.dataDir, "mirror")} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, %v", d, st.Mode(), err)
		}
	}
	if err := w.prover.(pkie.Healther).Health(); err != nil {
		t.Errorf("Health: %v", err)
	}
	if w.prover.ID() != pkie.CT {
		t.Errorf("ID %s", w.prover.ID())
	}
}

// TestRunSyncs: a prover run by its host picks up what the log added since
// its first sync without anyone calling Sync.
func TestRunSyncs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWorld(t)
	c := w.ttp.CTProverConfig()
	c.SyncInterval = ct.Duration(20 * time.Millisecond)
	p, err := ctprover.NewProver(ctx, pkie.ProverEnv{DataDir: t.TempDir()}, c.JSON())
	if err != nil {
		t.Fatal(err)
	}
	defer p.(interface{ Close() error }).Close()
	fresh, err := w.root.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if a := verifier(t, w.ttp).Verify(ctx, &pkie.VerifyRequest{Subject: subject(fresh), Proof: prove(t, p, fresh)}); a.Status != pkie.Fail {
		t.Fatalf("a certificate never logged: %s %s", a.Status, a.Reason)
	}
	done := make(chan struct{})
	go func() { p.(pkie.Runner).Run(ctx); close(done) }()
	if _, err := w.ttp.LogChain(ctx, fresh.Chain); err != nil {
		t.Fatal(err)
	}
	v := verifier(t, w.ttp)
	deadline := time.Now().Add(20 * time.Second)
	for {
		a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subject(fresh), Proof: prove(t, p, fresh)})
		if a.Status == pkie.Pass && strings.HasPrefix(a.Reason, "logged: in the sorted tree under") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running prover never served the new tree: %s %s", a.Status, a.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}

func TestConfigs(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{``, `{}`, `{"key":"nope"}`, `{"key":"x","max_age":3600}`, `{"key":"x","maxage":"1h"}`, `{"key":"x"} {}`} {
		if _, err := ct.NewVerifier([]byte(bad)); err == nil {
			t.Errorf("verifier config %q accepted", bad)
		}
	}
	for _, bad := range []string{`{}`, `{"log_url":"http://127.0.0.1:1"}`, `{"log_url":"http://127.0.0.1:1","log_key":"x","sync":"1s"}`,
		`{"log_url":"http://127.0.0.1:1","log_key":"x"}`, `{"log_url":"http://127.0.0.1:1","log_key":"x","max_age":"1h"}`} {
		if _, err := ctprover.NewProver(ctx, pkie.ProverEnv{DataDir: t.TempDir()}, []byte(bad)); err == nil {
			t.Errorf("prover config %q accepted", bad)
		}
	}
	got := string(ct.VerifierConfig{Key: "k", LogKey: "l", MaxAge: ct.Duration(90 * time.Minute)}.JSON())
	if got != `{"key":"k","log_key":"l","max_age":"1h30m0s"}` {
		t.Errorf("VerifierConfig JSON %s", got)
	}
}

// FuzzVerify: whatever body the cloud relays, the verifier does not panic
// and passes nothing the pinned log did not sign.
func FuzzVerify(f *testing.F) {
	_, mirrorKey, err := checkpoint.GenerateKey("pkie.test/mirror")
	if err != nil {
		f.Fatal(err)
	}
	lk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	logKey, err := fnote.RFC6962VerifierString("pkie.test/log", lk.Public())
	if err != nil {
		f.Fatal(err)
	}
	v, err := ct.NewVerifierFrom(ct.VerifierConfig{Key: mirrorKey, LogKey: logKey})
	if err != nil {
		f.Fatal(err)
	}
	root, _ := testbed.NewRootCA("Fuzz Root", testbed.ECDSAP256)
	leaf, _ := root.Issue(testbed.LeafOptions{DNSNames: []string{"www.example.test"}})
	seed, _ := (&treeproof.Body{Head: []byte("pkie.test/log/sorted\npkie sorted-tree-head v1\n"), Proof: []byte{0, 0, 0, 0, 0, 0, 0, 1}}).MarshalBinary()
	f.Add(seed)
	f.Add([]byte{1, 2})
	subj := subject(leaf)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := v.Verify(context.Background(), &pkie.VerifyRequest{Subject: subj, Proof: &pkie.Proof{ID: pkie.CT, Version: treeproof.Version, Body: body}})
		if a.Status != pkie.Fail {
			t.Fatalf("%s: %s", a.Status, a.Reason)
		}
	})
}
