package store

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/pgtest"
)

func fp(s string) ([32]byte, [20]byte) { return sha256.Sum256([]byte(s)), sha1.Sum([]byte(s)) }

// conformance runs the same behaviour checks against any History.
func conformance(t *testing.T, open func() History) {
	ctx := context.Background()
	h := open()
	k := Key{Host: "example.test", Port: 443}
	other := Key{Host: "example.test", Port: 443, SNI: "other.test"}
	t0 := time.Unix(1700000000, 0)
	a256, a1 := fp("cert A")
	b256, b1 := fp("cert B")

	steps := []struct {
		key  Key
		s256 [32]byte
		s1   [20]byte
		at   time.Time
	}{
		{k, a256, a1, t0},
		{k, a256, a1, t0.Add(time.Hour)},
		{k, b256, b1, t0.Add(2 * time.Hour)},
		{k, a256, a1, t0.Add(-time.Hour)}, // an old observation arriving late only widens the range
		{other, b256, b1, t0},
	}
	for _, s := range steps {
		if err := h.Observe(ctx, s.key, s.s256, s.s1, s.at); err != nil {
			t.Fatal(err)
		}
	}
	check := func(h History) {
		t.Helper()
		rs, err := h.Lookup(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 {
			t.Fatalf("got %d records, want 2: %+v", len(rs), rs)
		}
		if rs[0].SHA256 != a256 || rs[0].SHA1 != a1 || !rs[0].First.Equal(t0.Add(-time.Hour)) || !rs[0].Last.Equal(t0.Add(time.Hour)) {
			t.Errorf("record A = %+v", rs[0])
		}
		if cur, _ := Current(rs); cur.SHA256 != b256 {
			t.Errorf("current = %x, want B", cur.SHA256[:4])
		}
		rs, err = h.Lookup(ctx, other)
		if err != nil || len(rs) != 1 {
			t.Errorf("SNI-separated key: %d records, err %v", len(rs), err)
		}
		rs, err = h.Lookup(ctx, Key{Host: "missing.test", Port: 443})
		if err != nil || len(rs) != 0 {
			t.Errorf("missing key: %d records, err %v", len(rs), err)
		}
	}
	check(h)
	// Concurrent writers to one key must not lose or duplicate.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := h.Observe(ctx, k, b256, b1, t0.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	check(open()) // reopened: everything committed is there
}

func TestSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "history.db")
	conformance(t, func() History {
		h, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		return h
	})
}

func TestPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	var hs []History
	t.Cleanup(func() {
		for _, h := range hs {
			h.Close()
		}
	})
	conformance(t, func() History {
		h, err := Open(context.Background(), srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		return h
	})
	// A crash of the database server loses nothing committed.
	srv.Kill()
	h, err := Open(context.Background(), srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rs, err := h.Lookup(context.Background(), Key{Host: "example.test", Port: 443})
	if err != nil || len(rs) != 2 {
		t.Fatalf("after kill -9: %d records, err %v", len(rs), err)
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct{ dsn string }{
		{""},
		{"mysql://x"},
	}
	for _, tc := range tests {
		if _, err := Open(context.Background(), tc.dsn); err == nil {
			t.Errorf("Open(%q) succeeded", tc.dsn)
		}
	}
}
