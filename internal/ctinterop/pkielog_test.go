package ctinterop

import (
	"bytes"
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	"github.com/google/certificate-transparency-go/client"
	"github.com/google/certificate-transparency-go/ctutil"
	"github.com/google/certificate-transparency-go/jsonclient"
	cttls "github.com/google/certificate-transparency-go/tls"
	"github.com/pkie/pkie/internal/ctlog"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/mysqltest"
	"github.com/pkie/pkie/internal/tesseracttest"
	"github.com/pkie/pkie/internal/testbed"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	tclient "github.com/transparency-dev/tessera/client"
)

// pkieLog is pkie's static-ct-api log (internal/ctlog) served on loopback.
type pkieLog struct {
	log *ctlog.Log
	url string // submission and monitoring prefix: pkie serves both
	tesseracttest.Reader
}

const pkieOrigin = "pkie.interop.test/log"

// startPKIELog initialises and opens a log accepting chains to root's
// hierarchy, on Tessera's POSIX storage, and serves its whole HTTP API on
// loopback.
func startPKIELog(ctx context.Context, t *testing.T, root *testbed.CA) *pkieLog {
	return startPKIELogWith(ctx, t, root, ctlog.Options{})
}

// startPKIELogWith is startPKIELog with options (another storage).
func startPKIELogWith(ctx context.Context, t *testing.T, root *testbed.CA, o ctlog.Options) *pkieLog {
	t.Helper()
	dir := t.TempDir()
	if _, err := ctlog.Init(ctx, dir, pkieOrigin, ctlog.InitOptions{Roots: root.PEM()}); err != nil {
		t.Fatalf("ctlog.Init: %v", err)
	}
	l, err := ctlog.Open(ctx, dir, o)
	if err != nil {
		t.Fatalf("ctlog.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing pkie's log: %v", err)
		}
	})
	srv := httptest.NewServer(l.Handler(ctlog.HandlerOptions{}))
	t.Cleanup(srv.Close)
	return &pkieLog{log: l, url: srv.URL, Reader: tesseracttest.Reader{URL: srv.URL}}
}

// logClient is certificate-transparency-go's client for a log, pinned to
// pub so that it verifies every STH it reads.
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
	if lc.Verifier == nil {
		t.Fatal("ct-go client without an STH verifier")
	}
	return lc
}

// TestPKIELogWithCTGo runs pkie's log against certificate-transparency-go
// v1.4.0's client and Tessera's: chains submitted with ct-go get SCTs that
// ctutil verifies; ct-go reads get-sth (signature verified), get-entries
// (entries parsed by ct-go, matching what was submitted),
// get-proof-by-hash and get-sth-consistency, and the proofs verify; the
// checkpoint and STH name the same tree; Tessera's client reads the hash
// tiles, proves every entry's inclusion and follows the log from one
// checkpoint to the next, checking consistency itself; the data tile, read
// with ct-go's TLS decoder, holds the same Merkle leaves get-entries does.
// It runs on both of the log's storages: Tessera's POSIX files and
// Tessera's MySQL driver on a throwaway MariaDB (internal/mysqltest).
func TestPKIELogWithCTGo(t *testing.T) {
	t.Run("posix", func(t *testing.T) { testPKIELogWithCTGo(t, func() ctlog.Options { return ctlog.Options{} }) })
	t.Run("mysql", func(t *testing.T) {
		t.Parallel()
		testPKIELogWithCTGo(t, func() ctlog.Options { return ctlog.Options{MySQLDSN: mysqltest.Start(t).DSN} })
	})
}

func testPKIELogWithCTGo(t *testing.T, options func() ctlog.Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := testbed.NewRootCA("Interop Root", testbed.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	pl := startPKIELogWith(ctx, t, root, options())
	pub := pl.log.PublicKey()
	lc := logClient(t, pl.url, pub)

	got, err := lc.GetAcceptedRoots(ctx)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Data, root.Cert.Raw) {
		t.Fatalf("get-roots: %d roots, %v; want the one root", len(got), err)
	}
	c := newCorpus(t, root)
	subs := c.submit(ctx, t, &target{name: "pkie", lc: lc, pub: pub})[0]

	// A chain submitted again gets an SCT for its first entry.
	dup, err := lc.AddChain(ctx, asn1Chain(subs[0].chain))
	if err != nil {
		t.Fatalf("resubmitting: %v", err)
	}
	if idx, err := ctwire.LeafIndex(dup.Extensions); err != nil || idx != 0 || dup.Timestamp != subs[0].sct.Timestamp {
		t.Fatalf("resubmitted chain: leaf_index %d (%v), timestamp %d; want 0 and %d", idx, err, dup.Timestamp, subs[0].sct.Timestamp)
	}
	if err := ctutil.VerifySCT(pub, ctgoChain(t, subs[0].chain), dup, false); err != nil {
		t.Fatalf("resubmitted chain: SCT: %v", err)
	}

	sth, err := lc.GetSTH(ctx) // verified with the pinned key
	if err != nil {
		t.Fatalf("get-sth: %v", err)
	}
	if sth.TreeSize != corpusLen {
		t.Fatalf("get-sth: tree size %d, want %d", sth.TreeSize, corpusLen)
	}
	verifier := pl.log.Verifier()
	cp, cpRaw, _, err := tclient.FetchCheckpoint(ctx, pl.ReadCheckpoint, verifier, pkieOrigin)
	if err != nil {
		t.Fatalf("tessera client: checkpoint: %v", err)
	}
	if cp.Size != sth.TreeSize || !bytes.Equal(cp.Hash, sth.SHA256RootHash[:]) {
		t.Fatalf("checkpoint (%d, %x) and STH (%d, %x) name different trees", cp.Size, cp.Hash, sth.TreeSize, sth.SHA256RootHash)
	}

	entries, err := lc.GetEntries(ctx, 0, int64(sth.TreeSize)-1)
	if err != nil {
		t.Fatalf("get-entries, parsed by ct-go: %v", err)
	}
	if len(entries) != corpusLen {
		t.Fatalf("get-entries returned %d entries, want %d", len(entries), corpusLen)
	}
	tile, err := pl.ReadEntryBundle(ctx, 0, uint8(sth.TreeSize))
	if err != nil {
		t.Fatal(err)
	}
	tileLeaves, err := parseTileCTGo(tile)
	if err != nil {
		t.Fatalf("ct-go reading pkie's data tile: %v", err)
	}
	if len(tileLeaves) != corpusLen {
		t.Fatalf("data tile holds %d entries, want %d", len(tileLeaves), corpusLen)
	}
	for i, e := range entries {
		s := subs[i]
		if e.Index != int64(i) {
			t.Fatalf("entry %d: ct-go index %d", i, e.Index)
		}
		te := e.Leaf.TimestampedEntry
		if te.Timestamp != s.sct.Timestamp || !bytes.Equal(te.Extensions, s.sct.Extensions) {
			t.Errorf("%s: entry timestamp %d extensions %x; SCT %d %x", s.name, te.Timestamp, te.Extensions, s.sct.Timestamp, s.sct.Extensions)
		}
		if s.precert {
			if e.Precert == nil || !bytes.Equal(e.Precert.Submitted.Data, s.chain[0]) {
				t.Errorf("%s: ct-go does not read it back as the submitted precertificate", s.name)
			}
		} else if e.X509Cert == nil || !bytes.Equal(te.X509Entry.Data, s.chain[0]) {
			t.Errorf("%s: ct-go does not read it back as the submitted certificate", s.name)
		}
		// RFC 6962 §4.6: the chain in extra_data ends at an accepted root.
		wantChain := append([][]byte{}, s.chain[1:]...)
		if !bytes.Equal(wantChain[len(wantChain)-1], root.Cert.Raw) {
			wantChain = append(wantChain, root.Cert.Raw)
		}
		if len(e.Chain) != len(wantChain) {
			t.Errorf("%s: extra_data chain of %d certificates, want %d", s.name, len(e.Chain), len(wantChain))
		} else {
			for j := range wantChain {
				if !bytes.Equal(e.Chain[j].Data, wantChain[j]) {
					t.Errorf("%s: extra_data chain certificate %d differs from the submitted chain", s.name, j)
				}
			}
		}
		fromTile, err := cttls.Marshal(*tileLeaves[i].merkleLeaf())
		if err != nil {
			t.Fatal(err)
		}
		fromEntries, err := cttls.Marshal(e.Leaf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fromTile, fromEntries) {
			t.Errorf("%s: the data tile's Merkle leaf differs from get-entries'", s.name)
		}

		hash, err := ct.LeafHashForLeaf(&e.Leaf)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := lc.GetProofByHash(ctx, hash[:], sth.TreeSize)
		if err != nil {
			t.Fatalf("%s: get-proof-by-hash: %v", s.name, err)
		}
		if pr.LeafIndex != int64(i) {
			t.Fatalf("%s: get-proof-by-hash says index %d, want %d", s.name, pr.LeafIndex, i)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), sth.TreeSize, hash[:], pr.AuditPath, sth.SHA256RootHash[:]); err != nil {
			t.Fatalf("%s: get-proof-by-hash proof does not verify: %v", s.name, err)
		}
	}

	// Tessera's client follows the log to a bigger tree: it checks the
	// consistency of the two checkpoints itself.
	tracker, err := tclient.NewLogStateTracker(ctx, pl.ReadTile, cpRaw, verifier, pkieOrigin, tclient.UnilateralConsensus(pl.ReadCheckpoint))
	if err != nil {
		t.Fatalf("tessera client: tracker: %v", err)
	}
	more, err := c.inter.Issue(testbed.LeafOptions{DNSNames: []string{"more.interop.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.AddChain(ctx, asn1Chain(more.Chain)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := tracker.Update(ctx); err != nil {
		t.Fatalf("tessera client: following pkie's log from %d entries: %v", cp.Size, err)
	}
	newSize := tracker.Latest().Size
	if newSize != corpusLen+1 {
		t.Fatalf("tessera client: new checkpoint of %d entries, want %d", newSize, corpusLen+1)
	}
	sth2, err := lc.GetSTH(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := lc.GetSTHConsistency(ctx, sth.TreeSize, sth2.TreeSize)
	if err != nil {
		t.Fatalf("get-sth-consistency: %v", err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, sth.TreeSize, sth2.TreeSize, cons, sth.SHA256RootHash[:], sth2.SHA256RootHash[:]); err != nil {
		t.Fatalf("get-sth-consistency proof does not verify: %v", err)
	}
	pb, err := tclient.NewProofBuilder(ctx, newSize, pl.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		hash, _ := ct.LeafHashForLeaf(&e.Leaf)
		p, err := pb.InclusionProof(ctx, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), newSize, hash[:], p, tracker.Latest().Hash); err != nil {
			t.Fatalf("entry %d: tiles' inclusion proof does not verify: %v", i, err)
		}
	}
	p, err := pb.ConsistencyProof(ctx, cp.Size, newSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, cp.Size, newSize, p, cp.Hash, tracker.Latest().Hash); err != nil {
		t.Fatalf("tiles' consistency proof does not verify: %v", err)
	}
}
