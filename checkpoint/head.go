package checkpoint

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// A sorted-tree head is the signed statement a trusted third party makes
// about a sorted Merkle tree (package sortedtree): its size and root, when
// it was built, and the log checkpoint it was built from.
//
// It is not a checkpoint. A sorted tree is a fresh snapshot of a set, not
// an append-only log: a key inserted in the middle changes every later
// position, so two successive trees are not consistent in the RFC 6962
// sense. C2SP tlog-checkpoint forbids a log from signing mutually
// inconsistent checkpoints under one origin, and a witness would refuse
// them; so a head has its own statement type, which no checkpoint parser
// accepts (its second line is a type line, not a decimal size), under its
// own origin and key name. The body is:
//
//	<origin>
//	pkie sorted-tree-head v1
//	size <keys in the sorted tree, decimal>
//	root <sorted tree root, standard base64>
//	timestamp <milliseconds since the Unix epoch, decimal>
//	log <log origin> <log size> <log root, base64> [<log checkpoint timestamp, ms>]
//	log-signature <base64 of the log checkpoint's 4-byte key hash and signature>
//
// The log line names a C2SP checkpoint of an append-only log, signed by the
// log's key (named the log origin): the head says the sorted tree holds the
// keys that log held at that size. The head carries that checkpoint's
// signature (log-signature), so a verifier that pins only the log's key
// checks the bound checkpoint without fetching anything else, and one that
// tracks the log can check it is consistent with what it has seen.
//
// The bound checkpoint's timestamp field is there when its body has a
// timestamp line (pkie's own checkpoints); a static-ct-api checkpoint has
// none (its time is inside its RFC6962NoteSignature), and the field is
// left out. The log signature is the note signature's bytes whatever its
// algorithm: a 68-byte Ed25519 one, or an RFC6962NoteSignature (8-byte
// timestamp and a TLS DigitallySigned ECDSA signature) of about 90.
//
// Keys. Two kinds of third party sign heads. One that runs the log itself
// (a revocation authority and its key log) signs with its own Ed25519 key
// under the name HeadOrigin(log origin): the same key material as its log
// checkpoints, so a client or prover pins one verifier key and derives the
// head's (HeadVerifier; OpenHead). A mirror of someone else's log (a CT
// log that speaks static-ct-api or RFC 6962) signs with a key of its own,
// under that key's name, which is the head's origin; a client pins both
// keys (OpenMirrorHead). A signed-note key name is hashed into the key ID,
// so a derived key has its own key ID: a verifier of the log's key never
// accepts a head, nor a head verifier a checkpoint, and the two body types
// cannot be confused since neither parses as the other.
const HeadType = "pkie sorted-tree-head v1"

// Errors of OpenHead and ParseHead besides the checkpoint ones
// (ErrSignature, ErrMalformed, ErrOrigin, ErrStale, ErrFuture); test with
// errors.Is.
var (
	// ErrLogSignature means the log checkpoint a head names is not signed
	// by the log's key.
	ErrLogSignature = errors.New("checkpoint: the log checkpoint the sorted-tree head names is not signed by the log's key")
	// ErrLegacyHead means a sorted-tree root signed as a C2SP checkpoint,
	// as pkie signed them before sorted-tree heads had their own type.
	ErrLegacyHead = errors.New("checkpoint: a sorted-tree root signed as a log checkpoint (the format before sorted-tree heads)")
)

// Head is a signed statement of a sorted tree's size and root at a time,
// bound to the log checkpoint it was built from.
type Head struct {
	// Origin is the name of the key that signs the head: HeadOrigin of
	// Log.Origin for a third party that runs the log, the mirror's key
	// name for a mirror.
	Origin string
	Size   uint64 // keys in the sorted tree
	Root   [32]byte
	// Time is when the head was signed, to the millisecond; never zero.
	Time time.Time
	// Log is the log checkpoint the tree was built from: origin, size,
	// root and, if its body has a timestamp line, time; no other
	// extension lines.
	Log Checkpoint
	// LogSignature is the log key's note signature on Log: its 4-byte key
	// hash and signature, MinLogSignature to MaxLogSignature bytes.
	LogSignature []byte
	// LogSigned is when the log signed Log, as its signature says: set by
	// OpenMirrorHead, OpenHead and BindLog when Log carries no timestamp
	// line and the log's key is an RFC 6962 one (NewLogVerifier), whose
	// signature carries the time. Not part of the body; zero if unknown.
	LogSigned time.Time
}

// LogTime returns when the log signed the bound checkpoint: its timestamp
// line, or else the time in its signature (LogSigned); zero if neither is
// known.
func (h *Head) LogTime() time.Time {
	if !h.Log.Time.IsZero() {
		return h.Log.Time
	}
	return h.LogSigned
}

// HeadOrigin returns the origin, and key name, of the sorted-tree heads of
// the log with origin logOrigin.
func HeadOrigin(logOrigin string) string { return logOrigin + "/sorted" }

// Verifier is a note.Verifier that also gives its Ed25519 public key, from
// which HeadVerifier derives the head's verifier. NewVerifier returns one.
type Verifier interface {
	note.Verifier
	PublicKey() ed25519.PublicKey
}

type keyVerifier struct {
	note.Verifier
	pub ed25519.PublicKey
}

func (v keyVerifier) PublicKey() ed25519.PublicKey { return v.pub }

// parseEd25519Verifier parses a verifier key as note.NewVerifier does and
// keeps its public key.
func parseEd25519Verifier(vkey string) (Verifier, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	_, rest, _ := strings.Cut(vkey, "+")
	_, b64, _ := strings.Cut(rest, "+")
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) != 1+ed25519.PublicKeySize || key[0] != 1 {
		return nil, errors.New("not an Ed25519 signed-note key")
	}
	return keyVerifier{v, ed25519.PublicKey(key[1:])}, nil
}

// HeadVerifier returns the verifier of the sorted-tree heads signed with
// the key of v, a log key from NewVerifier: the same public key under the
// name HeadOrigin(v.Name()).
func HeadVerifier(v note.Verifier) (note.Verifier, error) {
	kv, ok := v.(Verifier)
	if !ok {
		return nil, fmt.Errorf("checkpoint: the verifier of %q does not give its public key (build it with checkpoint.NewVerifier)", v.Name())
	}
	vkey, err := note.NewEd25519VerifierKey(HeadOrigin(v.Name()), kv.PublicKey())
	if err != nil {
		return nil, fmt.Errorf("checkpoint: head key for %q: %w", v.Name(), err)
	}
	hv, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: head key for %q: %w", v.Name(), err)
	}
	return hv, nil
}

type renamedSigner struct {
	note.Signer
	name string
	hash uint32
}

func (s renamedSigner) Name() string    { return s.name }
func (s renamedSigner) KeyHash() uint32 { return s.hash }

// HeadSigner returns the signer of sorted-tree heads for the log signer s,
// whose verifier is v (from NewVerifier): the same private key under the
// name HeadOrigin(s.Name()). An Ed25519 signed-note signature covers the
// text only, so signing under another name is the same operation; the name
// and key hash on the signature line are what change.
func HeadSigner(s note.Signer, v note.Verifier) (note.Signer, error) {
	if s.Name() != v.Name() || s.KeyHash() != v.KeyHash() {
		return nil, fmt.Errorf("checkpoint: signer %q and verifier %q hold different keys", s.Name(), v.Name())
	}
	hv, err := HeadVerifier(v)
	if err != nil {
		return nil, err
	}
	return renamedSigner{s, hv.Name(), hv.KeyHash()}, nil
}

// Head body keywords.
const (
	headSize   = "size "
	headRoot   = "root "
	headLog    = "log "
	headLogSig = "log-signature "
)

// Bounds of a head's log signature (4-byte key hash and signature). The
// smallest is what an RFC6962NoteSignature needs before its signature
// bytes (so that a verifier never reads past a short one); the largest
// holds an RSA-4096 one with room to spare.
const (
	MinLogSignature = 4 + 8 + 4
	MaxLogSignature = 4 + 8 + 4 + 512
)

// Body returns the head text that is signed, or an error if h cannot be
// encoded.
func (h *Head) Body() ([]byte, error) {
	if h.Origin == "" || strings.ContainsAny(h.Origin, "\n") {
		return nil, fmt.Errorf("%w: head origin %q must be one non-empty line", ErrMalformed, h.Origin)
	}
	if h.Log.Origin == "" || strings.ContainsAny(h.Log.Origin, " \n") {
		return nil, fmt.Errorf("%w: log origin %q must be non-empty, without spaces", ErrMalformed, h.Log.Origin)
	}
	ms := h.Time.UnixMilli()
	if h.Time.IsZero() || ms <= 0 || !h.Log.Time.IsZero() && h.Log.Time.UnixMilli() <= 0 {
		return nil, fmt.Errorf("%w: head and log checkpoint need times after 1970", ErrMalformed)
	}
	if len(h.Log.Extensions) > 0 {
		return nil, fmt.Errorf("%w: a bound log checkpoint carries no extension lines besides its timestamp", ErrMalformed)
	}
	if n := len(h.LogSignature); n < MinLogSignature || n > MaxLogSignature {
		return nil, fmt.Errorf("%w: log signature of %d bytes, want %d to %d", ErrMalformed, n, MinLogSignature, MaxLogSignature)
	}
	var b bytes.Buffer
	b64 := base64.StdEncoding.EncodeToString
	fmt.Fprintf(&b, "%s\n%s\n%s%d\n%s%s\n%s%d\n", h.Origin, HeadType, headSize, h.Size, headRoot, b64(h.Root[:]), timestampPrefix, ms)
	fmt.Fprintf(&b, "%s%s %d %s", headLog, h.Log.Origin, h.Log.Size, b64(h.Log.Root[:]))
	if !h.Log.Time.IsZero() {
		fmt.Fprintf(&b, " %d", h.Log.Time.UnixMilli())
	}
	fmt.Fprintf(&b, "\n%s%s\n", headLogSig, b64(h.LogSignature))
	return b.Bytes(), nil
}

// SignHead returns h as a signed note, signed by signer (HeadSigner).
func SignHead(h Head, signer note.Signer) ([]byte, error) {
	body, err := h.Body()
	if err != nil {
		return nil, err
	}
	msg, err := note.Sign(&note.Note{Text: string(body)}, signer)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing head: %w", err)
	}
	return msg, nil
}

// BindLog fills h.Log and h.LogSignature from logMsg, a signed log
// checkpoint that v (the log's key: NewVerifier, NewLogVerifier) verifies,
// at any age. The checkpoint may carry a timestamp line and no other
// extension line; its origin must be v's name.
func (h *Head) BindLog(logMsg []byte, v note.Verifier) error {
	if v == nil {
		return errors.New("checkpoint: no verifier")
	}
	if len(logMsg) > MaxSize {
		return fmt.Errorf("%w: log checkpoint of %d bytes, more than %d", ErrMalformed, len(logMsg), MaxSize)
	}
	n, err := note.Open(logMsg, note.VerifierList(guardedVerifier{v}))
	if err != nil {
		return fmt.Errorf("%w %s: %v", ErrSignature, v.Name(), err)
	}
	c, err := Parse([]byte(n.Text))
	if err != nil {
		return err
	}
	if c.Origin != v.Name() {
		return fmt.Errorf("%w: log checkpoint of %q signed by %q", ErrOrigin, c.Origin, v.Name())
	}
	if len(c.Extensions) > 0 {
		return fmt.Errorf("%w: a bound log checkpoint carries no extension lines besides its timestamp", ErrMalformed)
	}
	for _, s := range n.Sigs {
		if s.Name != v.Name() || s.Hash != v.KeyHash() {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(s.Base64)
		if err != nil || len(sig) < MinLogSignature || len(sig) > MaxLogSignature {
			return fmt.Errorf("%w: the log signature by %s is not %d to %d bytes", ErrMalformed, v.Name(), MinLogSignature, MaxLogSignature)
		}
		h.Log, h.LogSignature = *c, sig
		h.LogSigned = signatureTime(v, c, sig)
		return nil
	}
	return fmt.Errorf("%w %s", ErrSignature, v.Name())
}

// signatureTime returns the time in sig, the note signature by v on c, when
// c has no timestamp line and v verifies RFC6962NoteSignatures.
func signatureTime(v note.Verifier, c *Checkpoint, sig []byte) time.Time {
	if !c.Time.IsZero() {
		return time.Time{}
	}
	if _, ok := v.(rfc6962Verifier); !ok || len(sig) < 4+8 {
		return time.Time{}
	}
	ms := binary.BigEndian.Uint64(sig[4:])
	if ms == 0 || ms > 1<<53 {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms)).UTC()
}

// LogNote returns the signed log checkpoint the head names, rebuilt from
// its fields and signature, as the log signed it.
func (h *Head) LogNote() ([]byte, error) {
	body, err := h.Log.Body()
	if err != nil {
		return nil, err
	}
	var msg bytes.Buffer
	msg.Write(body)
	fmt.Fprintf(&msg, "\n\u2014 %s %s\n", h.Log.Origin, base64.StdEncoding.EncodeToString(h.LogSignature))
	return msg.Bytes(), nil
}

// ParseHead parses a head body (no signatures) strictly, without verifying
// anything: exactly the seven lines above, each canonical, ending with a
// newline. A sorted-tree root in the old checkpoint form is an error
// wrapping ErrLegacyHead.
func ParseHead(text []byte) (*Head, error) {
	if len(text) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(text), MaxSize)
	}
	s := string(text)
	if !strings.HasSuffix(s, "\n") {
		return nil, fmt.Errorf("%w: head does not end with a newline", ErrMalformed)
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) >= 2 && lines[1] != HeadType {
		if _, err := Parse(text); err == nil {
			return nil, ErrLegacyHead
		}
		return nil, fmt.Errorf("%w: second line %q is not %q", ErrMalformed, lines[1], HeadType)
	}
	if len(lines) != 7 {
		return nil, fmt.Errorf("%w: head of %d lines, want 7", ErrMalformed, len(lines))
	}
	h := &Head{Origin: lines[0]}
	if h.Origin == "" {
		return nil, fmt.Errorf("%w: empty origin line", ErrMalformed)
	}
	field := func(line, prefix string) (string, error) {
		v, ok := strings.CutPrefix(line, prefix)
		if !ok {
			return "", fmt.Errorf("%w: line %q, want %q…", ErrMalformed, line, prefix)
		}
		return v, nil
	}
	v, err := field(lines[2], headSize)
	if err != nil {
		return nil, err
	}
	if h.Size, err = parseDecimal(v); err != nil {
		return nil, fmt.Errorf("%w: size %q: %v", ErrMalformed, v, err)
	}
	if v, err = field(lines[3], headRoot); err != nil {
		return nil, err
	}
	if h.Root, err = parseRoot(v); err != nil {
		return nil, err
	}
	if v, err = field(lines[4], timestampPrefix); err != nil {
		return nil, err
	}
	if h.Time, err = parseMillis(v); err != nil {
		return nil, err
	}
	if v, err = field(lines[5], headLog); err != nil {
		return nil, err
	}
	f := strings.Split(v, " ")
	if len(f) != 3 && len(f) != 4 || f[0] == "" {
		return nil, fmt.Errorf("%w: log line %q, want origin, size, root and, if the checkpoint has one, timestamp", ErrMalformed, lines[5])
	}
	h.Log.Origin = f[0]
	if h.Log.Size, err = parseDecimal(f[1]); err != nil {
		return nil, fmt.Errorf("%w: log size %q: %v", ErrMalformed, f[1], err)
	}
	if h.Log.Root, err = parseRoot(f[2]); err != nil {
		return nil, err
	}
	if len(f) == 4 {
		if h.Log.Time, err = parseMillis(f[3]); err != nil {
			return nil, err
		}
	}
	if v, err = field(lines[6], headLogSig); err != nil {
		return nil, err
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(v)
	if err != nil || len(sig) < MinLogSignature || len(sig) > MaxLogSignature || base64.StdEncoding.EncodeToString(sig) != v {
		return nil, fmt.Errorf("%w: log signature %q is not the base64 of %d to %d bytes", ErrMalformed, v, MinLogSignature, MaxLogSignature)
	}
	h.LogSignature = sig
	return h, nil
}

func parseRoot(s string) ([32]byte, error) {
	var root [32]byte
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != len(root) || base64.StdEncoding.EncodeToString(b) != s {
		return root, fmt.Errorf("%w: %q is not the base64 of a 32-byte hash", ErrMalformed, s)
	}
	copy(root[:], b)
	return root, nil
}

func parseMillis(s string) (time.Time, error) {
	ms, err := parseDecimal(s)
	if err != nil || ms == 0 || ms > 1<<53 {
		return time.Time{}, fmt.Errorf("%w: timestamp %q", ErrMalformed, s)
	}
	return time.UnixMilli(int64(ms)).UTC(), nil
}

// OpenHead verifies msg, a signed sorted-tree head, as a verifier that pins
// only the log's key logV (from NewVerifier) does: the head's signature by
// HeadVerifier(logV), its origin HeadOrigin(logV.Name()), its time within
// maxAge and skew of now, and the log checkpoint it names signed by logV
// under logV's name. The bound checkpoint's own age is not checked: the
// head's time is what a verifier judges freshness by. Whether the named
// checkpoint is consistent with the log as the caller has seen it is the
// caller's to check, where it tracks the log. Errors wrap ErrSignature,
// ErrMalformed, ErrLegacyHead, ErrOrigin, ErrStale, ErrFuture or
// ErrLogSignature.
func OpenHead(msg []byte, logV note.Verifier, maxAge, skew time.Duration, now time.Time) (*Head, error) {
	if err := checkOpenArgs(msg, logV, maxAge, skew); err != nil {
		return nil, err
	}
	hv, err := HeadVerifier(logV)
	if err != nil {
		return nil, err
	}
	if _, err := note.Open(msg, note.VerifierList(hv)); err != nil {
		// An old-format root is signed by the log's key under its own name.
		if ln, lerr := note.Open(msg, note.VerifierList(logV)); lerr == nil {
			if c, perr := Parse([]byte(ln.Text)); perr == nil && c.Origin == logV.Name() {
				// A revocation authority's sorted-tree roots of the old
				// format had this origin too: say both.
				return nil, fmt.Errorf("%w: a checkpoint of %s's log, or a sorted-tree root in the format before heads, where a sorted-tree head was expected", ErrOrigin, logV.Name())
			} else if perr == nil {
				return nil, fmt.Errorf("%w, signed by %s; the third party must publish a new head (pkie log build, or any revocation publication)", ErrLegacyHead, logV.Name())
			}
		}
	}
	return openHead(msg, hv, logV, maxAge, skew, now)
}

// OpenMirrorHead verifies msg, a sorted-tree head signed by a mirror of a
// log, as a verifier that pins both keys does: the head's signature by
// headV (the mirror's Ed25519 note key, from NewVerifier), its origin
// headV's name, its time within maxAge and skew of now, and the log
// checkpoint it names signed by logV (the log's key, from NewLogVerifier:
// Ed25519, or RFC 6962 for a static-ct-api or RFC 6962 log) under logV's
// name. As with OpenHead, the bound checkpoint's own age is not checked,
// nor its consistency with other checkpoints of the log. Errors wrap the
// same sentinels as OpenHead's.
func OpenMirrorHead(msg []byte, headV, logV note.Verifier, maxAge, skew time.Duration, now time.Time) (*Head, error) {
	if err := checkOpenArgs(msg, logV, maxAge, skew); err != nil {
		return nil, err
	}
	if headV == nil {
		return nil, errors.New("checkpoint: no head verifier")
	}
	if headV.Name() == logV.Name() && headV.KeyHash() == logV.KeyHash() {
		return nil, fmt.Errorf("checkpoint: the head key and the log key are the same key %s; a head is signed under a name of its own", headV.Name())
	}
	return openHead(msg, headV, logV, maxAge, skew, now)
}

func checkOpenArgs(msg []byte, logV note.Verifier, maxAge, skew time.Duration) error {
	if maxAge <= 0 {
		return fmt.Errorf("checkpoint: maximum age %v must be positive", maxAge)
	}
	if skew < 0 {
		return fmt.Errorf("checkpoint: clock skew %v must not be negative", skew)
	}
	if logV == nil {
		return errors.New("checkpoint: no verifier")
	}
	if len(msg) > MaxSize {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(msg), MaxSize)
	}
	return nil
}

// openHead is OpenHead and OpenMirrorHead once their keys are known: the
// head signed by hv under its name, bound to a checkpoint signed by logV.
func openHead(msg []byte, hv, logV note.Verifier, maxAge, skew time.Duration, now time.Time) (*Head, error) {
	n, err := note.Open(msg, note.VerifierList(hv))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrSignature, hv.Name(), err)
	}
	h, err := ParseHead([]byte(n.Text))
	if err != nil {
		return nil, err
	}
	if h.Origin != hv.Name() {
		return nil, fmt.Errorf("%w: head of %q, want %q", ErrOrigin, h.Origin, hv.Name())
	}
	if h.Log.Origin != logV.Name() {
		return nil, fmt.Errorf("%w: the head names log %q, want %q", ErrOrigin, h.Log.Origin, logV.Name())
	}
	if err := h.CheckTime(maxAge, skew, now); err != nil {
		return nil, err
	}
	lmsg, err := h.LogNote()
	if err != nil {
		return nil, err
	}
	if _, err := note.Open(lmsg, note.VerifierList(guardedVerifier{logV})); err != nil {
		return nil, fmt.Errorf("%w (log %s at %d entries): %v", ErrLogSignature, h.Log.Origin, h.Log.Size, err)
	}
	h.LogSigned = signatureTime(logV, &h.Log, h.LogSignature)
	return h, nil
}

// CheckTime checks that now-maxAge <= h.Time <= now+skew, as OpenHead
// does: an error wrapping ErrStale or ErrFuture otherwise. A verifier that
// keeps heads it has opened checks each use with it.
func (h *Head) CheckTime(maxAge, skew time.Duration, now time.Time) error {
	if oldest := now.Add(-maxAge); h.Time.Before(oldest) {
		return fmt.Errorf("%w: head signed %v, %v ago (maximum %v)", ErrStale, h.Time.UTC().Format(time.RFC3339), now.Sub(h.Time).Round(time.Millisecond), maxAge)
	}
	if latest := now.Add(skew); h.Time.After(latest) {
		return fmt.Errorf("%w: head signed %v, %v ahead of now (allowed skew %v)", ErrFuture, h.Time.UTC().Format(time.RFC3339), h.Time.Sub(now).Round(time.Millisecond), skew)
	}
	return nil
}

// OpenHeadAnyAge is OpenHead without the freshness check, for what records
// history (state files, audits).
func OpenHeadAnyAge(msg []byte, logV note.Verifier) (*Head, error) {
	const forever = 100 * 365 * 24 * time.Hour
	return OpenHead(msg, logV, forever, forever, time.Now())
}

// OpenMirrorHeadAnyAge is OpenMirrorHead without the freshness check, for
// what records history (a mirror's own state, audits).
func OpenMirrorHeadAnyAge(msg []byte, headV, logV note.Verifier) (*Head, error) {
	const forever = 100 * 365 * 24 * time.Hour
	return OpenMirrorHead(msg, headV, logV, forever, forever, time.Now())
}

// OpenLegacyHead opens msg as a sorted-tree root in the format pkie signed
// before heads had their own type: a C2SP checkpoint of origin, signed by
// the log's key logV, at any age. Only for reading state saved before the
// change (it returns the sorted tree's size and root, bound to no log).
func OpenLegacyHead(msg []byte, logV note.Verifier, origin string) (*Checkpoint, error) {
	const forever = 100 * 365 * 24 * time.Hour
	return Open(msg, logV, origin, forever, forever, time.Now())
}
