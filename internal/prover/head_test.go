package prover_test

import (
	"context"
	"errors"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/feed"
	ctlog "github.com/pkie/pkie/internal/oldctlog"
	. "github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/internal/revocation"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/pkie/pkie/internal/ttpstate"
)

// headFront serves a TTP's feed, with the head replaced by head() when
// that is not nil: a TTP (or whoever holds its key) that misbehaves.
type headFront struct {
	feed.Source
	head func() []byte
}

func (f *headFront) LatestCheckpoint(ctx context.Context) ([]byte, error) {
	if f.head != nil {
		return f.head(), nil
	}
	return f.Source.LatestCheckpoint(ctx)
}

// testLog is a CT log holding n certificates, with a sorted tree built.
func testLog(t *testing.T, n int) *ctlog.Log {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	if _, err := ctlog.Init(dir, "pkie.test/headlog"); err != nil {
		t.Fatal(err)
	}
	l, err := ctlog.Open(dir, ctlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	addCerts(t, l, n)
	return l
}

func addCerts(t *testing.T, l *ctlog.Log, n int) {
	t.Helper()
	root, err := testbed.NewRootCA("Head Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		leaf, err := root.Issue(testbed.LeafOptions{DNSNames: []string{"head.test"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AddChain(context.Background(), leaf.Chain); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.BuildSorted(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// resign signs the log's latest head again, as the log's key can, bound to
// a log checkpoint signed with the log's key for the given size and root.
func resign(t *testing.T, l *ctlog.Log, edit func(*checkpoint.Checkpoint)) []byte {
	t.Helper()
	msg, err := l.SortedCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h, err := checkpoint.OpenHeadAnyAge(msg, l.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	skey, err := os.ReadFile(filepath.Join(l.Dir(), ctlog.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := checkpoint.NewSigner(string(skey))
	if err != nil {
		t.Fatal(err)
	}
	lc := h.Log
	edit(&lc)
	lmsg, err := checkpoint.Sign(lc, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.BindLog(lmsg, l.Verifier()); err != nil {
		t.Fatal(err)
	}
	hs, err := checkpoint.HeadSigner(s, l.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	out, err := checkpoint.SignHead(*h, hs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestProverChecksLogBinding: a CT prover accepts successive heads (each a
// snapshot under one origin), and refuses a head, validly signed by the
// log's key, whose bound log checkpoint goes back on the one bound to the
// head it accepted before: a smaller log, or another root at the same
// size; also after a restart, from its state directory.
func TestProverChecksLogBinding(t *testing.T) {
	ctx := context.Background()
	l := testLog(t, 3)
	stateDir := t.TempDir()
	front := &headFront{Source: l.Feed()}
	p, err := New(Config{PKIE: CT, Verifier: l.Verifier(), Feed: front, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	addCerts(t, l, 2)
	if _, err := p.Sync(ctx); err != nil {
		t.Fatalf("second head: %v", err)
	}
	if st := p.Status(); st.Size != 5 || st.LogSize != 6 {
		t.Fatalf("status %+v, want 5 keys bound to a log of 6", st)
	}
	for name, edit := range map[string]func(*checkpoint.Checkpoint){
		"smaller log":             func(c *checkpoint.Checkpoint) { c.Size--; c.Root[0] ^= 1 },
		"another root, same size": func(c *checkpoint.Checkpoint) { c.Root[0] ^= 1 },
	} {
		bad := resign(t, l, edit)
		front.head = func() []byte { return bad }
		if _, err := p.Sync(ctx); !errors.Is(err, ErrRollback) || !strings.Contains(err.Error(), "bound to") {
			t.Errorf("%s: %v, want ErrRollback naming the bound log", name, err)
		}
		restarted, err := New(Config{PKIE: CT, Verifier: l.Verifier(), Feed: front, StateDir: stateDir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := restarted.Sync(ctx); !errors.Is(err, ErrRollback) {
			t.Errorf("%s, after a restart: %v, want ErrRollback", name, err)
		}
	}
	// The honest head, signed again later, still passes.
	front.head = nil
	if _, err := l.BuildSorted(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sync(ctx); err != nil {
		t.Fatalf("honest head after the refusals: %v", err)
	}
}

// reorderedFeed serves the keys of a revocation authority's feed with the
// first two swapped: the same set, so the same sorted tree, but a rewritten
// key log.
type reorderedFeed struct{ feed.Source }

func (f reorderedFeed) Keys(ctx context.Context, start uint64, n int) ([][32]byte, error) {
	ks, err := f.Source.Keys(ctx, start, n)
	if err == nil && start == 0 && len(ks) >= 2 {
		ks[0], ks[1] = ks[1], ks[0]
	}
	return ks, err
}

// TestRevocationProverChecksKeyLog: a revocation head is bound to the
// authority's key log, the feed in order; a feed that lists the signed set
// in another order is refused although the sorted tree matches.
func TestRevocationProverChecksKeyLog(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ra")
	if _, err := revocation.Init(dir, "pkie.test/headra"); err != nil {
		t.Fatal(err)
	}
	a, err := revocation.Open(dir, revocation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.AddSerials(ctx, []byte("kid"), []*big.Int{big.NewInt(3), big.NewInt(1), big.NewInt(2)}, "t"); err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{PKIE: Revocation, Verifier: a.Verifier(), Feed: reorderedFeed{a.Feed()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sync(ctx); err == nil || !strings.Contains(err.Error(), "key log") {
		t.Fatalf("sync from a reordered feed: %v, want a refusal naming the key log", err)
	}
	p, err = New(Config{PKIE: Revocation, Verifier: a.Verifier(), Feed: a.Feed()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddSerials(ctx, []byte("kid"), []*big.Int{big.NewInt(0)}, "t"); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Sync(ctx); err != nil || res.NewKeys != 1 {
		t.Fatalf("incremental sync: %+v %v", res, err)
	}
}

// TestLegacyProverState: a state directory written before heads had their
// own type holds a sorted-tree root signed as a checkpoint, under another
// file name. The prover reads it as its floor (a tree behind it is still
// refused), and its first sync replaces it with a head under the new name.
func TestLegacyProverState(t *testing.T) {
	ctx := context.Background()
	l := testLog(t, 3)
	msg, err := l.SortedCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := checkpoint.OpenHeadAnyAge(msg, l.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	skey, _ := os.ReadFile(filepath.Join(l.Dir(), ctlog.KeyFile))
	s, _ := checkpoint.NewSigner(string(skey))
	legacy := func(size uint64) string {
		m, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: l.SortedOrigin(), Size: size, Root: h.Root, Time: h.Time}, s)
		if err != nil {
			t.Fatal(err)
		}
		return string(m)
	}
	for _, tc := range []struct {
		name    string
		size    uint64
		refused bool
	}{{"legacy floor ahead of the log", 10, true}, {"legacy floor the log holds", 3, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old := LegacyStatePath(dir, CT, l.Verifier())
			if err := ttpstate.Write(old, &ttpstate.State{Checkpoint: legacy(tc.size)}); err != nil {
				t.Fatal(err)
			}
			p, err := New(Config{PKIE: CT, Verifier: l.Verifier(), Feed: l.Feed(), StateDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Sync(ctx)
			if tc.refused {
				if !errors.Is(err, ErrRollback) {
					t.Fatalf("sync behind the legacy floor: %v, want ErrRollback", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("legacy state file still there: %v", err)
			}
			hv, _ := checkpoint.HeadVerifier(l.Verifier())
			st, err := ttpstate.Read(StatePath(dir, CT, hv, l.SortedOrigin()))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := checkpoint.OpenHeadAnyAge([]byte(st.Checkpoint), l.Verifier()); err != nil {
				t.Fatalf("converted state: %v", err)
			}
		})
	}
	// A legacy file that does not verify is refused loudly.
	dir := t.TempDir()
	if err := ttpstate.Write(LegacyStatePath(dir, CT, l.Verifier()), &ttpstate.State{Checkpoint: "garbage\n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{PKIE: CT, Verifier: l.Verifier(), Feed: l.Feed(), StateDir: dir}); err == nil || !strings.Contains(err.Error(), "before sorted-tree heads") {
		t.Fatalf("corrupt legacy state: %v", err)
	}
}

// TestProverProvesLogConsistency: with LogConsistency, a CT prover asks
// the log for a consistency proof from the log checkpoint bound to the head
// it accepted to the one bound to a new head. A head bound to a larger log
// checkpoint that is not the log's (the log's key signed a forked root) is
// refused; without the proof it would pass, since the size only grew.
func TestProverProvesLogConsistency(t *testing.T) {
	ctx := context.Background()
	l := testLog(t, 3)
	srv := httptest.NewServer(l.Handler(ctlog.HandlerOptions{}))
	defer srv.Close()
	front := &headFront{Source: l.Feed()}
	newP := func(proofs bool) *Prover {
		cfg := Config{PKIE: CT, Verifier: l.Verifier(), Feed: front}
		if proofs {
			cfg.LogConsistency = LogConsistency(srv.URL, nil)
		}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		return p
	}
	checked, unchecked := newP(true), newP(false)
	addCerts(t, l, 2)
	if _, err := checked.Sync(ctx); err != nil {
		t.Fatalf("honest head bound to a larger log: %v", err)
	}
	addCerts(t, l, 1)
	forked := resign(t, l, func(c *checkpoint.Checkpoint) { c.Root[0] ^= 1 })
	front.head = func() []byte { return forked }
	if _, err := checked.Sync(ctx); !errors.Is(err, ErrRollback) || !strings.Contains(err.Error(), "does not extend") {
		t.Fatalf("head bound to a forked log: %v, want ErrRollback", err)
	}
	if st := checked.Status(); st.RefusedTrees != 1 {
		t.Fatalf("status %+v, want one refused tree", st)
	}
	if _, err := unchecked.Sync(ctx); err != nil {
		t.Fatalf("without consistency proofs the forked head should pass (what the proof adds): %v", err)
	}
}
