package prover_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/pkie/pkie/checkpoint"
	"github.com/pkie/pkie/internal/feed"
	"github.com/pkie/pkie/internal/pkies/treeproof"
	. "github.com/pkie/pkie/internal/prover"
	"github.com/pkie/pkie/sortedtree"
)

// benchKeys is the tree size: PKIE_BENCH_KEYS, default the PEC paper's 53,164
// revoked serials (run with 2129920 for the PEC paper's CT log).
func benchKeys(b *testing.B) int {
	if s := os.Getenv("PKIE_BENCH_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("PKIE_BENCH_KEYS=%q", s)
		}
		return n
	}
	return 53164
}

// sliceFeed is a TTP feed over keys held in memory, signed by a real key,
// so the benchmark measures the prover and not the TTP's storage.
type sliceFeed struct {
	mu   sync.Mutex
	keys [][32]byte
	cp   []byte
}

func (f *sliceFeed) LatestCheckpoint(context.Context) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cp, nil
}

func (f *sliceFeed) Keys(_ context.Context, start uint64, n int) ([][32]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if start >= uint64(len(f.keys)) {
		return nil, nil
	}
	return f.keys[start:min(uint64(len(f.keys)), start+uint64(n))], nil
}

func randomKeys(n int) [][32]byte {
	ks := make([][32]byte, n)
	buf := make([]byte, 32*n)
	rand.Read(buf)
	for i := range ks {
		copy(ks[i][:], buf[32*i:])
	}
	return ks
}

type benchTTP struct {
	feed   *sliceFeed
	signer note.Signer
	v      note.Verifier
	vkey   string
	url    string
}

func (t *benchTTP) sign(b testing.TB) {
	f := t.feed
	now := time.Now()
	lmsg, err := checkpoint.Sign(checkpoint.Checkpoint{Origin: t.v.Name(), Size: uint64(len(f.keys)), Root: sortedtree.ListRoot(f.keys), Time: now}, t.signer)
	if err != nil {
		b.Fatal(err)
	}
	tree := sortedtree.Build(append([][32]byte(nil), f.keys...))
	h := checkpoint.Head{Origin: checkpoint.HeadOrigin(t.v.Name()), Size: tree.Size(), Root: tree.Root(), Time: now}
	if err := h.BindLog(lmsg, t.v); err != nil {
		b.Fatal(err)
	}
	hs, err := checkpoint.HeadSigner(t.signer, t.v)
	if err != nil {
		b.Fatal(err)
	}
	msg, err := checkpoint.SignHead(h, hs)
	if err != nil {
		b.Fatal(err)
	}
	f.mu.Lock()
	f.cp = msg
	f.mu.Unlock()
}

func startBenchTTP(b *testing.B, n int) *benchTTP {
	skey, vkey, err := checkpoint.GenerateKey("bench/revocation")
	if err != nil {
		b.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	v, _ := checkpoint.NewVerifier(vkey)
	t := &benchTTP{feed: &sliceFeed{keys: randomKeys(n)}, signer: signer, v: v, vkey: vkey}
	t.sign(b)
	t.url = serve(b, http.StripPrefix("/v1/sorted", feed.Handler(t.feed)))
	return t
}

func serve(b testing.TB, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// BenchmarkSync is a prover's first sync over loopback HTTP: checkpoint,
// every key, rebuild, root check.
func BenchmarkSync(b *testing.B) {
	n := benchKeys(b)
	ttp := startBenchTTP(b, n)
	b.ResetTimer()
	for b.Loop() {
		p, _ := New(Config{PKIE: Revocation, Verifier: ttp.v, Feed: &feed.Client{Base: ttp.url + "/v1/sorted"}})
		if _, err := p.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "keys")
}

// BenchmarkSyncIncremental is a sync after the TTP published 1,000 new keys.
func BenchmarkSyncIncremental(b *testing.B) {
	n := benchKeys(b)
	ttp := startBenchTTP(b, n)
	p, _ := New(Config{PKIE: Revocation, Verifier: ttp.v, Feed: &feed.Client{Base: ttp.url + "/v1/sorted"}})
	if _, err := p.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		ttp.feed.mu.Lock()
		ttp.feed.keys = append(ttp.feed.keys, randomKeys(1000)...)
		ttp.feed.mu.Unlock()
		ttp.sign(b)
		b.StartTimer()
		if res, err := p.Sync(context.Background()); err != nil || res.NewKeys != 1000 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkProofRoundTrip is what a client pays per certificate: GET the
// proof from a prover over loopback HTTP, parse it, verify the checkpoint
// signature, freshness and proof. Absent keys (the common revocation case).
// BenchmarkTrivialGet and BenchmarkVerifyOnly are its ceilings.
func BenchmarkProofRoundTrip(b *testing.B) {
	c, ttp, keys := proverFor(b)
	pin := treeproof.Pin{Verifier: ttp.v, MaxAge: time.Hour}
	ctx := context.Background()
	var i uint64
	var respBytes int
	for b.Loop() {
		k := keys[i%uint64(len(keys))]
		i++
		r, err := c.Revocation(ctx, k)
		if err != nil {
			b.Fatal(err)
		}
		if res, err := treeproof.VerifyRevocation(k, r, pin, time.Now()); err != nil || res.Revoked {
			b.Fatal(res, err)
		}
		if respBytes == 0 {
			j, _ := json.Marshal(r)
			respBytes = len(j)
		}
	}
	b.ReportMetric(float64(respBytes), "response-bytes")
}

func proverFor(b *testing.B) (*treeproof.Client, *benchTTP, [][32]byte) {
	ttp := startBenchTTP(b, benchKeys(b))
	p, _ := New(Config{PKIE: Revocation, Verifier: ttp.v, Feed: &feed.Client{Base: ttp.url + "/v1/sorted"}})
	if _, err := p.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	url := serve(b, Handler(ServerOptions{Revocation: p}))
	keys := randomKeys(4096) // absent from the tree with overwhelming probability
	return &treeproof.Client{Base: url}, ttp, keys
}

// BenchmarkVerifyOnly verifies a fetched response with a head never seen
// before: the head's and its bound log checkpoint's Ed25519 signatures,
// freshness, proof.
func BenchmarkVerifyOnly(b *testing.B) {
	c, ttp, keys := proverFor(b)
	pin := treeproof.Pin{Verifier: ttp.v, MaxAge: time.Hour}
	r, err := c.Revocation(context.Background(), keys[0])
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := treeproof.VerifyRevocation(keys[0], r, pin, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(r.Proof)), "proof-bytes")
}

// BenchmarkVerifyKnownHead is BenchmarkVerifyOnly with a treeproof.Pin from
// treeproof.ParsePin, as clients build it: the head, verified once (two Ed25519
// verifications: the head and the log checkpoint it is bound to), is kept,
// so each later response under it costs its freshness check and the proof.
func BenchmarkVerifyKnownHead(b *testing.B) {
	c, ttp, keys := proverFor(b)
	pin, err := treeproof.ParsePin(ttp.vkey, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	r, err := c.Revocation(context.Background(), keys[0])
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := treeproof.VerifyRevocation(keys[0], r, pin, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrivialGet is the ceiling for BenchmarkProofRoundTrip: a GET of
// a fixed 400-byte JSON body from a loopback server with the same client.
func BenchmarkTrivialGet(b *testing.B) {
	body := make([]byte, 400)
	url := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	hc := &http.Client{Timeout: 5 * time.Second}
	for b.Loop() {
		resp, err := hc.Get(url + "/x")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
