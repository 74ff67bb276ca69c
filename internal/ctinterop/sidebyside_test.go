package ctinterop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"net/http"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/jsonclient"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/tesseracttest"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	tclient "github.com/transparency-dev/tessera/client"
)

// TestSameChainsSameEntries gives a pkie log and a TesseraCT log the same
// chains, one at a time in the same order, and checks that they publish
// checkpoints of the same size whose data tiles, read by
// certificate-transparency-go's TLS decoder, hold the same entries.
//
// Compared, entry by entry: the entry type; an x509_entry's certificate;
// a precert_entry's issuer_key_hash and TBSCertificate and the submitted
// precertificate; the fingerprints of the chain (which ends at the root
// even when the submitter left it out); the CtExtensions, that is the
// leaf_index extension, whose values agree because the order does. Not
// compared: the timestamps, which are each log's own clock. Also: each
// log's leaves hash into its own checkpoint; every issuer fingerprint is
// served by both logs under /issuer/ as the same certificate; a duplicate
// submission gets the first entry's index from both; a chain to a root
// neither trusts is refused by both with 400.
func TestSameChainsSameEntries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := testbed.NewRootCA("Interop Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	tl := tesseracttest.Start(t, tesseracttest.Options{Roots: []*x509.Certificate{root.Cert}})
	pl := startPKIELog(ctx, t, root)
	logs := []*target{
		{name: "pkie", lc: logClient(t, pl.url, pl.log.PublicKey()), pub: pl.log.PublicKey()},
		{name: "TesseraCT", lc: logClient(t, tl.SubmissionURL, tl.PublicKey), pub: tl.PublicKey},
	}
	c := newCorpus(t, root)
	c.submit(ctx, t, logs...)

	pcp, _, _, err := tclient.FetchCheckpoint(ctx, pl.ReadCheckpoint, pl.log.Verifier(), pkieOrigin)
	if err != nil {
		t.Fatalf("pkie checkpoint: %v", err)
	}
	tcp, _, err := tl.WaitSize(ctx, corpusLen)
	if err != nil {
		t.Fatal(err)
	}
	if pcp.Size != corpusLen || tcp.Size != corpusLen {
		t.Fatalf("checkpoint sizes: pkie %d, TesseraCT %d; want %d each", pcp.Size, tcp.Size, corpusLen)
	}
	readers := []tesseracttest.Reader{pl.Reader, tl.Reader}
	cps := []*log.Checkpoint{pcp, tcp}
	var leaves [2][]tileLeaf
	for i, r := range readers {
		tile, err := r.ReadEntryBundle(ctx, 0, uint8(corpusLen))
		if err != nil {
			t.Fatalf("%s: data tile: %v", logs[i].name, err)
		}
		if leaves[i], err = parseTileCTGo(tile); err != nil {
			t.Fatalf("%s: ct-go reading the data tile: %v", logs[i].name, err)
		}
		if len(leaves[i]) != corpusLen {
			t.Fatalf("%s: data tile of %d entries, want %d", logs[i].name, len(leaves[i]), corpusLen)
		}
		parsed, err := ctwire.ParseDataTile(tile)
		if err != nil {
			t.Fatalf("%s: ctwire: %v", logs[i].name, err)
		}
		compareEntries(t, leaves[i], parsed)
		pb, err := tclient.NewProofBuilder(ctx, cps[i].Size, r.ReadTile)
		if err != nil {
			t.Fatal(err)
		}
		for j := range leaves[i] {
			h, err := ct.LeafHashForLeaf(leaves[i][j].merkleLeaf())
			if err != nil {
				t.Fatal(err)
			}
			p, err := pb.InclusionProof(ctx, uint64(j))
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(j), cps[i].Size, h[:], p, cps[i].Hash); err != nil {
				t.Fatalf("%s: entry %d is not in its checkpoint: %v", logs[i].name, j, err)
			}
		}
	}
	for j := 0; j < corpusLen; j++ {
		p, q := &leaves[0][j], &leaves[1][j]
		pe, te := &p.Entry, &q.Entry
		switch {
		case pe.EntryType != te.EntryType:
			t.Errorf("entry %d: type %v (pkie), %v (TesseraCT)", j, pe.EntryType, te.EntryType)
		case pe.EntryType == ct.X509LogEntryType && !bytes.Equal(pe.X509Entry.Data, te.X509Entry.Data):
			t.Errorf("entry %d: the logs hold different certificates", j)
		case pe.EntryType == ct.PrecertLogEntryType && (pe.PrecertEntry.IssuerKeyHash != te.PrecertEntry.IssuerKeyHash ||
			!bytes.Equal(pe.PrecertEntry.TBSCertificate, te.PrecertEntry.TBSCertificate)):
			t.Errorf("entry %d: the logs hold different precert_entry (issuer_key_hash or TBSCertificate)", j)
		case !bytes.Equal(p.Precertificate, q.Precertificate):
			t.Errorf("entry %d: the logs hold different precertificates", j)
		case !bytes.Equal(pe.Extensions, te.Extensions):
			t.Errorf("entry %d: extensions %x (pkie), %x (TesseraCT)", j, pe.Extensions, te.Extensions)
		case len(p.Chain) != len(q.Chain):
			t.Errorf("entry %d: chain of %d (pkie), %d (TesseraCT)", j, len(p.Chain), len(q.Chain))
		}
		for k := range min(len(p.Chain), len(q.Chain)) {
			if p.Chain[k] != q.Chain[k] {
				t.Errorf("entry %d: chain fingerprint %d differs", j, k)
				continue
			}
			fp := p.Chain[k]
			a, err := pl.ReadIssuer(ctx, fp)
			if err != nil {
				t.Fatalf("pkie: issuer %x: %v", fp, err)
			}
			b, err := tl.ReadIssuer(ctx, fp)
			if err != nil {
				t.Fatalf("TesseraCT: issuer %x: %v", fp, err)
			}
			if !bytes.Equal(a, b) || sha256.Sum256(a) != fp {
				t.Errorf("issuer %x: the logs serve different certificates, or not the one named", fp)
			}
		}
		if n := len(p.Chain); n == 0 || p.Chain[n-1] != sha256.Sum256(root.Cert.Raw) {
			t.Errorf("entry %d: the chain does not end at the root", j)
		}
	}

	for _, l := range logs {
		sct, err := l.lc.AddChain(ctx, asn1Chain(c.plain.Chain))
		if err != nil {
			t.Fatalf("%s: resubmitting: %v", l.name, err)
		}
		if idx, err := ctwire.LeafIndex(sct.Extensions); err != nil || idx != 0 {
			t.Errorf("%s: a duplicate got leaf_index %d (%v), want 0", l.name, idx, err)
		}
	}
	foreign, err := testbed.NewRootCA("Foreign Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := foreign.Issue(testbed.LeafOptions{DNSNames: []string{"stranger.interop.test"}, SendRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		_, err := l.lc.AddChain(ctx, asn1Chain(stranger.Chain))
		var rsp jsonclient.RspError
		if !errors.As(err, &rsp) || rsp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: a chain to an unknown root: %v, want an HTTP 400", l.name, err)
		}
	}
}
