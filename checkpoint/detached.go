package checkpoint

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// DetachedSize is the size of a detached signature: an 8-byte timestamp and
// the signed note's 4-byte key hash and 64-byte Ed25519 signature.
const DetachedSize = 8 + 4 + 64

// Detach verifies msg with v and returns the DetachedSize bytes a verifier
// needs besides a proof to rebuild and check the signed checkpoint: the
// origin is pinned by the verifier, and size and root follow from the proof
// (the root is what the proof recomputes), so only the time and v's
// signature have to travel. That keeps the per-connection cost of a signed
// proof at the proof plus 76 bytes instead of the whole note. Checkpoints
// with extension lines other than the timestamp cannot be detached.
func Detach(msg []byte, v note.Verifier) ([]byte, error) {
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrSignature, v.Name(), err)
	}
	c, err := Parse([]byte(n.Text))
	if err != nil {
		return nil, err
	}
	if c.Time.IsZero() || len(c.Extensions) > 0 {
		return nil, fmt.Errorf("%w: only a checkpoint with a timestamp and no other extension lines can be detached", ErrMalformed)
	}
	for _, s := range n.Sigs {
		if s.Name != v.Name() || s.Hash != v.KeyHash() {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(s.Base64)
		if err != nil || len(sig) != 4+64 {
			return nil, fmt.Errorf("%w: signature by %s is not Ed25519", ErrMalformed, v.Name())
		}
		out := make([]byte, 8, DetachedSize)
		binary.BigEndian.PutUint64(out, uint64(c.Time.UnixMilli()))
		return append(out, sig...), nil
	}
	return nil, fmt.Errorf("%w %s", ErrSignature, v.Name())
}

// OpenDetached rebuilds the checkpoint for origin, size and root (the root a
// proof recomputed) with the time and signature in det, and opens it as Open
// does: the signature by v must verify, and the time must be within maxAge
// and skew of now. A proof that does not lead to the signed root therefore
// fails here, as a bad signature.
func OpenDetached(det []byte, origin string, size uint64, root [32]byte, v note.Verifier, maxAge, skew time.Duration, now time.Time) (*Checkpoint, error) {
	if len(det) != DetachedSize {
		return nil, fmt.Errorf("%w: detached signature of %d bytes, want %d", ErrMalformed, len(det), DetachedSize)
	}
	if v == nil {
		return nil, fmt.Errorf("checkpoint: no verifier")
	}
	ms := binary.BigEndian.Uint64(det)
	if ms == 0 || ms > 1<<53 {
		return nil, fmt.Errorf("%w: detached timestamp %d", ErrMalformed, ms)
	}
	c := Checkpoint{Origin: origin, Size: size, Root: root, Time: time.UnixMilli(int64(ms))}
	body, err := c.Body()
	if err != nil {
		return nil, err
	}
	name := v.Name()
	if strings.ContainsAny(name, " \n") {
		return nil, fmt.Errorf("checkpoint: verifier name %q", name)
	}
	var msg bytes.Buffer
	msg.Grow(len(body) + len(name) + 100)
	msg.Write(body)
	msg.WriteString("\n\u2014 ")
	msg.WriteString(name)
	msg.WriteByte(' ')
	msg.WriteString(base64.StdEncoding.EncodeToString(det[8:]))
	msg.WriteByte('\n')
	return Open(msg.Bytes(), v, origin, maxAge, skew, now)
}
