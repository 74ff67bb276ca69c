package ctlog

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

func FuzzParseAddChainRequest(f *testing.F) {
	f.Add([]byte(`{"chain":["AAAA","AQID"]}`))
	f.Add([]byte(`{"chain":[]}`))
	f.Add([]byte(`{"chain":["!!"]}`))
	f.Add([]byte(`{}{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		chain, err := ParseAddChainRequest(b)
		if err == nil && (len(chain) == 0 || len(chain) > MaxChainCerts) {
			t.Fatalf("accepted a chain of %d certificates", len(chain))
		}
	})
}

func FuzzParseTilePath(f *testing.F) {
	for _, s := range []string{"tile/0/000", "tile/1/x001/234.p/5", "tile/data/000.p/255", "tile/0/../x", "tile/data/x000/000", "tile/63/999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := ParseTilePath(s)
		if err != nil {
			return
		}
		// What parses is canonical: it formats back to itself.
		want := fmt.Sprintf("tile/%d/", tp.Level)
		if tp.Data {
			want = "tile/data/"
		}
		if !bytes.HasPrefix([]byte(s), []byte(want)) || bytes.Contains([]byte(s), []byte("..")) {
			t.Fatalf("accepted %q as %+v", s, tp)
		}
	})
}

// BenchmarkAddChain measures add-chain through Log.AddChain on POSIX
// storage, with as many concurrent submitters as -cpu × 64, each waiting
// for its SCT (integration and a checkpoint) as real submitters do.
func BenchmarkAddChain(b *testing.B) {
	p := newPKI(b)
	l := openLog(b, initLog(b, p))
	defer l.Close()
	far := time.Now().Add(90 * 24 * time.Hour)
	chains := make([][][]byte, b.N)
	for i := range chains {
		chains[i] = p.leaf(b, fmt.Sprintf("%d.bench.example", i), false, false, far)
	}
	var next int64
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			<-mu
			i := next
			next++
			mu <- struct{}{}
			if _, err := l.AddChain(context.Background(), chains[i], false); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
