package corpus

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/verify"
)

// LimboSource is the Source of x509-limbo cases.
const LimboSource = "limbo"

// limbo is the part of x509-limbo's schema (limbo-schema.json, "Limbo"
// and "Testcase") pkie reads.
type limbo struct {
	Version   int             `json:"version"`
	Testcases []limboTestcase `json:"testcases"`
}

type limboTestcase struct {
	ID                     string          `json:"id"`
	Features               []string        `json:"features"`
	Importance             string          `json:"importance"`
	Description            string          `json:"description"`
	ValidationKind         string          `json:"validation_kind"`
	TrustedCerts           []string        `json:"trusted_certs"`
	UntrustedIntermediates []string        `json:"untrusted_intermediates"`
	PeerCertificate        string          `json:"peer_certificate"`
	ValidationTime         *string         `json:"validation_time"`
	SignatureAlgorithms    []string        `json:"signature_algorithms"`
	KeyUsage               []string        `json:"key_usage"`
	ExtendedKeyUsage       []string        `json:"extended_key_usage"`
	ExpectedResult         string          `json:"expected_result"`
	ExpectedPeerName       *limboPeerName  `json:"expected_peer_name"`
	ExpectedPeerNames      []limboPeerName `json:"expected_peer_names"`
	MaxChainDepth          *int            `json:"max_chain_depth"`
	CRLs                   []string        `json:"crls"`
}

type limboPeerName struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// limboHandled are the features whose cases pkie runs as any other:
// the rest mark optional or pedantic behaviour (limbo's schema: "consumers
// that don't understand a given feature should skip tests that are marked
// with it"), so their cases are Soft.
var limboHandled = map[string]bool{"denial-of-service": true}

// ReadLimbo reads an x509-limbo test suite (limbo.json). A case with no
// validation_time is verified at now. Cases pkie's request cannot express
// are skipped with the reason: CRLs, a maximum chain depth, a signature
// algorithm or key usage filter, an extended key usage other than the
// validation kind's own, an RFC 822 or more than one peer name, and
// chains beyond a request's limits. A case with a feature limbo calls
// optional or pedantic is Soft.
func ReadLimbo(r io.Reader, now time.Time) (*Corpus, error) {
	var l limbo
	if err := json.NewDecoder(r).Decode(&l); err != nil {
		return nil, fmt.Errorf("corpus: not an x509-limbo file: %w", err)
	}
	if l.Version != 1 {
		return nil, fmt.Errorf("corpus: x509-limbo schema version %d (pkie reads 1)", l.Version)
	}
	out := &Corpus{}
	for i := range l.Testcases {
		tc := &l.Testcases[i]
		id := LimboSource + "#" + tc.ID
		if tc.ID == "" {
			id = caseID(LimboSource, i)
		}
		c, reason := limboCase(tc, now)
		if reason != "" {
			out.Skipped = append(out.Skipped, Skip{ID: id, Source: LimboSource, Reason: reason})
			continue
		}
		c.ID = id
		out.Cases = append(out.Cases, c)
	}
	return out, nil
}

// limboCase turns tc into a case, or says why it cannot.
func limboCase(tc *limboTestcase, now time.Time) (Case, string) {
	c := Case{Source: LimboSource, Time: now}
	var purpose, eku string
	switch tc.ValidationKind {
	case "SERVER":
		purpose, eku = string(verify.Server), "serverAuth"
	case "CLIENT":
		purpose, eku = string(verify.Client), "clientAuth"
	default:
		return c, fmt.Sprintf("validation_kind %q", trim(tc.ValidationKind, 20))
	}
	c.Purpose = verify.Purpose(purpose)
	switch tc.ExpectedResult {
	case "SUCCESS":
		c.Expect = Accept
	case "FAILURE":
		c.Expect = Reject
	default:
		return c, fmt.Sprintf("expected_result %q", trim(tc.ExpectedResult, 20))
	}
	for _, f := range tc.Features {
		switch f {
		case "has-crl":
			return c, "CRLs (feature has-crl)"
		case "max-chain-depth":
			return c, "max_chain_depth"
		}
	}
	switch {
	case len(tc.CRLs) > 0:
		return c, "CRLs (feature has-crl)"
	case tc.MaxChainDepth != nil:
		return c, "max_chain_depth"
	case len(tc.SignatureAlgorithms) > 0:
		return c, "signature_algorithms filter"
	case len(tc.KeyUsage) > 0:
		return c, "key_usage filter"
	}
	for _, e := range tc.ExtendedKeyUsage {
		if e != eku {
			return c, "extended_key_usage " + trim(e, 40) + " for " + tc.ValidationKind
		}
	}
	names := tc.ExpectedPeerNames
	if tc.ValidationKind == "SERVER" {
		names = nil
		if tc.ExpectedPeerName != nil {
			names = []limboPeerName{*tc.ExpectedPeerName}
		}
	}
	switch {
	case len(names) > 1:
		return c, "more than one expected peer name"
	case len(names) == 1:
		n := names[0]
		switch n.Kind {
		case "DNS":
		case "IP":
			if _, err := netip.ParseAddr(n.Value); err != nil {
				return c, "IP peer name that is not an address"
			}
		default:
			return c, "peer name of kind " + trim(n.Kind, 20)
		}
		if n.Value == "" {
			return c, "empty peer name"
		}
		c.Host = n.Value
	}
	if tc.ValidationTime != nil {
		t, err := time.Parse(time.RFC3339, *tc.ValidationTime)
		if err != nil {
			return c, "validation_time is not RFC 3339"
		}
		c.Time = t
	}
	leaf, err := pemCert(tc.PeerCertificate)
	if err != nil {
		return c, "peer_certificate: " + err.Error()
	}
	c.Chain = [][]byte{leaf}
	for _, p := range tc.UntrustedIntermediates {
		der, err := pemCert(p)
		if err != nil {
			return c, "untrusted_intermediates: " + err.Error()
		}
		c.Chain = append(c.Chain, der)
	}
	for _, p := range tc.TrustedCerts {
		der, err := pemCert(p)
		if err != nil {
			return c, "trusted_certs: " + err.Error()
		}
		c.Roots = append(c.Roots, der)
	}
	var soft []string
	for _, f := range tc.Features {
		if !limboHandled[f] {
			soft = append(soft, f)
		}
	}
	sort.Strings(soft)
	c.Soft = len(soft) > 0
	var note []string
	if d := strings.TrimSpace(tc.Description); d != "" {
		note = append(note, trim(strings.Join(strings.Fields(d), " "), 300))
	}
	if len(tc.Features) > 0 {
		note = append(note, "features "+strings.Join(tc.Features, ","))
	}
	c.Note = strings.Join(note, "; ")
	if reason := unaskable(&c); reason != "" {
		return c, reason
	}
	return c, ""
}

// pemCert decodes the one CERTIFICATE block of s.
func pemCert(s string) ([]byte, error) {
	b, rest := pem.Decode([]byte(s))
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("not a PEM certificate")
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return nil, fmt.Errorf("data after the PEM certificate")
	}
	return b.Bytes, nil
}
