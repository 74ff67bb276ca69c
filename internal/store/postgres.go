package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

const postgresSchema = `
CREATE TABLE IF NOT EXISTS pkie_observations (
	host   TEXT    NOT NULL,
	port   INTEGER NOT NULL,
	sni    TEXT    NOT NULL,
	sha256 BYTEA   NOT NULL,
	sha1   BYTEA   NOT NULL,
	first  BIGINT  NOT NULL,
	last   BIGINT  NOT NULL,
	PRIMARY KEY (host, port, sni, sha256)
)`

type postgresStore struct {
	pool *pgxpool.Pool
}

// OpenPostgres connects to the PostgreSQL database at dsn and creates the
// history table if it is missing. Several notaries may share one database.
func OpenPostgres(ctx context.Context, dsn string) (History, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	// Two replicas starting at once both try to create the table; the
	// advisory lock makes that a non-event.
	if _, err := pool.Exec(ctx, `SELECT pg_advisory_lock(7342001); `+postgresSchema+`; SELECT pg_advisory_unlock(7342001)`); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: postgres: creating schema: %w", err)
	}
	return &postgresStore{pool: pool}, nil
}

func (s *postgresStore) Lookup(ctx context.Context, k Key) ([]Record, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT sha256, sha1, first, last FROM pkie_observations WHERE host = $1 AND port = $2 AND sni = $3 ORDER BY last, first`,
		k.Host, k.Port, k.SNI)
	if err != nil {
		return nil, fmt.Errorf("store: lookup %s:%d: %w", k.Host, k.Port, err)
	}
	defer rows.Close()
	return scanRecords(rows, k)
}

func (s *postgresStore) Observe(ctx context.Context, k Key, sha256 [32]byte, sha1 [20]byte, t time.Time) error {
	ns := t.UnixNano()
	_, err := s.pool.Exec(ctx, `
		INSERT INTO pkie_observations (host, port, sni, sha256, sha1, first, last) VALUES ($1, $2, $3, $4, $5, $6, $6)
		ON CONFLICT (host, port, sni, sha256) DO UPDATE SET
			first = LEAST(pkie_observations.first, excluded.first),
			last = GREATEST(pkie_observations.last, excluded.last)`,
		k.Host, k.Port, k.SNI, sha256[:], sha1[:], ns)
	if err != nil {
		return fmt.Errorf("store: recording %s:%d: %w", k.Host, k.Port, err)
	}
	return nil
}

func (s *postgresStore) Close() error { s.pool.Close(); return nil }
