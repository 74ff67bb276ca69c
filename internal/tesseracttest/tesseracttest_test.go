package tesseracttest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/client"
	"github.com/google/certificate-transparency-go/ctutil"
	"github.com/google/certificate-transparency-go/jsonclient"
	ctx509 "github.com/google/certificate-transparency-go/x509"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/testpki"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	tclient "github.com/transparency-dev/tessera/client"
)

// TestSubmitAndProve is the harness's own check, with the field's clients
// only: certificate-transparency-go submits two chains and verifies their
// SCTs; Tessera's client reads TesseraCT's tiles through the harness's
// read path and proves each entry's inclusion and the two checkpoints'
// consistency.
func TestSubmitAndProve(t *testing.T) {
	l := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lc, err := client.New(l.SubmissionURL, http.DefaultClient, jsonclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	roots, err := lc.GetAcceptedRoots(ctx)
	if err != nil || len(roots) != 1 || !bytes.Equal(roots[0].Data, l.CA.Cert.Raw) {
		t.Fatalf("get-roots: %d roots, %v; want the testbed root", len(roots), err)
	}
	inter, err := l.CA.NewIntermediate("TesseraCT Test Intermediate", testpki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}

	type submitted struct {
		index uint64
		hash  [32]byte
	}
	var subs []submitted
	var sizes []uint64
	var roots2 [][]byte
	for i, host := range []string{"one.tesseract.test", "two.tesseract.test"} {
		leaf, err := inter.Issue(testpki.LeafOptions{DNSNames: []string{host}})
		if err != nil {
			t.Fatal(err)
		}
		var chain []ct.ASN1Cert
		for _, der := range leaf.Chain {
			chain = append(chain, ct.ASN1Cert{Data: der})
		}
		sct, err := lc.AddChain(ctx, chain)
		if err != nil {
			t.Fatalf("add-chain %s: %v\n%s", host, err, l.Output())
		}
		cert, err := ctx509.ParseCertificate(leaf.Chain[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := ctutil.VerifySCT(l.PublicKey, []*ctx509.Certificate{cert}, sct, false); err != nil {
			t.Fatalf("SCT for %s does not verify with the log's key: %v", host, err)
		}
		other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err := ctutil.VerifySCT(other.Public(), []*ctx509.Certificate{cert}, sct, false); err == nil {
			t.Fatalf("SCT for %s verifies with an unrelated key", host)
		}
		if sct.LogID.KeyID != l.LogID {
			t.Fatalf("SCT log id %x, want %x", sct.LogID.KeyID, l.LogID)
		}
		index, err := ctwire.LeafIndex(sct.Extensions)
		if err != nil {
			t.Fatalf("SCT for %s: %v", host, err)
		}
		if index != uint64(i) {
			t.Fatalf("SCT for %s has leaf_index %d, want %d", host, index, i)
		}
		// static-ct-api: the Merkle tree leaf carries the SCT's
		// extensions, so the leaf hash is computed with them.
		mtl, err := ct.MerkleTreeLeafFromChain([]*ctx509.Certificate{cert}, ct.X509LogEntryType, sct.Timestamp)
		if err != nil {
			t.Fatal(err)
		}
		mtl.TimestampedEntry.Extensions = sct.Extensions
		hash, err := ct.LeafHashForLeaf(mtl)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, submitted{index, hash})

		cp, raw, err := l.WaitSize(ctx, index+1)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(raw, []byte(l.Origin+"\n")) {
			t.Fatalf("checkpoint does not start with the origin:\n%s", raw)
		}
		sizes = append(sizes, cp.Size)
		roots2 = append(roots2, cp.Hash)
		pb, err := tclient.NewProofBuilder(ctx, cp.Size, l.ReadTile)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range subs {
			p, err := pb.InclusionProof(ctx, s.index)
			if err != nil {
				t.Fatalf("inclusion proof for %d at %d: %v", s.index, cp.Size, err)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, s.index, cp.Size, s.hash[:], p, cp.Hash); err != nil {
				t.Fatalf("entry %d not included in TesseraCT's checkpoint of size %d: %v", s.index, cp.Size, err)
			}
		}
		bundle, err := l.ReadEntryBundle(ctx, 0, uint8(cp.Size%256))
		if err != nil || len(bundle) == 0 {
			t.Fatalf("data tile 0 at size %d: %d bytes, %v", cp.Size, len(bundle), err)
		}
		if !bytes.Contains(bundle, leaf.Chain[0]) {
			t.Fatalf("data tile 0 does not hold the certificate of %s", host)
		}
	}
	pb, err := tclient.NewProofBuilder(ctx, sizes[1], l.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pb.ConsistencyProof(ctx, sizes[0], sizes[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, sizes[0], sizes[1], p, roots2[0], roots2[1]); err != nil {
		t.Fatalf("checkpoints of size %d and %d not consistent: %v", sizes[0], sizes[1], err)
	}
}

// TestRejectsForeignChain checks that the harness's TesseraCT validates
// chains: a chain to a root it was not given is refused.
func TestRejectsForeignChain(t *testing.T) {
	l := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lc, err := client.New(l.SubmissionURL, http.DefaultClient, jsonclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := testpki.NewRootCA("Foreign Root", testpki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := foreign.Issue(testpki.LeafOptions{DNSNames: []string{"foreign.test"}, SendRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	var chain []ct.ASN1Cert
	for _, der := range leaf.Chain {
		chain = append(chain, ct.ASN1Cert{Data: der})
	}
	if _, err := lc.AddChain(ctx, chain); err == nil {
		t.Fatal("TesseraCT accepted a chain to a root it does not trust")
	}
}

func TestReadPath(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"checkpoint":         "cp",
		"tile/0/000":         "tile",
		"tile/data/000.p/3":  "data",
		"issuer/abcd":        "issuer",
		".state/treeState":   "secret",
		"antispam/something": "secret",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
	}
	os.WriteFile(filepath.Join(filepath.Dir(dir), "outside"), []byte("secret"), 0o644)
	h := ReadPath(dir)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/checkpoint", 200, "cp"},
		{"GET", "/tile/0/000", 200, "tile"},
		{"GET", "/tile/data/000.p/3", 200, "data"},
		{"HEAD", "/issuer/abcd", 200, ""},
		{"GET", "/.state/treeState", 404, ""},
		{"GET", "/antispam/something", 404, ""},
		{"GET", "/tile/../.state/treeState", 404, ""},
		{"GET", "/tile/../../outside", 404, ""},
		{"GET", "/tile/0/", 404, ""},
		{"GET", "/tile/", 404, ""},
		{"GET", "/", 404, ""},
		{"POST", "/checkpoint", 405, ""},
	} {
		r := httptest.NewRequest(tc.method, "http://x/", nil)
		r.URL.Path = tc.path
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.code || (tc.body != "" && w.Body.String() != tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, w.Code, w.Body.String(), tc.code, tc.body)
		}
		if bytes.Contains(w.Body.Bytes(), []byte("secret")) {
			t.Errorf("%s %s served a file outside the read path", tc.method, tc.path)
		}
	}
}

// TestPortTaken starts TesseraCT on a port another listener holds: the
// harness sees it fail to bind and starts it again on a free port.
func TestPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	calls := 0
	pickPort = func(t testing.TB) int {
		calls++
		if calls == 1 {
			return taken
		}
		return freePort(t)
	}
	defer func() { pickPort = freePort }()
	l := Start(t, Options{})
	if calls != 2 || l.SubmissionURL == "http://127.0.0.1:"+strconv.Itoa(taken) {
		t.Fatalf("%d ports picked, submission at %s; want a second, free port", calls, l.SubmissionURL)
	}
	if _, _, err := l.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
}
