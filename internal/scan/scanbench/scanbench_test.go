package scanbench

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/pkie/pkie/internal/roots"
	"github.com/pkie/pkie/internal/testbed"
)

func TestGenerateLoads(t *testing.T) {
	tests := []struct {
		name string
		cfg  GenConfig
		// maxChains bounds the distinct chains the loader sees; with
		// Distinct every answered record has its own.
		maxChains int
	}{
		{"pool", GenConfig{Records: 3000, Chains: 60, Roots: 5, CAAlgs: []testbed.KeyAlg{testbed.ECDSAP256}, Seed: 1}, 60},
		{"distinct mixed issuers", GenConfig{Records: 600, Distinct: true, Roots: 4, CAAlgs: []testbed.KeyAlg{testbed.ECDSAP256, testbed.ECDSAP384}, Seed: 2}, 600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var file, pemBuf bytes.Buffer
			g, err := Generate(&file, &pemBuf, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if g.Bytes != int64(file.Len()) || g.Records != tt.cfg.Records {
				t.Errorf("result %+v, file %d bytes", g, file.Len())
			}
			var byAlg int
			for alg, n := range g.LeavesByIssuerAlg {
				if n == 0 || !slices.Contains(tt.cfg.CAAlgs, alg) {
					t.Errorf("leaves by issuer %v: %d", alg, n)
				}
				byAlg += n
			}
			if byAlg != g.Chains {
				t.Errorf("leaves by issuer sum to %d, chains %d", byAlg, g.Chains)
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
			ld := rep.Load
			if ld.Records != tt.cfg.Records || ld.Malformed != 0 || ld.DistinctChain > tt.maxChains || ld.Verifications+ld.LeafChecks != int64(ld.DistinctChain) {
				t.Errorf("load %+v", ld)
			}
			if tt.cfg.Distinct && ld.DistinctChain != rep.SitesAnswered {
				t.Errorf("distinct: %d chains for %d answered sites", ld.DistinctChain, rep.SitesAnswered)
			}
			if rep.SitesAnswered < tt.cfg.Records*8/10 || rep.SitesValid == 0 || rep.SitesValid > rep.SitesAnswered {
				t.Errorf("answered %d valid %d", rep.SitesAnswered, rep.SitesValid)
			}
		})
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
