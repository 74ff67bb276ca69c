package ctinclusion

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// MaxWitnesses bounds a witness policy. A checkpoint holds at most
// MaxCheckpoint bytes, room for about fifty cosignature lines.
const MaxWitnesses = 32

// Note verifier key algorithms a witness key may be given in: a plain
// Ed25519 note key, as witnesses publish theirs, or the cosignature/v1
// form of the same key (C2SP signed-note, tlog-cosignature).
const (
	algEd25519       = 0x01
	algCosignatureV1 = 0x04
)

// Witnesses is a witness policy: the witnesses whose cosignatures a
// static-ct-api checkpoint must carry, and how many of them (the
// quorum). A witness (C2SP tlog-witness) cosigns a checkpoint only after
// checking that the log's tree grew append-only from the last one it
// cosigned, so a quorum of independent witnesses makes it hard for a log
// to show one client a tree that the rest of the world does not see (a
// split view). Cosignatures are cosignature/v1 (C2SP tlog-cosignature):
// Ed25519 over the checkpoint body and a timestamp, as extra signature
// lines of the checkpoint note.
//
// A Witnesses is made by NewWitnesses and is immutable. It is identified
// by its keys and quorum, not only by the names and 4-byte key hashes a
// note matches signatures with, so that a Verifier never takes a tree head
// verified under one policy as verified under another.
type Witnesses struct {
	witnesses []witness
	quorum    int
	id        [32]byte
}

type witness struct {
	label    string // the name, or name+hash when another witness has the name
	verifier note.Verifier
}

// NewWitnesses returns the policy "quorum of the witnesses with these
// keys". Each key is a note verifier key, "<name>+<hash>+<base64>", of an
// Ed25519 key: in the cosignature/v1 form (algorithm 0x04) or the plain
// Ed25519 form (0x01), whose key is taken for cosignature/v1 as
// transparency-dev/formats/note's NewVerifierForCosignatureV1 does. The
// hash must be the key's. A quorum of zero means all of them. The same
// key may not be listed twice, under any name: one witness would count
// twice.
func NewWitnesses(keys []string, quorum int) (*Witnesses, error) {
	switch {
	case len(keys) == 0:
		return nil, fmt.Errorf("ctinclusion: a witness policy needs at least one witness key")
	case len(keys) > MaxWitnesses:
		return nil, fmt.Errorf("ctinclusion: %d witness keys, at most %d", len(keys), MaxWitnesses)
	case quorum < 0 || quorum > len(keys):
		return nil, fmt.Errorf("ctinclusion: witness quorum %d: want 1 to %d (the witnesses listed), or 0 for all", quorum, len(keys))
	}
	if quorum == 0 {
		quorum = len(keys)
	}
	w := &Witnesses{quorum: quorum}
	ids := make([][]byte, len(keys))
	names := make(map[string]int)
	for i, k := range keys {
		name, pub, err := parseWitnessKey(k)
		if err != nil {
			return nil, fmt.Errorf("ctinclusion: witness key %d (%.40q): %w", i+1, k, err)
		}
		for j := range i {
			if bytes.Equal(ids[j][len(ids[j])-32:], pub) {
				return nil, fmt.Errorf("ctinclusion: witness keys %d and %d are the same key: one witness would count twice", j+1, i+1)
			}
		}
		nv, err := fnote.NewVerifierForCosignatureV1(k)
		if err != nil {
			return nil, fmt.Errorf("ctinclusion: witness key %d (%.40q): %w", i+1, k, err)
		}
		ids[i] = append([]byte(name+"\n"), pub...)
		names[name]++
		w.witnesses = append(w.witnesses, witness{label: name, verifier: nv})
	}
	for i := range w.witnesses {
		if x := &w.witnesses[i]; names[x.label] > 1 {
			x.label += "+" + fmt.Sprintf("%08x", x.verifier.KeyHash())
		}
	}
	// The policy's identity: its keys, in any order, and its quorum.
	slices.SortFunc(ids, bytes.Compare)
	h := sha256.New()
	h.Write([]byte("pkie witness policy\n"))
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(quorum)))
	for _, id := range ids {
		h.Write(binary.BigEndian.AppendUint16(nil, uint16(len(id))))
		h.Write(id)
	}
	h.Sum(w.id[:0])
	return w, nil
}

// parseWitnessKey checks a witness's note verifier key and returns its
// name and Ed25519 public key.
func parseWitnessKey(k string) (name string, pub []byte, err error) {
	name, rest, ok1 := strings.Cut(k, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || name == "" || len(hash16) != 8 {
		return "", nil, fmt.Errorf("not a note verifier key (<name>+<hash>+<base64 key>)")
	}
	algKey, err := base64.StdEncoding.DecodeString(key64)
	if err != nil || len(algKey) != 1+32 {
		return "", nil, fmt.Errorf("the key is not the base64 of an algorithm byte and a 32-byte Ed25519 key")
	}
	if a := algKey[0]; a != algEd25519 && a != algCosignatureV1 {
		return "", nil, fmt.Errorf("key algorithm 0x%02x: a witness key is Ed25519 (0x01) or cosignature/v1 (0x04)", a)
	}
	hash, err := strconv.ParseUint(hash16, 16, 32)
	if err != nil {
		return "", nil, fmt.Errorf("key hash %q is not 8 hex digits", hash16)
	}
	sum := sha256.Sum256(append([]byte(name+"\n"), algKey...))
	if want := binary.BigEndian.Uint32(sum[:]); uint32(hash) != want {
		return "", nil, fmt.Errorf("key hash %s is not the key's (%08x): a mistyped key", hash16, want)
	}
	return name, algKey[1:], nil
}

// Quorum returns how many of the witnesses must have cosigned.
func (w *Witnesses) Quorum() int { return w.quorum }

// Len returns how many witnesses the policy lists.
func (w *Witnesses) Len() int { return len(w.witnesses) }

// String describes the policy: "2 of 3 witnesses (a, b, c)".
func (w *Witnesses) String() string {
	labels := make([]string, len(w.witnesses))
	for i, x := range w.witnesses {
		labels[i] = x.label
	}
	noun := "witnesses"
	if len(labels) == 1 {
		noun = "witness"
	}
	return fmt.Sprintf("%d of %d %s (%s)", w.quorum, len(labels), noun, strings.Join(labels, ", "))
}

// QuorumError says that a checkpoint, signed by its log, does not carry
// cosignatures from a quorum of the policy's witnesses. It is bad
// evidence (errors.Is(err, ErrBadEvidence)), never evidence against a
// certificate: a witness that has not cosigned yet, or a relay that
// dropped cosignatures, says nothing about the log's entries.
type QuorumError struct {
	Log     string   // the log's description, or its URL
	Quorum  int      // how many cosignatures the policy needs
	Listed  int      // how many witnesses it lists
	Signed  []string // the witnesses whose cosignatures verified
	Missing []string // the listed witnesses that did not cosign
	Invalid []string // listed witnesses whose cosignature lines did not verify
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ctinclusion: the checkpoint of log %s is cosigned by %d of the %d witnesses listed, short of the quorum of %d",
		e.Log, len(e.Signed), e.Listed, e.Quorum)
	if len(e.Signed) > 0 {
		fmt.Fprintf(&b, " (cosigned by %s", strings.Join(e.Signed, ", "))
		if len(e.Missing) > 0 {
			fmt.Fprintf(&b, "; not by %s", strings.Join(e.Missing, ", "))
		}
		b.WriteString(")")
	} else if len(e.Missing) > 0 {
		fmt.Fprintf(&b, " (not by %s)", strings.Join(e.Missing, ", "))
	}
	if len(e.Invalid) > 0 {
		fmt.Fprintf(&b, "; the cosignature of %s does not verify", strings.Join(e.Invalid, ", "))
	}
	return b.String()
}

// Unwrap makes a QuorumError bad evidence.
func (e *QuorumError) Unwrap() error { return ErrBadEvidence }

// check counts the witnesses of w whose cosignature on n, a checkpoint
// already verified with its log's key, verifies. Signature lines of keys
// w does not list are ignored, as is a witness's line that does not
// verify (a relay could have garbled it): neither counts. It returns the
// number of cosigners, or a *QuorumError when they are too few. It stops
// at the quorum: each cosignature costs an Ed25519 verification, and
// more than the quorum prove nothing more to this policy.
func (w *Witnesses) check(n *note.Note, log string) (int, error) {
	signed := make([]bool, len(w.witnesses))
	invalid := make([]bool, len(w.witnesses))
	msg := []byte(n.Text)
	count := 0
	for _, s := range n.UnverifiedSigs {
		if count >= w.quorum {
			return count, nil
		}
		for i, x := range w.witnesses {
			if s.Name != x.verifier.Name() || s.Hash != x.verifier.KeyHash() || signed[i] {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(s.Base64)
			if err == nil && len(raw) > 4 && x.verifier.Verify(msg, raw[4:]) {
				signed[i], invalid[i] = true, false
				count++
			} else {
				invalid[i] = true
			}
		}
	}
	if count >= w.quorum {
		return count, nil
	}
	e := &QuorumError{Log: log, Quorum: w.quorum, Listed: len(w.witnesses)}
	for i, x := range w.witnesses {
		switch {
		case signed[i]:
			e.Signed = append(e.Signed, x.label)
		case invalid[i]:
			e.Invalid = append(e.Invalid, x.label)
			e.Missing = append(e.Missing, x.label)
		default:
			e.Missing = append(e.Missing, x.label)
		}
	}
	return count, e
}
