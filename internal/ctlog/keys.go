package ctlog

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	f_log "github.com/transparency-dev/formats/log"
	f_note "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/atomicfile"
	"github.com/pkie/pkie/internal/ttpstate"
)

// Files of a log directory.
const (
	KeyFile     = "log.key"   // ECDSA P-256 private key, PKCS #8 PEM, 0600
	PubFile     = "log.pub"   // the verifier key (formats/note RFC 6962 form)
	RootsFile   = "roots.pem" // accepted roots, PEM
	HeadKeyFile = "head.key"  // Ed25519 note signer key of the sorted-tree heads, 0600
	HeadPubFile = "head.pub"  // its verifier key
	// StateFile holds the last checkpoint the log signed (package ttpstate,
	// 0600), kept apart from the storage: see the package documentation.
	StateFile = "log.state"
	// TilesDir holds the POSIX storage: checkpoint, tile/, issuer/.
	TilesDir = "tiles"
)

// InitOptions configure a new log.
type InitOptions struct {
	// Roots are the PEM certificates of the roots the log accepts chains
	// to (at least one).
	Roots []byte
}

// Init creates a log in dir (created 0700 if missing) whose checkpoints
// carry origin: a fresh ECDSA P-256 key (KeyFile, 0600), its verifier key
// (PubFile), the accepted roots (RootsFile), the sorted-tree head key
// (HeadKeyFile, HeadPubFile) and, in StateFile, a signed checkpoint of the
// empty tree. It returns the verifier key monitors pin.
//
// origin must be the log's schema-less URL prefix in lower case without a
// trailing slash (log.example.org/2026h1), as static-ct-api asks: the
// verifier key is named after it. Init refuses a directory that already
// holds a key.
func Init(ctx context.Context, dir, origin string, o InitOptions) (vkey string, err error) {
	if err := validOrigin(origin); err != nil {
		return "", err
	}
	if _, err := parseRoots(o.Roots); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("ctlog: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFile)); err == nil {
		return "", fmt.Errorf("ctlog: %s already holds a log key; refusing to replace it", dir)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("ctlog: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("ctlog: %w", err)
	}
	vkey, err = f_note.RFC6962VerifierString(origin, key.Public())
	if err != nil {
		return "", fmt.Errorf("ctlog: origin %q: %w", origin, err)
	}
	// Exclusive: of two inits racing on one directory, the loser must not
	// replace the key the winner may already have signed with.
	if err := atomicfile.CreateExclusive(filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("ctlog: %s already holds a log key; refusing to replace it", dir)
		}
		return "", fmt.Errorf("ctlog: %w", err)
	}
	hskey, hvkey, err := note.GenerateKey(rand.Reader, checkpoint.HeadOrigin(origin))
	if err != nil {
		return "", fmt.Errorf("ctlog: head key: %w", err)
	}
	for _, f := range []struct {
		name string
		data string
		perm fs.FileMode
	}{
		{PubFile, vkey + "\n", 0o644},
		{RootsFile, string(o.Roots), 0o644},
		{HeadKeyFile, hskey + "\n", 0o600},
		{HeadPubFile, hvkey + "\n", 0o644},
	} {
		if err := atomicfile.WriteFile(filepath.Join(dir, f.name), []byte(f.data), f.perm); err != nil {
			return "", fmt.Errorf("ctlog: %w", err)
		}
	}
	// The empty tree, signed, is the first thing the log vouches for: with
	// it StateFile always exists, and a log directory without one is known
	// to have lost it.
	s, err := newCheckpointSigner(key, origin, nil)
	if err != nil {
		return "", err
	}
	empty := rfc6962.DefaultHasher.EmptyRoot()
	msg, err := note.Sign(&note.Note{Text: string(f_log.Checkpoint{Origin: origin, Size: 0, Hash: empty}.Marshal())}, s)
	if err != nil {
		return "", fmt.Errorf("ctlog: %w", err)
	}
	if err := ttpstate.Write(filepath.Join(dir, StateFile), &ttpstate.State{Checkpoint: string(msg)}); err != nil {
		return "", fmt.Errorf("ctlog: %w", err)
	}
	return vkey, nil
}

// validOrigin checks that origin is what formats/note names an RFC 6962
// verifier key after: a schema-less, lower-case URL prefix.
func validOrigin(origin string) error {
	if origin == "" || strings.ContainsAny(origin, " +\n\t") || origin != strings.ToLower(origin) ||
		strings.HasPrefix(origin, "http://") || strings.HasPrefix(origin, "https://") || strings.HasSuffix(origin, "/") {
		return fmt.Errorf("ctlog: origin %q must be the log's URL prefix without scheme or trailing slash, in lower case (log.example.org/2026h1)", origin)
	}
	return nil
}

// readKey reads the log's private key, refusing one readable by others.
func readKey(path string) (*ecdsa.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("ctlog: reading the log key (run \"pkie log init\" first?): %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("ctlog: %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ctlog: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("ctlog: %s holds no PKCS #8 PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ctlog: %s: %w", path, err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, fmt.Errorf("ctlog: %s holds a %T key, want ECDSA P-256", path, k)
	}
	return ek, nil
}

// readHeadSigner reads the sorted-tree head signer, refusing a key
// readable by others.
func readHeadSigner(path string) (note.Signer, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("ctlog: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, "", fmt.Errorf("ctlog: %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("ctlog: %w", err)
	}
	s, err := note.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, "", fmt.Errorf("ctlog: %s: %w", path, err)
	}
	pub, err := os.ReadFile(filepath.Join(filepath.Dir(path), HeadPubFile))
	if err != nil {
		return nil, "", fmt.Errorf("ctlog: %w", err)
	}
	return s, strings.TrimSpace(string(pub)), nil
}

// logID is RFC 6962's LogID: SHA-256 of the log's SubjectPublicKeyInfo.
func logID(pub crypto.PublicKey) ([32]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return [32]byte{}, fmt.Errorf("ctlog: %w", err)
	}
	return sha256.Sum256(der), nil
}

// digitallySigned signs SHA-256(msg) with k and returns the TLS
// DigitallySigned struct (RFC 5246 §4.7): hash sha256(4), signature
// ecdsa(3), the ASN.1 signature with a 16-bit length.
func digitallySigned(k *ecdsa.PrivateKey, msg []byte) ([]byte, error) {
	h := sha256.Sum256(msg)
	sig, err := ecdsa.SignASN1(rand.Reader, k, h[:])
	if err != nil {
		return nil, fmt.Errorf("ctlog: signing: %w", err)
	}
	out := make([]byte, 0, 4+len(sig))
	out = append(out, 4, 3)
	out = binary.BigEndian.AppendUint16(out, uint16(len(sig)))
	return append(out, sig...), nil
}

// treeHeadSignatureInput is RFC 6962 §3.5's TreeHeadSignature: what both
// an STH and a static-ct-api checkpoint signature sign.
func treeHeadSignatureInput(ts, size uint64, root [32]byte) []byte {
	b := make([]byte, 0, 2+8+8+32)
	b = append(b, 0 /* v1 */, 1 /* tree_hash */)
	b = binary.BigEndian.AppendUint64(b, ts)
	b = binary.BigEndian.AppendUint64(b, size)
	return append(b, root[:]...)
}

// checkpointSigner is a note.Signer producing static-ct-api's
// RFC6962NoteSignature: the 8-byte timestamp (ms) followed by the
// DigitallySigned TreeHeadSignature of the checkpoint's size and root at
// that time. Its key ID is SHA-256(origin || 0x0A || 0x05 || LogID)[:4].
type checkpointSigner struct {
	key     *ecdsa.PrivateKey
	origin  string
	keyHash uint32
	now     func() uint64 // ms
}

func newCheckpointSigner(key *ecdsa.PrivateKey, origin string, now func() uint64) (*checkpointSigner, error) {
	id, err := logID(key.Public())
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write([]byte(origin))
	h.Write([]byte{0x0A, 0x05})
	h.Write(id[:])
	if now == nil {
		now = nowMilli
	}
	return &checkpointSigner{key: key, origin: origin, keyHash: binary.BigEndian.Uint32(h.Sum(nil)), now: now}, nil
}

func (s *checkpointSigner) Name() string    { return s.origin }
func (s *checkpointSigner) KeyHash() uint32 { return s.keyHash }

func (s *checkpointSigner) Sign(msg []byte) ([]byte, error) {
	cp, err := parseCheckpointText(msg, s.origin)
	if err != nil {
		return nil, err
	}
	return s.signAt(s.now(), cp.Size, cp.root())
}

func (s *checkpointSigner) signAt(ts, size uint64, root [32]byte) ([]byte, error) {
	ds, err := digitallySigned(s.key, treeHeadSignatureInput(ts, size, root))
	if err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint64(nil, ts), ds...), nil
}

// cpText is a parsed checkpoint body.
type cpText struct {
	f_log.Checkpoint
}

func (c *cpText) root() (r [32]byte) { copy(r[:], c.Hash); return r }

// parseCheckpointText parses a checkpoint body of the static-ct-api form:
// origin, size and root, no extension lines.
func parseCheckpointText(msg []byte, origin string) (*cpText, error) {
	var cp cpText
	rest, err := cp.Unmarshal(msg)
	switch {
	case err != nil:
		return nil, fmt.Errorf("ctlog: checkpoint: %w", err)
	case len(rest) != 0:
		return nil, errors.New("ctlog: checkpoint has extension lines, which static-ct-api checkpoints do not")
	case cp.Origin != origin:
		return nil, fmt.Errorf("ctlog: checkpoint of origin %q, want %q", cp.Origin, origin)
	case len(cp.Hash) != 32:
		return nil, fmt.Errorf("ctlog: checkpoint root of %d bytes, want 32", len(cp.Hash))
	}
	return &cp, nil
}

// signedNote assembles the signed note note.Sign would produce for text
// and this one signature, so that the log can record it before it is
// published.
func signedNote(text []byte, name string, keyHash uint32, sig []byte) []byte {
	var b bytes.Buffer
	b.Write(text)
	b.WriteString("\n\u2014 ")
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(base64.StdEncoding.EncodeToString(append(binary.BigEndian.AppendUint32(nil, keyHash), sig...)))
	b.WriteByte('\n')
	return b.Bytes()
}

// safeVerifier guards formats/note's RFC 6962 verifier, which indexes past
// the end of a signature of exactly 8 bytes (a timestamp and nothing
// else) and panics: a note with such a signature line must be refused, not
// crash whoever reads it. 12 bytes is the least an RFC6962NoteSignature
// can be: timestamp, hash and signature algorithms, signature length.
type safeVerifier struct{ note.Verifier }

func (v safeVerifier) Verify(msg, sig []byte) bool {
	return len(sig) >= 12 && v.Verifier.Verify(msg, sig)
}

// newVerifier parses an RFC 6962 note verifier key into a safe verifier.
func newVerifier(vkey string) (note.Verifier, error) {
	v, err := f_note.NewRFC6962Verifier(vkey)
	if err != nil {
		return nil, err
	}
	return safeVerifier{v}, nil
}
