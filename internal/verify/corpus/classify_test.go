package corpus

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/verify"
)

// cert makes a self-signed certificate shaped by edit, for the
// classification's structural checks (nothing here is verified).
func cert(t *testing.T, edit func(*x509.Certificate)) []byte {
	t.Helper()
	var key any
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key = k
	// A name of its own, so no two test certificates share a subject by
	// accident.
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: rand.Text()},
		NotBefore: time.Unix(1700000000, 0), NotAfter: time.Unix(1900000000, 0)}
	edit(tmpl)
	var pub any = &k.PublicKey
	if tmpl.PublicKey != nil {
		pub = tmpl.PublicKey
		tmpl.PublicKey = nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

type ans struct {
	valid  bool
	code   verify.Code
	reason string
}

func outcome(c *Case, as map[string]ans) Outcome {
	o := Outcome{Case: c}
	for _, n := range verify.Names {
		a, ok := as[n]
		if !ok {
			continue
		}
		o.Answers = append(o.Answers, Answer{Backend: n, Valid: a.valid, Code: a.code, Reason: a.reason})
	}
	return o
}

func TestClassify(t *testing.T) {
	at := time.Unix(1800000000, 0)
	ok := ans{true, verify.OK, "ok"}
	rej := func(c verify.Code) ans { return ans{false, c, string(c)} }
	cnOnly := cert(t, func(c *x509.Certificate) { c.Subject.CommonName = "host.test" })
	cnAndSAN := cert(t, func(c *x509.Certificate) { c.Subject.CommonName = "host.test"; c.DNSNames = []string{"other.test"} })
	partial := cert(t, func(c *x509.Certificate) { c.DNSNames = []string{"f*.example.test"} })
	sameA := cert(t, func(c *x509.Certificate) { c.Subject.CommonName = "ICA" })
	sameB := cert(t, func(c *x509.Certificate) { c.Subject.CommonName = "ICA"; c.SerialNumber = big.NewInt(2) })
	endsNow := cert(t, func(c *x509.Certificate) { c.NotAfter = at })
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ecLeaf := cert(t, func(c *x509.Certificate) {})
	rsaRootTmpl := &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "rsa1024"}, NotBefore: at.Add(-time.Hour), NotAfter: at.Add(time.Hour)}
	rsaRoot, err := x509.CreateCertificate(rand.Reader, rsaRootTmpl, rsaRootTmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	caLeaf := cert(t, func(c *x509.Certificate) { c.BasicConstraintsValid, c.IsCA = true, true })

	tests := []struct {
		name    string
		c       Case
		answers map[string]ans
		class   string
	}{
		{"cn fallback", Case{Source: "x", Host: "host.test", Expect: Reject, Chain: [][]byte{cnOnly}},
			map[string]ans{"go": rej(verify.NameMismatch), "openssl": ok, "webpki": rej(verify.NameMismatch)},
			"openssl: hostname falls back to the subject CN"},
		{"cn with a SAN is not the fallback", Case{Source: "x", Host: "host.test", Expect: Reject, Chain: [][]byte{cnAndSAN}},
			map[string]ans{"go": rej(verify.NameMismatch), "openssl": ok, "webpki": rej(verify.NameMismatch)},
			Unexplained},
		{"cn name constraints", Case{Source: "x", Host: "127.0.0.1", Expect: Accept, Chain: [][]byte{cnOnly}},
			map[string]ans{"go": ok, "openssl": rej(verify.NameConstraint), "webpki": ok},
			"openssl: name constraints applied to the subject CN"},
		{"partial wildcard", Case{Source: "x", Host: "foo.example.test", Expect: Reject, Chain: [][]byte{partial}},
			map[string]ans{"go": rej(verify.NameMismatch), "openssl": ok, "webpki": rej(verify.NameMismatch)},
			"openssl: partial wildcards"},
		{"no backtracking", Case{Source: "x", Expect: Accept, Chain: [][]byte{ecLeaf, sameA}, Roots: [][]byte{sameB}},
			map[string]ans{"go": ok, "openssl": rej(verify.UnknownIssuer), "webpki": ok},
			"openssl: one path, no backtracking"},
		{"one issuer per name is not backtracking", Case{Source: "x", Expect: Accept, Chain: [][]byte{ecLeaf, sameA}},
			map[string]ans{"go": ok, "openssl": rej(verify.UnknownIssuer), "webpki": ok},
			Unexplained},
		{"backtracking explains openssl, not go-parallel", Case{Source: "x", Expect: Accept, Chain: [][]byte{ecLeaf, sameA}, Roots: [][]byte{sameB}},
			map[string]ans{"go": ok, "go-parallel": rej(verify.BadSignature), "openssl": rej(verify.UnknownIssuer), "webpki": ok},
			Unexplained},
		{"notAfter exclusive", Case{Source: "x", Expect: Accept, Time: at, Chain: [][]byte{endsNow}},
			map[string]ans{"go": ok, "openssl": rej(verify.Expired), "webpki": ok},
			"openssl: notAfter is exclusive"},
		{"rsa floor", Case{Source: "x", Expect: Reject, Chain: [][]byte{ecLeaf}, Roots: [][]byte{rsaRoot}},
			map[string]ans{"go": ok, "openssl": rej(verify.Unsupported), "webpki": rej(verify.BadSignature)},
			"crypto/x509 accepts RSA keys under 2048 bits"},
		{"rsa floor does not explain an openssl that accepts", Case{Source: "x", Expect: Reject, Chain: [][]byte{ecLeaf}, Roots: [][]byte{rsaRoot}},
			map[string]ans{"go": ok, "openssl": ok, "webpki": rej(verify.BadSignature)},
			Unexplained},
		{"ca as end entity", Case{Source: "x", Expect: Reject, Chain: [][]byte{caLeaf}},
			map[string]ans{"go": ok, "openssl": ok, "webpki": rej(verify.NotCA)},
			"webpki: a CA certificate is not an end entity"},
		{"ca as end entity, expected valid: webpki explained, openssl not", Case{Source: "x", Expect: Accept, Chain: [][]byte{caLeaf}},
			map[string]ans{"go": ok, "openssl": rej(verify.BadUsage), "webpki": rej(verify.NotCA)},
			Unexplained},
		{"ca as end entity, expected valid", Case{Source: "x", Expect: Accept, Chain: [][]byte{caLeaf}},
			map[string]ans{"go": ok, "openssl": ok, "webpki": rej(verify.NotCA)},
			"webpki: a CA certificate is not an end entity"},
		{"anchor not checked", Case{Source: "x", Expect: Reject, Chain: [][]byte{ecLeaf}},
			map[string]ans{"go": rej(verify.Expired), "openssl": {false, verify.Expired, "certificate has expired (depth 1)"}, "webpki": ok},
			"webpki: trust anchors are a name and a key"},
		{"anchor: fault in the presented chain", Case{Source: "x", Expect: Reject, Chain: [][]byte{ecLeaf}},
			map[string]ans{"go": rej(verify.Expired), "openssl": {false, verify.Expired, "certificate has expired (depth 0)"}, "webpki": ok},
			Unexplained},
		{"limbo: all agree", Case{Source: LimboSource, Expect: Reject, Chain: [][]byte{ecLeaf}},
			map[string]ans{"go": ok, "openssl": ok, "webpki": ok},
			"limbo: all back ends agree against x509-limbo"},
		{"known: all agree is unexplained", Case{Source: KnownSource, Expect: Reject, Chain: [][]byte{ecLeaf}},
			map[string]ans{"go": ok, "openssl": ok, "webpki": ok},
			Unexplained},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			if len(c.Roots) == 0 {
				c.Roots = [][]byte{ecLeaf}
			}
			o := outcome(&c, tt.answers)
			var names []string
			for _, a := range o.Answers {
				names = append(names, a.Backend)
			}
			rep := NewReport(names, []Outcome{o})
			if len(rep.Disagreements) != 1 {
				t.Fatalf("%d disagreements", len(rep.Disagreements))
			}
			d := rep.Disagreements[0]
			if d.Class != tt.class || d.Explained != (tt.class != Unexplained) || d.Why == "" {
				t.Errorf("class %q explained %v (%s), want %q", d.Class, d.Explained, d.Why, tt.class)
			}
			if d.Explained && !strings.Contains(d.Why, " ") {
				t.Errorf("explanation %q", d.Why)
			}
		})
	}
}

func TestClassifyErrorAndBetween(t *testing.T) {
	leaf := cert(t, func(c *x509.Certificate) {})
	c := Case{Source: ScanSource, Expect: Unknown, Chain: [][]byte{leaf}, Roots: [][]byte{leaf}}
	o := Outcome{Case: &c, Answers: []Answer{{Backend: "go", Valid: true, Code: verify.OK}, {Backend: "openssl", Err: "helper died"}}}
	rep := NewReport([]string{"go", "openssl"}, []Outcome{o})
	if d := rep.Disagreements[0]; d.Kind != KindError || d.Class != "back end error" || !strings.Contains(d.Why, "helper died") {
		t.Errorf("%+v", d)
	}
	o = Outcome{Case: &c, Answers: []Answer{{Backend: "go", Valid: true, Code: verify.OK}, {Backend: "openssl", Code: verify.Expired},
		{Backend: "webpki", Valid: true, Code: verify.OK}}}
	rep = NewReport([]string{"go", "openssl", "webpki"}, []Outcome{o})
	d := rep.Disagreements[0]
	if d.Kind != KindBetween || len(d.Backends) != 1 || d.Backends[0] != "openssl" || rep.Unexplained != 1 {
		t.Errorf("%+v", d)
	}
	if rep.Backends[1].Total.WithMajority != 0 || rep.Backends[0].Total.WithMajority != 1 || rep.Backends[0].Total.Unexpected != 1 {
		t.Errorf("%+v", rep.Backends)
	}
}
