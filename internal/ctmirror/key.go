package ctmirror

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/atomicfile"
	"golang.org/x/mod/sumdb/note"
)

// Key file names GenerateKey writes in a directory.
const (
	KeyFile    = "mirror.key" // the signer key, mode 0600
	PubKeyFile = "mirror.pub" // the verifier key clients pin
)

// GenerateKey makes the mirror's Ed25519 signed-note key named name (a
// schema-less URL of the mirror's own, such as "mirror.example/ct/2026h2":
// the origin of its heads, never the log's) in dir: KeyFile (0600, refused
// if it exists) and PubKeyFile. It returns the verifier key.
func GenerateKey(dir, name string) (vkey string, err error) {
	skey, vkey, err := checkpoint.GenerateKey(name)
	if err != nil {
		return "", err
	}
	if err := atomicfile.CreateExclusive(filepath.Join(dir, KeyFile), []byte(skey+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("ctmirror: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, PubKeyFile), []byte(vkey+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("ctmirror: %w", err)
	}
	return vkey, nil
}

// ReadKey reads the signer key at path (checkpoint.ReadSignerFile: a file
// readable by others is refused) and returns it with its verifier.
func ReadKey(path string) (note.Signer, note.Verifier, error) {
	s, err := checkpoint.ReadSignerFile(path)
	if err != nil {
		return nil, nil, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("ctmirror: %w", err)
	}
	// PRIVATE+KEY+<name>+<hash>+<base64(0x01 || seed)>, which the signer
	// just parsed.
	f := strings.SplitN(strings.TrimSpace(string(raw)), "+", 5)
	seed, err := base64.StdEncoding.DecodeString(f[len(f)-1])
	if len(f) != 5 || err != nil || len(seed) != 1+ed25519.SeedSize || seed[0] != 1 {
		return nil, nil, fmt.Errorf("ctmirror: %s is not an Ed25519 signed-note key", path)
	}
	pub := ed25519.NewKeyFromSeed(seed[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(s.Name(), pub)
	if err != nil {
		return nil, nil, fmt.Errorf("ctmirror: %w", err)
	}
	v, err := checkpoint.NewVerifier(vkey)
	if err != nil {
		return nil, nil, err
	}
	if v.KeyHash() != s.KeyHash() {
		return nil, nil, fmt.Errorf("ctmirror: %s: key hash does not match the key", path)
	}
	return s, v, nil
}
