package notary_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/notarywire"
	"github.com/pkie/pkie/internal/pkies/notary"
	notaryprover "github.com/pkie/pkie/internal/provers/notary"
	"github.com/pkie/pkie/internal/testbed"
)

type world struct {
	ca         *testbed.CA
	bank, shop *testbed.Site
	forged     *testbed.Leaf // what a man in the middle shows for bank.test
	dir        string
	prover     *notaryprover.Prover
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{dir: t.TempDir()}
	w.ca, _ = testbed.NewRootCA("Notary PKIE Root", testbed.ECDSAP256)
	site := func(name string) *testbed.Site {
		leaf, err := w.ca.Issue(testbed.LeafOptions{DNSNames: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := testbed.StartSite(name, leaf, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	w.bank, w.shop = site("bank.test"), site("shop.test")
	forger, _ := testbed.NewRootCA("Forger", testbed.ECDSAP256)
	w.forged, _ = forger.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
	if _, err := notaryprover.Init(w.dir, w.config().JSON()); err != nil {
		t.Fatal(err)
	}
	w.prover = w.newProver(t)
	return w
}

func (w *world) config() notaryprover.ProverConfig {
	return notaryprover.ProverConfig{Name: "cloud.test notary", AllowPrivate: true, Resolve: map[string]string{
		"bank.test:443": w.bank.Addr.String(), "shop.test": w.shop.Addr.String(),
	}}
}

func (w *world) newProver(t *testing.T) *notaryprover.Prover {
	t.Helper()
	p, err := notaryprover.NewProver(context.Background(), pkie.ProverEnv{DataDir: w.dir}, w.config().JSON())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.(*notaryprover.Prover).Close() })
	return p.(*notaryprover.Prover)
}

// initDir returns a fresh state directory where Init made a notary's keys.
func initDir(t *testing.T, c notaryprover.ProverConfig) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := notaryprover.Init(dir, c.JSON()); err != nil {
		t.Fatal(err)
	}
	return dir
}

func subject(name string, chain [][]byte) pkie.Subject {
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		certs[i], _ = x509.ParseCertificate(der)
	}
	return pkie.Subject{ServerName: name, Port: 443, Chain: chain, Certs: certs}
}

func TestProveVerify(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	v, err := notary.NewVerifier(notary.VerifierConfig{Key: w.prover.PublicKey()}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	prove := func(name string, chain [][]byte) *pkie.Proof {
		t.Helper()
		p, err := w.prover.Prove(ctx, &pkie.ProveRequest{Subject: subject(name, chain)})
		if err != nil {
			t.Fatal(err)
		}
		if p.ID != pkie.Notary || p.Version != notary.Version {
			t.Fatalf("proof %s v%d", p.ID, p.Version)
		}
		return p
	}
	bank := w.bank.Leaf().Chain
	good := prove("bank.test", bank)
	// The body is the notary's v1 response, as its HTTP API sends it.
	var resp notarywire.Response
	if err := json.Unmarshal(good.Body, &resp); err != nil || resp.Signature == "" {
		t.Fatalf("body is not a v1 response: %v %s", err, good.Body)
	}
	mitm := prove("bank.test", w.forged.Chain)
	op, err := notaryprover.NewProver(ctx, pkie.ProverEnv{DataDir: initDir(t, w.config())}, w.config().JSON())
	if err != nil {
		t.Fatal(err)
	}
	defer op.(*notaryprover.Prover).Close()
	otherKey, _ := op.Prove(ctx, &pkie.ProveRequest{Subject: subject("bank.test", bank)})
	flip := func(p *pkie.Proof, i int) *pkie.Proof {
		b := append([]byte(nil), p.Body...)
		b[i] ^= 0x01
		return &pkie.Proof{ID: p.ID, Version: p.Version, Body: b}
	}
	at := strings.Index(string(good.Body), `"current_sha256":"`) + len(`"current_sha256":"`) + 3
	now := time.Now()
	for _, tc := range []struct {
		name   string
		host   string
		chain  [][]byte
		proof  *pkie.Proof
		now    time.Time
		status pkie.Status
		reason []string
	}{
		{"same certificate", "bank.test", bank, good, now, pkie.Pass, []string{`notary "cloud.test notary" sees the same certificate`, "bank.test port 443", "probing 127.0.0.1:", "answer signed"}},
		{"man in the middle", "bank.test", w.forged.Chain, mitm, now, pkie.Fail, []string{`notary "cloud.test notary" sees another certificate at bank.test port 443`, "last seen", "man in the middle"}},
		{"no proof", "bank.test", bank, nil, now, pkie.Unknown, []string{"no notary answer"}},
		{"forged", "bank.test", bank, flip(good, at), now, pkie.Fail, []string{"notary answer rejected", "signature does not verify"}},
		{"stale", "bank.test", bank, good, now.Add(25 * time.Hour), pkie.Fail, []string{"notary answer rejected", "stale answer"}},
		{"other key", "bank.test", bank, otherKey, now, pkie.Fail, []string{"signature does not verify"}},
		// An honest answer about bank.test's certificate replayed for
		// shop.test, and bank.test's answer for the MitM's certificate.
		{"other target", "shop.test", bank, good, now, pkie.Fail, []string{"answer is about bank.test port 443, not shop.test"}},
		{"wrong certificate", "bank.test", w.forged.Chain, good, now, pkie.Fail, []string{"notary answer rejected"}},
		{"wrong enhancement", "bank.test", bank, &pkie.Proof{ID: pkie.CT, Version: 1, Body: good.Body}, now, pkie.Fail, []string{"not 0x0003"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := v.Verify(ctx, &pkie.VerifyRequest{Subject: subject(tc.host, tc.chain), Proof: tc.proof, Now: tc.now})
			if a.Status != tc.status {
				t.Fatalf("status %s, want %s: %s", a.Status, tc.status, a.Reason)
			}
			for _, s := range tc.reason {
				if !strings.Contains(a.Reason, s) {
					t.Errorf("reason %q lacks %q", a.Reason, s)
				}
			}
		})
	}
	// The answer is what the notary signs over its v1 API: the v1 client
	// accepts it as is.
	sum := sha256.Sum256(bank[0])
	pub, _ := base64.StdEncoding.DecodeString(w.prover.PublicKey())
	if _, err := consensus.VerifyV1(good.Body, ed25519.PublicKey(pub), consensus.V1Question{Host: "bank.test", Port: 443, SHA256: &sum}, now, time.Hour); err != nil {
		t.Errorf("the v1 client refuses the answer: %v", err)
	}
}

// TestIdentity: Init creates the notary's keys in the data directory,
// 0600, and they are read back (by a restarted prover, and by PublicKey for
// the cloud's bundle).
func TestIdentity(t *testing.T) {
	w := newWorld(t)
	st, err := os.Stat(filepath.Join(w.dir, "v1.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("v1.key: %v %v", st, err)
	}
	pub, err := notaryprover.PublicKey(w.dir)
	if err != nil || pub != w.prover.PublicKey() {
		t.Fatalf("PublicKey(dir) = %q, %v; the prover's is %q", pub, err, w.prover.PublicKey())
	}
	w.prover.Close()
	again := w.newProver(t)
	if again.PublicKey() != pub {
		t.Error("a restarted prover changed its key")
	}
	if _, err := os.Stat(filepath.Join(w.dir, "history.db")); err != nil {
		t.Errorf("no SQLite history in the data directory: %v", err)
	}
	if err := again.Health(); err != nil {
		t.Errorf("Health: %v", err)
	}
	if _, err := notaryprover.PublicKey(t.TempDir()); err == nil {
		t.Error("PublicKey of an empty directory")
	}
}

// TestLostKeysRefused: a notary state directory that lost its keys, or holds
// them broken, is refused loudly by the prover and by PublicKey (what the
// bundle prints), each naming the recovery, and nothing mints a new key in
// it: a new key would turn every site UNTRUSTED for the clients that pinned
// the published one. Init does not overwrite keys either.
func TestLostKeysRefused(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	pub := w.prover.PublicKey()
	w.prover.Close()
	if _, err := notaryprover.Init(w.dir, w.config().JSON()); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Fatalf("Init over existing keys: %v", err)
	}
	if again, err := notaryprover.PublicKey(w.dir); err != nil || again != pub {
		t.Fatalf("after a refused Init: %q %v, want %q", again, err, pub)
	}

	v1, err := os.ReadFile(filepath.Join(w.dir, "v1.key"))
	if err != nil {
		t.Fatal(err)
	}
	lost := t.TempDir() // the state directory deleted: the prover's data dir is recreated empty
	corrupt := t.TempDir()
	for _, f := range []string{"notary.key", "notary.crt"} {
		b, _ := os.ReadFile(filepath.Join(w.dir, f))
		os.WriteFile(filepath.Join(corrupt, f), b, 0o600)
	}
	os.WriteFile(filepath.Join(corrupt, "v1.key"), v1[:len(v1)/2], 0o600)
	partial := t.TempDir()
	os.WriteFile(filepath.Join(partial, "v1.key"), v1, 0o600)
	for _, tc := range []struct {
		name, dir string
		want      []string
	}{
		{"lost", lost, []string{"no notary keys in " + lost, "Restore the directory from a backup", "pkie cloud init --data DATA --new-notary-key", "republish"}},
		{"corrupt", corrupt, []string{"cannot be used", "v1.key", "Restore the directory from a backup", "republish"}},
		{"incomplete", partial, []string{"incomplete (notary.key, notary.crt missing)", "Restore the directory from a backup"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(filepath.Join(tc.dir, "v1.key"))
			_, perr := notaryprover.NewProver(ctx, pkie.ProverEnv{DataDir: tc.dir}, w.config().JSON())
			_, kerr := notaryprover.PublicKey(tc.dir)
			for _, err := range []error{perr, kerr} {
				if err == nil {
					t.Fatal("a notary without its keys was accepted")
				}
				for _, s := range tc.want {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
			}
			after, _ := os.ReadFile(filepath.Join(tc.dir, "v1.key"))
			if string(after) != string(before) {
				t.Error("the refused directory's v1.key was written")
			}
			if _, err := os.Stat(filepath.Join(tc.dir, "history.db")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused notary opened a history: %v", err)
			}
		})
	}
}

// TestLostHistory: a history that vanished while the keys stayed is started
// again empty (it is a cache of observations), under the same key, and the
// loss is logged at error level.
func TestLostHistory(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	if _, err := w.prover.Prove(ctx, &pkie.ProveRequest{Subject: subject("bank.test", w.bank.Leaf().Chain)}); err != nil {
		t.Fatal(err)
	}
	pub := w.prover.PublicKey()
	w.prover.Close()
	if err := os.Remove(filepath.Join(w.dir, "history.db")); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	p, err := notaryprover.NewProver(ctx, pkie.ProverEnv{DataDir: w.dir, Log: slog.New(slog.NewTextHandler(&logs, nil))}, w.config().JSON())
	if err != nil {
		t.Fatal(err)
	}
	defer p.(*notaryprover.Prover).Close()
	if p.(*notaryprover.Prover).PublicKey() != pub {
		t.Error("a lost history changed the notary's key")
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "history is EMPTY") {
		t.Errorf("the lost history was not logged as an error: %s", logs.String())
	}
}

// TestSSRFGuard: without allow_private the probe refuses loopback, whether
// a resolve entry or the request names it.
func TestSSRFGuard(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	c := w.config()
	c.AllowPrivate = false
	if _, err := notaryprover.NewProver(ctx, pkie.ProverEnv{DataDir: initDir(t, c)}, c.JSON()); err == nil || !strings.Contains(err.Error(), "allow_private") {
		t.Fatalf("resolve to loopback without allow_private: %v", err)
	}
	p, err := notaryprover.NewProver(ctx, pkie.ProverEnv{DataDir: initDir(t, notaryprover.ProverConfig{})}, notaryprover.ProverConfig{}.JSON())
	if err != nil {
		t.Fatal(err)
	}
	defer p.(*notaryprover.Prover).Close()
	_, err = p.Prove(ctx, &pkie.ProveRequest{Subject: subject("127.0.0.1", w.bank.Leaf().Chain)})
	if !errors.Is(err, pkie.ErrUnsupported) || !strings.Contains(err.Error(), "not public") {
		t.Fatalf("probe of 127.0.0.1: %v", err)
	}
}

func TestConfigs(t *testing.T) {
	for _, bad := range []string{``, `{}`, `{"key":"AAAA"}`, `{"key":"` + strings.Repeat("A", 43) + `=","max_age":5}`} {
		if _, err := notary.NewVerifier([]byte(bad)); err == nil {
			t.Errorf("verifier config %q accepted", bad)
		}
	}
	if _, err := notaryprover.NewProver(context.Background(), pkie.ProverEnv{}, []byte(`{}`)); err == nil {
		t.Error("prover without a data directory")
	}
	if _, err := notaryprover.NewProver(context.Background(), pkie.ProverEnv{DataDir: initDir(t, notaryprover.ProverConfig{})}, []byte(`{"resolve":{"a.test":"nope"}}`)); err == nil {
		t.Error("bad resolve entry accepted")
	}
}

// FuzzVerify: whatever the cloud relays, Verify does not panic and passes
// nothing not signed by the pinned key.
func FuzzVerify(f *testing.F) {
	f.Add([]byte(`{"answer":{},"signature":""}`))
	f.Add([]byte(`{"answer":{"notary":"n","host":"bank.test","port":443},"signature":"AAAA"}`))
	f.Add([]byte(`[]`))
	v, err := notary.NewVerifierFrom(notary.VerifierConfig{Key: "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="})
	if err != nil {
		f.Fatal(err)
	}
	root, _ := testbed.NewRootCA("Fuzz Root", testbed.ECDSAP256)
	leaf, _ := root.Issue(testbed.LeafOptions{DNSNames: []string{"bank.test"}})
	subj := subject("bank.test", leaf.Chain)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := v.Verify(context.Background(), &pkie.VerifyRequest{Subject: subj, Proof: &pkie.Proof{ID: pkie.Notary, Version: 1, Body: body}})
		if a.Status == pkie.Pass {
			t.Fatalf("unsigned body passed: %s", a.Reason)
		}
	})
}
