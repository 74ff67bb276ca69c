package ctinclusion

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/lru"
	"github.com/pkie/pkie/internal/sct"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// ErrBadEvidence is wrapped by every Verify error that is not signed
// evidence against the SCT: a malformed Evidence, a tree head not signed
// by the log's key, a proof that does not lead to the signed root, a
// NotYet whose tree head covers the leaf index. Such evidence proves
// nothing, either way: whoever relayed it is at fault, not the
// certificate.
var ErrBadEvidence = errors.New("ctinclusion: bad evidence")

// MismatchError is signed evidence against an SCT: a tree head the log
// signed holds another leaf at the index the SCT's leaf_index names.
type MismatchError struct {
	Log       string   // the log's description, or its URL
	LeafIndex uint64   // where the SCT says its entry is
	TreeSize  uint64   // of the signed tree head
	Want, Got [32]byte // the SCT's leaf hash and the one the tree holds
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("ctinclusion: log %s signed a tree of %d entries that holds leaf %x… at index %d, not the SCT's entry (leaf %x…)",
		e.Log, e.TreeSize, e.Got[:6], e.LeafIndex, e.Want[:6])
}

// Result is what verified Evidence establishes.
type Result struct {
	Status Status
	// TreeSize is the size of the tree head the log signed.
	TreeSize uint64
	// CheckpointTime is when the log signed the tree head: the time in a
	// checkpoint's RFC6962NoteSignature, or the STH's timestamp. With the
	// SCT's time and the log's maximum merge delay it decides whether a
	// NotYet is a promise still running or a broken one.
	CheckpointTime time.Time
	// Cosigners is how many of VerifyOptions.Witnesses were found to have
	// cosigned the tree head: their quorum (Verify stops counting there);
	// zero without a witness policy.
	Cosigners int
}

// VerifyOptions are the options of VerifyWith.
type VerifyOptions struct {
	// Witnesses, when not nil, must have cosigned the tree head, their
	// quorum of them, on top of the log's own signature. Only a
	// static-ct-api checkpoint, a signed note, can carry cosignatures: an
	// RFC 6962 STH cannot, so with Witnesses set, evidence from an RFC 6962
	// log is bad evidence (ErrBadEvidence), whatever it says. A checkpoint
	// short of the quorum is a *QuorumError, bad evidence too, never a
	// *MismatchError, even when the log's signature on it shows another
	// entry at the SCT's leaf index: the caller asked for a tree head the
	// witnesses saw, and this is not one. LookupFailed evidence, which
	// carries no tree head, is unaffected.
	Witnesses *Witnesses
}

// Verify checks e against log, the SCT's log from the client's log list,
// for the SCT whose entry has RFC 6962 leaf hash leafHash
// (sct.Entry.LeafHash). It verifies the tree head's signature with the
// log's key (a static-ct-api checkpoint with log.NoteVerifier under
// log.Origin(), an RFC 6962 STH as RFC 6962 §3.5 says), then:
//
//   - Included: the audit path leads from leafHash at LeafIndex to the
//     signed root;
//   - NotYet: for a static-ct-api log, the signed tree is no larger than
//     LeafIndex (a tree that covers the index would show the entry, so a
//     NotYet for it is bad evidence);
//   - Conflict: the audit path leads from another leaf at LeafIndex to the
//     signed root: the Result and a *MismatchError;
//   - LookupFailed: nothing is signed; its Result and no error.
//
// An error is a *MismatchError (signed evidence against the SCT) or wraps
// ErrBadEvidence. Verify does not check that e is about the caller's SCT
// (Evidence.For does) nor how old the tree head is.
//
// Verify caches nothing; a Verifier keeps the tree heads it has verified.
func Verify(e *Evidence, log *loglist.Log, leafHash [32]byte) (*Result, error) {
	return (*Verifier)(nil).VerifyWith(e, log, leafHash, VerifyOptions{})
}

// VerifyWith is Verify with options: a witness policy the tree head must
// meet.
func VerifyWith(e *Evidence, log *loglist.Log, leafHash [32]byte, o VerifyOptions) (*Result, error) {
	return (*Verifier)(nil).VerifyWith(e, log, leafHash, o)
}

// For reports whether e is about s, the SCT the caller holds: the SCT's
// hash and log, and for an SCT with a leaf_index extension (a static-ct-api
// log's) the leaf index. A relay could otherwise answer with evidence
// about another SCT of the same log.
func (e *Evidence) For(s *sct.SCT) error {
	if e.SCTHash != s.Hash() {
		return fmt.Errorf("%w: it is about another SCT", ErrBadEvidence)
	}
	if e.LogID != s.LogID {
		return fmt.Errorf("%w: it is about log %x…, the SCT is from %x…", ErrBadEvidence, e.LogID[:6], s.LogID[:6])
	}
	if e.Status == LookupFailed {
		return nil
	}
	i, ok, err := s.LeafIndex()
	if err != nil {
		return fmt.Errorf("%w: the SCT's leaf_index: %v", ErrBadEvidence, err)
	}
	if ok && e.LeafIndex != i {
		return fmt.Errorf("%w: it is about leaf index %d, the SCT's leaf_index is %d", ErrBadEvidence, e.LeafIndex, i)
	}
	return nil
}

// A Verifier is Verify with a cache of the tree heads it has verified, by
// their bytes, so that a client that sees the same checkpoint on many
// connections checks its signature once. It is safe for concurrent use;
// a nil *Verifier caches nothing.
type Verifier struct {
	heads     *lru.Cache[headKey, treeHead]
	verifiers *lru.Cache[verifierKey, note.Verifier]
}

// NewVerifier returns a Verifier that remembers up to n tree heads.
func NewVerifier(n int) *Verifier {
	if n < 1 {
		n = 1
	}
	return &Verifier{heads: lru.New[headKey, treeHead](n), verifiers: lru.New[verifierKey, note.Verifier](n)}
}

// headKey names a verified tree head: the log (ID, kind and origin, which
// decide how it was verified), the witness policy it was verified under
// (zero for none: a head verified without witnesses is not witnessed) and
// the bytes.
type headKey struct {
	log       [32]byte
	kind      loglist.Kind
	origin    string
	witnesses [32]byte
	sum       [32]byte
}

type verifierKey struct {
	log    [32]byte
	origin string
}

// treeHead is a verified tree head.
type treeHead struct {
	size      uint64
	root      [32]byte
	time      time.Time
	cosigners int // of the witness policy it was verified under
}

// Verify is the package's Verify, with v's cache.
func (v *Verifier) Verify(e *Evidence, log *loglist.Log, leafHash [32]byte) (*Result, error) {
	return v.VerifyWith(e, log, leafHash, VerifyOptions{})
}

// VerifyWith is the package's VerifyWith, with v's cache. A tree head is
// cached with the witness policy it met, and taken from the cache only
// for the same policy.
func (v *Verifier) VerifyWith(e *Evidence, log *loglist.Log, leafHash [32]byte, o VerifyOptions) (*Result, error) {
	if err := e.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadEvidence, err)
	}
	if e.LogID != log.ID {
		return nil, fmt.Errorf("%w: evidence about log %x…, checked against log %s", ErrBadEvidence, e.LogID[:6], logName(log))
	}
	if e.Status == LookupFailed {
		return &Result{Status: LookupFailed}, nil
	}
	h, err := v.openHead(e.Checkpoint, log, o.Witnesses)
	if err != nil {
		return nil, err
	}
	r := &Result{Status: e.Status, TreeSize: h.size, CheckpointTime: h.time, Cosigners: h.cosigners}
	switch e.Status {
	case NotYet:
		if log.Kind == loglist.Static && h.size > e.LeafIndex {
			return nil, fmt.Errorf("%w: log %s's checkpoint of size %d covers leaf index %d, so it is not evidence the entry is missing",
				ErrBadEvidence, logName(log), h.size, e.LeafIndex)
		}
		return r, nil
	case Included:
		if err := verifyPath(e, h, leafHash); err != nil {
			return nil, fmt.Errorf("%w: log %s: %v", ErrBadEvidence, logName(log), err)
		}
		return r, nil
	case Conflict:
		if e.Leaf == leafHash {
			return nil, fmt.Errorf("%w: conflict evidence naming the SCT's own leaf", ErrBadEvidence)
		}
		if err := verifyPath(e, h, e.Leaf); err != nil {
			return nil, fmt.Errorf("%w: log %s: conflicting leaf: %v", ErrBadEvidence, logName(log), err)
		}
		return r, &MismatchError{Log: logName(log), LeafIndex: e.LeafIndex, TreeSize: h.size, Want: leafHash, Got: e.Leaf}
	}
	return nil, fmt.Errorf("%w: unknown status %d", ErrBadEvidence, e.Status)
}

// verifyPath checks e.Proof leads from leaf at e.LeafIndex to h's root.
func verifyPath(e *Evidence, h treeHead, leaf [32]byte) error {
	if e.LeafIndex >= h.size {
		return fmt.Errorf("leaf index %d is outside the signed tree of %d", e.LeafIndex, h.size)
	}
	p := make([][]byte, len(e.Proof))
	for i := range e.Proof {
		p[i] = e.Proof[i][:]
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, e.LeafIndex, h.size, leaf[:], p, h.root[:]); err != nil {
		return fmt.Errorf("the audit path of leaf index %d does not lead to the signed root of tree size %d: %v", e.LeafIndex, h.size, err)
	}
	return nil
}

// openHead verifies a tree head with log's key, and the cosignatures of
// w's witnesses when w is not nil, and returns what it says, from v's
// cache when it was verified before under the same policy.
func (v *Verifier) openHead(b []byte, log *loglist.Log, w *Witnesses) (treeHead, error) {
	var k headKey
	if v != nil {
		k = headKey{log: log.ID, kind: log.Kind, origin: log.Origin(), sum: sha256.Sum256(b)}
		if w != nil {
			k.witnesses = w.id
		}
		if h, ok := v.heads.Get(k); ok {
			return h, nil
		}
	}
	var h treeHead
	var err error
	switch {
	case log.Kind == loglist.Static:
		h, err = v.openCheckpoint(b, log, w)
	case log.Kind == loglist.RFC6962 && w != nil:
		err = fmt.Errorf("%w: log %s is an RFC 6962 log, whose signed tree heads cannot carry witness cosignatures, and %s must have cosigned",
			ErrBadEvidence, logName(log), w)
	case log.Kind == loglist.RFC6962:
		h, err = openSTH(b, log)
	default:
		err = fmt.Errorf("%w: log %s is of kind %q; want %q or %q", ErrBadEvidence, logName(log), log.Kind, loglist.Static, loglist.RFC6962)
	}
	if err == nil && v != nil {
		v.heads.Put(k, h)
	}
	return h, err
}

// openSTH verifies an STH (MarshalSTH) with log's key.
func openSTH(b []byte, log *loglist.Log) (treeHead, error) {
	sth, err := ParseSTH(b)
	if err != nil {
		return treeHead{}, fmt.Errorf("%w: %v", ErrBadEvidence, err)
	}
	if err := sth.verify(log.Key); err != nil {
		return treeHead{}, fmt.Errorf("%w: log %s: %v", ErrBadEvidence, logName(log), err)
	}
	return treeHead{size: sth.TreeSize, root: sth.Root, time: sth.Time()}, nil
}

// openCheckpoint verifies a static-ct-api checkpoint with the log's
// RFC 6962 note verifier, checks its origin, and reads the time in the
// log's RFC6962NoteSignature (C2SP static-ct-api: an 8-byte timestamp in
// ms after the 4-byte key hash).
func (v *Verifier) openCheckpoint(b []byte, log *loglist.Log, w *Witnesses) (treeHead, error) {
	nv, err := v.noteVerifier(log)
	if err != nil {
		return treeHead{}, err
	}
	n, err := note.Open(b, note.VerifierList(nv))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		if errors.As(err, &unverified) {
			return treeHead{}, fmt.Errorf("%w: the checkpoint is not signed by log %s's key", ErrBadEvidence, logName(log))
		}
		return treeHead{}, fmt.Errorf("%w: log %s's checkpoint: %v", ErrBadEvidence, logName(log), err)
	}
	c, err := checkpoint.Parse([]byte(n.Text))
	if err != nil {
		return treeHead{}, fmt.Errorf("%w: log %s's checkpoint: %v", ErrBadEvidence, logName(log), err)
	}
	if c.Origin != log.Origin() {
		return treeHead{}, fmt.Errorf("%w: checkpoint of origin %q, log %s's is %q", ErrBadEvidence, c.Origin, logName(log), log.Origin())
	}
	h := treeHead{size: c.Size, root: c.Root}
	for _, s := range n.Sigs {
		if s.Name != nv.Name() || s.Hash != nv.KeyHash() {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(s.Base64)
		if err != nil || len(raw) < 4+8 {
			return treeHead{}, fmt.Errorf("%w: log %s's checkpoint signature holds no timestamp", ErrBadEvidence, logName(log))
		}
		h.time = time.UnixMilli(int64(binary.BigEndian.Uint64(raw[4:12])))
	}
	if w != nil {
		if h.cosigners, err = w.check(n, logName(log)); err != nil {
			return treeHead{}, err
		}
	}
	return h, nil
}

// noteVerifier returns log's checkpoint verifier, from v's cache when it
// built it before: parsing the key is a good part of a cold Verify.
func (v *Verifier) noteVerifier(log *loglist.Log) (note.Verifier, error) {
	var k verifierKey
	if v != nil {
		k = verifierKey{log.ID, log.Origin()}
		if nv, ok := v.verifiers.Get(k); ok {
			return nv, nil
		}
	}
	nv, err := log.NoteVerifier()
	if err != nil {
		return nil, fmt.Errorf("%w: log %s's checkpoint key: %v", ErrBadEvidence, logName(log), err)
	}
	if v != nil {
		v.verifiers.Put(k, nv)
	}
	return nv, nil
}

// logName names a log in errors: its description, else its URL, else its
// ID.
func logName(l *loglist.Log) string {
	switch {
	case l.Description != "":
		return fmt.Sprintf("%q", l.Description)
	case l.URL != "":
		return l.URL
	}
	return fmt.Sprintf("%x…", l.ID[:8])
}
