package scan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkie/pkie/probe"
)

// genList produces an n-site list on the fly, never held in memory.
type genList struct{ i, n int }

func (g *genList) Read(p []byte) (int, error) {
	if g.i >= g.n {
		return 0, io.EOF
	}
	k := 0
	for g.i < g.n && len(p)-k > 40 {
		g.i++
		k += copy(p[k:], fmt.Sprintf("%d,site%d.example\n", g.i, g.i))
	}
	return k, nil
}

// BenchmarkScanMillionSitesMemory streams a million-site list through the
// scanner (every lookup fails at once, so the pipeline, not the network,
// is measured) and reports the peak heap: it must not grow with the list.
func BenchmarkScanMillionSitesMemory(b *testing.B) {
	fail := errors.New("no network in this benchmark")
	for b.Loop() {
		var peak atomic.Uint64
		stop := make(chan struct{})
		go func() {
			var ms runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}()
		sum, err := Run(context.Background(), NewListReader(&genList{n: 1_000_000}), io.Discard, Options{
			Probe: probe.Options{Lookup: func(context.Context, string, int) ([]netip.AddrPort, error) {
				return nil, fail
			}},
			Retries: -1,
		})
		close(stop)
		if err != nil || sum.Failed != 1_000_000 {
			b.Fatalf("%+v %v", sum, err)
		}
		b.ReportMetric(float64(peak.Load())/1e6, "peak-heap-MB")
		b.ReportMetric(float64(sum.Scanned)/sum.Elapsed.Seconds(), "sites/s")
	}
}
