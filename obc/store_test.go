package obc

import (
	"context"
	"path/filepath"
	"testing"
)

func mustOrigin(t testing.TB, s string) Origin {
	t.Helper()
	o, err := ParseOrigin(s)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func openStore(t testing.TB, path string, opts StoreOptions) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStoreSurvivesRestart: a key made before Close is the one returned
// after reopening, and a new visit is not "created".
func TestStoreSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	for _, alg := range Algs() {
		t.Run(string(alg), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "obc.db")
			o := mustOrigin(t, "https://a.example.com")
			s, err := Open(ctx, path, StoreOptions{Alg: alg})
			if err != nil {
				t.Fatal(err)
			}
			r1, err := s.Get(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if !r1.Created {
				t.Fatal("first visit: Created = false")
			}
			if r1.Alg != alg || r1.Scope != "https://a.example.com:443" {
				t.Fatalf("first visit: alg %s scope %s", r1.Alg, r1.Scope)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2 := openStore(t, path, StoreOptions{Alg: ECDSAP256})
			r2, err := s2.Get(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if r2.Created {
				t.Error("after restart: Created = true, want the stored key")
			}
			if r2.Identity != r1.Identity || r2.Alg != alg {
				t.Errorf("after restart: identity %s alg %s, want %s %s", r2.Identity, r2.Alg, r1.Identity, alg)
			}
		})
	}
}
