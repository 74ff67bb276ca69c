package ctsynth

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	ctx509 "github.com/google/certificate-transparency-go/x509"
	tnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/client"
	"github.com/transparency-dev/tessera/ctonly"
)

// generate makes and opens a log of n entries in a test directory.
func generate(t testing.TB, n uint64) *Log {
	t.Helper()
	dir := t.TempDir()
	if err := Generate(t.Context(), dir, Options{Entries: n, Origin: "synthetic.pkie.example/test"}); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func serve(t testing.TB, h http.Handler) *Fetcher {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Fetcher{URL: srv.URL + "/", Client: srv.Client()}
}

// TestVerify: logs whose sizes end on, before and after tile boundaries
// (partial tiles at every level) verify entry by entry, and the ceiling
// reads every entry.
func TestVerify(t *testing.T) {
	for _, n := range []uint64{1, 255, 256, 257, 4 * 256, 256*256 + 3} {
		l := generate(t, n)
		f := serve(t, l.Handler())
		cp, err := f.Verify(t.Context(), l.VerifierKey())
		if err != nil {
			t.Fatalf("%d entries: %v", n, err)
		}
		if cp.Size != n || cp.Origin != l.Origin() {
			t.Errorf("%d entries: checkpoint %+v", n, cp)
		}
		r, err := f.Ingest(t.Context(), n, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		r1, err := f.Ingest(t.Context(), n, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Entries != n || r.KeyXOR != r1.KeyXOR || r.Bytes != r1.Bytes {
			t.Errorf("%d entries: ingest %+v, then %+v", n, r, r1)
		}
	}
}

// TestMatchesTessera: a tile leaf is byte for byte what Tessera's ctonly
// encoding (which TesseraCT serves) makes of the same entry, and its leaf
// hash is Tessera's.
func TestMatchesTessera(t *testing.T) {
	for i := range uint64(12) {
		e := ctonly.Entry{Timestamp: timestampBase + i, IsPrecert: IsPrecert(i), FingerprintsChain: [][32]byte{sha256.Sum256(Issuer())}}
		if e.IsPrecert {
			ikh := IssuerKeyHash()
			e.Certificate, e.Precertificate, e.IssuerKeyHash = PrecertTBS(i), Certificate(i), ikh[:]
		} else {
			e.Certificate = Certificate(i)
		}
		got, ts := AppendTileLeaf(nil, i)
		if !bytes.Equal(got, e.LeafData(i)) {
			t.Fatalf("entry %d: tile leaf differs from ctonly's", i)
		}
		if h := LeafHash(got[:ts]); !bytes.Equal(h[:], e.MerkleLeafHash(i)) {
			t.Fatalf("entry %d: leaf hash differs from ctonly's", i)
		}
	}
}

// TestCertificates: every entry's certificate parses, serials and keys
// differ between entries, a precert entry's TBS is its precertificate's with
// the poison removed, and a final certificate's TBS without its SCT list is
// its precertificate's (so both are keyed alike).
func TestCertificates(t *testing.T) {
	seen := map[[32]byte]uint64{}
	for i := range uint64(64) {
		der := Certificate(i)
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if _, err := ctx509.ParseCertificate(der); err != nil {
			t.Errorf("entry %d: certificate-transparency-go: %v", i, err)
		}
		k := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		if j, dup := seen[k]; dup && seedOf(i) != seedOf(j) {
			t.Errorf("entries %d and %d share a key", i, j)
		}
		seen[k] = i
		switch kindOf(i) {
		case kindPrecert:
			tbs, err := ctx509.RemoveCTPoison(c.RawTBSCertificate)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tbs, PrecertTBS(i)) {
				t.Errorf("entry %d: precert TBS is not the precertificate's without poison", i)
			}
		case kindFinal:
			tbs, err := ctx509.RemoveSCTList(c.RawTBSCertificate)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tbs, PrecertTBS(i-1)) {
				t.Errorf("entry %d: final certificate without SCTs is not entry %d's TBS", i, i-1)
			}
		}
	}
}

// TestTesseraClient: Tessera's own client reads the log's checkpoint and
// hash tiles and its inclusion proofs verify against the signed root.
func TestTesseraClient(t *testing.T) {
	const n = 3*256*256 + 1000
	l := generate(t, n)
	f := serve(t, l.Handler())
	u, _ := url.Parse(f.URL)
	hf, err := client.NewHTTPFetcher(u, f.Client)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tnote.NewRFC6962Verifier(l.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	cp, _, _, err := client.FetchCheckpoint(t.Context(), hf.ReadCheckpoint, v, l.Origin())
	if err != nil {
		t.Fatal(err)
	}
	pb, err := client.NewProofBuilder(t.Context(), cp.Size, hf.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint64{0, 1, 255, 256, 65535, 65536, n - 1000, n - 1} {
		p, err := pb.InclusionProof(t.Context(), i)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		b, ts := AppendTileLeaf(nil, i)
		h := LeafHash(b[:ts])
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, cp.Size, h[:], p, cp.Hash); err != nil {
			t.Errorf("entry %d: %v", i, err)
		}
	}
	// Consistency between an earlier size and the full tree, from the
	// stored interior tiles, against the earlier tree's root recomputed
	// from the entries.
	const m = 70000
	cp1, err := pb.ConsistencyProof(t.Context(), m, n)
	if err != nil {
		t.Fatal(err)
	}
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)
	for i := range uint64(m) {
		b, ts := AppendTileLeaf(nil, i)
		h := LeafHash(b[:ts])
		if err := cr.Append(h[:], nil); err != nil {
			t.Fatal(err)
		}
	}
	root1, err := cr.GetRootHash(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, m, cp.Size, cp1, root1, cp.Hash); err != nil {
		t.Errorf("consistency %d → %d: %v", m, cp.Size, err)
	}
}

// TestVerifyRefuses: a log serving a tile that does not match its hashes, a
// checkpoint signed by another key, or a damaged checkpoint is refused.
func TestVerifyRefuses(t *testing.T) {
	l := generate(t, 600)
	other := generate(t, 600)
	flip := func(path string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			l.Handler().ServeHTTP(rec, r)
			b := rec.Body.Bytes()
			if r.URL.Path == path {
				b[len(b)/2] ^= 1
			}
			w.WriteHeader(rec.Code)
			w.Write(b)
		})
	}
	for _, tc := range []struct {
		name     string
		h        http.Handler
		key      string
		mismatch bool
	}{
		{"data tile", flip("/tile/data/001"), l.VerifierKey(), true},
		{"hash tile", flip("/tile/0/000"), l.VerifierKey(), true},
		{"checkpoint", flip("/checkpoint"), l.VerifierKey(), false},
		{"wrong key", l.Handler(), other.VerifierKey(), false},
	} {
		f := serve(t, tc.h)
		_, err := f.Verify(t.Context(), tc.key)
		if err == nil {
			t.Errorf("%s: verified", tc.name)
			continue
		}
		if tc.mismatch != errors.Is(err, ErrMismatch) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestHandler: paths outside the log, past its end, or malformed are 404;
// the issuer is served by its fingerprint.
func TestHandler(t *testing.T) {
	l := generate(t, 300)
	f := serve(t, l.Handler())
	fp := sha256.Sum256(Issuer())
	for path, ok := range map[string]bool{
		"checkpoint": true, "tile/0/000": true, "tile/0/001.p/44": true, "tile/0/001": false,
		"tile/data/001.p/44": true, "tile/data/001.p/45": false, "tile/data/002": false, "tile/1/000.p/1": true,
		"tile/1/000": false, "tile/2/000.p/1": false, "tile/data/../checkpoint": false, "tile/0/x000/../000": false,
		"issuer/" + hex.EncodeToString(fp[:]): true, "issuer/00": false, "tile/63/000": false, "nothing": false,
	} {
		_, err := f.get(t.Context(), path)
		if (err == nil) != ok {
			t.Errorf("GET %s: %v, want ok=%v", path, err, ok)
		}
	}
}

// TestGenerateRefuses: a finished log is not overwritten, and a directory
// whose hash file was cut short does not open.
func TestGenerateRefuses(t *testing.T) {
	dir := t.TempDir()
	o := Options{Entries: 10, Origin: "synthetic.pkie.example/test"}
	if err := Generate(t.Context(), dir, o); err != nil {
		t.Fatal(err)
	}
	if err := Generate(t.Context(), dir, o); err == nil {
		t.Error("generated over a finished log")
	}
	if err := os.Truncate(filepath.Join(dir, "level-0.hashes"), 32*9); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil {
		t.Error("opened a log with a short hash file")
	}
	if err := Generate(t.Context(), t.TempDir(), Options{Entries: 0, Origin: "x"}); err == nil {
		t.Error("generated an empty log")
	}
}

// TestTilesParseWithCTWire: the synthetic tiles are what every follower's
// parser (ctwire) reads, entry by entry, with their leaf_index in order.
func TestTilesParseWithCTWire(t *testing.T) {
	for _, n := range []int{1, 2, 255, 256} {
		var tile []byte
		for i := range n {
			tile, _ = AppendTileLeaf(tile, uint64(i))
		}
		es, err := parseDataTile(tile, n)
		if err != nil {
			t.Fatalf("%d entries: %v", n, err)
		}
		for i := range es {
			if es[i].Index != uint64(i) || len(es[i].Certificate) == 0 {
				t.Fatalf("%d entries: entry %d has index %d and %d certificate bytes", n, i, es[i].Index, len(es[i].Certificate))
			}
		}
		if _, err := parseDataTile(tile, n+1); err == nil {
			t.Fatalf("%d entries: parsed as %d", n, n+1)
		}
		if _, err := parseDataTile(tile[:len(tile)-1], n); err == nil {
			t.Fatalf("%d entries: parsed a truncated tile", n)
		}
	}
}
