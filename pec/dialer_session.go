package pec

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/check"
)

// Session resumption (PEC paper, Appendix A). A resumed connection shows no
// certificate: the client accepts the one of the full handshake whose
// session it resumes. So the proofs of that handshake stay with the
// session: the Dialer stores them in the session state crypto/tls keeps
// (tls.SessionState.Extra), and a resumed connection finds them in the
// very session it resumed, whatever the cache's keys. A session is stored
// only once its connection was accepted: TLS 1.2 hands crypto/tls the
// session inside the handshake, before the proofs arrive, and the Dialer
// holds it back until the verdict.

// evidenceMagic prefixes the Dialer's entry in SessionState.Extra.
const evidenceMagic = "pkie-pec-evidence\x00"

// maxEvidence bounds an encoded entry: every proof at its largest, twice
// over for the encoding.
const maxEvidence = 2 * pkie.MaxRequests * (pkie.MaxProofBody + 512)

// sessionEvidence is what a full handshake's verification leaves with its
// session.
type sessionEvidence struct {
	// At is when the proofs were verified.
	At time.Time `json:"at"`
	// Leaf is the SHA-256 of the leaf certificate they are about.
	Leaf []byte `json:"leaf"`
	// Proofs are the proofs that arrived, by enhancement, as the cloud
	// delivered them (envelopes, unverified: they are verified again on
	// reuse).
	Proofs []storedProof `json:"proofs"`
}

type storedProof struct {
	ID    pkie.ID `json:"id"`
	Proof []byte  `json:"proof,omitempty"` // pkie.Proof envelope
	Err   string  `json:"err,omitempty"`
	From  string  `json:"from,omitempty"`
}

func newSessionEvidence(at time.Time, leaf []byte, results map[pkie.ID]check.ProofResult) *sessionEvidence {
	h := sha256.Sum256(leaf)
	ev := &sessionEvidence{At: at, Leaf: h[:]}
	for id, r := range results {
		sp := storedProof{ID: id, From: r.From}
		if r.Proof != nil {
			b, err := r.Proof.MarshalBinary()
			if err != nil {
				continue
			}
			sp.Proof = b
		} else if r.Err != nil {
			sp.Err = r.Err.Error()
		}
		ev.Proofs = append(ev.Proofs, sp)
	}
	return ev
}

// usable reports whether ev may stand for a resumed connection with chain
// at now.
func (ev *sessionEvidence) usable(now time.Time, chain [][]byte, maxAge time.Duration) bool {
	if ev == nil || len(chain) == 0 {
		return false
	}
	h := sha256.Sum256(chain[0])
	if !bytes.Equal(ev.Leaf, h[:]) {
		return false
	}
	age := now.Sub(ev.At)
	return age <= maxAge && age >= -time.Minute
}

// results returns the stored proofs as check consumes them.
func (ev *sessionEvidence) results() map[pkie.ID]check.ProofResult {
	out := make(map[pkie.ID]check.ProofResult, len(ev.Proofs))
	for _, sp := range ev.Proofs {
		from := "the resumed session's full handshake"
		if sp.From != "" {
			from += " (" + sp.From + ")"
		}
		r := check.ProofResult{From: from}
		if sp.Proof != nil {
			var p pkie.Proof
			if err := p.UnmarshalBinary(sp.Proof); err != nil {
				r.Err = fmt.Errorf("stored proof: %w", err)
			} else {
				r.Proof = &p
			}
		} else {
			r.Err = errors.New(sp.Err)
		}
		out[sp.ID] = r
	}
	return out
}

func (ev *sessionEvidence) encode() ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return append([]byte(evidenceMagic), b...), nil
}

// decodeEvidence parses one SessionState.Extra entry; ok is false for an
// entry that is not the Dialer's.
func decodeEvidence(b []byte) (ev *sessionEvidence, ok bool, err error) {
	if !bytes.HasPrefix(b, []byte(evidenceMagic)) {
		return nil, false, nil
	}
	if len(b) > maxEvidence {
		return nil, true, fmt.Errorf("session evidence of %d bytes exceeds %d", len(b), maxEvidence)
	}
	ev = &sessionEvidence{}
	if err := json.Unmarshal(b[len(evidenceMagic):], ev); err != nil {
		return nil, true, fmt.Errorf("session evidence: %w", err)
	}
	if len(ev.Leaf) != sha256.Size {
		return nil, true, fmt.Errorf("session evidence names a leaf hash of %d bytes", len(ev.Leaf))
	}
	if len(ev.Proofs) > pkie.MaxRequests {
		return nil, true, fmt.Errorf("session evidence holds %d proofs, at most %d", len(ev.Proofs), pkie.MaxRequests)
	}
	return ev, true, nil
}

// evidenceOf returns the Dialer's evidence stored with cs, or nil.
func evidenceOf(cs *tls.ClientSessionState) *sessionEvidence {
	_, state, err := cs.ResumptionState()
	if err != nil || state == nil {
		return nil
	}
	for _, e := range state.Extra {
		if ev, ok, err := decodeEvidence(e); ok {
			if err != nil {
				return nil
			}
			return ev
		}
	}
	return nil
}

// sessionView is one dial's view of the Dialer's session cache: it tells
// the dial which evidence came with the session offered for resumption,
// and stores the dial's sessions with the evidence it verified.
type sessionView struct {
	inner tls.ClientSessionCache
	st    *dialState
}

type heldSession struct {
	key string
	cs  *tls.ClientSessionState
}

func (v *sessionView) Get(key string) (*tls.ClientSessionState, bool) {
	cs, ok := v.inner.Get(key)
	if ok && cs != nil {
		ev := evidenceOf(cs)
		v.st.mu.Lock()
		v.st.offered = ev
		v.st.mu.Unlock()
	}
	return cs, ok
}

func (v *sessionView) Put(key string, cs *tls.ClientSessionState) {
	if cs == nil {
		// crypto/tls forgets a session it found unusable.
		v.inner.Put(key, nil)
		return
	}
	st := v.st
	st.mu.Lock()
	if !st.decided {
		st.held = append(st.held, heldSession{key, cs})
		st.mu.Unlock()
		return
	}
	accepted, ev := st.accepted, st.evidence
	st.mu.Unlock()
	if accepted {
		st.storeSession(key, cs, ev)
	}
}

// storeSession puts cs in the Dialer's cache with ev (nil: none) in its
// state, replacing any evidence it carried.
func (st *dialState) storeSession(key string, cs *tls.ClientSessionState, ev *sessionEvidence) {
	_, state, err := cs.ResumptionState()
	if err != nil || state == nil {
		return
	}
	extra := state.Extra[:0:0]
	for _, e := range state.Extra {
		if !bytes.HasPrefix(e, []byte(evidenceMagic)) {
			extra = append(extra, e)
		}
	}
	if ev != nil {
		b, err := ev.encode()
		if err != nil {
			return
		}
		extra = append(extra, b)
	}
	// cs was made for this Put alone, so its state is ours to change.
	state.Extra = extra
	st.d.sessions.Put(key, cs)
}
