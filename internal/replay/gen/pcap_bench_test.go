package gen

import (
	"io"
	"testing"
	"time"

	"github.com/pkie/pkie/internal/replay"
)

// BenchmarkPCAP writes 20,000 flows of the paper's model (a little over
// 18 s of its hour) as pcap, ClientHellos made as they are needed.
func BenchmarkPCAP(b *testing.B) {
	o := DefaultOptions()
	o.Flows, o.Duration = 20000, time.Hour*20000/PaperFlows
	g, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	flows := drain(b, g)
	for b.Loop() {
		w, err := NewWriter(replay.FormatPCAP, io.Discard, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range flows {
			if err := w.Write(f); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(flows))/b.Elapsed().Seconds(), "flows/s")
}
