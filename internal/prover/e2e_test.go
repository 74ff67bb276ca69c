package prover_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"math/big"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/feed"
	pkierev "github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	. "github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/internal/testbed"
)

// clock is a settable clock shared by every party of a test.
type clock struct{ ns atomic.Int64 }

func newClock() *clock                   { c := &clock{}; c.ns.Store(time.Now().UnixNano()); return c }
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

type world struct {
	ttp    *testbed.TTPs
	clk    *clock
	ca     *testbed.CA
	client *treeproof.Client
	ctPin  treeproof.Pin
	revPin treeproof.Pin
}

func newWorld(t *testing.T) *world {
	t.Helper()
	clk := newClock()
	root, err := testbed.NewRootCA("Proof Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	ttp, err := testbed.StartTTPs(testbed.TTPOptions{Dir: t.TempDir(), Now: clk.Now, Roots: []*testbed.CA{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ttp.Close() })
	ca, err := root.NewIntermediate("Proof CA", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	ctPin, err := treeproof.ParseMirrorPin(ttp.MirrorKey, ttp.LogKey, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	revPin, err := treeproof.ParsePin(ttp.RevocationKey, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return &world{ttp: ttp, clk: clk, ca: ca, client: &treeproof.Client{Base: ttp.ProverURL}, ctPin: ctPin, revPin: revPin}
}

func (w *world) leaf(t *testing.T) *testbed.Leaf {
	t.Helper()
	l, err := w.ca.Issue(testbed.LeafOptions{DNSNames: []string{"proof.test"}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (w *world) ct(t *testing.T, l *testbed.Leaf) *treeproof.Response {
	t.Helper()
	r, err := w.client.CT(context.Background(), sha256.Sum256(l.Cert.Raw))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (w *world) rev(t *testing.T, l *testbed.Leaf) (*treeproof.Response, [32]byte) {
	t.Helper()
	k, err := pkierev.CertKey(l.Cert, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := w.client.Revocation(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return r, k
}

func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	logged, revoked, unlogged, young := w.leaf(t), w.leaf(t), w.leaf(t), w.leaf(t)
	for _, l := range []*testbed.Leaf{logged, revoked} {
		if _, err := w.ttp.LogChain(ctx, l.Chain); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.ttp.Revoke(ctx, w.ca, revoked.Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := w.ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// Logged after the mirror's last sync.
	if _, err := w.ttp.LogChain(ctx, young.Chain); err != nil {
		t.Fatal(err)
	}
	now := w.clk.Now()

	res, err := treeproof.VerifyCT([][]byte{logged.Cert.Raw}, w.ct(t, logged), w.ctPin, now)
	if err != nil || !res.Logged || !res.Present {
		t.Errorf("logged certificate: %+v %v", res, err)
	}
	// Logged after the tree was built: absent, and so not accepted (its
	// SCT, if any, comes from the certificate, not from the proof).
	res, err = treeproof.VerifyCT([][]byte{young.Cert.Raw}, w.ct(t, young), w.ctPin, now)
	if err == nil || res == nil || res.Present || res.Logged {
		t.Errorf("young certificate absent from the tree: %+v %v", res, err)
	}
	if _, err := treeproof.VerifyCT([][]byte{unlogged.Cert.Raw}, w.ct(t, unlogged), w.ctPin, now); err == nil {
		t.Error("unlogged certificate accepted")
	}

	r, k := w.rev(t, logged)
	if res, err := treeproof.VerifyRevocation(k, r, w.revPin, now); err != nil || res.Revoked {
		t.Errorf("unrevoked certificate: %+v %v", res, err)
	}
	r, k = w.rev(t, revoked)
	if res, err := treeproof.VerifyRevocation(k, r, w.revPin, now); err != nil || !res.Revoked {
		t.Errorf("revoked certificate: %+v %v", res, err)
	}
}

func TestVerifierRejections(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	l := w.leaf(t)
	if _, err := w.ttp.LogChain(ctx, l.Chain); err != nil {
		t.Fatal(err)
	}
	if err := w.ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	good := w.ct(t, l)
	now := w.clk.Now()
	if _, err := treeproof.VerifyCT([][]byte{l.Cert.Raw}, good, w.ctPin, now); err != nil {
		t.Fatalf("baseline: %v", err)
	}
	_, otherKey, _ := checkpoint.GenerateKey("pkie.test/mirror") // same name, other key
	wrongPin, _ := treeproof.ParseMirrorPin(otherKey, w.ttp.LogKey, 10*time.Minute)
	// The mirror's key alone, as clients pinned pkie's earlier log that
	// signed its own heads: refused, whatever the proof.
	singlePin, _ := treeproof.ParsePin(w.ttp.MirrorKey, 10*time.Minute)
	mirrorSigner, err := checkpoint.ReadSignerFile(w.ttp.MirrorKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	head, err := checkpoint.OpenMirrorHeadAnyAge([]byte(good.Checkpoint), w.ctPin.Verifier, w.ctPin.LogVerifier)
	if err != nil {
		t.Fatal(err)
	}
	// The mirror's key signing a plain checkpoint of the tree, not a head
	// bound to the log's checkpoint.
	bare, _ := checkpoint.Sign(checkpoint.Checkpoint{Origin: head.Origin, Size: head.Size, Root: head.Root, Time: head.Time}, mirrorSigner)
	otherOrigin := *good
	otherOrigin.Checkpoint = string(bare)
	flipped := *good
	flipped.Proof = append([]byte(nil), good.Proof...)
	flipped.Proof[len(flipped.Proof)-1] ^= 1
	wrongKey := *good
	wrongKey.Key[0] ^= 1
	tamperedCP := *good
	tamperedCP.Checkpoint = strings.Replace(good.Checkpoint, "\nsize 1\n", "\nsize 2\n", 1)
	if tamperedCP.Checkpoint == good.Checkpoint {
		t.Fatal("no size line to tamper with")
	}
	// Heads the mirror's key signs, bound to log checkpoints that are not
	// the log's: what a verifier must refuse although the head's
	// signature is good.
	headSigner := mirrorSigner
	rebound := func(lmsg []byte, v note.Verifier, edit func(*checkpoint.Head)) *treeproof.Response {
		h := *head
		if lmsg != nil {
			if err := h.BindLog(lmsg, v); err != nil {
				t.Fatal(err)
			}
		}
		if edit != nil {
			edit(&h)
		}
		msg, err := checkpoint.SignHead(h, headSigner)
		if err != nil {
			t.Fatal(err)
		}
		r := *good
		r.Checkpoint = string(msg)
		return &r
	}
	otherS, otherV := func() (note.Signer, note.Verifier) {
		sk, vk, _ := checkpoint.GenerateKey(w.ctPin.LogVerifier.Name())
		s, _ := checkpoint.NewSigner(sk)
		v, _ := checkpoint.NewVerifier(vk)
		return s, v
	}()
	foreignLog, _ := checkpoint.Sign(head.Log, otherS)

	for name, tc := range map[string]struct {
		r   *treeproof.Response
		pin treeproof.Pin
		now time.Time
		is  error
	}{
		"wrong pinned key":                           {good, wrongPin, now, checkpoint.ErrSignature},
		"stale root":                                 {good, w.ctPin, now.Add(11 * time.Minute), checkpoint.ErrStale},
		"future root":                                {good, w.ctPin, now.Add(-5 * time.Minute), checkpoint.ErrFuture},
		"a checkpoint, not a head":                   {&otherOrigin, w.ctPin, now, nil},
		"proof byte changed":                         {&flipped, w.ctPin, now, nil},
		"response for other key":                     {&wrongKey, w.ctPin, now, nil},
		"checkpoint edited":                          {&tamperedCP, w.ctPin, now, checkpoint.ErrSignature},
		"bound log checkpoint signed by another key": {rebound(foreignLog, otherV, nil), w.ctPin, now, checkpoint.ErrLogSignature},
		"bound log root edited":                      {rebound(nil, nil, func(h *checkpoint.Head) { h.Log.Root[0] ^= 1 }), w.ctPin, now, checkpoint.ErrLogSignature},
	} {
		_, err := treeproof.VerifyCT([][]byte{l.Cert.Raw}, tc.r, tc.pin, tc.now)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: error %v, want %v", name, err, tc.is)
		}
	}
	if _, err := treeproof.VerifyCT([][]byte{l.Cert.Raw}, good, singlePin, now); err == nil || !strings.Contains(err.Error(), "without the log's key") {
		t.Errorf("a pin of the mirror's key alone: %v, want a refusal naming the missing log key", err)
	}
	// A revocation response is not a CT response, even for the same key.
	rr, _ := w.rev(t, l)
	if _, err := treeproof.VerifyCT([][]byte{l.Cert.Raw}, rr, w.ctPin, now); err == nil {
		t.Error("revocation response accepted as CT evidence")
	}
}

// TestReplayAfterRevocation replays the "not revoked" proof a client got
// before the revocation: it verifies until it is older than the pinned
// maximum age, then the freshness check rejects it, while a fresh proof
// says revoked.
func TestReplayAfterRevocation(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	l := w.leaf(t)
	if err := w.ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	old, k := w.rev(t, l)
	if res, err := treeproof.VerifyRevocation(k, old, w.revPin, w.clk.Now()); err != nil || res.Revoked {
		t.Fatalf("before revocation: %+v %v", res, err)
	}
	w.clk.Advance(time.Minute)
	if err := w.ttp.Revoke(ctx, w.ca, l.Cert.SerialNumber); err != nil {
		t.Fatal(err)
	}
	if err := w.ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	fresh, _ := w.rev(t, l)
	if res, err := treeproof.VerifyRevocation(k, fresh, w.revPin, w.clk.Now()); err != nil || !res.Revoked {
		t.Fatalf("after revocation: %+v %v", res, err)
	}
	// The replay window is bounded by the maximum age (10 minutes).
	w.clk.Advance(10 * time.Minute)
	if _, err := treeproof.VerifyRevocation(k, old, w.revPin, w.clk.Now()); !errors.Is(err, checkpoint.ErrStale) {
		t.Fatalf("replayed old proof: %v, want ErrStale", err)
	}
	// Meanwhile the authority republished: a fresh proof still verifies.
	if err := w.ttp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	fresh, _ = w.rev(t, l)
	if res, err := treeproof.VerifyRevocation(k, fresh, w.revPin, w.clk.Now()); err != nil || !res.Revoked {
		t.Fatalf("fresh proof after republish: %+v %v", res, err)
	}
}

// lyingFeed corrupts one key of a real feed.
type lyingFeed struct{ feed.Source }

func (f lyingFeed) Keys(ctx context.Context, start uint64, n int) ([][32]byte, error) {
	ks, err := f.Source.Keys(ctx, start, n)
	if len(ks) > 0 {
		ks[0][0] ^= 1
	}
	return ks, err
}

func TestProverRefusesBadTTPData(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	if err := w.ttp.Revoke(ctx, w.ca, big.NewInt(1), big.NewInt(2), big.NewInt(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ttp.Revocation.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	auth := w.ttp.Revocation
	p, _ := New(Config{PKIE: Revocation, Feed: lyingFeed{auth.Feed()}, Verifier: auth.Verifier(), Now: w.clk.Now})
	if _, err := p.Sync(ctx); err == nil || !strings.Contains(err.Error(), "root") {
		t.Errorf("feed with a corrupted key: %v", err)
	}
	if _, err := p.Prove([32]byte{}); !errors.Is(err, ErrNotSynced) {
		t.Errorf("prover serves after a failed first sync: %v", err)
	}
	_, otherKey, _ := checkpoint.GenerateKey("pkie.test/revocation") // same name, other key
	otherV, _ := checkpoint.NewVerifier(otherKey)
	wrong, _ := New(Config{PKIE: Revocation, Feed: auth.Feed(), Verifier: otherV, Now: w.clk.Now})
	if _, err := wrong.Sync(ctx); !errors.Is(err, checkpoint.ErrSignature) {
		t.Errorf("feed signed by another key: %v", err)
	}
	stale, _ := New(Config{PKIE: Revocation, Feed: auth.Feed(), Verifier: auth.Verifier(), MaxAge: time.Minute,
		Now: func() time.Time { return w.clk.Now().Add(time.Hour) }})
	if _, err := stale.Sync(ctx); !errors.Is(err, checkpoint.ErrStale) {
		t.Errorf("stale TTP checkpoint: %v", err)
	}
	// Incremental sync: the real prover picks up only new keys.
	if _, err := w.ttp.RevProver.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.ttp.Revoke(ctx, w.ca, big.NewInt(4)); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := w.ttp.RevProver.Sync(ctx)
	if err != nil || res.NewKeys != 1 || res.Size != 4 {
		t.Errorf("incremental sync: %+v %v", res, err)
	}
}

func TestProofAPIErrors(t *testing.T) {
	w := newWorld(t)
	for path, want := range map[string]int{
		"/v1/ct/proof":         http.StatusBadRequest,
		"/v1/ct/proof?key=zz":  http.StatusBadRequest,
		"/v1/ct/proof?cert=!!": http.StatusBadRequest,
		// Over MaxCertParam, yet within what the server reads: refused
		// with a JSON error rather than looked up.
		"/v1/ct/proof?cert=" + strings.Repeat("A", MaxCertParam+4): http.StatusBadRequest,
		"/v1/revocation/proof?key=" + strings.Repeat("0", 64):      http.StatusServiceUnavailable, // not synced yet
		"/v1/status": http.StatusOK,
		"/v1/nope":   http.StatusNotFound,
	} {
		resp, err := http.Get(w.ttp.ProverURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %.80s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
