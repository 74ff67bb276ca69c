package obc

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// StoreOptions configures Open.
type StoreOptions struct {
	// Mode is how widely one key is used. It is the store's: a new file
	// records it, and opening an existing file in another mode fails
	// (its scopes would mean something else), unless UseStoredMode is set.
	Mode Mode
	// UseStoredMode opens an existing file in the mode it records and
	// ignores Mode (a new file still takes Mode). Tools that only list or
	// forget use it.
	UseStoredMode bool
	// Alg is the algorithm of keys made for new scopes; "" means
	// DefaultAlg. Existing records keep the algorithm they were made with.
	Alg Alg
	// PoolSize is how many keys of Alg a background goroutine keeps
	// ready, so that a first visit only signs a certificate (the paper's
	// advice, §6.1); 0 turns the pool off. Pooled keys live in memory
	// only.
	PoolSize int
	// Logger receives what the store does (new scopes, pool refills);
	// nil discards.
	Logger *slog.Logger

	// genHook, when set (by tests), is called once per key generated,
	// pooled telling whether the pool's goroutine made it.
	genHook func(a Alg, pooled bool)
}

// Record describes one stored origin-bound key.
type Record struct {
	Scope    string    // what the key is bound to (see Scope)
	Alg      Alg       // the key's algorithm
	Identity Identity  // what servers see: SHA-256 of the certificate's SPKI
	Created  time.Time // when the key was made
	LastUsed time.Time // when it was last handed out (to within lastUsedEvery)
	// Problem says why the record cannot be used ("" when it can): a
	// damaged key or certificate. Identity is then zero.
	Problem string
}

// Result is what Get returns: a scope's certificate and how it was
// obtained.
type Result struct {
	Cert *tls.Certificate // Leaf is set
	// Scope is what the key is bound to (see Scope): the origin, or in
	// legacy mode the registrable domain.
	Scope string
	// Alg is the key's algorithm.
	Alg Alg
	// Identity is what a server sees of this certificate.
	Identity Identity
	// Created is true when this call made the key and certificate (a
	// first visit); concurrent first visits create once, and only one
	// caller sees true.
	Created bool
	// FromPool is true when the new key came from the pool rather than
	// being generated during the call.
	FromPool bool
	// KeyTime is the time spent generating the key (0 when it came from
	// the pool or already existed); CertTime the time spent signing the
	// certificate.
	KeyTime, CertTime time.Duration
}

// ErrNotFound is returned by Forget for a scope the store has no key for.
var ErrNotFound = errors.New("obc: no key for that scope")

// lastUsedEvery bounds how often a scope's "last used" time is written:
// every handshake asks for the certificate, and a write per handshake
// would cost more than the handshake's signature.
const lastUsedEvery = time.Minute

const schema = `
CREATE TABLE IF NOT EXISTS meta (
	name  TEXT NOT NULL PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS keys (
	scope     TEXT    NOT NULL PRIMARY KEY, -- one key per scope, across every handle and process
	alg       TEXT    NOT NULL,
	key       BLOB    NOT NULL,             -- PKCS#8 DER
	cert      BLOB    NOT NULL,             -- X.509 DER, self-signed by key
	created   INTEGER NOT NULL,             -- unix nanoseconds
	last_used INTEGER NOT NULL
) WITHOUT ROWID;
`

// storeVersion is the schema's version, recorded in meta so that a later
// pkie can migrate and an older one refuses a file it does not know.
const storeVersion = "1"

// Store holds a client's origin-bound keys and certificates in an SQLite
// file. It is safe for concurrent use, and several Stores (in one process
// or several) may share a file: each scope still gets exactly one key.
type Store struct {
	db     *sql.DB
	path   string
	mode   Mode
	alg    Alg
	logger *slog.Logger
	pool   *pool

	genHook func(Alg, bool) // StoreOptions.genHook

	mu       sync.Mutex
	flights  map[string]*flight // scope → the call creating or loading it
	cache    map[string]*cached // scope → its decoded certificate
	closed   bool
	stopPool context.CancelFunc
}

type flight struct {
	done chan struct{}
	res  *Result
	err  error
}

type cached struct {
	res     Result
	written time.Time // when last_used was last written
}

// Open opens the store in the SQLite file at path, creating it (mode 0600,
// its directory 0700) if needed. It refuses a file that others than its
// owner may read or write: it holds private keys. The caller must Close
// the store.
func Open(ctx context.Context, path string, opts StoreOptions) (*Store, error) {
	if opts.Alg == "" {
		opts.Alg = DefaultAlg
	}
	if _, err := ParseAlg(string(opts.Alg)); err != nil {
		return nil, err
	}
	if err := opts.Alg.usable(); err != nil {
		return nil, err
	}
	if opts.Mode != Strict && opts.Mode != Legacy {
		return nil, fmt.Errorf("obc: unknown mode %d", int(opts.Mode))
	}
	if opts.PoolSize < 0 {
		return nil, fmt.Errorf("obc: pool size %d is negative", opts.PoolSize)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := prepareFile(path); err != nil {
		return nil, err
	}
	// WAL lets readers proceed during a write; busy_timeout covers other
	// handles and processes on the same file. SQLite creates the -wal and
	// -shm files with the database file's permissions.
	//
	// The name is a URI (SQLite's "file:" form): '#', '?' and '%' in the
	// path must be escaped, or SQLite opens another file (a '#' in a
	// directory name would cut the path there).
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("obc: opening store %s: %w", path, err)
	}
	// One connection: a client store sees little traffic, and SQLite
	// admits one writer at a time anyway.
	db.SetMaxOpenConns(1)
	mode, err := initSchema(ctx, db, opts)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("obc: store %s: %w", path, err)
	}
	s := &Store{
		db: db, path: path, mode: mode, alg: opts.Alg, logger: logger, genHook: opts.genHook,
		flights: map[string]*flight{}, cache: map[string]*cached{},
	}
	if opts.PoolSize > 0 {
		pctx, cancel := context.WithCancel(context.Background())
		s.stopPool = cancel
		s.pool = newPool(pctx, opts.Alg, opts.PoolSize, func() (crypto.Signer, error) { return s.generate(true) }, logger)
	}
	return s, nil
}

// prepareFile creates path's directory (0700) and the file itself (0600)
// before SQLite does, so that the keys are never readable by others even
// for a moment, and refuses an existing file that others may read or
// write: like ssh with an unprotected private key, it is better to stop
// than to keep using keys others may have copied, or to fix the mode
// silently and hide that they could.
func prepareFile(path string) error {
	if path == "" {
		return errors.New("obc: no store path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("obc: creating %s: %w", dir, err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("obc: opening store: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("obc: opening store: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("obc: store %s is not a regular file", path)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("obc: opening store: %w", err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return fmt.Errorf("obc: store %s has mode %04o: it holds private keys, so only its owner may read or write it (chmod 600 %s)", p, perm, p)
		}
	}
	return nil
}

// initSchema creates the tables of a new file and returns the store's
// mode, checking it against opts.
func initSchema(ctx context.Context, db *sql.DB, opts StoreOptions) (Mode, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	// BEGIN IMMEDIATE: two processes creating the file at once must agree
	// on one mode.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return 0, err
	}
	commit := false
	defer func() {
		if !commit {
			conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	if _, err := conn.ExecContext(ctx, schema); err != nil {
		return 0, err
	}
	meta := map[string]string{}
	rows, err := conn.QueryContext(ctx, `SELECT name, value FROM meta`)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return 0, err
		}
		meta[k] = v
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(meta) == 0 {
		if _, err := conn.ExecContext(ctx, `INSERT INTO meta (name, value) VALUES ('version', ?), ('mode', ?)`, storeVersion, opts.Mode.String()); err != nil {
			return 0, err
		}
		meta["version"], meta["mode"] = storeVersion, opts.Mode.String()
	}
	if v := meta["version"]; v != storeVersion {
		return 0, fmt.Errorf("format version %q, this pkie reads %s", v, storeVersion)
	}
	mode, err := ParseMode(meta["mode"])
	if err != nil {
		return 0, fmt.Errorf("recorded mode: %w", err)
	}
	if mode != opts.Mode && !opts.UseStoredMode {
		return 0, fmt.Errorf("the store is in %s mode, opened as %s (a store's mode cannot change: its keys are bound to %s scopes)", mode, opts.Mode, mode)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return 0, err
	}
	commit = true
	return mode, nil
}

// Path returns the store's file.
func (s *Store) Path() string { return s.path }

// Mode returns the store's mode.
func (s *Store) Mode() Mode { return s.mode }

// Alg returns the algorithm of keys made for new scopes.
func (s *Store) Alg() Alg { return s.alg }

// Scope returns the scope o's key is bound to in this store's mode.
func (s *Store) Scope(o Origin) (string, error) { return Scope(o, s.mode) }

// Certificate returns the certificate to present to o, making the key and
// certificate on first use. created reports whether this call made them.
func (s *Store) Certificate(ctx context.Context, o Origin) (*tls.Certificate, bool, error) {
	r, err := s.Get(ctx, o)
	if err != nil {
		return nil, false, err
	}
	return r.Cert, r.Created, nil
}

// Get is Certificate with the details: the scope, the identity, and how
// long the key and certificate took to make.
func (s *Store) Get(ctx context.Context, o Origin) (*Result, error) {
	scope, err := Scope(o, s.mode)
	if err != nil {
		return nil, err
	}
	return s.getScope(ctx, scope)
}

func (s *Store) getScope(ctx context.Context, scope string) (*Result, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("obc: store closed")
	}
	if c, ok := s.cache[scope]; ok && time.Since(c.written) < lastUsedEvery {
		r := c.res
		s.mu.Unlock()
		r.Created, r.FromPool, r.KeyTime, r.CertTime = false, false, 0, 0
		return &r, nil
	}
	if f, ok := s.flights[scope]; ok {
		s.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil {
			return nil, f.err
		}
		r := *f.res
		// Only the caller that made the key made it.
		r.Created, r.FromPool, r.KeyTime, r.CertTime = false, false, 0, 0
		return &r, nil
	}
	f := &flight{done: make(chan struct{})}
	s.flights[scope] = f
	s.mu.Unlock()

	// The flight must not die with its leader's context: waiters
	// share its result.
	f.res, f.err = s.load(context.WithoutCancel(ctx), scope)
	s.mu.Lock()
	delete(s.flights, scope)
	if f.err == nil {
		s.cache[scope] = &cached{res: *f.res, written: time.Now()}
	}
	s.mu.Unlock()
	close(f.done)
	return f.res, f.err
}

// load returns scope's record, touching its last-used time, or makes it.
func (s *Store) load(ctx context.Context, scope string) (*Result, error) {
	now := time.Now()
	r, err := s.read(ctx, scope, now)
	if err != nil || r != nil {
		return r, err
	}
	return s.create(ctx, scope)
}

// read returns scope's stored certificate, or nil if it has none.
func (s *Store) read(ctx context.Context, scope string, now time.Time) (*Result, error) {
	var (
		alg               string
		key, cert         []byte
		created, lastUsed int64
	)
	// RETURNING reads and touches in one statement: no other handle can
	// forget the scope in between.
	err := s.db.QueryRowContext(ctx, `UPDATE keys SET last_used = max(last_used, ?) WHERE scope = ? RETURNING alg, key, cert, created, last_used`,
		now.UnixNano(), scope).Scan(&alg, &key, &cert, &created, &lastUsed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("obc: reading the key of %s: %w", scope, err)
	}
	tc, leaf, err := decodeRecord(alg, key, cert, created, lastUsed)
	if err != nil {
		// Never replace it: every binding a server made to this key would
		// break, and the user should know the file is damaged.
		return nil, fmt.Errorf("obc: store %s: the record of %s is corrupted (%v); it was left as is: forget it to make a new key", s.path, scope, err)
	}
	return &Result{Cert: tc, Scope: scope, Alg: Alg(alg), Identity: IdentityOf(leaf)}, nil
}

// create makes scope's key and certificate and stores them, unless another
// handle stored one first, which it then returns.
func (s *Store) create(ctx context.Context, scope string) (*Result, error) {
	r := &Result{Scope: scope, Alg: s.alg}
	var key crypto.Signer
	if s.pool != nil {
		key = s.pool.take()
	}
	if key != nil {
		r.FromPool = true
	} else {
		t0 := time.Now()
		k, err := s.generate(false)
		if err != nil {
			return nil, err
		}
		key, r.KeyTime = k, time.Since(t0)
	}
	now := time.Now()
	t0 := now
	der, err := selfSign(key, now)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("obc: parsing the new certificate: %w", err)
	}
	r.CertTime = time.Since(t0)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("obc: encoding the key: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO keys (scope, alg, key, cert, created, last_used) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope) DO NOTHING`,
		scope, string(s.alg), keyDER, der, now.UnixNano(), now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("obc: storing the key of %s: %w", scope, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("obc: storing the key of %s: %w", scope, err)
	} else if n == 0 {
		// Another handle won the race: its key is the scope's.
		if s.pool != nil && r.FromPool {
			s.pool.giveBack(key)
		}
		other, err := s.read(ctx, scope, now)
		if err != nil {
			return nil, err
		}
		if other == nil {
			return nil, fmt.Errorf("obc: the key of %s vanished while being created", scope)
		}
		return other, nil
	}
	r.Cert = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	r.Identity = IdentityOf(leaf)
	r.Created = true
	s.logger.Info("obc: new origin-bound key", "scope", scope, "alg", string(s.alg), "identity", r.Identity.String(), "from_pool", r.FromPool)
	return r, nil
}

// generate makes one key of the store's algorithm.
func (s *Store) generate(pooled bool) (crypto.Signer, error) {
	if s.genHook != nil {
		s.genHook(s.alg, pooled)
	}
	return s.alg.GenerateKey()
}

// List returns every stored key, by scope. A corrupted record is listed
// with what can be read of it (scope, alg and times) and a zero Identity,
// so that it can be seen and forgotten.
func (s *Store) List(ctx context.Context) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT scope, alg, key, cert, created, last_used FROM keys ORDER BY scope`)
	if err != nil {
		return nil, fmt.Errorf("obc: listing %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var (
			r                 Record
			alg               string
			key, cert         []byte
			created, lastUsed int64
		)
		if err := rows.Scan(&r.Scope, &alg, &key, &cert, &created, &lastUsed); err != nil {
			return nil, fmt.Errorf("obc: listing %s: %w", s.path, err)
		}
		r.Alg = Alg(alg)
		r.Created, r.LastUsed = time.Unix(0, created), time.Unix(0, lastUsed)
		if _, leaf, err := decodeRecord(alg, key, cert, created, lastUsed); err == nil {
			r.Identity = IdentityOf(leaf)
		} else {
			r.Problem = "corrupted: " + err.Error()
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("obc: listing %s: %w", s.path, err)
	}
	return out, nil
}

// Forget deletes scope's key and returns what it deleted, or ErrNotFound.
// The next visit to the scope makes a new key: servers then see a new
// client. Connections already made with the old key stay up until closed.
func (s *Store) Forget(ctx context.Context, scope string) (Record, error) {
	var (
		r                 Record
		alg               string
		key, cert         []byte
		created, lastUsed int64
	)
	s.mu.Lock()
	delete(s.cache, scope)
	s.mu.Unlock()
	err := s.db.QueryRowContext(ctx, `DELETE FROM keys WHERE scope = ? RETURNING scope, alg, key, cert, created, last_used`, scope).
		Scan(&r.Scope, &alg, &key, &cert, &created, &lastUsed)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("%w: %s (in %s)", ErrNotFound, strconv.Quote(scope), s.path)
	}
	if err != nil {
		return Record{}, fmt.Errorf("obc: forgetting %s: %w", scope, err)
	}
	s.mu.Lock()
	delete(s.cache, scope)
	s.mu.Unlock()
	r.Alg = Alg(alg)
	r.Created, r.LastUsed = time.Unix(0, created), time.Unix(0, lastUsed)
	if _, leaf, err := decodeRecord(alg, key, cert, created, lastUsed); err == nil {
		r.Identity = IdentityOf(leaf)
	} else {
		r.Problem = "corrupted: " + err.Error()
	}
	s.logger.Info("obc: forgot origin-bound key", "scope", scope, "identity", r.Identity.String())
	return r, nil
}

// Close stops the pool and closes the file.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.stopPool != nil {
		s.stopPool()
		s.pool.wait()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("obc: closing %s: %w", s.path, err)
	}
	return nil
}
