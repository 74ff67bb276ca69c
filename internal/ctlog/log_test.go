package ctlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	ctclient "github.com/google/certificate-transparency-go/client"
	"github.com/google/certificate-transparency-go/ctutil"
	"github.com/google/certificate-transparency-go/jsonclient"
	ctx509 "github.com/google/certificate-transparency-go/x509"
	f_log "github.com/transparency-dev/formats/log"
	f_note "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/client"

	"github.com/pkie/pkie/internal/ctwire"
	"github.com/pkie/pkie/internal/mysqltest"
)

const testOrigin = "ct.example.test/log"

func initLog(t testing.TB, p *testPKI) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	if _, err := Init(context.Background(), dir, testOrigin, InitOptions{Roots: p.rootsPEM()}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openLog(t testing.TB, dir string) *Log {
	t.Helper()
	l, err := Open(context.Background(), dir, Options{BatchMaxAge: 10 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func serve(t testing.TB, l *Log) *httptest.Server {
	srv := httptest.NewServer(l.Handler(HandlerOptions{}))
	t.Cleanup(srv.Close)
	return srv
}

func logClient(t testing.TB, l *Log, u string) *ctclient.LogClient {
	der, err := x509.MarshalPKIXPublicKey(l.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	c, err := ctclient.New(u, http.DefaultClient, jsonclient.Options{PublicKeyDER: der})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func asn1Chain(chain [][]byte) []ct.ASN1Cert {
	out := make([]ct.ASN1Cert, len(chain))
	for i, c := range chain {
		out[i] = ct.ASN1Cert{Data: c}
	}
	return out
}

func ctChain(t testing.TB, chain [][]byte) []*ctx509.Certificate {
	out := make([]*ctx509.Certificate, len(chain))
	for i, d := range chain {
		c, err := ctx509.ParseCertificate(d)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = c
	}
	return out
}

// TestRoundTrip submits chains with certificate-transparency-go's client,
// verifies the SCTs with ctutil, the checkpoint with formats/note's RFC 6962
// verifier, the tiles with Tessera's client, and reads everything back
// through the RFC 6962 read API.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	p := newPKI(t)
	l := openLog(t, initLog(t, p))
	defer l.Close()
	srv := serve(t, l)
	c := logClient(t, l, srv.URL)

	far := time.Now().Add(90 * 24 * time.Hour)
	type sub struct {
		name             string
		chain            [][]byte
		precert          bool
		wantIssuerKeyFor int // index in chain of the final issuer (precerts)
	}
	subs := []sub{
		{name: "x509", chain: p.leaf(t, "a.example", false, false, far)},
		{name: "x509 with root", chain: append(p.leaf(t, "b.example", false, false, far), p.root.Raw)},
		{name: "precert", chain: p.leaf(t, "c.example", true, false, far), precert: true, wantIssuerKeyFor: 1},
		{name: "precert via signing cert", chain: p.leaf(t, "d.example", true, true, far), precert: true, wantIssuerKeyFor: 2},
	}
	var leafHashes [][32]byte
	for i, s := range subs {
		t.Run(s.name, func(t *testing.T) {
			var sct *ct.SignedCertificateTimestamp
			var err error
			if s.precert {
				sct, err = c.AddPreChain(ctx, asn1Chain(s.chain))
			} else {
				sct, err = c.AddChain(ctx, asn1Chain(s.chain))
			}
			if err != nil {
				t.Fatal(err)
			}
			// ctutil rebuilds the precert leaf itself, replacing a
			// precertificate signing certificate by its issuer.
			chain := ctChain(t, s.chain)
			if err := ctutil.VerifySCT(l.PublicKey(), chain, sct, false); err != nil {
				t.Fatalf("ctutil.VerifySCT: %v", err)
			}
			idx, err := ctwire.LeafIndex(sct.Extensions)
			if err != nil || idx != uint64(i) {
				t.Fatalf("leaf_index %d, %v; want %d", idx, err, i)
			}
			leafHashes = append(leafHashes, sctLeafHash(t, chain, sct))
		})
	}
	if len(leafHashes) != len(subs) {
		t.FailNow()
	}
	n := uint64(len(subs))

	// The checkpoint, with formats/note's verifier built from the key.
	v, err := f_note.NewRFC6962Verifier(l.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	resp := get(t, srv.URL+"/checkpoint", http.StatusOK)
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=5") {
		t.Errorf("checkpoint Cache-Control %q", cc)
	}
	cpRaw, _ := io.ReadAll(resp.Body)
	cp, _, _, err := f_log.ParseCheckpoint(cpRaw, testOrigin, v)
	if err != nil {
		t.Fatalf("checkpoint: %v\n%s", err, cpRaw)
	}
	if cp.Size != n {
		t.Fatalf("checkpoint size %d, want %d", cp.Size, n)
	}

	// Tiles with Tessera's client over HTTP: inclusion of every leaf.
	u, _ := url.Parse(srv.URL + "/")
	hf, err := client.NewHTTPFetcher(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := client.NewProofBuilder(ctx, n, hf.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range leafHashes {
		ip, err := pb.InclusionProof(ctx, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), n, h[:], ip, cp.Hash); err != nil {
			t.Errorf("inclusion of entry %d: %v", i, err)
		}
	}
	resp = get(t, srv.URL+fmt.Sprintf("/tile/0/000.p/%d", n), http.StatusOK)
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
		t.Errorf("tile Cache-Control %q", cc)
	}

	// The data tile parses, and names issuers the log serves.
	resp = get(t, srv.URL+fmt.Sprintf("/tile/data/000.p/%d", n), http.StatusOK)
	b, _ := io.ReadAll(resp.Body)
	es, err := ctwire.ParseDataTile(b)
	if err != nil || len(es) != int(n) {
		t.Fatalf("data tile: %d entries, %v", len(es), err)
	}
	for i, e := range es {
		if h, err := e.LeafHash(); err != nil || h != leafHashes[i] {
			t.Errorf("data tile entry %d does not hash to the SCT's leaf", i)
		}
		for _, fp := range e.ChainFingerprints {
			resp := get(t, srv.URL+fmt.Sprintf("/issuer/%x", fp), http.StatusOK)
			der, _ := io.ReadAll(resp.Body)
			if sha256.Sum256(der) != fp {
				t.Errorf("issuer %x: wrong bytes", fp[:4])
			}
		}
	}
	if !es[3].Precert || es[3].IssuerKeyHash != sha256.Sum256(p.inter.RawSubjectPublicKeyInfo) {
		t.Errorf("precert via signing cert: issuer key hash is not the intermediate's")
	}

	// RFC 6962 read API through ct-go's client (which verifies the STH).
	sth, err := c.GetSTH(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sth.TreeSize != n || !bytes.Equal(sth.SHA256RootHash[:], cp.Hash) {
		t.Fatalf("STH %d %x, checkpoint %d %x", sth.TreeSize, sth.SHA256RootHash, cp.Size, cp.Hash)
	}
	cons, err := c.GetSTHConsistency(ctx, 2, n)
	if err != nil {
		t.Fatal(err)
	}
	pb2, _ := client.NewProofBuilder(ctx, 2, hf.ReadTile)
	r2, _ := rootAt(ctx, hf.ReadTile, 2)
	_ = pb2
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, 2, n, cons, r2[:], cp.Hash); err != nil {
		t.Errorf("get-sth-consistency: %v", err)
	}
	for i, h := range leafHashes {
		pr, err := c.GetProofByHash(ctx, h[:], n)
		if err != nil {
			t.Fatal(err)
		}
		if pr.LeafIndex != int64(i) {
			t.Errorf("get-proof-by-hash: index %d, want %d", pr.LeafIndex, i)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), n, h[:], pr.AuditPath, cp.Hash); err != nil {
			t.Errorf("get-proof-by-hash %d: %v", i, err)
		}
	}
	raw, err := c.GetRawEntries(ctx, 0, int64(n)-1)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.Entries) != int(n) {
		t.Fatalf("get-entries: %d entries", len(raw.Entries))
	}
	for i := range raw.Entries {
		rle, err := ct.RawLogEntryFromLeaf(int64(i), &raw.Entries[i])
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if leafHash(raw.Entries[i].LeafInput) != leafHashes[i] {
			t.Errorf("get-entries %d: leaf does not hash to the SCT's", i)
		}
		if _, err := rle.ToLogEntry(); err != nil {
			t.Errorf("entry %d does not parse with ct-go: %v", i, err)
		}
	}
	roots, err := c.GetAcceptedRoots(ctx)
	if err != nil || len(roots) != 1 || !bytes.Equal(roots[0].Data, p.root.Raw) {
		t.Errorf("get-roots: %d roots, %v", len(roots), err)
	}

	// A duplicate gets its original entry back, and nothing is added.
	sct, err := c.AddChain(ctx, asn1Chain(subs[0].chain))
	if err != nil {
		t.Fatal(err)
	}
	if idx, _ := ctwire.LeafIndex(sct.Extensions); idx != 0 {
		t.Errorf("duplicate got leaf_index %d, want 0", idx)
	}
	if err := ctutil.VerifySCT(l.PublicKey(), ctChain(t, subs[0].chain), sct, false); err != nil {
		t.Errorf("duplicate's SCT: %v", err)
	}
	if sctLeafHash(t, ctChain(t, subs[0].chain), sct) != leafHashes[0] {
		t.Errorf("duplicate's SCT is not for the original entry")
	}
}

// sctLeafHash is the leaf hash of the entry an SCT promises, as a
// static-ct-api client computes it: ctutil.LeafHash leaves the SCT's
// extensions (the leaf_index) out of the leaf, as RFC 6962 logs had none.
func sctLeafHash(t testing.TB, chain []*ctx509.Certificate, sct *ct.SignedCertificateTimestamp) [32]byte {
	t.Helper()
	typ := ct.X509LogEntryType
	if chain[0].IsPrecertificate() {
		typ = ct.PrecertLogEntryType
	}
	leaf, err := ct.MerkleTreeLeafFromChain(chain, typ, sct.Timestamp)
	if err != nil {
		t.Fatal(err)
	}
	leaf.TimestampedEntry.Extensions = sct.Extensions
	h, err := ct.LeafHashForLeaf(leaf)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(t testing.TB, u string, want int) *http.Response {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s, want %d", u, resp.StatusCode, b, want)
	}
	return resp
}

func size(t testing.TB, l *Log) uint64 {
	t.Helper()
	cp, _, err := l.latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cp.Size
}

// TestBadInput sends what a log must refuse; each gets an error body and
// nothing is stored.
func TestBadInput(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	l := openLog(t, initLog(t, p))
	defer l.Close()
	srv := serve(t, l)
	far := time.Now().Add(90 * 24 * time.Hour)
	b64 := func(chain [][]byte) string {
		var s []string
		for _, c := range chain {
			s = append(s, `"`+base64.StdEncoding.EncodeToString(c)+`"`)
		}
		return `{"chain":[` + strings.Join(s, ",") + `]}`
	}
	good := p.leaf(t, "good.example", false, false, far)
	pre := p.leaf(t, "pre.example", true, false, far)
	expired := p.leaf(t, "old.example", false, false, time.Now().Add(-time.Minute))
	_ = expired
	for _, c := range []struct {
		name, path, body string
		want             int
	}{
		{"junk", "add-chain", "junk", 400},
		{"empty object", "add-chain", "{}", 400},
		{"not base64", "add-chain", `{"chain":["!!"]}`, 400},
		{"truncated JSON", "add-chain", b64(good)[:40], 400},
		{"truncated certificate", "add-chain", b64([][]byte{good[0][:100]}), 400},
		{"huge", "add-chain", `{"chain":["` + strings.Repeat("A", MaxAddChainBytes) + `"]}`, 413},
		{"too many certificates", "add-chain", b64(append(good, good[1], good[1], good[1], good[1], good[1], good[1], good[1], good[1], good[1])), 400},
		{"wrong root", "add-chain", b64(other.leaf(t, "x.example", false, false, far)), 400},
		{"no intermediate", "add-chain", b64(good[:1]), 400},
		{"precert to add-chain", "add-chain", b64(pre), 400},
		{"cert to add-pre-chain", "add-pre-chain", b64(good), 400},
		{"trailing data", "add-chain", b64(good) + "{}", 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/ct/v1/"+c.path, "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Message string `json:"error_message"`
			}
			if resp.StatusCode != c.want {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d %s, want %d", resp.StatusCode, b, c.want)
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Message == "" {
				t.Errorf("no RFC 6962 error body: %v", err)
			}
		})
	}
	for _, path := range []string{
		"/tile/0/../checkpoint", "/tile/0/%2e%2e/x", "/tile/0/000/../../../log.key", "/tile/0/0", "/tile/0/x000/000",
		"/tile/64/000", "/tile/0/000.p/0", "/tile/0/000.p/256", "/tile/data/001", "/tile/0/001", "/issuer/../log.key",
		"/issuer/" + strings.Repeat("A", 64), "/issuer/" + strings.Repeat("0", 64), "//checkpoint", "/log.key", "/tile/0/-01",
	} {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.URL.Opaque = path // send the path as written, not cleaned
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 && resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 400 or 404", path, resp.StatusCode)
		}
	}
	if n := size(t, l); n != 0 {
		t.Fatalf("the log holds %d entries after bad input", n)
	}

	// The policy: an expired leaf, and one outside the NotAfter window.
	for _, c := range []struct {
		name   string
		policy Policy
		chain  [][]byte
	}{
		{"expired", Policy{RejectExpired: true}, expired},
		{"before window", Policy{NotAfterStart: far.Add(time.Hour)}, good},
		{"after window", Policy{NotAfterLimit: far.Add(-time.Hour)}, good},
		{"EKU", Policy{ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}, good},
	} {
		l.policy = c.policy
		_, err := l.AddChain(context.Background(), c.chain, false)
		var rej *RejectedError
		if !errors.As(err, &rej) {
			t.Errorf("%s: %v, want a RejectedError", c.name, err)
		}
	}
	l.policy = Policy{}
	if _, err := l.AddChain(context.Background(), expired, false); err != nil {
		t.Errorf("an expired leaf, by default: %v (logs accept them)", err)
	}
}

// TestRestartAndRollback: a reopened log keeps its entries; a storage
// that lost entries or was replaced is refused at Open.
func TestRestartAndRollback(t *testing.T) {
	ctx := context.Background()
	p := newPKI(t)
	dir := initLog(t, p)
	far := time.Now().Add(90 * 24 * time.Hour)
	l := openLog(t, dir)
	for i := range 3 {
		if _, err := l.AddChain(ctx, p.leaf(t, fmt.Sprintf("%d.example", i), false, false, far), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	backup := t.TempDir()
	copyDir(t, filepath.Join(dir, TilesDir), backup)

	l = openLog(t, dir)
	if n := size(t, l); n != 3 {
		t.Fatalf("after restart: %d entries, want 3", n)
	}
	if _, err := l.AddChain(ctx, p.leaf(t, "more.example", false, false, far), false); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, dir string)
	}{
		{"deleted storage", func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, TilesDir)) }},
		{"rolled back storage", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, TilesDir))
			copyDir(t, backup, filepath.Join(dir, TilesDir))
		}},
		{"deleted state", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, StateFile)) }},
		{"key readable by others", func(t *testing.T, dir string) { os.Chmod(filepath.Join(dir, KeyFile), 0o644) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "log")
			copyDir(t, dir, d)
			c.break_(t, d)
			l, err := Open(ctx, d, Options{CheckpointInterval: 100 * time.Millisecond})
			if err == nil {
				l.Close()
				t.Fatal("Open accepted it")
			}
			t.Log(err)
			if c.name != "deleted state" && c.name != "key readable by others" && !errors.Is(err, ErrBehind) {
				t.Errorf("error does not wrap ErrBehind: %v", err)
			}
		})
	}
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSignerRefusesRollback: the checkpoint signer itself never signs a
// tree that does not extend the last one.
func TestSignerRefusesRollback(t *testing.T) {
	p := newPKI(t)
	l := openLog(t, initLog(t, p))
	defer l.Close()
	if _, err := l.AddChain(context.Background(), p.leaf(t, "a.example", false, false, time.Now().Add(time.Hour*24)), false); err != nil {
		t.Fatal(err)
	}
	empty := rfc6962.DefaultHasher.EmptyRoot()
	for _, c := range []f_log.Checkpoint{
		{Origin: testOrigin, Size: 0, Hash: empty},
		{Origin: testOrigin, Size: 1, Hash: empty},
		{Origin: testOrigin, Size: 2, Hash: empty},
		{Origin: "other.example/log", Size: 1, Hash: empty},
	} {
		if _, err := l.signer.Sign(c.Marshal()); err == nil {
			t.Errorf("signed %d %x of origin %s", c.Size, c.Hash[:4], c.Origin)
		}
	}
}

// TestShortNoteSignature: a checkpoint whose signature is a bare 8-byte
// timestamp is refused; formats/note's own RFC 6962 verifier panics on it.
func TestShortNoteSignature(t *testing.T) {
	p := newPKI(t)
	l := openLog(t, initLog(t, p))
	defer l.Close()
	for _, n := range []int{0, 7, 8, 9, 11} {
		sig := append(binary.BigEndian.AppendUint32(nil, l.Verifier().KeyHash()), make([]byte, n)...)
		msg := testOrigin + "\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n\u2014 " + testOrigin + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
		if _, _, _, err := f_log.ParseCheckpoint([]byte(msg), testOrigin, l.Verifier()); err == nil {
			t.Errorf("a %d-byte signature verified", n)
		}
	}
}

// TestMySQL runs the log on Tessera's MySQL storage in a throwaway MariaDB:
// submissions read back through the HTTP API, a restart keeps the tree,
// and a database that lost it (another, empty database under the same log
// directory) is refused.
func TestMySQL(t *testing.T) {
	ctx := context.Background()
	db := mysqltest.Start(t)
	p := newPKI(t)
	dir := initLog(t, p)
	o := Options{MySQLDSN: db.DSN, BatchMaxAge: 10 * time.Millisecond}
	l, err := Open(ctx, dir, o)
	if err != nil {
		t.Fatal(err)
	}
	far := time.Now().Add(90 * 24 * time.Hour)
	chain := p.leaf(t, "mysql.example", false, false, far)
	for range 2 { // the second is a duplicate
		if _, err := l.AddChain(ctx, chain, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AddChain(ctx, p.leaf(t, "pre.mysql.example", true, true, far), true); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, l)
	c := logClient(t, l, srv.URL)
	raw, err := c.GetRawEntries(ctx, 0, 10)
	if err != nil || len(raw.Entries) != 2 {
		t.Fatalf("get-entries: %v, %v", raw, err)
	}
	resp := get(t, srv.URL+"/tile/data/000.p/2", http.StatusOK)
	b, _ := io.ReadAll(resp.Body)
	es, err := ctwire.ParseDataTile(b)
	if err != nil || len(es) != 2 {
		t.Fatalf("data tile: %d entries, %v", len(es), err)
	}
	get(t, srv.URL+fmt.Sprintf("/issuer/%x", es[1].ChainFingerprints[0]), http.StatusOK)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = Open(ctx, dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if n := size(t, l); n != 2 {
		t.Errorf("after restart: %d entries, want 2", n)
	}
	l.Close()

	o.MySQLDSN = db.NewDatabase(t)
	if l, err := Open(ctx, dir, o); err == nil || !errors.Is(err, ErrBehind) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("an empty database under a log that signed 2 entries: %v", err)
	} else {
		t.Log(err)
	}
}
