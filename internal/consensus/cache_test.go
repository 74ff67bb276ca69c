package consensus

import (
	"context"
	"crypto/x509"
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
	k := Key{Host: "Bank.Test", Port: 443, SHA1: [20]byte{9, 9}, SHA256: &s256, Config: "A"}
	if _, ok, err := c.Lookup(ctx, k); ok || err != nil {
		t.Fatalf("empty cache Lookup = %v, %v", ok, err)
	}
	at := time.Unix(1700000000, 123)
	if err := c.Store(ctx, k, at); err != nil {
		t.Fatal(err)
	}
	if err := c.Store(ctx, Key{Host: "bank.test", Port: 443, SHA1: k.SHA1}, at); err == nil {
		t.Fatal("Store without a configuration succeeded")
	}
	tests := []struct {
		name string
		key  Key
		hit  bool
	}{
		{"same key", k, true},
		{"host case folded", Key{Host: "bank.test", Port: 443, SHA1: k.SHA1, SHA256: &s256, Config: "A"}, true},
		{"by SHA-1 only", Key{Host: "bank.test", Port: 443, SHA1: k.SHA1, Config: "A"}, true},
		{"other configuration", Key{Host: "bank.test", Port: 443, SHA1: k.SHA1, SHA256: &s256, Config: "B"}, false},
		{"other configuration, by SHA-1", Key{Host: "bank.test", Port: 443, SHA1: k.SHA1, Config: "B"}, false},
		{"other port", Key{Host: "bank.test", Port: 8443, SHA1: k.SHA1, SHA256: &s256, Config: "A"}, false},
		{"other host", Key{Host: "evil.test", Port: 443, SHA1: k.SHA1, SHA256: &s256, Config: "A"}, false},
		{"changed certificate (SHA-256)", Key{Host: "bank.test", Port: 443, SHA1: k.SHA1, SHA256: &[32]byte{4}, Config: "A"}, false},
		{"changed certificate (SHA-1)", Key{Host: "bank.test", Port: 443, SHA1: [20]byte{8}, Config: "A"}, false},
	}
	for _, tt := range tests {
		got, ok, err := c.Lookup(ctx, tt.key)
		if err != nil || ok != tt.hit || (ok && !got.At.Equal(at)) {
			t.Errorf("%s: Lookup = %v, %v, %v; want hit=%v at %v", tt.name, got, ok, err, tt.hit, at)
		}
	}

	// Re-storing by SHA-1 alone keeps the SHA-256 and moves the time.
	later := at.Add(time.Hour)
	if err := c.Store(ctx, Key{Host: "bank.test", Port: 443, SHA1: k.SHA1, Config: "A"}, later); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := c.Lookup(ctx, k); !ok || !got.At.Equal(later) {
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

// TestCacheFile: what another process appended is read at open; a line
// cut short or garbled is skipped, never an entry; a file of another
// format (the SQLite cache of earlier versions) is refused, naming it; and
// a file of many superseded lines is rewritten with the newest of each.
func TestCacheFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "verdicts.cache")
	a, err := OpenCache(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenCache(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s256 := [32]byte{5}
	k := Key{Host: "bank.test", Port: 443, SHA1: [20]byte{9}, SHA256: &s256, Config: "A"}
	at := time.Unix(1700000000, 0)
	if err := a.Store(ctx, k, at); err != nil {
		t.Fatal(err)
	}
	if err := b.Store(ctx, Key{Host: "mail.test", Port: 443, SHA1: [20]byte{8}, Config: "A"}, at); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	// A torn write, and lines that are not entries.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("garbage\n1 2 3 4 5 6\n1700000000000000000 443 0909")
	f.Close()
	c, err := OpenCache(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, kk := range []Key{k, {Host: "mail.test", Port: 443, SHA1: [20]byte{8}, Config: "A"}} {
		if got, ok, _ := c.Lookup(ctx, kk); !ok || !got.At.Equal(at) {
			t.Errorf("%s: %v %v after reopen", kk.Host, got, ok)
		}
	}
	if n := len(c.bySHA1); n != 2 {
		t.Errorf("%d entries, want 2", n)
	}
	if err := c.Store(ctx, Key{Host: "bad host", Port: 443, Config: "A"}, at); err == nil {
		t.Error("a host with a space was stored")
	}
	// Superseded lines are compacted away at the next open.
	for i := range compactAfter + 10 {
		if err := c.Store(ctx, k, at.Add(time.Duration(i))); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	c, err = OpenCache(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, ok, _ := c.Lookup(ctx, Key{Host: "bank.test", Port: 443, SHA1: [20]byte{9}, Config: "A"}); !ok || !got.At.Equal(at.Add(compactAfter+9)) {
		t.Errorf("after compaction: %v %v", got, ok)
	}
	if b, _ := os.ReadFile(path); strings.Count(string(b), "\n") != 3 {
		t.Errorf("compacted file holds %d lines, want the header and 2 entries", strings.Count(string(b), "\n"))
	}
	old := filepath.Join(dir, "cache.db")
	os.WriteFile(old, []byte("SQLite format 3\x00"+strings.Repeat("\x00", 100)), 0o600)
	if _, err := OpenCache(ctx, old); err == nil || !strings.Contains(err.Error(), "not a pkie cache") || !strings.Contains(err.Error(), old) {
		t.Errorf("an SQLite file opened as a cache: %v", err)
	}
}

// TestConfigurationKey: the key ignores the order of notaries and which
// replicas their bundles list, and changes with every notary and setting
// that decides.
func TestConfigurationKey(t *testing.T) {
	k1, k2 := rsaKeys(t)
	c1, c2 := selfSigned(t, k1, "n1.test"), selfSigned(t, k2, "n2.test")
	host := func(name string, cert *x509.Certificate) Host {
		h, err := NewHost(name, 443, 0, cert)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	n1 := &Bundle{Version: 1, Name: "n1", Hosts: []Host{host("a.n1.test", c1), host("b.n1.test", c1)}}
	n1moved := &Bundle{Version: 1, Name: "n1", Hosts: []Host{host("c.n1.test", c1)}}
	n2 := &Bundle{Version: 1, Name: "n2", Hosts: []Host{host("n2.test", c2)}}
	n2v1 := &Bundle{Version: 1, Name: "n2", Hosts: []Host{host("n2.test", c2)}}
	if err := n2v1.Hosts[0].PinV1(make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	base := Configuration{Notaries: []*Bundle{n1, n2}, Policy: Policy{Kind: Majority}, API: APIAuto, AnswerMaxAge: time.Hour}
	with := func(f func(*Configuration)) Configuration { c := base; f(&c); return c }
	same := []Configuration{
		with(func(c *Configuration) { c.Notaries = []*Bundle{n2, n1} }),
		with(func(c *Configuration) {
			r := *n1
			r.Hosts = []Host{n1.Hosts[1], n1.Hosts[0]}
			c.Notaries = []*Bundle{&r, n2}
		}),
		with(func(c *Configuration) { c.Notaries = []*Bundle{n2, n1moved} }),
	}
	for i, c := range same {
		if c.Key() != base.Key() {
			t.Errorf("equal configuration %d has another key", i)
		}
	}
	differ := map[string]Configuration{
		"notary removed":        with(func(c *Configuration) { c.Notaries = []*Bundle{n1} }),
		"notary listed twice":   with(func(c *Configuration) { c.Notaries = []*Bundle{n1, n2, n2} }),
		"notary re-keyed (v1)":  with(func(c *Configuration) { c.Notaries = []*Bundle{n1, n2v1} }),
		"policy":                with(func(c *Configuration) { c.Policy = Policy{Kind: Minority} }),
		"quorum":                with(func(c *Configuration) { c.Policy = Policy{Kind: Quorum, Quorum: 0.5} }),
		"min duration":          with(func(c *Configuration) { c.Policy.MinDuration = time.Hour }),
		"unreachable a failure": with(func(c *Configuration) { c.Policy.UnreachableIsFailure = true }),
		"api":                   with(func(c *Configuration) { c.API = APIConvergence }),
		"answer max age":        with(func(c *Configuration) { c.AnswerMaxAge = 2 * time.Hour }),
	}
	for name, c := range differ {
		if c.Key() == base.Key() {
			t.Errorf("%s: same key", name)
		}
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
	k := Key{Host: "bank.test", Port: 443, SHA1: [20]byte{1}, SHA256: &s256, Config: "A"}
	if err := c.Store(ctx, k, time.Now()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := c.Lookup(ctx, k); !ok || err != nil {
			b.Fatal("miss", err)
		}
	}
}
