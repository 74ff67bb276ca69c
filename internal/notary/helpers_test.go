package notary_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
)

type ed25519Pub = ed25519.PublicKey

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func ptr[T any](v T) *T { return &v }
