package store

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pkie/pkie/internal/pgtest"
)

func fp(s string) ([32]byte, [20]byte) { return sha256.Sum256([]byte(s)), sha1.Sum([]byte(s)) }

// conformance runs the same behaviour checks against any History.
func conformance(t *testing.T, open func() History) {
	ctx := context.Background()
	h := open()
	k := Key{Host: "example.test", Port: 443}
	other := Key{Host: "example.test", Port: 443, SNI: "other.test"}
	pinned := Key{Host: "example.test", Port: 443, IP: netip.MustParseAddr("192.0.2.7")}
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
		{pinned, b256, b1, t0.Add(3 * time.Hour)}, // seen at a pinned address: not the name's
	}
	for _, s := range steps {
		if err := h.Observe(ctx, s.key, s.s256, s.s1, s.at, 0); err != nil {
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
		rs, err = h.Lookup(ctx, pinned)
		if err != nil || len(rs) != 1 || rs[0].SHA256 != b256 {
			t.Errorf("pinned-address key: %+v, err %v", rs, err)
		}
		// An IPv4-mapped IPv6 form names the same address.
		mapped := pinned
		mapped.IP = netip.AddrFrom16(pinned.IP.As16())
		if rs, err := h.Lookup(ctx, mapped); err != nil || len(rs) != 1 {
			t.Errorf("pinned-address key, mapped form: %d records, err %v", len(rs), err)
		}
		rs, err = h.Lookup(ctx, Key{Host: "missing.test", Port: 443})
		if err != nil || len(rs) != 0 {
			t.Errorf("missing key: %d records, err %v", len(rs), err)
		}
	}
	check(h)
	if empty, err := h.Empty(ctx); err != nil || empty {
		t.Errorf("Empty() = %v, %v on a history with records", empty, err)
	}
	// Concurrent writers to one key must not lose or duplicate.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := h.Observe(ctx, k, b256, b1, t0.Add(time.Duration(i)*time.Minute), 0); err != nil {
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

// bound checks that Observe keeps at most keep records per key, the most
// recently seen, however many distinct certificates a target shows, and
// leaves other keys alone; then that Empty tells a fresh history.
func bound(t *testing.T, h History) {
	ctx := context.Background()
	if empty, err := h.Empty(ctx); err != nil || !empty {
		t.Fatalf("Empty() = %v, %v on a fresh history", empty, err)
	}
	const keep = 8
	k := Key{Host: "rotating.test", Port: 443, IP: netip.MustParseAddr("192.0.2.1")}
	name := Key{Host: "rotating.test", Port: 443}
	t0 := time.Unix(1700000000, 0)
	s256, s1 := fp("the name's own")
	if err := h.Observe(ctx, name, s256, s1, t0, keep); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < 100; i += 4 {
				a, b := fp(fmt.Sprint("cert ", i))
				if err := h.Observe(ctx, k, a, b, t0.Add(time.Duration(i)*time.Second), keep); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	rs, err := h.Lookup(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != keep {
		t.Fatalf("%d records after 100 distinct certificates, want %d", len(rs), keep)
	}
	for i, r := range rs {
		want, _ := fp(fmt.Sprint("cert ", 100-keep+i))
		if r.SHA256 != want {
			t.Errorf("record %d is not the %dth most recent", i, keep-i)
		}
	}
	if rs, err := h.Lookup(ctx, name); err != nil || len(rs) != 1 {
		t.Errorf("the name's key: %d records, err %v", len(rs), err)
	}
}

func TestSQLiteBound(t *testing.T) {
	h, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	bound(t, h)
}

func TestPostgresBound(t *testing.T) {
	srv := pgtest.Start(t)
	h, err := Open(context.Background(), srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	bound(t, h)
}

// oldRows are observations written by a version that keyed history by
// name only.
var oldRows = []struct {
	host string
	sni  string
	cert string
}{{"example.test", "", "cert A"}, {"example.test", "other.test", "cert B"}}

// checkMigrated checks that a history opened on a table from before
// pinned addresses were keyed apart keeps every row as a name observation,
// and records pinned observations apart.
func checkMigrated(t *testing.T, h History) {
	t.Helper()
	ctx := context.Background()
	for _, r := range oldRows {
		k := Key{Host: r.host, Port: 443, SNI: r.sni}
		rs, err := h.Lookup(ctx, k)
		want, _ := fp(r.cert)
		if err != nil || len(rs) != 1 || rs[0].SHA256 != want {
			t.Fatalf("migrated %+v: %+v, err %v", k, rs, err)
		}
		pinned := k
		pinned.IP = netip.MustParseAddr("192.0.2.9")
		rs, err = h.Lookup(ctx, pinned)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.SHA256 == want {
				t.Fatalf("a name's migrated observation reads as the pinned address's")
			}
		}
		a, b := fp("at the pinned address")
		if err := h.Observe(ctx, pinned, a, b, time.Now(), 64); err != nil {
			t.Fatal(err)
		}
		if rs, err := h.Lookup(ctx, k); err != nil || len(rs) != 1 {
			t.Fatalf("name key after a pinned observation: %d records, err %v", len(rs), err)
		}
	}
}

func TestSQLiteMigratesNameOnlyHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE observations (
		host TEXT NOT NULL, port INTEGER NOT NULL, sni TEXT NOT NULL,
		sha256 BLOB NOT NULL, sha1 BLOB NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL,
		PRIMARY KEY (host, port, sni, sha256)) WITHOUT ROWID`); err != nil {
		t.Fatal(err)
	}
	for _, r := range oldRows {
		a, b := fp(r.cert)
		if _, err := db.Exec(`INSERT INTO observations VALUES (?, 443, ?, ?, ?, 1, 2)`, r.host, r.sni, a[:], b[:]); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for range 2 { // the second open finds the table migrated
		h, err := OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		checkMigrated(t, h)
		h.Close()
	}
}

func TestPostgresMigratesNameOnlyHistory(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE pkie_observations (
		host TEXT NOT NULL, port INTEGER NOT NULL, sni TEXT NOT NULL,
		sha256 BYTEA NOT NULL, sha1 BYTEA NOT NULL, first BIGINT NOT NULL, last BIGINT NOT NULL,
		PRIMARY KEY (host, port, sni, sha256))`); err != nil {
		t.Fatal(err)
	}
	for _, r := range oldRows {
		a, b := fp(r.cert)
		if _, err := conn.Exec(ctx, `INSERT INTO pkie_observations VALUES ($1, 443, $2, $3, $4, 1, 2)`, r.host, r.sni, a[:], b[:]); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		h, err := Open(ctx, srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		checkMigrated(t, h)
		h.Close()
	}
}
