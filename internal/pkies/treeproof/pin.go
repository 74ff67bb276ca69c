package treeproof

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/sortedtree"
)

// PKIE names, as they appear in responses and on the command line.
const (
	CT         = "ct"
	Revocation = "revocation"
)

// DefaultOrigin returns the origin of the sorted-tree heads a PKIE's TTP
// key signs: checkpoint.HeadOrigin of its name, for both PKIEs.
func DefaultOrigin(pkie string, v note.Verifier) string {
	return checkpoint.HeadOrigin(v.Name())
}

// Pin is what a client trusts about one TTP: its key, and how old a signed
// sorted-tree head may be.
type Pin struct {
	// Verifier is the TTP's key, from checkpoint.NewVerifier (ParsePin):
	// its log checkpoints' key, from which its heads' is derived.
	Verifier note.Verifier
	Origin   string        // the heads' origin; empty means DefaultOrigin, the only one accepted
	MaxAge   time.Duration // reject heads older than this; required
	Skew     time.Duration // allow heads this far in the future; zero means 1 minute

	heads *headCache // heads already verified with Verifier (ParsePin); nil: none kept
}

// headCache keeps the last few heads a Pin verified, by their exact signed
// bytes. A prover serves one head for every proof until the TTP signs the
// next, and verifying it costs two Ed25519 verifications (the head and its
// bound log checkpoint), more than the proof: a verified copy of the same
// bytes needs only its freshness checked again, at each use.
type headCache struct {
	mu    sync.Mutex
	heads map[string]*checkpoint.Head
	order []string
}

// headCacheSize covers a head and its successor for each of a client's
// pins, with room for a prover that lags.
const headCacheSize = 4

func (c *headCache) lookup(msg string) *checkpoint.Head {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.heads[msg]
}

func (c *headCache) store(msg string, h *checkpoint.Head) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heads == nil {
		c.heads = map[string]*checkpoint.Head{}
	}
	if _, ok := c.heads[msg]; ok {
		return
	}
	if len(c.order) == headCacheSize {
		delete(c.heads, c.order[0])
		c.order = c.order[1:]
	}
	c.heads[msg] = h
	c.order = append(c.order, msg)
}

// ParsePin builds a Pin from a note verifier key.
func ParsePin(vkey string, maxAge time.Duration) (Pin, error) {
	v, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return Pin{}, fmt.Errorf("pinned key: %w", err)
	}
	return Pin{Verifier: v, MaxAge: maxAge, heads: &headCache{}}, nil
}

// open verifies a head as checkpoint.OpenHead does (its signature, origin
// and age, and the log checkpoint it is bound to signed by the same key)
// and that the bound log can hold the tree: for CT a log of N entries holds
// at most N certificates, for revocation the key log is the tree's keys.
// A client tracks no state, so the bound log's consistency with earlier
// ones is the prover's and the auditors' to check.
func (p Pin) open(pkie, msg string, now time.Time) (*checkpoint.Head, error) {
	if p.Verifier == nil {
		return nil, errors.New("no pinned key")
	}
	if p.MaxAge <= 0 {
		return nil, errors.New("no maximum checkpoint age configured")
	}
	if p.Origin != "" && p.Origin != DefaultOrigin(pkie, p.Verifier) {
		return nil, fmt.Errorf("pinned origin %q: the heads of key %q have origin %q", p.Origin, p.Verifier.Name(), DefaultOrigin(pkie, p.Verifier))
	}
	skew := p.Skew
	if skew == 0 {
		skew = time.Minute
	}
	// A head cached for one PKIE passed that PKIE's checks only.
	if h := p.heads.lookup(pkie + "\n" + msg); h != nil {
		if err := h.CheckTime(p.MaxAge, skew, now); err != nil {
			return nil, err
		}
		return h, nil
	}
	h, err := checkpoint.OpenHead([]byte(msg), p.Verifier, p.MaxAge, skew, now)
	if err != nil {
		return nil, err
	}
	if err := CheckLogSize(pkie, h); err != nil {
		return nil, err
	}
	p.heads.store(pkie+"\n"+msg, h)
	return h, nil
}

// CheckLogSize checks that the log a head of the PKIE named pkie (CT or
// Revocation) is bound to can hold its tree: a prover checks it at sync, a
// verifier at every head it opens.
func CheckLogSize(pkie string, h *checkpoint.Head) error {
	switch {
	case pkie == CT && h.Log.Size < h.Size:
		return fmt.Errorf("head of %d certificates bound to a log of only %d entries", h.Size, h.Log.Size)
	case pkie == Revocation && h.Log.Size != h.Size:
		return fmt.Errorf("head of %d revocations bound to a key log of %d", h.Size, h.Log.Size)
	}
	return nil
}

// Result is what a verified response asserts.
type Result struct {
	PKIE           string    `json:"pkie"`
	Present        bool      `json:"present"` // the proof shows the key in the tree
	TreeSize       uint64    `json:"tree_size"`
	TreeRoot       [32]byte  `json:"-"`               // the head's sorted-tree root, naming the head in reasons
	CheckpointTime time.Time `json:"checkpoint_time"` // the head's time
	// LogSize is the size of the log checkpoint the head is bound to,
	// signed by the same key.
	LogSize uint64 `json:"log_size"`
	// For CT: the certificate is logged (present, or absent with an SCT
	// younger than the maximum merge delay).
	Logged  bool      `json:"logged,omitempty"`
	SCTTime time.Time `json:"sct_time,omitzero"`
	// For revocation: the certificate is revoked (present).
	Revoked bool `json:"revoked,omitempty"`
}

func verifyProof(r *Response, key [32]byte, pkie string, pin Pin, now time.Time) (*Result, *checkpoint.Head, error) {
	if r.PKIE != pkie {
		return nil, nil, fmt.Errorf("response is for %q, not %q", r.PKIE, pkie)
	}
	if r.Key != key {
		return nil, nil, fmt.Errorf("response proves key %x…, not %x…", r.Key[:8], key[:8])
	}
	cp, err := pin.open(pkie, r.Checkpoint, now)
	if err != nil {
		return nil, nil, fmt.Errorf("%s sorted-tree head rejected: %w", pkie, err)
	}
	var pr sortedtree.Proof
	if err := pr.UnmarshalBinary(r.Proof); err != nil {
		return nil, nil, fmt.Errorf("%s proof: %w", pkie, err)
	}
	present, err := pr.Verify(key, cp.Size, cp.Root)
	if err != nil {
		return nil, nil, fmt.Errorf("%s proof does not verify against the signed root: %w", pkie, err)
	}
	return &Result{PKIE: pkie, Present: present, TreeSize: cp.Size, TreeRoot: cp.Root, CheckpointTime: cp.Time, LogSize: cp.Log.Size}, cp, nil
}

// VerifyCT checks a CT prover's response for the certificate der against
// the log's pinned key. The certificate is logged if the proof shows its
// hash in the sorted tree, or if it is absent but the response carries the
// log's SCT for it no older than mmd, the log's maximum merge delay (the PEC paper,
// 004 §5.1): the log promised to merge it and has not had to yet. Any
// other outcome is an error saying why.
func VerifyCT(der []byte, r *Response, pin Pin, mmd time.Duration, now time.Time) (*Result, error) {
	key := sha256.Sum256(der)
	res, _, err := verifyProof(r, key, CT, pin, now)
	if err != nil {
		return nil, err
	}
	if res.Present {
		res.Logged = true
		return res, nil
	}
	if r.SCT == nil {
		return res, errors.New("certificate is absent from the log's sorted tree and has no SCT")
	}
	if err := ctwire.VerifySCT(pin.Verifier, der, r.SCT); err != nil {
		return res, fmt.Errorf("certificate is absent from the log's sorted tree and its SCT is invalid: %w", err)
	}
	res.SCTTime = r.SCT.Time()
	skew := pin.Skew
	if skew == 0 {
		skew = time.Minute
	}
	if res.SCTTime.After(now.Add(skew)) {
		return res, fmt.Errorf("certificate's SCT is dated %s, in the future", res.SCTTime.UTC().Format(time.RFC3339))
	}
	if age := now.Sub(res.SCTTime); age > mmd {
		return res, fmt.Errorf("certificate is absent from the log's sorted tree although its SCT is %s old, beyond the %s maximum merge delay", age.Round(time.Second), mmd)
	}
	res.Logged = true
	return res, nil
}

// VerifyRevocation checks a revocation prover's response for a revocation
// key (package internal/pkies/revocation's CertKey) against the authority's pinned key. It returns
// the result whatever the answer; Result.Revoked says it.
func VerifyRevocation(key [32]byte, r *Response, pin Pin, now time.Time) (*Result, error) {
	res, _, err := verifyProof(r, key, Revocation, pin, now)
	if err != nil {
		return nil, err
	}
	res.Revoked = res.Present
	return res, nil
}
