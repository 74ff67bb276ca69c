package ctmirror

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/ctwire"
	pkiect "github.com/pkie/pkie/internal/pkies/ct"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/sortedtree"
)

// The tests run a real static-ct-api log (internal/ctlog on Tessera's
// POSIX storage), a real follower (internal/ctfollow) reading it through
// its Reader, and the mirror over both.

type pki struct {
	root, inter    *x509.Certificate
	rootKey, inKey crypto.Signer
	serial         int64
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (p *pki) issue(t testing.TB, tmpl, parent *x509.Certificate, parentKey crypto.Signer, pub crypto.PublicKey) *x509.Certificate {
	t.Helper()
	p.serial++
	tmpl.SerialNumber = big.NewInt(p.serial)
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newPKI(t testing.TB) *pki {
	p := &pki{rootKey: newKey(t), inKey: newKey(t)}
	nb, na := time.Now().Add(-24*time.Hour), time.Now().Add(10*365*24*time.Hour)
	p.root = p.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "mirror test root"}, NotBefore: nb, NotAfter: na,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, p.rootKey, p.rootKey.Public())
	p.inter = p.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "mirror test intermediate"}, NotBefore: nb, NotAfter: na,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, p.root, p.rootKey, p.inKey.Public())
	return p
}

func (p *pki) leaf(t testing.TB, name string) [][]byte {
	c := p.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, p.inter, p.inKey, newKey(t).Public())
	return [][]byte{c.Raw, p.inter.Raw}
}

const logOrigin = "log.pkie.test/2026"

type world struct {
	t      *testing.T
	pki    *pki
	log    *ctlog.Log
	logSrv *httptest.Server
	f      *ctfollow.Follower
	dir    string
	mkey   string // the mirror's verifier key
	m      *Mirror
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{t: t, pki: newPKI(t), dir: t.TempDir()}
	ldir := filepath.Join(w.dir, "log")
	if _, err := ctlog.Init(ctx, ldir, logOrigin, ctlog.InitOptions{Roots: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.pki.root.Raw})}); err != nil {
		t.Fatal(err)
	}
	l, err := ctlog.Open(ctx, ldir, ctlog.Options{BatchMaxAge: 10 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	w.log = l
	w.logSrv = httptest.NewServer(l.Handler(ctlog.HandlerOptions{}))
	t.Cleanup(w.logSrv.Close)
	r := l.Reader()
	f, err := ctfollow.Open(ctx, ctfollow.Config{Kind: ctfollow.KindStatic, Key: l.VerifierKey(), Dir: filepath.Join(w.dir, "follow"),
		Fetch:  &ctfollow.Fetchers{Checkpoint: r.ReadCheckpoint, Tile: r.ReadTile, EntryBundle: r.ReadEntryBundle, Issuer: r.ReadIssuer},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	w.f = f
	if w.mkey, err = GenerateKey(w.dir, "mirror.pkie.test/ct"); err != nil {
		t.Fatal(err)
	}
	w.m = w.open(t)
	return w
}

func (w *world) config(t *testing.T) Config {
	s, v, err := ReadKey(filepath.Join(w.dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	lv, err := checkpoint.NewLogVerifier(w.log.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	return Config{Dir: filepath.Join(w.dir, "mirror"), Signer: s, Verifier: v, LogKey: lv, Logger: slog.New(slog.DiscardHandler)}
}

func (w *world) open(t *testing.T) *Mirror {
	m, err := Open(w.config(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// add logs chains and waits until the log's checkpoint covers them.
func (w *world) add(chains ...[][]byte) {
	w.t.Helper()
	for _, c := range chains {
		if _, err := w.log.AddChain(context.Background(), c, false); err != nil {
			w.t.Fatal(err)
		}
	}
}

// sync follows the log and updates the mirror.
func (w *world) sync() *checkpoint.Head {
	w.t.Helper()
	ctx := context.Background()
	// AddChain waits for integration; the checkpoint may lag by its
	// interval, so sync until the follower sees every entry added.
	var st *ctfollow.State
	var err error
	for i := 0; i < 100; i++ {
		if st, err = w.f.Sync(ctx, nil); err != nil {
			w.t.Fatal(err)
		}
		if cp, _ := w.log.Reader().ReadCheckpoint(ctx); cp != nil && strings.Contains(string(cp), "\n"+itoa(st.Size)+"\n") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	h, err := w.m.Update(ctx, Snapshot{Checkpoint: st.Checkpoint, KeysPath: w.f.KeysPath(), KeyCount: st.KeyCount})
	if err != nil {
		w.t.Fatal(err)
	}
	return h
}

func itoa(n uint64) string { return big.NewInt(int64(n)).String() }

// verifier is the client's ct verifier pinning the mirror and the log.
func (w *world) verifier() pkie.Verifier {
	v, err := pkiect.NewVerifier(pkiect.VerifierConfig{Key: w.mkey, LogKey: w.log.VerifierKey()}.JSON())
	if err != nil {
		w.t.Fatal(err)
	}
	return v
}

func (w *world) verify(v pkie.Verifier, chain [][]byte) pkie.Assertion {
	key, err := ctwire.ChainKey(chain)
	if err != nil {
		w.t.Fatal(err)
	}
	resp, err := w.m.Prove(key)
	if err != nil {
		w.t.Fatal(err)
	}
	b, _ := treeproof.FromResponse(resp)
	body, err := b.MarshalBinary()
	if err != nil {
		w.t.Fatal(err)
	}
	return v.Verify(context.Background(), &pkie.VerifyRequest{Subject: pkie.Subject{Chain: chain},
		Proof: &pkie.Proof{ID: pkie.CT, Version: treeproof.Version, Body: body}})
}

// TestMirrorEndToEnd: a static-ct-api log → follower → mirror → the
// client's ct verifier: a logged chain is present, another absent (the
// reason naming the mirror and the log checkpoint), both before and after
// the log grows and the mirror merges the new keys.
func TestMirrorEndToEnd(t *testing.T) {
	w := newWorld(t)
	if _, err := w.m.Prove([32]byte{}); !errors.Is(err, ErrNoTree) {
		t.Fatalf("Prove before any build: %v", err)
	}
	select {
	case <-w.m.Ready():
	default:
		t.Fatal("Ready before any build: not closed (nothing to wait for)")
	}
	a, b, never := w.pki.leaf(t, "a.test"), w.pki.leaf(t, "b.test"), w.pki.leaf(t, "never.test")
	w.add(a)
	h := w.sync()
	if h.Size != 1 || h.Log.Size != 1 || h.Origin != "mirror.pkie.test/ct" || h.LogTime().IsZero() {
		t.Fatalf("first head %+v", h)
	}
	v := w.verifier()
	if as := w.verify(v, a); as.Status != pkie.Pass || !strings.Contains(as.Reason, "mirror.pkie.test/ct") {
		t.Fatalf("logged chain: %s %s", as.Status, as.Reason)
	}
	as := w.verify(v, b)
	if as.Status != pkie.Fail || !strings.Contains(as.Reason, "absent") || !strings.Contains(as.Reason, "mirror mirror.pkie.test/ct of log "+logOrigin) ||
		!strings.Contains(as.Reason, "checkpoint of 1 entries signed") {
		t.Fatalf("unlogged chain: %s %s", as.Status, as.Reason)
	}
	w.add(b, w.pki.leaf(t, "c.test"))
	h2 := w.sync()
	if h2.Size != 3 || h2.Log.Size != 3 {
		t.Fatalf("head after growth %+v", h2)
	}
	// The merged tree is the tree of every key in the keys file.
	keys, err := os.ReadFile(w.f.KeysPath())
	if err != nil {
		t.Fatal(err)
	}
	var all [][32]byte
	for i := 0; i+32 <= len(keys) && uint64(len(all)) < w.f.State().KeyCount; i += 32 {
		all = append(all, [32]byte(keys[i:i+32]))
	}
	if ref := sortedtree.Build(all); ref.Root() != h2.Root || ref.Size() != h2.Size {
		t.Fatalf("merged tree %d/%x, a build of the keys file %d/%x", h2.Size, h2.Root, ref.Size(), ref.Root())
	}
	for _, c := range [][][]byte{a, b} {
		if as := w.verify(v, c); as.Status != pkie.Pass {
			t.Fatalf("logged chain after growth: %s", as.Reason)
		}
	}
	if as := w.verify(v, never); as.Status != pkie.Fail {
		t.Fatalf("never logged: %s", as.Reason)
	}
	// The same checkpoint again: a fresh head over the same tree.
	h3 := w.sync()
	if h3.Root != h2.Root || !h3.Time.After(h2.Time) {
		t.Fatalf("refresh: %+v after %+v", h3, h2)
	}
	// Another mirror key, or another log key, pinned: refused.
	_, otherKey, _ := checkpoint.GenerateKey("mirror.pkie.test/ct")
	ov, _ := pkiect.NewVerifier(pkiect.VerifierConfig{Key: otherKey, LogKey: w.log.VerifierKey()}.JSON())
	if as := w.verify(ov, a); as.Status != pkie.Fail {
		t.Fatalf("other mirror key: %s", as.Reason)
	}
}

// TestMirrorRestart: a reopened mirror serves the same head and tree
// without rebuilding; a corrupt tree file, a corrupt state or a state
// lost beside tree files is refused.
func TestMirrorRestart(t *testing.T) {
	w := newWorld(t)
	w.add(w.pki.leaf(t, "a.test"), w.pki.leaf(t, "b.test"))
	w.sync()
	head, h := w.m.Head()
	w.m.Close()
	st, _ := os.ReadFile(filepath.Join(w.dir, "mirror", StateFile))
	m := w.open(t)
	if got, _ := m.Head(); string(got) != string(head) {
		t.Fatal("reopened mirror has another head")
	}
	if _, err := m.Prove(h.Root); err != nil {
		t.Fatal(err)
	}
	m.Close()
	cfg := w.config(t)
	tree := filepath.Join(cfg.Dir, treePrefix+"2"+treeSuffix)
	for name, corrupt := range map[string]func(){
		"tree byte flipped": func() {
			b, _ := os.ReadFile(tree)
			b[len(b)-1] ^= 1
			os.WriteFile(tree, b, 0o644)
		},
		"tree truncated": func() {
			b, _ := os.ReadFile(tree)
			os.WriteFile(tree, b[:len(b)-32], 0o644)
		},
		"head edited": func() {
			os.WriteFile(filepath.Join(cfg.Dir, StateFile), []byte(strings.Replace(string(st), "size 2", "size 3", 1)), 0o600)
		},
		"state lost": func() { os.Remove(filepath.Join(cfg.Dir, StateFile)) },
		"tree lost":  func() { os.Remove(tree) },
	} {
		good, _ := os.ReadFile(tree)
		corrupt()
		if _, err := Open(cfg); !errors.Is(err, ErrState) {
			t.Errorf("%s: %v, want ErrState", name, err)
		}
		os.WriteFile(tree, good, 0o644)
		os.WriteFile(filepath.Join(cfg.Dir, StateFile), st, 0o600)
	}
}

// TestMirrorRefusesGoingBack: a checkpoint smaller than the last one
// signed for, or of the same size with another root, is refused and the
// last head kept.
func TestMirrorRefusesGoingBack(t *testing.T) {
	w := newWorld(t)
	w.add(w.pki.leaf(t, "a.test"))
	w.sync()
	old := w.f.State()
	oldCP := old.Checkpoint
	w.add(w.pki.leaf(t, "b.test"))
	w.sync()
	before, _ := w.m.Head()
	ctx := context.Background()
	if _, err := w.m.Update(ctx, Snapshot{Checkpoint: oldCP, KeysPath: w.f.KeysPath(), KeyCount: old.KeyCount}); !errors.Is(err, ErrRollback) {
		t.Fatalf("older checkpoint: %v, want ErrRollback", err)
	}
	// A checkpoint of the same size with another root, signed by the log
	// key, cannot come from the honest log; a checkpoint not signed by
	// the log key is refused before anything else.
	forged := strings.Replace(string(w.f.State().Checkpoint), "\n2\n", "\n2\n", 1)
	forged = forged[:len(logOrigin)+3] + "AAAA" + forged[len(logOrigin)+7:]
	if _, err := w.m.Update(ctx, Snapshot{Checkpoint: []byte(forged), KeysPath: w.f.KeysPath(), KeyCount: w.f.State().KeyCount}); err == nil {
		t.Fatal("forged checkpoint accepted")
	}
	if after, _ := w.m.Head(); string(after) != string(before) {
		t.Fatal("a refused update changed the head")
	}
}

// TestMirrorHTTPAndAudit: the mirror's head, tree file and health over
// HTTP; Audit passes on an honest mirror and fails, naming the
// difference, on one whose tree lacks a key or holds an extra one.
func TestMirrorHTTPAndAudit(t *testing.T) {
	w := newWorld(t)
	w.add(w.pki.leaf(t, "a.test"), w.pki.leaf(t, "b.test"), w.pki.leaf(t, "c.test"))
	w.sync()
	srv := httptest.NewServer(http.StripPrefix("/mirror", w.m.Handler(HandlerOptions{})))
	t.Cleanup(srv.Close)
	for _, p := range []string{"/mirror/head", "/mirror/tree", "/mirror/healthz"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s", p, resp.Status)
		}
	}
	// Once the tree is ready, /healthz says a plain "ok".
	<-w.m.Ready()
	if resp, err := http.Get(srv.URL + "/mirror/healthz"); err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "ok\n" {
			t.Fatalf("healthz of a ready mirror: %q", body)
		}
	}
	ctx := context.Background()
	audit := func(url string) (*AuditResult, error) {
		return Audit(ctx, AuditConfig{MirrorURL: url, MirrorKey: w.mkey, LogURL: w.logSrv.URL, LogKey: w.log.VerifierKey()})
	}
	res, err := audit(srv.URL + "/mirror")
	if err != nil || !res.OK || res.Keys != 3 {
		t.Fatalf("honest mirror: %+v %v", res, err)
	}
	// The log grows; the head (bound to 3 entries) still audits.
	w.add(w.pki.leaf(t, "d.test"))
	if res, err := audit(srv.URL + "/mirror"); err != nil || !res.OK {
		t.Fatalf("honest mirror behind a grown log: %+v %v", res, err)
	}

	// Dishonest mirrors: the same key signs a head over a tree with a key
	// dropped, or with an extra key, bound to the same checkpoint.
	keys, _ := os.ReadFile(w.f.KeysPath())
	_, honest := w.m.Head()
	for name, edit := range map[string]func([][32]byte) [][32]byte{
		"key dropped": func(k [][32]byte) [][32]byte { return k[1:] },
		"extra key":   func(k [][32]byte) [][32]byte { return append(k, [32]byte{0xee}) },
	} {
		t.Run(name, func(t *testing.T) {
			var ks [][32]byte
			for i := 0; i < 3; i++ {
				ks = append(ks, [32]byte(keys[32*i:32*i+32]))
			}
			ks = edit(ks)
			tr := sortedtree.Build(ks)
			dir := t.TempDir()
			if err := tr.WriteFileLevel(filepath.Join(dir, "t"), sortedtree.DefaultFileLevel); err != nil {
				t.Fatal(err)
			}
			h := *honest
			h.Size, h.Root = tr.Size(), tr.Root()
			cfg := w.config(t)
			msg, err := checkpoint.SignHead(h, cfg.Signer)
			if err != nil {
				t.Fatal(err)
			}
			bad := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/head":
					rw.Write(msg)
				case "/tree":
					http.ServeFile(rw, r, filepath.Join(dir, "t"))
				default:
					http.NotFound(rw, r)
				}
			}))
			defer bad.Close()
			res, err := audit(bad.URL)
			if !errors.Is(err, ErrMismatch) || res == nil || res.OK {
				t.Fatalf("audit of a dishonest mirror: %+v %v", res, err)
			}
			if len(res.Missing)+len(res.Extra) != 1 {
				t.Fatalf("audit names %d missing and %d extra keys, want the one", len(res.Missing), len(res.Extra))
			}
		})
	}
	// A head signed by another key, or a wrong log key: refused.
	_, otherKey, _ := checkpoint.GenerateKey("mirror.pkie.test/ct")
	if _, err := Audit(ctx, AuditConfig{MirrorURL: srv.URL + "/mirror", MirrorKey: otherKey, LogURL: w.logSrv.URL, LogKey: w.log.VerifierKey()}); !errors.Is(err, checkpoint.ErrSignature) {
		t.Fatalf("audit with another mirror key: %v", err)
	}
}

// TestMirrorRefusesFork: a checkpoint the log's key signed, of the size of
// the one the mirror's head is bound to but with another root (a forked
// log: a copy of it under the same key that took other entries), is
// refused with ErrFork and the head kept.
func TestMirrorRefusesFork(t *testing.T) {
	ctx := context.Background()
	p := newPKI(t)
	dir := t.TempDir()
	ldir, fdir := filepath.Join(dir, "log"), filepath.Join(dir, "fork")
	if _, err := ctlog.Init(ctx, ldir, logOrigin, ctlog.InitOptions{Roots: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.root.Raw})}); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(fdir, os.DirFS(ldir)); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(fdir, ctlog.KeyFile), 0o600)
	os.Chmod(filepath.Join(fdir, ctlog.HeadKeyFile), 0o600)
	os.Chmod(filepath.Join(fdir, ctlog.StateFile), 0o600)
	snap := func(sub string, chain [][]byte) Snapshot {
		l, err := ctlog.Open(ctx, filepath.Join(dir, sub), ctlog.Options{BatchMaxAge: 10 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.AddChain(ctx, chain, false); err != nil {
			t.Fatal(err)
		}
		r := l.Reader()
		f, err := ctfollow.Open(ctx, ctfollow.Config{Kind: ctfollow.KindStatic, Key: l.VerifierKey(), Dir: filepath.Join(dir, sub+"-follow"),
			Fetch: &ctfollow.Fetchers{Checkpoint: r.ReadCheckpoint, Tile: r.ReadTile, EntryBundle: r.ReadEntryBundle, Issuer: r.ReadIssuer}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for i := 0; i < 100; i++ {
			st, err := f.Sync(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size == 1 {
				return Snapshot{Checkpoint: st.Checkpoint, KeysPath: f.KeysPath(), KeyCount: st.KeyCount}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("the log never reached 1 entry")
		return Snapshot{}
	}
	honest, forked := snap("log", p.leaf(t, "a.test")), snap("fork", p.leaf(t, "b.test"))
	if _, err := GenerateKey(dir, "mirror.pkie.test/ct"); err != nil {
		t.Fatal(err)
	}
	s, v, err := ReadKey(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := os.ReadFile(filepath.Join(ldir, ctlog.PubFile))
	lv, err := checkpoint.NewLogVerifier(string(vkey))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(Config{Dir: filepath.Join(dir, "mirror"), Signer: s, Verifier: v, LogKey: lv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Update(ctx, honest); err != nil {
		t.Fatal(err)
	}
	before, _ := m.Head()
	if _, err := m.Update(ctx, forked); !errors.Is(err, ErrFork) {
		t.Fatalf("a forked checkpoint of the same size: %v, want ErrFork", err)
	}
	if after, _ := m.Head(); string(after) != string(before) {
		t.Fatal("the refused fork changed the head")
	}
}
