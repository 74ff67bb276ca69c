package ctlog

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
	"github.com/go-sql-driver/mysql"
	f_note "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/client"
	"github.com/transparency-dev/tessera/ctonly"
	tmysql "github.com/transparency-dev/tessera/storage/mysql"
	tposix "github.com/transparency-dev/tessera/storage/posix"
	antispam "github.com/transparency-dev/tessera/storage/posix/antispam"
	"golang.org/x/mod/sumdb/note"
)

// Options configure an opened log.
type Options struct {
	// Policy bounds what the log accepts beyond a chain to its roots.
	Policy Policy
	// MySQLDSN, if set, stores the log in that MySQL (or MariaDB) database
	// with Tessera's storage/mysql, so that several machines can serve
	// one log; else the log lives in TilesDir under the log directory
	// (Tessera's storage/posix).
	MySQLDSN string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// BatchMaxSize and BatchMaxAge bound a batch of entries Tessera
	// sequences at once; zero means 256 entries and 100ms.
	BatchMaxSize int
	BatchMaxAge  time.Duration
	// CheckpointInterval is how often a grown tree gets a new checkpoint
	// (and so how long add-chain waits at most for one); zero means 200ms
	// on POSIX storage, 1s (Tessera's minimum) on MySQL.
	CheckpointInterval time.Duration
	// MaxHashIndex bounds how many entries get-proof-by-hash indexes in
	// memory (about 80 bytes each); zero means 4 million. Past it the
	// endpoint answers 400 and monitors use the tiles.
	MaxHashIndex int
}

// Log is an open log. Its methods are safe for concurrent use.
type Log struct {
	dir     string
	origin  string
	key     *ecdsa.PrivateKey
	logID   [32]byte
	vkey    string
	verify  note.Verifier
	roots   *roots
	policy  Policy
	now     func() time.Time
	signer  *guardedSigner
	head    note.Signer
	headKey string

	add      func(context.Context, *ctonly.Entry) tessera.IndexFuture
	reader   tessera.LogReader
	awaiter  *tessera.PublicationAwaiter
	issuers  *issuerCache
	posixDir string // TilesDir, or "" on MySQL
	db       *sql.DB
	hashes   *hashIndex

	cancel   context.CancelFunc
	shutdown func(context.Context) error
	closers  []func() error
	once     sync.Once
}

// Open opens the log in dir, created by Init. It refuses (an error
// wrapping ErrBehind) a storage whose tree does not extend the last
// checkpoint the log signed, as StateFile records it, and a log key
// readable by others.
func Open(ctx context.Context, dir string, o Options) (_ *Log, err error) {
	key, err := readKey(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(filepath.Join(dir, PubFile))
	if err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	vkey := strings.TrimSpace(string(pub))
	v, err := newVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("ctlog: %s: %w", PubFile, err)
	}
	rb, err := os.ReadFile(filepath.Join(dir, RootsFile))
	if err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	rs, err := parseRoots(rb)
	if err != nil {
		return nil, err
	}
	head, headKey, err := readHeadSigner(filepath.Join(dir, HeadKeyFile))
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, origin: v.Name(), key: key, vkey: vkey, verify: v, roots: rs, policy: o.Policy,
		now: o.Now, head: head, headKey: headKey}
	if l.now == nil {
		l.now = time.Now
	}
	if l.logID, err = logID(key.Public()); err != nil {
		return nil, err
	}
	if check, _ := f_note.RFC6962VerifierString(l.origin, key.Public()); check != vkey {
		return nil, fmt.Errorf("ctlog: %s does not hold the verifier key of %s", PubFile, KeyFile)
	}
	last, err := readState(filepath.Join(dir, StateFile), v, l.origin)
	if err != nil {
		return nil, err
	}
	cs, err := newCheckpointSigner(key, l.origin, func() uint64 { return uint64(l.now().UnixMilli()) })
	if err != nil {
		return nil, err
	}
	l.signer = &guardedSigner{cs: cs, path: filepath.Join(dir, StateFile), last: last, clock: time.Now, sleep: time.Sleep}

	bctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	opts := tessera.NewAppendOptions().WithCTLayout().WithCheckpointSigner(l.signer)
	bs, ba := uint(o.BatchMaxSize), o.BatchMaxAge
	if bs == 0 {
		bs = 256
	}
	if ba == 0 {
		ba = 100 * time.Millisecond
	}
	opts.WithBatching(bs, ba)
	var driver tessera.Driver
	interval := o.CheckpointInterval
	if o.MySQLDSN == "" {
		l.posixDir = filepath.Join(dir, TilesDir)
		// A storage that lost everything would be initialised afresh by
		// Tessera (and its empty checkpoint refused by the signer); refuse
		// it before Tessera touches the directory.
		if _, err := os.Stat(filepath.Join(l.posixDir, "checkpoint")); errors.Is(err, fs.ErrNotExist) && last.size > 0 {
			return nil, fmt.Errorf("%w: %s holds no checkpoint, but the log last signed a tree of %d entries (%s). "+
				"Restore the storage from a backup; a log cannot start a second history under its key", ErrBehind, l.posixDir, last.size, StateFile)
		}
		if driver, err = tposix.New(bctx, tposix.Config{Path: l.posixDir}); err != nil {
			return nil, fmt.Errorf("ctlog: %w", err)
		}
		as, err := antispam.NewAntispam(bctx, filepath.Join(dir, "antispam"), antispam.AntispamOpts{})
		if err != nil {
			return nil, fmt.Errorf("ctlog: antispam index: %w", err)
		}
		l.closers = append(l.closers, func() error { return closeAntispam(as) })
		opts.WithAntispam(tessera.DefaultAntispamInMemorySize, as)
		l.issuers = newIssuerCache(fileIssuers{dir: filepath.Join(l.posixDir, "issuer")})
		if interval == 0 {
			interval = 200 * time.Millisecond
		}
	} else {
		if l.db, err = openMySQL(bctx, o.MySQLDSN); err != nil {
			return nil, err
		}
		if driver, err = tmysql.New(bctx, l.db); err != nil {
			return nil, fmt.Errorf("ctlog: MySQL storage: %w", err)
		}
		// Tessera has no persistent antispam for MySQL: duplicates are
		// caught in memory only, for the entries this process saw.
		opts.WithAntispam(tessera.DefaultAntispamInMemorySize, nil)
		l.issuers = newIssuerCache(sqlIssuers{db: l.db})
		if interval == 0 {
			interval = time.Second
		}
	}
	tick := interval
	if l.posixDir != "" && interval/2 >= posixMinCheckpointInterval {
		// Tessera's POSIX publisher waits a whole CheckpointInterval after
		// any call too soon after its last publication; at half the
		// log's interval, with the signer pacing checkpoints to the
		// interval, a grown tree waits at most one (guardedSigner.pace).
		tick = interval / 2
		l.signer.spacing = interval
	}
	opts.WithCheckpointInterval(tick)
	a, shutdown, r, err := tessera.NewAppender(bctx, driver, opts)
	if err != nil {
		return nil, fmt.Errorf("ctlog: opening the storage: %w", err)
	}
	l.shutdown, l.reader = shutdown, r
	l.add = tessera.NewCertificateTransparencyAppender(a)
	f := client.TileFetcherFunc(r.ReadTile)
	l.signer.tiles.Store(&f)
	if err := checkStorage(ctx, r, last); err != nil {
		return nil, err
	}
	l.awaiter = tessera.NewPublicationAwaiter(bctx, r.ReadCheckpoint, interval/4)
	maxIdx := o.MaxHashIndex
	if maxIdx <= 0 {
		maxIdx = 4 << 20
	}
	l.hashes = &hashIndex{max: uint64(maxIdx), m: map[[32]byte]uint64{}}
	return l, nil
}

// posixMinCheckpointInterval is the least CheckpointInterval Tessera's
// POSIX storage accepts.
const posixMinCheckpointInterval = 100 * time.Millisecond

// openMySQL opens the database and creates Tessera's tables and the
// issuers table if they are missing.
func openMySQL(ctx context.Context, dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("ctlog: MySQL DSN: %w", err)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	for _, q := range append(tesseraMySQLSchema, issuersSchema) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("ctlog: creating the MySQL tables: %w", err)
		}
	}
	return db, nil
}

// tesseraMySQLSchema is Tessera v1.0.4's storage/mysql/schema.sql, whose
// tables the storage expects to exist.
var tesseraMySQLSchema = []string{
	"CREATE TABLE IF NOT EXISTS Tessera (`id` TINYINT UNSIGNED NOT NULL, `compatibilityVersion` BIGINT UNSIGNED NOT NULL, PRIMARY KEY (`id`))",
	"INSERT IGNORE INTO Tessera (`id`, `compatibilityVersion`) VALUES (0, 1)",
	"CREATE TABLE IF NOT EXISTS `Checkpoint` (`id` TINYINT UNSIGNED NOT NULL, `note` MEDIUMBLOB NOT NULL, `published_at` BIGINT NOT NULL, PRIMARY KEY(`id`))",
	"CREATE TABLE IF NOT EXISTS `TreeState` (`id` TINYINT UNSIGNED NOT NULL, `size` BIGINT UNSIGNED NOT NULL, `root` TINYBLOB NOT NULL, PRIMARY KEY(`id`))",
	"CREATE TABLE IF NOT EXISTS `Subtree` (`level` TINYINT UNSIGNED NOT NULL, `index` BIGINT UNSIGNED NOT NULL, `nodes` MEDIUMBLOB NOT NULL, PRIMARY KEY(`level`, `index`))",
	"CREATE TABLE IF NOT EXISTS `TiledLeaves` (`tile_index` BIGINT UNSIGNED NOT NULL, `size` SMALLINT UNSIGNED NOT NULL, `data` LONGBLOB NOT NULL, PRIMARY KEY(`tile_index`))",
}

// Close waits for the entries already accepted to be integrated and
// published, then stops the log's background work and closes its storage.
func (l *Log) Close() error {
	var err error
	l.once.Do(func() {
		if l.shutdown != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = l.shutdown(ctx)
			cancel()
		}
		if l.cancel != nil {
			l.cancel()
		}
		for _, c := range l.closers {
			err = errors.Join(err, c())
		}
		if l.db != nil {
			err = errors.Join(err, l.db.Close())
		}
	})
	return err
}

// closeAntispam closes the badger database under Tessera's antispam.
// Tessera v1.0.4 gives no Close for it, so the database would stay open,
// unflushed and locked (a log reopened in the same process, as a restart
// test or an embedding program does, could not open it). The field is
// reached by reflection; a Tessera that renames it makes this an error,
// caught by the tests, not a crash.
func closeAntispam(as *antispam.AntispamStorage) error {
	f := reflect.ValueOf(as).Elem().FieldByName("db")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*badger.DB]() {
		return errors.New("ctlog: cannot close Tessera's antispam database (its layout changed)")
	}
	db := *(**badger.DB)(unsafe.Pointer(f.UnsafeAddr()))
	if db == nil {
		return nil
	}
	return db.Close()
}

// Origin returns the log's checkpoint origin.
func (l *Log) Origin() string { return l.origin }

// VerifierKey returns the log's C2SP signed-note verifier key in
// transparency-dev/formats/note RFC 6962 form (NewRFC6962Verifier).
func (l *Log) VerifierKey() string { return l.vkey }

// Verifier returns the verifier of the log's checkpoints.
func (l *Log) Verifier() note.Verifier { return l.verify }

// PublicKey returns the log's ECDSA P-256 public key.
func (l *Log) PublicKey() crypto.PublicKey { return l.key.Public() }

// LogID returns RFC 6962's LogID: SHA-256 of the public key's SPKI.
func (l *Log) LogID() [32]byte { return l.logID }

// HeadSigner returns the Ed25519 signer of the log's sorted-tree heads,
// named checkpoint.HeadOrigin(origin).
func (l *Log) HeadSigner() note.Signer { return l.head }

// HeadVerifierKey returns the verifier key of HeadSigner.
func (l *Log) HeadVerifierKey() string { return l.headKey }

// Roots returns the DER certificates of the accepted roots.
func (l *Log) Roots() [][]byte { return l.roots.der }

// Reader reads the log's published data, in the shapes of Tessera's client
// fetcher functions: a mirror in the same process follows the log with it.
type Reader struct {
	l *Log
}

// Reader returns a Reader of the log.
func (l *Log) Reader() Reader { return Reader{l} }

// ReadCheckpoint returns the latest published checkpoint.
func (r Reader) ReadCheckpoint(ctx context.Context) ([]byte, error) {
	return r.l.reader.ReadCheckpoint(ctx)
}

// ReadTile returns the hash tile at level and index, partial of width p
// (0: full). A missing tile is an error wrapping os.ErrNotExist.
func (r Reader) ReadTile(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
	return r.l.readTile(ctx, level, index, p)
}

// ReadEntryBundle returns the data tile at index, partial of width p.
func (r Reader) ReadEntryBundle(ctx context.Context, index uint64, p uint8) ([]byte, error) {
	return r.l.readBundle(ctx, index, p)
}

// ReadIssuer returns the issuer certificate of fingerprint fp.
func (r Reader) ReadIssuer(ctx context.Context, fp [32]byte) ([]byte, error) {
	return r.l.issuers.lookup(ctx, fp)
}
