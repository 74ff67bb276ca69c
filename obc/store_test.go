package obc

import (
	"context"
	"crypto/x509"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// TestConcurrentFirstVisits: many goroutines on two Store handles of one
// file visit one origin at once; exactly one key is made and stored, and
// every caller gets it.
func TestConcurrentFirstVisits(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "obc.db")
	// Each handle lets one goroutine through to the database (its own
	// flight); the hook holds both handles' first generations until both
	// have started, so that both have found no key and both will insert:
	// only the database's unique scope can then keep one key.
	var arrived atomic.Int32
	bothGenerating := make(chan struct{})
	hook := func(Alg, bool) {
		if arrived.Add(1) == 2 {
			close(bothGenerating)
		}
		select {
		case <-bothGenerating:
		case <-time.After(10 * time.Second):
			// Not a timing assertion: the counts below still decide.
		}
	}
	stores := []*Store{openStore(t, path, StoreOptions{genHook: hook}), openStore(t, path, StoreOptions{genHook: hook})}
	o := mustOrigin(t, "https://race.example:8443")
	const perStore = 16
	var wg sync.WaitGroup
	results := make([]*Result, 2*perStore)
	errs := make([]error, 2*perStore)
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = stores[i%2].Get(ctx, o)
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("visit %d: %v", i, errs[i])
		}
		if r.Identity != results[0].Identity {
			t.Errorf("visit %d: identity %s, visit 0 got %s", i, r.Identity, results[0].Identity)
		}
		if r.Created {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d visits say they created the key, want exactly 1", created)
	}
	if n := arrived.Load(); n != 2 {
		t.Errorf("%d keys generated, want 2 (one per handle, one of them discarded)", n)
	}
	recs, err := stores[0].List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Identity != results[0].Identity {
		t.Errorf("List = %+v, want one record with identity %s", recs, results[0].Identity)
	}
}

// TestScopes: strict mode keys every origin apart; legacy mode shares one
// key across a registrable domain's subdomains, schemes' ports and all.
func TestScopes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		mode       Mode
		a, b       string
		same       bool
		scopeA     string
		wantScopes int
	}{
		{Strict, "https://a.example.com", "https://b.example.com", false, "https://a.example.com:443", 2},
		{Strict, "https://a.example.com", "https://a.example.com:8443", false, "https://a.example.com:443", 2},
		{Legacy, "https://a.example.com", "https://b.example.com:8443", true, "example.com", 1},
		{Legacy, "https://a.example.co.uk", "https://b.example.co.uk", true, "example.co.uk", 1},
		{Legacy, "https://a.example.com", "https://a.example.org", false, "example.com", 2},
		{Legacy, "https://x.github.io", "https://y.github.io", false, "x.github.io", 2},
	} {
		t.Run(tc.mode.String()+" "+tc.a+" "+tc.b, func(t *testing.T) {
			s := openStore(t, filepath.Join(t.TempDir(), "obc.db"), StoreOptions{Mode: tc.mode})
			ra, err := s.Get(ctx, mustOrigin(t, tc.a))
			if err != nil {
				t.Fatal(err)
			}
			rb, err := s.Get(ctx, mustOrigin(t, tc.b))
			if err != nil {
				t.Fatal(err)
			}
			if (ra.Identity == rb.Identity) != tc.same {
				t.Errorf("identities %s and %s: same = %v, want %v", ra.Identity, rb.Identity, ra.Identity == rb.Identity, tc.same)
			}
			if ra.Scope != tc.scopeA {
				t.Errorf("scope of %s = %q, want %q", tc.a, ra.Scope, tc.scopeA)
			}
			if tc.same && rb.Created {
				t.Errorf("%s: created a second key in a shared scope", tc.b)
			}
			recs, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != tc.wantScopes {
				t.Errorf("%d records, want %d", len(recs), tc.wantScopes)
			}
		})
	}
}

// TestStoreModeIsFixed: a store's mode is recorded; opening it in the
// other mode fails, UseStoredMode takes the recorded one.
func TestStoreModeIsFixed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "obc.db")
	s := openStore(t, path, StoreOptions{Mode: Legacy})
	s.Close()
	if _, err := Open(ctx, path, StoreOptions{Mode: Strict}); err == nil || !strings.Contains(err.Error(), "legacy mode") {
		t.Fatalf("reopening a legacy store as strict: err = %v, want one naming legacy mode", err)
	}
	s2 := openStore(t, path, StoreOptions{UseStoredMode: true})
	if s2.Mode() != Legacy {
		t.Errorf("UseStoredMode: mode %s, want legacy", s2.Mode())
	}
}

// TestStoreFileModes: a new store is 0600 in a 0700 directory, so are
// SQLite's side files, and a store others can read is refused, not used.
func TestStoreFileModes(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pkie")
	path := filepath.Join(dir, "obc.db")
	s := openStore(t, path, StoreOptions{})
	if _, err := s.Get(ctx, mustOrigin(t, "https://a.example")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", filepath.Base(p), got, want)
		}
	}
	s.Close()
	for _, bad := range []os.FileMode{0o644, 0o640, 0o606} {
		if err := os.Chmod(path, bad); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, path, StoreOptions{})
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: Open err = %v, want a refusal naming chmod 600", bad, err)
		}
	}
}

// TestForget: Forget deletes and returns the record; forgetting again is
// ErrNotFound; the next visit makes a new key.
func TestForget(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, filepath.Join(t.TempDir(), "obc.db"), StoreOptions{})
	o := mustOrigin(t, "https://a.example")
	r1, err := s.Get(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Forget(ctx, r1.Scope)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Scope != r1.Scope || rec.Identity != r1.Identity || rec.Alg != ECDSAP256 {
		t.Errorf("Forget returned %+v, want scope %s identity %s", rec, r1.Scope, r1.Identity)
	}
	if _, err := s.Forget(ctx, r1.Scope); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Forget: err = %v, want ErrNotFound", err)
	}
	r2, err := s.Get(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !r2.Created || r2.Identity == r1.Identity {
		t.Errorf("after Forget: created %v identity %s, want a new key (old %s)", r2.Created, r2.Identity, r1.Identity)
	}
}

// TestForgetFromOtherHandle: a key forgotten through another handle (pkie
// obc forget while a client runs) is not handed out again once the
// cached copy is rechecked.
func TestForgetFromOtherHandle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "obc.db")
	a, b := openStore(t, path, StoreOptions{}), openStore(t, path, StoreOptions{})
	o := mustOrigin(t, "https://a.example")
	r1, err := a.Get(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Forget(ctx, r1.Scope); err != nil {
		t.Fatal(err)
	}
	// Age a's cache entry past its recheck interval.
	a.mu.Lock()
	a.cache[r1.Scope].written = time.Now().Add(-2 * lastUsedEvery)
	a.mu.Unlock()
	r2, err := a.Get(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Identity == r1.Identity || !r2.Created {
		t.Errorf("after Forget by another handle: identity %s created %v, want a new key", r2.Identity, r2.Created)
	}
}

// TestSelfSignedCertificate: the certificate carries nothing but the key:
// subject and issuer CN=obc, no names, a random serial, valid from its
// creation with no end, signed by its own key, for client auth.
func TestSelfSignedCertificate(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, filepath.Join(t.TempDir(), "obc.db"), StoreOptions{})
	before := time.Now().Add(-time.Second)
	var serials []string
	for _, origin := range []string{"https://a.example", "https://b.example"} {
		r, err := s.Get(ctx, mustOrigin(t, origin))
		if err != nil {
			t.Fatal(err)
		}
		c := r.Cert.Leaf
		if got := c.Subject.String(); got != "CN=obc" {
			t.Errorf("subject %q, want CN=obc", got)
		}
		if got := c.Issuer.String(); got != "CN=obc" {
			t.Errorf("issuer %q, want CN=obc", got)
		}
		if len(c.DNSNames)+len(c.IPAddresses)+len(c.EmailAddresses)+len(c.URIs) != 0 {
			t.Errorf("certificate names %v %v %v %v, want none", c.DNSNames, c.IPAddresses, c.EmailAddresses, c.URIs)
		}
		if err := c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature); err != nil {
			t.Errorf("not self-signed: %v", err)
		}
		if c.NotBefore.Before(before.Truncate(time.Second)) || c.NotBefore.After(time.Now()) {
			t.Errorf("NotBefore %s, want about now", c.NotBefore)
		}
		if !c.NotAfter.Equal(notAfter) {
			t.Errorf("NotAfter %s, want %s", c.NotAfter, notAfter)
		}
		if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
			t.Errorf("ExtKeyUsage %v, want client auth", c.ExtKeyUsage)
		}
		if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() < 64 {
			t.Errorf("serial %s: want a large random positive number", c.SerialNumber)
		}
		serials = append(serials, c.SerialNumber.String())
	}
	if serials[0] == serials[1] {
		t.Errorf("two certificates share serial %s", serials[0])
	}
}

// TestCorruptedRecord: a damaged record is an error naming its scope, is
// never replaced by a new key, shows in List with its problem, and can be
// forgotten.
func TestCorruptedRecord(t *testing.T) {
	ctx := context.Background()
	other, err := ECDSAP256.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	otherCert, err := selfSign(other, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, set string
		arg       any
		want      string
	}{
		{"key bytes", "key = ?", []byte("not a key"), "key:"},
		{"cert bytes", "cert = ?", []byte{0x30, 0x03, 0x02, 0x01, 0x01}, "certificate:"},
		{"another key's cert", "cert = ?", otherCert, "does not carry the record's key"},
		{"alg", "alg = ?", "ed25519", "record says ed25519"},
		{"unknown alg", "alg = ?", "sect163k1", "sect163k1"},
		{"times", "created = ?", int64(0), "times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "obc.db")
			o := mustOrigin(t, "https://damaged.example")
			s := openStore(t, path, StoreOptions{})
			r, err := s.Get(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			raw := openRaw(t, path)
			if _, err := raw.Exec("UPDATE keys SET "+tc.set+" WHERE scope = ?", tc.arg, r.Scope); err != nil {
				t.Fatal(err)
			}
			var before []byte
			if err := raw.QueryRow("SELECT key || cert || alg FROM keys WHERE scope = ?", r.Scope).Scan(&before); err != nil {
				t.Fatal(err)
			}

			s = openStore(t, path, StoreOptions{})
			_, err = s.Get(ctx, o)
			if err == nil || !strings.Contains(err.Error(), r.Scope) || !strings.Contains(err.Error(), "corrupted") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Get on a damaged record: err = %v, want one naming %s, corrupted and %q", err, r.Scope, tc.want)
			}
			var after []byte
			if err := raw.QueryRow("SELECT key || cert || alg FROM keys WHERE scope = ?", r.Scope).Scan(&after); err != nil {
				t.Fatal(err)
			}
			if string(after) != string(before) {
				t.Error("the damaged record was replaced")
			}
			recs, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 || !strings.Contains(recs[0].Problem, tc.want) || recs[0].Identity != (Identity{}) {
				t.Errorf("List = %+v, want the record with its problem and no identity", recs)
			}
			if _, err := s.Forget(ctx, r.Scope); err != nil {
				t.Fatal(err)
			}
			r2, err := s.Get(ctx, o)
			if err != nil || !r2.Created {
				t.Errorf("after forgetting the damaged record: %v, created %v; want a new key", err, r2 != nil && r2.Created)
			}
		})
	}
}

// openRaw opens the store's file directly, as a damaged disk or another
// program would change it.
func openRaw(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestStoreOddPaths: the file is the one named, whatever characters its
// path holds ('#' and '?' end a URI's path; '%' starts an escape), and
// two such stores stay apart.
func TestStoreOddPaths(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	seen := map[Identity]string{}
	for _, dir := range []string{"a#1", "a#2", "q?x=1", "pct%41", "sp ace"} {
		path := filepath.Join(root, dir, "obc.db")
		s := openStore(t, path, StoreOptions{})
		r, err := s.Get(ctx, mustOrigin(t, "https://same.example"))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Created {
			t.Errorf("%s: the first visit found a key: another store's file was opened", dir)
		}
		if other, ok := seen[r.Identity]; ok {
			t.Errorf("%s and %s share a key", dir, other)
		}
		seen[r.Identity] = dir
		s.Close()
		if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
			t.Errorf("%s: the store is not at %s: %v", dir, path, err)
		}
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 5 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("files beside the stores: %v", names)
	}
}
