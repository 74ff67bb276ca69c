package ctinclusion

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/client"
	"github.com/google/certificate-transparency-go/jsonclient"
	cttls "github.com/google/certificate-transparency-go/tls"
	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/loglist"
	"github.com/pkie/pkie/internal/sct"
	"github.com/pkie/pkie/internal/tesseracttest"
	"github.com/pkie/pkie/internal/testpki"
)

// testLog is a log on loopback as a client's log list names it, and the
// means to submit to it.
type testLog struct {
	name string
	log  *loglist.Log
	lc   *client.LogClient
	ca   *testpki.CA // a CA whose chains the log accepts
	stop func()
	pkie *ctlog.Log // pkie's log, to submit to in process
}

// listEntry describes a log as a log list would. A static-ct-api log's
// URL is its submission prefix, whose host and path are the checkpoint
// origin; Fetch reads only the monitoring URL, so the submission URL
// need not resolve.
func listEntry(t *testing.T, desc string, kind loglist.Kind, url, monitoring string, key any) *loglist.Log {
	t.Helper()
	spki, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := &loglist.Log{Key: key, SPKI: spki, Description: desc, Operator: "pkie tests", Kind: kind,
		URL: url, MonitoringURL: monitoring, MMD: 24 * time.Hour, State: loglist.Usable}
	l.ID = sha256.Sum256(spki)
	return l
}

// startPKIELog runs pkie's own log (internal/ctlog) on loopback, serving
// both its static-ct-api tiles and its RFC 6962 read API, and returns it
// as a static-ct-api log and as an RFC 6962 log.
func startPKIELog(t *testing.T, origin string) (static, rfc *testLog) {
	t.Helper()
	ctx := context.Background()
	root, err := testpki.NewRootCA("ctinclusion test root", testpki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := ctlog.Init(ctx, dir, origin, ctlog.InitOptions{Roots: root.PEM()}); err != nil {
		t.Fatalf("ctlog.Init: %v", err)
	}
	l, err := ctlog.Open(ctx, dir, ctlog.Options{BatchMaxAge: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("ctlog.Open: %v", err)
	}
	srv := httptest.NewServer(l.Handler(ctlog.HandlerOptions{}))
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			srv.Close()
			if err := l.Close(); err != nil {
				t.Errorf("closing pkie's log: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	lc := logClient(t, srv.URL, l.PublicKey())
	inter := intermediate(t, root)
	static = &testLog{name: "pkie static-ct-api", lc: lc, ca: inter, stop: stop, pkie: l,
		log: listEntry(t, "pkie test log", loglist.Static, "https://"+origin+"/", srv.URL, l.PublicKey())}
	rfc = &testLog{name: "pkie RFC 6962", lc: lc, ca: inter, stop: stop, pkie: l,
		log: listEntry(t, "pkie test log (RFC 6962 API)", loglist.RFC6962, srv.URL+"/", "", l.PublicKey())}
	return static, rfc
}

// testLogs are the real logs the tests run against.
var testLogs = []struct {
	name  string
	start func(t *testing.T) *testLog
}{
	{"pkie static-ct-api", func(t *testing.T) *testLog { s, _ := startPKIELog(t, "pkie.incl.test/log"); return s }},
	{"pkie RFC 6962", func(t *testing.T) *testLog { _, r := startPKIELog(t, "pkie.incl.test/log"); return r }},
	{"TesseraCT", startTesseraCT},
}

// startTesseraCT runs TesseraCT v0.1.1 on loopback. Its monitoring half
// is files served by the harness, which outlive the binary; the test reads
// them through a proxy of its own, so that stopping the log stops both
// halves, as an outage would.
func startTesseraCT(t *testing.T) *testLog {
	t.Helper()
	tl := tesseracttest.Start(t, tesseracttest.Options{Origin: "tesseract.incl.test/log"})
	u, err := url.Parse(tl.MonitoringURL)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(httputil.NewSingleHostReverseProxy(u))
	t.Cleanup(front.Close)
	stop := func() {
		front.Close()
		tl.Stop()
	}
	return &testLog{name: "TesseraCT", lc: logClient(t, tl.SubmissionURL, tl.PublicKey), ca: intermediate(t, tl.CA), stop: stop,
		log: listEntry(t, "TesseraCT test log", loglist.Static, "https://tesseract.incl.test/log/", front.URL, tl.PublicKey)}
}

// intermediate returns a CA under root: chains from it carry their issuer,
// as add-pre-chain needs.
func intermediate(t *testing.T, root *testpki.CA) *testpki.CA {
	t.Helper()
	inter, err := root.NewIntermediate("ctinclusion test intermediate", testpki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	return inter
}

// logClient is certificate-transparency-go's client for a log, which
// checks the SCTs it gets back with the log's key.
func logClient(t *testing.T, url string, pub any) *client.LogClient {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := client.New(url, http.DefaultClient, jsonclient.Options{PublicKeyDER: der})
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

// submitted is a certificate a log took, with its SCT as a client holds
// it and the leaf hash of the entry it names.
type submitted struct {
	sct      *sct.SCT
	entry    *sct.Entry
	leafHash [32]byte
}

// submitCert logs a fresh certificate with add-chain and returns its
// SCT as a TLS handshake would deliver it.
func (tl *testLog) submitCert(ctx context.Context, t *testing.T, host string) submitted {
	t.Helper()
	leaf, err := tl.ca.Issue(testpki.LeafOptions{DNSNames: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	chain := append([][]byte{leaf.Cert.Raw}, tl.ca.Chain()...)
	got, err := tl.lc.AddChain(ctx, asn1Chain(chain))
	if err != nil {
		t.Fatalf("%s: add-chain: %v", tl.name, err)
	}
	s := parseSCT(t, got, sct.TLSExtension)
	e, err := sct.EntryFor(s, leaf.Cert, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sct.Verify(s, e, tl.log.Key); err != nil {
		t.Fatalf("%s: the SCT does not verify: %v", tl.name, err)
	}
	return submitted{sct: s, entry: e, leafHash: e.LeafHash(s)}
}

// submitPrecert logs a precertificate with add-pre-chain, issues the
// final certificate with the SCT embedded, and returns the SCT as the
// client reads it from that certificate: the entry is rebuilt from the
// final certificate and its issuer, as a client does.
func (tl *testLog) submitPrecert(ctx context.Context, t *testing.T, host string) submitted {
	t.Helper()
	key, err := testpki.NewKey(testpki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour).Truncate(time.Second), NotAfter: time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		AuthorityKeyId: tl.ca.Cert.SubjectKeyId,
	}
	pre := *tmpl
	pre.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}, Critical: true, Value: asn1.NullBytes}}
	preDER, err := x509.CreateCertificate(rand.Reader, &pre, tl.ca.Cert, key.Public(), tl.ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tl.lc.AddPreChain(ctx, asn1Chain(append([][]byte{preDER}, tl.ca.Chain()...)))
	if err != nil {
		t.Fatalf("%s: add-pre-chain: %v", tl.name, err)
	}
	raw, err := cttls.Marshal(*got)
	if err != nil {
		t.Fatal(err)
	}
	list, err := sct.MarshalList([][]byte{raw})
	if err != nil {
		t.Fatal(err)
	}
	val, err := asn1.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	final := *tmpl
	final.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}, Value: val}}
	der, err := x509.CreateCertificate(rand.Reader, &final, tl.ca.Cert, key.Public(), tl.ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	scts, err := sct.FromCertificate(leaf)
	if err != nil || len(scts) != 1 {
		t.Fatalf("embedded SCTs: %d, %v", len(scts), err)
	}
	s := scts[0]
	e, err := sct.EntryFor(s, leaf, tl.ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if err := sct.Verify(s, e, tl.log.Key); err != nil {
		t.Fatalf("%s: the embedded SCT does not verify: %v", tl.name, err)
	}
	return submitted{sct: s, entry: e, leafHash: e.LeafHash(s)}
}

func parseSCT(t *testing.T, got *ct.SignedCertificateTimestamp, src sct.Source) *sct.SCT {
	t.Helper()
	raw, err := cttls.Marshal(*got)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sct.Parse(raw, src)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func asn1Chain(chain [][]byte) []ct.ASN1Cert {
	out := make([]ct.ASN1Cert, len(chain))
	for i, der := range chain {
		out[i] = ct.ASN1Cert{Data: der}
	}
	return out
}

// withLeafIndex returns a copy of s whose leaf_index extension says i:
// an SCT a log never signed (its signature no longer verifies), which
// Fetch must still answer from the log's signed tree.
func withLeafIndex(t *testing.T, s *sct.SCT, i uint64) *sct.SCT {
	t.Helper()
	c := ct.SignedCertificateTimestamp{SCTVersion: ct.V1, Timestamp: s.Timestamp,
		Extensions: ct.CTExtensions{0, 0, 5, byte(i >> 32), byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)},
		Signature:  ct.DigitallySigned{Algorithm: cttls.SignatureAndHashAlgorithm{Hash: cttls.HashAlgorithm(s.HashAlg), Signature: cttls.SignatureAlgorithm(s.SigAlg)}, Signature: s.Signature}}
	copy(c.LogID.KeyID[:], s.LogID[:])
	return parseSCT(t, &c, s.Source)
}

// roundTrip encodes and decodes e, as the ct proof body carries it.
func roundTrip(t *testing.T, e *Evidence) *Evidence {
	t.Helper()
	b, err := e.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	var out Evidence
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary: %v", err)
	}
	return &out
}

// TestFetchAndVerify submits a certificate (add-chain) and a
// precertificate (add-pre-chain) to each real log on loopback, fetches
// the evidence of their SCTs and verifies it as a client would after the
// ct proof body carried it: Included, at the SCT's leaf_index. An SCT
// whose entry the log does not hold is NotYet, and the checkpoint that
// says so verifies.
func TestFetchAndVerify(t *testing.T) {
	ctx := context.Background()
	for _, c := range testLogs {
		t.Run(c.name, func(t *testing.T) {
			tl := c.start(t)
			cert := tl.submitCert(ctx, t, "cert.incl.test")
			pre := tl.submitPrecert(ctx, t, "precert.incl.test")
			f := &Fetcher{}
			for _, c := range []struct {
				name string
				s    submitted
			}{{"x509_entry", cert}, {"precert_entry", pre}} {
				e, err := f.Fetch(ctx, tl.log, c.s.sct, c.s.leafHash)
				if err != nil {
					t.Fatalf("%s: Fetch: %v", c.name, err)
				}
				e = roundTrip(t, e)
				if err := e.For(c.s.sct); err != nil {
					t.Errorf("%s: For: %v", c.name, err)
				}
				// Evidence about this SCT is not evidence about the other one.
				other := cert.sct
				if c.s.sct == cert.sct {
					other = pre.sct
				}
				if err := e.For(other); !errors.Is(err, ErrBadEvidence) {
					t.Errorf("%s: For another SCT: %v, want ErrBadEvidence", c.name, err)
				}
				r, err := Verify(e, tl.log, c.s.leafHash)
				if err != nil {
					t.Fatalf("%s: Verify: %v", c.name, err)
				}
				if r.Status != Included || e.LeafIndex >= r.TreeSize || r.CheckpointTime.IsZero() {
					t.Errorf("%s: %+v at leaf index %d; want included", c.name, r, e.LeafIndex)
				}
				if i, ok, _ := c.s.sct.LeafIndex(); tl.log.Kind == loglist.Static && (!ok || i != e.LeafIndex) {
					t.Errorf("%s: evidence at leaf index %d, SCT's leaf_index %d (%v)", c.name, e.LeafIndex, i, ok)
				}
				// Another SCT's leaf hash: the same proof does not lead to the root.
				if _, err := Verify(e, tl.log, [32]byte{1}); !errors.Is(err, ErrBadEvidence) {
					t.Errorf("%s: Verify for another leaf: %v, want ErrBadEvidence", c.name, err)
				}
			}

			// An entry the log does not hold: for a static-ct-api log an
			// SCT whose leaf_index is past the tree, for an RFC 6962 log
			// a leaf hash it never saw.
			unknown, hash := pre.sct, [32]byte{0xaa}
			if tl.log.Kind == loglist.Static {
				unknown = withLeafIndex(t, cert.sct, 1<<30)
			}
			e, err := f.Fetch(ctx, tl.log, unknown, hash)
			if err != nil {
				t.Fatalf("unknown entry: Fetch: %v", err)
			}
			e = roundTrip(t, e)
			if err := e.For(unknown); err != nil {
				t.Errorf("unknown entry: For: %v", err)
			}
			r, err := Verify(e, tl.log, hash)
			if err != nil || r.Status != NotYet {
				t.Fatalf("unknown entry: Verify: %+v, %v; want not yet included", r, err)
			}
		})
	}
}
