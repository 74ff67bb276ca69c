// Package ctlog is pkie's certificate transparency log: an append-only
// RFC 6962 Merkle tree of certificates with signed checkpoints, inclusion
// and consistency proofs, and the PEC paper's "extended tree" (
// §5.1).
//
// Besides the append-only tree, the log periodically builds a sorted Merkle
// tree (package sortedtree) over SHA-256 of every logged certificate and
// signs a sorted-tree head (package checkpoint's Head: not a checkpoint,
// since successive sorted trees are snapshots, not consistent versions of
// one log) with a timestamp, under the origin and key name of the log's
// origin plus "/sorted", bound to the log checkpoint whose certificates it
// holds. Each head of a new tree is appended to the log itself as a leaf of
// type SortedRootEntry; the append-only history so anchors every sorted
// root, and provers need only the small sorted tree: they rebuild it from
// the log's key feed (package feed) and prove presence or absence.
//
// Storage is one SQLite file (WAL, synchronous=FULL) in the log's directory
// holding every leaf, every complete Merkle subtree hash (so proofs are
// lookups, never recomputation) and every checkpoint signed. All state lives
// in the database, so several processes (a server, "pkie log add", "pkie log
// build") may share one directory.
package oldctlog

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"database/sql"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/atomicfile"
)

// Files in a log directory.
const (
	DBFile         = "log.db"
	KeyFile        = "log.key" // note signer key, 0600
	PubFile        = "log.pub" // note verifier key
	SortedTreeFile = "sorted.tree"
)

var hasher = rfc6962.DefaultHasher

// Checkpoint kinds stored in the checkpoints table.
const (
	kindLog    = 0
	kindSorted = 1
)

const schema = `
CREATE TABLE IF NOT EXISTS leaves (
	idx   INTEGER PRIMARY KEY,
	ts    INTEGER NOT NULL,
	type  INTEGER NOT NULL,
	leaf  BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS nodes (
	level INTEGER NOT NULL,
	idx   INTEGER NOT NULL,
	hash  BLOB NOT NULL,
	PRIMARY KEY (level, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS certs (
	seq   INTEGER PRIMARY KEY,
	key   BLOB NOT NULL UNIQUE,
	idx   INTEGER NOT NULL,
	ts    INTEGER NOT NULL,
	chain BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
	id    INTEGER PRIMARY KEY,
	kind  INTEGER NOT NULL,
	size  INTEGER NOT NULL,
	ts    INTEGER NOT NULL,
	note  BLOB NOT NULL,
	entry INTEGER
);
CREATE INDEX IF NOT EXISTS checkpoints_kind ON checkpoints (kind, id);
-- Entries joins leaves to certs by leaf index; without this index SQLite
-- builds a transient one over all certificates for every page, which makes
-- reading the whole log (a monitor, an audit) quadratic.
CREATE INDEX IF NOT EXISTS certs_idx ON certs (idx);
`

// Options configure an opened log.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Roots, if set, is the pool every submitted chain must verify to
	// (ignoring expiry, as CT logs do). Nil accepts any parseable chain.
	Roots *x509.CertPool
	// Logf, if set, is told when Open adopts the database's latest
	// checkpoint as the last signed one (the first start of a log created
	// before StateFile existed), and of every temporary file a sorted-tree
	// build killed half way left, which Open removes.
	Logf func(format string, args ...any)
	// NoStateCheck opens the log without comparing the database with
	// StateFile, for an audit that reports the comparison (CheckState)
	// instead of refusing to open. Such a log refuses to append (and so to
	// sign) anything, and leaves StateFile alone.
	NoStateCheck bool

	fresh bool // Init: nothing signed yet, by design
}

// Log is an open log directory. Its methods are safe for concurrent use.
type Log struct {
	db     *sql.DB
	dir    string
	origin string
	signer note.Signer
	// headSigner signs sorted-tree heads: the log's key under the name
	// SortedOrigin (checkpoint.HeadSigner).
	headSigner note.Signer
	verifier   note.Verifier
	vkey       string
	now        func() time.Time
	roots      *x509.CertPool

	buildMu sync.Mutex // one sorted-tree build at a time in this process

	unchecked bool // opened with NoStateCheck: appends refused
}

// Init creates a log in dir (created 0700 if missing) whose checkpoints
// carry origin, writing a fresh Ed25519 key. It returns the verifier key
// clients pin. Init refuses a directory that already holds a key.
func Init(dir, origin string) (vkey string, err error) {
	// Validate before anything is written: a failed init must leave
	// nothing behind that a rerun would refuse to overwrite.
	if err := checkpoint.ValidOrigin(origin); err != nil {
		return "", fmt.Errorf("ctlog: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("ctlog: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFile)); err == nil {
		return "", fmt.Errorf("ctlog: %s already holds a log key; refusing to replace it", dir)
	}
	skey, vkey, err := checkpoint.GenerateKey(origin)
	if err != nil {
		return "", fmt.Errorf("ctlog: origin %q: %w", origin, err)
	}
	// Exclusive: of two inits racing on one directory, the loser must
	// not replace the key the winner may already have signed with.
	if err := atomicfile.CreateExclusive(filepath.Join(dir, KeyFile), []byte(skey+"\n"), 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("ctlog: %s already holds a log key; refusing to replace it", dir)
		}
		return "", fmt.Errorf("ctlog: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, PubFile), []byte(vkey+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("ctlog: %w", err)
	}
	l, err := Open(dir, Options{fresh: true})
	if err != nil {
		return "", err
	}
	defer l.Close()
	// Sign the empty tree so the log has a checkpoint from the start.
	a, err := l.begin(context.Background())
	if err != nil {
		return "", err
	}
	if err := a.commit(); err != nil {
		return "", err
	}
	return vkey, nil
}

// Open opens the log in dir, created by Init. Unless o.NoStateCheck, it
// refuses (an error wrapping ErrBehind) a database that does not hold the
// last checkpoint the log signed, as recorded in StateFile; a log without
// a state file adopts its database's latest checkpoint, and one with
// neither is refused. It then removes the temporary files of sorted-tree
// builds that were killed before they finished (none while a build in any
// process is writing one).
func Open(dir string, o Options) (*Log, error) {
	signer, err := checkpoint.ReadSignerFile(filepath.Join(dir, KeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ctlog: reading the log key (run \"pkie log init\" first?): %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	vkeyb, err := os.ReadFile(filepath.Join(dir, PubFile))
	if err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	vkey := strings.TrimSpace(string(vkeyb))
	verifier, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("ctlog: %s: %w", filepath.Join(dir, PubFile), err)
	}
	if verifier.Name() != signer.Name() || verifier.KeyHash() != signer.KeyHash() {
		return nil, fmt.Errorf("ctlog: %s and %s hold different keys", KeyFile, PubFile)
	}
	headSigner, err := checkpoint.HeadSigner(signer, verifier)
	if err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	db, err := openDB(filepath.Join(dir, DBFile))
	if err != nil {
		return nil, err
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	l := &Log{db: db, dir: dir, origin: signer.Name(), signer: signer, headSigner: headSigner, verifier: verifier,
		vkey: vkey, now: now, roots: o.Roots, unchecked: o.NoStateCheck && !o.fresh}
	if !o.fresh && !o.NoStateCheck {
		if err := l.checkState(context.Background(), o.Logf); err != nil {
			db.Close()
			return nil, err
		}
		// An audit (NoStateCheck) looks and changes nothing.
		if _, err := l.removeStaleTemps(o.Logf); err != nil {
			db.Close()
			return nil, err
		}
	}
	return l, nil
}

func openDB(path string) (*sql.DB, error) {
	// synchronous(FULL): a log must not lose an entry it has acknowledged
	// with an SCT. _txlock=immediate takes the write lock at BEGIN, so two
	// writers queue on busy_timeout instead of deadlocking on upgrade.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("ctlog: opening %s: %w", path, err)
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("ctlog: creating schema in %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		db.Close()
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	return db, nil
}

// Close records the last commit as committed in StateFile (see there) and
// closes the database.
func (l *Log) Close() error {
	if !l.unchecked {
		l.recordCommitted(context.Background())
	}
	return l.db.Close()
}

// Origin is the log's checkpoint origin (its key's name).
func (l *Log) Origin() string { return l.origin }

// SortedOrigin is the origin, and key name, of the sorted tree's heads.
func (l *Log) SortedOrigin() string { return SortedOrigin(l.origin) }

// SortedOrigin returns the sorted-tree head origin for a log origin.
func SortedOrigin(logOrigin string) string { return checkpoint.HeadOrigin(logOrigin) }

// VerifierKey is the note verifier key clients pin.
func (l *Log) VerifierKey() string { return l.vkey }

// Verifier is the log's note verifier.
func (l *Log) Verifier() note.Verifier { return l.verifier }

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Size returns the number of leaves in the log.
func (l *Log) Size(ctx context.Context) (uint64, error) {
	return querySize(ctx, l.db)
}

type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func querySize(ctx context.Context, q querier) (uint64, error) {
	var n int64
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(idx)+1, 0) FROM leaves`).Scan(&n); err != nil {
		return 0, fmt.Errorf("ctlog: reading log size: %w", err)
	}
	return uint64(n), nil
}

func queryCertCount(ctx context.Context, q querier) (uint64, error) {
	var n int64
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(seq)+1, 0) FROM certs`).Scan(&n); err != nil {
		return 0, fmt.Errorf("ctlog: counting certificates: %w", err)
	}
	return uint64(n), nil
}

func nodeHash(ctx context.Context, q querier, id compact.NodeID) ([]byte, error) {
	var h []byte
	err := q.QueryRowContext(ctx, `SELECT hash FROM nodes WHERE level = ? AND idx = ?`, id.Level, int64(id.Index)).Scan(&h)
	if err != nil {
		return nil, fmt.Errorf("ctlog: reading node (%d,%d): %w", id.Level, id.Index, err)
	}
	return h, nil
}

func nodeHashes(ctx context.Context, q querier, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := nodeHash(ctx, q, id)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// compactRange loads the compact range [0, size) from the stored nodes.
func compactRange(ctx context.Context, q querier, size uint64) (*compact.Range, error) {
	hashes, err := nodeHashes(ctx, q, compact.RangeNodes(0, size, nil))
	if err != nil {
		return nil, err
	}
	f := &compact.RangeFactory{Hash: hasher.HashChildren}
	return f.NewRange(0, size, hashes)
}

func rootOf(r *compact.Range) ([32]byte, error) {
	var root [32]byte
	if r.End() == 0 {
		copy(root[:], hasher.EmptyRoot())
		return root, nil
	}
	h, err := r.GetRootHash(nil)
	if err != nil {
		return root, fmt.Errorf("ctlog: computing root: %w", err)
	}
	copy(root[:], h)
	return root, nil
}

// RootAt returns the root hash of the log's first size leaves.
func (l *Log) RootAt(ctx context.Context, size uint64) ([32]byte, error) {
	n, err := l.Size(ctx)
	if err != nil {
		return [32]byte{}, err
	}
	if size > n {
		return [32]byte{}, fmt.Errorf("ctlog: size %d beyond the log's %d leaves", size, n)
	}
	r, err := compactRange(ctx, l.db, size)
	if err != nil {
		return [32]byte{}, err
	}
	return rootOf(r)
}

// appender appends leaves inside one write transaction.
type appender struct {
	l       *Log
	ctx     context.Context
	tx      *sql.Tx
	rng     *compact.Range
	insLeaf *sql.Stmt
	insNode *sql.Stmt
	err     error
}

func (l *Log) begin(ctx context.Context) (*appender, error) {
	if l.unchecked {
		return nil, errors.New("ctlog: this log was opened without checking its database against " + StateFile + " (for an audit); it signs nothing")
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("ctlog: beginning transaction: %w", err)
	}
	a := &appender{l: l, ctx: ctx, tx: tx}
	fail := func(err error) (*appender, error) { tx.Rollback(); return nil, err }
	size, err := querySize(ctx, tx)
	if err != nil {
		return fail(err)
	}
	if a.rng, err = compactRange(ctx, tx, size); err != nil {
		return fail(err)
	}
	if a.insLeaf, err = tx.PrepareContext(ctx, `INSERT INTO leaves (idx, ts, type, leaf) VALUES (?, ?, ?, ?)`); err != nil {
		return fail(err)
	}
	if a.insNode, err = tx.PrepareContext(ctx, `INSERT INTO nodes (level, idx, hash) VALUES (?, ?, ?)`); err != nil {
		return fail(err)
	}
	return a, nil
}

// append adds one leaf and every subtree hash it completes.
func (a *appender) append(lf *Leaf) (uint64, error) {
	in, err := lf.Marshal()
	if err != nil {
		return 0, err
	}
	idx := a.rng.End()
	if _, err := a.insLeaf.ExecContext(a.ctx, int64(idx), int64(lf.Timestamp), int(lf.Type), in); err != nil {
		return 0, fmt.Errorf("ctlog: storing leaf %d: %w", idx, err)
	}
	lh := LeafHash(in)
	err = a.rng.Append(lh[:], func(id compact.NodeID, h []byte) {
		if a.err == nil {
			_, a.err = a.insNode.ExecContext(a.ctx, id.Level, int64(id.Index), h)
		}
	})
	if err == nil {
		err = a.err
	}
	if err != nil {
		return 0, fmt.Errorf("ctlog: storing hashes for leaf %d: %w", idx, err)
	}
	return idx, nil
}

func (a *appender) rollback() { a.tx.Rollback() }

// commit signs a checkpoint of the new size and commits.
func (a *appender) commit() error {
	defer a.tx.Rollback()
	root, err := rootOf(a.rng)
	if err != nil {
		return err
	}
	now := a.l.now()
	msg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: a.l.origin, Size: a.rng.End(), Root: root, Time: now}, a.l.signer)
	if err != nil {
		return fmt.Errorf("ctlog: signing checkpoint: %w", err)
	}
	// From the commit on, the checkpoint and the SCTs it covers may be
	// served: record it first (see StateFile), beside the last committed
	// one, read before this one is stored.
	if err := a.recordPending(msg); err != nil {
		return fmt.Errorf("ctlog: %w", err)
	}
	if _, err := a.tx.ExecContext(a.ctx, `INSERT INTO checkpoints (kind, size, ts, note) VALUES (?, ?, ?, ?)`,
		kindLog, int64(a.rng.End()), now.UnixMilli(), msg); err != nil {
		return fmt.Errorf("ctlog: storing checkpoint: %w", err)
	}
	if err := a.tx.Commit(); err != nil {
		return fmt.Errorf("ctlog: committing: %w", err)
	}
	return nil
}

// AddResult is the outcome of adding one chain.
type AddResult struct {
	Index     uint64   // the certificate's leaf index
	Key       [32]byte // SHA-256 of the leaf certificate
	SCT       *SCT
	Duplicate bool // the certificate was already logged; Index and SCT are the original ones
}

// ParseChain parses a submitted chain: PEM (one or more CERTIFICATE
// blocks) or a single DER certificate. The leaf comes first.
func ParseChain(b []byte) ([][]byte, error) {
	if len(b) == 0 {
		return nil, errors.New("ctlog: empty chain")
	}
	var chain [][]byte
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		chain = append(chain, blk.Bytes)
	}
	if len(chain) == 0 {
		if strings.Contains(string(b[:min(len(b), 64)]), "-----BEGIN") {
			return nil, errors.New("ctlog: PEM input holds no CERTIFICATE block")
		}
		chain = [][]byte{b}
	}
	return chain, nil
}

// RejectedError reports a submitted chain the log refuses (unparseable,
// too big, or to no accepted root), as opposed to the log failing.
type RejectedError struct{ Err error }

func (e *RejectedError) Error() string { return e.Err.Error() }
func (e *RejectedError) Unwrap() error { return e.Err }

// checkChain parses every certificate of a submitted chain (leaf first)
// and returns the path the log keeps for it, leaf first: with roots, the
// shortest chain that verifies the leaf to one of them, the root included
// (RFC 6962 §3.1); without, the longest prefix of the submitted chain in
// which each certificate was issued by the next (see issuerPath). Whatever
// else the submitter sent is dropped, so an entry costs the log no more than
// the path that explains it.
func (l *Log) checkChain(chain [][]byte) ([][]byte, error) {
	if len(chain) == 0 {
		return nil, errors.New("ctlog: empty chain")
	}
	if len(chain) > MaxChainCerts {
		return nil, fmt.Errorf("ctlog: chain of %d certificates, at most %d accepted", len(chain), MaxChainCerts)
	}
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		if len(der) > MaxCertBytes {
			return nil, fmt.Errorf("ctlog: certificate %d is %d bytes, at most %d accepted", i, len(der), MaxCertBytes)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("ctlog: certificate %d: %w", i, err)
		}
		certs[i] = c
	}
	var path []*x509.Certificate
	if l.roots == nil {
		path = issuerPath(certs)
	} else {
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		// Logs accept expired certificates: verify at the leaf's own start.
		chains, err := certs[0].Verify(x509.VerifyOptions{Roots: l.roots, Intermediates: inter,
			CurrentTime: certs[0].NotBefore.Add(time.Second), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err != nil {
			return nil, fmt.Errorf("ctlog: chain does not verify to the log's accepted roots: %w", err)
		}
		path = chains[0]
		for _, c := range chains[1:] {
			if len(c) < len(path) {
				path = c
			}
		}
	}
	out := make([][]byte, len(path))
	for i, c := range path {
		out[i] = c.Raw
	}
	return out, nil
}

// issuerPath returns the longest prefix of certs (leaf first) in which each
// certificate names the next as its issuer and the next one's key verifies
// its signature, stopping at a self-signed certificate (a root ends a path)
// and at a certificate already on it. It is what a log that checks no roots
// can still vouch for: the certificates that issued the leaf, not whatever
// else came with it.
func issuerPath(certs []*x509.Certificate) []*x509.Certificate {
	n := 1
	for ; n < len(certs); n++ {
		child, parent := certs[n-1], certs[n]
		if bytes.Equal(child.RawIssuer, child.RawSubject) && child.CheckSignatureFrom(child) == nil {
			break
		}
		if !bytes.Equal(child.RawIssuer, parent.RawSubject) || child.CheckSignatureFrom(parent) != nil {
			break
		}
		if slices.ContainsFunc(certs[:n], func(c *x509.Certificate) bool { return c.Equal(parent) }) {
			break
		}
	}
	return certs[:n]
}

// AddChain logs a chain (leaf first) and returns the leaf's SCT. A
// certificate already logged gets its original index and SCT back. The
// entry keeps the leaf and the path that verified it (see checkChain).
func (l *Log) AddChain(ctx context.Context, chain [][]byte) (*AddResult, error) {
	rs, err := l.AddChains(ctx, [][][]byte{chain})
	if err != nil {
		return nil, err
	}
	return &rs[0], nil
}

// AddChains logs several chains in one transaction and one checkpoint: the
// bulk path. Any invalid chain fails the whole batch before anything is
// written. Each entry keeps the leaf and the path that verified it (see
// checkChain), not every certificate submitted with it.
func (l *Log) AddChains(ctx context.Context, chains [][][]byte) ([]AddResult, error) {
	paths := make([][][]byte, len(chains))
	for i, c := range chains {
		var err error
		if paths[i], err = l.checkChain(c); err != nil {
			if len(chains) > 1 {
				err = fmt.Errorf("chain %d: %w", i, err)
			}
			return nil, &RejectedError{Err: err}
		}
	}
	a, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer a.rollback()
	seq, err := queryCertCount(ctx, a.tx)
	if err != nil {
		return nil, err
	}
	insCert, err := a.tx.PrepareContext(ctx, `INSERT INTO certs (seq, key, idx, ts, chain) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	out := make([]AddResult, len(chains))
	ts := uint64(l.now().UnixMilli())
	seen := map[[32]byte]int{}
	for i, chain := range paths {
		key := CertKey(chain[0])
		if j, ok := seen[key]; ok {
			out[i] = out[j]
			out[i].Duplicate = true
			continue
		}
		var idx, ots int64
		err := a.tx.QueryRowContext(ctx, `SELECT idx, ts FROM certs WHERE key = ?`, key[:]).Scan(&idx, &ots)
		switch {
		case err == nil:
			sct, err := signSCT(l.signer, chain[0], uint64(ots))
			if err != nil {
				return nil, err
			}
			out[i] = AddResult{Index: uint64(idx), Key: key, SCT: sct, Duplicate: true}
			continue
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("ctlog: looking up certificate: %w", err)
		}
		li, err := a.append(&Leaf{Timestamp: ts, Type: X509Entry, Data: chain[0]})
		if err != nil {
			return nil, err
		}
		if _, err := insCert.ExecContext(ctx, int64(seq), key[:], int64(li), int64(ts), encodeChain(chain[1:])); err != nil {
			return nil, fmt.Errorf("ctlog: storing certificate: %w", err)
		}
		seq++
		sct, err := signSCT(l.signer, chain[0], ts)
		if err != nil {
			return nil, err
		}
		out[i] = AddResult{Index: li, Key: key, SCT: sct}
		seen[key] = i
	}
	if err := a.commit(); err != nil {
		return nil, err
	}
	return out, nil
}

// encodeChain concatenates DER certificates, each with a 3-byte length, as
// RFC 6962's ASN.1Cert lists are.
func encodeChain(certs [][]byte) []byte {
	b := []byte{} // never NULL in the database
	for _, c := range certs {
		n := len(c)
		b = append(b, byte(n>>16), byte(n>>8), byte(n))
		b = append(b, c...)
	}
	return b
}

func decodeChain(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 3 {
			return nil, errors.New("ctlog: truncated stored chain")
		}
		n := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		if len(b) < 3+n {
			return nil, errors.New("ctlog: truncated stored chain")
		}
		out = append(out, b[3:3+n])
		b = b[3+n:]
	}
	return out, nil
}

// LookupSCT returns the SCT and leaf index of a logged certificate, by its
// key (SHA-256 of its DER). ok is false if it was never logged.
func (l *Log) LookupSCT(ctx context.Context, key [32]byte) (sct *SCT, index uint64, ok bool, err error) {
	var idx, ts int64
	err = l.db.QueryRowContext(ctx, `SELECT idx, ts FROM certs WHERE key = ?`, key[:]).Scan(&idx, &ts)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("ctlog: looking up certificate: %w", err)
	}
	var leaf []byte
	if err := l.db.QueryRowContext(ctx, `SELECT leaf FROM leaves WHERE idx = ?`, idx).Scan(&leaf); err != nil {
		return nil, 0, false, fmt.Errorf("ctlog: reading leaf %d: %w", idx, err)
	}
	lf, err := ParseLeaf(leaf)
	if err != nil {
		return nil, 0, false, err
	}
	sct, err = signSCT(l.signer, lf.Data, uint64(ts))
	return sct, uint64(idx), err == nil, err
}

// Checkpoint returns the latest signed log checkpoint.
func (l *Log) Checkpoint(ctx context.Context) ([]byte, error) {
	return l.latestCheckpoint(ctx, kindLog)
}

func (l *Log) latestCheckpoint(ctx context.Context, kind int) ([]byte, error) {
	var msg []byte
	err := l.db.QueryRowContext(ctx, `SELECT note FROM checkpoints WHERE kind = ? ORDER BY id DESC LIMIT 1`, kind).Scan(&msg)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoCheckpoint
	}
	if err != nil {
		return nil, fmt.Errorf("ctlog: reading checkpoint: %w", err)
	}
	return msg, nil
}

var errNoCheckpoint = errors.New("ctlog: no checkpoint signed yet")

// Checkpoints returns the signed log checkpoints, oldest first, at most
// limit of the newest.
func (l *Log) Checkpoints(ctx context.Context, sorted bool, limit int) ([][]byte, error) {
	kind := kindLog
	if sorted {
		kind = kindSorted
	}
	rows, err := l.db.QueryContext(ctx, `SELECT note FROM (SELECT id, note FROM checkpoints WHERE kind = ? ORDER BY id DESC LIMIT ?) ORDER BY id`, kind, limit)
	if err != nil {
		return nil, fmt.Errorf("ctlog: reading checkpoints: %w", err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var m []byte
		if err := rows.Scan(&m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// InclusionProof returns the RFC 6962 inclusion proof of leaf index in the
// tree of the given size. Positions outside the log are a *RangeError.
func (l *Log) InclusionProof(ctx context.Context, index, size uint64) ([][]byte, error) {
	return l.proof(ctx, size, func() (proof.Nodes, error) { return proof.Inclusion(index, size) })
}

// ConsistencyProof returns the RFC 6962 consistency proof between two
// sizes.
func (l *Log) ConsistencyProof(ctx context.Context, size1, size2 uint64) ([][]byte, error) {
	return l.proof(ctx, size2, func() (proof.Nodes, error) { return proof.Consistency(size1, size2) })
}

// RangeError reports a proof or entries request that names positions the
// log cannot answer for (an index past the size, a size past the log, an
// empty range): the caller's mistake, unlike a storage failure.
type RangeError struct{ Err error }

func (e *RangeError) Error() string { return e.Err.Error() }
func (e *RangeError) Unwrap() error { return e.Err }

// proof answers a proof over a tree of the given size from the stored
// subtree hashes: nodes names the hashes it needs.
func (l *Log) proof(ctx context.Context, size uint64, nodes func() (proof.Nodes, error)) ([][]byte, error) {
	n, err := l.Size(ctx)
	if err != nil {
		return nil, err
	}
	if size > n {
		return nil, &RangeError{fmt.Errorf("ctlog: size %d beyond the log's %d leaves", size, n)}
	}
	ns, err := nodes()
	if err != nil {
		return nil, &RangeError{fmt.Errorf("ctlog: %w", err)}
	}
	h, err := nodeHashes(ctx, l.db, ns.IDs)
	if err != nil {
		return nil, err
	}
	return ns.Rehash(h, hasher.HashChildren)
}

// Entry is one log entry as served to monitors.
type Entry struct {
	Index     uint64   `json:"index"`
	LeafInput []byte   `json:"leaf_input"` // the RFC 6962 MerkleTreeLeaf
	Chain     [][]byte `json:"chain,omitempty"`
}

// Bounds on one Entries page. A page ends at whichever comes first; it
// always holds at least one entry, and one entry (a certificate and at most
// MaxChainCerts-1 issuers of at most MaxCertBytes each) is always under
// MaxEntriesPageBytes, so that bound holds for every page.
const (
	MaxEntries          = 1000
	MaxEntriesPageBytes = 1 << 20 // stored bytes: leaves plus chains, before base64
)

// Entries returns entries [start, end): at most MaxEntries, and fewer once
// their leaves and chains reach MaxEntriesPageBytes. A caller wanting more
// asks again from the last index returned plus one. An empty range is a
// *RangeError.
func (l *Log) Entries(ctx context.Context, start, end uint64) ([]Entry, error) {
	if end <= start {
		return nil, &RangeError{fmt.Errorf("ctlog: empty range [%d, %d)", start, end)}
	}
	end = min(end, start+MaxEntries)
	rows, err := l.db.QueryContext(ctx, `SELECT l.idx, l.leaf, c.chain FROM leaves l LEFT JOIN certs c ON c.idx = l.idx WHERE l.idx >= ? AND l.idx < ? ORDER BY l.idx`, int64(start), int64(end))
	if err != nil {
		return nil, fmt.Errorf("ctlog: reading entries: %w", err)
	}
	defer rows.Close()
	var out []Entry
	total := 0
	for rows.Next() {
		var e Entry
		var idx int64
		var chain []byte
		if err := rows.Scan(&idx, &e.LeafInput, &chain); err != nil {
			return nil, err
		}
		n := len(e.LeafInput) + len(chain)
		if len(out) > 0 && total+n > MaxEntriesPageBytes {
			break
		}
		total += n
		e.Index = uint64(idx)
		if e.Chain, err = decodeChain(chain); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
