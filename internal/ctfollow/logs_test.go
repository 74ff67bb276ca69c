package ctfollow

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	ctx509 "github.com/google/certificate-transparency-go/x509"
	"github.com/pkie/pkie/internal/ctwire"
	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"
	"github.com/transparency-dev/tessera/ctonly"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/note"
)

// The test logs are real: Tessera's CT appender (ctonly entries, the
// static-ct-api layout) on its POSIX storage, signing checkpoints with
// RFC 6962 note signatures under an ECDSA P-256 key as static-ct-api logs
// do, served by http.FileServer-like handler over loopback.

// rfc6962Signer signs checkpoints as static-ct-api says: an RFC 6962
// TreeHeadSignature in a note signature (the form formats/note's
// RFC6962 verifier checks).
type rfc6962Signer struct {
	name string
	hash uint32
	key  *ecdsa.PrivateKey
	now  func() time.Time
}

func (s *rfc6962Signer) Name() string    { return s.name }
func (s *rfc6962Signer) KeyHash() uint32 { return s.hash }
func (s *rfc6962Signer) Sign(msg []byte) ([]byte, error) {
	lines := strings.Split(string(msg), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return nil, fmt.Errorf("checkpoint of %d lines", len(lines))
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil {
		return nil, err
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != 32 {
		return nil, fmt.Errorf("bad root")
	}
	ts := uint64(s.now().UnixMilli())
	ths := []byte{0, 1} // v1, tree_hash
	ths = binary.BigEndian.AppendUint64(ths, ts)
	ths = binary.BigEndian.AppendUint64(ths, size)
	ths = append(ths, root...)
	d := sha256.Sum256(ths)
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, d[:])
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint64(nil, ts)
	out = append(out, 4, 3) // sha256, ecdsa
	out = binary.BigEndian.AppendUint16(out, uint16(len(sig)))
	return append(out, sig...), nil
}

// logKey is a log's key with its verifier key string.
type logKey struct {
	origin string
	priv   *ecdsa.PrivateKey
	vkey   string
	signer *rfc6962Signer
}

func newLogKey(t testing.TB, origin string) *logKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := fnote.RFC6962VerifierString(origin, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	v, err := fnote.NewRFC6962Verifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return &logKey{origin: origin, priv: k, vkey: vkey, signer: &rfc6962Signer{name: v.Name(), hash: v.KeyHash(), key: k, now: time.Now}}
}

func (k *logKey) spkiBase64(t testing.TB) string {
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(der)
}

// testLog is a static-ct-api log on Tessera POSIX storage.
type testLog struct {
	t       testing.TB
	key     *logKey
	root    string
	add     func(context.Context, *ctonly.Entry) tessera.IndexFuture
	awaiter *tessera.PublicationAwaiter
	reader  tessera.LogReader
	// want are the keys a follower must derive, entry by entry.
	want [][][32]byte
}

func newTestLog(t testing.TB, key *logKey) *testLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root := t.TempDir()
	driver, err := posix.New(ctx, posix.Config{Path: root})
	if err != nil {
		t.Fatal(err)
	}
	opts := tessera.NewAppendOptions().WithCTLayout().WithCheckpointSigner(key.signer).
		WithBatching(512, 50*time.Millisecond).WithCheckpointInterval(100 * time.Millisecond)
	a, shutdown, reader, err := tessera.NewAppender(ctx, driver, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = shutdown(sctx)
		cancel()
	})
	return &testLog{
		t: t, key: key, root: root, reader: reader,
		add:     tessera.NewCertificateTransparencyAppender(a),
		awaiter: tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, 20*time.Millisecond),
	}
}

// addEntries appends entries and waits until a checkpoint covers them.
func (l *testLog) addEntries(entries []*ctonly.Entry, keys [][][32]byte) {
	l.t.Helper()
	ctx := context.Background()
	futures := make([]tessera.IndexFuture, len(entries))
	for i, e := range entries {
		futures[i] = l.add(ctx, e)
	}
	for i, f := range futures {
		idx, _, err := l.awaiter.Await(ctx, f)
		if err != nil {
			l.t.Fatal(err)
		}
		if idx.Index != uint64(len(l.want)) {
			l.t.Fatalf("entry %d got index %d", len(l.want), idx.Index)
		}
		l.want = append(l.want, keys[i])
	}
}

func (l *testLog) checkpoint() []byte {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(l.root, "checkpoint"))
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

// wantKeys returns the keys file a follower must hold at size n.
func (l *testLog) wantKeys(n int) []byte {
	var b []byte
	for _, ks := range l.want[:n] {
		for _, k := range ks {
			b = append(b, k[:]...)
		}
	}
	return b
}

// issuer certificates, by fingerprint, for the issuer/ path and for the
// RFC 6962 front end's extra_data.
type certFactory struct {
	t       testing.TB
	ca      []byte
	caCert  *x509.Certificate
	caKey   *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey
	serial  int64
}

var (
	oidPoison = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}
	oidSCTs   = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
)

func newCertFactory(t testing.TB) *certFactory {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	nb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ctfollow test CA"},
		NotBefore: nb, NotAfter: nb.AddDate(2, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &certFactory{t: t, ca: der, caCert: c, caKey: caKey, leafKey: leafKey, serial: 100}
}

func (f *certFactory) leaf(serial int64, ext *pkix.Extension) []byte {
	nb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprintf("h%d.example", serial)},
		DNSNames: []string{fmt.Sprintf("h%d.example", serial)}, NotBefore: nb, NotAfter: nb.AddDate(0, 3, 0),
	}
	if ext != nil {
		tmpl.ExtraExtensions = []pkix.Extension{*ext}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.caCert, &f.leafKey.PublicKey, f.caKey)
	if err != nil {
		f.t.Fatal(err)
	}
	return der
}

// entries returns n entries cycling through the three kinds a log holds:
// a plain certificate, a precertificate, and a final certificate with an
// embedded SCT list logged as an x509_entry; and the keys each must yield.
// finals collects chains (final certificate, CA) of the precertificates,
// for ChainKey.
func (f *certFactory) entries(n int) ([]*ctonly.Entry, [][][32]byte, [][][]byte) {
	var es []*ctonly.Entry
	var keys [][][32]byte
	var finals [][][]byte
	caFP := sha256.Sum256(f.ca)
	ikh := sha256.Sum256(f.caCert.RawSubjectPublicKeyInfo)
	null, _ := asn1.Marshal(asn1.NullRawValue)
	sctList, _ := asn1.Marshal([]byte{0, 3, 0, 1, 0xaa})
	for i := 0; i < n; i++ {
		f.serial++
		ts := uint64(time.Now().UnixMilli())
		switch f.serial % 3 {
		case 0:
			der := f.leaf(f.serial, nil)
			es = append(es, &ctonly.Entry{Timestamp: ts, Certificate: der, FingerprintsChain: [][32]byte{caFP}})
			keys = append(keys, [][32]byte{ctwire.CertKey(der)})
		case 1:
			pre := f.leaf(f.serial, &pkix.Extension{Id: oidPoison, Critical: true, Value: null})
			pc, err := ctx509.ParseCertificate(pre)
			if err != nil {
				f.t.Fatal(err)
			}
			tbs, err := ctx509.BuildPrecertTBS(pc.RawTBSCertificate, nil)
			if err != nil {
				f.t.Fatal(err)
			}
			es = append(es, &ctonly.Entry{Timestamp: ts, IsPrecert: true, Certificate: tbs, Precertificate: pre,
				IssuerKeyHash: ikh[:], FingerprintsChain: [][32]byte{caFP}})
			keys = append(keys, [][32]byte{ctwire.PrecertKey(ikh, tbs)})
			finals = append(finals, [][]byte{f.leaf(f.serial, &pkix.Extension{Id: oidSCTs, Value: sctList}), f.ca})
		case 2:
			der := f.leaf(f.serial, &pkix.Extension{Id: oidSCTs, Value: sctList})
			k, err := ctwire.ChainKey([][]byte{der, f.ca})
			if err != nil {
				f.t.Fatal(err)
			}
			es = append(es, &ctonly.Entry{Timestamp: ts, Certificate: der, FingerprintsChain: [][32]byte{caFP}})
			keys = append(keys, [][32]byte{ctwire.CertKey(der), k})
		}
	}
	return es, keys, finals
}

// logServer serves a test log over loopback: the static-ct-api read
// path from the log's directory, issuers, and an RFC 6962 front end
// (get-sth, get-sth-consistency, get-entries) built over the same tiles.
// tamper, if set, may rewrite any response.
type logServer struct {
	*httptest.Server
	mu      sync.Mutex
	log     *testLog
	issuers map[string][]byte // hex fingerprint → DER
	tamper  func(path string, b []byte) []byte
	hits    map[string]int
}

func newLogServer(t testing.TB, l *testLog, issuers ...[]byte) *logServer {
	s := &logServer{log: l, issuers: map[string][]byte{}, hits: map[string]int{}}
	for _, der := range issuers {
		fp := sha256.Sum256(der)
		s.issuers[hex.EncodeToString(fp[:])] = der
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *logServer) setTamper(f func(path string, b []byte) []byte) {
	s.mu.Lock()
	s.tamper = f
	s.mu.Unlock()
}

func (s *logServer) setLog(l *testLog) {
	s.mu.Lock()
	s.log = l
	s.mu.Unlock()
}

func (s *logServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	l, tamper := s.log, s.tamper
	s.hits[r.URL.Path]++
	s.mu.Unlock()
	p := strings.TrimPrefix(r.URL.Path, "/")
	var b []byte
	var err error
	switch {
	case strings.HasPrefix(p, "ct/v1/"):
		b, err = s.rfc6962(r.Context(), l, strings.TrimPrefix(p, "ct/v1/"), r)
	case strings.HasPrefix(p, "issuer/"):
		var ok bool
		if b, ok = s.issuers[strings.TrimPrefix(p, "issuer/")]; !ok {
			err = os.ErrNotExist
		}
	case strings.Contains(p, ".."):
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	default:
		b, err = os.ReadFile(filepath.Join(l.root, filepath.FromSlash(p)))
	}
	if tamper != nil {
		b = tamper(p, b)
		if b != nil {
			err = nil
		}
	}
	if string(b) == unavailableMarker {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	if string(b) == hugeMarker {
		w.Header().Set("Content-Length", strconv.Itoa(1<<30))
		w.WriteHeader(http.StatusOK)
		return
	}
	if err != nil {
		if os.IsNotExist(err) {
			http.NotFound(w, r)
			return
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Write(b)
}

// rfc6962 answers RFC 6962 §4 read requests from the log's tiles.
func (s *logServer) rfc6962(ctx context.Context, l *testLog, method string, r *http.Request) ([]byte, error) {
	cp, _, n, err := log.ParseCheckpoint(l.checkpoint(), l.key.origin, mustVerifier(l.key.vkey))
	if err != nil {
		return nil, err
	}
	f := client.FileFetcher{Root: l.root}
	tile := func(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
		return f.ReadTile(ctx, level, index, p)
	}
	q := r.URL.Query()
	num := func(k string) uint64 { v, _ := strconv.ParseUint(q.Get(k), 10, 64); return v }
	switch method {
	case "get-sth":
		sig, _ := base64.StdEncoding.DecodeString(n.Sigs[0].Base64)
		sig = sig[4:] // key hash
		return json.Marshal(map[string]any{
			"tree_size": cp.Size, "timestamp": binary.BigEndian.Uint64(sig[:8]),
			"sha256_root_hash": cp.Hash, "tree_head_signature": sig[8:],
		})
	case "get-sth-consistency":
		pb, err := client.NewProofBuilder(ctx, cp.Size, tile)
		if err != nil {
			return nil, err
		}
		p, err := pb.ConsistencyProof(ctx, num("first"), num("second"))
		if err != nil {
			return nil, err
		}
		return json.Marshal(ct.GetSTHConsistencyResponse{Consistency: p})
	case "get-entries":
		start, end := num("start"), min(num("end"), cp.Size-1, num("start")+99) // at most 100: followers must ask again
		var resp ct.GetEntriesResponse
		for i := start; i <= end; {
			b, err := f.ReadEntryBundle(ctx, i/256, layout.PartialTileSize(0, i/256, cp.Size))
			if err != nil {
				b, err = os.ReadFile(filepath.Join(l.root, "tile/data", layout.NWithSuffix(0, i/256, layout.PartialTileSize(0, i/256, cp.Size))))
				if err != nil {
					return nil, err
				}
			}
			es, err := ctwire.ParseDataTile(b)
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				if e.Index < i || e.Index > end {
					continue
				}
				mtl, _ := e.MerkleTreeLeaf()
				var chain []byte
				for _, fp := range e.ChainFingerprints {
					der := s.issuers[hex.EncodeToString(fp[:])]
					chain = append(chain, byte(len(der)>>16), byte(len(der)>>8), byte(len(der)))
					chain = append(chain, der...)
				}
				var extra []byte
				if e.Precert {
					extra = append(extra, byte(len(e.Precertificate)>>16), byte(len(e.Precertificate)>>8), byte(len(e.Precertificate)))
					extra = append(extra, e.Precertificate...)
				}
				extra = append(extra, byte(len(chain)>>16), byte(len(chain)>>8), byte(len(chain)))
				extra = append(extra, chain...)
				resp.Entries = append(resp.Entries, ct.LeafEntry{LeafInput: mtl, ExtraData: extra})
				i = e.Index + 1
			}
		}
		return json.Marshal(resp)
	}
	return nil, os.ErrNotExist
}

// hugeMarker, returned by a tamper function, makes the server announce a
// 1 GiB body.
const hugeMarker = "HUGE"

// unavailableMarker, returned by a tamper function, makes the server
// answer 503.
const unavailableMarker = "UNAVAILABLE"

func mustVerifier(vkey string) note.Verifier {
	v, err := fnote.NewRFC6962Verifier(vkey)
	if err != nil {
		panic(err)
	}
	return v
}

// fileDataTiles reads data tiles (tile/data/...) from a log's directory.
func fileDataTiles(root string) client.EntryBundleFetcherFunc {
	return func(ctx context.Context, index uint64, p uint8) ([]byte, error) {
		return partialOrFull(ctx, p, func(_ context.Context, p uint8) ([]byte, error) {
			return os.ReadFile(filepath.Join(root, "tile/data", layout.NWithSuffix(0, index, p)))
		})
	}
}
