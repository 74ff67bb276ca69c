package prover_test

import (
	"context"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/feed"
	. "github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/internal/revocation"
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

// testAuthority is a revocation authority whose key log holds n serials,
// its sorted tree published.
type testAuthority struct {
	*revocation.Authority
	dir  string
	next int64
}

func newTestAuthority(t *testing.T, n int) *testAuthority {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ra")
	if _, err := revocation.Init(dir, "pkie.test/headra"); err != nil {
		t.Fatal(err)
	}
	a, err := revocation.Open(dir, revocation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ta := &testAuthority{Authority: a, dir: dir}
	ta.add(t, n)
	return ta
}

// add revokes n more serials and publishes.
func (a *testAuthority) add(t *testing.T, n int) {
	t.Helper()
	var serials []*big.Int
	for range n {
		a.next++
		serials = append(serials, big.NewInt(a.next))
	}
	if _, err := a.AddSerials(context.Background(), []byte("kid"), serials, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (a *testAuthority) signer(t *testing.T) note.Signer {
	t.Helper()
	s, err := checkpoint.ReadSignerFile(filepath.Join(a.dir, revocation.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// resign signs the authority's latest head again, as its key can, bound
// to a key-log checkpoint signed with its key for the given size and root.
func resign(t *testing.T, a *testAuthority, edit func(*checkpoint.Checkpoint)) []byte {
	t.Helper()
	msg, err := a.Feed().LatestCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h, err := checkpoint.OpenHeadAnyAge(msg, a.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	s := a.signer(t)
	lc := h.Log
	edit(&lc)
	lmsg, err := checkpoint.Sign(lc, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.BindLog(lmsg, a.Verifier()); err != nil {
		t.Fatal(err)
	}
	hs, err := checkpoint.HeadSigner(s, a.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	out, err := checkpoint.SignHead(*h, hs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestProverChecksLogBinding: a prover accepts successive heads, and
// refuses a head, validly signed by the TTP's key, whose bound key-log
// checkpoint goes back on the one bound to the head it accepted before: a
// smaller log, or another root at the same size; also after a restart,
// from its state directory.
func TestProverChecksLogBinding(t *testing.T) {
	ctx := context.Background()
	a := newTestAuthority(t, 3)
	stateDir := t.TempDir()
	front := &headFront{Source: a.Feed()}
	p, err := New(Config{PKIE: Revocation, Verifier: a.Verifier(), Feed: front, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	a.add(t, 2)
	if _, err := p.Sync(ctx); err != nil {
		t.Fatalf("second head: %v", err)
	}
	if st := p.Status(); st.Size != 5 || st.LogSize != 5 {
		t.Fatalf("status %+v, want 5 keys bound to a key log of 5", st)
	}
	// (A head bound to a smaller key log than its revocations is no
	// revocation head at all: checkpoint refuses it before any floor.)
	for name, edit := range map[string]func(*checkpoint.Checkpoint){
		"another root, same size": func(c *checkpoint.Checkpoint) { c.Root[0] ^= 1 },
	} {
		bad := resign(t, a, edit)
		front.head = func() []byte { return bad }
		if _, err := p.Sync(ctx); !errors.Is(err, ErrRollback) || !strings.Contains(err.Error(), "bound to") {
			t.Errorf("%s: %v, want ErrRollback naming the bound log", name, err)
		}
		restarted, err := New(Config{PKIE: Revocation, Verifier: a.Verifier(), Feed: front, StateDir: stateDir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := restarted.Sync(ctx); !errors.Is(err, ErrRollback) {
			t.Errorf("%s, after a restart: %v, want ErrRollback", name, err)
		}
	}
	// The honest head, signed again later, still passes.
	front.head = nil
	if _, err := a.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sync(ctx); err != nil {
		t.Fatalf("honest head after the refusals: %v", err)
	}
}

// TestProverRefusesCT: CT logs publish no sorted-tree feed; the ct prover
// is internal/provers/ct's Mirror, and New says so.
func TestProverRefusesCT(t *testing.T) {
	a := newTestAuthority(t, 1)
	if _, err := New(Config{PKIE: CT, Verifier: a.Verifier(), Feed: a.Feed()}); err == nil || !strings.Contains(err.Error(), "Mirror") {
		t.Fatalf("a CT feed prover: %v", err)
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
	a := newTestAuthority(t, 3)
	msg, err := a.Feed().LatestCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := checkpoint.OpenHeadAnyAge(msg, a.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	s := a.signer(t)
	legacy := func(size uint64) string {
		m, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: a.Verifier().Name(), Size: size, Root: h.Root, Time: h.Time}, s)
		if err != nil {
			t.Fatal(err)
		}
		return string(m)
	}
	for _, tc := range []struct {
		name    string
		size    uint64
		refused bool
	}{{"legacy floor ahead of the authority", 10, true}, {"legacy floor the authority holds", 3, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old := LegacyStatePath(dir, Revocation, a.Verifier())
			if err := ttpstate.Write(old, &ttpstate.State{Checkpoint: legacy(tc.size)}); err != nil {
				t.Fatal(err)
			}
			p, err := New(Config{PKIE: Revocation, Verifier: a.Verifier(), Feed: a.Feed(), StateDir: dir})
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
			hv, _ := checkpoint.HeadVerifier(a.Verifier())
			st, err := ttpstate.Read(StatePath(dir, Revocation, hv, h.Origin))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := checkpoint.OpenHeadAnyAge([]byte(st.Checkpoint), a.Verifier()); err != nil {
				t.Fatalf("converted state: %v", err)
			}
		})
	}
	// A legacy file that does not verify is refused loudly.
	dir := t.TempDir()
	if err := ttpstate.Write(LegacyStatePath(dir, Revocation, a.Verifier()), &ttpstate.State{Checkpoint: "garbage\n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{PKIE: Revocation, Verifier: a.Verifier(), Feed: a.Feed(), StateDir: dir}); err == nil || !strings.Contains(err.Error(), "before sorted-tree heads") {
		t.Fatalf("corrupt legacy state: %v", err)
	}
}
