package corpus

import (
	"crypto/rsa"
	"crypto/x509"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pkie/pkie/internal/verify"
)

// Difference is a documented way in which the libraries' rules differ,
// recognised from a case and the answers to it.
type Difference struct {
	// Name is the class a disagreement it explains is listed under.
	Name string
	// Explain says what differs and which behaviour is whose.
	Explain string
	// Ref is where the behaviour is documented (docs/measurement/verification.md
	// cites each in full).
	Ref string
	// Backends are those whose departure the difference explains; nil
	// means any.
	Backends []string
	// Match reports whether the difference explains the disagreement.
	Match func(v *View) bool
}

// View is a disagreement as the differences look at it: the case, its
// certificates parsed by crypto/x509 (nil where they do not parse), and
// the answers by back end.
type View struct {
	Case    *Case
	Leaf    *x509.Certificate
	Chain   []*x509.Certificate // Chain[0] is Leaf
	Answers map[string]Answer
}

// Accepts reports whether back end name answered valid.
func (v *View) Accepts(name string) bool {
	a, ok := v.Answers[name]
	return ok && a.Err == "" && a.Valid
}

// Rejects reports whether back end name answered invalid.
func (v *View) Rejects(name string) bool {
	a, ok := v.Answers[name]
	return ok && a.Err == "" && !a.Valid
}

// Unexplained is the class of a disagreement no known difference explains.
const Unexplained = "unexplained: possible bug"

func newView(o *Outcome) *View {
	v := &View{Case: o.Case, Answers: map[string]Answer{}}
	for _, a := range o.Answers {
		v.Answers[a.Backend] = a
	}
	for i, der := range o.Case.Chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			c = nil
		}
		if i == 0 {
			v.Leaf = c
		}
		v.Chain = append(v.Chain, c)
	}
	return v
}

// classify names d's class: the known differences that together explain
// every departing back end, or Unexplained.
func classify(d *Disagreement, o *Outcome) {
	if d.Kind == KindError {
		d.Class = "back end error"
		d.Why = "a back end gave no verdict: " + firstError(o.Answers)
		return
	}
	v := newView(o)
	explained := map[string]bool{}
	var names, whys []string
	for i := range Differences {
		k := &Differences[i]
		if !k.Match(v) {
			continue
		}
		useful := false
		for _, b := range d.Backends {
			if k.about(b) && !explained[b] {
				explained[b], useful = true, true
			}
		}
		if useful {
			names = append(names, k.Name)
			whys = append(whys, k.Explain)
		}
	}
	all := len(d.Backends) > 0
	for _, b := range d.Backends {
		all = all && explained[b]
	}
	if !all {
		d.Class = Unexplained
		d.Why = "no known difference between the libraries explains it"
		if len(names) > 0 {
			d.Why += " (" + strings.Join(names, ", ") + " explains only some of the departing back ends)"
		}
		return
	}
	d.Class, d.Why, d.Explained = strings.Join(names, " + "), strings.Join(whys, " "), true
}

func (k *Difference) about(backend string) bool {
	if len(k.Backends) == 0 {
		return true
	}
	for _, b := range k.Backends {
		if b == backend {
			return true
		}
	}
	return false
}

func firstError(as []Answer) string {
	for _, a := range as {
		if a.Err != "" {
			return a.Backend + ": " + a.Err
		}
	}
	return ""
}

// only reports whether name is the one back end, of those that answered,
// whose verdict is valid (or, with valid false, invalid).
func (v *View) only(name string, valid bool) bool {
	a, ok := v.Answers[name]
	if !ok || a.Err != "" || a.Valid != valid {
		return false
	}
	for n, o := range v.Answers {
		if n != name && o.Err == "" && o.Valid == valid {
			return false
		}
	}
	return true
}

// others reports whether every back end but those named answered with
// verdict valid.
func (v *View) others(valid bool, except ...string) bool {
	n := 0
	for name, a := range v.Answers {
		skip := false
		for _, e := range except {
			skip = skip || e == name
		}
		if skip {
			continue
		}
		if a.Err != "" || a.Valid != valid {
			return false
		}
		n++
	}
	return n > 0
}

func (v *View) code(name string) verify.Code { return v.Answers[name].Code }

// certs is every certificate of the case that parses: chain and roots.
func (v *View) certs() []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range v.Chain {
		if c != nil {
			out = append(out, c)
		}
	}
	for _, der := range v.Case.Roots {
		if c, err := x509.ParseCertificate(der); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// hostIsDNS reports whether the case names a host that is not an IP.
func (v *View) hostIsDNS() bool {
	if v.Case.Host == "" {
		return false
	}
	_, err := netip.ParseAddr(strings.Trim(v.Case.Host, "[]"))
	return err != nil
}

// opensslDepth is the certificate depth OpenSSL's reason names, or -1.
func (v *View) opensslDepth() int {
	m := depthRE.FindStringSubmatch(v.Answers["openssl"].Reason)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

var depthRE = regexp.MustCompile(`\(depth (\d+)\)`)

// matchesCN reports whether the leaf's subject common name, read as a DNS
// name (a leftmost "*" label matching one label), is host.
func matchesCN(leaf *x509.Certificate, host string) bool {
	cn := strings.ToLower(strings.TrimSuffix(leaf.Subject.CommonName, "."))
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if cn == "" {
		return false
	}
	if cn == host {
		return true
	}
	if rest, ok := strings.CutPrefix(cn, "*."); ok {
		_, hrest, found := strings.Cut(host, ".")
		return found && hrest == rest
	}
	return false
}

func caLeafRefusedByWebpki(v *View) bool {
	return v.Leaf != nil && v.Leaf.BasicConstraintsValid && v.Leaf.IsCA &&
		v.Rejects("webpki") && v.code("webpki") == verify.NotCA
}

// Differences is the table of known differences. Each is claimed only
// where the libraries' documentation or code says so; docs/measurement/verification.md
// ("Differential testing") cites them.
var Differences = []Difference{
	{
		Name:     "openssl: hostname falls back to the subject CN",
		Backends: []string{"openssl"},
		Explain: "X509_check_host, with the flags libssl uses by default (0), checks the subject's common name " +
			"when the leaf has no DNS name in its subjectAltName; crypto/x509 has ignored the common name since Go 1.15 " +
			"and webpki never reads it (it has no CN-ID support).",
		Ref: "OpenSSL X509_check_host(3), X509_CHECK_FLAG_NEVER_CHECK_SUBJECT; crypto/x509 Certificate.VerifyHostname; rustls-webpki src/subject_name/mod.rs",
		Match: func(v *View) bool {
			return v.Leaf != nil && v.only("openssl", true) && v.hostIsDNS() &&
				len(v.Leaf.DNSNames) == 0 && matchesCN(v.Leaf, v.Case.Host)
		},
	},
	{
		Name:     "openssl: name constraints applied to the subject CN",
		Backends: []string{"openssl"},
		Explain: "when the leaf has no DNS name in its subjectAltName, OpenSSL also checks its subject common name " +
			"against the issuers' DNS name constraints (NAME_CONSTRAINTS_check_CN), so a CN that is not a name the " +
			"constraint allows (an IP address, another domain) fails the chain; crypto/x509 and webpki apply " +
			"constraints to the subjectAltName only.",
		Ref: "OpenSSL crypto/x509/x509_vfy.c check_name_constraints(), crypto/x509/v3_ncons.c NAME_CONSTRAINTS_check_CN()",
		Match: func(v *View) bool {
			return v.Leaf != nil && v.only("openssl", false) && v.code("openssl") == verify.NameConstraint &&
				len(v.Leaf.DNSNames) == 0 && v.Leaf.Subject.CommonName != ""
		},
	},
	{
		Name:     "openssl: partial wildcards",
		Backends: []string{"openssl"},
		Explain: "without X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS (libssl does not set it) OpenSSL matches a \"*\" with " +
			"a prefix or suffix in the leftmost label (\"f*.example.com\"); crypto/x509 and webpki accept only a " +
			"whole \"*\" label.",
		Ref: "OpenSSL X509_check_host(3), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS",
		Match: func(v *View) bool {
			if v.Leaf == nil || !v.only("openssl", true) || !v.hostIsDNS() {
				return false
			}
			for _, n := range v.Leaf.DNSNames {
				first, _, _ := strings.Cut(n, ".")
				if strings.Contains(first, "*") && first != "*" {
					return true
				}
			}
			return false
		},
	},
	{
		Name:     "openssl: one path, no backtracking",
		Backends: []string{"openssl"},
		Explain: "X509_verify_cert builds one chain, choosing each issuer as it goes, and looks for another only " +
			"to reach a trust anchor; a chain that fails a check (expired, EKU, basic constraints, algorithm, name " +
			"constraints) is rejected even when another issuer with the same name would give a valid path. " +
			"crypto/x509 and webpki search every candidate path. Here the certificates hold two issuers with the " +
			"same subject, and crypto/x509 and webpki both found a valid path.",
		Ref: "OpenSSL X509_VERIFY_PARAM_set_flags(3), X509_V_FLAG_NO_ALT_CHAINS and X509_V_FLAG_TRUSTED_FIRST; crypto/x509/x509_vfy.c build_chain()",
		Match: func(v *View) bool {
			if !v.Rejects("openssl") || !v.Accepts("go") || !v.Accepts("webpki") {
				return false
			}
			seen := map[string]string{}
			for _, c := range v.certs() {
				if prev, ok := seen[string(c.RawSubject)]; ok && prev != string(c.Raw) {
					return true
				}
				seen[string(c.RawSubject)] = string(c.Raw)
			}
			return false
		},
	},
	{
		Name:     "openssl: notAfter is exclusive",
		Backends: []string{"openssl"},
		Explain: "OpenSSL treats a certificate as expired at the very second of its notAfter (X509_cmp_time " +
			"answers -1 for a time \"earlier than, or equal to\" the one compared), where RFC 5280 4.1.2.5 makes " +
			"notAfter inclusive, as crypto/x509 and webpki do.",
		Ref: "OpenSSL X509_cmp_time(3), crypto/x509/x509_vfy.c x509_check_cert_time(); RFC 5280 4.1.2.5",
		Match: func(v *View) bool {
			if !v.only("openssl", false) || v.code("openssl") != verify.Expired {
				return false
			}
			at := v.Case.Time.Truncate(time.Second)
			for _, c := range v.certs() {
				if c.NotAfter.Equal(at) {
					return true
				}
			}
			return false
		},
	},
	{
		Name:     "crypto/x509 accepts RSA keys under 2048 bits",
		Backends: []string{"go", "go-parallel"},
		Explain: "crypto/x509 verifies signatures by RSA keys down to crypto/rsa's minimum of 1024 bits, while " +
			"rustls-webpki's RSA algorithms (with ring) take keys of 2048 to 8192 bits only and OpenSSL at " +
			"security level 2 (this system's TLS default) refuses RSA keys under 2048 bits.",
		Ref: "crypto/rsa package documentation (1024-bit minimum); rustls-webpki src/ring_algs.rs (RSA_PKCS1_2048_8192_SHA256 …); OpenSSL SSL_CTX_set_security_level(3)",
		Match: func(v *View) bool {
			if !v.Accepts("go") {
				return false
			}
			refused := v.Rejects("webpki") && v.code("webpki") == verify.BadSignature ||
				v.Rejects("openssl") && v.code("openssl") == verify.Unsupported
			if !refused {
				return false
			}
			for _, c := range v.certs() {
				if k, ok := c.PublicKey.(*rsa.PublicKey); ok && k.N.BitLen() < 2048 {
					return true
				}
			}
			return false
		},
	},
	{
		Name:     "webpki: a CA certificate is not an end entity",
		Backends: []string{"webpki"},
		Explain: "rustls-webpki refuses a leaf whose basicConstraints says cA=TRUE (Error::CaUsedAsEndEntity); " +
			"crypto/x509 and OpenSSL's TLS purposes accept one.",
		Ref: "rustls-webpki src/verify_cert.rs (Role::EndEntity with cA set), src/error.rs CaUsedAsEndEntity",
		Match: func(v *View) bool {
			return v.Case.Expect == Accept && caLeafRefusedByWebpki(v)
		},
	},
	{
		// The same difference seen from the other side: the case expects
		// the CA leaf refused, and the back ends that accept it depart.
		Name:     "webpki: a CA certificate is not an end entity",
		Backends: []string{"go", "go-parallel", "openssl"},
		Explain: "rustls-webpki refuses a leaf whose basicConstraints says cA=TRUE (Error::CaUsedAsEndEntity); " +
			"crypto/x509 and OpenSSL's TLS purposes accept one.",
		Ref: "rustls-webpki src/verify_cert.rs (Role::EndEntity with cA set), src/error.rs CaUsedAsEndEntity",
		Match: func(v *View) bool {
			return v.Case.Expect == Reject && caLeafRefusedByWebpki(v)
		},
	},
	{
		Name:     "webpki: trust anchors are a name and a key",
		Backends: []string{"webpki"},
		Explain: "rustls-webpki turns a root certificate into a trust anchor (subject, public key, name " +
			"constraints) without checking anything else in it, as RFC 5280 6.2 allows: its validity period and " +
			"extensions are not looked at. OpenSSL's reason names a certificate beyond the presented chain, i.e. " +
			"the root, as the one at fault.",
		Ref: "rustls-webpki src/trust_anchor.rs anchor_from_trusted_cert; RFC 5280 6.2",
		Match: func(v *View) bool {
			d := v.opensslDepth()
			return v.only("webpki", true) && v.Case.Expect == Reject && d >= len(v.Case.Chain)
		},
	},
	{
		Name:     "limbo: all back ends agree against x509-limbo",
		Backends: nil,
		Explain: "every back end gives the same verdict, the opposite of x509-limbo's: not a difference between " +
			"the libraries but a rule none of them enforces, mostly an RFC 5280 profile requirement (AKI and " +
			"SKI present, no empty subject, no critical extension where the profile forbids one) that the " +
			"Web PKI's validators do not check. Only for limbo: on the other corpora the same agreement would " +
			"point at the corpus or at every back end, and stays unexplained.",
		Ref: "the case's own description in limbo.json, which names the rule",
		Match: func(v *View) bool {
			if v.Case.Expect == Unknown || v.Case.Source != LimboSource {
				return false
			}
			want := v.Case.Expect == Accept
			for _, a := range v.Answers {
				if a.Err != "" || a.Valid == want {
					return false
				}
			}
			return len(v.Answers) > 1
		},
	},
}
