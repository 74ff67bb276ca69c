package oldctlog

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/feed"
	"github.com/pkie/pkie/sortedtree"
)

// KeyList is a published sorted tree as an auditor reads it: its keys in
// stored order. *sortedtree.Tree is one.
type KeyList interface {
	Size() uint64
	Key(i uint64) [32]byte
}

// AuditCheck is one audit finding.
type AuditCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// AuditReport is the outcome of an audit. The audit passed if every check
// is OK.
type AuditReport struct {
	LogSize    uint64       `json:"log_size"`
	SortedSize uint64       `json:"sorted_size"`
	SortedRoot string       `json:"sorted_root"`
	Checks     []AuditCheck `json:"checks"`
}

// OK reports whether every check passed.
func (r *AuditReport) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return len(r.Checks) > 0
}

func (r *AuditReport) add(name string, err error) bool {
	c := AuditCheck{Name: name, OK: err == nil}
	if err != nil {
		c.Detail = err.Error()
	}
	r.Checks = append(r.Checks, c)
	return err == nil
}

// forever is the maximum age an auditor allows: it checks history, not
// freshness.
const forever = 100 * 365 * 24 * time.Hour

// CheckSortedOrder checks that tree's keys strictly ascend (sorted, no
// duplicates) and returns the RFC 6962 root of the keys in stored order,
// computed here rather than trusted from the file.
func CheckSortedOrder(tree KeyList) ([32]byte, error) {
	f := &compact.RangeFactory{Hash: hasher.HashChildren}
	r := f.NewEmptyRange(0)
	var prev [32]byte
	var firstErr error
	for i := uint64(0); i < tree.Size(); i++ {
		k := tree.Key(i)
		if i > 0 && firstErr == nil {
			switch c := bytes.Compare(prev[:], k[:]); {
			case c == 0:
				firstErr = fmt.Errorf("key %d duplicates key %d (%x)", i, i-1, k[:8])
			case c > 0:
				firstErr = fmt.Errorf("key %d (%x…) sorts before key %d (%x…)", i, k[:8], i-1, prev[:8])
			}
		}
		prev = k
		lh := sortedtree.LeafHash(k)
		if err := r.Append(lh[:], nil); err != nil {
			return [32]byte{}, err
		}
	}
	root, err := rootOf(r)
	if err != nil {
		return root, err
	}
	return root, firstErr
}

// CheckSameSet checks that tree holds exactly the keys in logKeys (any
// order, no duplicates expected in logKeys).
func CheckSameSet(tree KeyList, logKeys [][32]byte) error {
	want := slices.Clone(logKeys)
	slices.SortFunc(want, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	if uint64(len(want)) != tree.Size() {
		return fmt.Errorf("tree holds %d keys, the log's first %d certificates", tree.Size(), len(want))
	}
	got := make([][32]byte, tree.Size())
	for i := range got {
		got[i] = tree.Key(uint64(i))
	}
	slices.SortFunc(got, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	for i := range want {
		if got[i] != want[i] {
			if bytes.Compare(got[i][:], want[i][:]) < 0 {
				return fmt.Errorf("tree holds %x…, which the log never logged", got[i][:8])
			}
			return fmt.Errorf("tree lacks logged certificate %x…", want[i][:8])
		}
	}
	return nil
}

// AuditOptions select what Audit checks. Zero values mean the log's own
// latest data.
type AuditOptions struct {
	TreePath         string // the published sorted tree; default the log's
	SortedCheckpoint []byte // the signed sorted-tree head to audit; default the latest
	Previous         []byte // a log checkpoint seen earlier; default the one before the latest
	Now              time.Time
}

// Audit checks a published sorted tree against the log: its head's
// signature and origin, keys sorted without duplicates, root recomputed from
// the keys; the log checkpoint the head is bound to signed by the log, one
// of the log's own tree (the stored entries at that size hash to its root),
// and holding exactly the tree's keys as its certificates; a head of this
// tree appended to the log and included under the latest log checkpoint;
// and that checkpoint consistent with the previous one.
func (l *Log) Audit(ctx context.Context, o AuditOptions) (*AuditReport, error) {
	rep := &AuditReport{}
	if o.Now.IsZero() {
		o.Now = l.now()
	}
	if o.TreePath == "" {
		o.TreePath = filepath.Join(l.dir, SortedTreeFile)
	}
	var err error
	if o.SortedCheckpoint == nil {
		if o.SortedCheckpoint, err = l.SortedCheckpoint(ctx); err != nil {
			return nil, fmt.Errorf("%w (run \"pkie log build\" first)", err)
		}
	}
	logCPs, err := l.Checkpoints(ctx, false, 2)
	if err != nil {
		return nil, err
	}
	if len(logCPs) == 0 {
		return nil, errNoCheckpoint
	}
	latest := logCPs[len(logCPs)-1]
	if o.Previous == nil && len(logCPs) == 2 {
		o.Previous = logCPs[0]
	}

	head, err := checkpoint.OpenHeadAnyAge(o.SortedCheckpoint, l.verifier)
	if !rep.add("sorted-tree head signed by the log, bound to a log checkpoint it signed", err) {
		return rep, nil
	}
	rep.SortedSize, rep.SortedRoot = head.Size, hex.EncodeToString(head.Root[:])

	tree, err := sortedtree.Open(o.TreePath)
	if rep.add("sorted tree file opens", err) {
		defer tree.Close()
		if rep.add("tree size matches the head", sizeMatch(tree.Size(), head.Size)) {
			root, err := CheckSortedOrder(tree)
			rep.add("keys sorted without duplicates", err)
			if err == nil && root != head.Root {
				err = fmt.Errorf("keys hash to %x, the head signs %x", root, head.Root)
			}
			rep.add("root recomputed from keys matches the head", err)
			keys, err := feed.QueryKeys(ctx, l.db, keysQuery, 0, head.Size)
			if err == nil {
				err = CheckSameSet(tree, keys)
			}
			rep.add("same set as the log's certificates", err)
		}
	}

	lcp, err := checkpoint.Open(latest, l.verifier, l.origin, forever, forever, o.Now)
	if !rep.add("log checkpoint signed by the log", err) {
		return rep, nil
	}
	rep.LogSize = lcp.Size
	rep.add("stored entries hash to the signed log root", l.checkStoredTree(ctx, lcp))
	rep.add("the head's log checkpoint is the log's, and its certificates are the tree's", l.checkBinding(ctx, head, lcp))
	rep.add("sorted root appended to the log", l.checkExtended(ctx, head, lcp))

	if o.Previous != nil {
		rep.add("log checkpoint consistent with the previous one", l.checkConsistent(ctx, o.Previous, lcp, o.Now))
	}
	l.auditState(ctx, rep)
	return rep, nil
}

// checkBinding checks the log checkpoint head is bound to against the log
// under lcp: at most lcp's size, the root of the log's first entries at its
// size, and holding exactly head.Size certificates, which are the first
// head.Size of the key feed (whose set the tree is compared with).
func (l *Log) checkBinding(ctx context.Context, head *checkpoint.Head, lcp *checkpoint.Checkpoint) error {
	b := head.Log
	if b.Size > lcp.Size {
		return fmt.Errorf("the head is bound to a log of %d entries, the log's checkpoint signs %d", b.Size, lcp.Size)
	}
	root, err := l.RootAt(ctx, b.Size)
	if err != nil {
		return err
	}
	if root != b.Root {
		return fmt.Errorf("the log's first %d entries hash to %x, the head is bound to root %x", b.Size, root, b.Root)
	}
	var n int64
	if err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM certs WHERE idx < ?`, int64(b.Size)).Scan(&n); err != nil {
		return fmt.Errorf("counting certificates: %w", err)
	}
	if uint64(n) != head.Size {
		return fmt.Errorf("the log's first %d entries hold %d certificates, the tree %d keys", b.Size, n, head.Size)
	}
	return nil
}

// checkStoredTree recomputes the log tree lcp signs from the stored
// entries alone: every leaf hash from its stored leaf, every subtree hash
// from those, the root from them. Proofs and the sorted tree are served from
// the stored hashes and the certs table, never from the leaves, so an entry
// rewritten in the database would otherwise go unnoticed here: each stored
// hash the recomputation completes must match, each certificate entry's
// recorded key must be its certificate's, and the root must be the signed
// one.
func (l *Log) checkStoredTree(ctx context.Context, lcp *checkpoint.Checkpoint) error {
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("reading the log: %w", err)
	}
	defer tx.Rollback()
	node, err := tx.PrepareContext(ctx, `SELECT hash FROM nodes WHERE level = ? AND idx = ?`)
	if err != nil {
		return fmt.Errorf("reading the log: %w", err)
	}
	defer node.Close()
	rows, err := tx.QueryContext(ctx, `SELECT l.idx, l.leaf, c.key, n.hash FROM leaves l LEFT JOIN certs c ON c.idx = l.idx LEFT JOIN nodes n ON n.level = 0 AND n.idx = l.idx WHERE l.idx < ? ORDER BY l.idx`, int64(lcp.Size))
	if err != nil {
		return fmt.Errorf("reading entries: %w", err)
	}
	defer rows.Close()
	f := &compact.RangeFactory{Hash: hasher.HashChildren}
	rng := f.NewEmptyRange(0)
	var mismatch error
	visit := func(id compact.NodeID, h []byte) {
		if mismatch != nil || id.Level == 0 { // leaf hashes: compared below
			return
		}
		var stored []byte
		if err := node.QueryRowContext(ctx, id.Level, int64(id.Index)).Scan(&stored); err != nil {
			mismatch = fmt.Errorf("stored hash (%d,%d): %w", id.Level, id.Index, err)
			return
		}
		if !bytes.Equal(stored, h) {
			mismatch = fmt.Errorf("entries hash to %x… at subtree (%d,%d), the stored tree holds %x…", h[:8], id.Level, id.Index, stored[:min(len(stored), 8)])
		}
	}
	for rows.Next() {
		var idx int64
		var leaf, key, stored []byte
		if err := rows.Scan(&idx, &leaf, &key, &stored); err != nil {
			return fmt.Errorf("reading entries: %w", err)
		}
		if uint64(idx) != rng.End() {
			return fmt.Errorf("entry %d is missing", rng.End())
		}
		lf, err := ParseLeaf(leaf)
		if err != nil {
			return fmt.Errorf("entry %d: %w", idx, err)
		}
		switch {
		case lf.Type == X509Entry && key == nil:
			return fmt.Errorf("certificate entry %d has no certificate record", idx)
		case lf.Type == X509Entry:
			if k := CertKey(lf.Data); !bytes.Equal(key, k[:]) {
				return fmt.Errorf("entry %d holds certificate %x…, its record says %x…", idx, k[:8], key[:min(len(key), 8)])
			}
		case key != nil:
			return fmt.Errorf("entry %d of type %#x has a certificate record", idx, lf.Type)
		}
		lh := LeafHash(leaf)
		if !bytes.Equal(stored, lh[:]) {
			return fmt.Errorf("entry %d hashes to %x…, the stored tree holds %x… for it", idx, lh[:8], stored[:min(len(stored), 8)])
		}
		if err := rng.Append(lh[:], visit); err != nil {
			return err
		}
		if mismatch != nil {
			return mismatch
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading entries: %w", err)
	}
	if rng.End() != lcp.Size {
		return fmt.Errorf("the log holds %d entries, the checkpoint signs %d", rng.End(), lcp.Size)
	}
	root, err := rootOf(rng)
	if err != nil {
		return err
	}
	if root != lcp.Root {
		return fmt.Errorf("the %d stored entries hash to %x, the checkpoint signs %x", lcp.Size, root, lcp.Root)
	}
	return nil
}

// auditState compares the database with the last checkpoint the log
// recorded apart from it (StateFile): a database that lost entries, or was
// replaced by another history, fails here even when it is consistent in
// itself.
func (l *Log) auditState(ctx context.Context, rep *AuditReport) {
	const name = "database holds the last checkpoint the log signed (" + StateFile + ")"
	err := l.CheckState(ctx)
	if errors.Is(err, os.ErrNotExist) {
		rep.Checks = append(rep.Checks, AuditCheck{Name: name, OK: true,
			Detail: "no " + StateFile + " yet (a log created before there was one writes it at its next start): nothing to compare"})
		return
	}
	rep.add(name, err)
}

func sizeMatch(got, want uint64) error {
	if got != want {
		return fmt.Errorf("tree holds %d keys, checkpoint says %d", got, want)
	}
	return nil
}

// checkExtended checks that a head of the same tree as head (itself, or
// the one appended before a build that found nothing changed) is a
// SortedRootEntry leaf included in the log tree lcp.
func (l *Log) checkExtended(ctx context.Context, head *checkpoint.Head, lcp *checkpoint.Checkpoint) error {
	idx, ok, err := l.SortedEntry(ctx, head)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no head of this sorted tree is in the log")
	}
	if idx >= lcp.Size {
		return fmt.Errorf("sorted root at index %d is past the log checkpoint's size %d", idx, lcp.Size)
	}
	es, err := l.Entries(ctx, idx, idx+1)
	if err != nil || len(es) != 1 {
		return fmt.Errorf("reading entry %d: %v", idx, err)
	}
	lf, err := ParseLeaf(es[0].LeafInput)
	if err != nil {
		return err
	}
	if lf.Type != SortedRootEntry {
		return fmt.Errorf("entry %d is not a sorted-tree head", idx)
	}
	if a, err := checkpoint.OpenHeadAnyAge(lf.Data, l.verifier); err != nil || a.Size != head.Size || a.Root != head.Root {
		return fmt.Errorf("entry %d is not a head of this sorted tree", idx)
	}
	p, err := l.InclusionProof(ctx, idx, lcp.Size)
	if err != nil {
		return err
	}
	lh := LeafHash(es[0].LeafInput)
	return proof.VerifyInclusion(hasher, idx, lcp.Size, lh[:], p, lcp.Root[:])
}

func (l *Log) checkConsistent(ctx context.Context, prevMsg []byte, lcp *checkpoint.Checkpoint, now time.Time) error {
	prev, err := checkpoint.Open(prevMsg, l.verifier, l.origin, forever, forever, now)
	if err != nil {
		return fmt.Errorf("previous checkpoint: %w", err)
	}
	if prev.Size > lcp.Size {
		return fmt.Errorf("log shrank from %d to %d leaves", prev.Size, lcp.Size)
	}
	p, err := l.ConsistencyProof(ctx, prev.Size, lcp.Size)
	if err != nil {
		return err
	}
	return proof.VerifyConsistency(hasher, prev.Size, lcp.Size, p, prev.Root[:], lcp.Root[:])
}

// VerifierFromKey parses a note verifier key (checkpoint.NewVerifier, so
// that the sorted-tree heads' key can be derived from it).
func VerifierFromKey(vkey string) (note.Verifier, error) {
	v, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("ctlog: verifier key: %w", err)
	}
	return v, nil
}
