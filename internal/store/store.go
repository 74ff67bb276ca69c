// Package store keeps a notary's observation history: for each target, the
// distinct certificates the notary has seen there (at most a bound of the
// most recent), with when each was first and last seen. SQLite (one file,
// WAL) is the embedded default; given a PostgreSQL DSN, several notary
// replicas share one history.
//
// Writes are committed before the notary answers, so an answer a client has
// received is never lost by a crash of the notary process.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Key names a target as a notary probes it. SNI is empty when it equals the
// host. IP is the address the probe was pinned to, or the zero Addr when
// the notary resolved Host itself: what was seen at an address a client
// chose is the history of that address, never of the name, so a client
// cannot make the notary record an address of its choosing as the name's
// certificate.
type Key struct {
	Host string
	Port int
	SNI  string
	IP   netip.Addr
}

// ipColumn is how k.IP is stored: "" for a name's own observations (the
// value rows from before the column existed take), else the address's
// canonical text form.
func (k Key) ipColumn() string {
	if !k.IP.IsValid() {
		return ""
	}
	return k.IP.Unmap().String()
}

// Record is one certificate seen at a target.
type Record struct {
	SHA256 [32]byte
	SHA1   [20]byte
	First  time.Time // first seen
	Last   time.Time // last seen
}

// History is the observation history of a notary. Implementations are safe
// for concurrent use.
type History interface {
	// Lookup returns the target's records ordered by last seen, oldest
	// first, so the last one is what the notary saw most recently.
	Lookup(ctx context.Context, k Key) ([]Record, error)
	// Observe records that the certificate with the given fingerprints was
	// seen at k at time t: a new record, or an extension of an existing one.
	// In the same transaction it deletes all but the keep records of k
	// seen most recently (by last seen), so that a server showing a new
	// certificate on every connection cannot grow k's history, and the
	// answers listing it, without bound. keep <= 0 keeps every record.
	Observe(ctx context.Context, k Key, sha256 [32]byte, sha1 [20]byte, t time.Time, keep int) error
	// Empty reports whether the history holds no record at all.
	Empty(ctx context.Context) (bool, error)
	// Close releases the store.
	Close() error
}

// ErrBadDSN reports a DSN the store cannot open.
var ErrBadDSN = errors.New("store: unsupported DSN")

// Open opens the history named by dsn: "postgres://…" or "postgresql://…"
// for PostgreSQL, otherwise a SQLite file path (optionally "sqlite:PATH").
func Open(ctx context.Context, dsn string) (History, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return OpenPostgres(ctx, dsn)
	case strings.HasPrefix(dsn, "sqlite:"):
		return OpenSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"))
	case dsn == "":
		return nil, fmt.Errorf("%w: empty", ErrBadDSN)
	case strings.Contains(dsn, "://"):
		return nil, fmt.Errorf("%w %q: use postgres://… or a SQLite file path", ErrBadDSN, dsn)
	}
	return OpenSQLite(ctx, dsn)
}

// Current returns the most recently seen record, if any.
func Current(rs []Record) (Record, bool) {
	if len(rs) == 0 {
		return Record{}, false
	}
	return rs[len(rs)-1], true
}
