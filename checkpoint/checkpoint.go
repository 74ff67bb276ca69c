// Package checkpoint signs and verifies timestamped tree roots: the roots
// of append-only logs in the C2SP tlog-checkpoint format
// (https://c2sp.org/tlog-checkpoint), and the roots of sorted trees as
// sorted-tree heads (Head), a statement type of their own bound to a log
// checkpoint; both are carried in C2SP signed notes
// (https://c2sp.org/signed-note) so that golang.org/x/mod/sumdb/note, and
// any other signed-note tooling, verifies them.
//
// A trusted third party (a log, a revocation authority) signs the origin,
// size and root hash of its tree together with the time it signed them. The
// time is what defeats replay (PEC §7): a prover, or anyone between it and
// the client, can replay an old proof with the old signed root, so a verifier
// rejects roots older than a maximum age, and roots dated too far in the
// future, which would otherwise stay "fresh" for longer than they should.
//
// The body is:
//
//	<origin>
//	<tree size, decimal>
//	<root hash, standard base64>
//	timestamp <milliseconds since the Unix epoch, decimal>
//	<other extension lines, if any>
//
// The timestamp is a checkpoint extension line; tooling that does not know
// it still parses and verifies the checkpoint.
package checkpoint

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// Errors from Open and Parse; Open wraps them with details, test with
// errors.Is.
var (
	ErrSignature = errors.New("checkpoint: no valid signature by the expected key")
	ErrMalformed = errors.New("checkpoint: malformed checkpoint")
	ErrOrigin    = errors.New("checkpoint: wrong origin")
	ErrNoTime    = errors.New("checkpoint: no timestamp")
	ErrStale     = errors.New("checkpoint: root is older than the maximum age")
	ErrFuture    = errors.New("checkpoint: root is dated in the future")
)

// timestampPrefix starts the extension line carrying Checkpoint.Time.
const timestampPrefix = "timestamp "

// MaxSize bounds the text of a checkpoint Parse accepts.
const MaxSize = 64 << 10

// Checkpoint is a signed statement of a tree's origin, size and root at a
// time.
type Checkpoint struct {
	Origin string // names the tree, e.g. "pkie.example/log"
	Size   uint64
	Root   [32]byte
	// Time is when the third party signed the root; the zero Time means
	// none (Open rejects such a checkpoint). Encoded to the millisecond.
	Time time.Time
	// Extensions are further extension lines, in order, without their
	// newlines. Parse keeps lines it does not know here.
	Extensions []string
}

// GenerateKey returns a new Ed25519 signed-note key pair named name, as the
// strings note.NewSigner and note.NewVerifier take. The signer key is a
// secret: store it with mode 0600.
func GenerateKey(name string) (skey, vkey string, err error) {
	if err := ValidOrigin(name); err != nil {
		return "", "", err
	}
	skey, vkey, err = note.GenerateKey(rand.Reader, name)
	if err != nil {
		return "", "", fmt.Errorf("checkpoint: generating key %q: %w", name, err)
	}
	return skey, vkey, nil
}

// OriginChars lists the characters an origin (and so a key name) may hold.
const OriginChars = "letters A-Z a-z, digits, and . - _ ~ / :"

// ValidOrigin reports whether origin can name a log and its key: 1 to 255
// of OriginChars, as in a schema-less URL ("log.example.org/2026").
// C2SP asks for a schema-less URL; a signed note's key name may not hold
// spaces or "+", and a checkpoint's first line may not hold a newline.
func ValidOrigin(origin string) error {
	if origin == "" || len(origin) > 255 {
		return fmt.Errorf("checkpoint: origin must be 1 to 255 characters, not %d", len(origin))
	}
	for _, c := range origin {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_~/:", c)) {
			return fmt.Errorf("checkpoint: origin %q holds %q; allowed are %s (a schema-less URL such as log.example.org/2026)", origin, c, OriginChars)
		}
	}
	return nil
}

// NewSigner parses a signer key from GenerateKey.
func NewSigner(skey string) (note.Signer, error) {
	s, err := note.NewSigner(strings.TrimSpace(skey))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signer key: %w", err)
	}
	return s, nil
}

// ReadSignerFile reads a signer key from GenerateKey stored in the file at
// path. It refuses a file that its group or others may read or write: a
// trusted third party's key readable by other local users lets any of them
// sign roots in its name, and an operator who loosened the mode by accident
// should find out before the key is used rather than after.
func ReadSignerFile(path string) (note.Signer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("checkpoint: %s has mode %v; a private key must not be accessible to group or others (chmod 600 %s)", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	s, err := NewSigner(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// NewVerifier parses a verifier key from GenerateKey. The verifier it
// returns is a Verifier: HeadVerifier derives the key of the sorted-tree
// heads from it.
func NewVerifier(vkey string) (note.Verifier, error) {
	v, err := parseEd25519Verifier(strings.TrimSpace(vkey))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: verifier key: %w", err)
	}
	return v, nil
}

// Body returns the checkpoint text that is signed, or an error if c cannot
// be encoded (empty origin, a newline in a line, a time before 1970).
func (c *Checkpoint) Body() ([]byte, error) {
	if c.Origin == "" || strings.ContainsAny(c.Origin, "\n") {
		return nil, fmt.Errorf("%w: origin %q must be one non-empty line", ErrMalformed, c.Origin)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
	if !c.Time.IsZero() {
		ms := c.Time.UnixMilli()
		if ms <= 0 {
			return nil, fmt.Errorf("%w: time %v is not after 1970", ErrMalformed, c.Time)
		}
		fmt.Fprintf(&b, "%s%d\n", timestampPrefix, ms)
	}
	for _, e := range c.Extensions {
		if e == "" || strings.Contains(e, "\n") || strings.HasPrefix(e, timestampPrefix) {
			return nil, fmt.Errorf("%w: extension line %q", ErrMalformed, e)
		}
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// Sign returns c as a signed note, signed by signer.
func Sign(c Checkpoint, signer note.Signer) ([]byte, error) {
	body, err := c.Body()
	if err != nil {
		return nil, err
	}
	msg, err := note.Sign(&note.Note{Text: string(body)}, signer)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing: %w", err)
	}
	return msg, nil
}

// Open verifies msg's signature with v, parses it, checks that its origin is
// wantOrigin and that now-maxAge <= Time <= now+skew. maxAge must be
// positive and skew not negative. Errors name what was wrong: ErrSignature,
// ErrMalformed, ErrOrigin, ErrNoTime, ErrStale or ErrFuture.
func Open(msg []byte, v note.Verifier, wantOrigin string, maxAge, skew time.Duration, now time.Time) (*Checkpoint, error) {
	if maxAge <= 0 {
		return nil, fmt.Errorf("checkpoint: maximum age %v must be positive", maxAge)
	}
	if skew < 0 {
		return nil, fmt.Errorf("checkpoint: clock skew %v must not be negative", skew)
	}
	if v == nil {
		return nil, errors.New("checkpoint: no verifier")
	}
	if len(msg) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(msg), MaxSize)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrSignature, v.Name(), err)
	}
	c, err := Parse([]byte(n.Text))
	if err != nil {
		return nil, err
	}
	if c.Origin != wantOrigin {
		return nil, fmt.Errorf("%w: %q, want %q", ErrOrigin, c.Origin, wantOrigin)
	}
	if c.Time.IsZero() {
		return nil, fmt.Errorf("%w: %q signed no timestamp line", ErrNoTime, c.Origin)
	}
	if oldest := now.Add(-maxAge); c.Time.Before(oldest) {
		return nil, fmt.Errorf("%w: signed %v, %v ago (maximum %v)", ErrStale, c.Time.UTC().Format(time.RFC3339), now.Sub(c.Time).Round(time.Millisecond), maxAge)
	}
	if latest := now.Add(skew); c.Time.After(latest) {
		return nil, fmt.Errorf("%w: signed %v, %v ahead of now (allowed skew %v)", ErrFuture, c.Time.UTC().Format(time.RFC3339), c.Time.Sub(now).Round(time.Millisecond), skew)
	}
	return c, nil
}

// Parse parses a checkpoint body (no signatures) without verifying
// anything, for tooling. It is strict: the three mandatory lines must be
// canonical (decimal size without leading zeros, standard padded base64 of
// exactly 32 bytes), extension lines non-empty, at most one timestamp, and
// the text must end with a newline.
func Parse(text []byte) (*Checkpoint, error) {
	if len(text) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(text), MaxSize)
	}
	s := string(text)
	if !strings.HasSuffix(s, "\n") {
		return nil, fmt.Errorf("%w: does not end with a newline", ErrMalformed)
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) < 3 {
		return nil, fmt.Errorf("%w: %d lines, want at least origin, size and root", ErrMalformed, len(lines))
	}
	c := &Checkpoint{Origin: lines[0]}
	if c.Origin == "" {
		return nil, fmt.Errorf("%w: empty origin line", ErrMalformed)
	}
	size, err := parseDecimal(lines[1])
	if err != nil {
		return nil, fmt.Errorf("%w: size line %q: %v", ErrMalformed, lines[1], err)
	}
	c.Size = size
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != len(c.Root) || base64.StdEncoding.EncodeToString(root) != lines[2] {
		return nil, fmt.Errorf("%w: root line %q is not the base64 of a 32-byte hash", ErrMalformed, lines[2])
	}
	copy(c.Root[:], root)
	for _, l := range lines[3:] {
		if l == "" {
			return nil, fmt.Errorf("%w: empty extension line", ErrMalformed)
		}
		if ts, ok := strings.CutPrefix(l, timestampPrefix); ok {
			if !c.Time.IsZero() {
				return nil, fmt.Errorf("%w: two timestamp lines", ErrMalformed)
			}
			ms, err := parseDecimal(ts)
			if err != nil || ms == 0 || ms > 1<<53 {
				return nil, fmt.Errorf("%w: timestamp line %q", ErrMalformed, l)
			}
			c.Time = time.UnixMilli(int64(ms)).UTC()
			continue
		}
		c.Extensions = append(c.Extensions, l)
	}
	return c, nil
}

// parseDecimal parses a canonical unsigned decimal: digits only, no leading
// zeros except "0" itself, within uint64.
func parseDecimal(s string) (uint64, error) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, errors.New("not a canonical decimal number")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a canonical decimal number")
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

// checkpointJSON is the JSON rendering: hex root, RFC 3339 time.
type checkpointJSON struct {
	Origin     string    `json:"origin"`
	Size       uint64    `json:"size"`
	Root       string    `json:"root"`
	Time       time.Time `json:"time"`
	Extensions []string  `json:"extensions,omitempty"`
}

// MarshalJSON renders c for people and tools, with the root in hex.
func (c Checkpoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(checkpointJSON{c.Origin, c.Size, hex.EncodeToString(c.Root[:]), c.Time, c.Extensions})
}
