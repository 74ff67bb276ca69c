// Package revocation is pkie's revocation authority: the trusted third
// party of RITM-style revocation (the PEC paper, §5.2). It ingests X.509 CRLs,
// whose signatures it checks against their issuers, and plain serial lists,
// and publishes a sorted Merkle tree (package sortedtree) of the revoked
// (issuer key identifier, serial) keys with a signed, timestamped
// sorted-tree head (package checkpoint's Head). A presence proof in that
// tree means revoked; an absence proof means not revoked as of the head's
// time.
//
// The revoked keys, in the order they were first published (package feed's
// order), form an append-only log: keys are never withdrawn and keep their
// position. Each head is bound to a checkpoint of that log (origin: the
// authority's key name; an RFC 6962 tree over the keys as leaves,
// sortedtree.List), signed with the same key at the same time, so a prover
// that rebuilds the tree from the feed also checks that the feed only grew.
// The head itself is a snapshot, not a log checkpoint: successive sorted
// trees are not consistent with one another.
//
// It republishes on every update, and periodically (Refresh) even without
// one, so that verifiers can demand a fresh root and an old "not revoked"
// proof cannot be replayed past a revocation for longer than their maximum
// age. Revocations are never withdrawn: the key set only grows, which is
// what lets provers sync incrementally through package feed.
//
// State lives in one SQLite file (WAL, synchronous=FULL) in the authority's
// directory, so a restart loses nothing committed. What the authority last
// signed is also kept apart from the database, in StateFile (package
// ttpstate), written before a new checkpoint can be served: Open refuses a
// database that is behind it, so a lost, truncated or rolled-back database
// is an error at start, never a smaller tree signed as the truth.
package revocation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/pkie/pkie/internal/feed"
	rev "github.com/pkie/pkie/internal/pkies/revocation"
	"github.com/pkie/pkie/internal/ttpstate"
	"github.com/pkie/pkie/sortedtree"
)

// Files in an authority directory.
const (
	DBFile   = "revocation.db"
	KeyFile  = "revocation.key" // note signer key, 0600
	PubFile  = "revocation.pub"
	TreeFile = "revoked.tree"
	// StateFile holds the last signed sorted-tree head (package ttpstate),
	// 0600. A file from before heads had their own type holds a
	// sorted-tree root signed as a checkpoint: Open accepts it once, and the
	// next publication replaces it with a head.
	StateFile = "revocation.state"
)

const schema = `
CREATE TABLE IF NOT EXISTS revoked (
	seq    INTEGER PRIMARY KEY,
	key    BLOB NOT NULL UNIQUE,
	issuer BLOB NOT NULL,
	serial BLOB NOT NULL,
	source TEXT NOT NULL,
	added  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS crls (
	digest      BLOB PRIMARY KEY,
	issuer      BLOB NOT NULL,
	number      TEXT,
	this_update INTEGER NOT NULL,
	entries     INTEGER NOT NULL,
	added       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
	id   INTEGER PRIMARY KEY,
	size INTEGER NOT NULL,
	ts   INTEGER NOT NULL,
	note BLOB NOT NULL
);
`

// Options configure an opened authority.
type Options struct {
	Now func() time.Time // nil means time.Now
	// Logf, if set, is told what Open decided about the state file when
	// that needs the operator's attention (adopting the database's latest
	// checkpoint on the first start of an older authority, a fork accepted
	// with AcceptFork).
	Logf func(format string, args ...any)
	// AcceptFork opens a database that is behind the last signed
	// checkpoint (or one with nothing signed, while the key exists)
	// instead of refusing it. The next publication then signs a tree that
	// does not extend what the authority signed before: provers that saw
	// the old tree refuse it, and certificates revoked in the lost part
	// check as not revoked by those that did not. Only for an operator
	// who has decided to start over under the same key.
	AcceptFork bool

	fresh bool // Init: nothing signed yet, by design
}

// ErrBehind is wrapped by Open's error for a database that does not hold
// what the authority last signed.
var ErrBehind = errors.New("revocation: the database is behind the last signed checkpoint")

// Authority is an open revocation authority directory. Its methods are safe
// for concurrent use.
type Authority struct {
	db         *sql.DB
	dir        string
	signer     note.Signer
	headSigner note.Signer // signer under HeadOrigin (checkpoint.HeadSigner)
	verifier   note.Verifier
	vkey       string
	now        func() time.Time
	mu         sync.Mutex // serializes publishing in this process
}

// Init creates an authority in dir whose checkpoints carry origin, with a
// fresh Ed25519 key, and publishes the empty tree. It returns the verifier
// key clients pin and refuses a directory that already holds a key.
func Init(dir, origin string) (vkey string, err error) {
	// Validate before anything is written: a failed init must leave
	// nothing behind that a rerun would refuse to overwrite.
	if err := checkpoint.ValidOrigin(origin); err != nil {
		return "", fmt.Errorf("revocation: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("revocation: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFile)); err == nil {
		return "", fmt.Errorf("revocation: %s already holds a key; refusing to replace it", dir)
	}
	skey, vkey, err := checkpoint.GenerateKey(origin)
	if err != nil {
		return "", fmt.Errorf("revocation: origin %q: %w", origin, err)
	}
	// Exclusive: of two inits racing on one directory, the loser must
	// not replace the key the winner may already have signed with.
	if err := atomicfile.CreateExclusive(filepath.Join(dir, KeyFile), []byte(skey+"\n"), 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("revocation: %s already holds a key; refusing to replace it", dir)
		}
		return "", fmt.Errorf("revocation: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, PubFile), []byte(vkey+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("revocation: %w", err)
	}
	a, err := Open(dir, Options{fresh: true})
	if err != nil {
		return "", err
	}
	defer a.Close()
	if _, err := a.Publish(context.Background()); err != nil {
		return "", err
	}
	return vkey, nil
}

// Open opens an authority directory created by Init. It refuses (an error
// wrapping ErrBehind) a database that does not hold the keys of the last
// checkpoint the authority signed, as recorded in StateFile: fewer keys, or
// first keys that hash to another root. An authority without a state file
// (one created before there was one) adopts the latest checkpoint stored in
// its database, and writes it there; one with neither is refused, since a
// key with no record of what it signed means the database was lost.
func Open(dir string, o Options) (*Authority, error) {
	signer, err := checkpoint.ReadSignerFile(filepath.Join(dir, KeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("revocation: reading the key (run \"pkie revocation init\" first?): %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	vb, err := os.ReadFile(filepath.Join(dir, PubFile))
	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	vkey := strings.TrimSpace(string(vb))
	verifier, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("revocation: %s: %w", PubFile, err)
	}
	if verifier.Name() != signer.Name() || verifier.KeyHash() != signer.KeyHash() {
		return nil, fmt.Errorf("revocation: %s and %s hold different keys", KeyFile, PubFile)
	}
	headSigner, err := checkpoint.HeadSigner(signer, verifier)
	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	path := filepath.Join(dir, DBFile)
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("revocation: opening %s: %w", path, err)
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("revocation: creating schema in %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		db.Close()
		return nil, fmt.Errorf("revocation: %w", err)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	a := &Authority{db: db, dir: dir, signer: signer, headSigner: headSigner, verifier: verifier, vkey: vkey, now: now}
	if !o.fresh {
		if err := a.checkState(context.Background(), o); err != nil {
			db.Close()
			return nil, err
		}
	}
	return a, nil
}

func (a *Authority) statePath() string { return filepath.Join(a.dir, StateFile) }

// checkState compares the database with the last signed checkpoint.
func (a *Authority) checkState(ctx context.Context, o Options) error {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	st, err := ttpstate.Read(a.statePath())
	if errors.Is(err, os.ErrNotExist) {
		latest, err := a.Checkpoint(ctx)
		if errors.Is(err, feed.ErrNoCheckpoint) {
			if o.AcceptFork {
				logf("revocation: ACCEPTING A FORK: %s has a key but neither %s nor the database records anything it signed; signing what the database holds",
					a.dir, StateFile)
				return nil
			}
			return fmt.Errorf("%w: %s holds the authority's key but neither %s nor %s records anything it signed: the database was lost or replaced. "+
				"Restore both files from a backup, or start over under this key deliberately with --dangerously-accept-fork (docs/operations/proofs.md)",
				ErrBehind, a.dir, StateFile, DBFile)
		}
		if err != nil {
			return err
		}
		cp, _, err := a.openSigned(latest)
		if err != nil {
			return fmt.Errorf("revocation: the database's latest head: %w", err)
		}
		if err := a.checkHolds(ctx, cp); err != nil && !o.AcceptFork {
			return err
		}
		if err := ttpstate.Write(a.statePath(), &ttpstate.State{Checkpoint: string(latest)}); err != nil {
			return err
		}
		logf("revocation: no %s yet (an authority created before there was one): adopted the database's latest checkpoint as the last signed one", StateFile)
		return nil
	}
	if err != nil {
		return fmt.Errorf("revocation: %w (it records what the authority last signed: restore it, or see --dangerously-accept-fork)", err)
	}
	saved, legacy, err := a.openSigned([]byte(st.Checkpoint))
	if err != nil {
		return fmt.Errorf("revocation: %s: %w", StateFile, err)
	}
	if legacy {
		logf("revocation: %s holds a sorted-tree root signed as a checkpoint (the format before sorted-tree heads); accepted once, the next publication replaces it with a head", StateFile)
	}
	err = a.checkHolds(ctx, saved)
	if err != nil && o.AcceptFork {
		logf("revocation: ACCEPTING A FORK: %v", err)
		return nil
	}
	return err
}

// signedTree is what a signed head says about the trees: the sorted tree's
// size and root and when it was signed, and the root of the key log at that
// size (nil for a legacy root, which bound none).
type signedTree struct {
	Size    uint64
	Root    [32]byte
	Time    time.Time
	LogRoot *[32]byte
}

// openSigned verifies msg, a stored or saved head, at any age. A
// sorted-tree root signed as a checkpoint before heads had their own type
// (legacy: origin the authority's, signed by its key) is accepted, for the
// state an older authority left behind. It has the form of a key-log
// checkpoint, which the authority never stores or saves on its own, so in
// these files that form can only be an old root.
func (a *Authority) openSigned(msg []byte) (t *signedTree, legacy bool, err error) {
	h, err := checkpoint.OpenHeadAnyAge(msg, a.verifier)
	if err != nil {
		c, lerr := checkpoint.OpenLegacyHead(msg, a.verifier, a.Origin())
		if lerr != nil {
			return nil, false, err
		}
		return &signedTree{Size: c.Size, Root: c.Root, Time: c.Time}, true, nil
	}
	if h.Log.Size != h.Size {
		return nil, false, fmt.Errorf("revocation: a head of %d keys bound to a key log of %d", h.Size, h.Log.Size)
	}
	return &signedTree{Size: h.Size, Root: h.Root, Time: h.Time, LogRoot: &h.Log.Root}, false, nil
}

// checkHolds checks that the database's first saved.Size keys are the
// tree saved signs, and, in that order, the key log it is bound to. Keys
// are never withdrawn and keep their position, so that prefix is exactly
// the set the authority signed.
func (a *Authority) checkHolds(ctx context.Context, saved *signedTree) error {
	tx, err := a.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("revocation: %w", err)
	}
	defer tx.Rollback()
	n, err := count(ctx, tx)
	if err != nil {
		return err
	}
	when := saved.Time.UTC().Format(time.RFC3339)
	if n < saved.Size {
		return fmt.Errorf("%w: %s holds %d revoked keys, but the authority last signed a tree of %d (%s, %s); "+
			"refusing to sign a smaller tree. Restore the database, or see --dangerously-accept-fork (docs/operations/proofs.md)",
			ErrBehind, DBFile, n, saved.Size, when, StateFile)
	}
	keys, err := feed.QueryKeys(ctx, tx, keysQuery, 0, saved.Size)
	if err != nil {
		return err
	}
	logRoot := sortedtree.ListRoot(keys) // before Build sorts keys in place
	t := sortedtree.Build(keys)
	defer t.Close()
	if root := t.Root(); t.Size() != saved.Size || root != saved.Root {
		return fmt.Errorf("%w: the first %d of the %d keys in %s give a tree of %d keys with root %x…, but the authority last signed %d keys with root %x… (%s, %s): "+
			"the database does not hold what was signed. Restore it, or see --dangerously-accept-fork (docs/operations/proofs.md)",
			ErrBehind, saved.Size, n, DBFile, t.Size(), root[:8], saved.Size, saved.Root[:8], when, StateFile)
	}
	if saved.LogRoot != nil {
		if root := logRoot; root != *saved.LogRoot {
			return fmt.Errorf("%w: the first %d keys in %s, in publication order, hash to %x…, but the authority last signed a key log with root %x… (%s, %s): "+
				"the database does not hold what was signed. Restore it, or see --dangerously-accept-fork (docs/operations/proofs.md)",
				ErrBehind, saved.Size, DBFile, root[:8], saved.LogRoot[:8], when, StateFile)
		}
	}
	return nil
}

// tempNames matches the temporary files a publication writes: the tree
// file's (revoked.tree.tmp-<12 hex>), the one sortedtree.WriteFile writes
// it through (.revoked.tree.tmp-<12 hex>.tmp<digits>), and the state
// file's.
var tempNames = []*regexp.Regexp{
	regexp.MustCompile(`^` + regexp.QuoteMeta(TreeFile) + `\.tmp-[0-9a-f]{12}$`),
	regexp.MustCompile(`^\.` + regexp.QuoteMeta(TreeFile) + `\.tmp-[0-9a-f]{12}\.tmp[0-9]+$`),
	ttpstate.TempPattern(StateFile),
}

// RemoveStaleTemp removes the temporary files a publication killed half
// way (kill -9, a power cut) left in the directory, each as big as the
// tree, and returns how many it removed. Only names the authority itself
// writes are touched. Run it when the server starts: a publication running
// at that moment in another process (a CLI ingest) would lose its file and
// fail, to be redone by the next one.
func (a *Authority) RemoveStaleTemp() (int, error) {
	ents, err := os.ReadDir(a.dir)
	if err != nil {
		return 0, fmt.Errorf("revocation: %w", err)
	}
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		for _, re := range tempNames {
			if re.MatchString(e.Name()) {
				if err := os.Remove(filepath.Join(a.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
					return n, fmt.Errorf("revocation: removing a stale temporary file: %w", err)
				}
				n++
				break
			}
		}
	}
	return n, nil
}

// Close closes the database.
func (a *Authority) Close() error { return a.db.Close() }

// Origin is the authority's key name and the origin of its key log's
// checkpoints.
func (a *Authority) Origin() string { return a.signer.Name() }

// HeadOrigin is the origin, and key name, of the authority's sorted-tree
// heads.
func (a *Authority) HeadOrigin() string { return checkpoint.HeadOrigin(a.Origin()) }

// VerifierKey is the note verifier key clients pin.
func (a *Authority) VerifierKey() string { return a.vkey }

// Verifier is the authority's note verifier.
func (a *Authority) Verifier() note.Verifier { return a.verifier }

// Revocation is one revoked (issuer, serial) pair.
type Revocation struct {
	IssuerKeyID []byte
	Serial      *big.Int
}

// Update is the outcome of an ingest.
type Update struct {
	Added      int       `json:"added"`      // keys new to the tree
	Already    int       `json:"already"`    // keys that were already revoked
	Size       uint64    `json:"size"`       // revoked keys after the update
	Checkpoint string    `json:"checkpoint"` // the sorted-tree head published after it
	Published  time.Time `json:"published"`  // its timestamp
}

// AddCRL ingests a CRL (DER or PEM) after checking issuer signed it, then
// republishes. Ingesting the same CRL twice adds nothing.
func (a *Authority) AddCRL(ctx context.Context, data []byte, issuer *x509.Certificate) (*Update, error) {
	crl, err := ParseCRL(data, issuer)
	if err != nil {
		return nil, err
	}
	kid, err := rev.IssuerKeyID(issuer)
	if err != nil {
		return nil, err
	}
	revs := make([]Revocation, 0, len(crl.RevokedCertificateEntries))
	for _, e := range crl.RevokedCertificateEntries {
		revs = append(revs, Revocation{IssuerKeyID: kid, Serial: e.SerialNumber})
	}
	digest := sha256.Sum256(crl.Raw)
	number := ""
	if crl.Number != nil {
		number = crl.Number.String()
	}
	return a.add(ctx, revs, "crl:"+fmt.Sprintf("%x", digest[:8]), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO crls (digest, issuer, number, this_update, entries, added) VALUES (?, ?, ?, ?, ?, ?)`,
			digest[:], kid, number, crl.ThisUpdate.UnixMilli(), len(revs), a.now().UnixMilli())
		return err
	})
}

// AddSerials revokes serials of the CA with the given key identifier (see
// IssuerKeyID), then republishes.
func (a *Authority) AddSerials(ctx context.Context, issuerKeyID []byte, serials []*big.Int, source string) (*Update, error) {
	revs := make([]Revocation, len(serials))
	for i, s := range serials {
		revs[i] = Revocation{IssuerKeyID: issuerKeyID, Serial: s}
	}
	return a.add(ctx, revs, "serials:"+source, nil)
}

func (a *Authority) add(ctx context.Context, revs []Revocation, source string, extra func(*sql.Tx) error) (*Update, error) {
	type row struct {
		key    [32]byte
		kid    []byte
		serial []byte
	}
	rows := make([]row, len(revs))
	for i, r := range revs {
		k, err := rev.Key(r.IssuerKeyID, r.Serial)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		rows[i] = row{k, r.IssuerKeyID, r.Serial.Bytes()}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	defer tx.Rollback()
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq)+1, 0) FROM revoked`).Scan(&seq); err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	ins, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO revoked (seq, key, issuer, serial, source, added) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	up := &Update{}
	now := a.now().UnixMilli()
	for _, r := range rows {
		res, err := ins.ExecContext(ctx, seq, r.key[:], r.kid, r.serial, source, now)
		if err != nil {
			return nil, fmt.Errorf("revocation: storing: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			seq++
			up.Added++
		} else {
			up.Already++
		}
	}
	if extra != nil {
		if err := extra(tx); err != nil {
			return nil, fmt.Errorf("revocation: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("revocation: committing: %w", err)
	}
	p, err := a.publishLocked(ctx)
	if err != nil {
		return nil, err
	}
	up.Size, up.Checkpoint, up.Published = p.Size, string(p.Checkpoint), p.Time
	return up, nil
}

// Published describes one publication of the tree.
type Published struct {
	Checkpoint []byte // the signed sorted-tree head
	Size       uint64
	Root       [32]byte
	Time       time.Time
	TreePath   string
}

// Publish builds the tree of every revoked key, writes it to the
// directory and signs and stores a fresh head, bound to a checkpoint of the
// key log signed with it. Run it periodically so the head stays younger
// than verifiers' maximum age.
func (a *Authority) Publish(ctx context.Context) (*Published, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.publishLocked(ctx)
}

func (a *Authority) publishLocked(ctx context.Context) (*Published, error) {
	// Read the keys in a read transaction and build and write the tree
	// outside any write lock: that is most of a publication's time, and a
	// write lock held through it starves every other writer (a CLI ingest
	// beside a server republishing a large tree) past its busy timeout.
	rtx, err := a.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	n, err := count(ctx, rtx)
	if err != nil {
		rtx.Rollback()
		return nil, err
	}
	keys, err := feed.QueryKeys(ctx, rtx, keysQuery, 0, n)
	rtx.Rollback()
	if err != nil {
		return nil, err
	}
	// The key log's root, over the keys in publication order, before Build
	// sorts them in place.
	logSize, logRoot := uint64(len(keys)), sortedtree.ListRoot(keys)
	t := sortedtree.Build(keys)
	defer t.Close()
	if t.Size() != uint64(len(keys)) {
		return nil, fmt.Errorf("revocation: %d stored keys gave a tree of %d", len(keys), t.Size())
	}
	path := filepath.Join(a.dir, TreeFile)
	tmp := fmt.Sprintf("%s.tmp-%x", path, randBytes(6))
	if err := t.WriteFile(tmp); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("revocation: writing tree: %w", err)
	}
	defer os.Remove(tmp) // a no-op once renamed

	// One short write transaction signs and stores the checkpoint, so
	// checkpoints are stored in the order they are signed even with two
	// publishers (a server and a CLI ingest) in two processes.
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	defer tx.Rollback()
	var latest []byte
	err = tx.QueryRowContext(ctx, `SELECT note FROM checkpoints ORDER BY id DESC LIMIT 1`).Scan(&latest)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("revocation: reading checkpoint: %w", err)
	}
	if root := t.Root(); latest != nil {
		prev, _, err := a.openSigned(latest)
		if err != nil {
			return nil, fmt.Errorf("revocation: the stored head: %w", err)
		}
		switch {
		case prev.Size > t.Size():
			// Another publisher signed more keys since this one read
			// them: its checkpoint covers every key this call was to
			// publish, and storing this one after it would go back.
			return &Published{Checkpoint: latest, Size: prev.Size, Root: prev.Root, Time: prev.Time, TreePath: path}, nil
		case prev.Size == t.Size() && prev.Root != root:
			return nil, fmt.Errorf("revocation: the first %d stored keys now hash to %x…, the stored checkpoint of that size signs %x…: the database changed under the authority",
				t.Size(), root[:8], prev.Root[:8])
		}
	}
	now := a.now()
	lmsg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: a.Origin(), Size: logSize, Root: logRoot, Time: now}, a.signer)
	if err != nil {
		return nil, fmt.Errorf("revocation: signing the key log checkpoint: %w", err)
	}
	cp := checkpoint.Head{Origin: a.HeadOrigin(), Size: t.Size(), Root: t.Root(), Time: now}
	if err := cp.BindLog(lmsg, a.verifier); err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	msg, err := checkpoint.SignHead(cp, a.headSigner)
	if err != nil {
		return nil, fmt.Errorf("revocation: signing head: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (size, ts, note) VALUES (?, ?, ?)`, int64(cp.Size), now.UnixMilli(), msg); err != nil {
		return nil, fmt.Errorf("revocation: storing head: %w", err)
	}
	// Record what is signed before anyone can be served it: from the
	// commit on, a prover may hold it. The keys it covers are committed
	// already, so a crash before the commit leaves a state file the
	// database still satisfies.
	if err := ttpstate.Write(a.statePath(), &ttpstate.State{Checkpoint: string(msg)}); err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("revocation: committing: %w", err)
	}
	return &Published{Checkpoint: msg, Size: cp.Size, Root: cp.Root, Time: now, TreePath: path}, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func count(ctx context.Context, q querier) (uint64, error) {
	var n int64
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(seq)+1, 0) FROM revoked`).Scan(&n); err != nil {
		return 0, fmt.Errorf("revocation: %w", err)
	}
	return uint64(n), nil
}

// Size returns the number of revoked keys.
func (a *Authority) Size(ctx context.Context) (uint64, error) { return count(ctx, a.db) }

// keysQuery selects keys in publication order for feed.QueryKeys.
const keysQuery = `SELECT key FROM revoked WHERE seq >= ? AND seq < ? ORDER BY seq`

// Checkpoint returns the latest signed sorted-tree head.
func (a *Authority) Checkpoint(ctx context.Context) ([]byte, error) {
	var msg []byte
	err := a.db.QueryRowContext(ctx, `SELECT note FROM checkpoints ORDER BY id DESC LIMIT 1`).Scan(&msg)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, feed.ErrNoCheckpoint
	}
	if err != nil {
		return nil, fmt.Errorf("revocation: reading checkpoint: %w", err)
	}
	return msg, nil
}

// Feed is the authority's feed for provers.
func (a *Authority) Feed() feed.Source { return authFeed{a} }

type authFeed struct{ a *Authority }

func (f authFeed) LatestCheckpoint(ctx context.Context) ([]byte, error) { return f.a.Checkpoint(ctx) }

func (f authFeed) Keys(ctx context.Context, start uint64, count int) ([][32]byte, error) {
	return feed.QueryKeys(ctx, f.a.db, keysQuery, start, start+uint64(max(0, min(count, feed.MaxKeys))))
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
