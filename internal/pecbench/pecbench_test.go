package pecbench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkie/pkie"
)

// TestRunThroughput runs the throughput row at toy scale and checks that
// every figure is filled in and consistent. (The client-cost row's tree
// part is proofbench's, tested there and through the CLI.)
func TestRunThroughput(t *testing.T) {
	var progress bytes.Buffer
	r, err := Run(context.Background(), Config{
		Rows: []string{RowThroughput}, Progress: &progress,
		Sessions: 4, Window: 2, Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond, Rounds: 2,
		LogFill: 20, RevokedFill: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	tp := r.Throughput
	if tp == nil || tp.Cloud == nil || tp.Ceiling == nil || tp.CloudSCTs == nil || tp.CeilingSCTs == nil || len(tp.Runs) != 8 {
		t.Fatalf("throughput row %+v", tp)
	}
	// ABBA: ceiling, cloud, cloud, ceiling; then the same with SCTs.
	for i, want := range []string{"echo ceiling", "cloud", "cloud", "echo ceiling", "echo, SCTs", "cloud, SCTs", "cloud, SCTs", "echo, SCTs"} {
		if tp.Runs[i].Name != want {
			t.Errorf("run %d is %q, want %q", i, tp.Runs[i].Name, want)
		}
	}
	if tp.ChainBytes < PaperFlightBytes || tp.ChainCerts != 3 {
		t.Errorf("chain of %d bytes, %d certificates", tp.ChainBytes, tp.ChainCerts)
	}
	// The site plus the fill in the log; the fill revoked.
	if tp.TreeSizes != [2]uint64{21, 100} {
		t.Errorf("tree sizes %v", tp.TreeSizes)
	}
	for _, x := range []*Throughput{tp.Cloud, tp.Ceiling, tp.CloudSCTs, tp.CeilingSCTs} {
		if x.Proved == 0 || x.NotOK != 0 || x.SessionErrors != 0 || x.P50ms <= 0 || x.CPUSeconds <= 0 || x.PerCPUSecond <= 0 {
			t.Errorf("%s: %+v", x.Name, x)
		}
	}
	// The echo answers with the cloud's own proofs: the same bytes back.
	if tp.Cloud.ProofBytes != tp.Ceiling.ProofBytes || tp.Cloud.SubmitBytes != tp.Ceiling.SubmitBytes {
		t.Errorf("cloud and ceiling exchanged different frames: %d/%d vs %d/%d bytes",
			tp.Cloud.SubmitBytes, tp.Cloud.ProofBytes, tp.Ceiling.SubmitBytes, tp.Ceiling.ProofBytes)
	}
	// With SCTs the ct proof is their inclusion evidence, one per SCT,
	// bigger than a sorted-tree proof; the echo sends the same bytes.
	if tp.CloudSCTs.ProofBytes != tp.CeilingSCTs.ProofBytes || tp.CloudSCTs.ProofBytes <= tp.Cloud.ProofBytes ||
		tp.SCTs != SCTLogs || tp.SCTChainBytes < PaperFlightBytes-sctListBytes || tp.RatioSCTs <= 0 {
		t.Errorf("SCT runs: %d proof bytes (echo %d, without SCTs %d), %d SCTs, %d-byte chain, ratio %v",
			tp.CloudSCTs.ProofBytes, tp.CeilingSCTs.ProofBytes, tp.Cloud.ProofBytes, tp.SCTs, tp.SCTChainBytes, tp.RatioSCTs)
	}
	if tp.Ratio <= 0 || tp.RatioPerCPU <= 0 || tp.PaperPerSecond != 1900 {
		t.Errorf("ratio %v, paper %v", tp.Ratio, tp.PaperPerSecond)
	}
	var text bytes.Buffer
	r.WriteText(&text)
	for _, want := range []string{"echo ceiling", "cloud / ceiling", "paper: 1900/s", "with SCTs: cloud / its echo ceiling"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if !strings.Contains(progress.String(), "throughput: cloud") {
		t.Errorf("progress: %s", progress.String())
	}
}

// TestRunNetworkRows runs the latency, failover, loss and blocked rows at
// toy scale. The timing checks are lower bounds the proxies and the
// protocols guarantee (a delay proxy never delivers early, a silent cloud
// is declared dead only after its missed pings), never upper bounds.
func TestRunNetworkRows(t *testing.T) {
	const srtt, crtt = 20 * time.Millisecond, 10 * time.Millisecond
	r, err := Run(context.Background(), Config{
		Rows:       []string{RowLatency, RowFailover, RowLoss, RowBlocked},
		ServerRTTs: []time.Duration{srtt}, CloudRTTs: []time.Duration{crtt}, Handshakes: 2,
		Trials: 1, Loss: 0.2, LossSamples: 10, LogFill: 5, RevokedFill: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	l := r.Latency
	if l == nil || len(l.Points) != 1 {
		t.Fatalf("latency %+v", l)
	}
	p := l.Points[0]
	if p.Without.N != 2 || p.With.N != 2 || p.Without.P50ms < 20 || p.With.P50ms < 30 || p.Expected != 0.5 {
		t.Errorf("latency point %+v", p)
	}
	f := r.Failover
	if f == nil || f.Stopped.N != 1 || f.Silent.N != 1 {
		t.Fatalf("failover %+v", f)
	}
	// Declared dead after 3 pings 100 ms apart went unanswered: at
	// least two intervals after the path went silent.
	if f.Silent.P50ms < 200 {
		t.Errorf("silent primary replaced after %.1f ms, before its pings could be missed", f.Silent.P50ms)
	}
	lo := r.Loss
	if lo == nil || lo.Clean.N != 10 || lo.Lossy.N+lo.Failed != 10 || lo.Dropped == 0 || lo.Datagrams <= lo.Dropped {
		t.Fatalf("loss %+v", lo)
	}
	if lo.Clean.P50ms < 10 {
		t.Errorf("delivery over a 10 ms path in %.1f ms", lo.Clean.P50ms)
	}
	b := r.Blocked
	if b == nil || len(b.Transports) != 1 || b.Transports[0] != "tcp" || b.Register.N != 1 || b.OpenRegister.N != 1 {
		t.Fatalf("blocked %+v", b)
	}
	// TCP starts only when QUIC has not registered by the fallback delay.
	if b.Register.P50ms < b.FallbackDelayMS {
		t.Errorf("registered over TCP after %.1f ms, before the %.0f ms fallback delay", b.Register.P50ms, b.FallbackDelayMS)
	}
	files, err := r.SavePlots(filepath.Join(t.TempDir(), "pec"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("plots %v", files)
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}
}

// TestVerifierCost times the client's verifiers on the cloud's proofs:
// both must pass, and opening two signed heads per connection (four
// Ed25519 verifications) must cost more than checking two cached ones.
func TestVerifierCost(t *testing.T) {
	ctx := context.Background()
	w, err := newWorld(ctx, 20, 100, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	c, err := w.startCloud(ctx, "pec.test", benchCloudConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	proofs, err := cloudProofs(ctx, w, c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifierCost(ctx, w, proofs, 100)
	if err != nil {
		t.Fatal(err)
	}
	if v.Samples != 100 || v.Depths != [2]int{5, 7} {
		t.Errorf("%+v", v)
	}
	if !(v.WarmUsP50 > 0 && v.ColdUsP50 > v.WarmUsP50) {
		t.Errorf("warm %v µs, cold %v µs", v.WarmUsP50, v.ColdUsP50)
	}
	// A proof for another certificate does not pass: the bench refuses
	// to time verifications that fail.
	other := map[pkie.ID]*pkie.Proof{pkie.CT: proofs[pkie.Revocation], pkie.Revocation: proofs[pkie.CT]}
	if _, err := verifierCost(ctx, w, other, 10); err == nil {
		t.Error("swapped proofs were timed as passing")
	}
}
