package prover_test

import (
	"context"
	"errors"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/feed"
	pkierev "github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	. "github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/internal/revocation"
	"github.com/pkie/pkie/internal/testbed"
)

// TestRestartedProverRefusesShrunkTree is the rollback attack end to end: an
// authority revokes a certificate and a prover with a state directory syncs;
// the authority loses its database and will not start on it; a forged
// authority with the same key signs the empty tree; the prover, restarted,
// refuses that tree, and the revoked certificate never checks as not
// revoked.
func TestRestartedProverRefusesShrunkTree(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	raDir, stateDir := filepath.Join(dir, "ra"), filepath.Join(dir, "prover")
	vkey, err := revocation.Init(raDir, "pkie.test/rollback")
	if err != nil {
		t.Fatal(err)
	}
	pin, err := treeproof.ParsePin(vkey, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	root, err := testbed.NewRootCA("Rollback Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := root.Issue(testbed.LeafOptions{DNSNames: []string{"revoked.test"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := pkierev.CertKey(leaf.Cert, nil)
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := pkierev.IssuerKeyID(root.Cert)

	a, err := revocation.Open(raDir, revocation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddSerials(ctx, kid, []*big.Int{leaf.Cert.SerialNumber, big.NewInt(5), big.NewInt(6)}, "t"); err != nil {
		t.Fatal(err)
	}
	honest := httptest.NewServer(a.Handler())
	newProver := func(url, state string) *Prover {
		t.Helper()
		p, err := New(Config{PKIE: Revocation, Verifier: a.Verifier(), StateDir: state,
			Feed: &feed.Client{Base: url + "/v1/sorted"}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// check is what a client would conclude from the prover, over HTTP.
	check := func(p *Prover) (revoked bool, err error) {
		srv := httptest.NewServer(Handler(ServerOptions{Revocation: p}))
		defer srv.Close()
		r, err := (&treeproof.Client{Base: srv.URL}).Revocation(ctx, key)
		if err != nil {
			return false, err
		}
		res, err := treeproof.VerifyRevocation(key, r, pin, time.Now())
		if err != nil {
			return false, err
		}
		return res.Present, nil
	}
	sw := &switchFeed{src: &feed.Client{Base: honest.URL + "/v1/sorted"}}
	running, err := New(Config{PKIE: Revocation, Verifier: a.Verifier(), StateDir: stateDir, Feed: sw})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := running.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if revoked, err := check(running); !revoked || err != nil {
		t.Fatalf("before the loss: revoked %v, %v", revoked, err)
	}
	honest.Close()
	a.Close()

	// The database is lost; the key is kept. The authority refuses to start.
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(raDir, revocation.DBFile+s))
	}
	if _, err := revocation.Open(raDir, revocation.Options{}); !errors.Is(err, revocation.ErrBehind) {
		t.Fatalf("authority on a lost database: %v, want ErrBehind", err)
	}
	// A forged authority (the same key, its state file gone) signs the
	// empty tree anyway.
	os.Remove(filepath.Join(raDir, revocation.StateFile))
	forged, err := revocation.Open(raDir, revocation.Options{AcceptFork: true})
	if err != nil {
		t.Fatal(err)
	}
	defer forged.Close()
	if p, err := forged.Publish(ctx); err != nil || p.Size != 0 {
		t.Fatalf("forged publication: %+v %v", p, err)
	}
	evil := httptest.NewServer(forged.Handler())
	defer evil.Close()

	// Without a state directory, a fresh prover believes it: the hole.
	if revoked, err := check(mustSync(t, newProver(evil.URL, ""))); revoked || err != nil {
		t.Fatalf("stateless prover: revoked %v, %v (the forged tree should have been accepted)", revoked, err)
	}
	// The prover that kept running refuses it and keeps its last good tree.
	sw.set(&feed.Client{Base: evil.URL + "/v1/sorted"})
	if _, err := running.Sync(ctx); !errors.Is(err, ErrRollback) {
		t.Fatalf("running prover synced the empty tree: %v", err)
	}
	if revoked, err := check(running); !revoked || err != nil {
		t.Fatalf("running prover after the refusal: revoked %v, %v", revoked, err)
	}
	// Restarted with its state directory, it refuses it on its first sync
	// and serves nothing rather than an empty tree.
	restarted := newProver(evil.URL, stateDir)
	if _, err := restarted.Sync(ctx); !errors.Is(err, ErrRollback) {
		t.Fatalf("restarted prover synced the empty tree: %v", err)
	}
	if st := restarted.Status(); st.Synced || st.RefusedTrees != 1 || st.LastError == "" {
		t.Fatalf("status after the refusal: %+v", st)
	}
	if revoked, err := check(restarted); err == nil {
		t.Fatalf("restarted prover: the revoked certificate checks with revoked=%v, want an error", revoked)
	}
}

func mustSync(t *testing.T, p *Prover) *Prover {
	t.Helper()
	if _, err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// switchFeed lets a running prover's TTP be replaced under it.
type switchFeed struct {
	mu  sync.Mutex
	src feed.Source
}

func (s *switchFeed) set(src feed.Source) { s.mu.Lock(); s.src = src; s.mu.Unlock() }
func (s *switchFeed) get() feed.Source    { s.mu.Lock(); defer s.mu.Unlock(); return s.src }

func (s *switchFeed) LatestCheckpoint(ctx context.Context) ([]byte, error) {
	return s.get().LatestCheckpoint(ctx)
}

func (s *switchFeed) Keys(ctx context.Context, start uint64, n int) ([][32]byte, error) {
	return s.get().Keys(ctx, start, n)
}

// TestForkLongerThanFloor: the authority loses its database and, started
// over under the same key, signs a tree LONGER than before that lacks the
// revoked key. Sizes alone cannot tell: a prover restarted with its state,
// and a fresh one that learns the honest head from a peer, each rebuild the
// key log and refuse it because its prefix is not the log they knew; a
// fresh prover that must know history and learns none serves nothing; a
// peer's answer that is not the TTP's head is ignored.
func TestForkLongerThanFloor(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	raDir, stateDir := filepath.Join(dir, "ra"), filepath.Join(dir, "prover")
	if _, err := revocation.Init(raDir, "pkie.test/fork"); err != nil {
		t.Fatal(err)
	}
	a, err := revocation.Open(raDir, revocation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kid := []byte{0xab, 0xcd}
	if _, err := a.AddSerials(ctx, kid, []*big.Int{big.NewInt(1), big.NewInt(2), big.NewInt(3)}, "t"); err != nil {
		t.Fatal(err)
	}
	v := a.Verifier()
	honest := httptest.NewServer(a.Handler())
	first, err := New(Config{PKIE: Revocation, Verifier: v, StateDir: stateDir, Feed: &feed.Client{Base: honest.URL + "/v1/sorted"}})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, first)
	honestHead := first.Floor()
	if len(honestHead) == 0 {
		t.Fatal("no floor after a sync")
	}
	honest.Close()
	a.Close()
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(raDir, revocation.DBFile+s))
	}
	forged, err := revocation.Open(raDir, revocation.Options{AcceptFork: true})
	if err != nil {
		t.Fatal(err)
	}
	defer forged.Close()
	if _, err := forged.AddSerials(ctx, kid, []*big.Int{big.NewInt(7), big.NewInt(8), big.NewInt(9), big.NewInt(10)}, "t"); err != nil {
		t.Fatal(err)
	}
	evil := httptest.NewServer(forged.Handler())
	defer evil.Close()
	evilFeed := &feed.Client{Base: evil.URL + "/v1/sorted"}

	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr error
	}{
		{"restarted with its state", Config{StateDir: stateDir}, ErrRollback},
		{"fresh, a peer held the honest head", Config{StateDir: t.TempDir(), RequireFloor: true,
			Floors: func(context.Context) [][]byte { return [][]byte{[]byte("not a head"), honestHead} }}, ErrRollback},
		{"fresh, no peer answers", Config{StateDir: t.TempDir(), RequireFloor: true,
			Floors: func(context.Context) [][]byte { return nil }}, ErrNoFloor},
		{"fresh, a peer answers with junk", Config{RequireFloor: true,
			Floors: func(context.Context) [][]byte { return [][]byte{[]byte("junk")} }}, ErrNoFloor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.PKIE, cfg.Verifier, cfg.Feed = Revocation, v, evilFeed
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Sync(ctx); !errors.Is(err, tc.wantErr) {
				t.Fatalf("sync against the longer fork: %v, want %v", err, tc.wantErr)
			}
			if st := p.Status(); st.Synced {
				t.Fatalf("serving after the refusal: %+v", st)
			}
			if _, err := p.Prove([32]byte{1}); !errors.Is(err, ErrNotSynced) {
				t.Fatalf("proved after the refusal: %v", err)
			}
		})
	}
	// The head a peer held is kept as the fresh prover's floor: restarted
	// without the peer, it still refuses the fork.
	peerState := t.TempDir()
	p, _ := New(Config{PKIE: Revocation, Verifier: v, Feed: evilFeed, StateDir: peerState, RequireFloor: true,
		Floors: func(context.Context) [][]byte { return [][]byte{honestHead} }})
	p.Sync(ctx)
	p, _ = New(Config{PKIE: Revocation, Verifier: v, Feed: evilFeed, StateDir: peerState, RequireFloor: true})
	if _, err := p.Sync(ctx); !errors.Is(err, ErrRollback) {
		t.Fatalf("restarted after learning the floor from a peer: %v", err)
	}
	// Trusting the first head (no RequireFloor, no state) is the hole the
	// options above close.
	if _, err := mustSync(t, must(New(Config{PKIE: Revocation, Verifier: v, Feed: evilFeed}))).Prove([32]byte{1}); err != nil {
		t.Fatal(err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
