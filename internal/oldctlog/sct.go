package oldctlog

import (
	"fmt"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/internal/ctwire"
)

// SCT is the log's signed certificate timestamp (package ctwire, which
// its clients share).
type SCT = ctwire.SCT

func signSCT(s note.Signer, der []byte, ts uint64) (*SCT, error) {
	m, err := ctwire.SignedMessage(der, ts)
	if err != nil {
		return nil, err
	}
	sig, err := s.Sign(m)
	if err != nil {
		return nil, fmt.Errorf("ctlog: signing SCT: %w", err)
	}
	return &SCT{Timestamp: ts, Signature: sig}, nil
}

// VerifySCT checks that s is the log's signature over certificate der at
// s.Timestamp (ctwire.VerifySCT). v must be the log's pinned Ed25519 key.
func VerifySCT(v note.Verifier, der []byte, s *SCT) error { return ctwire.VerifySCT(v, der, s) }
