package ctinterop

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/cli"
	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctmirror"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	"github.com/pkie/pkie/internal/tesseracttest"
	"github.com/pkie/pkie/internal/testbed"
)

// tesseractMirror is pkie's mirror of a TesseraCT log: a follower reading
// its tiles over HTTP and a sorted-tree mirror signing heads with its own
// key, served on loopback.
type tesseractMirror struct {
	follower *ctfollow.Follower
	mirror   *ctmirror.Mirror
	vkey     string // the mirror's head verifier key
	url      string // where the mirror's Handler is served
}

func startMirror(ctx context.Context, t *testing.T, tl *tesseracttest.Log) *tesseractMirror {
	t.Helper()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, err := ctfollow.Open(ctx, ctfollow.Config{Kind: ctfollow.KindStatic, URL: tl.MonitoringURL, Key: tl.VerifierKey,
		Dir: filepath.Join(dir, "follow"), Logger: quiet})
	if err != nil {
		t.Fatalf("ctfollow.Open: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	vkey, err := ctmirror.GenerateKey(dir, "mirror.interop.test/tesseract")
	if err != nil {
		t.Fatal(err)
	}
	signer, verifier, err := ctmirror.ReadKey(filepath.Join(dir, ctmirror.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	logKey, err := checkpoint.NewLogVerifier(tl.VerifierKey)
	if err != nil {
		t.Fatalf("checkpoint.NewLogVerifier(TesseraCT's key): %v", err)
	}
	m, err := ctmirror.Open(ctmirror.Config{Dir: filepath.Join(dir, "mirror"), Signer: signer, Verifier: verifier, LogKey: logKey, Logger: quiet})
	if err != nil {
		t.Fatalf("ctmirror.Open: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	mux := http.NewServeMux()
	mux.Handle("/mirror/", http.StripPrefix("/mirror", m.Handler(ctmirror.HandlerOptions{})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &tesseractMirror{follower: f, mirror: m, vkey: vkey, url: srv.URL + "/mirror"}
}

// sync follows the log one step and brings the mirror to it.
func (tm *tesseractMirror) sync(ctx context.Context, t *testing.T) *checkpoint.Head {
	t.Helper()
	st, err := tm.follower.Sync(ctx, nil)
	if err != nil {
		t.Fatalf("follower sync: %v", err)
	}
	h, err := tm.mirror.Update(ctx, ctmirror.Snapshot{Checkpoint: st.Checkpoint, KeysPath: tm.follower.KeysPath(), KeyCount: st.KeyCount})
	if err != nil {
		t.Fatalf("mirror update: %v", err)
	}
	return h
}

// TestMirrorTesseraCT has pkie's mirror (ctfollow + ctmirror) mirror a
// TesseraCT log and prove, against a pin of the mirror's key and
// TesseraCT's key, the presence of every chain submitted to TesseraCT
// (the final certificate of a logged precertificate included) and the
// absence of one never submitted; the proofs are checked by the client's
// verifier (treeproof.VerifyCT), which recomputes the key from the chain.
// ctmirror.Audit rebuilds the tree from TesseraCT's tiles and agrees,
// before and after TesseraCT grows.
func TestMirrorTesseraCT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := testbed.NewRootCA("Interop Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	tl := tesseracttest.Start(t, tesseracttest.Options{Roots: []*x509.Certificate{root.Cert}})
	tt := &target{name: "TesseraCT", lc: logClient(t, tl.SubmissionURL, tl.PublicKey), pub: tl.PublicKey}
	c := newCorpus(t, root)
	subs := c.submit(ctx, t, tt)[0]
	if _, _, err := tl.WaitSize(ctx, corpusLen); err != nil {
		t.Fatal(err)
	}
	tm := startMirror(ctx, t, tl)
	head := tm.sync(ctx, t)
	if head.Log.Size != corpusLen {
		t.Fatalf("mirror head bound to a log of %d entries, want %d", head.Log.Size, corpusLen)
	}
	pin, err := treeproof.ParseMirrorPin(tm.vkey, tl.VerifierKey, time.Hour)
	if err != nil {
		t.Fatalf("ParseMirrorPin: %v", err)
	}
	prove := func(chain [][]byte) (*treeproof.Result, error) {
		t.Helper()
		key, err := ctwire.ChainKey(chain)
		if err != nil {
			t.Fatal(err)
		}
		r, err := tm.mirror.Prove(key)
		if err != nil {
			t.Fatalf("Prove: %v", err)
		}
		return treeproof.VerifyCT(chain, r, pin, time.Now())
	}
	for _, s := range subs {
		if s.precert {
			continue
		}
		res, err := prove(s.chain)
		if err != nil || !res.Logged {
			t.Errorf("%s: submitted to TesseraCT, not proven logged: %v", s.name, err)
		}
	}
	never, err := c.inter.Issue(testbed.LeafOptions{DNSNames: []string{"never.interop.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := prove(never.Chain); err == nil || res == nil || res.Logged || res.Present {
		t.Fatalf("a chain never submitted: result %+v, error %v; want a verified absence", res, err)
	}
	// A pin of another log's key refuses the mirror's proofs.
	other := tesseracttest.Start(t, tesseracttest.Options{Roots: []*x509.Certificate{root.Cert}, Origin: "other.tesseract.test/log"})
	wrong, err := treeproof.ParseMirrorPin(tm.vkey, other.VerifierKey, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ctwire.ChainKey(subs[0].chain)
	r, err := tm.mirror.Prove(key)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := treeproof.VerifyCT(subs[0].chain, r, wrong, time.Now()); err == nil || (res != nil && res.Logged) {
		t.Fatalf("a proof bound to TesseraCT's checkpoint verified under another log's key: %+v", res)
	}

	audit := func() {
		t.Helper()
		res, err := ctmirror.Audit(ctx, ctmirror.AuditConfig{MirrorURL: tm.url, MirrorKey: tm.vkey,
			LogKind: ctfollow.KindStatic, LogURL: tl.MonitoringURL, LogKey: tl.VerifierKey, Dir: t.TempDir()})
		if err != nil || !res.OK {
			t.Fatalf("audit of the mirror against TesseraCT: %+v, %v", res, err)
		}
		code, out, errs := runPKIE(ctx, "ct", "audit-mirror", "--mirror", tm.url, "--mirror-key", tm.vkey,
			"--log", tl.MonitoringURL, "--log-key", tl.VerifierKey, "--json")
		if code != cli.ExitOK || !strings.Contains(out, `"ok": true`) {
			t.Fatalf("pkie ct audit-mirror against TesseraCT: exit %d\n%s\n%s", code, out, errs)
		}
	}
	audit()

	// TesseraCT grows: the absent chain is logged, the mirror follows and
	// now proves it present; the audit still agrees.
	if _, err := tt.lc.AddChain(ctx, asn1Chain(never.Chain)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tl.WaitSize(ctx, corpusLen+1); err != nil {
		t.Fatal(err)
	}
	if h := tm.sync(ctx, t); h.Log.Size != corpusLen+1 {
		t.Fatalf("after growth: head bound to %d entries, want %d", h.Log.Size, corpusLen+1)
	}
	if res, err := prove(never.Chain); err != nil || !res.Logged {
		t.Fatalf("after TesseraCT logged it: %+v, %v", res, err)
	}
	audit()

	// A mirror that skipped an entry fails the audit: sign a head over
	// the keys file without its last key.
	bad := startMirror(ctx, t, tl)
	st, err := bad.follower.Sync(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The mirror cannot tell (an entry may give one key or two); the
	// audit must.
	if _, err := bad.mirror.Update(ctx, ctmirror.Snapshot{Checkpoint: st.Checkpoint, KeysPath: bad.follower.KeysPath(), KeyCount: st.KeyCount - 1}); err != nil {
		t.Fatalf("signing a head over all keys but the last: %v", err)
	}
	res, err := ctmirror.Audit(ctx, ctmirror.AuditConfig{MirrorURL: bad.url, MirrorKey: bad.vkey,
		LogKind: ctfollow.KindStatic, LogURL: tl.MonitoringURL, LogKey: tl.VerifierKey, Dir: t.TempDir()})
	if !errors.Is(err, ctmirror.ErrMismatch) || (res != nil && res.OK) {
		t.Fatalf("audit of a mirror missing a key: %+v, %v; want ErrMismatch", res, err)
	}
	code, out, errs := runPKIE(ctx, "ct", "audit-mirror", "--mirror", bad.url, "--mirror-key", bad.vkey,
		"--log", tl.MonitoringURL, "--log-key", tl.VerifierKey)
	if code != cli.ExitNegative {
		t.Fatalf("pkie ct audit-mirror of a mirror missing a key: exit %d, want %d\n%s\n%s", code, cli.ExitNegative, out, errs)
	}
}
