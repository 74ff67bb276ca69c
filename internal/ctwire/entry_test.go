package ctwire

import (
	"bytes"
	"crypto/sha256"
	"os"
	"strings"
	"testing"

	ct "github.com/google/certificate-transparency-go"
	cttls "github.com/google/certificate-transparency-go/tls"
	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/ctonly"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTesseraCTDataTile parses a data tile TesseraCT wrote and checks it
// against TesseraCT's signed checkpoint.
func TestTesseraCTDataTile(t *testing.T) {
	tile := readTestdata(t, "tesseract/data-tile")
	v, err := fnote.NewRFC6962Verifier(strings.TrimSpace(string(readTestdata(t, "tesseract/vkey"))))
	if err != nil {
		t.Fatal(err)
	}
	cp, _, _, err := log.ParseCheckpoint(readTestdata(t, "tesseract/checkpoint"), "tesseract.test/log", v)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ParseDataTile(tile)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(entries)) != cp.Size {
		t.Fatalf("%d entries, checkpoint of %d", len(entries), cp.Size)
	}
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	r := rf.NewEmptyRange(0)
	for i, e := range entries {
		if e.Index != uint64(i) {
			t.Errorf("entry %d has index %d", i, e.Index)
		}
		if e.Precert != (i == 3) {
			t.Errorf("entry %d: precert %v", i, e.Precert)
		}
		h, err := e.LeafHash()
		if err != nil {
			t.Fatal(err)
		}
		r.Append(h[:], nil)
	}
	root, _ := r.GetRootHash(nil)
	if !bytes.Equal(root, cp.Hash) {
		t.Fatalf("entries hash to %x, TesseraCT's checkpoint says %x", root, cp.Hash)
	}
	// The final certificate (entry 4) and its precertificate (entry 3)
	// share the key a client computes from the final chain.
	leaf, issuer := readTestdata(t, "tesseract/final-leaf.der"), readTestdata(t, "tesseract/final-issuer.der")
	want, err := ChainKey([][]byte{leaf, issuer})
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(issuer) != entries[4].ChainFingerprints[0] {
		t.Fatal("the final certificate's issuer is not the entry's first chain element")
	}
	ikh, _ := SPKIHash(issuer)
	entries[4].ChainIssuerKeyHash = &ikh
	if k := EntryKeys(&entries[3]); len(k) != 1 || k[0] != want {
		t.Errorf("precertificate entry keys %x, want [%x]", k, want)
	}
	if k := EntryKeys(&entries[4]); len(k) != 2 || k[0] != CertKey(leaf) || k[1] != want {
		t.Errorf("final certificate entry keys %x, want [CertKey, %x]", k, want)
	}
}

// tesseraTile builds a data tile with Tessera's own encoder (ctonly), from
// index first.
func tesseraTile(t testing.TB, first uint64, n int) ([]byte, []*ctonly.Entry) {
	c := newTestChains(t)
	var b []byte
	var es []*ctonly.Entry
	for i := 0; i < n; i++ {
		e := &ctonly.Entry{Timestamp: 1700000000000 + uint64(i), Certificate: c.plain, FingerprintsChain: [][32]byte{sha256.Sum256(c.ca)}}
		if i%2 == 1 {
			ikh, _ := SPKIHash(c.ca)
			e = &ctonly.Entry{Timestamp: 1700000000000 + uint64(i), IsPrecert: true, Certificate: []byte("tbs bytes"), Precertificate: c.precert,
				IssuerKeyHash: ikh[:], FingerprintsChain: [][32]byte{sha256.Sum256(c.ca), {1}}}
		}
		es = append(es, e)
		b = append(b, e.LeafData(first+uint64(i))...)
	}
	return b, es
}

func TestParseDataTile(t *testing.T) {
	tile, want := tesseraTile(t, 512, 5)
	got, err := ParseDataTile(tile)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		w := want[i]
		if e.Index != 512+uint64(i) || e.Timestamp != w.Timestamp || e.Precert != w.IsPrecert || !bytes.Equal(e.Certificate, w.Certificate) ||
			!bytes.Equal(e.Precertificate, w.Precertificate) || len(e.ChainFingerprints) != len(w.FingerprintsChain) {
			t.Errorf("entry %d differs from what Tessera encoded", i)
		}
		h, err := e.LeafHash()
		if err != nil || !bytes.Equal(h[:], w.MerkleLeafHash(e.Index)) {
			t.Errorf("entry %d: leaf hash %x, Tessera's %x", i, h, w.MerkleLeafHash(e.Index))
		}
		if m, _ := e.MerkleTreeLeaf(); !bytes.Equal(m, w.MerkleTreeLeaf(e.Index)) {
			t.Errorf("entry %d: MerkleTreeLeaf differs from Tessera's", i)
		}
	}
	if got := encodeTile(got); !bytes.Equal(got, tile) {
		t.Error("re-encoding the parsed tile does not give its bytes")
	}

	full, _ := tesseraTile(t, 0, 257)
	misindexed, _ := tesseraTile(t, 3, 2)
	first, _ := tesseraTile(t, 0, 1)
	second, _ := tesseraTile(t, 2, 1)
	otherExt := bytes.Clone(first)
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"trailing byte", append(bytes.Clone(tile), 0)},
		{"257 entries", full},
		{"first index not a tile start", misindexed},
		{"indices not consecutive", append(bytes.Clone(first), second...)},
		{"unknown entry type", func() []byte { b := bytes.Clone(first); b[9] = 7; return b }()},
		{"other extension type", func() []byte {
			i := bytes.Index(otherExt, []byte{0, 8, 0, 0, 5}) // extensions<8>: type leaf_index, length 5
			otherExt[i+2] = 1
			return otherExt
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseDataTile(tc.b); err == nil {
				t.Fatal("ParseDataTile accepted it")
			}
		})
	}
	for n := 0; n < len(tile); n++ {
		if es, err := ParseDataTile(tile[:n]); err == nil && len(encodeTile(es)) != n {
			t.Fatalf("truncated to %d bytes: parsed without error", n)
		}
	}
}

// encodeTile encodes entries as a data tile, for round trips.
func encodeTile(es []Entry) []byte {
	var b []byte
	u24 := func(x []byte) { b = append(b, byte(len(x)>>16), byte(len(x)>>8), byte(len(x))); b = append(b, x...) }
	u16 := func(x []byte) { b = append(b, byte(len(x)>>8), byte(len(x))); b = append(b, x...) }
	for _, e := range es {
		b = appendUint64(b, e.Timestamp)
		var fps []byte
		for _, f := range e.ChainFingerprints {
			fps = append(fps, f[:]...)
		}
		if e.Precert {
			b = append(b, 0, 1)
			b = append(b, e.IssuerKeyHash[:]...)
			u24(e.Certificate)
			u16(e.Extensions)
			u24(e.Precertificate)
		} else {
			b = append(b, 0, 0)
			u24(e.Certificate)
			u16(e.Extensions)
		}
		u16(fps)
	}
	return b
}

// TestParseLeafEntry holds ParseLeafEntry to certificate-transparency-go's
// RFC 6962 decoder.
func TestParseLeafEntry(t *testing.T) {
	c := newTestChains(t)
	ikh, _ := SPKIHash(c.ca)
	x509Leaf := ct.MerkleTreeLeaf{Version: ct.V1, LeafType: ct.TimestampedEntryLeafType, TimestampedEntry: &ct.TimestampedEntry{
		Timestamp: 42, EntryType: ct.X509LogEntryType, X509Entry: &ct.ASN1Cert{Data: c.final}}}
	preLeaf := ct.MerkleTreeLeaf{Version: ct.V1, LeafType: ct.TimestampedEntryLeafType, TimestampedEntry: &ct.TimestampedEntry{
		Timestamp: 43, EntryType: ct.PrecertLogEntryType, PrecertEntry: &ct.PreCert{IssuerKeyHash: ikh, TBSCertificate: []byte("tbs")},
		Extensions: ct.CTExtensions{0, 0, 5, 0, 0, 0, 0, 9}}}
	li1, err := cttls.Marshal(x509Leaf)
	if err != nil {
		t.Fatal(err)
	}
	ed1, _ := cttls.Marshal(ct.CertificateChain{Entries: []ct.ASN1Cert{{Data: c.ca}}})
	li2, _ := cttls.Marshal(preLeaf)
	ed2, _ := cttls.Marshal(ct.PrecertChainEntry{PreCertificate: ct.ASN1Cert{Data: c.precert}, CertificateChain: []ct.ASN1Cert{{Data: c.ca}}})

	for _, tc := range []struct {
		name    string
		li, ed  []byte
		precert bool
	}{{"x509_entry", li1, ed1, false}, {"precert_entry", li2, ed2, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := ct.RawLogEntryFromLeaf(7, &ct.LeafEntry{LeafInput: tc.li, ExtraData: tc.ed})
			if err != nil {
				t.Fatal(err)
			}
			e, err := ParseLeafEntry(7, tc.li, tc.ed)
			if err != nil {
				t.Fatal(err)
			}
			te := ref.Leaf.TimestampedEntry
			wantCert := ref.Cert.Data
			if tc.precert {
				wantCert = te.PrecertEntry.TBSCertificate
			}
			if e.Index != 7 || e.Precert != tc.precert || e.Timestamp != te.Timestamp || !bytes.Equal(e.Extensions, te.Extensions) ||
				!bytes.Equal(e.Certificate, wantCert) {
				t.Fatalf("ParseLeafEntry = %+v, ct-go reads %+v", e, te)
			}
			if tc.precert && (e.IssuerKeyHash != te.PrecertEntry.IssuerKeyHash || !bytes.Equal(e.Precertificate, ref.Cert.Data)) {
				t.Fatal("precert fields differ from ct-go's")
			}
			if len(e.ChainFingerprints) != 1 || e.ChainFingerprints[0] != sha256.Sum256(ref.Chain[0].Data) {
				t.Fatal("chain fingerprints differ")
			}
			want, _ := ct.LeafHashForLeaf(&ref.Leaf)
			if h, err := e.LeafHash(); err != nil || h != want {
				t.Fatalf("leaf hash %x, ct-go %x", h, want)
			}
			if m, _ := e.MerkleTreeLeaf(); !bytes.Equal(m, tc.li) {
				t.Fatal("MerkleTreeLeaf does not give back leaf_input")
			}
			if !tc.precert && (e.ChainIssuerKeyHash == nil || *e.ChainIssuerKeyHash != ikh) {
				t.Fatal("the x509_entry's issuer key hash was not taken from extra_data")
			}
			for _, bad := range []struct{ li, ed []byte }{
				{append(bytes.Clone(tc.li), 0), tc.ed},
				{tc.li, append(bytes.Clone(tc.ed), 0)},
				{tc.li[:len(tc.li)-1], tc.ed},
				{tc.li, tc.ed[:len(tc.ed)-1]},
				{append([]byte{1}, tc.li[1:]...), tc.ed},
			} {
				if _, err := ParseLeafEntry(7, bad.li, bad.ed); err == nil {
					t.Error("ParseLeafEntry accepted a malformed entry")
				}
			}
		})
	}
}

func FuzzParseDataTile(f *testing.F) {
	f.Add(readTestdata(f, "tesseract/data-tile"))
	tile, _ := tesseraTile(f, 256, 3)
	f.Add(tile)
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := ParseDataTile(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeTile(es), b) {
			t.Fatal("a parsed tile does not re-encode to its bytes")
		}
		for i := range es {
			if _, err := es[i].LeafHash(); err != nil {
				t.Fatalf("parsed entry %d has no leaf hash: %v", i, err)
			}
			EntryKeys(&es[i])
		}
	})
}

func FuzzParseLeafEntry(f *testing.F) {
	c := newTestChains(f)
	li, _ := cttls.Marshal(ct.MerkleTreeLeaf{Version: ct.V1, LeafType: ct.TimestampedEntryLeafType, TimestampedEntry: &ct.TimestampedEntry{
		Timestamp: 42, EntryType: ct.X509LogEntryType, X509Entry: &ct.ASN1Cert{Data: c.final}}})
	ed, _ := cttls.Marshal(ct.CertificateChain{Entries: []ct.ASN1Cert{{Data: c.ca}}})
	f.Add(li, ed)
	f.Add([]byte{0, 0}, []byte{})
	f.Fuzz(func(t *testing.T, li, ed []byte) {
		e, err := ParseLeafEntry(0, li, ed)
		if err != nil {
			return
		}
		m, err := e.MerkleTreeLeaf()
		if err != nil || !bytes.Equal(m, li) {
			t.Fatalf("a parsed leaf does not re-encode to leaf_input: %v", err)
		}
		EntryKeys(e)
	})
}
