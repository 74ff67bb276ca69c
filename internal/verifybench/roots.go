package verifybench

import (
	"encoding/pem"
	"fmt"
	"os"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// RootStore is a real trust store's certificates, so that building the
// trust store in each back end costs what it costs with a real one (the
// Servo experiment's "roots creation" built a real one too).
type RootStore struct {
	// Source says where the roots came from.
	Source string `json:"source"`
	DER    [][]byte
}

// SystemBundle is Debian's and Ubuntu's bundle of the system's roots.
const SystemBundle = "/etc/ssl/certs/ca-certificates.crt"

// LoadRoots reads a trust store: "mozilla" is the Mozilla (NSS) store as
// golang.org/x/crypto/x509roots/fallback embeds it, the same on every
// machine; "system" is SystemBundle; anything else is a PEM file.
func LoadRoots(spec string) (*RootStore, error) {
	switch spec {
	case "mozilla", "":
		rs := &RootStore{Source: "mozilla (golang.org/x/crypto/x509roots/fallback)"}
		for r := range bundle.Roots() {
			rs.DER = append(rs.DER, r.Certificate)
		}
		return rs, nil
	case "system":
		spec = SystemBundle
	}
	b, err := os.ReadFile(spec)
	if err != nil {
		return nil, fmt.Errorf("verifybench: roots: %w", err)
	}
	rs := &RootStore{Source: spec}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			rs.DER = append(rs.DER, blk.Bytes)
		}
	}
	if len(rs.DER) == 0 {
		return nil, fmt.Errorf("verifybench: roots: no PEM certificate in %s", spec)
	}
	return rs, nil
}

// With returns the store's roots and extra, in a new slice.
func (rs *RootStore) With(extra ...[]byte) [][]byte {
	out := make([][]byte, 0, len(rs.DER)+len(extra))
	return append(append(out, rs.DER...), extra...)
}
