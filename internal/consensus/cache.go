package consensus

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the embedded SQLite driver
)

// Cache is the client's local record of certificates it accepted: a
// (host, port, fingerprint) accepted at some time under one configuration
// (the notaries, their keys, the policy and the API: Configuration). It
// stores only what a trusted verdict accepted; a hit younger than the
// caller's maximum age answers without asking notaries. A different
// certificate for the same host is simply a miss, so a changed certificate
// always goes back to the notaries; so is the same certificate under
// another configuration, so removing a notary that lied also removes what
// it vouched for. It is one SQLite file in WAL mode, shared safely by
// concurrent processes.
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

// cacheSchema keys each acceptance by the configuration that produced it.
// The table of earlier versions, "accepted", recorded the policy but not
// the notaries: its entries cannot tell whether a notary since removed
// vouched for them, so they are dropped rather than migrated.
const cacheSchema = `
CREATE TABLE IF NOT EXISTS verdicts (
	host     TEXT    NOT NULL,
	port     INTEGER NOT NULL,
	config   TEXT    NOT NULL, -- Configuration.Key
	sha1     BLOB    NOT NULL,
	sha256   BLOB,
	accepted INTEGER NOT NULL, -- unix nanoseconds
	PRIMARY KEY (host, port, config, sha1)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS verdicts_sha256 ON verdicts (host, port, config, sha256);
DROP TABLE IF EXISTS accepted;
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
	if c.bySHA1, err = c.db.PrepareContext(ctx, `SELECT accepted FROM verdicts WHERE host = ? AND port = ? AND config = ? AND sha1 = ?`); err != nil {
		return err
	}
	if c.by256, err = c.db.PrepareContext(ctx, `SELECT accepted FROM verdicts WHERE host = ? AND port = ? AND config = ? AND sha256 = ?`); err != nil {
		return err
	}
	c.put, err = c.db.PrepareContext(ctx, `INSERT INTO verdicts (host, port, config, sha1, sha256, accepted) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (host, port, config, sha1) DO UPDATE SET
			sha256 = COALESCE(excluded.sha256, verdicts.sha256),
			accepted = excluded.accepted`)
	return err
}

// Close closes the database.
func (c *Cache) Close() error { return c.db.Close() }

// Key names a certificate at a target under one configuration. SHA256 may
// be nil when the caller knows only the SHA-1 (Convergence's
// converge(host, port, sha1)); lookups use the SHA-256 when it is known.
type Key struct {
	Host   string
	Port   int
	SHA1   [20]byte
	SHA256 *[32]byte
	// Config is the Configuration.Key of the configuration that accepted
	// the certificate: an entry answers only under the same one.
	Config string
}

func (k Key) host() string { return strings.ToLower(k.Host) }

// Accepted is a cached acceptance.
type Accepted struct {
	At time.Time
}

// Lookup returns when k was accepted, and whether it is in the cache at
// all.
func (c *Cache) Lookup(ctx context.Context, k Key) (Accepted, bool, error) {
	var row *sql.Row
	if k.SHA256 != nil {
		row = c.by256.QueryRowContext(ctx, k.host(), k.Port, k.Config, k.SHA256[:])
	} else {
		row = c.bySHA1.QueryRowContext(ctx, k.host(), k.Port, k.Config, k.SHA1[:])
	}
	var ns int64
	switch err := row.Scan(&ns); {
	case errors.Is(err, sql.ErrNoRows):
		return Accepted{}, false, nil
	case err != nil:
		return Accepted{}, false, fmt.Errorf("cache lookup: %w", err)
	}
	return Accepted{At: time.Unix(0, ns)}, true, nil
}

// Store records that k was accepted at t.
func (c *Cache) Store(ctx context.Context, k Key, t time.Time) error {
	if k.Config == "" {
		return errors.New("cache store: key has no configuration")
	}
	var s256 any
	if k.SHA256 != nil {
		s256 = k.SHA256[:]
	}
	if _, err := c.put.ExecContext(ctx, k.host(), k.Port, k.Config, k.SHA1[:], s256, t.UnixNano()); err != nil {
		return fmt.Errorf("cache store: %w", err)
	}
	return nil
}

// Configuration is what decides whether the notaries accept a certificate,
// and so what a cached acceptance stands for: the notaries (by the keys
// their bundles pin, which is what makes an answer theirs), the policy
// with its settings, the wire API and the maximum age of a v1 answer.
// What the Checker does beside the notaries (the sources: CA validation
// with its roots, ct, revocation, and which of them are required) is not
// part of it, because a cache hit never skips them.
type Configuration struct {
	Notaries     []*Bundle
	Policy       Policy
	API          API
	AnswerMaxAge time.Duration
}

// Key returns a digest of c that is the same for every equal configuration,
// however its notaries are ordered or their replicas listed, and differs
// when a notary is added, removed or re-keyed, or any setting changes.
func (c Configuration) Key() string {
	notaries := make([]string, len(c.Notaries))
	for i, b := range c.Notaries {
		hosts := make([]string, len(b.Hosts))
		for j := range b.Hosts {
			h := &b.Hosts[j]
			var der []byte
			if h.cert != nil {
				der = h.cert.Raw
			}
			sum := sha256.Sum256(der)
			hosts[j] = hex.EncodeToString(sum[:]) + "/" + hex.EncodeToString(h.v1)
		}
		// Replicas share the notary's keys: how many a bundle lists, and
		// where, does not change its vote.
		slices.Sort(hosts)
		notaries[i] = strings.Join(slices.Compact(hosts), ",")
	}
	// A notary listed twice votes twice: sorted, not deduplicated.
	slices.Sort(notaries)
	h := sha256.New()
	fmt.Fprintf(h, "pkie cache configuration 1\npolicy %s\nmin-duration %d\nunreachable-is-failure %t\napi %s\nanswer-max-age %d\n",
		c.Policy.String(), c.Policy.MinDuration, c.Policy.UnreachableIsFailure, c.API, c.AnswerMaxAge)
	for _, n := range notaries {
		fmt.Fprintf(h, "notary %s\n", n)
	}
	return hex.EncodeToString(h.Sum(nil))
}
