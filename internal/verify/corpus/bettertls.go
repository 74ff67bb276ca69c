package corpus

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/Netflix/bettertls/test-suites/certutil"
	"github.com/Netflix/bettertls/test-suites/nameconstraints"
	"github.com/Netflix/bettertls/test-suites/pathbuilding"
	test_case "github.com/Netflix/bettertls/test-suites/test-case"

	"github.com/pkie/pkie/internal/verify"
)

// BetterTLSVersion is the github.com/Netflix/bettertls module version the
// suites are generated from: the one Go's own crypto/x509 BetterTLS test
// pins.
const BetterTLSVersion = "v0.0.0-20250909192348-e1e99e353074"

// BetterTLSSuites are the suites BetterTLS defines.
var BetterTLSSuites = []string{"nameconstraints", "pathbuilding"}

// BetterTLSOptions choose which BetterTLS cases to load.
type BetterTLSOptions struct {
	// Suites to load; nil means all of BetterTLSSuites.
	Suites []string
	// Every keeps only every Every-th case of each suite (its first
	// included); 0 or 1 keeps all.
	Every int
}

func (o BetterTLSOptions) suites() []string {
	if len(o.Suites) == 0 {
		return BetterTLSSuites
	}
	return o.Suites
}

func (o BetterTLSOptions) keep(i int) bool { return o.Every <= 1 || i%o.Every == 0 }

// BetterTLS generates Netflix BetterTLS's path-building and
// name-constraints suites in process, under a new trust root, valid at
// now. It uses the suites' own packages, as the suite's "export-tests"
// command does, so the cases are the suite's, not a copy; certificates
// are generated with fresh keys, their validity placed around the time of
// generation, and now is the verification time.
//
// A case the suite marks "failure is a warning" (its SOFT_PASS and
// SOFT_FAIL) is Soft.
func BetterTLS(now time.Time, o BetterTLSOptions) (*Corpus, error) {
	rootCert, rootKey, err := certutil.GenerateSelfSignedCert("bettertls_trust_root")
	if err != nil {
		return nil, fmt.Errorf("corpus: bettertls trust root: %w", err)
	}
	roots := [][]byte{rootCert.Raw}
	out := &Corpus{}
	for _, name := range o.suites() {
		var p test_case.TestCaseProvider
		switch name {
		case "nameconstraints":
			p = nameconstraints.NewTestCaseProvider()
		case "pathbuilding":
			p = pathbuilding.NewTestCaseProvider()
		default:
			return nil, fmt.Errorf("corpus: unknown bettertls suite %q (known: %s)", name, strings.Join(BetterTLSSuites, ", "))
		}
		n, err := p.GetTestCaseCount()
		if err != nil {
			return nil, fmt.Errorf("corpus: bettertls %s: %w", name, err)
		}
		src := "bettertls/" + name
		for i := uint(0); i < n; i++ {
			if !o.keep(int(i)) {
				continue
			}
			tc, err := p.GetTestCase(i)
			if err != nil {
				return nil, fmt.Errorf("corpus: bettertls %s case %d: %w", name, i, err)
			}
			certs, err := tc.GetCertificates(rootCert, rootKey)
			if err != nil {
				return nil, fmt.Errorf("corpus: bettertls %s case %d: generating: %w", name, i, err)
			}
			var feats []string
			for _, f := range tc.RequiredFeatures() {
				feats = append(feats, p.DescribeFeature(f))
			}
			c := Case{ID: caseID(src, i), Source: src, Roots: roots, Chain: certs.Certificate,
				Host: tc.GetHostname(), Time: now, Purpose: verify.Server, Note: describeBetterTLS(tc, feats)}
			switch tc.ExpectedResult() {
			case test_case.EXPECTED_RESULT_PASS:
				c.Expect = Accept
			case test_case.EXPECTED_RESULT_FAIL:
				c.Expect = Reject
			case test_case.EXPECTED_RESULT_SOFT_PASS:
				c.Expect, c.Soft = Accept, true
			case test_case.EXPECTED_RESULT_SOFT_FAIL:
				c.Expect, c.Soft = Reject, true
			default:
				return nil, fmt.Errorf("corpus: bettertls %s case %d: unknown expected result %v", name, i, tc.ExpectedResult())
			}
			out.Cases = append(out.Cases, c)
		}
	}
	return out, nil
}

// describeBetterTLS says what a case is, in the suite's own terms.
func describeBetterTLS(tc test_case.TestCase, feats []string) string {
	var s string
	switch t := tc.(type) {
	case *pathbuilding.TestCaseImpl:
		e := t.ExplicitTestCase
		s = fmt.Sprintf("graph %s, trust %q, leaf from %q", e.TrustGraph.Name(), e.SrcNode, e.DstNode)
		if len(e.InvalidEdges) > 0 {
			var edges []string
			for _, ed := range e.InvalidEdges {
				edges = append(edges, fmt.Sprintf("%v", ed))
			}
			s += fmt.Sprintf(", invalid edges %s (%s)", strings.Join(edges, " "), pathbuilding.InvalidReason(t.InvalidReason))
		}
	case nameconstraints.NameConstraintsTestCase:
		s = fmt.Sprintf("host %s, CN %s %s, SAN dns %s ip %s, permitted ip %s dns %s, excluded ip %s dns %s",
			t.ClientHostnameType, t.CommonNameType, t.CommonNameValue, t.DnsSan, t.IpSan,
			t.NameConstraintsIpWhitelist, t.NameConstraintsDnsWhitelist, t.NameConstraintsIpBlacklist, t.NameConstraintsDnsBlacklist)
		if t.ExtraSan != nil {
			if b, err := t.ExtraSan.MarshalJSON(); err == nil {
				s += ", extra SAN " + string(b)
			}
		}
	}
	if len(feats) > 0 {
		s += "; features " + strings.Join(feats, ",")
	}
	return s
}

// betterTLSExport is the schema of "bettertls export-tests" output
// (test-suites/cmd/bettertls/export_tests.go in the module).
type betterTLSExport struct {
	Revision  string                           `json:"betterTlsRevision"`
	TrustRoot []byte                           `json:"trustRoot"`
	Suites    map[string]*betterTLSSuiteExport `json:"suites"`
}

type betterTLSSuiteExport struct {
	TestCases []*betterTLSCaseExport `json:"testCases"`
}

type betterTLSCaseExport struct {
	ID               uint     `json:"id"`
	Suite            string   `json:"suite"`
	Certificates     [][]byte `json:"certificates"`
	Hostname         string   `json:"hostname"`
	RequiredFeatures []string `json:"requiredFeatures"`
	Expected         string   `json:"expected"`
	FailureIsWarning bool     `json:"failureIsWarning"`
}

// ReadBetterTLS reads the cases of a "bettertls export-tests" file, to be
// verified at now (the export's certificates are valid for a year after
// it was made). Cases it cannot put to a back end (no certificate, an
// unknown expectation, more certificates than a request allows) are
// skipped with the reason.
func ReadBetterTLS(r io.Reader, now time.Time, o BetterTLSOptions) (*Corpus, error) {
	var ex betterTLSExport
	dec := json.NewDecoder(r)
	if err := dec.Decode(&ex); err != nil {
		return nil, fmt.Errorf("corpus: not a bettertls export: %w", err)
	}
	if len(ex.TrustRoot) == 0 || len(ex.TrustRoot) > verify.MaxCertBytes {
		return nil, fmt.Errorf("corpus: bettertls export: trust root of %d bytes", len(ex.TrustRoot))
	}
	if len(ex.Suites) == 0 {
		return nil, fmt.Errorf("corpus: bettertls export: no suites")
	}
	want := map[string]bool{}
	for _, s := range o.Suites {
		want[s] = true
	}
	var names []string
	for n := range ex.Suites {
		if len(want) == 0 || want[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := &Corpus{}
	roots := [][]byte{ex.TrustRoot}
	for _, name := range names {
		s := ex.Suites[name]
		if s == nil {
			continue
		}
		src := "bettertls/" + name
		for i, tc := range s.TestCases {
			if !o.keep(i) || tc == nil {
				continue
			}
			id := caseID(src, tc.ID)
			c := Case{ID: id, Source: src, Roots: roots, Chain: tc.Certificates, Host: tc.Hostname,
				Time: now, Purpose: verify.Server, Soft: tc.FailureIsWarning}
			if len(tc.RequiredFeatures) > 0 {
				c.Note = "features " + strings.Join(tc.RequiredFeatures, ",")
			}
			switch tc.Expected {
			case "ACCEPT":
				c.Expect = Accept
			case "REJECT":
				c.Expect = Reject
			default:
				out.Skipped = append(out.Skipped, Skip{ID: id, Source: src, Reason: fmt.Sprintf("unknown expectation %q", trim(tc.Expected, 40))})
				continue
			}
			if reason := unaskable(&c); reason != "" {
				out.Skipped = append(out.Skipped, Skip{ID: id, Source: src, Reason: reason})
				continue
			}
			out.Cases = append(out.Cases, c)
		}
	}
	return out, nil
}

// unaskable says why c cannot be put to a back end, or "".
func unaskable(c *Case) string {
	if err := c.Request().Check(); err != nil {
		return strings.TrimPrefix(err.Error(), "verify: ")
	}
	return ""
}
