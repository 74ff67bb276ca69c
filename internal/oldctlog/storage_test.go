package oldctlog_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	. "github.com/pkie/pkie/internal/oldctlog"
	"github.com/pkie/pkie/internal/testbed"
)

// bulkyCert returns a certificate carrying pad bytes of a private
// extension, signed by issuer (self-signed if issuer is nil), with subject. Certificates near MaxCertBytes are what made entries expensive.
func bulkyCert(t testing.TB, issuer *testbed.CA, subject pkix.Name, isCA bool, pad int) []byte {
	t.Helper()
	key, err := testbed.NewKey(testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		BasicConstraintsValid: true,
		IsCA:                  isCA,
		ExtraExtensions: []pkix.Extension{{
			Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Value: make([]byte, pad)}},
	}
	if isCA {
		tmpl.KeyUsage = x509.KeyUsageCertSign
	}
	parent, signer := tmpl, key
	if issuer != nil {
		parent, signer = issuer.Cert, issuer.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestAddChainStoresVerifiedPath submits a valid leaf with unrelated
// certificates of nearly MaxCertBytes each: the entry keeps the leaf and the
// path that verified it, nothing else, and the leaf hash (RFC 6962 hashes
// the leaf alone) is what it always was.
func TestAddChainStoresVerifiedPath(t *testing.T) {
	ctx := context.Background()
	inter, chains := issue(t, 1)
	leaf, interDER, rootDER := chains[0][0], inter.Cert.Raw, inter.Root().Cert.Raw
	const pad = 60 << 10
	junk := func(name string) []byte { return bulkyCert(t, nil, pkix.Name{CommonName: name}, true, pad) }
	// Same name as the intermediate, another key: names alone must not link.
	impostor := bulkyCert(t, nil, inter.Cert.Subject, true, 100)
	for _, tc := range []struct {
		name      string
		roots     bool
		submitted [][]byte
		want      [][]byte // the stored chain after the leaf
	}{
		{"any: unrelated extras dropped", false,
			[][]byte{leaf, interDER, junk("a"), junk("b"), junk("c"), junk("d"), junk("e"), junk("f"), junk("g"), junk("h")},
			[][]byte{interDER}},
		{"any: a root ends the path", false,
			[][]byte{leaf, interDER, rootDER, junk("a")}, [][]byte{interDER, rootDER}},
		{"any: junk before the issuer", false,
			[][]byte{leaf, junk("a"), interDER}, nil},
		{"any: same name, other key", false,
			[][]byte{leaf, impostor, interDER}, nil},
		{"any: a repeated issuer", false,
			[][]byte{leaf, interDER, interDER}, [][]byte{interDER}},
		{"roots: extras dropped, the root kept", true,
			[][]byte{leaf, junk("a"), interDER, junk("b"), impostor}, [][]byte{interDER, rootDER}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLog(t)
			if tc.roots {
				var err error
				if l, err = Open(l.Dir(), Options{Roots: inter.Pool()}); err != nil {
					t.Fatal(err)
				}
				defer l.Close()
			}
			res, err := l.AddChain(ctx, tc.submitted)
			if err != nil {
				t.Fatal(err)
			}
			es, err := l.Entries(ctx, res.Index, res.Index+1)
			if err != nil || len(es) != 1 {
				t.Fatalf("entries: %d, %v", len(es), err)
			}
			e := es[0]
			if !slices.EqualFunc(e.Chain, tc.want, slices.Equal) {
				var sizes []int
				for _, c := range e.Chain {
					sizes = append(sizes, len(c))
				}
				t.Fatalf("stored chain of %d certificates (sizes %v), want %d", len(e.Chain), sizes, len(tc.want))
			}
			// The leaf and its hash are the leaf's alone, as before.
			want, err := (&Leaf{Timestamp: res.SCT.Timestamp, Type: X509Entry, Data: leaf}).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(e.LeafInput, want) {
				t.Fatal("stored leaf is not the x509_entry of the submitted leaf")
			}
			size, err := l.Size(ctx)
			if err != nil {
				t.Fatal(err)
			}
			root, err := l.RootAt(ctx, size)
			if err != nil {
				t.Fatal(err)
			}
			p, err := l.InclusionProof(ctx, res.Index, size)
			if err != nil {
				t.Fatal(err)
			}
			lh := LeafHash(want)
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, res.Index, size, lh[:], p, root[:]); err != nil {
				t.Fatalf("leaf hash not under the root: %v", err)
			}
		})
	}
}

// TestEntriesPageBytes fills a log with entries near the size limit: a
// page stops at MaxEntriesPageBytes of stored bytes however many entries
// were asked for, a client paging by start still reads every entry, and the
// remote audit passes over the short pages.
func TestEntriesPageBytes(t *testing.T) {
	ctx := context.Background()
	inter, _ := issue(t, 0)
	l := newTestLog(t)
	const n = 40
	chains := make([][][]byte, n)
	for i := range chains {
		chains[i] = [][]byte{bulkyCert(t, inter, pkix.Name{CommonName: fmt.Sprintf("big%d.test", i)}, false, 60<<10), inter.Cert.Raw}
	}
	if _, err := l.AddChains(ctx, chains); err != nil {
		t.Fatal(err)
	}
	if _, err := l.BuildSorted(ctx); err != nil {
		t.Fatal(err)
	}
	size, err := l.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}

	es, err := l.Entries(ctx, 0, size)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, e := range es {
		stored += len(e.LeafInput)
		for _, c := range e.Chain {
			stored += 3 + len(c)
		}
	}
	if len(es) == 0 || stored > MaxEntriesPageBytes {
		t.Fatalf("a page of %d entries holds %d stored bytes, want 1 or more entries and at most %d", len(es), stored, MaxEntriesPageBytes)
	}

	srv := httptest.NewServer(l.Handler(HandlerOptions{}))
	defer srv.Close()
	var got []uint64
	for pos := uint64(0); pos < size; {
		resp, err := http.Get(fmt.Sprintf("%s/v1/log/entries?start=%d&end=%d", srv.URL, pos, size))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("entries from %d: %d %v", pos, resp.StatusCode, err)
		}
		// base64 grows the stored bytes by a third; the JSON around them
		// is small.
		if max := MaxEntriesPageBytes*4/3 + 16<<10; len(body) > max {
			t.Fatalf("entries from %d: a %d-byte answer, want at most %d", pos, len(body), max)
		}
		var page struct{ Entries []Entry }
		if err := json.Unmarshal(body, &page); err != nil || len(page.Entries) == 0 {
			t.Fatalf("entries from %d: %d entries, %v", pos, len(page.Entries), err)
		}
		for _, e := range page.Entries {
			got = append(got, e.Index)
		}
		pos += uint64(len(page.Entries))
	}
	for i, idx := range got {
		if idx != uint64(i) {
			t.Fatalf("paging read entry %d at position %d", idx, i)
		}
	}
	if len(got) != int(size) {
		t.Fatalf("paging read %d entries of %d", len(got), size)
	}

	rep, err := AuditRemote(ctx, RemoteAuditOptions{URL: srv.URL, Verifier: l.Verifier(), TempDir: t.TempDir()})
	if err != nil || !rep.OK() {
		t.Fatalf("remote audit over short pages: %v %+v", err, rep)
	}
}
