package ctinterop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/client"
	"github.com/google/certificate-transparency-go/jsonclient"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/tesseracttest"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	tclient "github.com/transparency-dev/tessera/client"
)

// TestTesseraCTDataTiles holds pkie's static-ct-api entry parser
// (ctwire.ParseDataTile) and its sorted-tree keys to TesseraCT's data
// tiles as certificate-transparency-go's TLS decoder reads them: same
// entries field by field, the leaf hashes included in TesseraCT's
// checkpoint, and the key a client computes from a final certificate
// (ctwire.ChainKey) among the keys a mirror inserts for its precertificate
// entry and for its own x509 entry.
func TestTesseraCTDataTiles(t *testing.T) {
	tl := tesseracttest.Start(t, tesseracttest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lc, err := client.New(tl.SubmissionURL, http.DefaultClient, jsonclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newCorpus(t, tl.CA)
	subs := c.submit(ctx, t, &target{name: "TesseraCT", lc: lc, pub: tl.PublicKey})[0]
	cp, _, err := tl.WaitSize(ctx, uint64(len(subs)))
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size != uint64(len(subs)) {
		t.Fatalf("TesseraCT checkpoint size %d, want %d", cp.Size, len(subs))
	}
	tile, err := tl.ReadEntryBundle(ctx, 0, uint8(cp.Size))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := parseTileCTGo(tile)
	if err != nil {
		t.Fatalf("ct-go reading TesseraCT's data tile: %v", err)
	}
	got, err := ctwire.ParseDataTile(tile)
	if err != nil {
		t.Fatalf("ctwire.ParseDataTile on TesseraCT's data tile: %v", err)
	}
	compareEntries(t, ref, got)
	pb, err := tclient.NewProofBuilder(ctx, cp.Size, tl.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		want, err := ct.LeafHashForLeaf(ref[i].merkleLeaf())
		if err != nil {
			t.Fatal(err)
		}
		h, err := got[i].LeafHash()
		if err != nil || h != want {
			t.Fatalf("entry %d: ctwire leaf hash %x (%v), ct-go %x", i, h, err, want)
		}
		p, err := pb.InclusionProof(ctx, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), cp.Size, h[:], p, cp.Hash); err != nil {
			t.Fatalf("entry %d: leaf hash not in TesseraCT's tree: %v", i, err)
		}
	}

	// The keys a mirror inserts. A data tile names the x509 entry's
	// issuer by fingerprint; as the follower does, fetch it from
	// /issuer/ and hash its key.
	for i := range got {
		e := &got[i]
		if !e.Precert && len(e.ChainFingerprints) > 0 {
			der, err := tl.ReadIssuer(ctx, e.ChainFingerprints[0])
			if err != nil {
				t.Fatal(err)
			}
			if sha256.Sum256(der) != e.ChainFingerprints[0] {
				t.Fatalf("entry %d: /issuer/ served a certificate of another fingerprint", i)
			}
			kh, err := ctwire.SPKIHash(der)
			if err != nil {
				t.Fatal(err)
			}
			e.ChainIssuerKeyHash = &kh
		}
	}
	for i, s := range subs {
		if s.precert {
			continue // a client never looks a precertificate up
		}
		key, err := ctwire.ChainKey(s.chain)
		if err != nil {
			t.Fatalf("%s: ChainKey: %v", s.name, err)
		}
		if !hasKey(ctwire.EntryKeys(&got[i]), key) {
			t.Errorf("%s: its ChainKey %x is not among the keys of its own entry %d", s.name, key, i)
		}
		if i == 2 && !hasKey(ctwire.EntryKeys(&got[1]), key) {
			t.Errorf("%s: its ChainKey %x is not the key of its precertificate's entry", s.name, key)
		}
	}
}

func hasKey(keys [][32]byte, k [32]byte) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// compareEntries checks pkie's parse of a data tile against ct-go's, field
// by field.
func compareEntries(t *testing.T, ref []tileLeaf, got []ctwire.Entry) {
	t.Helper()
	if len(got) != len(ref) {
		t.Fatalf("ctwire read %d entries, ct-go %d", len(got), len(ref))
	}
	for i := range ref {
		r, g := &ref[i].Entry, &got[i]
		if g.Index != uint64(i) || g.Timestamp != r.Timestamp || !bytes.Equal(g.Extensions, r.Extensions) {
			t.Errorf("entry %d: ctwire index %d timestamp %d extensions %x; ct-go timestamp %d extensions %x",
				i, g.Index, g.Timestamp, g.Extensions, r.Timestamp, r.Extensions)
		}
		switch r.EntryType {
		case ct.X509LogEntryType:
			if g.Precert || !bytes.Equal(g.Certificate, r.X509Entry.Data) {
				t.Errorf("entry %d: ct-go reads an x509_entry; ctwire precert=%v, certificate equal=%v", i, g.Precert, bytes.Equal(g.Certificate, r.X509Entry.Data))
			}
		case ct.PrecertLogEntryType:
			if !g.Precert || g.IssuerKeyHash != r.PrecertEntry.IssuerKeyHash || !bytes.Equal(g.Certificate, r.PrecertEntry.TBSCertificate) ||
				!bytes.Equal(g.Precertificate, ref[i].Precertificate) {
				t.Errorf("entry %d: precert_entry differs between ct-go and ctwire", i)
			}
		}
		if len(g.ChainFingerprints) != len(ref[i].Chain) {
			t.Errorf("entry %d: ctwire %d chain fingerprints, ct-go %d", i, len(g.ChainFingerprints), len(ref[i].Chain))
			continue
		}
		for j := range ref[i].Chain {
			if g.ChainFingerprints[j] != ref[i].Chain[j] {
				t.Errorf("entry %d: chain fingerprint %d differs", i, j)
			}
		}
	}
}
