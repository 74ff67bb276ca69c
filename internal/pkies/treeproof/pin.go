package treeproof

import (
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

// Pin is what a client trusts about one TTP: its key or keys, and how old
// a signed sorted-tree head may be.
//
// A third party that runs its log (the revocation authority) has one key:
// Verifier, from which its heads' key is derived, and LogVerifier is nil.
// A mirror of a CT log has two: Verifier is the mirror's own head key and
// LogVerifier the log's (ParseMirrorPin); a head verifies only if the
// mirror signed it and the log signed the checkpoint it is bound to.
type Pin struct {
	// Verifier is the TTP's key, from checkpoint.NewVerifier (ParsePin):
	// its log checkpoints' key, from which its heads' is derived; or, with
	// LogVerifier set, the mirror's head key itself.
	Verifier note.Verifier
	// LogVerifier is the key of the log a mirror follows
	// (checkpoint.NewLogVerifier), or nil for a TTP that runs its log.
	LogVerifier note.Verifier
	Origin      string        // the heads' origin; empty means the only one accepted (DefaultOrigin, or the mirror key's name)
	MaxAge      time.Duration // reject heads older than this; required
	Skew        time.Duration // allow heads this far in the future; zero means 1 minute

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

// ParseMirrorPin builds the Pin of a mirror of a log: headKey is the
// mirror's Ed25519 note verifier key, logKey the log's
// (checkpoint.NewLogVerifier: an RFC 6962 note key for a static-ct-api or
// RFC 6962 log).
func ParseMirrorPin(headKey, logKey string, maxAge time.Duration) (Pin, error) {
	v, err := checkpoint.NewVerifier(headKey)
	if err != nil {
		return Pin{}, fmt.Errorf("pinned mirror key: %w", err)
	}
	lv, err := checkpoint.NewLogVerifier(logKey)
	if err != nil {
		return Pin{}, fmt.Errorf("pinned log key: %w", err)
	}
	if lv.Name() == v.Name() {
		return Pin{}, fmt.Errorf("the mirror's key and the log's key are both named %q; the mirror signs under a name of its own", v.Name())
	}
	return Pin{Verifier: v, LogVerifier: lv, MaxAge: maxAge, heads: &headCache{}}, nil
}

// headOrigin returns the origin of the heads p accepts for pkie.
func (p Pin) headOrigin(pkie string) string {
	if p.LogVerifier != nil {
		return p.Verifier.Name()
	}
	return DefaultOrigin(pkie, p.Verifier)
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
	if p.Origin != "" && p.Origin != p.headOrigin(pkie) {
		return nil, fmt.Errorf("pinned origin %q: the heads of key %q have origin %q", p.Origin, p.Verifier.Name(), p.headOrigin(pkie))
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
	var h *checkpoint.Head
	var err error
	if p.LogVerifier != nil {
		h, err = checkpoint.OpenMirrorHead([]byte(msg), p.Verifier, p.LogVerifier, p.MaxAge, skew, now)
	} else {
		h, err = checkpoint.OpenHead([]byte(msg), p.Verifier, p.MaxAge, skew, now)
	}
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
// verifier at every head it opens. A CT log entry gives the sorted tree at
// most two keys (ctwire.EntryKeys: a final certificate with embedded SCTs
// logged as itself is also found by its precertificate's key), so a CT
// tree holds at most twice the log's entries.
func CheckLogSize(pkie string, h *checkpoint.Head) error {
	switch {
	case pkie == CT && h.Size > h.Log.Size && h.Size-h.Log.Size > h.Log.Size:
		return fmt.Errorf("head of %d keys bound to a log of only %d entries (at most two keys an entry)", h.Size, h.Log.Size)
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
	// signed by the log's key.
	LogSize uint64 `json:"log_size"`
	// LogTime is when the log signed that checkpoint, when known
	// (checkpoint.Head.LogTime).
	LogTime time.Time `json:"log_time,omitzero"`
	// For CT: the certificate is logged (present in the tree).
	Logged bool `json:"logged,omitempty"`
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
	return &Result{PKIE: pkie, Present: present, TreeSize: cp.Size, TreeRoot: cp.Root, CheckpointTime: cp.Time, LogSize: cp.Log.Size, LogTime: cp.LogTime()}, cp, nil
}

// VerifyCT checks a CT prover's response for the certificate chain (leaf
// first) against the pin: the key proven is recomputed from the chain
// (ctwire.ChainKey: the final certificate's precertificate key when it
// carries embedded SCTs, else the hash of the leaf), so a valid proof for
// another certificate fails. The certificate is logged if the proof shows
// its key in the sorted tree; an absence is an error naming the head it
// was proven under (the result is returned with it). SCT promises, for a
// certificate too young to be in the tree, come from the certificate
// itself, not from this proof. The pin must be a mirror's
// (ParseMirrorPin): a CT head is signed by the mirror that built the tree
// and bound to a checkpoint the log signed, and a pin of one key, as of a
// log that signed its own heads (pkie's earlier log), is refused.
func VerifyCT(chain [][]byte, r *Response, pin Pin, now time.Time) (*Result, error) {
	if pin.LogVerifier == nil {
		return nil, errors.New("ct pin without the log's key: pin the mirror's head key and the log's key (ParseMirrorPin)")
	}
	key, err := ctwire.ChainKey(chain)
	if err != nil {
		return nil, fmt.Errorf("certificate chain: %w", err)
	}
	res, _, err := verifyProof(r, key, CT, pin, now)
	if err != nil {
		return nil, err
	}
	if !res.Present {
		return res, errors.New("certificate is absent from the log's sorted tree")
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
