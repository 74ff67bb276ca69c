// Package notary is multi-path probing as an enhancement: the cloud probes
// the target from its own network path with a notary of its own (package
// notary, Forced Perspectives' notaries hosted in the PEC cloud) and returns
// that notary's signed v1 answer. A man in the middle near the client shows
// it a certificate the notary, elsewhere, does not see: the verifier fails
// the connection and names what the notary saw and when.
//
// The proof body is the notary's v1 response exactly as its HTTP API sends
// it (docs/formats/api.md: the answer's signed bytes and the Ed25519 signature),
// produced by the notary's own handler, so the cloud's answer is what that
// notary would sign over /v1/check; the verifier checks it with
// consensus.VerifyV1 against the notary's pinned v1 key.
//
// This package is the client half: the verifier and its configuration. The
// prover, which runs the notary, is server code in internal/provers/notary.
package notary

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pkie/pkie"
	"github.com/pkie/pkie/internal/consensus"
	"github.com/pkie/pkie/internal/pkies/conf"
)

// Name is the enhancement's name.
const Name = "notary"

// Version is the proof version: the body is a notary v1 response.
const Version = 1

// DefaultMaxAge bounds how old an answer's observation a client accepts,
// as for any v1 notary (consensus.DefaultAnswerMaxAge).
const DefaultMaxAge = consensus.DefaultAnswerMaxAge

// Duration is a JSON duration string ("24h").
type Duration = conf.Duration

// VerifierConfig configures the verifier (the JSON object of NewVerifier).
type VerifierConfig struct {
	// Key is the notary's v1 Ed25519 public key, in base64 as .notary
	// bundles carry it (pkie_v1_ed25519).
	Key string `json:"key"`
	// MaxAge is the oldest observation and signature accepted; zero means
	// 24h.
	MaxAge Duration `json:"max_age,omitzero"`
}

// JSON returns c as NewVerifier's configuration.
func (c VerifierConfig) JSON() json.RawMessage { return conf.JSON(c) }

// Kind returns the enhancement's registration, with its client half only:
// the cloud adds the prover (internal/provers/notary) to it.
func Kind() pkie.Kind {
	return pkie.Kind{
		ID:          pkie.Notary,
		Name:        Name,
		Summary:     "the cloud's notary, probing from its own network path, sees the certificate the client saw",
		NewVerifier: NewVerifier,
	}
}

// Verifier checks notary proofs against the notary's pinned v1 key.
type Verifier struct {
	pub    ed25519.PublicKey
	maxAge time.Duration
	now    func() time.Time
}

// NewVerifier builds the verifier from a VerifierConfig in JSON.
func NewVerifier(config json.RawMessage) (pkie.Verifier, error) {
	var c VerifierConfig
	if err := conf.Decode(config, &c); err != nil {
		return nil, fmt.Errorf("notary verifier configuration: %w", err)
	}
	return NewVerifierFrom(c)
}

// NewVerifierFrom builds the verifier from c.
func NewVerifierFrom(c VerifierConfig) (*Verifier, error) {
	k, err := base64.StdEncoding.Strict().DecodeString(c.Key)
	if err != nil || len(k) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("notary verifier: key must be a base64 Ed25519 public key (%d bytes), as bundles' %s", ed25519.PublicKeySize, consensus.V1FieldName)
	}
	if c.MaxAge < 0 {
		return nil, errors.New("notary verifier: max_age must be positive")
	}
	if c.MaxAge == 0 {
		c.MaxAge = Duration(DefaultMaxAge)
	}
	return &Verifier{pub: ed25519.PublicKey(k), maxAge: c.MaxAge.D(), now: time.Now}, nil
}

// ID returns pkie.Notary.
func (v *Verifier) ID() pkie.ID { return pkie.Notary }

// Verify checks the notary's signed answer (consensus.VerifyV1: signature
// first, then that it is about (ServerName, Port) and this leaf, fresh) and
// passes when the leaf the client saw is among the certificates the notary
// vouches for; otherwise the notary saw another certificate from its path,
// and the assertion fails naming it.
func (v *Verifier) Verify(_ context.Context, req *pkie.VerifyRequest) pkie.Assertion {
	if len(req.Chain) == 0 || req.ServerName == "" {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no server name and certificate to compare with the notary's"}
	}
	if req.Proof == nil {
		return pkie.Assertion{Status: pkie.Unknown, Reason: "no notary answer"}
	}
	if req.Proof.ID != pkie.Notary {
		return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("proof is for enhancement %s, not %s (notary)", req.Proof.ID, pkie.Notary)}
	}
	if req.Proof.Version != Version {
		return pkie.Assertion{Status: pkie.Fail, Reason: fmt.Sprintf("notary proof of version %d, this client reads version %d", req.Proof.Version, Version)}
	}
	now := req.Now
	if now.IsZero() {
		now = v.now()
	}
	sum := sha256.Sum256(req.Chain[0])
	q := consensus.V1Question{Host: strings.ToLower(req.ServerName), Port: req.Port, SHA256: &sum}
	a, err := consensus.VerifyV1(req.Proof.Body, v.pub, q, now, v.maxAge)
	if err != nil {
		return pkie.Assertion{Status: pkie.Fail, Reason: "notary answer rejected: " + err.Error()}
	}
	mine := hex.EncodeToString(sum[:])
	who := a.Notary
	if len(who) > 80 {
		who = who[:80] + "…"
	}
	how := "from its history"
	if a.Probed {
		how = "probing " + a.Addr
	}
	if slices.Contains(a.CurrentSet, mine) || (a.Match != nil && *a.Match && a.Current == mine) {
		return pkie.Assertion{Status: pkie.Pass, Time: a.SignedAt, Reason: fmt.Sprintf(
			"notary %q sees the same certificate %s… at %s port %d (last seen %s, %s; answer signed %s)",
			who, mine[:16], q.Host, q.Port, a.ObservedAt.UTC().Format(time.RFC3339), how, a.SignedAt.UTC().Format(time.RFC3339))}
	}
	return pkie.Assertion{Status: pkie.Fail, Time: a.SignedAt, Reason: fmt.Sprintf(
		"notary %q sees another certificate at %s port %d: %s… (last seen %s, %s; answer signed %s), not the %s… this client was shown: a man in the middle near the client, or a certificate the notary has not seen",
		who, q.Host, q.Port, truncHex(a.Current), a.ObservedAt.UTC().Format(time.RFC3339), how, a.SignedAt.UTC().Format(time.RFC3339), mine[:16])}
}

func truncHex(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}
