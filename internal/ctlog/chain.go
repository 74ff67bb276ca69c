package ctlog

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	ctx509 "github.com/google/certificate-transparency-go/x509"
	"github.com/transparency-dev/tessera/ctonly"
)

// Bounds on a submitted chain (docs/operations/security.md).
const (
	MaxCertBytes  = 64 << 10 // one DER certificate
	MaxChainCerts = 10       // leaf plus up to nine issuers
)

var (
	oidCTPoison          = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}
	oidPrecertSigningEKU = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 4}
)

// RejectedError reports a submitted chain the log refuses, as opposed to
// the log failing: the HTTP API answers it with 400.
type RejectedError struct{ Err error }

func (e *RejectedError) Error() string { return e.Err.Error() }
func (e *RejectedError) Unwrap() error { return e.Err }

func rejectf(format string, args ...any) error {
	return &RejectedError{fmt.Errorf("ctlog: "+format, args...)}
}

// roots is the set of roots the log accepts.
type roots struct {
	pool *x509.CertPool
	der  [][]byte // in file order, for get-roots
}

// parseRoots reads PEM roots; at least one is required.
func parseRoots(b []byte) (*roots, error) {
	r := &roots{pool: x509.NewCertPool()}
	for len(b) > 0 {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("ctlog: accepted root %d: %w", len(r.der), err)
		}
		if slices.ContainsFunc(r.der, func(d []byte) bool { return bytes.Equal(d, c.Raw) }) {
			continue
		}
		r.pool.AddCert(c)
		r.der = append(r.der, c.Raw)
	}
	if len(r.der) == 0 {
		return nil, errors.New("ctlog: no accepted roots (want PEM certificates)")
	}
	return r, nil
}

// Policy is what a log accepts beyond a chain to one of its roots.
type Policy struct {
	// NotAfterStart and NotAfterLimit, if set, bound the leaf's NotAfter
	// to [NotAfterStart, NotAfterLimit): a temporally sharded log.
	NotAfterStart, NotAfterLimit time.Time
	// RejectExpired refuses leaves whose NotAfter has passed.
	RejectExpired bool
	// ExtKeyUsages, if set, are the extended key usages one of which the
	// leaf must carry (or anyExtendedKeyUsage); nil accepts any leaf.
	ExtKeyUsages []x509.ExtKeyUsage
}

// validated is what the log keeps of an accepted chain.
type validated struct {
	entry *ctonly.Entry
	// issuers are the DER certificates after the leaf on the verified
	// path, root included, in order; the entry names them by fingerprint.
	issuers [][]byte
}

// validate checks a submitted chain (leaf first) as RFC 6962 §4.1 and
// §4.2 ask, and builds the entry to log at ts: the leaf must chain, through
// the certificates given, to an accepted root; add-chain takes no
// precertificate and add-pre-chain nothing else. Expiry is not checked
// (logs accept expired certificates) unless the policy says so.
func (l *Log) validate(chain [][]byte, precert bool, ts uint64) (*validated, error) {
	switch {
	case len(chain) == 0:
		return nil, rejectf("empty chain")
	case len(chain) > MaxChainCerts:
		return nil, rejectf("chain of %d certificates, at most %d accepted", len(chain), MaxChainCerts)
	}
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		if len(der) > MaxCertBytes {
			return nil, rejectf("certificate %d is %d bytes, at most %d accepted", i, len(der), MaxCertBytes)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, rejectf("certificate %d: %v", i, err)
		}
		certs[i] = c
	}
	leaf := certs[0]
	isPre, err := isPrecertificate(leaf)
	if err != nil {
		return nil, &RejectedError{err}
	}
	switch {
	case isPre && !precert:
		return nil, rejectf("the leaf is a precertificate (it carries the CT poison extension): submit it to add-pre-chain")
	case !isPre && precert:
		return nil, rejectf("the leaf is not a precertificate (no CT poison extension): submit it to add-chain")
	}
	p := l.policy
	if !p.NotAfterStart.IsZero() && leaf.NotAfter.Before(p.NotAfterStart) {
		return nil, rejectf("the leaf expires %s, before this log's window starts (%s)", leaf.NotAfter.UTC().Format(time.RFC3339), p.NotAfterStart.UTC().Format(time.RFC3339))
	}
	if !p.NotAfterLimit.IsZero() && !leaf.NotAfter.Before(p.NotAfterLimit) {
		return nil, rejectf("the leaf expires %s, at or after this log's window ends (%s)", leaf.NotAfter.UTC().Format(time.RFC3339), p.NotAfterLimit.UTC().Format(time.RFC3339))
	}
	if p.RejectExpired && l.now().After(leaf.NotAfter) {
		return nil, rejectf("the leaf expired %s; this log takes no expired certificates", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if len(p.ExtKeyUsages) > 0 && !slices.ContainsFunc(leaf.ExtKeyUsage, func(u x509.ExtKeyUsage) bool {
		return u == x509.ExtKeyUsageAny || slices.Contains(p.ExtKeyUsages, u)
	}) {
		return nil, rejectf("the leaf carries none of the extended key usages this log accepts")
	}
	if isPre {
		// crypto/x509 refuses a critical extension it does not know; the
		// poison is the one a precertificate is meant to carry.
		leaf.UnhandledCriticalExtensions = slices.DeleteFunc(slices.Clone(leaf.UnhandledCriticalExtensions),
			func(id asn1.ObjectIdentifier) bool { return id.Equal(oidCTPoison) })
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	// Logs accept expired certificates: verify at the leaf's own start.
	// EKUs are the policy's business (above), not the path's: a
	// precertificate signing certificate carries only the CT EKU.
	paths, err := leaf.Verify(x509.VerifyOptions{Roots: l.roots.pool, Intermediates: inter,
		CurrentTime: leaf.NotBefore.Add(time.Second), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return nil, rejectf("the chain does not verify to an accepted root: %v", err)
	}
	path := pickPath(certs, paths)
	e := &ctonly.Entry{Timestamp: ts, IsPrecert: isPre}
	issuers := make([][]byte, 0, len(path)-1)
	for _, c := range path[1:] {
		issuers = append(issuers, c.Raw)
		e.FingerprintsChain = append(e.FingerprintsChain, sha256.Sum256(c.Raw))
	}
	if !isPre {
		e.Certificate = leaf.Raw
		return &validated{entry: e, issuers: issuers}, nil
	}
	// RFC 6962 §3.1: a precertificate issued by a precertificate signing
	// certificate is logged as if its final issuer (the signing
	// certificate's issuer) had issued it.
	var preIssuer *ctx509.Certificate
	final := path[1]
	if isPrecertSigner(path[1]) {
		if len(path) < 3 {
			return nil, rejectf("the precertificate signing certificate has no issuer in the chain")
		}
		final = path[2]
		if preIssuer, err = ctx509.ParseCertificate(path[1].Raw); err != nil && preIssuer == nil {
			return nil, rejectf("the precertificate signing certificate: %v", err)
		}
	}
	tbs, err := ctx509.BuildPrecertTBS(leaf.RawTBSCertificate, preIssuer)
	if err != nil {
		return nil, rejectf("building the precertificate's TBSCertificate: %v", err)
	}
	ikh := sha256.Sum256(final.RawSubjectPublicKeyInfo)
	e.Certificate = tbs
	e.Precertificate = leaf.Raw
	e.IssuerKeyHash = ikh[:]
	return &validated{entry: e, issuers: issuers}, nil
}

// pickPath returns, of the verified paths, the one that is the submitted
// chain (with the root appended if it was left out) when there is one, as
// real logs keep; else the shortest: only a path that explains the leaf is
// stored, never whatever else the submitter sent.
func pickPath(submitted []*x509.Certificate, paths [][]*x509.Certificate) []*x509.Certificate {
	best := paths[0]
	for _, p := range paths {
		if len(p) == len(submitted) || len(p) == len(submitted)+1 {
			same := true
			for i, c := range submitted {
				same = same && c.Equal(p[i])
			}
			if same {
				return p
			}
		}
		if len(p) < len(best) {
			best = p
		}
	}
	return best
}

// isPrecertificate reports whether c carries the CT poison extension,
// which must be critical and hold ASN.1 NULL (RFC 6962 §3.1).
func isPrecertificate(c *x509.Certificate) (bool, error) {
	for _, ext := range c.Extensions {
		if ext.Id.Equal(oidCTPoison) {
			if !ext.Critical || !bytes.Equal(ext.Value, asn1.NullBytes) {
				return false, errors.New("ctlog: the CT poison extension must be critical and hold ASN.1 NULL")
			}
			return true, nil
		}
	}
	return false, nil
}

func isPrecertSigner(c *x509.Certificate) bool {
	return slices.ContainsFunc(c.UnknownExtKeyUsage, func(id asn1.ObjectIdentifier) bool { return id.Equal(oidPrecertSigningEKU) })
}
