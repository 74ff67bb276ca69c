package consensus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the embedded SQLite driver
)

// Cache is the client's local record of certificates it accepted: a
// (host, port, fingerprint) accepted at some time. It stores only what a
// trusted verdict accepted; a hit younger than the caller's maximum age
// answers without asking notaries, and a different certificate for the same
// host is simply a miss, so a changed certificate always goes back to the
// notaries. It is one SQLite file in WAL mode, shared safely by concurrent
// processes.
type Cache struct {
	db     *sql.DB
	bySHA1 *sql.Stmt
	by256  *sql.Stmt
	put    *sql.Stmt
}

// DefaultCachePath returns os.UserCacheDir()/pkie/cache.db.
func DefaultCachePath() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache directory: %w", err)
	}
	return filepath.Join(d, "pkie", "cache.db"), nil
}

const cacheSchema = `
CREATE TABLE IF NOT EXISTS accepted (
	host     TEXT    NOT NULL,
	port     INTEGER NOT NULL,
	sha1     BLOB    NOT NULL,
	sha256   BLOB,
	accepted INTEGER NOT NULL, -- unix nanoseconds
	policy   TEXT    NOT NULL,
	PRIMARY KEY (host, port, sha1)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS accepted_sha256 ON accepted (host, port, sha256);
`

// OpenCache opens (creating if needed) the cache at path. The directory is
// created 0700 and the file 0600: the cache reveals which sites its user
// visits.
func OpenCache(ctx context.Context, path string) (*Cache, error) {
	if path == "" {
		return nil, errors.New("cache path is empty")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("cache directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cache file: %w", err)
	}
	f.Close()
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", path, err)
	}
	c := &Cache{db: db}
	if err := c.init(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("cache %s: %w", path, err)
	}
	return c, nil
}

func (c *Cache) init(ctx context.Context) error {
	if _, err := c.db.ExecContext(ctx, cacheSchema); err != nil {
		if strings.Contains(err.Error(), "not a database") {
			return fmt.Errorf("file is not a pkie cache (delete it or pass another --cache): %w", err)
		}
		return err
	}
	var err error
	if c.bySHA1, err = c.db.PrepareContext(ctx, `SELECT accepted, policy FROM accepted WHERE host = ? AND port = ? AND sha1 = ?`); err != nil {
		return err
	}
	if c.by256, err = c.db.PrepareContext(ctx, `SELECT accepted, policy FROM accepted WHERE host = ? AND port = ? AND sha256 = ?`); err != nil {
		return err
	}
	c.put, err = c.db.PrepareContext(ctx, `INSERT INTO accepted (host, port, sha1, sha256, accepted, policy) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (host, port, sha1) DO UPDATE SET
			sha256 = COALESCE(excluded.sha256, accepted.sha256),
			accepted = excluded.accepted, policy = excluded.policy`)
	return err
}

// Close closes the database.
func (c *Cache) Close() error { return c.db.Close() }

// Key names a certificate at a target. SHA256 may be nil when the caller
// knows only the SHA-1 (Convergence's converge(host, port, sha1)); lookups
// use the SHA-256 when it is known.
type Key struct {
	Host   string
	Port   int
	SHA1   [20]byte
	SHA256 *[32]byte
}

func (k Key) host() string { return strings.ToLower(k.Host) }

// Accepted is a cached acceptance.
type Accepted struct {
	At     time.Time
	Policy string // the policy it was accepted under
}

// Lookup returns when and under which policy k was accepted, and whether it
// is in the cache at all.
func (c *Cache) Lookup(ctx context.Context, k Key) (Accepted, bool, error) {
	var row *sql.Row
	if k.SHA256 != nil {
		row = c.by256.QueryRowContext(ctx, k.host(), k.Port, k.SHA256[:])
	} else {
		row = c.bySHA1.QueryRowContext(ctx, k.host(), k.Port, k.SHA1[:])
	}
	var ns int64
	var policy string
	switch err := row.Scan(&ns, &policy); {
	case errors.Is(err, sql.ErrNoRows):
		return Accepted{}, false, nil
	case err != nil:
		return Accepted{}, false, fmt.Errorf("cache lookup: %w", err)
	}
	return Accepted{At: time.Unix(0, ns), Policy: policy}, true, nil
}

// Store records that k was accepted at t under policy.
func (c *Cache) Store(ctx context.Context, k Key, t time.Time, policy string) error {
	var s256 any
	if k.SHA256 != nil {
		s256 = k.SHA256[:]
	}
	if _, err := c.put.ExecContext(ctx, k.host(), k.Port, k.SHA1[:], s256, t.UnixNano(), policy); err != nil {
		return fmt.Errorf("cache store: %w", err)
	}
	return nil
}
