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

// sqliteTable is the history table's definition; %s is its name, so that
// the migration can build the new table beside the old one.
const sqliteTable = `
CREATE TABLE IF NOT EXISTS %s (
	host   TEXT    NOT NULL,
	port   INTEGER NOT NULL,
	sni    TEXT    NOT NULL,
	ip     TEXT    NOT NULL DEFAULT '', -- pinned address; '' for the name's own observations
	sha256 BLOB    NOT NULL,
	sha1   BLOB    NOT NULL,
	first  INTEGER NOT NULL, -- unix nanoseconds
	last   INTEGER NOT NULL,
	PRIMARY KEY (host, port, sni, ip, sha256)
) WITHOUT ROWID;
`

type sqliteStore struct {
	db      *sql.DB // readers
	w       *sql.DB // the one writer
	lookup  *sql.Stmt
	observe *sql.Stmt
	prune   *sql.Stmt
}

// Statements are prepared once: parsing SQL costs more than running these.
const (
	sqliteLookup  = `SELECT sha256, sha1, first, last FROM observations WHERE host = ? AND port = ? AND sni = ? AND ip = ? ORDER BY last, first`
	sqliteObserve = `INSERT INTO observations (host, port, sni, ip, sha256, sha1, first, last) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (host, port, sni, ip, sha256) DO UPDATE SET
			first = min(first, excluded.first), last = max(last, excluded.last)`
	sqlitePrune = `DELETE FROM observations WHERE host = ?1 AND port = ?2 AND sni = ?3 AND ip = ?4 AND sha256 NOT IN (
		SELECT sha256 FROM observations WHERE host = ?1 AND port = ?2 AND sni = ?3 AND ip = ?4
		ORDER BY last DESC, first DESC LIMIT ?5)`
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
	if err := migrateSQLite(ctx, w); err != nil {
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
	if err == nil {
		st.prune, err = w.PrepareContext(ctx, sqlitePrune)
	}
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("store: preparing statements: %w", err)
	}
	return st, nil
}

func (s *sqliteStore) Lookup(ctx context.Context, k Key) ([]Record, error) {
	rows, err := s.lookup.QueryContext(ctx, k.Host, k.Port, k.SNI, k.ipColumn())
	if err != nil {
		return nil, fmt.Errorf("store: lookup %s:%d: %w", k.Host, k.Port, err)
	}
	defer rows.Close()
	return scanRecords(rows, k)
}

func (s *sqliteStore) Observe(ctx context.Context, k Key, sha256 [32]byte, sha1 [20]byte, t time.Time, keep int) error {
	ns := t.UnixNano()
	ip := k.ipColumn()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: recording %s:%d: %w", k.Host, k.Port, err)
	}
	defer tx.Rollback()
	if _, err := tx.StmtContext(ctx, s.observe).ExecContext(ctx, k.Host, k.Port, k.SNI, ip, sha256[:], sha1[:], ns, ns); err != nil {
		return fmt.Errorf("store: recording %s:%d: %w", k.Host, k.Port, err)
	}
	if keep > 0 {
		if _, err := tx.StmtContext(ctx, s.prune).ExecContext(ctx, k.Host, k.Port, k.SNI, ip, keep); err != nil {
			return fmt.Errorf("store: pruning %s:%d: %w", k.Host, k.Port, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: recording %s:%d: %w", k.Host, k.Port, err)
	}
	return nil
}

func (s *sqliteStore) Empty(ctx context.Context) (bool, error) {
	var found bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM observations)`).Scan(&found); err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	return !found, nil
}

// migrateSQLite creates the history table, or brings one written by an
// earlier version up to date: histories from before pinned addresses were
// keyed apart gain the ip column, every existing row becoming a name
// observation (ip empty). The column is part of the primary key, which SQLite
// cannot alter in place, so the table is copied in one transaction.
func migrateSQLite(ctx context.Context, w *sql.DB) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var tables, ipCols int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'observations'`).Scan(&tables); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('observations') WHERE name = 'ip'`).Scan(&ipCols); err != nil {
		return err
	}
	switch {
	case tables == 0:
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(sqliteTable, "observations")); err != nil {
			return err
		}
	case ipCols == 0:
		for _, q := range []string{
			fmt.Sprintf(sqliteTable, "observations_v2"),
			`INSERT INTO observations_v2 (host, port, sni, ip, sha256, sha1, first, last)
				SELECT host, port, sni, '', sha256, sha1, first, last FROM observations`,
			`DROP TABLE observations`,
			`ALTER TABLE observations_v2 RENAME TO observations`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("migrating to per-address history: %w", err)
			}
		}
	}
	return tx.Commit()
}

func (s *sqliteStore) Close() error {
	for _, st := range []*sql.Stmt{s.lookup, s.observe, s.prune} {
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
