package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS observations (
	host   TEXT    NOT NULL,
	port   INTEGER NOT NULL,
	sni    TEXT    NOT NULL,
	sha256 BLOB    NOT NULL,
	sha1   BLOB    NOT NULL,
	first  INTEGER NOT NULL, -- unix nanoseconds
	last   INTEGER NOT NULL,
	PRIMARY KEY (host, port, sni, sha256)
) WITHOUT ROWID;
`

type sqliteStore struct {
	db      *sql.DB // readers
	w       *sql.DB // the one writer
	lookup  *sql.Stmt
	observe *sql.Stmt
}

// Statements are prepared once: parsing SQL costs more than running these.
const (
	sqliteLookup  = `SELECT sha256, sha1, first, last FROM observations WHERE host = ? AND port = ? AND sni = ? ORDER BY last, first`
	sqliteObserve = `INSERT INTO observations (host, port, sni, sha256, sha1, first, last) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (host, port, sni, sha256) DO UPDATE SET
			first = min(first, excluded.first), last = max(last, excluded.last)`
)

// OpenSQLite opens (creating if needed) a history in the SQLite file at path.
func OpenSQLite(ctx context.Context, path string) (History, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store: creating %s: %w", dir, err)
		}
	}
	// WAL lets readers proceed during a write; synchronous=NORMAL in WAL
	// mode survives a process crash (only an OS crash can lose the last
	// commits); busy_timeout covers a second process on the same file.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	// SQLite admits one writer at a time and makes the others sleep in its
	// busy handler (milliseconds each); funnelling writes through a single
	// connection queues them in Go instead, which is much faster under
	// concurrent probes.
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	// database/sql keeps only two idle connections by default; every other
	// reader would reopen the file and re-prepare its statement per query.
	readers := 4 * runtime.GOMAXPROCS(0)
	db.SetMaxOpenConns(readers)
	db.SetMaxIdleConns(readers)
	if _, err := w.ExecContext(ctx, sqliteSchema); err != nil {
		db.Close()
		w.Close()
		return nil, fmt.Errorf("store: initialising %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		db.Close()
		w.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	st := &sqliteStore{db: db, w: w}
	if st.lookup, err = db.PrepareContext(ctx, sqliteLookup); err == nil {
		st.observe, err = w.PrepareContext(ctx, sqliteObserve)
	}
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("store: preparing statements: %w", err)
	}
	return st, nil
}

func (s *sqliteStore) Lookup(ctx context.Context, k Key) ([]Record, error) {
	rows, err := s.lookup.QueryContext(ctx, k.Host, k.Port, k.SNI)
	if err != nil {
		return nil, fmt.Errorf("store: lookup %s:%d: %w", k.Host, k.Port, err)
	}
	defer rows.Close()
	return scanRecords(rows, k)
}

func (s *sqliteStore) Observe(ctx context.Context, k Key, sha256 [32]byte, sha1 [20]byte, t time.Time) error {
	ns := t.UnixNano()
	_, err := s.observe.ExecContext(ctx, k.Host, k.Port, k.SNI, sha256[:], sha1[:], ns, ns)
	if err != nil {
		return fmt.Errorf("store: recording %s:%d: %w", k.Host, k.Port, err)
	}
	return nil
}

func (s *sqliteStore) Close() error {
	for _, st := range []*sql.Stmt{s.lookup, s.observe} {
		if st != nil {
			st.Close()
		}
	}
	err := s.db.Close()
	if werr := s.w.Close(); err == nil {
		err = werr
	}
	return err
}

// rows is what database/sql and pgx result sets have in common.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

func scanRecords(rs rows, k Key) ([]Record, error) {
	var out []Record
	for rs.Next() {
		var h256, h1 []byte
		var first, last int64
		if err := rs.Scan(&h256, &h1, &first, &last); err != nil {
			return nil, fmt.Errorf("store: lookup %s:%d: %w", k.Host, k.Port, err)
		}
		r, err := makeRecord(h256, h1, first, last)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

func makeRecord(h256, h1 []byte, first, last int64) (Record, error) {
	var r Record
	if len(h256) != 32 || len(h1) != 20 {
		return r, fmt.Errorf("store: corrupt record: fingerprint lengths %d and %d", len(h256), len(h1))
	}
	copy(r.SHA256[:], h256)
	copy(r.SHA1[:], h1)
	r.First, r.Last = time.Unix(0, first), time.Unix(0, last)
	return r, nil
}
