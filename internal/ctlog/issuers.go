package ctlog

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/pkie/pkie/internal/atomicfile"
)

// issuerStore keeps the issuer certificates data tiles name by SHA-256
// fingerprint (static-ct-api's /issuer/<fingerprint>). Writes are
// idempotent: an issuer, once stored, never changes.
type issuerStore interface {
	put(ctx context.Context, fp [32]byte, der []byte) error
	// get returns an error wrapping fs.ErrNotExist for an unknown issuer.
	get(ctx context.Context, fp [32]byte) ([]byte, error)
}

// issuerCache remembers which issuers are stored, so the write path
// stores each once per process, and the few it read last.
type issuerCache struct {
	issuerStore
	mu     sync.Mutex
	stored map[[32]byte][]byte
}

func newIssuerCache(s issuerStore) *issuerCache {
	return &issuerCache{issuerStore: s, stored: map[[32]byte][]byte{}}
}

// maxCachedIssuers bounds the cache: real logs see a few thousand
// intermediates; past this the cache only stops growing.
const maxCachedIssuers = 1 << 16

func (c *issuerCache) putAll(ctx context.Context, ders [][]byte) error {
	for _, der := range ders {
		fp := sha256.Sum256(der)
		c.mu.Lock()
		_, ok := c.stored[fp]
		c.mu.Unlock()
		if ok {
			continue
		}
		if err := c.put(ctx, fp, der); err != nil {
			return err
		}
		c.remember(fp, der)
	}
	return nil
}

func (c *issuerCache) remember(fp [32]byte, der []byte) {
	c.mu.Lock()
	if len(c.stored) < maxCachedIssuers {
		c.stored[fp] = der
	}
	c.mu.Unlock()
}

func (c *issuerCache) lookup(ctx context.Context, fp [32]byte) ([]byte, error) {
	c.mu.Lock()
	der, ok := c.stored[fp]
	c.mu.Unlock()
	if ok {
		return der, nil
	}
	der, err := c.get(ctx, fp)
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(der) != fp {
		return nil, fmt.Errorf("ctlog: stored issuer %x does not hash to its name", fp[:8])
	}
	c.remember(fp, der)
	return der, nil
}

// fileIssuers stores issuers as files dir/<hex fingerprint>.
type fileIssuers struct{ dir string }

func (f fileIssuers) path(fp [32]byte) string { return filepath.Join(f.dir, hex.EncodeToString(fp[:])) }

func (f fileIssuers) put(_ context.Context, fp [32]byte, der []byte) error {
	if _, err := os.Stat(f.path(fp)); err == nil {
		return nil
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("ctlog: %w", err)
	}
	err := atomicfile.CreateExclusive(f.path(fp), der, 0o644)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("ctlog: storing an issuer: %w", err)
	}
	return nil
}

func (f fileIssuers) get(_ context.Context, fp [32]byte) ([]byte, error) {
	b, err := os.ReadFile(f.path(fp))
	if err != nil {
		return nil, fmt.Errorf("ctlog: issuer %x: %w", fp[:8], err)
	}
	return b, nil
}

// sqlIssuers stores issuers in a table of the MySQL database.
type sqlIssuers struct{ db *sql.DB }

const issuersSchema = "CREATE TABLE IF NOT EXISTS `PkieIssuers` (`id` BINARY(32) NOT NULL, `der` MEDIUMBLOB NOT NULL, PRIMARY KEY (`id`))"

func (s sqlIssuers) put(ctx context.Context, fp [32]byte, der []byte) error {
	if _, err := s.db.ExecContext(ctx, "INSERT IGNORE INTO `PkieIssuers` (`id`, `der`) VALUES (?, ?)", fp[:], der); err != nil {
		return fmt.Errorf("ctlog: storing an issuer: %w", err)
	}
	return nil
}

func (s sqlIssuers) get(ctx context.Context, fp [32]byte) ([]byte, error) {
	var der []byte
	err := s.db.QueryRowContext(ctx, "SELECT `der` FROM `PkieIssuers` WHERE `id` = ?", fp[:]).Scan(&der)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ctlog: issuer %x: %w", fp[:8], fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("ctlog: issuer %x: %w", fp[:8], err)
	}
	return der, nil
}
