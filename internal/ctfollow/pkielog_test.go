package ctfollow_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/ctfollow"

	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/testbed"
)

// TestFollowPkieLog follows pkie's own static-ct-api log (internal/ctlog)
// three ways, which must agree byte for byte: its tiles over HTTP, its
// RFC 6962 read API over HTTP, and its Reader in the same process.
func TestFollowPkieLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := testbed.NewRootCA("ctfollow pkie log root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("ctfollow pkie log intermediate", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "log")
	if _, err := ctlog.Init(ctx, dir, "pkie.test/log", ctlog.InitOptions{Roots: root.PEM()}); err != nil {
		t.Fatal(err)
	}
	l, err := ctlog.Open(ctx, dir, ctlog.Options{BatchMaxAge: 10 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := httptest.NewServer(l.Handler(ctlog.HandlerOptions{}))
	defer srv.Close()

	var lookups [][][]byte
	add := func(chain [][]byte, precert bool) {
		t.Helper()
		if _, err := l.AddChain(ctx, chain, precert); err != nil {
			t.Fatalf("AddChain: %v", err)
		}
	}
	submit := func(n int) {
		for i := 0; i < n; i++ {
			leaf, err := inter.Issue(testbed.LeafOptions{DNSNames: []string{fmt.Sprintf("h%d.pkie.test", len(lookups))}})
			if err != nil {
				t.Fatal(err)
			}
			add(leaf.Chain, false)
			lookups = append(lookups, leaf.Chain)
		}
		pre, final := precertPair(t, inter, fmt.Sprintf("embedded%d.pkie.test", len(lookups)))
		add(pre, true)
		add(final, false) // a final certificate logged as itself too
		lookups = append(lookups, final)
	}

	r := l.Reader()
	followers := map[string]*ctfollow.Follower{}
	for _, c := range []ctfollow.Config{
		{Kind: ctfollow.KindStatic, URL: srv.URL},
		{Kind: ctfollow.KindRFC6962, URL: srv.URL},
		{Kind: ctfollow.KindStatic, Fetch: &ctfollow.Fetchers{Checkpoint: r.ReadCheckpoint, Tile: r.ReadTile, EntryBundle: r.ReadEntryBundle, Issuer: r.ReadIssuer}},
	} {
		name := c.Kind
		if c.Fetch != nil {
			name = "reader"
		}
		c.Key, c.Dir = l.VerifierKey(), t.TempDir()
		f, err := ctfollow.Open(ctx, c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer f.Close()
		followers[name] = f
	}
	for round := 0; round < 2; round++ {
		submit(4)
		var keys []byte
		for _, name := range []string{ctfollow.KindStatic, ctfollow.KindRFC6962, "reader"} {
			f := followers[name]
			st, err := f.Sync(ctx, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, err := os.ReadFile(f.KeysPath())
			if err != nil {
				t.Fatal(err)
			}
			got = got[:st.KeyCount*ctfollow.KeySize]
			if keys == nil {
				keys = got
			} else if !bytes.Equal(got, keys) {
				t.Fatalf("%s: keys differ from following the tiles over HTTP", name)
			}
			for i, chain := range lookups {
				k, err := ctwire.ChainKey(chain)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(got, k[:]) {
					t.Errorf("%s: submission %d: the key a client computes is not in the keys file", name, i)
				}
			}
		}
	}
}
