package scanbench

import (
	"bytes"
	"context"
	"testing"

	"github.com/pkie/pkie/internal/roots"
	"github.com/pkie/pkie/internal/testbed"
)

func TestGenerateLoads(t *testing.T) {
	var file, pemBuf bytes.Buffer
	g, err := Generate(&file, &pemBuf, GenConfig{Records: 3000, Chains: 60, Roots: 5, CAAlg: testbed.ECDSAP256, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g.Bytes != int64(file.Len()) || g.Records != 3000 {
		t.Errorf("result %+v, file %d bytes", g, file.Len())
	}
	store, err := roots.ParsePEM("gen", pemBuf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	d, err := roots.Load(context.Background(), []roots.Input{{Name: "gen", R: &file}}, roots.LoadOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	rep := d.Analyze(0.8)
	if rep.Load.Records != 3000 || rep.Load.Malformed != 0 || rep.Load.DistinctChain > 60 || rep.Load.Verifications+rep.Load.LeafChecks != int64(rep.Load.DistinctChain) {
		t.Errorf("load %+v", rep.Load)
	}
	if rep.SitesAnswered < 2000 || rep.SitesValid == 0 || rep.SitesValid > rep.SitesAnswered {
		t.Errorf("answered %d valid %d", rep.SitesAnswered, rep.SitesValid)
	}
}

func TestThroughputRuns(t *testing.T) {
	r, err := Throughput(context.Background(), ThroughputConfig{Sites: 100, Concurrency: 4, Listeners: 1, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Scan) != 1 || len(r.Ceiling) != 1 || r.ScanMean <= 0 || r.CeilingMean <= 0 || r.Ratio <= 0 {
		t.Errorf("result %+v", r)
	}
}

func TestPeakRSS(t *testing.T) {
	if PeakRSS() <= 0 {
		t.Skip("no /proc/self/status here")
	}
}

// BenchmarkScanVsRawTLS reports, per round over the same synthetic web,
// scanner and raw-handshake rates and their ratio (target ≥ 0.7).
func BenchmarkScanVsRawTLS(b *testing.B) {
	var scanSum, ceilSum float64
	for b.Loop() {
		r, err := Throughput(context.Background(), ThroughputConfig{Sites: 1000, Rounds: 1})
		if err != nil {
			b.Fatal(err)
		}
		scanSum += r.ScanMean
		ceilSum += r.CeilingMean
	}
	b.ReportMetric(scanSum/float64(b.N), "scan-handshakes/s")
	b.ReportMetric(ceilSum/float64(b.N), "raw-handshakes/s")
	b.ReportMetric(scanSum/ceilSum, "ratio")
}
