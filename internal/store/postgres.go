package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const postgresSchema = `
CREATE TABLE IF NOT EXISTS pkie_observations (
	host   TEXT    NOT NULL,
	port   INTEGER NOT NULL,
	sni    TEXT    NOT NULL,
	ip     TEXT    NOT NULL DEFAULT '',
	sha256 BYTEA   NOT NULL,
	sha1   BYTEA   NOT NULL,
	first  BIGINT  NOT NULL,
	last   BIGINT  NOT NULL,
	PRIMARY KEY (host, port, sni, ip, sha256)
)`

// postgresMigrate brings a table created before pinned addresses were keyed
// apart up to date: the ip column is added as the empty string (a name observation) for
// every existing row, and joins the primary key. Each step is a no-op on a
// table already migrated.
const postgresMigrate = `
ALTER TABLE pkie_observations ADD COLUMN IF NOT EXISTS ip TEXT NOT NULL DEFAULT '';
DO $$
BEGIN
	IF NOT EXISTS (
		SELECT 1 FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
		WHERE i.indrelid = 'pkie_observations'::regclass AND i.indisprimary AND a.attname = 'ip'
	) THEN
		ALTER TABLE pkie_observations DROP CONSTRAINT pkie_observations_pkey,
			ADD PRIMARY KEY (host, port, sni, ip, sha256);
	END IF;
END
$$`

type postgresStore struct {
	pool *pgxpool.Pool
}

// OpenPostgres connects to the PostgreSQL database at dsn and creates the
// history table if it is missing (or migrates one from an earlier version).
// Several notaries may share one database.
func OpenPostgres(ctx context.Context, dsn string) (History, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	// Two replicas starting at once both try to create or migrate the
	// table; the advisory lock makes that a non-event.
	if _, err := pool.Exec(ctx, `SELECT pg_advisory_lock(7342001); `+postgresSchema+`; `+postgresMigrate+`; SELECT pg_advisory_unlock(7342001)`); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: postgres: creating schema: %w", err)
	}
	return &postgresStore{pool: pool}, nil
}

func (s *postgresStore) Lookup(ctx context.Context, k Key) ([]Record, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT sha256, sha1, first, last FROM pkie_observations WHERE host = $1 AND port = $2 AND sni = $3 AND ip = $4 ORDER BY last, first`,
		k.Host, k.Port, k.SNI, k.ipColumn())
	if err != nil {
		return nil, fmt.Errorf("store: lookup %s:%d: %w", k.Host, k.Port, err)
	}
	defer rows.Close()
	return scanRecords(rows, k)
}

func (s *postgresStore) Observe(ctx context.Context, k Key, sha256 [32]byte, sha1 [20]byte, t time.Time, keep int) error {
	ns := t.UnixNano()
	ip := k.ipColumn()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if keep > 0 {
			// Replicas write one key concurrently; without serialising
			// them, two that each see keep records and add one apiece
			// would leave keep+1.
			lock := fmt.Sprintf("%s|%d|%s|%s", k.Host, k.Port, k.SNI, ip)
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7342002, hashtext($1))`, lock); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO pkie_observations (host, port, sni, ip, sha256, sha1, first, last) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
			ON CONFLICT (host, port, sni, ip, sha256) DO UPDATE SET
				first = LEAST(pkie_observations.first, excluded.first),
				last = GREATEST(pkie_observations.last, excluded.last)`,
			k.Host, k.Port, k.SNI, ip, sha256[:], sha1[:], ns); err != nil {
			return err
		}
		if keep <= 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `
			DELETE FROM pkie_observations WHERE host = $1 AND port = $2 AND sni = $3 AND ip = $4 AND sha256 NOT IN (
				SELECT sha256 FROM pkie_observations WHERE host = $1 AND port = $2 AND sni = $3 AND ip = $4
				ORDER BY last DESC, first DESC LIMIT $5)`,
			k.Host, k.Port, k.SNI, ip, keep)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: recording %s:%d: %w", k.Host, k.Port, err)
	}
	return nil
}

func (s *postgresStore) Empty(ctx context.Context) (bool, error) {
	var found bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pkie_observations)`).Scan(&found); err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	return !found, nil
}

func (s *postgresStore) Close() error { s.pool.Close(); return nil }
