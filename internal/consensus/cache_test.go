package consensus

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCache(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "cache.db")
	c, err := OpenCache(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file mode %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir mode %v, want 0700", di.Mode().Perm())
	}

	s256 := [32]byte{1, 2, 3}
	k := Key{Host: "Bank.Test", Port: 443, SHA1: [20]byte{9, 9}, SHA256: &s256}
	if _, ok, err := c.Lookup(ctx, k); ok || err != nil {
		t.Fatalf("empty cache Lookup = %v, %v", ok, err)
	}
	at := time.Unix(1700000000, 123)
	if err := c.Store(ctx, k, at, "majority"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  Key
		hit  bool
	}{
		{"same key", k, true},
		{"host case folded", Key{Host: "bank.test", Port: 443, SHA1: k.SHA1, SHA256: &s256}, true},
		{"by SHA-1 only", Key{Host: "bank.test", Port: 443, SHA1: k.SHA1}, true},
		{"other port", Key{Host: "bank.test", Port: 8443, SHA1: k.SHA1, SHA256: &s256}, false},
		{"other host", Key{Host: "evil.test", Port: 443, SHA1: k.SHA1, SHA256: &s256}, false},
		{"changed certificate (SHA-256)", Key{Host: "bank.test", Port: 443, SHA1: k.SHA1, SHA256: &[32]byte{4}}, false},
		{"changed certificate (SHA-1)", Key{Host: "bank.test", Port: 443, SHA1: [20]byte{8}}, false},
	}
	for _, tt := range tests {
		got, ok, err := c.Lookup(ctx, tt.key)
		if err != nil || ok != tt.hit || (ok && (!got.At.Equal(at) || got.Policy != "majority")) {
			t.Errorf("%s: Lookup = %v, %v, %v; want hit=%v at %v", tt.name, got, ok, err, tt.hit, at)
		}
	}

	// Re-storing by SHA-1 alone keeps the SHA-256 and moves the time.
	later := at.Add(time.Hour)
	if err := c.Store(ctx, Key{Host: "bank.test", Port: 443, SHA1: k.SHA1}, later, "consensus"); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := c.Lookup(ctx, k); !ok || !got.At.Equal(later) || got.Policy != "consensus" {
		t.Fatalf("after re-store Lookup = %v, %v", got, ok)
	}
	c.Close()

	// Persistent across processes (here: a reopen).
	c2, err := OpenCache(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, ok, _ := c2.Lookup(ctx, k); !ok {
		t.Fatal("entry lost across reopen")
	}
}

func TestOpenCacheErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	os.WriteFile(junk, []byte(strings.Repeat("this is not sqlite ", 100)), 0o600)
	if _, err := OpenCache(ctx, junk); err == nil || !strings.Contains(err.Error(), "junk.db") {
		t.Fatalf("OpenCache(junk) error = %v, want it to name the file", err)
	}
	if _, err := OpenCache(ctx, ""); err == nil {
		t.Fatal("OpenCache(\"\") succeeded")
	}
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, nil, 0o600)
	if _, err := OpenCache(ctx, filepath.Join(blocker, "cache.db")); err == nil {
		t.Fatal("OpenCache under a regular file succeeded")
	}
}

func BenchmarkCacheLookupHit(b *testing.B) {
	ctx := context.Background()
	c, err := OpenCache(ctx, filepath.Join(b.TempDir(), "cache.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s256 := [32]byte{1}
	k := Key{Host: "bank.test", Port: 443, SHA1: [20]byte{1}, SHA256: &s256}
	if err := c.Store(ctx, k, time.Now(), "majority"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := c.Lookup(ctx, k); !ok || err != nil {
			b.Fatal("miss", err)
		}
	}
}
