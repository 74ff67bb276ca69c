package obcbench

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunTiny runs every row at a tiny scale, the terminator in this
// process, and checks that each case ran with its own client key: the
// terminator records the algorithm of the certificates it saw.
func TestRunTiny(t *testing.T) {
	cfg := Config{Rows: []string{RowGen, RowTerminator}, Algs: []string{"ecdsa-p256", "rsa-1024"}, GenSamples: 2,
		Cases: []string{"none", "ecdsa-p256", "rsa-1024", "ed25519"}, Rate: 40, Duration: 700 * time.Millisecond, Warmup: 300 * time.Millisecond,
		Clients: 3, CeilingDuration: 300 * time.Millisecond}
	var progress bytes.Buffer
	cfg.Progress = &progress
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Gen) != 2 || r.Gen[0].Alg != "ecdsa-p256" || r.Gen[1].Alg != "rsa-1024" {
		t.Fatalf("gen rows %+v", r.Gen)
	}
	for _, g := range r.Gen {
		if g.KeyMs.N != 2 || g.CertMs.N != 2 || g.TotalMs.P50 < g.KeyMs.Min || g.PaperMs == 0 {
			t.Errorf("%s: %+v", g.Alg, g)
		}
	}
	tr := r.Terminator
	if tr == nil || tr.Separate || tr.Ceiling.PerSecond <= 0 || len(tr.Cases) != 4 {
		t.Fatalf("terminator row %+v", tr)
	}
	for i, c := range tr.Cases {
		if c.Case != cfg.Cases[i] {
			t.Errorf("case %d is %s, want %s", i, c.Case, cfg.Cases[i])
		}
		// The observable: every request the terminator served came with
		// a certificate of the case's algorithm (or none), and nothing
		// else.
		n := c.SeenResumed + c.SeenFresh
		if len(c.Seen) != 1 || c.Seen[c.Case] != n || n == 0 {
			t.Errorf("%s: terminator saw keys %v over %d requests", c.Case, c.Seen, n)
		}
		if c.Errors != 0 || c.Skipped != 0 || c.BackendFails != 0 {
			t.Errorf("%s: %d errors, %d skipped, %d backend failures", c.Case, c.Errors, c.Skipped, c.BackendFails)
		}
		// The mix resumes most sessions and starts some afresh.
		if c.SeenResumed == 0 || c.SeenFresh == 0 {
			t.Errorf("%s: %d resumed, %d fresh", c.Case, c.SeenResumed, c.SeenFresh)
		}
		sum := 0
		for _, h := range c.Histogram {
			sum += h
		}
		if sum != n || c.OverheadMs.N != n || len(c.Histogram) != len(HistogramEdgesMs)+1 {
			t.Errorf("%s: histogram %v sums to %d, %d latencies, %d requests", c.Case, c.Histogram, sum, c.OverheadMs.N, n)
		}
		// Waits for the client are part of the wall time, never more.
		if c.WallMs.P50 < c.OverheadMs.P50 || c.RSSMB <= 0 || c.CPUCores <= 0 || c.MemSamples == 0 {
			t.Errorf("%s: wall p50 %v, added p50 %v, RSS %v, CPU %v", c.Case, c.WallMs.P50, c.OverheadMs.P50, c.RSSMB, c.CPUCores)
		}
		if (c.PaperMemGB > 0) != (c.Case != "ed25519") {
			t.Errorf("%s: paper memory %v", c.Case, c.PaperMemGB)
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"gen":`, `"terminator":`, `"seen_keys":`, `"handshakes_per_second":`, `"load_avg_start":`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	var text bytes.Buffer
	r.WriteText(&text)
	for _, want := range []string{"Figure 8", "rsa-1024", "ceiling, same run", "paper: memory"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	files, err := r.SavePlots(filepath.Join(t.TempDir(), "obc"))
	if err != nil {
		t.Fatal(err)
	}
	// gen, memory, cpu and one histogram per case, each SVG and PNG.
	if len(files) != 2*(3+len(cfg.Cases)) {
		t.Errorf("plots %v", files)
	}
	if !strings.Contains(progress.String(), "terminator: rsa-1024") {
		t.Errorf("progress %q", progress.String())
	}
}

func TestConfigCheck(t *testing.T) {
	for _, c := range []Config{
		{Rows: []string{"nope"}},
		{Algs: []string{"sect163k1"}},
		{Cases: []string{"dsa"}},
		{Resumed: 1},
		{Rate: -1},
	} {
		if err := c.Check(); err == nil {
			t.Errorf("%+v passed", c)
		}
	}
}

func TestHistogram(t *testing.T) {
	got := histogram([]float64{0.1, 0.25, 0.9, 1, 150}, HistogramEdgesMs)
	want := []int{1, 1, 1, 1, 0, 0, 0, 0, 0, 1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("histogram %v, want %v", got, want)
		}
	}
}
