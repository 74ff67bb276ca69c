// Package pkie is the core every PKI enhancement (PKIE) of pkie shares: the
// identifiers, the two halves of an enhancement, the proof envelope and the
// registry that maps one to the other. It does no I/O and knows no
// enhancement: the cloud, the client and each enhancement import it, never
// the other way round.
//
// An enhancement is evidence about a TLS server's certificate beyond one CA
// signature, from a trusted third party (TTP): a log that shows the
// certificate was published, a revocation authority that shows it was not
// revoked, a notary that saw the same certificate from its own network
// path. Following "Towards Sustainable Evolution for the TLS PKI" (PEC, ASIA
// CCS 2018, §3.2), each enhancement has
//
//   - a [Prover], run by an untrusted middleman (the PEC cloud): given the
//     server's chain and the client's parameters it returns a
//     self-contained, versioned [Proof] whose trust comes from the TTP's
//     signature, never from the prover or the cloud that relays it;
//   - a [Verifier], run by the client: given the chain it saw, the proof,
//     the TTP keys it pinned and the time, it returns an [Assertion] that
//     says pass, fail or unknown and names the evidence.
//
// A new enhancement is one package that implements both interfaces and
// registers a [Kind] with its 16-bit [ID] in a [Registry]; nothing in the
// cloud or the client changes. docs/guides/pkie-howto.md walks through one.
package pkie

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ID identifies an enhancement on the wire: in the client's request, in each
// proof, in the PEC TLS extension. The PEC paper leaves assignment to the
// IETF (§4.1); pkie's built-ins use small numbers and 0xFF00–0xFFFF is for
// private use and experiments, as TLS's own private-use ranges are.
type ID uint16

// Built-in enhancements.
const (
	// CT is Certificate Transparency with sorted-tree presence and absence
	// proofs (PEC paper §5.1).
	CT ID = 0x0001
	// Revocation is the revocation authority's sorted tree of revoked
	// (issuer key, serial) keys: an absence proof means not revoked (PEC
	// paper §5.2, RITM).
	Revocation ID = 0x0002
	// Notary is multi-path probing as an enhancement: the cloud probes the
	// target from its own network path and returns its notary's signed v1
	// answer (Forced Perspectives' notaries, hosted in the cloud).
	Notary ID = 0x0003

	// PrivateUseMin is the first identifier of the private-use range.
	PrivateUseMin ID = 0xFF00
)

// String renders the identifier as 0x%04x.
func (id ID) String() string { return fmt.Sprintf("0x%04x", uint16(id)) }

// ParseID parses a decimal or 0x-prefixed hexadecimal identifier.
func ParseID(s string) (ID, error) {
	n, err := strconv.ParseUint(s, 0, 16)
	if err != nil {
		return 0, fmt.Errorf("pkie: %q is not a 16-bit enhancement identifier", s)
	}
	return ID(n), nil
}

// Subject is what a proof is about: the server the client connected to and
// the chain it presented.
type Subject struct {
	// ServerName is the name the client asked for (its SNI), lower case.
	ServerName string
	// Port is the server's TCP port.
	Port int
	// Chain is the chain as the server sent it, DER, leaf first.
	Chain [][]byte
	// Certs is Chain parsed, in the same order. The cloud parses a chain
	// once for all provers (PEC paper §4.2.1); a certificate that does not
	// parse stops the request before any prover sees it.
	Certs []*x509.Certificate
	// SCTs are the signed certificate timestamps the server sent in the
	// TLS signed_certificate_timestamp extension (RFC 6962 §3.3), each
	// serialized as received; nil when it sent none. The SCTs embedded
	// in the leaf travel in Chain.
	SCTs [][]byte
	// OCSPResponse is the OCSP response the server stapled (the TLS
	// status_request extension), as received; nil when it stapled none.
	// It may carry SCTs in its single response (RFC 6962 §3.3).
	//
	// SCTs and OCSPResponse are what a client saw; in a prover's request
	// they are empty (the cloud saw no handshake), and the ct request
	// carries the SCTs in its parameters instead.
	OCSPResponse []byte
}

// Leaf returns the first certificate of the chain, or nil.
func (s *Subject) Leaf() *x509.Certificate {
	if len(s.Certs) == 0 {
		return nil
	}
	return s.Certs[0]
}

// ProveRequest is what a Prover is asked.
type ProveRequest struct {
	Subject
	// Params are the client's parameters for this enhancement (the value of
	// its TLV in the request), possibly empty. They may change only what
	// is proved for this request, never what is recorded or signed about
	// anything else.
	Params []byte
}

// A Prover produces proofs for one enhancement. Prove must be safe for
// concurrent use, honour ctx (it carries the client's deadline) and return
// a proof whose trust rests on the TTP alone: a verifier learns nothing
// from the fact that a prover answered.
//
// Errors that the client may act on are [ErrBusy] (the prover is
// overloaded; try later or elsewhere), [ErrUnsupported] (this prover
// cannot prove that request) and [ErrUnavailable] (this prover has nothing
// it may prove on now); any other error is reported to the client as the
// prover's failure.
type Prover interface {
	ID() ID
	Prove(ctx context.Context, req *ProveRequest) (*Proof, error)
}

// Errors a prover may return that clients distinguish.
var (
	ErrBusy        = errors.New("pkie: prover busy")
	ErrUnsupported = errors.New("pkie: request not supported by this prover")
	// ErrUnavailable: the prover holds no verified state it may prove
	// on, such as a mirror whose trusted third party's tree was refused;
	// another replica may have one.
	ErrUnavailable = errors.New("pkie: prover unavailable")
)

// A Runner is a Prover with background work, typically syncing from its TTP
// and verifying what it fetched before serving it. The host runs Run until
// its context ends.
type Runner interface {
	Run(ctx context.Context)
}

// A Healther is a Prover that can say whether it is fit to serve (synced
// recently, store readable). A nil error means healthy.
type Healther interface {
	Health() error
}

// VerifyRequest is what a Verifier is given.
type VerifyRequest struct {
	Subject
	// Params are the parameters the client sent with its request for this
	// enhancement.
	Params []byte
	// Proof is what the cloud relayed, or nil when none arrived.
	Proof *Proof
	// Now is the verification time.
	Now time.Time
	// VerifiedChains are the chains, leaf first and root last, that
	// classic path validation built to a trusted root, if it passed: a
	// verifier that needs the leaf's issuer takes it from here, never from
	// the unauthenticated chain the server sent.
	VerifiedChains [][]*x509.Certificate
}

// Status is a verifier's finding.
type Status string

// Statuses.
const (
	Pass    Status = "pass"    // the evidence supports the certificate
	Fail    Status = "fail"    // the evidence speaks against it
	Unknown Status = "unknown" // no evidence either way
)

// Assertion is a verifier's finding with the evidence it rests on.
type Assertion struct {
	Status Status
	// Reason names the evidence that decided: which TTP signed what, when,
	// and what it shows. It is shown to people as is.
	Reason string
	// Time is when the TTP signed the evidence the assertion rests on
	// (zero when there is none): how fresh the finding is.
	Time time.Time
}

// A Verifier checks proofs of one enhancement against the trust anchors it
// was configured with (the TTP keys the client pinned). Verify must not
// trust anything in the proof that the TTP did not sign, must check that
// the proof is about req's chain, and must be safe for concurrent use. A
// missing proof is Unknown, unless the verifier judges evidence the
// handshake itself delivered (the ct verifier judges a certificate's SCTs
// against its log list, and a missing proof leaves only their inclusion
// unknown); a proof that does not verify is Fail, since only an attacker
// or a broken TTP produces one.
type Verifier interface {
	ID() ID
	Verify(ctx context.Context, req *VerifyRequest) Assertion
}
