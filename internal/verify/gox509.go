package verify

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
)

// goBackend is crypto/x509 in process.
type goBackend struct {
	parallel bool
}

// NewGo returns Go's crypto/x509 as a back end. Serial ("go") is
// Certificate.Verify as every Go TLS client calls it: signatures are
// checked one after another while the path is built.
//
// Parallel ("go-parallel") is the Servo experiment's "rustls parallel"
// variant for Go: before crypto/x509 runs, the signatures along the
// presented chain (each certificate by the next, the last by a matching
// root) are checked concurrently, one goroutine each (phase Parallel).
// crypto/x509 cannot be handed a signature already checked, so it checks
// them again, and it alone decides: the presented order is only the
// likeliest path, and a link that fails may be bypassed by another
// candidate. The gain parallelism could bring is Parallel set beside the
// same checks done serially, which "pkie bench verify" measures;
// go-parallel's total is what it costs with crypto/x509 as it is.
func NewGo(parallel bool) Backend { return &goBackend{parallel: parallel} }

func (g *goBackend) Name() string {
	if g.parallel {
		return "go-parallel"
	}
	return "go"
}

func (g *goBackend) Library() string { return "crypto/x509 " + runtime.Version() }

func (g *goBackend) Close() error { return nil }

func (g *goBackend) Verify(ctx context.Context, r *Request) (Result, error) {
	if err := r.Check(); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	res := Result{Backend: g.Name()}

	t := time.Now()
	roots := x509.NewCertPool()
	var anchors []*x509.Certificate
	for _, der := range r.Roots {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			res.RootsSkipped++
			continue
		}
		roots.AddCert(c)
		anchors = append(anchors, c)
	}
	res.Phases.Roots = time.Since(t)

	t = time.Now()
	certs := make([]*x509.Certificate, len(r.Chain))
	inter := x509.NewCertPool()
	var parseErr error
	for i, der := range r.Chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			if i == 0 {
				parseErr = fmt.Errorf("chain[0]: %w", err)
				break
			}
			// An intermediate that does not parse is one candidate
			// fewer, as OpenSSL and webpki treat it.
			continue
		}
		certs[i] = c
		if i > 0 {
			inter.AddCert(c)
		}
	}
	res.Phases.Chain = time.Since(t)
	if parseErr != nil {
		res.Code, res.Reason = Malformed, parseErr.Error()
		res.RoundTrip = time.Since(start)
		return res, nil
	}
	leaf := certs[0]

	if g.parallel {
		// The presented order is only the likeliest path: a link that
		// fails here may be bypassed by another candidate, so
		// crypto/x509 still decides.
		t = time.Now()
		_ = checkSignaturesParallel(certs, anchors)
		res.Phases.Parallel = time.Since(t)
	}

	usage := x509.ExtKeyUsageServerAuth
	if r.Purpose == Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	t = time.Now()
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   r.Time,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	})
	res.Phases.Verify = time.Since(t)
	if err != nil {
		res.Code, res.Reason = classifyGo(err, certs, r.Time), err.Error()
		res.RoundTrip = time.Since(start)
		return res, nil
	}
	if r.Host != "" {
		t = time.Now()
		err = leaf.VerifyHostname(WireHost(r.Host))
		res.Phases.Hostname = time.Since(t)
		if err != nil {
			res.Code, res.Reason = NameMismatch, err.Error()
			res.RoundTrip = time.Since(start)
			return res, nil
		}
	}
	res.Valid, res.Code, res.Depth = true, OK, len(chains[0])
	res.Reason = "ok"
	res.RoundTrip = time.Since(start)
	return res, nil
}

// checkSignaturesParallel checks, concurrently, the signature of each
// presented certificate by the one after it, and of the last one by a
// root with its issuer's name (any such root will do). It stops at the
// first certificate that is itself a root, and checks nothing it cannot
// pair: path building is crypto/x509's job.
func checkSignaturesParallel(certs []*x509.Certificate, anchors []*x509.Certificate) error {
	type link struct {
		child   *x509.Certificate
		parents []*x509.Certificate
		depth   int
	}
	var links []link
	for i, c := range certs {
		if c == nil {
			break
		}
		if isAnchor(c, anchors) {
			break
		}
		if i+1 < len(certs) && certs[i+1] != nil && bytes.Equal(c.RawIssuer, certs[i+1].RawSubject) {
			links = append(links, link{child: c, parents: []*x509.Certificate{certs[i+1]}, depth: i})
			continue
		}
		var ps []*x509.Certificate
		for _, a := range anchors {
			if bytes.Equal(c.RawIssuer, a.RawSubject) {
				ps = append(ps, a)
			}
		}
		if len(ps) > 0 {
			links = append(links, link{child: c, parents: ps, depth: i})
		}
		break
	}
	errs := make([]error, len(links))
	var wg sync.WaitGroup
	for i, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last error
			for _, p := range l.parents {
				if last = l.child.CheckSignatureFrom(p); last == nil {
					return
				}
			}
			errs[i] = fmt.Errorf("signature of certificate %d (%s) by its issuer: %w", l.depth, l.child.Subject, last)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func isAnchor(c *x509.Certificate, anchors []*x509.Certificate) bool {
	for _, a := range anchors {
		if bytes.Equal(c.Raw, a.Raw) {
			return true
		}
	}
	return false
}

// classifyGo puts a crypto/x509 error in pkie's words.
func classifyGo(err error, certs []*x509.Certificate, at time.Time) Code {
	var inv x509.CertificateInvalidError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ce x509.ConstraintViolationError
	var ia x509.InsecureAlgorithmError
	var se x509.SystemRootsError
	switch {
	case errors.As(err, &inv):
		switch inv.Reason {
		case x509.Expired:
			if inv.Cert != nil && at.Before(inv.Cert.NotBefore) {
				return NotYetValid
			}
			return Expired
		case x509.NotAuthorizedToSign:
			return NotCA
		case x509.CANotAuthorizedForThisName, x509.NameConstraintsWithoutSANs, x509.UnconstrainedName:
			return NameConstraint
		case x509.TooManyIntermediates:
			return PathLength
		case x509.IncompatibleUsage, x509.CANotAuthorizedForExtKeyUsage:
			return BadUsage
		case x509.NameMismatch:
			return NameMismatch
		case x509.TooManyConstraints:
			return Limits
		}
		return Other
	case errors.As(err, &ua):
		// crypto/x509 builds paths by trying candidates, and reports a
		// candidate it had to reject (bad signature, expired, not a CA)
		// as "signed by unknown authority (possibly because of …)". The
		// hint is unexported; its text is what says why.
		return classifyHint(err.Error())
	case errors.As(err, &he):
		return NameMismatch
	case errors.As(err, &ce):
		// "parent certificate cannot sign this kind of certificate"
		return NotCA
	case errors.As(err, &ia):
		return Unsupported
	case errors.As(err, &se):
		return UnknownIssuer
	case errors.As(err, &x509.UnhandledCriticalExtension{}):
		return Unsupported
	}
	if strings.Contains(err.Error(), "signature check attempts limit") {
		return Limits
	}
	if errors.Is(err, x509.ErrUnsupportedAlgorithm) {
		return Unsupported
	}
	return Other
}

// classifyHint reads the reason crypto/x509 gives for the first candidate
// issuer it rejected while building a path.
func classifyHint(msg string) Code {
	_, hint, ok := strings.Cut(msg, "possibly because of")
	if !ok {
		return UnknownIssuer
	}
	switch {
	case strings.Contains(hint, "verification failure"), strings.Contains(hint, "verification error"):
		return BadSignature
	case strings.Contains(hint, "has expired or is not yet valid"):
		if strings.Contains(hint, "is before") {
			return NotYetValid
		}
		return Expired
	case strings.Contains(hint, "cannot sign this kind of certificate"), strings.Contains(hint, "not authorized to sign other certificates"):
		return NotCA
	case strings.Contains(hint, "not authorized to sign for this name"), strings.Contains(hint, "constraint"):
		return NameConstraint
	case strings.Contains(hint, "too many intermediates"):
		return PathLength
	case strings.Contains(hint, "incompatible key usage"), strings.Contains(hint, "not authorized for an extended key usage"):
		return BadUsage
	case strings.Contains(hint, "algorithm unimplemented"), strings.Contains(hint, "insecure algorithm"), strings.Contains(hint, "unhandled critical extension"):
		return Unsupported
	}
	return UnknownIssuer
}
