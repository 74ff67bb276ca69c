package ctinterop

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/ctfollow"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/tesseracttest"
	"github.com/pkie/pkie/internal/testbed"
)

// follow opens a follower in a fresh directory and syncs it once.
func follow(ctx context.Context, t *testing.T, c ctfollow.Config) (*ctfollow.Follower, []byte) {
	t.Helper()
	c.Dir = t.TempDir()
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	f, err := ctfollow.Open(ctx, c)
	if err != nil {
		t.Fatalf("ctfollow.Open(%s %s): %v", c.Kind, c.URL, err)
	}
	t.Cleanup(func() { f.Close() })
	return f, syncKeys(ctx, t, f)
}

// syncKeys syncs f once and returns its valid keys.
func syncKeys(ctx context.Context, t *testing.T, f *ctfollow.Follower) []byte {
	t.Helper()
	st, err := f.Sync(ctx, nil)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	b, err := os.ReadFile(f.KeysPath())
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(b)) < st.KeyCount*ctfollow.KeySize {
		t.Fatalf("keys file of %d bytes, state says %d keys", len(b), st.KeyCount)
	}
	return b[:st.KeyCount*ctfollow.KeySize]
}

func keysHave(keys []byte, k [32]byte) bool {
	for i := 0; i+32 <= len(keys); i += 32 {
		if bytes.Equal(keys[i:i+32], k[:]) {
			return true
		}
	}
	return false
}

// TestFollowTesseraCT has pkie's follower (internal/ctfollow) mirror
// TesseraCT by its tiles, and pkie's own log given the same chains both by
// its tiles and by RFC 6962 get-entries: the three keys files are the same
// byte for byte; each holds the key a client computes (ctwire.ChainKey)
// for every chain submitted and not for a chain never submitted; the
// follower moves on as TesseraCT grows; and a follower given another log's
// key refuses TesseraCT's checkpoint and keeps nothing.
func TestFollowTesseraCT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := testbed.NewRootCA("Interop Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	tl := tesseracttest.Start(t, tesseracttest.Options{Roots: []*x509.Certificate{root.Cert}})
	pl := startPKIELog(ctx, t, root)
	tt := &target{name: "TesseraCT", lc: logClient(t, tl.SubmissionURL, tl.PublicKey), pub: tl.PublicKey}
	logs := []*target{{name: "pkie", lc: logClient(t, pl.url, pl.log.PublicKey()), pub: pl.log.PublicKey()}, tt}
	c := newCorpus(t, root)
	subs := c.submit(ctx, t, logs...)
	if _, _, err := tl.WaitSize(ctx, corpusLen); err != nil {
		t.Fatal(err)
	}

	ft, tesseractKeys := follow(ctx, t, ctfollow.Config{Kind: ctfollow.KindStatic, URL: tl.MonitoringURL, Key: tl.VerifierKey})
	_, pkieStatic := follow(ctx, t, ctfollow.Config{Kind: ctfollow.KindStatic, URL: pl.url, Key: pl.log.VerifierKey()})
	_, pkieRFC := follow(ctx, t, ctfollow.Config{Kind: ctfollow.KindRFC6962, URL: pl.url, Key: pl.log.VerifierKey()})
	if st := ft.State(); st.Size != corpusLen || st.Origin != tl.Origin {
		t.Fatalf("following TesseraCT: state of %d entries, origin %q; want %d, %q", st.Size, st.Origin, corpusLen, tl.Origin)
	}
	if !bytes.Equal(tesseractKeys, pkieStatic) || !bytes.Equal(pkieStatic, pkieRFC) {
		t.Fatalf("keys differ: TesseraCT by tiles %d bytes, pkie by tiles %d, pkie by get-entries %d",
			len(tesseractKeys), len(pkieStatic), len(pkieRFC))
	}
	for _, s := range subs[1] {
		if s.precert {
			continue
		}
		k, err := ctwire.ChainKey(s.chain)
		if err != nil {
			t.Fatal(err)
		}
		if !keysHave(tesseractKeys, k) {
			t.Errorf("%s: submitted to TesseraCT, its key is not among the follower's", s.name)
		}
	}
	never, err := c.inter.Issue(testbed.LeafOptions{DNSNames: []string{"never.interop.test"}})
	if err != nil {
		t.Fatal(err)
	}
	nk, err := ctwire.ChainKey(never.Chain)
	if err != nil {
		t.Fatal(err)
	}
	if keysHave(tesseractKeys, nk) {
		t.Fatal("a chain never submitted has its key among the follower's")
	}

	// TesseraCT grows; the follower moves on from its verified state.
	if _, err := tt.lc.AddChain(ctx, asn1Chain(never.Chain)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tl.WaitSize(ctx, corpusLen+1); err != nil {
		t.Fatal(err)
	}
	keys := syncKeys(ctx, t, ft)
	if ft.State().Size != corpusLen+1 || !keysHave(keys, nk) || !bytes.Equal(keys[:len(tesseractKeys)], tesseractKeys) {
		t.Fatalf("after TesseraCT grew: state of %d entries, new key present %v, old keys kept %v",
			ft.State().Size, keysHave(keys, nk), bytes.Equal(keys[:len(tesseractKeys)], tesseractKeys))
	}

	// Another log's key: TesseraCT's checkpoint is refused, nothing kept.
	dir := t.TempDir()
	f, err := ctfollow.Open(ctx, ctfollow.Config{Kind: ctfollow.KindStatic, URL: tl.MonitoringURL, Key: pl.log.VerifierKey(), Origin: pkieOrigin,
		Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		defer f.Close()
		_, err = f.Sync(ctx, nil)
		if st := f.State(); st.Size != 0 || len(st.Checkpoint) != 0 {
			t.Errorf("a refused checkpoint left state: %d entries", st.Size)
		}
	}
	var ce *ctfollow.CheckpointError
	if !errors.As(err, &ce) {
		t.Fatalf("following TesseraCT with pkie's key: %v, want a CheckpointError", err)
	}
}
